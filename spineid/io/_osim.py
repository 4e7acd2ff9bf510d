"""Read an OpenSim 4.x model file (`.osim`, XML) into a `spineid.MultibodyTree`.

What is read (docs/formats/opensim.md): the bodies (mass, centre of mass, inertia), every
`PhysicalOffsetFrame` (in bodies, joints, ground or forces), the joints `WeldJoint`, `PinJoint`,
`SliderJoint`, `UniversalJoint`, `GimbalJoint`, `BallJoint`, `FreeJoint`, `PlanarJoint` and
`CustomJoint` (its `SpatialTransform`, functions as `spineid.kinematics` lists: of one
coordinate, or a `MultivariatePolynomialFunction` of several; `_osim_functions.py`), the coordinates
(default value and speed, `locked`), `CoordinateCouplerConstraint`s (reduced: the dependent
coordinate becomes a function of the independent one), `BushingForce`s,
`ExpressionBasedBushingForce`s with polynomial expressions (`spineid.io._expressions`),
`PrescribedForce`s,
`CoordinateLimitForce`s, the `MarkerSet` (each marker's location on its frame's body) and
gravity. Forces of
other classes (muscles, actuators, ...) are listed in one warning and dropped: the passive
model is what is identified. Any other constraint, joint or function is refused, naming the
component's path and what is supported. Files older than format 40000 (OpenSim 3.x) are
upgraded by OpenSim's own reader when the `opensim` package is installed.
"""

import pathlib
import tempfile
import warnings
import xml.etree.ElementTree as ElementTree

import numpy as np

from .._arrays import floats
from ..kinematics._rotations import euler123_rotation
from ..kinematics._functions import LinearFunction, MultivariatePolynomial, coordinate_function
from ..models._multibody import coordinate_rates, MultibodyTree, TransformAxis, TreeJoint
from ..models._tree_parts import (
    GROUND, LIMIT_PROPERTIES, CoordinateCoupler, CoordinateLimit, ExpressionBushing,
    PrescribedLoad, TreeBushing, TreeMarker, component_label,
)
from ._expressions import EXPRESSIONS, polynomial_terms
from ._osim_functions import function_holder, function_of, numbers_of, text_of
from ._atomic import readable_file

_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
# The fixed spatial transforms of OpenSim's joints: (kind, axis) per coordinate, in order.
_JOINT_AXES = {
    "WeldJoint": (),
    "PinJoint": (("rotation", _Z),),
    "SliderJoint": (("translation", _X),),
    "UniversalJoint": (("rotation", _X), ("rotation", _Y)),
    "GimbalJoint": (("rotation", _X), ("rotation", _Y), ("rotation", _Z)),
    "BallJoint": (("rotation", _X), ("rotation", _Y), ("rotation", _Z)),
    "FreeJoint": (("rotation", _X), ("rotation", _Y), ("rotation", _Z),
                  ("translation", _X), ("translation", _Y), ("translation", _Z)),
    "PlanarJoint": (("rotation", _Z), ("translation", _X), ("translation", _Y)),
}
SUPPORTED_JOINTS = tuple(sorted(_JOINT_AXES)) + ("CustomJoint",)
"""OpenSim joint classes `read_osim` reads."""
BUSHING_PROPERTIES = ("rotational_stiffness", "translational_stiffness", "rotational_damping",
                      "translational_damping")
"""A `BushingForce`'s properties spineid reads, identifies and writes back (3 numbers each)."""
NONNEGATIVE = "a bushing's stiffness and damping are >= 0 (3 numbers each)"
_AXIS_NAMES = ("rotation1", "rotation2", "rotation3",
               "translation1", "translation2", "translation3")


