"""The identification engine: recovery of known parameters, honest standard errors,
identifiability of spring measures, solvers, and refusal of meaningless problems."""

import copy
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, TORSION, document
from spineid.identify._common._transform import Transform

# One worker runs this module: its fits share compiled solves (the same axial problem, solver
# and shapes), which another process would compile again.
pytestmark = pytest.mark.xdist_group("identify")

TS = np.linspace(0.0, 0.2, 101)
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}


def simulate_data(doc, ts=TS):
    model_file = spineid.ModelFile.from_document(doc)
    sim = spineid.simulate(model_file.model, jnp.asarray(ts))
    return np.asarray(jax.vmap(model_file.model.observe)(sim.q))


def start_cost(model_files, measurements):
    """Half the sum of squared noise-weighted residuals of models against their data."""
    sigma = np.array([NOISE[c] for c in ("x", "y", "theta")])
    return sum(0.5 * np.sum(((simulate_data(f.document) - m.values) / sigma) ** 2)
               for f, m in zip(model_files, measurements))


def perturbed(doc, factors, field="stiffness", table="springs"):
    start = copy.deepcopy(doc)
    for entry, factor in zip(start[table], factors):
        entry[field] *= factor
    return spineid.ModelFile.from_document(start)


def axial_problem(noise=NOISE, seed=None, factors=(1.3, 0.7, 1.2)):
    truth = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    data = simulate_data(truth)
    if seed is not None:
        sigma = np.array([noise[c] for c in ("x", "y", "theta")])
        data = data + np.random.default_rng(seed).normal(size=data.shape) * sigma
    measurement = spineid.Measurement(TS, data, ("x", "y", "theta"))
    problem = spineid.FitProblem(perturbed(truth, factors), measurement, ["stiffness"], noise)
    return truth, problem


def test_transform_round_trip_and_bounds():
    parameters = [
        spineid.Parameter("a", "g", "N/m", 0, "stiffness", 0, lower=0.0),
        spineid.Parameter("b", "g", "1", 0, "stiffness", 1, lower=-1.0, upper=2.0),
        spineid.Parameter("c", "g", "m", 0, "stiffness", 2, lower=-np.inf),
    ]
    transform = Transform.around(parameters, [3.0, 0.5, -4.0])
    np.testing.assert_allclose(transform.to_physical(jnp.zeros(3)), [3.0, 0.5, -4.0])
    values = jnp.array([0.01, 1.9, 7.0])
    np.testing.assert_allclose(transform.to_physical(transform.to_unconstrained(values)), values)
    extreme = transform.to_physical(jnp.array([-50.0, 50.0, 50.0]))
    assert extreme[0] > 0 and extreme[1] <= 2.0
    assert list(transform.at_bound(np.array([1e-9, 0.5, 0.0]))) == [True, False, False]
    with pytest.raises(ValueError, match="starts on or outside its bound"):
        Transform.around(parameters, [0.0, 0.5, 1.0])


def test_recovers_axial_stiffnesses_from_noise_free_data():
    truth, problem = axial_problem()
    result = spineid.fit(problem)
    expected = [s["stiffness"] for s in truth["springs"]]
    assert result.converged
    # The solver stops once the Gauss-Newton decrement promises less than 0.014 standard
    # errors of further change (spineid/identify/_common/_least_squares.py): noise-free data give the truth to that.
    assert np.all(np.abs(result.values - expected) <= 0.02 * result.stderr)
    assert result.identifiability.rank == 3
    assert np.all(np.isfinite(result.stderr)) and not result.warnings
    # The reported predictions (taken from the solver's last residuals) are the simulation at
    # the fitted values.
    fitted = copy.deepcopy(truth)
    for spring, value in zip(fitted["springs"], result.values):
        spring["stiffness"] = float(value)
    np.testing.assert_allclose(result.predictions[0], simulate_data(fitted), rtol=1e-9,
                               atol=1e-9)


