"""Bayesian posteriors (`spineid.posterior`, NUTS of blackjax) on the planar pair of three axial
springs.

Oracles: the Cramer-Rao covariance of the least-squares fit (a separate path: Levenberg-
Marquardt's Jacobian at its optimum), which a near-linear problem's posterior must match in
spread and centre; and a prior that dominates (a narrow prior far from the data's optimum
pulls the posterior onto the precision-weighted mean of the two normals, computed by hand).
"""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, document

pytestmark = pytest.mark.xdist_group("posterior")

TS = np.linspace(0.0, 0.2, 101)
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}


@pytest.fixture(scope="module")
def problem():
    model_file = spineid.ModelFile.from_document(document(springs=AXIAL_SPRINGS, loads=LOADS))
    simulation = spineid.simulate(model_file.model, jnp.asarray(TS))
    clean = np.asarray(jax.vmap(model_file.model.observe)(simulation.q))
    noisy = clean + np.random.default_rng(3).normal(size=clean.shape) * np.array(
        [NOISE[c] for c in ("x", "y", "theta")])
    return spineid.FitProblem(model_file, spineid.Measurement(TS, noisy, ("x", "y", "theta")),
                              ["stiffness"], NOISE)


@pytest.fixture(scope="module")
def fitted(problem):
    return spineid.fit(problem, spineid.LevenbergMarquardt())


@pytest.fixture(scope="module")
def sampled(problem, fitted):
    # Four chains (the default) of 100 draws.
    return spineid.posterior(problem, samples=100, warmup=100, start=fitted.values, seed=1)


def test_a_near_linear_posterior_is_the_cramer_rao_normal(fitted, sampled):
    assert sampled.divergences == 0
    assert np.all(sampled.effective_samples > 150), sampled.effective_samples
    # With a few hundred effective draws the standard deviation is known to about 6%.
    np.testing.assert_allclose(sampled.sd, fitted.stderr, rtol=0.2)
    assert np.all(np.abs(sampled.mean - fitted.values) < 0.3 * fitted.stderr)
    interval = sampled.interval()
    assert np.all((interval[:, 0] < fitted.values) & (fitted.values < interval[:, 1]))
    assert "springs[2].stiffness" in sampled.summary()
    assert sampled.report()["parameters"][0]["prior"][0] == "lognormal"
    # In the data's units (a fit's shown_units: N/mm for data in mm), with a unit column.
    shown = sampled.summary(shown=[("N/mm", 1e-3)] * len(sampled.names))
    row = next(line for line in shown.splitlines() if line.startswith("springs[2].stiffness"))
    assert float(row.split()[1]) == pytest.approx(1e-3 * sampled.mean[2], rel=1e-4)
    assert float(row.split()[4]) == pytest.approx(1e-3 * interval[2, 1], rel=1e-4)
    assert row.split()[8] == "N/mm" and "prior (SI)" in shown


def test_a_narrow_prior_pulls_the_posterior_as_two_normals_combine(problem, fitted):
    # A normal prior ten times narrower than the data's error on the first spring, centred
    # 5 of the data's standard errors away: the posterior mean is the precision-weighted mean.
    error = fitted.stderr[0]
    centre, width = fitted.values[0] + 5 * error, error / 10
    priors = {"springs[0].stiffness": ("normal", centre, width)}
    # (Draws and warm-up as the fixture's: the same compiled programs.)
    pulled = spineid.posterior(problem, priors=priors, samples=100, warmup=100,
                               start=fitted.values, seed=2)
    # The two normals combine (correlations with the other springs change the weights a
    # little: bounds rather than equality).
    expected = (centre / width**2 + fitted.values[0] / error**2) / (1 / width**2 + 1 / error**2)
    assert abs(pulled.mean[0] - expected) < 0.2 * error
    assert pulled.sd[0] < 0.2 * error


