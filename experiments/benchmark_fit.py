"""Fitting performance of spineid against scipy, measured in the same run.

Problem: the bundled 4-axial-spring pair (datasets/axial_4_springs.toml), 0.5 s, 501 samples,
optical-tracking noise (5 um, 0.01 deg); the four stiffnesses are fitted from a start 20-30% off.
Peer: what a user would write instead, scipy `least_squares` (trust-region reflective,
finite-difference Jacobians) around `solve_ivp(DOP853)` on a hand-written NumPy right-hand side.

Reports, each measured here:
- the ODE tolerance each peer needs: the loosest giving the reference estimate within 0.01
  standard errors (matched accuracy); everything below is timed at those tolerances;
- whole-process time (a fresh Python process: imports, compilation, fit) for both;
- warm time per fit for both (spineid: a second fit from another start, compiled code reused);
- agreement of the two estimates, in units of spineid's standard errors;
- estimator efficiency: RMS error of the stiffnesses over 100 noisy repetitions divided by the
  Cramer-Rao bound (target <= 1.2), and the throughput of those 100 fits run as one vmap and
  on `spineid.Local()` (whole fits in a loop).

Run: python experiments/benchmark_fit.py [--executor local|dask] [--workers 2]
[--scheduler ADDRESS]   (targets: warm >= 50x, whole process >= 5x). `--executor` chooses
where the 100 repetitions' whole fits run (default `local`, this process; `dask` a
LocalCluster of `--workers` processes or the cluster at `--scheduler`).
"""

import subprocess
import sys
import time

import numpy as np

NOISE = {"x": 5e-6, "y": 5e-6, "theta": float(np.radians(0.01))}
START = np.array([1.3, 0.7, 1.2, 0.8])
SIGMA = np.array(list(NOISE.values()))


def truth_and_data(seed=0):
    import jax
    import jax.numpy as jnp

    import spineid

    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = model_file.simulation_times()
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(ts), rtol=1e-12, atol=1e-14).q))
    data = clean + np.random.default_rng(seed).normal(size=clean.shape) * SIGMA
    return model_file, ts, clean, data


def spineid_fit(start_factors=START, rtol=1e-8):
    import spineid

    model_file, ts, _, data = truth_and_data()
    document = model_file.document
    start = [s["stiffness"] * f for s, f in zip(document["springs"], start_factors)]
    for spring, value in zip(document["springs"], start):
        spring["stiffness"] = value
    problem = spineid.FitProblem(spineid.ModelFile.from_document(document),
                                 spineid.Measurement(ts, data, ("x", "y", "theta")),
                                 ["stiffness"], NOISE, simulation_rtol=rtol,
                                 simulation_atol=rtol * 1e-2)
    return spineid.fit(problem)


