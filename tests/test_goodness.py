"""The goodness-of-fit verdict: its false-alarm rate on right models, measured by simulation
against the rate it states, and its power against residuals that are not noise; the verdict
of the load-law and stiffness-matrix fits."""

import math

import numpy as np
import pytest
from scipy import stats

import spineid
from spineid.identify._common._goodness import ALPHA, chi_square_sf, lag_one_z

CHANNELS = ("x", "y", "theta")
UNITS = {"x": "m", "y": "m", "theta": "rad"}


def least_squares_residuals(rng, n, p=4, channels=3):
    """Residuals of a linear least-squares fit of `p` smooth regressors to white noise `(n, c)`:
    what a right model leaves (the fit absorbs `p` directions per channel)."""
    ts = np.linspace(0.0, 1.0, n)
    design = np.stack([np.sin(2 * np.pi * f * ts + f) for f in (1.3, 2.9, 4.1, 6.7)[:p]], 1)
    basis, _ = np.linalg.qr(design)
    noise = rng.normal(size=(n, channels))
    return noise - basis @ (basis.T @ noise)


def test_chi_square_tail_equals_scipy():
    # Both branches of the incomplete gamma function (series below a + 1, continued fraction
    # above), tails far below 1e-100, and the limits.
    for dof in (1, 2, 3, 7.5, 50, 900, 1499, 1e4, 2e5):
        for ratio in (0.0, 1e-3, 0.1, 0.5, 0.9, 0.99, 1.0, 1.01, 1.1, 1.5, 2.0, 5.0, 30.0):
            statistic = ratio * dof
            expected = stats.chi2.sf(statistic, dof)
            if expected > 1e-300:
                assert chi_square_sf(statistic, dof) == pytest.approx(
                    expected, rel=1e-13 if dof <= 50 else 1e-9), (statistic, dof)
    assert chi_square_sf(math.inf, 3) == 0.0 and chi_square_sf(-1.0, 3) == 1.0
    assert math.isnan(chi_square_sf(5.0, 0)) and math.isnan(chi_square_sf(math.nan, 3))


@pytest.mark.parametrize("n", [60, 301, 1001])
def test_false_alarm_rate_on_right_models_is_at_most_the_stated_one(n):
    # 3000 right fits per length: the chi-square verdict (noise given) fires at ALPHA = 1%, the
    # whiteness verdict (noise estimated) at most that (its test is conservative).
    rng = np.random.default_rng(n)
    draws = 3000
    given = estimated = 0
    for _ in range(draws):
        residuals = least_squares_residuals(rng, n)
        verdict = spineid.assess_fit([residuals], CHANNELS, 12, noise_given=True,
                                     sigma=dict.fromkeys(CHANNELS, 1.0))
        given += not verdict.explains_data
        scale = np.sqrt(np.mean(residuals**2, axis=0))
        verdict = spineid.assess_fit([residuals / scale], CHANNELS, 12, noise_given=False,
                                     sigma=dict(zip(CHANNELS, 1e-6 * scale)), units=UNITS)
        estimated += not verdict.explains_data
    # Binomial(3000, 0.01): mean 30, standard deviation 5.4.
    assert 12 <= given <= 50, given
    assert estimated <= 50, estimated


def test_residuals_that_are_not_noise_are_flagged():
    rng = np.random.default_rng(3)
    ts = np.linspace(0.0, 0.5, 501)
    noise = rng.normal(size=(501, 3))
    # A smooth systematic misfit, the shape a local optimum leaves: with an rms of half the
    # noise the chi-square sees it (noise given); as large as the noise the whiteness test does.
    wave = np.sin(2 * np.pi * 4.0 * ts)[:, None]
    verdict = spineid.assess_fit([noise + 0.7 * wave], CHANNELS, 3, noise_given=True,
                                 sigma=dict.fromkeys(CHANNELS, 1.0))
    assert verdict.explains_data is False and verdict.p_value < ALPHA
    miss = noise + wave
    scale = np.sqrt(np.mean(miss**2, axis=0))
    verdict = spineid.assess_fit([miss / scale], CHANNELS, 3, noise_given=False,
                                 sigma=dict(zip(CHANNELS, 1e-6 * scale)), units=UNITS)
    assert verdict.explains_data is False
    assert "not white" in verdict.reasons[0]
    # An estimated noise above the plausible maximum (a 2 mm tracking noise) is flagged too.
    verdict = spineid.assess_fit([noise], CHANNELS, 3, noise_given=False,
                                 sigma={"x": 2e-3, "y": 1e-6, "theta": 1e-5}, units=UNITS)
    assert verdict.explains_data is False
    assert verdict.noise_check["x"]["plausible"] is False
    assert "implausibly large for x" in verdict.reasons[0]
    # A failed simulation is never a fit that explains its data.
    failed = noise.copy()
    failed[10, 0] = np.inf
    verdict = spineid.assess_fit([failed], CHANNELS, 3, noise_given=True,
                                 sigma=dict.fromkeys(CHANNELS, 1.0))
    assert verdict.explains_data is False and verdict.to_dict()["chi_square"] is None


