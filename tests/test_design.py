"""Experiment design (`spineid.design`) on the planar pair of three axial springs, with load
cases of one component at one frequency as the candidates.

Oracles: brute force over every pair of candidates, each pair's Cramer-Rao covariance computed
by `spineid.analyse` on the two-load-case problem (the design adds per-candidate information
instead); the spread of estimates over noisy simulations of the design, fitted (the realised
standard errors); an analytic null space (two springs at one point are seen only through their
sum, whatever the loads).
"""

import dataclasses
import itertools

import jax
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, document

pytestmark = pytest.mark.xdist_group("design")

TS = np.linspace(0.0, 0.2, 101)
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}
AMPLITUDES = {"Fx": 6.0, "Fy": 4.0, "Mz": 0.08}
FREQUENCIES = (3.0, 8.0, 20.0)


def candidate(component, frequency, springs=AXIAL_SPRINGS, amplitude=None):
    amplitude = AMPLITUDES[component] if amplitude is None else amplitude
    doc = document(springs=springs, loads=[{"component": component, "amplitude": amplitude,
                                            "frequency": frequency}])
    return spineid.Candidate(f"{component}@{frequency:g}Hz", spineid.model_from_document(doc),
                             TS)


@pytest.fixture(scope="module")
def candidates():
    return [candidate(c, f) for c in AMPLITUDES for f in FREQUENCIES]


@pytest.fixture(scope="module")
def pair_covariances(candidates):
    # Relative covariance of every pair, through analyse on the two-case problem.
    out = {}
    for a, b in itertools.combinations(candidates, 2):
        problem = spineid.FitProblem(
            a.model, [spineid.Measurement(c.times, _simulated(c), ("x", "y", "theta"))
                      for c in (a, b)],
            ["stiffness"], NOISE, models=[a.model, b.model])
        covariance, _ = spineid.analyse(problem)
        out[(a.name, b.name)] = covariance / np.outer(problem.start, problem.start)
    return out


def _simulated(c):
    simulation = spineid.simulate(c.model, c.times)
    return np.stack([np.asarray(c.model.observe(q)) for q in np.asarray(simulation.q)])


BRUTE_FORCE = {
    "D": lambda cov: -np.linalg.slogdet(cov)[1],
    "A": lambda cov: -np.trace(cov),
    "E": lambda cov: -np.linalg.eigvalsh(cov)[-1],
    ("springs[2].stiffness",): lambda cov: -cov[2, 2],
}


@pytest.mark.parametrize("criterion", list(BRUTE_FORCE), ids=str)
def test_the_design_is_the_best_pair_brute_force_finds(candidates, pair_covariances,
                                                       criterion):
    found = spineid.design(candidates, ["stiffness"], NOISE, criterion=criterion, budget=2)
    scores = {pair: BRUTE_FORCE[criterion](cov) for pair, cov in pair_covariances.items()}
    best = max(scores, key=scores.get)
    assert set(found.chosen) == set(best), (found.chosen, best)
    np.testing.assert_allclose(found.stderr**2 / found.values**2,
                               np.diag(pair_covariances[best]), rtol=1e-6)


def test_a_design_problem_takes_the_fits_simulation_options(candidates):
    # The validation's problem: the chosen experiments' noise-free data, fitted at the
    # tolerances asked for (a looser integration for long validations), bad ones refused.
    found = spineid.design(candidates, ["stiffness"], NOISE, budget=1)
    default = found.problem()
    loose = found.problem(simulation_rtol=1e-6, simulation_atol=1e-9, simulation_max_steps=500)
    assert (loose.simulation_rtol, loose.simulation_atol, loose.simulation_max_steps) == (
        1e-6, 1e-9, 500)
    assert default.simulation_rtol == 1e-8 and loose.names == default.names
    np.testing.assert_array_equal(loose.measurements[0].values, default.measurements[0].values)
    with pytest.raises(ValueError, match="simulation_rtol"):
        found.problem(simulation_rtol=-1.0)


def test_realised_standard_errors_are_the_predicted_ones(candidates):
    found = spineid.design(candidates, ["stiffness"], NOISE, budget=2, baseline="Fx@3Hz")
    validation = spineid.validate_design(found, 50, seed=11)
    assert validation.fitted == validation.converged == 50 and not validation.errors
    # Its first noisy fits, made here by hand: the same noise draws, the same fits.
    problem = found.problem()
    sigma = np.array([NOISE[c] for c in problem.channels])
    rng = np.random.default_rng(11)
    for b in range(3):
        noisy = [spineid.Measurement(m.ts, m.values + rng.normal(size=m.values.shape) * sigma,
                                     m.channels) for m in problem.measurements]
        fitted = spineid.fit(spineid.FitProblem(problem.model, noisy, problem.names, NOISE,
                                                models=problem.models),
                             spineid.LevenbergMarquardt())
        np.testing.assert_allclose(validation.fits.values[b], fitted.values, rtol=1e-9)
    realised = np.std(validation.fits.values, axis=0, ddof=1)
    np.testing.assert_allclose(validation.realised, realised, rtol=1e-12)
    # 50 repetitions estimate a standard deviation to about 10%.
    np.testing.assert_allclose(realised, found.stderr, rtol=0.25)
    assert validation.uncertainty == pytest.approx(0.101, abs=1e-3)
    assert "realised / predicted standard error" in validation.summary()
    assert len(validation.report()["parameters"]) == len(found.names)
    # The design determines each stiffness better than the baseline (Fx at 3 Hz alone).
    assert np.all(found.stderr < found.baseline_stderr)
    text = found.summary()
    assert "design (D-optimal): run" in text and "with Fx@3Hz" in text
    assert found.report()["chosen"] == list(found.chosen)


def test_what_no_design_determines_is_said():
    # Two springs at one point act as one: only the sum of their stiffnesses is seen.
    twin = [dict(AXIAL_SPRINGS[0]), dict(AXIAL_SPRINGS[0], stiffness=12000.0),
            dict(AXIAL_SPRINGS[1])]
    candidates = [candidate(c, 8.0, springs=twin) for c in AMPLITUDES]
    found = spineid.design(candidates, ["stiffness"], NOISE, budget=3)
    assert len(found.never) == 1
    combination = found.never[0]
    assert set(combination) == {"springs[0].stiffness", "springs[1].stiffness"}
    np.testing.assert_allclose(sorted(combination.values()), [-1.0, 1.0], atol=1e-6)
    assert not found.identifiable[0] and not found.identifiable[1] and found.identifiable[2]
    assert "seen by no selection of these candidates" in " ".join(found.warnings)
    assert "springs[0].stiffness by" in found.summary()
    reason = [w for w in found.warnings if "act as one" in w]
    assert len(reason) == 1 and "springs[0].stiffness and springs[1].stiffness" \
        in reason[0]


