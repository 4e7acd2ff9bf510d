"""Errors, coverage and verdicts of load-law fits on data as testers record them: correlated noise.

A quasi-static ramp of a continuous two-phase law (1500 points, 0-3 mm, a knee at 1.2 mm, 40 and
160 N/mm), its load noise correlated from sample to sample: AR(1) at rho 0.3, 0.6 and 0.9, and
white noise filtered by a 4th-order Butterworth low-pass (zero phase, cut-off at a 20th of the
sampling rate, as a tester's signal conditioning filters). Each repetition draws new noise and
fits the law with `free_breakpoints=True` under the default noise model (`"auto"`), as if the
noise were white, and under the noise model given (`"given"`: the lab characterised its noise
beforehand, `characterised`). Printed per noise and fit: for the knee and the two
slopes, the calibration (the spread of the estimates across repetitions over the mean reported
standard error: 1 when the errors are right), the coverage of the 95% intervals (estimate +-
1.96 standard errors, with the binomial standard error of the coverage), and the share of fits
accepted (`GoodnessOfFit.accepted`:
the model explains or describes the data). Then the wrong model: a third phase (a yield to 40
N/mm from 2.4 mm) fitted as two phases, and the share flagged (`does_not_describe`). Finally
the time of a fit under `"auto"` over that of the white fit (both warm).

Trajectory fits (`--part trajectory`): the bundled pair of four axial springs
(datasets/axial_4_springs.toml: its own loads, 0.5 s at 1 kHz, 501 samples of x, y and theta),
its four stiffnesses free, the tracking noise (5 um, 5 um, 0.01 degree) AR(1) at rho 0.3, 0.6
and 0.9, or white noise low-pass filtered as motion-capture pipelines filter markers (4th-order
Butterworth at 40 Hz, zero phase). The same statistics per stiffness (the noise estimated,
`spineid.fit` with the default `Auto` solver), and for the wrong model the pair fitted without
its dampers (Levenberg-Marquardt from the file's stiffnesses). `--part trajectory-given`: the
same fits under the noise model a lab gives after recording a still specimen
(`tracking_characterised`: rho known, or each channel's AR(10) of the filtered noise).
`--part trajectory-exact`: the same fit under filtered noise, linearised at the truth, against
the Cramer-Rao bound of the filter's exact covariance, the autoregressions estimated from the
noise itself and, as the fits do, from the residuals (`trajectory_exact_part`), and two
remedies tried for the shortfall of the latter: prewhitened HAC errors, and the fit's absorbed
part added back to the residuals' autocovariances.

Stiffness matrices (`--part stiffness`): a tester's sweep of 1000 rows moving all six degrees of
freedom at once (1 mm, 8 degrees; sinusoids of 1-3.5 cycles), the loads of Christophy et al.'s
eq 24 matrix (`spineid.K_F_E`) with load-cell noise (2 N, 0.05 N m) AR(1) at rho 0.3, 0.6 and
0.9 or Butterworth-filtered (cut-off at a 20th of the sampling rate), the full matrix fitted (21
entries, the noise estimated). Calibration and coverage are summarised over the 21 entries
(median and range); the wrong model is a joint twice as stiff at the extremes of each motion.

Segment fits (`--part segment`): the C5-C6 segment's nine load cases recorded one after another
as ramps (90 rows, `segment_record`), the displacements' noise (5 um, 0.01 degree) AR(1) or
filtered along the rows; the facet and bushing stiffnesses fitted through the equilibria
(`segment_part`).

A rounded knee (`--part table-rounded`): the same ramp with the knee rounded over 0.3 mm
(`smoothing`), fitted with that smoothing under AR(1) rho 0.6 and 0.9 and filtered noise
(`rounded_part`): whether the sharp knee's too-small errors under strong correlation are those of
the kink.

Run: `python experiments/coverage_correlated.py [--repetitions 200] [--part
table|table-rounded|trajectory|trajectory-verdicts|trajectory-given|trajectory-exact|stiffness|
segment|segment-far]`.
The measured tables are in docs/goodness-of-fit.md.
"""

import argparse
import dataclasses
import time
import tomllib

import jax
import numpy as np
from scipy import signal

import spineid
from spineid.elements._parameters import select_parameters
from spineid.identify._common._noise_model import autocovariances, levinson_durbin

N = 1500
KNEE, SLOPES, SD = 1.2, (40.0, 160.0), 2.0  # mm, N/mm, N (the load noise's sd)


def two_phase(x):
    return np.where(x < KNEE, SLOPES[0] * x, SLOPES[0] * KNEE + SLOPES[1] * (x - KNEE))


def yielding(x):
    return np.where(x < 2.4, two_phase(x), two_phase(2.4) + 40.0 * (x - 2.4))


def noise(rng, kind):
    if kind == "filtered":
        b, a = signal.butter(4, 0.1)  # cut-off at 0.05 of the sampling rate (Nyquist 0.5)
        e = signal.filtfilt(b, a, rng.normal(size=N + 400))[200:-200]
        return SD * e / np.std(e)
    rho = float(kind.split()[-1])
    a = rng.normal(size=N + 300) * SD * np.sqrt(1 - rho ** 2)
    e = np.zeros(N + 300)
    for t in range(1, e.size):
        e[t] = rho * e[t - 1] + a[t]
    return e[300:]


