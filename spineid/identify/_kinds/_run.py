"""The fits a solver object makes of one objective of a fit kind other than trajectories (load
laws, segments): spineid's Levenberg-Marquardt from the given start, or a `MultiStart` of it.

A multi-start runs the local solver from the given start and from `n - 1` starts drawn by
`MultiStart.draw` (around the start, within the parameters' bounds), one after the other, and
keeps the lowest cost; it stops early when `agreement` starts come back to the lowest cost found
(`agreeing`: within `SAME_OPTIMUM`, relative): that optimum is then the model's best. A start whose first
evaluation fails is skipped and counted. (The trajectory fits' multi-start, `_Run.multistart`,
also orders the starts by their initial cost and stops at the first fit whose model explains
the data; here a first evaluation is what a local fit costs, the compilation of an equilibrium
solve, so every start runs its fit.)
"""

import numpy as np

from .._common._failure import failed_cost
from .._solvers import (
    agreeing,
    agreement_note,
    check_solver,
    LevenbergMarquardt,
    MultiStart,
    refuse_solver,
)

KIND_SOLVERS = (LevenbergMarquardt, MultiStart)
"""The solvers `run_solver` takes (a `MultiStart` of spineid's Levenberg-Marquardt)."""


def run_solver(solver, objective, transform, u0, *, progress: bool = False,
               provisional: bool = False) -> tuple:
    """The fit of `objective` (an `AbstractObjective`) by `solver` from the unconstrained start
    `u0` `(p,)` (module docstring); `transform` draws a multi-start's starts; `provisional`:
    the weights stand in for a noise still to be estimated.

    **Returns:** `(solution, description, notes)`: the best `LocalSolution`, what ran in words
    (the result's `method` or `solver`), and warnings for the result."""
    if not isinstance(solver, MultiStart):
        return solver.solve(objective, u0, progress, provisional), solver.name, []
    local = solver.local()
    starts = [np.asarray(u0, dtype=float)] + list(solver.draw(transform, solver.n - 1))
    best, costs, skipped, agreed = None, [], 0, 0
    for index, start in enumerate(starts):
        solution = local.solve(objective, start, progress, provisional)
        cost = float(solution.cost)
        if failed_cost(cost, 0.5):
            skipped += 1
            continue
        costs.append(cost)
        if best is None or cost < float(best.cost):
            best = solution
        if progress:
            print(f"  start {index + 1}/{len(starts)}: cost {cost:.6e}", flush=True)
        if agreeing(costs, float(best.cost)) >= solver.agreement:
            agreed = agreeing(costs, float(best.cost))
            break
    notes = []
    if best is None:  # nothing could be evaluated: the fit from the given start, to report it
        best = local.solve(objective, starts[0], progress, provisional)
        notes.append(f"no start of the multi-start could be evaluated ({skipped} skipped); "
                     "the fit from the given start is reported")
    if skipped:
        notes.append(f"{skipped} start(s) of the multi-start could not be evaluated and were "
                     "skipped")
    if agreed:
        notes.append(agreement_note(agreed))
    description = f"{solver.name} ({len(costs) + skipped} start(s) run)"
    return best, description, notes


def check_kind_solver(fit_kind: str, solver, also: tuple = (), described: str = ""):
    """`solver` if `fit_kind` can run it: spineid's `LevenbergMarquardt`, a `MultiStart` of one
    in this process, or one of `also` (described in words by `described`); otherwise
    `check_solver`'s one-sentence refusal."""
    accepted = ("a spineid.LevenbergMarquardt or a spineid.MultiStart of one (run in this "
                "process)" + (f", or {described}" if described else ""))
    check_solver(fit_kind, solver, KIND_SOLVERS + tuple(also), accepted)
    if isinstance(solver, MultiStart) and (not isinstance(solver.inner, LevenbergMarquardt)
                                           or solver.executor is not None):
        refuse_solver(fit_kind, solver, accepted)
    return solver
