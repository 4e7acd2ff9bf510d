"""Stiffness matrices from quasi-static tests: recovery of eq 24 with calibrated errors, the
Euler-basis mapping of moments, structures, identifiability of a protocol, bad input."""

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
    for row, beta in enumerate(deflections[:, 3:]):
        loads[row, 3:] = np.asarray(dual_euler_basis(beta)).T @ f[row, 3:]
    return QuasiStaticTest(loads + rng.normal(size=loads.shape) * noise, deflections)


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


def test_a_test_without_any_deflection_is_refused():
    loads = np.random.default_rng(0).normal(size=(8, 6))
    with pytest.raises(ValueError, match="every deflection is zero"):
        fit_stiffness_matrix(QuasiStaticTest(loads, np.zeros((8, 6))))
