"""The reader of `kind = "spatial_pair"` model files: two vertebrae in 3-D joined by bushings
(classic, spine or table), tension-only ligaments and facet contacts
(docs/formats/model-files.md).
"""

import math
import warnings

import equinox as eqx
import numpy as np

from ..._arrays import floats
from ...elements._bushings import Bushing, TableBushing
from ...elements._ligaments_facets import FacetContacts, SpatialLigaments
from ...elements._parameters import Parameter
from ...models._spatial_pair import SPATIAL_LOAD_COMPONENTS, SpatialBody, SpatialPair
from .._toml import MISSING, simulation_settings
from ._shared import file_parameters, labelled, load_law, read_loads


BUSHING_AXES = ("tx", "ty", "tz", "rx", "ry", "rz")


def spatial_body(table, key, check) -> tuple[SpatialBody, np.ndarray]:
    allowed = {"fixed", "pose", "mass", "inertia"} | ({"initial_pose"} if key == "upper" else set())
    check.keys(table, key, allowed, {"pose"})
    fixed = check.boolean(table, "fixed", f"{key}.fixed", default=False)
    if key == "lower" and not fixed:
        check.fail("lower.fixed", "true (spatial pairs with a moving lower body are not "
                                  "supported yet)", False)
    if key == "upper" and fixed:
        check.fail("upper.fixed", "false (the upper body must be free)", True)
    pose = check.vector(table, "pose", f"{key}.pose", 6)
    mass, inertia = 1.0, np.eye(3)
    if not fixed:
        mass = check.number(table, "mass", f"{key}.mass", positive=True)
        values = table.get("inertia")
        length = len(values) if isinstance(values, list) and len(values) in (3, 6) else 3
        values = check.vector(table, "inertia", f"{key}.inertia", length)
        inertia = np.diag(values[:3])
        if length == 6:
            (ixy, ixz, iyz) = values[3:]
            inertia[0, 1] = inertia[1, 0] = ixy
            inertia[0, 2] = inertia[2, 0] = ixz
            inertia[1, 2] = inertia[2, 1] = iyz
        moments = np.linalg.eigvalsh(inertia)
        if moments.min() <= 0:
            check.fail(f"{key}.inertia", "a positive definite inertia tensor (principal "
                                         f"moments {moments.tolist()} kg m^2)", values.tolist())
        if 2 * moments.max() > moments.sum() * (1 + 1e-12):
            check.fail(f"{key}.inertia", "principal moments that satisfy the triangle "
                                         "inequality (no moment larger than the other two "
                                         f"together; got {moments.tolist()} kg m^2)",
                       values.tolist())
    initial = check.vector(table, "initial_pose", f"{key}.initial_pose", 6, default=pose)
    if abs(np.cos(pose[4])) < 1e-3 or abs(np.cos(initial[4])) < 1e-3:
        check.fail(f"{key}.pose", "a pose away from a2 = +-90 degrees (the singularity of the "
                                  "1-2-3 Euler angles)", pose.tolist())
    body = SpatialBody(mass=floats(mass), inertia=floats(inertia), reference_pose=floats(pose),
                       fixed=fixed)
    return body, initial


# The facets' penetrations, as one compiled program (run eagerly, each operation would be a
# program of its own: spineid/_arrays.py).
_penetrations = eqx.filter_jit(FacetContacts.penetrations)


def bushing_matrix(check, table, name, key) -> tuple[np.ndarray, bool]:
    # A 6-vector (the diagonal) or a symmetric 6x6 array; returns the matrix and whether the
    # file gave its diagonal only (then its couplings are not parameters of the file).
    value = table.get(name)
    if isinstance(value, list) and value and isinstance(value[0], list):
        if len(value) != 6 or any(not isinstance(row, list) or len(row) != 6 for row in value):
            check.fail(f"{key}.{name}", "6 numbers (the diagonal) or a 6x6 array", value)
        matrix = np.array([check.vector({"row": row}, "row", f"{key}.{name}[{i}]", 6)
                           for i, row in enumerate(value)])
        asymmetry = np.abs(matrix - matrix.T)
        if asymmetry.max() > 1e-9 * max(np.abs(matrix).max(), 1e-300):
            i, j = np.unravel_index(np.argmax(asymmetry), asymmetry.shape)
            check.fail(f"{key}.{name}[{i}][{j}]",
                       f"a symmetric matrix ({name}[{j}][{i}] = {matrix[j, i]:g})",
                       matrix[i, j])
        diagonal_only = False
    else:
        diagonal = check.vector(table, name, f"{key}.{name}", 6,
                                default=np.zeros(6) if name == "damping" else MISSING)
        matrix = np.diag(diagonal)
        diagonal_only = True
    if np.any(np.diag(matrix) < 0):
        i = int(np.argmin(np.diag(matrix)))
        check.fail(f"{key}.{name}", f"a nonnegative diagonal ({BUSHING_AXES[i]} entry)",
                   float(matrix[i, i]))
    return matrix, diagonal_only


