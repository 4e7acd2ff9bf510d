"""Noise models: what the measurement error of a channel looks like from sample to sample.

Lab signals are seldom white: a tester's load cell is filtered, motion-capture markers are
low-pass filtered, and neighbouring samples share much of their error. A fit that weights such
residuals as if they were independent finds the right optimum but reports standard errors that
are several times too small, and a whiteness test then rejects a right model. A noise model
says how the errors are correlated, so that the fit weights them by generalized least squares
and the errors and the verdict hold.

The models, per channel, of the errors `e_t` of one record in the order of its samples:

- `White()`: independent errors of one standard deviation.
- `AR(p)`: autoregressive of order `p`, `e_t = phi_1 e_(t-1) + ... + phi_p e_(t-p) + a_t`,
  the innovations `a_t` independent with standard deviation `s_a` (Box and Jenkins; Seber and
  Wild 1989, section 6.2). `AR()` (order `None`) chooses the order from 0 (white) to
  `max_order`: white where the Bayesian information criterion of the residuals prefers it, so
  a channel whose residuals are white stays white, else the Akaike criterion's order
  (`chosen_order`), and, where a fit's channels together show correlation that each alone
  may not (`correlated_together`), at least order 1: this is the default, `"auto"`.
- `AR(coefficients=phi)`: the autoregression given (for every channel, or `{channel: phi}`),
  for a lab that knows how its signals are filtered: its spectrum in autoregressive form. Only
  the innovations' standard deviation is estimated, and the verdict's whiteness test then
  checks the coefficients given as well as the model.

The coefficients are the Yule-Walker estimates from the residuals' autocovariances (biased
form, pooled over the records of a fit), solved by the Levinson-Durbin recursion, which gives
every order up to the bound at once and a stationary model always. The fit is then weighted by
the whitening filter `a_t = e_t - sum_k phi_k e_(t-k)` (`whitened`), the first `p` samples of
each record left out (Cochrane and Orcutt 1949; statsmodels' `GLSAR` does the same), and the
noise estimated again from the refitted residuals until it settles (iterated prewhitening:
`spineid.identify._common._noise.settle_noise`). The innovations' standard deviation is that of
the whitened residuals (statsmodels' `GLSAR` scale), unless the model's own (the one that gives
it the residuals' variance) exceeds it by more than `INCONSISTENT`: the autoregression then
does not describe the noise (a steep low-pass filter), and its own is kept (`noise_under`).
"""

import dataclasses
import math
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from scipy import signal

from ._failure import FAILED_RESIDUAL
from ._noise_kinds import AbstractNoiseModel, AR, as_noise_model, White
from ._shown import in_unit

INCONSISTENT = 1.5
"""An autoregression whose own innovation variance (the one that gives it the residuals'
variance) exceeds that of the residuals it whitens by more than this factor does not describe
the noise; `noise_under` then keeps its own (module docstring)."""


