"""jaxopt's Levenberg-Marquardt as a solver object (jaxopt is no longer maintained; kept as a
peer measured against spineid's own, experiments/solver_comparison.py)."""

import dataclasses
from typing import ClassVar

from ._base import AbstractPeerLevenbergMarquardt, LocalSolution, options_checked
from ._routines import _solve_jaxopt_lm, _solve_jaxopt_lm_showing_progress


@options_checked
@dataclasses.dataclass(frozen=True)
class JaxoptLevenbergMarquardt(AbstractPeerLevenbergMarquardt):
    """jaxopt's Levenberg-Marquardt (Madsen-Nielsen stop: a step `rtol` relative to the
    parameters, a gradient `atol`), forward-mode Jacobians; jaxopt is no longer maintained."""

    name: ClassVar[str] = "jaxopt-lm"

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`LocalSolution` from `u0`, without a linearisation."""
        run = _solve_jaxopt_lm_showing_progress if progress else _solve_jaxopt_lm
        u, converged, steps = run(objective, u0, self.rtol, self.atol, self.max_steps)
        return LocalSolution(u, bool(converged), int(steps), None)