def test_noisy_axial_fit_has_consistent_errors_and_noise_estimate():
    truth, problem = axial_problem(seed=1)
    result = spineid.fit(problem)
    expected = np.array([s["stiffness"] for s in truth["springs"]])
    assert result.converged
    assert np.all(np.abs(result.values - expected) < 5 * result.stderr)
    # Estimated noise (no noise given) is close to the truth and gives similar errors.
    estimated = spineid.fit(spineid.FitProblem(problem.model_file, problem.measurements,
                                               ["stiffness"], noise=None))
    assert estimated.noise_estimated
    # A standard deviation estimated from n samples has relative spread 1/sqrt(2n): allow 4.
    spread = 1.0 / np.sqrt(2 * len(TS))
    for channel, sigma in NOISE.items():
        assert estimated.noise[channel] == pytest.approx(sigma, rel=4 * spread)
    np.testing.assert_allclose(estimated.values, result.values, rtol=1e-3)
    np.testing.assert_allclose(estimated.stderr, result.stderr, rtol=4 * spread)
    # Twice the cost is chi-squared with n - p degrees of freedom: mean n - p, sd sqrt(2(n - p)).
    dof = result.n_data - 3
    assert abs(2 * result.cost - dof) < 4 * np.sqrt(2 * dof)


def test_cheap_jacobians_on_the_way_give_the_same_fit():
    # By default the Jacobians before the stop are integrated 100 times more loosely; every
    # Jacobian at the simulation tolerance must give the same estimate and standard errors.
    _, problem = axial_problem(seed=1)
    cheap = spineid.fit(problem)
    exact = spineid.fit(problem, spineid.LevenbergMarquardt(jacobian_rtol=1e-8))
    assert cheap.converged and exact.converged
    assert np.all(np.abs(cheap.values - exact.values) <= 0.02 * exact.stderr)
    np.testing.assert_allclose(cheap.stderr, exact.stderr, rtol=1e-4)
    with pytest.raises(ValueError, match="cannot be tighter"):
        spineid.fit(problem, spineid.LevenbergMarquardt(jacobian_rtol=1e-9))


def test_confidence_intervals_cover_the_truth_about_95_percent():
    truth, problem = axial_problem()
    expected = np.array([s["stiffness"] for s in truth["springs"]])
    clean = simulate_data(truth)
    sigma = np.array([NOISE[c] for c in ("x", "y", "theta")])
    draws = clean + np.random.default_rng(7).normal(size=(80,) + clean.shape) * sigma
    batch = spineid.fit_many(problem, [draws])
    assert np.all(batch["converged"])
    inside = np.abs(batch["values"] - expected) <= 1.96 * batch["stderr"]
    coverage = inside.mean()
    # 240 intervals: binomial standard deviation of the coverage is 1.4%.
    assert 0.90 <= coverage <= 0.99, coverage
    # The Cramer-Rao errors match the spread of the estimates.
    spread = batch["values"].std(axis=0)
    np.testing.assert_allclose(spread, batch["stderr"].mean(axis=0), rtol=0.3)
    # The batch takes a vmappable solver object that carries its options, nothing else.
    for solver in (spineid.LevenbergMarquardt(), "auto"):
        with pytest.raises(ValueError, match="vmapped over a batch"):
            spineid.fit_many(problem, [draws[:2]], solver)


def vector_problem(points, noise=NOISE):
    springs = [{"kind": "vector", "point": list(p), "stiffness": 1000.0 + 150.0 * i,
                "damping": 1.0} for i, p in enumerate(points)]
    truth = document(springs=springs, loads=LOADS)
    data = simulate_data(truth)
    measurement = spineid.Measurement(TS, data, ("x", "y", "theta"))
    return spineid.FitProblem(spineid.ModelFile.from_document(truth), measurement,
                              ["stiffness"], noise)