@dataclasses.dataclass(frozen=True)
class ChannelNoise:
    """The fitted noise of one channel: `order` (0 for white), `coefficients` (`phi_1..phi_p`),
    `innovation` (the standard deviation `s_a` of the innovations, the channel's unit, that the
    standard errors use), `marginal` (the standard deviation of the errors themselves) and
    `whitened` (that of the residuals whitened: `innovation` unless the autoregression does not
    describe the noise, `noise_under`; the verdict's smooth-misfit test uses it, so that a
    smooth misfit is not taken for noise; `None`: `innovation`)."""

    order: int
    coefficients: tuple[float, ...]
    innovation: float
    marginal: float
    whitened: float | None = None

    @property
    def null(self) -> "ChannelNoise":
        """The model the verdict tests a smooth misfit against: innovations of the whitened
        residuals' own standard deviation."""
        if self.whitened is None or self.whitened == self.innovation:
            return self
        return ChannelNoise(self.order, self.coefficients, self.whitened, self.whitened
                            * self.marginal / self.innovation)

    def floored(self, floor: float) -> "ChannelNoise":
        """The same model with every standard deviation at least `floor` (noise-free data
        would give 0)."""
        return dataclasses.replace(
            self, innovation=max(self.innovation, floor), marginal=max(self.marginal, floor),
            whitened=None if self.whitened is None else max(self.whitened, floor))

    def to_dict(self) -> dict:
        """JSON-ready (`noise_model` of report.json)."""
        return {"order": self.order, "coefficients": [float(c) for c in self.coefficients],
                "innovation_sd": float(self.innovation), "sd": float(self.marginal)}

    @classmethod
    def from_dict(cls, entry: dict) -> "ChannelNoise":
        """The model `to_dict` wrote (`order`, `coefficients`, `innovation_sd`, `sd`)."""
        return cls(int(entry["order"]), tuple(float(c) for c in entry["coefficients"]),
                   float(entry["innovation_sd"]), float(entry["sd"]))

    def describe(self, shown: tuple[str, float] | None = None) -> str:
        """In words, e.g. `AR(1), phi 0.61, innovation sd 0.012`; the standard deviations in
        SI, or in `shown` (a unit and the factor from SI to it: `("mm", 1e3)` gives `AR(1),
        phi 0.61, innovation sd 12 mm`)."""
        if self.order == 0:
            return f"white, sd {in_unit(self.marginal, shown)}"
        return (f"AR({self.order}), phi {', '.join(f'{c:.3g}' for c in self.coefficients)}, "
                f"innovation sd {in_unit(self.innovation, shown)} "
                f"(sd {in_unit(self.marginal, shown)})")


def autocovariances(series: Sequence[np.ndarray], max_lag: int) -> tuple[np.ndarray, int]:
    """Pooled autocovariances `(max_lag + 1,)` of the records `series` (each `(k,)`, in the order
    of its samples; the mean is not removed: the errors' mean is zero), in the biased form
    `gamma_l = sum_records sum_t e_t e_(t+l) / N`, `N` all the samples; and `N`."""
    total = sum(int(np.size(s)) for s in series)
    gamma = np.zeros(max_lag + 1)
    for s in series:
        s = np.asarray(s, dtype=float)
        for lag in range(min(max_lag, s.size - 1) + 1):
            gamma[lag] += float(s[lag:] @ s[:s.size - lag])
    return gamma / max(total, 1), total


def levinson_durbin(gamma: np.ndarray, max_order: int) -> list[tuple[np.ndarray, float]]:
    """The Yule-Walker autoregressions of orders 0 to `max_order` of the autocovariances
    `gamma` (`(max_order + 1,)`): `[(phi (p,), innovation variance), ...]` by the
    Levinson-Durbin recursion (Brockwell and Davis 1991, section 5.2). With biased
    autocovariances every model is stationary."""
    variance = float(gamma[0])
    models = [(np.zeros(0), variance)]
    phi = np.zeros(0)
    for p in range(1, max_order + 1):
        if variance <= 0.0:
            models.append((np.concatenate([phi, [0.0]]), variance))
            phi = models[-1][0]
            continue
        reflection = (gamma[p] - phi @ gamma[p - 1:0:-1]) / variance
        phi = np.concatenate([phi - reflection * phi[::-1], [reflection]])
        variance *= 1.0 - reflection ** 2
        models.append((phi, variance))
    return models


def model_autocovariances(coefficients: Sequence[float], variance: float, max_lag: int
                          ) -> np.ndarray:
    """The autocovariances `(max_lag + 1,)` of the stationary AR process with `coefficients`
    `phi` and innovation `variance` (white: `variance` at lag 0)."""
    phi = np.asarray(coefficients, dtype=float)
    p = phi.size
    gamma = np.zeros(max(max_lag, p) + 1)
    if p == 0:
        gamma[0] = variance
        return gamma[:max_lag + 1]
    # rho_k = sum_j phi_j rho_|k-j|, k = 1..p, rho_0 = 1: linear in rho_1..rho_p.
    system, right = np.eye(p), phi.copy()
    for k in range(1, p + 1):
        for j in range(1, p + 1):
            lag = abs(k - j)
            if lag > 0:
                system[k - 1, lag - 1] -= phi[j - 1]
    rho = np.concatenate([[1.0], np.linalg.solve(system, right)])
    marginal = variance / max(1.0 - float(phi @ rho[1:]), 1e-300)
    gamma[:p + 1] = marginal * rho
    if gamma.size > p + 1:  # (gamma_k = sum_j phi_j gamma_(k-j) beyond lag p: the AR filter
        # run on no input from the last p autocovariances)
        denominator = np.concatenate([[1.0], -phi])
        start = signal.lfiltic([1.0], denominator, gamma[p:0:-1])
        gamma[p + 1:] = signal.lfilter([1.0], denominator, np.zeros(gamma.size - p - 1),
                                       zi=start)[0]
    return gamma[:max_lag + 1]