def test_another_posterior_of_the_same_problem_compiles_nothing(problem, fitted, sampled):
    # The sampler's programs take the density as an argument (priors' values, data, start):
    # another posterior of the problem, with priors of other values and another seed, runs
    # the programs the fixture's compiled (before, every call compiled its own, 20-40 s).
    lowered = []

    def listener(name, seconds, **kwargs):
        if name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(seconds)

    # (Other values, and families other than the fixture's default log-normals.)
    kinds = ("lognormal", "normal", "uniform")
    priors = {name: {"lognormal": ("lognormal", float(value) * 1.05, 0.5),
                     "normal": ("normal", float(value) * 1.05, 0.5 * float(value)),
                     "uniform": ("uniform", 0.2 * float(value), 5.0 * float(value))}[kind]
              for name, value, kind in zip(problem.names, fitted.values, kinds)}
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        again = spineid.posterior(problem, priors=priors, samples=100, warmup=100,
                                  start=fitted.values, seed=5)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert lowered == []
    assert again.priors[0] == priors["springs[0].stiffness"]
    assert not np.array_equal(again.draws, sampled.draws)
    np.testing.assert_allclose(again.sd, fitted.stderr, rtol=0.25)


def test_the_posterior_plot_is_written(sampled, fitted, tmp_path):
    import spineid.plots
    path = spineid.plots.plot_posterior(sampled, tmp_path / "posterior.png", reference=fitted)
    assert path.stat().st_size > 10_000


@pytest.mark.parametrize("arguments, match", [
    (dict(priors={"springs[0].stiffness": ("normal", 1.0, 0.0)}), "scale must be > 0"),
    (dict(priors={"springs[0].stiffness": ("lognormal", 1.0, -2.0)}), "scale must be > 0"),
    (dict(priors={"springs[0].stiffness": ("cauchy", 1.0, 2.0)}), "kind one of"),
    (dict(priors={"springs[9].stiffness": ("normal", 1.0, 2.0)}), "not free parameters"),
    (dict(priors={"springs[0].stiffness": ("uniform", 1.0, 2.0)}), "lies outside it"),
    (dict(samples=3), "samples 3"),
    (dict(start=[1.0]), "start: expected 3 finite values"),
])
def test_bad_requests_say_what_is_wrong(problem, arguments, match):
    with pytest.raises(ValueError, match=match):
        spineid.posterior(problem, **arguments)


def test_without_blackjax_the_posterior_says_how_to_install_it(problem, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "blackjax" else real(name, *args))
    with pytest.raises(ImportError, match=r"pip install 'spineid\[bayes\]'"):
        spineid.posterior(problem)


def ar1_errors(shape, phi: float, sd, rng) -> np.ndarray:
    """Stationary AR(1) errors `(k, c)`, each column of marginal standard deviation `sd`."""
    errors = np.empty(shape)
    errors[0] = rng.normal(size=shape[1]) * sd
    for t in range(1, shape[0]):
        errors[t] = phi * errors[t - 1] + rng.normal(size=shape[1]) * sd * np.sqrt(1 - phi**2)
    return errors


