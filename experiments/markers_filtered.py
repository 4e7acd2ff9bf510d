"""Verdicts of marker fits of an OpenSim model whose markers' noise is low-pass filtered.

The one-level neck of `make_neck_osim.neck_model` (one vertebra on a custom joint of three
rotations and a bushing, gravity, released from 0.25 rad of flexion; written with the `opensim`
package), its three markers seen in a lab's frame turned (90 deg, 0, 0.3 rad) and shifted
(0.5, 0.8, 0.02) m, 41 frames over 0.4 s, simulated by spineid. Each repetition adds 0.2 mm
of noise (`--noise`) per marker coordinate, white noise through a 4th-order Butterworth
low-pass at a quarter of the Nyquist rate (zero phase), scaled to that deviation, as a
motion-capture pipeline filters its markers; the markers move over up to about 10 mm, so
0.2 mm is about 2% of their motion. The bushing's flexion stiffness (4 N m/rad) is fitted
from 5.6 under the default noise model and solver, by the right model and by one that lacks
the bushing's damping (a wrong model). Printed per model: the verdicts' counts, the
estimates, and their errors in standard errors. `--per-channel` judges each channel's smooth
misfit against its own range, as fits did before `FitProblem.misfit_ranges` (the markers'
motion).

Run: `python experiments/markers_filtered.py [--repetitions 24] [--models right wrong]
[--noise 0.2] [--per-channel]` (`--noise`: the markers' noise in mm). What has been measured
is in docs/goodness-of-fit.md.
"""

import argparse
import dataclasses
import pathlib
import tempfile
import time

import jax.numpy as jnp
import numpy as np
from scipy import signal

import spineid
from make_neck_osim import neck_model

FRAME = '\n[lab_frame]\ntranslation = [0.5, 0.8, 0.02]\nrotation = ["90 deg", 0.0, 0.3]\n'
TABLES = {"truth": "",
          "right": "[bushing_1]\nrotational_stiffness = [3.0, 2.5, 5.6]\n",
          "wrong": "[bushing_1]\nrotational_stiffness = [3.0, 2.5, 5.6]\n"
                   "rotational_damping = [0.0, 0.0, 0.0]\n"}
FREE = ["bushing_1.rotational_stiffness[2]"]
TRUTH = 4.0  # N m/rad, the builder's flexion stiffness


def marker_model_file(folder: pathlib.Path, osim_path: pathlib.Path, kind: str):
    """The model file of `kind` (a key of `TABLES`) observing its own markers."""
    path = folder / f"{kind}.toml"
    path.write_text(f'kind = "opensim"\nfile = "{osim_path.name}"\n\n{TABLES[kind]}{FRAME}')
    model_file = spineid.load_model_file(path)
    return dataclasses.replace(model_file, model=model_file.model.observing_markers())


def main():
    import opensim as osim  # (a test-time dependency: it writes the model file)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=24)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--models", nargs="+", default=["right", "wrong"],
                        choices=("right", "wrong"))
    parser.add_argument("--noise", type=float, default=0.2,
                        help="the markers' noise, mm (standard deviation after the filter)")
    parser.add_argument("--per-channel", action="store_true",
                        help="judge each channel's misfit against its own range")
    options = parser.parse_args()
    if options.per_channel:
        spineid.FitProblem.misfit_ranges = spineid.FitProblem.channel_ranges
    folder = pathlib.Path(tempfile.mkdtemp())
    osim_path = neck_model(osim, folder, levels=1, locked=False)
    truth = marker_model_file(folder, osim_path, "truth").model
    ts = np.linspace(0.0, 0.4, 41)
    clean = np.array([truth.observe(q) for q in spineid.simulate(truth, jnp.asarray(ts)).q])
    print(f"markers' ranges (mm): {np.round(1e3 * np.ptp(clean, axis=0), 2).tolist()}; "
          f"noise {options.noise} mm; {options.repetitions} repetitions, seed {options.seed}"
          + (", each channel judged against its own range" if options.per_channel else ""))
    rng = np.random.default_rng(options.seed)
    low_pass = signal.butter(4, 0.25)
    for kind in options.models:
        start = marker_model_file(folder, osim_path, kind)
        levels, values, errors, clock = [], [], [], time.perf_counter()
        for _ in range(options.repetitions):
            smooth = signal.filtfilt(*low_pass, rng.standard_normal(clean.shape), axis=0)
            data = clean + 1e-3 * options.noise * smooth / smooth.std(axis=0)
            measurement = spineid.Measurement(ts, data, truth.observable_names)
            result = spineid.fit(spineid.FitProblem(start, measurement, FREE))
            levels.append(result.goodness_of_fit.level)
            values.append(float(result.values[0]))
            errors.append(float(result.stderr[0]))
        z = (np.array(values) - TRUTH) / np.array(errors)
        print(f"{kind}: {dict(sorted((lv, levels.count(lv)) for lv in set(levels)))}; "
              f"stiffness {np.mean(values):.4f} (sd {np.std(values):.4f}) N m/rad for {TRUTH}; "
              f"errors in standard errors: sd {np.std(z):.2f}, largest {np.max(np.abs(z)):.2f}; "
              f"{(time.perf_counter() - clock) / options.repetitions:.1f} s per fit", flush=True)


if __name__ == "__main__":
    main()