def scipy_fit(data, start_factors=START, rtol=1e-10, damping_factor=1.0, ts=None):
    """The peer fit; imports neither jax nor spineid, so its process time is its own.
    `damping_factor` scales the bundled dampers (experiments/benchmark_robustness.py fits a
    lightly damped variant); `ts` (s) the record's sample times (default 0-0.5 s, 501)."""
    import pathlib
    import tomllib

    from scipy.integrate import solve_ivp
    from scipy.optimize import least_squares

    path = pathlib.Path(__file__).resolve().parent.parent / "datasets" / "axial_4_springs.toml"
    document = tomllib.loads(path.read_text())
    ts = np.linspace(0.0, 0.5, 501) if ts is None else np.asarray(ts, dtype=float)
    upper = np.array(document["upper"]["pose"])
    mass, inertia = document["upper"]["mass"], document["upper"]["inertia"]
    lower_points = np.array([s["lower_point"] for s in document["springs"]])
    local = np.array([s["upper_point"] for s in document["springs"]]) - upper[:2]
    rest = np.linalg.norm(local + upper[:2] - lower_points, axis=1)
    damping = damping_factor * np.array([s["damping"] for s in document["springs"]])
    loads = [(("Fx", "Fy", "Mz").index(l["component"]), l["amplitude"], l["frequency"],
              l.get("phase", 0.0)) for l in document["loads"]]

    def rhs(t, state, stiffness):
        x, y, theta, vx, vy, omega = state
        c, s = np.cos(theta), np.sin(theta)
        arm = local @ np.array([[c, s], [-s, c]])
        span = np.array([x, y]) + arm - lower_points
        length = np.linalg.norm(span, axis=1)
        unit = span / length[:, None]
        velocity = np.array([vx, vy]) + omega * np.stack([-arm[:, 1], arm[:, 0]], axis=1)
        rate = np.sum(unit * velocity, axis=1)
        force = -(stiffness * (length - rest) + damping * rate)[:, None] * unit
        applied = np.zeros(3)
        for component, amplitude, frequency, phase in loads:
            applied[component] += amplitude * np.sin(2 * np.pi * frequency * t + phase)
        total = force.sum(axis=0) + applied[:2]
        moment = np.sum(arm[:, 0] * force[:, 1] - arm[:, 1] * force[:, 0]) + applied[2]
        return [vx, vy, omega, total[0] / mass, total[1] / mass, moment / inertia]

    def residuals(log_stiffness):
        solution = solve_ivp(rhs, (0.0, float(ts[-1])), np.concatenate([upper, np.zeros(3)]),
                             method="DOP853", t_eval=ts, rtol=rtol, atol=rtol * 1e-2,
                             args=(np.exp(log_stiffness),))
        if solution.status != 0 or solution.y.shape[1] != ts.size:  # failed: back off
            return np.full(data.size, 1e8)
        return ((solution.y[:3].T - data) / SIGMA).ravel()

    truth = np.array([s["stiffness"] for s in document["springs"]])
    result = least_squares(residuals, np.log(truth * start_factors), method="trf")
    return np.exp(result.x), result


def whole_process(mode, data_file, rtol):
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, mode, data_file, repr(rtol)], check=True)
    return time.perf_counter() - start


def loosest_matching(fit_at, reference, stderr, tolerances):
    """The loosest ODE tolerance whose estimate is within 0.01 standard errors of the
    reference: both peers are then timed at the accuracy the estimate needs."""
    chosen = tolerances[0]
    for rtol in tolerances:
        if np.max(np.abs(fit_at(rtol) - reference) / stderr) <= 0.01:
            chosen = rtol
        else:
            break
    return chosen


