"""The reader of `kind = "planar_pair"` model files: two vertebrae in the sagittal plane joined by
vector springs, axial springs and torsion elements (docs/formats/model-files.md).
"""

import numpy as np

from ..._arrays import floats
from ...elements._parameters import Parameter
from ...elements._planar_springs import AxialSprings, VectorSprings
from ...models._planar_pair import PlanarPair
from ._shared import (
    append_torsion, file_parameters, labelled, parameter_order, planar_body,
    planar_common_tables,
)


def read_planar_pair(document, check, folder) -> tuple[PlanarPair, tuple[Parameter, ...]]:
    check.keys(
        document,
        "",
        {"kind", "gravity", "lower", "upper", "springs", "torsion", "measure", "loads",
         "simulation"},
        {"lower", "upper"},
    )
    gravity = check.vector(document, "gravity", "gravity", 2, default=[0.0, 0.0])
    lower, _ = planar_body(document["lower"], "lower", check, allow_fixed=True)
    upper, initial_pose = planar_body(document["upper"], "upper", check, allow_fixed=False)

    elements = []
    vector_rows, axial_rows = [], []
    for index, spring in enumerate(check.tables(document, "springs")):
        key = f"springs[{index}]"
        kind = check.choice(spring, "kind", f"{key}.kind", ("vector", "axial"))
        stiffness = check.number(spring, "stiffness", f"{key}.stiffness", minimum=0.0)
        damping = check.number(spring, "damping", f"{key}.damping", minimum=0.0, default=0.0)
        if kind == "vector":
            check.keys(spring, key, {"kind", "point", "stiffness", "damping"}, {"point"})
            point = check.vector(spring, "point", f"{key}.point", 2)
            vector_rows.append((point, stiffness, damping, index))
        else:
            check.keys(
                spring, key, {"kind", "lower_point", "upper_point", "stiffness", "damping"},
                {"lower_point", "upper_point"},
            )
            lower_point = check.vector(spring, "lower_point", f"{key}.lower_point", 2)
            upper_point = check.vector(spring, "upper_point", f"{key}.upper_point", 2)
            if np.linalg.norm(upper_point - lower_point) < 1e-9:
                check.fail(
                    f"{key}.upper_point",
                    "an attachment point distinct from lower_point (an axial spring needs a "
                    "line of action)",
                    upper_point.tolist(),
                )
            axial_rows.append((lower_point, upper_point, stiffness, damping, index))

    def members(file_indices):  # each spring named by its place in the file
        return tuple(f"springs[{index}]" for index in file_indices)

    if vector_rows:
        points, stiffness, damping, file_indices = map(np.asarray, zip(*vector_rows))
        elements.append(labelled(
            VectorSprings.from_reference(
                points, stiffness, damping, lower.reference_pose, upper.reference_pose
            ), members(file_indices)))
    if axial_rows:
        lower_points, upper_points, stiffness, damping, file_indices = map(
            np.asarray, zip(*axial_rows)
        )
        elements.append(labelled(
            AxialSprings.from_reference(
                lower_points, upper_points, stiffness, damping, lower.reference_pose,
                upper.reference_pose,
            ), members(file_indices)))
    append_torsion(document, check, lower, upper, elements)
    loads = planar_common_tables(document, check, folder)
    model = PlanarPair(
        lower=lower,
        upper=upper,
        elements=tuple(elements),
        loads=loads,
        gravity=floats(gravity),
        initial_pose=floats(initial_pose),
    )
    # Springs by their index in the file, then torsion (vector and axial springs may alternate).
    return model, tuple(sorted(file_parameters(model), key=lambda p: parameter_order(p.name)))