def whitened(series: np.ndarray, coefficients: Sequence[float]) -> np.ndarray:
    """The innovations `a_t = e_t - sum_k phi_k e_(t-k)` of one record `(k,)` (or `(k, ...)`,
    along its first axis), its first `p` samples left out: `(k - p,)` (module docstring)."""
    series = np.asarray(series, dtype=float)
    phi = np.asarray(coefficients, dtype=float)
    p = phi.size
    if series.shape[0] <= p:  # (a run between gaps no longer than the order: no innovation)
        return series[:0].copy()
    out = series[p:].copy()
    for k in range(1, p + 1):
        out -= phi[k - 1] * series[p - k:len(series) - k]
    return out


def measured_runs(column: np.ndarray) -> list[np.ndarray]:
    """The runs of values measured in one record's channel `column` `(k,)` (`NaN` where not
    measured), in order: the pieces an autoregression whitens one by one (`whitened`)."""
    column = np.asarray(column, dtype=float)
    measured = ~np.isnan(column)
    edges = np.flatnonzero(np.diff(np.r_[False, measured, False].astype(int)))
    return [column[a:b] for a, b in zip(edges[::2], edges[1::2])]


SAMPLES_PER_ORDER = 10
"""Samples the shortest record must hold per autoregressive order fitted or given."""


