"""The published spines, built from the bundled tables: Liu's thoracolumbar spine (its geometry
from the thesis' node tables, its joint laws, curves and instrumentation with rods at the
Appendix B points), the lumbar Models 1-4 of Christophy et al. 2013, the head-neck chain of
Fritzkowski and Walczak and the L5-S1 law. The files themselves are read by `spineid.io`."""

from ._bundled import (
    head_neck_chain as head_neck_chain,
    l5_s1_law as l5_s1_law,
    lumbar_spine_models as lumbar_spine_models,
)
from ._instrumentation import (
    IMPLANT_POINTS as IMPLANT_POINTS,
    implant_point as implant_point,
    instrument as instrument,
    Rod as Rod,
    rod_links as rod_links,
)
from ._thoracolumbar import (
    bent_geometry as bent_geometry,
    joint_laws as joint_laws,
    joint_ranges as joint_ranges,
    liu_spine_geometry as liu_spine_geometry,
    sagittal_curve as sagittal_curve,
    spinal_curve as spinal_curve,
    SpineGeometry as SpineGeometry,
    thoracolumbar_spine as thoracolumbar_spine,
)
