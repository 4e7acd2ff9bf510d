"""One fit of a trajectory problem, from one start or several: the local solver, multiple
shooting, the multi-start, the verdict on a fit, the noise estimated from the residuals, and the
result with its sensitivities (`spineid.fit` decides which of these run, `_fit.py`).
"""

import dataclasses
import math
import threading
import time
import warnings as python_warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..._arrays import floats
from ...elements._parameters import apply_values
from ...elements._planar_springs import VectorSprings
from ...executors._batch import run_batch
from .._common._failure import compiled_check_message, failed, failed_cost
from .._common._goodness import assess_fit, unfitted_note
from .._common._verdict import GoodnessOfFit
from .._common._shown import noise_values
from .._common._noise import noise_from_residuals, NOISE_SETTLED, settle_noise, unsettled_note
from .._common._analysis import analyse_parameters, StandardErrorBound
from .._common._noise_model import AR, drift_notes
from .._solvers import agreeing, agreement_note, MultipleShooting, MultiStart
from .._solvers._base import warm_start
from ._correlated import (correlated_fit, robust_errors, search_noise_models, usable_model,
                          whitening_width)
from ._objective import (
    residual_blocks,
    _cost,
    _evaluate,
    _Objective,
    _objective,
    sensitivity_scales,
)
from ._problem import FitProblem, integrated_implicitly, integrator_names, ringing_phase
from ._result import VECTOR_MEASURE_NOTE, FitResult, _vector_spring_moments
from ._shooting import (n_states, segments_problem, shooting_objective, shortest_record,
                        solve_shooting)

# Most segment-state unknowns a default multiple shooting adds (all load cases together):
# its Jacobian and normal matrix are dense.
MAX_SHOOTING_STATES = 1024



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
    # `(verdict, refinement)` once judged (`_Run.judge`); a copy made by
    # `dataclasses.replace` (same `u`) carries it along.
    judged: tuple | None = None