def test_the_reason_a_direction_is_never_seen_follows_its_parameters():
    # (The reasons apart from a design: one parameter, two, several.)
    from spineid.identify._design._design import _reason
    problem = candidate("Fx", 8.0).model
    free = spineid.FitProblem(problem, spineid.Measurement(TS, np.zeros((TS.size, 3)),
                                                           ("x", "y", "theta")),
                              ["stiffness"], NOISE)
    names = free.names
    assert "does not act in these experiments" in _reason(free, {names[2]: 1.0})
    assert "act as one" in _reason(free, {names[0]: 1.0, names[1]: -0.5})
    assert "3 parameters" in _reason(free, {names[0]: 1.0, names[1]: -0.5, names[2]: 0.2})


def test_the_total_test_time_limits_the_design(candidates):
    found = spineid.design(candidates, ["stiffness"], NOISE, budget=3,
                           limits={"total": 0.45})
    assert len(found.chosen) == 2 and found.duration == pytest.approx(0.4)
    assert "2 of the 3 experiments" in " ".join(found.warnings)


@pytest.mark.parametrize("arguments, match", [
    (dict(criterion=["springs[0].damping"]), "not free parameters"),
    (dict(criterion="G"), "criterion 'G'"),
    (dict(budget=0), "budget 0"),
    (dict(budget=10), "budget 10"),
    (dict(baseline=["Fz@1Hz"]), "baseline"),
    (dict(limits={"force": 5.0}), "'Fx@3Hz': its force reaches 6 N, beyond the rig's limit 5 N"),
    (dict(limits={"moment": 0.05}), "'Mz@3Hz': its moment reaches 0.08 N m, beyond"),
    (dict(limits={"speed": 1.0}), "limits"),
    (dict(limits={"total": 0.1}), "shorter than every candidate"),
])
def test_bad_designs_say_what_is_wrong(candidates, arguments, match):
    with pytest.raises(ValueError, match=match):
        spineid.design(candidates, ["stiffness"], NOISE, **arguments)


def test_bad_candidates_say_what_is_wrong(candidates):
    idle = candidate("Fx", 3.0, amplitude=0.0)
    idle = spineid.Candidate("idle", idle.model, TS)
    with pytest.raises(ValueError, match="candidate 'idle': .*nothing excites the joint"):
        spineid.design(candidates[:2] + [idle], ["stiffness"], NOISE)
    with pytest.raises(ValueError, match="candidate names repeat"):
        spineid.design(candidates[:2] + candidates[:1], ["stiffness"], NOISE)
    softer = candidate("Fy", 3.0, springs=[dict(AXIAL_SPRINGS[0], stiffness=1000.0)]
                       + AXIAL_SPRINGS[1:])
    with pytest.raises(ValueError, match="'Fy@3Hz': its free parameters or their values"):
        spineid.design(candidates[:1] + [softer], ["stiffness"], NOISE)
    with pytest.raises(ValueError, match="no candidate experiments"):
        spineid.design([], ["stiffness"], NOISE)
    with pytest.raises(ValueError, match="times must be"):
        spineid.Candidate("late", candidates[0].model, [0.2, 0.1, 0.3])


CORRELATION = {"x": [0.8], "theta": [1.2, -0.5]}


def test_a_design_under_correlated_errors_has_the_exact_gaussian_information(candidates):
    # Oracle: each chosen experiment's information J^T Sigma^-1 J with Sigma the Toeplitz
    # covariance of statsmodels' autocovariances of the autoregressions (y white), summed.
    from statsmodels.tsa.arima_process import arma_acovf

    found = spineid.design(candidates, ["stiffness"], NOISE, budget=2,
                           correlation=CORRELATION)
    white = spineid.design(candidates, ["stiffness"], NOISE, budget=2, baseline=found.chosen)
    lags = np.abs(np.subtract.outer(np.arange(len(TS)), np.arange(len(TS))))
    information = 0.0
    for chosen in (c for c in candidates if c.name in found.chosen):
        _, jacobian = spineid.identify.candidate_sensitivities(chosen, ["stiffness"], NOISE)
        jacobian = jacobian.reshape(len(TS), 3, -1)  # (each channel over its sd)
        for j, channel in enumerate(("x", "y", "theta")):
            phi = np.array(CORRELATION.get(channel, []))
            gamma = arma_acovf(np.r_[1.0, -phi], np.array([1.0]), nobs=len(TS))
            information = information + jacobian[:, j].T @ np.linalg.solve(
                gamma[lags] / gamma[0], jacobian[:, j])
    np.testing.assert_allclose(found.stderr, np.sqrt(np.diag(np.linalg.inv(information))),
                               rtol=1e-6)
    # Correlated errors of the same size carry less information than white ones.
    assert np.all(found.stderr > 1.5 * white.baseline_stderr)
    assert found.report()["correlation"] == {"x": [0.8], "theta": [1.2, -0.5]}
    assert "errors correlated as autoregressions: x phi 0.8; theta phi 1.2, -0.5" \
        in found.summary()
    # A fit's noise model serves as it is (a white channel's entry of order 0 left out).
    fitted = {"x": {"order": 1, "coefficients": [0.8]}, "y": {"order": 0, "coefficients": []},
              "theta": {"order": 2, "coefficients": [1.2, -0.5]}}
    again = spineid.design(candidates[:2], ["stiffness"], NOISE, correlation=fitted)
    assert again.correlation == {"x": (0.8,), "theta": (1.2, -0.5)}


@pytest.mark.parametrize("correlation, match", [
    ({"x": [1.0]}, r"correlation\['x'\] = \[1.0\]: not a stationary autoregression"),
    ({"theta": [0.5, 0.6]}, "not a stationary autoregression"),
    ({"phi": [0.5]}, r"correlation\['phi'\]: not a channel of the model"),
    ({"x": "high"}, "expected 1 to 20 finite autoregressive coefficients"),
    ({"x": []}, "expected 1 to 20 finite"),
    ({"x": ["a"]}, "expected 1 to 20 finite"),
    ({"x": True}, "expected 1 to 20 finite"),
    ({"x": {"order": 1}}, "holds its 'coefficients'"),
    ([0.8], "expected {channel: coefficients}"),
])
def test_bad_correlations_are_refused(candidates, correlation, match):
    with pytest.raises(ValueError, match=match):
        spineid.design(candidates[:2], ["stiffness"], NOISE, correlation=correlation)


def test_correlated_errors_need_even_sampling_and_records_longer_than_their_order(
        candidates):
    uneven = dataclasses.replace(candidates[0], name="uneven", times=TS**1.2 / TS[-1]**0.2)
    with pytest.raises(ValueError, match="'uneven': its samples are not evenly spaced"):
        spineid.design([uneven, candidates[1]], ["stiffness"], NOISE, correlation={"x": 0.5})
    spineid.design([uneven, candidates[1]], ["stiffness"], NOISE)  # (white: any sampling)
    short = dataclasses.replace(candidates[0], name="short", times=TS[:3])
    with pytest.raises(ValueError, match="'short': 3 samples; correlation of order 3"):
        spineid.design([short], ["stiffness"], NOISE, correlation={"x": [0.5, 0.1, 0.1]})


