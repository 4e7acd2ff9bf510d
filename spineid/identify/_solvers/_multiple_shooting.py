"""Multiple shooting (Bock 1981) as a solver wrapping spineid's Levenberg-Marquardt: the method
itself is in `spineid/identify/_trajectory/_shooting.py`."""

import dataclasses

import numpy as np

from ._base import AbstractWrappedSolver, options_checked, positive_int, positive_number
from ._levenberg_marquardt import LevenbergMarquardt


@options_checked
@dataclasses.dataclass(frozen=True)
class MultipleShooting(AbstractWrappedSolver):
    """Multiple shooting (Bock 1981) for trajectory fits: each record cut into segments whose
    start states are extra unknowns, tied by continuity residuals weighted by
    `continuity_weight` (1: a gap of one noise standard deviation counts as one residual of
    the data), solved by `inner` (spineid's `LevenbergMarquardt`: its steps and stopping tests
    serve both phases; the shooting phase takes every Jacobian at the simulation's tolerances)
    and then polished by single shooting from the parameters found, so that the
    result is that of the ordinary problem (`spineid/identify/_trajectory/_shooting.py` explains the
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
            positive_int("MultipleShooting", "segments", self.segments)
            if self.segments < 2:
                raise ValueError(f"MultipleShooting(segments={self.segments}): expected at "
                                 "least 2 (one segment is single shooting: "
                                 "spineid.LevenbergMarquardt)")
        if not isinstance(self.inner, LevenbergMarquardt):
            raise ValueError(f"MultipleShooting(inner={self.inner!r}): expected a "
                             "spineid.LevenbergMarquardt (its options are used); other solvers "
                             "cannot exploit the shooting problem's block Jacobian")
        positive_number("MultipleShooting", "continuity_weight", self.continuity_weight)
        positive_int("MultipleShooting", "segment_samples", self.segment_samples)
        if self.segment_samples < 2:
            raise ValueError(f"MultipleShooting(segment_samples={self.segment_samples}): "
                             "expected at least 2")
        positive_int("MultipleShooting", "max_segments", self.max_segments)
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

    def search(self, run) -> tuple:
        """Multiple shooting from the given start, then single shooting from what it found."""
        outcome = run.shooting_fit(self, np.zeros(len(run.problem.parameters)))
        return outcome, (f"multiple-shooting({run.segments(self)} segments), then "
                         f"{self.local().name} (single shooting)")