class _Reader:
    """One file's parse: component paths, frames, and the refusal sentence's prefix."""

    def __init__(self, path: pathlib.Path, root: ElementTree.Element):
        self.path = path
        self.model = root.find("Model")
        if self.model is None:
            self.fail("is not an OpenSim model (an <OpenSimDocument> holding a <Model>)")
        self.paths = {}  # element -> absolute component path
        self.elements = {}  # absolute path -> element
        self._index(self.model, "")

    def fail(self, what: str):
        raise ValueError(f"{self.path}: {what}")

    def _index(self, element, prefix):
        for child in element:
            name = child.get("name")
            path = f"{prefix}/{name}" if name is not None else prefix
            if name is not None and child.tag not in ("FrameGeometry",):
                self.paths[child] = path
                self.elements.setdefault(path, child)
            self._index(child, path)

    def resolve(self, owner_path: str, socket: str, what: str) -> str:
        """The absolute path of a socket's text, relative to its owner's path."""
        socket = (socket or "").strip()
        if not socket:
            self.fail(f"{what} names no frame")
        parts = [] if socket.startswith("/") else owner_path.strip("/").split("/")
        for part in socket.strip("/").split("/"):
            if part == "..":
                parts = parts[:-1]
            elif part not in ("", "."):
                parts.append(part)
        path = "/" + "/".join(parts)
        if path in self.elements or path in ("/ground",):
            return path
        # OpenSim also accepts a bare name of a unique frame or body.
        matches = [p for p in self.elements if p.rsplit("/", 1)[-1] == socket.split("/")[-1]
                   and self.elements[p].tag in ("Body", "Ground", "PhysicalOffsetFrame")]
        if len(matches) == 1:
            return matches[0]
        self.fail(f"{what} = {socket!r} names no frame of the model")

    def socket_frame(self, owner: str, element, socket: str, bodies: dict):
        """`(body index, (translation (3,), rotation (3, 3)))` of the frame a component's
        socket names, on its base body."""
        what = f"{owner}: {socket}"
        return self.frame(self.resolve(owner, text_of(element, socket), what), bodies, what)

    def frame(self, path: str, bodies: dict, what: str, depth: int = 0):
        """`(body index, (translation (3,), rotation (3, 3)))` of the frame at `path` on its
        base body (offsets composed as matrices, exact at any orientation)."""
        if depth > 50:
            self.fail(f"{what}: the offset frames at {path} form a loop")
        if path == "/ground" or self.elements.get(path) is not None and \
                self.elements[path].tag == "Ground":
            return GROUND, (np.zeros(3), np.eye(3))
        element = self.elements.get(path)
        if element is None:
            self.fail(f"{what} = {path!r} names no frame of the model")
        if element.tag == "Body":
            return bodies[element.get("name")], (np.zeros(3), np.eye(3))
        if element.tag != "PhysicalOffsetFrame":
            self.fail(f"{what} = {path!r} is a {element.tag}, not a frame")
        parent_path = self.resolve(path, text_of(element, "socket_parent", ".."),
                                   f"{path}: socket_parent")
        body, (parent_x, parent_r) = self.frame(parent_path, bodies, what, depth + 1)
        translation = numbers_of(self, element, "translation", 3, path, default=np.zeros(3))
        orientation = numbers_of(self, element, "orientation", 3, path, default=np.zeros(3))
        return body, (parent_x + parent_r @ translation,
                      parent_r @ np.asarray(euler123_rotation(orientation)))


def _load_root(path: pathlib.Path):
    try:
        root = ElementTree.parse(path).getroot()
    except FileNotFoundError:
        raise ValueError(f"{path}: OpenSim model not found") from None
    except ElementTree.ParseError as error:
        raise ValueError(f"{path}: is not an OpenSim model (not XML: {error})") from None
    if root.tag != "OpenSimDocument":
        raise ValueError(f"{path}: is not an OpenSim model (its root element is <{root.tag}>,"
                         " expected <OpenSimDocument>)")
    try:
        version = int(root.get("Version", "0"))
    except ValueError:
        version = 0
    if version >= 40000:
        return root
    try:
        import opensim
    except ImportError:
        found = f"format {version}" if version else "no format Version"
        raise ValueError(f"{path}: is an OpenSim 3.x model ({found}); spineid reads format "
                         "40000 and later: open and save it in OpenSim 4, or install the "
                         "`opensim` package, whose reader upgrades it") from None
    with tempfile.TemporaryDirectory() as folder:
        upgraded = pathlib.Path(folder) / "upgraded.osim"
        opensim.Model(str(path)).printToXML(str(upgraded))
        return ElementTree.parse(upgraded).getroot()