def test_lag_one_statistic_is_standard_normal_for_white_noise():
    rng = np.random.default_rng(5)
    z = np.array([lag_one_z(rng.normal(size=400))[1] for _ in range(4000)])
    assert abs(z.mean()) < 0.06 and abs(z.std() - 1.0) < 0.05


def two_phase_data(rng, noise):
    x = np.linspace(-0.1, 0.1, 300)
    load = np.where(x < 0.02, 40.0 * x, 40.0 * 0.02 + 160.0 * (x - 0.02))
    return spineid.LoadDisplacementData(x, load + rng.normal(0.0, noise, x.size))


def test_load_law_verdict_tells_a_missing_breakpoint():
    rng = np.random.default_rng(11)
    data = two_phase_data(rng, 0.05)
    right = spineid.fit_load_law(data,
                                 spineid.LawForm("piecewise_linear", np.array([-0.1, 0.02, 0.1])))
    assert right.explains_data is True
    one_phase = spineid.fit_load_law(data,
                                     spineid.LawForm("piecewise_linear", np.array([-0.1, 0.1])))
    assert one_phase.explains_data is False
    # (the default noise model's autoregression takes up the residuals' correlation; the
    # smooth misfit's size is what flags the missing phase)
    assert one_phase.goodness_of_fit.level == "does_not_describe"
    assert one_phase.report()["goodness_of_fit"]["misfit"]["load"]["fraction_of_range"] > 0.05
    white = spineid.fit_load_law(data, spineid.LawForm("piecewise_linear", np.array([-0.1, 0.1])),
                                 noise="white")
    assert white.report()["goodness_of_fit"]["whiteness"]["load"]["p_value"] < ALPHA
    # The same records in another row order: the verdict follows the displacement.
    order = rng.permutation(data.displacement.size)
    shuffled = spineid.LoadDisplacementData(data.displacement[order], data.load[order])
    again = spineid.fit_load_law(shuffled,
                                 spineid.LawForm("piecewise_linear", np.array([-0.1, 0.1])))
    assert again.explains_data is False


def test_aic_with_the_noise_estimated_tells_models_apart_as_lmfit_would():
    # With the noise estimated, the chi-square weighted by that estimate is about n for any
    # model; the AIC must come from the raw residuals (lmfit's unweighted `n ln(RSS / n) + 2 p`).
    rng = np.random.default_rng(12)
    data = two_phase_data(rng, 0.05)
    fits = {"two phases": spineid.fit_load_law(data,
                                               spineid.LawForm("piecewise_linear",
                                                               np.array([-0.1, 0.02, 0.1]))),
            "one phase": spineid.fit_load_law(data,
                                              spineid.LawForm("piecewise_linear",
                                                              np.array([-0.1, 0.1])))}
    aic = {}
    for name, fit in fits.items():
        gof = fit.goodness_of_fit
        rss = float(np.sum(np.asarray(fit.residuals) ** 2))
        n, p = data.load.size, gof.n_parameters
        assert gof.aic == pytest.approx(n * math.log(rss / n) + 2 * p, rel=1e-9)
        assert gof.bic == pytest.approx(n * math.log(rss / n) + math.log(n) * p, rel=1e-9)
        aic[name] = gof.aic
    assert aic["two phases"] < aic["one phase"] - 100


