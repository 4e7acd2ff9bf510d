"""Benchmark: whole calls of spineid on lab-sized jobs against the peer doing the same job, in one run.

1. Tables: 78 two-phase shear tests (1400-1600 points each, a tester's own columns `disp_mm`
   and `force_N`) in one `spineid table FOLDER --n-nodes 3 --free-breakpoints` call (a fresh
   process: import, compilation, 78 fits, 78 plots, summary.csv and the population plot), run
   twice: with an empty compilation cache and with the cache the first call left. The peer, in
   a fresh process of its own: numpy brute force reading the same files, one least-squares
   solve per breakpoint on a grid of 3000, then golden-section refinement (and pwlf's
   `PiecewiseLinFit.fit(2)` where pwlf is installed). Both optima are compared file by file (the
   sum of squared residuals of spineid's law against the brute force's).
2. One trajectory fit as a whole process: `spineid fit` of the bundled 4-axial-spring pair
   (501 samples, stiffnesses from a start 20-30% off) as a first process (empty cache) and as
   a second (the cache of the first), against scipy `least_squares` + `solve_ivp(DOP853)` as a
   process of its own (experiments/benchmark_fit.py's peer, rtol 1e-6, the tolerance that
   reproduces the reference estimate there).
3. A batch of 40 trajectory fits of that model (noisy records of 451-501 samples, as trimmed
   tests are) in one `spineid fit FOLDER --each` call (and again with `--no-plots`, and with
   `--no-plots --threads N`), against
   the 40 scipy fits in one process; and the same 40 fits from Python (`spineid.fit` in a loop,
   one process), with an empty cache and again as a second process (its compiled and traced
   programs on disk), and as one `spineid.fit_batch` on `spineid.Local(threads=N)` (N the
   cores this process may use; a second process).

Run: `python experiments/benchmark_cold_start.py [--tables 78] [--fits 40] [--parts 123]
[--repeats 5]` (part 2 runs its three processes in turn `--repeats` times and prints medians).
Targets (issue): 78 table fits in <= 0.5 s per file for the whole call; `spineid fit` as a second
process faster than scipy's whole process; 40 trajectory fits >= 20x faster than 40 scipy fits.
Numbers measured are in docs/performance.md.
"""

import argparse
import compileall
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

NOISE = "x=5e-6,y=5e-6,theta=1.745e-4"


