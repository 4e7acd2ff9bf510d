"""OpenSim models built with the `opensim` package itself (its own writer makes the .osim
files spineid reads): the oracles of tests/test_osim_models.py. Every builder returns the path
of the written file."""

import pathlib
import re
import sys

import numpy as np
from scipy import signal

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
from make_neck_osim import _axis, _body, _spline, _vec, neck_model  # noqa: E402, F401


def every_joint_model(osim, folder: pathlib.Path, spline_coordinate: str = "c_b",
                      several: bool = False) -> pathlib.Path:
    """Five bodies on a CustomJoint (rotations about z by `c_a`, x by `c_b` and y by a
    SimmSpline of `spline_coordinate`; translations functions of both), a ball, a pin, a
    universal and a free joint, with offset frames everywhere, a bushing and gravity: light
    bodies, for kinematics and acceleration checks. (With `spline_coordinate = "c_a"` one
    coordinate drives the first and the third rotation; with `several`, the third rotation and
    the first translation are each a MultivariatePolynomialFunction of both coordinates, in
    the orders (c_b, c_a) and (c_a, c_b).)"""
    model = osim.Model()
    model.setName("every_joint")
    model.setGravity(osim.Vec3(0.0, -9.80665, 0.0))
    bodies = [
        _body(osim, model, "b1", 1.2, (0.01, 0.02, -0.03), (0.01, 0.02, 0.03, 0.001, -0.002,
                                                              0.0015)),
        _body(osim, model, "b2", 0.8, (0.0, 0.05, 0.01), (0.005, 0.006, 0.007, 0, 0, 0)),
        _body(osim, model, "b3", 0.5, (0.02, 0.0, 0.0), (0.002, 0.003, 0.004, 0, 0, 0)),
        _body(osim, model, "b4", 0.4, (0.0, 0.01, 0.0), (0.002, 0.002, 0.002, 0, 0, 0)),
        _body(osim, model, "b5", 0.3, (0.0, 0.01, 0.01), (0.001, 0.002, 0.002, 0, 0, 0)),
    ]
    transform = osim.SpatialTransform()
    _axis(osim, transform, 0, "c_a", osim.LinearFunction(1.0, 0.0), (0, 0, 1))
    _axis(osim, transform, 1, "c_b", osim.LinearFunction(1.0, 0.0), (1, 0, 0))
    _axis(osim, transform, 2, spline_coordinate, _spline(osim, [(-1, -0.3), (-0.5, -0.1), (0, 0),
                                                     (0.4, 0.2), (1.0, 0.25)]), (0, 1, 0))
    _axis(osim, transform, 3, "c_a", osim.LinearFunction(0.02, 0.01), (1, 0, 0))
    _axis(osim, transform, 4, "c_b", osim.PolynomialFunction(osim.Vector([0.01, -0.01, 0.0])),
          (0, 1, 0))
    _axis(osim, transform, 5, None, osim.Constant(0.005), (0, 0, 1))
    for index, names, terms in (((2, ("c_b", "c_a"), (0.05, 0.3, 0.2, 0.6, -0.4, 0.1)),
                                 (3, ("c_a", "c_b"), (0.01, 0.02, -0.01, 0.03, 0.0, 0.015)))
                                if several else ()):
        function = osim.MultivariatePolynomialFunction()  # (terms in OpenSim's order)
        function.setDimension(2)
        function.setOrder(2)
        function.setCoefficients(osim.Vector(list(terms)))
        axis = transform.updTransformAxis(index)
        coordinates = osim.ArrayStr()
        for name in names:
            coordinates.append(name)
        axis.setCoordinateNames(coordinates)
        axis.set_function(function)
    model.addJoint(osim.CustomJoint(
        "j1", model.getGround(), _vec(osim, (0.1, 0.2, 0.0)), _vec(osim, (0.1, -0.2, 0.3)),
        bodies[0], _vec(osim, (0.0, -0.05, 0.01)), _vec(osim, (0.0, 0.1, 0.0)), transform))
    model.addJoint(osim.BallJoint("j2", bodies[0], _vec(osim, (0, 0.1, 0)),
                                  _vec(osim, (0.2, 0, 0)), bodies[1], _vec(osim, (0, -0.03, 0)),
                                  _vec(osim, (0, 0, 0.1))))
    model.addJoint(osim.PinJoint("j3", bodies[1], _vec(osim, (0, 0.08, 0)),
                                 _vec(osim, (0, 0.3, 0)), bodies[2], _vec(osim, (0.01, -0.02, 0)),
                                 _vec(osim, (0.1, 0, 0))))
    model.addJoint(osim.UniversalJoint("j4", bodies[2], _vec(osim, (0, 0.05, 0)),
                                       _vec(osim, (0, 0, 0.2)), bodies[3], _vec(osim, (0, 0, 0)),
                                       _vec(osim, (0, 0, 0))))
    model.addJoint(osim.FreeJoint("j5", bodies[3], _vec(osim, (0, 0.05, 0.02)),
                                  _vec(osim, (0.1, 0.1, 0.0)), bodies[4],
                                  _vec(osim, (0, -0.01, 0)), _vec(osim, (0, 0.2, 0))))
    model.addForce(osim.BushingForce(
        "bush", "/bodyset/b2", "/bodyset/b3", _vec(osim, (10, 20, 30)),
        _vec(osim, (1000, 2000, 3000)), _vec(osim, (0.1, 0.2, 0.3)), _vec(osim, (1, 2, 3))))
    for name, coordinate, upper, lower in (("limit_a", "c_a", 10.0, -5.0),
                                           ("limit_pin", "j3_coord_0", 3.0, -12.0)):
        limit = osim.CoordinateLimitForce(coordinate, upper, 2.0, lower, 1.5, 0.01, 4.0)
        limit.setName(name)  # (degrees, N m/degree, N m s/degree, as OpenSim takes them)
        model.addForce(limit)
    model.finalizeConnections()
    path = folder / f"every_joint_{'several' if several else spline_coordinate}.osim"
    model.printToXML(str(path))
    return path


