"""Goodness of fit: does the model explain the data, or only determine its parameters?

A least-squares fit always returns parameters; whether they mean anything depends on whether
the model, at those parameters, explains the data to within their noise. Standard errors are
conditional on that: at a wrong local optimum, or with a model that lacks an effect the data
show, they are small and wrong. Every fit result therefore carries a `GoodnessOfFit`:

- **noise given** (per channel standard deviations `sigma`): the residuals in units of the
  noise, `r = (data - fit) / sigma`, of a right model are `n` draws of N(0, 1) less the `p`
  directions the fit absorbed, so `chi2 = sum r^2` follows a chi-square distribution with
  `n - p` degrees of freedom; the fit explains the data unless `chi2` is improbably large
  (p-value below `ALPHA`). A chi-square far below its degrees of freedom means the noise was
  overstated, which is reported but is not a failure of the model.
- **noise estimated** from the residuals: `chi2 = n - p` by construction and says nothing.
  Instead each channel's residuals must be white: a model that misses a motion, or a fit at a
  wrong local optimum, leaves a smooth residual whose neighbouring samples are positively
  correlated, and measurement noise does not. The test is on the lag-one autocorrelation
  `rho_1` of the residuals in the order of the samples (the Durbin-Watson form: under white
  noise `z = (rho_1 + 1/k) sqrt(k)` is close to N(0, 1) for `k` samples; one-sided, the `z`
  of several load cases combined as `sum z / sqrt(m)`). The estimated noise must also be
  plausible
  (below a per-channel maximum: `noise_max`, by default generous tracking precisions, 1 mm for
  a position and 1 degree for an angle).

The verdict's false-alarm rate on right models is at most `ALPHA` = 1%: the chi-square test at
that level, or the whiteness tests of all channels together at that level (Bonferroni). Both
are checked by simulation in tests/test_goodness.py (the whiteness test is conservative: about
0.2-0.8% for 50-1000 samples per channel; a Ljung-Box test over 20 lags, tried first, raised
3% false alarms at 301 samples: its chi-square approximation is too light in the tail there).
Reduced chi-square, AIC and BIC are reported as lmfit reports them (`n ln(chi2 / n) + 2 p` and
`n ln(chi2 / n) + ln(n) p`). With the noise estimated, `chi2` weighted by that estimate is about
`n` whatever the fit, so there the raw residuals' sum of squares takes its place, per channel
(`sum_c n_c ln(RSS_c / n_c)`, lmfit's unweighted form for one channel): lower is better between
models fitted to the same data.
"""

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ._noise_model import ChannelNoise, measured_runs, model_autocovariances, whitened
from ._verdict import GoodnessOfFit
from ._sliding import autocorrelation_sums, moving_average, sliding_dot

ALPHA = 0.01
"""False-alarm rate of the verdict on a right model."""

DEFAULT_NOISE_MAX = {"m": 1e-3, "rad": math.radians(1.0)}
"""Largest plausible noise of an estimated channel, by the channel's unit (SI): 1 mm of
position, 1 degree of angle, generous for optical tracking of vertebrae."""

def chi_square_sf(statistic: float, dof: float) -> float:
    """`P(X >= statistic)` for `X` chi-square distributed with `dof` degrees of freedom: the
    regularized upper incomplete gamma function `Q(dof/2, statistic/2)`. NaN for `dof <= 0`
    or a NaN statistic."""
    if not dof > 0 or math.isnan(statistic):
        return float("nan")
    return upper_incomplete_gamma(0.5 * dof, 0.5 * max(statistic, 0.0))


