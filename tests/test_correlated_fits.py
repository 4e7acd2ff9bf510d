"""Trajectory fits and measure recovery under a noise model
(spineid/identify/_trajectory/_correlated.py, spineid/identify/_recovery/_recovery_result.py):
the errors of a fit whose tracking noise is correlated, against the Cramer-Rao bound computed
with the dense noise covariance of statsmodels' autocovariances (no whitening filter) and
against the analytic limit of slowly varying sensitivities; white noise left as it was; the
refusals; the command line."""

import json

import numpy as np
import pytest

import spineid
from spineid.cli import main
from spineid.identify._trajectory._objective import measured_sensitivities

statsmodels = pytest.importorskip("statsmodels.api")
from statsmodels.tsa.arima_process import arma_acovf  # noqa: E402

pytestmark = pytest.mark.xdist_group("correlated_fits")

SD = np.array([5e-6, 5e-6, 1.7e-4])  # m, m, rad: optical tracking
CHANNELS = ("x", "y", "theta")


@pytest.fixture(scope="module")
def pair():
    """The bundled four-axial-spring pair and 0.2 s of its simulation at 1 kHz."""
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = np.linspace(0.0, 0.2, 201)
    clean = np.array([model_file.model.observe(q)
                      for q in spineid.simulate(model_file.model, ts).q])
    return model_file, ts, clean


def _ar1(rng, n, rho):
    # (n, 3) AR(1) noise, each channel of standard deviation SD.
    a = rng.normal(size=(n + 200, 3)) * np.sqrt(1 - rho ** 2)
    e = np.zeros_like(a)
    for t in range(1, a.shape[0]):
        e[t] = rho * e[t - 1] + a[t]
    return SD * e[200:]


def _problem(pair, errors, **options):
    model_file, ts, clean = pair
    return spineid.FitProblem(model_file, spineid.Measurement(ts, clean + errors, CHANNELS),
                              ["stiffness"], **options)


@pytest.fixture(scope="module")
def correlated(pair):
    """A fit of AR(1)-correlated tracking noise (rho 0.6) under the default noise model and as
    if white."""
    noise = _ar1(np.random.default_rng(7), 201, 0.6)
    return (spineid.fit(_problem(pair, noise), "lm"),
            spineid.fit(_problem(pair, noise, noise_model="white"), "lm"))


def test_errors_under_the_noise_model_are_the_cramer_rao_bound_of_the_dense_covariance(
        pair, correlated):
    result, _ = correlated
    models = result.goodness_of_fit.noise_model
    # (AIC may add orders with small coefficients to an AR(1): `chosen_order`.)
    assert all(models[c]["order"] >= 1 for c in CHANNELS)
    assert all(0.4 < models[c]["coefficients"][0] < 0.8 for c in CHANNELS)
    # The oracle: F = sum_c J_c^T Sigma_c^-1 J_c with Sigma_c the Toeplitz matrix of the fitted
    # autoregression's autocovariances (statsmodels), the sensitivities unweighted; no
    # whitening.
    unit = _problem(pair, np.zeros_like(pair[2]), noise=dict.fromkeys(CHANNELS, 1.0))
    jacobian = measured_sensitivities(unit, CHANNELS, result.values).reshape(201, 3, -1)
    fisher = 0
    for c, channel in enumerate(CHANNELS):
        phi, innovation = models[channel]["coefficients"], models[channel]["innovation_sd"]
        gamma = arma_acovf(np.concatenate([[1.0], -np.asarray(phi)]), [1.0], 201,
                           sigma2=innovation ** 2)
        covariance = gamma[np.abs(np.subtract.outer(np.arange(201), np.arange(201)))]
        fisher = fisher + jacobian[:, c].T @ np.linalg.solve(covariance, jacobian[:, c])
    expected = np.sqrt(np.diag(np.linalg.inv(fisher)))
    # (Cochrane-Orcutt leaves the first p samples out where the dense form keeps them: the
    # motion starts at rest, where the sensitivities vanish; measured 2e-6 with an AR(6).)
    np.testing.assert_allclose(result.stderr, expected, rtol=0.02)


