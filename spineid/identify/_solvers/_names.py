"""The command line's names of the solvers, and the defaults."""

from ._adam import Adam
from ._auto import Auto
from ._base import AbstractSolver
from ._jaxopt_lm import JaxoptLevenbergMarquardt
from ._lbfgs import LBFGS
from ._levenberg_marquardt import LevenbergMarquardt
from ._multiple_shooting import MultipleShooting
from ._optimistix_lm import OptimistixLevenbergMarquardt

SOLVER_NAMES = {"auto": Auto, "lm": LevenbergMarquardt, "shooting": MultipleShooting,
                "jaxopt-lm": JaxoptLevenbergMarquardt,
                "optimistix-lm": OptimistixLevenbergMarquardt, "adam": Adam, "lbfgs": LBFGS}
"""The command line's `--solver` names and the solver each stands for (default options)."""

DEFAULT_SOLVER = "auto"
# Batches of fits (fit_many) run as one vmap. There optimistix is used: vmapped, jaxopt's LM
# ran 100 fits of the 4-axial-spring benchmark in 122 s with some not converged, optimistix in
# 24 s, all converged (experiments/benchmark_fit.py, 2-core CPU).
BATCH_SOLVER = "optimistix-lm"


def as_solver(solver):
    """A solver object from a solver object or a `SOLVER_NAMES` name; anything else raises a
    `ValueError` naming what exists."""
    if isinstance(solver, str):
        if solver not in SOLVER_NAMES:
            raise ValueError(f"solver {solver!r}: expected one of {list(SOLVER_NAMES)} or a "
                             "solver object")
        return SOLVER_NAMES[solver]()
    if isinstance(solver, AbstractSolver):
        return solver
    raise ValueError(f"solver {solver!r}: expected one of {list(SOLVER_NAMES)} or a solver "
                     "object (spineid.LevenbergMarquardt(...), spineid.MultipleShooting(...), "
                     "spineid.MultiStart(...), ...)")