def read_osim(path) -> MultibodyTree:
    """Read an OpenSim 4.x `.osim` model file as a `spineid.MultibodyTree` (module docstring:
    what is read, dropped with a warning, or refused with a `ValueError`).

    **Arguments:** `path` of the `.osim` file.
    **Returns:** the model in joint coordinates: its generalized coordinates are the file's
    unlocked, independent coordinates (rad or m), starting at their default values and speeds;
    bodies, frames, joint functions, bushings and gravity carry the file's numbers (SI).
    """
    path = readable_file(path)
    reader = _Reader(path, _load_root(path))
    model = reader.model
    bodies, masses, centres, inertias = {}, [], [], []
    for body in model.iterfind("BodySet/objects/Body"):
        where = reader.paths[body]
        bodies[body.get("name")] = len(bodies)
        masses.append(float(numbers_of(reader, body, "mass", 1, where)[0]))
        if not masses[-1] >= 0.0:  # (as OpenSim refuses it)
            reader.fail(f"{where}: mass {masses[-1]:g}: expected a number >= 0 (kg)")
        centres.append(numbers_of(reader, body, "mass_center", 3, where, default=np.zeros(3)))
        inertias.append(numbers_of(reader, body, "inertia", 6, where, default=np.zeros(6)))
        if not rigid_inertia(inertias[-1]):  # (OpenSim warns, and simulates it)
            warnings.warn(f"{reader.path}: {where}: inertia {inertias[-1].tolist()} is not a "
                          "rigid body's (principal moments >= 0, none above the sum of the "
                          "other two); read as given", RuntimeWarning, stacklevel=2)
    if not bodies:
        reader.fail("has no bodies (an empty <BodySet>)")
    names, units, defaults, speeds, locked, paths = [], [], [], [], [], []
    joints = [_joint(reader, element, bodies, names, units, defaults, speeds, locked, paths)
              for element in model.iterfind("JointSet/objects/*")]
    couplers = _couplers(reader, model, names)
    dependent = {coupler.dependent for coupler in couplers}
    held = [names[i] for i in sorted(dependent) if locked[i]]
    if held:  # (OpenSim holds the coordinates it follows too: not a model spineid reduces)
        reader.fail(f"coordinate {held[0]!r} is locked and follows another through a "
                    "CoordinateCouplerConstraint: unlock it, or lock the coordinates it follows")
    free = tuple(i for i in range(len(names)) if not locked[i] and i not in dependent)
    # (A ball or free joint's default speeds are OpenSim's angular velocity: made rates.)
    speeds = coordinate_rates(joints, floats(defaults), floats(speeds))
    gravity = numbers_of(reader, model, "gravity", 3, "the model", default=[0.0, -9.80665, 0.0])
    spinning = {index for joint in joints for index in joint.spin_coordinates}
    bushings, limits, prescribed = _forces(reader, model, bodies, names, units, spinning)
    body_names = tuple(bodies)
    return MultibodyTree(
        name=model.get("name") or path.stem, body_names=body_names,
        masses=floats(masses), mass_centers=floats(np.array(centres)),
        inertia_entries=floats(np.array(inertias)),
        joints=tuple(_ordered(reader, joints, body_names)),
        coordinate_names=tuple(names), coordinate_units=tuple(units),
        default_values=floats(defaults), default_speeds=speeds, free=free,
        couplers=tuple(couplers), elements=tuple(bushings), limits=tuple(limits),
        gravity=floats(gravity), coordinate_paths=tuple(paths), source=str(path),
        markers=_markers(reader, model, bodies), prescribed=tuple(prescribed))


