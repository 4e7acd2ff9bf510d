"""optimistix's Levenberg-Marquardt as a solver object: the vmappable solver of batches of fits
(`spineid.fit_many`), measured against spineid's own in experiments/solver_comparison.py."""

import dataclasses
from typing import ClassVar

from ._base import AbstractPeerLevenbergMarquardt, LocalSolution, options_checked
from ._routines import _progress_printer, _solve_lm


@options_checked
@dataclasses.dataclass(frozen=True)
class OptimistixLevenbergMarquardt(AbstractPeerLevenbergMarquardt):
    """optimistix's Levenberg-Marquardt (forward-mode Jacobians through the ODE); stops on a
    relative step `rtol` and an absolute `atol`, or after `max_steps`."""

    name: ClassVar[str] = "optimistix-lm"

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`LocalSolution` from `u0`, without a linearisation."""
        u, converged, steps = _solve_lm(objective, u0, self.rtol, self.atol, self.max_steps,
                                        _progress_printer(progress))
        return LocalSolution(u, bool(converged), int(steps), None)
