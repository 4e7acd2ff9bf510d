"""Rotation kinematics of the supplement (sections 2-4), checked against their definitions:
round trips, orthogonality, eT eW = I, the printed S.15-S.18 against the Euler bases, and
angular velocities against finite differences."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from spineid import (
    angular_velocity, dual_euler_basis, E_T, e_T, E_W, e_W, euler123_angles, euler123_rotation,
    euler_basis, relative_motion,
)
from spineid.kinematics._rotations import axis_rotation, skew

angle = st.floats(-3.1, 3.1)
tilt = st.floats(-1.45, 1.45)  # nu_2 away from +-90 degrees
angles = st.tuples(angle, tilt, angle).map(np.array)
rates = st.tuples(*[st.floats(-5.0, 5.0)] * 3).map(np.array)
SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(angles)
def test_rotation_is_orthogonal_and_angles_round_trip(nu):
    q = np.asarray(euler123_rotation(nu))
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-13)
    assert np.linalg.det(q) == pytest.approx(1.0, abs=1e-13)
    np.testing.assert_allclose(np.asarray(euler123_angles(q)), nu, atol=1e-9)


@SETTINGS
@given(angles)
def test_composition_of_axis_rotations_as_in_S6(nu):
    # Q = L(nu_3, g_3) L(nu_2, g_2) L(nu_1, g_1), each about the Euler basis vector it names.
    g = np.asarray(euler_basis(nu))
    composed = (axis_rotation(g[2], nu[2]) @ axis_rotation(g[1], nu[1])
                @ axis_rotation(g[0], nu[0]))
    np.testing.assert_allclose(np.asarray(composed), np.asarray(euler123_rotation(nu)),
                               atol=1e-12)


@SETTINGS
@given(angles)
def test_printed_T_and_W_matrices_match_their_definitions(nu):
    q = np.asarray(euler123_rotation(nu))
    g, dual = np.asarray(euler_basis(nu)), np.asarray(dual_euler_basis(nu))
    np.testing.assert_allclose(g @ dual.T, np.eye(3), atol=1e-10)  # S.7
    e = q.T  # rows: e_j in fixed components
    np.testing.assert_allclose(np.asarray(e_T(nu)), dual @ e.T, atol=1e-9)   # S.10
    np.testing.assert_allclose(np.asarray(E_T(nu)), dual, atol=1e-9)         # S.10
    np.testing.assert_allclose(np.asarray(e_W(nu)), e @ g.T, atol=1e-12)     # S.12
    np.testing.assert_allclose(np.asarray(E_W(nu)), g.T, atol=1e-12)         # S.12
    np.testing.assert_allclose(np.asarray(e_T(nu) @ e_W(nu)), np.eye(3), atol=1e-9)  # S.13
    np.testing.assert_allclose(np.asarray(E_T(nu) @ E_W(nu)), np.eye(3), atol=1e-9)
    np.testing.assert_allclose(np.asarray(E_T(nu)), np.asarray(e_T(nu)) @ q.T, atol=1e-9)
    np.testing.assert_allclose(np.asarray(E_W(nu)), q @ np.asarray(e_W(nu)), atol=1e-12)


@SETTINGS
@given(angles, rates)
def test_angular_velocity_against_finite_differences(nu, nu_dot):
    h = 1e-6
    q = euler123_rotation(nu)
    rate = (euler123_rotation(nu + h * nu_dot) - euler123_rotation(nu - h * nu_dot)) / (2 * h)
    omega = np.asarray(angular_velocity(q, rate))  # fixed components
    np.testing.assert_allclose(omega, np.asarray(E_W(nu) @ nu_dot), atol=1e-7)       # S.11
    np.testing.assert_allclose(np.asarray(q).T @ omega, np.asarray(e_W(nu) @ nu_dot),
                               atol=1e-7)
    np.testing.assert_allclose(np.asarray(E_T(nu) @ omega), nu_dot, atol=1e-6)
    # The rate is skew: Q' Q^T = [omega]x.
    np.testing.assert_allclose(np.asarray(rate @ q.T), np.asarray(skew(omega)), atol=1e-7)


@jax.jit
def _relative_beta(nu1, nu2):
    return relative_motion(jnp.zeros(3), euler123_rotation(nu1), jnp.zeros(3),
                           euler123_rotation(nu2)).beta


@SETTINGS
@given(angles, angles, rates, rates)
def test_relative_motion_and_its_rate(nu1, nu2, rate1, rate2):
    x1, x2 = np.array([0.01, 0.0, 0.02]), np.array([0.0, 0.03, 0.05])
    q1, q2 = euler123_rotation(nu1), euler123_rotation(nu2)
    motion = relative_motion(x1, q1, x2, q2)
    np.testing.assert_allclose(np.asarray(motion.y), x2 - x1)
    # R maps the body-1 basis onto the body-2 basis.
    np.testing.assert_allclose(np.asarray(motion.rotation @ q1), np.asarray(q2), atol=1e-12)
    if abs(np.cos(motion.beta[1])) < 1e-3:
        return
    # The rate of R: sum beta_i' g~_i = omega^2 - R omega^1 (S.22 when body 1 does not turn).
    h = 1e-6
    change = np.asarray(_relative_beta(nu1 + h * rate1, nu2 + h * rate2)
                        - _relative_beta(nu1 - h * rate1, nu2 - h * rate2))
    beta_dot = (change + np.pi) % (2 * np.pi) - np.pi  # across the atan2 branch cut
    beta_dot = beta_dot / (2 * h)
    omega1 = np.asarray(E_W(nu1) @ rate1)
    omega2 = np.asarray(E_W(nu2) @ rate2)
    relative = np.asarray(euler_basis(motion.beta)).T @ beta_dot
    np.testing.assert_allclose(relative, omega2 - np.asarray(motion.rotation) @ omega1,
                               atol=2e-6 * (1 + np.abs(beta_dot).max()))


def test_gimbal_lock_raises_a_clear_error():
    locked = euler123_rotation(np.array([0.3, np.pi / 2, -0.2]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="singularity of the 1-2-3 Euler"):
        euler123_angles(locked)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError),
                       match="singularity"):
        jax.jit(e_T)(jnp.array([0.0, -np.pi / 2, 0.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="singularity"):
        dual_euler_basis(np.array([0.0, np.pi / 2, 0.0]))
    # Just outside the tolerance the angles are still exact.
    nu = np.array([0.3, np.pi / 2 - 1e-4, -0.2])
    np.testing.assert_allclose(np.asarray(euler123_angles(euler123_rotation(nu))), nu,
                               atol=1e-8)


def test_functions_vmap_and_jit():
    nus = np.random.default_rng(0).uniform(-1, 1, size=(5, 3))
    qs = jax.jit(jax.vmap(euler123_rotation))(nus)
    np.testing.assert_allclose(np.asarray(jax.vmap(euler123_angles)(qs)), nus, atol=1e-12)
    assert jax.vmap(E_T)(nus).shape == (5, 3, 3)


@pytest.mark.parametrize("angles", [[0.1, 0.2], [0.1, 0.2, 0.3, 0.4], [[0.1, 0.2, 0.3]]])
def test_angles_that_are_not_three_are_refused(angles):
    # (JAX clamps an index beyond the end: two angles gave a rotation, four ignored one)
    with pytest.raises(ValueError, match=r"expected the three 1-2-3 Euler angles \(3,\)"):
        euler123_rotation(angles)


anywhere = st.tuples(*[st.floats(-12.0, 12.0)] * 3).map(np.array)


@SETTINGS
@given(anywhere, st.floats(-3.0, 3.0))
def test_a_fitted_lab_frame_comes_back_in_the_branch_of_its_rotation(nu, other):
    # A fit's lab-frame angles, found anywhere, are mapped to the same rotation's angles as
    # euler123_angles reads them off the matrix (nu_2 in [-pi/2, pi/2], the others in
    # (-pi, pi]); a free parameter that is no angle is left alone.
    from types import SimpleNamespace
    from spineid import FitProblem
    from spineid.elements._parameters import Parameter
    q = np.asarray(euler123_rotation(nu))
    assume(abs(q[0, 2]) < 0.999)  # (away from the singularity, where nu_1, nu_3 are not one)
    rows = [Parameter(f"lab_frame.rotation[{i}]", "lab_frame", "rad", None, "lab_rotation",
                      row=i, lower=-np.inf) for i in (2, 0, 1)]  # (any order)
    problem = SimpleNamespace(parameters=[*rows, Parameter("k", "k", "N m/rad", 0, "k")],
                              models=[SimpleNamespace(lab_rotation=np.zeros(3))])
    values = np.array([nu[2], nu[0], nu[1], other])
    signs, shifts = FitProblem.one_branch(problem, values)
    turned = signs * values + shifts
    difference = turned[[1, 2, 0]] - np.asarray(euler123_angles(q))  # (pi and -pi alike)
    np.testing.assert_allclose(np.angle(np.exp(1j * difference)), 0.0, atol=1e-9)
    assert np.all((-np.pi < turned[:3]) & (turned[:3] <= np.pi)) and abs(turned[2]) <= np.pi / 2
    assert turned[3] == other and signs[3] == 1
    # angles in that branch already are left exactly as they are
    signs, shifts = FitProblem.one_branch(problem, turned)
    assert np.all(signs == 1) and np.all(shifts == 0)
    # with only some angles free, each is turned by whole turns alone
    problem.parameters = rows[:2]
    signs, shifts = FitProblem.one_branch(problem, values[:2])
    assert np.all(signs == 1)
    np.testing.assert_allclose(np.cos(values[:2] + shifts), np.cos(values[:2]), atol=1e-12)
    assert np.all((-np.pi < values[:2] + shifts) & (values[:2] + shifts <= np.pi))