def test_stiffness_verdict_needs_the_noise_and_then_tells_a_nonlinear_joint():
    rng = np.random.default_rng(2)
    stiffness = np.diag([9e4, 2.2e5, 7.5e4, 55.0, 38.0, 70.0])
    deflections = rng.uniform(-1, 1, (24, 6)) * np.array([3e-4] * 3 + [0.03] * 3)
    loads = deflections @ stiffness
    sigma = np.array([0.2] * 3 + [0.005] * 3)
    test = spineid.QuasiStaticTest(loads + rng.normal(size=loads.shape) * sigma, deflections)
    right = spineid.fit_stiffness_matrix(test, "diagonal", sigma, exact=False)
    assert right.explains_data is True
    estimated = spineid.fit_stiffness_matrix(test, "diagonal", exact=False)
    # The rows are taken in the order recorded: their whiteness and smooth misfit tell.
    assert estimated.goodness_of_fit.level == "explains" and estimated.accepted
    # A joint that stiffens (cubic term) is not a constant matrix: with the noise, flagged.
    stiffening = loads + 2e11 * deflections**3 * np.array([1, 1, 1, 0, 0, 0])  # up to 5 N
    test = spineid.QuasiStaticTest(stiffening + rng.normal(size=loads.shape) * sigma,
                                   deflections)
    wrong = spineid.fit_stiffness_matrix(test, "diagonal", sigma, exact=False)
    assert wrong.explains_data is False and not wrong.accepted
    assert math.isfinite(wrong.goodness_of_fit.chi_square)


def test_a_parameter_zero_within_its_error_gets_no_relative_error_warning():
    # A line through the origin fitted with an intercept: the intercept is zero within its
    # error (its relative error, hundreds of percent, says nothing: it is said to be
    # indistinguishable from zero); a slope determined to 30% is warned about as before.
    from spineid.identify._common._uncertainty import fisher_analysis

    x = np.linspace(0.0, 1.0, 20)
    jacobian = np.stack([np.ones_like(x), x], axis=1) / 0.5  # (noise 0.5)
    values = np.array([0.01, 1.0])
    covariance, identifiability = fisher_analysis(jacobian, values, np.ones(2),
                                                  ["intercept", "slope"])
    errors = np.sqrt(np.diag(covariance))
    assert abs(values[0]) < errors[0] and 0.1 < errors[1] / values[1] < 1.0
    warned = " ".join(identifiability.warnings)
    assert "slope is identifiable but poorly determined" in warned
    assert "intercept is not distinguishable from zero: 0.01 +- " in warned
    assert "intercept is identifiable but poorly determined" not in warned


def test_combinations_on_relative_changes_compare_parameters_of_different_units():
    # Springs (N/m, about 2e4) and a damper (N m s/rad, about 4e-3), each seen by the data: in
    # SI the damper's coefficient dwarfs the springs' in every combination; on relative changes
    # each combination is led by its own parameter, and its value and error are those the
    # delta method gives the same function (Identifiability.standard_error_of).
    from spineid.identify._common._uncertainty import fisher_analysis

    rng = np.random.default_rng(0)
    jacobian = rng.normal(size=(200, 3)) * np.array([1e-4, 1e-4, 1e3])
    values = np.array([2e4, 2.5e4, 4e-3])
    names = ["springs[0].stiffness", "springs[1].stiffness", "torsion[0].damping"]
    _, identifiability = fisher_analysis(jacobian, values, np.abs(values), names)
    leaders = set()
    for combination in identifiability.combinations:
        assert max(combination["coefficients"], key=lambda n: abs(
            combination["coefficients"][n])) == "torsion[0].damping"
        relative = combination["relative"]
        leaders.add(max(relative["coefficients"], key=lambda n: abs(relative["coefficients"][n])))
        gradient = np.array([relative["coefficients"].get(n, 0.0) / relative["scales"][n]
                             for n in names])
        assert relative["standard_error"] == pytest.approx(
            identifiability.standard_error_of(gradient), rel=1e-9)
        assert relative["value"] == pytest.approx(gradient @ values, rel=1e-12)
    assert leaders == set(names)


