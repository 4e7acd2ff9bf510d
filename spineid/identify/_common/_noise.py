"""The noise convention every fit kind shares, and the noise estimated from residuals.

The noise of a fit is given per channel, by name, as the standard deviation of the measurement
error in SI units (m, rad, N, N m): `{"x": 1e-5, "theta": 2e-4}`. Where it is not given, it is
estimated from the residuals of a first fit under provisional weights (`noise_from_residuals`)
and the fit is refined with it.
"""

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np


def check_noise(channels: Sequence[str], noise: dict[str, float]) -> dict[str, float]:
    """Validate per-channel noise standard deviations (SI): one positive number per channel,
    given as a mapping by channel name (a bare number or a list is refused saying so)."""
    if not hasattr(noise, "keys"):
        example = ", ".join(f"{c!r}: 1e-05" for c in list(channels)[:3])
        raise ValueError(f"noise: give one standard deviation per channel by name, e.g. "
                         f"{{{example}{', ...' * (len(channels) > 3)}}} (SI), not "
                         f"{type(noise).__name__} {str(noise)[:80]}")
    missing = [c for c in channels if c not in noise]
    unknown = [c for c in noise if c not in channels]
    if missing or unknown:
        raise ValueError(
            f"noise: give one standard deviation per channel {list(channels)}; "
            f"missing {missing}, unknown {unknown}"
        )
    _check_positive(noise, "noise")
    return {c: float(noise[c]) for c in channels}


def _check_positive(values: dict, option: str) -> None:
    # Each channel's standard deviation a positive finite number, else one sentence.
    for channel, sigma in values.items():
        try:
            number = float(sigma)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            raise ValueError(f"{option}: {channel}={sigma!r}: expected a positive number")


def grouped_noise(noise: dict[str, float], groups: dict[str, Sequence[str]]) -> dict[str, float]:
    """`noise` with each group name (a key of `groups`) replaced by its channels, each given the
    group's value; a channel named on its own as well keeps its own value."""
    single = {name: value for name, value in noise.items() if name not in groups}
    spread = {channel: value for name, value in noise.items() if name in groups
              for channel in groups[name]}
    return spread | single


def check_noise_max(channels: Sequence[str], noise_max: dict[str, float] | None
                    ) -> dict[str, float]:
    """Validate per-channel noise maxima (SI): known channels, positive numbers; some channels
    may be left out (they take the default of their unit)."""
    noise_max = dict(noise_max or {})
    unknown = [c for c in noise_max if c not in channels]
    if unknown:
        raise ValueError(f"noise_max: unknown channel(s) {unknown}; the channels are "
                         f"{list(channels)}")
    _check_positive(noise_max, "noise_max")
    return {c: float(v) for c, v in noise_max.items()}


def noise_from_residuals(raw: np.ndarray, n_free: int, ranges: np.ndarray) -> np.ndarray:
    """Per-channel noise from raw residuals `(k, c)` (SI; `NaN` where not measured) of a fit
    with `n_free` parameters: sigma_c^2 = sum r_c^2 / (n_c (1 - p / n)), `n_c` the channel's
    measured values and `n` all of them, floored at roundoff of each channel's `ranges`
    (noise-free data would give 0). A channel with no measured value gets its floor."""
    measured = ~np.isnan(raw)
    dof = max(1.0 - n_free / max(int(np.count_nonzero(measured)), 1), 1e-3)
    counts = np.count_nonzero(measured, axis=0)
    squares = np.sum(np.where(measured, raw, 0.0) ** 2, axis=0)
    sigma = np.sqrt(squares / np.maximum(counts, 1) / dof)
    return np.maximum(sigma, 1e-13 * np.maximum(ranges, 1e-300))


def measured_ranges(values: np.ndarray) -> np.ndarray:
    """Peak-to-peak range of each column of `values` `(k, c)` over its entries that are not
    `NaN` (values measured), `(c,)`; 0 for a column with none."""
    measured = ~np.isnan(values)
    high = np.max(np.where(measured, values, -np.inf), axis=0)
    low = np.min(np.where(measured, values, np.inf), axis=0)
    return np.where(measured.any(axis=0), high - low, 0.0)


NOISE_SETTLED = 0.02
"""The noise estimated from a fit's residuals is settled when no channel's estimate changes by
more than this fraction in a refit with it."""

NOISE_ROUNDS = 8
"""At most this many refits with the estimated noise (`settle_noise`)."""