def characterised(rng, kind, order=10):
    """The noise model a lab gives after recording its tester's noise alone for a while (20
    ramps' worth, a still specimen): AR(1) at the rho it knows, or the filtered noise's
    Yule-Walker autoregression of `order`, as `spineid.AR(coefficients=...)`."""
    if kind != "filtered":
        return spineid.AR(coefficients=(float(kind.split()[-1]),))
    record = np.concatenate([noise(rng, kind) for _ in range(20)])
    gamma, _ = autocovariances([record], order)
    return spineid.AR(coefficients=tuple(levinson_durbin(gamma, order)[order][0]))


def fit(law, rng, kind, noise_model):
    x = np.linspace(0.0, 3.0, N)
    data = spineid.LoadDisplacementData(displacement=x * 1e-3, load=law(x) + noise(rng, kind))
    return spineid.fit_load_law(data,
                                spineid.LawForm("piecewise_linear", n_nodes=3,
                                                free_breakpoints=True), noise=noise_model)


ROUNDING = 0.3  # mm: the width over which the smoothed law's knee is rounded


def rounded(x):
    # The two-phase law with its knee rounded over ROUNDING (spineid's smoothed ramp: a
    # quadratic over |x - KNEE| < ROUNDING / 2, the phases' lines meeting at the knee).
    law = spineid.PiecewiseLinearLaw(np.array([0.0, KNEE, 3.0]) * 1e-3,
                                     two_phase(np.array([0.0, KNEE, 3.0])), ROUNDING * 1e-3)
    return np.asarray(law.load(x * 1e-3))


def fit_rounded(rng, kind, noise_model):
    # A rounded knee fitted as one: the law's `smoothing` the truth's.
    x = np.linspace(0.0, 3.0, N)
    data = spineid.LoadDisplacementData(displacement=x * 1e-3, load=rounded(x) + noise(rng, kind))
    return spineid.fit_load_law(data, spineid.LawForm("piecewise_linear", n_nodes=3,
                                                      free_breakpoints=True,
                                                      smoothing=ROUNDING * 1e-3),
                                noise=noise_model)


def rounded_part(repetitions, rng):
    """The sharp knee's errors under strongly correlated noise against a knee rounded over
    ROUNDING (`--part table-rounded`): is the knee's miscalibration that of a kink?"""
    truth = np.array([KNEE, *SLOPES])
    print(f"knee rounded over {ROUNDING} mm, fitted with that smoothing")
    print(f"{'noise':14s} {'fit':6s} {'calibration (knee, slopes)':30s} "
          f"{'coverage 95% (knee, slopes)':32s} accepted")
    for kind in ("AR(1) rho 0.6", "AR(1) rho 0.9", "filtered"):
        for model in ("auto", "given"):
            given = characterised(rng, kind)
            values, errors, accepted = [], [], 0
            for _ in range(repetitions):
                result = fit_rounded(rng, kind, given if model == "given" else model)
                v, e = quantities(result)
                values.append(v)
                errors.append(e)
                accepted += bool(result.accepted)
            row(kind, model, values, errors, accepted, truth, repetitions)
    fit_rounded(rng, "AR(1) rho 0.9", "auto")  # (compiled)
    clock = time.perf_counter()
    for _ in range(20):
        fit_rounded(rng, "AR(1) rho 0.9", "auto")
    print(f"time per fit, warm, auto: {(time.perf_counter() - clock) / 20:.3f} s")


def quantities(result):
    # (knee mm, slope 1 N/mm, slope 2 N/mm) and their standard errors.
    knee = result.derived["node_displacement"][1]
    slopes = result.derived["slopes"]
    values = np.array([knee[0] * 1e3, slopes[0][0] * 1e-3, slopes[1][0] * 1e-3])
    errors = np.array([knee[1] * 1e3, slopes[0][1] * 1e-3, slopes[1][1] * 1e-3])
    return values, errors


def row(kind, model, values, errors, accepted, truth, repetitions):
    values, errors = np.array(values), np.array(errors)
    calibration = np.std(values, axis=0) / np.mean(errors, axis=0)
    coverage = np.mean(np.abs(values - truth) < 1.96 * errors, axis=0)
    binomial = np.sqrt(0.95 * 0.05 / repetitions)
    print(f"{kind:14s} {model:6s} "
          f"{', '.join(f'{c:.2f}' for c in calibration):30s} "
          f"{', '.join(f'{100 * c:.0f}%' for c in coverage):24s} "
          f"(+-{100 * binomial:.1f}%) "
          f"{100 * accepted / repetitions:.0f}%", flush=True)


TRACKING_SD = np.array([5e-6, 5e-6, np.radians(0.01)])  # m, m, rad: the tracking noise


TRACKING_FILTER = signal.butter(4, 40.0 / 500.0)  # 40 Hz at 1 kHz (Nyquist 500 Hz)
LAGS = (5, 10, 20)  # of the prewhitened HAC errors of `trajectory_exact_part`


def filtered(white):
    # The tracking filter (zero phase) over white noise `(n + 400, ...)`, its ends cropped.
    return signal.filtfilt(*TRACKING_FILTER, white, axis=0)[200:-200]


