"""OpenSim models read by spineid (`spineid.read_osim`), against OpenSim itself: the models are
built and written by the `opensim` package (tests/osim_builders.py), and OpenSim's own
kinematics, accelerations and `Manager` simulation are the oracles."""

import dataclasses
import json
import pathlib
import re
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
import spineid.io._columns as columns_module
from spineid.elements._parameters import declared_parameters, select_parameters
from spineid.kinematics._functions import (
    Constant, LinearFunction, MultiplierFunction, NaturalCubicSpline, PiecewiseLinearFunction,
    PolynomialFunction, SimmSpline,
)
from spineid.kinematics._rotations import axial

from osim_builders import (
    every_joint_model, neck_model, opensim3_pair, opensim_motion, transform_of,
)

osim = pytest.importorskip(
    "opensim", reason="the opensim package (PyPI `opensim`) is not installed here")
pytestmark = pytest.mark.xdist_group("opensim")  # one process at a time runs OpenSim

POINTS = np.array([[-1.0, -0.3], [-0.5, -0.1], [0.0, 0.0], [0.4, 0.2], [1.0, 0.25],
                   [1.3, 0.1]])


def _opensim_value(function, x):
    return function.calcValue(osim.Vector(1, float(x)))


@pytest.mark.parametrize("n", [2, 3, 4, 6])
@pytest.mark.parametrize("kind", ["SimmSpline", "PiecewiseLinearFunction"])
def test_tabulated_functions_equal_opensims_inside_and_outside_their_points(kind, n):
    ours = {"SimmSpline": SimmSpline,
            "PiecewiseLinearFunction": PiecewiseLinearFunction}[kind](
        jnp.asarray(POINTS[:n, 0]), jnp.asarray(POINTS[:n, 1]))
    theirs = getattr(osim, kind)()
    for x, y in POINTS[:n]:
        theirs.addPoint(float(x), float(y))
    for x in np.linspace(-1.6, 1.9, 41):
        assert float(ours(x)) == pytest.approx(_opensim_value(theirs, x), abs=1e-14)


def test_closed_form_functions_equal_opensims():
    cases = [(PolynomialFunction(jnp.array([0.5, -2.0, 3.0, 1.0])),
              osim.PolynomialFunction(osim.Vector([0.5, -2.0, 3.0, 1.0]))),
             (LinearFunction(jnp.asarray(1.7), jnp.asarray(-0.2)), osim.LinearFunction(1.7, -0.2)),
             (Constant(jnp.asarray(0.3)), osim.Constant(0.3))]
    for ours, theirs in cases:
        for x in (-1.3, 0.0, 0.7):
            assert float(ours(x)) == pytest.approx(_opensim_value(theirs, x), abs=1e-13)
    scaled = MultiplierFunction(PolynomialFunction(jnp.array([1.0, 2.0])), jnp.asarray(0.5))
    assert float(scaled(3.0)) == pytest.approx(2.5)


def test_a_transform_axis_is_its_function_of_its_coordinates():
    # By hand: a linear function of coordinate 1, of none (its value at 0, also on a model of no
    # coordinates), and a polynomial 2 x0 x1^2 + 1 of the coordinates (2, 0), under jit and vmap.
    from spineid.kinematics._functions import MultivariatePolynomial
    linear = LinearFunction(jnp.asarray(2.0), jnp.asarray(0.5))
    x = jnp.asarray([0.1, 0.3, -0.7])
    one = spineid.models.TransformAxis("rotation", jnp.asarray([0.0, 0.0, 1.0]), linear, 1)
    none = spineid.models.TransformAxis("translation", jnp.asarray([1.0, 0.0, 0.0]), linear)
    several = spineid.models.TransformAxis("rotation", jnp.asarray([1.0, 0.0, 0.0]),
                                    MultivariatePolynomial(jnp.asarray([2.0, 1.0]),
                                                           ((1, 2), (0, 0))), (2, 0))
    assert float(one.value(x)) == pytest.approx(1.1, abs=1e-15)
    assert float(none.value(x)) == float(none.value(jnp.zeros(0))) == 0.5
    assert float(jax.jit(lambda v: several.value(v))(x)) == pytest.approx(
        2 * -0.7 * 0.1 ** 2 + 1, abs=1e-15)
    rows = jnp.asarray([[0.1, 0.3, -0.7], [1.0, 2.0, 3.0]])
    np.testing.assert_allclose(jax.vmap(one.value)(rows), [1.1, 4.5], atol=1e-15)
    with pytest.raises(ValueError, match="a tuple of coordinates takes a MultivariatePolynomial"):
        spineid.models.TransformAxis("rotation", jnp.asarray([1.0, 0.0, 0.0]), linear, (0, 1))


def test_natural_cubic_spline_meets_its_definition():
    # (OpenSim's Python package does not expose NaturalCubicSpline: its definition is the
    # oracle: through the points, twice continuously differentiable, zero curvature at the
    # ends, linear outside.)
    spline = NaturalCubicSpline(jnp.asarray(POINTS[:, 0]), jnp.asarray(POINTS[:, 1]))
    second = jax.grad(jax.grad(spline))
    for x, y in POINTS:
        assert float(spline(x)) == pytest.approx(y, abs=1e-14)
    for x in POINTS[1:-1, 0]:
        assert float(second(x - 1e-9)) == pytest.approx(float(second(x + 1e-9)), abs=1e-6)
    assert float(second(POINTS[0, 0] + 1e-12)) == pytest.approx(0.0, abs=1e-9)
    assert float(second(POINTS[-1, 0] - 1e-12)) == pytest.approx(0.0, abs=1e-9)
    assert float(second(-3.0)) == 0.0


_accelerations_at = eqx.filter_jit(lambda model, t, q, qdot: model.accelerations(t, q, qdot))


def _accelerations(model, q, qdot):
    # spineid's accelerations at t = 0 (compiled once per model layout; a strongly typed time,
    # as `_opensim_accelerations_agree` passes, since a weakly typed one compiles it again).
    return _accelerations_at(model, jnp.asarray(np.float64(0.0)), q, qdot)


# (Compiled once per model layout: run operation by operation, these took seconds per state.)
_coordinates_and_speeds = eqx.filter_jit(
    lambda ours, q, qdot: (ours.coordinates(q), ours.opensim_speeds(q, qdot)))


def _set_state(model, state, ours, q, qdot):
    # OpenSim's coordinates and speeds (a ball or free joint's speeds are an angular velocity).
    coordinates = model.getCoordinateSet()
    values, speeds = map(np.asarray, _coordinates_and_speeds(
        ours, jnp.asarray(q, dtype=float), jnp.asarray(qdot, dtype=float)))
    for i, name in enumerate(ours.coordinate_names):
        coordinates.get(name).setValue(state, float(values[i]), False)
        coordinates.get(name).setSpeedValue(state, float(speeds[i]))


def _bodies_as_in_opensim(path, coordinates):
    # Read `path` in both programs, set each `q` of `coordinates` in both, and compare every
    # body's orientation and origin in ground.
    ours = spineid.read_osim(path)
    model = osim.Model(str(path))
    state = model.initSystem()
    for q in coordinates:
        _set_state(model, state, ours, q, np.zeros_like(q))
        model.realizePosition(state)
        rotations, origins = ours.body_transforms(jnp.asarray(q))
        for b, name in enumerate(ours.body_names):
            rotation, origin = transform_of(model.getBodySet().get(name), state)
            np.testing.assert_allclose(np.asarray(rotations[b]), rotation, atol=1e-12)
            np.testing.assert_allclose(np.asarray(origins[b]), origin, atol=1e-12)
        all_coordinates = ours.coordinates(jnp.asarray(q))
        for joint in ours.joints:  # (each custom joint's axes, OpenSim's TransformAxis values)
            if joint.kind == "CustomJoint":
                axes = osim.CustomJoint.safeDownCast(model.getJointSet().get(joint.name)
                                                     ).getSpatialTransform()
                values = [float(axis.value(all_coordinates)) for axis in joint.axes]
                for k in range(6):  # (ours in order; an axis the file gives no function, 0)
                    value = axes.getTransformAxis(k).getValue(state)
                    if values and abs(values[0] - value) <= 1e-12:
                        values.pop(0)
                    else:
                        assert value == 0.0
                assert not values


@pytest.fixture(scope="module")
def every_joint(tmp_path_factory):
    return every_joint_model(osim, tmp_path_factory.mktemp("every_joint"))


@pytest.fixture(scope="module")
def repeated_coordinate(tmp_path_factory):
    return every_joint_model(osim, tmp_path_factory.mktemp("repeated"), "c_a")


@pytest.fixture(scope="module")
def several_coordinates(tmp_path_factory):
    return every_joint_model(osim, tmp_path_factory.mktemp("several"), several=True)


@pytest.fixture(scope="module")
def small_neck(tmp_path_factory):
    return neck_model(osim, tmp_path_factory.mktemp("neck"), levels=2)


@pytest.mark.parametrize("which", ["every_joint", "several_coordinates", "small_neck"])
def test_body_transforms_equal_opensims_at_random_coordinates(which, request):
    path = request.getfixturevalue(which)
    n_dof = spineid.read_osim(path).n_dof
    rng = np.random.default_rng(3)
    _bodies_as_in_opensim(path, [rng.uniform(-0.7, 0.7, n_dof) for _ in range(4)])


@eqx.filter_jit
def _spatial_accelerations(ours, q, qdot, qddot):
    # Each body's angular acceleration and its origin's acceleration, ground axes.
    def rates(x, v):
        (rotations, _), (rotation_rates, origin_rates) = jax.jvp(ours.body_transforms, (x,),
                                                                 (v,))
        spins = jax.vmap(lambda r, dr: axial(dr @ r.T))(rotations, rotation_rates)
        return spins, origin_rates

    return jax.jvp(rates, (q, qdot), (qdot, qddot))[1]


def _opensim_accelerations_agree(path, ours, seed, spread=0.5, times=(0.0,)):
    # Body accelerations of spineid's equations against OpenSim's at random states (three
    # at each of `times`, s; t an array: one compilation for them all).
    model = osim.Model(str(path))
    state = model.initSystem()
    rng = np.random.default_rng(seed)
    for t in np.repeat(times, 3):
        q = jnp.asarray(rng.uniform(-spread, spread, ours.n_dof))
        qdot = jnp.asarray(rng.uniform(-2.0, 2.0, ours.n_dof))
        qddot = _accelerations_at(ours, jnp.asarray(t), q, qdot)
        state.setTime(float(t))
        _set_state(model, state, ours, q, qdot)
        model.realizeAcceleration(state)
        spins, linear = _spatial_accelerations(ours, q, qdot, qddot)
        for b, name in enumerate(ours.body_names):
            theirs = model.getBodySet().get(name).getAccelerationInGround(state)
            angular = np.array([theirs.get(0).get(i) for i in range(3)])
            origin = np.array([theirs.get(1).get(i) for i in range(3)])
            np.testing.assert_allclose(np.asarray(spins[b]), angular,
                                       atol=1e-11 * float(jnp.max(jnp.abs(spins))))
            np.testing.assert_allclose(np.asarray(linear[b]), origin,
                                       atol=1e-11 * float(jnp.max(jnp.abs(linear))))


def test_accelerations_equal_opensims_at_random_states(every_joint):
    _opensim_accelerations_agree(every_joint, spineid.read_osim(every_joint), seed=5)


def _opensim_velocities(model, state, ours, q, qdot):
    _set_state(model, state, ours, q, qdot)
    model.realizeVelocity(state)
    rows = []
    for name in ours.body_names:
        velocity = model.getBodySet().get(name).getVelocityInGround(state)
        rows.append([velocity.get(k).get(i) for k in range(2) for i in range(3)])
    return np.array(rows)


