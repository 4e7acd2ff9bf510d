"""A multi-start: the local solver (or multiple shooting) from many starts, the lowest cost
winning."""

import dataclasses
import math

import numpy as np

from ...executors._executors import AbstractExecutor
from ._base import AbstractLocalSolver, AbstractWrappedSolver, options_checked, positive_int, positive_number
from ._levenberg_marquardt import LevenbergMarquardt
from ._multiple_shooting import MultipleShooting

LOCAL_SOLVER_NAMES = ("LevenbergMarquardt, OptimistixLevenbergMarquardt, "
                      "JaxoptLevenbergMarquardt, Adam, LBFGS")
"""The local solvers, as refusals name them."""

SAME_OPTIMUM = 1e-3
"""Two fits whose costs differ by less than this fraction reached the same optimum."""


def agreeing(costs, lowest: float) -> int:
    """How many of the starts' final `costs` reached the `lowest` one (within `SAME_OPTIMUM`,
    relative): the starts that agree on the optimum."""
    return sum(c <= lowest * (1 + SAME_OPTIMUM) for c in costs)


def agreement_note(count: int) -> str:
    """The warning of a multi-start whose `count` starts agreed on its optimum (`agreeing`)."""
    return (f"{count} starts came back to the same lowest cost: it is this model's best fit, so "
            "if the model does not explain the data there, it lacks an effect the data show (not "
            "a better start)")


@options_checked
@dataclasses.dataclass(frozen=True)
class MultiStart(AbstractWrappedSolver):
    """Runs the local solver `inner` (or `MultipleShooting`) from the given start and from
    `n - 1` more, drawn with `seed` log-uniformly between `low` and `high` times the start's
    distance from each parameter's lower bound (a factor on a stiffness), uniformly over most of a two-sided
    bound, within `high` times the start's scale of an unbounded parameter. The starts are
    taken in the order of their initial cost (a simulation each); the fits run one after the
    other through one compiled solver, and with `stop_when_explained` the first fit whose
    model explains the data ends the search (`spineid.GoodnessOfFit`), as do `agreement` starts
    that come back to the lowest cost found (`agreeing`: within a relative `SAME_OPTIMUM`): then that optimum is
    the model's best, and if it does not explain the data, the model lacks something. The
    lowest cost wins. A start whose simulation fails is skipped and counted.

    With an `executor` (`spineid.Local()`, `spineid.Dask(...)`) the starts run as a batch on
    it, `chunk` starts per task, all of them (the early stops above need the fits one after
    the other); the lowest cost still wins, and `agreed` counts the starts that came back to
    it. The fits are the ones this process would make from the same starts."""

    inner: object = dataclasses.field(default_factory=LevenbergMarquardt)
    n: int = 16
    low: float = 0.2
    high: float = 5.0
    seed: int = 0
    stop_when_explained: bool = True
    agreement: int = 4
    executor: object = None
    chunk: int = 1

    def __post_init__(self):
        positive_int("MultiStart", "agreement", self.agreement)
        positive_int("MultiStart", "chunk", self.chunk)
        if self.executor is not None and not isinstance(self.executor, AbstractExecutor):
            raise ValueError(f"MultiStart(executor={self.executor!r}): expected None (this "
                             "process, one start after the other), spineid.Local(), "
                             "spineid.Devices() or spineid.Dask(...)")
        if not isinstance(self.inner, (AbstractLocalSolver, MultipleShooting)):
            raise ValueError(f"MultiStart(inner={self.inner!r}): expected a local solver "
                             f"({LOCAL_SOLVER_NAMES}) or MultipleShooting")
        positive_int("MultiStart", "n", self.n)
        positive_number("MultiStart", "low", self.low)
        positive_number("MultiStart", "high", self.high)
        if not self.low < 1.0 < self.high:
            raise ValueError(f"MultiStart(low={self.low}, high={self.high}): expected "
                             "low < 1 < high (factors around the start)")

    @property
    def name(self) -> str:
        """`multistart(<inner>)`."""
        return f"multistart({self.inner.name})"

    def draw(self, transform, count: int) -> np.ndarray:
        """`count` starts in the solver's unconstrained coordinates, `(count, p)`."""
        rng = np.random.default_rng(self.seed)
        lower, upper = np.isfinite(transform.lower), np.isfinite(transform.upper)
        p = transform.start.shape[0]
        factor = rng.uniform(math.log(self.low), math.log(self.high), (count, p))
        two_sided = rng.uniform(-4.0, 4.0, (count, p))
        unbounded = rng.uniform(-self.high, self.high, (count, p))
        return np.where(lower & upper, two_sided, np.where(lower, factor, unbounded))

    def where(self) -> str:
        """`, on <executor>` for a multi-start run on an executor (the solver's name says
        so)."""
        return "" if self.executor is None else f", on {self.executor.describe()}"

    def search(self, run) -> tuple:
        """The inner solver from the given start and the drawn ones (class docstring)."""
        outcome = run.multistart(self)
        return outcome, f"{self.name} ({outcome.tried} start(s) run{self.where()})"
