"""The C5-C6 segment: facet contacts and ligaments in the mechanics core, the nine quasi-static
load cases vmapped, identification through the equilibrium solve, the command line."""

import json
import math
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from spineid.cli import main
from spineid import (
    equilibrium, FacetContacts, fit_segment, LOAD_CASES, load_cases, load_model_file,
    QuasiStaticTest, segment_study, SpatialLigaments,
)
from spineid.elements._parameters import select_parameters
from spineid.io import dumps_toml, read_quasi_static, read_toml
from spineid.io._measurements import DEFLECTION_COLUMNS
from spineid.identify._common._noise_model import stationary_errors
from spineid.studies._segment import MAIN_COMPONENT
from spineid.simulation._equilibrium import equilibrium_residual

pytestmark = pytest.mark.xdist_group("segment")
SOLVE = eqx.filter_jit(equilibrium)


# Session scope: xdist interleaves modules on a worker and pytest rebuilds a module-scoped
# fixture at every switch, compiling its solves again.
@pytest.fixture(scope="session")
def segment():
    model_file = load_model_file(spineid.dataset_path("c5_c6.toml"))
    return model_file, segment_study(model_file.model)


def test_nine_cases_are_equilibria_and_mirror_symmetric(segment):
    model_file, study = segment
    pair = model_file.model
    assert study.converged.all()
    # The loads balance the elements at every pose; a case solved alone equals the batch.
    residuals = jax.vmap(equilibrium_residual, (None, 0, 0))(pair, study.poses, study.loads)
    assert np.max(np.abs(residuals)) < 1e-8
    extension = LOAD_CASES.index("EXT")
    single = SOLVE(pair, jnp.asarray(study.loads[extension]))
    assert np.allclose(single.pose, study.poses[extension], atol=1e-12)
    # Sagittal cases stay in the sagittal plane; each case moves mainly along its load.
    sagittal = [LOAD_CASES.index(c) for c in ("AS", "PS", "TNS", "CMP", "FLX", "EXT")]
    assert np.max(np.abs(study.displacements[sagittal][:, [2, 3, 4]])) < 1e-12
    main = study.main_displacements()
    assert np.all(main > 0)
    # Facets engage in extension, anterior shear and compression (both sides), on one side in
    # lateral bending and axial rotation, and open in flexion, posterior shear and tension.
    contact = study.facet_forces > 0
    for case in ("EXT", "AS", "CMP"):
        assert contact[LOAD_CASES.index(case)].all()
    for case in ("FLX", "PS", "TNS"):
        assert not contact[LOAD_CASES.index(case)].any()
    for case in ("LB", "AR"):
        assert contact[LOAD_CASES.index(case)].sum() == 1
    assert any("FLX: the facets are apart" in w for w in study.warnings())


def test_mirrored_loads_give_mirrored_motion(segment):
    # The model is symmetric about the sagittal plane: a left bending moment mirrors the right.
    model_file, study = segment
    right = study.displacements[LOAD_CASES.index("LB")]
    left = SOLVE(model_file.model, jnp.array([0.0, 0, 0, -1.8, 0, 0]))
    mirrored = np.asarray(left.pose - model_file.model.upper.reference_pose)
    assert np.allclose(mirrored * [1, 1, -1, -1, -1, 1], right, atol=1e-9)


def test_elements_forces_match_their_explicit_loads(segment):
    # Autodiff generalized forces of the contact and the ligaments against hand-written loads:
    # contact force k d along n2 at the virtual contact point moving with the upper body would
    # miss the blending term, so compare the energy derivative with finite differences instead,
    # and the ligaments with k (L - L0) along their line (virtual work).
    model_file, _ = segment
    pair = model_file.model
    lower = pair.lower.reference_pose
    q = pair.upper.reference_pose + jnp.array([-4e-4, -1e-4, 2e-4, 0.01, 0.02, 0.03])
    ligaments = next(e for e in pair.elements if isinstance(e, SpatialLigaments))
    facets = next(e for e in pair.elements if isinstance(e, FacetContacts))
    assert np.any(np.asarray(facets.penetrations(lower, q)) > 0)
    for element in (ligaments, facets):
        gradient = jax.grad(lambda x: element.energy(lower, x))(q)
        step = 1e-7
        numeric = np.array([(element.energy(lower, q + step * e) - element.energy(lower, q - step
                                                                                   * e)) / (2 * step)
                            for e in np.eye(6)])
        assert np.allclose(gradient, numeric, rtol=1e-5, atol=1e-9)
    # Ligaments: generalized force = sum of tension * d L / d q (tension only).
    tension = ligaments.tensions(lower, q)
    lengths_jacobian = jax.jacfwd(lambda x: ligaments.lengths(lower, x))(q)
    assert np.allclose(jax.grad(lambda x: ligaments.energy(lower, x))(q),
                       tension @ lengths_jacobian, rtol=1e-10, atol=1e-12)