def supported_order(model: AbstractNoiseModel, shortest: int) -> int:
    """The highest autoregressive order `model` may take for records whose shortest holds
    `shortest` samples: 0 for white noise; else its highest (`AR.highest`), at most one order
    per `SAMPLES_PER_ORDER` samples (the one rule of `check_order`, of `fit_channel_noise`'s
    orders and of the width the fits pad their whitening coefficients to)."""
    if not isinstance(model, AR):
        return 0
    return min(model.highest, max(shortest // SAMPLES_PER_ORDER, 0))


def check_order(model: AbstractNoiseModel, lengths: Sequence[int], what: str) -> None:
    """Refuse an autoregressive order the records (`lengths`, samples each) cannot support
    (`supported_order`: ten samples per order in the shortest; `what` names the option)."""
    if isinstance(model, AR) and model.fixed and lengths:
        shortest = min(lengths)
        if supported_order(model, shortest) < model.highest:
            raise ValueError(f"{what} {model.shown}: the shortest record has {shortest} "
                             f"samples; an order of at most {shortest // SAMPLES_PER_ORDER} is "
                             f"supported ({SAMPLES_PER_ORDER} samples per order), or use "
                             "white")


def fit_channel_noise(series: Sequence[np.ndarray], model: AbstractNoiseModel,
                      n_free: float = 0.0, channel: str | None = None) -> ChannelNoise:
    """The noise of one channel (named `channel`) from its raw residuals `series` (one `(k,)`
    per record, in the order of the samples; values not measured left out): the order (given,
    or from 0 to `max_order` for `AR()`: `chosen_order`), the Yule-Walker coefficients (or those
    given), and the standard deviations, with `n_free` (the share of the fit's parameters this
    channel absorbed) taken off the degrees of freedom as in `noise_from_residuals`."""
    series = [np.asarray(s, dtype=float) for s in series if np.size(s)]
    if isinstance(model, AR) and model.given(channel) is not None:
        return noise_under(series, model.given(channel), n_free)
    orders, models, total = _candidates(series, model)
    order = chosen_order(models, orders, total) if len(orders) > 1 else orders[0]
    return noise_under(series, models[order][0], n_free)


def _candidates(series, model, shortest=None) -> tuple[list[int], list, int]:
    # The orders `model` allows a channel's records `series` (or runs of them, the records'
    # `shortest` measured samples given), their Yule-Walker models (`levinson_durbin`) and
    # the samples they hold.
    if shortest is None:
        shortest = min((s.size for s in series), default=0)
    if isinstance(model, White):
        orders = [0]
    elif model.order is not None:
        orders = [model.order]
    else:
        orders = list(range(0, supported_order(model, shortest) + 1))
    gamma, total = autocovariances(series, max(orders))
    return orders, levinson_durbin(gamma, max(orders)), total


def correlated_together(candidates) -> bool:
    """Whether the channels of one fit, taken together, show correlated noise where each
    alone may not: the sum over the channels of `N ln(s_0^2 / s_1^2)` (each one's gain of an
    AR(1) over white noise, `candidates` `[(orders, models, N)]` as `_candidates` gives them)
    exceeds the sum of their Bayesian penalties `ln N`. A tester or tracker filters all its
    channels alike, and one short record cannot show weak correlation channel by channel:
    under AR(1) rho 0.3 over 90 samples BIC leaves 29% of channels white, the six channels
    together 2.5%, while six white channels are left white as often as alone (96%; simulated,
    400 records of six channels)."""
    gains = [(total * math.log(max(models[0][1], 1e-300) / max(models[1][1], 1e-300)),
              math.log(max(total, 2))) for orders, models, total in candidates
             if len(orders) > 1 and 1 in orders]
    return len(gains) > 1 and sum(g for g, _ in gains) > sum(p for _, p in gains)


def chosen_order(models: list[tuple[np.ndarray, float]], orders: Sequence[int],
                 total: int) -> int:
    """The autoregressive order `"auto"` chooses among `orders` (from 0) for the Yule-Walker
    `models` (`levinson_durbin`'s) of `total` samples: 0 (white) where the Bayesian
    information criterion prefers it, else the order the Akaike criterion prefers (at least
    BIC's). BIC (`N ln s_a^2 + p ln N`) is consistent for a noise that is white or a finite
    autoregression, so it keeps white noise white; but filtered noise (a Butterworth
    filter's output, an ARMA process) is no finite autoregression, and for such noise AIC
    (`N ln s_a^2 + 2 p`) is the efficient choice (Shibata 1980, Ann. Statist. 8, 147-164): it
    keeps the orders that carry the low-frequency power the errors of slowly varying
    parameters depend on. Measured (`experiments/coverage_correlated.py --part
    trajectory-exact`, the trajectory fit linearised, 300 filtered records, the noise
    estimated from the residuals as the fits do): errors 1.22-1.34 times too small under BIC's
    orders, 1.10-1.19 under this rule; the nonlinear fits 1.21-1.31 and 1.09-1.19; AR(1)
    noise alike under both (docs/goodness-of-fit.md). (The samples lost to the start of each
    record are few against `N` and alike across the orders compared.)"""
    def criterion(p, penalty):
        return total * math.log(max(models[p][1], 1e-300)) + p * penalty

    order = min(orders, key=lambda p: criterion(p, math.log(max(total, 2))))
    if order:
        order = max(order, min(orders, key=lambda p: criterion(p, 2.0)))
    return order


def noise_under(series: Sequence[np.ndarray], coefficients: Sequence[float],
                n_free: float = 0.0) -> ChannelNoise:
    """The `ChannelNoise` of the autoregression `coefficients` given, its innovations' standard
    deviation from the records `series` whitened by it: `s_a^2 = sum a_t^2 / (N' - n_free)`,
    `N'` the samples whitened (statsmodels' `GLSAR` scale). Coefficients of zeros only
    (`phi:0`) are white noise, order 0, as the compiled whitening reads them."""
    phi = np.trim_zeros(np.asarray(coefficients, dtype=float), "b")
    series = [np.asarray(s, dtype=float) for s in series if np.size(s)]
    kept = sum(max(s.size - phi.size, 0) for s in series)
    squares = sum(float(a @ a) for a in (whitened(s, phi) for s in series))
    variance = squares / max(kept - n_free, 1.0)
    # The innovation variance that gives the model the records' own variance: where it exceeds
    # the whitened residuals' by more than `INCONSISTENT`, the autoregression does not describe
    # the noise (a steep low-pass filter: the residuals are far more predictable one step ahead
    # than the model's spectrum says, and its long-run variance, which the errors of slowly
    # varying parameters need, would be several times too small); that one is kept.
    total = sum(s.size for s in series)
    unit = float(model_autocovariances(phi, 1.0, 0)[0])  # (gamma_0 is linear in the variance)
    own = sum(float(s @ s) for s in series) / max(total - n_free, 1.0) / unit
    whitened_sd = math.sqrt(variance)
    if own > INCONSISTENT * variance:
        variance = own
    innovation = math.sqrt(variance)
    return ChannelNoise(order=int(phi.size), coefficients=tuple(float(c) for c in phi),
                        innovation=innovation, marginal=math.sqrt(variance * unit),
                        whitened=whitened_sd)


def _first_samples(phi: np.ndarray) -> tuple[np.ndarray, float]:
    """Of the stationary autoregression `phi` `(p,)`: the Cholesky factor `(p, p)` of its
    first `p` samples' autocorrelations, and the marginal variance `gamma_0` its innovations
    of unit variance give."""
    gamma = model_autocovariances(phi, 1.0, phi.size)
    lags = np.abs(np.subtract.outer(np.arange(phi.size), np.arange(phi.size)))
    return np.linalg.cholesky((gamma / gamma[0])[lags]), float(gamma[0])


def exactly_whitened(values, coefficients: Sequence[float]) -> np.ndarray:
    """Values `(k, ...)` along one record (errors, or the sensitivities of its predictions) of
    stationary autoregressive errors with `coefficients` and unit marginal variance, made
    independent and of unit variance: `W values` with `W^T W` the inverse of the errors' `(k,
    k)` covariance, the exact Gaussian likelihood (no sample left out). The first `p` samples
    by the inverse of the Cholesky factor of their own covariance, the others by the
    innovations `a_t = e_t - sum phi_k e_(t-k)` (independent of the first `p`) over their
    deviation (for an AR(1) the Prais-Winsten transform, `sqrt(1 - phi^2) e_0` and
    `a_t / sqrt(1 - phi^2)`)."""
    phi = np.asarray(coefficients, dtype=float)
    values = np.asarray(values, dtype=float)
    p = phi.size
    if p == 0:
        return values.copy()
    if values.shape[0] <= p:
        raise ValueError(f"a record of {values.shape[0]} samples for an autoregression of "
                         f"order {p}")
    head, gamma0 = _first_samples(phi)
    first = np.linalg.solve(head, values[:p].reshape(p, -1)).reshape(values[:p].shape)
    return np.concatenate([first, whitened(values, phi) * math.sqrt(gamma0)])


def stationary_errors(coefficients: Sequence[float], sd: float, length: int, rng
                      ) -> np.ndarray:
    """A draw `(length,)` of stationary autoregressive errors with `coefficients` and marginal
    standard deviation `sd` (the first `p` from their exact joint law, no burn-in), from the
    numpy generator `rng`."""
    phi = np.asarray(coefficients, dtype=float)
    p = phi.size
    if p == 0:
        return rng.normal(size=length) * sd
    head, gamma0 = _first_samples(phi)
    errors = np.empty(max(length, p))
    errors[:p] = head @ rng.normal(size=p)
    innovations = rng.normal(size=errors.size) / math.sqrt(gamma0)
    for t in range(p, errors.size):
        errors[t] = phi @ errors[t - 1::-1][:p] + innovations[t]
    return errors[:length] * sd


def whitening_rows(coefficients: Sequence[float], length: int) -> np.ndarray:
    """The whitening filter of one record of `length` samples as a matrix `(length - p,
    length)`: `whitened(e, phi) = rows @ e` (for Jacobians and tests)."""
    phi = np.asarray(coefficients, dtype=float)
    p = phi.size
    rows = np.zeros((max(length - p, 0), length))
    for t in range(p, length):
        rows[t - p, t] = 1.0
        for k in range(1, p + 1):
            rows[t - p, t - k] = -phi[k - 1]
    return rows


def whiten_padded(residuals, weight, coefficients):
    """Records' residuals whitened inside a compiled fit: `residuals` `(m, c)` (one record,
    padded at its end, zero where `weight` is), each channel by its autoregression, the
    rows of `coefficients` `(c, q)` (`phi_1..phi_q`, zero-padded for a lower order: a channel's
    order is its last nonzero coefficient). `weight` `(m,)` (1 for a sample, 0 for padding) or
    `(m, c)` (also 0 for a value not measured); an innovation is kept where its value and
    the `order` before it are measured (`whitening_kept`: each run of values between gaps
    loses its first `order`, Cochrane-Orcutt on each run; `whitened`, the same filter). A
    residual of a failed evaluation (`FAILED_RESIDUAL`) stays one, so that the failure shows
    after the whitening too."""
    q = coefficients.shape[1]
    innovations = residuals
    for k in range(1, q + 1):
        innovations = innovations - coefficients[:, k - 1] * jnp.concatenate(
            [jnp.zeros((k, residuals.shape[1])), residuals[:-k]])
    kept = whitening_kept(weight, coefficients)
    return jnp.where(residuals == FAILED_RESIDUAL, FAILED_RESIDUAL, innovations * kept)


def whitening_kept(weight, coefficients):
    """Which innovations of one padded record `whiten_padded` keeps, `(m, c)` (1 or 0; numpy
    or JAX, as `coefficients` `(c, q)` are): where `weight` (`(m,)` or `(m, c)`: a value
    measured, not padding) holds at the sample and at the channel's `order` samples before
    it."""
    concrete = isinstance(coefficients, np.ndarray) and isinstance(weight, np.ndarray)
    xp = np if concrete else jnp
    weight = xp.asarray(weight)
    present = weight[:, None] if weight.ndim == 1 else weight
    present = xp.broadcast_to(present, (present.shape[0], coefficients.shape[0]))
    orders = autoregressive_orders(coefficients)
    kept = present
    for k in range(1, coefficients.shape[1] + 1):
        lagged = xp.concatenate([xp.zeros((k, present.shape[1])), present[:-k]])
        kept = kept * xp.where(k <= orders, lagged, 1.0)
    return kept


def autoregressive_orders(coefficients):
    """Each channel's order `(c,)` from zero-padded `coefficients` `(c, q)`: the position of
    its last nonzero coefficient (numpy or JAX, as given)."""
    xp = np if isinstance(coefficients, np.ndarray) else jnp
    lags = xp.arange(1, coefficients.shape[1] + 1)
    return xp.max(xp.where(coefficients != 0, lags, 0), axis=1, initial=0)


def evenly_sampled(times, tolerance: float = 0.01) -> bool:
    """Whether the sample times `times` `(k,)` (s) are evenly spaced, to `tolerance` of the
    mean step: what a discrete autoregression needs."""
    steps = np.diff(np.asarray(times, dtype=float))
    return steps.size < 2 or float(np.ptp(steps)) <= tolerance * abs(float(np.mean(steps)))


def sampled_noise_model(model: AbstractNoiseModel, records: Sequence, what: str
                        ) -> tuple[AbstractNoiseModel, str | None]:
    """The noise model usable on `records` (the sample times of each, s, `(k,)`): `model`
    where every record is evenly sampled (`evenly_sampled`); otherwise a given order is
    refused (`ValueError` naming the option `what`) and `"auto"` falls back to white noise,
    with a note saying so: `(model, note or None)`."""
    if not isinstance(model, AR):
        return model, None
    uneven = [np.diff(np.asarray(t, dtype=float)) for t in records if not evenly_sampled(t)]
    if not uneven:
        return model, None
    if model.fixed:
        raise ValueError(f"{what} {model.shown}: the samples are not evenly spaced in time "
                         f"(steps from {np.min(uneven[0]):.3g} to {np.max(uneven[0]):.3g} s); "
                         "an autoregression needs even sampling: use white")
    return White(), ("the samples are not evenly spaced in time: the noise is taken as white "
                     "(an autoregression needs even sampling)")


def coefficient_matrix(noises: Sequence[ChannelNoise], width: int = 0) -> np.ndarray:
    """The autoregressions of channels `noises` as one `(c, q)` matrix, zero-padded to the
    highest order, or to `width` if that is more (`whiten_padded`): a fit that pads to its
    noise model's highest order (`AR.highest`) compiles one program whatever orders its
    records need."""
    q = max(max((n.order for n in noises), default=0), width)
    matrix = np.zeros((len(noises), q))
    for row, noise in zip(matrix, noises):
        row[:noise.order] = noise.coefficients
    return matrix


def drift_notes(values, least_squares, stderr_robust, order: int) -> list[str]:
    """A warning where the values under an autoregressive noise model (of highest `order`)
    differ from the ordinary least-squares ones `least_squares` by more than 3 of their robust
    (Newey-West) standard errors `stderr_robust` (all `(p,)`): the autoregression then takes up
    a smooth misfit of the model as if it were noise. Empty otherwise."""
    robust = np.asarray(stderr_robust, dtype=float)
    usable = np.isfinite(robust) & (robust > 0)
    drift = np.abs(np.asarray(values) - np.asarray(least_squares))[usable] / robust[usable]
    if not order or np.max(drift, initial=0.0) <= 3.0:
        return []
    return [f"the values under the noise model differ from the ordinary least-squares ones by "
            f"up to {np.max(drift):.1f} robust standard errors: the autoregression (order "
            f"{order}) takes up a smooth misfit of the model as if it were noise; "
            "noise='white' with stderr_robust may serve better"]


FLOOR = 1e-13
"""Standard deviations are floored at this fraction of a channel's range (noise-free data)."""


def checked_noise_model(spec, noise_given: bool, measurements: Sequence, what: str = "noise_model",
                        channels: Sequence[str] | None = None, runs: bool = False
                        ) -> AbstractNoiseModel:
    """The noise model `spec` names (`as_noise_model`), checked against a fit's records
    `measurements` (each with `ts` `(k,)` and `values` `(k, c)`) and `channels` (their names,
    where known): coefficients given for a channel the data lack are refused (`ValueError`
    naming `what`), and a given autoregressive order or coefficients beside given noise
    (`noise_given`: white), on records too short for them (`check_order`), not evenly sampled,
    or with values not measured (`NaN`) unless the fit whitens the `runs` between them one by
    one (a trajectory fit: `whiten_padded`)."""
    model = as_noise_model(spec)
    if isinstance(model, AR) and channels is not None:
        model.check_channels(channels, what)
    if not isinstance(model, AR) or not model.fixed:
        return model
    if noise_given:
        raise ValueError(f"{what} {model.shown}: the noise given is white; give the noise or the "
                         "noise model, not both")
    check_order(model, [len(m.ts) for m in measurements], what)
    sampled_noise_model(model, [m.ts for m in measurements], what)
    gaps = [] if runs else gaps_under(model, measurements, channels)
    if gaps:
        raise ValueError(f"{what} {model.shown}: the data have values not measured (NaN) in "
                         f"{', '.join(gaps)}; an autoregression needs whole records: use white "
                         "there")
    return model


def gaps_under(model: AbstractNoiseModel, measurements: Sequence,
               channels: Sequence[str] | None = None) -> list[str]:
    """The channels whose values are not all measured (`NaN`) although `model` runs an
    autoregression over them, which needs whole records: every channel of an `AR` but one
    whose coefficients are given per channel as white (not named); channels named by their
    position (`"column k"`) where `channels` is not given. Empty where the noise is white."""
    if not isinstance(model, AR):
        return []
    names = list(channels) if channels is not None else None
    gaps = []
    for m in measurements:
        values = np.asarray(m.values, dtype=float).reshape(len(m.ts), -1)
        for k in np.flatnonzero(np.isnan(values).any(axis=0)):
            name = names[k] if names is not None else f"column {k + 1}"
            white = (model.per_channel and names is not None and model.given(name) == ())
            if not white and name not in gaps:
                gaps.append(name)
    return gaps


def usable_noise_model(model: AbstractNoiseModel, noise_given: bool, measurements: Sequence,
                       channels: Sequence[str] | None = None, runs: bool = False
                       ) -> tuple[AbstractNoiseModel, str | None]:
    """The noise model a fit of `measurements` (channels `channels`) runs under, and a note
    where it is not `model`: `(model, note or None)`. Given noise is white; `"auto"` on records
    not evenly sampled, or with values not measured where it would run an autoregression
    (`gaps_under`) and the fit does not whiten the `runs` between them one by one, falls back
    to white (a given order is refused before: `checked_noise_model`); coefficients given per
    channel keep their white channels' gaps."""
    if noise_given:
        return White(), None
    model, note = sampled_noise_model(model, [m.ts for m in measurements], "noise_model")
    gaps = [] if runs else gaps_under(model, measurements, channels)
    if gaps:
        return White(), (f"the data have values not measured (NaN) in {', '.join(gaps)}: the "
                         "noise is taken as white (an autoregression needs whole records)")
    return model, note


def channel_noises(channels: Sequence[str], ranges: Sequence[float], n_free: int,
                   blocks: Sequence[np.ndarray], model, orders=None,
                   weighted_by: dict | None = None) -> dict[str, ChannelNoise]:
    """Each channel's noise from a fit's raw residual `blocks` (`(k, c)` per record, SI, `NaN`
    where not measured): under `model` (`fit_channel_noise`'s orders; under `"auto"` the
    channels also judged together, `correlated_together`), at the fixed `orders` `(c,)` (an
    order 0 white), or with the coefficients of `weighted_by` (channel -> `ChannelNoise`:
    `noise_under`), those `model` gives first; each channel is charged its share of the
    `n_free` fitted parameters, and floored at `FLOOR` of its `ranges` entry."""
    total = max(sum(int(np.count_nonzero(~np.isnan(b))) for b in blocks), 1)
    noises, searched = {}, {}
    for c, (channel, span) in enumerate(zip(channels, ranges)):
        # (each run of values between gaps whitened on its own; the orders bounded by the
        # shortest record's values measured)
        lengths = [int(np.count_nonzero(~np.isnan(b[:, c]))) for b in blocks]
        shortest = min((k for k in lengths if k), default=0)
        series = [run for b in blocks for run in measured_runs(b[:, c])]
        share = n_free * sum(s.size for s in series) / total
        floor = FLOOR * max(float(span), 1e-300)
        if isinstance(model, AR) and model.given(channel) is not None:
            noise = noise_under(series, model.given(channel), share)  # (the order fixed too)
        elif weighted_by is not None:
            noise = noise_under(series, weighted_by[channel].coefficients, share)
        else:
            kind = model if orders is None else AR(orders[c]) if orders[c] else White()
            searched[channel] = (series, share, floor, _candidates(series, kind, shortest))
            continue
        noises[channel] = noise.floored(floor)
    # The orders searched: each channel's `chosen_order`; where the channels together show
    # correlation (`correlated_together`), one left white by its own takes the order AIC
    # prefers from 1 up.
    together = correlated_together([found[-1] for found in searched.values()])
    for channel, (series, share, floor, (options, models, samples)) in searched.items():
        order = chosen_order(models, options, samples) if len(options) > 1 else options[0]
        if together and not order and len(options) > 1:
            order = min(options[1:], key=lambda p: samples * math.log(
                max(models[p][1], 1e-300)) + 2.0 * p)
        noises[channel] = noise_under(series, models[order][0], share).floored(floor)
    return {channel: noises[channel] for channel in channels}


def whitened_jacobian(jacobian: np.ndarray, lengths: Sequence[int], noises: Sequence[ChannelNoise],
                      sigma: Sequence[float]) -> np.ndarray:
    """Noise-weighted sensitivities `jacobian` `(n, p)` (rows sample by channel within each
    record of `lengths` samples, each channel weighted by `sigma` `(c,)`) whitened channel by
    channel by `noises` (one `ChannelNoise` per channel, in order) and weighted by their
    innovations' deviations instead: the rows of the generalized least-squares information
    (a white channel's rows as they are)."""
    jacobian = np.asarray(jacobian, dtype=float)
    c, rows, first = len(noises), [], 0
    for k in lengths:
        block = jacobian[first:first + k * c].reshape(k, c, -1)
        first += k * c
        for j, (noise, weight) in enumerate(zip(noises, sigma)):
            column = block[:, j]
            if noise.order:
                column = np.stack([whitened(col, noise.coefficients) for col in column.T],
                                  axis=1) * (float(weight) / noise.innovation)
            rows.append(column)
    return np.concatenate(rows) if rows else jacobian[:0]
