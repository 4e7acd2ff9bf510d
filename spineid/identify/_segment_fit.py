"""Identification of motion-segment parameters from quasi-static load-displacement results:
least squares through the vmapped equilibrium solve of `spineid.equilibrium`.

Data are rows of a quasi-static test (`spineid.QuasiStaticTest`: the load on the
upper vertebra and its displacement from the reference pose, `dx, dy, dz` in m and the 1-2-3
angles `b1, b2, b3` in rad). Residuals are `(displacement(theta) - measured) / sigma` per
channel; the derivative of the equilibrium with respect to the parameters comes from the
implicit function theorem (optimistix's implicit adjoint, forward mode), so a fit costs a few
Newton solves per Levenberg-Marquardt step, all load cases at once. Standard errors and the
identifiability report are those of the trajectory fits (`spineid.Identifiability`): a facet
stiffness is determined only by cases that bring the facets into contact.
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from ..elements._parameters import apply_values, select_parameters
from ..io._measurements import DEFLECTION_COLUMNS, QuasiStaticTest
from ..io._model_file import ModelFile
from ..models._spatial_pair import SpatialPair
from ..simulation._equilibrium import equilibrium, pose_change
from ._result_family import AbstractResult
from ._goodness import GoodnessOfFit, assess_fit
from ._problem import check_noise, noise_from_residuals
from ._transform import Transform
from ._uncertainty import bounded_fisher_analysis, Identifiability


_NO_EQUILIBRIUM = 1e6  # residual (in noise units) of a load case without equilibrium


def _levenberg_marquardt(evaluate, u, sigma, max_steps, rtol=1e-10):
    """Levenberg-Marquardt (Nielsen's damping update) on `evaluate(u, sigma) -> (r, J, _)`.

    Every trial point costs one call of the compiled `evaluate`, which returns the residuals
    and the Jacobian together, so a segment fit compiles one function: the recover-the-truth
    fit of tests/test_segment.py took 16 s in all on a 2-core CPU, against 77 s with
    optimistix's LevenbergMarquardt through the same equilibrium solve (one measurement each,
    same answer), whose time went to compiling its linearisation and transpose.
    Returns `(u, converged, steps)`; converged when the gradient, the relative cost change or
    the step (relative to `u`) falls below `rtol`: the last also when no smaller cost can be
    found at all (noise-free data fitted to roundoff).
    """
    sigma = jnp.asarray(sigma)
    residuals, jacobian = (np.asarray(x) for x in evaluate(jnp.asarray(u), sigma)[:2])
    cost = 0.5 * residuals @ residuals
    damping, growth = None, 2.0
    for step in range(1, max_steps + 1):
        gradient = jacobian.T @ residuals
        normal = jacobian.T @ jacobian
        if damping is None:
            damping = 1e-3 * np.max(np.diag(normal))
        if np.max(np.abs(gradient)) <= rtol * max(cost, 1.0):
            return u, True, step - 1
        change = np.linalg.solve(normal + damping * np.diag(np.maximum(np.diag(normal), 1e-12)),
                                 -gradient)
        trial = u + change
        tiny_step = np.max(np.abs(change)) <= rtol * (1.0 + np.max(np.abs(u)))
        trial_residuals, trial_jacobian, _ = evaluate(jnp.asarray(trial), sigma)
        trial_residuals = np.asarray(trial_residuals)
        trial_cost = 0.5 * trial_residuals @ trial_residuals
        predicted_gain = -(gradient @ change + 0.5 * change @ normal @ change)
        ratio = (cost - trial_cost) / max(predicted_gain, 1e-300)
        if np.isfinite(trial_cost) and ratio > 0:
            relative = (cost - trial_cost) / max(cost, 1e-300)
            u, residuals, jacobian, cost = trial, trial_residuals, np.asarray(trial_jacobian), \
                trial_cost
            damping *= max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3)
            growth = 2.0
            if relative <= rtol or tiny_step:
                return u, True, step
        elif tiny_step:
            return u, True, step
        else:
            damping *= growth
            growth *= 2.0
    return u, False, max_steps


@dataclasses.dataclass
class SegmentFit(AbstractResult):
    """The outcome of `fit_segment`.

    Fields: `names`, `units`, `start`, `values` (SI), `stderr` (Cramer-Rao, NaN where not
    individually identifiable or on a bound), `at_bound`, `correlation`, `cost` (half the sum of
    squared noise-weighted residuals), `n_data`, `converged`, `n_steps`, `noise` (per channel,
    SI) and `noise_estimated`, `identifiability`, `predicted` (`(k, 6)` displacements of the
    fitted model), `measured` (`(k, 6)`), `equilibria_converged` (`(k,)`), `warnings`, `seconds`,
    `goodness_of_fit` (a `GoodnessOfFit`: test rows have no order, so with the noise estimated
    only its plausibility is checked).
    """

    names: list[str]
    units: list[str]
    start: np.ndarray
    values: np.ndarray
    stderr: np.ndarray
    at_bound: np.ndarray
    correlation: np.ndarray
    cost: float
    n_data: int
    converged: bool
    n_steps: int
    noise: dict[str, float]
    noise_estimated: bool
    identifiability: Identifiability
    predicted: np.ndarray
    measured: np.ndarray
    equilibria_converged: np.ndarray
    warnings: list[str]
    seconds: float
    goodness_of_fit: GoodnessOfFit

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid segment --fit`, docs/cli.md)."""
        def number(x):
            return None if not np.isfinite(x) else float(x)

        return {
            "converged": bool(self.converged), "cost": float(self.cost),
            "n_data": int(self.n_data), "n_steps": int(self.n_steps),
            "seconds": float(self.seconds),
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated},
            "parameters": [
                {"name": name, "value": float(self.values[i]), "stderr": number(self.stderr[i]),
                 "unit": self.units[i], "start": float(self.start[i]),
                 "at_bound": bool(self.at_bound[i]),
                 "identifiable": bool(self.identifiability.identifiable[i])}
                for i, name in enumerate(self.names)],
            "correlation": [[number(x) for x in row] for row in self.correlation],
            "identifiability": self.identifiability.to_dict(),
            "equilibria_converged": [bool(x) for x in self.equilibria_converged],
            "warnings": list(self.warnings),
            "goodness_of_fit": self.goodness_of_fit.to_dict(),
        }

    def summary(self) -> str:
        """A human-readable table of the fit."""
        lines = [f"segment fit: {'converged' if self.converged else 'NOT converged'} after "
                 f"{self.n_steps} steps in {self.seconds:.2f} s; cost {self.cost:.6g} "
                 f"({self.n_data} data values)",
                 f"{'parameter':26s} {'start':>12s} {'value':>12s} {'stderr':>10s} {'unit':>8s}"]
        for i, name in enumerate(self.names):
            error = (f"{self.stderr[i]:.3g}" if np.isfinite(self.stderr[i])
                     else ("at bound" if self.at_bound[i] else "not ident."))
            lines.append(f"{name:26s} {self.start[i]:12.6g} {self.values[i]:12.6g} "
                         f"{error:>10s} {self.units[i]:>8s}")
        ident = self.identifiability
        lines.append(f"identifiability: rank {ident.rank} of {ident.n_parameters} free parameters")
        lines += [f"WARNING: {w}" for w in self.warnings]
        lines.append(self.goodness_of_fit.summary())
        return "\n".join(lines)


