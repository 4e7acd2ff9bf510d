"""The vertebral chain and the lumbar Models 1-4 of Christophy et al. 2013 on a two-level chain:
the spurious moment of Model 1 (eq 21), the neutral-posture load of Model 2 (eq 19), the
coupling of Model 4, and inverse dynamics against forward dynamics."""

import jax.numpy as jnp
import numpy as np

from spineid import (
    generalized_accelerations, inverse_dynamics, K_F_E, lumbar_models, prescribed_motion,
)

CENTRES = np.array([[0.0, 0.0, 0.0], [-0.031, 0.037, 0.0]])  # m: L5-L4-like, e1 anterior
MASSES = np.array([1.8, 1.8])
INERTIAS = np.array([np.diag([2.6e-4, 3.6e-4, 2.6e-4])] * 2)


def models():
    return lumbar_models(CENTRES, MASSES, INERTIAS, K_F_E, damping=np.eye(6) * 0.5)


def test_inverse_dynamics_inverts_forward_dynamics():
    chain = models()[4]
    rng = np.random.default_rng(0)
    q0, _ = chain.initial_state()
    q = q0 + jnp.asarray(rng.uniform(-1e-3, 1e-3, 12))
    qdot = jnp.asarray(rng.uniform(-0.1, 0.1, 12))
    qddot = generalized_accelerations(chain, 0.0, q, qdot)
    np.testing.assert_allclose(np.asarray(inverse_dynamics(chain, 0.0, q, qdot, qddot)), 0.0,
                               atol=1e-8 * float(jnp.abs(qddot).max()))


def test_table_1_models_under_anterior_translation():
    amplitude = np.zeros((2, 6))
    amplitude[:, 0] = 0.6e-3  # Table 3: 0.6 mm along E1 at every level
    peak = 0.25  # s: sin(2 pi t) = 1
    loads = {}
    for number, chain in models().items():
        q, v, _ = prescribed_motion(chain, peak, amplitude)
        loads[number] = np.asarray(chain.joint_loads(q, v))
    # All bushings resist the 0.6 mm shear with K_tx = 5e5 N/m: 300 N on the upper vertebra.
    for number in (1, 3, 4):
        np.testing.assert_allclose(loads[number][:, 0], -300.0, rtol=1e-3)
    # Model 1: the load acts at the joint point, half-way down: a spurious flexion moment
    # (joint - centre) x F about e3 (eq 21) that Model 3 does not have.
    joint_arm = 0.5 * (np.vstack([2 * CENTRES[0] - CENTRES[1], CENTRES[:-1]]) - CENTRES)
    expected = np.cross(joint_arm, np.array([-300.0, 0.0, 0.0]))[:, 2]
    np.testing.assert_allclose(loads[1][:, 5], expected, rtol=2e-3)
    assert np.abs(expected).min() > 4.0  # N m
    np.testing.assert_allclose(loads[3][:, 3:], 0.0, atol=1e-6)
    # Model 4: the off-diagonal K[rz, tx] = 11000 N/rad couples the shear into a moment.
    np.testing.assert_allclose(loads[4][:, 5], -11000.0 * 0.6e-3, rtol=1e-3)
    # Model 2: frames at the centres load the neutral posture (eq 19): K_D^E times the
    # 48 mm between centres, tens of kilonewtons with the axial 2.5e6 N/m of eq 25.
    neutral = np.asarray(models()[2].joint_loads(*models()[2].initial_state()))
    spacing = CENTRES[1] - CENTRES[0]
    np.testing.assert_allclose(neutral[1, :3], -np.diag(K_F_E)[:3] * spacing, rtol=1e-9)
    assert np.linalg.norm(neutral[1, :3]) > 1e3 * 50