def _markers(reader, model, bodies) -> tuple[TreeMarker, ...]:
    # The MarkerSet: each marker's location composed into its frame's base body.
    markers = []
    for element in model.iterfind("MarkerSet/objects/Marker"):
        where = reader.paths.get(element, "Marker")
        body, (translation, rotation) = reader.socket_frame(where, element,
                                                            "socket_parent_frame", bodies)
        location = numbers_of(reader, element, "location", 3, where, default=np.zeros(3))
        markers.append(TreeMarker(element.get("name"), body,
                                  floats(translation + rotation @ location)))
    repeated = sorted({m.name for m in markers if [n.name for n in markers].count(m.name) > 1})
    if repeated:
        reader.fail(f"markers {repeated} are named twice in the MarkerSet")
    return tuple(markers)


def _ordered(reader, joints, body_names):
    # The joints from ground out (each parent placed before its children); a body on two
    # joints (a closed loop) or on none is refused.
    children = {}
    for joint in joints:
        if joint.child in children:
            reader.fail(f"body {body_names[joint.child]!r} is the child of two joints "
                        f"({children[joint.child]!r} and {joint.name!r}): a closed loop, which "
                        "spineid does not read")
        children[joint.child] = joint.name
    loose = [name for k, name in enumerate(body_names) if k not in children]
    if loose:
        reader.fail(f"bodies {loose} are on no joint (every body needs one to its parent)")
    placed, ordered, pending = {GROUND}, [], list(joints)
    while pending:
        ready = [j for j in pending if j.parent in placed]
        if not ready:
            reader.fail(f"the joints {[j.name for j in pending]} do not connect their bodies "
                        "to ground (a loop or a body without a path to ground)")
        for joint in ready:
            ordered.append(joint)
            placed.add(joint.child)
            pending.remove(joint)
    return ordered


def _implied_coordinates(element, kind) -> list[str]:
    # The coordinates OpenSim gives a joint whose file lists none: a CustomJoint's are the
    # names its transform axes use, in axis order; another joint's are `<joint>_coord_<k>`.
    if kind != "CustomJoint":
        return [f"{element.get('name')}_coord_{k}" for k in range(len(_JOINT_AXES[kind]))]
    names = []
    for axis in element.iterfind("SpatialTransform/TransformAxis"):
        for name in (text_of(axis, "coordinates", "") or "").split():
            if name not in names:
                names.append(name)
    return names


def _joint(reader, element, bodies, names, units, defaults, speeds, locked, paths):
    where = reader.paths.get(element, element.tag)
    kind = element.tag
    if kind not in SUPPORTED_JOINTS:
        reader.fail(f"{where}: joint {kind} is not supported; supported are "
                    f"{', '.join(SUPPORTED_JOINTS)}")
    (parent, parent_offset), (child, child_offset) = (
        reader.socket_frame(where, element, socket, bodies)
        for socket in ("socket_parent_frame", "socket_child_frame"))
    if child == GROUND:
        reader.fail(f"{where}: its child frame is on ground; spineid reads models whose "
                    "joints have ground on the parent side")
    first = len(names)
    coordinates = element.findall("coordinates/Coordinate")
    if not coordinates:  # (OpenSim makes them: from the transform's names, or numbered)
        coordinates = [ElementTree.Element("Coordinate", name=name)
                       for name in _implied_coordinates(element, kind)]
    for coordinate in coordinates:
        name = coordinate.get("name")
        if name in names:
            reader.fail(f"{where}: coordinate {name!r} is named twice in the model")
        names.append(name)
        paths.append(f"{where}/{name}")
        cwhere = f"{where}/{name}"
        defaults.append(float(numbers_of(reader, coordinate, "default_value", 1, cwhere,
                                         default=[0.0])[0]))
        speeds.append(float(numbers_of(reader, coordinate, "default_speed_value", 1, cwhere,
                                       default=[0.0])[0]))
        locked.append((text_of(coordinate, "locked", "false") or "false").lower() == "true")
    local = {c.get("name"): first + k for k, c in enumerate(coordinates)}
    if kind == "CustomJoint":
        axes = _custom_axes(reader, element, where, local, names)
    else:
        layout = _JOINT_AXES[kind]
        if len(coordinates) != len(layout):
            reader.fail(f"{where}: a {kind} has {len(layout)} coordinate(s); the file lists "
                        f"{len(coordinates)}")
        axes = tuple(TransformAxis(axis_kind, floats(axis),
                                   coordinate_function("LinearFunction", slope=1.0,
                                                       intercept=0.0), first + k)
                     for k, (axis_kind, axis) in enumerate(layout))
    units.extend(_coordinate_unit(axes, index) for index in local.values())
    return TreeJoint(element.get("name"), kind, parent, child,
                     tuple(floats(a) for a in parent_offset),
                     tuple(floats(a) for a in child_offset), axes,
                     spin_speeds=kind in ("BallJoint", "FreeJoint"))


