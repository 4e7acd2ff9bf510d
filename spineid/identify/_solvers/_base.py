"""The solver interface every fit kind speaks (optimistix's `AbstractIterativeSolver` and diffrax's
`AbstractWrappedSolver` are the models):

- `AbstractSolver`: what every solver object is. It carries its options (a frozen dataclass whose
  unknown options are refused by name, `options_checked`), has a `name` (what a result's
  `solver` field and the command line's `--solver` call it), knows the local solver at its core
  (`local()`), and says how it searches a trajectory fit (`search(run)`: which fits of the run it
  makes, from which starts, in what order).
- `AbstractLocalSolver`: a solver that runs from one start, `solve(objective, u0) ->
  LocalSolution`; it says how the objective is differentiated (`adjoint()`, `first_order`) and
  at which ODE tolerances its Jacobians on the way are taken.
- `AbstractWrappedSolver`: a strategy around another solver (`inner`): multiple shooting, a
  multi-start, `Auto`. Its `local()` is the inner one's.

A fit kind that cannot use a solver refuses it with one sentence (`check_solver`), naming what it
accepts.
"""

import abc
import dataclasses
import functools
import math
from typing import ClassVar

import diffrax
import numpy as np


@dataclasses.dataclass(frozen=True)
class LocalSolution:
    """What a local solver returns: `value` (`(p,)`, the solver's unconstrained coordinates),
    `converged` (a stopping test was met, not the step limit), `steps` (iterations), and
    `linearisation` (`(cost, residuals (n,), jacobian (n, p))` at the solution, or `None` where
    the solver does not take Jacobians; a fourth entry, where given, `(p,)`: where the Jacobian
    was taken, one small final step before the solution), and `damping` (Levenberg-Marquardt's damping left, for
    a refit of nearly the same residuals to start from: `LevenbergMarquardt.solve(damping=)`;
    `None` from other solvers). It unpacks as `u, converged, steps, lin = ...`.
    (A dataclass, not a `NamedTuple`: a named tuple's generated constructor belongs to no
    module, which the program store (`spineid/_programs.py`) takes for a replacement made at
    run time, and it then stores no program.)"""

    value: np.ndarray
    converged: bool
    steps: int
    linearisation: tuple | None
    damping: float | None = None

    def __iter__(self):
        return iter((self.value, self.converged, self.steps, self.linearisation))

    @property
    def cost(self):
        """`1/2 |r|^2` at the solution (from the linearisation)."""
        return self.linearisation[0]

    @property
    def residuals(self):
        """The residuals `(n,)` at the solution (from the linearisation)."""
        return self.linearisation[1]

    @property
    def jacobian(self):
        """`dr/du` `(n, p)` at the solution, or one small final step before it."""
        return self.linearisation[2]


class AbstractSolver(abc.ABC):
    """A least-squares solver object (module docstring)."""

    name: ClassVar[str]

    @abc.abstractmethod
    def local(self) -> "AbstractLocalSolver":
        """The local solver at the core of this one (itself, for a local solver)."""

    @abc.abstractmethod
    def search(self, run) -> tuple:
        """The fits this solver makes of a trajectory fit's `run` (`spineid.identify._trajectory._run._Run`:
        `local_fit`, `shooting_fit`, `multistart`, `explained`): `(outcome, description)`,
        the description being what the result's `solver` field says ran."""


class AbstractLocalSolver(AbstractSolver):
    """A solver that runs from one start (module docstring)."""

    first_order: ClassVar[bool] = False
    """Whether it uses gradients of the cost only (reverse mode), not Jacobians."""

    def local(self) -> "AbstractLocalSolver":
        """Itself."""
        return self

    def search(self, run) -> tuple:
        """One fit from the given start."""
        return run.local_fit(np.zeros(len(run.problem.parameters))), self.name

    def adjoint(self) -> diffrax.AbstractAdjoint:
        """How the objective is differentiated through diffrax: forward mode for the solvers
        that take Jacobians, reverse mode for the first-order ones."""
        return (diffrax.RecursiveCheckpointAdjoint() if self.first_order
                else diffrax.ForwardMode())

    def jacobian_tolerances(self, rtol: float, atol: float) -> tuple[float, float]:
        """The ODE tolerances of the Jacobians taken on the way to the optimum, for the
        simulation's `(rtol, atol)`: the simulation's own, unless the solver says otherwise."""
        return rtol, atol

    @abc.abstractmethod
    def solve(self, objective, u0, progress: bool = False,
              provisional: bool = False) -> LocalSolution:
        """The fit of `objective` (residuals of unconstrained coordinates, `(p,) -> (n,)`)
        from `u0`; `progress` prints every step; `provisional`: the weights stand in for a
        noise still to be estimated (only solvers with a statistical stop use it)."""


