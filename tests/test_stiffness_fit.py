"""Stiffness matrices from quasi-static tests: recovery of eq 24 with calibrated errors, the
Euler-basis mapping of moments, structures, identifiability of a protocol, bad input."""

import jax
import numpy as np
import pytest

from spineid import dual_euler_basis, fit_stiffness_matrix, QuasiStaticTest, read_quasi_static
from spineid.identify._kinds._stiffness_fit import STRUCTURES
from helpers import K_F_E as EQ_24  # Christophy et al. 2013 eq 24

K_F_E = np.array(EQ_24)
LOAD_NOISE = np.array([2.0, 2.0, 2.0, 0.05, 0.05, 0.05])  # N, N m


def synthetic(stiffness, deflections, rng, noise=LOAD_NOISE):
    # The load that holds the pair at each deflection: force K y in lower axes, moment along
    # the dual Euler basis, then load-cell noise.
    f = deflections @ stiffness.T
    loads = f.copy()
    duals = np.asarray(jax.vmap(dual_euler_basis)(deflections[:, 3:]))
    loads[:, 3:] = np.einsum("nji,nj->ni", duals, f[:, 3:])
    errors = rng.normal(size=loads.shape) * noise if np.ndim(noise) == 1 else noise
    return QuasiStaticTest(loads + errors, deflections)


def protocol(rng, n=60, rotation=np.radians(8.0), translation=1e-3, axes=range(6)):
    deflections = np.zeros((n, 6))
    for axis in axes:
        deflections[:, axis] = rng.uniform(-1, 1, n) * (translation if axis < 3 else rotation)
    return deflections


def test_full_matrix_recovered_with_calibrated_errors():
    rng = np.random.default_rng(0)
    z_scores = []
    for _ in range(20):
        fit = fit_stiffness_matrix(synthetic(K_F_E, protocol(rng), rng), "full",
                                   noise=LOAD_NOISE)
        assert fit.exact and fit.identifiability.rank == 21
        z_scores += [(fit.matrix[i, j] - K_F_E[i, j]) / fit.stderr[i, j]
                     for i, j in STRUCTURES["full"]]
    z_scores = np.asarray(z_scores)
    # Cramer-Rao errors of a linear model are exact: z ~ N(0, 1).
    assert abs(np.mean(z_scores)) < 0.1 and 0.85 < np.std(z_scores) < 1.15
    np.testing.assert_allclose(fit.matrix, fit.matrix.T)


def test_moments_as_measured_are_biased_at_large_rotations():
    rng = np.random.default_rng(1)
    test = synthetic(K_F_E, protocol(rng, rotation=np.radians(15.0)), rng)
    linear = fit_stiffness_matrix(test, "full", noise=LOAD_NOISE, exact=False)
    exact = fit_stiffness_matrix(test, "full", noise=LOAD_NOISE, exact=True)
    assert linear.conversion_effect > 3.0
    assert any("Euler basis" in w for w in linear.warnings)
    err_linear = np.abs(linear.matrix - K_F_E)[3:, 3:].max()
    err_exact = np.abs(exact.matrix - K_F_E)[3:, 3:].max()
    assert err_exact < 0.2 * err_linear
    # Tiny rotations: both paths agree to well within the errors.
    small = synthetic(K_F_E, protocol(rng, rotation=np.radians(0.02)), rng)
    fit = fit_stiffness_matrix(small, "full", noise=LOAD_NOISE)
    assert fit.exact and fit.conversion_effect < 0.3


