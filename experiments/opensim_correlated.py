"""Errors, coverage and verdicts of fits of an OpenSim model on tracking noise as labs have it.

The bundled OpenSim neck (datasets/neck_bushings.osim, read with `spineid.read_osim`: three
vertebrae on bushings, released from its default pose under gravity), 0.6 s of its free
coordinates at 1 kHz (601 samples per coordinate), simulated by spineid from the file's own
stiffnesses. Noise of 0.01 degree per coordinate: white, AR(1) at rho 0.6, or white noise
low-pass filtered as motion-capture pipelines filter (4th-order Butterworth at 40 Hz, zero
phase; `coverage_correlated.tracking_noise`). Each repetition draws new noise and fits the three
rotational stiffnesses of the C7-C6 bushing (N m/rad; the start 1.4 times the file's) under the
default noise model (`"auto"`) and as if the noise were white (`"white"`). Printed per noise and
fit, for the three stiffnesses: the calibration (the spread of the estimates over the mean
reported standard error: 1 when the errors are right), the coverage of the 95% intervals (with
the binomial standard error of the coverage) and the share of fits accepted (the model explains
or describes the data), as `coverage_correlated.py` prints them for the pair of springs.

Run: `python experiments/opensim_correlated.py [--repetitions 40] [--noise filtered ...]
[--noise-models auto white]`. What has been measured is in docs/goodness-of-fit.md.
"""

import argparse
import dataclasses
import time

import jax.numpy as jnp
import numpy as np

import spineid
from coverage_correlated import row, tracking_noise
from spineid.elements._parameters import select_parameters

FREE = ["C7_C6_bushing.rotational_stiffness"]
SD = np.radians(0.01)  # rad: the tracking noise of each coordinate
KINDS = ("white", "AR(1) rho 0.6", "filtered")


def coordinate_noise(rng, kind, shape):
    # `shape` (samples, coordinates) of noise of standard deviation SD per coordinate.
    if kind == "white":
        return SD * rng.normal(size=shape)
    return tracking_noise(rng, kind, shape[0], np.full(shape[1], SD))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=40)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--noise", nargs="+", default=list(KINDS), choices=KINDS,
                        help="the kinds of noise, in this order")
    parser.add_argument("--noise-models", nargs="+", default=["auto", "white"],
                        choices=("auto", "white"), help="the fits' noise models, in this order")
    options = parser.parse_args()
    rng = np.random.default_rng(options.seed)
    model_file = spineid.load_model_file(spineid.dataset_path("neck_bushings.osim"))
    model = model_file.model
    parameters = select_parameters(model_file.parameters, FREE)
    truth = np.concatenate([np.ravel(np.asarray(p.get(model))) for p in parameters])
    # (a model file's parameters are a fit's start)
    start = dataclasses.replace(model_file, model=spineid.apply_values(
        model, parameters, jnp.asarray(1.4 * truth)))
    ts = np.linspace(0.0, 0.6, 601)
    clean = np.array([model.observe(q) for q in spineid.simulate(model, jnp.asarray(ts)).q])
    print(f"OpenSim neck, {clean.shape[1]} coordinates x {ts.size} samples; free {FREE}, truth "
          f"{np.round(truth, 4)} N m/rad; {options.repetitions} repetitions")
    print(f"{'noise':14s} {'fit':6s} calibration (3 stiffnesses), coverage 95%, accepted")
    for kind in options.noise:
        for noise_model in options.noise_models:
            values, errors, accepted, clock = [], [], 0, time.perf_counter()
            for _ in range(options.repetitions):
                data = clean + coordinate_noise(rng, kind, clean.shape)
                measurement = spineid.Measurement(ts, data, model.observable_names)
                problem = spineid.FitProblem(start, measurement, FREE,
                                             noise_model=noise_model)
                result = spineid.fit(problem)
                values.append(result.values)
                errors.append(result.stderr)
                accepted += bool(result.accepted)
            row(kind, noise_model, values, errors, accepted, truth, options.repetitions)
            print(f"    ({(time.perf_counter() - clock) / options.repetitions:.1f} s per fit)",
                  flush=True)


if __name__ == "__main__":
    main()
