"""Benchmark: the nine quasi-static load cases of the C5-C6 segment, and a dynamic simulation.

Issue target: all nine equilibria, vmapped, warm in under 10 ms on a 2-core CPU (the paper's
point was real time). Peer, measured in the same run: scipy.optimize.root (MINPACK hybrj) on
the same residual and Jacobian (each compiled by JAX once), one case after the other, to the
same residual. Also: a 0.5 s dynamic simulation of the segment under the bundled sinusoidal
flexion-extension moment (Tsit5, default tolerances).

Run: `python experiments/benchmark_segment.py`. Measured numbers are in docs/performance.md.
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import spineid
from spineid.simulation._equilibrium import equilibrium_residual


def best_of(function, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function())
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    model_file = spineid.load_model_file(spineid.dataset_path("c5_c6.toml"))
    pair = model_file.model
    loads = spineid.load_cases()
    start = time.perf_counter()
    jax.block_until_ready(spineid.solve_load_cases(pair, loads))
    compile_seconds = time.perf_counter() - start
    ours = best_of(lambda: spineid.solve_load_cases(pair, loads))
    poses = np.asarray(spineid.solve_load_cases(pair, loads)[0].pose)

    residual = jax.jit(lambda q, load: equilibrium_residual(pair, q, load))
    jacobian = jax.jit(jax.jacfwd(lambda q, load: equilibrium_residual(pair, q, load)))
    reference = np.asarray(pair.upper.reference_pose)

    def scipy_all():
        found = []
        for load in loads:
            solution = scipy.optimize.root(
                lambda q: np.asarray(residual(q, load)), reference,
                jac=lambda q: np.asarray(jacobian(q, load)), method="hybr",
                options={"xtol": 1e-13})
            found.append(solution.x)
        return np.array(found)

    scipy_all()
    theirs = best_of(scipy_all)
    agreement = np.max(np.abs(scipy_all() - poses))

    ts = jnp.linspace(0.0, 0.5, 251)
    simulate = eqx.filter_jit(spineid.simulate)
    start = time.perf_counter()
    motion = jax.block_until_ready(simulate(pair, ts))
    first = time.perf_counter() - start
    dynamic = best_of(lambda: simulate(pair, ts).q, repeats=3)

    print("C5-C6 segment, nine quasi-static load cases (2-core CPU numbers in docs/performance.md)")
    print(f"  spineid vmapped Newton: {compile_seconds:.2f} s first call (compilation), "
          f"{1e3 * ours:.3f} ms warm (target < 10 ms)")
    print(f"  scipy root (hybrj), same compiled residual and Jacobian, case by case: "
          f"{1e3 * theirs:.3f} ms warm -> spineid {theirs / ours:.1f}x faster")
    print(f"  largest pose difference between the two: {agreement:.2e} (m / rad)")
    print(f"  dynamic simulation 0-0.5 s ({int(motion.n_steps)} Tsit5 steps): {first:.2f} s "
          f"first call, {1e3 * dynamic:.1f} ms warm")


if __name__ == "__main__":
    main()
