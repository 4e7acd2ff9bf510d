"""The residual objective of trajectory fits: simulate the model at trial parameters, observe it,
subtract the data and weight by the noise,

    r = (observe(simulate(model(theta))) - data) / sigma,

stacked over samples, channels and load cases (Liu 2001, eq 2-24, with noise weighting). A
trial point whose integration fails gets a large finite residual, so a solver backs off
instead of receiving NaN.

Each load case's record is padded to a length shared by records of similar length
(`spineid.identify._common._padding`: the last time and sample repeated, weight zero), so that the fits
of a batch of files of different lengths share one compilation. Padded residuals are zero:
costs, gradients and Fisher matrices are those of the data; `data_rows`, `lengths` and
`trimmed` take the padding off for what is reported. A value not measured (`NaN` in a
`Measurement`: a gap, or a channel a load case does not record) is held as 0 with a zero in
`present`, so its residual is zero too and it adds nothing either; the residuals keep their
`(k, c)` layout per case.
"""

import dataclasses
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._arrays import floats, traced
from ...elements._parameters import Parameter, apply_values
from ...simulation._simulate import DEFAULT_ATOL, DEFAULT_RTOL, SimulationResult, simulate
from .._common._abstract_objective import AbstractObjective
from .._common._analysis import value_scales
from .._common._failure import failed, guarded
from .._common._noise_model import whiten_padded, whitening_kept
from .._common._padding import data_rows, padded_records, record_lengths, trimmed
from .._common._transform import Transform
from ._problem import FitProblem


def simulated_observations(model, ts, *, adjoint, max_steps: int, rtol, atol, solver=None):
    """What `model` shows at the times `ts` (s, `(k,)`): its observables `(k, c)` along its
    simulation from t = 0 (`model.observe`, SI) by `solver` (`simulate`'s default where
    `None`), inf where the integration failed. `rtol` and `atol` may be traced."""
    solution = simulate(model, ts, adjoint=adjoint, throw=False, t0=0.0, max_steps=max_steps,
                        rtol=rtol, atol=atol, solver=solver)
    predicted = jax.vmap(model.observe)(solution.q)
    return jnp.where(solution.result == SimulationResult.successful, predicted, jnp.inf)


def weighted_residuals(predicted, data, sigma, weight=None, present=None
                       ) -> Float[Array, " n"]:
    """`(predicted - data) / sigma` flattened (`(k, c)` arrays, `sigma` `(c,)`), with
    `FAILED_RESIDUAL` where it is not finite (a failed integration: `spineid/identify/_common/_failure.py`); `weight` `(k,)` (1 for a
    sample of the data, 0 for padding) multiplies each sample's row, `present` `(k, c)` (1
    for a value measured, 0 for one not) each entry."""
    residual = guarded((predicted - data) / sigma)
    if weight is not None:
        residual = residual * weight[:, None]
    if present is not None:
        residual = residual * present
    return residual.ravel()


