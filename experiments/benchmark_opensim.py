"""OpenSim models in spineid against OpenSim itself, on the same machine in the same run
(issue 52's performance targets; docs/performance.md "OpenSim models" has the numbers):

1. cold: reading an N-body neck `.osim` and compiling and running its simulation, in a fresh
   process without the persistent compilation cache (target: under 10 s for 8 bodies);
2. warm: one second of motion, spineid (Tsit5) against OpenSim's `Manager` at the same
   tolerance, each one's error measured against a tight reference of its own (target: spineid
   at least 10 times faster);
3. identification: the levels' rotational stiffness (3 per level) fitted to OpenSim-simulated
   noisy coordinates from a start 30 % off, spineid's gradient-based fit against scipy's
   `least_squares` with finite differences over OpenSim's `Manager` (target: spineid faster).

    python experiments/benchmark_opensim.py --levels 8 --fit-levels 3

Needs the `opensim` package (PyPI `opensim`). Prints one table; nothing is written but temporary
files.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_neck_osim import neck_model  # noqa: E402

NAMES = ("C7", "C6", "C5", "C4", "C3", "C2", "C1", "head")

COLD = """
import sys, time
t0 = time.perf_counter()
import jax.numpy as jnp
import spineid
model = spineid.read_osim(sys.argv[1])
t1 = time.perf_counter()
simulation = spineid.simulate(model, jnp.linspace(0.0, 1.0, 11), rtol=1e-8, atol=1e-8)
simulation.q.block_until_ready()
print(t1 - t0, time.perf_counter() - t1)
"""


def opensim_run(osim, path, times, accuracy):
    """(seconds, coordinates (k, n)) of OpenSim's Manager from the model's defaults."""
    model = osim.Model(str(path))
    state = model.initSystem()
    coordinates = model.getCoordinateSet()
    names = [coordinates.get(i).getName() for i in range(coordinates.getSize())
             if not coordinates.get(i).getDefaultLocked() and not
             coordinates.get(i).isDependent(state)]
    start = time.perf_counter()
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(accuracy)
    state.setTime(0.0)
    manager.initialize(state)
    rows = []
    for t in times:
        if t > 0.0:
            state = manager.integrate(float(t))
        rows.append([coordinates.get(name).getValue(state) for name in names])
    return time.perf_counter() - start, names, np.array(rows)


def cold(path) -> tuple[float, float]:
    env = dict(os.environ, SPINEID_CACHE="off")
    out = subprocess.run([sys.executable, "-c", COLD, str(path)], capture_output=True,
                         text=True, env=env, check=True)
    read, compile_and_run = map(float, out.stdout.split()[-2:])
    return read, compile_and_run


def warm(osim, path, tolerance):
    import jax.numpy as jnp
    import spineid

    model = spineid.read_osim(path)
    times = np.linspace(0.0, 1.0, 11)
    reference = spineid.simulate(model, jnp.asarray(times), rtol=1e-12, atol=1e-12).q
    run = spineid.simulate(model, jnp.asarray(times), rtol=tolerance, atol=tolerance)
    run.q.block_until_ready()
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        spineid.simulate(model, jnp.asarray(times), rtol=tolerance,
                         atol=tolerance).q.block_until_ready()
        seconds.append(time.perf_counter() - start)
    ours = min(seconds), float(np.max(np.abs(np.asarray(run.q - reference))))
    _, _, tight = opensim_run(osim, path, times, 1e-12)
    theirs_seconds, _, theirs = opensim_run(osim, path, times, tolerance)
    return ours, (theirs_seconds, float(np.max(np.abs(theirs - tight)))), float(
        np.max(np.abs(np.asarray(reference) - tight)))


def identification(osim, folder, levels, noise=2e-4):
    """(spineid seconds, scipy+OpenSim seconds, their largest relative errors)."""
    from scipy.optimize import least_squares

    import spineid
    from spineid.cli import main

    truth = neck_model(osim, folder, levels=levels, names=NAMES[:levels],
                       file_name="truth.osim")
    times = np.linspace(0.0, 0.6, 61)
    _, names, clean = opensim_run(osim, truth, times, 1e-10)
    rng = np.random.default_rng(0)
    data = clean + noise * rng.standard_normal(clean.shape)
    table = osim.TimeSeriesTable()
    table.setColumnLabels(osim.StdVectorString(names))
    for k, t in enumerate(times):
        table.appendRow(float(t), osim.RowVector([float(v) for v in data[k]]))
    table.addTableMetaDataString("inDegrees", "no")
    osim.STOFileAdapter.write(table, str(folder / "motion.sto"))
    model = spineid.read_osim(truth)
    true = np.concatenate([np.asarray(b.rotational_stiffness) for b in model.elements])
    start = 1.3 * true
    toml = ['kind = "opensim"\nfile = "truth.osim"\n']
    for k, bushing in enumerate(model.elements):
        values = ", ".join(repr(float(v)) for v in start[3 * k:3 * k + 3])
        toml.append(f"[{bushing.label}]\nrotational_stiffness = [{values}]\n")
    (folder / "start.toml").write_text("\n".join(toml))
    begin = time.perf_counter()
    main(["fit", str(folder / "start.toml"), str(folder / "motion.sto"), "--free",
          "bushings.rotational_stiffness", "--noise-model", "white", "--no-plots", "--out",
          str(folder / "fit"), "--overwrite"])
    ours_seconds = time.perf_counter() - begin
    fitted = spineid.read_osim(folder / "fit" / "fitted.osim")
    ours = np.concatenate([np.asarray(b.rotational_stiffness) for b in fitted.elements])
    parameters = [p for p in spineid.declared_parameters(model)
                  if p.group == "bushings.rotational_stiffness"]

    def residuals(values):
        # (the trial file written by spineid's writer: the truth's text, these numbers)
        trial = spineid.apply_values(model, parameters, np.asarray(values))
        spineid.export_model(trial, "opensim", folder / "trial.osim")
        return (opensim_run(osim, folder / "trial.osim", times, 1e-8)[2] - data).ravel()

    begin = time.perf_counter()
    theirs = least_squares(residuals, start, diff_step=1e-6, x_scale=true, xtol=1e-8,
                           ftol=1e-10, bounds=(0.0, np.inf)).x
    theirs_seconds = time.perf_counter() - begin

    def outcome(values):
        # (largest and median relative error, how many within 2 %, and the RMS of the
        # residuals of OpenSim's simulation of these values against the data, rad)
        errors = np.abs(values / true - 1)
        return (float(np.max(errors)), float(np.median(errors)), int(np.sum(errors < 0.02)),
                float(np.sqrt(np.mean(residuals(values) ** 2))))

    return ours_seconds, theirs_seconds, outcome(ours), outcome(theirs)


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=8, help="bodies of the neck (<= 8)")
    parser.add_argument("--fit-levels", type=int, default=3,
                        help="levels of the identification (3 parameters each; 0 skips it)")
    parser.add_argument("--tolerance", type=float, default=1e-8)
    arguments = parser.parse_args()
    import opensim as osim

    osim.Logger.setLevelString("error")  # (not a report per integration)
    with tempfile.TemporaryDirectory() as name:
        folder = pathlib.Path(name)
        path = neck_model(osim, folder, levels=arguments.levels,
                          names=NAMES[:arguments.levels], file_name="neck.osim")
        read, compile_and_run = cold(path)
        print(f"cold ({arguments.levels} bodies, fresh process, no compilation cache): read "
              f"{read:.2f} s (with imports), compile and simulate 1 s: {compile_and_run:.2f} s")
        (ours, ours_error), (theirs, theirs_error), between = warm(osim, path,
                                                                 arguments.tolerance)
        print(f"warm 1 s of motion at tolerance {arguments.tolerance:g}: spineid "
              f"{ours * 1e3:.1f} ms (error {ours_error:.1e} rad), OpenSim Manager "
              f"{theirs * 1e3:.1f} ms (error {theirs_error:.1e} rad): ratio OpenSim/spineid "
              f"{theirs / ours:.2f}; the two tight references differ by {between:.1e} rad")
        if arguments.fit_levels:
            ours_s, theirs_s, ours, theirs = identification(osim, folder,
                                                            arguments.fit_levels)
            n = 3 * arguments.fit_levels

            def told(outcome):
                largest, median, within, rms = outcome
                return (f"largest error {largest:.1%}, median {median:.2%}, {within} of {n} "
                        f"within 2 %, residual RMS {rms:.3g} rad")

            print(f"identification of {n} rotational stiffnesses (noise 2e-4 rad): spineid "
                  f"fit {ours_s:.1f} s ({told(ours)}), scipy least_squares over OpenSim "
                  f"{theirs_s:.1f} s ({told(theirs)}): ratio {theirs_s / ours_s:.2f}")


if __name__ == "__main__":
    main_()