def test_a_validation_under_correlated_errors_simulates_them_and_fits_them_as_a_lab(
        candidates):
    from spineid.identify._design._correlation import correlated_copies

    found = spineid.design(candidates, ["stiffness"], NOISE, budget=2,
                           correlation={"x": [0.8]})
    problem = found.problem()
    # The errors simulated: x an AR(1) of coefficient 0.8 and the noise's deviation, the
    # others white (pooled over 100 copies of the two records, 20200 samples per channel).
    copies = correlated_copies(problem, found.correlation, 100, seed=5)
    errors = np.concatenate([np.concatenate([m.values - clean.values for m, clean in
                                             zip(copy.measurements, problem.measurements)])
                             for copy in copies])
    errors = errors.reshape(100, 2, len(TS), 3)
    lag1 = [np.mean(errors[..., 1:, j] * errors[..., :-1, j]) / np.mean(errors[..., j] ** 2)
            for j in range(3)]
    assert lag1[0] == pytest.approx(0.8, abs=0.03)
    assert abs(lag1[1]) < 0.03 and abs(lag1[2]) < 0.03
    np.testing.assert_allclose(errors.std(axis=(0, 1, 2)), [NOISE[c] for c in "x y theta".split()],
                               rtol=0.05)
    assert all(copy.noise is None for copy in copies)
    validation = spineid.validate_design(found, 3, seed=5)
    assert validation.fitted == 3 and not validation.errors
    orders = [record["noise_model"]["x"]["order"]
              for record in validation.fits.records]
    assert min(orders) >= 1, orders
    # An experiment that measures the rotation alone beside one that measures everything:
    # each channel is whitened where it is measured. A design in which no experiment
    # measures a channel cannot be validated so (its noise could not be estimated).
    rotation = dataclasses.replace(candidates[0], name="theta only", channels=("theta",))
    both = spineid.design([rotation, candidates[1]], ["stiffness"], NOISE, budget=2,
                          correlation={"theta": [0.5]})
    assert set(both.chosen) == {"theta only", candidates[1].name}
    validation = spineid.validate_design(both, 2, seed=5)
    assert validation.fitted == 2 and not validation.errors
    assert all(record["noise_model"]["theta"]["order"] >= 1
               for record in validation.fits.records)
    partial = spineid.design([rotation], ["stiffness"], NOISE, correlation={"theta": [0.5]})
    with pytest.raises(ValueError, match=r"no chosen experiment measures \['x', 'y'\]"):
        spineid.validate_design(partial, 3)


def test_a_design_file_with_correlated_errors_is_designed_under_them(tmp_path, capsys):
    import json

    from spineid.cli import main
    text = spineid.dataset_path("designs/axial_4_springs.toml").read_text().replace(
        "../axial_4_springs.toml", str(spineid.dataset_path("axial_4_springs.toml")))
    (tmp_path / "white.toml").write_text(text)
    (tmp_path / "correlated.toml").write_text(text + "\n[correlation]\nx = 0.8\ny = [0.8]\n")
    reports = {}
    for name in ("white", "correlated"):
        assert main(["design", str(tmp_path / f"{name}.toml"), "--out",
                     str(tmp_path / name)]) == 0
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
    assert reports["correlated"]["correlation"] == {"x": [0.8], "y": [0.8]}
    assert reports["white"]["correlation"] == {}
    assert "errors correlated as autoregressions: x phi 0.8; y phi 0.8" in capsys.readouterr().out
    errors = {name: [p["baseline_stderr"] for p in report["parameters"]]
              for name, report in reports.items()}
    assert all(c > w for c, w in zip(errors["correlated"], errors["white"]))