class _Objective(AbstractObjective):
    """Noise-weighted residuals of all load cases, as a function of the parameters."""

    models: tuple
    ts: tuple  # (m,) per load case, padded (module docstring)
    data: tuple  # (m, c) per load case, padded; 0 where not measured
    weights: tuple  # (m,) per load case: 1 for a sample of the data, 0 for padding
    present: tuple  # (m, c) per load case: 1 for a value measured, 0 for one not (NaN)
    sigma: Float[Array, " c"]
    transform: Transform
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    adjoint: diffrax.AbstractAdjoint = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    rtol: float = eqx.field(static=True, default=DEFAULT_RTOL)
    atol: float = eqx.field(static=True, default=DEFAULT_ATOL)
    coarse_rtol: float = eqx.field(static=True, default=DEFAULT_RTOL)
    coarse_atol: float = eqx.field(static=True, default=DEFAULT_ATOL)
    solver: diffrax.AbstractSolver | None = eqx.field(static=True, default=None)
    # Under an autoregressive noise model: each channel's coefficients `(c, q)`, the residuals
    # of each record whitened by them (`whiten_padded`) and `sigma` the innovations' standard
    # deviations; `None`: white noise.
    coefficients: Float[Array, "c q"] | None = None

    def case_prediction(self, theta, case: int, exact=True) -> Float[Array, "k c"]:
        """Model output of load case `case` at physical parameters `theta` (inf if failed);
        `exact` (a boolean, may be traced) false integrates at the coarse tolerances."""
        model = apply_values(self.models[case], self.parameters, theta, record=case)
        if exact is True:
            rtol, atol = self.rtol, self.atol
        else:
            rtol = jnp.where(exact, self.rtol, self.coarse_rtol)
            atol = jnp.where(exact, self.atol, self.coarse_atol)
        return simulated_observations(model, self.ts[case], adjoint=self.adjoint,
                                      max_steps=self.max_steps, rtol=rtol, atol=atol,
                                      solver=self.solver)

    def _weighted(self, predicted, case: int) -> Float[Array, " n"]:
        residuals = weighted_residuals(predicted, self.data[case], self.sigma,
                                       self.weights[case], self.present[case])
        if self.coefficients is None:
            return residuals
        return whiten_padded(residuals.reshape(predicted.shape), self._measured(case),
                             self.coefficients).ravel()

    def _measured(self, case: int):
        # (m, c): 1 for a value of the data measured, 0 for padding or a value not measured.
        return self.weights[case][:, None] * self.present[case]

    @property
    def inexact_jacobians(self) -> bool:
        """Whether the Jacobians on the way are taken at coarser ODE tolerances."""
        return (self.coarse_rtol, self.coarse_atol) != (self.rtol, self.atol)

    def lengths(self) -> list[int]:
        """Samples of data per load case (concrete: not under `jit`)."""
        return record_lengths(self.weights)

    def samples(self) -> Float[Array, ""]:
        """The number of residuals that are data, values measured (an array, so that records
        of different lengths padded alike share a compilation of the solver that counts
        them)."""
        # (Under a noise model each run of values between gaps loses its first `order`.)
        if traced(self.weights) or traced(self.present):
            masks = [self._measured(case) for case in range(len(self.weights))]
            if self.coefficients is not None:
                masks = [whitening_kept(mask, self.coefficients) for mask in masks]
            return sum(jnp.sum(mask) for mask in masks).astype(int)
        masks = [np.asarray(w)[:, None] * np.asarray(p)
                 for w, p in zip(self.weights, self.present)]
        if self.coefficients is not None:
            coefficients = np.asarray(self.coefficients)
            masks = [whitening_kept(mask, coefficients) for mask in masks]
        return np.asarray(int(sum(np.sum(mask) for mask in masks)))  # (no jnp program)

    def complete(self) -> bool:
        """Whether every value of the data was measured (concrete: not under `jit`)."""
        return all(bool(np.all(np.asarray(p)[:k] > 0))
                   for p, k in zip(self.present, self.lengths()))

    def data_rows(self) -> np.ndarray:
        """`(n_padded,)` bool: which of the flat residuals are data."""
        return data_rows(self.weights, self.sigma.shape[0])

    def trimmed(self, predictions) -> list[np.ndarray]:
        """Per-case model outputs `(m, c)` cut to the data's samples `(k, c)`."""
        return trimmed(predictions, self.weights)

    def case_residuals(self, theta, case: int) -> Float[Array, " n"]:
        """Noise-weighted residuals of one load case, flattened."""
        return self._weighted(self.case_prediction(theta, case), case)

    def residuals_and_predictions(self, theta, exact=True):
        """`(residuals, predictions per case)` at physical parameters, in one pass (`exact`:
        as in `case_prediction`)."""
        predictions = tuple(self.case_prediction(theta, i, exact)
                            for i in range(len(self.models)))
        residuals = jnp.concatenate([self._weighted(p, i) for i, p in enumerate(predictions)])
        return residuals, predictions

    def predictions_from(self, residuals: Float[ArrayLike, " n"]) -> list[np.ndarray]:
        """The model outputs per load case (`(k, c)` each, the data's samples, inf where the
        simulation failed) that produced these noise-weighted `residuals` (padded, `(n_padded,)`):
        `data + sigma r`, no simulation; `NaN` where a value was not measured (`complete`).
        Not for whitened residuals (`coefficients` not all zero)."""
        if self.coefficients is not None and np.any(np.asarray(self.coefficients) != 0):
            raise ValueError("predictions_from: whitened residuals do not give the predictions")
        residuals = np.asarray(residuals)
        sigma = np.asarray(self.sigma)
        predictions, first = [], 0
        for data, present, k in zip(self.data, self.present, self.lengths()):
            data = np.asarray(data)
            weighted = residuals[first:first + data.size].reshape(data.shape)
            first += data.size
            predictions.append(np.where(
                failed(weighted), np.inf,
                np.where(np.asarray(present) > 0, data + weighted * sigma, np.nan))[:k])
        return predictions

    def physical_residuals(self, theta: Float[Array, " p"], exact=True) -> Float[Array, " n"]:
        """Residuals at physical parameter values `theta`, shape `(n_padded,)` (zero beyond
        the data: `data_rows`)."""
        return self.residuals_and_predictions(theta, exact)[0]

    def at_precision(self, u: Float[Array, " p"], exact) -> Float[Array, " n"]:
        """Residuals at unconstrained coordinates `u`, integrated at the fit's tolerances where
        `exact`, at the coarse ones otherwise (`levenberg_marquardt(inexact_jacobians=True)`)."""
        return self.physical_residuals(self.transform.to_physical(u), exact)

    def __call__(self, u: Float[Array, " p"], args=None) -> Float[Array, " n"]:
        """Residuals at unconstrained coordinates `u` (the solver's `residuals(params, args)`)."""
        return self.physical_residuals(self.transform.to_physical(u))