class _Run:
    """One fit of a problem with one local solver: the objective with the current noise
    weights, local fits from given starts, a multi-start, the verdict of a fit, and the
    result."""

    def __init__(self, problem: FitProblem, local, progress: bool | str):
        if progress not in (False, True, "steps"):
            raise ValueError(f"progress must be True, False or 'steps', not {progress!r}")
        self.problem, self.local = problem, local
        # Stages and one line per local solve from Python; every solver step only when asked
        # (a host callback inside the compiled solve: that program is then compiled in every
        # process, never loaded from the persistent compilation cache).
        self.progress, self.each_step = bool(progress), progress == "steps"
        self.transform = problem.transform()
        self.noise_estimated = problem.noise is None
        self.noise_model, self.noise_note = usable_model(problem)
        self.whitening_width = whitening_width(problem, self.noise_model)
        if self.noise_estimated:
            # Provisional weights: comparable channels; the real noise level comes later.
            self.sigma = np.maximum(problem.channel_ranges(), 1e-12) * 1e-3
        else:
            self.sigma = np.array([problem.noise[c] for c in problem.channels])
        # (Zero-valued unbounded parameters scaled by what the data resolve of them.)
        self.transform = sensitivity_scales(self.objective_for(self.sigma), problem.start,
                                            self.transform)
        self.objective = self.objective_for(self.sigma)
        self.shooting_objectives = {}
        self.notes: list[str] = []  # what went wrong on the way, for the result's warnings
        self.quiet = False

    def say_solved(self, steps, cost: float, converged) -> None:
        """With progress shown (but not every step), one line for a finished local solve."""
        if self.progress and not self.each_step:
            print(f"  {self.local.name}: {int(steps)} step(s), cost {cost:.6e}"
                  + ("" if bool(converged) else ", not converged"), flush=True)

    def note(self, text: str):
        """Keep `text` for the result's warnings and warn now (unless `quiet`: a start run
        for another process, which warns when it reads the notes back)."""
        self.notes.append(text)
        if not self.quiet:
            python_warnings.warn(text, RuntimeWarning, stacklevel=3)

    def objective_for(self, sigma, coefficients=None) -> _Objective:
        """The residual objective with noise weights `sigma` `(c,)` and the whitening
        `coefficients` `(c, q)` of an autoregressive noise model (zeros: `whitening_width`)."""
        problem = self.problem
        if coefficients is None and self.whitening_width:
            coefficients = np.zeros((len(problem.channels), self.whitening_width))
        rtol, atol = problem.simulation_rtol, problem.simulation_atol
        coarse_rtol, coarse_atol = self.local.jacobian_tolerances(rtol, atol)
        return _objective(problem, sigma, self.transform, self.local.adjoint(),
                          problem.simulation_max_steps, rtol=rtol, atol=atol,
                          coarse_rtol=coarse_rtol, coarse_atol=coarse_atol,
                          coefficients=coefficients)

    def local_fit(self, u0) -> _Outcome:
        """The local solver from the unconstrained start `u0` `(p,)`. A first-order solver
        (reverse mode: thousands of simulations) is not started where the start itself cannot
        be simulated: the outcome is then the start, not converged (Adam from 1e12 N/m ran
        for minutes with no output before)."""
        if self.local.first_order:
            start_cost = float(_cost(self.objective, jnp.asarray(u0, dtype=float)))
            if failed_cost(start_cost):
                return _Outcome(np.asarray(u0, dtype=float), False, 0, None, start_cost,
                                [start_cost])
        try:
            u, converged, steps, linearisation = self.local.solve(
                self.objective, jnp.asarray(u0, dtype=float), self.each_step,
                provisional=self.noise_estimated)
        except eqx.EquinoxRuntimeError as error:
            # A check inside the compiled solve (optimistix's implicit-function derivative
            # through an implicit integrator's stage solve, meeting a non-finite trial stage;
            # see `integrated_implicitly`): this start is given up, not the whole fit.
            self.note(f"{self.local.name} stopped by a check inside its compiled solve "
                      f"({compiled_check_message(error)}); that start was given up")
            return _Outcome(np.asarray(u0, dtype=float), False, 0, None, math.inf, [math.inf],
                            skipped=1)
        cost = float(linearisation[0] if linearisation is not None
                     else _cost(self.objective, u))
        self.say_solved(steps, cost, converged)
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
        try:
            u, _, steps = solve_shooting(objective, u0, max_steps=inner.max_steps,
                                         decrement_tol=inner.decrement_tol, xtol=inner.rtol,
                                         gtol=inner.atol, progress=self.each_step,
                                         provisional=self.noise_estimated)
        except eqx.EquinoxRuntimeError as error:  # (as in `local_fit`)
            self.note(f"multiple shooting stopped by a check inside its compiled solve "
                      f"({compiled_check_message(error)}); single shooting from the start "
                      "instead")
            u, steps = np.asarray(u0, dtype=float), 0
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

    def shooting_refusal(self, shooting: MultipleShooting, owner: str) -> str | None:
        """Why `shooting` cannot cut this problem's records (`segments_problem`, naming
        `owner`), or `None` where it can."""
        return segments_problem(self.objective, self.segments(shooting), owner)

    def ringing_phase(self) -> float:
        """`ringing_phase` of the problem."""
        return ringing_phase(self.problem)

    def integrated_implicitly(self) -> bool:
        """`integrated_implicitly` of the problem's models."""
        return integrated_implicitly(self.problem.models, self.problem.simulation_solver)

    def explained(self, outcome: _Outcome) -> bool | None:
        """Whether the model explains the data at `outcome` (`judge`)."""
        return self.judge(outcome).explains_data

    def accepted(self, outcome: _Outcome) -> bool | None:
        """Whether the model explains or describes the data at `outcome` (`judge`): its values
        and errors are usable (`GoodnessOfFit.accepted`)."""
        return self.judge(outcome).accepted

    def judge(self, outcome: _Outcome) -> GoodnessOfFit:
        """The verdict at `outcome` (`verdict`), made once per outcome. With the noise
        estimated, a fit under the provisional weights can fail the verdict only because those
        weights are wrong: a channel whose real noise is far below its placeholder is barely
        fitted, and its residuals keep a trace of the motion (measured: the 4-axial-spring pair
        with 1e-9 noise, every start judged "not explained" after its first pass, and then
        fitted again by multiple shooting and more starts). Before such a verdict stands, the
        fit is refined with the noise its residuals show, as `finish` does, and judged
        again."""
        if outcome.judged is not None:
            return outcome.judged[0]
        goodness, refinement = self.verdict(outcome), None
        if goodness.explains_data is False and self.noise_estimated \
                and math.isfinite(outcome.cost) and not failed_cost(outcome.cost):
            try:
                # (shown as in `finish`, which reuses it: the refits of a fit of many
                # parameters can take minutes, 65 steps of 3.9 s in an OpenSim neck's)
                refinement = self.refine(jnp.asarray(outcome.u), self.progress)
                u, _, _, linearisation, _, objective = refinement
                refined = _Outcome(np.asarray(u), False, 0, linearisation, math.inf, [])
                goodness = self.verdict(refined, objective)
            except eqx.EquinoxRuntimeError:  # (as in `local_fit`): the first verdict stands
                pass
        outcome.judged = (goodness, refinement)
        return goodness

    def refine(self, u, progress: bool = False):
        """The fit from `u` (unconstrained) with the noise estimated from its residuals, the
        estimate and the fit repeated until the estimate settles (`settle_noise`): `(u,
        converged, steps, linearisation, sigma, objective)`."""
        sigma = _estimate_noise(self.problem, self.transform.evaluated(jnp.asarray(u))[0],
                                self.objective)

        def refit(sigma, previous):
            if progress:
                print(f"  noise estimated from the residuals: {noise_values(self.problem, sigma)}"
                      "; refining the fit with these weights", flush=True)
            objective = self.objective_for(sigma)
            start = jnp.asarray(u) if previous is None else previous[0].value
            solution = self.local.solve(objective, start, progress and self.each_step,
                                        **warm_start(previous))
            if progress and solution.linearisation is not None:
                self.say_solved(solution.steps, float(solution.cost), solution.converged)
            return solution, objective

        def estimate(fitted):
            solution, objective = fitted
            return _estimate_noise(self.problem, self.transform.evaluated(solution.value)[0],
                                   objective)

        fits, sigma, change = settle_noise(refit, estimate, sigma)
        if change > NOISE_SETTLED:
            self.note(unsettled_note(change))
        (solution, objective), steps = fits[-1], sum(int(f[0].steps) for f in fits)
        u, converged, linearisation = solution.value, solution.converged, solution.linearisation
        return u, converged, steps, linearisation, sigma, objective

    def verdict(self, outcome: _Outcome, objective: _Objective | None = None) -> GoodnessOfFit:
        """Whether the model explains the data at `outcome` (`assess_fit`), with the noise as
        given or as the residuals estimate it; `objective`: the one `outcome` was fitted with
        (default: the run's)."""
        problem = self.problem
        objective = objective or self.objective
        if outcome.linearisation is not None:
            residuals = np.asarray(outcome.linearisation[1])
        else:
            residuals = np.asarray(_evaluate(objective, jnp.asarray(
                self.transform.evaluated(outcome.u)[0]))[1])
        raw = [block * np.asarray(objective.sigma) for block in self._blocks(residuals)]
        if np.any(failed(residuals)):
            raw = [np.full_like(block, np.inf) for block in raw]
        sigma = self.sigma if not self.noise_estimated else noise_from_residuals(
            np.concatenate(raw), len(problem.parameters), problem.channel_ranges())
        # (Under a noise model the innovations are tested, and the smooth misfit tells a local
        # optimum, whose smooth residuals an autoregression would whiten, from the right one.)
        noises = search_noise_models(problem, self.noise_model, raw) \
            if self.noise_estimated and not np.any(failed(residuals)) else None
        if noises is not None:
            sigma = np.array([n.marginal for n in noises.values()])
        return assess_fit([block / sigma for block in raw], problem.channels,
                          len(problem.parameters), noise_given=not self.noise_estimated,
                          sigma=dict(zip(problem.channels, map(float, sigma))),
                          units=dict(zip(problem.channels, problem.models[0].observable_units)),
                          noise_max=problem.noise_max, noise_models=noises,
                          **self.misfit_options(noises is not None))

    def misfit_options(self, judged: bool) -> dict:
        """`assess_fit`'s three-level options where `judged` (the range each channel is judged
        against, `FitProblem.misfit_ranges`, and the problem's `max_misfit`), none otherwise:
        a result's verdict has three levels wherever the noise is estimated; a start's verdict
        in a search only under an autoregression (`verdict`), so that the search's stops on
        white noise are as before."""
        if not judged:
            return {}
        problem = self.problem
        return {"ranges": dict(zip(problem.channels, map(float, problem.misfit_ranges()))),
                "max_misfit": dict.fromkeys(problem.channels, problem.max_misfit)}

    def _blocks(self, residuals: np.ndarray) -> list[np.ndarray]:
        # Flat (padded) residuals back into one (k, c) block per load case, NaN where a value
        # was not measured.
        residuals = np.asarray(residuals)[self.objective.data_rows()]
        blocks, first = [], 0
        for measurement in self.problem.measurements:
            size = measurement.values.size
            block = residuals[first:first + size].reshape(measurement.values.shape)
            blocks.append(np.where(np.isnan(measurement.values), np.nan, block))
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
            initial.append(math.inf if failed_cost(cost, 0.5) else cost)
        usable = [i for i in np.argsort(initial) if np.isfinite(initial[i])]
        skipped = len(candidates) - len(usable)
        best, start_costs = first, list(first.start_costs) if first is not None else []
        tried = first.tried if first is not None else 0
        agreed = 0
        if multistart.executor is not None and usable:
            outcomes = self.starts_on(multistart, [candidates[i] for i in usable])
            skipped += sum(o.skipped for o in outcomes)
            tried += len(outcomes)
            start_costs += [o.cost for o in outcomes]
            best = min([o for o in (best, *outcomes) if o is not None], key=lambda o: o.cost)
            agreed = agreeing(start_costs, best.cost)
            usable = []  # (all ran)
        for rank, index in enumerate(usable):
            outcome = (self.shooting_fit(multistart.inner, candidates[index])
                       if isinstance(multistart.inner, MultipleShooting)
                       else self.local_fit(candidates[index]))
            tried += 1
            skipped += outcome.skipped
            start_costs.append(outcome.cost)
            if best is None or outcome.cost < best.cost:
                best = outcome
            explained = self.explained(outcome) is not False
            if self.progress:
                print(f"  start {rank + 1}/{len(usable)} (initial cost {initial[index]:.4g}): "
                      f"cost {outcome.cost:.6e}"
                      + (", explains the data" if explained else ""), flush=True)
            if multistart.stop_when_explained and explained:
                break
            if agreeing(start_costs, best.cost) >= multistart.agreement:
                agreed = agreeing(start_costs, best.cost)
                break
        if best is None:  # no start could be simulated: fit from the given one, to report it
            best = self.local_fit(np.zeros(len(self.problem.parameters)))
            start_costs, tried = list(best.start_costs), 1
        return dataclasses.replace(best, start_costs=start_costs, tried=tried, skipped=skipped,
                                   agreed=agreed)

    def starts_on(self, multistart: MultiStart, starts: list) -> list[_Outcome]:
        """The local fits from `starts` (unconstrained, each `(p,)`) as a batch on the
        multi-start's executor, `multistart.chunk` starts per task (`start_record`); a start
        whose task failed counts as skipped, with its error among the notes."""
        problem = self.problem
        items = [(problem, self.local, multistart.inner, [float(x) for x in u])
                 for u in starts]
        batch = run_batch(start_record, items, executor=multistart.executor,
                          chunk=multistart.chunk, progress=self.progress)
        outcomes = []
        for u, record in zip(starts, batch.records):
            if record["ok"]:
                result = record["result"]
                for text in result["notes"]:
                    self.note(text)
                outcomes.append(_Outcome(np.asarray(result["u"]), result["converged"],
                                         result["steps"], None, result["cost"],
                                         [result["cost"]], skipped=result["skipped"]))
            else:
                self.note(f"a start of the multi-start failed on {batch.executor}: "
                          f"{record['error']}")
                outcomes.append(_Outcome(np.asarray(u), False, 0, None, math.inf, [math.inf],
                                         skipped=1))
        if self.progress:
            print(f"  {len(starts)} start(s) on {batch.executor}: costs "
                  + ", ".join(f"{o.cost:.6e}" for o in outcomes), flush=True)
        return outcomes

    def finish(self, outcome: _Outcome, clock: float, solver_name: str) -> FitResult:
        """The result at `outcome`: with the noise estimated, the noise from the residuals and a
        refit with those weights; then the sensitivities, identifiability and verdict."""
        problem, transform, objective = self.problem, self.transform, self.objective
        u, converged, n_steps = floats(outcome.u), outcome.converged, outcome.steps
        linearisation, noise_estimated, sigma = outcome.linearisation, self.noise_estimated, \
            self.sigma
        start_costs = outcome.start_costs
        if self.noise_note:  # (a noise model not usable on these data)
            self.note(self.noise_note)
        theta = transform.evaluated(u)[0]
        unusable = failed_cost(outcome.cost)
        if noise_estimated and not unusable:  # (no noise to estimate where nothing simulates)
            # (Refined already where its verdict needed it: the same fit, not run twice.)
            refinement = outcome.judged[1] if outcome.judged is not None else None
            try:
                refinement = refinement or self.refine(u, self.progress)
            except eqx.EquinoxRuntimeError as error:  # (as in `local_fit`)
                self.note(f"the refit with the estimated noise was stopped by a check inside "
                          f"its compiled solve ({compiled_check_message(error)}); the fit "
                          "under the provisional weights is reported, with the noise its "
                          "residuals show")
                sigma = _estimate_noise(problem, theta, objective)
                refinement = (u, converged, 0, None, sigma, self.objective_for(sigma))
            u, converged, steps, linearisation, sigma, objective = refinement
            n_steps += steps
        white, correlated = objective, None
        if noise_estimated and not unusable and isinstance(self.noise_model, AR):
            correlated = correlated_fit(self, u, objective)  # (None: every channel white)
        if correlated is not None:
            u, converged, sigma, objective = (correlated.u, correlated.converged,
                                              correlated.sigma, correlated.objective)
            n_steps, linearisation = n_steps + correlated.steps, None
        theta = transform.evaluated(u)[0]  # (a lab frame's angles into one branch: the same
        signs, shifts = problem.one_branch(theta)  # model, columns of flipped angles negated)
        u = np.where(shifts != 0, u + (signs * theta + shifts - theta)  # (their transform
                     / np.asarray(transform.scale), u)  # unbounded: u = (theta - start) / scale)
        if linearisation is not None:
            linearisation = (*linearisation[:2], np.asarray(linearisation[2]) * signs,
                             *linearisation[3:])
        # The transform is elementwise: dr/dtheta = dr/du / (dtheta/du), column by column,
        # the slope taken where the Jacobian was (one small final step before `u`: with the
        # slope at `u` its columns were rescaled by up to 1e-3, which turned a rank-deficient
        # Jacobian's row space off the moments' gradients, and they lost their errors).
        theta, slope = transform.evaluated(u)
        taken = slope if linearisation is None or len(linearisation) < 4 else np.where(
            shifts != 0, slope, transform.evaluated(linearisation[3])[1])  # (shifted: linear)
        if linearisation is not None and np.all(np.abs(taken) > 0) and objective.complete():
            residuals, jacobian = linearisation[1], np.asarray(linearisation[2]) / taken
            predictions = objective.predictions_from(residuals)  # (the data's samples)
        else:  # no Jacobian at the solution yet, a parameter pressed flat against its bound,
            # or values not measured (whose predictions the residuals do not hold)
            jacobian, residuals, predictions = _evaluate(objective, jnp.asarray(theta))
            predictions = objective.trimmed(predictions)
        rows = objective.data_rows()  # the padding off (spineid/identify/_trajectory/_objective.py)
        jacobian, residuals = np.asarray(jacobian)[rows], np.asarray(residuals)[rows]
        cost = float(0.5 * np.sum(residuals**2))
        simulation_failed = bool(np.any(failed(residuals)))

        names = problem.names
        # The statistical stop leaves a parameter that heads for its bound within a small
        # fraction of its standard error from it: that close, it counts as on the bound.
        analysis = analyse_parameters(jacobian, theta, names,
                                      [p.unit for p in problem.parameters], transform,
                                      StandardErrorBound())
        at_bound, identifiability = analysis.at_bound, analysis.identifiability
        covariance, stderr, correlation = analysis.covariance, analysis.stderr, analysis.correlation
        warnings = list(analysis.warnings)
        stderr_robust = None
        if correlated is not None:  # (Newey-West errors of the white-weighted estimate)
            correlated.least_squares = signs * correlated.least_squares + shifts
            ols = _evaluate(white, jnp.asarray(correlated.least_squares))
            stderr_robust = robust_errors(problem, *(np.asarray(a)[white.data_rows()]
                                                     for a in ols[:2]),
                                          ~at_bound & identifiability.identifiable)
            warnings.extend(drift_notes(theta, correlated.least_squares, stderr_robust,
                                        max(n.order for n in correlated.noises.values())))
        if identifiability.rank < identifiability.n_parameters and any(
            p.field == "stiffness" and p.element is not None
            and isinstance(problem.models[0].elements[p.element], VectorSprings)
            for p in problem.parameters
        ):
            warnings.append(VECTOR_MEASURE_NOTE)
        warnings.extend(self.notes + problem.fitted_notes(theta))
        unfitted = None if noise_estimated else unfitted_note(  # (the start in theta's branch)
            n_steps, theta, signs * problem.start + shifts, cost, problem.n_data,
            [m.values for m in problem.measurements], predictions)
        if unfitted:
            converged = False  # (nothing was fitted)
            warnings.append(unfitted)
        if outcome.agreed:
            warnings.append(agreement_note(outcome.agreed) + ".")
        if simulation_failed:
            warnings.append("The simulation failed at the returned parameters; do not use them.")
            converged = False
        scale = sigma if correlated is None else correlated.marginal  # (the errors' own sd)
        message = "converged" if converged else (
            "the solver stopped without meeting its tolerances (max_steps reached or failed); "
            "try more steps, more starts or another solver"
        )
        return FitResult(
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
            solver=solver_name + ("" if problem.simulation_solver is None else
                                  f", simulated by {type(problem.simulation_solver).__name__}"),
            integrators=tuple(integrator_names(problem.models, problem.simulation_solver)),
            start_costs=start_costs,
            starts={"run": outcome.tried, "skipped": outcome.skipped},
            noise={c: float(s) for c, s in zip(problem.channels, scale)},
            stderr_robust=stderr_robust,
            noise_estimated=noise_estimated,
            identifiability=identifiability,
            moments=_vector_spring_moments(problem, theta, identifiability),
            predictions=predictions,
            measurements=problem.measurements,
            noise_given_as=getattr(problem, "noise_read", {}),
            warnings=warnings,
            seconds=time.perf_counter() - clock,
            goodness_of_fit=assess_fit(
                [(m.values - p) / scale for m, p in zip(problem.measurements, predictions)],
                problem.channels, identifiability.rank, noise_given=not noise_estimated,
                sigma=dict(zip(problem.channels, map(float, scale))),
                units=dict(zip(problem.channels, problem.models[0].observable_units)),
                noise_max=problem.noise_max,
                noise_models=correlated.noises if correlated else None,
                misfit_residuals=correlated.blocks if correlated else None,
                **self.misfit_options(noise_estimated and not unusable)),
            refit=_HeldRefit(problem, self.local, theta, sigma,
                             None if correlated is None else objective.coefficients),
            lower_bounds=np.array([p.lower for p in problem.parameters]),
            upper_bounds=np.array([p.upper for p in problem.parameters]),
        )


