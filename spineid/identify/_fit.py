"""Least-squares identification through the ODE solve: the problem, the solvers, the result.

The residuals are `r = (observe(simulate(model(theta))) - data) / sigma`, stacked over samples,
channels and load cases (Liu 2001, eq 2-24, with noise weighting). Levenberg-Marquardt gets its
Jacobian by forward-mode autodiff through diffrax; first-order methods (optax) use reverse mode.
"""

import dataclasses
import math
import time
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..elements._parameters import apply_values
from ..elements._planar_springs import VectorSprings
from ..models._mechanics import AbstractLagrangianSystem
from ..simulation._modes import linear_modes
from ._goodness import GoodnessOfFit, assess_fit
from ._objective import (
    FAILED_RESIDUAL,
    _cost,
    _evaluate,
    _Objective,
    _objective,
    _scales,
)
from ._problem import FitProblem, check_noise, noise_from_residuals
from ._result import VECTOR_MEASURE_NOTE, FitResult, _vector_spring_moments
from ._routines import _solve_jaxopt_lm, _solve_lm
from ._shooting import (
    n_states,
    segments_problem,
    shooting_objective,
    shortest_record,
    solve_shooting,
)
from ._solvers import (
    BATCH_SOLVER,
    SAME_OPTIMUM,
    Auto,
    JaxoptLevenbergMarquardt,
    MultipleShooting,
    MultiStart,
    OptimistixLevenbergMarquardt,
    _ReverseMode,
    as_solver,
)
from ._uncertainty import Identifiability, fisher_analysis

# Most segment-state unknowns a default multiple shooting adds (all load cases together):
# its Jacobian and normal matrix are dense.
MAX_SHOOTING_STATES = 1024