def coordinates_of(osim, model, state) -> dict:
    """`{name: value}` of an OpenSim model's coordinates in `state`."""
    coordinates = model.getCoordinateSet()
    return {coordinates.get(i).getName(): coordinates.get(i).getValue(state)
            for i in range(coordinates.getSize())}


def transform_of(frame, state):
    """`(R (3, 3), p (3,))` of an OpenSim frame in ground."""
    transform = frame.getTransformInGround(state)
    rotation = np.array([[transform.R().get(i, j) for j in range(3)] for i in range(3)])
    return rotation, np.array([transform.p().get(i) for i in range(3)])


def opensim_motion(osim, path: pathlib.Path, times, out: pathlib.Path, *, noise: float = 0.0,
                   seed: int = 0, degrees: bool = True, markers_out: pathlib.Path | None = None,
                   marker_noise: float = 0.0, lab=None, filtered: float | None = None) -> dict:
    """Simulate the model at `path` with OpenSim's `Manager` (accuracy 1e-10) from its
    defaults, sample its unlocked coordinates at `times` (s), add white noise of sd `noise`
    (rad or m) and write them with OpenSim's `STOFileAdapter` to `out` (a coordinates file:
    plain coordinate names, rotations in degrees with `inDegrees=yes` when `degrees`).
    With `markers_out`, also the MarkerSet's positions in ground, with white noise of sd
    `marker_noise` (m), written in mm by OpenSim's `TRCFileAdapter`; with `lab`, `(translation
    (3,), R (3, 3))`, in a lab's frame: `translation + R x` (the clean values stay in ground).
    With `filtered`, each noise is white noise through scipy's 4th-order Butterworth low-pass
    at that fraction of the Nyquist rate (zero phase, `filtfilt`), scaled to its sd, as a
    motion-capture pipeline filters its markers.
    Returns `{name: clean values (k,)}` in rad or m (and `<marker>_x`, ... in m)."""
    model = osim.Model(str(path))
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    names = [coordinates.get(i).getName() for i in range(coordinates.getSize())
             if not coordinates.get(i).getDefaultLocked()
             and not coordinates.get(i).isDependent(state)]
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(1e-10)
    state.setTime(float(times[0]))
    manager.initialize(state)
    clean = {name: [] for name in names}
    marker_set = model.getMarkerSet()
    markers = [marker_set.get(i) for i in range(marker_set.getSize())] if markers_out else []
    seen = {marker.getName(): [] for marker in markers}
    for t in times:
        if t > times[0]:
            state = manager.integrate(float(t))
        for name in names:
            clean[name].append(coordinates.get(name).getValue(state))
        for marker in markers:
            model.realizePosition(state)
            where = marker.getLocationInGround(state)
            seen[marker.getName()].append([where.get(j) for j in range(3)])
    rng = np.random.default_rng(seed)

    def drawn(sd: float, shape: tuple) -> np.ndarray:
        white = rng.standard_normal(shape)
        if filtered is None:
            return sd * white
        smooth = signal.filtfilt(*signal.butter(4, filtered), white, axis=0)
        return sd * smooth / np.std(smooth, axis=0)

    if markers_out:
        table = osim.TimeSeriesTableVec3()
        table.setColumnLabels(list(seen))
        shift, turn = (np.zeros(3), np.eye(3)) if lab is None else lab
        noisy = {name: 1e3 * (shift + np.array(p) @ np.asarray(turn).T
                              + drawn(marker_noise, (len(p), 3)))
                 for name, p in seen.items()}
        for k, t in enumerate(times):
            table.appendRow(float(t), osim.RowVectorVec3(
                [osim.Vec3(*map(float, p[k])) for p in noisy.values()]))
        table.addTableMetaDataString("DataRate", f"{1.0 / (times[1] - times[0]):g}")
        table.addTableMetaDataString("Units", "mm")
        osim.TRCFileAdapter.write(table, str(markers_out))
    table = osim.TimeSeriesTable()
    table.setColumnLabels(osim.StdVectorString(names))
    scale = 180.0 / np.pi if degrees else 1.0
    noisy = {name: (np.array(v) + drawn(noise, (len(v),))) * scale
             for name, v in clean.items()}
    for k, t in enumerate(times):
        table.appendRow(float(t), osim.RowVector([float(noisy[name][k]) for name in names]))
    table.addTableMetaDataString("inDegrees", "yes" if degrees else "no")
    osim.STOFileAdapter.write(table, str(out))
    clean.update({f"{name}_{axis}": np.array(p)[:, j] for name, p in seen.items()
                  for j, axis in enumerate("xyz")})
    return {name: np.array(v) for name, v in clean.items()}