def bushing_frame(check, bushing, name, key, bodies: tuple[str, ...]):
    frame = bushing.get(name)
    if not isinstance(frame, dict):
        check.fail(f"{key}.{name}", "a table { body, position, orientation }", frame)
    check.keys(frame, f"{key}.{name}", {"body", "position", "orientation"}, {"body"})
    check.choice(frame, "body", f"{key}.{name}.body", bodies)
    return (check.vector(frame, "position", f"{key}.{name}.position", 3, default=np.zeros(3)),
            check.vector(frame, "orientation", f"{key}.{name}.orientation", 3,
                         default=np.zeros(3)))


def read_bushing(check, bushing, key, lower, upper, frame_bodies, diagonal_only,
                 extra_keys=()):
    """A bushing table (`kind` classic, spine or table) between bodies `lower` and `upper`
    (`SpatialBody`), whose frames name `frame_bodies[0]` and `frame_bodies[1]`, named `key` in
    parameter names; a matrix given by its diagonal adds `(key, field)` to the set
    `diagonal_only`. `extra_keys`: further keys the table may hold (read by the caller)."""
    kind = check.choice(bushing, "kind", f"{key}.kind", ("classic", "spine", "table"))
    extra = set(extra_keys)
    if kind == "table":
        check.keys(bushing, key, {"kind", "frame1", "frame2", "laws", "damping"} | extra,
                   {"kind", "frame1", "frame2", "laws"})
    else:
        check.keys(bushing, key, {"kind", "frame1", "frame2", "stiffness", "damping"} | extra,
                   {"kind", "frame1", "frame2", "stiffness"})
    # The deflection is that of frame 2 in frame 1: frame 1 on the lower body (as in the
    # papers and OpenSim models), so that the stiffness matrix means what it says.
    frame1 = bushing_frame(check, bushing, "frame1", key, (frame_bodies[0],))
    frame2 = bushing_frame(check, bushing, "frame2", key, (frame_bodies[1],))
    if kind == "table":
        return table_bushing(check, bushing, key, frame1, frame2, lower, upper)
    stiffness, diagonal_stiffness = bushing_matrix(check, bushing, "stiffness", key)
    damping, diagonal_damping = bushing_matrix(check, bushing, "damping", key)
    smallest = np.linalg.eigvalsh(stiffness).min()
    if smallest < 0:
        warnings.warn(f"{check.source}: {key}.stiffness is not positive semi-definite "
                      f"(smallest eigenvalue {smallest:.4g}): the joint is unstable in "
                      "some direction", stacklevel=3)
    for field, diagonal in (("stiffness", diagonal_stiffness), ("damping", diagonal_damping)):
        if diagonal:
            diagonal_only.add((key, field))
    return labelled(Bushing.create(kind, frame1, frame2, stiffness, damping,
                                   lower.reference_pose, upper.reference_pose), key)


def read_spatial_pair(document, check, folder) -> tuple[SpatialPair, tuple[Parameter, ...]]:
    check.keys(document, "", {"kind", "gravity", "lower", "upper", "bushings", "ligaments",
                              "facets", "loads", "simulation"}, {"lower", "upper"})
    gravity = check.vector(document, "gravity", "gravity", 3, default=np.zeros(3))
    lower, _ = spatial_body(document["lower"], "lower", check)
    upper, initial_pose = spatial_body(document["upper"], "upper", check)
    elements, diagonal_only = [], set()
    for index, bushing in enumerate(check.tables(document, "bushings")):
        elements.append(read_bushing(check, bushing, f"bushings[{index}]", lower, upper,
                                     ("lower", "upper"), diagonal_only))
    if document.get("ligaments"):
        elements.append(spatial_ligaments(document, check, lower, upper))
    if document.get("facets"):
        elements.append(facet_contacts(document, check, lower, upper))
    if "simulation" in document:
        simulation_settings(document, check.source)
    model = SpatialPair(
        lower=lower, upper=upper, elements=tuple(elements),
        loads=read_loads(document, check, folder, SPATIAL_LOAD_COMPONENTS),
        gravity=floats(gravity), initial_pose=floats(initial_pose),
    )
    return model, file_parameters(model, diagonal_only)


def table_bushing(check, bushing, key, frame1, frame2, lower, upper):
    # kind = "table": one load law per degree of freedom [tx, ty, tz, rx, ry, rz].
    laws_table = bushing["laws"]
    if not isinstance(laws_table, list) or len(laws_table) != 6:
        check.fail(f"{key}.laws", "a list of 6 law tables (tx, ty, tz, rx, ry, rz)", laws_table)
    laws = []
    for k, table in enumerate(laws_table):
        laws.append(load_law(table, f"{key}.laws[{k}]", check))
    damping = check.vector(bushing, "damping", f"{key}.damping", 6, default=np.zeros(6))
    if np.any(damping < 0):
        check.fail(f"{key}.damping", "6 numbers >= 0 (diagonal damping of a table bushing)",
                   damping.tolist())
    return labelled(TableBushing.create(frame1, frame2, laws, damping, lower.reference_pose,
                                        upper.reference_pose), key)


