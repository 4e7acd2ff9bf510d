"""Least-squares identification through the ODE solve: the problem, the solvers, the result.

The residuals are `r = (observe(simulate(model(theta))) - data) / sigma`, stacked over samples,
channels and load cases (Liu 2001, eq 2-24, with noise weighting). Levenberg-Marquardt gets its
Jacobian by forward-mode autodiff through diffrax; first-order methods (optax) use reverse mode.
"""

import dataclasses
import time
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..models._mechanics import AbstractLagrangianSystem
from ..simulation._modes import linear_modes
from ._objective import _evaluate, _objective, _scales
from ._problem import FitProblem, check_noise
from ._result import FitResult
from ._routines import _solve_jaxopt_lm, _solve_lm
from ._run import _Run
from ._shooting import segments_problem
from ._solvers import (
    BATCH_SOLVER,
    Auto,
    JaxoptLevenbergMarquardt,
    MultipleShooting,
    MultiStart,
    OptimistixLevenbergMarquardt,
    as_solver,
)
from ._uncertainty import Identifiability, fisher_analysis


def ringing_phase(problem: FitProblem) -> float:
    """The most phase (rad) a mode of the problem's models (at their start values, linearised
    about their initial state) runs through while it lasts within its record, simulated from
    t = 0 (`LinearModes.ringing_phase`; the largest over the load cases): `Auto`'s measure of
    a lightly damped problem."""
    phases = [linear_modes(model).ringing_phase(float(m.ts[-1]))  # (simulated from t = 0)
              for model, m in zip(problem.models, problem.measurements)
              if isinstance(model, AbstractLagrangianSystem)]
    return max(phases, default=0.0)


def integrated_implicitly(models) -> bool:
    """Whether any of `models` is integrated by an implicit solver (its `preferred_solver()`,
    e.g. `Kvaerno4` for the stiff head-neck chain). There `Auto` does not turn to multiple
    shooting but to more starts: on the head-neck chain (8 joint angles, the head's position
    observed; experiments/ringing_rule.py) a multiple-shooting fit, whose 16 state unknowns
    per segment are each a forward-mode tangent through the implicit integrator, stopped with
    an `EquinoxRuntimeError` from optimistix's implicit-function derivative (a linear solve
    checked with `throw=True` meeting a non-finite trial stage), and in a second run went on
    for over 15 minutes without finishing. (`fit` catches such a check now: multiple shooting
    falls back to single shooting from the start, a local fit gives its start up; both are
    said in the result's warnings.)"""
    return any(isinstance(model.preferred_solver(), diffrax.AbstractImplicitSolver)
               for model in models if isinstance(model, AbstractLagrangianSystem))


def fit(problem: FitProblem, solver="auto", *, progress: bool = False) -> FitResult:
    """Fit the free parameters of `problem` by least squares through the ODE solve.

    **Arguments:**
    - `problem`: a `FitProblem` (model, data, free parameters, noise, simulation tolerances).
    - `solver`: a solver object carrying its options (`spineid.Auto()`, the default;
      `spineid.LevenbergMarquardt(...)`, `spineid.OptimistixLevenbergMarquardt(...)`,
      `spineid.JaxoptLevenbergMarquardt(...)`, `spineid.Adam(...)`, `spineid.LBFGS(...)`,
      `spineid.MultiStart(inner, n=...)`), or one of the command line's names (`"auto"`,
      `"lm"`, `"jaxopt-lm"`, `"optimistix-lm"`, `"adam"`, `"lbfgs"`) for its defaults.
    - `progress`: print the solver's progress.

    With the noise estimated (`problem.noise` is `None`) the fit runs with provisional weights
    (its statistical stop measured against the level its residuals show), estimates the noise
    per channel from its residuals and refines the fit with those, repeating the estimate and
    the refit until the estimate settles (`_Run.refine`).

    **Returns:** a `FitResult`: values, Cramer-Rao standard errors, correlations,
    identifiability (SVD of the noise-weighted sensitivities), convergence, residuals, and
    whether the model explains the data (`goodness_of_fit`).
    """
    solver = as_solver(solver)
    clock = time.perf_counter()
    local = solver
    while isinstance(local, (MultiStart, Auto, MultipleShooting)):
        local = local.inner
    run = _Run(problem, local, progress)
    zero = np.zeros(len(problem.parameters))
    if isinstance(solver, Auto):
        shooting = solver.shooting()
        problem_with_segments = None if shooting is None else segments_problem(
            run.objective, run.segments(shooting), "Auto")
        if problem_with_segments is not None:
            if solver.segments is not None:  # asked for: refused before anything runs
                raise ValueError(problem_with_segments)
            shooting = None  # records too short to cut
        if shooting is not None and solver.segments is None \
                and integrated_implicitly(problem.models):
            shooting = None  # (see integrated_implicitly)
        phase = 0.0 if shooting is None else ringing_phase(problem)
        shooting_first = phase > solver.ringing_limit
        if shooting_first:
            # Lightly damped: single shooting's cost has a valley per slipped cycle.
            segments = run.segments(shooting)
            if progress:
                print(f"  the start rings ({phase:.0f} rad of phase within the record, above "
                      f"{solver.ringing_limit:g}): multiple shooting first, {segments} "
                      "segments", flush=True)
            outcome = run.shooting_fit(shooting, zero)
            name = (f"auto: multiple-shooting({segments} segments) from the start (ringing "
                    f"phase {phase:.0f} rad), then {local.name} (single shooting)")
        else:
            outcome = run.local_fit(zero)
            name = f"auto: {local.name} from the start"
        if run.explained(outcome) is False and shooting is not None \
                and not shooting_first:
            segments = run.segments(shooting)
            if progress:
                print("  the fit from the start does not explain the data (a local optimum?): "
                      f"multiple shooting, {segments} segments", flush=True)
            shot = run.shooting_fit(shooting, zero)
            name += f", then multiple-shooting({segments} segments)"
            # Both ran from the same start: one start, its better fit (the multi-start's
            # agreement rule counts distinct starts).
            best = min(outcome, shot, key=lambda o: o.cost)
            outcome = dataclasses.replace(best, start_costs=[best.cost], tried=1,
                                          steps=outcome.steps + shot.steps)
        if run.explained(outcome) is False:
            multistart = solver.multistart()
            if progress:
                print(f"  the fit does not explain the data: {multistart.n - 1} more starts, "
                      f"{multistart.low:g}x-{multistart.high:g}x", flush=True)
            outcome = run.multistart(multistart, first=outcome)
            name += (f", then {multistart.name} ({outcome.tried} fit(s) in all)")
    elif isinstance(solver, MultipleShooting):
        outcome = run.shooting_fit(solver, zero)
        name = (f"multiple-shooting({run.segments(solver)} segments), then {local.name} "
                "(single shooting)")
    elif isinstance(solver, MultiStart):
        outcome = run.multistart(solver)
        name = f"{solver.name} ({outcome.tried} start(s) run)"
    else:
        outcome = run.local_fit(zero)
        name = local.name
    return run.finish(outcome, clock, name)


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


