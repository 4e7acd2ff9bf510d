"""Variable projection (Golub and Pereyra 1973) for load laws with free breakpoints, as a solver
wrapping spineid's Levenberg-Marquardt; the breakpoint search is in
`spineid/identify/_kinds/_breakpoints.py`."""

import dataclasses
from typing import ClassVar

from ._base import AbstractWrappedSolver, options_checked, refuse_solver
from ._levenberg_marquardt import LevenbergMarquardt

LAW_SOLVER = LevenbergMarquardt(max_steps=500, rtol=1e-12, atol=1e-12, decrement_tol=0.0)
"""The local solver of load-law fits: no ODE, so a step costs microseconds and the fit runs to
the classical stops (step, gradient), not the statistical one; a profile then equals the
Cramer-Rao interval of a linear problem to 1e-7 of its width."""


@options_checked
@dataclasses.dataclass(frozen=True)
class VariableProjection(AbstractWrappedSolver):
    """Variable projection (Golub and Pereyra 1973) for a load law whose loads enter linearly and
    whose breakpoints do not (`spineid.fit_load_law` with free breakpoints of a
    `piecewise_linear` law; `spineid table --free-breakpoints`): for given breakpoints the node
    loads (and a damper) are a linear least-squares solution, and the cost as a function of the
    breakpoints alone is searched globally, exactly for one interior breakpoint (Hudson 1966),
    coordinate-wise for more (`spineid/identify/_kinds/_breakpoints.py`). Where the projected
    solution satisfies the law's bounds (rises >= 0 of a monotone table) and there is no
    smoothing, it is the least-squares optimum itself; otherwise `inner` (spineid's
    `LevenbergMarquardt`) refines it from there.

    On 13 simulated two-phase shear-test records of 1500 points (experiments/
    benchmark_breakpoints.py, docs/performance.md), Levenberg-Marquardt from evenly spaced breakpoints
    reached the best optimum on 9; this method on all 13, in 0.045 s (median, warm).
    """

    inner: object = dataclasses.field(default_factory=lambda: LAW_SOLVER)
    name: ClassVar[str] = "varpro"

    def __post_init__(self):
        if not isinstance(self.inner, LevenbergMarquardt):
            raise ValueError(f"VariableProjection(inner={self.inner!r}): expected a "
                             "spineid.LevenbergMarquardt")

    def search(self, run) -> tuple:
        """Refused: a trajectory's parameters do not enter linearly (`spineid.fit` refuses
        this solver before it builds a run)."""
        refuse_solver("fit", self, "a solver of trajectories; variable projection needs "
                      "loads that enter linearly, as in spineid.fit_load_law")