def _objective(problem: FitProblem, sigma: np.ndarray, transform: Transform, adjoint, max_steps,
               rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, coarse_rtol=None, coarse_atol=None,
               coefficients=None):
    ts, data, weights = padded_records(problem.measurements)
    present = tuple((~np.isnan(d)).astype(float) for d in data)
    return _Objective(
        models=problem.models,
        ts=tuple(map(floats, ts)),
        data=tuple(floats(np.nan_to_num(d, nan=0.0)) for d in data),
        weights=tuple(map(floats, weights)),
        present=tuple(map(floats, present)),
        sigma=floats(sigma),
        transform=transform,
        parameters=problem.parameters,
        adjoint=adjoint,
        max_steps=max_steps,
        rtol=rtol,
        atol=atol,
        coarse_rtol=rtol if coarse_rtol is None else coarse_rtol,
        coarse_atol=atol if coarse_atol is None else coarse_atol,
        coefficients=None if coefficients is None or np.size(coefficients) == 0
        else floats(coefficients),
        solver=problem.simulation_solver,
    )


def forward_objective(problem: FitProblem, sigma, transform: Transform | None = None,
                      coefficients=None) -> _Objective:
    """The residual objective of `problem` with noise weights `sigma` `(c,)` for forward-mode
    sensitivities (analyses, designs, vmapped fits, posteriors), integrated at the problem's
    own `simulation_rtol`, `simulation_atol` and `simulation_max_steps`; `transform` default
    `problem.transform()`; `coefficients` `(c, q)`: whitened by each channel's autoregression
    (`sigma` then the innovations' deviations; `_Objective.coefficients`)."""
    return _objective(problem, sigma, problem.transform() if transform is None else transform,
                      diffrax.ForwardMode(), problem.simulation_max_steps,
                      rtol=problem.simulation_rtol, atol=problem.simulation_atol,
                      coefficients=coefficients)


def residual_blocks(objective: _Objective, theta) -> list[np.ndarray]:
    """Raw residuals `fit - data` per load case `(k, c)` (SI, neither weighted nor whitened) at
    the physical parameters `theta` `(p,)`; `NaN` where a value was not measured,
    `FAILED_RESIDUAL` where the simulation failed."""
    unit = dataclasses.replace(objective, sigma=jnp.ones_like(objective.sigma),
                               coefficients=None)
    c, theta = objective.sigma.shape[0], jnp.asarray(theta)
    return [np.where(np.asarray(objective.present[i])[:k] > 0,
                     np.asarray(unit.case_residuals(theta, i)).reshape(-1, c)[:k], np.nan)
            for i, k in enumerate(objective.lengths())]


