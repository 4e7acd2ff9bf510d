"""K^c (S.31, S.33) and K^D (S.39) against their definitions (S.30, S.37) by automatic
differentiation of the joint loads, and when they coincide with the Hessian."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spineid import (
    block_scale, cartesian_stiffness, compare_stiffnesses, dual_basis_stiffness, euler_basis,
    experimental_stiffness, potential_hessian,
)
from spineid.elements._stiffness_matrices import joint_loads, perturbed
from helpers import K_F_E as EQ_24  # Christophy et al. 2013 eq 24

K_F_E = jnp.array(EQ_24)


def quadratic(rest):
    return lambda y: 0.5 * (y - rest) @ K_F_E @ (y - rest)


def nonlinear(y):
    # A stiffening potential with rotation-translation coupling (not quadratic).
    return 0.5 * y @ K_F_E @ y + 2e3 * jnp.sum(y[3:] ** 4) + 50.0 * y[3] ** 2 * y[5]


CASES = [
    (quadratic(jnp.zeros(6)), np.array([1e-3, -2e-3, 5e-4, 0.1, -0.2, 0.15])),
    (quadratic(jnp.array([0.0, 0.0, 0.0, 0.05, 0.0, -0.1])),
     np.array([0.0, 0.0, 0.0, 0.3, 0.25, -0.4])),
    (nonlinear, np.array([2e-3, 1e-3, -1e-3, -0.3, 0.4, 0.2])),
]


@pytest.mark.parametrize("potential, y", CASES)
def test_cartesian_stiffness_is_the_derivative_of_the_cartesian_loads(potential, y):
    # S.30: Delta(F, M) on body 2 = -K^c Delta(Y, rotation vector), fixed-basis components.
    loads = lambda d: joint_loads(potential, perturbed(jnp.asarray(y), d))  # noqa: E731
    by_definition = -jax.jacfwd(loads)(jnp.zeros(6))
    formula = cartesian_stiffness(potential, y)
    np.testing.assert_allclose(np.asarray(formula), np.asarray(by_definition), rtol=1e-7,
                               atol=1e-7 * float(jnp.abs(by_definition).max()))


@pytest.mark.parametrize("potential, y", CASES)
def test_dual_basis_stiffness_is_the_derivative_of_euler_basis_moments(potential, y):
    # S.37-S.38: increments of F and of M . g~_j (g~_j held at the current pose) against
    # increments of Y and of the Euler angles.
    y = jnp.asarray(y)
    basis = euler_basis(y[3:])

    def loads(z):
        load = joint_loads(potential, z)
        return jnp.concatenate([load[:3], basis @ load[3:]])

    by_definition = -jax.jacfwd(loads)(y)
    np.testing.assert_allclose(np.asarray(dual_basis_stiffness(potential, y)),
                               np.asarray(by_definition), rtol=1e-7,
                               atol=1e-7 * float(jnp.abs(by_definition).max()))


def test_all_coincide_with_the_hessian_only_at_the_unloaded_neutral_posture():
    potential = quadratic(jnp.zeros(6))
    neutral = jnp.zeros(6)
    hessian = potential_hessian(potential, neutral)
    np.testing.assert_allclose(np.asarray(hessian), np.asarray(K_F_E), rtol=1e-12)
    for matrix in (cartesian_stiffness(potential, neutral),
                   dual_basis_stiffness(potential, neutral)):
        np.testing.assert_allclose(np.asarray(matrix), np.asarray(hessian), atol=1e-9)
    # Rotated and pre-stressed: K^c is no longer symmetric and differs from H (S.31).
    y = jnp.array([0.0, 0.0, 0.0, 0.2, -0.3, 0.25])
    kc = np.asarray(cartesian_stiffness(potential, y))
    hessian = np.asarray(potential_hessian(potential, y))
    rotational = slice(3, 6)
    assert np.abs(kc - kc.T).max() > 1e-2 * np.abs(kc[rotational, rotational]).max()
    assert np.abs(kc - hessian)[rotational, rotational].max() > 0.05 * 850


def test_printed_S39_misses_a_factor_at_large_rotations():
    potential = quadratic(jnp.array([0.0, 0.0, 0.0, 0.05, 0.0, -0.1]))  # pre-stressed
    rotated = jnp.array([0.0, 0.0, 0.0, 0.3, 0.25, -0.4])
    ours = dual_basis_stiffness(potential, rotated)
    printed = dual_basis_stiffness(potential, rotated, as_printed=True)
    assert float(jnp.abs(ours - printed).max()) > 10.0  # N m/rad, against entries of ~850
    small = jnp.array([0.0, 0.0, 0.0, 1e-4, -1e-4, 1e-4])
    np.testing.assert_allclose(np.asarray(dual_basis_stiffness(potential, small)),
                               np.asarray(dual_basis_stiffness(potential, small,
                                                               as_printed=True)), atol=0.05)


def test_experimental_stiffness_of_S34_tends_to_K_D_and_the_cartesian_variant_to_K_c():
    lab = np.array([1e-4] * 3 + [np.radians(1.0)] * 3)  # 0.1 mm and 1 degree steps
    tiny = np.array([1e-8] * 3 + [1e-7] * 3)
    unloaded = quadratic(jnp.zeros(6))
    table = compare_stiffnesses(unloaded, jnp.zeros(6), lab)
    assert table["K^c"] < 1e-12 and table["K^D"] < 1e-12
    assert 1e-3 < table["K^E"] < 0.01  # finite rotation steps: first order in the step
    assert compare_stiffnesses(unloaded, jnp.zeros(6), lab / 10)["K^E"] < table["K^E"] / 5
    # S.34 (moment changes along the Euler basis) from finite differences of the loads on body
    # 2, against K^D computed from the Hessian and the pre-stress term (S.39 corrected): equal
    # in the limit at every posture, pre-stressed, rotated, or both.
    preloaded = quadratic(jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, np.radians(-5.0)]))
    rotated = jnp.array([0.0, 0.0, 0.0, 0.35, 0.0, 0.35])
    both = jnp.array([0.0, 0.0, 0.0, 0.35, 0.2, -0.3])
    for potential, y in ((preloaded, jnp.zeros(6)), (quadratic(rotated), rotated),
                         (unloaded, both)):
        np.testing.assert_allclose(
            np.asarray(experimental_stiffness(potential, y, tiny)),
            np.asarray(dual_basis_stiffness(potential, y)), rtol=1e-6, atol=1e-2)
    # Unloaded but rotated 20 degrees about two axes: K^D = H, so K^E ~ H (S.36) still holds;
    # the Cartesian moments do not (small rotations about the fixed axes are not small changes
    # of the Euler angles).
    table = compare_stiffnesses(quadratic(rotated), rotated, lab)
    assert table["K^D"] < 1e-12 and table["K^c"] > 0.3 and table["K^E"] < 0.02
    cartesian = experimental_stiffness(quadratic(rotated), rotated, lab, moments="cartesian")
    hessian = potential_hessian(quadratic(rotated), rotated)
    assert float(jnp.abs((cartesian - hessian) / block_scale(hessian)).max()) > 0.3
    # Pre-stressed at the neutral posture the Cartesian variant is K^c (G = I there).
    np.testing.assert_allclose(
        np.asarray(experimental_stiffness(preloaded, jnp.zeros(6), tiny, moments="cartesian")),
        np.asarray(cartesian_stiffness(preloaded, jnp.zeros(6))), rtol=1e-5, atol=1e-2)
    assert compare_stiffnesses(preloaded, jnp.zeros(6), lab)["K^E"] > 0.05  # the D term
    with pytest.raises(ValueError, match="moments='polar'"):
        experimental_stiffness(unloaded, jnp.zeros(6), lab, moments="polar")