def test_contact_damping_never_pulls():
    # The one-way Kelvin-Voigt dissipation: force k d + c d' while positive, zero beyond.
    from spineid import unilateral_dissipation

    def force(depth, rate):
        return jax.grad(unilateral_dissipation, argnums=1)(depth, rate, 1000.0, 10.0) + 1000.0 * \
            max(depth, 0.0)

    assert float(force(0.01, 0.5)) == pytest.approx(10.0 + 5.0)
    assert float(force(0.01, -0.5)) == pytest.approx(5.0)
    assert float(force(0.01, -5.0)) == pytest.approx(0.0)
    assert float(force(-0.01, -5.0)) == pytest.approx(0.0)


def test_fit_recovers_facet_and_disc_stiffness(segment):
    # Recover-the-truth through the equilibrium solve: nine cases with 5 um / 0.01 deg noise,
    # started 20-30 % off; every estimate within 3 standard errors of the truth.
    import dataclasses

    model_file, study = segment
    rng = np.random.default_rng(3)
    sigma = np.array([5e-6] * 3 + [np.radians(0.01)] * 3)
    test = QuasiStaticTest(study.loads, study.displacements + sigma * rng.normal(size=(9, 6)))
    free = ["facets.stiffness", "bushing.stiffness"]
    parameters = select_parameters(model_file.parameters, free)
    truth = np.array([float(p.get(model_file.model)) for p in parameters])
    start = spineid.apply_values(model_file.model, parameters,
                                 truth * np.array([1.3, 0.8, 1.2, 0.75, 1.25, 0.8, 1.2]))
    result = fit_segment(dataclasses.replace(model_file, model=start), test, free,
                         dict(zip(("dx", "dy", "dz", "b1", "b2", "b3"), sigma)))
    assert result.converged and result.identifiability.rank == 7
    assert np.all(np.abs(result.values - truth) < 3 * result.stderr)
    assert np.all(result.stderr / truth < 0.06)
    assert result.report()["parameters"][0]["name"] == "facets.stiffness"
    # With the noise estimated, the estimate is made at the optimum, whatever the start: two
    # starts give the same noise and cost to 1e-3 (before, the first pass stopped on a
    # statistical test measured against its provisional noise, and the estimate depended on
    # the start).
    # The statistical stop, measured against the residuals' own level, leaves the cost within
    # about 1e-4 of it: far inside the noise estimate's own uncertainty (about 10% with 47
    # degrees of freedom).
    estimated = [
        fit_segment(dataclasses.replace(model_file, model=spineid.apply_values(
            model_file.model, parameters, truth * factors)), test, free)
        for factors in (np.array([1.3, 0.8, 1.2, 0.75, 1.25, 0.8, 1.2]),
                        np.array([0.6, 1.7, 0.9, 1.4, 0.7, 1.5, 0.8]))]
    assert all(fit.converged and fit.noise_estimated for fit in estimated)
    assert estimated[0].cost == pytest.approx(estimated[1].cost, rel=1e-3)
    np.testing.assert_allclose(list(estimated[0].noise.values()),
                               list(estimated[1].noise.values()), rtol=1e-3)