def test_a_noise_model_that_whitens_too_much_is_said_but_not_a_rejection():
    # White residuals judged under AR(1) coefficients given as 0.6: the innovations
    # e_t - 0.6 e_(t-1) correlate at about -0.44 at lag one. The one-sided whiteness test does
    # not take that for a missed motion (the model is right); the advice says the noise model
    # whitens too much, so that the errors are too large. White innovations get no such advice.
    from spineid.identify._common._noise_model import ChannelNoise, stationary_errors

    rng = np.random.default_rng(7)
    residuals = rng.normal(size=(1000, 3))
    given = ChannelNoise(1, (0.6,), 0.8, 1.0)
    verdict = spineid.assess_fit([residuals], CHANNELS, 3, noise_given=False,
                                 sigma=dict.fromkeys(CHANNELS, 1.0),
                                 noise_models=dict.fromkeys(CHANNELS, given))
    assert verdict.explains_data
    assert verdict.whiteness["x"]["lag_one_autocorrelation"] < -0.35
    assert any("whitens more than the noise needs" in a and "x, y, theta" in a
               for a in verdict.advice)
    correlated = np.stack([stationary_errors((0.6,), 1.0, 1000, rng) for _ in CHANNELS],
                          axis=1)
    verdict = spineid.assess_fit([correlated], CHANNELS, 3, noise_given=False,
                                 sigma=dict.fromkeys(CHANNELS, 1.0),
                                 noise_models=dict.fromkeys(CHANNELS, given))
    assert verdict.explains_data and not any("whitens" in a for a in verdict.advice)