@pytest.mark.parametrize("which", ["repeated_coordinate", "several_coordinates"])
def test_velocity_terms_are_the_derivative_of_opensims_own_velocities(which, request):
    # One coordinate drives the first and the third rotation of the CustomJoint (or, in
    # several_coordinates, each drives two rotations: the third is a function of both). There
    # OpenSim's accelerations are not those of its own kinematics (measured: 0.66 m/s^2 off
    # in 2718, with speeds; exact at rest; energy not conserved without damping; with several
    # coordinates 3.0 off in 39, SI, in a body's acceleration), while the bodies' velocities
    # agree to 1e-16. The oracle is then OpenSim's velocities themselves: the bodies'
    # accelerations at qddot = 0 are the derivative of their velocities along the motion,
    # here by central differences of OpenSim's.
    path = request.getfixturevalue(which)
    ours = spineid.read_osim(path)
    model = osim.Model(str(path))
    state = model.initSystem()
    rng = np.random.default_rng(2)
    q = rng.uniform(-0.5, 0.5, ours.n_dof)
    qdot = np.zeros(ours.n_dof)
    qdot[[0, 1]] = [1.3, -0.7]  # the CustomJoint's coordinates, whose speeds are their rates
    h = 1e-5
    central = (_opensim_velocities(model, state, ours, q + h * qdot, qdot)
               - _opensim_velocities(model, state, ours, q - h * qdot, qdot)) / (2 * h)
    spins, linear = _spatial_accelerations(ours, jnp.asarray(q), jnp.asarray(qdot),
                                           jnp.zeros(ours.n_dof))
    np.testing.assert_allclose(np.concatenate([spins, linear], axis=1), central, atol=1e-8)
    # and, without damping, the equations keep the energy: d(T + U)/dt = 0 at any state
    undamped = _undamped(ours)
    q, qdot = jnp.asarray(q), jnp.asarray(qdot)
    assert float(undamped._limit_energy(q)) > 0.0  # (a limit's spring takes part)
    qddot = _accelerations(undamped, q, qdot)
    _, power = jax.jvp(lambda x, v: spineid.mechanical_energy(undamped, 0.0, x, v), (q, qdot),
                       (qdot, qddot))
    kinetic = float(undamped.kinetic_energy(0.0, q, qdot))
    assert abs(float(power)) < 1e-10 * kinetic * float(jnp.max(jnp.abs(qdot)))


def _undamped(model):
    # Without the bushings' and the coordinate limits' damping (forces outside U).
    parameters = [p for p in declared_parameters(model) if "damping" in p.group]
    model = dataclasses.replace(model, limits=tuple(
        dataclasses.replace(limit, damping=jnp.zeros(())) for limit in model.limits))
    return spineid.apply_values(model, parameters, jnp.zeros(len(parameters)))


def test_expression_based_bushings_move_as_in_opensim_and_are_written_back(tmp_path):
    from osim_builders import expression_neck
    path = expression_neck(osim, tmp_path)
    ours = spineid.read_osim(path)
    bushing = ours.elements[0]
    assert type(bushing).__name__ == "ExpressionBushing" and len(bushing.terms) == 13
    assert "Mx: theta_x^3" in bushing.terms and "Mz: theta_z*delta_y" in bushing.terms
    names = {p.name: p for p in declared_parameters(ours)}
    index = bushing.terms.index("Mx: theta_x^3")
    cubic = names[f"bushing_1.coefficients[{index}]"]
    assert cubic.unit == "N m/rad^3" and cubic.value(ours) == 40.0
    _opensim_accelerations_agree(path, ours, seed=6, spread=0.3)
    # the Lagrange form (the spring a generalized force) agrees with the Newton-Euler form
    q, qdot = jnp.asarray([0.2, -0.1]), jnp.asarray([0.5, -1.0])
    lagrange = eqx.filter_jit(spineid.generalized_accelerations)(ours, 0.0, q, qdot)
    np.testing.assert_allclose(np.asarray(_accelerations(ours, q, qdot)), np.asarray(lagrange),
                               rtol=1e-9)
    # changed coefficients and damping written back: OpenSim reads the same polynomial
    changed = spineid.apply_values(ours, [cubic, names["bushing_1.rotational_damping[2]"]],
                                   jnp.asarray([55.5, 0.04]))
    written = spineid.export_model(changed, "opensim", tmp_path / "fitted.osim")
    before, after = path.read_text().splitlines(), written.read_text().splitlines()
    assert sum(a != b for a, b in zip(before, after)) == 2
    again = spineid.read_osim(written)
    assert float(again.elements[0].coefficients[index]) == 55.5
    # a model file of kind "opensim" sets the coefficients by name, and a fit reads them
    start = tmp_path / "start.toml"
    values = np.asarray(bushing.coefficients).tolist()
    values[index] = 30.0
    start.write_text(f'kind = "opensim"\nfile = "{path.name}"\n\n[bushing_1]\n'
                     f"coefficients = {values}\n")
    loaded = spineid.load_model_file(start)
    assert float(loaded.model.elements[0].coefficients[index]) == 30.0
    assert loaded.document["bushing_1"]["coefficients"] == values
    _opensim_accelerations_agree(written, again, seed=7, spread=0.3)


def test_a_bushing_expression_that_is_not_a_polynomial_is_refused(tmp_path):
    from osim_builders import expression_neck
    path = expression_neck(osim, tmp_path)
    text = path.read_text()
    for expression, reason in (("3*exp(theta_x)", "is not part of a polynomial"),
                               ("3/theta_x", "a division by a deflection"),
                               ("k*theta_x", "unknown name 'k'")):
        bad = tmp_path / "bad.osim"
        bad.write_text(re.sub(r"<Mx_expression>[^<]*</Mx_expression>",
                              f"<Mx_expression>{expression}</Mx_expression>", text))
        with pytest.raises(ValueError, match=re.escape(reason)) as caught:
            spineid.read_osim(bad)
        assert "bushing_1" in str(caught.value) and "Mx_expression" in str(caught.value)


_PRESCRIBED = """
<PrescribedForce name="push">
  <socket_frame>/bodyset/v2</socket_frame>
  <forceIsGlobal>false</forceIsGlobal>
  <FunctionSet name="forceFunctions"><objects>
    <Constant><value>1.5</value></Constant>
    <LinearFunction><coefficients>2 0.5</coefficients></LinearFunction>
    <Constant><value>-0.7</value></Constant>
  </objects><groups /></FunctionSet>
  <FunctionSet name="pointFunctions"><objects>
    <Constant><value>0.01</value></Constant>
    <Constant><value>0.02</value></Constant>
    <SimmSpline><x>0 0.5 1</x><y>0 0.01 -0.01</y></SimmSpline>
  </objects><groups /></FunctionSet>
  <FunctionSet name="torqueFunctions"><objects>
    <Constant><value>0.05</value></Constant>
    <Constant><value>0</value></Constant>
    <LinearFunction><coefficients>-0.2 0.1</coefficients></LinearFunction>
  </objects><groups /></FunctionSet>
</PrescribedForce>
<PrescribedForce name="pull">
  <socket_frame>/bodyset/v1</socket_frame>
  <pointIsGlobal>true</pointIsGlobal>
  <forceIsGlobal>true</forceIsGlobal>
  <FunctionSet name="forceFunctions"><objects>
    <Constant><value>0</value></Constant>
    <Constant><value>-3</value></Constant>
    <LinearFunction><coefficients>4 0</coefficients></LinearFunction>
  </objects><groups /></FunctionSet>
  <FunctionSet name="pointFunctions"><objects>
    <Constant><value>0.02</value></Constant>
    <Constant><value>0.06</value></Constant>
    <Constant><value>0.01</value></Constant>
  </objects><groups /></FunctionSet>
  <FunctionSet name="torqueFunctions"><objects>
    <Constant><value>0</value></Constant>
    <Constant><value>0.1</value></Constant>
    <Constant><value>0</value></Constant>
  </objects><groups /></FunctionSet>
</PrescribedForce>
<PrescribedForce name="lean">
  <socket_frame>/bodyset/v1</socket_frame>
  <FunctionSet name="forceFunctions"><objects>
    <Constant><value>-1.2</value></Constant>
    <Constant><value>0.4</value></Constant>
    <Constant><value>0.9</value></Constant>
  </objects><groups /></FunctionSet>
  <FunctionSet name="pointFunctions"><objects>
    <Constant><value>0.015</value></Constant>
    <LinearFunction><coefficients>0.01 0.005</coefficients></LinearFunction>
    <Constant><value>-0.01</value></Constant>
  </objects><groups /></FunctionSet>
</PrescribedForce>
<PrescribedForce name="press">
  <socket_frame>/bodyset/v2</socket_frame>
  <pointIsGlobal>true</pointIsGlobal>
  <FunctionSet name="forceFunctions"><objects>
    <Constant><value>0.8</value></Constant>
    <Constant><value>0</value></Constant>
    <PiecewiseLinearFunction><x>0 0.5 1</x><y>0 1 0</y></PiecewiseLinearFunction>
  </objects><groups /></FunctionSet>
</PrescribedForce>
"""


