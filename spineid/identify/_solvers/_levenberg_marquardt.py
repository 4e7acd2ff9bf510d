"""spineid's own Levenberg-Marquardt as a solver object (the algorithm is in
`spineid/identify/_common/_least_squares.py`)."""

import dataclasses
from typing import ClassVar

import equinox as eqx
import numpy as np

from ..._programs import stored_call
from .._common._least_squares import (
    DECREMENT_TOL,
    LeastSquaresSolution,
    levenberg_marquardt,
    stepwise_levenberg_marquardt,
)
from ._base import AbstractLocalSolver, LocalSolution, options_checked, positive_int, positive_number


@eqx.filter_jit
def _levenberg_marquardt_arrays(function, u0, **options) -> tuple:
    # `levenberg_marquardt`'s solution as the tuple of arrays a stored program returns (its
    # fields in order).
    solution = levenberg_marquardt(function, u0, **options)
    return tuple(getattr(solution, field.name) for field in dataclasses.fields(solution))


@options_checked
@dataclasses.dataclass(frozen=True)
class LevenbergMarquardt(AbstractLocalSolver):
    """spineid's Levenberg-Marquardt (`spineid.levenberg_marquardt`): one forward-mode pass
    through the ODE per accepted step gives residuals and Jacobian together; it stops when the
    estimate is within about 0.01 standard errors of the optimum (`decrement_tol`, half
    chi-square units; 0 switches that stop off), or on a small step (`rtol`, relative, in the
    solver's unconstrained coordinates) or gradient (`atol`), or after `max_steps` steps.

    `jacobian_rtol`, `jacobian_atol`: ODE tolerances of the Jacobians taken on the way to the
    optimum (the residuals, and the Jacobian that confirms the stop and gives the standard
    errors, use the problem's simulation tolerances). Default: 100 times the simulation's
    `rtol`, at most 1e-3 and never tighter than it; `atol` scaled alike. Setting
    `jacobian_rtol` to the simulation's takes every Jacobian exactly.
    """

    max_steps: int = 200
    rtol: float = 1e-10
    atol: float = 1e-10
    decrement_tol: float = DECREMENT_TOL
    jacobian_rtol: float | None = None
    jacobian_atol: float | None = None
    name: ClassVar[str] = "lm"

    def __post_init__(self):
        positive_int("LevenbergMarquardt", "max_steps", self.max_steps)
        positive_number("LevenbergMarquardt", "rtol", self.rtol)
        positive_number("LevenbergMarquardt", "atol", self.atol)
        if not (isinstance(self.decrement_tol, (int, float)) and self.decrement_tol >= 0):
            raise ValueError(f"LevenbergMarquardt(decrement_tol={self.decrement_tol!r}): "
                             "expected a number >= 0")
        positive_number("LevenbergMarquardt", "jacobian_rtol", self.jacobian_rtol, True)
        positive_number("LevenbergMarquardt", "jacobian_atol", self.jacobian_atol, True)

    def jacobian_tolerances(self, rtol: float, atol: float) -> tuple[float, float]:
        """The ODE tolerances of the Jacobians on the way, for simulation tolerances
        `(rtol, atol)`; a `ValueError` if tighter than those."""
        jacobian_rtol = self.jacobian_rtol
        if jacobian_rtol is None:
            jacobian_rtol = max(rtol, min(100.0 * rtol, 1e-3))
        jacobian_atol = self.jacobian_atol
        if jacobian_atol is None:
            jacobian_atol = atol * jacobian_rtol / rtol
        if jacobian_rtol < rtol or jacobian_atol < atol:
            raise ValueError(
                f"LevenbergMarquardt(jacobian_rtol={jacobian_rtol}, jacobian_atol="
                f"{jacobian_atol}): the Jacobians' ODE tolerances cannot be tighter than the "
                f"simulation's ({rtol}, {atol})")
        return jacobian_rtol, jacobian_atol

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False,
              damping: float | None = None):
        """`LocalSolution` from `u0` (unconstrained) of an `AbstractObjective`, with the
        linearisation `(cost, residuals, jacobian)` at the solution; `provisional`: the
        weights are a placeholder for a noise still to be estimated (`levenberg_marquardt`;
        passed as an array, so both kinds of pass share one compilation). An objective whose
        compilation dominates (`stepwise`) is solved by the same iterations as a Python loop
        over its compiled linearisation (`stepwise_levenberg_marquardt`). `damping`: a refit's
        start, the damping an earlier fit of nearly the same residuals ended with (its
        `LocalSolution.damping`; the compiled loop only, ignored by the stepwise one)."""
        options = dict(max_steps=self.max_steps, decrement_tol=self.decrement_tol,
                       xtol=self.rtol, gtol=self.atol)
        if objective.stepwise:
            solution = stepwise_levenberg_marquardt(objective, u0, progress=progress,
                                                    provisional=bool(provisional), **options)
        else:
            inexact = objective.inexact_jacobians
            options |= dict(inexact_jacobians=inexact, samples=objective.samples(),
                            provisional=np.asarray(bool(provisional)),
                            damping=np.asarray(np.inf if damping is None else damping, float))
            function = objective.at_precision if inexact else objective
            if progress:  # (printing calls back into Python: traced, never stored)
                solution = levenberg_marquardt(function, u0, progress=True, **options)
            else:  # (a later process loads the traced program: `spineid/_programs.py`)
                solution = LeastSquaresSolution(*stored_call(_levenberg_marquardt_arrays,
                                                             function, u0, **options))
        # Its last exact forward-mode pass is at the solution (or one small final step before
        # it, `linearised_at`): the cost and the sensitivities of the result come from the
        # solver instead of being computed again.
        return LocalSolution(solution.value, bool(solution.converged), int(solution.steps),
                             (solution.cost, solution.residuals, solution.jacobian,
                              np.asarray(solution.linearised_at)),
                             float(solution.damping))
