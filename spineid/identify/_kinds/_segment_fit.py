"""Identification of motion-segment parameters from quasi-static load-displacement results:
least squares through the vmapped equilibrium solve of `spineid.equilibrium`.

Data are rows of a quasi-static test (`spineid.QuasiStaticTest`: the load on the
upper vertebra and its displacement from the reference pose, `dx, dy, dz` in m and the 1-2-3
angles `b1, b2, b3` in rad). Residuals are `(displacement(theta) - measured) / sigma` per
channel; the derivative of the equilibrium with respect to the parameters comes from the
implicit function theorem (optimistix's implicit adjoint, forward mode), so a fit costs a few
Newton solves per Levenberg-Marquardt step, all load cases at once. The minimiser is spineid's
Levenberg-Marquardt (`spineid.LevenbergMarquardt`), which runs its stepwise form for this
objective (`stepwise`): compiling the equilibria dominates a segment fit, so the loop runs in
Python over one compiled function that gives residuals and Jacobian together. Standard errors and the
identifiability report are those of the trajectory fits (`spineid.Identifiability`): a facet
stiffness is determined only by cases that bring the facets into contact.
"""

import dataclasses
import time
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...elements._parameters import apply_values, Parameter, select_parameters
from ...io._measurements import DEFLECTION_COLUMNS, QuasiStaticTest
from ...io._model_file import ModelFile
from ...models._spatial_pair import SpatialPair
from ...simulation._equilibrium import equilibrium, equilibrium_change
from .._common._abstract_objective import AbstractObjective
from .._common._analysis import analyse_parameters, not_converged_note, physical_jacobian
from .._common._failure import failed, guarded
from .._common._goodness import assess_fit
from .._common._noise import (
    check_noise,
    noise_from_residuals,
    NOISE_SETTLED,
    settle_noise,
    unsettled_note,
)
from .._common._result_family import AbstractParameterFit
from .._common._transform import Transform
from .._solvers import LevenbergMarquardt, MultiStart
from ._run import check_kind_solver, run_solver


class _SegmentObjective(AbstractObjective):
    """Noise-weighted displacement residuals of every row of a quasi-static test, as a function
    of the unconstrained parameters `u` (`(p,)`): `(displacement(theta(u)) - measured) / sigma`,
    `(k * 6,)`, row by row; a row without equilibrium gets `FAILED_RESIDUAL` in every channel,
    so that a solver refuses the step. A module (not a closure), so that the compiled solver
    is shared by every fit of the same layout (the noise re-estimate refits with the same
    compilation)."""

    model: SpatialPair
    loads: Float[Array, "k 6"]
    data: Float[Array, "k 6"]
    sigma: Float[Array, " 6"]
    transform: Transform
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    stepwise: ClassVar[bool] = True  # (compiling the equilibria dominates a fit)

    def solve_all(self, theta):
        """Displacements `(k, 6)` (m, rad) and equilibrium flags `(k,)` at physical `theta`."""
        fitted = apply_values(self.model, self.parameters, theta)
        solved = jax.vmap(lambda load: equilibrium(fitted, load))(self.loads)
        # (A row without equilibrium is given a fixed large residual by the caller.)
        changes = jax.vmap(lambda one: equilibrium_change(fitted, one))(solved)
        return changes, solved.converged

    def __call__(self, u, args=None):
        displacements, converged = self.solve_all(self.transform.to_physical(u))
        misfit = (displacements - self.data) / self.sigma
        return guarded(misfit, converged[:, None]).ravel()

    def predictions_from(self, residuals) -> tuple[np.ndarray, np.ndarray]:
        """The displacements `(k, 6)` and equilibrium flags `(k,)` that produced `residuals`
        (`data + sigma r`; no equilibrium solved again: compiling one costs seconds)."""
        weighted = np.asarray(residuals).reshape(self.data.shape)
        solved = ~np.all(failed(weighted), axis=1)
        return np.asarray(self.data) + weighted * np.asarray(self.sigma), solved