def tracking_noise(rng, kind, n, sd=TRACKING_SD):
    # (n, m) noise of m channels, channel c of standard deviation sd[c] (`(m,)`; by default
    # the three tracking channels; a filtered record scaled to its own sample deviation).
    m = len(sd)
    if kind == "filtered":
        e = filtered(rng.normal(size=(n + 400, m)))
        return sd * e / np.std(e, axis=0)
    rho = float(kind.split()[-1])
    a = rng.normal(size=(n + 300, m)) * np.sqrt(1 - rho ** 2)
    e = np.zeros((n + 300, m))
    for t in range(1, n + 300):
        e[t] = rho * e[t - 1] + a[t]
    return sd * e[300:]


def tracking_characterised(rng, kind, order=10):
    """The tracking noise model a lab gives after recording a still specimen for 20 records'
    worth: AR(1) at the rho it knows, or each channel's Yule-Walker AR(`order`) of the
    filtered noise, as `spineid.AR(coefficients={channel: phi})`."""
    if kind != "filtered":
        return spineid.AR(coefficients=(float(kind.split()[-1]),))
    record = np.concatenate([tracking_noise(rng, kind, 501) for _ in range(20)])
    given = {}
    for c, channel in enumerate(("x", "y", "theta")):
        gamma, _ = autocovariances([record[:, c]], order)
        given[channel] = tuple(levinson_durbin(gamma, order)[order][0])
    return spineid.AR(coefficients=given)