def fit_many(problem: FitProblem, data: Sequence[np.ndarray],
             solver=BATCH_SOLVER) -> dict[str, np.ndarray]:
    """Fit the same problem to a batch of data sets at once (`vmap` over LM solves).

    **Arguments:** `data`, one array per load case of shape `(batch, k, c)` (e.g. noise draws
    for a Monte Carlo study); the problem's noise must be given; `solver` a vmappable
    Levenberg-Marquardt that carries its options: `spineid.OptimistixLevenbergMarquardt(...)`
    (the default, `"optimistix-lm"`) or `spineid.JaxoptLevenbergMarquardt(...)`
    (`"jaxopt-lm"`), each with `max_steps`, `rtol`, `atol`.

    **Returns:** `values` `(batch, p)`, Cramer-Rao `stderr` `(batch, p)` (full-rank problems;
    NaN where the Fisher information is singular), `converged` `(batch,)`, `cost` `(batch,)`.
    Raises `ValueError` for another solver or a data array per load case missing.
    """
    batch_solvers = (OptimistixLevenbergMarquardt, JaxoptLevenbergMarquardt)
    if isinstance(solver, str) and solver in ("optimistix-lm", "jaxopt-lm"):
        solver = as_solver(solver)
    if not isinstance(solver, batch_solvers):
        raise ValueError(f"fit_many(solver={solver!r}): expected "
                         "spineid.OptimistixLevenbergMarquardt(...) ('optimistix-lm') or "
                         "spineid.JaxoptLevenbergMarquardt(...) ('jaxopt-lm'): the solvers "
                         "that run vmapped over a batch")
    sigma = _noise_array(problem, None)
    objective = _objective(problem, sigma, problem.transform(), diffrax.ForwardMode(), 20_000)
    if len(data) != len(problem.measurements):
        raise ValueError(f"{len(data)} data arrays for {len(problem.measurements)} load cases")
    batch = []
    for case, (d, measurement) in enumerate(zip(data, problem.measurements)):
        d = np.asarray(d, dtype=float)
        if d.ndim != 3 or d.shape[1:] != measurement.values.shape:
            raise ValueError(f"data of load case {case}: shape {d.shape}, expected (batch, "
                             f"{', '.join(map(str, measurement.values.shape))})")
        # Padded as the objective's records are (repeated last sample, weight zero).
        length = objective.data[case].shape[0]
        batch.append(jnp.asarray(np.pad(d, ((0, 0), (0, length - d.shape[1]), (0, 0)),
                                        mode="edge")))
    batch = tuple(batch)

    theta, jacobian, converged, cost = _solve_batch(objective, batch, solver.name,
                                                    solver.rtol, solver.atol, solver.max_steps)
    fisher = np.einsum("bni,bnj->bij", np.asarray(jacobian), np.asarray(jacobian))
    stderr = np.full(np.shape(theta), np.nan)
    for b, information in enumerate(fisher):
        if np.linalg.cond(information) < 1e12:
            stderr[b] = np.sqrt(np.diag(np.linalg.inv(information)))
    return {"values": np.asarray(theta), "stderr": stderr, "converged": np.asarray(converged),
            "cost": np.asarray(cost)}