def test_prescribed_forces_move_the_bodies_as_in_opensim(tmp_path, small_neck):
    # Forces, points and torques as functions of time, in the frame's axes and in ground's
    # (OpenSim's default), at a point of the body, at a place in ground and at the frame's
    # origin (no point functions, pointIsGlobal or not): accelerations at t = 0.3 s and 0.8 s
    text = small_neck.read_text()
    forces = text.index("</objects>", text.index("<ForceSet"))
    edited = tmp_path / "prescribed.osim"
    edited.write_text(text[:forces] + _PRESCRIBED + text[forces:])
    ours = spineid.read_osim(edited)
    assert [load.name for load in ours.prescribed] == ["push", "pull", "lean", "press"]
    _opensim_accelerations_agree(edited, ours, seed=8, spread=0.4, times=(0.3, 0.8))
    # the Lagrange form takes the same generalized forces
    # (t a float64 array as above, not a weakly typed Python float: the same compiled program)
    q, qdot = jnp.asarray([0.2, -0.3, 0.1, 0.25]), jnp.asarray([0.5, -1.0, 0.3, 0.0])
    t = jnp.asarray(np.float64(0.8))
    lagrange = eqx.filter_jit(spineid.generalized_accelerations)(ours, t, q, qdot)
    np.testing.assert_allclose(np.asarray(_accelerations_at(ours, t, q, qdot)),
                               np.asarray(lagrange), rtol=1e-9)
    # the forces' derivatives (a place in ground moves through the body as it turns) equal
    # central differences
    q, qdot = jnp.asarray([0.2, -0.3, 0.1, 0.25]), jnp.zeros(4)
    applied = jax.jit(lambda x: ours.generalized_forces(0.3, x, qdot))
    derivative = np.asarray(jax.jacfwd(applied)(q))
    central = np.stack([(np.asarray(applied(q + 1e-6 * e)) - np.asarray(applied(q - 1e-6 * e)))
                        / 2e-6 for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(derivative, central, atol=1e-7 * np.abs(central).max())
    # loads of an opensim model file are constant prescribed forces (the same as in the file)
    constant = ('<PrescribedForce name="c"><socket_frame>/bodyset/v2</socket_frame>'
                '<forceIsGlobal>false</forceIsGlobal>' + "".join(
                    f'<FunctionSet name="{kind}Functions"><objects>' + "".join(
                        f"<Constant><value>{v}</value></Constant>" for v in values)
                    + "</objects></FunctionSet>"
                    for kind, values in (("force", (1, -2, 0.5)), ("point", (0.01, 0, 0.02)),
                                         ("torque", (0, 0.1, -0.2))))
                + "</PrescribedForce>"
                + '<PrescribedForce name="d"><socket_frame>/bodyset/v1</socket_frame>' + "".join(
                    f'<FunctionSet name="{kind}Functions"><objects>' + "".join(
                        f"<Constant><value>{v}</value></Constant>" for v in values)
                    + "</objects></FunctionSet>"
                    for kind, values in (("force", (0, 3, -1)), ("point", (0.02, 0.01, 0))))
                + "</PrescribedForce>")
    (tmp_path / "constant.osim").write_text(text[:forces] + constant + text[forces:])
    start = tmp_path / "loaded.toml"
    start.write_text(f'kind = "opensim"\nfile = "{small_neck}"\n\n[[loads]]\nbody = "v2"\n'
                     "force = [1, -2, 0.5]\npoint = [0.01, 0, 0.02]\ntorque = [0, 0.1, -0.2]\n"
                     'in_ground = false\n\n[[loads]]\nbody = "v1"\nforce = [0, 3, -1]\n'
                     "point = [0.02, 0.01, 0]\n")
    loaded = spineid.load_model_file(start).model
    in_file = spineid.read_osim(tmp_path / "constant.osim")
    generalized = eqx.filter_jit(lambda model: model.generalized_forces(0.5, q, qdot))
    np.testing.assert_allclose(np.asarray(generalized(loaded)), np.asarray(generalized(in_file)),
                               atol=1e-14)
    start.write_text(f'kind = "opensim"\nfile = "{small_neck}"\n\n[[loads]]\nbody = "v3"\n')
    with pytest.raises(ValueError, match="loads\\[0\\].body.*a body of the model"):
        spineid.load_model_file(start)
    two = text[:forces] + _PRESCRIBED.replace("<Constant><value>0.05</value></Constant>", "")
    (tmp_path / "two.osim").write_text(two + text[forces:])
    with pytest.raises(ValueError, match="torqueFunctions holds 2 functions"):
        spineid.read_osim(tmp_path / "two.osim")


def test_lagrange_and_newton_euler_forms_agree(every_joint):
    ours = spineid.read_osim(every_joint)
    rng = np.random.default_rng(9)
    q = jnp.asarray(rng.uniform(-0.5, 0.5, ours.n_dof))
    qdot = jnp.asarray(rng.uniform(-2.0, 2.0, ours.n_dof))
    lagrange = eqx.filter_jit(spineid.generalized_accelerations)(ours, 0.0, q, qdot)
    np.testing.assert_allclose(np.asarray(_accelerations(ours, q, qdot)),
                               np.asarray(lagrange), rtol=1e-9,
                               atol=1e-10 * float(jnp.max(jnp.abs(lagrange))))


def test_simulation_equals_opensims_manager_over_a_second(small_neck):
    ours = spineid.read_osim(small_neck)
    model = osim.Model(str(small_neck))
    state = model.initSystem()
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(1e-10)
    state.setTime(0.0)
    manager.initialize(state)
    times = [0.25, 0.5, 1.0]
    theirs = []
    for t in times:
        state = manager.integrate(t)
        coordinates = model.getCoordinateSet()
        theirs.append([coordinates.get(ours.coordinate_names[i]).getValue(state)
                       for i in ours.free])
    simulation = spineid.simulate(ours, jnp.asarray([0.0] + times), rtol=1e-10, atol=1e-10)
    swing = float(jnp.max(jnp.abs(simulation.q - simulation.q[0])))
    assert swing > 0.05  # the head moves (the comparison is not of two rests)
    np.testing.assert_allclose(np.asarray(simulation.q[1:]), np.array(theirs), atol=1e-6)


def test_a_coupler_of_two_coordinates_is_opensims_constraint(tmp_path):
    # Lateral bending follows flexion and axial rotation through a MultivariatePolynomial-
    # Function (OpenSim's own, its terms in OpenSim's order): the coordinate equals OpenSim's
    # function, and OpenSim finds the constraint met, positions and speeds, at spineid's
    # coordinates and rates. (OpenSim 4.6's Manager does not advance this model: integrating
    # 0.02 s did not return in five minutes; the motion is not compared.)
    model = osim.Model(str(neck_model(osim, tmp_path, levels=1, locked=False, coupled=False)))
    function = osim.MultivariatePolynomialFunction()
    function.setDimension(2)
    function.setOrder(2)
    terms = [0.01, 0.1, 0.5, 0.3, -0.4, 0.2]  # 1, r, r^2, f, f r, f^2 (flexion f, rotation r)
    vector = osim.Vector(len(terms), 0.0)
    for k, c in enumerate(terms):
        vector.set(k, c)
    function.setCoefficients(vector)
    coupler = osim.CoordinateCouplerConstraint()
    coupler.setName("bending_follows_two")
    independent = osim.ArrayStr()
    independent.append("v1_flexion")
    independent.append("v1_rotation")
    coupler.setIndependentCoordinateNames(independent)
    coupler.setDependentCoordinateName("v1_bending")
    coupler.setFunction(function)
    model.addConstraint(coupler)
    model.finalizeConnections()
    path = tmp_path / "two.osim"
    model.printToXML(str(path))
    ours = spineid.read_osim(path)
    assert ours.observable_names == ("v1_flexion", "v1_rotation")
    model = osim.Model(str(path))
    state = model.initSystem()
    rng = np.random.default_rng(4)
    for q, qdot in zip(rng.uniform(-0.5, 0.5, (4, 2)), rng.uniform(-2.0, 2.0, (4, 2))):
        x = osim.Vector(2, 0.0)
        x.set(0, float(q[0]))
        x.set(1, float(q[1]))
        values, rates = jax.jvp(ours.coordinates, (jnp.asarray(q),), (jnp.asarray(qdot),))
        assert float(values[1]) == pytest.approx(function.calcValue(x), abs=1e-14)
        for k, name in enumerate(ours.coordinate_names):
            model.getCoordinateSet().get(name).setValue(state, float(values[k]), False)
            model.getCoordinateSet().get(name).setSpeedValue(state, float(rates[k]))
        model.realizeVelocity(state)
        errors = [state.getQErr().get(0), state.getUErr().get(0)]
        assert np.max(np.abs(errors)) < 1e-12, errors
    _bodies_as_in_opensim(path, [rng.uniform(-0.5, 0.5, 2) for _ in range(3)])
    # a function of several coordinates must be the multivariate polynomial, of as many
    text = path.read_text()
    for old, new, message in (("<dimension>2</dimension>", "<dimension>3</dimension>",
                               "dimension 3 for 2 coordinate"),
                              ("v1_flexion v1_rotation", "v1_flexion", "dimension 2 for 1")):
        (tmp_path / "bad.osim").write_text(text.replace(old, new))
        with pytest.raises(ValueError, match=message):
            spineid.read_osim(tmp_path / "bad.osim")

def test_the_file_decides_coordinates_locks_couplers_and_names(small_neck):
    ours = spineid.read_osim(small_neck)
    assert ours.coordinate_names == ("v1_flexion", "v1_bending", "v1_rotation", "v2_flexion",
                                     "v2_bending", "v2_rotation")
    # v1_bending follows v1_flexion (coupler), v2_rotation is locked
    assert ours.observable_names == ("v1_flexion", "v1_rotation", "v2_flexion", "v2_bending")
    # (flexion drives a rotation with slope 1 and a translation through a spline: rotational)
    assert ours.observable_units == ("rad",) * 4
    q0, _ = ours.initial_state()
    assert np.asarray(q0).tolist() == [0.0, -0.1, 0.25, 0.0]
    values = ours.coordinates(jnp.asarray([0.2, 0.0, 0.0, 0.0]))
    assert float(values[1]) == pytest.approx(0.3 * 0.2)
    names = [p.name for p in declared_parameters(ours)]
    assert "bushing_2.rotational_damping[2]" in names
    groups = {p.group for p in declared_parameters(ours)}
    assert groups == {"bushings.rotational_stiffness", "bushings.translational_stiffness",
                      "bushings.rotational_damping", "bushings.translational_damping",
                      "bodies.mass", "bodies.mass_center", "bodies.inertia", "initial",
                      "initial_speeds", "lab_frame"}
    by_group = {group: [(p.name, p.unit, p.lower) for p in declared_parameters(ours)
                        if p.group == group] for group in groups}
    assert by_group["bodies.mass"] == [(f"{body}.mass", "kg", 0.0) for body in ours.body_names]
    assert by_group["bodies.mass_center"] == [(f"{body}.mass_center[{i}]", "m", -np.inf)
                                              for body in ours.body_names for i in range(3)]
    assert by_group["bodies.inertia"] == [(f"{body}.inertia[{i}]", "kg m^2",
                                           0.0 if i < 3 else -np.inf)
                                          for body in ours.body_names for i in range(6)]
    # the start: the free coordinates' (not the locked or the coupled), in SI
    free = ("v1_flexion", "v1_rotation", "v2_flexion", "v2_bending")
    assert by_group["initial"] == [(f"initial.{name}", "rad", -np.inf) for name in free]
    assert by_group["initial_speeds"] == [(f"initial_speeds.{name}", "rad/s", -np.inf)
                                          for name in free]
    # the frame of marker data (the model has a MarkerSet): translation and 1-2-3 angles
    assert by_group["lab_frame"] == [(f"lab_frame.{part}[{i}]", unit, -np.inf) for part, unit in (
        ("translation", "m"), ("rotation", "rad")) for i in range(3)]
    # an entry of a body's row is set alone, and a product of inertia on both sides of the
    # matrix (v2's Ixy and Iyz; the file's other entries kept)
    chosen = select_parameters(declared_parameters(ours), [
        "v2.inertia[3]", "v2.inertia[5]", "v1.mass_center[1]"])
    changed = spineid.apply_values(ours, chosen, jnp.asarray([3e-5, -2e-5, 0.012]))
    assert np.asarray(changed.inertias[1]).tolist() == [[4e-4, 3e-5, 0.0],
                                                        [3e-5, 6e-4, -2e-5], [0.0, -2e-5, 5e-4]]
    assert np.asarray(changed.inertias[0]).tolist() == np.asarray(ours.inertias[0]).tolist()
    assert np.asarray(changed.mass_centers).tolist() == [[0.01, 0.012, 0.0], [0.01, 0.008, 0.0]]
    assert [float(p.get(changed)) for p in chosen] == [3e-5, -2e-5, 0.012]


def test_gradients_reach_the_bushings_of_the_file(small_neck):
    ours = spineid.read_osim(small_neck)
    parameters = [p for p in declared_parameters(ours)
                  if p.name == "bushing_1.rotational_stiffness[2]"]
    q = jnp.asarray([0.2, -0.1, 0.3, 0.05])
    qdot = jnp.asarray([0.5, 0.2, -0.4, 0.1])

    @jax.jit
    def flexion_acceleration(value):
        model = spineid.apply_values(ours, parameters, jnp.atleast_1d(value))
        return model.accelerations(0.0, q, qdot)[0]

    k = float(parameters[0].value(ours))
    gradient = float(jax.grad(flexion_acceleration)(k))
    step = 1e-3 * k
    central = (float(flexion_acceleration(k + step))
               - float(flexion_acceleration(k - step))) / (2 * step)
    assert gradient == pytest.approx(central, rel=1e-7)
    assert abs(gradient) > 1e-3


def _edited(path: pathlib.Path, old: str, new: str, tmp_path, count: int = 1):
    text = path.read_text()
    assert old in text
    edited = tmp_path / "edited.osim"
    edited.write_text(text.replace(old, new, count))
    return edited


def test_old_and_foreign_files_are_refused_in_one_sentence(tmp_path, small_neck):
    not_xml = tmp_path / "notes.osim"
    not_xml.write_text("this is not a model")
    with pytest.raises(ValueError, match="is not an OpenSim model"):
        spineid.read_osim(not_xml)
    other = tmp_path / "other.osim"
    other.write_text("<?xml version='1.0'?><mujoco model='x'/>")
    with pytest.raises(ValueError, match=r"root element is <mujoco>"):
        spineid.read_osim(other)
    ellipsoid = _edited(small_neck, '<CustomJoint name="joint_2">',
                        '<EllipsoidJoint name="joint_2">', tmp_path)
    text = ellipsoid.read_text()
    index = text.index('<EllipsoidJoint name="joint_2">')
    close = text.index("</CustomJoint>", index)
    ellipsoid.write_text(text[:close] + "</EllipsoidJoint>" + text[close + 14:])
    with pytest.raises(ValueError, match=r"/jointset/joint_2: joint EllipsoidJoint is not "
                                         r"supported; supported are .*CustomJoint"):
        spineid.read_osim(ellipsoid)


def test_bodies_and_locks_opensim_refuses_are_refused_and_odd_inertias_said(tmp_path,
                                                                           small_neck):
    # A negative mass (OpenSim's own reader refuses it too), and a locked coordinate that a
    # CoordinateCouplerConstraint makes follow another (OpenSim then holds that one as well):
    # one sentence each. An inertia no rigid body has is read as given, with a warning (as
    # OpenSim simulates it).
    text = small_neck.read_text()
    mass = re.search(r"<mass>[^<]*</mass>", text).group(0)
    negative = _edited(small_neck, mass, "<mass>-0.4</mass>", tmp_path)
    with pytest.raises(Exception):
        osim.Model(str(negative)).initSystem()
    with pytest.raises(ValueError, match=r"/bodyset/v1: mass -0.4: expected a number >= 0"):
        spineid.read_osim(negative)
    start = text.index('<Coordinate name="v1_bending">') + len('<Coordinate name="v1_bending">')
    locked = tmp_path / "locked.osim"
    locked.write_text(text[:start] + "<locked>true</locked>" + text[start:])
    assert osim.Model(str(locked)).getCoordinateSet().get("v1_bending").getDefaultLocked()
    with pytest.raises(ValueError, match=r"coordinate 'v1_bending' is locked and follows "
                                         r"another through a CoordinateCouplerConstraint"):
        spineid.read_osim(locked)
    inertia = re.search(r"<inertia>[^<]*</inertia>", text).group(0)
    odd = _edited(small_neck, inertia, "<inertia>0.001 0.002 0.001 0.31 0 0</inertia>",
                  tmp_path)
    with pytest.warns(RuntimeWarning, match=r"/bodyset/v1: inertia .* is not a rigid body's"):
        assert spineid.read_osim(odd).inertia_entries[0, 3] == 0.31


def test_unsupported_functions_and_constraints_are_named(tmp_path, small_neck):
    text = small_neck.read_text()
    spline = re.search(r'<SimmSpline name="function">.*?</SimmSpline>', text, re.S).group(0)
    step = tmp_path / "step.osim"
    step.write_text(text.replace(spline, '<StepFunction name="function"><transition_start_time>'
                                         '0</transition_start_time></StepFunction>', 1))
    with pytest.raises(ValueError, match=r"/jointset/joint_1/translation1: function "
                                         r"StepFunction is not supported; supported are"):
        spineid.read_osim(step)
    weld = tmp_path / "weld.osim"
    weld.write_text(text.replace("<CoordinateCouplerConstraint", "<WeldConstraint").replace(
        "</CoordinateCouplerConstraint>", "</WeldConstraint>"))
    with pytest.raises(ValueError, match=r"constraint WeldConstraint is not supported"):
        spineid.read_osim(weld)


def test_other_forces_are_dropped_with_one_warning_naming_them(tmp_path, small_neck):
    text = small_neck.read_text()
    limit = ('<SpringGeneralizedForce name="flexion_limit"><coordinate>v1_flexion</coordinate>'
             '<stiffness>10</stiffness><rest_length>0</rest_length><viscosity>0.1</viscosity>'
             '</SpringGeneralizedForce>')
    edited = tmp_path / "limited.osim"
    edited.write_text(text.replace("<BushingForce name=\"bushing_1\">",
                                   limit + "<BushingForce name=\"bushing_1\">", 1))
    assert osim.Model(str(edited)).getForceSet().getSize() == 3  # OpenSim reads it too
    with pytest.warns(UserWarning, match=r"forces dropped .*flexion_limit "
                                         r"\(SpringGeneralizedForce\)") as caught:
        ours = spineid.read_osim(edited)
    assert len(caught) == 1
    assert [b.label for b in ours.elements] == ["bushing_1", "bushing_2"]


def test_natural_splines_and_multipliers_in_a_file_move_the_bodies_as_in_opensim(
        tmp_path, small_neck):
    text = small_neck.read_text()
    spline = re.search(r'<SimmSpline name="function">(.*?)</SimmSpline>', text, re.S)
    natural = f'<NaturalCubicSpline name="function">{spline.group(1)}</NaturalCubicSpline>'
    multiplied = ('<MultiplierFunction name="function"><function><SimmSpline>'
                  f'{spline.group(1)}</SimmSpline></function><scale>1.7</scale>'
                  '</MultiplierFunction>')
    edited = tmp_path / "functions.osim"
    first = text.index(spline.group(0))
    second = text.index(spline.group(0), first + 1)
    edited.write_text(text[:first] + natural + text[first + len(spline.group(0)):second]
                      + multiplied + text[second + len(spline.group(0)):])
    _bodies_as_in_opensim(edited, [np.array([0.3, -0.2, 0.45, 0.1])])


def _lab_fit(tmp_path, truth, table: str, free: list[str], seed: int,
             filtered: float | None = None) -> tuple[dict, dict, np.ndarray]:
    """OpenSim's `Manager` moves the model file `truth` from its defaults for 0.6 s (61
    samples, 0.2 mrad of noise: white, or through a low-pass at `filtered` of the Nyquist rate,
    `opensim_motion`); `spineid fit` fits the names `free` from a lab's start, `truth` changed
    by the TOML `table`, to that motion (white weights, or the default noise model where the
    noise is filtered) and must accept it. Returns the report's parameter entries by name,
    OpenSim's clean motion and its times (s)."""
    from spineid.cli import main
    times = np.linspace(0.0, 0.6, 61)
    clean = opensim_motion(osim, truth, times, tmp_path / "motion.sto", noise=2e-4, seed=seed,
                           filtered=filtered)
    start = tmp_path / "start.toml"
    start.write_text(f'kind = "opensim"\nfile = "{truth.name}"\n\n{table}\n')
    weights = ["--noise-model", "white"] if filtered is None else []
    status = main(["fit", str(start), str(tmp_path / "motion.sto"),
                   *[part for name in free for part in ("--free", name)], *weights,
                   "--out", str(tmp_path / "fit")])
    assert status == 0
    report = json.loads((tmp_path / "fit" / "report.json").read_text())
    return {entry["name"]: entry for entry in report["parameters"]}, clean, times


def _opensim_runs_the_fitted_file(tmp_path, truth, clean: dict, times) -> list[tuple]:
    """Asserts that OpenSim's `Manager` runs the `fitted.osim` of `_lab_fit` and reproduces
    OpenSim's `clean` motion of `truth` within 0.5 mrad; returns the lines (truth's, the
    fitted file's) that differ."""
    fitted = tmp_path / "fit" / "fitted.osim"
    refit = opensim_motion(osim, fitted, times, tmp_path / "again.sto")
    for name, values in clean.items():
        assert np.max(np.abs(refit[name] - values)) < 5e-4, name
    return [(a, b) for a, b in zip(truth.read_text().splitlines(),
                                   fitted.read_text().splitlines()) if a != b]


def test_a_lab_fits_its_bushings_from_opensim_motion_and_opensim_runs_the_result(tmp_path):
    truth = neck_model(osim, tmp_path, levels=1, locked=False)
    # the lab's start: its model with stiffness 40 % off
    entries, clean, times = _lab_fit(
        tmp_path, truth, "[bushing_1]\nrotational_stiffness = [4.2, 1.5, 5.6]",
        ["bushings.rotational_stiffness"], seed=4)
    true = {"bushing_1.rotational_stiffness[0]": 3.0, "bushing_1.rotational_stiffness[1]": 2.5,
            "bushing_1.rotational_stiffness[2]": 4.0}
    for name, value in true.items():
        entry = entries[name]
        if entry["identifiable"]:
            assert abs(entry["value"] - value) < 3 * entry["stderr"], entry
    assert sum(entry["identifiable"] for entry in entries.values()) >= 2
    # OpenSim runs the written model and it reproduces the data within the noise
    _opensim_runs_the_fitted_file(tmp_path, truth, clean, times)


def test_a_lab_fits_a_body_mass_from_opensim_motion_and_opensim_runs_the_result(tmp_path):
    # The vertebra's 0.3 kg hangs 10 mm in front of its joint: gravity's moment sets where the
    # damped swing settles, so its mass is seen through the bushing's known stiffness.
    truth = neck_model(osim, tmp_path, levels=1, locked=False)
    # (the lab's start: the mass a third too large)
    entries, clean, times = _lab_fit(tmp_path, truth, "[v1]\nmass = 0.4", ["bodies.mass"],
                                     seed=5)
    assert spineid.load_model_file(tmp_path / "start.toml").model.masses.tolist() == [0.4]
    (entry,) = entries.values()
    assert (entry["name"], entry["unit"]) == ("v1.mass", "kg")
    assert abs(entry["value"] - 0.3) < 3 * entry["stderr"] < 0.03, entry
    # fitted.osim: the mass line alone changed; OpenSim reads it and reproduces the data
    changed = _opensim_runs_the_fitted_file(tmp_path, truth, clean, times)
    assert [a.strip()[:6] for a, _ in changed] == ["<mass>"]
    read = osim.Model(str(tmp_path / "fit" / "fitted.osim"))
    read.initSystem()
    assert read.getBodySet().get("v1").getMass() == pytest.approx(entry["value"], rel=1e-12)
    fitted = spineid.load_model_file(tmp_path / "fit" / "fitted.toml")
    assert fitted.model.masses.tolist() == pytest.approx([entry["value"]], rel=1e-12)
    # a mass must be a number > 0, and a body's table holds nothing else
    start = tmp_path / "start.toml"
    for table, message in (("mass = -0.3", r"v1\.mass.*a number > 0"),
                           ("inertia = 1.0", r"v1.*inertia")):
        start.write_text(f'kind = "opensim"\nfile = "{truth.name}"\n\n[v1]\n{table}\n')
        with pytest.raises(ValueError, match=message):
            spineid.load_model_file(start)


def test_a_lab_fits_a_centre_of_mass_and_an_inertia_and_opensim_runs_the_result(tmp_path):
    # The vertebra swings in flexion about z: its centre of mass 10 mm in front of the joint
    # sets gravity's moment, its moment of inertia about z (with the centre's offset) the
    # period of the swing; a lab's start has the centre 4 mm off and the moment 40 % high.
    # (The noise filtered as a motion-capture pipeline filters, under the default noise model.)
    truth = neck_model(osim, tmp_path, levels=1, locked=False)
    entries, clean, times = _lab_fit(
        tmp_path, truth, "[v1]\nmass_center = [0.014, 0.008, 0.0]\n"
        "inertia = [4e-4, 6e-4, 7e-4, 2e-5, 0.0, -1e-5]", ["v1.mass_center[0]", "v1.inertia[2]"],
        seed=7, filtered=0.25)
    true = {"v1.mass_center[0]": (0.01, "m"), "v1.inertia[2]": (5e-4, "kg m^2")}
    assert {name: entry["unit"] for name, entry in entries.items()} == {
        name: unit for name, (_, unit) in true.items()}
    for name, (value, _) in true.items():
        entry = entries[name]
        assert abs(entry["value"] - value) < 3 * entry["stderr"] < 0.05 * value, entry
    # fitted.osim: the two lines alone changed, each in its one number; OpenSim reads them
    # back and reproduces the data
    changed = _opensim_runs_the_fitted_file(tmp_path, truth, clean, times)
    assert [a.strip()[:13] for a, _ in changed] == ["<mass_center>", "<inertia>0.00"]
    for a, b in changed:
        assert sum(x != y for x, y in zip(a.split(), b.split())) == 1, (a, b)
    read = osim.Model(str(tmp_path / "fit" / "fitted.osim"))
    read.initSystem()
    body = read.getBodySet().get("v1")
    assert body.getMassCenter().get(0) == pytest.approx(entries["v1.mass_center[0]"]["value"],
                                                         rel=1e-12)
    assert body.getInertia().getMoments().get(2) == pytest.approx(
        entries["v1.inertia[2]"]["value"], rel=1e-12)
    # a centre of mass is 3 numbers; an inertia 6, that a rigid body can have
    start = tmp_path / "start.toml"
    for table, message in (("mass_center = [0.01, 0.0]", r"v1\.mass_center.*3"),
                           ("inertia = [4e-4, 6e-4, 5e-4]", r"v1\.inertia.*6"),
                           ("inertia = [1e-4, 1e-4, 5e-4, 0.0, 0.0, 0.0]",
                            r"v1\.inertia.*rigid body.*sum of the other two"),
                           ("inertia = [4e-4, 4e-4, 4e-4, 5e-4, 0.0, 0.0]",
                            r"v1\.inertia.*moments >= 0")):
        start.write_text(f'kind = "opensim"\nfile = "{truth.name}"\n\n[v1]\n{table}\n')
        with pytest.raises(ValueError, match=message):
            spineid.load_model_file(start)


def test_a_record_of_coordinates_alone_fits_its_start_with_the_bushing(tmp_path, capsys):
    from spineid.cli import main
    # OpenSim's Manager started away from the lab file's defaults (values and speeds) writes
    # a coordinates file, which has no speeds: the start is fitted (`initial`,
    # `initial_speeds`) with the bushing's flexion stiffness.
    lab = neck_model(osim, tmp_path, levels=1, locked=False)
    times = np.linspace(0.0, 0.6, 61)

    def started(true: dict, data: str, **noise):
        # OpenSim's motion of the lab's model started at `true` ({coordinate: (rad, rad/s)}),
        # written to `data`
        model = osim.Model(str(lab))
        coordinates = model.getCoordinateSet()
        # (the coupled bending follows flexion, so that OpenSim's assembly changes nothing)
        flexion = true["v1_flexion"]
        for name, (value, speed) in true.items() | {
                "v1_bending": (0.3 * flexion[0], 0.3 * flexion[1])}.items():
            coordinates.get(name).setDefaultValue(value)
            coordinates.get(name).setDefaultSpeedValue(speed)
        model.printToXML(str(tmp_path / "moving.osim"))
        opensim_motion(osim, tmp_path / "moving.osim", times, tmp_path / data, noise=2e-4,
                       **noise)

    true = {"v1_flexion": (0.12, 1.2), "v1_rotation": (-0.04, -0.6)}
    # (its noise filtered as a motion-capture pipeline filters, fitted under the default
    # noise model)
    started(true, "motion.sto", seed=9, filtered=0.25)
    parameters = {p.name: p for p in spineid.load_model_file(lab).parameters}
    assert [(parameters[f"{group}.v1_{name}"].unit, parameters[f"{group}.v1_{name}"].group)
            for group in ("initial", "initial_speeds") for name in ("flexion", "rotation")] == [
        ("rad", "initial")] * 2 + [("rad/s", "initial_speeds")] * 2
    assert "initial.v1_bending" not in parameters  # (a coupled coordinate follows flexion)
    # a fit that keeps the model's start is told where the record starts, and what to free
    kept = spineid.FitProblem.from_files(lab, [tmp_path / "motion.sto"],
                                         ["bushings.rotational_stiffness"])
    # (in the file's unit: OpenSim wrote degrees; -0.13 rad and +0.06 rad)
    (note,) = kept.start_notes
    assert re.search(r"motion\.sto: its first row is away from the model's start \(v1_flexion "
                     r"by -7\.\d deg, v1_rotation by \+3\.\d deg\).*--free initial --free "
                     r"initial_speeds$", note), note
    assert spineid.FitProblem.from_files(lab, [tmp_path / "motion.sto"], [
        "initial"]).start_notes == []
    out = tmp_path / "fit"
    status = main(["fit", str(lab), str(tmp_path / "motion.sto"), "--free", "initial",
                   "--free", "initial_speeds", "--free", "bushing_1.rotational_stiffness[2]",
                   "--out", str(out)])
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    entries = {entry["name"]: entry for entry in report["parameters"]}
    expected = {"bushing_1.rotational_stiffness[2]": 4.0, **{
        f"initial.{name}": value for name, (value, _) in true.items()}, **{
        f"initial_speeds.{name}": speed for name, (_, speed) in true.items()}}
    assert set(entries) == set(expected)
    for name, value in expected.items():
        assert abs(entries[name]["value"] - value) < 3 * entries[name]["stderr"], entries[name]
    # fitted.toml holds the start; simulated from it, the fitted model follows OpenSim's
    fitted = spineid.load_model_file(out / "fitted.toml")
    q0, qdot0 = fitted.model.initial_state()
    assert np.asarray(q0).tolist() == pytest.approx(
        [entries["initial.v1_flexion"]["value"], entries["initial.v1_rotation"]["value"]],
        rel=1e-12)
    # Two records that start at different places share the stiffness: each has its own
    # start (`<name>@<record>`), which fitted.toml leaves at the model's. (White noise.)
    other = {"v1_flexion": (-0.1, 0.5), "v1_rotation": (0.05, 0.8)}
    started(true, "first.sto", seed=11)
    started(other, "other.sto", seed=10)
    records = [str(tmp_path / "first.sto"), str(tmp_path / "other.sto")]
    status = main(["fit", str(lab), *records, "--free", "initial", "--free", "initial_speeds",
                   "--free", "bushing_1.rotational_stiffness[2]", "--noise-model", "white",
                   "--out", str(tmp_path / "two")])
    assert status == 0
    entries = {entry["name"]: entry for entry in json.loads(
        (tmp_path / "two" / "report.json").read_text())["parameters"]}
    expected = {"bushing_1.rotational_stiffness[2]": 4.0, **{
        f"{group}.{name}@{k}": start[name][column] for k, start in ((1, true), (2, other))
        for column, group in enumerate(("initial", "initial_speeds")) for name in start}}
    assert set(entries) == set(expected)
    for name, value in expected.items():
        assert abs(entries[name]["value"] - value) < 3 * entries[name]["stderr"], entries[name]
    fitted = spineid.load_model_file(tmp_path / "two" / "fitted.toml")
    assert np.asarray(fitted.model.initial_state()[0]).tolist() == [0.25, -0.1]
    assert "Each record's start was fitted" in (tmp_path / "two" / "fitted.toml").read_text()
    # one record's start alone (@<record>); a record that does not exist, or a parameter of
    # the model, refused in one sentence
    assert spineid.FitProblem.from_files(lab, records, ["initial@2"]).names == [
        "initial.v1_flexion@2", "initial.v1_rotation@2"]
    for free, message in (("initial@3", "there is no record 3 (this fit has 2"),
                          ("bushing_1.rotational_stiffness[2]@1", "is the model's, shared")):
        status = main(["fit", str(lab), *records, "--free", free, "--out",
                       str(tmp_path / "bad")])
        assert status == 2 and not (tmp_path / "bad").exists()
        assert message in capsys.readouterr().err


def test_the_start_and_the_bodies_of_a_model_file_survive_its_round_trip(tmp_path):
    # A ball or free joint's rotations have no start parameters (their OpenSim speeds are an
    # angular velocity, which stands for other rates once their values change).
    model = spineid.read_osim(every_joint_model(osim, tmp_path))
    parameters = declared_parameters(model)
    spinning = {f"j2_coord_{k}" for k in range(3)} | {f"j5_coord_{k}" for k in range(3)}
    for group in ("initial", "initial_speeds"):
        assert [p.name for p in parameters if p.group == group] == [
            f"{group}.{name}" for name in model.coordinate_names if name not in spinning]
    # In a fit of two records each has its own start, set in its record's model alone; the
    # model's own parameters in every record's (and alone where no record is named)
    first = "initial." + model.coordinate_names[0]
    chosen = select_parameters(parameters, [first, "bodies.mass"], records=2)
    assert [(p.name, p.record) for p in chosen[:2]] == [(f"{first}@1", 0), (f"{first}@2", 1)]
    assert all(p.record is None and "@" not in p.name for p in chosen[2:])
    assert {p.shared_name for p in chosen[:2]} == {first}  # (the name priors are found by)
    assert [p.shared_name for p in chosen[2:]] == [p.name for p in chosen[2:]]
    values = jnp.asarray([0.1, 0.2, *(p.value(model) + 1.0 for p in chosen[2:])])
    for record, start in ((0, 0.1), (1, 0.2), (None, float(model.default_values[0]))):
        placed = spineid.apply_values(model, chosen, values, record=record)
        assert float(placed.default_values[0]) == start
        assert np.asarray(placed.masses).tolist() == (np.asarray(model.masses) + 1.0).tolist()
    for free, records, message in ((f"{first}@1", 1, "this fit has one"),
                                   (f"{first}@3", 2, "there is no record 3"),
                                   ("bodies.mass@1", 2, "is the model's, shared by every")):
        with pytest.raises(ValueError, match=message):
            select_parameters(parameters, [free], records=records)
    # A locked coordinate's start given in the file, and a body's inertia no rigid body has in
    # the .osim itself (OpenSim only warns), are kept when the file is completed and read again
    # (as fitted.toml is); the inertia is refused only where the TOML changes it.
    neck = tmp_path / "neck.osim"
    neck.write_text(spineid.dataset_path("neck_bushings.osim").read_text().replace(
        "<inertia>0.00040000000000000002 0.00059999999999999995",
        "<inertia>0.0001 0.0001", 1))
    assert spineid.read_osim(neck).inertia_entries[0, :2].tolist() == [1e-4, 1e-4]
    start = tmp_path / "start.toml"
    start.write_text('kind = "opensim"\nfile = "neck.osim"\nlocked = ["C7_flexion"]\n\n'
                     '[initial]\nC7_flexion = 0.2\n')
    first = spineid.load_model_file(start)
    again = first.with_values({"initial.C6_flexion": 0.3})
    assert np.asarray(again.model.default_values)[0] == 0.2
    assert np.asarray(again.model.initial_state()[0]).tolist()[1] == 0.3
    start.write_text('kind = "opensim"\nfile = "neck.osim"\n\n[C6]\n'
                     'inertia = [1e-4, 1e-4, 5e-4, 0.0, 0.0, 0.0]\n')
    with pytest.raises(ValueError, match=r"C6\.inertia.*rigid body"):
        spineid.load_model_file(start)
    # a MultivariatePolynomialFunction of a transform axis's one coordinate (a translation
    # 0.002 + 0.1 c + 0.3 c^2 by flexion) is OpenSim's; of an axis of none, refused
    text = neck.read_text()
    spline = re.search(r"<SimmSpline[^>]*>.*?</SimmSpline>", text, re.S)
    (tmp_path / "one.osim").write_text(
        text[:spline.start()] + '<MultivariatePolynomialFunction name="function"><dimension>1'
        "</dimension><order>2</order><coefficients>0.002 0.1 0.3</coefficients>"
        "</MultivariatePolynomialFunction>" + text[spline.end():])
    n_dof = spineid.read_osim(tmp_path / "one.osim").n_dof
    _bodies_as_in_opensim(tmp_path / "one.osim",
                          np.random.default_rng(8).uniform(-0.5, 0.5, (2, n_dof)))
    (tmp_path / "bad.osim").write_text(text.replace(
        '<TransformAxis name="translation2">', '<TransformAxis name="translation2">'
        '<MultivariatePolynomialFunction name="function"><dimension>1</dimension><order>1'
        "</order><coefficients>0 1</coefficients></MultivariatePolynomialFunction>", 1))
    with pytest.raises(ValueError, match="translation2: a MultivariatePolynomialFunction here"):
        spineid.read_osim(tmp_path / "bad.osim")

def _limited_neck(directory: pathlib.Path) -> pathlib.Path:
    # A one-level neck with a CoordinateLimitForce added with OpenSim's own API (degrees,
    # N m/degree, as OpenSim takes them): flexion limited above 5 degrees (0.05 N m/degree,
    # transition 2 degrees), written to `directory`/limited.osim.
    model = osim.Model(str(neck_model(osim, directory, levels=1, locked=False)))
    limit = osim.CoordinateLimitForce("v1_flexion", 5.0, 0.05, -90.0, 0.05, 0.002, 2.0)
    limit.setName("flexion_limit")
    model.addForce(limit)
    model.finalizeConnections()
    path = directory / "limited.osim"
    model.printToXML(str(path))
    return path


def test_a_lab_fits_a_coordinate_limit_from_opensim_motion_and_opensim_runs_the_result(
        tmp_path):
    # The head starts at 14 degrees of flexion, beyond the 5-degree upper limit, whose spring
    # holds the motion above -3.3 degrees (-6.4 without it).
    truth = _limited_neck(tmp_path)
    # parameters in SI, named and grouped after the file's force and OpenSim's properties
    parameters = {p.name: p for p in spineid.load_model_file(truth).parameters}
    stiffness, upper = parameters["flexion_limit.upper_stiffness"], parameters[
        "flexion_limit.upper_limit"]
    assert (stiffness.unit, stiffness.group, upper.unit) == (
        "N m/rad", "coordinate_limits.upper_stiffness", "rad")
    true = {stiffness.name: 0.05 * 180.0 / np.pi, upper.name: np.radians(5.0)}
    # (the lab's start: 40 % too stiff, the limit 1.7 deg off)
    entries, clean, times = _lab_fit(
        tmp_path, truth, f"[flexion_limit]\nupper_stiffness = {1.4 * true[stiffness.name]}\n"
        "upper_limit = 0.117", ["coordinate_limits.upper_stiffness", "flexion_limit.upper_limit"],
        seed=6)
    assert np.degrees(np.min(clean["v1_flexion"])) > -4.0
    assert set(entries) == set(true)
    for name, value in true.items():
        assert abs(entries[name]["value"] - value) < 3 * entries[name]["stderr"], entries[name]
    # fitted.osim: the two numbers changed, in the file's units, and nothing else; OpenSim
    # reads them and its Manager reproduces the data within the noise
    changed = _opensim_runs_the_fitted_file(tmp_path, truth, clean, times)
    assert [a.strip()[:17] for a, _ in changed] == ["<upper_stiffness>", "<upper_limit>5</u"]
    read = osim.Model(str(tmp_path / "fit" / "fitted.osim"))
    read.initSystem()
    theirs = osim.CoordinateLimitForce.safeDownCast(read.getForceSet().get("flexion_limit"))
    assert theirs.getUpperStiffness() == pytest.approx(
        entries[stiffness.name]["value"] * np.pi / 180.0, rel=1e-12)
    assert theirs.getUpperLimit() == pytest.approx(
        np.degrees(entries[upper.name]["value"]), rel=1e-12)
    # fitted.toml holds the limit's table (SI), and reads back to the same values
    again = spineid.load_model_file(tmp_path / "fit" / "fitted.toml")
    for name in true:
        assert {p.name: p for p in again.parameters}[name].value(again.model) == (
            pytest.approx(entries[name]["value"], rel=1e-12))


def test_a_limit_on_a_coordinate_of_no_unit_gives_parameters_of_no_unit():
    # (OpenSim's "coupled" motion type: a coordinate driving no axis through a slope of +-1)
    from spineid.models._tree_parts import CoordinateLimit, limit_parameter_fields
    limit = CoordinateLimit("knee_limit", 1, *(jnp.asarray(v) for v in (2.0, 0.1, 2.0, -0.1,
                                                                        0.05, 0.01)))
    fields = limit_parameter_fields((limit,), ("rad", ""))
    assert [f.name for f in fields][:2] == ["knee_limit.upper_stiffness", "knee_limit.upper_limit"]
    assert {f.unit for f in fields} == {""}
    assert [f.unit for f in limit_parameter_fields((limit,), ("rad", "m"))][:3] == [
        "N/m", "m", "N/m"]


def test_a_coordinate_limits_table_is_checked_as_opensim_checks_the_force(tmp_path):
    _limited_neck(tmp_path)
    for table, message in (("[flexion_limit]\nupper_stiffness = -1.0", r"flexion_limit\."
                            r"upper_stiffness.*a number > 0"),
                           ("[flexion_limit]\ndamping = -0.1", r"flexion_limit\.damping"
                            r".*a number >= 0"),
                           ("[flexion_limit]\nupper = 0.1", r"flexion_limit.*upper_limit"),
                           ("[flexion_limt]\ndamping = 0.1", r"near: flexion_limit")):
        path = tmp_path / "model.toml"
        path.write_text(f'kind = "opensim"\nfile = "limited.osim"\n\n{table}\n')
        with pytest.raises(ValueError, match=message):
            spineid.load_model_file(path)


def test_a_fit_from_markers_opensim_wrote_in_a_labs_frame_fits_the_frame(tmp_path,
                                                                          capsys):
    from scipy.spatial.transform import Rotation
    from spineid.cli import main
    # Marker trajectories (.trc in mm, written by OpenSim's TRCFileAdapter from its Manager's
    # motion, 0.2 mm noise): the .osim's MarkerSet is what is observed, no --markers needed.
    # The lab's z is up (OpenSim's y), its axes are turned 0.3 rad about the vertical, its
    # origin elsewhere: the frame is fitted with the stiffness, from a start 0.07 rad and
    # 10-20 mm off, its angles given in another branch (the turn of (85 deg, 0.05, 0.25)
    # rad): the fitted ones come back in the branch of euler123_angles. (scipy's intrinsic
    # "XYZ" angles are the documented R_x R_y R_z.)
    truth = neck_model(osim, tmp_path, levels=1, locked=False)
    angles, shift = np.array([np.pi / 2, 0.0, 0.3]), np.array([0.5, 0.8, 0.02])
    turn = Rotation.from_euler("XYZ", angles).as_matrix()
    times = np.linspace(0.0, 0.4, 41)
    clean = opensim_motion(osim, truth, times, tmp_path / "motion.sto", seed=6,
                           markers_out=tmp_path / "markers.trc", marker_noise=2e-4,
                           lab=(shift, turn), filtered=0.25)
    coordinates = spineid.read_osim(truth)
    ours = coordinates.observing_markers()
    assert ours.observable_names[:3] == ("v1_anterior_x", "v1_anterior_y", "v1_anterior_z")
    # the markers spineid places at OpenSim's coordinates are OpenSim's (1e-12 m, in ground)
    q = np.column_stack([clean[name] for name in coordinates.observable_names])
    placed = np.asarray(jax.vmap(ours.observe)(jnp.asarray(q)))
    expected = np.column_stack([clean[name] for name in ours.observable_names])
    np.testing.assert_allclose(placed, expected, atol=1e-12)
    start = tmp_path / "start.toml"
    start.write_text(f'kind = "opensim"\nfile = "{truth.name}"\n\n[bushing_1]\n'
                     'rotational_stiffness = [3.0, 2.5, 5.6]\n\n[lab_frame]\n'
                     'translation = [0.49, 0.78, 0.0]\nrotation = ["625 deg", 3.0916, 3.3916]\n')
    out = tmp_path / "fit"
    status = main(["fit", str(start), str(tmp_path / "markers.trc"), "--free", "lab_frame",
                   "--free", "bushing_1.rotational_stiffness[2]", "--out", str(out)])
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    entries = {entry["name"]: entry for entry in report["parameters"]}
    expected = {"bushing_1.rotational_stiffness[2]": 4.0, **{
        f"lab_frame.translation[{i}]": shift[i] for i in range(3)}, **{
        f"lab_frame.rotation[{i}]": angles[i] for i in range(3)}}
    assert set(entries) == set(expected)
    # (the markers' noise filtered as a motion-capture pipeline filters, fitted under the
    # default noise model: each channel's smooth misfit judged against the markers' motion,
    # 1.0-1.6% of it for this draw against the 2% tolerance; noise of 2% of the motion leaves
    # 6 of 24 such records flagged, experiments/markers_filtered.py)
    assert report["goodness_of_fit"]["level"] in ("explains", "describes")
    for name, value in expected.items():
        assert abs(entries[name]["value"] - value) < 3 * entries[name]["stderr"], entries[name]
    assert spineid.load_model_file(out / "fitted.toml").model.lab_rotation.tolist() == [
        pytest.approx(entries[f"lab_frame.rotation[{i}]"]["value"], rel=1e-12)
        for i in range(3)]
    # the noise estimated is the markers' (0.2 mm), per channel, printed in the file's unit
    sigma = json.loads((out / "report.json").read_text())["noise"]["sigma"]
    assert len(sigma) == 9 and all(1.5e-4 < sd < 2.7e-4 for sd in sigma.values()), sigma
    printed = re.search(r"noise sigma \(estimated from residuals\): (.*)", capsys.readouterr().out)
    assert printed and all(part.endswith(" mm") and 0.15 < float(part.split("=")[1][:-3]) < 0.27
                           for part in printed.group(1).split(", ")), printed
    # Under white weights the errors come from the fit's own last Jacobian, whose column of
    # the flipped angle changes sign with it: they are the Cramer-Rao bound recomputed at the
    # values returned (spineid.analyse, at the noise the fit estimated), correlations' signs
    # included.
    free = ["lab_frame", "bushing_1.rotational_stiffness[2]"]
    problem = spineid.FitProblem.from_files(start, [tmp_path / "markers.trc"], free,
                                            noise_model="white")
    white = spineid.fit(problem, spineid.LevenbergMarquardt())  # (local: it ends in the
    # start's branch, (10.99, 3.14, 3.44) rad, and comes back from it)
    assert abs(white.values[problem.names.index("lab_frame.rotation[1]")]) < 0.1
    covariance, _ = spineid.analyse(problem, white.values, noise=white.noise)
    stderr = np.sqrt(np.diag(covariance))  # (the last Jacobian is the last step's: 0.2% off)
    np.testing.assert_allclose(white.stderr, stderr, rtol=1e-2)
    np.testing.assert_allclose(white.correlation, covariance / np.outer(stderr, stderr),
                               atol=1e-2)
    # with no [lab_frame] in the model file, a fit that frees it starts it registered to the
    # markers of the first frame (the record starts at the model's start: the three markers'
    # 0.2 mm of noise over their 4 cm leave it a degree or two and millimetres off)
    start.write_text(f'kind = "opensim"\nfile = "{truth.name}"\n')
    problem = spineid.FitProblem.from_files(start, [tmp_path / "markers.trc"], free)
    guess = dict(zip(problem.names, problem.start))
    for name, value in expected.items():
        if name.startswith("lab_frame"):
            assert abs(guess[name] - value) < (5e-3 if "translation" in name else 5e-2), name
    # (the translation in the marker file's unit, mm)
    assert re.fullmatch(r".*markers\.trc: the lab frame starts registered to the model's "
                        r"markers \(translation \[(49\d|50\d)(\.\d+)?, (79\d|80\d)(\.\d+)?, "
                        r".*\] mm, rotation \[9\d\.\d+, .*\] deg\)",
                        problem.start_notes[0]), problem.start_notes
    kept = spineid.FitProblem.from_files(start, [tmp_path / "markers.trc"], free[1:])
    assert not np.any(np.asarray(kept.model.lab_rotation)) and kept.start_notes == []
    # a model without markers has no frame to place them in
    bare = every_joint_model(osim, tmp_path)
    start.write_text(f'kind = "opensim"\nfile = "{bare.name}"\n\n[lab_frame]\n'
                     'rotation = [1.5, 0.0, 0.0]\n')
    with pytest.raises(ValueError, match=r"lab_frame: expected no table \(the model has no "
                                         r"markers"):
        spineid.load_model_file(start)


@pytest.mark.parametrize("gap, starts", [("none", True), ("later", True), ("first row", False),
                                         ("coordinates file", False)])
def test_a_states_file_with_a_gap_is_read_and_starts_only_from_a_whole_first_row(
        tmp_path, gap, starts):
    # The start from the data needs every free coordinate's value and speed in its first row; a
    # gap elsewhere is the fit's business (a coordinates file's NaN: the search for a start
    # read the file refusing any gap, and failed the whole fit).
    model = spineid.load_model_file(spineid.dataset_path("neck_bushings.osim")).model
    paths = model.coordinate_paths
    time = np.linspace(0.0, 0.2, 21)
    columns = {}
    for i in model.free:
        value, speed = np.full(21, 0.01 * (i + 1)), np.full(21, 0.1)
        if gap == "coordinates file":
            columns[model.coordinate_names[i]] = value
        else:
            columns[f"{paths[i]}/value"], columns[f"{paths[i]}/speed"] = value, speed
    first = next(iter(columns))
    columns[first] = columns[first].copy()
    if gap == "later":
        columns[first][5] = np.nan
    elif gap in ("first row", "coordinates file"):
        columns[first][0 if gap == "first row" else 5] = np.nan
    path = spineid.io.write_storage(tmp_path / "states.sto", time, columns, in_degrees=False)
    started = spineid.io.states_start(path, model)
    assert (started is not None) == starts
    if starts:  # (the model's coordinates are its free ones)
        assert float(started.initial_state()[0][1]) == pytest.approx(0.01 * (model.free[1] + 1))
    if gap in ("none", "coordinates file"):  # (a states file's value columns take no gap)
        problem = spineid.FitProblem.from_files(spineid.dataset_path("neck_bushings.osim"),
                                                [path], free=["bushings.rotational_stiffness"])
        assert problem.started_from_data == ([str(path)] if starts else [])
        assert np.isnan(problem.measurements[0].values).sum() == (gap != "none")


def test_a_marker_file_is_read_once_for_its_markers_and_its_channels(tmp_path, monkeypatch):
    from spineid.io import _measurements

    model = spineid.load_model_file(spineid.dataset_path("neck_bushings.osim")).model
    path = spineid.io.write_trc(tmp_path / "m.trc", np.linspace(0.0, 0.1, 11),
                                {m.name: np.zeros((11, 3)) for m in model.markers})
    reads = []
    original = _measurements.read_markers
    monkeypatch.setattr(_measurements, "read_markers",
                        lambda p: reads.append(str(p)) or original(p))
    channels = [f"{m.name}_{a}" for m in model.markers for a in "xyz"]
    problem = spineid.FitProblem.from_files(spineid.dataset_path("neck_bushings.osim"), [path],
                                            free=["C7_C6_bushing.rotational_stiffness[2]"],
                                            noise=dict.fromkeys(channels, "0.2"))
    assert reads == [str(path)]
    assert list(problem.channels) == channels
    # A bare noise is in the marker file's unit (mm here), as for any column with a unit.
    assert problem.noise[channels[0]] == pytest.approx(2e-4)
    assert problem.noise_read[channels[0]].startswith("0.2 mm")


def test_a_states_file_gives_the_start_of_its_record(tmp_path, capsys, monkeypatch):
    # OpenSim's Manager started away from the file's defaults (values and speeds); its states
    # sampled into a .sto with /value and /speed columns: a fit starts there, not at the
    # defaults.
    truth = neck_model(osim, tmp_path, levels=1, locked=False)
    model = osim.Model(str(truth))
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    start = {"v1_flexion": (0.1, 1.5), "v1_rotation": (-0.05, -0.8)}
    # (the coupled bending set to follow, so that OpenSim's projection changes nothing)
    for name, (value, speed) in start.items() | {"v1_bending": (0.3 * 0.1, 0.3 * 1.5)}.items():
        coordinates.get(name).setValue(state, value, False)
        coordinates.get(name).setSpeedValue(state, speed)
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(1e-10)
    manager.initialize(state)
    times, rows = np.linspace(0.0, 0.4, 41), []
    rng = np.random.default_rng(3)
    for t in times:
        if t > 0:
            state = manager.integrate(float(t))
        rows.append([f(state) + 1e-4 * rng.standard_normal() for name in start for f in (
            coordinates.get(name).getValue, coordinates.get(name).getSpeedValue)])
    labels = [f"{coordinates.get(name).getAbsolutePathString()}/{kind}" for name in start
              for kind in ("value", "speed")]
    table = osim.TimeSeriesTable()
    table.setColumnLabels(osim.StdVectorString(labels))
    for t, row in zip(times, rows):
        table.appendRow(float(t), osim.RowVector([float(v) for v in row]))
    table.addTableMetaDataString("inDegrees", "no")
    osim.STOFileAdapter.write(table, str(tmp_path / "states.sto"))
    ours = spineid.io.states_start(tmp_path / "states.sto", spineid.read_osim(truth))
    q0, qdot0 = ours.initial_state()
    np.testing.assert_allclose(np.asarray(q0), [0.1, -0.05], atol=5e-4)
    np.testing.assert_allclose(np.asarray(qdot0), [1.5, -0.8], atol=5e-4)
    # the same states in degrees say so in their header; a record starting later gives none
    states = np.array(rows)
    spineid.io.write_storage(tmp_path / "degrees.sto", times, {
        label: np.degrees(states[:, k]) for k, label in enumerate(labels)}, in_degrees=True)
    in_degrees = spineid.io.states_start(tmp_path / "degrees.sto", spineid.read_osim(truth))
    np.testing.assert_allclose(np.asarray(in_degrees.initial_state()[1]), np.asarray(qdot0),
                               rtol=1e-12)
    spineid.io.write_storage(tmp_path / "later.sto", times[1:], {
        label: states[1:, k] for k, label in enumerate(labels)})
    assert spineid.io.states_start(tmp_path / "later.sto", spineid.read_osim(truth)) is None
    # a fit's problem starts there: simulated from it, the model follows OpenSim's motion
    # (from the file's defaults it would not: flexion 0.25 rad at rest); the file parsed once,
    # for its channels and its start
    parses = []
    parse = columns_module.read_storage
    monkeypatch.setattr(columns_module, "read_storage",
                        lambda path, **options: parses.append(str(path)) or parse(path, **options))
    problem = spineid.FitProblem.from_files(truth, [tmp_path / "states.sto"],
                                            ["bushing_1.rotational_stiffness[2]"])
    monkeypatch.setattr(columns_module, "read_storage", parse)
    assert problem.started_from_data == [str(tmp_path / "states.sto")]
    assert parses == [str(tmp_path / "states.sto")]
    motion = spineid.simulate(problem.models[0], jnp.asarray(times))
    np.testing.assert_allclose(np.asarray(motion.q), states[:, ::2], atol=1e-3)
    # and the command line says so before it fits (the fit itself stopped at once: the line is
    # what is tested here)
    from spineid.cli import _commands, main

    def stop(*args, **kwargs):
        raise ValueError("stopped before fitting")

    monkeypatch.setattr(_commands, "fit", stop)
    assert main(["fit", str(truth), str(tmp_path / "states.sto"), "--free",
                 "bushing_1.rotational_stiffness[2]", "--out", str(tmp_path / "fit")]) == 2
    printed = capsys.readouterr()
    assert "stopped before fitting" in printed.err
    assert (f"{tmp_path / 'states.sto'}: the simulation starts from its first row (coordinates "
            "and speeds)") in printed.out
    # a coordinates file (no speeds) leaves the start to the model
    opensim_motion(osim, truth, times, tmp_path / "coordinates.sto")
    assert spineid.io.states_start(tmp_path / "coordinates.sto", spineid.read_osim(truth)) \
        is None


def test_bad_names_and_data_are_refused_in_one_sentence_with_nothing_written(tmp_path, capsys):
    from spineid.cli import main
    neck = spineid.dataset_path("neck_bushings.osim")
    data, partial = tmp_path / "motion.sto", tmp_path / "partial.sto"
    names = spineid.read_osim(neck).observable_names
    spineid.io.write_storage(data, np.linspace(0.0, 0.1, 11), {n: np.zeros(11) for n in names})
    spineid.io.write_storage(partial, np.linspace(0.0, 0.1, 11),
                             {"C7_flexion": np.zeros(11), "C6_flexion": np.zeros(11)})
    out = tmp_path / "fit"
    assert main(["fit", str(neck), str(data), "--free", "C7_C6_bushing.rotational_stifness",
                 "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "near: C7_C6_bushing.rotational_stiffness" in error
    assert main(["fit", str(neck), str(partial), "--free", "bushings.rotational_stiffness",
                 "--out", str(out)]) == 2
    assert "missing column(s) 'C7_rotation' for C7_rotation" in capsys.readouterr().err
    start = tmp_path / "start.toml"
    start.write_text(f'kind = "opensim"\nfile = "{neck}"\n[C7_C6_bushin]\n'
                     "rotational_stiffness = [1.0, 1.0, 1.0]\n")
    assert main(["simulate", str(start), "--out", str(tmp_path / "m.sto")]) == 2
    assert "near: C7_C6_bushing" in capsys.readouterr().err
    start.write_text(f'kind = "opensim"\nfile = "{neck}"\nlocked = ["C7_bending"]\n')
    assert main(["simulate", str(start), "--out", str(tmp_path / "m.sto")]) == 2
    assert "follow others through CoordinateCouplerConstraints" in capsys.readouterr().err
    # marker files: written by spineid's own writer (OpenSim reads it: below), with one of
    # the model's markers missing (observed without it, said in a warning), with none of
    # them, and beside a coordinates file
    ours = spineid.read_osim(neck)
    names = [marker.name for marker in ours.markers]
    partial, foreign = tmp_path / "walk.trc", tmp_path / "other.trc"
    spineid.io.write_trc(partial, np.linspace(0.0, 0.1, 11),
                         {name: np.ones((11, 3)) for name in names if name != "C6_left"})
    spineid.io.write_trc(foreign, np.linspace(0.0, 0.1, 11), {"RASI": np.ones((11, 3))})
    with pytest.warns(UserWarning, match=r"markers \['C6_left'\] of the model are not in"):
        seen = spineid.io.own_markers_seen(ours, [partial])
    assert seen == [name for name in names if name != "C6_left"]
    assert ours.observing_markers(seen).observable_names[-1] == "C5_left_z"
    assert main(["fit", str(neck), str(foreign), "--free", "bushings.rotational_stiffness",
                 "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "none of the model's markers" in error and "RASI" in error
    assert len(error.strip().splitlines()) == 1
    assert main(["fit", str(neck), str(partial), str(data), "--free",
                 "bushings.rotational_stiffness", "--out", str(out)]) == 2
    assert "marker files (.trc, .c3d) and other data files" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "m.sto").exists()


def test_opensim_reads_the_states_spineid_writes(tmp_path):
    from spineid.cli import main
    out = tmp_path / "motion.sto"
    neck = spineid.dataset_path("neck_bushings.osim")
    start = tmp_path / "short.toml"
    start.write_text(f'kind = "opensim"\nfile = "{neck}"\n[simulation]\nt_end = 0.05\n'
                     "n_samples = 6\n")
    assert main(["simulate", str(start), "--out", str(out)]) == 0
    model = osim.Model(str(neck))
    model.initSystem()
    table = osim.TimeSeriesTable(str(out))
    # (OpenSim's bookkeeping states of the bushings' dissipated energy are not spineid's)
    for name in ("T1_C7_bushing", "C7_C6_bushing", "C6_C5_bushing"):
        table.appendColumn(f"/forceset/{name}/dissipated_energy", osim.Vector(6, 0.0))
    states = osim.StatesTrajectory.createFromStatesTable(model, table)
    assert states.getSize() == 6
    last = states.get(5)
    model.realizePosition(last)
    ours = spineid.read_osim(neck)
    q = ours.initial_state()[0]
    assert model.getCoordinateSet().get("C5_flexion").getValue(states.get(0)) == \
        pytest.approx(float(ours.coordinates(q)[6]))
    # the markers of the same motion as a .trc (mm) OpenSim's TRCFileAdapter reads; they are
    # where OpenSim places its markers in the states spineid wrote
    markers = tmp_path / "markers.trc"
    assert main(["simulate", str(start), "--out", str(markers)]) == 0
    read = osim.TimeSeriesTableVec3(str(markers))  # (through its TRCFileAdapter)
    assert read.getTableMetaDataAsString("Units") == "mm" and read.getNumRows() == 6
    labels = list(read.getColumnLabels())
    assert labels == [marker.name for marker in ours.markers]
    row = read.getRowAtIndex(5)
    # (a StatesTrajectory leaves a locked coordinate's value NaN: the last state set by hand)
    state = model.initSystem()
    written = spineid.io.read_storage(out)
    for name in ours.coordinate_names:  # (coupled ones too; not the locked one)
        coordinate = model.getCoordinateSet().get(name)
        if not coordinate.getLocked(state):
            column = next(c for c in written.columns if c.endswith(f"/{name}/value"))
            coordinate.setValue(state, written.columns[column][5], False)
    model.realizePosition(state)
    for k, name in enumerate(labels):
        where = model.getMarkerSet().get(name).getLocationInGround(state)
        np.testing.assert_allclose([row[k].get(j) for j in range(3)],
                                   [1e3 * where.get(j) for j in range(3)], atol=1e-9)
    assert spineid.read_trc(markers).markers[labels[0]].shape == (6, 3)
    # a model without markers writes none, and says so before simulating
    assert main(["simulate", str(spineid.dataset_path("spatial_pair.toml")), "--out",
                 str(tmp_path / "pair.trc")]) == 2
    assert not (tmp_path / "pair.trc").exists()


def test_chained_offset_frames_at_a_right_angle_place_bodies_as_opensim(tmp_path, small_neck):
    # An offset frame on an offset frame turned by 90 degrees about y (the 1-2-3 angles'
    # singular middle angle): composed as matrices, not through angles.
    text = small_neck.read_text()
    start = text.index('<CustomJoint name="joint_2">')
    frames = text.index("<frames>", start) + len("<frames>")
    tilted = ('<PhysicalOffsetFrame name="tilted"><socket_parent>/bodyset/v1</socket_parent>'
              '<translation>0.01 0 0</translation>'
              '<orientation>0 1.5707963267948966 0</orientation></PhysicalOffsetFrame>')
    text = text[:frames] + tilted + text[frames:]
    first = text.index("<socket_parent>/bodyset/v1</socket_parent>", frames + len(tilted))
    text = (text[:first] + "<socket_parent>../tilted</socket_parent>"
            + text[first + len("<socket_parent>/bodyset/v1</socket_parent>"):])
    edited = tmp_path / "tilted.osim"
    edited.write_text(text)
    _bodies_as_in_opensim(edited, [np.array([0.3, -0.2, 0.45, 0.1])])


def test_couplers_in_any_order_and_coupled_units(tmp_path, small_neck):
    text = small_neck.read_text()
    second = ('<CoordinateCouplerConstraint name="second"><coupled_coordinates_function>'
              '<LinearFunction><coefficients>0.5 0</coefficients></LinearFunction>'
              '</coupled_coordinates_function><independent_coordinate_names>v1_bending'
              '</independent_coordinate_names><dependent_coordinate_name>v2_bending'
              '</dependent_coordinate_name></CoordinateCouplerConstraint>')
    text = text.replace('<CoordinateCouplerConstraint name="bending_follows_flexion">',
                        second + '<CoordinateCouplerConstraint name="bending_follows_flexion">')
    edited = tmp_path / "chain.osim"
    edited.write_text(text)
    ours = spineid.read_osim(edited)
    assert [c.name for c in ours.couplers] == ["bending_follows_flexion", "second"]
    values = ours.coordinates(jnp.asarray([0.2, 0.0, 0.0]))
    assert float(values[4]) == pytest.approx(0.5 * 0.3 * 0.2)
    twice = tmp_path / "twice.osim"
    twice.write_text(text.replace("<dependent_coordinate_name>v2_bending",
                                  "<dependent_coordinate_name>v1_bending"))
    with pytest.raises(ValueError, match="'v1_bending' is the dependent coordinate of two"):
        spineid.read_osim(twice)
    # a coordinate that drives its axis through a spline only is OpenSim's "coupled" kind:
    # no unit to convert (OpenSim writes it as it is, whatever inDegrees says)
    spline = re.sub(r'(<TransformAxis name="rotation1">.*?)<LinearFunction name="function">'
                    r'.*?</LinearFunction>',
                    r'\1<SimmSpline name="function"><x>-1 0 1</x><y>-2 0 2</y></SimmSpline>',
                    small_neck.read_text(), count=1, flags=re.S)
    splined = tmp_path / "splined.osim"
    splined.write_text(spline)
    assert spineid.read_osim(splined).coordinate_units[0] == ""


def test_written_values_keep_every_other_byte_line_ends_and_comments(tmp_path):
    text = spineid.dataset_path("neck_bushings.osim").read_text()
    block = re.search(r'<BushingForce name="C7_C6_bushing">.*?</BushingForce>', text, re.S)
    retired = re.sub(r"<!--.*?-->", "", block.group(0), flags=re.S)  # (comments don't nest)
    text = text.replace(block.group(0), f"<!-- {retired} -->\n{block.group(0)}")
    source = tmp_path / "lab.osim"
    source.write_bytes(text.replace("\n", "\r\n").encode())
    model = spineid.read_osim(source)
    parameter = [p for p in declared_parameters(model)
                 if p.name == "C7_C6_bushing.rotational_stiffness[2]"]
    fitted = spineid.apply_values(model, parameter, jnp.asarray([3.25]))
    written = spineid.export_model(fitted, "opensim", tmp_path / "fitted.osim").read_bytes()
    before = source.read_bytes()
    assert written.count(b"\r\n") == before.count(b"\r\n")
    changed = [(a, b) for a, b in zip(before.split(b"\r\n"), written.split(b"\r\n")) if a != b]
    assert len(changed) == 1
    assert changed[0][1].strip() == b"<rotational_stiffness>3.5 2.5 3.25</rotational_stiffness>"
    assert len(written.split(b"\r\n")) == len(before.split(b"\r\n"))
    assert spineid.read_osim(tmp_path / "fitted.osim").elements[1].rotational_stiffness[2] == 3.25


def test_an_opensim_3_file_is_read_as_opensim_upgrades_it_and_written_back_in_its_format(
        tmp_path, monkeypatch):
    path = opensim3_pair(osim, tmp_path)
    ours = spineid.read_osim(path)
    assert ours.coordinate_names == ("flexion", "bending")
    assert ours.body_names == ("C4", "C3")
    # (OpenSim's upgrade keeps six digits of an inertia: what OpenSim simulates, too)
    np.testing.assert_array_equal(ours.inertia_entries[1], [4e-4, 6.12346e-4, 5e-4, 2e-5, 0, 0])
    rng = np.random.default_rng(7)
    _bodies_as_in_opensim(path, [rng.uniform(-0.7, 0.7, 2) for _ in range(4)])
    _opensim_accelerations_agree(path, ours, seed=8)  # (the bushing, limit and gravity)
    # fitted values written into the file as OpenSim 3 holds them, nothing else changed
    values = {"C4_C3_bushing.rotational_stiffness[0]": 2.75, "C3.mass": 0.27,
              "C3.inertia[0]": 4.5e-4, "C3.inertia[3]": -1e-5,
              "flexion_limit.upper_stiffness": np.degrees(0.625)}
    named = {p.name: p for p in declared_parameters(ours)}
    fitted = spineid.apply_values(ours, [named[name] for name in values],
                                  jnp.asarray(list(values.values())))
    written = spineid.export_model(fitted, "opensim", tmp_path / "fitted.osim")
    before, after = path.read_text().splitlines(), written.read_text().splitlines()
    assert len(after) == len(before)
    changed = [b.strip() for a, b in zip(before, after) if a != b]
    assert len(changed) == 5  # (not the inertia's 12 digits, which the upgrade read as 6)
    assert "<rotational_stiffness> 2.75 3 4</rotational_stiffness>" in changed
    assert "<mass>0.27</mass>" in changed
    assert "<inertia_xx>0.00045</inertia_xx>" in changed
    assert "<inertia_xy>-1e-05</inertia_xy>" in changed
    assert "<upper_stiffness>0.625</upper_stiffness><upper_limit>20</upper_limit>" in changed
    assert '<OpenSimDocument Version="30000">' in after[1] and "<inertia>" not in after
    model = osim.Model(str(written))  # (OpenSim upgrades the written file as it did ours)
    model.initSystem()
    bushing = osim.BushingForce.safeDownCast(model.getForceSet().get("C4_C3_bushing"))
    assert [bushing.get_rotational_stiffness().get(i) for i in range(3)] == [2.75, 3.0, 4.0]
    body = model.getBodySet().get("C3")
    assert body.getMass() == 0.27
    assert [body.getInertia().getMoments().get(i) for i in range(3)] == [4.5e-4, 6.12346e-4,
                                                                          5e-4]
    assert body.getInertia().getProducts().get(0) == -1e-5
    limit = osim.CoordinateLimitForce.safeDownCast(model.getForceSet().get("flexion_limit"))
    assert limit.getUpperStiffness() == 0.625
    again = spineid.read_osim(written)
    for name, value in values.items():
        assert float(named[name].get(again)) == pytest.approx(value, rel=1e-15)
    # without OpenSim's reader to upgrade it, the file is refused in one sentence
    monkeypatch.setitem(sys.modules, "opensim", None)
    with pytest.raises(ValueError, match=r"is an OpenSim 3\.x model \(format 30000\); spineid "
                                         r"reads format 40000 and later: open and save it"):
        spineid.read_osim(path)


def test_coordinate_limit_forces_equal_opensims(every_joint):
    ours = spineid.read_osim(every_joint)
    model = osim.Model(str(every_joint))
    state = model.initSystem()
    assert [limit.name for limit in ours.limits] == ["limit_a", "limit_pin"]
    rng = np.random.default_rng(11)
    for value in np.radians([-14.0, -7.0, -5.5, 0.0, 11.0, 12.5, 20.0]):
        rate = float(rng.uniform(-2.0, 2.0))
        coordinate = model.getCoordinateSet().get("c_a")
        coordinate.setValue(state, float(value), False)
        coordinate.setSpeedValue(state, rate)
        model.realizeVelocity(state)
        limit = osim.CoordinateLimitForce.safeDownCast(model.getForceSet().get("limit_a"))
        assert float(ours.limits[0].force(value, rate)) == pytest.approx(
            limit.calcLimitForce(state), abs=1e-12)
        # the springs' energy, OpenSim's own closed form; its slope is the springs' force
        assert float(ours.limits[0].energy(value)) == pytest.approx(
            limit.computePotentialEnergy(state), abs=1e-12)
        spring = float(ours.limits[0].force(value, rate) - ours.limits[0].damping_force(
            value, rate))
        assert -float(jax.grad(ours.limits[0].energy)(value)) == pytest.approx(spring,
                                                                               abs=1e-12)


def test_limit_defaults_units_by_the_last_unit_slope_and_no_limit_on_a_ball(tmp_path,
                                                                           every_joint):
    text = every_joint.read_text()
    # OpenSim's defaults stand for properties the file leaves out
    limit = re.search(r'<CoordinateLimitForce name="limit_pin">.*?</CoordinateLimitForce>',
                      text, re.S).group(0)
    sparse = re.sub(r"<damping>.*?</damping>|<transition>.*?</transition>", "", limit)
    edited = tmp_path / "sparse.osim"
    edited.write_text(text.replace(limit, sparse))
    ours = spineid.read_osim(edited)
    model = osim.Model(str(edited))
    state = model.initSystem()
    coordinate = model.getCoordinateSet().get("j3_coord_0")
    for value, rate in ((np.radians(3.05), 0.7), (np.radians(9.0), -1.1)):
        coordinate.setValue(state, float(value), False)
        coordinate.setSpeedValue(state, rate)
        model.realizeVelocity(state)
        theirs = osim.CoordinateLimitForce.safeDownCast(
            model.getForceSet().get("limit_pin")).calcLimitForce(state)
        assert float(ours.limits[1].force(value, rate)) == pytest.approx(theirs, abs=1e-12)
    # a coordinate through a spline first and slope 1 after is rotational, as in OpenSim
    spline = ('<SimmSpline name="function"><x>-1 0 1</x><y>-0.5 0 0.5</y></SimmSpline>')
    first = re.sub(r'(<TransformAxis name="rotation1">.*?)<LinearFunction name="function">'
                   r'.*?</LinearFunction>', r"\1" + spline, text, count=1, flags=re.S)
    linear = '<LinearFunction name="function"><coefficients>1 0</coefficients></LinearFunction>'
    third = re.sub(r'(<TransformAxis name="rotation3">.*?<coordinates>)c_b(</coordinates>.*?)'
                   r'<SimmSpline name="function">.*?</SimmSpline>',
                   lambda m: m.group(1) + "c_a" + m.group(2) + linear, first, count=1,
                   flags=re.S)
    knee = tmp_path / "knee.osim"
    knee.write_text(third)
    units = dict(zip(spineid.read_osim(knee).coordinate_names,
                     spineid.read_osim(knee).coordinate_units))
    knee_model = osim.Model(str(knee))  # (kept: a chain on a temporary model crashes)
    knee_model.initSystem()
    motion = knee_model.getCoordinateSet().get("c_a").getMotionType()
    assert motion == osim.Coordinate.Rotational and units["c_a"] == "rad"
    # a limit on a ball joint's rotation (its speed an angular velocity) is refused
    ball = tmp_path / "ball.osim"
    ball.write_text(text.replace("<coordinate>j3_coord_0</coordinate>",
                                 "<coordinate>j2_coord_1</coordinate>"))
    with pytest.raises(ValueError, match="a rotation of a ball or free joint"):
        spineid.read_osim(ball)
