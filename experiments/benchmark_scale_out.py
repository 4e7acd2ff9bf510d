"""Benchmark: many fits of the planar pair on one process and on Dask workers, in one run.

Problem: the bundled 4-axial-spring pair (datasets/axial_4_springs.toml) over 0.2 s at 101
samples with optical-tracking noise (5 um, 0.01 deg); `--fits` noisy records, each fitted with
spineid's Levenberg-Marquardt (`spineid.fit(problem, "lm")`, the whole result: standard errors,
identifiability, verdict) through `spineid.fit_many(..., executor=...)`, chunks of `--chunk`.

Configurations, each timed as a whole (the start of the workers and their compilation
included, as a user waits for them):
1. `Local()`: this process, the fits in a loop (compiled once);
2. `Dask(workers=1)`: a LocalCluster of one worker process;
3. `Dask(workers=2)`: two worker processes (each pinned to a core of its own, the default);
   with `--unpinned` also one and two workers left to the operating system (`pin=False`);
4. with `--devices 2`: `Devices()`, this process's CPU split into two JAX devices
   (`XLA_FLAGS=--xla_force_host_platform_device_count=2`, set by this script before JAX is
   imported), a thread per device;
5. with `--started`: one and two workers of a cluster started beforehand (a `LocalCluster`
   with the executor's own settings, its workers warmed by a few fits each), reached as
   `Dask(scheduler=ADDRESS)`, as a user with a running cluster would: the batch alone, without
   the start of the worker processes, their imports and their tracing.
Efficiency of a configuration = (time of 1 / its time) / its worker processes. Every
configuration's estimates are compared with the local ones (target: equal to 1e-10).

Run: `python experiments/benchmark_scale_out.py [--fits 1000] [--chunk 50] [--devices 2]
[--only local,devices] [--started] [--unpinned]` (`--only`: a subset of the configurations,
by the first word of their labels; the first configuration run also fills the compilation
cache).
Target (issue): two local workers >= 1.7x one on 1,000 fits. Numbers measured are in
docs/performance.md.
"""

import argparse
import os
import tempfile
import time

import numpy as np

NOISE = {"x": 5e-6, "y": 5e-6, "theta": float(np.radians(0.01))}


def problem_and_draws(count: int, seed: int = 0):
    import jax

    import spineid

    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = np.linspace(0.0, 0.2, 101)
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, ts).q))
    problem = spineid.FitProblem(model_file, spineid.Measurement(ts, clean, ("x", "y", "theta")),
                                 ["stiffness"], NOISE)
    draws = clean + np.random.default_rng(seed).normal(size=(count,) + clean.shape) * np.array(
        list(NOISE.values()))
    return problem, draws


def started_cluster(problem, draws, workers: int, chunk: int):
    """Seconds of `fit_many` over `draws` on a cluster of `workers` started and warmed
    beforehand (its workers warmed by a few fits), and the batch's results."""
    import spineid

    with spineid.Dask(workers=workers).started() as executor:
        # Warm every worker: single-fit chunks, four per worker, spread over the idle workers.
        spineid.fit_many(problem, [draws[:4 * workers]], executor=executor, chunk=1)
        clock = time.perf_counter()
        results = spineid.fit_many(problem, [draws], executor=executor, chunk=chunk)
        return time.perf_counter() - clock, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--devices", type=int, default=0,
                        help="also run Devices() over this many host devices")
    parser.add_argument("--started", action="store_true",
                        help="also time one and two workers of a cluster started beforehand")
    parser.add_argument("--unpinned", action="store_true",
                        help="also time one and two local workers left to the operating "
                             "system (Dask(pin=False)) instead of a core each")
    parser.add_argument("--only", default=None,
                        help="configurations to run, e.g. local,devices")
    arguments = parser.parse_args()
    if arguments.devices:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_"
                                   f"platform_device_count={arguments.devices}").strip()
    # (The workers share this run's compilation cache: a fresh folder, so that the first
    # configuration compiles as a first run would.)
    os.environ["SPINEID_CACHE_DIR"] = tempfile.mkdtemp(prefix="spineid-cache-")
    import spineid

    problem, draws = problem_and_draws(arguments.fits)
    print(f"{arguments.fits} fits of the 4-axial-spring pair (101 samples), chunks of "
          f"{arguments.chunk}; {os.cpu_count()} cores")
    configurations = [("local (1 process)", spineid.Local(), 1),
                      ("dask, 1 worker", spineid.Dask(workers=1), 1),
                      ("dask, 2 workers", spineid.Dask(workers=2), 2)]
    if arguments.unpinned:
        configurations += [("unpinned, 1 worker", spineid.Dask(workers=1, pin=False), 1),
                           ("unpinned, 2 workers", spineid.Dask(workers=2, pin=False), 2)]
    if arguments.devices:
        configurations.append((f"devices, {arguments.devices} host", spineid.Devices(), 1))
    if arguments.only:
        chosen = arguments.only.split(",")
        configurations = [c for c in configurations if c[0].split(",")[0].split()[0] in chosen]
    results, times = {}, {}
    for label, executor, workers in configurations:
        clock = time.perf_counter()
        results[label] = spineid.fit_many(problem, [draws], executor=executor,
                                          chunk=arguments.chunk)
        times[label] = time.perf_counter() - clock
    if arguments.started:
        for workers in (1, 2):
            label = f"started, {workers} worker{'s' if workers > 1 else ''}"
            seconds, results[label] = started_cluster(problem, draws, workers, arguments.chunk)
            times[label] = seconds
            configurations.append((label, None, workers))
    base = configurations[0][0]
    print(f"(the first configuration, {base}, also filled the empty compilation cache the "
          "others read)")
    print(f"{'configuration':22s} {'time':>9s} {'fits/s':>8s} {'speed-up':>9s} "
          f"{'efficiency':>10s} {'max |diff| / value':>19s} failed")
    for label, _, workers in configurations:
        speed = times[base] / times[label]
        difference = np.max(np.abs(results[label]["values"] - results[base]["values"])
                            / np.abs(results[base]["values"]))
        print(f"{label:22s} {times[label]:8.1f}s {arguments.fits / times[label]:8.1f} "
              f"{speed:8.2f}x {speed / workers:10.2f} {difference:19.1e} "
              f"{len(results[label]['errors'])}")
    if "dask, 1 worker" in times and "dask, 2 workers" in times:
        print(f"two workers against one worker: "
              f"{times['dask, 1 worker'] / times['dask, 2 workers']:.2f}x (target >= 1.7x)")
    if "unpinned, 1 worker" in times and "unpinned, 2 workers" in times:
        print(f"two workers against one, unpinned: "
              f"{times['unpinned, 1 worker'] / times['unpinned, 2 workers']:.2f}x")
    if arguments.started:
        print(f"two workers against one, clusters started beforehand: "
              f"{times['started, 1 worker'] / times['started, 2 workers']:.2f}x")
    devices = [label for label in times if label.startswith("devices")]
    if devices and "local (1 process)" in times:
        print(f"{devices[0]} against this process alone: "
              f"{times['local (1 process)'] / times[devices[0]]:.2f}x")
    print(f"converged: {int(results[base]['converged'].sum())} of {arguments.fits}; explain "
          f"their data: {int(results[base]['explains_data'].sum())}")


if __name__ == "__main__":
    main()