def test_coefficients_given_are_kept_and_their_errors_are_the_dense_covariances(pair):
    # A lab that knows its tracking filter gives its autoregression, here for two channels
    # (the third white): the coefficients stay as given, and the errors are the Cramer-Rao
    # bound of the dense covariance at them (the innovations' deviations estimated).
    noise = _ar1(np.random.default_rng(7), 201, 0.6)
    noise[:, 2] = np.random.default_rng(8).normal(size=201) * SD[2]
    result = spineid.fit(_problem(pair, noise, noise_model=spineid.AR(
        coefficients={"x": 0.6, "y": (0.6,)})), "lm")
    models = result.goodness_of_fit.noise_model
    assert models["x"]["coefficients"] == [0.6] and models["y"]["coefficients"] == [0.6]
    assert models["theta"]["order"] == 0
    unit = _problem(pair, np.zeros_like(pair[2]), noise=dict.fromkeys(CHANNELS, 1.0))
    jacobian = measured_sensitivities(unit, CHANNELS, result.values).reshape(201, 3, -1)
    fisher = 0
    for c, channel in enumerate(CHANNELS):
        phi = models[channel]["coefficients"][0] if models[channel]["order"] else 0.0
        gamma = arma_acovf([1.0, -phi], [1.0], 201, sigma2=models[channel]["innovation_sd"] ** 2)
        covariance = gamma[np.abs(np.subtract.outer(np.arange(201), np.arange(201)))]
        fisher = fisher + jacobian[:, c].T @ np.linalg.solve(covariance, jacobian[:, c])
    np.testing.assert_allclose(result.stderr, np.sqrt(np.diag(np.linalg.inv(fisher))),
                               rtol=0.02)
    assert result.goodness_of_fit.level == "explains"


def test_correlated_noise_is_accepted_with_errors_that_white_weights_understate(
        pair, correlated):
    result, white = correlated
    assert result.goodness_of_fit.level == "explains" and result.accepted
    assert white.goodness_of_fit.explains_data is False  # (its residuals are not white)
    # AR(1) at rho 0.6: the long-run variance is (1 + rho) / (1 - rho) = 4 times the white one.
    assert np.all(result.stderr / white.stderr > 1.5)
    assert np.all(np.abs(result.values - result.start) / result.stderr < 4)  # (the start: truth)
    assert result.stderr_robust is not None and np.all(np.isfinite(result.stderr_robust))
    report = result.report()
    assert report["goodness_of_fit"]["noise_model"]["x"]["order"] >= 1
    assert "robust" in result.summary()


def test_the_white_weighted_fit_and_its_refits_under_the_noise_model_are_one_program(
        pair, monkeypatch):
    # The fit under white weights carries zero coefficients of the width its refits under the
    # noise model whiten with (`_Run.whitening_width`): one compiled Levenberg-Marquardt loop
    # for all of them (before, two: 10 s of a one-level OpenSim neck fit's 30 s of compiling).
    from spineid._programs import program_key
    from spineid.identify._solvers import _levenberg_marquardt

    keys = []

    def spy(function, *args, **kwargs):
        keys.append(program_key(function, args, kwargs)[0])
        return stored_call(function, *args, **kwargs)

    stored_call = _levenberg_marquardt.stored_call
    monkeypatch.setattr(_levenberg_marquardt, "stored_call", spy)
    noise = _ar1(np.random.default_rng(5), 201, 0.6)
    result = spineid.fit(_problem(pair, noise), "lm")
    assert all(m["order"] >= 1 for m in result.goodness_of_fit.noise_model.values())
    assert len(keys) >= 3 and None not in keys  # (a white fit, its refit, a whitened refit)
    assert len(set(keys)) == 1


def test_white_noise_stays_white_and_the_fit_is_unchanged(pair):
    noise = np.random.default_rng(3).normal(size=pair[2].shape) * SD
    auto = spineid.fit(_problem(pair, noise), "lm")
    white = spineid.fit(_problem(pair, noise, noise_model="white"), "lm")
    assert auto.goodness_of_fit.noise_model == {} and auto.stderr_robust is None
    np.testing.assert_array_equal(auto.values, white.values)
    np.testing.assert_array_equal(auto.stderr, white.stderr)


def test_a_profile_under_the_noise_model_agrees_with_its_standard_error(correlated):
    result, _ = correlated
    profile = result.profile(result.names[0])
    lower, upper = profile.interval
    assert (upper - lower) / 2 == pytest.approx(1.96 * result.stderr[0], rel=0.1)
    assert profile.lower_cost is None