@eqx.filter_jit
def _evaluate(objective: _Objective, theta):
    # Everything a result needs in one compiled pass: the noise-weighted sensitivity matrix
    # dr/dtheta (forward mode, physical units), the residuals and the predicted trajectories
    # (the auxiliary output of the same jacfwd).
    forward = dataclasses.replace(objective, adjoint=diffrax.ForwardMode())

    def residuals_with_aux(th):
        residuals, predictions = forward.residuals_and_predictions(th)
        return residuals, (residuals, predictions)

    jacobian, (residuals, predictions) = jax.jacfwd(residuals_with_aux, has_aux=True)(theta)
    return jacobian, residuals, predictions


@eqx.filter_jit
def _cost(objective: _Objective, u):
    return 0.5 * jnp.sum(objective(u) ** 2)


def resolved_scales(jacobian, values, scales) -> np.ndarray:
    """`scales` `(p,)` with each parameter whose value is zero (a coupling term of a stiffness
    matrix, an offset) given the magnitude that makes its column of the sensitivities
    `jacobian` `(n, p)` (SI) as large as the median of the others' (`|theta_k| ||J_k||`); the
    others, and zero columns, unchanged. One SI unit, the usual stand-in for a magnitude, can
    be a millionth of what the data resolve of such a parameter: rank decisions then call it
    unidentifiable (measured: 11 of the 21 entries of a full bushing matrix, all determined by
    three load cases)."""
    values, scales = np.asarray(values, dtype=float), np.asarray(scales, dtype=float)
    zero = values == 0
    norms = np.linalg.norm(np.asarray(jacobian, dtype=float), axis=0)
    others = ~zero & (norms > 0) & np.isfinite(norms)
    if not np.any(zero) or not np.any(others) or not np.all(np.isfinite(norms)):
        return scales
    typical = np.median(np.abs(values[others]) * norms[others])
    return np.where(zero & (norms > 0), typical / np.where(norms > 0, norms, 1.0), scales)


def sensitivity_scales(objective: _Objective, values, transform: Transform) -> Transform:
    """`transform` with the scale of each unbounded parameter whose start is zero set by
    `resolved_scales` from the sensitivities at the start: with one SI unit the fit barely
    moved such a parameter (measured: the 21 entries of a full bushing matrix from three load
    cases, 11 left at their starts as 'not identifiable', 83 steps from the truth; 25 with
    this). Unchanged, and nothing evaluated, when no parameter needs it."""
    values = np.asarray(values, dtype=float)
    zero = ~np.isfinite(np.asarray(transform.lower)) & (values == 0)
    if not np.any(zero):
        return transform
    jacobian = np.asarray(_evaluate(objective, jnp.asarray(values))[0])
    resolved = resolved_scales(jacobian, values, value_scales(values, transform))
    scale = np.where(zero, resolved, np.asarray(transform.scale))
    return eqx.tree_at(lambda t: t.scale, transform, jnp.asarray(scale))


def measured_sensitivities(problem: FitProblem, measured: Sequence[str], values
                           ) -> np.ndarray:
    """The noise-weighted sensitivities of the channels `measured` of a one-experiment
    `problem` (a design's candidate) at the parameter values `values` (`(p,)`, SI):
    `(k c, p)`, d(prediction/sigma)/d theta by forward mode through the ODE, rows sample by
    sample, channels in the model's order. Raises `RuntimeError` where the solver gives up."""
    channels = problem.channels
    sigma = np.array([problem.noise[c] for c in channels])
    objective = forward_objective(problem, sigma)
    jacobian = np.asarray(_evaluate(objective, jnp.asarray(values, dtype=float))[0])
    jacobian = jacobian[objective.data_rows()]  # (the padding off: the data's samples only)
    kept = [channels.index(c) for c in channels if c in measured]
    jacobian = jacobian.reshape(-1, len(channels), jacobian.shape[-1])[:, kept]
    return jacobian.reshape(-1, jacobian.shape[-1])
