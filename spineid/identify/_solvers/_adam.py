"""optax's Adam as a solver object: first-order, gradients of the cost by reverse mode through the
ODE, optionally on mini-batches of load cases."""

import dataclasses
from typing import ClassVar

import jax

from ._base import AbstractLocalSolver, LocalSolution, options_checked, positive_int, positive_number
from ._routines import _solve_optax


@options_checked
@dataclasses.dataclass(frozen=True)
class Adam(AbstractLocalSolver):
    """optax's Adam on the cost (gradients by reverse mode through the ODE), `max_steps`
    steps of `learning_rate` (in the unconstrained coordinates); with `batch_size`, each step
    sees a random mini-batch of that many load cases (drawn with `seed`). Judged converged on a
    small gradient."""

    learning_rate: float = 0.05
    max_steps: int = 2000
    batch_size: int | None = None
    seed: int = 0
    name: ClassVar[str] = "adam"
    first_order: ClassVar[bool] = True

    def __post_init__(self):
        positive_number("Adam", "learning_rate", self.learning_rate)
        positive_int("Adam", "max_steps", self.max_steps)
        if self.batch_size is not None:
            positive_int("Adam", "batch_size", self.batch_size)

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`LocalSolution` from `u0`, without a linearisation (`provisional`: no effect, its stops do not
        depend on the noise level)."""
        n_cases = len(objective.models)
        if self.batch_size is not None and self.batch_size > n_cases:
            raise ValueError(f"Adam(batch_size={self.batch_size}): at most {n_cases}, the "
                             "number of load cases")
        u, converged, steps = _solve_optax(objective, u0, "adam", self.learning_rate,
                                           self.max_steps, self.batch_size,
                                           jax.random.PRNGKey(self.seed))
        return LocalSolution(u, bool(converged), int(steps), None)
