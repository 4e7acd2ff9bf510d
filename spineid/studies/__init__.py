"""Studies of the source papers: the whiplash simulation of the head-neck chain, the nine load
cases of a motion segment, the disc settling on a plane, and instrumentation of the spine."""

from ._disc_on_plane import disc_on_plane as disc_on_plane, flat_transition as flat_transition
from ._instrumentation import (
    Correction as Correction,
    coronal_tilts as coronal_tilts,
    correct_curve as correct_curve,
    motion_change as motion_change,
    MotionChange as MotionChange,
)
from ._segment import (
    LOAD_CASES as LOAD_CASES,
    load_cases as load_cases,
    MORONEY_STIFFNESS as MORONEY_STIFFNESS,
    segment_study as segment_study,
    SegmentStudy as SegmentStudy,
    solve_load_cases as solve_load_cases,
)
from ._whiplash import (
    peak_force_sensitivity as peak_force_sensitivity,
    whiplash_study as whiplash_study,
    WhiplashStudy as WhiplashStudy,
)