def test_gaps_in_a_channel_left_white_keep_the_coefficients_given_for_the_others(pair):
    # Coefficients given for x and y, theta white with three values not measured: the
    # autoregressions stand (they need whole records only where they run), and the errors are
    # the Cramer-Rao bound of the dense covariance over the values measured.
    noise = _ar1(np.random.default_rng(7), 201, 0.6)
    noise[:, 2] = np.random.default_rng(8).normal(size=201) * SD[2]
    gaps = [40, 41, 120]
    noise[gaps, 2] = np.nan
    result = spineid.fit(_problem(pair, noise, noise_model=spineid.AR(
        coefficients={"x": 0.6, "y": 0.6})), "lm")
    models = result.goodness_of_fit.noise_model
    assert models["x"]["coefficients"] == [0.6] and models["theta"]["order"] == 0
    assert not any("taken as white" in w for w in result.warnings)
    unit = _problem(pair, np.zeros_like(pair[2]), noise=dict.fromkeys(CHANNELS, 1.0))
    jacobian = measured_sensitivities(unit, CHANNELS, result.values).reshape(201, 3, -1)
    measured = np.setdiff1d(np.arange(201), gaps)
    fisher = jacobian[measured, 2].T @ jacobian[measured, 2] / models["theta"]["innovation_sd"]**2
    for c, channel in enumerate(CHANNELS[:2]):
        gamma = arma_acovf([1.0, -0.6], [1.0], 201, sigma2=models[channel]["innovation_sd"] ** 2)
        covariance = gamma[np.abs(np.subtract.outer(np.arange(201), np.arange(201)))]
        fisher = fisher + jacobian[:, c].T @ np.linalg.solve(covariance, jacobian[:, c])
    np.testing.assert_allclose(result.stderr, np.sqrt(np.diag(np.linalg.inv(fisher))),
                               rtol=0.02)


@pytest.mark.parametrize("options, data, message", [
    (dict(noise_model="ar:2", noise=dict(zip(CHANNELS, SD))), None, "not both"),
    (dict(noise_model="ar:30"), None, "whole number from 1 to 20"),
    (dict(noise_model="ar:1"), "uneven", "not evenly spaced"),
    (dict(noise_model="red"), None, "expected auto, white, ar:P"),
    (dict(noise_model="phi:x=0.5;z=0.5"), None, "no channel 'z'"),
    (dict(max_misfit=0.0), None, "max_misfit"),
])
def test_a_noise_model_the_data_cannot_support_is_refused(pair, options, data, message):
    model_file, ts, clean = pair
    values = clean.copy()
    if data == "uneven":
        ts = ts ** 1.2 / ts[-1] ** 0.2
    with pytest.raises(ValueError, match=message):
        spineid.FitProblem(model_file, spineid.Measurement(ts, values, CHANNELS),
                           ["stiffness"], **options)


@pytest.mark.parametrize("noise_model", ["auto", spineid.AR(coefficients={"x": 0.6, "y": 0.6})])
def test_runs_between_gaps_are_whitened_and_the_errors_are_the_dense_bound(pair, noise_model):
    # Markers drop out: y misses a run of ten values and two single ones. Every channel keeps
    # its autoregression (each run between gaps whitened on its own, its first `order` values
    # left out: Cochrane-Orcutt per run), and the errors are the Cramer-Rao bound of the dense
    # covariance over the values measured (the exact Gaussian likelihood with values missing:
    # the rows and columns of the gaps taken out). Newey-West errors stand beside them.
    # (With the coefficients given for x and y, theta's noise is white, as the model says.)
    noise = _ar1(np.random.default_rng(5), 201, 0.6)
    if noise_model != "auto":
        noise[:, 2] = np.random.default_rng(8).normal(size=201) * SD[2]
    gaps = [40, 41, *range(90, 100), 150]
    noise[gaps, 1] = np.nan
    result = spineid.fit(_problem(pair, noise, noise_model=noise_model), "lm")
    models = result.goodness_of_fit.noise_model
    assert all(models[c]["order"] >= (1 if c != "theta" or noise_model == "auto" else 0)
               for c in CHANNELS), models
    assert not any("taken as white" in w for w in result.warnings)
    assert result.stderr_robust is not None and np.all(np.isfinite(result.stderr_robust))
    unit = _problem(pair, np.zeros_like(pair[2]), noise=dict.fromkeys(CHANNELS, 1.0))
    jacobian = measured_sensitivities(unit, CHANNELS, result.values).reshape(201, 3, -1)
    fisher = 0
    for c, channel in enumerate(CHANNELS):
        phi = models[channel]["coefficients"]
        gamma = arma_acovf(np.concatenate([[1.0], -np.asarray(phi)]), [1.0], 201,
                           sigma2=models[channel]["innovation_sd"] ** 2)
        measured = np.setdiff1d(np.arange(201), gaps if channel == "y" else [])
        covariance = gamma[np.abs(np.subtract.outer(measured, measured))]
        fisher = fisher + jacobian[measured, c].T @ np.linalg.solve(covariance,
                                                                    jacobian[measured, c])
    np.testing.assert_allclose(result.stderr, np.sqrt(np.diag(np.linalg.inv(fisher))),
                               rtol=0.03)
    assert result.goodness_of_fit.level == "explains"


