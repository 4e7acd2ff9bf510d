"""Least-squares identification through the ODE solve: the problem, the solvers, the result.

The residuals are `r = (observe(simulate(model(theta))) - data) / sigma`, stacked over samples,
channels and load cases (Liu 2001, eq 2-24, with noise weighting). Levenberg-Marquardt gets its
Jacobian by forward-mode autodiff through diffrax; first-order methods (optax) use reverse mode.
"""

import time
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..elements._planar_springs import VectorSprings
from ..simulation._simulate import DEFAULT_ATOL, DEFAULT_RTOL
from ._goodness import assess_fit
from ._least_squares import DECREMENT_TOL, levenberg_marquardt
from ._objective import FAILED_RESIDUAL, _cost, _evaluate, _Objective, _objective, _scales
from ._problem import FitProblem, check_noise, noise_from_residuals
from ._result import FitResult, VECTOR_MEASURE_NOTE, _vector_spring_moments
from ._solvers import (
    BATCH_SOLVER, DEFAULT_SOLVER, SOLVERS, _progress_printer, _solve_jaxopt_lm,
    _solve_jaxopt_lm_showing_progress, _solve_lm, _solve_optax,
)
from ._uncertainty import Identifiability, fisher_analysis


# A parameter closer to a bound than this fraction of its standard error counts as on it.
BOUND_STDERR_FRACTION = 0.05


