"""optax's L-BFGS as a solver object: first-order, gradients of the cost by reverse mode."""

import dataclasses
from typing import ClassVar

from ._base import AbstractLocalSolver, LocalSolution, options_checked, positive_int
from ._routines import _solve_optax


@options_checked
@dataclasses.dataclass(frozen=True)
class LBFGS(AbstractLocalSolver):
    """optax's L-BFGS on the cost (gradients by reverse mode), at most `max_steps` steps,
    stopping on a small gradient."""

    max_steps: int = 2000
    name: ClassVar[str] = "lbfgs"
    first_order: ClassVar[bool] = True

    def __post_init__(self):
        positive_int("LBFGS", "max_steps", self.max_steps)

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`LocalSolution` from `u0`, without a linearisation (`provisional`: no effect, its stops do not
        depend on the noise level)."""
        u, converged, steps = _solve_optax(objective, u0, "lbfgs", None, self.max_steps)
        return LocalSolution(u, bool(converged), int(steps), None)