def test_structures_and_what_a_sagittal_protocol_determines():
    rng = np.random.default_rng(2)
    test = synthetic(K_F_E, protocol(rng), rng)
    sagittal = fit_stiffness_matrix(test, "sagittal", noise=LOAD_NOISE)
    assert len(sagittal.entries) == 12
    # eq 24 has the sagittal pattern: the structure holds the truth.
    assert np.all(np.abs(sagittal.matrix - K_F_E) <= 5 * np.nan_to_num(sagittal.stderr) + 1e-9)
    diagonal = fit_stiffness_matrix(test, "diagonal", noise=LOAD_NOISE)
    assert np.count_nonzero(diagonal.matrix - np.diag(np.diag(diagonal.matrix))) == 0
    # Flexion-extension tests only (tx, ty, rz move): every load component responds to those
    # motions, so the entries of a moving column are determined; the 6 entries coupling only
    # the still degrees of freedom (tz, rx, ry) are not.
    planar = synthetic(K_F_E, protocol(rng, axes=(0, 1, 5)), rng)
    with pytest.warns(UserWarning):  # the undetermined block comes out arbitrary
        fit = fit_stiffness_matrix(planar, "full", noise=LOAD_NOISE)
    assert fit.identifiability.rank == 15
    undetermined = {(i, j) for (i, j), ok in zip(fit.entries, fit.identifiability.identifiable)
                    if not ok}
    assert undetermined == {(i, j) for i, j in fit.entries if {i, j} <= {2, 3, 4}}
    assert any("does not determine" in w for w in fit.warnings)
    block = np.ix_((0, 1, 5), (0, 1, 5))
    assert np.all(np.abs(fit.matrix[block] - K_F_E[block]) <= 5 * fit.stderr[block])


def test_noise_estimated_from_residuals():
    rng = np.random.default_rng(3)
    fit = fit_stiffness_matrix(synthetic(K_F_E, protocol(rng, n=400), rng), "sagittal")
    assert fit.noise_estimated
    np.testing.assert_allclose(fit.noise, LOAD_NOISE, rtol=0.15)
    # The noise reported is the one the fitted matrix's own residuals show (by hand, with the
    # degrees-of-freedom correction), within the 2% at which the estimate counts as settled.
    entries = len(STRUCTURES["sagittal"])
    shown = np.sqrt(np.sum(fit.residuals**2, axis=0) / (fit.residuals.shape[0]
                                                        * (1 - entries / fit.residuals.size)))
    np.testing.assert_allclose(shown, fit.noise, rtol=0.02)


def test_csv_round_trip_and_bad_input(tmp_path):
    rng = np.random.default_rng(4)
    test = synthetic(K_F_E, protocol(rng, n=30), rng)
    path = tmp_path / "test.csv"
    header = "Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3"
    np.savetxt(path, np.hstack([test.loads, test.deflections]), delimiter=",", header=header,
               comments="", fmt="%.17g")
    again = read_quasi_static(path)
    np.testing.assert_array_equal(again.loads, test.loads)
    (tmp_path / "short.csv").write_text("Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2\n" + "0," * 10 + "0\n")
    with pytest.raises(ValueError, match="missing column"):
        read_quasi_static(tmp_path / "short.csv")
    (tmp_path / "nan.csv").write_text(header + "\n" + "1," * 11 + "nan\n")
    with pytest.raises(ValueError, match="finite"):
        read_quasi_static(tmp_path / "nan.csv")
    with pytest.raises(ValueError, match="singularity"):
        QuasiStaticTest(np.zeros((1, 6)), [[0, 0, 0, 0, np.pi / 2, 0]])
    with pytest.raises(ValueError, match="equations"):
        fit_stiffness_matrix(QuasiStaticTest(test.loads[:2], test.deflections[:2]), "full")
    with pytest.raises(ValueError, match="structure"):
        fit_stiffness_matrix(test, "banded")


def test_unstable_fit_warns():
    rng = np.random.default_rng(5)
    unstable = np.diag([1e5, 1e5, 1e5, 10.0, 10.0, 10.0])
    unstable[0, 5] = unstable[5, 0] = 2e3  # eigenvalue < 0 in the tx-rz plane
    with pytest.warns(UserWarning, match="not positive definite"):
        fit = fit_stiffness_matrix(synthetic(unstable, protocol(rng), rng), "full",
                                   noise=LOAD_NOISE)
    assert any("unstable" in w for w in fit.warnings)