@pytest.mark.parametrize(
    "curve, rank",
    [
        ("line", 3),
        ("circle", 3),
        ("parabola", 4),
    ],
)
def test_vector_spring_measure_identifies_only_its_moments(curve, rank):
    s = np.linspace(-1.0, 1.0, 7)
    points = {
        "line": np.stack([0.02 * s, 0.012 + 0.004 * s], axis=1),
        "circle": np.stack([0.015 * np.cos(2 * s), 0.012 + 0.015 * np.sin(2 * s)], axis=1),
        "parabola": np.stack([0.02 * s, 0.010 + 0.006 * s**2], axis=1),
    }[curve]
    _, identifiability = spineid.analyse(vector_problem(points))
    assert identifiability.rank == rank
    assert identifiability.n_parameters == 7
    assert not any(identifiability.identifiable)
    assert "Only" in identifiability.warnings[0]
    # Total stiffness sum_l K_l is an identifiable combination, a single spring is not.
    assert np.isfinite(identifiability.standard_error_of(np.ones(7)))
    assert np.isnan(identifiability.standard_error_of(np.eye(7)[2]))


def test_vector_spring_fit_reports_moments_and_warns(monkeypatch):
    points = np.stack([np.linspace(-0.02, 0.02, 6), np.full(6, 0.012)], axis=1)
    problem = vector_problem(points)
    truth_k = np.array([1000.0 + 150.0 * i for i in range(6)])
    result = spineid.fit(problem)
    assert result.converged and result.identifiability.rank == 3
    total = result.moments["total_stiffness"]
    assert total["value"] == pytest.approx(truth_k.sum(), rel=1e-6)
    centroid = result.moments["centroid"]["value"][0]
    assert centroid == pytest.approx(np.sum(truth_k * points[:, 0]) / truth_k.sum(), abs=1e-8)
    assert any("at most 4 combinations" in w for w in result.warnings)
    assert np.all(np.isnan(result.stderr))
    # The moments' errors are those of the sensitivities at the values reported (the fit's
    # last Jacobian may be one small step before them, its columns mapped with the slope
    # where it was taken, not at the end: otherwise the row space turns off the moments).
    _, fresh = spineid.analyse(problem, result.values)
    assert total["stderr"] == pytest.approx(fresh.standard_error_of(np.ones(6)), rel=1e-3)
    assert all(np.all(np.isfinite(result.moments[key]["stderr"])) for key in (
        "total_stiffness", "radius_of_gyration"))
    report = result.report()
    assert report["identifiability"]["rank"] == 3
    assert len(report["identifiability"]["identifiable_combinations"]) == 3
    json.dumps(report)  # JSON-ready, no NaN
    # Data read in mm: the moments are printed in N/mm and mm as the parameters are (SI with
    # si=True). (The data's units set by hand: the records here are SI arrays.)
    monkeypatch.setattr(type(result), "data_units", lambda self: {"m": "mm"})
    shown, si = result.summary(), result.summary(si=True)
    line = next(line for line in shown.splitlines() if "total_stiffness" in line).split()
    assert float(line[1]) == pytest.approx(total["value"] / 1e3, rel=1e-5) and line[-1] == "N/mm"
    line = next(line for line in shown.splitlines() if "centroid" in line).split()
    assert float(line[1].rstrip(",")) == pytest.approx(1e3 * centroid, rel=1e-5, abs=1e-9)
    assert line[-1] == "mm"
    assert next(line for line in si.splitlines() if "centroid" in line).endswith(" m")


@pytest.mark.parametrize("solver", ["optimistix-lm", "lbfgs"])
def test_other_solvers_reach_the_same_optimum(solver):
    truth, problem = axial_problem()
    expected = [s["stiffness"] for s in truth["springs"]]
    solvers = {"optimistix-lm": spineid.OptimistixLevenbergMarquardt(max_steps=300),
               "lbfgs": spineid.LBFGS(max_steps=300)}
    result = spineid.fit(problem, solvers[solver])
    assert result.solver == solver
    np.testing.assert_allclose(result.values, expected, rtol=1e-4)


def test_adam_reduces_cost_and_reports_convergence_honestly():
    factors = (1.1, 0.9, 1.05)
    truth, problem = axial_problem(factors=factors)
    short = spineid.fit(problem, spineid.Adam(max_steps=30, learning_rate=0.02))
    assert short.cost < 0.5 * start_cost([perturbed(truth, factors)], problem.measurements)
    assert not short.converged and "max_steps" in short.message