def _coordinate_unit(axes, index) -> str:
    # OpenSim's motion type of a coordinate: rotational ("rad") or translational ("m") by the
    # last axis it drives through a LinearFunction of slope +-1, otherwise coupled (""; OpenSim's
    # files then hold it as it is, whatever their inDegrees says).
    kinds = [axis.kind for axis in axes if axis.coordinate == index
             and isinstance(axis.function, LinearFunction)
             and abs(float(axis.function.slope)) == 1.0]
    if not kinds:
        return ""
    return "rad" if kinds[-1] == "rotation" else "m"


def _custom_axes(reader, element, where, local, names):
    transform = element.find("SpatialTransform")
    if transform is None:
        reader.fail(f"{where}: a CustomJoint without a <SpatialTransform>")
    found = {axis.get("name"): axis for axis in transform.iterfind("TransformAxis")}
    axes = []
    for axis_name in _AXIS_NAMES:
        axis = found.get(axis_name)
        if axis is None:
            continue
        awhere = f"{where}/{axis_name}"
        coordinate_names = (text_of(axis, "coordinates", "") or "").split()
        for name in coordinate_names:
            if name not in local:
                reader.fail(f"{awhere}: coordinate {name!r} is not one of the joint's "
                            f"{sorted(local)}")
        function = function_holder(axis)
        if function is None:
            if coordinate_names:
                reader.fail(f"{awhere}: an axis with a coordinate but no <function>")
            continue
        vector = numbers_of(reader, axis, "axis", 3, awhere)
        if not np.linalg.norm(vector) > 0:
            reader.fail(f"{awhere}: its axis is the zero vector")
        # (several coordinates, or a MultivariatePolynomialFunction of one: a function of
        # their values in the file's order)
        function = function_of(reader, function, awhere, len(coordinate_names) or None)
        index = (tuple(local[name] for name in coordinate_names)
                 if isinstance(function, MultivariatePolynomial)
                 else local[coordinate_names[0]] if coordinate_names else -1)
        axes.append(TransformAxis(axis_name[:-1] if axis_name.startswith("rotation")
                                  else "translation", floats(vector), function, index))
    return tuple(axes)


def _couplers(reader, model, names):
    couplers = []
    for element in model.iterfind("ConstraintSet/objects/*"):
        where = reader.paths.get(element, element.tag)
        enforced = (text_of(element, "isEnforced", "true") or "true").lower() != "false"
        disabled = (text_of(element, "isDisabled", "false") or "false").lower() == "true"
        if not enforced or disabled:
            continue
        if element.tag != "CoordinateCouplerConstraint":
            reader.fail(f"{where}: constraint {element.tag} is not supported; spineid reduces "
                        "CoordinateCouplerConstraints only")
        independent = (text_of(element, "independent_coordinate_names", "") or "").split()
        dependent = text_of(element, "dependent_coordinate_name", "")
        if not independent:
            reader.fail(f"{where}: no independent coordinate")
        for name in independent + [dependent]:
            if name not in names:
                reader.fail(f"{where}: coordinate {name!r} is not in the model")
        function = element.find("coupled_coordinates_function")
        if function is None:
            reader.fail(f"{where}: no <coupled_coordinates_function>")
        # (several: a MultivariatePolynomialFunction of their values in the file's order)
        function = function_of(reader, function, where, dimension=len(independent))
        indices = tuple(names.index(name) for name in independent)
        scale = float(numbers_of(reader, element, "scale_factor", 1, where, default=[1.0])[0])
        couplers.append(CoordinateCoupler(
            element.get("name"), names.index(dependent),
            indices if isinstance(function, MultivariatePolynomial) else indices[0],
            function, floats(scale)))
    return _coupler_order(reader, couplers, names)