def trajectory_exact_part(repetitions, rng):
    """The errors of the trajectory fit under filtered noise against those of the noise's exact
    covariance (records drawn through the filter's operator, so that their covariance is
    exactly it), for the fit linearised at the truth (the residuals' sensitivities `J`, the
    estimate's error `(A^T A)^-1 A^T b` with `A` and `b` the whitened `J` and noise): the
    Cramer-Rao bound of the exact covariance (the best any fit can do), the true spread of the
    white-weighted estimate (sandwich) and, repetition by repetition, the estimate under
    `auto` (each channel's autoregression chosen and estimated from the record by spineid's own
    `fit_channel_noise`, as the fit does from its residuals): its spread, its reported errors,
    their calibration and coverage; from the residuals, also the prewhitened HAC errors and
    the autoregressions with the fit's absorbed part added back (`added_back`). No nonlinear fit
    runs: this isolates what the noise model costs from what the nonlinear fit adds (the fits'
    own calibration is `--part trajectory`)."""
    from spineid.identify._common._noise_model import (
        AR, chosen_order, ChannelNoise, fit_channel_noise, supported_order, White, whitened)
    from spineid.identify._common._uncertainty import hac_covariance
    from spineid.identify._trajectory._objective import measured_sensitivities

    channels = ("x", "y", "theta")
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = np.linspace(0.0, 0.5, 501)
    clean = np.array([model_file.model.observe(q)
                      for q in spineid.simulate(model_file.model, ts).q])
    unit = spineid.FitProblem(model_file, spineid.Measurement(ts, clean, channels),
                              ["stiffness"], noise=dict.fromkeys(channels, 1.0))
    truth = np.array([p.value(model_file.model) for p in unit.parameters])
    jacobian = measured_sensitivities(unit, channels, truth).reshape(ts.size, 3, -1)
    # The filter is linear: a record is `M w` for white `w`, of covariance `M M^T` (`M`: the
    # filter applied to the identity's columns), scaled here to a mean variance of 1. (The
    # records below take that scale; those of the fits' parts are scaled to their own sample
    # deviation, which for noise this smooth is about 4% below the true one.)
    operator = filtered(np.eye(ts.size + 400))
    scale = np.sqrt(np.mean(np.sum(operator ** 2, axis=1)))
    operator = operator / scale
    correlation = operator @ operator.T
    fisher = sum(jacobian[:, c].T @ np.linalg.solve(TRACKING_SD[c] ** 2 * correlation,
                                                    jacobian[:, c]) for c in range(3))
    exact = np.sqrt(np.diag(np.linalg.inv(fisher)))
    weighted = np.concatenate([jacobian[:, c] / TRACKING_SD[c] for c in range(3)])
    bread = np.linalg.inv(weighted.T @ weighted)
    meat = sum(jacobian[:, c].T @ correlation @ jacobian[:, c] / TRACKING_SD[c] ** 2
               for c in range(3))
    white_spread = np.sqrt(np.diag(bread @ meat @ bread))
    white_reported = np.sqrt(np.diag(bread))
    share = len(truth) / 3

    def generalized(noise, estimates, robust=False):
        # The estimate's error, its reported errors under the channels' `estimates` and the
        # error's covariance; with `robust`, also the prewhitened HAC errors at each of `LAGS`
        # lags (the sandwich of the whitened scores, each channel a record: Andrews and
        # Monahan 1992).
        blocks = [(whitened(jacobian[:, c], e.coefficients) / e.innovation,
                   whitened(noise[:, c], e.coefficients) / e.innovation)
                  for c, e in enumerate(estimates)]
        a = np.concatenate([rows for rows, _ in blocks])
        covariance = np.linalg.inv(a.T @ a)
        error = covariance @ a.T @ np.concatenate([values for _, values in blocks])
        if not robust:
            return error, np.sqrt(np.diag(covariance)), covariance
        residuals = np.concatenate([values - rows @ error for rows, values in blocks])
        first = np.cumsum([0] + [len(values) for _, values in blocks])
        records = [np.arange(first[c], first[c + 1]) for c in range(len(blocks))]
        hac = [np.sqrt(np.diag(hac_covariance(a, residuals, records,
                                              np.ones(len(truth), bool), lags)))
               for lags in LAGS]
        return error, np.sqrt(np.diag(covariance)), hac

    def iterated(noise, estimates, refit):
        # Iterated prewhitening from the channels' first `estimates`: six generalized fits,
        # each followed by `refit(c, residuals of channel c, covariance)`.
        for _ in range(6):
            error, _, covariance = generalized(noise, estimates)
            residuals = noise - jacobian @ error
            estimates = [refit(c, residuals[:, c], covariance) for c in range(3)]
        return estimates

    def added_back(residuals, rows, covariance, order):
        # A channel's autoregression from its residuals' autocovariances with what the fit
        # absorbed added back: under generalized least squares the residuals' covariance is
        # the noise's less `J C J^T` (`C` the estimate's covariance), so `gamma_l` gains
        # `sum_t J_t C J_(t+l)^T / N`; the order chosen as `fit_channel_noise` chooses it
        # (`order` None) or kept, the innovation variance the recursion's.
        highest = supported_order(AR(), residuals.size)
        gamma, total = autocovariances([residuals], highest)
        for lag in range(highest + 1):
            gamma[lag] += np.einsum("ti,ij,tj->", rows[:rows.shape[0] - lag], covariance,
                                    rows[lag:]) / residuals.size
        models = levinson_durbin(gamma, highest)
        if order is None:
            order = chosen_order(models, list(range(highest + 1)), total)
        phi, variance = models[order]
        return ChannelNoise(order=order, coefficients=tuple(float(c) for c in phi),
                            innovation=float(np.sqrt(variance)),
                            marginal=float(np.sqrt(gamma[0])))

    errors, reported, orders = [], [], []
    from_residuals, reported_residuals, robust = [], [], []
    from_added, reported_added = [], []
    for _ in range(repetitions):
        noise = TRACKING_SD * (operator @ rng.normal(size=(ts.size + 400, 3)))
        estimates = [fit_channel_noise([noise[:, c]], AR(), share, channel)
                     for c, channel in enumerate(channels)]
        orders += [e.order for e in estimates]
        error, stderr, _ = generalized(noise, estimates)
        errors.append(error)
        reported.append(stderr)
        # As the fit does it: the autoregressions from the white-weighted fit's residuals, then
        # from each generalized fit's residuals at those orders (iterated prewhitening).
        first = np.linalg.lstsq(weighted, np.concatenate(
            [noise[:, c] / TRACKING_SD[c] for c in range(3)]), rcond=None)[0]
        residuals = noise - jacobian @ first
        estimates = [fit_channel_noise([residuals[:, c]], AR(), share, channel)
                     for c, channel in enumerate(channels)]
        kept = [AR(e.order) if e.order else White() for e in estimates]
        estimates = iterated(noise, estimates, lambda c, r, _: fit_channel_noise(
            [r], kept[c], share, channels[c]))
        error, stderr, hac = generalized(noise, estimates, robust=True)
        from_residuals.append(error)
        reported_residuals.append(stderr)
        robust.append(hac)
        # The same with the absorbed part added back to the residuals' autocovariances.
        covariance = (np.linalg.inv(weighted.T @ weighted)
                      * np.mean((residuals / TRACKING_SD) ** 2))
        estimates = [added_back(residuals[:, c], jacobian[:, c], covariance, None)
                     for c in range(3)]
        orders_added = [e.order for e in estimates]
        estimates = iterated(noise, estimates, lambda c, r, covariance: added_back(
            r, jacobian[:, c], covariance, orders_added[c]))
        error, stderr, _ = generalized(noise, estimates)
        from_added.append(error)
        reported_added.append(stderr)
    errors, reported = np.array(errors), np.array(reported)
    from_residuals, reported_residuals = np.array(from_residuals), np.array(reported_residuals)
    spread = errors.std(axis=0)

    def listed(values, digits=2):
        return ", ".join(f"{v:.{digits}f}" for v in values)

    print(f"\ntrajectory fit under filtered noise, linearised ({repetitions} noise records; "
          f"stiffnesses in N/m):")
    print(f"  Cramer-Rao bound of the exact covariance:  {listed(exact)}")
    print(f"  white weights: true spread {listed(white_spread)}, reported "
          f"{listed(white_reported)} (calibration {listed(white_spread / white_reported)})")
    print(f"  auto: true spread {listed(spread)}, mean reported {listed(reported.mean(axis=0))}"
          f" (calibration {listed(spread / reported.mean(axis=0))}, coverage "
          f"{listed(100 * np.mean(np.abs(errors) < 1.96 * reported, axis=0), 0)}%)")
    print(f"  auto's spread over the exact bound {listed(spread / exact)}; its reported errors "
          f"over the bound {listed(reported.mean(axis=0) / exact)}; orders chosen: "
          + ", ".join(f"{k}: {orders.count(k)}" for k in sorted(set(orders))))
    spread, mean = from_residuals.std(axis=0), reported_residuals.mean(axis=0)
    covered = np.mean(np.abs(from_residuals) < 1.96 * reported_residuals, axis=0)
    print(f"  auto from the residuals, iterated (as the fits do): true spread {listed(spread)}, "
          f"mean reported {listed(mean)} (calibration {listed(spread / mean)}, coverage "
          f"{listed(100 * covered, 0)}%)")
    for i, lags in enumerate(LAGS):
        hac = np.array([r[i] for r in robust])
        print(f"    its prewhitened HAC errors, {lags} lags: calibration "
              f"{listed(spread / hac.mean(axis=0))}, coverage "
              f"{listed(100 * np.mean(np.abs(from_residuals) < 1.96 * hac, axis=0), 0)}%")
    from_added, reported_added = np.array(from_added), np.array(reported_added)
    spread, mean = from_added.std(axis=0), reported_added.mean(axis=0)
    covered = np.mean(np.abs(from_added) < 1.96 * reported_added, axis=0)
    print(f"  the same with the absorbed part added back: true spread {listed(spread)}, mean "
          f"reported {listed(mean)} (calibration {listed(spread / mean)}, coverage "
          f"{listed(100 * covered, 0)}%)")


