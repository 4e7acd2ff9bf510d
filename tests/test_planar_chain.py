"""The head-neck chain of Fritzkowski and Walczak: the autodiff mass matrix against eqs 43-44
as printed, the pulse against eq 48 and its own integral, the 'kinetic energy - work' check
(eqs 49-55) with the transport inertia forces, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spineid._mechanics import mass_matrix
from spineid._planar_chain import (
    energy_work_check, head_neck_chain, head_neck_geometry, TriangularPulse,
)
from spineid._datasets import dataset_path
from spineid._io import read_toml


def eq_44_mass_matrix(chain, q):
    # a_ij of eq 44 as printed, with the sums m_bar_i = sum_(j > i) m_j and the constants
    # A_ij, B_ij, A_Sij, B_Sij, A_SSii of the links (dx_i, dy_i) and centres (dx_Si, dy_Si).
    m = np.asarray(chain.masses)
    inertia = np.asarray(chain.inertias)
    dx, dy = np.asarray(chain.links).T
    sx, sy = np.asarray(chain.centres).T
    n = m.size
    m_bar = np.array([m[i + 1:].sum() for i in range(n)])
    a = np.zeros((n, n))
    for i in range(n):
        a[i, i] = m_bar[i] * (dx[i] ** 2 + dy[i] ** 2) + m[i] * (sx[i] ** 2 + sy[i] ** 2) \
            + inertia[i]
        for j in range(i):
            theta = q[i] - q[j]
            big_a, big_b = dx[i] * dx[j] + dy[i] * dy[j], dx[i] * dy[j] - dy[i] * dx[j]
            a_s, b_s = sx[i] * dx[j] + sy[i] * dy[j], sx[i] * dy[j] - sy[i] * dx[j]
            a[i, j] = a[j, i] = (m_bar[i] * (big_a * np.cos(theta) - big_b * np.sin(theta))
                                 + m[i] * (a_s * np.cos(theta) - b_s * np.sin(theta)))
    return a


def test_mass_matrix_by_autodiff_equals_eqs_43_44():
    chain = head_neck_chain()
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = rng.uniform(-0.6, 0.6, chain.n_dof)
        ours = np.asarray(mass_matrix(chain, 0.0, jnp.asarray(q), jnp.zeros(chain.n_dof)))
        np.testing.assert_allclose(ours, eq_44_mass_matrix(chain, q), rtol=1e-12,
                                   atol=1e-12 * np.abs(ours).max())


def test_pulse_is_the_double_integral_of_the_triangle_and_eq_48_is_not():
    pulse = TriangularPulse()
    ts = jnp.linspace(0.0, 0.2, 2001)
    velocity = jax.vmap(jax.grad(pulse.displacement))(ts)
    acceleration = jax.vmap(jax.grad(jax.grad(pulse.displacement)))(ts)
    np.testing.assert_allclose(acceleration, jax.vmap(pulse.acceleration)(ts), atol=1e-9)
    assert float(jnp.max(pulse.acceleration(ts))) == pytest.approx(8.5 * 9.81)
    # Continuous velocity, ending at peak * t_end / 2.
    assert np.max(np.abs(np.diff(np.asarray(velocity)))) < 0.01
    assert float(velocity[-1]) == pytest.approx(8.5 * 9.81 * 0.105 / 2, rel=1e-12)
    # Eq 48 as printed: the velocity flips sign at t_peak and the base returns to 0.
    printed = jax.grad(pulse.printed_eq_48)
    assert float(printed(0.0525 - 1e-9)) == pytest.approx(-float(printed(0.0525 + 1e-9)),
                                                          rel=1e-6)
    assert float(pulse.printed_eq_48(0.15)) == 0.0
    with pytest.raises(ValueError, match="t_peak"):
        TriangularPulse(t_peak=0.2, t_end=0.1)


def test_kinetic_energy_equals_work_along_the_whiplash():
    # T_2(t) - W(t) = 0 (eq 53) with W the work of all generalized forces including the
    # transport inertia forces -gamma (eq 50): e_R far below the paper's 0.0103.
    chain = head_neck_chain()
    check = energy_work_check(chain, jnp.linspace(0.0, 0.2, 201), rtol=1e-8, atol=1e-10)
    assert float(jnp.max(check.relative_kinetic_energy)) > 1.0  # J: the neck really moves
    assert float(jnp.max(check.relative_error)) < 1e-8
    # Without the transport forces the balance fails: they do most of the work.
    power = jax.vmap(chain.transport_force)(check.ts, check.q)
    assert float(jnp.max(jnp.abs(jnp.sum(power * check.qdot, axis=1)))) > 10.0


def test_whiplash_bends_the_neck_and_loads_the_ligaments():
    chain = head_neck_chain()
    check = energy_work_check(chain, jnp.linspace(0.0, 0.2, 201))
    head = np.degrees(np.asarray(check.q)[:, -1])
    assert head.min() < -20.0  # the head extends (negative phi) behind the accelerated torso
    forces = np.asarray(jax.vmap(chain.ligament_forces)(check.ts, check.q, check.qdot))
    assert 10.0 < np.abs(forces).max() < 500.0  # N; the paper's peak is about 45 N


def test_bad_input_is_named():
    table = read_toml(dataset_path("head_neck.toml"))
    arguments = head_neck_geometry(table)
    stiffness = dict(k_anterior=3e4, k_posterior=1e4, c_anterior=10.0, c_posterior=10.0,
                     k_joint=600.0, c_joint=1.0)
    bad_mass = dict(arguments, masses=np.r_[arguments["masses"][:-1], -1.0])
    with pytest.raises(ValueError, match=r"masses\[7\]"):
        head_neck_chain(table, **bad_mass)
    coincident = dict(arguments)
    coincident["anterior_lower"] = arguments["anterior_lower"].copy()
    # Put B'_3 on B''_2: a ligament of zero length.
    links = arguments["links"]
    coincident["anterior_lower"][3] = arguments["anterior_upper"][2] - links[2]
    with pytest.raises(ValueError, match="anterior ligament 3.*coincide"):
        head_neck_chain(table, **coincident)
    with pytest.raises(ValueError, match="k_joint"):
        head_neck_chain(table, **dict(stiffness, k_joint=-1.0))