def rigid_inertia(entries) -> bool:
    """Whether `Ixx Iyy Izz Ixy Ixz Iyz` (kg m^2) can be a rigid body's inertia about its
    centre of mass: the principal moments (the eigenvalues of the symmetric matrix) >= 0 and
    none above the sum of the other two (to a relative 1e-12)."""
    i = np.asarray(entries, dtype=float)
    moments = np.linalg.eigvalsh(np.array([[i[0], i[3], i[4]], [i[3], i[1], i[5]],
                                           [i[4], i[5], i[2]]]))
    slack = 1e-12 * max(float(np.sum(np.abs(moments))), np.finfo(float).tiny)
    return bool(moments[0] >= -slack and moments[2] <= moments[0] + moments[1] + slack)


def _coupler_order(reader, couplers, names):
    # Couplers so that a dependent coordinate is set before a coupler reads it (a chain
    # c3 = g(c2), c2 = f(c1) in any file order); a coordinate dependent twice, or a cycle, is
    # refused.
    by_dependent = {}
    for coupler in couplers:
        if coupler.dependent in by_dependent:
            reader.fail(f"coordinate {names[coupler.dependent]!r} is the dependent coordinate "
                        f"of two couplers ({by_dependent[coupler.dependent].name!r} and "
                        f"{coupler.name!r})")
        by_dependent[coupler.dependent] = coupler
    ordered, done = [], set()
    pending = list(couplers)
    while pending:
        ready = [c for c in pending if all(i not in by_dependent or i in done
                                           for i in np.atleast_1d(c.independent))]
        if not ready:
            reader.fail(f"the couplers {[c.name for c in pending]} depend on each other in a "
                        "cycle")
        for coupler in ready:
            ordered.append(coupler)
            done.add(coupler.dependent)
            pending.remove(coupler)
    return ordered


parameter_label = component_label
"""A component's name as it stands in parameter names and TOML keys (`component_label`)."""


LIMIT_DEFAULTS = {"upper_stiffness": 1.0, "upper_limit": 0.0, "lower_stiffness": 1.0,
                  "lower_limit": 0.0, "transition": 0.1, "damping": 0.001}
"""OpenSim's defaults of a `CoordinateLimitForce`'s properties, in the file's units."""


def limit_scale(prop: str, unit: str) -> float:
    """The factor from a `CoordinateLimitForce` property's number in the file to SI (file
    number x factor = SI value), `prop` one of `LIMIT_PROPERTIES`, `unit` its coordinate's
    (`"rad"`, `"m"` or `""`). OpenSim gives a rotational coordinate's limits and transition in
    degrees (factor pi/180), its stiffnesses per degree and its damping per degree per second
    (factor 180/pi); a translational or coupled coordinate's numbers are SI already (1)."""
    if unit != "rad":
        return 1.0
    return np.pi / 180.0 if LIMIT_PROPERTIES[prop][1] == "place" else 180.0 / np.pi


def _limit(reader, element, where, names, units, spinning):
    # A CoordinateLimitForce in SI (`limit_scale`).
    coordinate = text_of(element, "coordinate", "")
    if coordinate not in names:
        reader.fail(f"{where}: coordinate {coordinate!r} is not in the model")
    index = names.index(coordinate)
    if index in spinning:
        reader.fail(f"{where}: a limit on {coordinate!r}, a rotation of a ball or free joint "
                    "(whose speeds are an angular velocity), is not supported")
    value = {tag: float(numbers_of(reader, element, tag, 1, where, default=[default])[0])
             for tag, default in LIMIT_DEFAULTS.items()}
    if value["transition"] <= 0 or value["upper_stiffness"] <= 0 or \
            value["lower_stiffness"] <= 0 or value["damping"] < 0:
        reader.fail(f"{where}: a CoordinateLimitForce needs a transition and stiffnesses > 0 "
                    "and a damping >= 0")
    return CoordinateLimit(element.get("name"), index, **{
        field: floats(value[prop] * limit_scale(prop, units[index]))
        for prop, (field, _, _) in LIMIT_PROPERTIES.items()})