def settle_noise(refit: Callable, estimate: Callable, sigma: np.ndarray) -> tuple:
    """The refinement of a fit whose noise is estimated, alike for every fit kind: fit again with
    the noise `sigma` `(c,)` estimated from a first fit's residuals, estimate it again from the
    new fit's, and repeat until the estimate settles (no channel changes by more than
    `NOISE_SETTLED`; at most `NOISE_ROUNDS` refits; the last fit's weights are the noise
    reported). One round is not enough where the provisional weights are far from the noise in
    their ratios: a channel weighted 100x too lightly is barely fitted, and the noise its
    residuals show is its misfit (measured: the 3-axial-spring pair with 3e-9 rad of angle noise
    and 3e-7 m of position noise, the angle's noise estimated at 2.9e-8 rad after one round).

    **Arguments:** `refit(sigma, previous) -> fitted` (any object; `previous` is the refit
    before, `None` at the first), `estimate(fitted) -> sigma` `(c,)`.

    **Returns:** `(fits, sigma, change)`: every refit made, in order (the last is the fit), the
    noise the last was weighted with, and the largest relative change of the last estimate
    (above `NOISE_SETTLED` where it did not settle: `unsettled_note` says so)."""
    sigma, fits = np.asarray(sigma, dtype=float), []
    while True:
        fits.append(refit(sigma, fits[-1] if fits else None))
        estimated = np.asarray(estimate(fits[-1]), dtype=float)
        change = float(np.max(np.abs(estimated / sigma - 1)))
        if change <= NOISE_SETTLED or len(fits) == NOISE_ROUNDS:
            return fits, sigma, change
        sigma = estimated


def unsettled_note(change: float) -> str:
    """The warning of a fit whose noise estimate did not settle (`settle_noise`)."""
    return (f"the noise estimate did not settle within {NOISE_ROUNDS} refits (it changed by up "
            f"to {change:.1%} in the last); the standard errors rest on the noise of the last "
            "refit")


@dataclasses.dataclass
class Prewhitening:
    """The outcome of `iterated_prewhitening`: every refit made (`fits`, as `refit` returned
    them; the last is the fit), the innovations of the last refit's residuals under the
    coefficients it was weighted with (`noises`, channel -> `ChannelNoise`; their deviations are
    the generalized least-squares scale, as statsmodels' `GLSAR` takes it) and the largest
    relative change of the last estimate (`change`)."""

    fits: list
    noises: dict
    change: float

    @property
    def notes(self) -> list[str]:
        """The warning where the innovations did not settle (`unsettled_note`), else none."""
        return [unsettled_note(self.change)] if self.change > NOISE_SETTLED else []


def iterated_prewhitening(first: dict, refit: Callable, residuals_of: Callable,
                          noises_of: Callable) -> Prewhitening | None:
    """Generalized least squares under autoregressive noise by iterated prewhitening (Seber and
    Wild 1989, section 6.2), alike for every fit kind that weights a record's channels by
    whitening filters: from the noise `first` (channel -> `ChannelNoise`) of a white-weighted
    fit's residuals, fit again weighted by each channel's filter and innovations' deviation,
    estimate the autoregressions again from the new residuals at the orders of `first`, and
    repeat until the deviations settle (`settle_noise`); at last the innovations of the final
    fit's residuals under the coefficients it was weighted with.

    **Arguments:** `refit(noises, sigma, previous) -> fitted` (weighted by `noises`' coefficients
    and the deviations `sigma` `(c,)`; `previous` the refit before or `None`),
    `residuals_of(fitted) -> blocks` (raw residuals, fit - data, `(k, c)` per record),
    `noises_of(blocks, orders=None, weighted_by=None) -> noises` (`channel_noises` of the fit's
    channels under its noise model).

    **Returns:** a `Prewhitening`, or `None` where every channel of `first` is white (the
    white-weighted fit stands)."""
    if not any(noise.order for noise in first.values()):
        return None
    orders = [noise.order for noise in first.values()]  # (kept; the coefficients re-estimated)
    estimates, used, seen = [first], [], []

    def weighted(sigma, previous):
        used.append(estimates[-1])
        return refit(estimates[-1], sigma, previous)

    def estimate(fitted):
        seen.append(residuals_of(fitted))
        estimates.append(noises_of(seen[-1], orders=orders))
        return innovations(estimates[-1])

    fits, _, change = settle_noise(weighted, estimate, innovations(first))
    return Prewhitening(fits, noises_of(seen[-1], weighted_by=used[-1]), change)


def innovations(noises: dict) -> np.ndarray:
    """The innovations' deviations `(c,)` of channel -> `ChannelNoise`."""
    return np.array([noise.innovation for noise in noises.values()])


def judged_ranges(raw: np.ndarray, ranges) -> np.ndarray:
    """The range `(c,)` each channel's smooth misfit is judged against, from a record's raw
    residuals `raw` `(k, c)`: the data's `ranges`, but at least 100 deviations of the
    residuals' rough part (`std(diff) / sqrt(2)`, which a smooth misfit does not inflate). A
    channel that carries little but noise (the forces of a pure-moment test, the axial
    displacement of a bending test) would otherwise be judged against the misfit test's own
    noise floor, a few tenths of a noise deviation."""
    rough = np.std(np.diff(np.asarray(raw, dtype=float), axis=0), axis=0) / math.sqrt(2.0)
    return np.maximum(np.asarray(ranges, dtype=float), 100.0 * rough)
