"""Least-squares solvers as objects that carry their own options (the optimistix style):
`fit(problem, LevenbergMarquardt(max_steps=50))`. Local solvers run from one start; `MultiStart`
runs a local solver from many; `Auto` (the default) runs Levenberg-Marquardt from the given start
and, when the result does not explain the data, from more starts.

The command line's `--solver` names are aliases of these objects (`SOLVER_NAMES`).

Why these defaults, measured:
- spineid's Levenberg-Marquardt is the local solver (experiments/solver_comparison.py, 20 poor
  starts per spread): median 3-9 steps and 0.17-0.89 s on the 4-axial-spring and 8-spring
  problems, against jaxopt's 8-16 steps and 0.42-1.79 s and optimistix's 18-32 steps and
  0.81-3.33 s, with the same or better success.
- A multi-start runs its starts one after the other through one compiled solver, stopping at
  the first fit that explains the data: vmapped, 100 Levenberg-Marquardt fits of the
  4-axial-spring benchmark took 18.6 s where one warm fit takes 0.048 s.
- `Auto` costs one local fit when the start is good (the verdict of the goodness of fit then
  passes) and turns to the globalisations only when the model, at the local optimum found,
  does not explain the data: a wrong local optimum leaves residuals far above the noise, or not
  white (`spineid.GoodnessOfFit`). First multiple shooting from the same start: on the spatial
  pair (datasets/spatial_pair.toml, 6 stiffnesses, starts 0.2x-5x) single shooting reached the
  optimum from 2 of 12 starts, multiple shooting from 6 of 6 in 4-7 s warm; on a lightly
  damped planar pair it reached 10 of 10 where single shooting reached 0 (tests/test_shooting.py
  and experiments/benchmark_robustness.py). Running it first on every problem would cost 2-3
  times a single-shooting fit where that already succeeds (0.43 s against 0.15 s on the
  4-axial-spring pair), so it comes second, except where the start rings. The multi-start
  comes last: it is what tells a model that lacks an effect (every start comes back to the same
  cost) from a bad start.
- The ringing rule: single shooting's cost has a valley for every cycle the simulated
  oscillation slips against the measured one, so it fails where the start's modes run through
  much phase while they last (`LinearModes.ringing_phase`, `max min(omega T, 1 / zeta)`). Measured
  by experiments/ringing_rule.py (10 starts 0.2x-5x per problem, warm fits, a 2-core machine
  with other work beside it part of the time): on the 4-axial-spring pair (phases 6-15 rad) LM
  reached the optimum from 10 of 10 starts in 0.10-0.21 s, multiple shooting in 0.42-0.57 s; on
  the same pair with a tenth of the damping (59-114 rad) LM from 5 of 10 in 0.74-3.5 s, multiple
  shooting from 10 of 10 in 0.56-0.84 s; on the spatial pair (21-60 rad) LM from 2 of 10 in
  3.8-28 s, multiple shooting from 10 of 10 in 4.6-15 s. Above `RINGING_LIMIT` (25 rad)
  `Auto` runs multiple shooting first. The phase is not a perfect separator: on the
  16-vector-spring pair (6 starts, 25-35 rad) LM reached the optimum from every start in
  0.6-1.0 s and multiple shooting in 1.3-1.8 s (about 2x, which `Auto` pays there above the
  limit); the demo's fit of that pair from its neutral start (24 rad) took 11.0 s with LM
  (0.70 s warm) against 21.2 s (1.22 s warm) with multiple shooting first, which a limit of
  20 rad would have chosen. Below 25 rad, 2 of the 10 spatial starts (21 rad) go to LM first
  and fail (7-10 s) before multiple shooting finds the optimum; a limit of 35 rad would send
  5 of them. Models integrated implicitly (the head-neck chain) are never given to multiple
  shooting by `Auto` (`integrated_implicitly` in _fit.py says why).
"""

import dataclasses
import functools
import math
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import numpy as np

from .._programs import stored_call
from ..executors._executors import AbstractExecutor
from ._least_squares import DECREMENT_TOL, levenberg_marquardt, LeastSquaresSolution
from ._routines import (
    _progress_printer,
    _solve_jaxopt_lm,
    _solve_jaxopt_lm_showing_progress,
    _solve_lm,
    _solve_optax,
)


def _options_checked(cls):
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


def _positive_int(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}({name}={value!r}): expected a positive integer")


def _positive_number(owner: str, name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"{owner}({name}={value!r}): expected a positive number")