def test_a_fit_under_correlated_errors_gives_the_posterior_its_noise_model(problem):
    # AR(1) errors (phi 0.8) with the noise unknown: the fit estimates each channel's
    # autoregression, and the posterior's likelihood takes it. Oracle: the Cramer-Rao
    # covariance under the exact (Toeplitz) covariance of the fitted autoregressions, from
    # statsmodels' autocovariances and finite-difference sensitivities of plain simulations.
    from statsmodels.tsa.arima_process import arma_acovf

    model = problem.model_file.model
    clean = np.asarray(jax.vmap(model.observe)(spineid.simulate(model, jnp.asarray(TS)).q))
    sd = np.array([NOISE[c] for c in ("x", "y", "theta")])
    measured = spineid.Measurement(
        TS, clean + ar1_errors(clean.shape, 0.8, sd, np.random.default_rng(11)),
        ("x", "y", "theta"))
    correlated = spineid.FitProblem(problem.model_file, measured, ["stiffness"])
    fitted = spineid.fit(correlated, spineid.LevenbergMarquardt())
    models = fitted.goodness_of_fit.noise_model
    assert all(models[c]["order"] >= 1 for c in ("x", "y", "theta")), models
    sampled = spineid.posterior(correlated, fit=fitted, samples=100, warmup=60, chains=2,
                                seed=4)
    assert sampled.divergences == 0 and np.all(sampled.effective_samples > 100)

    def observed(theta):
        at = correlated.fitted_model(theta)
        return np.asarray(jax.vmap(at.observe)(spineid.simulate(at, jnp.asarray(TS)).q))

    steps = 1e-4 * fitted.values
    sensitivity = np.stack([(observed(fitted.values + h) - observed(fitted.values - h)) / (2 * s)
                            for s, h in zip(steps, np.diag(steps))], axis=-1)  # (k, c, p)
    information = np.zeros((3, 3))
    for c, channel in enumerate(("x", "y", "theta")):
        phi = np.asarray(models[channel]["coefficients"])
        gamma = arma_acovf(np.r_[1.0, -phi], np.array([1.0]), nobs=len(TS),
                           sigma2=models[channel]["innovation_sd"] ** 2)
        covariance = gamma[np.abs(np.subtract.outer(np.arange(len(TS)), np.arange(len(TS))))]
        information += sensitivity[:, c].T @ np.linalg.solve(covariance, sensitivity[:, c])
    exact = np.sqrt(np.diag(np.linalg.inv(information)))
    np.testing.assert_allclose(sampled.sd, exact, rtol=0.2)
    assert np.all(np.abs(sampled.mean - fitted.values) < 0.3 * exact)
    # The white likelihood at the same marginal deviations is narrower: correlated errors
    # carry less information than as many independent ones.
    white = spineid.analyse(correlated, fitted.values, fitted.noise)[0]
    assert np.all(np.sqrt(np.diag(white)) < 0.75 * exact)
    orders = sum(models[c]["order"] for c in ("x", "y", "theta"))
    assert sampled.n_data == 3 * len(TS) - orders and sampled.explains_data
    assert "likelihood: x AR(" in sampled.summary()
    assert f"innovation sd {1e3 * models['x']['innovation_sd']:.3g} mm" in sampled.summary(
        channels={"x": ("mm", 1e3)})
    assert sampled.report()["noise_model"]["theta"]["order"] == models["theta"]["order"]
    assert sampled.noise_model["x"]["source"] == "estimated by the fit"


def test_chains_that_never_moved_are_said_so_not_given_an_r_hat(problem, fitted, monkeypatch):
    # A warm-up too short for the sampler to find its step can leave every chain at its start
    # (a user's 20 draws after 20 of warm-up did: acceptance 0, R-hat 0 / 0 reported as "nan"
    # beside numpy's "All-NaN slice" warning). The sampler's output is replaced by such chains.
    from spineid.identify._design import _posterior

    def stuck(density, key, chains, warmup, samples, *args):
        p = density.whitening.shape[0]
        return (jnp.zeros((chains, samples, p)), np.zeros((chains, samples), bool),
                np.zeros(chains), 1.0)

    monkeypatch.setattr(_posterior, "_sample", stuck)
    with pytest.warns(RuntimeWarning, match=r"the chains never moved \(acceptance 0.00\)"):
        sampled = spineid.posterior(problem, fit=fitted, samples=20, warmup=20, chains=2)
    assert not any("R-hat" in note for note in sampled.warnings)


def test_a_fit_of_another_problem_is_refused(problem, fitted):
    fewer = spineid.FitProblem(problem.model_file, problem.measurements,
                               ["springs[0].stiffness"], NOISE)
    with pytest.raises(ValueError, match="not of this problem's free parameters"):
        spineid.posterior(fewer, fit=fitted)
    with pytest.raises(ValueError, match="expected the FitResult"):
        spineid.posterior(problem, fit=fitted.values)
    other = problem.with_measurements([spineid.Measurement(
        TS, problem.measurements[0].values * 1.01, ("x", "y", "theta"))])
    with pytest.raises(ValueError, match="to other data"):
        spineid.posterior(other, fit=fitted)