EXPRESSIONS = {
    "Mx": "3*theta_x + 40*theta_x^3",
    "My": "2.5*theta_y - theta_z^2 + 0.5*theta_x*theta_y",
    "Mz": "4*theta_z+20*theta_z^3 - 2*(theta_z - theta_x)*delta_y*10",
    "Fx": "1e4*delta_x",
    "Fy": "1e4*delta_y + 5e5*delta_y^2",
    "Fz": "1e4 * delta_z / 2",
}
"""Polynomial expressions of the test's `ExpressionBasedBushingForce` (cross terms, a
squared term under a binary minus, spaces, a division by a number)."""


def expression_neck(osim, folder: pathlib.Path) -> pathlib.Path:
    """`neck_model`'s first level (unlocked, coupled) with its bushing an
    `ExpressionBasedBushingForce` of `EXPRESSIONS` and the same dampings, frames and sockets
    (the file edited as text: an ExpressionBasedBushingForce is a two-frame linker like a
    BushingForce), checked loadable by OpenSim."""
    path = neck_model(osim, folder, levels=1, locked=False, file_name="expression.osim")
    text = path.read_text()
    block = re.search(r'<BushingForce name="bushing_1">.*?</BushingForce>', text, re.S).group(0)
    edited = re.sub(r"<(rotational|translational)_stiffness>[^<]*</\1_stiffness>", "", block)
    edited = edited.replace("</frames>", "</frames>" + "".join(
        f"<{k}_expression>{v}</{k}_expression>" for k, v in EXPRESSIONS.items()))
    edited = edited.replace("<BushingForce ", "<ExpressionBasedBushingForce ").replace(
        "</BushingForce>", "</ExpressionBasedBushingForce>")
    path.write_text(text.replace(block, edited))
    model = osim.Model(str(path))
    model.initSystem()
    return path


def _axis3(name: str, coordinate: str, axis: str, function: str) -> str:
    # One OpenSim 3 TransformAxis (the same element as 4.x's, the coordinate by name).
    return (f'<TransformAxis name="{name}"><function>{function}</function>'
            f"<coordinates>{coordinate}</coordinates><axis>{axis}</axis></TransformAxis>")


def _body3(name: str, mass: float, centre: str, inertia: tuple, joint: str = "") -> str:
    # One OpenSim 3 Body: its inertia as six properties, a line each, and its joint inside it.
    entries = "".join(f"\t\t\t\t\t<inertia_{axes}>{value}</inertia_{axes}>\n"
                      for axes, value in zip(("xx", "yy", "zz", "xy", "xz", "yz"), inertia))
    return (f'\t\t\t\t<Body name="{name}">\n\t\t\t\t\t<mass>{mass}</mass>\n'
            f"\t\t\t\t\t<mass_center>{centre}</mass_center>\n{entries}"
            f"\t\t\t\t\t<Joint>{joint}</Joint>\n\t\t\t\t</Body>\n")