def warm_start(previous) -> dict:
    """The options of a refit's `solve` from the refit before it, `previous` (`(LocalSolution,
    objective)` or `None`): its damping where its solver left one (Levenberg-Marquardt, whose
    refits of nearly the same residuals would otherwise spend their first steps bringing the
    default damping down: five or six Jacobians per refit in a 24-stiffness OpenSim neck)."""
    damping = None if previous is None else getattr(previous[0], "damping", None)
    return {} if damping is None else {"damping": damping}


class AbstractWrappedSolver(AbstractSolver):
    """A strategy around the solver `inner` (module docstring)."""

    inner: object

    def local(self) -> AbstractLocalSolver:
        """The inner solver's local solver."""
        return self.inner.local()


def check_solver(fit_kind: str, solver, accepted: tuple[type, ...], described: str):
    """`solver` if it is an instance of one of the `accepted` classes; otherwise the
    one-sentence `ValueError` every fit kind gives for a solver it cannot use: the fit, the
    solver, and what the fit takes (`described`, in words)."""
    if not isinstance(solver, accepted):
        refuse_solver(fit_kind, solver, described)
    return solver


def refuse_solver(fit_kind: str, solver, described: str):
    """Raise `check_solver`'s refusal of `solver` by `fit_kind`, which takes `described`."""
    raise ValueError(f"{fit_kind}(solver={solver!r}): this fit takes {described}")


def options_checked(cls):
    """Class decorator for a solver dataclass: an option it does not have is refused with a
    `TypeError` naming the option, the solver(s) that do have it and this solver's options
    (instead of Python's bare 'unexpected keyword argument')."""
    init = cls.__init__
    own = [f.name for f in dataclasses.fields(cls)]

    @functools.wraps(init)
    def checked(self, *args, **options):
        for option in options:
            if option not in own:
                others = [c.__name__ for c in _CHECKED if option in
                          [f.name for f in dataclasses.fields(c)]]
                where = (f"; it is an option of {', '.join(others)}" if others else "")
                raise TypeError(f"{cls.__name__}({option}=...): {cls.__name__} has no option "
                                f"{option!r}{where}. Its options: {', '.join(own)}")
        init(self, *args, **options)

    cls.__init__ = checked
    _CHECKED.append(cls)
    return cls


_CHECKED: list[type] = []


def positive_int(owner: str, name: str, value) -> None:
    """Refuse `owner(name=value)` unless `value` is a positive whole number."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}({name}={value!r}): expected a positive integer")


def positive_number(owner: str, name: str, value, allow_none: bool = False) -> None:
    """Refuse `owner(name=value)` unless `value` is a positive finite number (or `None` with
    `allow_none`)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"{owner}({name}={value!r}): expected a positive number")


@dataclasses.dataclass(frozen=True)
class AbstractPeerLevenbergMarquardt(AbstractLocalSolver):
    """A library's Levenberg-Marquardt with forward-mode Jacobians through the ODE: stops on a
    step `rtol` (relative) and `atol`, or after `max_steps`; its stops do not depend on the
    noise level (so `provisional` has no effect)."""

    max_steps: int = 200
    rtol: float = 1e-10
    atol: float = 1e-10

    def __post_init__(self):
        owner = type(self).__name__
        positive_int(owner, "max_steps", self.max_steps)
        positive_number(owner, "rtol", self.rtol)
        positive_number(owner, "atol", self.atol)