def test_a_problem_without_noise_is_refused(problem):
    unknown = spineid.FitProblem(problem.model_file, problem.measurements, ["stiffness"])
    with pytest.raises(ValueError, match="give the measurement noise"):
        spineid.posterior(unknown)


def test_directions_the_data_cannot_see_are_said_before_sampling(problem):
    # Two springs at one point: only their sum is seen (the same oracle as the design's).
    twin = [dict(AXIAL_SPRINGS[0]), dict(AXIAL_SPRINGS[0], stiffness=12000.0)]
    model_file = spineid.ModelFile.from_document(document(springs=twin, loads=LOADS))
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(TS)).q))
    noisy = clean + np.random.default_rng(3).normal(size=clean.shape) * np.array(
        [NOISE[c] for c in ("x", "y", "theta")])
    measurement = spineid.Measurement(TS, noisy, ("x", "y", "theta"))
    unseen = spineid.FitProblem(model_file, measurement, ["stiffness"], NOISE)
    # Narrow priors keep the unseen direction short, so a few draws are quick.
    priors = {name: ("lognormal", value, 0.01) for name, value in zip(unseen.names,
                                                                      unseen.start)}
    with pytest.warns(RuntimeWarning, match="determine 1 combinations of the 2 parameters"):
        sampled = spineid.posterior(unseen, priors=priors, samples=60, warmup=30, chains=2)
    assert "determine 1 combinations" in sampled.summary()
    # What the data see, their sum, is as narrow as the linearised error says; each spring
    # moves along the unseen difference, held only by its prior (1% of 27000 and 12000 N/m).
    assert sampled.rank == 1 and sampled.explains_data
    (combination,) = sampled.combinations
    assert set(combination["coefficients"]) == set(unseen.names)
    np.testing.assert_allclose(list(combination["coefficients"].values()), [1.0, 1.0],
                               rtol=1e-6)
    assert combination["sd"] == pytest.approx(combination["stderr"], rel=0.35)
    assert np.all(sampled.sd > 2 * combination["sd"])
    assert "the data determine 1 combination(s)" in sampled.summary()


def test_the_predictive_check_agrees_with_replicated_data_by_brute_force(problem, sampled):
    # The data's discrepancy at each checked draw recomputed outside the fit's objective (the
    # model simulated at the draw, residuals weighted in numpy), and the p-value from data
    # replicated at those draws (prediction plus drawn noise, its discrepancy counted).
    assert sampled.explains_data and sampled.predictive_p > 0.05
    checked = np.unique(np.linspace(0, len(sampled.draws) - 1,
                                    min(spineid.identify._design._posterior.CHECKED_DRAWS,
                                        len(sampled.draws))).astype(int))
    assert len(sampled.chi_square) == len(checked)
    sigma = np.array([NOISE[c] for c in ("x", "y", "theta")])
    data = problem.measurements[0].values
    rng = np.random.default_rng(7)
    exceed, total = 0, 0
    for j, index in enumerate(checked[::10]):
        model = problem.fitted_model(sampled.draws[index])
        predicted = np.asarray(jax.vmap(model.observe)(spineid.simulate(model, TS).q))
        observed = float(np.sum(((data - predicted) / sigma) ** 2))
        assert observed == pytest.approx(sampled.chi_square[10 * j], rel=1e-6)
        for _ in range(200):
            replicated = predicted + rng.normal(size=predicted.shape) * sigma
            exceed += np.sum(((replicated - predicted) / sigma) ** 2) >= observed
            total += 1
    subset = np.mean([spineid.identify._common._goodness.chi_square_sf(c, data.size)
                      for c in sampled.chi_square[::10]])
    assert exceed / total == pytest.approx(subset, abs=0.05)
    assert "posterior predictive check" in sampled.summary()
    assert sampled.report()["predictive_check"]["explains_data"] is True