def test_multistart_keeps_the_best_start():
    _, problem = axial_problem()
    result = spineid.fit(problem, spineid.MultiStart(n=3, seed=2, stop_when_explained=False))
    assert len(result.start_costs) == 3 and result.starts == {"run": 3, "skipped": 0}
    assert result.cost == pytest.approx(min(result.start_costs))
    assert result.converged


def test_two_load_cases_fitted_jointly():
    truth = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    other = copy.deepcopy(truth)
    other["loads"] = [{"component": "Mz", "amplitude": 0.1, "frequency": 9.0}]
    data = [simulate_data(truth), simulate_data(other)]
    start = perturbed(truth, (1.2, 0.8, 1.1))
    other_start = perturbed(other, (1.2, 0.8, 1.1))
    measurements = [spineid.Measurement(TS, d, ("x", "y", "theta")) for d in data]
    problem = spineid.FitProblem(start, measurements, ["stiffness", "torsion"], NOISE,
                                 models=[start.model, other_start.model])
    result = spineid.fit(problem)
    assert result.n_data == 2 * data[0].size
    np.testing.assert_allclose(
        result.values[:3], [s["stiffness"] for s in truth["springs"]], rtol=1e-5
    )


def test_failed_simulation_at_a_trial_point_is_finite():
    truth, problem = axial_problem()
    from spineid.identify._common._failure import FAILED_RESIDUAL
    from spineid.identify._trajectory._objective import _objective

    objective = _objective(problem, np.ones(3), Transform.around(problem.parameters, problem.start),
                           __import__("diffrax").ForwardMode(), 50)
    residuals = np.asarray(objective.physical_residuals(jnp.asarray(problem.start) * 1e6))
    rows = objective.data_rows()  # (the record is padded with residuals of weight zero)
    assert np.all(np.isfinite(residuals)) and np.all(residuals[rows] == FAILED_RESIDUAL)
    assert rows.sum() == problem.n_data and np.all(residuals[~rows] == 0.0)


def test_analyse_integrates_at_the_problems_tolerances():
    truth, problem = axial_problem()
    default = spineid.analyse(problem)[0]

    def variant(**simulation):
        return spineid.FitProblem(problem.model_file, problem.measurements, ["stiffness"], NOISE,
                                  **simulation)

    loose = spineid.analyse(variant(simulation_rtol=1e-4, simulation_atol=1e-7))[0]
    assert not np.array_equal(loose, default)
    np.testing.assert_allclose(loose, default, rtol=0.05)
    with pytest.raises(ValueError, match="cannot be simulated at these values within the "
                                         "problem's simulation_max_steps=5"):
        spineid.analyse(variant(simulation_max_steps=5))


def test_fit_from_an_unusable_start_refuses_instead_of_crashing():
    truth, problem = axial_problem(factors=(1e7, 1e7, 1e7))
    problem = spineid.FitProblem(problem.model_file, problem.measurements, ["stiffness"], NOISE,
                                 simulation_max_steps=200)
    result = spineid.fit(problem, spineid.LevenbergMarquardt(max_steps=5))
    assert not result.converged
    assert any("simulation failed" in w for w in result.warnings)