def test_segment_fit_by_a_multistart_reaches_the_optimum_of_the_near_start(segment):
    # Far from the truth (2-3x), a multi-start of Levenberg-Marquardt (the given start and two
    # drawn ones) ends at the optimum the near start reaches: the same cost and values within a
    # tenth of a standard error.
    import dataclasses

    model_file, study = segment
    rng = np.random.default_rng(4)
    sigma = np.array([5e-6] * 3 + [np.radians(0.01)] * 3)
    test = QuasiStaticTest(study.loads, study.displacements + sigma * rng.normal(size=(9, 6)))
    noise = dict(zip(("dx", "dy", "dz", "b1", "b2", "b3"), sigma))
    free = ["facets.stiffness", "bushing.stiffness"]
    parameters = select_parameters(model_file.parameters, free)
    truth = np.array([float(p.get(model_file.model)) for p in parameters])

    def started(factors):
        return dataclasses.replace(model_file, model=spineid.apply_values(
            model_file.model, parameters, truth * factors))

    near = fit_segment(started(np.full(7, 1.1)), test, free, noise)
    far = fit_segment(started(np.array([3.0, 0.4, 2.5, 0.35, 3.0, 0.4, 2.0])), test, free,
                      noise, solver=spineid.MultiStart(n=3, seed=1))
    assert far.cost == pytest.approx(near.cost, rel=1e-6)
    assert np.all(np.abs(far.values - near.values) < 0.1 * near.stderr)
    assert any(w.startswith("solved by multistart(lm) (") for w in far.warnings)


def _ramped_record(model_file, levels, rng, phi):
    # A tester's continuous record: the unloaded pose, then the nine cases one after another,
    # each ramped over `levels`; the displacements' noise (5 um, 0.01 deg) AR(1) along the rows,
    # or (`phi` "filtered") white noise through a 4th-order Butterworth low-pass at a quarter of
    # the rows' Nyquist rate, zero phase (scipy), each channel scaled to its sd.
    loads = np.concatenate([np.zeros((1, 6))]
                           + [np.outer(levels, case) for case in load_cases()])
    solved, displacements, *_ = spineid.solve_load_cases(model_file.model, loads)
    assert np.all(np.asarray(solved))
    sd = np.array([5e-6] * 3 + [np.radians(0.01)] * 3)
    if phi == "filtered":
        from scipy import signal

        smooth = signal.filtfilt(*signal.butter(4, 0.25), rng.normal(size=(len(loads) + 200, 6)),
                                 axis=0)[100:-100]
        noise = sd * smooth / smooth.std(axis=0)
    else:
        noise = np.stack([stationary_errors([phi], s, len(loads), rng) for s in sd], axis=1)
    return loads, np.asarray(displacements), QuasiStaticTest(loads, displacements + noise)