class _ForwardMode:
    """A solver of Jacobians: the objective differentiated in forward mode through diffrax,
    every Jacobian at the simulation's tolerances unless the solver says otherwise."""

    def adjoint(self):
        """How the objective is differentiated: forward mode through diffrax."""
        return diffrax.ForwardMode()

    def jacobian_tolerances(self, rtol: float, atol: float) -> tuple[float, float]:
        """The ODE tolerances of the Jacobians on the way: the simulation's `(rtol, atol)`."""
        return rtol, atol


class _ReverseMode:
    """A first-order solver: gradients of the cost by reverse mode through diffrax, no
    Jacobians (so no tolerances of their own)."""

    def adjoint(self):
        """How the objective is differentiated: reverse mode through diffrax."""
        return diffrax.RecursiveCheckpointAdjoint()

    def jacobian_tolerances(self, rtol: float, atol: float) -> tuple[float, float]:
        """No Jacobians: the simulation's tolerances."""
        return rtol, atol


@eqx.filter_jit
def _levenberg_marquardt_arrays(function, u0, **options) -> tuple:
    # `levenberg_marquardt`'s solution as the tuple of arrays a stored program returns (its
    # fields in order).
    solution = levenberg_marquardt(function, u0, **options)
    return tuple(getattr(solution, field.name) for field in dataclasses.fields(solution))


@_options_checked
@dataclasses.dataclass(frozen=True)
class LevenbergMarquardt(_ForwardMode):
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
        _positive_int("LevenbergMarquardt", "max_steps", self.max_steps)
        _positive_number("LevenbergMarquardt", "rtol", self.rtol)
        _positive_number("LevenbergMarquardt", "atol", self.atol)
        if not (isinstance(self.decrement_tol, (int, float)) and self.decrement_tol >= 0):
            raise ValueError(f"LevenbergMarquardt(decrement_tol={self.decrement_tol!r}): "
                             "expected a number >= 0")
        _positive_number("LevenbergMarquardt", "jacobian_rtol", self.jacobian_rtol, True)
        _positive_number("LevenbergMarquardt", "jacobian_atol", self.jacobian_atol, True)

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

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`(u, converged, steps, (cost, residuals, jacobian))` from `u0` (unconstrained);
        `provisional`: the weights are a placeholder for a noise still to be estimated
        (`levenberg_marquardt`; passed as an array, so both kinds of pass share one
        compilation)."""
        inexact = (objective.coarse_rtol, objective.coarse_atol) != (objective.rtol,
                                                                    objective.atol)
        options = dict(max_steps=self.max_steps, decrement_tol=self.decrement_tol,
                       xtol=self.rtol, gtol=self.atol, inexact_jacobians=inexact,
                       provisional=np.asarray(bool(provisional)), samples=objective.samples())
        function = objective.at_precision if inexact else objective
        if progress:  # (printing calls back into Python: traced, never stored)
            solution = levenberg_marquardt(function, u0, progress=True, **options)
        else:  # (a later process loads the traced program: `spineid/_programs.py`)
            solution = LeastSquaresSolution(*stored_call(_levenberg_marquardt_arrays,
                                                         function, u0, **options))
        # Its last exact forward-mode pass is at the solution (or one small final step before
        # it): the cost and the sensitivities of the result come from the solver instead of
        # being computed again.
        return (solution.value, bool(solution.converged), int(solution.steps),
                (solution.cost, solution.residuals, solution.jacobian))


@_options_checked
@dataclasses.dataclass(frozen=True)
class OptimistixLevenbergMarquardt(_ForwardMode):
    """optimistix's Levenberg-Marquardt (forward-mode Jacobians through the ODE); stops on a
    relative step `rtol` and an absolute `atol`, or after `max_steps`."""

    max_steps: int = 200
    rtol: float = 1e-10
    atol: float = 1e-10
    name: ClassVar[str] = "optimistix-lm"

    def __post_init__(self):
        _positive_int("OptimistixLevenbergMarquardt", "max_steps", self.max_steps)
        _positive_number("OptimistixLevenbergMarquardt", "rtol", self.rtol)
        _positive_number("OptimistixLevenbergMarquardt", "atol", self.atol)

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`(u, converged, steps, None)` from `u0` (`provisional`: no effect, its stops do not
        depend on the noise level)."""
        u, converged, steps = _solve_lm(objective, u0, self.rtol, self.atol, self.max_steps,
                                        _progress_printer(progress))
        return u, bool(converged), int(steps), None


