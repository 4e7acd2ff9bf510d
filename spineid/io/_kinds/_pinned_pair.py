"""The reader of `kind = "pinned_pair"` model files: the upper vertebra on an exact pin fixed in
the lower one (docs/formats/model-files.md).
"""

import equinox as eqx
import numpy as np

from ..._arrays import floats
from ...elements._parameters import Parameter
from ...models._pinned_pair import PinnedPair
from ._shared import append_torsion, file_parameters, planar_common_tables, planar_body

# The upper body's centre at an angle, as one compiled program (run eagerly, each operation
# would be a program of its own: spineid/_arrays.py).
_centre_of_mass = eqx.filter_jit(PinnedPair.centre_of_mass)


def read_pinned_pair(document, check, folder) -> tuple[PinnedPair, tuple[Parameter, ...]]:
    check.keys(
        document,
        "",
        {"kind", "gravity", "lower", "upper", "pin", "torsion", "measure", "loads", "simulation"},
        {"lower", "upper", "pin"},
    )
    gravity = check.vector(document, "gravity", "gravity", 2, default=[0.0, 0.0])
    lower, _ = planar_body(document["lower"], "lower", check, allow_fixed=True)
    if not lower.fixed:
        check.fail("lower.fixed", "true (the pin is fixed in the lower body)", False)
    upper, initial_pose = planar_body(document["upper"], "upper", check, allow_fixed=False)
    check.keys(document["pin"], "pin", {"point"}, {"point"})
    pin = check.vector(document["pin"], "point", "pin.point", 2)
    elements: list = []
    append_torsion(document, check, lower, upper, elements)
    model = PinnedPair(
        lower=lower,
        upper=upper,
        pin=floats(pin),
        elements=tuple(elements),
        loads=planar_common_tables(document, check, folder),
        gravity=floats(gravity),
        initial_angle=floats(initial_pose[2]),
    )
    on_circle = np.asarray(_centre_of_mass(model, floats(initial_pose[2])))
    if np.linalg.norm(on_circle - initial_pose[:2]) > 1e-9:
        check.fail(
            "upper.initial_pose",
            f"a pose the pin allows: x, y = {on_circle.tolist()} for that angle",
            initial_pose.tolist(),
        )
    return model, file_parameters(model)