def write_tables(folder: pathlib.Path, count: int) -> None:
    """Two-phase shear tests: a compliant phase into a stiffer one at a random knee (mm, N),
    with 0.5% noise and a 1 um displacement resolution."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        rng = np.random.default_rng(2000 + k)
        n = int(rng.integers(1400, 1601))
        x = np.round(np.sort(rng.uniform(0.0, 3.0, n)), 3)
        knee, soft, stiff = rng.uniform(0.8, 2.0), rng.uniform(5, 20), rng.uniform(40, 120)
        y = soft * x + (stiff - soft) * np.maximum(x - knee, 0.0)
        y = y + 0.005 * np.ptp(y) * rng.standard_normal(n)
        group = "Ant" if k % 2 else "Pos"
        np.savetxt(folder / f"specimen{k:02d}_{group}.csv", np.column_stack([x, y]),
                   delimiter=",", header="disp_mm,force_N", comments="", fmt="%.6g")


def brute_force_folder(folder: str) -> None:
    """The peer of part 1, run as its own process: prints a JSON list of the sums of squared
    residuals (N^2), one per file in name order."""
    from types import SimpleNamespace

    from benchmark_breakpoints import brute_force  # (numpy only)

    results = {}
    for path in sorted(pathlib.Path(folder).glob("*.csv")):
        table = np.loadtxt(path, delimiter=",", skiprows=1)
        results[path.stem] = brute_force(SimpleNamespace(displacement=table[:, 0],
                                                         load=table[:, 1]))
    print(json.dumps(results))


def pwlf_folder(folder: str) -> None:
    import pwlf

    results = {}
    for path in sorted(pathlib.Path(folder).glob("*.csv")):
        table = np.loadtxt(path, delimiter=",", skiprows=1)
        model = pwlf.PiecewiseLinFit(table[:, 0], table[:, 1])
        model.fit(2)
        results[path.stem] = float(model.ssr)
    print(json.dumps(results))


def timed_process(arguments, environment=None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(arguments, capture_output=True, text=True,
                          env=dict(os.environ, **(environment or {})))
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1) and not 10 <= done.returncode <= 110:
        raise RuntimeError(f"{arguments[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout


def spineid_ssr(out: pathlib.Path, folder: pathlib.Path) -> dict:
    """The sum of squared residuals (N^2, the file's own units) of each fitted law."""
    import tomllib

    results = {}
    for path in sorted(folder.glob("*.csv")):
        law = tomllib.loads((out / path.stem / "law.toml").read_text())["law"]
        table = np.loadtxt(path, delimiter=",", skiprows=1)
        nodes = np.asarray(law["displacement"]) * 1e3  # m -> mm, as the file
        predicted = np.interp(table[:, 0], nodes, law["load"])
        results[path.stem] = float(np.sum((predicted - table[:, 1]) ** 2))
    return results


def part_tables(work: pathlib.Path, count: int) -> None:
    folder = work / "tables"
    write_tables(folder, count)
    cache = work / "cache-tables"
    command = [sys.executable, "-m", "spineid", "table", str(folder), "--displacement",
               "disp_mm", "--load", "force_N", "--n-nodes", "3", "--free-breakpoints",
               "--group", "(Ant|Pos)", "--overwrite"]
    first, _ = timed_process(command + ["--out", str(work / "t1")],
                             {"SPINEID_CACHE_DIR": str(cache)})
    second, _ = timed_process(command + ["--out", str(work / "t2")],
                              {"SPINEID_CACHE_DIR": str(cache)})
    peer, printed = timed_process([sys.executable, __file__, "--brute-force", str(folder)])
    brute = json.loads(printed)
    ours = spineid_ssr(work / "t1", folder)
    relative = np.array([(ours[k] - brute[k]) / brute[k] for k in brute])
    print(f"1. {count} two-phase table fits ({folder}) in one call, whole process:")
    print(f"   spineid table, empty cache   {first:7.2f} s  ({first / count:.3f} s per file; "
          "target <= 0.5)")
    print(f"   spineid table, cache warm    {second:7.2f} s  ({second / count:.3f} s per file)")
    print(f"   numpy brute force            {peer:7.2f} s  ({peer / count:.3f} s per file)   "
          f"ratio (empty cache) {peer / first:.2f}x")
    print(f"   sum of squares, spineid vs brute force: median {np.median(relative):+.2e}, "
          f"worst {relative.max():+.2e} (negative: spineid lower); fits at least as good: "
          f"{int(np.sum(relative <= 1e-9))}/{relative.size}")
    try:
        import pwlf  # noqa: F401
    except ImportError:
        print("   pwlf: not installed")
    else:
        seconds, printed = timed_process([sys.executable, __file__, "--pwlf", str(folder)])
        theirs = json.loads(printed)
        worse = np.array([(theirs[k] - brute[k]) / brute[k] for k in brute])
        print(f"   pwlf fit(2)                  {seconds:7.2f} s   worst sum of squares vs "
              f"brute force {worse.max():+.2e}")


def write_fit_inputs(work: pathlib.Path, count: int) -> tuple[pathlib.Path, pathlib.Path]:
    """The start model (stiffnesses off by benchmark_fit.START) and `count` noisy records of
    the bundled pair, trimmed to 451-501 samples; returns (model, folder)."""
    import benchmark_fit
    import spineid
    from spineid.io import dumps_toml

    model_file, ts, clean, _ = benchmark_fit.truth_and_data()
    document = model_file.document
    for spring, factor in zip(document["springs"], benchmark_fit.START):
        spring["stiffness"] = float(spring["stiffness"] * factor)
    model = work / "start.toml"
    model.write_text(dumps_toml(document))
    folder = work / "records"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(11)
    for k in range(count):
        n = 501 if k == 0 else int(rng.integers(451, 502))
        data = clean[:n] + rng.normal(size=(n, 3)) * benchmark_fit.SIGMA
        spineid.write_table(folder / f"run{k:02d}.csv",
                            {"t": ts[:n], "x": data[:, 0], "y": data[:, 1],
                             "theta": data[:, 2]})
    return model, folder


def scipy_folder(folder: str) -> None:
    """The peer of part 3 as its own process: scipy fits of every record in `folder`."""
    import benchmark_fit

    for path in sorted(pathlib.Path(folder).glob("*.csv")):
        table = np.loadtxt(path, delimiter=",", skiprows=1)
        benchmark_fit.scipy_fit(table[:, 1:], rtol=1e-6, ts=table[:, 0])


def part_process(work: pathlib.Path, model: pathlib.Path, folder: pathlib.Path,
                 repeats: int) -> None:
    cache = work / "cache-fit"
    record = folder / "run00.csv"
    command = [sys.executable, "-m", "spineid", "fit", str(model), str(record), "--free",
               "stiffness", "--noise", NOISE, "--overwrite"]
    environment = {"SPINEID_CACHE_DIR": str(cache)}
    first, _ = timed_process(command + ["--out", str(work / "f1")], environment)
    single = work / "single"
    single.mkdir(exist_ok=True)
    (single / record.name).write_bytes(record.read_bytes())
    # The three processes in turn, `repeats` times: a machine's speed drifts (a shared
    # virtual machine by 30% from one run to the next), and a drift then reaches all three.
    second, numbers, peer = [], [], []
    for _ in range(repeats):
        second.append(timed_process(command + ["--out", str(work / "f2")], environment)[0])
        numbers.append(timed_process(command + ["--out", str(work / "f3"), "--no-plots"],
                                     environment)[0])
        peer.append(timed_process([sys.executable, __file__, "--scipy", str(single)])[0])

    def shown(times):
        return f"{np.median(times):5.2f} s (median of {len(times)}; {min(times):.2f}-{max(times):.2f})"

    print("2. one fit of the 4-axial-spring pair (501 samples) as a whole process:")
    print(f"   spineid fit, first process (empty cache)  {first:6.2f} s")
    print(f"   spineid fit, second process (cache)       {shown(second)}")
    print(f"   the same, --no-plots (numbers only)       {shown(numbers)}")
    print(f"   scipy process                             {shown(peer)}")
    print(f"   ratio scipy / spineid fit {np.median(peer) / np.median(second):.2f}x (target > 1),"
          f" with --no-plots {np.median(peer) / np.median(numbers):.2f}x; run by run "
          f"{min(p / s for p, s in zip(peer, second)):.2f}-"
          f"{max(p / s for p, s in zip(peer, second)):.2f}x")


def part_batch(work: pathlib.Path, model: pathlib.Path, folder: pathlib.Path, count: int
               ) -> None:
    command = [sys.executable, "-m", "spineid", "fit", str(model), str(folder), "--each",
               "--free", "stiffness", "--noise", NOISE, "--overwrite", "--out",
               str(work / "batch")]
    ours, _ = timed_process(command, {"SPINEID_CACHE_DIR": str(work / "cache-fit")})
    bare, _ = timed_process(command[:-1] + [str(work / "batch-bare"), "--no-plots"],
                            {"SPINEID_CACHE_DIR": str(work / "cache-fit")})
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
    bare_threads, _ = timed_process(command[:-1] + [str(work / "batch-threads"), "--no-plots",
                                                    "--threads", str(threads)],
                                    {"SPINEID_CACHE_DIR": str(work / "cache-fit")})
    peer, _ = timed_process([sys.executable, __file__, "--scipy", str(folder)])
    loop = [timed_process([sys.executable, __file__, "--python-loop", str(model), str(folder)],
                          {"SPINEID_CACHE_DIR": str(work / "cache-loop")})[0]
            for _ in range(2)]
    threaded, _ = timed_process([sys.executable, __file__, "--python-loop", str(model),
                                 str(folder), str(threads)],
                                {"SPINEID_CACHE_DIR": str(work / "cache-loop")})
    print(f"3. {count} fits of the pair (records of 451-501 samples):")
    print(f"   spineid fit --each (one call, with every output and plot)  {ours:6.2f} s")
    print(f"   spineid fit --each --no-plots (the same, no per-file plot) {bare:6.2f} s")
    print(f"   the same on --threads {threads}                                {bare_threads:6.2f} s")
    print(f"   spineid.fit in a loop (a Python process, no outputs)       {loop[0]:6.2f} s "
          f"(empty cache), {loop[1]:.2f} s (a second process)")
    print(f"   spineid.fit_batch on Local(threads={threads}) (a second process)      "
          f"{threaded:6.2f} s")
    print(f"   scipy, {count} fits in one process                           {peer:6.2f} s")
    print(f"   ratio scipy / spineid: {peer / ours:.1f}x (command), {peer / bare:.1f}x (command "
          f"without plots), {peer / bare_threads:.1f}x (without plots, {threads} threads), "
          f"{peer / loop[0]:.1f}x and "
          f"{peer / loop[1]:.1f}x (Python loop), {peer / threaded:.1f}x (fit_batch, "
          f"{threads} threads); target >= 20x")


def python_loop(model: str, folder: str, threads: int = 0) -> None:
    """The 40 fits from Python: `spineid.fit` in a loop (`threads` 0), or `spineid.fit_batch`
    on `spineid.Local(threads=threads)`."""
    import spineid

    noise = {k: float(v) for k, v in (item.split("=") for item in NOISE.split(","))}
    model_file = spineid.load_model_file(model)
    problems = [spineid.FitProblem(model_file,
                                   spineid.Measurement.from_csv(path, ("x", "y", "theta")),
                                   ["stiffness"], noise)
                for path in sorted(pathlib.Path(folder).glob("*.csv"))]
    if threads:
        fits = spineid.fit_batch(problems, executor=spineid.Local(threads=threads))
        assert not fits.errors and fits.converged.all(), fits.summary()
    else:
        for problem in problems:
            spineid.fit(problem)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=78)
    parser.add_argument("--fits", type=int, default=40)
    parser.add_argument("--parts", default="123")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs of each process in part 2 (medians printed)")
    arguments = parser.parse_args()
    # spineid's bytecode compiled first, as pip compiles an installed package's (and scipy's
    # here): an editable install under PYTHONDONTWRITEBYTECODE would compile every module of
    # spineid again in every process (about 0.15 s).
    compileall.compile_dir(HERE.parent / "spineid", quiet=1)
    with tempfile.TemporaryDirectory() as directory:
        work = pathlib.Path(directory)
        print(f"cold start and batches ({os.cpu_count()} cores; each number one run but in "
              "part 2)")
        if "1" in arguments.parts:
            part_tables(work, arguments.tables)
        if "2" in arguments.parts or "3" in arguments.parts:
            model, folder = write_fit_inputs(work, arguments.fits)
            if "2" in arguments.parts:
                part_process(work, model, folder, arguments.repeats)
            if "3" in arguments.parts:
                part_batch(work, model, folder, arguments.fits)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--brute-force":
        brute_force_folder(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--pwlf":
        pwlf_folder(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--scipy":
        scipy_folder(sys.argv[2])
    elif len(sys.argv) > 3 and sys.argv[1] == "--python-loop":
        python_loop(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:5]))
    else:
        main()