BAD = {
    "unknown group": (dict(free=["bushing.stiffness"]), "no such parameter group"),
    "noise channel missing": (dict(noise={"x": 1e-5}), "missing"),
    "negative noise": (dict(noise={"x": -1.0, "y": 1.0, "theta": 1.0}), "positive"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_fit_requests_fail_clearly(case):
    changes, pattern = BAD[case]
    truth = document(springs=AXIAL_SPRINGS, loads=LOADS)
    arguments = dict(free=["stiffness"], noise=NOISE) | changes
    measurement = spineid.Measurement(TS, simulate_data(truth), ("x", "y", "theta"))
    with pytest.raises(ValueError, match=pattern):
        spineid.FitProblem(spineid.ModelFile.from_document(truth), measurement, **arguments)


def test_too_short_data_and_wrong_channels_fail_clearly():
    truth = spineid.ModelFile.from_document(document(springs=AXIAL_SPRINGS, loads=LOADS))
    short = spineid.Measurement(TS[:2], np.zeros((2, 3)), ("x", "y", "theta"))
    with pytest.raises(ValueError, match="shorter than the model needs"):
        spineid.FitProblem(truth, short, ["stiffness", "damping"], NOISE)
    wrong = spineid.Measurement(TS, np.zeros((len(TS), 2)), ("x", "y"))
    with pytest.raises(ValueError, match="channels"):
        spineid.FitProblem(truth, wrong, ["stiffness"], NOISE)


def test_unexcited_joint_is_refused():
    still = spineid.ModelFile.from_document(document(springs=AXIAL_SPRINGS))
    measurement = spineid.Measurement(TS, np.zeros((len(TS), 3)), ("x", "y", "theta"))
    with pytest.raises(ValueError, match="nothing excites the joint"):
        spineid.FitProblem(still, measurement, ["stiffness"], NOISE)
    zero_loads = document(springs=AXIAL_SPRINGS, loads=[dict(LOADS[0], amplitude=0.0)])
    with pytest.raises(ValueError, match="nothing excites the joint"):
        spineid.FitProblem(spineid.ModelFile.from_document(zero_loads), measurement,
                           ["stiffness"], NOISE)


def test_adam_on_stochastic_minibatches_of_load_cases():
    truth = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    cases = [truth]
    for component, frequency in (("Mz", 9.0), ("Fy", 3.0)):
        case = copy.deepcopy(truth)
        case["loads"] = [{"component": component, "amplitude": 4.0 if component == "Fy" else 0.1,
                          "frequency": frequency}]
        cases.append(case)
    starts = [perturbed(c, (1.3, 0.8, 1.2)) for c in cases]
    measurements = [spineid.Measurement(TS, simulate_data(c), ("x", "y", "theta")) for c in cases]
    problem = spineid.FitProblem(starts[0], measurements, ["stiffness"], NOISE,
                                 models=[s.model for s in starts])
    result = spineid.fit(problem, spineid.Adam(max_steps=150, batch_size=1, learning_rate=0.02))
    assert result.cost < 0.01 * start_cost(starts, measurements)
    # Mini-batches are an option of Adam only, and at most the number of load cases.
    with pytest.raises(TypeError, match="batch_size"):
        spineid.LevenbergMarquardt(batch_size=2)
    with pytest.raises(ValueError, match=r"batch_size=5\): at most 3"):
        spineid.fit(problem, spineid.Adam(batch_size=5))


def test_parameter_driven_to_its_bound_is_reported_as_such():
    truth = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    truth["springs"][2]["stiffness"] = 0.0  # the data come from a pair without this ligament
    start = copy.deepcopy(truth)
    start["springs"][2]["stiffness"] = 9000.0
    problem = spineid.FitProblem(spineid.ModelFile.from_document(start),
                                 spineid.Measurement(TS, simulate_data(truth), ("x", "y", "theta")),
                                 ["stiffness"], NOISE)
    result = spineid.fit(problem)
    assert list(result.at_bound) == [False, False, True]
    assert np.isnan(result.stderr[2]) and np.all(np.isfinite(result.stderr[:2]))
    assert any("ended on its bound" in w for w in result.warnings)
    assert result.report()["parameters"][2]["stderr"] is None
    assert "at bound" in result.summary()
    assert np.all(np.abs(result.values[:2] - [27000.0, 15000.0]) <= 0.02 * result.stderr[:2])


def test_noise_given_far_too_large_is_said_to_leave_the_start_unfitted():
    # With a noise of 1e10 the start is already within the statistical stop: no step is
    # taken. The fit must say so (not converged), and no value far from its bound is "on" it
    # (its standard error, 1e14, dwarfs the distance).
    _, problem = axial_problem(noise={"x": 1e10, "y": 1e10, "theta": 1e10})
    result = spineid.fit(problem, spineid.LevenbergMarquardt())
    np.testing.assert_array_equal(result.values, problem.start)
    assert not result.converged and not np.any(result.at_bound)
    assert any("No step was taken" in w and "noise given is far too large" in w
               for w in result.warnings)


# ------------------------------------------------------------------ does the model explain it?


def test_verdict_passes_a_right_model_across_noise_draws():
    # A right model explains its data whether the noise is given or estimated; the verdict's
    # false-alarm rate is 1% (tests/test_goodness.py), so 2 alarms in 24 fits would already be
    # a 2.4% chance: allow at most that.
    alarms = []
    for seed in range(12):
        for noise in (NOISE, None):
            truth, given = axial_problem(seed=seed)
            problem = given if noise else spineid.FitProblem(
                given.model_file, given.measurements, ["stiffness"], None)
            result = spineid.fit(problem)
            assert result.converged
            alarms.append(not result.explains_data)
            assert result.report()["goodness_of_fit"]["explains_data"] is result.explains_data
    assert sum(alarms) <= 2, alarms


@pytest.mark.parametrize("noise", [NOISE, None], ids=["noise given", "noise estimated"])
@pytest.mark.parametrize("missing", ["damping", "a load"])
def test_verdict_flags_a_model_that_lacks_what_the_data_show(missing, noise):
    truth, problem = axial_problem(seed=1)
    wrong = copy.deepcopy(problem.model_file.document)
    if missing == "damping":
        for spring in wrong["springs"] + wrong["torsion"]:
            spring["damping"] = 0.0
    else:
        wrong["loads"][2]["amplitude"] = 0.0  # the data were made with this moment
    model_file = spineid.ModelFile.from_document(wrong)
    result = spineid.fit(spineid.FitProblem(model_file, problem.measurements, ["stiffness"],
                                            noise))
    assert result.explains_data is False
    assert result.goodness_of_fit.reasons and result.goodness_of_fit.advice
    # (With the noise estimated the verdict has three levels: the misfit of a missing effect is
    # beyond the tolerance.)
    assert ("does NOT explain the data" if noise else "does NOT describe the data") \
        in result.summary()
    assert result.accepted is False
    # The default solver tried more starts; they came back to the same optimum, which tells a
    # missing effect from a bad start.
    assert result.starts["run"] > 1
    assert any("came back to the same lowest cost" in w for w in result.warnings)
    assert result.report()["goodness_of_fit"]["explains_data"] is False


def test_records_of_different_lengths_share_one_compilation_and_padding_changes_nothing(
        monkeypatch, caplog):
    # Records of 101 and 105 samples are padded to one length (112, samples of weight zero:
    # spineid/identify/_common/_padding.py): the second fit compiles none of the fit's programs. The
    # padding changes no result: the fit of the same record with padding turned off agrees.
    import logging

    truth = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    rng = np.random.default_rng(8)
    sigma = np.array(list(NOISE.values()))

    def problem_of(samples):
        ts = np.arange(samples) * (TS[1] - TS[0])
        data = simulate_data(truth, ts) + rng.normal(size=(samples, 3)) * sigma
        return spineid.FitProblem(perturbed(truth, (1.3, 0.7, 1.2)),
                                  spineid.Measurement(ts, data, ("x", "y", "theta")),
                                  ["stiffness"], noise=None)

    spineid.fit(problem_of(101))
    longer = problem_of(105)
    with jax.log_compiles(), caplog.at_level(logging.WARNING):
        padded = spineid.fit(longer)
    compiled = [r.getMessage() for r in caplog.records
                if "Finished XLA compilation of jit(" in r.getMessage()]
    assert not any(name in message for message in compiled
                   for name in ("levenberg_marquardt", "_evaluate", "_cost")), compiled
    monkeypatch.setattr("spineid.identify._common._padding.padded_length", lambda n: n)
    plain = spineid.fit(longer)
    assert padded.converged and plain.converged and padded.n_data == plain.n_data == 3 * 105
    assert [p.shape for p in padded.predictions] == [(105, 3)]
    np.testing.assert_allclose(padded.values, plain.values, rtol=1e-7)
    np.testing.assert_allclose(padded.stderr, plain.stderr, rtol=1e-6)
    assert padded.cost == pytest.approx(plain.cost, rel=1e-6)
    for channel in NOISE:
        assert padded.noise[channel] == pytest.approx(plain.noise[channel], rel=1e-6)
    np.testing.assert_allclose(padded.predictions[0], plain.predictions[0], rtol=1e-9,
                               atol=1e-12)
    assert padded.goodness_of_fit.summary() == plain.goodness_of_fit.summary()