def fit_segment(model_file: ModelFile, test: QuasiStaticTest, free, noise=None,
                max_steps: int = 100) -> SegmentFit:
    """Fit the free parameters of a segment model (a `spatial_pair` model file) to the
    displacements of a quasi-static test, through the equilibrium solve of every row.

    **Arguments:** `model_file` (its values of free parameters are the start), `test` (rows of
    load and displacement), `free` (groups such as `facets.stiffness`, `bushing.stiffness`,
    `ligaments.stiffness`, or parameter names), `noise` (`{dx, dy, dz: m, b1, b2, b3: rad}`;
    default: estimated per channel from the residuals, then refitted with those weights).

    **Returns:** a `SegmentFit`. Raises `ValueError` for a model that is not a spatial pair,
    fewer data than parameters or bad noise.
    """
    started = time.perf_counter()
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
    start = np.array([float(p.get(model)) for p in parameters])
    transform = Transform.around(parameters, start, model_file.source)
    loads = jnp.asarray(test.loads)
    data = jnp.asarray(measured)

    def solve_all(theta):
        fitted = apply_values(model, parameters, theta)
        solved = jax.vmap(lambda load: equilibrium(fitted, load))(loads)
        return jax.vmap(lambda q: pose_change(fitted, q))(solved.pose), solved.converged

    @jax.jit
    def evaluate(u, sigma):
        # Residuals (noise units; a load case without equilibrium gets a large finite misfit so
        # that the step is refused), their Jacobian with respect to u, and the equilibria.
        def weighted(v):
            displacements, converged = solve_all(transform.to_physical(v))
            misfit = (displacements - data) / sigma
            residuals = jnp.where(converged[:, None], misfit, _NO_EQUILIBRIUM).ravel()
            return residuals, (residuals, displacements, converged)

        jacobian, (residuals, displacements, converged) = jax.jacfwd(weighted, has_aux=True)(u)
        return residuals, jacobian, (displacements, converged)

    ranges = np.maximum(np.ptp(measured, axis=0), np.abs(measured).max(axis=0))
    sigma = sigma_given if sigma_given is not None else np.maximum(1e-3 * ranges, 1e-12)
    u, converged, steps = _levenberg_marquardt(evaluate, np.zeros(len(parameters)), sigma,
                                               max_steps)
    if sigma_given is None:
        raw = np.asarray(evaluate(u, sigma)[2][0]) - measured
        sigma = noise_from_residuals(raw, len(parameters), ranges)
        u, converged, more = _levenberg_marquardt(evaluate, u, sigma, max_steps)
        steps += more
    values = np.asarray(transform.to_physical(u))
    _, jacobian_u, (predicted, equilibria) = evaluate(u, sigma)
    predicted, equilibria = np.asarray(predicted), np.asarray(equilibria)
    # Chain rule from u to the physical parameters: d theta / d u is diagonal.
    slope = np.asarray(jax.vmap(jax.grad(lambda v, i: transform.to_physical(v)[i]),
                                in_axes=(None, 0))(jnp.asarray(u), jnp.arange(len(u))))
    jacobian = np.asarray(jacobian_u) / np.diag(slope)[None, :]
    names = [p.name for p in parameters]
    covariance, identifiability, on_bound = bounded_fisher_analysis(jacobian, values, transform,
                                                                    names)
    stderr = np.sqrt(np.diag(covariance))
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = covariance / np.outer(stderr, stderr)
    messages = list(identifiability.warnings)
    if not np.all(equilibria):
        messages.append("no equilibrium found for rows "
                        + ", ".join(str(i + 1) for i in np.flatnonzero(~equilibria))
                        + " at the fitted values")
    if np.any(on_bound):
        messages.append("on a bound (no standard error): "
                        + ", ".join(n for n, b in zip(names, on_bound) if b))
    if not converged:
        messages.append("Levenberg-Marquardt did not converge within max_steps")
    residuals = (predicted - measured) / sigma
    return SegmentFit(
        names=names, units=[p.unit for p in parameters], start=start, values=values,
        stderr=stderr, at_bound=on_bound, correlation=correlation,
        cost=0.5 * float(np.sum(residuals**2)), n_data=int(measured.size), converged=converged,
        n_steps=steps, noise=dict(zip(DEFLECTION_COLUMNS, map(float, sigma))),
        noise_estimated=sigma_given is None, identifiability=identifiability,
        predicted=predicted, measured=measured, equilibria_converged=equilibria,
        warnings=messages, seconds=time.perf_counter() - started,
        goodness_of_fit=assess_fit(
            [np.where(equilibria[:, None], residuals, np.inf)], DEFLECTION_COLUMNS,
            identifiability.rank, noise_given=sigma_given is not None,
            sigma=dict(zip(DEFLECTION_COLUMNS, map(float, sigma))),
            units=dict(zip(DEFLECTION_COLUMNS, ("m",) * 3 + ("rad",) * 3)), ordered=False))