def _prescribed(reader, element, where, bodies) -> PrescribedLoad:
    # A PrescribedForce: its frame and its three sets of three functions of time.
    body, offset = reader.socket_frame(where, element, "socket_frame", bodies)
    sets = {}
    for kind in ("force", "point", "torque"):
        found = element.find(f"FunctionSet[@name='{kind}Functions']/objects")
        nodes = [] if found is None else [n for n in found if isinstance(n.tag, str)]
        if len(nodes) not in (0, 3):
            reader.fail(f"{where}: {kind}Functions holds {len(nodes)} functions; OpenSim "
                        "applies 3 (x, y, z) or none")
        holders = []
        for node in nodes:
            holder = ElementTree.Element("function")
            holder.append(node)
            holders.append(function_of(reader, holder, f"{where}: {kind}Functions"))
        sets[kind] = tuple(holders)
    # (OpenSim's defaults: the force in ground axes, the point in the frame)
    flags = {key: (text_of(element, key, default) or default).strip().lower() == "true"
             for key, default in (("forceIsGlobal", "true"), ("pointIsGlobal", "false"))}
    return PrescribedLoad(element.get("name"), body, tuple(floats(a) for a in offset),
                          sets["force"], sets["point"], sets["torque"],
                          flags["forceIsGlobal"], flags["pointIsGlobal"])


def _forces(reader, model, bodies, names, units, spinning):
    bushings, limits, prescribed, dropped = [], [], [], []
    for element in model.iterfind("ForceSet/objects/*"):
        where = reader.paths.get(element, element.tag)
        if (text_of(element, "appliesForce", "true") or "true").lower() == "false":
            dropped.append(f"{element.get('name')} ({element.tag}, appliesForce false)")
            continue
        if element.tag == "CoordinateLimitForce":
            limits.append(_limit(reader, element, where, names, units, spinning))
            continue
        if element.tag == "PrescribedForce":
            prescribed.append(_prescribed(reader, element, where, bodies))
            continue
        if element.tag not in ("BushingForce", "ExpressionBasedBushingForce"):
            dropped.append(f"{element.get('name')} ({element.tag})")
            continue
        expression = element.tag == "ExpressionBasedBushingForce"
        frames = [reader.socket_frame(where, element, socket, bodies)
                  for socket in ("socket_frame1", "socket_frame2")]
        vectors = {tag: numbers_of(reader, element, tag, 3, where, default=np.zeros(3))
                   for tag in BUSHING_PROPERTIES if not expression or "damping" in tag}
        for tag, vector in vectors.items():
            if np.any(vector < 0):
                reader.fail(f"{where}: <{tag}> = {list(vector)}: {NONNEGATIVE}")
        placed = (parameter_label(element.get("name")), frames[0][0], frames[1][0],
                  tuple(floats(a) for a in frames[0][1]), tuple(floats(a) for a in frames[1][1]))
        vectors = {tag: floats(value) for tag, value in vectors.items()}
        if not expression:
            bushings.append(TreeBushing(*placed, **vectors))
            continue
        terms = [(k, exponents, coefficient) for k, tag in enumerate(EXPRESSIONS)
                 for exponents, coefficient in polynomial_terms(
                     text_of(element, tag, "0.0"), f"{where}: <{tag}>").items()]
        bushings.append(ExpressionBushing(
            *placed, outputs=tuple(t[0] for t in terms), exponents=tuple(t[1] for t in terms),
            coefficients=floats([t[2] for t in terms]), **vectors))
    if dropped:
        warnings.warn(f"{reader.path}: forces dropped (spineid reads the passive model: "
                      f"bushings, coordinate limits, prescribed forces, joints, gravity): "
                      f"{', '.join(dropped)}",
                      stacklevel=3)
    return bushings, limits, prescribed
