"""Simulation performance of spineid against scipy, measured in the same run.

Problem: the bundled 16-spring pair (datasets/liu_16_springs.toml), 0.5 s, 501 samples.
Reports compile time, warm time per simulation, time per Jacobian (jacfwd with respect to all
16 stiffnesses, diffrax ForwardMode), throughput of 256 simulations vmapped against a Python loop,
and scipy `solve_ivp(DOP853)` on a hand-written NumPy right-hand side (what a user would write
instead) at matched accuracy: scipy's tolerance is tightened until its error against a
tight-tolerance reference is no larger than spineid's.

Run: python experiments/benchmark_simulation.py   (target: warm spineid >= 20x faster than scipy)
"""

import time

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import spineid
from timing import best_time


def numpy_right_hand_side(model):
    """The pair's equations of motion written by hand in NumPy (lower body fixed)."""
    springs = model.elements[0]
    anchors = np.asarray(spineid.body_point_position(model.lower.reference_pose, springs.points_a))
    local = np.asarray(springs.points_b)
    stiffness, damping = np.asarray(springs.stiffness), np.asarray(springs.damping)
    load = model.loads[0]
    amplitude, frequency = np.asarray(load.amplitude), np.asarray(load.frequency)
    phase, direction = np.asarray(load.phase), np.asarray(load.direction)
    mass, inertia = float(model.upper.mass), float(model.upper.inertia)

    def rhs(t, state):
        x, y, theta, vx, vy, omega = state
        c, s = np.cos(theta), np.sin(theta)
        arm = local @ np.array([[c, s], [-s, c]])
        separation = np.array([x, y]) + arm - anchors
        velocity = np.array([vx, vy]) + omega * np.stack([-arm[:, 1], arm[:, 0]], axis=1)
        force = -stiffness[:, None] * separation - damping[:, None] * velocity
        applied = (amplitude * np.sin(2 * np.pi * frequency * t + phase)) @ direction
        total = force.sum(axis=0) + applied[:2]
        moment = np.sum(arm[:, 0] * force[:, 1] - arm[:, 1] * force[:, 0]) + applied[2]
        return np.array([vx, vy, omega, total[0] / mass, total[1] / mass, moment / inertia])

    return rhs


def main():
    model = spineid.load_model(spineid.dataset_path("liu_16_springs.toml"))
    ts = jnp.linspace(0.0, 0.5, 501)
    poses = lambda m, **kw: jax.vmap(m.observe)(spineid.simulate(m, ts, **kw).q)  # noqa: E731

    start = time.perf_counter()
    ours = poses(model).block_until_ready()
    compile_seconds = time.perf_counter() - start
    warm = best_time(lambda: poses(model).block_until_ready())

    reference = np.asarray(
        poses(model, solver=diffrax.Dopri8(), rtol=1e-13, atol=1e-15, max_steps=10**6)
    )
    scale = np.ptp(reference, axis=0)
    our_error = float(np.max(np.abs(np.asarray(ours) - reference) / scale))

    def jacobian(stiffness):
        with_k = eqx.tree_at(lambda m: m.elements[0].stiffness, model, stiffness)
        return poses(with_k, adjoint=diffrax.ForwardMode())

    jacfwd = jax.jit(jax.jacfwd(jacobian))
    k0 = model.elements[0].stiffness
    jacfwd(k0).block_until_ready()
    jacobian_seconds = best_time(lambda: jacfwd(k0).block_until_ready(), repeats=5)

    factors = 1.0 + 0.3 * jax.random.uniform(jax.random.PRNGKey(0), (256, 1))
    batch = factors * k0
    batched = jax.jit(jax.vmap(lambda k: poses(eqx.tree_at(lambda m: m.elements[0].stiffness, model, k))))
    batched(batch).block_until_ready()
    vmap_seconds = best_time(lambda: batched(batch).block_until_ready(), repeats=3)
    loop_models = [eqx.tree_at(lambda m: m.elements[0].stiffness, model, k) for k in batch]

    def loop():
        for m in loop_models:
            poses(m).block_until_ready()

    loop_seconds = best_time(loop, repeats=2)

    rhs = numpy_right_hand_side(model)
    y0 = np.concatenate([np.asarray(model.initial_pose), np.zeros(3)])
    t_eval = np.asarray(ts)
    np.testing.assert_allclose(
        rhs(0.1, y0 + 1e-4), np.concatenate(spineid.lagrangian_vector_field(0.1, (jnp.asarray(y0[:3] + 1e-4), jnp.asarray(y0[3:] + 1e-4)), model)),
        rtol=1e-10, atol=1e-10,
    )
    scipy_row = None
    for rtol in (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13):
        solve = lambda: solve_ivp(rhs, (0.0, 0.5), y0, method="DOP853", t_eval=t_eval,  # noqa: E731
                                  rtol=rtol, atol=rtol * 1e-2)
        solution = solve()
        error = float(np.max(np.abs(solution.y[:3].T - reference) / scale))
        if error <= our_error:
            scipy_row = (rtol, error, best_time(solve, repeats=3))
            break

    print("spineid simulation benchmark: 16-spring pair, 0.5 s, 501 samples (CPU, float64)")
    print(f"  backend: {jax.default_backend()}, devices: {jax.devices()}")
    print(f"  compile + first run          {compile_seconds:10.3f} s")
    print(f"  warm simulation              {warm * 1e3:10.3f} ms   (rel. error {our_error:.1e})")
    print(f"  jacfwd w.r.t. 16 stiffnesses {jacobian_seconds * 1e3:10.3f} ms")
    print(f"  256 simulations, vmapped     {vmap_seconds:10.3f} s   "
          f"({256 / vmap_seconds:8.0f} simulations/s)")
    print(f"  256 simulations, loop        {loop_seconds:10.3f} s   "
          f"({256 / loop_seconds:8.0f} simulations/s)  vmap speed-up {loop_seconds / vmap_seconds:.1f}x")
    if scipy_row is None:
        print("  scipy DOP853 did not reach spineid's accuracy at any tolerance tried")
        return
    rtol, error, scipy_seconds = scipy_row
    print(f"  scipy solve_ivp DOP853       {scipy_seconds * 1e3:10.3f} ms   "
          f"(rtol {rtol:.0e}, rel. error {error:.1e})")
    ratio = scipy_seconds / warm
    print(f"  ratio scipy / spineid warm   {ratio:10.1f}x   (target >= 20x: "
          f"{'met' if ratio >= 20 else 'NOT met'})")


if __name__ == "__main__":
    main()