def test_segment_fit_of_a_record_under_correlated_noise(segment, monkeypatch):
    # A record of 55 rows with AR(1) noise (phi 0.8): the default noise model finds an
    # autoregression in every channel and accepts the fit, with Newey-West errors beside; fitted
    # as AR(1), its errors equal the Cramer-Rao bound of the dense AR(1) covariance at the noise
    # it estimated (statsmodels' autocovariances), through central differences of the
    # equilibria: no part of the fit's whitening or implicit-function Jacobian. (The first row
    # is the unloaded pose, whose displacement no stiffness changes, so the bound of the exact
    # likelihood is that of the conditional one the fit maximises.)
    import dataclasses

    from statsmodels.tsa.arima_process import arma_acovf

    from spineid._programs import program_key
    from spineid.identify._common import _least_squares

    keys = []  # (the compiled linearisation each fit's loop calls)

    def spy(function, *args, **kwargs):
        keys.append(program_key(function, args, kwargs)[0])
        return stored_call(function, *args, **kwargs)

    stored_call = _least_squares.stored_call
    monkeypatch.setattr(_least_squares, "stored_call", spy)
    model_file, _ = segment
    rng = np.random.default_rng(11)
    loads, _, test = _ramped_record(model_file, np.linspace(1 / 6, 1.0, 6), rng, 0.8)
    free = ["facets.stiffness", "bushing.stiffness"]
    parameters = select_parameters(model_file.parameters, free)
    truth = np.array([float(p.get(model_file.model)) for p in parameters])
    started = dataclasses.replace(model_file, model=spineid.apply_values(
        model_file.model, parameters, 1.2 * truth))
    auto = fit_segment(started, test, free)
    assert auto.accepted and auto.goodness_of_fit.level in ("explains", "describes")
    orders = {c: m["order"] for c, m in auto.goodness_of_fit.noise_model.items()}
    assert all(order >= 1 for order in orders.values()), orders
    assert np.all(np.isfinite(auto.stderr_robust)) and np.all(auto.stderr_robust > 0)
    assert np.all(np.abs(auto.values - truth) < 3 * auto.stderr)
    assert "robust" in auto.summary()
    assert sum("taken as a record in their order" in w for w in auto.warnings) == 1
    # A row whose load the model cannot carry (a tension of 1e9 N) finds no equilibrium at any
    # stiffness tried: refused, naming it (before: its constant failed residual swamped the
    # noise estimate, sigma ~1e51, and the fit stopped after 0 steps at its start).
    loads_broken = np.array(test.loads)
    loads_broken[-1] = [0.0, 0.0, 1e9, 0.0, 0.0, 0.0]
    broken = QuasiStaticTest(loads_broken, test.deflections)
    with pytest.raises(ValueError, match=r"1 row\(s\) found no equilibrium.*row 55: loads"
                                         r" Fx 0 N, Fy 0 N, Fz 1e\+09 N, Mx 0 N m"):
        fit_segment(started, broken, free)
    # The same with the noise given (no estimate to swamp) and under the multistart solver.
    sd = [5e-6] * 3 + [np.radians(0.01)] * 3
    with pytest.raises(ValueError, match=r"1 row\(s\) found no equilibrium.*row 55"):
        fit_segment(started, broken, free, noise=dict(zip(DEFLECTION_COLUMNS, sd)),
                    noise_model="white")
    with pytest.raises(ValueError, match=r"1 row\(s\) found no equilibrium.*row 55"):
        fit_segment(started, broken, free, solver=spineid.MultiStart(n=2))
    # Fitted as white, the rows are load cases in no order: no whiteness test, no robust errors.
    white = fit_segment(started, test, free, noise_model="white")
    assert white.goodness_of_fit.whiteness is None and white.stderr_robust is None
    assert any("load cases in no order (noise_model white)" in w for w in white.warnings)

    fit = fit_segment(started, test, free, noise_model="ar:1")
    # The fits of one record under `auto`, white and AR(1), and with a row it cannot carry,
    # are one compiled program (the whitening padded alike: before, three, 8-9 s each).
    assert len(keys) > 10 and None not in keys and len(set(keys)) == 1
    steps = 1e-4 * fit.values
    derivatives = []
    for k, step in enumerate(steps):
        moved = [spineid.solve_load_cases(spineid.apply_values(
            model_file.model, parameters, fit.values + sign * step * np.eye(7)[k]), loads)[1]
            for sign in (1.0, -1.0)]
        derivatives.append((np.asarray(moved[0]) - np.asarray(moved[1])) / (2 * step))
    jacobian = np.stack(derivatives, axis=-1)  # (rows, 6, p)
    information = np.zeros((7, 7))
    for c, noise in enumerate(fit.goodness_of_fit.noise_model.values()):
        (phi,) = noise["coefficients"]
        gamma = arma_acovf([1.0, -phi], [1.0], nobs=len(loads),
                           sigma2=noise["innovation_sd"] ** 2)
        covariance = gamma[np.abs(np.subtract.outer(np.arange(len(loads)),
                                                    np.arange(len(loads))))]
        information += jacobian[:, c].T @ np.linalg.solve(covariance, jacobian[:, c])
    np.testing.assert_allclose(fit.stderr, np.sqrt(np.diag(np.linalg.inv(information))),
                               rtol=1e-4)
    # Too high an order for the rows, or a noise model beside given noise: refused.
    with pytest.raises(ValueError, match="noise_model ar:6: the shortest record has 55"):
        fit_segment(started, test, free, noise_model="ar:6")
    with pytest.raises(ValueError, match="noise_model ar:1: the noise given is white"):
        fit_segment(started, test, free, noise=dict.fromkeys(("dx", "dy", "dz"), 5e-6)
                    | dict.fromkeys(("b1", "b2", "b3"), 1e-4), noise_model="ar:1")