def fit(
    problem: FitProblem,
    *,
    solver: str = DEFAULT_SOLVER,
    starts: int = 1,
    seed: int = 0,
    start_spread: float = 1.0,
    max_steps: int | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    decrement_tol: float = DECREMENT_TOL,
    learning_rate: float = 0.05,
    batch_size: int | None = None,
    simulation_max_steps: int = 20_000,
    simulation_rtol: float = DEFAULT_RTOL,
    simulation_atol: float = DEFAULT_ATOL,
    jacobian_rtol: float | None = None,
    jacobian_atol: float | None = None,
    progress: bool = False,
) -> FitResult:
    """Fit the free parameters of `problem` by least squares through the ODE solve.

    **Arguments:**
    - `solver`: `"lm"` (spineid's Levenberg-Marquardt, `spineid.levenberg_marquardt`, the default),
      `"jaxopt-lm"` or `"optimistix-lm"`, all with Jacobians by forward-mode autodiff through
      diffrax; `"adam"` or `"lbfgs"` (optax, gradients by reverse mode) for many parameters.
    - `starts`: number of starts; start 0 is the model's values, the others are drawn with
      `seed`, log-normally around it (`start_spread` in unconstrained units), solved together
      with `vmap` (Levenberg-Marquardt starts by `BATCH_SOLVER`). The lowest cost wins.
    - `max_steps`: solver iterations (default 200 for LM, 2000 for adam/lbfgs).
    - `rtol`, `atol`: LM termination tolerances on the step in unconstrained parameters
      (relative) and on the gradient of the cost.
    - `decrement_tol`: `"lm"` also stops when the cost can fall by less than this (half
      chi-square units, scaled by the reduced chi-square when it exceeds 1): the default stops
      within about 0.01 standard errors of the optimum. 0 switches this test off.
    - `learning_rate`: for adam.
    - `batch_size`: with adam, fit stochastic mini-batches of this many load cases per step
      (drawn with `seed`) instead of all of them.
    - `simulation_max_steps`: ODE steps allowed per simulation; a trial point that needs more
      counts as failed and the solver backs off.
    - `simulation_rtol`, `simulation_atol`: ODE tolerances inside the fit. The defaults are
      `simulate`'s; looser values are faster and harmless while the integration error stays far
      below the measurement noise.
    - `jacobian_rtol`, `jacobian_atol`: ODE tolerances of the Jacobians that `"lm"` takes on
      the way to the optimum (the residuals, and the Jacobian that confirms the stop and gives
      the standard errors, use the simulation tolerances; `spineid.levenberg_marquardt`). Default:
      `simulation_rtol` times 100, at most 1e-3 and never tighter than `simulation_rtol`, and
      `simulation_atol` scaled by the same factor. `jacobian_rtol=simulation_rtol` takes every
      Jacobian at the simulation tolerances.
    - `progress`: print the solver's progress.

    **Returns:** a `FitResult`: values, Cramer-Rao standard errors, correlations,
    identifiability (SVD of the noise-weighted sensitivities), convergence and residuals.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver {solver!r}: expected one of {list(SOLVERS)}")
    if starts < 1:
        raise ValueError(f"starts={starts}: expected at least 1")
    if batch_size is not None and (solver != "adam" or
                                   not 1 <= batch_size <= len(problem.measurements)):
        raise ValueError(
            f"batch_size={batch_size}: mini-batches need solver='adam' and 1 <= batch_size <= "
            f"{len(problem.measurements)} (the number of load cases)"
        )
    first_order = solver in ("adam", "lbfgs")
    if jacobian_rtol is None:
        jacobian_rtol = max(simulation_rtol, min(100.0 * simulation_rtol, 1e-3))
    if jacobian_atol is None:
        jacobian_atol = simulation_atol * jacobian_rtol / simulation_rtol
    if jacobian_rtol < simulation_rtol or jacobian_atol < simulation_atol:
        raise ValueError(
            f"jacobian_rtol={jacobian_rtol}, jacobian_atol={jacobian_atol}: the Jacobians' ODE "
            f"tolerances cannot be tighter than the simulation's ({simulation_rtol}, "
            f"{simulation_atol})"
        )
    inexact = jacobian_rtol != simulation_rtol or jacobian_atol != simulation_atol
    max_steps = max_steps or (2000 if first_order else 200)
    clock = time.perf_counter()
    transform = problem.transform()
    adjoint = diffrax.RecursiveCheckpointAdjoint() if first_order else diffrax.ForwardMode()
    noise_estimated = problem.noise is None
    if noise_estimated:
        # Provisional weights: comparable channels; the real noise level comes after the fit.
        sigma = np.maximum(problem.channel_ranges(), 1e-12) * 1e-3
    else:
        sigma = np.array([problem.noise[c] for c in problem.channels])

    def solve(objective, u0):
        if solver == "lm" and u0.ndim == 1:
            solution = levenberg_marquardt(objective.at_precision if inexact else objective, u0,
                                           max_steps=max_steps, decrement_tol=decrement_tol,
                                           xtol=rtol, gtol=atol, inexact_jacobians=inexact,
                                           progress=progress)
            # Its last exact forward-mode pass is at the solution (or one small final step
            # before it): the cost and the sensitivities of the result come from the solver
            # instead of being computed again.
            return (solution.value, solution.converged, solution.steps,
                    (solution.cost, solution.residuals, solution.jacobian))
        if solver in ("lm", "jaxopt-lm", "optimistix-lm") and u0.ndim == 2:
            return eqx.filter_vmap(
                lambda start: _solve_lm(objective, start, rtol, atol, max_steps, False)
            )(u0) + (None,)
        if solver == "optimistix-lm":
            return _solve_lm(objective, u0, rtol, atol, max_steps,
                             _progress_printer(progress and u0.ndim == 1)) + (None,)
        if solver == "jaxopt-lm" and progress and u0.ndim == 1:
            return _solve_jaxopt_lm_showing_progress(objective, u0, rtol, atol,
                                                     max_steps) + (None,)
        if solver == "jaxopt-lm":
            return _solve_jaxopt_lm(objective, u0, rtol, atol, max_steps) + (None,)
        return _solve_optax(objective, u0, solver, learning_rate, max_steps, batch_size,
                            jax.random.PRNGKey(seed)) + (None,)

    tolerances = dict(rtol=simulation_rtol, atol=simulation_atol, coarse_rtol=jacobian_rtol,
                      coarse_atol=jacobian_atol)
    objective = _objective(problem, sigma, transform, adjoint, simulation_max_steps, **tolerances)
    n_free = len(problem.parameters)
    key = jax.random.PRNGKey(seed)
    starts_u = jnp.concatenate(
        [jnp.zeros((1, n_free)),
         start_spread * jax.random.normal(key, (starts - 1, n_free))]
    )
    start_costs = []
    best = None
    chunk = 8
    for first in range(0, starts, chunk):
        batch = starts_u[first:first + chunk]
        if starts == 1:
            results = [solve(objective, batch[0])]
        elif first_order:
            results = [r + (None,) for r in zip(*eqx.filter_vmap(
                lambda u0: solve(objective, u0)[:3])(batch))]
        else:
            u, converged, steps, _ = solve(objective, batch)
            results = [r + (None,) for r in zip(u, converged, steps)]
        for u, converged, steps, linearisation in results:
            cost = float(_cost(objective, u) if linearisation is None else linearisation[0])
            start_costs.append(cost)
            if best is None or cost < best[3]:
                best = (u, bool(converged), int(steps), cost, linearisation)
        if progress and starts > 1:
            print(f"  starts {min(first + chunk, starts)}/{starts} done, best cost "
                  f"{best[3]:.6e}", flush=True)
    u, converged, n_steps, cost, linearisation = best

    theta = np.asarray(transform.to_physical(u))
    if noise_estimated:
        sigma = _estimate_noise(problem, theta, objective)
        if progress:
            print("  noise estimated from the residuals: "
                  + ", ".join(f"{c}={v:.3g}" for c, v in zip(problem.channels, sigma))
                  + "; refining the fit with these weights", flush=True)
        objective = _objective(problem, sigma, transform, adjoint, simulation_max_steps,
                               **tolerances)
        u, converged, steps, linearisation = solve(objective, u)
        n_steps += int(steps)
        converged = bool(converged)
        theta = np.asarray(transform.to_physical(u))
    # The transform is elementwise: dr/dtheta = dr/du / (dtheta/du), column by column.
    slope = np.asarray(jax.jvp(transform.to_physical, (u,), (jnp.ones_like(u),))[1])
    if linearisation is not None and np.all(np.abs(slope) > 0):
        residuals, jacobian = linearisation[1], np.asarray(linearisation[2]) / slope
        predictions = objective.predictions_from(residuals)
    else:  # no Jacobian at the solution yet, or a parameter pressed flat against its bound
        jacobian, residuals, predictions = _evaluate(objective, jnp.asarray(theta))
    jacobian, residuals = np.asarray(jacobian), np.asarray(residuals)
    predictions = [np.asarray(p) for p in predictions]
    cost = float(0.5 * np.sum(residuals**2))
    failed = bool(np.any(residuals == FAILED_RESIDUAL))

    names = problem.names
    # The statistical stop leaves a parameter that heads for its bound within about 0.01 of
    # its standard error from it (further iterations could gain nothing measurable): that close,
    # it counts as on the bound, where the Cramer-Rao error does not apply.
    unbounded_covariance, _ = fisher_analysis(jacobian, theta, _scales(theta, transform), names)
    at_bound = transform.at_bound(
        theta, within=BOUND_STDERR_FRACTION * np.sqrt(np.diag(unbounded_covariance)))
    covariance, identifiability = fisher_analysis(
        jacobian, theta, _scales(theta, transform), names, ~at_bound
    )
    stderr = np.sqrt(np.diag(covariance))  # NaN where not individually identifiable
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = covariance / np.outer(stderr, stderr)
    warnings = list(identifiability.warnings)
    if identifiability.rank < identifiability.n_parameters and any(
        p.field == "stiffness" and p.element is not None
        and isinstance(problem.models[0].elements[p.element], VectorSprings)
        for p in problem.parameters
    ):
        warnings.append(VECTOR_MEASURE_NOTE)
    for i in np.flatnonzero(at_bound):
        warnings.append(
            f"{names[i]} ended on its bound ({theta[i]:.3g} {problem.parameters[i].unit}, within "
            f"{BOUND_STDERR_FRACTION:g} of a standard error of it); it is reported without a "
            f"standard error."
        )
    if failed:
        warnings.append("The simulation failed at the returned parameters; do not use them.")
        converged = False
    if not np.any(np.abs(jacobian) > 0):
        warnings.append(
            "The data are insensitive to every free parameter (zero sensitivity): nothing "
            "excites the joint in a way these parameters affect."
        )
    message = "converged" if converged else (
        "the solver stopped without meeting its tolerances (max_steps reached or failed); "
        "try more steps, more starts or another solver"
    )
    result = FitResult(
        names=names,
        units=[p.unit for p in problem.parameters],
        start=problem.start,
        values=theta,
        stderr=stderr,
        at_bound=at_bound,
        covariance=covariance,
        correlation=correlation,
        cost=cost,
        n_data=problem.n_data,
        converged=bool(converged),
        message=message,
        n_steps=n_steps,
        solver=solver,
        start_costs=start_costs,
        noise={c: float(s) for c, s in zip(problem.channels, sigma)},
        noise_estimated=noise_estimated,
        identifiability=identifiability,
        moments={},
        predictions=predictions,
        measurements=problem.measurements,
        warnings=warnings,
        seconds=time.perf_counter() - clock,
        goodness_of_fit=assess_fit(
            [(m.values - p) / sigma for m, p in zip(problem.measurements, predictions)],
            problem.channels, identifiability.rank, noise_given=not noise_estimated,
            sigma=dict(zip(problem.channels, map(float, sigma))),
            units=dict(zip(problem.channels, problem.models[0].observable_units)),
            noise_max=problem.noise_max),
    )
    result.moments = _vector_spring_moments(problem, theta, identifiability)
    return result


def _noise_array(problem: FitProblem, noise: dict[str, float] | None) -> np.ndarray:
    noise = problem.noise if noise is None else check_noise(problem.channels, noise)
    if noise is None:
        raise ValueError("give the measurement noise per channel (noise=...) for this analysis")
    return np.array([noise[c] for c in problem.channels])


def analyse(
    problem: FitProblem, values=None, noise: dict[str, float] | None = None
) -> tuple[np.ndarray, Identifiability]:
    """What the data of `problem` would determine at parameter `values` (default: the start).

    Computes the noise-weighted sensitivity matrix by forward-mode autodiff through the ODE and
    returns `(covariance, identifiability)` as `fisher_analysis` does: the Cramer-Rao bound and
    the identifiable combinations. Useful to design experiments before fitting. `noise`
    defaults to the problem's.
    """
    theta = problem.start if values is None else np.asarray(values, dtype=float)
    transform = problem.transform()
    objective = _objective(
        problem, _noise_array(problem, noise), transform, diffrax.ForwardMode(), 20_000
    )
    jacobian = np.asarray(_evaluate(objective, jnp.asarray(theta))[0])
    return fisher_analysis(jacobian, theta, _scales(theta, transform), problem.names)


@eqx.filter_jit
def _solve_batch(objective, batch, solver: str, rtol: float, atol: float, max_steps: int):
    # vmapped Levenberg-Marquardt over data sets; at module level so that a second call with
    # the same problem and shapes reuses the compilation.
    def one(case_data):
        single = eqx.tree_at(lambda o: o.data, objective, case_data)
        u0 = jnp.zeros_like(single.transform.start)
        if solver == "optimistix-lm":
            u, converged, _ = _solve_lm(single, u0, rtol, atol, max_steps, False)
        else:
            u, converged, _ = _solve_jaxopt_lm(single, u0, rtol, atol, max_steps)
        theta = single.transform.to_physical(u)
        jacobian, residuals, _ = _evaluate(single, theta)
        return theta, jacobian, converged, 0.5 * jnp.sum(residuals**2)

    return jax.vmap(one)(batch)


def fit_many(
    problem: FitProblem,
    data: Sequence[np.ndarray],
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 200,
    solver: str = BATCH_SOLVER,
) -> dict[str, np.ndarray]:
    """Fit the same problem to a batch of data sets at once (`vmap` over LM solves).

    **Arguments:** `data`, one array per load case of shape `(batch, k, c)` (e.g. noise draws
    for a Monte Carlo study); the problem's noise must be given; `solver` one of the
    Levenberg-Marquardt solvers (`"jaxopt-lm"`, `"optimistix-lm"`).

    **Returns:** `values` `(batch, p)`, Cramer-Rao `stderr` `(batch, p)` (full-rank problems;
    NaN where the Fisher information is singular), `converged` `(batch,)`, `cost` `(batch,)`.
    """
    if solver not in ("jaxopt-lm", "optimistix-lm"):
        raise ValueError(f"fit_many solver {solver!r}: expected 'jaxopt-lm' or 'optimistix-lm'")
    sigma = _noise_array(problem, None)
    objective = _objective(problem, sigma, problem.transform(), diffrax.ForwardMode(), 20_000)
    batch = tuple(jnp.asarray(d) for d in data)
    if len(batch) != len(problem.measurements):
        raise ValueError(f"{len(batch)} data arrays for {len(problem.measurements)} load cases")

    theta, jacobian, converged, cost = _solve_batch(objective, batch, solver, rtol, atol,
                                                    max_steps)
    fisher = np.einsum("bni,bnj->bij", np.asarray(jacobian), np.asarray(jacobian))
    stderr = np.full(np.shape(theta), np.nan)
    for b, information in enumerate(fisher):
        if np.linalg.cond(information) < 1e12:
            stderr[b] = np.sqrt(np.diag(np.linalg.inv(information)))
    return {"values": np.asarray(theta), "stderr": stderr, "converged": np.asarray(converged),
            "cost": np.asarray(cost)}


def _estimate_noise(problem, theta, objective: _Objective) -> np.ndarray:
    """Per-channel noise from the residuals of a fit, corrected for the fitted degrees of
    freedom: sigma_c^2 = sum r_c^2 / (n_c (1 - p / n))."""
    unit = eqx.tree_at(lambda o: o.sigma, objective, jnp.ones(len(problem.channels)))
    n_channels = len(problem.channels)
    raw = np.concatenate([
        np.asarray(unit.case_residuals(jnp.asarray(theta), i)).reshape(-1, n_channels)
        for i in range(len(problem.models))
    ])
    return noise_from_residuals(raw, len(problem.parameters), problem.channel_ranges())
