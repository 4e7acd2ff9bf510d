"""Simulation: jit, vmap, derivatives in both modes, failures reported, loads."""

import threading

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, TORSION, VECTOR_SPRINGS, document, model
from spineid._reported_checks import checks_reported_as_nan

TS = jnp.linspace(0.0, 0.2, 101)


def with_stiffness(pair, stiffness):
    return eqx.tree_at(lambda p: p.elements[0].stiffness, pair, stiffness)


def upper_poses(pair, **kwargs):
    return jax.vmap(pair.observe)(spineid.simulate(pair, TS, **kwargs).q)


def test_vmap_over_stiffness_equals_loop():
    pair = model(springs=VECTOR_SPRINGS, loads=LOADS)
    base = pair.elements[0].stiffness
    batch = base * jnp.array([[1.0], [1.3], [0.7]])
    batched = jax.vmap(lambda k: upper_poses(with_stiffness(pair, k)))(batch)
    for i, k in enumerate(batch):
        np.testing.assert_allclose(batched[i], upper_poses(with_stiffness(pair, k)), atol=1e-12)
    assert float(jnp.max(jnp.abs(batched[1] - batched[0]))) > 1e-6


def test_vmap_over_loads_equals_loop():
    pair = model(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)

    def scaled(s):
        return eqx.tree_at(lambda p: p.loads[0].amplitude, pair, s * pair.loads[0].amplitude)

    scales = jnp.array([0.5, 1.0, 2.0])
    batched = jax.vmap(lambda s: upper_poses(scaled(s)))(scales)
    for i, s in enumerate(scales):
        np.testing.assert_allclose(batched[i], upper_poses(scaled(s)), atol=1e-12)
    assert float(jnp.max(jnp.abs(batched[2] - batched[0]))) > 1e-6


@pytest.mark.parametrize("springs", [VECTOR_SPRINGS, AXIAL_SPRINGS], ids=["vector", "axial"])
def test_forward_mode_jacobian_matches_finite_differences(springs):
    pair = model(springs=springs, loads=LOADS)
    k0 = pair.elements[0].stiffness

    def poses(k):
        return upper_poses(with_stiffness(pair, k), adjoint=diffrax.ForwardMode(), rtol=1e-12,
                           atol=1e-14)

    jacobian = jax.jacfwd(poses)(k0)
    assert jacobian.shape == (len(TS), 3, len(k0))
    for j in range(len(k0)):
        step = 1e-4 * k0[j]
        e = jnp.zeros_like(k0).at[j].set(step)
        finite = (poses(k0 + e) - poses(k0 - e)) / (2 * step)
        scale = float(jnp.max(jnp.abs(jacobian[..., j])))
        np.testing.assert_allclose(jacobian[..., j], finite, atol=1e-6 * scale)


def test_reverse_mode_gradient_matches_forward_mode():
    pair = model(springs=VECTOR_SPRINGS[:2] + AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)

    def loss(stiffness, adjoint):
        p = eqx.tree_at(lambda m: m.elements[1].stiffness, pair, stiffness)
        return jnp.sum(upper_poses(p, adjoint=adjoint) ** 2)

    k0 = pair.elements[1].stiffness
    reverse = jax.grad(loss)(k0, diffrax.RecursiveCheckpointAdjoint())
    forward = jax.jacfwd(loss)(k0, diffrax.ForwardMode())
    np.testing.assert_allclose(reverse, forward, rtol=1e-6)


def unstable_pair():
    # A negative spring pushes the body away exponentially fast: the state overflows.
    pair = model(springs=VECTOR_SPRINGS, loads=LOADS)
    return with_stiffness(pair, -1e9 * jnp.ones(4))


def test_failed_integration_raises_clear_error():
    with pytest.raises(Exception, match="spineid.simulate"):
        spineid.simulate(unstable_pair(), jnp.linspace(0.0, 1.0, 11))
    with pytest.raises(Exception, match="maximum number of solver steps"):
        spineid.simulate(model(springs=VECTOR_SPRINGS, loads=LOADS), TS, max_steps=5)


def test_failed_integration_reported_without_throw():
    sim = spineid.simulate(unstable_pair(), jnp.linspace(0.0, 1.0, 11), throw=False)
    assert sim.result != spineid.SimulationResult.successful
    sim = spineid.simulate(model(springs=VECTOR_SPRINGS, loads=LOADS), TS, throw=False, max_steps=5)
    assert sim.result == spineid.SimulationResult.max_steps_reached
    ok = spineid.simulate(model(springs=VECTOR_SPRINGS, loads=LOADS), TS, throw=False)
    assert ok.result == spineid.SimulationResult.successful


def test_a_check_inside_a_solve_that_does_not_throw_reports_instead_of_raising():
    # diffrax checks its save times inside every solve; a solve that does not throw (as every
    # fit calls it) reports the failed check as a non-finite state, so that its compiled
    # program has no callback into Python (and can be cached). Throwing, it still raises.
    pair = model(springs=VECTOR_SPRINGS, loads=LOADS)
    with pytest.raises(Exception, match="saveat.ts must lie between t0 and t1"):
        spineid.simulate(pair, TS + 0.1, t0=0.2)
    jitted = jax.jit(lambda ts: spineid.simulate(pair, ts, throw=False, t0=0.2))
    sim = jitted(TS + 0.1)
    assert sim.result == spineid.SimulationResult.non_finite_state
    assert jitted(TS + 0.2).result == spineid.SimulationResult.successful
    # Nothing of the reporting mode stays: throwing solves and checks of the same shapes and
    # messages traced afterwards raise again.
    with pytest.raises(Exception, match="saveat.ts must lie between t0 and t1"):
        jax.jit(lambda ts: spineid.simulate(pair, ts, t0=0.2))(TS + 0.1)
    with pytest.raises(Exception, match="saveat.ts must lie between t0 and t1"):
        jax.jit(lambda ts: eqx.internal.error_if(
            ts, (ts > 0.3) | (ts < 0.2), "saveat.ts must lie between t0 and t1."))(TS + 0.1)