def test_a_model_that_lacks_what_the_data_show_fails_the_predictive_check(problem):
    # The third spring held at twice its true stiffness: the other two cannot make up for it.
    document_ = problem.model_file.document
    document_["springs"][2]["stiffness"] *= 2.0
    wrong = spineid.FitProblem(spineid.ModelFile.from_document(document_),
                               problem.measurements, ["springs[0].stiffness",
                                                      "springs[1].stiffness"], NOISE)
    start = spineid.fit(wrong, spineid.LevenbergMarquardt()).values
    with pytest.warns(RuntimeWarning, match="does not explain the data"):
        sampled = spineid.posterior(wrong, samples=40, warmup=40, chains=1, start=start)
    assert not sampled.explains_data and sampled.predictive_p < 1e-6
    assert "does NOT explain the data" in sampled.summary()


def test_priors_written_in_the_model_file_are_the_posteriors_and_given_ones_win(problem,
                                                                                 fitted,
                                                                                 tmp_path):
    error = fitted.stderr[0]
    prior = ["normal", float(fitted.values[0] + 5 * error), float(error / 10)]
    document = copy.deepcopy(problem.model_file.document)  # (the fixture's stays as it is)
    document["priors"] = {"springs[0].stiffness": prior}
    with_file = spineid.FitProblem(spineid.ModelFile.from_document(document),
                                   problem.measurements, ["stiffness"], NOISE)
    assert with_file.model_file.priors == {"springs[0].stiffness": tuple(prior)}
    # Written back (a fitted model file keeps them) and read again, by a TOML reader too.
    import tomllib
    path = spineid.io.write_model_file(tmp_path / "with_priors.toml", with_file.model_file, {})
    assert spineid.load_model_file(path).priors == with_file.model_file.priors
    assert tomllib.loads(path.read_text())["priors"]["springs[0].stiffness"] == prior
    # (Draws and warm-up as the fixture's: its sampler's compiled programs.)
    from_file = spineid.posterior(with_file, samples=100, warmup=100, chains=1,
                                  start=fitted.values, seed=4)
    given = spineid.posterior(problem, priors={"springs[0].stiffness": tuple(prior)},
                              samples=100, warmup=100, chains=1, start=fitted.values, seed=4)
    # (The same sampler with the same priors, on two problems built apart: the draws agree to
    # rounding, not always to the bit.)
    np.testing.assert_allclose(from_file.draws, given.draws, rtol=1e-6)
    # The file's prior, five standard errors above the fit and ten times narrower, holds the
    # posterior there.
    assert from_file.draws[:, 0].mean() > fitted.values[0] + 4 * error
    assert from_file.priors[0] == ("normal", prior[1], prior[2])
    overridden = spineid.posterior(with_file, priors={"springs[0].stiffness": (
        "lognormal", float(fitted.values[0]), 1.0)}, samples=100, warmup=100, chains=1,
        start=fitted.values)
    assert overridden.priors[0][0] == "lognormal"


@pytest.mark.parametrize("prior, match", [
    ({"springs[7].stiffness": ["normal", 1.0, 1.0]}, r"priors\.springs\[7\]\.stiffness: "
                                                     "expected the name of a parameter"),
    ({"springs[0].stiffness": ["cauchy", 1.0, 1.0]}, "kind one of"),
    ({"springs[0].stiffness": ["normal", 1.0, 0.0]}, "scale > 0"),
    ({"springs[0].stiffness": ["uniform", 2.0, 1.0]}, "low < high"),
    ({"springs[0].stiffness": ["lognormal", -1.0, 1.0]}, "median > 0"),
    ({"springs[0].stiffness": "normal"}, r"\[kind, a, b\]"),
])
def test_bad_priors_in_a_model_file_name_the_key(problem, prior, match):
    document = copy.deepcopy(problem.model_file.document)  # (the fixture's stays as it is)
    document["priors"] = prior
    with pytest.raises(ValueError, match=match):
        spineid.ModelFile.from_document(document, "file.toml")


