"""The mechanics core against independent oracles: Newton-Euler forces, analytic systems,
energy balance and linearized natural frequencies."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, ELEMENT_SETS, TORSION, VECTOR_SPRINGS, model


def cross2(a, b):
    return a[0] * b[1] - a[1] * b[0]


def newton_euler_forces(document, pose_a, pose_b, vel_a, vel_b):
    """Hand-written spring and damper forces on both bodies, as [Fx, Fy, Mz] about each centre
    of mass, from the model document directly (no spineid code)."""
    ref_a = np.asarray(document["lower"]["pose"])
    ref_b = np.asarray(document["upper"]["pose"])

    def rot(t):
        return np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])

    def local(ref, p):
        return rot(ref[2]).T @ (np.asarray(p) - ref[:2])

    def world(pose, vel, g):
        arm = rot(pose[2]) @ g
        return pose[:2] + arm, vel[:2] + vel[2] * np.array([-arm[1], arm[0]]), arm

    gen_a, gen_b = np.zeros(3), np.zeros(3)

    def apply(force_on_b, arm_a, arm_b):
        gen_b[:2] += force_on_b
        gen_b[2] += cross2(arm_b, force_on_b)
        gen_a[:2] -= force_on_b
        gen_a[2] += cross2(arm_a, -force_on_b)

    for spring in document["springs"]:
        k, c = spring["stiffness"], spring["damping"]
        if spring["kind"] == "vector":
            pa, va, arm_a = world(pose_a, vel_a, local(ref_a, spring["point"]))
            pb, vb, arm_b = world(pose_b, vel_b, local(ref_b, spring["point"]))
            apply(-k * (pb - pa) - c * (vb - va), arm_a, arm_b)
        else:
            pa, va, arm_a = world(pose_a, vel_a, local(ref_a, spring["lower_point"]))
            pb, vb, arm_b = world(pose_b, vel_b, local(ref_b, spring["upper_point"]))
            rest = np.linalg.norm(np.asarray(spring["upper_point"]) - spring["lower_point"])
            length = np.linalg.norm(pb - pa)
            unit = (pb - pa) / length
            rate = unit @ (vb - va)
            apply(-(k * (length - rest) + c * rate) * unit, arm_a, arm_b)
    for torsion in document["torsion"]:
        rest = ref_b[2] - ref_a[2]
        moment = -torsion["stiffness"] * (pose_b[2] - pose_a[2] - rest) - torsion["damping"] * (
            vel_b[2] - vel_a[2]
        )
        gen_b[2] += moment
        gen_a[2] -= moment
    return gen_a, gen_b


@pytest.mark.parametrize("elements", list(ELEMENT_SETS))
@pytest.mark.parametrize("lower_free", [False, True])
def test_autodiff_forces_equal_newton_euler(elements, lower_free):
    from helpers import document

    doc = document(**ELEMENT_SETS[elements], lower_free=lower_free)
    pair = spineid.model_from_document(doc)
    rng = np.random.default_rng(0)
    t = jnp.asarray(0.0)
    for _ in range(20):
        pose_a = np.asarray(doc["lower"]["pose"]) + rng.normal(0, [2e-3, 2e-3, 0.1])
        pose_b = np.asarray(doc["upper"]["pose"]) + rng.normal(0, [2e-3, 2e-3, 0.1])
        vel_a, vel_b = rng.normal(0, [0.1, 0.1, 3.0]), rng.normal(0, [0.1, 0.1, 3.0])
        if lower_free:
            q, qdot = np.concatenate([pose_a, pose_b]), np.concatenate([vel_a, vel_b])
        else:
            pose_a, vel_a = np.asarray(doc["lower"]["pose"]), np.zeros(3)
            q, qdot = pose_b, vel_b
        q, qdot = jnp.asarray(q), jnp.asarray(qdot)
        autodiff = -jax.grad(pair.potential_energy, argnums=1)(t, q) - jax.grad(
            pair.dissipation_function, argnums=2
        )(t, q, qdot)
        gen_a, gen_b = newton_euler_forces(doc, pose_a, pose_b, vel_a, vel_b)
        expected = np.concatenate([gen_a, gen_b]) if lower_free else gen_b
        np.testing.assert_allclose(autodiff, expected, rtol=1e-10, atol=1e-10)


class _MovingBaseOscillator(spineid.AbstractLagrangianSystem):
    """Mass on a spring whose base moves as b(t) = B sin(w t); q is the stretch."""

    mass: float
    stiffness: float
    amplitude: float
    omega: float

    def _base_velocity(self, t):
        return self.amplitude * self.omega * jnp.cos(self.omega * t)

    def kinetic_energy(self, t, q, qdot):
        return 0.5 * self.mass * jnp.sum((qdot + self._base_velocity(t)) ** 2)

    def potential_energy(self, t, q):
        return 0.5 * self.stiffness * jnp.sum(q**2)

    def dissipation_function(self, t, q, qdot):
        return jnp.zeros(())

    def generalized_forces(self, t, q, qdot):
        return jnp.zeros_like(q)

    def initial_state(self):
        return jnp.zeros(1), jnp.zeros(1)


class _PolarParticle(spineid.AbstractLagrangianSystem):
    """Particle on a radial spring in polar coordinates q = (r, phi): M depends on q."""

    mass: float
    stiffness: float
    rest: float

    def kinetic_energy(self, t, q, qdot):
        return 0.5 * self.mass * (qdot[0] ** 2 + q[0] ** 2 * qdot[1] ** 2)

    def potential_energy(self, t, q):
        return 0.5 * self.stiffness * (q[0] - self.rest) ** 2

    def dissipation_function(self, t, q, qdot):
        return jnp.zeros(())

    def generalized_forces(self, t, q, qdot):
        return jnp.zeros_like(q)

    def initial_state(self):
        return jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])


def test_rheonomic_term_matches_analytic_equation():
    system = _MovingBaseOscillator(mass=2.0, stiffness=50.0, amplitude=0.1, omega=3.0)
    for t, q in [(0.3, 0.02), (1.1, -0.05)]:
        qddot = spineid.generalized_accelerations(system, t, jnp.array([q]), jnp.array([0.4]))
        base_acceleration = -0.1 * 9.0 * np.sin(3.0 * t)
        np.testing.assert_allclose(qddot, [-50.0 / 2.0 * q - base_acceleration], rtol=1e-12)


def test_configuration_dependent_mass_matches_analytic_equation():
    system = _PolarParticle(mass=1.5, stiffness=20.0, rest=0.8)
    q, qdot = jnp.array([1.2, 0.3]), jnp.array([0.5, -2.0])
    qddot = spineid.generalized_accelerations(system, 0.0, q, qdot)
    expected = [q[0] * qdot[1] ** 2 - 20.0 / 1.5 * (q[0] - 0.8), -2 * qdot[0] * qdot[1] / q[0]]
    np.testing.assert_allclose(qddot, expected, rtol=1e-12)


@pytest.mark.parametrize("elements", list(ELEMENT_SETS))
@pytest.mark.parametrize("lower_free", [False, True])
def test_undamped_unloaded_motion_conserves_energy(elements, lower_free):
    pair = model(**ELEMENT_SETS[elements], lower_free=lower_free, undamped=True,
                 initial_pose=[0.0008, 0.0305, 0.04], gravity=[0.0, -9.81])
    ts = jnp.linspace(0.0, 0.3, 301)
    sim = spineid.simulate(pair, ts, rtol=1e-10, atol=1e-12)
    energy = jax.vmap(lambda t, q, v: spineid.mechanical_energy(pair, t, q, v))(ts, sim.q, sim.qdot)
    kinetic = jax.vmap(pair.kinetic_energy)(ts, sim.q, sim.qdot)
    assert float(jnp.max(kinetic)) > 1e-4  # it really moves
    drift = float(jnp.max(jnp.abs(energy - energy[0])))
    assert drift < 1e-7 * float(jnp.max(kinetic))


@pytest.mark.parametrize("elements", list(ELEMENT_SETS))
def test_damped_energy_never_rises(elements):
    pair = model(**ELEMENT_SETS[elements], initial_pose=[0.0008, 0.0305, 0.04])
    ts = jnp.linspace(0.0, 0.3, 601)
    sim = spineid.simulate(pair, ts, rtol=1e-10, atol=1e-12)
    energy = np.asarray(
        jax.vmap(lambda t, q, v: spineid.mechanical_energy(pair, t, q, v))(ts, sim.q, sim.qdot)
    )
    assert energy[-1] < 0.5 * energy[0]
    assert np.all(np.diff(energy) <= 1e-12 * energy[0])


def hand_stiffness_matrix(document):
    """Linear stiffness of the upper body about its reference pose from the spring geometry
    (lower body fixed): K = sum_l k_l G_l^T G_l with G_l the Jacobian of the spring's measured
    displacement; vector springs measure the full 2-D displacement of the point, axial springs
    its projection on the line, torsion the angle."""
    centre = np.asarray(document["upper"]["pose"][:2])
    stiffness = np.zeros((3, 3))
    for spring in document["springs"]:
        if spring["kind"] == "vector":
            arm = np.asarray(spring["point"]) - centre
            jac = np.array([[1.0, 0.0, -arm[1]], [0.0, 1.0, arm[0]]])
        else:
            arm = np.asarray(spring["upper_point"]) - centre
            unit = np.asarray(spring["upper_point"]) - spring["lower_point"]
            unit = unit / np.linalg.norm(unit)
            jac = (unit @ np.array([[1.0, 0.0, -arm[1]], [0.0, 1.0, arm[0]]]))[None]
        stiffness += spring["stiffness"] * jac.T @ jac
    for torsion in document["torsion"]:
        stiffness[2, 2] += torsion["stiffness"]
    return stiffness


@pytest.mark.parametrize("elements", list(ELEMENT_SETS))
def test_small_oscillations_follow_linearized_modes(elements):
    from helpers import document

    doc = document(**ELEMENT_SETS[elements], undamped=True)
    mass = np.diag([doc["upper"]["mass"], doc["upper"]["mass"], doc["upper"]["inertia"]])
    eigenvalues, modes = np.linalg.eig(np.linalg.solve(mass, hand_stiffness_matrix(doc)))
    reference = np.asarray(doc["upper"]["pose"])
    ts = jnp.linspace(0.0, 0.2, 201)
    for omega_squared, mode in zip(eigenvalues.real, modes.T.real):
        omega = np.sqrt(omega_squared)
        amplitude = 1e-7 * mode / np.max(np.abs(mode[:2]) + np.abs(mode[2]) * 0.02)
        doc["upper"]["initial_pose"] = list(reference + amplitude)
        pair = spineid.model_from_document(doc)
        sim = spineid.simulate(pair, ts, rtol=1e-12, atol=1e-18)
        expected = reference + np.cos(omega * np.asarray(ts))[:, None] * amplitude
        error = np.max(np.abs(np.asarray(sim.q) - expected) / np.abs(amplitude).max())
        assert error < 1e-4, (omega, error)


def test_mass_matrix_of_pair_is_diagonal_body_inertia():
    pair = model(springs=VECTOR_SPRINGS, lower_free=True)
    q, qdot = pair.initial_state()
    expected = np.diag([0.8, 0.8, 2.0e-3, 0.5, 0.5, 1.2e-3])
    np.testing.assert_allclose(spineid.mass_matrix(pair, 0.0, q, qdot), expected, rtol=1e-14)


def test_models_are_pytrees_of_float64_arrays():
    pair = model(springs=AXIAL_SPRINGS, torsion=TORSION)
    leaves = jax.tree_util.tree_leaves(eqx.filter(pair, eqx.is_array))
    assert leaves and all(leaf.dtype == jnp.float64 for leaf in leaves)