@_options_checked
@dataclasses.dataclass(frozen=True)
class JaxoptLevenbergMarquardt(_ForwardMode):
    """jaxopt's Levenberg-Marquardt (Madsen-Nielsen stop: a step `rtol` relative to the
    parameters, a gradient `atol`), forward-mode Jacobians; jaxopt is no longer maintained."""

    max_steps: int = 200
    rtol: float = 1e-10
    atol: float = 1e-10
    name: ClassVar[str] = "jaxopt-lm"

    def __post_init__(self):
        _positive_int("JaxoptLevenbergMarquardt", "max_steps", self.max_steps)
        _positive_number("JaxoptLevenbergMarquardt", "rtol", self.rtol)
        _positive_number("JaxoptLevenbergMarquardt", "atol", self.atol)

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`(u, converged, steps, None)` from `u0` (`provisional`: no effect, its stops do not
        depend on the noise level)."""
        if progress:
            u, converged, steps = _solve_jaxopt_lm_showing_progress(
                objective, u0, self.rtol, self.atol, self.max_steps)
        else:
            u, converged, steps = _solve_jaxopt_lm(objective, u0, self.rtol, self.atol,
                                                   self.max_steps)
        return u, bool(converged), int(steps), None


@_options_checked
@dataclasses.dataclass(frozen=True)
class Adam(_ReverseMode):
    """optax's Adam on the cost (gradients by reverse mode through the ODE), `max_steps`
    steps of `learning_rate` (in the unconstrained coordinates); with `batch_size`, each step
    sees a random mini-batch of that many load cases (drawn with `seed`). Judged converged on a
    small gradient."""

    learning_rate: float = 0.05
    max_steps: int = 2000
    batch_size: int | None = None
    seed: int = 0
    name: ClassVar[str] = "adam"

    def __post_init__(self):
        _positive_number("Adam", "learning_rate", self.learning_rate)
        _positive_int("Adam", "max_steps", self.max_steps)
        if self.batch_size is not None:
            _positive_int("Adam", "batch_size", self.batch_size)

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`(u, converged, steps, None)` from `u0` (`provisional`: no effect, its stops do not
        depend on the noise level)."""
        n_cases = len(objective.models)
        if self.batch_size is not None and self.batch_size > n_cases:
            raise ValueError(f"Adam(batch_size={self.batch_size}): at most {n_cases}, the "
                             "number of load cases")
        u, converged, steps = _solve_optax(objective, u0, "adam", self.learning_rate,
                                           self.max_steps, self.batch_size,
                                           jax.random.PRNGKey(self.seed))
        return u, bool(converged), int(steps), None


@_options_checked
@dataclasses.dataclass(frozen=True)
class LBFGS(_ReverseMode):
    """optax's L-BFGS on the cost (gradients by reverse mode), at most `max_steps` steps,
    stopping on a small gradient."""

    max_steps: int = 2000
    name: ClassVar[str] = "lbfgs"

    def __post_init__(self):
        _positive_int("LBFGS", "max_steps", self.max_steps)

    def solve(self, objective, u0, progress: bool = False, provisional: bool = False):
        """`(u, converged, steps, None)` from `u0` (`provisional`: no effect, its stops do not
        depend on the noise level)."""
        u, converged, steps = _solve_optax(objective, u0, "lbfgs", None, self.max_steps)
        return u, bool(converged), int(steps), None


LOCAL_SOLVERS = (LevenbergMarquardt, OptimistixLevenbergMarquardt, JaxoptLevenbergMarquardt,
                 Adam, LBFGS)


