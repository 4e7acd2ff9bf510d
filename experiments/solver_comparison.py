"""Levenberg-Marquardt: spineid's own (`lm`), jaxopt's and optimistix's on the same problems,
speed and robustness.

Problems: (a) the bundled 4-axial-spring pair, stiffness free; (b) the bundled
8-spring pair, stiffness free (rank-deficient: 3 identifiable combinations). Data: noise-free
simulations over 0.5 s, 501 samples, with optical-tracking noise (5 um, 0.01 deg) added.
Starts: the truth scaled by log-normal factors of spread 0.3, 1.0 and 2.0 (in log units),
20 starts each. Success: the cost within 1% of the cost at the best solution found.

Run: python experiments/solver_comparison.py

Measured (2-core CPU, one run): spineid's `lm` median 3-9 steps and 0.17-0.89 s per fit,
jaxopt 8-16 steps and 0.42-1.79 s, optimistix 18-32 steps and 0.81-3.33 s; success 100% for all
but the 8-spring problem at spread 2 (lm 85%, jaxopt 80%, optimistix 85%) and optimistix on the
axial problem at spread 2 (90%). Table in docs/performance.md.
"""

import copy
import time

import jax
import jax.numpy as jnp
import numpy as np

import spineid

NOISE = {"x": 5e-6, "y": 5e-6, "theta": np.radians(0.01)}


def make_problem(document, factors):
    start = copy.deepcopy(document)
    for spring, factor in zip(start["springs"], factors):
        spring["stiffness"] *= float(factor)
    return spineid.ModelFile.from_document(start)


def data_for(document, seed=0):
    model_file = spineid.ModelFile.from_document(document)
    ts = np.linspace(0.0, 0.5, 501)
    poses = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(ts)).q))
    sigma = np.array(list(NOISE.values()))
    return spineid.Measurement(ts, poses + np.random.default_rng(seed).normal(size=poses.shape)
                               * sigma, ("x", "y", "theta"))


def problems():
    documents = {}
    for name, label in (("axial_4_springs.toml", "4 axial springs"),
                        ("liu_8_springs.toml", "8 vector springs (Liu)")):
        documents[label] = spineid.load_model_file(spineid.dataset_path(name)).document
    return documents


def main():
    rng = np.random.default_rng(42)
    print(f"{'problem':24s} {'spread':>6s} {'solver':>13s} {'success':>8s} "
          f"{'median s':>9s} {'median steps':>12s}")
    for name, document in problems().items():
        measurement = data_for(document)
        n = len(document["springs"])
        for spread in (0.3, 1.0, 2.0):
            factors = np.exp(spread * rng.normal(size=(20, n)))
            rows = {}
            for solver in ("lm", "jaxopt-lm", "optimistix-lm"):
                # Compile once outside the timing.
                spineid.fit(spineid.FitProblem(make_problem(document, factors[0]), measurement,
                                               ["stiffness"], NOISE), solver=solver)
                costs, seconds, steps = [], [], []
                for f in factors:
                    problem = spineid.FitProblem(make_problem(document, f), measurement,
                                                 ["stiffness"], NOISE)
                    start = time.perf_counter()
                    result = spineid.fit(problem, solver=solver)
                    seconds.append(time.perf_counter() - start)
                    costs.append(result.cost)
                    steps.append(result.n_steps)
                rows[solver] = (np.array(costs), np.median(seconds), np.median(steps))
            best = min(np.min(r[0]) for r in rows.values())
            for solver, (costs, median_seconds, median_steps) in rows.items():
                success = np.mean(costs <= best * 1.01)
                print(f"{name:24s} {spread:6.1f} {solver:>13s} {success:8.0%} "
                      f"{median_seconds:9.2f} {median_steps:12.0f}", flush=True)


if __name__ == "__main__":
    main()