def test_stiffness_command_writes_report_matrix_and_plot(tmp_path, capsys):
    import json
    import tomllib

    from spineid.cli import main
    from spineid import ModelFile
    from spineid.io import read_toml
    import spineid

    rng = np.random.default_rng(6)
    test = synthetic(K_F_E, protocol(rng, n=40), rng)
    path = tmp_path / "test.csv"
    np.savetxt(path, np.hstack([test.loads, test.deflections]), delimiter=",",
               header="Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3", comments="", fmt="%.17g")
    out = tmp_path / "out"
    assert main(["stiffness", str(path), "--out", str(out), "--structure", "sagittal",
                 "--noise", "Fx=2,Fy=2,Fz=2,Mx=0.05,My=0.05,Mz=0.05"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert len(report["parameters"]) == 12 and report["identifiability"]["rank"] == 12
    fitted = {p["name"]: p for p in report["parameters"]}
    assert abs(fitted["K[ry,ry]"]["value"] - 850) < 5 * fitted["K[ry,ry]"]["stderr"]
    assert (out / "loads.png").stat().st_size > 10_000
    # The fragment drops into a spatial_pair model as a SpineBushing.
    fragment = tomllib.loads((out / "stiffness.toml").read_text())["bushings"][0]
    document = read_toml(spineid.dataset_path("spatial_pair.toml"))
    document["bushings"][0].update(fragment)
    model = ModelFile.from_document(document).model
    np.testing.assert_allclose(np.asarray(model.elements[0].stiffness_matrix),
                               np.asarray(report["matrix"]))
    capsys.readouterr()
    assert main(["stiffness", str(path), "--out", str(tmp_path / "other"), "--noise",
                 "Fx=2"]) == 2
    assert "--noise: give all of" in capsys.readouterr().err


def test_entries_the_test_never_excites_are_said_undetermined_not_nan_or_a_silent_zero(
        tmp_path, capsys):
    import json

    from spineid.cli import main
    from spineid import write_quasi_static

    rng = np.random.default_rng(0)
    stiffness = np.diag([9e4, 2.2e5, 7.5e4, 55.0, 38.0, 70.0])
    deflections = rng.uniform(-1, 1, (24, 6)) * np.array([3e-4] * 3 + [0.03] * 3)
    deflections[:, [2, 5]] = 0.0  # neither tz nor rz moves, nor is loaded
    loads = deflections @ stiffness + rng.normal(0, 1, (24, 6)) * np.array([1.0] * 3 + [1e-3] * 3)
    write_quasi_static(tmp_path / "test.csv", QuasiStaticTest(loads, deflections))
    assert main(["stiffness", str(tmp_path / "test.csv"), "--out", str(tmp_path / "out"),
                 "--structure", "diagonal", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "nan" not in printed and printed.count("not determined by the test") == 2
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    undetermined = [p["name"] for p in report["parameters"] if not p["determined"]]
    assert undetermined == ["K[tz,tz]", "K[rz,rz]"]
    assert all(p["stderr"] is None for p in report["parameters"] if not p["determined"])
    assert ("# Not determined by the test: K[tz,tz], K[rz,rz] (their values are not measured"
            in (tmp_path / "out" / "stiffness.toml").read_text())


@pytest.mark.parametrize("case", ["all-moved", "tz-still", "ty-ry-still", "ty-near-tx"])
def test_the_fit_is_numpys_least_squares_on_the_whole_stacked_system(case):
    # Oracle: the 6n-row system written out (row k, load c: sum of the entries (c, j) times
    # y_j, each symmetric pair both ways; divided by the channel's noise) solved by numpy's
    # lstsq, minimum-norm where degrees of freedom never move or move only together (ty =
    # 0.3 tx to 1e-12 m: below numpy's cut-off of the whole system's singular values). The fit
    # solves a compressed system (each channel's QR factor): the same values, cost, rank and
    # Cramer-Rao errors.
    rng = np.random.default_rng(5)
    n = 400 if case == "ty-near-tx" else 40
    deflections = protocol(rng, n=n)
    still = {"tz-still": [2], "ty-ry-still": [1, 4]}.get(case, [])
    deflections[:, still] = 0.0
    if case == "ty-near-tx":
        deflections[:, 1] = 0.3 * deflections[:, 0] + 1e-12 * rng.normal(size=n)
    test = synthetic(K_F_E, deflections, rng)
    fit = fit_stiffness_matrix(test, "full", noise=LOAD_NOISE)
    entries = STRUCTURES["full"]
    stacked = np.zeros((n, 6, len(entries)))
    for k, (i, j) in enumerate(entries):
        stacked[:, i, k] += deflections[:, j]
        if i != j:
            stacked[:, j, k] += deflections[:, i]
    loads = np.asarray(test.loads).copy()
    duals = np.asarray(jax.vmap(dual_euler_basis)(deflections[:, 3:]))
    loads[:, 3:] = np.linalg.solve(np.transpose(duals, (0, 2, 1)), loads[:, 3:, None])[..., 0]
    a = (stacked / LOAD_NOISE[None, :, None]).reshape(6 * n, -1)
    b = (loads / LOAD_NOISE).ravel()
    values, _, rank, _ = np.linalg.lstsq(a, b, rcond=None)
    # (an entry K[s, j] of a still s is still seen through load s when j moves)
    assert fit.identifiability.rank == rank == 21 - len(still) - len(still) * (
        len(still) - 1) // 2 - (case == "ty-near-tx")
    np.testing.assert_allclose([fit.matrix[i, j] for i, j in entries], values, rtol=1e-7,
                               atol=1e-9 * np.abs(values).max())
    assert fit.cost == pytest.approx(0.5 * np.sum((a @ values - b) ** 2), rel=1e-9)
    covariance = np.linalg.pinv(a.T @ a)
    for k, (i, j) in enumerate(entries):
        if fit.identifiability.identifiable[k]:
            assert fit.stderr[i, j] == pytest.approx(np.sqrt(covariance[k, k]), rel=1e-6)


def test_a_test_without_any_deflection_is_refused_and_degrees_as_radians_are_said():
    loads = np.random.default_rng(0).normal(size=(8, 6))
    with pytest.raises(ValueError, match="every deflection is zero"):
        fit_stiffness_matrix(QuasiStaticTest(loads, np.zeros((8, 6))))

    # Angles in degrees read as radians (spineid's own column names) are said implausible;
    # the same test in radians is not.
    rng = np.random.default_rng(1)
    deflections = protocol(rng)
    test = synthetic(K_F_E, deflections, rng)
    degrees = deflections.copy()
    degrees[:, 3:] = np.degrees(deflections[:, 3:])
    said = [w for w in fit_stiffness_matrix(QuasiStaticTest(test.loads, degrees)).warnings
            if "largest rotation" in w]
    assert len(said) == 1 and "is 8 deg" not in said[0] and "b1_deg" in said[0]
    assert not [w for w in fit_stiffness_matrix(test).warnings if "largest rotation" in w]
    read = {c: {"column": f"{c}_deg", "unit": "deg", "factor": np.pi / 180, "rule": "suffix"}
            for c in ("b1", "b2", "b3")}  # (read in degrees by their columns' names: no doubt)
    large = QuasiStaticTest(test.loads, degrees, read_as=read)
    assert not [w for w in fit_stiffness_matrix(large).warnings if "largest rotation" in w]


# Correlated load noise: a tester's sweep (every degree of freedom moved smoothly at once, rows
# in time order) whose load cells' noise is AR(1) from row to row.

def sweep(n=600):
    t = np.linspace(0.0, 1.0, n)
    amplitude = np.array([1e-3, 1e-3, 1e-3, *np.radians([8.0, 8.0, 8.0])])
    frequency = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 3.5])
    return amplitude * np.sin(2 * np.pi * frequency * t[:, None] + np.arange(6))


def ar1(rng, n, rho, sd=LOAD_NOISE):
    a = rng.normal(size=(n + 200, 6)) * np.sqrt(1 - rho ** 2)
    e = np.zeros_like(a)
    for row in range(1, len(a)):
        e[row] = rho * e[row - 1] + a[row]
    return sd * e[200:]


def test_a_diagonal_matrix_under_ar1_noise_equals_statsmodels_glsar_and_hac():
    sm = pytest.importorskip("statsmodels.api")
    from spineid.identify._common._uncertainty import newey_west_lags
    from spineid.identify._kinds._stiffness_fit import generalized_loads

    rng = np.random.default_rng(7)
    deflections = sweep()
    test = synthetic(np.diag(np.diag(K_F_E)), deflections, rng, ar1(rng, 600, 0.6))
    fit = fit_stiffness_matrix(test, "diagonal", noise_model="ar:1")
    f = generalized_loads(test)
    for c, channel in enumerate(("Fx", "Fy", "Fz", "Mx", "My", "Mz")):
        phi = fit.goodness_of_fit.noise_model[channel]["coefficients"]
        assert len(phi) == 1 and 0.45 < phi[0] < 0.75
        # Each channel holds one entry: the generalized least-squares fit at the coefficient
        # the fit settled on is statsmodels' GLSAR at that rho, values and errors.
        oracle = sm.GLSAR(f[:, c], deflections[:, [c]], rho=phi).fit()
        np.testing.assert_allclose(fit.matrix[c, c], oracle.params[0], rtol=1e-8)
        np.testing.assert_allclose(fit.stderr[c, c], oracle.bse[0], rtol=1e-6)
        # The robust errors: Newey-West of the (weighted) least-squares estimate.
        ols = sm.OLS(f[:, c], deflections[:, [c]]).fit(
            cov_type="HAC", cov_kwds={"maxlags": newey_west_lags(600), "use_correction": False})
        np.testing.assert_allclose(fit.stderr_robust[c, c], ols.bse[0], rtol=1e-10)
    assert fit.accepted and fit.goodness_of_fit.level == "explains"
    # The coefficients given (a lab that knows its load cells' filter): GLSAR at them, and
    # the channels not named white.
    given = fit_stiffness_matrix(test, "diagonal", noise_model="phi:Fx=0.6;Mz=0.3,0.1")
    noise = given.goodness_of_fit.noise_model
    assert noise["Fx"]["coefficients"] == [0.6] and noise["Mz"]["coefficients"] == [0.3, 0.1]
    assert noise["Fy"]["order"] == 0
    for c, rho in ((0, [0.6]), (5, [0.3, 0.1])):
        oracle = sm.GLSAR(f[:, c], deflections[:, [c]], rho=rho).fit()
        np.testing.assert_allclose(given.matrix[c, c], oracle.params[0], rtol=1e-8)
        np.testing.assert_allclose(given.stderr[c, c], oracle.bse[0], rtol=1e-6)
    white = sm.WLS(f[:, 1], deflections[:, [1]]).fit()
    np.testing.assert_allclose(given.matrix[1, 1], white.params[0], rtol=1e-8)


def design_of(entries, deflections, c):
    # Load channel c's rows of the least-squares system of the matrix entries (i, j).
    design = np.zeros((len(deflections), len(entries)))
    for k, (i, j) in enumerate(entries):
        design[:, k] += deflections[:, j] * (i == c) + deflections[:, i] * (j == c and i != j)
    return design


def test_a_full_matrix_under_correlated_noise_has_the_errors_of_the_exact_covariance():
    # Oracle: generalized least squares with each channel's whole Toeplitz covariance of its
    # fitted autoregression (statsmodels' `arma_acovf`, scipy's Toeplitz solver: no whitening
    # filter). The fit conditions on each channel's first p rows (Cochrane-Orcutt), which
    # loses information of order p/n: measured 1.5% at 2000 rows for this sweep at order 1,
    # 17% at 400; up to 6% at the orders AIC adds here (`chosen_order`).
    sm = pytest.importorskip("statsmodels.api")
    from statsmodels.tsa.arima_process import arma_acovf
    from scipy.linalg import solve_toeplitz
    from spineid.identify._common._uncertainty import newey_west_lags
    from spineid.identify._kinds._stiffness_fit import generalized_loads

    rng = np.random.default_rng(8)
    n = 2000
    deflections = sweep(n)
    test = synthetic(K_F_E, deflections, rng, ar1(rng, n, 0.6))
    fit = fit_stiffness_matrix(test, "full")  # (auto)
    white = fit_stiffness_matrix(test, "full", noise_model="white")
    f = generalized_loads(test)
    information, score, orders = 0.0, 0.0, []
    for c, channel in enumerate(("Fx", "Fy", "Fz", "Mx", "My", "Mz")):
        model = fit.goodness_of_fit.noise_model[channel]
        assert model["order"] >= 1
        orders.append(model["order"])
        covariance = arma_acovf(np.r_[1.0, -np.asarray(model["coefficients"])], [1.0], nobs=n,
                                sigma2=model["innovation_sd"] ** 2)
        design = design_of(fit.entries, deflections, c)
        information = information + design.T @ solve_toeplitz(covariance, design)
        score = score + design.T @ solve_toeplitz(covariance, f[:, c])
    exact_errors = np.sqrt(np.diag(np.linalg.inv(information)))
    exact_values = np.linalg.solve(information, score)
    ours = np.array([fit.stderr[i, j] for i, j in fit.entries])
    values = np.array([fit.matrix[i, j] for i, j in fit.entries])
    np.testing.assert_allclose(ours, exact_errors, rtol=0.015 * max(orders) + 0.01)
    assert np.all(ours >= exact_errors * 0.999)  # (conditioning only loses information)
    assert np.max(np.abs(values - exact_values) / exact_errors) < 1.0
    # White weights understate the errors of a smooth sweep under AR(1) 0.6 (about 2x); the
    # Newey-West errors of the white fit are of the right size.
    understated = np.array([white.stderr[i, j] for i, j in fit.entries]) / exact_errors
    assert np.median(understated) < 0.65
    robust = np.array([fit.stderr_robust[i, j] for i, j in fit.entries]) / exact_errors
    assert 0.7 < np.median(robust) < 1.4
    # Those robust errors (formed one load channel at a time) are statsmodels' Newey-West
    # errors of the whole weighted system stacked, each channel a panel of its own.
    sigma = np.asarray(white.noise)
    stacked = np.concatenate([design_of(fit.entries, deflections, c) / sigma[c]
                              for c in range(6)])
    panel = sm.OLS(np.concatenate([f[:, c] / sigma[c] for c in range(6)]), stacked).fit(
        cov_type="hac-panel", cov_kwds={"groups": np.repeat(np.arange(6), n),
                                        "maxlags": newey_west_lags(n), "use_correction": False})
    np.testing.assert_allclose(panel.params, [white.matrix[i, j] for i, j in fit.entries],
                               rtol=1e-6)
    np.testing.assert_allclose([fit.stderr_robust[i, j] for i, j in fit.entries], panel.bse,
                               rtol=1e-8)
    assert fit.goodness_of_fit.level == "explains"
    # White weights see correlated residuals: the matrix describes the loads, but its errors
    # are the ones to distrust (the advice says so).
    assert white.goodness_of_fit.level == "describes"
    assert any("correlat" in line for line in white.goodness_of_fit.advice)


def test_three_levels_on_a_stiffening_joint_fitted_as_linear_under_correlated_noise():
    rng = np.random.default_rng(9)
    deflections = sweep()
    right = fit_stiffness_matrix(synthetic(K_F_E, deflections, rng, ar1(rng, 600, 0.6)))
    assert right.goodness_of_fit.level == "explains"

    def stiffening(extra):
        # The load `extra` times stiffer at the extremes of each motion than at rest.
        larger = deflections * (1.0 + extra * (deflections / np.abs(deflections).max(axis=0)) ** 2)
        return QuasiStaticTest(synthetic(K_F_E, larger, rng, ar1(rng, 600, 0.6)).loads,
                               deflections)

    def largest_misfit(fit):
        return max(entry["fraction_of_range"] for entry in fit.goodness_of_fit.misfit.values())

    # 30% stiffer: a linear matrix is a fair summary (a smooth misfit of 1-2% of the range).
    slight = fit_stiffness_matrix(stiffening(0.3))
    assert slight.goodness_of_fit.level == "describes" and slight.accepted
    assert 0.005 < largest_misfit(slight) < 0.02
    # Twice as stiff: no linear matrix describes the joint.
    wrong = fit_stiffness_matrix(stiffening(1.0))
    assert wrong.goodness_of_fit.level == "does_not_describe" and not wrong.accepted
    assert largest_misfit(wrong) > 0.03
    # A lab that wants a tighter summary says so.
    assert not fit_stiffness_matrix(stiffening(0.3), max_misfit=0.005).accepted


@pytest.mark.parametrize("options, message", [
    (dict(noise=LOAD_NOISE, noise_model="ar:1"), "the noise given is white"),
    (dict(noise_model="ar:7"), "an order of at most 6"),
    (dict(noise_model="arma"), "expected auto, white, ar:P"),
    (dict(noise_model="phi:Fx=0.5;Fw=0.2"), "no channel 'Fw'"),
    (dict(noise=LOAD_NOISE, noise_model="phi:0.5"), "the noise given is white"),
    (dict(max_misfit=-1.0), "max_misfit"),
])
def test_a_noise_model_the_test_cannot_support_is_refused(options, message):
    rng = np.random.default_rng(10)
    with pytest.raises(ValueError, match=message):
        fit_stiffness_matrix(synthetic(K_F_E, protocol(rng, n=60), rng), "full", **options)


def test_the_stiffness_verb_takes_a_noise_model_and_a_misfit_tolerance(tmp_path, capsys):
    import json

    from spineid.cli import main

    rng = np.random.default_rng(11)
    deflections = sweep(500)
    test = synthetic(K_F_E, deflections, rng, ar1(rng, 500, 0.6))
    path = tmp_path / "sweep.csv"
    np.savetxt(path, np.hstack([test.loads, test.deflections]), delimiter=",",
               header="Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3", comments="", fmt="%.17g")
    assert main(["stiffness", str(path), "--out", str(tmp_path / "auto"), "--no-plots"]) == 0
    report = json.loads((tmp_path / "auto" / "report.json").read_text())
    assert report["goodness_of_fit"]["level"] == "explains"
    assert report["goodness_of_fit"]["noise_model"]["Mz"]["order"] >= 1
    assert all("stderr_robust" in entry for entry in report["parameters"])
    assert "robust sd" in capsys.readouterr().out
    # White weights: the matrix describes the loads, with correlation left unmodelled.
    assert main(["stiffness", str(path), "--out", str(tmp_path / "white"), "--no-plots",
                 "--noise-model", "white"]) == 0
    report = json.loads((tmp_path / "white" / "report.json").read_text())
    assert report["goodness_of_fit"]["level"] == "describes"
    assert "stderr_robust" not in report["parameters"][0]
    # A tolerance is a percentage here (six load channels in N and N m).
    assert main(["stiffness", str(path), "--out", str(tmp_path / "bare"), "--no-plots",
                 "--max-misfit", "3"]) == 2
    assert "percentage" in capsys.readouterr().err
    assert not (tmp_path / "bare").exists()
    # A tolerance no matrix meets: exit 1, and the fragment says first not to use it as it is
    # (the accepted fit's does not).
    assert main(["stiffness", str(path), "--out", str(tmp_path / "tight"), "--no-plots",
                 "--max-misfit", "0.01%"]) == 1
    assert (tmp_path / "tight" / "stiffness.toml").read_text().startswith(
        "# CAUTION: this fit does not describe its data")
    assert "CAUTION" not in (tmp_path / "auto" / "stiffness.toml").read_text()


def test_a_pure_moment_sweep_is_accepted_and_an_unrecorded_channel_fitted():
    # Flexion only: the forces carry little but noise (their range a few noise deviations),
    # and Fz is not recorded at all (zeros): a right matrix is still accepted under auto.
    rng = np.random.default_rng(12)
    deflections = np.zeros((120, 6))
    deflections[:, 5] = np.radians(8.0) * np.sin(np.linspace(0.0, 2 * np.pi, 120))
    stiffness = np.diag(np.diag(K_F_E))
    for seed in range(5):
        test = synthetic(stiffness, deflections, np.random.default_rng(seed))
        fit = fit_stiffness_matrix(test, "diagonal")
        assert fit.accepted, fit.goodness_of_fit.reasons
    loads = test.loads.copy()
    loads[:, 2] = 0.0
    fit = fit_stiffness_matrix(QuasiStaticTest(loads, deflections + 1e-6 * rng.normal(
        size=deflections.shape)), "full")
    assert np.all(np.isfinite(fit.matrix))