def test_the_default_solver_takes_a_fit_that_describes_filtered_noise_as_it_is(pair):
    # Motion-capture noise, low-pass filtered (4th-order Butterworth at 40 Hz, zero phase, at
    # 1 kHz), is smoother than an autoregression of bounded order can whiten: the verdict at the
    # right optimum is "describes". That is no sign of a local optimum, so `Auto` stops at its
    # first fit; before, it added multiple shooting and a multi-start to every such record (the
    # bundled OpenSim neck: 5 fits, 47 s warm, the same values).
    signal = pytest.importorskip("scipy.signal")
    white = np.random.default_rng(0).normal(size=(601, 3))
    filtered = signal.filtfilt(*signal.butter(4, 40 / 500), white, axis=0)[200:401]
    result = spineid.fit(_problem(pair, SD * filtered / filtered.std(axis=0)))
    assert result.goodness_of_fit.level == "describes" and result.accepted
    assert result.solver == "auto: lm from the start" and result.starts["run"] == 1
    assert np.all(np.abs(result.values - result.start) / result.stderr < 4)  # (start: truth)


def test_the_fit_verb_takes_a_noise_model_and_a_misfit_tolerance(tmp_path, pair, capsys):
    model_file, ts, clean = pair
    noise = _ar1(np.random.default_rng(11), 201, 0.6)
    data = tmp_path / "motion.csv"
    np.savetxt(data, np.column_stack([ts, clean + noise]), delimiter=",", header="t,x,y,theta",
               comments="")
    model = str(spineid.dataset_path("axial_4_springs.toml"))
    status = main(["fit", model, str(data), "--free", "stiffness", "--solver", "lm",
                   "--noise-model", "ar:1", "--max-misfit", "3%", "--out",
                   str(tmp_path / "out")])
    assert status == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["goodness_of_fit"]["level"] == "explains"
    assert report["goodness_of_fit"]["noise_model"]["theta"]["order"] == 1
    assert all(m["max_fraction"] == 0.03 for m in report["goodness_of_fit"]["misfit"].values())
    capsys.readouterr()
    status = main(["fit", model, str(data), "--free", "stiffness", "--max-misfit", "0.001",
                   "--out", str(tmp_path / "other")])
    assert status != 0 and "percentage of each channel's range" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_a_pin_recovered_under_correlated_noise_has_errors_of_the_noise_model(tmp_path, capsys):
    # The case: a pin recovered from tracking noise correlated from sample to sample
    # (AR(1), rho 0.6), white-weighted errors too small and a verdict that rejected it. Under
    # the noise model the errors grow by the analytic factor of sensitivities that vary slowly
    # against the noise's correlation, sqrt((1 + phi) / (1 - phi)) (the long-run deviation of
    # AR(1) over its own; Grenander 1954), and the recovery is accepted.
    model_file = spineid.load_model_file(spineid.dataset_path("pinned_pair.toml"))
    ts = np.linspace(0.0, 0.5, 501)
    clean = np.array([model_file.model.observe(q)
                      for q in spineid.simulate(model_file.model, ts, rtol=1e-11,
                                                atol=1e-13).q])
    data = clean + _ar1(np.random.default_rng(0), ts.size, 0.6)
    path = tmp_path / "pin.csv"
    np.savetxt(path, np.column_stack([ts, data]), delimiter=",", header="t,x,y,theta",
               comments="")
    white = spineid.recover(spineid.RecoveryProblem(
        model_file, spineid.Measurement(ts, data, CHANNELS), noise_model="white"))
    assert white.goodness_of_fit.explains_data is False
    status = main(["recover", str(spineid.dataset_path("pinned_pair.toml")), str(path),
                   "--out", str(tmp_path / "out")])
    assert status == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["goodness_of_fit"]["level"] == "explains"
    phi = np.mean([report["goodness_of_fit"]["noise_model"][c]["coefficients"][0]
                   for c in CHANNELS])
    error = report["moments"]["centroid"]["stderr"][0]
    assert error / white.moments["centroid"]["stderr"][0] == pytest.approx(
        np.sqrt((1 + phi) / (1 - phi)), rel=0.15)
    truth = 0.0037  # (m: the pin of datasets/pinned_pair.toml, [pin] point)
    assert abs(report["moments"]["centroid"]["value"][0] - truth) < 3 * error
    # Beside them the Newey-West errors of the white-weighted pin, which assume no form of the
    # correlation: the same size (its few lags at 501 samples take in most of an AR(1) at 0.6).
    robust = report["pin"]["stderr_robust"]
    assert robust == report["moments"]["centroid"]["stderr_robust"]
    assert 0.7 < robust[0] / error < 1.3, (robust, error)
    assert robust[1] == pytest.approx(report["pin"]["stderr"][1], abs=1e-12)  # (on the line)
    assert "stderr_robust" not in white.moments["centroid"]
    assert "robust (Newey-West)" in capsys.readouterr().out
