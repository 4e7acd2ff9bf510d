"""Values not measured (`NaN` in a `Measurement`): gaps in a record, and channels a load case
does not record.

Oracles: the same fit with the missing samples cut out of the record (other times, other
padding, another compilation: a different path to the same sums); the Cramer-Rao errors of
the measured entries from central differences of plain simulations; chi-square statistics by
hand in numpy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, TORSION, document

pytestmark = pytest.mark.xdist_group("identify")

TS = np.linspace(0.0, 0.2, 101)
CHANNELS = ("x", "y", "theta")
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}
SIGMA = np.array([NOISE[c] for c in CHANNELS])
TRUTH = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
TRUE_STIFFNESS = np.array([s["stiffness"] for s in AXIAL_SPRINGS])


def simulated(doc, ts=TS):
    model = spineid.ModelFile.from_document(doc).model
    return np.array(jax.vmap(model.observe)(spineid.simulate(model, jnp.asarray(ts)).q))


def perturbed(doc, factors=(1.3, 0.7, 1.2)):
    changed = {**doc, "springs": [dict(s, stiffness=s["stiffness"] * f)
                                  for s, f in zip(doc["springs"], factors)]}
    return spineid.ModelFile.from_document(changed)


def noisy(seed, doc=TRUTH):
    clean = simulated(doc)
    return clean + np.random.default_rng(seed).normal(size=clean.shape) * SIGMA


@pytest.mark.parametrize("noise", [NOISE, None], ids=["noise given", "noise estimated"])
def test_samples_missing_in_every_channel_fit_as_if_cut_out(noise):
    data = noisy(3)
    gaps = np.zeros(TS.size, bool)
    gaps[[5, 6, 7, 30, 31, 62, 90]] = True  # (a marker lost for a few frames, three times)
    with_gaps = spineid.Measurement(TS, np.where(gaps[:, None], np.nan, data), CHANNELS)
    cut = spineid.Measurement(TS[~gaps], data[~gaps], CHANNELS)
    start = perturbed(TRUTH)
    fits = [spineid.fit(spineid.FitProblem(start, m, ["stiffness"], noise))
            for m in (with_gaps, cut)]
    assert all(f.converged for f in fits)
    assert fits[0].n_data == fits[1].n_data == 3 * int(np.count_nonzero(~gaps))
    np.testing.assert_allclose(fits[0].values, fits[1].values, rtol=1e-7)
    # (The complete record's errors come from the solver's last Jacobian, one step before
    # the end: 1e-4 apart; at the same values the two problems' information is the same.)
    np.testing.assert_allclose(fits[0].stderr, fits[1].stderr, rtol=1e-3)
    if noise is not None:
        covariances = [spineid.analyse(spineid.FitProblem(start, m, ["stiffness"], noise),
                                       fits[0].values)[0] for m in (with_gaps, cut)]
        np.testing.assert_allclose(covariances[0], covariances[1], rtol=1e-8)
    assert fits[0].cost == pytest.approx(fits[1].cost, rel=1e-6)
    for channel in CHANNELS:
        assert fits[0].noise[channel] == pytest.approx(fits[1].noise[channel], rel=1e-6)
    gaps_fit, cut_fit = (f.goodness_of_fit for f in fits)
    assert gaps_fit.explains_data is True and cut_fit.explains_data is True
    assert (gaps_fit.n_data, gaps_fit.dof) == (cut_fit.n_data, cut_fit.dof)
    assert gaps_fit.chi_square == pytest.approx(cut_fit.chi_square, rel=1e-6)
    if noise is None:  # the whiteness test pairs neighbours measured: each run between gaps
        # is a record of its own (Durbin-Watson's z of each, mean removed, summed / sqrt(runs))
        residuals = fits[0].residuals()[0]
        edges = [0, 5, 8, 30, 32, 62, 63, 90, 91, TS.size]
        runs = [slice(a, b) for a, b in zip(edges[::2], edges[1::2])]
        for c, channel in enumerate(CHANNELS):
            zs = []
            for run in runs:
                x = residuals[run, c] - residuals[run, c].mean()
                rho = (x[1:] @ x[:-1]) / (x @ x)
                zs.append((rho + 1 / x.size) * np.sqrt(x.size))
            assert gaps_fit.whiteness[channel]["z"] == pytest.approx(
                sum(zs) / np.sqrt(len(zs)), rel=1e-6)
    # What is reported keeps the record's layout: NaN where nothing was measured.
    residuals = fits[0].residuals()[0]
    assert residuals.shape == data.shape
    assert np.all(np.isnan(residuals[gaps])) and np.all(np.isfinite(residuals[~gaps]))
    np.testing.assert_allclose(fits[0].predictions[0][~gaps], fits[1].predictions[0],
                               rtol=1e-9, atol=1e-12)
    assert np.all(np.isfinite(fits[0].predictions[0]))  # (the model at every sample)
    assert np.all(np.abs(fits[0].values - TRUE_STIFFNESS) < 5 * fits[0].stderr)


def test_a_channel_a_load_case_does_not_record_adds_nothing():
    # Two tests of the pair; the second records the positions only (no rotation sensor).
    other = {**TRUTH, "loads": [{"component": "Mz", "amplitude": 0.1, "frequency": 9.0}]}
    data = [simulated(TRUTH), simulated(other)]
    data[1][:, 2] = np.nan
    start, other_start = perturbed(TRUTH), perturbed(other)
    problem = spineid.FitProblem(start, [spineid.Measurement(TS, d, CHANNELS) for d in data],
                                 ["stiffness"], NOISE, models=[start.model, other_start.model])
    assert not problem.complete and problem.n_data == 3 * TS.size + 2 * TS.size
    result = spineid.fit(problem)
    assert result.converged and result.n_data == problem.n_data
    # (noise-free data: the statistical stop leaves it within a hundredth of an error)
    assert np.all(np.abs(result.values - TRUE_STIFFNESS) < 0.01 * result.stderr)
    assert np.all(np.isnan(result.residuals()[1][:, 2]))
    # The Cramer-Rao errors at the truth: central differences of plain simulations, the
    # second test's rotation left out.
    columns = []
    for j, value in enumerate(TRUE_STIFFNESS):
        rows = []
        for doc, kept in ((TRUTH, [0, 1, 2]), (other, [0, 1])):
            sides = []
            for sign in (1.0, -1.0):
                springs = [dict(s) for s in doc["springs"]]
                springs[j]["stiffness"] = value * (1 + sign * 1e-5)
                sides.append(simulated({**doc, "springs": springs})[:, kept] / SIGMA[kept])
            rows.append(((sides[0] - sides[1]) / (2e-5 * value)).ravel())
        columns.append(np.concatenate(rows))
    jacobian = np.array(columns).T
    expected = np.sqrt(np.diag(np.linalg.inv(jacobian.T @ jacobian)))
    covariance, _ = spineid.analyse(problem, TRUE_STIFFNESS)
    np.testing.assert_allclose(np.sqrt(np.diag(covariance)), expected, rtol=1e-4)
    # The rotation of the second test, had it been recorded, would have determined more.
    complete = problem.with_measurements([spineid.Measurement(TS, simulated(d), CHANNELS)
                                          for d in (TRUTH, other)])
    assert np.all(np.diag(spineid.analyse(complete, TRUE_STIFFNESS)[0]) < np.diag(covariance))


def test_the_verdict_counts_only_measured_values():
    # assess_fit on blocks with NaN: the statistics of the blocks with those entries removed.
    rng = np.random.default_rng(5)
    blocks = [rng.normal(size=(40, 2)), rng.normal(size=(30, 2))]
    blocks[0][3:9, 1] = np.nan
    blocks[1][:, 0] = np.nan
    measured = np.concatenate([b[~np.isnan(b)] for b in blocks])
    goodness = spineid.assess_fit(blocks, ("a", "b"), 2, noise_given=True,
                                           sigma={"a": 1.0, "b": 1.0})
    assert goodness.n_data == measured.size == 40 + 34 + 30
    assert goodness.dof == measured.size - 2
    assert goodness.chi_square == pytest.approx(float(np.sum(measured**2)), rel=1e-12)
    assert goodness.explains_data is True
    # An infinite entry is still a failed simulation.
    blocks[1][4, 1] = np.inf
    failed = spineid.assess_fit(blocks, ("a", "b"), 2, noise_given=True,
                                         sigma={"a": 1.0, "b": 1.0})
    assert failed.explains_data is False and "could not be simulated" in failed.reasons[0]


def test_noise_estimated_per_channel_from_measured_values():
    from spineid.identify._common._noise import noise_from_residuals

    raw = np.random.default_rng(2).normal(size=(60, 2)) * [1.0, 3.0]
    raw[:20, 1] = np.nan
    sigma = noise_from_residuals(raw, 3, np.ones(2))
    n = 60 + 40
    expected = [np.sqrt(np.mean(raw[:, 0] ** 2) / (1 - 3 / n)),
                np.sqrt(np.mean(raw[20:, 1] ** 2) / (1 - 3 / n))]
    np.testing.assert_allclose(sigma, expected, rtol=1e-12)


def _problem(values, noise=NOISE, free=("stiffness",)):
    return spineid.FitProblem(perturbed(TRUTH), spineid.Measurement(TS, values, CHANNELS),
                              list(free), noise)


def test_bad_missing_values_are_refused():
    data = simulated(TRUTH)
    infinite = data.copy()
    infinite[10, 1] = np.inf
    with pytest.raises(ValueError, match=r"y is infinite at sample 11 \(t = 0.02 s\)"):
        _problem(infinite)
    # A magnitude no spine test reaches (data of 1e300 ran a multi-start before overflowing).
    huge = data.copy()
    huge[3, 0] = 1e300
    with pytest.raises(ValueError, match=r"x = 1e\+300 at sample 4 \(t = 0.006 s\): expected "
                                         r"magnitudes of at most 1e\+06 in SI units"):
        _problem(huge)
    # A channel no load case measures leaves nothing to estimate its noise from.
    blind = data.copy()
    blind[:, 2] = np.nan
    with pytest.raises(ValueError, match=r"no load case measures \['theta'\].*give the noise"):
        _problem(blind, noise=None)
    _problem(blind)  # (with the noise given it just adds nothing)
    # Too few values measured for the free parameters.
    sparse = np.full_like(data, np.nan)
    sparse[:1] = data[:1]
    with pytest.raises(ValueError, match="3 data values for 3 free parameters"):
        _problem(sparse)
    # Multiple shooting needs each segment's values to determine its start state.
    gappy = data.copy()
    gappy[40:65] = np.nan
    with pytest.raises(ValueError, match=r"segment would hold only 0 values measured"):
        spineid.fit(_problem(gappy), spineid.MultipleShooting())
    # A vmapped batch shares the problem's missing values.
    problem = _problem(gappy)
    batch = np.repeat(data[None], 2, axis=0)
    with pytest.raises(ValueError, match="values missing"):
        spineid.fit_many(problem, [batch])


def test_analyses_that_need_every_value_say_so():
    # Recovering a measure of springs from a record with a gap: refused by name.
    ts = np.linspace(0.0, 0.2, 101)
    model_file = spineid.load_model_file(spineid.dataset_path("liu_16_springs.toml"))
    clean = np.array(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(ts)).q))
    clean[50, 0] = np.nan
    with pytest.raises(ValueError, match=r"x is missing \(NaN\) at sample 51"):
        spineid.RecoveryProblem(model_file, spineid.Measurement(
            ts, clean, tuple(model_file.model.observable_names)))


def test_spineid_fit_takes_a_trajectory_file_with_gaps(tmp_path, capsys):
    # A tester's CSV with empty cells (a sensor dropping out) and NaN cells: the fit uses the
    # values that are there; an infinite cell is refused by line and column.
    import json

    from spineid.cli import main

    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    lines = data.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("t,"))
    blanked = 0
    for row in range(header + 40, header + 60):  # x lost for 20 samples, theta for 10
        cells = lines[row].split(",")
        cells[1] = ""
        if row < header + 50:
            cells[3] = "NaN"
            blanked += 1
        blanked += 1
        lines[row] = ",".join(cells)
    data.write_text("\n".join(lines) + "\n")
    start = tmp_path / "start.toml"
    start.write_text(model.read_text().replace("stiffness = 27000.0", "stiffness = 32000.0"))
    out = tmp_path / "fit"
    assert main(["fit", str(start), str(data), "--free", "stiffness", "--noise",
                 "x=5e-6,y=5e-6,theta=1.7e-4", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["converged"] and report["n_data"] == 3 * 501 - blanked
    assert report["parameters"][0]["value"] == pytest.approx(27000.0, rel=1e-5)
    for name in ("fit.png", "residuals.png", "identifiability.png"):
        assert (out / name).stat().st_size > 0
    cells = lines[header + 70].split(",")
    cells[2] = "inf"
    lines[header + 70] = ",".join(cells)
    data.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["fit", str(start), str(data), "--free", "stiffness", "--noise",
                 "x=5e-6,y=5e-6,theta=1.7e-4", "--out", str(tmp_path / "other")]) == 2
    error = capsys.readouterr().err
    assert f"line {header + 71}, column y: expected a finite number" in error


def test_an_opensim_storage_file_with_nan_reads_as_values_not_measured(tmp_path):
    opensim = pytest.importorskip("opensim")
    data = simulated(TRUTH)
    table = opensim.TimeSeriesTable()
    table.setColumnLabels(["pelvis_tx", "pelvis_ty", "pelvis_tilt"])
    for i, (t, row) in enumerate(zip(TS, data)):
        row = [float(v) for v in row]
        if 20 <= i < 30:
            row[2] = float("nan")  # (OpenSim writes it as "nan")
        table.appendRow(float(t), opensim.RowVector(row))
    table.addTableMetaDataString("inDegrees", "no")
    path = tmp_path / "coordinates.sto"
    opensim.STOFileAdapter.write(table, str(path))
    measurement = spineid.Measurement.from_file(
        path, CHANNELS, ("m", "m", "rad"),
        columns={"x": "pelvis_tx", "y": "pelvis_ty", "theta": "pelvis_tilt"})
    assert np.isnan(measurement.values[20:30, 2]).all()
    assert np.isfinite(np.delete(measurement.values, np.s_[20:30], axis=0)).all()
    np.testing.assert_allclose(measurement.values[:20], data[:20], rtol=1e-12)
    result = spineid.fit(spineid.FitProblem(perturbed(TRUTH), measurement, ["stiffness"], NOISE))
    assert result.converged and result.n_data == data.size - 10
    np.testing.assert_allclose(result.values, TRUE_STIFFNESS, rtol=1e-5)


def test_a_states_files_value_columns_may_have_gaps_and_complete_ones_may_not(tmp_path):
    # OpenSim's states layout (`/jointset/J/C/value`, found by the coordinate's name): values
    # not measured in a coordinate's column read as NaN (before, the gaps were allowed by the
    # coordinate's name, not its column's, and refused); a gap in a quantity that must be
    # complete is refused naming its column, time and row.
    times = np.linspace(0.0, 0.1, 11)
    values = np.c_[np.sin(times), np.cos(times)]
    values[3:5, 0] = np.nan
    lines = ["states", "version=1", f"nRows={times.size}", "nColumns=3", "inDegrees=no",
             "endheader", "time\t/jointset/hip/flexion/value\t/jointset/hip/flexion/speed"]
    lines += ["\t".join(["%.6f" % t] + ["nan" if np.isnan(v) else "%.9f" % v for v in row])
              for t, row in zip(times, values)]
    path = tmp_path / "states.sto"
    path.write_text("\n".join(lines) + "\n")
    read = spineid.Measurement.from_file(path, ("flexion",), ("rad",))
    assert np.isnan(read.values[3:5, 0]).all()
    assert np.isfinite(np.delete(read.values, [3, 4])).all()
    np.testing.assert_allclose(np.delete(read.values[:, 0], [3, 4]),
                               np.delete(values[:, 0], [3, 4]), atol=1e-9)
    # A column read as a complete quantity (here the speed under a second name, mapped with
    # `columns` to a quantity that is no channel of the measurement) may not have a gap.
    from spineid.io._columns import read_quantities

    lines[8] = lines[8].replace(lines[8].split("\t")[2], "nan")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"'/jointset/hip/flexion/speed' has no value at t = "
                                         r"0.01 s \(row 2 of the data\)"):
        read_quantities(path, {"flexion": "rad", "rate": "rad"}, missing=("flexion",),
                        columns={"rate": "/jointset/hip/flexion/speed"})