def test_segment_errors_under_filtered_noise_match_the_spread_of_the_estimates(segment):
    # Noise low-pass filtered along the rows is far more predictable one row ahead than an
    # autoregression of bounded order says; the noise model's own errors were about 3 times
    # the spread of the estimates over records (calibration 0.35 over 100 records of 90 rows:
    # docs/goodness-of-fit.md). The fit's errors now come from the sandwich of its whitened
    # scores, and say so: over 16 records of 55 rows (seeded) the spread of each estimate over
    # its mean reported error has a median near 0.9 (0.3 with the noise model's own errors).
    import dataclasses

    model_file, _ = segment
    rng = np.random.default_rng(5)
    free = ["facets.stiffness", "bushing.stiffness"]
    parameters = select_parameters(model_file.parameters, free)
    truth = np.array([float(p.get(model_file.model)) for p in parameters])
    started = dataclasses.replace(model_file, model=spineid.apply_values(
        model_file.model, parameters, 1.2 * truth))
    values, errors = [], []
    for _ in range(16):
        _, _, test = _ramped_record(model_file, np.linspace(1 / 6, 1.0, 6), rng, "filtered")
        fit = fit_segment(started, test, free)
        assert fit.accepted and any("whitened scores" in w for w in fit.warnings)
        values.append(fit.values)
        errors.append(fit.stderr)
    calibration = np.std(values, axis=0) / np.mean(errors, axis=0)
    assert 0.6 < np.median(calibration) < 1.6, calibration


def test_segment_fit_refuses_solvers_it_cannot_run(segment):
    model_file, study = segment
    test = QuasiStaticTest(study.loads, study.displacements)
    with pytest.raises(ValueError, match=r"fit_segment\(solver=Adam.*LevenbergMarquardt"):
        fit_segment(model_file, test, ["facets.stiffness"], solver=spineid.Adam())


