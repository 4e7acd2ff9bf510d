"""Errors in both variables across a sharp knee: how biased are a two-phase law's slopes, and
does rounding the law's corner remove the bias? (docs/goodness-of-fit.md, "Errors in both
variables".)

A tester's ramp recorded in time (600 samples over 0-3 mm), its load a two-phase law (knee at
1.2 mm, 40 and 160 N/mm), the displacement measured with 0.05 mm of noise and the load with
2 N. Near the knee a displacement error crosses the kink, which the effective variance's
first-order weights (`spineid.fit_load_law(..., displacement_noise=...)`) do not see: the
load expected at a measured displacement is the sharp law averaged over where the specimen
really was, a law whose corner is rounded over a few displacement-noise deviations. Fitted
here, over the same records: the sharp law with the effective variance; the same law with
its corner rounded (`LawForm(smoothing=...)`, 2, 4 and 6 deviations); the sharp law ignoring
the displacement noise; and scipy's orthogonal distance regression (`scipy.odr`) of the sharp
law, the peer. Printed per slope: its bias over the repetitions in units of its mean
reported error, and its spread over that error (calibration, 1 when the errors hold).

    python experiments/errors_in_variables_knee.py --repetitions 200
"""

import argparse
import warnings

import numpy as np

from spineid import fit_load_law, LawForm
from spineid.io._measurements import LoadDisplacementData

SX, SY = 0.05e-3, 2.0  # m, N
KNEE, K1, K2 = 1.2e-3, 40e3, 160e3


def two_phase(x, k1=K1, k2=K2, load0=0.0):
    return load0 + np.where(x < KNEE, k1 * x, k1 * KNEE + k2 * (x - KNEE))


def record(rng, n=600):
    truth = np.linspace(0.0, 3e-3, n)
    return LoadDisplacementData(displacement=truth + rng.normal(size=n) * SX,
                                load=two_phase(truth) + rng.normal(size=n) * SY,
                                time=np.linspace(0.0, 3.0, n))


def spineid_slopes(data, smoothing, displacement_noise):
    nodes = [data.displacement.min(), KNEE, data.displacement.max()]
    fit = fit_load_law(data, LawForm("piecewise_linear", nodes, smoothing=smoothing),
                       noise=SY, displacement_noise=displacement_noise)
    return [(value, error) for value, error in fit.derived["slopes"]]


def odr_slopes(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from scipy import odr
    fitted = odr.ODR(odr.RealData(data.displacement, data.load, sx=SX, sy=SY),
                     odr.Model(lambda b, x: two_phase(x, b[1], b[2], b[0])),
                     beta0=[0.0, 3e4, 1.2e5]).run()
    errors = np.sqrt(np.diag(fitted.cov_beta))
    return list(zip(fitted.beta[1:], errors[1:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    arguments = parser.parse_args()
    rng = np.random.default_rng(arguments.seed)
    records = [record(rng) for _ in range(arguments.repetitions)]
    fits = {
        "effective variance, sharp law": lambda d: spineid_slopes(d, 0.0, SX),
        "effective variance, corner over 2 sd": lambda d: spineid_slopes(d, 2 * SX, SX),
        "effective variance, corner over 4 sd": lambda d: spineid_slopes(d, 4 * SX, SX),
        "effective variance, corner over 6 sd": lambda d: spineid_slopes(d, 6 * SX, SX),
        "displacement noise ignored": lambda d: spineid_slopes(d, 0.0, None),
        "scipy.odr, sharp law": odr_slopes,
    }
    print(f"{arguments.repetitions} records; per slope (40, 160 N/mm): bias / mean error, "
          "spread / mean error")
    for name, fit in fits.items():
        slopes = np.array([fit(data) for data in records])  # (r, 2 slopes, value and error)
        values, errors = slopes[..., 0], slopes[..., 1]
        bias = (values.mean(axis=0) - np.array([K1, K2])) / errors.mean(axis=0)
        spread = values.std(axis=0) / errors.mean(axis=0)
        print(f"{name:40s} bias {bias[0]:+.2f}, {bias[1]:+.2f}   spread "
              f"{spread[0]:.2f}, {spread[1]:.2f}", flush=True)


if __name__ == "__main__":
    main()