def opensim3_pair(osim, folder: pathlib.Path) -> pathlib.Path:
    """A vertebral pair in OpenSim 3.3's file format (`Version="30000"`: each joint inside its
    child body, a body's inertia as `<inertia_xx>` ... `<inertia_yz>`, a bushing between
    `body_1` and `body_2` at locations and orientations of its own, not the joint's, a
    coordinate limit force), written as text the way OpenSim 3 wrote models (the `opensim`
    package writes 4.x only): a CustomJoint of flexion and bending, with a SimmSpline of
    flexion as its first translation, a product of inertia, a moment of inertia of 12 digits
    (OpenSim's upgrade keeps 6) and gravity; checked loadable by OpenSim (whose reader
    upgrades it)."""
    linear = "<LinearFunction><coefficients> 1 0</coefficients></LinearFunction>"
    zero = "<Constant><value>0</value></Constant>"
    coordinates = "".join(
        f'<Coordinate name="{name}"><motion_type>rotational</motion_type>'
        f"<default_value>{value}</default_value><default_speed_value>{speed}"
        "</default_speed_value><range> -1 1</range><clamped>false</clamped>"
        "<locked>false</locked></Coordinate>"
        for name, value, speed in (("flexion", 0.1, 0.5), ("bending", -0.05, 0.0)))
    axes = "".join((
        _axis3("rotation1", "flexion", " 0 0 1", linear),
        _axis3("rotation2", "bending", " 1 0 0", linear),
        _axis3("rotation3", "", " 0 1 0", zero),
        _axis3("translation1", "flexion", " 1 0 0",
               "<SimmSpline><x> -1 0 0.4 1</x><y> -0.002 0 0.0006 0.0025</y></SimmSpline>"),
        _axis3("translation2", "", " 0 1 0", zero),
        _axis3("translation3", "", " 0 0 1", zero)))
    joint = (f'<CustomJoint name="C4_C3"><parent_body>C4</parent_body>'
             "<location_in_parent> 0.001 0.02 0</location_in_parent>"
             "<orientation_in_parent> 0 0 0.2</orientation_in_parent>"
             "<location> 0 -0.005 0.001</location><orientation> 0.1 0 0</orientation>"
             f"<CoordinateSet><objects>{coordinates}</objects></CoordinateSet>"
             f"<reverse>false</reverse><SpatialTransform>{axes}</SpatialTransform>"
             "</CustomJoint>")
    weld = ('<WeldJoint name="C4_ground"><parent_body>ground</parent_body>'
            "<location_in_parent> 0 0.3 0</location_in_parent><orientation_in_parent> 0 0 0"
            "</orientation_in_parent><location> 0 0 0</location><orientation> 0 0 0"
            "</orientation></WeldJoint>")
    bushing = (
        '\t\t\t\t<BushingForce name="C4_C3_bushing">\n\t\t\t\t\t<isDisabled>false</isDisabled>'
        "<body_1>C4</body_1><body_2>C3</body_2>\n"
        "\t\t\t\t\t<location_body_1> 0.002 0.018 0.001</location_body_1>"
        "<orientation_body_1> 0 0.1 0.25</orientation_body_1>\n"
        "\t\t\t\t\t<location_body_2> 0.001 -0.004 0</location_body_2>"
        "<orientation_body_2> 0.05 0 -0.1</orientation_body_2>\n"
        "\t\t\t\t\t<rotational_stiffness> 2 3 4</rotational_stiffness>\n"
        "\t\t\t\t\t<translational_stiffness> 1000 1200 1400</translational_stiffness>\n"
        "\t\t\t\t\t<rotational_damping> 0.01 0.01 0.02</rotational_damping>\n"
        "\t\t\t\t\t<translational_damping> 1 1 1</translational_damping>\n"
        "\t\t\t\t</BushingForce>\n")
    limit = ('\t\t\t\t<CoordinateLimitForce name="flexion_limit">\n\t\t\t\t\t<isDisabled>false'
             "</isDisabled><coordinate>flexion</coordinate>\n"
             "\t\t\t\t\t<upper_stiffness>0.5</upper_stiffness><upper_limit>20</upper_limit>\n"
             "\t\t\t\t\t<lower_stiffness>0.5</lower_stiffness><lower_limit>-20</lower_limit>\n"
             "\t\t\t\t\t<damping>0.001</damping><transition>2</transition>\n"
             "\t\t\t\t</CoordinateLimitForce>\n")
    text = ('<?xml version="1.0" encoding="UTF-8" ?>\n<OpenSimDocument Version="30000">\n'
            '\t<Model name="pair_v3">\n\t\t<gravity> 0 -9.80665 0</gravity>\n'
            "\t\t<BodySet>\n\t\t\t<objects>\n"
            + _body3("ground", 0, " 0 0 0", (0,) * 6, "")
            + _body3("C4", 0.3, " 0 0.01 0", (4e-4, 6e-4, 5e-4, 0, 0, 0), weld)
            + _body3("C3", 0.25, " 0.001 0.01 0", (4e-4, 6.12345678912e-4, 5e-4, 2e-5, 0, 0),
                     joint)
            + "\t\t\t</objects>\n\t\t</BodySet>\n\t\t<ForceSet>\n\t\t\t<objects>\n"
            + bushing + limit + "\t\t\t</objects>\n\t\t</ForceSet>\n\t</Model>\n"
            "</OpenSimDocument>\n")
    path = pathlib.Path(folder) / "pair_v3.osim"
    path.write_text(text)
    model = osim.Model(str(path))
    model.initSystem()
    return path