def test_the_smooth_misfit_test_is_its_direct_sums_done_fast():
    # smooth_misfit's moving averages and window autocovariances (by running sums and the
    # FFT, so that a 10^6-row record takes a fraction of a second) against the sums written
    # out directly, on AR(2) residuals with a smooth part, under an AR(2) noise model.
    from spineid.identify._common._goodness import smooth_misfit, smoothing_width
    from spineid.identify._common._noise_model import ChannelNoise, model_autocovariances
    from spineid.identify._common._sliding import autocorrelation_sums, sliding_dot

    rng = np.random.default_rng(11)
    shocks = rng.normal(size=3000)
    e = np.zeros(3000)
    for t in range(2, 3000):
        e[t] = 0.5 * e[t - 1] - 0.2 * e[t - 2] + shocks[t]
    series = [e[:1900] + 0.3 * np.sin(np.linspace(0, 3, 1900)), e[1900:] + 5.0]
    noise = ChannelNoise(order=2, coefficients=(0.5, -0.2), innovation=1.0, marginal=1.3)
    found = smooth_misfit(series, noise)
    # The direct sums.
    widths = [smoothing_width(s.size) for s in series]
    smoothed = [np.convolve(s, np.ones(w) / w, mode="valid") for s, w in zip(series, widths)]
    rough = [s[w // 2: w // 2 + v.size] - v for s, w, v in zip(series, widths, smoothed)]
    width = int(round(np.mean(widths)))
    gamma = model_autocovariances((0.5, -0.2), 1.0, 2 * (width + 200))
    lags = np.arange(-(width - 1), width)
    taper = (width - np.abs(lags)) / width ** 2
    c = np.array([taper @ gamma[np.abs(lag + lags)] for lag in range(width + 200)])
    m = sum(v.size for v in smoothed)
    statistic = sum(v @ v for v in smoothed)
    variance = 2.0 * m * (c[0] ** 2 + 2.0 * np.sum(c[1:] ** 2))
    scale, dof = variance / (2.0 * m * c[0]), 2.0 * (m * c[0]) ** 2 / variance
    rms = np.sqrt(max(statistic / m - sum(r @ r for r in rough) / m / width, 0.0))
    assert found["rms"] == pytest.approx(rms, rel=1e-9)
    assert found["p_value"] == pytest.approx(stats.chi2.sf(statistic / scale, dof),
                                             rel=1e-6, abs=1e-12)
    # The noise alone (its p-values moderate, so that the window autocovariances `c` and the
    # white-noise test's moments count): the chi-square's and the F test's p-values as the
    # direct sums give them.
    alone = smooth_misfit([e], noise)
    width = smoothing_width(e.size)
    smoothed = np.convolve(e, np.ones(width) / width, mode="valid")
    rough = e[width // 2: width // 2 + smoothed.size] - smoothed
    gamma = model_autocovariances((0.5, -0.2), 1.0, 2 * (width + 200))
    lags = np.arange(-(width - 1), width)
    taper = (width - np.abs(lags)) / width ** 2
    c = np.array([taper @ gamma[np.abs(lag + lags)] for lag in range(width + 200)])
    m, statistic = smoothed.size, smoothed @ smoothed
    variance = 2.0 * m * (c[0] ** 2 + 2.0 * np.sum(c[1:] ** 2))
    scale, dof = variance / (2.0 * m * c[0]), 2.0 * (m * c[0]) ** 2 / variance
    p_value = stats.chi2.sf(statistic / scale, dof)
    assert 1e-3 < p_value < 0.999 and alone["p_value"] == pytest.approx(p_value, rel=1e-9)
    b = np.full(width, 1.0 / width)
    a = -b.copy()
    a[width // 2] += 1.0

    def moments(f):
        g = np.array([f[:width - lag] @ f[lag:] for lag in range(width)])
        return g[0], m * g[0] ** 2 / (g[0] ** 2 + 2.0 * g[1:] @ g[1:])

    (g_smooth, d1), (g_rough, d2) = moments(b), moments(a)
    ratio = (statistic / g_smooth) / ((rough @ rough) / g_rough)
    c1, c2 = 2.0 / (9.0 * d1), 2.0 / (9.0 * d2)
    z = (((1.0 - c2) * ratio ** (1 / 3) - (1.0 - c1))
         / np.sqrt(c2 * ratio ** (2 / 3) + c1))
    assert alone["p_white"] == pytest.approx(stats.norm.sf(z), rel=1e-9)
    x, kernel = rng.normal(size=500), rng.normal(size=37)
    np.testing.assert_allclose(sliding_dot(x, kernel), np.correlate(x, kernel, "valid"),
                               atol=1e-12)
    np.testing.assert_allclose(autocorrelation_sums(kernel),
                               [kernel[:37 - l] @ kernel[l:] for l in range(37)], atol=1e-12)


def test_the_verdict_prints_each_channel_in_the_unit_it_is_shown_in():
    # A smooth miss of 0.3 mm on noise of 0.1 mm, judged in SI: the summary gives the noise
    # model, the misfit's RMS and an implausible noise of the channel shown in mm in mm (each
    # the SI number times 1e3), the others in SI; the reasons carry no number with a unit.
    from spineid.identify._common._noise_model import ChannelNoise

    rng = np.random.default_rng(11)
    ts = np.linspace(0.0, 1.0, 400)
    raw = 1e-4 * (rng.normal(size=(400, 3)) + 3.0 * np.sin(2 * np.pi * 2 * ts)[:, None])
    sd = raw.std(axis=0)
    verdict = spineid.assess_fit(
        [raw / sd], CHANNELS, 3, noise_given=False, sigma=dict(zip(CHANNELS, sd)),
        noise_max={"x": 1e-4}, ranges=dict.fromkeys(CHANNELS, 2e-3),
        noise_models={c: ChannelNoise(0, (), s, s) for c, s in zip(CHANNELS, sd)})
    assert verdict.level == "does_not_describe"
    rms = verdict.misfit["x"]["rms"]
    shown = verdict.summary({"x": ("mm", 1e3)})
    assert f"noise model of x: white, sd {sd[0] * 1e3:.3g} mm" in shown
    assert f"noise model of y: white, sd {sd[1]:.3g}\n" in shown
    assert f"misfit of x: smooth part RMS {rms * 1e3:.3g} mm (" in shown
    assert f"noise of x: estimated sd {sd[0] * 1e3:.3g} mm, at most 0.1 mm plausible" in shown
    assert f"misfit of x: smooth part RMS {rms:.3g} (" in verdict.summary()
    assert f"{rms:.3g}" not in " ".join(verdict.reasons)
    assert f"x ({sd[0] / 1e-4:.3g} times the plausible maximum)" in " ".join(verdict.reasons)