class _HeldRefit:
    """Least cost of `problem` with free parameter `i` held at `v` and the others refitted by
    the fit's local solver (the noise held at the fit's), warm-started from the solution at the
    nearest value held before: the points of a profile (`FitResult.profile`); under a noise
    model with its whitening `coefficients` `(c, q)` (`sigma` the innovations' deviations)."""

    def __init__(self, problem: FitProblem, local, theta, sigma, coefficients=None):
        self.problem, self.local, self.coefficients = problem, local, coefficients
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
            objective = run.objective_for(self.sigma, self.coefficients)
            cost = float(_cost(objective, run.transform.to_unconstrained(jnp.asarray(theta))))
            self.solutions[(i, v)] = theta
            return cost
        held_models = [apply_values(m, problem.parameters, jnp.asarray(theta), record=k)
                       for k, m in enumerate(problem.models)]
        sub = FitProblem(problem.model_file or problem.model, problem.measurements, others,
                         noise, models=held_models, noise_max=problem.noise_max,
                         simulation_rtol=problem.simulation_rtol,
                         simulation_atol=problem.simulation_atol,
                         simulation_max_steps=problem.simulation_max_steps,
                         simulation_solver=problem.simulation_solver)
        run = _Run(sub, self.local, False)
        run.objective = run.objective_for(self.sigma, self.coefficients)
        outcome = run.local_fit(np.zeros(len(others)))
        theta[np.arange(theta.size) != i] = run.transform.evaluated(outcome.u)[0]
        self.solutions[(i, v)] = theta
        return outcome.cost if np.isfinite(outcome.cost) else math.inf