def main(executor_name="local", workers=2, scheduler=None):
    import tempfile

    import jax

    import spineid

    model_file, ts, clean, data = truth_and_data()
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as handle:
        np.savetxt(handle, data, delimiter=",")
    print("fit benchmark: 4 axial springs, 0.5 s, 501 samples, noise 5 um / 0.01 deg (CPU)")
    reference = spineid_fit(rtol=1e-11)
    other_start = np.array([0.75, 1.25, 0.85, 1.2])
    ours_rtol = loosest_matching(lambda r: spineid_fit(other_start, r).values, reference.values,
                                 reference.stderr, [1e-9, 1e-8, 1e-7, 1e-6, 1e-5])
    theirs_rtol = loosest_matching(lambda r: scipy_fit(data, other_start, r)[0],
                                   reference.values, reference.stderr,
                                   [1e-10, 1e-9, 1e-8, 1e-7, 1e-6])
    print(f"  ODE rtol giving the reference estimate within 0.01 stderr: spineid {ours_rtol:.0e}, "
          f"scipy {theirs_rtol:.0e}")
    ours_process = whole_process("spineid", handle.name, ours_rtol)
    theirs_process = whole_process("scipy", handle.name, theirs_rtol)

    spineid_fit(rtol=ours_rtol)  # compiled
    start = time.perf_counter()
    ours = spineid_fit(other_start, ours_rtol)
    ours_warm = time.perf_counter() - start
    start = time.perf_counter()
    theirs, scipy_result = scipy_fit(data, other_start, theirs_rtol)
    theirs_warm = time.perf_counter() - start

    truth = np.array([s["stiffness"] for s in model_file.document["springs"]])
    print(f"  truth            {np.array2string(truth, precision=1)}")
    print(f"  spineid          {np.array2string(ours.values, precision=1)} +- "
          f"{np.array2string(ours.stderr, precision=1)}  ({ours.n_steps} LM steps)")
    print(f"  scipy            {np.array2string(theirs, precision=1)}  "
          f"({scipy_result.nfev} evaluations)")
    print(f"  |spineid - scipy| / stderr: "
          f"{np.array2string(np.abs(ours.values - theirs) / ours.stderr, precision=3)}")
    print(f"  whole process    spineid {ours_process:7.2f} s   scipy {theirs_process:7.2f} s   "
          f"ratio {theirs_process / ours_process:6.1f}x (target >= 5x)")
    print(f"  warm fit         spineid {ours_warm:7.3f} s   scipy {theirs_warm:7.2f} s   "
          f"ratio {theirs_warm / ours_warm:6.1f}x (target >= 50x)")

    problem = spineid.FitProblem(
        spineid.ModelFile.from_document(model_file.document),
        spineid.Measurement(ts, data, ("x", "y", "theta")), ["stiffness"], NOISE)
    draws = clean + np.random.default_rng(1).normal(size=(100,) + clean.shape) * SIGMA
    spineid.fit_many(problem, [draws[:2]])  # compile the batch solver at a small size
    spineid.fit_many(problem, [draws])  # compile at the full batch size
    start = time.perf_counter()
    batch = spineid.fit_many(problem, [draws])
    jax.block_until_ready(batch["values"])
    batch_seconds = time.perf_counter() - start
    rms = np.sqrt(np.mean((batch["values"] - truth) ** 2, axis=0))
    bound = np.mean(batch["stderr"], axis=0)
    print(f"  100 noisy repetitions: all converged: {bool(np.all(batch['converged']))}")
    print(f"    RMS error / Cramer-Rao bound per stiffness: "
          f"{np.array2string(rms / bound, precision=3)} (target <= 1.2)")
    coverage = np.mean(np.abs(batch["values"] - truth) <= 1.96 * batch["stderr"])
    print(f"    coverage of the 95% intervals: {coverage:.1%}")
    print(f"    100 fits vmapped: {batch_seconds:.2f} s ({100 / batch_seconds:.1f} fits/s)")
    # The same 100 fits on an executor: whole spineid fits (verdicts included) in a loop in
    # this process (`Local`; `spineid.Dask(workers=N)` sends the chunks to worker processes,
    # experiments/benchmark_scale_out.py measures those).
    executor = (spineid.Local() if executor_name == "local" and scheduler is None
                else spineid.Dask(scheduler=scheduler, workers=workers))
    start = time.perf_counter()
    looped = spineid.fit_many(problem, [draws], executor=executor)
    loop_seconds = time.perf_counter() - start
    print(f"    100 fits on {executor.describe()} (whole fits in a loop, compiled once per "
          "process): "
          f"{loop_seconds:.2f} s ({100 / loop_seconds:.1f} fits/s); estimates within "
          f"{np.max(np.abs(looped['values'] - batch['values']) / batch['stderr']):.2g} "
          "standard errors of the vmap's")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "spineid":
        spineid_fit(rtol=float(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "scipy":
        scipy_fit(np.loadtxt(sys.argv[2], delimiter=","), rtol=float(sys.argv[3]))
    else:
        import argparse

        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--executor", choices=("local", "dask"), default="local",
                            help="where the 100 repetitions' whole fits run")
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--scheduler", default=None)
        arguments = parser.parse_args()
        main(arguments.executor, arguments.workers, arguments.scheduler)
