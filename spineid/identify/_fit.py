"""Least-squares identification through the ODE solve: the problem, the solvers, the result.

The residuals are `r = (observe(simulate(model(theta))) - data) / sigma`, stacked over samples,
channels and load cases (Liu 2001, eq 2-24, with noise weighting). Levenberg-Marquardt gets its
Jacobian by forward-mode autodiff through diffrax; first-order methods (optax) use reverse mode.
"""

import dataclasses
import time

import diffrax
import jax.numpy as jnp
import numpy as np

from ..models._mechanics import AbstractLagrangianSystem
from ..simulation._modes import linear_modes
from ._objective import _evaluate, _scales, FAILED_RESIDUAL, forward_objective, resolved_scales
from ._problem import FitProblem, check_noise
from ._result import FitResult
from ._run import _Run
from ._shooting import segments_problem
from ._solvers import Auto, as_solver, MultipleShooting, MultiStart
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


def fit(problem: FitProblem, solver="auto", *, progress: bool | str = False) -> FitResult:
    """Fit the free parameters of `problem` by least squares through the ODE solve.

    **Arguments:**
    - `problem`: a `FitProblem` (model, data, free parameters, noise, simulation tolerances).
    - `solver`: a solver object carrying its options (`spineid.Auto()`, the default;
      `spineid.LevenbergMarquardt(...)`, `spineid.OptimistixLevenbergMarquardt(...)`,
      `spineid.JaxoptLevenbergMarquardt(...)`, `spineid.Adam(...)`, `spineid.LBFGS(...)`,
      `spineid.MultiStart(inner, n=...)`), or one of the command line's names (`"auto"`,
      `"lm"`, `"jaxopt-lm"`, `"optimistix-lm"`, `"adam"`, `"lbfgs"`) for its defaults.
    - `progress`: `True` prints the fit's stages and one line per local solve (steps, cost);
      `"steps"` also prints every solver step as it is taken (a host callback inside the
      compiled solve: that program is then compiled again in every process instead of being
      loaded from the persistent compilation cache, `spineid/_cache.py`).

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
            name += (f", then {multistart.name} ({outcome.tried} fit(s) in all"
                     f"{where(multistart)})")
    elif isinstance(solver, MultipleShooting):
        outcome = run.shooting_fit(solver, zero)
        name = (f"multiple-shooting({run.segments(solver)} segments), then {local.name} "
                "(single shooting)")
    elif isinstance(solver, MultiStart):
        outcome = run.multistart(solver)
        name = f"{solver.name} ({outcome.tried} start(s) run{where(solver)})"
    else:
        outcome = run.local_fit(zero)
        name = local.name
    return run.finish(outcome, clock, name)


def where(multistart: MultiStart) -> str:
    """`, on <executor>` for a multi-start run on an executor (the solver's name says so)."""
    executor = multistart.executor
    return "" if executor is None else f", on {executor.describe()}"


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
    defaults to the problem's; the simulations use the problem's `simulation_rtol`,
    `simulation_atol` and `simulation_max_steps`. Raises `ValueError` where the model cannot
    be simulated at `values`.
    """
    theta = problem.start if values is None else np.asarray(values, dtype=float)
    transform = problem.transform()
    objective = forward_objective(problem, _noise_array(problem, noise), transform)
    jacobian, residuals, _ = _evaluate(objective, jnp.asarray(theta))
    if np.any(np.asarray(residuals) == FAILED_RESIDUAL):
        raise ValueError(
            f"analyse: the model cannot be simulated at these values within the problem's "
            f"simulation_max_steps={problem.simulation_max_steps} (rtol "
            f"{problem.simulation_rtol:g}), so its sensitivities are not known there")
    jacobian = np.asarray(jacobian)
    scales = resolved_scales(jacobian, theta, _scales(theta, transform))
    return fisher_analysis(jacobian, theta, scales, problem.names)