def _estimate_noise(problem, theta, objective: _Objective) -> np.ndarray:
    """Per-channel noise from the residuals of a fit, corrected for the fitted degrees of
    freedom: sigma_c^2 = sum r_c^2 / (n_c (1 - p / n))."""
    return noise_from_residuals(np.concatenate(residual_blocks(objective, theta)),
                                len(problem.parameters), problem.channel_ranges())


# The run of the last problem a worker thread fitted starts of (`start_record`): the starts of
# one multi-start share their problem object within a task, so its objective and scales are
# built once per task, not once per start (per thread: `spineid.Devices` runs a thread per
# device).
_LAST_RUN = threading.local()


def start_record(job: tuple) -> dict:
    """One start of a multi-start on an executor (`_Run.starts_on`), wherever it runs: `job =
    (problem, local solver, inner solver, u0)` with `inner` the local solver or a
    `MultipleShooting`; returns the fit's JSON record (`u`, `cost`, `converged`, `steps`,
    `skipped`, `notes`). The run is rebuilt from the problem as `fit` builds it (the same
    provisional or given noise weights and scales), so the fit is the one this process
    would make."""
    problem, local, inner, u0 = job
    run = getattr(_LAST_RUN, "run", None)
    if run is None or run.problem is not problem or run.local != local:
        run = _LAST_RUN.run = _Run(problem, local, False)
    run.notes, run.quiet = [], True  # (its notes go back with the record)
    outcome = (run.shooting_fit(inner, np.asarray(u0)) if isinstance(inner, MultipleShooting)
               else run.local_fit(np.asarray(u0)))
    return {"u": [float(x) for x in outcome.u], "cost": float(outcome.cost),
            "converged": bool(outcome.converged), "steps": int(outcome.steps),
            "skipped": int(outcome.skipped), "notes": list(run.notes)}