# A parameter closer to a bound than this fraction of its standard error counts as on it.
BOUND_STDERR_FRACTION = 0.05


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
    for over 15 minutes without finishing."""
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

    With the noise estimated (`problem.noise` is `None`) the fit runs with provisional weights,
    estimates the noise per channel from its residuals and refines the fit with those.

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
        if run.verdict(outcome).explains_data is False and shooting is not None \
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
        if run.verdict(outcome).explains_data is False:
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


@dataclasses.dataclass
class _Outcome:
    """A fit from one start, or the best of several: unconstrained values `u`, whether the
    solver converged, its steps, its last linearisation `(cost, residuals, jacobian)` (or
    `None`), the cost, the final costs of every start run, and how many starts were run and
    skipped (their simulation failed); `agreed`: how many starts came back to the lowest cost
    when that ended a multi-start."""

    u: np.ndarray
    converged: bool
    steps: int
    linearisation: tuple | None
    cost: float
    start_costs: list
    tried: int = 1
    skipped: int = 0
    agreed: int = 0


class _Run:
    """One fit of a problem with one local solver: the objective with the current noise
    weights, local fits from given starts, a multi-start, the verdict of a fit, and the
    result."""

    def __init__(self, problem: FitProblem, local, progress: bool):
        self.problem, self.local, self.progress = problem, local, progress
        self.transform = problem.transform()
        self.noise_estimated = problem.noise is None
        if self.noise_estimated:
            # Provisional weights: comparable channels; the real noise level comes later.
            self.sigma = np.maximum(problem.channel_ranges(), 1e-12) * 1e-3
        else:
            self.sigma = np.array([problem.noise[c] for c in problem.channels])
        self.objective = self.objective_for(self.sigma)
        self.shooting_objectives = {}

    def objective_for(self, sigma) -> _Objective:
        """The residual objective with noise weights `sigma` `(c,)`."""
        problem = self.problem
        rtol, atol = problem.simulation_rtol, problem.simulation_atol
        coarse_rtol, coarse_atol = self.local.jacobian_tolerances(rtol, atol)
        return _objective(problem, sigma, self.transform, self.local.adjoint(),
                          problem.simulation_max_steps, rtol=rtol, atol=atol,
                          coarse_rtol=coarse_rtol, coarse_atol=coarse_atol)

    def local_fit(self, u0) -> _Outcome:
        """The local solver from the unconstrained start `u0` `(p,)`. A first-order solver
        (reverse mode: thousands of simulations) is not started where the start itself cannot
        be simulated: the outcome is then the start, not converged (Adam from 1e12 N/m ran
        for minutes with no output before)."""
        if isinstance(self.local, _ReverseMode):
            start_cost = float(_cost(self.objective, jnp.asarray(u0, dtype=float)))
            if not math.isfinite(start_cost) or start_cost >= 0.5 * FAILED_RESIDUAL**2:
                return _Outcome(np.asarray(u0, dtype=float), False, 0, None, start_cost,
                                [start_cost])
        u, converged, steps, linearisation = self.local.solve(
            self.objective, jnp.asarray(u0, dtype=float), self.progress)
        cost = float(linearisation[0] if linearisation is not None
                     else _cost(self.objective, u))
        return _Outcome(np.asarray(u), converged, steps, linearisation, cost, [cost])

    def shooting_fit(self, shooting: MultipleShooting, u0) -> _Outcome:
        """Multiple shooting from the unconstrained start `u0` `(p,)`, then the local solver
        (single shooting) from the parameters it finds."""
        segments = self.segments(shooting)
        key = (segments, shooting.continuity_weight)
        if key not in self.shooting_objectives:  # built once per problem (a simulation)
            self.shooting_objectives[key] = shooting_objective(
                self.objective, segments, shooting.continuity_weight)
        objective = self.shooting_objectives[key]
        inner = shooting.inner
        if self.progress:
            print(f"  multiple shooting: {segments} segments per load case", flush=True)
        u, _, steps = solve_shooting(objective, u0, max_steps=inner.max_steps,
                                     decrement_tol=inner.decrement_tol, xtol=inner.rtol,
                                     gtol=inner.atol, progress=self.progress)
        if self.progress:
            print("  single shooting from the parameters found", flush=True)
        outcome = self.local_fit(u)
        return dataclasses.replace(outcome, steps=outcome.steps + steps)

    def segments(self, shooting: MultipleShooting) -> int:
        """The segments per record `shooting` uses on this problem: its own, or by default as
        many as its rule gives within `MAX_SHOOTING_STATES` state unknowns in all (the
        shooting Jacobian is dense)."""
        states = n_states(self.objective)
        segments = shooting.segments_for(shortest_record(self.objective), states)
        if shooting.segments is None:
            cases = len(self.problem.measurements)
            segments = min(segments, max(2, 1 + MAX_SHOOTING_STATES // (states * cases)))
        return segments

    def verdict(self, outcome: _Outcome) -> GoodnessOfFit:
        """Whether the model explains the data at `outcome` (`assess_fit`), with the noise as
        given or as the residuals estimate it."""
        problem = self.problem
        if outcome.linearisation is not None:
            residuals = np.asarray(outcome.linearisation[1])
        else:
            residuals = np.asarray(_evaluate(self.objective, self.transform.to_physical(
                jnp.asarray(outcome.u)))[1])
        raw = [block * self.sigma for block in self._blocks(residuals)]
        if np.any(residuals == FAILED_RESIDUAL):
            raw = [np.full_like(block, np.inf) for block in raw]
        sigma = self.sigma if not self.noise_estimated else noise_from_residuals(
            np.concatenate(raw), len(problem.parameters), problem.channel_ranges())
        return assess_fit([block / sigma for block in raw], problem.channels,
                          len(problem.parameters), noise_given=not self.noise_estimated,
                          sigma=dict(zip(problem.channels, map(float, sigma))),
                          units=dict(zip(problem.channels, problem.models[0].observable_units)),
                          noise_max=problem.noise_max)

    def _blocks(self, residuals: np.ndarray) -> list[np.ndarray]:
        # Flat residuals back into one (k, c) block per load case.
        blocks, first = [], 0
        for measurement in self.problem.measurements:
            size = measurement.values.size
            blocks.append(residuals[first:first + size].reshape(measurement.values.shape))
            first += size
        return blocks

    def multistart(self, multistart: MultiStart, first: _Outcome | None = None) -> _Outcome:
        """The local solver from several starts (`MultiStart`); `first`, a fit from the given
        start already made, takes part and is not repeated."""
        count = multistart.n - 1 if first is not None or multistart.n > 1 else 0
        candidates = list(multistart.draw(self.transform, count))
        if first is None:
            candidates.insert(0, np.zeros(len(self.problem.parameters)))
        initial = []
        for u in candidates:
            cost = float(_cost(self.objective, jnp.asarray(u)))
            failed = not np.isfinite(cost) or cost >= 0.25 * FAILED_RESIDUAL**2
            initial.append(math.inf if failed else cost)
        usable = [i for i in np.argsort(initial) if np.isfinite(initial[i])]
        skipped = len(candidates) - len(usable)
        best, start_costs = first, list(first.start_costs) if first is not None else []
        tried = first.tried if first is not None else 0
        agreed = 0
        for rank, index in enumerate(usable):
            outcome = (self.shooting_fit(multistart.inner, candidates[index])
                       if isinstance(multistart.inner, MultipleShooting)
                       else self.local_fit(candidates[index]))
            tried += 1
            start_costs.append(outcome.cost)
            if best is None or outcome.cost < best.cost:
                best = outcome
            explained = self.verdict(outcome).explains_data is not False
            if self.progress:
                print(f"  start {rank + 1}/{len(usable)} (initial cost {initial[index]:.4g}): "
                      f"cost {outcome.cost:.6e}"
                      + (", explains the data" if explained else ""), flush=True)
            if multistart.stop_when_explained and explained:
                break
            agreeing = sum(c <= best.cost * (1 + SAME_OPTIMUM) for c in start_costs)
            if agreeing >= multistart.agreement:
                agreed = agreeing
                break
        if best is None:  # no start could be simulated: fit from the given one, to report it
            best = self.local_fit(np.zeros(len(self.problem.parameters)))
            start_costs, tried = list(best.start_costs), 1
        return dataclasses.replace(best, start_costs=start_costs, tried=tried, skipped=skipped,
                                   agreed=agreed)

    def finish(self, outcome: _Outcome, clock: float, solver_name: str) -> FitResult:
        """The result at `outcome`: with the noise estimated, the noise from the residuals and a
        refit with those weights; then the sensitivities, identifiability and verdict."""
        problem, transform, objective = self.problem, self.transform, self.objective
        u, converged, n_steps = jnp.asarray(outcome.u), outcome.converged, outcome.steps
        linearisation, noise_estimated, sigma = outcome.linearisation, self.noise_estimated, \
            self.sigma
        start_costs = outcome.start_costs
        theta = np.asarray(transform.to_physical(u))
        unusable = not math.isfinite(outcome.cost) or outcome.cost >= 0.5 * FAILED_RESIDUAL**2
        if noise_estimated and not unusable:  # (no noise to estimate where nothing simulates)
            sigma = _estimate_noise(problem, theta, objective)
            if self.progress:
                print("  noise estimated from the residuals: "
                      + ", ".join(f"{c}={v:.3g}" for c, v in zip(problem.channels, sigma))
                      + "; refining the fit with these weights", flush=True)
            objective = self.objective_for(sigma)
            u, converged, steps, linearisation = self.local.solve(objective, u, self.progress)
            n_steps += int(steps)
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
        if outcome.agreed:
            warnings.append(
                f"{outcome.agreed} starts came back to the same lowest cost: it is this model's "
                "best fit, so if the model does not explain the data there, it lacks an effect "
                "the data show (not a better start).")
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
            solver=solver_name,
            start_costs=start_costs,
            starts={"run": outcome.tried, "skipped": outcome.skipped},
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
        result.refit = _HeldRefit(problem, self.local, theta, sigma)
        result.lower_bounds = np.array([p.lower for p in problem.parameters])
        result.upper_bounds = np.array([p.upper for p in problem.parameters])
        return result


class _HeldRefit:
    """Least cost of `problem` with free parameter `i` held at `v` and the others refitted by
    the fit's local solver (the noise held at the fit's), warm-started from the solution at the
    nearest value held before: the points of a profile (`FitResult.profile`)."""

    def __init__(self, problem: FitProblem, local, theta, sigma):
        self.problem, self.local = problem, local
        self.theta, self.sigma = np.asarray(theta, float), np.asarray(sigma, float)
        self.solutions: dict[tuple[int, float], np.ndarray] = {}

    def __call__(self, i: int, v: float) -> float:
        problem = self.problem
        self.solutions.setdefault((i, float(self.theta[i])), self.theta)  # the optimum itself
        seen = [held for (j, held) in self.solutions if j == i]
        nearest = min(seen, key=lambda held: abs(held - v))
        theta = self.solutions[(i, nearest)].copy()
        theta[i] = v
        noise = dict(zip(problem.channels, map(float, self.sigma)))
        others = [name for j, name in enumerate(problem.names) if j != i]
        if not others:  # nothing to refit: the cost at v
            run = _Run(problem, self.local, False)
            objective = run.objective_for(self.sigma)
            cost = float(_cost(objective, run.transform.to_unconstrained(jnp.asarray(theta))))
            self.solutions[(i, v)] = theta
            return cost
        held_models = [apply_values(m, problem.parameters, jnp.asarray(theta))
                       for m in problem.models]
        sub = FitProblem(problem.model_file or problem.model, problem.measurements, others,
                         noise, models=held_models, noise_max=problem.noise_max,
                         simulation_rtol=problem.simulation_rtol,
                         simulation_atol=problem.simulation_atol,
                         simulation_max_steps=problem.simulation_max_steps)
        run = _Run(sub, self.local, False)
        outcome = run.local_fit(np.zeros(len(others)))
        theta[np.arange(theta.size) != i] = np.asarray(run.transform.to_physical(
            jnp.asarray(outcome.u)))
        self.solutions[(i, v)] = theta
        return outcome.cost if np.isfinite(outcome.cost) else math.inf


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
    batch = tuple(jnp.asarray(d) for d in data)
    if len(batch) != len(problem.measurements):
        raise ValueError(f"{len(batch)} data arrays for {len(problem.measurements)} load cases")

    theta, jacobian, converged, cost = _solve_batch(objective, batch, solver.name,
                                                    solver.rtol, solver.atol, solver.max_steps)
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