def test_segment_command_runs_the_nine_cases_and_fits(tmp_path, capsys):
    out = tmp_path / "seg"
    assert main(["segment", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rotational stiffness" in printed and "ms warm" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert [row["case"] for row in summary["cases"]] == list(LOAD_CASES)
    assert set(summary["rotational_stiffness_N_m_per_deg"]) == {"FLX", "EXT", "LB", "AR"}
    assert (out / "segment.png").stat().st_size > 0
    # Fit the facet stiffness back from the written cases, starting from another value.
    document = read_toml(spineid.dataset_path("c5_c6.toml"))
    for table in document["facets"]:
        table["stiffness"] = 1.5e5
    start = tmp_path / "start.toml"
    start.write_text(dumps_toml(document))
    fitted = tmp_path / "fit"
    noise = "dx=1e-6,dy=1e-6,dz=1e-6,b1=1e-5,b2=1e-5,b3=1e-5"
    assert main(["segment", str(start), "--out", str(fitted), "--fit", str(out / "cases.csv"),
                 "--free", "facets.stiffness", "--noise", noise, "--starts", "2"]) == 0
    report = json.loads((fitted / "report.json").read_text())
    assert report["parameters"][0]["value"] == pytest.approx(2.0e5, rel=1e-6)
    assert any("solved by multistart" in w for w in report["warnings"])
    again = read_toml(fitted / "fitted.toml")
    assert [t["stiffness"] for t in again["facets"]] == pytest.approx([2.0e5, 2.0e5], rel=1e-6)
    assert "CAUTION" not in (fitted / "fitted.toml").read_text()
    # The nine cases written beside it are the fitted model's (the file's, 2.0e5), not the
    # start's (1.5e5).
    cases_fitted = json.loads((fitted / "summary.json").read_text())["cases"]
    for ours, truth in zip(cases_fitted, summary["cases"]):
        assert ours["rotation_deg"] == pytest.approx(truth["rotation_deg"], rel=1e-5, abs=1e-9)
    # The same test as a lab writes it (N, N mm, mm, deg under its own names) with the noise
    # bare in the columns' units: the same fit, printed in N/mm, mm and deg.
    cases = read_quasi_static(out / "cases.csv")
    lab = {"Shear_X_N": cases.loads[:, 0], "Shear_Y_N": cases.loads[:, 1],
           "Axial_N": cases.loads[:, 2], **{f"M{a}_Nmm": 1e3 * cases.loads[:, 3 + k]
                                            for k, a in enumerate("xyz")},
           **{f"d{a}_mm": 1e3 * cases.deflections[:, k] for k, a in enumerate("xyz")},
           **{f"b{k + 1}_deg": np.degrees(cases.deflections[:, 3 + k]) for k in range(3)}}
    (tmp_path / "lab.csv").write_text(",".join(lab) + "\n" + "\n".join(
        ",".join(repr(float(v)) for v in row) for row in zip(*lab.values())) + "\n")
    columns = "Fx=Shear_X_N,Fy=Shear_Y_N,Fz=Axial_N,Mx=Mx_Nmm,My=My_Nmm,Mz=Mz_Nmm"
    lab_noise = f"dx=0.001,dy=0.001,dz=0.001,b1={math.degrees(1e-5)!r},b2=1e-5rad,b3=1e-5rad"
    capsys.readouterr()
    assert main(["segment", str(start), "--out", str(tmp_path / "lab"), "--fit",
                 str(tmp_path / "lab.csv"), "--columns", columns, "--free", "facets.stiffness",
                 "--noise", lab_noise, "--starts", "2"]) == 0
    printed = capsys.readouterr().out
    in_lab = json.loads((tmp_path / "lab" / "report.json").read_text())
    assert in_lab["parameters"][0]["value"] == pytest.approx(
        report["parameters"][0]["value"], rel=1e-8)
    assert in_lab["parameters"][0]["stderr"] == pytest.approx(
        report["parameters"][0]["stderr"], rel=1e-6)
    assert "noise given: dx 0.001 mm, the column's unit" in printed
    assert "(in the test's units: translations mm, rotations deg; report.json in SI)" in printed
    assert "noise sigma (given): dx=0.001 mm" in printed
    row = next(line for line in printed.splitlines() if line.startswith("facets.stiffness"))
    assert row.split()[-1] == "N/mm"
    assert float(row.split()[2]) == pytest.approx(in_lab["parameters"][0]["value"] / 1e3,
                                                  rel=1e-5)
    assert in_lab["data"][0]["read_as"]["dx"]["unit"] == "mm"
    assert in_lab["parameters"][0]["in_data_units"]["unit"] == "N/mm"
    assert in_lab["parameters"][0]["in_data_units"]["value"] == pytest.approx(
        in_lab["parameters"][0]["value"] / 1e3, rel=1e-12)
    assert "in_data_units" not in report["parameters"][0]  # (a test in SI)
    # A row the model cannot carry in the lab's file (a moment of 1e9 N mm, 1e6 N m): refused,
    # its loads in the file's units (N, N mm), nothing written.
    header, *rows = (tmp_path / "lab.csv").read_text().splitlines()
    last = rows[-1].split(",")
    last[list(lab).index("Mx_Nmm")] = "1e9"
    (tmp_path / "broken.csv").write_text("\n".join([header, *rows[:-1], ",".join(last)]) + "\n")
    capsys.readouterr()
    assert main(["segment", str(start), "--out", str(tmp_path / "broken"), "--fit",
                 str(tmp_path / "broken.csv"), "--columns", columns, "--free",
                 "facets.stiffness", "--noise", lab_noise]) == 2
    printed = capsys.readouterr()
    assert re.search(r"row 9: loads Fx \S+ N, Fy \S+ N, Fz \S+ N, Mx 1e\+09 Nmm, My \S+ Nmm",
                     printed.err), printed.err
    assert not (tmp_path / "broken").exists() or not any((tmp_path / "broken").iterdir())
    assert main(["segment", "--out", str(tmp_path / "si_alone"), "--si"]) == 2
    assert "--si: only with --fit" in capsys.readouterr().err
    for option in (["--free", "facets.stiffness"], ["--noise-model", "ar:1"],
                   ["--max-misfit", "3%"]):  # (the fit's own options, no fit: refused)
        assert main(["segment", "--out", str(tmp_path / "alone"), *option]) == 2
        assert f"{option[0]}: only with --fit" in capsys.readouterr().err
    assert not (tmp_path / "alone").exists()
    # A noise model the nine rows cannot support (ten rows per order): refused, nothing written.
    capsys.readouterr()
    assert main(["segment", str(start), "--out", str(tmp_path / "ar"), "--fit",
                 str(out / "cases.csv"), "--free", "facets.stiffness", "--noise-model",
                 "ar:1"]) == 2
    printed = capsys.readouterr()
    # (named as the command line gave it, not as the Python argument)
    assert "error: --noise-model ar:1: the shortest record has 9 samples" in printed.err
    assert "nine equilibria" not in printed.out and not (tmp_path / "ar").exists()
    # A group the model does not have: refused as early, naming it.
    assert main(["segment", str(start), "--out", str(tmp_path / "group"), "--fit",
                 str(out / "cases.csv"), "--free", "facet.stiffness"]) == 2
    printed = capsys.readouterr()
    assert "facet.stiffness" in printed.err and "nine equilibria" not in printed.out
    assert not (tmp_path / "group").exists()
    # A misfit tolerance in a unit of its own: refused before the nine cases are solved.
    assert main(["segment", str(start), "--out", str(tmp_path / "unit"), "--fit",
                 str(out / "cases.csv"), "--free", "facets.stiffness", "--max-misfit",
                 "0.5N"]) == 2
    printed = capsys.readouterr()
    assert "--max-misfit 0.5N: give a percentage" in printed.err
    assert "nine equilibria" not in printed.out and not (tmp_path / "unit").exists()
    assert main(["segment", "--out", str(tmp_path / "seed"), "--seed", "3"]) == 2
    assert "--seed: only with --starts" in capsys.readouterr().err
    # Loads far beyond the segment's: cases without equilibrium are flagged (exit 1) and left
    # out of cases.csv (before, their poses, kilometres away, were written as data).
    capsys.readouterr()
    huge = tmp_path / "huge"
    assert main(["segment", "--out", str(huge), "--force", "1e9"]) == 1
    summary = json.loads((huge / "summary.json").read_text())
    solved = [row["converged"] for row in summary["cases"]]
    assert not all(solved)
    assert "without equilibrium" in capsys.readouterr().out
    if any(solved):
        assert len(read_quasi_static(huge / "cases.csv").loads) == sum(solved)
    else:
        assert not (huge / "cases.csv").exists()
    assert json.loads((huge / "spineid-outputs.json").read_text())["complete"]
    # A moment that finds no equilibrium in bending leaves that stiffness unknown: said so
    # (before: a TypeError formatting None, after the work, with nothing written).
    assert main(["segment", "--out", str(tmp_path / "twist"), "--moment", "1000"]) == 1
    assert "none (no equilibrium)" in capsys.readouterr().out


@pytest.mark.parametrize("change, message", [
    (lambda d: d["facets"][0]["upper"].update(radius=0.0), "facets[0].upper.radius"),
    (lambda d: d["facets"][0]["upper"].update(normal=[-0.68, 0.73, 0.0]), "facing"),
    (lambda d: d["facets"][0]["upper"].update(centre=[-0.0185, 0.0090, -0.022]), "preload"),
    (lambda d: d["ligaments"][0].update(upper_point=d["ligaments"][0]["lower_point"]),
     "zero length"),
    (lambda d: d["facets"][1].update(stiffness=-1.0), "facets[1].stiffness"),
])
def test_bad_segment_files_name_the_entry(tmp_path, change, message):
    document = read_toml(spineid.dataset_path("c5_c6.toml"))
    change(document)
    path = tmp_path / "bad.toml"
    path.write_text(dumps_toml(document))
    with pytest.raises(ValueError, match=re.escape(message)):
        load_model_file(path)


def test_load_cases_reject_bad_magnitudes_and_report_missing_equilibria():
    with pytest.raises(ValueError, match="positive"):
        load_cases(0.0, 1.8)
    # Without the disc, ligaments and facets cannot hold a tension: no equilibrium, reported
    # as not converged instead of a wrong answer.
    model_file = load_model_file(spineid.dataset_path("c5_c6.toml"))
    pair = model_file.model
    facets_only = type(pair)(pair.lower, pair.upper, (pair.elements[2],), pair.loads, pair.gravity,
                             pair.initial_pose)
    study = segment_study(facets_only)
    assert not study.converged[LOAD_CASES.index("TNS")]
    assert any("TNS: no equilibrium" in w for w in study.warnings())
    assert MAIN_COMPONENT["FLX"] == 5