@_options_checked
@dataclasses.dataclass(frozen=True)
class MultipleShooting:
    """Multiple shooting (Bock 1981) for trajectory fits: each record cut into segments whose
    start states are extra unknowns, tied by continuity residuals weighted by
    `continuity_weight` (1: a gap of one noise standard deviation counts as one residual of
    the data), solved by `inner` (spineid's `LevenbergMarquardt`: its steps and stopping tests
    serve both phases; the shooting phase takes every Jacobian at the simulation's tolerances)
    and then polished by single shooting from the parameters found, so that the
    result is that of the ordinary problem (`spineid/identify/_shooting.py` explains the
    method).

    `segments`: segments per record; default (`None`) as many as give each about
    `segment_samples` samples (at least 2 segments, at most `max_segments`). Short segments
    are what removes the local optima: on a lightly damped planar pair (0.6 s, 301 samples,
    starts 0.2x-5x) 6 segments of 50 samples reached the optimum from 4 of 10 starts, 25 of 12
    samples from all 10, in about a second each (single shooting: 0 of 10). A segment needs at
    least as many samples as the model has states (`2 n_dof`).
    """

    segments: int | None = None
    inner: object = dataclasses.field(default_factory=LevenbergMarquardt)
    continuity_weight: float = 1.0
    segment_samples: int = 12
    max_segments: int = 64

    def __post_init__(self):
        if self.segments is not None:
            _positive_int("MultipleShooting", "segments", self.segments)
            if self.segments < 2:
                raise ValueError(f"MultipleShooting(segments={self.segments}): expected at "
                                 "least 2 (one segment is single shooting: "
                                 "spineid.LevenbergMarquardt)")
        if not isinstance(self.inner, LevenbergMarquardt):
            raise ValueError(f"MultipleShooting(inner={self.inner!r}): expected a "
                             "spineid.LevenbergMarquardt (its options are used); other solvers "
                             "cannot exploit the shooting problem's block Jacobian")
        _positive_number("MultipleShooting", "continuity_weight", self.continuity_weight)
        _positive_int("MultipleShooting", "segment_samples", self.segment_samples)
        if self.segment_samples < 2:
            raise ValueError(f"MultipleShooting(segment_samples={self.segment_samples}): "
                             "expected at least 2")
        _positive_int("MultipleShooting", "max_segments", self.max_segments)
        if self.max_segments < 2:
            raise ValueError(f"MultipleShooting(max_segments={self.max_segments}): expected "
                             "at least 2")

    @property
    def name(self) -> str:
        """`multiple-shooting(<segments>)`."""
        return f"multiple-shooting({'auto' if self.segments is None else self.segments})"

    def segments_for(self, n_samples: int, n_states: int) -> int:
        """Segments per record for the shortest record's `n_samples` and the model's
        `n_states` (`segments` if given)."""
        if self.segments is not None:
            return self.segments
        per = max(self.segment_samples, n_states) - 1
        return int(min(max((n_samples - 1) // per, 2), self.max_segments))


@_options_checked
@dataclasses.dataclass(frozen=True)
class MultiStart:
    """Runs the local solver `inner` (or `MultipleShooting`) from the given start and from
    `n - 1` more, drawn with `seed` log-uniformly between `low` and `high` times the start's
    distance from each parameter's lower bound (a factor on a stiffness), uniformly over most of a two-sided
    bound, within `high` times the start's scale of an unbounded parameter. The starts are
    taken in the order of their initial cost (a simulation each); the fits run one after the
    other through one compiled solver, and with `stop_when_explained` the first fit whose
    model explains the data ends the search (`spineid.GoodnessOfFit`), as do `agreement` starts
    that come back to the lowest cost found (within a relative `1e-3`): then that optimum is
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
        _positive_int("MultiStart", "agreement", self.agreement)
        _positive_int("MultiStart", "chunk", self.chunk)
        if self.executor is not None and not isinstance(self.executor, AbstractExecutor):
            raise ValueError(f"MultiStart(executor={self.executor!r}): expected None (this "
                             "process, one start after the other), spineid.Local(), "
                             "spineid.Devices() or spineid.Dask(...)")
        if not isinstance(self.inner, (*LOCAL_SOLVERS, MultipleShooting)):
            raise ValueError(f"MultiStart(inner={self.inner!r}): expected a local solver "
                             f"({', '.join(c.__name__ for c in LOCAL_SOLVERS)}) or "
                             "MultipleShooting")
        _positive_int("MultiStart", "n", self.n)
        _positive_number("MultiStart", "low", self.low)
        _positive_number("MultiStart", "high", self.high)
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


LAW_SOLVER = LevenbergMarquardt(max_steps=500, rtol=1e-12, atol=1e-12, decrement_tol=0.0)
"""The local solver of load-law fits: no ODE, so a step costs microseconds and the fit runs to
the classical stops (step, gradient), not the statistical one; a profile then equals the
Cramer-Rao interval of a linear problem to 1e-7 of its width."""


@_options_checked
@dataclasses.dataclass(frozen=True)
class VariableProjection:
    """Variable projection (Golub and Pereyra 1973) for a load law whose loads enter linearly and
    whose breakpoints do not (`spineid.fit_load_law` with free breakpoints of a
    `piecewise_linear` law; `spineid table --free-breakpoints`): for given breakpoints the node
    loads (and a damper) are a linear least-squares solution, and the cost as a function of the
    breakpoints alone is searched globally, exactly for one interior breakpoint (Hudson 1966),
    coordinate-wise for more (`spineid/identify/_breakpoints.py`). Where the projected
    solution satisfies the law's bounds (rises >= 0 of a monotone table) and there is no
    smoothing, it is the least-squares optimum itself; otherwise `local` (spineid's
    `LevenbergMarquardt`) refines it from there.

    On 13 simulated two-phase shear-test records of 1500 points (experiments/
    benchmark_breakpoints.py, README), Levenberg-Marquardt from evenly spaced breakpoints
    reached the best optimum on 9; this method on all 13, in 0.045 s (median, warm).
    """

    local: object = dataclasses.field(default_factory=lambda: LAW_SOLVER)
    name: ClassVar[str] = "varpro"

    def __post_init__(self):
        if not isinstance(self.local, LevenbergMarquardt):
            raise ValueError(f"VariableProjection(local={self.local!r}): expected a "
                             "spineid.LevenbergMarquardt")


RINGING_LIMIT = 25.0
"""`Auto` runs multiple shooting first above this ringing phase (rad) at the start."""


@_options_checked
@dataclasses.dataclass(frozen=True)
class Auto:
    """The default: the local solver `inner` from the given start; if the model, at the
    optimum it finds, does not explain the data (`spineid.GoodnessOfFit`: usually a wrong local
    optimum), multiple shooting from the same start (`MultipleShooting(segments)`, when `inner`
    is spineid's Levenberg-Marquardt and the records are long enough; `shooting_enabled=False`
    skips it); if that does not explain the data either, a `MultiStart` of `starts` starts between
    `low` and `high` times the start, which stops at the first fit that explains the data.
    Where the start rings (its linearised modes run through more than `ringing_limit` rad of
    phase within the record, `spineid.LinearModes.ringing_phase`), multiple shooting runs first
    instead of the local solver. The rule is documented with its measurements in the module
    docstring. `executor`: where the multi-start's fits run (`MultiStart`'s option; default
    this process)."""

    inner: object = dataclasses.field(default_factory=LevenbergMarquardt)
    starts: int = 16
    low: float = 0.2
    high: float = 5.0
    seed: int = 0
    segments: int | None = None
    shooting_enabled: bool = True
    ringing_limit: float = RINGING_LIMIT
    executor: object = None
    name: ClassVar[str] = "auto"

    def __post_init__(self):
        # The same checks as the multi-start and the multiple shooting it may run.
        if not isinstance(self.inner, LOCAL_SOLVERS):
            raise ValueError(f"Auto(inner={self.inner!r}): expected a local solver "
                             f"({', '.join(c.__name__ for c in LOCAL_SOLVERS)}); Auto adds "
                             "the multiple shooting and the multi-start itself")
        self.multistart()
        if not isinstance(self.shooting_enabled, bool):
            raise ValueError(f"Auto(shooting_enabled={self.shooting_enabled!r}): expected "
                             "True or False")
        if self.segments is not None:
            MultipleShooting(self.segments)  # its checks, whatever the inner solver
        if not (isinstance(self.ringing_limit, (int, float)) and self.ringing_limit >= 0):
            raise ValueError(f"Auto(ringing_limit={self.ringing_limit!r}): expected a phase "
                             "in rad, 0 or more (math.inf never runs multiple shooting first)")

    def multistart(self) -> MultiStart:
        """The multi-start `Auto` turns to last."""
        return MultiStart(self.inner, self.starts, self.low, self.high, self.seed, True,
                          executor=self.executor)

    def shooting(self) -> "MultipleShooting | None":
        """The multiple shooting `Auto` turns to first (`None` if it does not)."""
        if not self.shooting_enabled or not isinstance(self.inner, LevenbergMarquardt):
            return None
        return MultipleShooting(self.segments, self.inner)


SAME_OPTIMUM = 1e-3
"""Two fits whose costs differ by less than this fraction reached the same optimum."""

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
    if isinstance(solver, (*LOCAL_SOLVERS, MultipleShooting, MultiStart, Auto)):
        return solver
    raise ValueError(f"solver {solver!r}: expected one of {list(SOLVER_NAMES)} or a solver "
                     "object (spineid.LevenbergMarquardt(...), spineid.MultipleShooting(...), "
                     "spineid.MultiStart(...), ...)")
