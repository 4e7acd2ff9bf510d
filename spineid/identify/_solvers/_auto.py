"""`Auto`, the default solver of trajectory fits: a local fit from the given start, multiple
shooting and a multi-start only where the verdict asks for them.

Why these defaults, measured:
- spineid's Levenberg-Marquardt is the local solver (experiments/solver_comparison.py, 20 poor
  starts per spread): median 3-9 steps and 0.17-0.89 s on the 4-axial-spring and 8-spring
  problems, against jaxopt's 8-16 steps and 0.42-1.79 s and optimistix's 18-32 steps and
  0.81-3.33 s, with the same or better success.
- A multi-start runs its starts one after the other through one compiled solver, stopping at
  the first fit that explains the data: vmapped, 100 Levenberg-Marquardt fits of the
  4-axial-spring benchmark took 18.6 s where one warm fit takes 0.048 s.
- `Auto` costs one local fit when the start is good (the verdict of the goodness of fit then
  passes) and turns to the globalisations only when the model, at the local optimum found, does
  not describe the data: a wrong local optimum leaves residuals far above the noise, or a smooth
  misfit beyond the tolerance (`spineid.GoodnessOfFit`). First multiple shooting from the same
  start: on the spatial pair (datasets/spatial_pair.toml, 6 stiffnesses, starts 0.2x-5x) single
  shooting reached the optimum from 2 of 12 starts, multiple shooting from 6 of 6 in 4-7 s warm;
  on a lightly damped planar pair it reached 10 of 10 where single shooting reached 0
  (tests/test_shooting.py and experiments/benchmark_robustness.py). Running it first on every
  problem would cost 2-3 times a single-shooting fit where that already succeeds (0.43 s against
  0.15 s on the 4-axial-spring pair), so it comes second, except where the start rings. The
  multi-start comes last: it is what tells a model that lacks an effect (every start comes back to
  the same cost) from a bad start.
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
- What sends a fit on is a verdict of "does not describe" (`GoodnessOfFit.accepted` false), not
  every verdict short of "explains": a fit that describes its data with a smooth misfit within the
  tolerance is what filtered tracking noise leaves at the right optimum (such noise is smoother
  than an autoregression of bounded order can whiten), and a wrong local optimum leaves a misfit
  beyond the default tolerance (a `max_misfit` widened far lets such a fit stand too; measured by
  experiments/auto_filtered_starts.py, docs/goodness-of-fit.md). Measured on the bundled OpenSim
  neck (three rotational stiffnesses from 1.4x, 7 coordinates x 601 samples, Butterworth-filtered
  noise, 2 cores): sent on by "describes", each record took multiple shooting and 3 more starts,
  all back to the same cost (150.7 s cold, 46.8 s warm); stopping there, one fit (26.5 s cold,
  7.4 s warm), the same values and errors.
"""


import dataclasses
from typing import ClassVar

import numpy as np

from ._base import AbstractLocalSolver, AbstractWrappedSolver, options_checked
from ._levenberg_marquardt import LevenbergMarquardt
from ._multiple_shooting import MultipleShooting
from ._multistart import LOCAL_SOLVER_NAMES, MultiStart


RINGING_LIMIT = 25.0
"""`Auto` runs multiple shooting first above this ringing phase (rad) at the start."""


@options_checked
@dataclasses.dataclass(frozen=True)
class Auto(AbstractWrappedSolver):
    """The default: the local solver `inner` from the given start; if the model, at the
    optimum it finds, does not describe the data (`spineid.GoodnessOfFit.accepted` false:
    usually a wrong local optimum), multiple shooting from the same start
    (`MultipleShooting(segments)`, when `inner` is spineid's Levenberg-Marquardt and the records
    are long enough; `shooting_enabled=False` skips it); if that does not describe the data
    either, a `MultiStart` of `starts` starts between `low` and `high` times the start, which
    stops at the first fit that explains the data.
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
        if not isinstance(self.inner, AbstractLocalSolver):
            raise ValueError(f"Auto(inner={self.inner!r}): expected a local solver "
                             f"({LOCAL_SOLVER_NAMES}); Auto adds the multiple shooting and the "
                             "multi-start itself")
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

    def search(self, run) -> tuple:
        """The rule of the class docstring, on a trajectory fit's `run`."""
        local = self.local()
        zero = np.zeros(len(run.problem.parameters))
        shooting = self.shooting()
        refusal = None if shooting is None else run.shooting_refusal(shooting, "Auto")
        if refusal is not None:
            if self.segments is not None:  # asked for: refused before anything runs
                raise ValueError(refusal)
            shooting = None  # records too short to cut
        if shooting is not None and self.segments is None and run.integrated_implicitly():
            shooting = None  # (see `_Run.integrated_implicitly`)
        phase = 0.0 if shooting is None else run.ringing_phase()
        shooting_first = phase > self.ringing_limit
        if shooting_first:
            # Lightly damped: single shooting's cost has a valley per slipped cycle.
            segments = run.segments(shooting)
            if run.progress:
                print(f"  the start rings ({phase:.0f} rad of phase within the record, above "
                      f"{self.ringing_limit:g}): multiple shooting first, {segments} "
                      "segments", flush=True)
            outcome = run.shooting_fit(shooting, zero)
            name = (f"auto: multiple-shooting({segments} segments) from the start (ringing "
                    f"phase {phase:.0f} rad), then {local.name} (single shooting)")
        else:
            outcome = run.local_fit(zero)
            name = f"auto: {local.name} from the start"
        # (Turning on a fit that describes the data with a smooth misfit within the tolerance
        # would refit every record of filtered noise: module docstring.)
        if run.accepted(outcome) is False and shooting is not None and not shooting_first:
            segments = run.segments(shooting)
            if run.progress:
                print("  the fit from the start does not describe the data (a local optimum?): "
                      f"multiple shooting, {segments} segments", flush=True)
            shot = run.shooting_fit(shooting, zero)
            name += f", then multiple-shooting({segments} segments)"
            # Both ran from the same start: one start, its better fit (the multi-start's
            # agreement rule counts distinct starts).
            best = min(outcome, shot, key=lambda o: o.cost)
            outcome = dataclasses.replace(best, start_costs=[best.cost], tried=1,
                                          steps=outcome.steps + shot.steps)
        if run.accepted(outcome) is False:
            multistart = self.multistart()
            if run.progress:
                print(f"  the fit does not describe the data: {multistart.n - 1} more starts, "
                      f"{multistart.low:g}x-{multistart.high:g}x", flush=True)
            outcome = run.multistart(multistart, first=outcome)
            name += (f", then {multistart.name} ({outcome.tried} fit(s) in all"
                     f"{multistart.where()})")
        return outcome, name
