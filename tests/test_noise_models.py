"""Noise models for correlated residuals (spineid/identify/_common/_noise_model.py): the
autoregression against statsmodels, generalized least squares of a load law against statsmodels'
GLSAR, Newey-West errors against its HAC covariance, and the three-level verdict on data as labs
have it (correlated noise, a slightly imperfect law, a missed phase)."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from spineid import AR, fit_load_law, LawForm, White
from spineid.cli import main
from spineid.identify._common._goodness import assess_fit, smooth_misfit
from spineid.identify._common._failure import FAILED_RESIDUAL
from spineid.identify._common._noise_model import (
    autocovariances, channel_noises, ChannelNoise, exactly_whitened, fit_channel_noise,
    levinson_durbin,
    model_autocovariances, stationary_errors, whiten_padded, whitened, whitening_rows,
)
from spineid.identify._common._uncertainty import (
    factored_hac_covariance, hac_covariance, newey_west_lags)
from spineid.io._measurements import LoadDisplacementData

statsmodels = pytest.importorskip("statsmodels.api")
from statsmodels.regression.linear_model import GLSAR, yule_walker  # noqa: E402
from statsmodels.tsa.arima_process import arma_acovf  # noqa: E402

pytestmark = pytest.mark.xdist_group("noise_models")


def _autoregressive(rng, n, coefficients, sd=1.0, burn=200):
    # An AR process of `n` samples (after `burn` discarded).
    phi = np.asarray(coefficients, float)
    innovations = rng.normal(scale=sd, size=n + burn)
    e = np.zeros(n + burn)
    for t in range(n + burn):
        e[t] = innovations[t] + sum(phi[k] * e[t - k - 1] for k in range(phi.size)
                                    if t - k - 1 >= 0)
    return e[burn:]


@pytest.mark.parametrize("order", [1, 2, 3])
def test_the_autoregression_is_statsmodels_yule_walker(order):
    e = _autoregressive(np.random.default_rng(order), 3000, [0.5, -0.3])
    models = levinson_durbin(autocovariances([e], order)[0], order)
    phi, sigma = yule_walker(e, order=order, method="mle", demean=False, result_object=False)
    np.testing.assert_allclose(models[order][0], phi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(models[order][1], sigma ** 2, rtol=1e-12)


def test_model_autocovariances_are_the_processes_own():
    np.testing.assert_allclose(model_autocovariances([0.5, -0.3], 2.0, 8),
                               2.0 * arma_acovf([1, -0.5, 0.3], [1], 9), rtol=1e-12)
    np.testing.assert_allclose(model_autocovariances([], 2.0, 3), [2.0, 0, 0, 0])
    # orders up to 10 with roots near the unit circle, many lags beyond the order (the
    # recursion the verdict's smoothed noise runs to twice its reach)
    rng = np.random.default_rng(4)
    for p in (1, 3, 10):
        phi = -np.poly(rng.uniform(-0.95, 0.95, p))[1:]
        np.testing.assert_allclose(model_autocovariances(phi, 0.7, 480),
                                   0.7 * arma_acovf(np.r_[1.0, -phi], [1.0], 481), rtol=1e-9,
                                   atol=1e-12 * abs(float(model_autocovariances(phi, 0.7, 0)[0])))


def test_whitening_is_the_filter_as_a_matrix():
    e = np.random.default_rng(0).normal(size=40)
    np.testing.assert_allclose(whitening_rows([0.4, 0.1], 40) @ e, whitened(e, [0.4, 0.1]),
                               rtol=1e-14)


@pytest.mark.parametrize("coefficients", [(0.8,), (1.2, -0.5), (0.3, 0.2, -0.4)])
def test_exact_whitening_inverts_the_toeplitz_covariance_and_draws_have_it(coefficients):
    # Oracle: statsmodels' autocovariances of the process, as a dense Toeplitz matrix.
    k = 24
    gamma = arma_acovf(np.r_[1.0, -np.asarray(coefficients)], np.array([1.0]), nobs=k)
    correlation = (gamma / gamma[0])[np.abs(np.subtract.outer(np.arange(k), np.arange(k)))]
    w = exactly_whitened(np.eye(k), coefficients)
    np.testing.assert_allclose(w.T @ w, np.linalg.inv(correlation), atol=1e-10)
    # Draws of stationary errors (sd 2) have that covariance from their first sample: 6000
    # draws know each entry to about 0.05 of the variance.
    rng = np.random.default_rng(1)
    draws = np.array([stationary_errors(coefficients, 2.0, k, rng) for _ in range(6000)])
    np.testing.assert_allclose(np.cov(draws.T), 4.0 * correlation, atol=0.3)
    assert np.max(np.abs(np.cov(draws.T)[0] - 4.0 * correlation[0])) < 0.25
    with pytest.raises(ValueError, match="a record of 2 samples for an autoregression of"):
        exactly_whitened(np.ones(2), (0.5, 0.1, 0.1))


def test_padded_records_are_whitened_channel_by_channel_and_keep_a_failure():
    # Channels of orders 1, 2 and 0 in one record padded by two samples: each channel as the
    # filter of `whitened`, its own first samples and the padding zero; a failed evaluation
    # stays FAILED_RESIDUAL.
    coefficients = np.array([[0.5, 0.0], [0.3, -0.2], [0.0, 0.0]])
    residuals = np.random.default_rng(0).normal(size=(10, 3))
    weight = np.r_[np.ones(8), 0.0, 0.0]
    residuals[8:] = 0.0
    out = np.asarray(whiten_padded(jnp.asarray(residuals), jnp.asarray(weight),
                                   jnp.asarray(coefficients)))
    np.testing.assert_allclose(out[1:8, 0], whitened(residuals[:8, 0], [0.5]), rtol=1e-14)
    np.testing.assert_allclose(out[2:8, 1], whitened(residuals[:8, 1], [0.3, -0.2]), rtol=1e-14)
    np.testing.assert_array_equal(out[:8, 2], residuals[:8, 2])
    assert out[0, 0] == 0 and not out[:2, 1].any() and not out[8:].any()
    residuals[3, 1] = FAILED_RESIDUAL
    out = np.asarray(whiten_padded(jnp.asarray(residuals), jnp.asarray(weight),
                                   jnp.asarray(coefficients)))
    assert out[3, 1] == FAILED_RESIDUAL


def test_auto_keeps_white_noise_white_and_finds_an_order_where_it_is_not():
    rng = np.random.default_rng(1)
    white = [fit_channel_noise([rng.normal(size=1500)], AR()).order for _ in range(20)]
    assert sum(order == 0 for order in white) >= 18
    correlated = fit_channel_noise([_autoregressive(rng, 1500, [0.6])], AR())
    assert correlated.order >= 1
    assert abs(correlated.coefficients[0] - 0.6) < 0.06
    # the stationary deviation of AR(1) is s_a / sqrt(1 - phi^2)
    assert correlated.marginal == pytest.approx(
        correlated.innovation / np.sqrt(1 - correlated.coefficients[0] ** 2), rel=0.05)
    assert fit_channel_noise([rng.normal(size=100)], White()).order == 0


def test_channels_weakly_correlated_alike_are_judged_together():
    # A segment test's six channels of 90 rows under AR(1) rho 0.3: BIC channel by channel
    # leaves about a quarter white; the six together show the correlation, and each takes an
    # order (AIC's from 1 up). The joint judgement is the sum of the channels' AR(1) gains
    # against the sum of their penalties, computed here from statsmodels' Yule-Walker
    # innovation variances. White channels stay white as often as alone.
    rng = np.random.default_rng(30)
    names = [f"c{k}" for k in range(6)]
    left = {"alone": 0, "together": 0, "white alone": 0, "white together": 0}
    for record in range(60):
        block = np.stack([_autoregressive(rng, 90, [0.3]) for _ in names], axis=1)
        together = channel_noises(names, [1.0] * 6, 0, [block], AR())
        alone = [fit_channel_noise([block[:, k]], AR()).order for k in range(6)]
        gains = sum(90 * np.log(float(block[:, k] @ block[:, k]) / 90 / yule_walker(
            block[:, k], order=1, method="mle", demean=False)[1] ** 2) for k in range(6))
        joint = gains > 6 * np.log(90)
        for name, order in zip(names, alone):  # (a channel's own order kept where it has one)
            assert together[name].order == order if order else (
                (together[name].order >= 1) == joint), (record, name, order, joint)
        left["alone"] += sum(order == 0 for order in alone)
        left["together"] += sum(together[n].order == 0 for n in names)
        white = rng.normal(size=(90, 6))
        left["white alone"] += sum(fit_channel_noise([white[:, k]], AR()).order == 0
                                   for k in range(6))
        left["white together"] += sum(noise.order == 0 for noise in channel_noises(
            names, [1.0] * 6, 0, [white], AR()).values())
    assert left["alone"] > 0.15 * 360 and left["together"] < 0.06 * 360, left
    assert left["white together"] >= left["white alone"] - 6 and left["white alone"] > 0.9 * 360


def test_auto_takes_akaikes_order_where_bayes_finds_the_noise_correlated():
    # The orders are those of the two criteria computed here from statsmodels' Yule-Walker
    # innovation variances (an oracle outside spineid's Levinson-Durbin): white noise stays
    # white (BIC's 0); low-pass filtered noise, no finite autoregression, gets AIC's order,
    # above BIC's on these records.
    from scipy import signal

    def criteria(series, highest=10):
        n = series.size
        variances = [float(series @ series) / n] + [
            yule_walker(series, order=p, method="mle", demean=False)[1] ** 2
            for p in range(1, highest + 1)]
        return [min(range(highest + 1), key=lambda p: n * np.log(variances[p]) + p * penalty)
                for penalty in (np.log(n), 2.0)]

    rng = np.random.default_rng(12)
    white = rng.normal(size=1500)
    assert criteria(white)[0] == 0 and fit_channel_noise([white], AR()).order == 0
    b, a = signal.butter(4, 0.08)
    raised = 0
    for _ in range(5):
        filtered = signal.filtfilt(b, a, rng.normal(size=900))[200:-200]
        bic, aic = criteria(filtered)
        assert bic >= 1
        assert fit_channel_noise([filtered], AR()).order == max(aic, bic)
        raised += aic > bic
    assert raised >= 3


def test_newey_west_errors_are_statsmodels_hac():
    rng = np.random.default_rng(2)
    n = 600
    X = np.column_stack([np.ones(n), rng.normal(size=n), np.linspace(0, 1, n)])
    y = X @ [1.0, 2.0, 3.0] + _autoregressive(rng, n, [0.7])
    lags = newey_west_lags(n)
    peer = statsmodels.OLS(y, X).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    ours = hac_covariance(X, y - X @ peer.params, [np.arange(n)], np.ones(3, bool))
    np.testing.assert_allclose(np.sqrt(np.diag(ours)), peer.bse, rtol=1e-10)


def test_newey_west_errors_of_records_sharing_a_factor_are_those_of_the_stacked_system():
    # Three records whose Jacobians are `X @ M_r` (the load channels of one test: `X` its
    # deflections): the factored meat equals statsmodels' panel HAC of the stacked system, and
    # a column left out of the analysis stays NaN without changing the others.
    rng = np.random.default_rng(4)
    n, lags = 500, 5
    X = rng.normal(size=(n, 4)).cumsum(axis=0) / 10
    maps = rng.normal(size=(3, 4, 5))
    errors = np.column_stack([_autoregressive(rng, n, [0.6]) for _ in range(3)])
    stacked = np.concatenate([X @ m for m in maps])
    gram = stacked.T @ stacked
    peer = statsmodels.OLS(errors.T.ravel(), stacked).fit(
        cov_type="hac-panel", cov_kwds={"groups": np.repeat(np.arange(3), n), "maxlags": lags,
                                        "use_correction": False})
    # (the meat of the least-squares estimate's residuals, as statsmodels forms it)
    residuals = errors.T.ravel() - stacked @ peer.params
    ours = factored_hac_covariance(gram, X, maps, residuals.reshape(3, n).T, np.ones(5, bool),
                                   lags)
    np.testing.assert_allclose(np.sqrt(np.diag(ours)), peer.bse, rtol=1e-10)
    records = [np.arange(r * n, (r + 1) * n) for r in range(3)]
    columns = np.array([True, True, False, True, True])
    part = factored_hac_covariance(gram, X, maps, residuals.reshape(3, n).T, columns, lags)
    whole = hac_covariance(stacked, residuals, records, columns, lags)
    assert np.all(np.isnan(part[2])) and np.all(np.isnan(part[:, 2]))
    np.testing.assert_allclose(part[np.ix_(columns, columns)], whole[np.ix_(columns, columns)],
                               rtol=1e-12)


def _phases(x, knee=0.7, slopes=(1.5, 4.0)):
    return np.where(x < knee, slopes[0] * x, slopes[0] * knee + slopes[1] * (x - knee))


def _law_at_fixed_nodes(rng, n=400, sd=0.3, coefficients=(0.5, 0.2)):
    # A piecewise-linear law at fixed nodes (linear in its parameters) with autoregressive
    # load noise: the data, the nodes, and the design matrix of load[0] and the rises.
    x = np.linspace(0.0, 2.0, n)
    nodes = np.array([0.0, 0.7, 1.4, 2.0])
    y = np.interp(x, nodes, [0.0, 1.0, 1.5, 3.2]) + _autoregressive(rng, n, coefficients, sd)
    hats = np.stack([np.interp(x, nodes, np.eye(4)[j]) for j in range(4)], axis=1)
    return LoadDisplacementData(displacement=x, load=y), nodes, hats @ np.tril(np.ones((4, 4)))


@pytest.mark.parametrize("noise", ["ar:2", "auto"])
def test_a_law_at_fixed_nodes_is_statsmodels_glsar_under_the_fitted_noise(noise):
    # Linear in its parameters at fixed nodes: the generalized least-squares estimate and its
    # errors equal statsmodels' GLSAR at the autoregression the fit settled on, and the robust
    # errors its OLS HAC errors.
    data, nodes, X = _law_at_fixed_nodes(np.random.default_rng(5))
    y, n = data.load, data.load.size
    fit = fit_load_law(data, LawForm("piecewise_linear", nodes, monotone=False), noise=noise)
    phi = np.array(fit.goodness_of_fit.noise_model["load"]["coefficients"])
    assert phi.size == (2 if noise == "ar:2" else phi.size) and phi.size >= 1
    peer = GLSAR(y, X, rho=phi).fit()
    np.testing.assert_allclose(fit.values, peer.params, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fit.stderr, peer.bse, rtol=1e-6)
    ols = statsmodels.OLS(y, X).fit(cov_type="HAC", cov_kwds={"maxlags": newey_west_lags(n)})
    np.testing.assert_allclose(fit.stderr_robust, ols.bse, rtol=1e-6)
    report = fit.report()
    assert report["goodness_of_fit"]["noise_model"]["load"]["order"] == phi.size
    assert all("stderr_robust" in entry for entry in report["parameters"])


@pytest.mark.parametrize("noise", ["phi:0.5,0.2", AR(coefficients=(0.5, 0.2))])
def test_a_law_under_coefficients_given_is_statsmodels_glsar_at_them(noise):
    # A lab that knows its filter gives the autoregression: only the innovations' deviation is
    # estimated, and the fit is statsmodels' GLSAR at exactly those coefficients.
    rng = np.random.default_rng(5)
    data, nodes, X = _law_at_fixed_nodes(rng)
    fit = fit_load_law(data, LawForm("piecewise_linear", nodes, monotone=False), noise=noise)
    assert fit.goodness_of_fit.noise_model["load"]["coefficients"] == [0.5, 0.2]
    peer = GLSAR(data.load, X, rho=[0.5, 0.2]).fit()
    np.testing.assert_allclose(fit.values, peer.params, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fit.stderr, peer.bse, rtol=1e-6)
    # The verdict whitens by the coefficients given: right ones explain the data (the noise
    # a small part of the range, as a tester's), wrong ones leave the innovations correlated.
    levels = [fit_load_law(_law_at_fixed_nodes(rng, sd=0.01, coefficients=[0.9])[0],
                           LawForm("piecewise_linear", nodes, monotone=False),
                           noise=given).goodness_of_fit for given in ("phi:0.9", "phi:0.05")]
    assert levels[0].level == "explains"
    assert levels[1].level != "explains" and levels[1].explains_data is False


def test_coefficients_of_zeros_only_are_white_noise():
    # `phi:0` whitens by nothing: the fit is statsmodels' OLS, as under `white`, and its noise
    # model has order 0 (no first sample left out of the verdict for a zero coefficient).
    data, nodes, X = _law_at_fixed_nodes(np.random.default_rng(7), coefficients=[0.0])
    form = LawForm("piecewise_linear", nodes, monotone=False)
    fit = fit_load_law(data, form, noise="phi:0,0")
    peer = statsmodels.OLS(data.load, X).fit()
    np.testing.assert_allclose(fit.values, peer.params, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fit.stderr, peer.bse, rtol=1e-6)
    assert fit.goodness_of_fit.noise_model["load"]["order"] == 0
    assert fit.goodness_of_fit.noise_model["load"]["coefficients"] == []


@pytest.mark.parametrize("noise, options, message", [
    ("phi:1.2", {}, "not a stationary autoregression"), ("phi:0.5,x", {}, "comma-separated"),
    ("phi:load=0.5;load=0.2", {}, "each channel once"), ("phi:theta=0.5", {}, "no channel"),
    ("phi:0.5", dict(displacement_noise=1e-3), "load noise is white"),
    # (an autocorrelation given is named as given, beside the coefficients it became)
    ("acf:1,0.5", dict(displacement_noise=1e-3), r"noise acf:1,0.5 \(phi:0.5\): with"),
])
def test_coefficients_the_data_cannot_take_are_refused(noise, options, message):
    x = np.linspace(0, 1, 45)
    with pytest.raises(ValueError, match=message):
        fit_load_law(LoadDisplacementData(displacement=x, load=x),
                     LawForm("polynomial", degree=1), noise=noise, **options)
    with pytest.raises(ValueError, match="not both"):
        AR(1, coefficients=(0.5,))


def _tester(rng, law, n=1500, rho=0.6, sd=0.01):
    # A quasi-static ramp in mm and N as a tester records it: load noise correlated from
    # sample to sample.
    x = np.linspace(0.0, 3.0, n)
    return LoadDisplacementData(displacement=x * 1e-3,
                                load=law(x) + _autoregressive(rng, n, [rho], sd))


def test_a_right_law_under_correlated_noise_is_accepted_with_errors_that_cover():
    rng = np.random.default_rng(7)
    covered, levels = [], []
    for _ in range(6):
        fit = fit_load_law(_tester(rng, _phases),
                           LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True))
        knee = fit.derived["node_displacement"][1]
        covered.append(abs(knee[0] - 0.7e-3) < 2.5 * knee[1])
        levels.append(fit.goodness_of_fit.level)
        assert fit.goodness_of_fit.noise_model["load"]["order"] >= 1
    assert levels.count("explains") >= 5 and "does_not_describe" not in levels
    assert sum(covered) >= 5


def test_white_errors_understate_what_the_noise_model_states():
    # AR(1) at 0.6: the errors of generalized least squares are about sqrt(1.6 / 0.4) = 2
    # times those computed as if the noise were white.
    data = _tester(np.random.default_rng(8), _phases)
    white = fit_load_law(data, LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True),
                         noise="white")
    auto = fit_load_law(data, LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True))
    ratio = auto.stderr / white.stderr
    assert np.all((ratio > 1.5) & (ratio < 2.7)), ratio
    assert white.goodness_of_fit.explains_data is False  # (its residuals are not white)


def test_a_slightly_curved_law_is_described_and_a_missed_phase_is_flagged(tmp_path):
    rng = np.random.default_rng(9)

    def curved(x):  # a two-phase law with a smooth bend: about 1% of the range left over
        return _phases(x) + 0.12 * np.sin(np.pi * x / 1.5)

    def yielding(x):  # a third phase (a yield) the two-phase law cannot follow
        return np.where(x < 2.2, _phases(x), _phases(2.2) + 0.5 * (x - 2.2))

    described = fit_load_law(_tester(rng, curved, sd=0.004),
                             LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True))
    misfit = described.goodness_of_fit.misfit["load"]
    # (an autoregression of high order takes up much of a smooth bend, so the line between
    # "explains" and "describes" is drawn weakly there; the size of the misfit is what counts)
    assert described.goodness_of_fit.level in ("explains", "describes") and described.accepted
    assert 0.003 < misfit["fraction_of_range"] < 0.02
    flagged = fit_load_law(_tester(rng, yielding, sd=0.004),
                           LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True))
    assert flagged.goodness_of_fit.level == "does_not_describe" and not flagged.accepted
    assert flagged.goodness_of_fit.misfit["load"]["fraction_of_range"] > 0.02
    assert "does NOT describe" in flagged.summary()
    # The command line exits 1 for it, and its law.toml says first that it is not to be used
    # as it is (the accepted fit's does not).
    for name, law, status in (("yielding", yielding, 1), ("curved", curved, 0)):
        data = _tester(np.random.default_rng(9), law, sd=0.004)
        (tmp_path / f"{name}.csv").write_text("displacement,load\n" + "".join(
            f"{x:.17g},{y:.17g}\n" for x, y in zip(data.displacement, data.load)))
        assert main(["table", str(tmp_path / f"{name}.csv"), "--n-nodes", "3",
                     "--free-breakpoints", "--out", str(tmp_path / name), "--no-plots"]) == status
        first = (tmp_path / name / "law.toml").read_text().splitlines()[0]
        assert first.startswith("# CAUTION: this fit does not describe its data") == bool(status)
    # A lab that tolerates such a misfit says so
    assert fit_load_law(_tester(rng, yielding, sd=0.004),
                        LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True),
                        max_misfit=0.2).accepted


def test_the_smooth_misfit_test_keeps_its_false_alarm_rate_under_correlated_noise():
    rng = np.random.default_rng(11)
    alarms = 0
    for _ in range(200):
        e = _autoregressive(rng, 1000, [0.6])
        alarms += smooth_misfit([e], fit_channel_noise([e], AR()))["p_value"] < 0.01
    assert alarms <= 6  # 1% expected: 2 of 200


def test_pure_noise_on_a_channel_that_moves_little_is_no_misfit_too_large():
    # White residuals of 41 samples on a channel whose range is 12 noise sd (a marker over a
    # small motion): the smooth part of the noise alone exceeds 2% of the range in many
    # records, but white noise explains it (p_white, an F test of the smoothed against the
    # rough part), so no verdict fails on it; a real smooth misfit still does, on records
    # as short as 15 samples.
    rng = np.random.default_rng(5)
    alarms, beyond = 0, 0
    for _ in range(200):
        e = rng.standard_normal(41)
        found = smooth_misfit([e], ChannelNoise(0, (), 1.0, 1.0))
        beyond += found["rms"] > 0.02 * 12.0
        alarms += found["p_white"] < 0.01
    assert beyond > 40 and alarms <= 6, (beyond, alarms)  # (1% expected: 2 of 200)
    noise_only = rng.standard_normal((41, 1))
    verdict = assess_fit([noise_only], ("m_x",), 1, noise_given=False, sigma={"m_x": 1.0},
                         ranges={"m_x": 6.0})
    assert verdict.misfit["m_x"]["fraction_of_range"] > 0.02  # (beyond the tolerance ...)
    assert not verdict.misfit["m_x"]["too_large"]  # (... but white noise explains it)
    for n in (15, 41):
        t = np.linspace(0.0, 1.0, n)
        bent = 0.5 * np.sin(2 * np.pi * t)[:, None] + 0.1 * rng.standard_normal((n, 1))
        verdict = assess_fit([bent / 0.1], ("m_x",), 1, noise_given=False,
                             sigma={"m_x": 0.1}, ranges={"m_x": 12.0})
        assert verdict.misfit["m_x"]["too_large"] and verdict.level == "does_not_describe"
    # residuals exactly zero: nothing to test, no NaN
    assert smooth_misfit([np.zeros(50)], ChannelNoise(0, (), 1.0, 1.0))["p_white"] == 1.0


@pytest.mark.parametrize("noise, message", [
    ("ar:0", "expected auto, white, ar:P"), ("ar:x", "expected auto, white, ar:P"),
    ("pink", "expected auto, white, ar:P"), ("ar:60", "expected auto, white, ar:P"),
    ("ar:9", "an order of at most 4"),
])
def test_a_noise_model_the_data_cannot_support_is_refused(noise, message):
    x = np.linspace(0, 1, 45)
    with pytest.raises(ValueError, match=message):
        fit_load_law(LoadDisplacementData(displacement=x, load=x), LawForm("polynomial", degree=1),
                     noise=noise)
    with pytest.raises(ValueError, match="max_misfit"):
        fit_load_law(LoadDisplacementData(displacement=x, load=x), LawForm("polynomial", degree=1),
                     max_misfit=0.0)
    with pytest.raises(ValueError, match="order"):
        AR(0)


def _write_test(path, data):
    np.savetxt(path, np.column_stack([data.displacement * 1e3, data.load]), delimiter=",",
               header="Disp_mm,Force_N", comments="")


def test_the_table_verb_takes_a_noise_model_and_a_misfit_tolerance(tmp_path, capsys):
    data = _tester(np.random.default_rng(12), _phases)
    path = tmp_path / "test.csv"
    _write_test(path, data)
    common = ["table", str(path), "--displacement", "Disp_mm", "--load", "Force_N",
              "--n-nodes", "3", "--free-breakpoints", "--no-plots"]
    assert main(common + ["--out", str(tmp_path / "auto")]) == 0
    report = json.loads((tmp_path / "auto" / "report.json").read_text())
    assert report["goodness_of_fit"]["level"] == "explains"
    assert report["goodness_of_fit"]["noise_model"]["load"]["order"] >= 1
    assert main(common + ["--noise-model", "phi:0.6", "--out", str(tmp_path / "given")]) == 0
    report = json.loads((tmp_path / "given" / "report.json").read_text())
    assert report["goodness_of_fit"]["noise_model"]["load"]["coefficients"] == [0.6]
    # A misfit load with its unit, or bare in the load column's unit (Force_N: N): the same.
    fractions = []
    for misfit, folder in (("0.00005kN", "kN"), ("0.05", "bare")):
        assert main(common + ["--max-misfit", misfit, "--out", str(tmp_path / folder)]) in (0, 1)
        report = json.loads((tmp_path / folder / "report.json").read_text())
        fractions.append(report["goodness_of_fit"]["misfit"]["load"]["max_fraction"])
    assert fractions[0] == pytest.approx(fractions[1], rel=1e-12)
    assert fractions[1] == pytest.approx(0.05 / np.ptp(data.load), rel=1e-9)
    capsys.readouterr()
    for extra, message in [(["--noise-model", "ar:2", "--noise", "0.01"], "give one of the two"),
                           (["--noise-model", "pink"], "expected auto, white, ar:P"),
                           (["--max-misfit", "2mm"], "'2mm': mm is a length, expected a force"),
                           (["--max-misfit", "2furlong"], "unknown unit 'furlong'"),
                           (["--max-misfit", "2N%"], "a percentage of the data's range"),
                           (["--max-misfit", "2%%"], "expected a percentage of the data's range")]:
        assert _status(common + extra + ["--out", str(tmp_path / "refused")]) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "refused").exists()
    # The verbs whose tolerance is a percentage only do not offer a load.
    for verb in (["stiffness", "tests.csv"], ["segment", "--fit", "cases.csv"],
                 ["fit", "model.toml", "data.csv"]):
        assert _status(verb + ["--max-misfit", "abc", "--out", str(tmp_path / "refused")]) == 2
        error = capsys.readouterr().err
        assert "'abc': expected a percentage of each channel's range (3%)" in error, error
        assert "load" not in error


def _status(argv):
    # The exit status of the command line, argparse's refusals included.
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


def test_unevenly_sampled_records_are_refused_an_autoregression_or_taken_as_white():
    rng = np.random.default_rng(13)
    time = np.cumsum(rng.uniform(0.5e-3, 1.5e-3, 300))
    x = np.linspace(0.0, 1e-3, 300)
    data = LoadDisplacementData(displacement=x, load=2e4 * x + rng.normal(0, 0.05, 300),
                                time=time)
    with pytest.raises(ValueError, match="not evenly spaced in time"):
        fit_load_law(data, LawForm("polynomial", degree=1), noise="ar:1")
    fit = fit_load_law(data, LawForm("polynomial", degree=1))
    assert fit.goodness_of_fit.noise_model["load"]["order"] == 0
    assert any("not evenly spaced" in warning for warning in fit.warnings)


def test_a_table_without_time_is_whitened_in_the_order_of_its_displacement():
    # The same ramp with its rows shuffled: the noise model, values and errors are those of
    # the rows in order (the samples are taken in the order of the displacement).
    data = _tester(np.random.default_rng(14), _phases)
    order = np.random.default_rng(15).permutation(data.displacement.size)
    shuffled = LoadDisplacementData(displacement=data.displacement[order],
                                    load=data.load[order])
    fits = [fit_load_law(d, LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True),
                         noise="ar:1") for d in (data, shuffled)]
    # (to the noise's settling: its estimate is final within 2%)
    np.testing.assert_allclose(fits[1].values, fits[0].values, rtol=1e-6)
    np.testing.assert_allclose(fits[1].stderr, fits[0].stderr, rtol=2e-2)
    assert fits[1].goodness_of_fit.noise_model["load"]["coefficients"] == pytest.approx(
        fits[0].goodness_of_fit.noise_model["load"]["coefficients"], rel=2e-2)
    assert fits[0].goodness_of_fit.noise_model["load"]["coefficients"][0] > 0.4


def test_a_noise_given_by_its_autocorrelation_is_the_autoregression_with_it():
    # The Yule-Walker equations, by Levinson-Durbin, against scipy's Toeplitz solve; an AR(1)
    # autocorrelation gives its coefficient back; a filtered noise's autocorrelation (a moving
    # average's, known exactly) gives an AR whose own autocorrelations match it at the lags
    # given; what is not an autocorrelation is refused in one sentence.
    import re

    import scipy.linalg

    from spineid.identify._common._noise_kinds import as_noise_model, autoregression_of

    rho = np.array([1.0, 0.7, 0.3, 0.1, 0.05])
    np.testing.assert_allclose(autoregression_of(3 * rho),
                               scipy.linalg.solve_toeplitz(rho[:-1], rho[1:]), rtol=1e-12)
    phi = AR.from_autocorrelation([1.0, 0.6, 0.36]).coefficients  # (an exact AR(1))
    assert phi[0] == pytest.approx(0.6, abs=1e-12) and all(abs(c) < 1e-12 for c in phi[1:])
    # No trailing zeros: an order is the last nonzero coefficient, as the compiled whitening
    # reads it (with one, numpy's whitening left out a first row more than the fit's).
    assert AR(coefficients=(0.6, 0.0)).coefficients == (0.6,)
    assert AR(coefficients={"x": (0.3, 0.0, 0.0)}).given("x") == (0.3,)
    # statsmodels' autocovariance of an AR(2) gives its coefficients back.
    np.testing.assert_allclose(autoregression_of(arma_acovf([1.0, -0.5, 0.3], [1.0], 3)),
                               [0.5, -0.3], atol=1e-12)
    weights = np.array([1.0, 0.8, 0.5, 0.2])  # (a short low-pass filter of white noise)
    acf = np.array([weights[:weights.size - k] @ weights[k:] if k < weights.size else 0.0
                    for k in range(6)])  # (lags 0..5 of the moving average)
    phi = np.asarray(autoregression_of(acf))
    # The AR's autocorrelations at lags 1..5 (its Yule-Walker equations) reproduce acf.
    toeplitz = scipy.linalg.toeplitz(acf[:-1] / acf[0])
    np.testing.assert_allclose(toeplitz @ phi, acf[1:] / acf[0], atol=1e-12)
    model = as_noise_model("acf:x=1,0.6;theta=2,1.6")
    assert model.given("x") == pytest.approx((0.6,)) and model.given("theta") == \
        pytest.approx((0.8,)) and model.given("y") == ()
    for bad, message in (("acf:1,1.5", "not the autocorrelation of a stationary noise"),
                         ("acf:-1,0.5", "the first (lag 0) positive"),
                         ("acf:x", "comma-separated values after acf:")):
        with pytest.raises(ValueError, match=re.escape(message)):
            as_noise_model(bad)


def test_a_channel_that_carries_only_noise_is_judged_against_a_hundred_noise_deviations():
    # judged_ranges: a channel whose data range is its own noise's (a pure-moment test's
    # forces) is judged against 100 deviations of its residuals' rough part, measured by
    # differences (a smooth misfit added to it leaves that deviation where it was); a channel
    # that moves keeps its range.
    from spineid.identify._common._noise import judged_ranges

    rng = np.random.default_rng(3)
    noise = rng.normal(scale=[0.5, 2.0], size=(4000, 2))
    smooth = np.c_[np.zeros(4000), 30.0 * np.sin(np.linspace(0.0, np.pi, 4000))]
    judged = judged_ranges(noise + smooth, [1000.0, 3.0])
    assert judged[0] == 1000.0
    assert judged[1] == pytest.approx(100.0 * 2.0, rel=0.05)
    np.testing.assert_allclose(judged_ranges(noise, [1000.0, 3.0]), judged, rtol=1e-3)


def test_whitening_by_zero_coefficients_changes_nothing():
    # The fits under white weights carry zero coefficients of their refits' width (one compiled
    # program for both): the residuals must come back bit for bit, a failed evaluation before
    # a good row and the padding included.
    rng = np.random.default_rng(3)
    residuals = rng.normal(size=(64, 3))
    residuals[10] = FAILED_RESIDUAL
    weight = (np.arange(64) < 55).astype(float)
    residuals *= weight[:, None]
    for width in (1, 6):
        out = np.asarray(whiten_padded(jnp.asarray(residuals), jnp.asarray(weight),
                                       jnp.zeros((3, width))))
        np.testing.assert_array_equal(out, residuals)


def _lagged_correlations(x, lags):
    # The sample autocorrelations of a long record `(n,)` at lags 1..`lags`.
    x = x - x.mean()
    return np.array([x[:-k] @ x[k:] for k in range(1, lags + 1)]) / (x @ x)


def test_autoregressive_noise_for_simulations_has_the_process_autocorrelations():
    # `correlated_noise(phi=...)` against statsmodels' autocovariances of the AR(2) process;
    # its first sample as noisy as any (started in the stationary distribution, not at zero:
    # there the first sample's deviation would be the innovations', 0.66 of the marginal).
    from spineid import correlated_noise

    phi = (0.5, 0.3)
    long = correlated_noise((200_000, 2), [1.0, 2.0], phi=phi, rng=0)
    peer = arma_acovf(np.r_[1.0, -np.asarray(phi)], [1.0], nobs=7)
    np.testing.assert_allclose(_lagged_correlations(long[:, 0], 6), peer[1:] / peer[0],
                               atol=0.01)
    np.testing.assert_allclose(long.std(axis=0), [1.0, 2.0], rtol=0.02)
    across = correlated_noise((3, 20_000), 2.0, phi=phi, rng=1).std(axis=1)
    np.testing.assert_allclose(across, 2.0, rtol=0.03)
    assert np.all(correlated_noise(50, 0.3, phi=[0.0], rng=2) ==
                  0.3 * np.random.default_rng(2).standard_normal(50))


def test_filtered_noise_for_simulations_has_the_zero_phase_butterworth_spectrum():
    # White noise through a 4th-order Butterworth at 40 Hz, 1 kHz sampling, forwards and
    # backwards: its autocorrelations are the inverse transform of |H|^4 (scipy's frequency
    # response integrated), its deviation `sd`, at the record's ends too (no filter start-up).
    from scipy import signal

    from spineid import correlated_noise

    omega, response = signal.sosfreqz(signal.butter(4, 0.08, output="sos"), worN=1 << 16)
    power = np.abs(response) ** 4
    gamma = np.array([np.trapezoid(power * np.cos(omega * k), omega) for k in range(11)])
    long = correlated_noise(200_000, 0.5, low_pass=40.0, rate=1000.0, rng=3)
    np.testing.assert_allclose(_lagged_correlations(long, 10), gamma[1:] / gamma[0], atol=0.01)
    assert long.std() == pytest.approx(0.5, rel=0.03)
    ends = correlated_noise((40, 20_000), 0.5, low_pass=0.08, rng=4)
    np.testing.assert_allclose(ends[[0, -1]].std(axis=1), 0.5, rtol=0.03)


@pytest.mark.parametrize("shape, sd, options, message", [
    (100, 1.0, {}, "give phi=... .* or low_pass=..."),
    (100, 1.0, dict(phi=0.5, low_pass=0.1), "one of them"),
    (100, 1.0, dict(phi=1.0), r"correlated_noise\(phi\) = 1.0: not a stationary"),
    (100, 1.0, dict(low_pass=600.0, rate=1000.0), r"low_pass=600.0\): expected a cut-off "
     r"between 0 and 1 Hz \(the Nyquist rate 500 Hz\)"),
    (100, 1.0, dict(low_pass=40.0), "between 0 and 1 of the Nyquist rate"),
    (100, 1.0, dict(low_pass=0.1, rate=-5.0), "rate=-5.0"),
    (100, 1.0, dict(low_pass=40.0, rate="abc"), "rate='abc'"),
    (100, 1.0, dict(low_pass=0.1, filter_order=0), "filter_order=0"),
    ((100, 0), 1.0, dict(phi=0.5), "shape=.100, 0."),
    ((100, 3), [1.0, 2.0], dict(phi=0.5), r"one per channel of shape \(3,\)"),
    (100, -1.0, dict(phi=0.5), "finite values >= 0"),
])
def test_correlated_noise_refuses_what_it_cannot_draw(shape, sd, options, message):
    from spineid import correlated_noise

    with pytest.raises(ValueError, match=message):
        correlated_noise(shape, sd, **options)


def test_runs_between_gaps_shorter_than_the_order_give_no_innovation():
    # A marker seen for three frames between two dropouts, under an order of 4: that run
    # whitens to nothing (it raised before), and the channel's noise comes from the rest.
    from spineid.identify._common._goodness import misfit_exceeds

    assert whitened(np.arange(1.0, 4.0), [0.1] * 4).shape == (0,)
    rng = np.random.default_rng(4)
    block = _autoregressive(rng, 600, (0.6,))[:, None]
    block[[200, 204]] = np.nan
    noise = channel_noises(["x"], [1.0], 0, [block], AR(4))["x"]
    assert noise.order == 4 and np.isfinite(noise.innovation)
    # The smooth misfit that keeps an autoregression from taking up a wrong model is found
    # across gaps as without them.
    misfit = 0.5 * np.sin(np.linspace(0.0, 3.0 * np.pi, 600))[:, None] + 0.01 * block
    assert misfit_exceeds([np.nan_to_num(misfit)], [2.0], 0.02)
    assert misfit_exceeds([misfit], [2.0], 0.02)