def test_the_log_prior_of_each_family_is_scipys_log_density():
    # An independent oracle: scipy.stats' densities of the three families (the prior is known
    # up to a constant: differences between points), and its gradient, finite for every
    # family at once, against central differences of scipy's.
    from scipy import stats

    from spineid.identify._design._sampler import _log_prior

    kinds = jnp.array([0, 1, 2, 0])  # (indices in PRIOR_KINDS: lognormal, normal, uniform)
    values = jnp.array([[2.0, 0.3, 0.0], [5.0, 1.5, 0.0], [1.0, 4.0, 0.0], [0.5, 0.2, 1.0]])
    families = [stats.lognorm(0.3, scale=2.0), stats.norm(5.0, 1.5), stats.uniform(1.0, 3.0),
                stats.lognorm(0.2, loc=1.0, scale=0.5)]

    def scipys(theta):
        return sum(f.logpdf(x) for f, x in zip(families, theta))

    rng = np.random.default_rng(3)
    points = np.column_stack([rng.uniform(0.5, 6.0, 6), rng.uniform(0.0, 10.0, 6),
                              rng.uniform(1.1, 3.9, 6), rng.uniform(1.1, 2.5, 6)])
    ours = np.array([float(_log_prior(jnp.asarray(t), kinds, values)) for t in points])
    np.testing.assert_allclose(ours - ours[0], [scipys(t) - scipys(points[0]) for t in points],
                               rtol=1e-12, atol=1e-12)
    gradient = np.asarray(jax.grad(_log_prior)(jnp.asarray(points[1]), kinds, values))
    step = 1e-6
    central = [(scipys(points[1] + step * e) - scipys(points[1] - step * e)) / (2 * step)
               for e in np.eye(4)]
    np.testing.assert_allclose(gradient, central, rtol=1e-6, atol=1e-8)
    outside = points[0].copy()
    outside[2] = 5.5  # beyond the uniform's (1, 4)
    assert float(_log_prior(jnp.asarray(outside), kinds, values)) == -np.inf


def test_a_combination_of_parameters_of_several_units_is_shown_on_relative_changes():
    # Two springs seen only as their sum (N/m) and a damping (N s/m) seen through a mixture
    # with them: the posterior's combinations are the fit's, on relative changes where units
    # mix (each parameter over its scale, as a fit's summary shows them), so that draws at the
    # values give each combination's own value; of one unit, in SI as they are.
    from spineid.identify._common._uncertainty import fisher_analysis
    from spineid.identify._design._posterior import posterior_combinations

    names = ["springs[0].stiffness", "springs[1].stiffness", "springs[0].damping"]
    values = np.array([27000.0, 12000.0, 40.0])
    rng = np.random.default_rng(4)
    sum_and_damping = rng.normal(size=(50, 2)) @ np.array([[1e-3, 1e-3, 0.0],
                                                          [2e-4, 2e-4, 0.5]])
    _, mixed = fisher_analysis(sum_and_damping, values, values, names)
    draws = np.tile(values, (5, 1))
    found = posterior_combinations(mixed, draws, names, ["N/m", "N/m", "N s/m"])
    assert len(found) == 2 and all("scales" in c for c in found)
    for combination, entry in zip(mixed.combinations, found):
        assert entry["coefficients"] == combination["relative"]["coefficients"]
        assert entry["mean"] == pytest.approx(combination["relative"]["value"], rel=1e-12)
        assert entry["stderr"] == combination["relative"]["standard_error"]
    _, one_unit = fisher_analysis(sum_and_damping[:, :1] * np.array([1.0, 1.0, 0.0]), values,
                                  values, names)
    (entry,) = posterior_combinations(one_unit, draws, names, ["N/m", "N/m", "N/m"])
    assert "scales" not in entry
    assert entry["mean"] == pytest.approx(one_unit.combinations[0]["value"], rel=1e-12)
