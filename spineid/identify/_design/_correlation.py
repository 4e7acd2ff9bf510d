"""Designs under correlated measurement errors: each channel's errors an autoregression (the
noise model a fit of the rig's earlier data found, `spineid.AR`, docs/goodness-of-fit.md).

The Fisher information of an experiment whose errors `e` in one channel have the covariance
`Sigma` (`sigma^2` times the autocorrelations of a stationary autoregression with coefficients
`phi_1..phi_q`) is `J^T Sigma^-1 J`, `J` the sensitivities of that channel's predictions
(Seber and Wild 1989, section 6.2). It is computed exactly by whitening `J / sigma`
(`exactly_whitened`: `W^T W` the inverse autocorrelation matrix of the record; the first `q`
samples by the inverse Cholesky factor of their own, the others by the autoregression's
filter), so
that the criteria, the Cramer-Rao errors and the linearity check of a design are those of the
errors the rig makes. Correlated errors carry less information than as many independent
ones of the same size: an AR(1) with `phi = 0.8` about as much, for slowly varying
sensitivities, as `(1 - phi) / (1 + phi) = 1/9` as many independent samples. The validation
simulates errors of this kind and fits them as a lab would, the noise unknown and the noise
model `"auto"`.
"""

import copy
import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from .._common._noise_kinds import checked_coefficients
from .._common._noise_model import evenly_sampled, exactly_whitened, stationary_errors
from .._trajectory._objective import measured_sensitivities
from .._trajectory._problem import FitProblem


def checked_correlation(correlation: Mapping | None, channels: Sequence[str]
                        ) -> dict[str, tuple[float, ...]]:
    """The autoregressions of a design's channels: `correlation` maps a channel of `channels`
    (the model's observed ones) to its coefficients `phi_1..phi_q` per sample (a number, a
    sequence, or a fit's `goodness_of_fit.noise_model` entry, a dict with `"coefficients"`,
    white where a fit's entry is of order 0); channels left out are white. Raises
    `ValueError` naming the channel."""
    if correlation is None:
        return {}
    if not isinstance(correlation, Mapping):
        raise ValueError(f"correlation {correlation!r}: expected {{channel: coefficients}}")
    out = {}
    for channel, entry in correlation.items():
        if channel not in channels:
            raise ValueError(f"correlation[{channel!r}]: not a channel of the model "
                             f"({list(channels)})")
        if isinstance(entry, Mapping):
            if "coefficients" not in entry:
                raise ValueError(f"correlation[{channel!r}] = {entry!r}: a fit's noise-model "
                                 "entry holds its 'coefficients'")
            entry = entry["coefficients"]
            if np.size(entry) == 0:
                continue  # (a white channel of a fit's noise model)
        out[channel] = checked_coefficients(entry, f"correlation[{channel!r}]")
    return out


def check_sampling(candidates: Sequence, correlation: Mapping[str, Sequence[float]]) -> None:
    """Refuse, under `correlation`, a candidate whose samples are not evenly spaced (the
    coefficients are per sample) or fewer than the highest order (`ValueError` naming it)."""
    if not correlation:
        return
    order = max(len(phi) for phi in correlation.values())
    for candidate in candidates:
        if not evenly_sampled(candidate.times):
            raise ValueError(f"candidate {candidate.name!r}: its samples are not evenly spaced "
                             "in time; correlation gives autoregressions per sample, which "
                             "need even sampling")
        if len(candidate.times) <= order:
            raise ValueError(f"candidate {candidate.name!r}: {len(candidate.times)} samples; "
                             f"correlation of order {order} needs more")


def whitened_sensitivities(jacobian: np.ndarray, channels: Sequence[str],
                           correlation: Mapping[str, Sequence[float]]) -> np.ndarray:
    """Noise-weighted sensitivities of one experiment `jacobian` `(k c, p)` (rows sample by
    sample, its measured `channels` in order, each over its marginal standard deviation)
    whitened channel by channel by the autoregressions `correlation` (`checked_correlation`;
    module docstring): `(k c, p)` rows of the exact Fisher information. A white channel's
    rows as they are."""
    if not correlation:
        return jacobian
    block = np.asarray(jacobian, dtype=float).reshape(-1, len(channels), jacobian.shape[-1])
    block = np.stack([exactly_whitened(block[:, j], correlation[c]) if c in correlation
                      else block[:, j] for j, c in enumerate(channels)], axis=1)
    return block.reshape(-1, jacobian.shape[-1])


def design_sensitivities(problem: FitProblem, measured: Sequence[str], values,
                         correlation: Mapping[str, Sequence[float]]) -> np.ndarray:
    """The rows `(k c, p)` of the Fisher information of a design's one-experiment `problem` at
    the parameter `values` (`(p,)`, SI): the sensitivities of its `measured` channels
    (`measured_sensitivities`) whitened by their autoregressions `correlation`
    (`whitened_sensitivities`)."""
    return whitened_sensitivities(measured_sensitivities(problem, measured, values),
                                  [c for c in problem.channels if c in measured], correlation)


def correlated_copies(problem: FitProblem, correlation: Mapping[str, Sequence[float]],
                      repetitions: int, seed: int = 0) -> list[FitProblem]:
    """`repetitions` copies of a design's `problem` (`Design.problem`) whose data are its
    noise-free data plus stationary autoregressive errors of the problem's standard deviations
    and `correlation`'s coefficients (white where a channel has none; numpy's generator seeded
    by `seed`, copy by copy, load case by load case, channel by channel), each to be fitted as
    a lab would: the noise estimated and its model `"auto"` (a channel an experiment does not
    measure left out of its record: the fits whiten each channel where it is measured). Raises
    `ValueError` where no chosen experiment measures a channel (its noise could not be
    estimated)."""
    unmeasured = [c for j, c in enumerate(problem.channels)
                  if all(np.isnan(m.values[:, j]).all() for m in problem.measurements)]
    if unmeasured:
        raise ValueError(f"validate_design: under correlated errors the fits estimate each "
                         f"channel's noise, and no chosen experiment measures {unmeasured}")
    rng = np.random.default_rng(seed)
    unknown = copy.copy(problem)  # (its options kept, its noise to be estimated)
    unknown.noise = None
    copies = []
    for _ in range(repetitions):
        measurements = []
        for m in problem.measurements:
            errors = np.stack([stationary_errors(correlation.get(c, ()), problem.noise[c],
                                                 len(m.ts), rng)
                               for c in problem.channels], axis=1)
            measurements.append(dataclasses.replace(m, values=m.values + errors))
        copies.append(unknown.with_measurements(measurements))
    return copies