@dataclasses.dataclass(frozen=True)
class SegmentFit(AbstractParameterFit):
    """The outcome of `fit_segment`.

    Fields: those of every parameter fit (`spineid.AbstractParameterFit`; `noise` per channel,
    SI; the `goodness_of_fit`: test rows have no order, so with the noise estimated only its
    plausibility is checked), and `n_steps`, `predicted` (`(k, 6)` displacements of the fitted
    model), `measured` (`(k, 6)`), `equilibria_converged` (`(k,)`).
    """

    n_steps: int
    predicted: np.ndarray
    measured: np.ndarray
    equilibria_converged: np.ndarray

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid segment --fit`, docs/cli.md)."""
        return self.common_report() | {
            "n_steps": int(self.n_steps),
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated},
            "parameters": self.parameter_entries(),
            "correlation": self.correlation_report(),
            "identifiability": self.identifiability.to_dict(),
            "equilibria_converged": [bool(x) for x in self.equilibria_converged],
        }

    def summary(self) -> str:
        """A human-readable table of the fit."""
        lines = [f"segment fit: {'converged' if self.converged else 'NOT converged'} after "
                 f"{self.n_steps} steps in {self.seconds:.2f} s; cost {self.cost:.6g} "
                 f"({self.n_data} data values)", *self.parameter_table()]
        return "\n".join(lines + self.verdict_lines())


def fit_segment(model_file: ModelFile, test: QuasiStaticTest, free, noise=None,
                solver: LevenbergMarquardt | MultiStart | None = None, *,
                progress: bool = False) -> SegmentFit:
    """Fit the free parameters of a segment model (a `spatial_pair` model file) to the
    displacements of a quasi-static test, through the equilibrium solve of every row.

    **Arguments:** `model_file` (its values of free parameters are the start), `test` (rows of
    load and displacement), `free` (groups such as `facets.stiffness`, `bushing.stiffness`,
    `ligaments.stiffness`, or parameter names), `noise` (`{dx, dy, dz: m, b1, b2, b3: rad}`;
    default: estimated per channel from the residuals, the fit refined with it until the
    estimate settles, `settle_noise`),
    `solver` (a `spineid.LevenbergMarquardt` carrying `max_steps` and the stopping
    tolerances, default `LevenbergMarquardt()`; or a `spineid.MultiStart` of one, its starts
    drawn around the model file's values: `spineid/identify/_kinds/_run.py`). The residuals
    are those of the module docstring; spineid's Levenberg-Marquardt (`spineid.levenberg_marquardt`, the one every
    fit uses) minimises them, with the Jacobian through the equilibrium solve by the implicit
    function theorem. `progress` prints every iteration (the first waits for the compilation of
    the equilibria's Jacobian, about 20 s on a 2-core CPU).

    **Returns:** a `SegmentFit`. Raises `ValueError` for a model that is not a spatial pair,
    fewer data than parameters, bad noise or a solver it cannot run.
    """
    started = time.perf_counter()
    if solver is None:
        solver = LevenbergMarquardt()
    check_kind_solver("fit_segment", solver)
    local = solver.local()
    model = model_file.model
    if not isinstance(model, SpatialPair):
        raise ValueError(f"{model_file.source}: a segment fit needs a kind = \"spatial_pair\" "
                         "model")
    parameters = select_parameters(model_file.parameters, free, model_file.source)
    measured = np.asarray(test.deflections)
    if measured.size <= len(parameters):
        raise ValueError(f"{test.source}: {measured.size} data values for {len(parameters)} "
                         "free parameters: need more load cases")
    sigma_given = (None if noise is None else
                   np.array(list(check_noise(DEFLECTION_COLUMNS, noise).values())))
    start = np.array([p.value(model) for p in parameters])
    transform = Transform.around(parameters, start, model_file.source)
    ranges = np.maximum(np.ptp(measured, axis=0), np.abs(measured).max(axis=0))
    sigma = sigma_given if sigma_given is not None else np.maximum(1e-3 * ranges, 1e-12)
    objective = _SegmentObjective(model, jnp.asarray(test.loads), jnp.asarray(measured),
                                  jnp.asarray(sigma), transform, tuple(parameters))

    # With the noise to be estimated, the first pass's weights stand in for it
    # (`provisional`): its statistical stop is measured against the residuals' own level.
    solution, how, notes = run_solver(solver, objective, transform, np.zeros(len(parameters)),
                                      progress=progress, provisional=sigma_given is None)
    converged, steps = solution.converged, solution.steps
    if isinstance(solver, MultiStart):
        notes.insert(0, f"solved by {how}")
    if sigma_given is None:
        def estimate(fitted):
            solution, objective = fitted
            raw = objective.predictions_from(solution.residuals)[0] - measured
            return noise_from_residuals(raw, len(parameters), ranges)

        def refit(sigma, previous):
            refitted = dataclasses.replace(objective, sigma=jnp.asarray(sigma))
            start = (solution if previous is None else previous[0]).value
            return local.solve(refitted, start, progress), refitted

        fits, sigma, change = settle_noise(refit, estimate, estimate((solution, objective)))
        if change > NOISE_SETTLED:
            notes.append(unsettled_note(change))
        solution, objective = fits[-1]
        converged, steps = solution.converged, steps + sum(f[0].steps for f in fits)
    values, jacobian = physical_jacobian(solution.jacobian, solution.value, transform)
    predicted, equilibria = objective.predictions_from(solution.residuals)
    names = [p.name for p in parameters]
    analysis = analyse_parameters(jacobian, values, names, [p.unit for p in parameters],
                                  transform)
    messages = list(analysis.warnings) + notes
    if not np.all(equilibria):
        messages.append("no equilibrium found for rows "
                        + ", ".join(str(i + 1) for i in np.flatnonzero(~equilibria))
                        + " at the fitted values")
    if not converged:
        messages.append(not_converged_note(local.max_steps))
    residuals = (predicted - measured) / sigma
    return SegmentFit(
        names=names, units=[p.unit for p in parameters], start=start, values=values,
        stderr=analysis.stderr, at_bound=analysis.at_bound, correlation=analysis.correlation,
        cost=0.5 * float(np.sum(residuals**2)), n_data=int(measured.size), converged=converged,
        n_steps=steps, noise=dict(zip(DEFLECTION_COLUMNS, map(float, sigma))),
        noise_estimated=sigma_given is None, identifiability=analysis.identifiability,
        predicted=predicted, measured=measured, equilibria_converged=equilibria,
        warnings=messages, seconds=time.perf_counter() - started,
        goodness_of_fit=assess_fit(
            [np.where(equilibria[:, None], residuals, np.inf)], DEFLECTION_COLUMNS,
            analysis.identifiability.rank, noise_given=sigma_given is not None,
            sigma=dict(zip(DEFLECTION_COLUMNS, map(float, sigma))),
            units=dict(zip(DEFLECTION_COLUMNS, ("m",) * 3 + ("rad",) * 3)), ordered=False))