def trajectory_part(repetitions, rng, verdicts_only=False, models=("auto", "white")):
    path = spineid.dataset_path("axial_4_springs.toml")
    model_file = spineid.load_model_file(path)
    with open(path, "rb") as file:
        document = tomllib.load(file)
    for spring in document["springs"]:
        spring["damping"] = 0.0
    undamped = spineid.model_from_document(document)
    ts = np.linspace(0.0, 0.5, 501)
    clean = np.array([model_file.model.observe(q)
                      for q in spineid.simulate(model_file.model, ts).q])

    def fit_pair(kind, noise_model, model=model_file, solver="auto"):
        data = clean + tracking_noise(rng, kind, ts.size)
        measurement = spineid.Measurement(ts, data, ("x", "y", "theta"))
        problem = spineid.FitProblem(model, measurement, ["stiffness"], noise_model=noise_model)
        return spineid.fit(problem, solver)

    truth = np.array([s["stiffness"] for s in document["springs"]])
    print(f"\ntrajectory fits: {'noise':14s} {'fit':6s} calibration (4 stiffnesses), "
          "coverage 95%, accepted")
    for kind in (() if verdicts_only else
                 ("AR(1) rho 0.3", "AR(1) rho 0.6", "AR(1) rho 0.9", "filtered")):
        for model in models:
            values, errors, accepted = [], [], 0
            given = tracking_characterised(rng, kind) if model == "given" else model
            for _ in range(repetitions):
                result = fit_pair(kind, given)
                values.append(result.values)
                errors.append(result.stderr)
                accepted += bool(result.accepted)
            row(kind, model, values, errors, accepted, truth, repetitions)
    if models == ("given",):
        return
    for kind in ("AR(1) rho 0.6", "filtered"):
        # (Levenberg-Marquardt from the file's stiffnesses: the default solver would run its
        # 16 starts on every such fit, since none explains the data, to the same optimum.)
        flagged = sum(fit_pair(kind, "auto", undamped, "lm").goodness_of_fit.level
                      == "does_not_describe" for _ in range(repetitions))
        print(f"wrong model (the dampers left out), {kind}: flagged "
              f"{100 * flagged / repetitions:.0f}% of {repetitions}")
    seconds = {}
    for model in ("white", "auto"):
        fit_pair("AR(1) rho 0.6", model)  # (compiled)
        clock = time.perf_counter()
        for _ in range(5):
            fit_pair("AR(1) rho 0.6", model)
        seconds[model] = (time.perf_counter() - clock) / 5
    print(f"time per trajectory fit, warm: white {seconds['white']:.2f} s, auto "
          f"{seconds['auto']:.2f} s (ratio {seconds['auto'] / seconds['white']:.2f})")


DUAL_BASES = jax.jit(jax.vmap(spineid.dual_euler_basis))


def six_channel_noise(rng, kind, n, cutoff):
    # (n, 6) noise of unit sd per channel along the rows: AR(1) (`kind` "AR(1) rho R") or white
    # noise through a 4th-order Butterworth low-pass at `cutoff` of the Nyquist rate, zero phase.
    if kind == "filtered":
        b, a = signal.butter(4, cutoff)
        e = signal.filtfilt(b, a, rng.normal(size=(n + 400, 6)), axis=0)[200:-200]
        return e / np.std(e, axis=0)
    rho = float(kind.split()[-1])
    return signal.lfilter([np.sqrt(1 - rho ** 2)], [1.0, -rho],
                          rng.normal(size=(n + 300, 6)), axis=0)[300:]


