"""Bushing loads: OpenSim's own BushingForce as the oracle for the classic bushing, and the
virtual-power identity between the explicit wrenches and the energy/dissipation forms that the
mechanics core differentiates."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spineid import (
    bushing_deflection, bushing_deflection_rate, bushing_force, bushing_wrenches,
    euler123_rotation,
)
from spineid.kinematics._rotations import axis_rotation
from helpers import K_F_E as EQ_24  # Christophy et al. 2013 eq 24

K_F_E = np.array(EQ_24)


def random_frames(rng):
    r1 = euler123_rotation(rng.uniform(-0.6, 0.6, 3))
    r2 = euler123_rotation(rng.uniform(-0.6, 0.6, 3))
    return (np.asarray(r1), rng.uniform(-0.05, 0.05, 3), np.asarray(r2),
            rng.uniform(-0.05, 0.05, 3))


@pytest.mark.xdist_group("opensim")  # one process at a time runs OpenSim
def test_classic_bushing_against_opensim():
    osim = pytest.importorskip(
        "opensim", reason="the opensim package (PyPI `opensim`) is not installed here; the "
                          "classic bushing is then checked only against its energy form")
    rng = np.random.default_rng(7)
    model = osim.Model()
    frames = []
    for k in range(2):
        body = osim.Body(f"body{k}", 1.0 + k, osim.Vec3(0.01, 0.02, 0.0),
                         osim.Inertia(0.01, 0.02, 0.03))
        model.addBody(body)
        model.addJoint(osim.FreeJoint(f"free{k}", model.getGround(), body))
        frame = osim.PhysicalOffsetFrame(f"frame{k}", body, osim.Transform())
        frame.set_translation(osim.Vec3(*rng.uniform(-0.03, 0.03, 3)))
        frame.set_orientation(osim.Vec3(*rng.uniform(-0.4, 0.4, 3)))
        body.addComponent(frame)
        frames.append(frame)
    k_rot, k_trans = rng.uniform(5, 50, 3), rng.uniform(1e3, 1e5, 3)
    c_rot, c_trans = rng.uniform(0.01, 0.5, 3), rng.uniform(1, 50, 3)
    bushing = osim.BushingForce("bushing", frames[0], frames[1])
    bushing.set_rotational_stiffness(osim.Vec3(*k_rot))
    bushing.set_translational_stiffness(osim.Vec3(*k_trans))
    bushing.set_rotational_damping(osim.Vec3(*c_rot))
    bushing.set_translational_damping(osim.Vec3(*c_trans))
    model.addForce(bushing)
    state = model.initSystem()
    stiffness = np.diag(np.concatenate([k_trans, k_rot]))
    damping = np.diag(np.concatenate([c_trans, c_rot]))

    def vec(v):
        return np.array([v.get(i) for i in range(3)])

    compared = 0
    for _ in range(20):
        state.setQ(osim.Vector(rng.uniform(-0.6, 0.6, 12).tolist()))
        state.setU(osim.Vector(rng.uniform(-2.0, 2.0, 12).tolist()))
        model.realizeDynamics(state)
        poses, body_origins = [], []
        for k, frame in enumerate(frames):
            transform, velocity = frame.getTransformInGround(state), frame.getVelocityInGround(state)
            rotation = np.array([[transform.R().get(i, j) for j in range(3)] for i in range(3)])
            poses.append((rotation, vec(transform.p()), vec(velocity.get(0)), vec(velocity.get(1))))
            body_origins.append(vec(model.getBodySet().get(k).getTransformInGround(state).p()))
        (r1, x1, w1, v1), (r2, x2, w2, v2) = poses
        y = bushing_deflection(r1, x1, r2, x2)
        rate = bushing_deflection_rate(r1, x1, r2, x2, w1, v1, w2, v2)
        wrench1, wrench2 = bushing_wrenches(r1, x1, r2, x2,
                                            bushing_force(stiffness, damping, y, rate))
        values = bushing.getRecordValues(state)
        theirs = np.array([values.get(i) for i in range(values.size())]).reshape(4, 3)
        # OpenSim records frame1 force, frame1 torque, frame2 force, frame2 torque in ground,
        # the torques about the origins of the bodies that carry the frames. A non-finite
        # record (seen once in a full parallel run, not reproducible alone) cannot serve as a
        # reference: that state is skipped, and most states must be compared.
        if not np.all(np.isfinite(theirs)):
            continue
        compared += 1
        scale = np.abs(theirs).max()
        for (moment, force), origin, body, theirs_force, theirs_torque in (
                (wrench1, x1, body_origins[0], theirs[0], theirs[1]),
                (wrench2, x2, body_origins[1], theirs[2], theirs[3])):
            about_body = np.asarray(moment) + np.cross(origin - body, np.asarray(force))
            np.testing.assert_allclose(np.asarray(force), theirs_force, atol=1e-9 * scale)
            np.testing.assert_allclose(about_body, theirs_torque, atol=1e-9 * scale)
    assert compared >= 18


@pytest.mark.parametrize("seed", range(4))
def test_wrenches_are_the_forces_of_the_energy_and_dissipation(seed):
    # Virtual power: moving M by dx and turning body 2 by a small rotation dphi (ground)
    # changes U by -(force2 . dx + moment2 . dphi); the same for R with the velocities.
    rng = np.random.default_rng(seed)
    r1, x1, r2, x2 = random_frames(rng)
    w1, v1, w2, v2 = (rng.uniform(-1, 1, 3) for _ in range(4))
    stiffness = K_F_E
    damping = np.diag(rng.uniform(0.1, 10.0, 6))
    reference = np.asarray(bushing_deflection(r1, x1, r2, x2)) + rng.uniform(-0.05, 0.05, 6)

    def energy(perturbation):
        dx, dphi = perturbation[:3], perturbation[3:]
        angle = jnp.sqrt(jnp.sum(dphi**2) + 1e-300)
        rotated = axis_rotation(dphi / angle, angle) @ r2
        y = bushing_deflection(r1, x1, rotated, x2 + dx) - reference
        return 0.5 * y @ stiffness @ y

    def dissipation(velocity):
        rate = bushing_deflection_rate(r1, x1, r2, x2, w1, v1, velocity[3:], velocity[:3])
        return 0.5 * rate @ damping @ rate

    y = bushing_deflection(r1, x1, r2, x2)
    rate = bushing_deflection_rate(r1, x1, r2, x2, w1, v1, w2, v2)
    _, elastic = bushing_wrenches(r1, x1, r2, x2,
                                  bushing_force(stiffness, 0 * damping, y, rate, reference))
    _, viscous = bushing_wrenches(r1, x1, r2, x2,
                                  bushing_force(0 * stiffness, damping, y, rate))
    gradient = jax.grad(energy)(jnp.full(6, 1e-12))
    np.testing.assert_allclose(np.asarray(-gradient), np.asarray(elastic)[::-1].ravel(),
                               rtol=1e-6, atol=1e-6 * np.abs(elastic).max())
    power = jax.grad(dissipation)(jnp.concatenate([v2, w2]))
    np.testing.assert_allclose(np.asarray(-power), np.asarray(viscous)[::-1].ravel(),
                               rtol=1e-9, atol=1e-9 * np.abs(viscous).max())


def test_loads_are_equal_and_opposite_and_vanish_where_they_should():
    rng = np.random.default_rng(3)
    r1, x1, r2, x2 = random_frames(rng)
    stiffness, damping = K_F_E, np.eye(6)
    y = bushing_deflection(r1, x1, r2, x2)
    wrench1, wrench2 = bushing_wrenches(r1, x1, r2, x2,
                                        bushing_force(stiffness, damping, y, np.zeros(6)))
    np.testing.assert_allclose(np.asarray(wrench1[1]), -np.asarray(wrench2[1]))
    # Moments about a common point (the origin) cancel: no net load on the pair.
    total = (np.asarray(wrench1[0]) + np.cross(x1, wrench1[1])
             + np.asarray(wrench2[0]) + np.cross(x2, wrench2[1]))
    np.testing.assert_allclose(total, 0.0, atol=1e-9 * np.abs(wrench2).max())
    # Classic: zero load when the frames coincide; SpineBushing: zero in the reference pose.
    assert np.allclose(bushing_force(stiffness, damping,
                                     bushing_deflection(r1, x1, r1, x1), np.zeros(6)), 0.0)
    assert np.allclose(bushing_force(stiffness, damping, y, np.zeros(6), reference=y), 0.0)
    # ...but a classic bushing between frames at two vertebral centres 3 cm apart loads the
    # neutral posture by more than 1 kN with the translational stiffness of eq 24 (eq 19).
    neutral = bushing_force(stiffness, damping,
                            bushing_deflection(np.eye(3), np.zeros(3), np.eye(3),
                                               np.array([0.0, 0.03, 0.0])), np.zeros(6))
    assert np.linalg.norm(np.asarray(neutral[:3])) > 1e3
