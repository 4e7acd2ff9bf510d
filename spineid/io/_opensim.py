"""Export a spatial pair with its (identified) bushings as an OpenSim 4.x model file (.osim).

The lower body becomes ground, the upper a `Body` on a `FreeJoint` whose default coordinates are
its reference pose (FreeJoint coordinates: body-fixed X-Y-Z rotations, then translations, the
convention of spineid's poses). Each bushing becomes
- an OpenSim `BushingForce` when it is `classic` with diagonal stiffness and damping: the same
  element (spineid's classic bushing reproduces OpenSim's forces, tests/test_bushing.py);
- an `ExpressionBasedBushingForce` otherwise (coupled 6x6 stiffness, or the SpineBushing's
  reference deflection): its six expressions are the rows of `K (y - y_0)` in OpenSim's
  deflection variables (`theta_x..z`, `delta_x..z`), which OpenSim applies with a minus sign along
  the same dual Euler basis. Its damping is diagonal only; coupled damping raises `ValueError`.
Writing needs no OpenSim installation; tests load the file with the `opensim` package.
"""

import pathlib
from xml.sax.saxutils import escape

import numpy as np

from ..elements._bushings import Bushing
from ..kinematics._rotations import euler123_angles, euler123_rotation
from ..models._multibody import MultibodyTree
from ..models._spatial_pair import SpatialPair
from ._atomic import write_text_atomically
from ._osim_write import write_osim_values

_OPENSIM_VARIABLES = ("delta_x", "delta_y", "delta_z", "theta_x", "theta_y", "theta_z")


def _numbers(values) -> str:
    return " ".join(repr(float(v)) for v in np.ravel(values))


def _frame_xml(name: str, translation, orientation, indent: str) -> str:
    return (f"{indent}<PhysicalOffsetFrame name=\"{escape(name)}\">\n"
            f"{indent}\t<socket_parent>..</socket_parent>\n"
            f"{indent}\t<translation>{_numbers(translation)}</translation>\n"
            f"{indent}\t<orientation>{_numbers(orientation)}</orientation>\n"
            f"{indent}</PhysicalOffsetFrame>\n")


def _expression(row, reference) -> str:
    terms = [f"{repr(float(k))}*({variable}-({repr(float(r))}))"
             for k, variable, r in zip(row, _OPENSIM_VARIABLES, reference) if k != 0.0]
    return "+".join(terms) if terms else "0.0"