def sweep_loads(rng, kind, stiffening=0.0, n=1000):
    # A sweep's deflections (n, 6) and its loads (n, 6) with correlated load-cell noise.
    t = np.linspace(0.0, 1.0, n)
    amplitude = np.array([1e-3, 1e-3, 1e-3, *np.radians([8.0, 8.0, 8.0])])
    y = amplitude * np.sin(2 * np.pi * np.array([1.0, 1.5, 2.0, 2.5, 3.0, 3.5]) * t[:, None]
                           + np.arange(6))
    moved = y * (1.0 + stiffening * (y / amplitude) ** 2)
    f = moved @ spineid.K_F_E.T
    duals = np.asarray(DUAL_BASES(y[:, 3:]))
    loads = f.copy()
    loads[:, 3:] = np.einsum("nji,nj->ni", duals, f[:, 3:])
    sd = np.array([2.0, 2.0, 2.0, 0.05, 0.05, 0.05])
    return spineid.QuasiStaticTest(loads + sd * six_channel_noise(rng, kind, n, 0.1), y)


def ranged_row(kind, model, values, errors, accepted, truth, repetitions):
    # Calibration and coverage of many parameters: their median and range.
    values, errors = np.array(values), np.array(errors)
    calibration = np.std(values, axis=0) / np.mean(errors, axis=0)
    coverage = np.mean(np.abs(values - truth) < 1.96 * errors, axis=0)
    print(f"{kind:14s} {model:6s} "
          f"{np.median(calibration):.2f} ({calibration.min():.2f}-"
          f"{calibration.max():.2f}){'':14s} "
          f"{100 * np.median(coverage):.0f}% ({100 * coverage.min():.0f}-"
          f"{100 * coverage.max():.0f}%){'':14s} "
          f"{100 * accepted / repetitions:.0f}%", flush=True)


SEGMENT_LEVELS = 10  # load levels of each case's ramp


def segment_record(rng, kind, model_file):
    """A tester's continuous record of the C5-C6 segment (datasets/c5_c6.toml): the nine load
    cases one after another, each ramped over `SEGMENT_LEVELS` levels (10-100% of 20 N and
    1.8 N m; 90 rows), its displacements' noise (5 um, 0.01 degree) AR(1) along the rows, or
    white noise filtered by a 4th-order Butterworth low-pass at a quarter of the rows' Nyquist
    rate (zero phase: correlated over about four rows)."""
    model = model_file.model
    levels = np.linspace(0.1, 1.0, SEGMENT_LEVELS)
    loads = np.concatenate([np.outer(levels, case) for case in spineid.load_cases()])
    solved, displacements, *_ = spineid.solve_load_cases(model, loads)
    assert np.all(np.asarray(solved))
    n, sd = len(loads), np.array([5e-6] * 3 + [np.radians(0.01)] * 3)
    return spineid.QuasiStaticTest(
        loads, np.asarray(displacements) + sd * six_channel_noise(rng, kind, n, 0.25))


def _segment_problem():
    # The C5-C6 segment, its free groups (the facets' and the bushing's stiffnesses), their
    # parameters and true values, and the file started 20% high.
    model_file = spineid.load_model_file(spineid.dataset_path("c5_c6.toml"))
    free = ["facets.stiffness", "bushing.stiffness"]
    parameters = select_parameters(model_file.parameters, free)
    truth = np.array([p.value(model_file.model) for p in parameters])
    return model_file, free, parameters, truth, dataclasses.replace(
        model_file, model=spineid.apply_values(model_file.model, parameters, 1.2 * truth))


def segment_part(repetitions, rng):
    """Segment fits through the equilibria (`spineid.fit_segment`) of `segment_record`s: the
    facet and the six bushing stiffnesses free, started 20% high; the wrong model is the
    segment without its facets (their stiffness a hundredth of the file's), its bushing
    stiffnesses fitted. `auto 5%`: the default noise model with a smooth-misfit tolerance of 5%
    (`--max-misfit 5%`); the same as `auto` since the misfit is judged against the motion's
    amplitude (judged against its own range, the axial displacement `dy`, which moves in two of
    the nine cases only, rejected right models under strongly correlated noise)."""
    model_file, free, parameters, truth, started = _segment_problem()
    print(f"{'noise':14s} {'fit':6s} {'calibration (median, range)':30s} "
          f"{'coverage 95% (median, range)':32s} accepted")
    for kind in ("AR(1) rho 0.3", "AR(1) rho 0.6", "AR(1) rho 0.9", "filtered"):
        records = [segment_record(rng, kind, model_file) for _ in range(repetitions)]
        for model in ("auto", "white", "auto 5%"):
            values, errors, accepted = [], [], 0
            for record in records:
                result = spineid.fit_segment(started, record, free, noise_model=model.split()[0],
                                             max_misfit=0.05 if "5%" in model else 0.02)
                values.append(result.values)
                errors.append(result.stderr)
                accepted += bool(result.accepted)
            ranged_row(kind, model, values, errors, accepted, truth, repetitions)
    (facet,) = select_parameters(model_file.parameters, ["facets.stiffness"])
    without = dataclasses.replace(model_file, model=spineid.apply_values(
        model_file.model, [facet], [0.01 * facet.value(model_file.model)]))
    for kind in ("AR(1) rho 0.6", "filtered"):
        flagged = sum(spineid.fit_segment(
            without, segment_record(rng, kind, model_file), ["bushing.stiffness"]
        ).goodness_of_fit.level == "does_not_describe" for _ in range(repetitions))
        print(f"wrong model (the facets left out), {kind}: flagged "
              f"{100 * flagged / repetitions:.0f}% of {repetitions}")
    seconds = {}
    record = segment_record(rng, "AR(1) rho 0.6", model_file)
    for model in ("white", "auto"):
        spineid.fit_segment(started, record, free, noise_model=model)  # (compiled)
        clock = time.perf_counter()
        for _ in range(5):
            spineid.fit_segment(started, record, free, noise_model=model)
        seconds[model] = (time.perf_counter() - clock) / 5
    print(f"time per segment fit (90 rows), warm: white {seconds['white']:.2f} s, auto "
          f"{seconds['auto']:.2f} s (ratio {seconds['auto'] / seconds['white']:.2f})")