def spatial_ligaments(document, check, lower, upper):
    # [[ligaments]]: tension-only spring-dampers between global points of the reference pose.
    tables = check.tables(document, "ligaments")
    lower_points, upper_points, stiffness, damping = [], [], [], []
    for index, table in enumerate(tables):
        key = f"ligaments[{index}]"
        check.keys(table, key, {"name", "lower_point", "upper_point", "stiffness", "damping"},
                   {"lower_point", "upper_point", "stiffness"})
        lower_points.append(check.vector(table, "lower_point", f"{key}.lower_point", 3))
        upper_points.append(check.vector(table, "upper_point", f"{key}.upper_point", 3))
        if np.linalg.norm(upper_points[-1] - lower_points[-1]) < 1e-9:
            check.fail(f"{key}.upper_point", "a point apart from lower_point (a ligament of "
                                             "zero length has no direction)",
                       upper_points[-1].tolist())
        stiffness.append(check.number(table, "stiffness", f"{key}.stiffness", minimum=0.0))
        damping.append(check.number(table, "damping", f"{key}.damping", minimum=0.0,
                                    default=0.0))
    return labelled(SpatialLigaments.from_reference(
        np.array(lower_points), np.array(upper_points), stiffness, damping,
        lower.reference_pose, upper.reference_pose),
        tuple(f"ligaments[{index}]" for index in range(len(tables))))


def facet_disc(check, table, name, key):
    disc = table.get(name)
    if not isinstance(disc, dict):
        check.fail(f"{key}.{name}", "a table { centre, normal, radius }", disc)
    check.keys(disc, f"{key}.{name}", {"centre", "normal", "radius"},
               {"centre", "normal", "radius"})
    centre = check.vector(disc, "centre", f"{key}.{name}.centre", 3)
    normal = check.vector(disc, "normal", f"{key}.{name}.normal", 3)
    if np.linalg.norm(normal) < 1e-12:
        check.fail(f"{key}.{name}.normal", "a nonzero vector (the face's outward normal)",
                   normal.tolist())
    radius = check.number(disc, "radius", f"{key}.{name}.radius", positive=True)
    return centre, normal / np.linalg.norm(normal), radius


def facet_contacts(document, check, lower, upper):
    # [[facets]]: penalty contact between a face on the upper and one on the lower body.
    tables = check.tables(document, "facets")
    columns = {name: [] for name in ("upper", "lower", "stiffness", "damping", "blending")}
    for index, table in enumerate(tables):
        key = f"facets[{index}]"
        check.keys(table, key, {"name", "upper", "lower", "stiffness", "damping", "blending"},
                   {"upper", "lower", "stiffness"})
        upper_disc = facet_disc(check, table, "upper", key)
        lower_disc = facet_disc(check, table, "lower", key)
        facing = float(upper_disc[1] @ lower_disc[1])
        if facing > -0.5:
            check.fail(f"{key}.upper.normal", "a normal facing the lower face (the outward "
                       "normals of facing faces point at each other; their angle must exceed "
                       f"120 degrees, got {math.degrees(math.acos(max(-1.0, min(1.0, facing)))):.1f})",
                       upper_disc[1].tolist())
        columns["upper"].append(upper_disc)
        columns["lower"].append(lower_disc)
        columns["stiffness"].append(check.number(table, "stiffness", f"{key}.stiffness",
                                                 minimum=0.0))
        columns["damping"].append(check.number(table, "damping", f"{key}.damping", minimum=0.0,
                                               default=0.0))
        columns["blending"].append(check.number(table, "blending", f"{key}.blending",
                                                positive=True, default=50.0))
    upper_discs, lower_discs = columns["upper"], columns["lower"]
    facets = FacetContacts.from_reference(
        [d[0] for d in upper_discs], [d[1] for d in upper_discs], [d[2] for d in upper_discs],
        [d[0] for d in lower_discs], [d[1] for d in lower_discs], [d[2] for d in lower_discs],
        columns["stiffness"], columns["damping"], columns["blending"],
        lower.reference_pose, upper.reference_pose)
    depths = np.asarray(_penetrations(facets, lower.reference_pose, upper.reference_pose))
    if np.any(depths > 1e-9):
        index = int(np.argmax(depths))
        check.fail(f"facets[{index}]", "faces that do not overlap in the reference pose (a "
                   f"penetration of {depths[index] * 1e3:.4g} mm would preload the segment)",
                   "overlapping faces")
    return labelled(facets, tuple(f"facets[{index}]" for index in range(len(tables))))