def test_the_design_command_reads_a_design_file_and_writes_its_report(tmp_path, capsys):
    import json

    from spineid.cli import main
    out = tmp_path / "design"
    path = spineid.dataset_path("designs/axial_4_springs.toml")
    assert main(["design", str(path), "--out", str(out), "--check-linearity", "--validate", "4",
                 "--seed", "3", "--threads", "2"]) == 0
    report = json.loads((out / "report.json").read_text())
    # Validated by 4 noisy fits (a spread to about 40%: the numbers, not their size, checked).
    validation = report["validation"]
    assert (validation["repetitions"], validation["seed"], validation["fitted"]) == (4, 3, 4)
    assert [p["name"] for p in validation["parameters"]] == [p["name"]
                                                            for p in report["parameters"]]
    for row, predicted in zip(validation["parameters"], report["parameters"]):
        assert row["predicted"] == predicted["stderr"] and row["realised"] > 0
        assert row["ratio"] == pytest.approx(row["realised"] / row["predicted"])
    # (The axial springs' errors are a few percent of their values: the check holds.)
    assert report["linearity"]["holds"] is True and report["linearity"]["distance"] == 2.0
    assert len(report["linearity"]["ratio"]) == 6
    assert len(report["chosen"]) == 2 and "bundled protocol" not in report["chosen"]
    assert report["baseline"] == ["bundled protocol"]
    for row in report["parameters"]:  # both chosen together beat the bundled protocol
        assert row["stderr"] < row["baseline_stderr"]
    assert (out / "design.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "design (D-optimal): run" in printed and "linearisation holds" in printed
    assert "validated by 4 noisy fits" in printed
    assert main(["design", str(path), "--out", str(tmp_path / "other"), "--threads", "2"]) == 2
    assert "--threads: only with --validate" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["design", str(path), "--out", str(tmp_path / "other"), "--validate", "1"])
    with pytest.raises(ValueError, match="expected a Design"):
        spineid.validate_design("design.toml")
    # The same file with a rotation-only copy of a candidate: the sensor is a choice too.
    text = path.read_text().replace("../axial_4_springs.toml",
                                    str(spineid.dataset_path("axial_4_springs.toml")))
    start = text.index('[[candidates]]\nname = "Fx 3 Hz"')
    copy = text[start:text.index("[[candidates]]", start + 1)]
    copy = copy.replace('name = "Fx 3 Hz"', 'name = "Fx 3 Hz theta"\nchannels = ["theta"]')
    (tmp_path / "channels.toml").write_text(text + "\n" + copy)
    assert main(["design", str(tmp_path / "channels.toml"), "--out",
                 str(tmp_path / "channels")]) == 0


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace('model = "../axial_4_springs.toml"\n', ""), "model: expected a value"),
    (lambda t: t.replace("../axial_4_springs.toml", "../none.toml"), "an existing model file"),
    (lambda t: t.replace("budget = 2", "budget = 2\nspeed = 1"), "speed: expected one of"),
    (lambda t: t.replace("x = 5e-6", "z = 5e-6"), r"noise\.z: expected one of"),
    (lambda t: t.replace("duration = 0.5\nsamples = 251\nloads = [{component = \"Fx\", "
                         "amplitude = 6.0, frequency = 3.0}]",
                         "samples = 251\nloads = [{component = \"Fx\", amplitude = 6.0, "
                         "frequency = 3.0}]"), r"candidates\[1\]\.duration"),
    (lambda t: t.replace('component = "Fx", amplitude = 6.0, frequency = 12.0',
                         'component = "Fq", amplitude = 6.0, frequency = 12.0'),
     r"candidates\[2\] \('Fx 12 Hz'\)"),
    (lambda t: t.replace("force = 10.0", "force = 5.0"),
     "'bundled protocol': its force reaches 6 N, beyond the rig's limit 5 N"),
    (lambda t: t.replace('name = "Fx 3 Hz"', 'name = "Fx 3 Hz"\nchannels = ["phi"]'),
     r"candidates\[1\]\.channels: expected distinct channels among"),
    (lambda t: t.replace("frequency = 40.0", "frequency = 5.0"),
     "'bundled protocol': its frequency reaches 7 Hz, beyond the rig's limit 5 Hz"),
    (lambda t: t.replace("theta = 0.035", "phi = 0.035"),
     r"limits\.motion\.phi: expected one of"),
    (lambda t: t.replace("theta = 0.035", "theta = 0.015"),
     "'Fx 12 Hz': its theta moves 0.01699 rad from its start, beyond the joint's safe range"),
    (lambda t: t.replace("x = 0.002         # m\ny = 0.002         # m\ntheta = 0.035", ""),
     r"limits\.motion: expected at least one channel"),
    (lambda t: t + '\n[correlation]\ntheta = "high"\n',
     r"correlation\.theta: expected the coefficients"),
    (lambda t: t + "\n[correlation]\nz = 0.5\n", r"correlation\.z: expected one of"),
    (lambda t: t.replace("budget = 2", "budget = 9"),
     r"budget: expected at most the number of candidates \(7\), got 9"),
    (lambda t: t.replace('baseline = ["bundled protocol"]', 'baseline = ["today"]'),
     r"baseline: expected names of candidates \(among \['bundled protocol'"),
    (lambda t: t.replace('name = "Fx 3 Hz"', 'name = "Fx 12 Hz"'),
     r"candidates: expected distinct names; repeated, got \['Fx 12 Hz'\]"),
    (lambda t: t + "\n[correlation]\ntheta = 1.5\n",
     r"correlation\['theta'\] = \(1.5,\): not a stationary autoregression"),
])
def test_bad_design_files_name_the_key(tmp_path, capsys, edit, match):
    from spineid.cli import main
    source = spineid.dataset_path("designs/axial_4_springs.toml").read_text()
    folder = tmp_path / "designs"
    folder.mkdir()
    (tmp_path / "axial_4_springs.toml").write_text(
        spineid.dataset_path("axial_4_springs.toml").read_text())
    path = folder / "design.toml"
    path.write_text(edit(source))
    assert main(["design", str(path), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1, error
    assert __import__("re").search(match, error), error
    assert not (tmp_path / "out").exists()


def test_vector_springs_beyond_their_moments_are_never_separated_and_the_reason_is_said():
    # Four vector springs on a line act through three moments of their measure (sum k,
    # sum k x, sum k x^2): one direction of the four stiffnesses is never seen.
    from helpers import VECTOR_SPRINGS
    candidates = [candidate(c, 8.0, springs=VECTOR_SPRINGS) for c in AMPLITUDES]
    found = spineid.design(candidates, ["stiffness"], NOISE, budget=3)
    assert len(found.never) == 1
    assert any("moments of their stiffness measure" in w for w in found.warnings)
    # The unseen change leaves the three moments unchanged.
    x = np.array([s["point"][0] for s in VECTOR_SPRINGS])
    x = x / np.abs(x).max()
    change = np.array([found.never[0].get(name, 0.0) for name in found.names])
    np.testing.assert_allclose([change.sum(), change @ x, change @ x**2], 0.0, atol=1e-6)


def test_measured_channels_are_a_design_variable_checked_by_finite_differences():
    # Which sensor for a moment test: the rotation alone, or the two positions alone? The
    # information of a channel subset against central differences of the simulated
    # measured channels (no forward mode, no objective).
    full = candidate("Mz", 8.0)
    rotation = spineid.Candidate("Mz@8Hz theta", full.model, TS, channels=("theta",))
    positions = spineid.Candidate("Mz@8Hz x,y", full.model, TS, channels=["x", "y"])
    noise = {"theta": NOISE["theta"], "x": NOISE["x"], "y": NOISE["y"]}
    found = spineid.design([rotation, positions], ["stiffness"], noise, criterion="A")
    problem = spineid.FitProblem(full.model, spineid.Measurement(TS, _simulated(full),
                                                                 ("x", "y", "theta")),
                                 ["stiffness"], NOISE)
    values = problem.start

    def measured(theta, columns):
        model = problem.fitted_model(theta)
        q = np.asarray(spineid.simulate(model, TS, rtol=1e-12, atol=1e-14).q)
        return np.stack([np.asarray(model.observe(row)) for row in q])[:, columns]

    for name in ("Mz@8Hz theta", "Mz@8Hz x,y"):
        columns = [2] if name.endswith("theta") else [0, 1]
        sigma = np.array([NOISE[c] for c in ("x", "y", "theta")])[columns]
        jacobian = []
        for j, value in enumerate(values):
            step = np.zeros_like(values)
            step[j] = 1e-4 * value
            difference = measured(values + step, columns) - measured(values - step, columns)
            jacobian.append((difference / (2 * step[j]) / sigma).ravel())
        jacobian = np.array(jacobian).T
        expected = np.sqrt(np.diag(np.linalg.inv(jacobian.T @ jacobian)))
        alone = spineid.design([rotation if name.endswith("theta") else positions],
                               ["stiffness"], noise)
        np.testing.assert_allclose(alone.stderr, expected, rtol=1e-4)
    best = min(("Mz@8Hz theta", "Mz@8Hz x,y"), key=lambda n: np.sum(
        spineid.design([rotation if n.endswith("theta") else positions], ["stiffness"],
                       noise).relative_stderr() ** 2))
    assert found.chosen == (best,)


def _validated_by_fits(problem, values, stderr, seed, repetitions=50):
    """Fit `repetitions` noise draws of a design's `problem` (its data the noise-free
    simulation at the nominal `values`, NaN where not measured): each fit is at the optimum
    (a Gauss-Newton step from it, its Jacobian from central differences of plain simulations
    of the measured values, moves it by less than 0.02 standard errors), and the estimates
    spread as the predicted `stderr`."""
    sigma = np.array([NOISE[c] for c in problem.channels])
    kept = [~np.isnan(m.values[0]) for m in problem.measurements]

    def observed(theta):
        rows = []
        for case, columns in enumerate(kept):
            model = problem.fitted_model(theta, case)
            q = spineid.simulate(model, problem.measurements[case].ts, rtol=1e-12,
                                 atol=1e-14).q
            rows.append((np.asarray(jax.vmap(model.observe)(q))[:, columns]
                         / sigma[columns]).ravel())
        return np.concatenate(rows)

    rng = np.random.default_rng(seed)
    deviations = []
    for _ in range(repetitions):
        noise = [rng.normal(size=m.values.shape) for m in problem.measurements]
        noisy = problem.with_measurements([dataclasses.replace(m, values=m.values + e * sigma)
                                           for m, e in zip(problem.measurements, noise)])
        fitted = spineid.fit(noisy, spineid.LevenbergMarquardt())
        assert fitted.converged and fitted.n_data == problem.n_data
        deviations.append(fitted.values - values)
        data = np.concatenate([((m.values[:, c] + e[:, c] * sigma[c]) / sigma[c]).ravel()
                               for m, e, c in zip(problem.measurements, noise, kept)])
        theta = fitted.values
        jacobian = np.array([(observed(theta + step) - observed(theta - step)) / (2 * step[j])
                             for j, step in enumerate(np.diag(1e-5 * theta))]).T
        step = np.linalg.lstsq(jacobian, data - observed(theta), rcond=None)[0]
        assert np.all(np.abs(step) < 0.02 * stderr)
    z = np.array(deviations) / stderr
    # 3 x 50 standardised deviations: their root mean square is 1 within about 0.1.
    assert 0.8 < np.sqrt(np.mean(z**2)) < 1.2



def test_a_design_of_sensors_is_validated_by_noisy_fits():
    # Each load case with one sensor: the rotation alone or the two positions alone. The
    # design's problem leaves the channels not measured out (NaN); fitted to noise draws of
    # the measured channels, it realises the predicted errors, wider than with every channel
    # recorded.
    candidates = [spineid.Candidate(f"{c}@8Hz {'+'.join(kept)}", candidate(c, 8.0).model, TS,
                                    channels=kept)
                  for c in AMPLITUDES for kept in (("theta",), ("x", "y"))]
    found = spineid.design(candidates, ["stiffness"], NOISE, budget=2)
    problem = found.problem()
    for name, measurement in zip(found.chosen, problem.measurements):
        kept = np.isin(problem.channels, dict((c.name, c.measured) for c in candidates)[name])
        assert np.all(np.isnan(measurement.values[:, ~kept]))
        assert np.all(np.isfinite(measurement.values[:, kept]))
    covariance, _ = spineid.analyse(problem, found.values)
    np.testing.assert_allclose(np.sqrt(np.diag(covariance)), found.stderr, rtol=1e-6)
    every = problem.with_measurements([dataclasses.replace(m, values=np.nan_to_num(m.values))
                                       for m in problem.measurements])
    assert np.all(np.sqrt(np.diag(spineid.analyse(every, found.values)[0]))
                  < 0.9 * found.stderr)
    _validated_by_fits(problem, found.values, found.stderr, seed=12)


@pytest.mark.parametrize("make, match", [
    (lambda m: spineid.Candidate("c", m, TS, channels=("phi",)), r"unknown \['phi'\]"),
    (lambda m: spineid.Candidate("c", m, TS, channels=()), "expected distinct names"),
    (lambda m: spineid.Candidate("c", m, TS, channels=("x", "x")), "expected distinct names"),
])
def test_bad_channel_choices_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make(candidate("Fx", 8.0).model)


def test_a_measured_channel_without_noise_is_refused():
    chosen = spineid.Candidate("c", candidate("Fx", 8.0).model, TS, channels=("theta",))
    with pytest.raises(ValueError, match=r"measured channel\(s\) \['theta'\]"):
        spineid.design([chosen], ["stiffness"], {"x": 5e-6})


def _frequency_protocol():
    """`(build, problem)`: the moment test's frequency as a protocol variable, 2-30 Hz from
    5 Hz, for the D-criterion of the stiffness."""
    import equinox as eqx
    import jax.numpy as jnp

    base = candidate("Mz", 8.0).model

    def build(x):
        load = base.loads[0]
        return eqx.tree_at(lambda m: m.loads[0].frequency, base,
                           x["frequency"] * jnp.ones_like(load.frequency))

    return build, spineid.ProtocolProblem(build, {"frequency": (2.0, 30.0, 5.0)}, TS,
                                          ["stiffness"], NOISE, criterion="D")


def _brute_force_protocol(build, frequency):
    """`(D-criterion, largest change of theta)` of the protocol at `frequency`: its
    simulation, and `spineid.analyse` of a fit problem of it."""
    model = build({"frequency": frequency})
    observed = _simulated(spineid.Candidate("g", model, TS))
    fit_problem = spineid.FitProblem(model, spineid.Measurement(TS, observed,
                                                                ("x", "y", "theta")),
                                     ["stiffness"], NOISE)
    covariance, _ = spineid.analyse(fit_problem)
    start = fit_problem.start
    return (-np.linalg.slogdet(covariance / np.outer(start, start))[1],
            np.max(np.abs(observed[:, 2] - observed[0, 2])))


def test_a_continuous_protocol_is_the_best_a_fine_grid_finds_and_its_gradient_is_exact():
    # The frequency of a moment test, from 2 to 30 Hz: the D-criterion of the continuous
    # optimum against a brute-force grid of one-experiment designs (analyse on each), and the
    # criterion's gradient (forward over forward through the ODE) against central differences
    # of that brute force.
    build, problem = _frequency_protocol()
    found = spineid.optimise_protocol(problem)

    def brute(frequency):
        return _brute_force_protocol(build, frequency)[0]

    grid = np.linspace(2.0, 30.0, 57)
    scores = np.array([brute(f) for f in grid])
    assert found.score >= scores.max() - 1e-6
    assert abs(found.variables["frequency"] - grid[np.argmax(scores)]) <= 0.5
    assert found.score == pytest.approx(brute(found.variables["frequency"]), abs=1e-5)
    assert found.start_score == pytest.approx(brute(5.0), abs=1e-5)
    for frequency in (6.0, 12.0):
        value, gradient = problem.criterion({"frequency": frequency})
        assert value == pytest.approx(brute(frequency), abs=1e-5)
        h = 1e-3
        slope = (brute(frequency + h) - brute(frequency - h)) / (2 * h)
        assert gradient["frequency"] == pytest.approx(slope, rel=1e-3, abs=1e-4)
    assert "frequency = " in found.summary()
    assert found.report()["variables"]["frequency"] == found.variables["frequency"]


def test_an_optimal_protocol_is_validated_by_noisy_fits():
    # The moment test's frequency chosen for the rotation sensor alone: the protocol's problem
    # (the optimum's simulation, x and y not measured) fitted to noise draws realises the
    # errors the protocol predicts.
    build, _ = _frequency_protocol()
    problem = spineid.ProtocolProblem(build, {"frequency": (2.0, 30.0, 5.0)}, TS,
                                      ["stiffness"], NOISE, channels=("theta",))
    found = spineid.optimise_protocol(problem)
    fit_problem = found.problem()
    assert fit_problem.names == found.names
    values = fit_problem.measurements[0].values
    assert np.all(np.isnan(values[:, :2])) and np.all(np.isfinite(values[:, 2]))
    covariance, _ = spineid.analyse(fit_problem, found.values)
    np.testing.assert_allclose(np.sqrt(np.diag(covariance)), found.stderr, rtol=1e-6)
    _validated_by_fits(fit_problem, found.values, found.stderr, seed=13)


def test_a_protocol_held_back_by_the_rig_says_so_and_bad_protocols_are_refused():
    import equinox as eqx

    base = candidate("Mz", 8.0).model

    def build(x):
        return eqx.tree_at(lambda m: m.loads[0].amplitude, base,
                           x["amplitude"] * jnp.ones_like(base.loads[0].amplitude))

    import jax.numpy as jnp
    problem = spineid.ProtocolProblem(build, {"amplitude": (0.01, 0.08, 0.02)}, TS,
                                      ["stiffness"], NOISE, criterion="A")
    found = spineid.optimise_protocol(problem, limits={"moment": 0.08}, starts=1)
    # More moment, more signal against the same noise: the largest amplitude allowed wins.
    assert found.at_bound == ["amplitude"]
    assert found.variables["amplitude"] == pytest.approx(0.08)
    assert found.peak_moment == pytest.approx(0.08, rel=1e-3)
    # (Nearly linear in the load: four times the moment, about a quarter of the errors.)
    np.testing.assert_allclose(found.stderr, found.start_stderr * 0.02 / 0.08, rtol=0.1)
    with pytest.raises(ValueError, match="beyond the rig's limit"):
        spineid.optimise_protocol(problem, limits={"moment": 0.05}, starts=1)
    for variables, match in [({}, "at least one design variable"),
                             ({"amplitude": (0.1, 0.01, 0.05)}, "expected finite low < high"),
                             ({"amplitude": (0.01, 0.1)}, r"expected \(low, high, start\)")]:
        with pytest.raises(ValueError, match=match):
            spineid.ProtocolProblem(build, variables, TS, ["stiffness"], NOISE)
    with pytest.raises(ValueError, match="not free parameters"):
        spineid.ProtocolProblem(build, {"amplitude": (0.01, 0.08, 0.02)}, TS, ["stiffness"],
                                NOISE, criterion=["springs[0].damping"])
    with pytest.raises(ValueError, match="expected 'force'"):
        spineid.optimise_protocol(problem, limits={"duration": 1.0})


def test_a_fit_resolves_a_zero_valued_coupling_as_the_design_predicts():
    # A coupling entry of a bushing's stiffness starts at zero: the fit scales it by what the
    # data resolve of it (one SI unit left it at its start, "not identifiable"), and its
    # standard error is the one the design predicted for these load cases.
    import copy
    model_file = spineid.load_model_file(spineid.dataset_path("spatial_pair.toml"))
    document = copy.deepcopy(model_file.document)
    document["bushings"][0]["stiffness"] = np.asarray(spineid.K_F_E).tolist()
    free = ["bushings[0].stiffness[0][0]", "bushings[0].stiffness[0][1]",
            "bushings[0].stiffness[1][1]"]
    noise = {c: (1e-5 if c in ("x", "y", "z") else float(np.radians(0.01)))
             for c in model_file.model.observable_names}
    times = np.linspace(0.0, 0.2, 101)
    cases = []
    for component, amplitude in (("Fx", 20.0), ("Fy", 40.0)):
        changed = copy.deepcopy(document)
        changed["loads"] = [{"component": component, "amplitude": amplitude,
                             "frequency": 20.0}]
        cases.append(spineid.Candidate(component, spineid.ModelFile.from_document(changed),
                                       times))
    found = spineid.design(cases, free, noise, budget=2)
    assert found.identifiable.all()
    problem = found.problem()
    sigma = np.array([problem.noise[c] for c in problem.channels])
    rng = np.random.default_rng(5)
    noisy = [spineid.Measurement(m.ts, m.values + rng.normal(size=m.values.shape) * sigma,
                                 m.channels) for m in problem.measurements]
    result = spineid.fit(spineid.FitProblem(problem.model_file, noisy, free, problem.noise,
                                            models=problem.models),
                         spineid.LevenbergMarquardt())
    assert result.converged and result.identifiability.rank == 3
    np.testing.assert_allclose(result.stderr, found.stderr, rtol=0.25)
    assert result.values[1] != 0.0 and abs(result.values[1]) < 5 * found.stderr[1]


PROTOCOL_FILE = """model = "MODEL"
free = ["stiffness"]
criterion = "D"

[noise]
x = 5e-6
y = 5e-6
theta = 1.7e-4

[limits]
moment = 0.1

[protocol]
duration = 0.2
samples = 101
starts = 1
loads = [{component = "Mz", amplitude = 0.08, frequency = 5.0}]

[protocol.variables]
"loads[0].frequency" = [2.0, 30.0]
"""


def protocol_file(folder, text=PROTOCOL_FILE):
    path = folder / "protocol.toml"
    path.write_text(text.replace("MODEL", str(spineid.dataset_path("axial_4_springs.toml"))))
    return path


def test_a_protocol_file_is_designed_as_the_python_protocol_problem(tmp_path, capsys):
    import json

    import equinox as eqx
    import jax.numpy as jnp

    from spineid.cli import main
    path = protocol_file(tmp_path)
    spec = spineid.io.read_design_file(path).protocol
    assert spec.variables == {"loads[0].frequency": (2.0, 30.0, 5.0)}
    # The file's build against the model a document with that frequency gives (another path).
    document = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml")).document
    document["loads"] = [{"component": "Mz", "amplitude": 0.08, "frequency": 11.3}]
    other = spineid.ModelFile.from_document(document).model
    built = spec.build({"loads[0].frequency": jnp.asarray(11.3)})
    np.testing.assert_allclose(spineid.simulate(built, TS).q, spineid.simulate(other, TS).q,
                               rtol=0, atol=1e-14)
    out = tmp_path / "out"
    assert main(["design", str(path), "--out", str(out), "--validate", "2"]) == 0
    printed = capsys.readouterr().out
    assert "protocol (D-optimal" in printed and "validated by 2 noisy fits" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["validation"]["fitted"] == 2
    assert [p["predicted"] for p in report["validation"]["parameters"]] == [
        p["stderr"] for p in report["parameters"]]
    assert (out / "design.png").stat().st_size > 10_000
    base = spec.model.model

    def build(x):
        return eqx.tree_at(lambda m: m.loads[0].frequency, base,
                           x["f"] * jnp.ones_like(base.loads[0].frequency))

    python = spineid.optimise_protocol(spineid.ProtocolProblem(
        build, {"f": (2.0, 30.0, 5.0)}, TS, ["stiffness"], NOISE, criterion="D"), starts=1)
    assert report["variables"]["loads[0].frequency"] == pytest.approx(python.variables["f"],
                                                                     rel=1e-6)
    # With the joint's safe range in the file: the search keeps within it, as in Python.
    limited = PROTOCOL_FILE.replace("moment = 0.1", "moment = 0.1\n\n[limits.motion]\n"
                                    "theta = 0.012")
    assert main(["design", str(protocol_file(tmp_path, limited)), "--out",
                 str(tmp_path / "limited")]) == 0
    limited_report = json.loads((tmp_path / "limited" / "report.json").read_text())
    assert limited_report["peak_motion"]["theta"] <= 0.012
    assert report["peak_motion"] == {}
    assert report["score"] == pytest.approx(python.score, abs=1e-8)
    assert report["score"] > report["start_score"]


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace('"loads[0].frequency"', '"loads[1].frequency"'),
     r'protocol\.variables\."loads\[1\]\.frequency": expected a name loads\[j\]\.field'),
    (lambda t: t.replace('"loads[0].frequency"', '"loads[0].component"'),
     "field one of"),
    (lambda t: t.replace("[2.0, 30.0]", "[6.0, 30.0]"), r"\[low, high\] around the load's"),
    (lambda t: t.replace("[2.0, 30.0]", "[30.0, 2.0]"), r"\[low, high\] around the load's"),
    (lambda t: t.replace('criterion = "D"', 'criterion = "D"\nbudget = 2'),
     r"budget: expected no such key with a \[protocol\]"),
    (lambda t: t + '\n[[candidates]]\nname = "a"\nduration = 0.1\nloads = []\n',
     r"candidates: expected either \[\[candidates\]\] tables .* not both"),
    (lambda t: t.replace("[protocol]", "[other]").split("[other]")[0],
     "not neither"),
    (lambda t: t.replace('loads = [{component = "Mz", amplitude = 0.08, frequency = 5.0}]',
                         'loads = [{loads_file = "loads.csv"}]'),
     "a load file cannot vary"),
    (lambda t: t.replace("moment = 0.1", "moment = 0.1\ntotal = 1.0"),
     r"limits\.total: expected no such limit with a \[protocol\]"),
])
def test_bad_protocol_files_name_the_key(tmp_path, capsys, edit, match):
    from spineid.cli import main
    path = protocol_file(tmp_path, edit(PROTOCOL_FILE))
    assert main(["design", str(path), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1, error
    assert __import__("re").search(match, error), error
    assert not (tmp_path / "out").exists()


def test_a_budget_is_refused_for_a_protocol(tmp_path, capsys):
    from spineid.cli import main
    assert main(["design", str(protocol_file(tmp_path)), "--out", str(tmp_path / "out"),
                 "--budget", "2"]) == 2
    assert "--budget: only for a design file of candidates" in capsys.readouterr().err
    assert main(["design", str(protocol_file(tmp_path)), "--out", str(tmp_path / "out"),
                 "--check-linearity"]) == 2
    assert "--check-linearity: only for a design file of candidates" in \
        capsys.readouterr().err


def _slow_axial_case(noise_y, only_y=False):
    # One free axial stiffness k_y of the spatial pair's bushing, pulled by a slow force (1 Hz,
    # its natural frequency 57 Hz): quasi-static, y = F / k_y, so d(y / sigma)/dk_y =
    # -F / (k_y^2 sigma) and the Cramer-Rao error is k_y^2 sigma / sqrt(sum F^2): the predicted
    # error at k' over that at k is (k' / k)^2, the analytic limit the check must find. Only y
    # is informative (the other channels' noise is taken huge).
    import copy
    model_file = spineid.load_model_file(spineid.dataset_path("spatial_pair.toml"))
    document = copy.deepcopy(model_file.document)
    document["loads"] = [{"component": "Fy", "amplitude": 50.0, "frequency": 1.0}]
    noise = {c: (noise_y if c == "y" else 1.0) for c in model_file.model.observable_names}
    if only_y:  # (a rig that measures y alone)
        noise = {"y": noise_y}
    case = spineid.Candidate("Fy@1Hz", spineid.ModelFile.from_document(document),
                             np.linspace(0.0, 1.0, 201), channels=("y",) if only_y else None)
    return spineid.design([case], ["bushings[0].stiffness[1]"], noise)


def test_the_linearity_check_of_an_experiment_that_measures_one_channel():
    # The quasi-static limit again, with y the only channel measured: (k' / k)^2 on both
    # sides, as with every channel measured and the others' noise huge.
    k = 2.2e5
    forces = 50.0 * np.sin(2 * np.pi * np.linspace(0.0, 1.0, 201))
    noise_y = 0.1 * np.sqrt(np.sum(forces**2)) / k
    alone = _slow_axial_case(noise_y, only_y=True).check_linearity(directions=1)
    every = _slow_axial_case(noise_y).check_linearity(directions=1)
    moved = k + np.array([1.0, -1.0]) * alone.steps[0, 0]
    np.testing.assert_allclose(alone.ratio[:, 0], (moved / k) ** 2, rtol=0.01)
    np.testing.assert_allclose(alone.ratio, every.ratio, rtol=1e-6)


@pytest.mark.parametrize("relative_error", [0.1, 0.001])
def test_the_linearity_check_follows_the_quasi_static_analytic_limit(relative_error):
    k = 2.2e5
    forces = 50.0 * np.sin(2 * np.pi * np.linspace(0.0, 1.0, 201))
    found = _slow_axial_case(relative_error * np.sqrt(np.sum(forces**2)) / k)
    np.testing.assert_allclose(found.stderr[0] / k, relative_error, rtol=0.02)
    check = found.check_linearity(distance=2.0, directions=1)
    np.testing.assert_allclose(np.abs(check.steps[0, 0]), 2.0 * found.stderr[0], rtol=1e-9)
    moved = k + np.array([1.0, -1.0]) * check.steps[0, 0]
    np.testing.assert_allclose(check.ratio[:, 0], (moved / k) ** 2, rtol=0.01)
    if relative_error > 0.01:
        # +-20% in k: predicted errors x1.44 and x0.64, a skew (sqrt(1.44 / 0.64) = 1.5) with
        # about the same spread (sqrt(1.44 * 0.64) = 0.96): k_hat = F / y_hat is skewed.
        assert not check.holds and check.spread_changes() == {}
        np.testing.assert_allclose(check.skews()["bushings[0].stiffness[1][1]"], 1.5, rtol=0.01)
        assert "does not hold" in check.summary() and "skew" in check.summary()
        assert "  spread:" not in check.summary()
    else:
        assert check.holds and check.spread_changes() == {} and check.skews() == {}
        assert "linearisation holds" in check.summary()
    assert check.report()["holds"] == check.holds
    np.testing.assert_allclose(check.farthest(check.one_way()), np.sqrt((moved[0] / moved[1])
                                                                        ** 2), rtol=0.01)


def test_the_factor_farthest_from_one_is_taken_by_its_logarithm():
    # x0.5 is farther from 1 than x1.5 (log 2 against log 1.5); NaN directions are passed
    # over; a parameter with none finite has none.
    factors = np.array([[0.5, 1.1, np.nan], [1.5, np.nan, np.nan]])
    np.testing.assert_array_equal(spineid.LinearityCheck.farthest(factors)[:2], [0.5, 1.1])
    assert np.isnan(spineid.LinearityCheck.farthest(factors)[2])


def test_bad_linearity_checks_are_refused():
    found = _slow_axial_case(1e-6)
    for arguments, match in (({"distance": 0.0}, "distance"), ({"distance": np.nan}, "distance"),
                             ({"directions": 2}, "directions"),
                             ({"directions": 0}, "directions")):
        with pytest.raises(ValueError, match=match):
            found.check_linearity(**arguments)


def test_a_linearity_check_reaching_where_the_model_fails_says_so():
    # Twenty 10% errors below k_y the spring pushes instead of holding: the simulation
    # diverges there, while twenty above (k' = 3 k) the error is 3^2 times the nominal one.
    import json
    k = 2.2e5
    forces = 50.0 * np.sin(2 * np.pi * np.linspace(0.0, 1.0, 201))
    found = _slow_axial_case(0.1 * np.sqrt(np.sum(forces**2)) / k)
    check = found.check_linearity(distance=20.0, directions=1)
    np.testing.assert_allclose(check.ratio[0, 0], 9.0, rtol=0.01)
    assert np.isnan(check.ratio[1, 0]) and not check.simulated and not check.holds
    assert "cannot be simulated" in check.summary()
    assert json.loads(json.dumps(check.report()))["ratio"][1] == [None]


def test_the_rigs_frequency_and_the_joints_safe_range_refuse_candidates_beyond_them():
    import equinox as eqx

    slow, fast = candidate("Mz", 8.0), candidate("Mz", 20.0)
    assert spineid.peak_frequency(slow) == 8.0
    # A tabulated load of one 12 Hz sine: its bandwidth is 12 Hz (to the 1 Hz resolution of a
    # 1 s record); the analytic value, not a term read back.
    times = np.linspace(0.0, 1.0, 201)
    table = spineid.TabulatedLoad(times=times, values=0.08 * np.sin(
        2 * np.pi * 12.0 * times)[:, None] * np.array([0.0, 0.0, 1.0]))
    tabulated = spineid.Candidate("table", eqx.tree_at(lambda m: m.loads, slow.model, (table,)),
                                  times)
    assert abs(spineid.peak_frequency(tabulated) - 12.0) <= 1.0
    with pytest.raises(ValueError, match=r"'Mz@20Hz': its frequency reaches 20 Hz, beyond the "
                                         r"rig's limit 10 Hz"):
        spineid.design([slow, fast], ["stiffness"], NOISE, limits={"frequency": 10.0})
    # The joint's safe range in theta: the largest change of the candidate's simulated
    # rotation, computed here.
    theta = _simulated(fast)[:, 2]
    peak = np.max(np.abs(theta - theta[0]))
    with pytest.raises(ValueError, match=rf"'Mz@20Hz': its theta moves {peak:.4g} rad from "
                                         r"its start, beyond the joint's safe range"):
        spineid.design([slow, fast], ["stiffness"], NOISE,
                       limits={"motion": {"theta": 0.9 * peak}})
    np.testing.assert_array_less(np.max(np.abs(_simulated(slow)[:, 2])), 0.9 * peak)
    found = spineid.design([slow, fast], ["stiffness"], NOISE,
                           limits={"motion": {"theta": 1.1 * peak}, "frequency": 20.0})
    assert found.chosen
    for motion, match in [({"phi": 0.1}, r"channels \['phi'\] are not observed"),
                          ({"theta": 0.0}, "expected a positive number"),
                          ({}, "expected {channel"), (0.1, "expected {channel")]:
        with pytest.raises(ValueError, match=match):
            spineid.design([slow], ["stiffness"], NOISE, limits={"motion": motion})


def test_a_protocol_keeps_the_joint_within_its_safe_range_as_a_brute_force_grid_does():
    # The frequency of the moment test again, now with the rotation kept within a safe range
    # the unconstrained optimum passes: the constrained optimum against the best of a grid of
    # frequencies whose simulations keep within it (each simulated and analysed here).
    build, problem = _frequency_protocol()
    free = spineid.optimise_protocol(problem)

    def brute(frequency):
        return _brute_force_protocol(build, frequency)

    free_peak = brute(free.variables["frequency"])[1]
    # (Below the resonance the criterion rises with the frequency up to a local optimum near
    # 11.6 Hz, where the rotation is 0.54 of the free optimum's: a limit of 0.45 holds the
    # design back at its boundary.)
    limit = 0.45 * free_peak
    found = spineid.optimise_protocol(problem, limits={"motion": {"theta": limit}})
    assert found.peak_motion["theta"] <= limit
    assert found.peak_motion["theta"] == pytest.approx(limit, rel=2e-3)  # (held at it)
    score, peak = brute(found.variables["frequency"])
    assert peak <= limit and found.score == pytest.approx(score, abs=1e-5)
    assert found.peak_motion["theta"] == pytest.approx(peak, rel=1e-6)
    grid = np.linspace(2.0, 30.0, 29)
    scored = [brute(f) for f in grid]
    feasible = [s for s, p in scored if p <= limit]
    assert found.score >= max(feasible) - 1e-6
    assert found.score < free.score
    assert f"theta moves {found.peak_motion['theta']:.4g} rad" in found.summary()
    assert found.report()["peak_motion"]["theta"] == found.peak_motion["theta"]
    with pytest.raises(ValueError, match="no protocol within the variables' bounds"):
        spineid.optimise_protocol(problem, limits={"motion": {"theta": 1e-6 * limit}},
                                  starts=2)
    assert free.variables["frequency"] > 10.0
    with pytest.raises(ValueError, match="beyond the rig's limit 10 Hz: bound the frequencies"):
        spineid.optimise_protocol(problem, limits={"frequency": 10.0}, starts=1)


def test_the_design_command_names_a_missing_design_file_and_refuses_a_zero_budget(
        tmp_path, capsys):
    from spineid.cli import main

    missing = tmp_path / "nowhere.toml"
    assert main(["design", str(missing), "--out", str(tmp_path / "out")]) == 2
    assert f"{missing}: design file not found" in capsys.readouterr().err
    path = str(spineid.dataset_path("designs/axial_4_springs.toml"))
    try:
        status = main(["design", path, "--budget", "0", "--out", str(tmp_path / "out")])
    except SystemExit as stop:  # (argparse refuses the option's value)
        status = stop.code
    assert status == 2 and "--budget" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_long_validation_is_cut_into_chunks_that_show_its_progress_early():
    # Issue 53, item 8: `design --validate 100000` ran for minutes with nothing shown, its
    # first progress step (and tqdm's estimate of the time left) after 10,000 fits. Ten steps
    # for a short validation, at most DEFAULT_CHUNK fits each for a long one.
    from spineid.executors import DEFAULT_CHUNK
    from spineid.identify._design._validation import validation_chunk

    assert [validation_chunk(n) for n in (2, 20, 50, 250)] == [1, 2, 5, 25]
    assert validation_chunk(100_000) == DEFAULT_CHUNK == 25


def test_the_design_files_page_shows_whole_files_that_read(tmp_path):
    # Each TOML block of docs/formats/design-files.md is a whole design file: beside a copy of
    # the bundled model (its `model = "../axial_4_springs.toml"`), it reads without an error.
    import pathlib
    import shutil

    from spineid.io import read_design_file

    page = (pathlib.Path(__file__).parent.parent / "docs" / "formats" / "design-files.md")
    blocks = [b.split("```", 1)[0] for b in page.read_text().split("```toml\n")[1:]]
    assert len(blocks) == 2
    shutil.copy(spineid.dataset_path("axial_4_springs.toml"), tmp_path / "axial_4_springs.toml")
    (tmp_path / "designs").mkdir()
    for k, block in enumerate(blocks):
        path = tmp_path / "designs" / f"block_{k}.toml"
        path.write_text(block)
        read = read_design_file(path)
        assert read is not None