def segment_far_part(repetitions, rng, kind="AR(1) rho 0.6"):
    """Segment fits of `segment_record`s (`kind`: AR(1) rho 0.6, or `"filtered"` for
    `--part segment-far-filtered`, where the errors come from the sandwich of
    `spineid.identify._kinds._segment_fit._sandwiched`) under `auto` from far starts: each
    free parameter drawn log-uniformly between 0.2 and 5 times the truth, fitted by
    Levenberg-Marquardt alone and by `spineid.MultiStart(n=8)` (8 starts about that start,
    as `spineid segment --fit ... --starts 8`): how often each reaches the optimum of the
    fit started 20% high (every value within 0.01 of its standard error), and the errors'
    calibration and coverage over the records."""
    model_file, free, parameters, truth, near = _segment_problem()
    print(f"{'start':22s} {'calibration (median, range)':30s} "
          f"{'coverage 95% (median, range)':32s} accepted, at the optimum")
    records = [segment_record(rng, kind, model_file) for _ in range(repetitions)]
    optima = [spineid.fit_segment(near, record, free) for record in records]
    for name, solver in (("0.2x-5x, LM", None),
                         ("0.2x-5x, MultiStart(8)", spineid.MultiStart(n=8))):
        values, errors, accepted, reached, refused = [], [], 0, 0, 0
        for record, optimum in zip(records, optima):
            scale = np.exp(rng.uniform(np.log(0.2), np.log(5.0), truth.size))
            far = dataclasses.replace(model_file, model=spineid.apply_values(
                model_file.model, parameters, scale * truth))
            try:
                result = spineid.fit_segment(far, record, free, solver=solver,
                                             noise_model="auto")
            except ValueError as error:  # (equilibria not found where the fit got to)
                refused += 1
                print(f"  refused: started at {np.round(scale, 2)} x truth: {error}",
                      flush=True)
                continue
            values.append(result.values)
            errors.append(result.stderr)
            accepted += bool(result.accepted)
            at_optimum = bool(np.all(np.abs(result.values - optimum.values)
                                     <= 0.01 * optimum.stderr))
            reached += at_optimum
            if not at_optimum:
                print(f"  missed: started at {np.round(scale, 2)} x truth, ended at "
                      f"{np.round(result.values / truth, 3)} x truth, level "
                      f"{result.goodness_of_fit.level}, cost {result.cost:.4g} against "
                      f"{optimum.cost:.4g}", flush=True)
        ranged_row(kind, name, values, errors, accepted, truth, repetitions - refused)
        print(f"{'':22s} at the optimum of the near start: {reached} of {repetitions}; "
              f"refused (equilibria not found): {refused}")


def segment_orders_part(repetitions, rng):
    """Why the segment's AR(1) rho 0.3 row covers less than its noise model would: on 90 rows
    the Bayesian information criterion keeps a channel of such noise white about 28% of the
    time (`chosen_order`'s gate; measured by this part), and a channel weighted as white has errors about
    sqrt((1 + rho) / (1 - rho)) = 1.36 times too small. Prints, over the same records: `auto`
    (with how many of each record's six channels it left white), the order given (`ar:1`),
    and the coefficient given (`phi:0.3`, the noise known)."""
    model_file, free, parameters, truth, started = _segment_problem()
    kind = "AR(1) rho 0.3"
    records = [segment_record(rng, kind, model_file) for _ in range(repetitions)]
    for name, model in (("auto", "auto"), ("ar:1", spineid.AR(1)),
                        ("phi:0.3", spineid.AR(coefficients=(0.3,)))):
        values, errors, accepted, white = [], [], 0, []
        for record in records:
            result = spineid.fit_segment(started, record, free, noise_model=model)
            values.append(result.values)
            errors.append(result.stderr)
            accepted += bool(result.accepted)
            white.append(result.summary().count(": white, sd"))
        ranged_row(kind, name, values, errors, accepted, truth, repetitions)
        if name == "auto":
            counts = np.bincount(white, minlength=7)
            print(f"{'':21s} records with 0, 1, ..., 6 channels left white: "
                  f"{', '.join(map(str, counts))}", flush=True)