def opensim_model_xml(model: SpatialPair, name: str = "spineid_export") -> str:
    """The text of an OpenSim 4.x model file for a `SpatialPair` (module docstring)."""
    lower = np.asarray(model.lower.reference_pose)
    lower_rotation = np.asarray(euler123_rotation(lower[3:]))
    upper = np.asarray(model.upper.reference_pose)
    inertia = np.asarray(model.upper.inertia)
    ground_frames, body_frames, forces = [], [], []
    for index, bushing in enumerate(model.elements):
        if not isinstance(bushing, Bushing):
            raise ValueError(f"bushings[{index}] is a {type(bushing).__name__}: the OpenSim "
                             "export covers linear bushings (BushingForce and "
                             "ExpressionBasedBushingForce) only")
        position1, orientation1 = (np.asarray(a) for a in bushing.frame1)
        rotation1 = lower_rotation @ np.asarray(euler123_rotation(orientation1))
        ground_frames.append(_frame_xml(
            f"bushing{index}_frame1", lower[:3] + lower_rotation @ position1,
            np.asarray(euler123_angles(rotation1)), "\t\t\t\t"))
        body_frames.append(_frame_xml(f"bushing{index}_frame2", *bushing.frame2, "\t\t\t\t\t\t"))
        stiffness = np.asarray(bushing.stiffness_matrix)
        damping = np.asarray(bushing.damping_matrix)
        reference = np.asarray(bushing.reference)
        if np.any(damping != np.diag(np.diag(damping))):
            raise ValueError(f"bushings[{index}]: OpenSim bushings take diagonal damping only; "
                             "this one is coupled")
        sockets = (f"\t\t\t\t\t<socket_frame1>/ground/bushing{index}_frame1</socket_frame1>\n"
                   f"\t\t\t\t\t<socket_frame2>/bodyset/upper/bushing{index}_frame2"
                   f"</socket_frame2>\n")
        diagonal = np.all(stiffness == np.diag(np.diag(stiffness)))
        damping_xml = (f"\t\t\t\t\t<rotational_damping>{_numbers(np.diag(damping)[3:])}"
                       f"</rotational_damping>\n"
                       f"\t\t\t\t\t<translational_damping>{_numbers(np.diag(damping)[:3])}"
                       f"</translational_damping>\n")
        if diagonal and not np.any(reference):
            forces.append(
                f"\t\t\t\t<BushingForce name=\"bushing{index}\">\n{sockets}"
                f"\t\t\t\t\t<rotational_stiffness>{_numbers(np.diag(stiffness)[3:])}"
                f"</rotational_stiffness>\n"
                f"\t\t\t\t\t<translational_stiffness>{_numbers(np.diag(stiffness)[:3])}"
                f"</translational_stiffness>\n{damping_xml}"
                f"\t\t\t\t</BushingForce>\n")
        else:
            expressions = "".join(
                f"\t\t\t\t\t<{tag}_expression>{_expression(stiffness[row], reference)}"
                f"</{tag}_expression>\n"
                for tag, row in (("Mx", 3), ("My", 4), ("Mz", 5), ("Fx", 0), ("Fy", 1),
                                 ("Fz", 2)))
            forces.append(
                f"\t\t\t\t<ExpressionBasedBushingForce name=\"bushing{index}\">\n{sockets}"
                f"{expressions}{damping_xml}"
                f"\t\t\t\t</ExpressionBasedBushingForce>\n")
    coordinates = "".join(
        f"\t\t\t\t\t\t<Coordinate name=\"free_coord_{k}\">\n"
        f"\t\t\t\t\t\t\t<default_value>{repr(float(value))}</default_value>\n"
        f"\t\t\t\t\t\t</Coordinate>\n"
        for k, value in enumerate(np.concatenate([upper[3:], upper[:3]])))
    gravity = np.asarray(model.gravity)
    inertia_values = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2],
                      inertia[1, 2]]
    return (
        "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n"
        "<!-- Written by spineid: a spatial vertebral pair; the lower vertebra is ground. -->\n"
        "<OpenSimDocument Version=\"40600\">\n"
        f"\t<Model name=\"{escape(name)}\">\n"
        "\t\t<Ground name=\"ground\">\n\t\t\t<components>\n"
        + "".join(ground_frames)
        + "\t\t\t</components>\n\t\t</Ground>\n"
        f"\t\t<gravity>{_numbers(gravity)}</gravity>\n"
        "\t\t<BodySet name=\"bodyset\">\n\t\t\t<objects>\n"
        "\t\t\t\t<Body name=\"upper\">\n\t\t\t\t\t<components>\n"
        + "".join(body_frames)
        + "\t\t\t\t\t</components>\n"
        f"\t\t\t\t\t<mass>{repr(float(model.upper.mass))}</mass>\n"
        "\t\t\t\t\t<mass_center>0 0 0</mass_center>\n"
        f"\t\t\t\t\t<inertia>{_numbers(inertia_values)}</inertia>\n"
        "\t\t\t\t</Body>\n\t\t\t</objects>\n\t\t</BodySet>\n"
        "\t\t<JointSet name=\"jointset\">\n\t\t\t<objects>\n"
        "\t\t\t\t<FreeJoint name=\"free\">\n"
        "\t\t\t\t\t<socket_parent_frame>/ground</socket_parent_frame>\n"
        "\t\t\t\t\t<socket_child_frame>/bodyset/upper</socket_child_frame>\n"
        "\t\t\t\t\t<coordinates>\n" + coordinates + "\t\t\t\t\t</coordinates>\n"
        "\t\t\t\t</FreeJoint>\n\t\t\t</objects>\n\t\t</JointSet>\n"
        "\t\t<ForceSet name=\"forceset\">\n\t\t\t<objects>\n"
        + "".join(forces)
        + "\t\t\t</objects>\n\t\t</ForceSet>\n"
        "\t</Model>\n</OpenSimDocument>\n"
    )


def write_opensim_model(model: SpatialPair | MultibodyTree, path: str | pathlib.Path,
                        name: str = "spineid_export") -> pathlib.Path:
    """Write `opensim_model_xml(model)` to `path` (.osim) and return the path; a
    `MultibodyTree` read from an OpenSim file is written as that file with its bushings'
    current values (`write_osim_values`; `name` then unused: the file keeps its own)."""
    if isinstance(model, MultibodyTree):
        return write_osim_values(model, path)
    path = pathlib.Path(path)
    write_text_atomically(path, opensim_model_xml(model, name))
    return path