class _CheckedSystem(eqx.Module):
    # A system whose accelerations hold an equinox check, as a bushing's Euler-angle
    # singularity or a facet's parallel faces do.
    stiffness: jax.Array

    def accelerations(self, t, q, qdot):
        return eqx.internal.error_if(-self.stiffness * q, q > 0.3, "past the singularity")


def test_a_model_check_traced_in_one_mode_is_never_reused_in_the_other():
    # The accelerations are jitted (traced once per system structure); their trace is kept per
    # mode, so a check traced to raise is not reused inside a solve that reports (whose program
    # must hold no callback), nor a reporting one outside it, in whichever order they come.
    from spineid.models._mechanics import lagrangian_vector_field, reported_vector_field

    system, y = _CheckedSystem(jnp.asarray(2.0)), (jnp.array([0.5]), jnp.zeros(1))

    def field(y):
        return lagrangian_vector_field(0.0, y, system)[1]

    with pytest.raises(Exception, match="past the singularity"):
        jax.jit(field)(y)
    with checks_reported_as_nan():
        reported = jax.jit(lambda y: field(y) + 0.0)(y)
    assert np.all(np.isnan(reported))
    with pytest.raises(Exception, match="past the singularity"):
        jax.jit(lambda y: field(y) * 1.0)(y)
    np.testing.assert_allclose(jax.jit(field)((jnp.array([0.1]), jnp.zeros(1))), [-0.2])
    # The other order, on a structure met first inside the block (two coordinates).
    y2 = (jnp.array([0.5, 0.1]), jnp.zeros(2))
    with checks_reported_as_nan():
        assert np.isnan(jax.jit(field)(y2)[0])
    with pytest.raises(Exception, match="past the singularity"):
        jax.jit(lambda y: field(y) - 0.0)(y2)
    # A non-throwing solve's vector field reports wherever it is traced: also after the
    # solve's block, as a derivative traced later (an implicit stage's Jacobian-vector
    # product, a checkpointed adjoint) traces it.
    reported = jax.jit(lambda y: reported_vector_field(0.0, y, system)[1])(y)
    assert np.all(np.isnan(reported))


def test_the_reporting_mode_is_per_thread():
    # While one thread is inside the reporting block (a fit tracing its solve), a check traced
    # by another thread (a fit on another device, `spineid.Devices`) still raises.
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with checks_reported_as_nan():
            inside.set()
            leave.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(60)
        with pytest.raises(Exception, match="another thread's check"):
            jax.jit(lambda ts: eqx.internal.error_if(
                ts, ts > 0.3, "another thread's check"))(TS + 0.1)
    finally:
        leave.set()
        thread.join()
    with checks_reported_as_nan():  # (and in the thread inside the block, NaN)
        reported = jax.jit(lambda ts: eqx.internal.error_if(
            ts, ts > 0.3, "this thread's check"))(TS + 0.1)
    assert np.all(np.isnan(reported))


def test_tabulated_load_matches_sinusoid(tmp_path):
    sinusoid = model(springs=VECTOR_SPRINGS, loads=LOADS)
    times = np.linspace(0.0, 0.2, 4001)
    values = np.stack([sinusoid.applied_load(t) for t in times])
    spineid.write_trajectory(tmp_path / "loads.csv", times, values, ("Fx", "Fy", "Mz"))
    doc = document(springs=VECTOR_SPRINGS)
    doc["loads"] = [{"loads_file": "loads.csv"}]
    tabulated = spineid.model_from_document(doc, folder=tmp_path)
    a, b = upper_poses(sinusoid), upper_poses(tabulated)
    scale = float(jnp.max(jnp.abs(a - sinusoid.upper.reference_pose)))
    np.testing.assert_allclose(a, b, atol=1e-4 * scale)


def test_gravity_sags_the_upper_body():
    pair = model(springs=VECTOR_SPRINGS, gravity=[0.0, -9.81])
    sim = spineid.simulate(pair, jnp.linspace(0.0, 2.0, 201))
    # Damped motion settles at the static deflection m g / sum k (vector springs share the load).
    sag = 0.5 * 9.81 / sum(s["stiffness"] for s in VECTOR_SPRINGS)
    final = pair.observe(sim.q[-1])
    assert abs(float(final[1] - 0.03) + sag) < 0.05 * sag


def test_what_is_not_a_model_or_not_save_times_is_refused():
    pair = spineid.load_model(spineid.dataset_path("axial_4_springs.toml"))
    with pytest.raises(ValueError, match="int is not a spineid model"):
        spineid.simulate(42, jnp.linspace(0.0, 0.1, 3))
    for ts in ([], [[0.0, 0.1]]):
        with pytest.raises(ValueError, match="expected one or more save times"):
            spineid.simulate(pair, ts)