def upper_incomplete_gamma(a: float, x: float) -> float:
    """The regularized upper incomplete gamma function `Q(a, x) = Gamma(a, x) / Gamma(a)`
    (`a > 0`, `x >= 0`), in plain Python floats (a verdict in a new process then runs no
    compiled program): the power series of `P = 1 - Q` where `x < a + 1`, the continued
    fraction of `Q` (modified Lentz) elsewhere (Abramowitz and Stegun 6.5.29 and 6.5.31).
    Against scipy's chi-square survival function: relative differences below 1e-13 for `a`
    up to 50, 1e-11 up to 5e3 and 4e-10 up to 5e5 (the prefactor `x^a e^-x / Gamma(a)` loses
    digits as `a` grows), where `Q` is above the smallest float."""
    if x <= 0.0:
        return 1.0
    if math.isinf(x):
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        denominator = a
        while abs(term) > 1e-17 * abs(total):
            denominator += 1.0
            term *= x / denominator
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    fraction = d
    for i in range(1, 1_000_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        fraction *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return math.exp(log_front) * fraction


def _quiet_overflow(function):
    # Residuals that overflow are a verdict (infinite chi-square, not explained), not a
    # warning to print: numpy's overflow warnings would reach the user's terminal.
    @functools.wraps(function)
    def quiet(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore"):
            return function(*args, **kwargs)

    return quiet


@_quiet_overflow
def lag_one_z(series: np.ndarray) -> tuple[float, float]:
    """`(rho_1, z)` of a series `(k,)`: its lag-one autocorrelation (mean removed) and
    `z = (rho_1 + 1/k) sqrt(k)`, about N(0, 1) for white noise (Durbin-Watson form)."""
    x = np.asarray(series, dtype=float)
    x = x - x.mean()
    k = x.size
    power = float(x @ x)
    if k < 3 or power <= 0.0:
        return 0.0, 0.0
    rho = float(x[1:] @ x[:-1]) / power
    return rho, (rho + 1.0 / k) * math.sqrt(k)


def normal_sf(z: float) -> float:
    """`P(Z >= z)` for a standard normal `Z`."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


@_quiet_overflow
def assess_fit(
    residuals: Sequence[np.ndarray],
    channels: Sequence[str],
    n_parameters: int,
    *,
    noise_given: bool,
    sigma: Mapping[str, float],
    units: Mapping[str, str] | None = None,
    noise_max: Mapping[str, float] | None = None,
    ordered: bool = True,
    alpha: float = ALPHA,
    noise_models: Mapping[str, ChannelNoise] | None = None,
    ranges: Mapping[str, float] | None = None,
    max_misfit: Mapping[str, float] | None = None,
    misfit_residuals: Sequence[np.ndarray] | None = None,
    magnitudes: Mapping[str, float] | None = None,
) -> GoodnessOfFit:
    """The goodness of fit of noise-weighted residuals (module docstring).

    **Arguments:**
    - `residuals`: one array `(k, c)` per load case (or test), `(data - fit) / sigma`, the
      samples in their order (time, or displacement); `NaN` entries are values not measured
      (left out: `n_data` counts the others; a channel's whiteness is tested on each run of
      measured samples between them, its smooth misfit on its measured samples in order),
      infinite ones count as a failed fit.
    - `channels`: the `c` channel names; `n_parameters`: the number of directions the fit
      absorbed (the rank of its sensitivity matrix).
    - `noise_given`: whether `sigma` (channel -> SI standard deviation) was given or estimated.
    - `units`: channel -> unit (`"m"`, `"rad"`, ...), for the default `noise_max`.
    - `noise_max`: channel -> largest plausible estimated noise (SI); defaults by unit from
      `DEFAULT_NOISE_MAX`; channels without either are not checked.
    - `ordered`: whether the samples' order means something (time series, sorted
      displacements); without it no whiteness test is made.
    - `alpha`: the false-alarm rate of the verdict on a right model.
    - `noise_models`: channel -> the fitted `ChannelNoise` of a noise model (the residuals are
      then weighted by its `marginal` standard deviation, `sigma`); whiteness is tested on its
      innovations.
    - `ranges`: channel -> the data's range (SI); given, the verdict has three levels
      (`level`: `explains`, `describes`, `does_not_describe`) and a smooth misfit per channel
      (`smooth_misfit`), judged against `max_misfit` (channel -> a fraction of the range;
      `MAX_MISFIT` by default); `misfit_residuals` (raw, SI, one `(k, c)` per load case, as
      `residuals`): the residuals whose smooth part is measured, where they are not the fit's
      own (those of the ordinary least-squares estimate of a fit under a noise model, which
      an autoregression near a unit root lets drift from a law that fits only approximately).
    - `magnitudes`: channel -> the data's largest magnitude (SI). Given, a fit with the noise
      estimated whose raw residuals' root-mean-square is within `EXACT_FIT` of it in every
      channel is exact: the data carry no noise, and the rounding left in the residuals is
      not judged as a misfit (`explains`, with a note).
    """
    channels = tuple(channels)
    blocks = [np.asarray(r, dtype=float).reshape(-1, len(channels)) for r in residuals]
    stacked = np.concatenate(blocks) if blocks else np.zeros((0, len(channels)))
    measured = ~np.isnan(stacked)
    n_data = int(np.count_nonzero(measured))
    dof = max(n_data - int(n_parameters), 1)
    finite = bool(np.all(np.isfinite(stacked[measured])))
    chi_square = float(np.sum(stacked[measured] ** 2)) if finite else math.inf
    reduced = chi_square / dof
    if noise_given or not finite or sigma is None:
        log_term = n_data * math.log(max(chi_square, 1e-300) / max(n_data, 1))
    else:
        # With the noise estimated the weighted chi-square is about n by construction, so
        # lmfit's `n ln(chi2 / n)` would not tell models apart: the raw residuals' sum of
        # squares instead (lmfit's unweighted form), per channel (the profile likelihood of
        # one noise level per channel; one channel: `n ln(RSS / n)`).
        raw = stacked * np.array([float(sigma[channel]) for channel in channels])
        columns = [column[~np.isnan(column)] for column in raw.T]
        log_term = sum(column.size * math.log(max(float(np.sum(column**2)), 1e-300)
                                              / column.size) for column in columns if column.size)
    aic = log_term + 2 * n_parameters
    bic = log_term + math.log(max(n_data, 1)) * n_parameters
    reasons, advice = [], []
    p_value = chi_square_sf(chi_square, dof) if noise_given and finite else None

    whiteness = None
    if ordered and finite:
        whiteness = {}
        for c, channel in enumerate(channels):
            # (each run of values between gaps whitened and tested on its own)
            series = [run for block in blocks for run in measured_runs(block[:, c])]
            fitted = (noise_models or {}).get(channel)
            if fitted is not None and fitted.order:  # (the innovations, in their own sd)
                series = [whitened(column * fitted.marginal, fitted.coefficients)
                          / fitted.innovation for column in series]
            cases = [lag_one_z(column) for column in series if column.size >= 3]
            if not cases:
                continue
            z = sum(z for _, z in cases) / math.sqrt(len(cases))
            whiteness[channel] = {"lag_one_autocorrelation": float(np.mean([r for r, _ in cases])),
                                  "z": z, "p_value": normal_sf(z)}

    noise_check = {}
    if not noise_given:
        units = units or {}
        for channel in channels:
            maximum = (noise_max or {}).get(channel, DEFAULT_NOISE_MAX.get(units.get(channel)))
            if maximum is not None:
                estimated = float(sigma[channel])
                noise_check[channel] = {"estimated": estimated, "maximum": float(maximum),
                                        "plausible": estimated <= maximum}

    if not finite:
        reasons.append("the fitted model could not be simulated at the returned values")
    elif noise_given:
        if p_value < alpha:
            reasons.append(
                f"the residuals are {math.sqrt(reduced):.3g} times the noise you gave (chi-square "
                f"{chi_square:.4g} for {dof} degrees of freedom, p = {p_value:.2g} < {alpha:g})")
            advice.append("if the noise you gave is right, the model misses an effect the data "
                          "show, or the fit stopped at a local optimum: look at residuals.png, "
                          "try other starts, or a model with the missing element (damping, a "
                          "load)")
            advice.append("if the noise is larger than you gave, fit again with the right "
                          "noise (or without --noise, to estimate it)")
        elif reduced < 0.5 and chi_square_sf(chi_square, dof) > 1 - alpha:
            advice.append(f"the residuals are only {math.sqrt(reduced):.2g} times the noise you "
                          "gave: the noise is overstated, so the standard errors are too large")
    else:
        if whiteness is not None:
            threshold = alpha / max(len(channels), 1)
            correlated = [channel for channel, entry in whiteness.items()
                          if entry["p_value"] < threshold]
            if correlated:
                what = "the innovations of " if noise_models else "the residuals of "
                reasons.append(
                    what + ", ".join(
                        f"{c} (lag-one autocorrelation "
                        f"{whiteness[c]['lag_one_autocorrelation']:.2f}, p = "
                        f"{whiteness[c]['p_value']:.2g})" for c in correlated)
                    + f" are not white (p < {threshold:.2g}): " + (
                        "the noise model does not describe the noise in full (a filtered "
                        "spectrum is not a low-order autoregression), or they follow a motion "
                        "the model does not make" if any(
                            getattr((noise_models or {}).get(c), "order", 0) for c in correlated)
                        else "they follow a motion the model does not make"))
        implausible = [channel for channel, entry in noise_check.items()
                       if not entry["plausible"]]
        if implausible:
            reasons.append(
                "the estimated noise is implausibly large for "
                + ", ".join(f"{c} ({noise_check[c]['estimated'] / noise_check[c]['maximum']:.3g}"
                            " times the plausible maximum)" for c in implausible))
        if reasons:
            advice.append("the fit probably stopped at a local optimum, or the model misses an "
                          "effect the data show: try other starts, or a model with the missing "
                          "element; give the measurement noise (--noise) if you know it")
            advice.append("if the measurement noise itself is correlated (filtered data), give "
                          "the noise and judge by the chi-square instead")
    untestable = not noise_given and finite and whiteness is None and not noise_check
    level = None if untestable else "explains" if not reasons else "does_not_describe"
    misfit = {}
    if ranges is not None and finite:
        # Three levels: a smooth misfit within the tolerance leaves the values usable (the
        # reasons found above then only say the model does not explain the data in full).
        for c, channel in enumerate(channels):
            scale = float(sigma[channel]) if sigma is not None else 1.0
            series = ([block[:, c] * scale for block in blocks]
                      if misfit_residuals is None else
                      [np.asarray(block, float).reshape(-1, len(channels))[:, c]
                       for block in misfit_residuals])
            series = [column[~np.isnan(column)] for column in series]
            fitted = (noise_models or {}).get(channel) or ChannelNoise(0, (), scale, scale)
            found = smooth_misfit(series, fitted.null)
            if found is None:
                continue
            span = max(float(ranges[channel]), 1e-300)
            fraction = float((max_misfit or {}).get(channel, MAX_MISFIT))
            # (too large: beyond the tolerance and beyond what white noise would leave there;
            # the smooth part of pure noise, a few tenths of its sd, can exceed the tolerance
            # of a channel that moves little, e.g. a marker across a small motion. Not the
            # noise model's p-value: an autoregression near a unit root takes up a misfit.)
            misfit[channel] = found | {
                "fraction_of_range": found["rms"] / span, "max_fraction": fraction,
                "in_noise_sd": found["rms"] / max(fitted.marginal, 1e-300),
                "too_large": bool(found["rms"] > fraction * span
                                  and found["p_white"] < alpha / max(2 * len(channels), 1))}
        large = [c for c, entry in misfit.items() if entry["too_large"]]
        smooth = [c for c, entry in misfit.items()
                  if entry["p_value"] < alpha / max(2 * len(channels), 1)]
        implausible = [c for c, entry in noise_check.items() if not entry["plausible"]]
        if large:
            reasons.insert(0, "a systematic misfit larger than the tolerance: " + ", ".join(
                f"{c} (RMS {100 * misfit[c]['fraction_of_range']:.2g}% of the range it is "
                f"judged against > "
                f"{100 * misfit[c]['max_fraction']:.2g}%)" for c in large))
            advice[:] = ["the model misses a feature of the data (another phase of the law, a "
                         "damper, a load) or the fit stopped at a local optimum: look at the "
                         "residual figure, try other starts or a richer model; a lab may widen "
                         "the tolerance (--max-misfit) where such a misfit is acceptable"]
            level = "does_not_describe"
        elif implausible or (reasons and len(misfit) < len(channels)):
            level = "does_not_describe"  # (a misfit not measured cannot be within tolerance)
        elif reasons or smooth:
            if smooth:
                reasons.append("a smooth misfit remains beyond what the noise model explains: "
                               + ", ".join(f"{c} (p = {misfit[c]['p_value']:.2g})"
                                           for c in smooth))
            advice[:] = ["the values are usable, with the standard errors computed under the "
                         "noise model; the misfit shows on the residual figure (a richer model "
                         "may take it up)"]
            unmodelled = [c for c, entry in (whiteness or {}).items()
                          if entry["p_value"] < alpha / max(len(channels), 1)
                          and not getattr((noise_models or {}).get(c), "order", 0)]
            if unmodelled:
                advice.append(
                    f"the residuals of {', '.join(unmodelled)} are correlated and weighted as "
                    "white noise: their standard errors are too small; fit under a noise model "
                    "(auto, the default) or read stderr_robust")
            level = "describes"
        else:
            level = "explains"
    # (The whiteness test is one-sided: a missed motion correlates residuals positively. Negative
    # innovations' correlation means a noise model that whitens too much: errors too large.)
    over = [c for c, entry in (whiteness or {}).items() if getattr(
        (noise_models or {}).get(c), "order", 0) and normal_sf(-entry["z"]) < alpha / len(channels)]
    if over and finite:
        advice.append(f"the innovations of {', '.join(over)} are negatively correlated: the "
                      "noise model whitens more than the noise needs, so the standard errors "
                      "are too large (on the safe side); where its coefficients were given, "
                      "let the fit estimate them (auto); where estimated, a lower order (ar:P) "
                      "whitens less")
    if not finite:
        level = "does_not_describe"
    elif not noise_given and magnitudes is not None and sigma is not None:
        rms = [float(np.sqrt(np.nanmean((stacked[:, c] * float(sigma[channel])) ** 2)))
               for c, channel in enumerate(channels)]
        if all(value <= EXACT_FIT * max(float(magnitudes[channel]), 1e-300)
               for value, channel in zip(rms, channels)):
            reasons, level, misfit = [], "explains", {}  # (nothing to judge)
            advice = [f"an exact fit: the residuals are at the rounding level of the data (at "
                      f"most {EXACT_FIT:g} of its magnitude): the data carry no noise to judge "
                      "the model by, and the standard errors are those of that rounding"]
    return GoodnessOfFit(
        explains_data=None if level is None else level == "explains", noise_given=noise_given,
        n_data=n_data, n_parameters=int(n_parameters), dof=dof, chi_square=chi_square,
        reduced_chi_square=reduced, p_value=p_value, aic=aic, bic=bic, whiteness=whiteness,
        noise_check=noise_check, alpha=alpha, reasons=tuple(reasons), advice=tuple(advice),
        level=level, misfit=misfit,
        noise_model={channel: fitted.to_dict() | {"described": fitted.describe()}
                     for channel, fitted in (noise_models or {}).items()},
        units={channel: unit for channel, unit in (units or {}).items() if unit})


def unfitted_note(steps: int, values, start, cost: float, n_data: int, data, predictions
                  ) -> str | None:
    """The warning for a fit with its noise given that took no step because the start was
    already within the solver's statistical stop (`2 cost` below a hundredth of the data
    count: the noise given is far larger than the residuals), though the start does not fit
    the data exactly (some channel's raw residuals above 1e-6 of its largest value, in `data`
    and `predictions`, `(k, c)` per record); `None` otherwise. Its values are then the start's:
    nothing was fitted."""
    if steps or 2 * cost >= 1e-2 * max(n_data, 1) or not np.allclose(values, start, rtol=1e-9,
                                                                     atol=0.0):
        return None
    measured = np.concatenate([np.asarray(d, float) for d in data])
    raw = measured - np.concatenate([np.asarray(p, float) for p in predictions])
    rms = np.sqrt(np.nanmean(raw ** 2, axis=0))
    if np.all(rms <= 1e-6 * np.maximum(np.nanmax(np.abs(measured), axis=0), 1e-300)):
        return None  # (an exact start: nothing to fit)
    return (f"No step was taken: at the start the residuals are already only "
            f"{math.sqrt(2 * cost / max(n_data, 1)):.2g} times the noise given, within the "
            "solver's statistical stop (a small fraction of a standard error of that noise), so "
            "the values are the start's, not fitted. The noise given is far too large: give the "
            "measurement's own, or none to estimate it.")


EXACT_FIT = 1e-9
"""Raw residuals within this fraction of the data's magnitude are rounding, not noise: a fit
that leaves no more is exact (`assess_fit`, `magnitudes`)."""


MAX_MISFIT = 0.02
"""The default tolerance of a smooth misfit, as a fraction of the data's range: a two-phase law
fitted to tissue tests leaves about 1-1.5% of the load range, a missed phase 3% or more
(docs/goodness-of-fit.md)."""


def checked_max_misfit(value, what: str = "max_misfit") -> float:
    """A smooth-misfit tolerance: a positive finite fraction of a channel's range (0.02 for
    2%); `ValueError` naming `what` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what}={value!r}: expected a positive fraction of the range (0.02 "
                         "for 2%)")
    return float(value)


