"""Studies of the source papers: the whiplash simulation of the head-neck chain, the nine load
cases of a motion segment, and the disc settling on a plane."""

from ._disc_on_plane import disc_on_plane as disc_on_plane, flat_transition as flat_transition
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
