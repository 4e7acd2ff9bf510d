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
