"""Trajectory fits under a noise model: each channel's errors correlated from sample to sample
(`spineid.identify._common._noise_model`), as filtered motion capture and tester signals are.

After the fit under white weights (ordinary least squares, the noise estimated per channel),
each channel's autoregression is fitted to its residuals, pooled over the load cases (`"auto"`:
0 where BIC finds them white, else the order AIC prefers, `chosen_order`; the trajectory fit
is then unchanged, as it is where the white-weighted fit's smooth misfit exceeds the
tolerance: `misfit_exceeds`). Where a
channel needs an order, the fit is weighted by the whitening filter (generalized least squares, the
first `q` samples of each record left out: Cochrane-Orcutt), the autoregression estimated again
from the new residuals and the fit repeated until the innovations' deviations settle (iterated
prewhitening, Seber and Wild 1989, section 6.2; `settle_noise`). The standard errors come from
the whitened sensitivities; beside them, Newey-West errors of the white-weighted estimate
(`hac_covariance`, each channel of each load case a record). The verdict tests the whiteness of
the innovations and the smooth misfit of the white-weighted residuals (`assess_fit`).
"""

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._common._failure import compiled_check_message, failed
from .._common._goodness import misfit_exceeds
from .._common._noise import innovations, iterated_prewhitening
from .._common._noise_model import (
    AR,
    channel_noises,
    ChannelNoise,
    coefficient_matrix,
    supported_order,
    usable_noise_model,
)
from .._common._padding import padded_length
from .._common._uncertainty import channel_records, hac_covariance
from .._solvers._base import warm_start
from ._objective import _Objective, residual_blocks
from ._problem import FitProblem

def usable_model(problem: FitProblem):
    """`usable_noise_model` of `problem`'s noise model and data (values not measured allowed:
    the runs between them whitened one by one)."""
    return usable_noise_model(problem.noise_model, problem.noise is not None,
                              problem.measurements, problem.channels, runs=True)


def whitening_width(problem: FitProblem, model) -> int:
    """The width `q` of the whitening coefficients `(c, q)` of `problem`'s fits under its
    usable noise `model`: 0 where the noise is given or white; else the highest order the
    shortest record's padded length holds (`supported_order`), so that records padded alike
    share it, and the orders chosen (at most the unpadded length's) fit in it. The fits under
    white weights carry that many zero coefficients, which change nothing (`whiten_padded`),
    so that they and the refits under the noise model are one compiled program: measured,
    10 s of a one-level OpenSim neck fit's 30 s of compiling."""
    if problem.noise is not None or not isinstance(model, AR):
        return 0
    return supported_order(model, padded_length(min(len(m.ts) for m in problem.measurements)))


def noises_of(problem: FitProblem, blocks: list[np.ndarray], model, orders=None,
              weighted_by=None) -> dict[str, ChannelNoise]:
    """`channel_noises` of `problem`'s channels from raw residual `blocks`."""
    return channel_noises(problem.channels, problem.channel_ranges(), len(problem.parameters),
                          blocks, model, orders, weighted_by)


def search_noise_models(problem: FitProblem, model, blocks: list[np.ndarray]
                        ) -> dict[str, ChannelNoise] | None:
    """The channels' noise models for the verdict on a start during a search, from its raw
    residual `blocks`; `None` where every channel is white (or the model is)."""
    if not isinstance(model, AR):
        return None
    noises = noises_of(problem, blocks, model)
    return noises if any(n.order for n in noises.values()) else None


@dataclasses.dataclass
class CorrelatedFit:
    """A trajectory fit under an autoregressive noise model (module docstring): unconstrained
    values `u` `(p,)`, `converged`, `steps`, the `objective` of its errors (whitened by the
    coefficients the last refit was weighted with, and weighted by the innovations' deviations
    of its own residuals, `sigma` `(c,)`: statsmodels' GLSAR scale; the refit's own weights
    differ by at most the settling tolerance), `noises` (channel -> `ChannelNoise`), and the
    white-weighted fit it started from: `least_squares` (physical values `(p,)`) and its raw
    residual `blocks` (`(k, c)` per load case, fit - data, SI)."""

    u: np.ndarray
    converged: bool
    steps: int
    sigma: np.ndarray
    objective: _Objective
    noises: dict[str, ChannelNoise]
    least_squares: np.ndarray
    blocks: list[np.ndarray]

    @property
    def marginal(self) -> np.ndarray:
        """The errors' own standard deviation per channel `(c,)`."""
        return np.array([n.marginal for n in self.noises.values()])


def correlated_fit(run, u, objective: _Objective) -> CorrelatedFit | None:
    """The fit of `run` (a `_Run`) from the white-weighted solution `u` (unconstrained, its
    `objective` weighted by the noise estimated under white noise) under the run's noise
    model; `None` where every channel's residuals are white (nothing changes) or the refit was
    stopped by a check inside its compiled solve (said in the run's notes)."""
    problem, transform = run.problem, run.transform
    theta = np.asarray(transform.evaluated(jnp.asarray(u))[0])
    blocks = residual_blocks(objective, theta)
    if any(np.any(failed(b)) for b in blocks):  # (the model could not be simulated there)
        return None
    if misfit_exceeds(blocks, problem.misfit_ranges(), problem.max_misfit):
        return None  # (a model that does not describe its data has no noise model to fit)

    # (Padded to the highest order the model may choose for these records: one compiled
    # program for every order chosen, and for the white-weighted fit, `objective_for`.)
    width = run.whitening_width

    def refit(found, sigma, previous):
        weighted = run.objective_for(sigma, coefficient_matrix(list(found.values()), width))
        start = jnp.asarray(u) if previous is None else previous[0].value
        return run.local.solve(weighted, start, False, **warm_start(previous)), weighted

    try:
        whitened = iterated_prewhitening(
            noises_of(problem, blocks, run.noise_model), refit,
            lambda fitted: residual_blocks(objective, transform.evaluated(fitted[0].value)[0]),
            lambda found, **how: noises_of(problem, found, run.noise_model, **how))
    except eqx.EquinoxRuntimeError as error:
        run.note(f"the refit under the noise model was stopped by a check inside its compiled "
                 f"solve ({compiled_check_message(error)}); the fit is reported as if the "
                 "noise were white")
        return None
    if whitened is None:
        return None
    for note in whitened.notes:
        run.note(note)
    fits, noises = whitened.fits, whitened.noises
    solution = fits[-1][0]
    sigma = innovations(noises)
    weighted = run.objective_for(sigma, coefficient_matrix(list(noises.values()), width))
    return CorrelatedFit(np.asarray(solution.value), bool(solution.converged),
                         sum(int(f[0].steps) for f in fits), sigma, weighted, noises, theta,
                         blocks)


def robust_errors(problem: FitProblem, jacobian: np.ndarray, residuals: np.ndarray,
                  columns: np.ndarray) -> np.ndarray:
    """Newey-West standard errors `(p,)` of a white-weighted estimate from its weighted
    sensitivities `jacobian` `(n, p)` and residuals `(n,)` (the data's rows, samples by
    channels per load case), each channel of each load case a record (`hac_covariance`;
    correlation between channels is not modelled); NaN outside `columns`."""
    records = channel_records([len(m.ts) for m in problem.measurements], len(problem.channels))
    covariance = hac_covariance(jacobian, residuals, records, columns)
    return np.sqrt(np.maximum(np.diag(covariance), 0.0))