def stiffness_part(repetitions, rng):
    print(f"{'noise':14s} {'fit':6s} {'calibration (median, range)':30s} "
          f"{'coverage 95% (median, range)':32s} accepted")
    entries = [(i, j) for i in range(6) for j in range(i, 6)]
    truth = np.array([spineid.K_F_E[i, j] for i, j in entries])
    for kind in ("AR(1) rho 0.3", "AR(1) rho 0.6", "AR(1) rho 0.9", "filtered"):
        tests = [sweep_loads(rng, kind) for _ in range(repetitions)]
        for model in ("auto", "white"):
            values, errors, accepted = [], [], 0
            for test in tests:
                result = spineid.fit_stiffness_matrix(test, "full", noise_model=model)
                values.append([result.matrix[i, j] for i, j in entries])
                errors.append([result.stderr[i, j] for i, j in entries])
                accepted += bool(result.accepted)
            ranged_row(kind, model, values, errors, accepted, truth, repetitions)
    for kind in ("AR(1) rho 0.6", "filtered"):
        flagged = sum(spineid.fit_stiffness_matrix(sweep_loads(rng, kind, 1.0)).goodness_of_fit
                      .level == "does_not_describe" for _ in range(repetitions))
        print(f"wrong model (a joint twice as stiff at the extremes), {kind}: flagged "
              f"{100 * flagged / repetitions:.0f}% of {repetitions}")
    seconds = {}
    test = sweep_loads(rng, "AR(1) rho 0.6")
    for model in ("white", "auto"):
        spineid.fit_stiffness_matrix(test, noise_model=model)  # (compiled)
        clock = time.perf_counter()
        for _ in range(20):
            spineid.fit_stiffness_matrix(test, noise_model=model)
        seconds[model] = (time.perf_counter() - clock) / 20
    print(f"time per stiffness fit (1000 rows), warm: white {seconds['white']:.3f} s, auto "
          f"{seconds['auto']:.3f} s (ratio {seconds['auto'] / seconds['white']:.2f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--part", choices=("table", "trajectory", "trajectory-verdicts",
                                           "trajectory-given", "trajectory-exact", "stiffness",
                                           "segment", "segment-far", "segment-far-filtered",
                                           "segment-orders",
                                           "table-rounded", "all"),
                        default="all", help="trajectory-verdicts: the wrong trajectory model "
                                            "and the times only; trajectory-given: the rows "
                                            "of the noise model given only")
    arguments = parser.parse_args()
    truth = np.array([KNEE, *SLOPES])
    rng = np.random.default_rng(arguments.seed)
    if arguments.part in ("stiffness", "all"):
        stiffness_part(arguments.repetitions, rng)
        if arguments.part == "stiffness":
            return
    if arguments.part in ("segment", "all"):
        segment_part(arguments.repetitions, rng)
        if arguments.part == "segment":
            return
    if arguments.part == "segment-far-filtered":
        segment_far_part(arguments.repetitions, rng, "filtered")
        return
    if arguments.part == "segment-orders":
        segment_orders_part(arguments.repetitions, rng)
        return
    if arguments.part in ("segment-far", "all"):
        segment_far_part(arguments.repetitions, rng)
        if arguments.part == "segment-far":
            return
    if arguments.part in ("table-rounded", "all"):
        rounded_part(arguments.repetitions, rng)
        if arguments.part == "table-rounded":
            return
    if arguments.part == "trajectory-exact":
        trajectory_exact_part(arguments.repetitions, rng)
        return
    if arguments.part != "table":
        trajectory_part(arguments.repetitions, rng, arguments.part == "trajectory-verdicts",
                        ("given",) if arguments.part == "trajectory-given" else
                        ("auto", "white"))
    if arguments.part.startswith("trajectory"):
        return
    print(f"{'noise':14s} {'fit':6s} {'calibration (knee, slopes)':30s} "
          f"{'coverage 95% (knee, slopes)':32s} accepted")
    for kind in ("AR(1) rho 0.3", "AR(1) rho 0.6", "AR(1) rho 0.9", "filtered"):
        for model in ("auto", "white", "given"):
            values, errors, accepted = [], [], 0
            given = characterised(rng, kind)
            for _ in range(arguments.repetitions):
                result = fit(two_phase, rng, kind, given if model == "given" else model)
                v, e = quantities(result)
                values.append(v)
                errors.append(e)
                accepted += bool(result.accepted)
            row(kind, model, values, errors, accepted, truth, arguments.repetitions)
    for kind in ("AR(1) rho 0.6", "filtered"):
        flagged = sum(fit(yielding, rng, kind, "auto").goodness_of_fit.level
                      == "does_not_describe" for _ in range(arguments.repetitions))
        print(f"wrong law (a missed yield), {kind}: flagged "
              f"{100 * flagged / arguments.repetitions:.0f}% of {arguments.repetitions}")
    seconds = {}
    for model in ("white", "auto"):
        fit(two_phase, rng, "AR(1) rho 0.6", model)  # (compiled)
        clock = time.perf_counter()
        for _ in range(20):
            fit(two_phase, rng, "AR(1) rho 0.6", model)
        seconds[model] = (time.perf_counter() - clock) / 20
    print(f"time per fit, warm: white {seconds['white']:.3f} s, auto {seconds['auto']:.3f} s "
          f"(ratio {seconds['auto'] / seconds['white']:.2f})")


if __name__ == "__main__":
    main()
