"""The solvers of measure recovery (`spineid.recover`): conditional gradients (Frank-Wolfe) over
nonnegative measures on the `[measure]` curve, off the grid (`SlidingFrankWolfe`) or on a fixed
grid of springs (`GridFrankWolfe`). They carry the options of the recovery, as the
least-squares solvers carry theirs; the algorithm is in `spineid/identify/_recovery/`. They are
not `AbstractSolver`s: the unknown is a measure of any number of atoms, not a vector of
parameters, so no least-squares fit kind takes them and recovery takes no other solver."""

import dataclasses

from ._base import options_checked, positive_int, positive_number


def _check_common(owner: str, solver) -> None:
    positive_number(owner, "gap_tolerance", solver.gap_tolerance)
    positive_int(owner, "max_iterations", solver.max_iterations)
    positive_int(owner, "simulation_max_steps", solver.simulation_max_steps)


@options_checked
@dataclasses.dataclass(frozen=True)
class SlidingFrankWolfe:
    """Off-the-grid recovery by the sliding Frank-Wolfe method (Denoyelle, Duval, Peyre and
    Soubies 2019; `spineid.recover`): at most `max_atoms` atoms; the first variation evaluated
    on `fine_grid` points of the curve; stop when the Frank-Wolfe gap is below
    `gap_tolerance * max(cost, n_data)` (cost in half chi-square units); `max_iterations`
    projected Levenberg-Marquardt iterations per refit of positions and weights;
    `simulation_max_steps` steps of each integration."""

    max_atoms: int = 4
    fine_grid: int = 2001
    gap_tolerance: float = 1e-3
    max_iterations: int = 60
    simulation_max_steps: int = 50_000

    def __post_init__(self):
        positive_int("SlidingFrankWolfe", "max_atoms", self.max_atoms)
        positive_int("SlidingFrankWolfe", "fine_grid", self.fine_grid)
        if self.fine_grid < 2:
            raise ValueError(f"SlidingFrankWolfe(fine_grid={self.fine_grid}): expected at "
                             "least 2 points")
        _check_common("SlidingFrankWolfe", self)


@options_checked
@dataclasses.dataclass(frozen=True)
class GridFrankWolfe:
    """Fixed-grid recovery (Liu 2001, section 3.3; `spineid.recover_grid`): `n_springs` vector
    springs equally spaced on the curve (end points included), fully corrective Frank-Wolfe over
    the grid; stop when the gap over the grid is at most `gap_tolerance * max(cost, n_data)`,
    or after `max_rounds` rounds (of each search: with the noise estimated, the search under
    provisional weights and then its refit under the estimated noise); `max_iterations`
    projected Levenberg-Marquardt iterations per refit of the weights; `simulation_max_steps`
    steps of each integration; `vertex_batch` single-spring starts at most simulated in one
    vmapped solve by the search for the start (memory against speed; the batches of one size,
    the last padded, so that one program runs them; the search shows a progress bar over its
    batches when there are several)."""

    n_springs: int
    gap_tolerance: float = 1e-3
    max_rounds: int = 30
    max_iterations: int = 60
    simulation_max_steps: int = 50_000
    vertex_batch: int = 256

    def __post_init__(self):
        positive_int("GridFrankWolfe", "n_springs", self.n_springs)
        positive_int("GridFrankWolfe", "max_rounds", self.max_rounds)
        positive_int("GridFrankWolfe", "vertex_batch", self.vertex_batch)
        _check_common("GridFrankWolfe", self)