def misfit_exceeds(blocks: Sequence[np.ndarray], ranges: Sequence[float],
                   max_misfit: float) -> bool:
    """Whether the smooth misfit (`smooth_misfit`) of a white-weighted fit's raw residual
    `blocks` (`(k, c)` per record, SI) exceeds `max_misfit` of a channel's range (`ranges`
    `(c,)`) in some channel: the model then does not describe the data whatever the noise, and
    an autoregression fitted to such residuals would take the misfit up as noise (its refits,
    near a unit root, did not settle: measured on the pair fitted without its dampers)."""
    for c, span in enumerate(ranges):
        found = smooth_misfit([b[:, c][~np.isnan(b[:, c])] for b in blocks],  # (as the verdict)
                              ChannelNoise(0, (), 1.0, 1.0))
        if found is not None and found["rms"] > max_misfit * float(span):
            return True
    return False


def smoothing_width(length: int) -> int:
    """The width (samples, odd, at least 5) of the moving average `smooth_misfit` applies to a
    record of `length` samples: a 25th of the record."""
    width = max(5, int(round(length / 25)))
    return width + (1 - width % 2)


def smooth_misfit(series: Sequence[np.ndarray], noise: ChannelNoise) -> dict | None:
    """The smooth part of a channel's raw residuals `series` (one `(k,)` per record, in sample
    order) and whether the noise model `noise` accounts for it.

    Each record is smoothed by a centred moving average of `smoothing_width(k)` samples (the
    full windows only). Under the noise model the smoothed values have the autocovariances
    `c_l = (1/w^2) sum_|d|<w (w - |d|) gamma_(l + d)` of the model's `gamma`; their sum of
    squares `T` has mean `m c_0` and variance about `2 m sum_l c_l^2` over `m` smoothed
    values, and is compared with the scaled chi-square of those two moments (Satterthwaite).
    The misfit's size does not rest on the noise model, which near a unit root takes up a smooth
    misfit as noise: it is what `T` holds beyond the smoothed power of white noise of the
    residuals' rough part (the residuals less their smooth part, whose variance `v` gives
    `v / w`): `rms = sqrt(max(T / m - v / w, 0))`. Noise correlated over `L` samples adds about
    `sd sqrt(L / w)` to it, a small part of a load range for tester data. `p_white`: the
    chance of a smoothed power as large beside the rough part's were the residuals white
    noise (an F test of the two parts, `_white_excess_p`), which does not rest on the noise
    model either.

    **Returns:** `{"rms", "p_value", "width", "p_white"}`, or `None` when no record is long
    enough."""
    smoothed, widths, rough = [], [], []
    for s in series:
        s = np.asarray(s, dtype=float)
        width = smoothing_width(s.size)
        if s.size < 2 * width:
            continue
        smoothed.append(moving_average(s, width))
        widths.append(width)
        rough.append(s[width // 2: width // 2 + smoothed[-1].size] - smoothed[-1])
    if not smoothed:
        return None
    width = int(round(np.mean(widths)))
    reach = width + 200
    gamma = model_autocovariances(noise.coefficients, noise.innovation ** 2, 2 * reach)
    lags = np.arange(-(width - 1), width)
    taper = (width - np.abs(lags)) / width ** 2  # (c_l: the taper slid along gamma_|k|)
    c = sliding_dot(gamma[np.abs(np.arange(-(width - 1), reach + width - 1))], taper)
    m = sum(v.size for v in smoothed)
    statistic = float(sum(v @ v for v in smoothed))
    mean = m * c[0]
    variance = 2.0 * m * (c[0] ** 2 + 2.0 * float(np.sum(c[1:] ** 2)))
    scale, dof = variance / (2.0 * mean), 2.0 * mean ** 2 / variance
    white = float(sum(r @ r for r in rough)) / m / width
    return {"rms": math.sqrt(max(statistic / m - white, 0.0)),
            "p_value": chi_square_sf(statistic / scale, dof), "width": width,
            "p_white": _white_excess_p(statistic, float(sum(r @ r for r in rough)), m, width)}


def _white_excess_p(smooth: float, rough: float, m: int, width: int) -> float:
    # The chance, were the residuals white noise of unknown variance s^2, of a smoothed sum
    # of squares `smooth` as large beside the rough part's `rough` (both over `m` windows of
    # `width`). Each is a quadratic form in the noise whose two moments give a scaled
    # chi-square (Satterthwaite): the smoothed values are `b * e` with `b = 1/w` over the
    # window, the rough ones `a * e` with `a = e_h - b` (`h = w // 2`), autocovariances
    # `s^2 sum_j b_j b_(j+l)` and likewise for `a`. Their ratio over the expected ratio is
    # about F(d1, d2) (the two parts nearly independent: complementary filters), whose upper
    # tail Paulson's normal approximation gives. Estimating s^2 from the rough part, not from
    # all of the residuals, keeps a smooth misfit out of the reference level.
    if not rough > 0.0:
        return 1.0 if not smooth > 0.0 else 0.0
    b = np.full(width, 1.0 / width)
    a = -b.copy()
    a[width // 2] += 1.0

    def moments(f):
        gamma = autocorrelation_sums(f)
        return gamma[0], m * gamma[0] ** 2 / (gamma[0] ** 2 + 2.0 * float(gamma[1:] @ gamma[1:]))

    (g_smooth, d1), (g_rough, d2) = moments(b), moments(a)
    ratio = (smooth / g_smooth) / (rough / g_rough)  # (about 1 for white noise)
    c1, c2 = 2.0 / (9.0 * d1), 2.0 / (9.0 * d2)
    cube = ratio ** (1.0 / 3.0)
    z = ((1.0 - c2) * cube - (1.0 - c1)) / math.sqrt(c2 * cube ** 2 + c1)
    return 0.5 * math.erfc(z / math.sqrt(2.0))
