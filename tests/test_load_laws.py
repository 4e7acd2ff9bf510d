"""Nonlinear load laws: against scipy and closed forms, energy consistency, the elements that use
them in planar and spatial models, fitting them to load-displacement data, and bad input."""

import json
import logging
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from spineid.cli import main
from spineid import apply_values, generalized_accelerations, mechanical_energy, ModelFile
from spineid.io import read_toml
from helpers import newton_euler_accelerations, random_spatial_states

scipy_interpolate = pytest.importorskip("scipy.interpolate")
scipy_integrate = pytest.importorskip("scipy.integrate")

DEG = np.pi / 180
L5_S1_NODES_DEG = [-5.8, -5.0, -1.7, 1.7, 6.8, 8.5]
L5_S1_LOADS = [-10.0, -5.0, 0.0, 0.0, 2.5, 10.0]


def laws():
    x = np.radians(L5_S1_NODES_DEG)
    return [
        spineid.PiecewiseLinearLaw(x, L5_S1_LOADS, smoothing=0.002),
        spineid.MonotoneCubicLaw(x, L5_S1_LOADS),
        spineid.TanCosLaw(600.0),
        spineid.PolynomialLaw([300.0, 0.0, 4e4]),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_monotone_cubic_equals_scipy_pchip(seed):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.uniform(0.1, 1.0, 7))
    y = np.cumsum(rng.uniform(0.0, 2.0, 7) * (rng.uniform(size=7) > 0.3))  # flat stretches
    law = spineid.MonotoneCubicLaw(x, y)
    grid = np.linspace(x[0], x[-1], 400)
    reference = scipy_interpolate.PchipInterpolator(x, y)
    np.testing.assert_allclose(np.asarray(law.load(grid)), reference(grid), atol=1e-12)
    assert np.all(np.diff(np.asarray(law.load(grid))) >= -1e-12)  # monotone
    # Beyond the nodes: linear continuation with the end slopes.
    slope = reference.derivative()(x[-1])
    np.testing.assert_allclose(float(law.load(x[-1] + 0.5)), y[-1] + 0.5 * slope, rtol=1e-12)


@pytest.mark.parametrize("law", laws(), ids=lambda law: type(law).__name__)
def test_load_is_the_derivative_of_the_energy(law):
    # The energy is written in closed form; quadrature of the load must give it back, and the
    # energy vanishes at zero displacement.
    load = jax.jit(lambda s: law.load(s))
    for upper in np.radians([-7.0, -3.0, 0.5, 4.0, 9.5]):
        quadrature = scipy_integrate.quad(lambda s: float(load(s)), 0.0, upper,
                                          points=[u for u in np.radians(L5_S1_NODES_DEG)
                                                  if min(0, upper) < u < max(0, upper)],
                                          epsabs=1e-13, epsrel=1e-12)[0]
        assert abs(float(law.energy(upper)) - quadrature) < 1e-9 * max(1.0, abs(quadrature))
    assert float(law.energy(0.0)) == 0.0
    x = jnp.linspace(-0.1, 0.14, 13)
    step = 1e-6
    numeric = (np.asarray(law.load(x + step)) - np.asarray(law.load(x - step))) / (2 * step)
    np.testing.assert_allclose(np.asarray(law.stiffness(x)), numeric, rtol=1e-5, atol=1e-4)


def test_stiffness_phases_of_the_thesis():
    law = spineid.l5_s1_law(smoothing=0.0)
    np.testing.assert_allclose(np.asarray(law.load_values), L5_S1_LOADS, atol=1e-12)
    np.testing.assert_allclose(np.asarray(law.slopes) * DEG, [5 / 0.8, 5 / 3.3, 0, 2.5 / 5.1,
                                                              7.5 / 1.7], rtol=1e-12)
    smooth = spineid.l5_s1_law(smoothing=0.002)
    x = np.radians(np.linspace(-7.0, 10.0, 2001))
    sharp = np.interp(x, law.displacement, law.load_values)
    inside = (x > law.displacement[0]) & (x < law.displacement[-1])
    far = np.min(np.abs(x[:, None] - np.asarray(law.displacement)[None, 1:-1]), axis=1) > 0.001
    # Exactly the table away from the breakpoints, and its stiffness continuous across them.
    np.testing.assert_allclose(np.asarray(smooth.load(x))[inside & far], sharp[inside & far],
                               atol=1e-12)
    stiffness = np.asarray(smooth.stiffness(x))
    # 0.002 rad of smoothing spans 13 samples of 1.5e-4 rad: no jump, a ramp.
    assert np.max(np.abs(np.diff(stiffness))) < 0.1 * np.ptp(stiffness)
    # The tan/cos law of seed 001 eq 35 and its small-angle stiffness k/2.
    tan_cos = spineid.TanCosLaw(600.0)
    assert abs(float(tan_cos.load(0.3)) - 600 * np.tan(0.15) / np.cos(0.15)) < 1e-10
    assert abs(float(tan_cos.stiffness(0.0)) - 300.0) < 1e-10


def test_laws_jit_and_vmap_over_their_parameters():
    x = jnp.asarray(np.radians(L5_S1_NODES_DEG))
    loads = jnp.asarray(L5_S1_LOADS) * jnp.array([[1.0], [1.5], [2.0]])

    @jax.jit
    def moment(node_loads):
        return spineid.PiecewiseLinearLaw(x, node_loads, 0.002).load(0.1)

    np.testing.assert_allclose(np.asarray(jax.vmap(moment)(loads)),
                               float(moment(loads[0])) * np.array([1.0, 1.5, 2.0]), rtol=1e-12)


@pytest.mark.parametrize("make, message", [
    (lambda: spineid.PiecewiseLinearLaw([0.0, 0.1, 0.1], [0, 1, 2]), "increase strictly"),
    (lambda: spineid.MonotoneCubicLaw([0.0, 0.2, 0.1], [0, 1, 2]), "increase strictly"),
    (lambda: spineid.MonotoneCubicLaw([0.0, 0.1, 0.2], [0, 2, 1], monotone=True),
     "negative stiffness"),
    (lambda: spineid.PiecewiseLinearLaw([0.0, 0.1, 0.2], [0, 1, 2], smoothing=0.5),
     "shortest phase"),
    (lambda: spineid.PiecewiseLinearLaw.from_phases([0.0, 0.1, 0.2], [1.0]), "2 stiffness"),
    (lambda: spineid.PiecewiseLinearLaw([0.0, np.nan], [0, 1]), "finite"),
    (lambda: spineid.PiecewiseLinearLaw.from_phase_table([0.0, 0.1], [0.2, 0.3], [1.0, 2.0]),
     "phases 1 and 2 overlap"),
    (lambda: spineid.PiecewiseLinearLaw.from_phase_table([0.0, 0.2], [0.1, 0.3], [1.0, 2.0]),
     "phases 1 and 2 leave a gap"),
])
def test_bad_tables_fail_clearly(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def l5_s1_document():
    return read_toml(spineid.dataset_path("l5_s1_pair.toml"))


def test_nonlinear_torsion_conserves_energy_in_the_pinned_pair():
    doc = l5_s1_document()
    doc["torsion"][0]["damping"] = 0.0
    doc.pop("loads")
    model = ModelFile.from_document(doc).model
    model = spineid.PinnedPair(model.lower, model.upper, model.pin, model.elements, (),
                               model.gravity, jnp.asarray(7.5 * DEG))
    ts = jnp.linspace(0.0, 0.3, 301)
    solution = spineid.simulate(model, ts, rtol=1e-10, atol=1e-12)
    energy = jax.vmap(lambda q, v: mechanical_energy(model, 0.0, q, v))(solution.q,
                                                                         solution.qdot)
    assert float(jnp.ptp(energy)) < 1e-7 * float(energy[0])
    # It swings through the neutral zone into extension, where the table holds it.
    assert float(solution.q[:, 0].min()) < -5.0 * DEG


def table_bushing_document(laws_tables):
    doc = read_toml(spineid.dataset_path("spatial_pair.toml"))
    bushing = doc["bushings"][0]
    bushing["kind"] = "table"
    bushing.pop("stiffness")
    bushing["damping"] = [60.0, 120.0, 50.0, 0.05, 0.04, 0.06]
    bushing["laws"] = laws_tables
    return doc


LINEAR = [9.0e4, 2.2e5, 7.5e4, 55.0, 38.0, 70.0]


def test_table_bushing_with_linear_laws_is_the_diagonal_spine_bushing():
    table_doc = table_bushing_document(
        [{"kind": "polynomial", "coefficients": [k]} for k in LINEAR])
    spine_doc = read_toml(spineid.dataset_path("spatial_pair.toml"))
    spine_doc["bushings"][0].update(kind="spine", stiffness=LINEAR,
                                    damping=table_doc["bushings"][0]["damping"])
    table = ModelFile.from_document(table_doc).model
    spine = ModelFile.from_document(spine_doc).model
    states = random_spatial_states(table.upper.reference_pose, np.random.default_rng(3), 4, 0.2)
    for q, qdot in states:
        np.testing.assert_allclose(
            np.asarray(generalized_accelerations(table, 0.1, q, qdot)),
            np.asarray(generalized_accelerations(spine, 0.1, q, qdot)), rtol=1e-10, atol=1e-8)


def test_table_bushing_forces_from_autodiff_equal_newton_euler():
    # Nonlinear laws on every degree of freedom: the Lagrangian path (energy by autodiff) and
    # the explicit wrenches of the laws' loads through Newton-Euler must agree.
    x = [-2e-3, -1e-3, 0.0, 1e-3, 2e-3]
    tables = [{"kind": "monotone_cubic", "displacement": x,
               "load": [k * v * (1 + 300 * abs(v)) for v in x]} for k in LINEAR[:3]]
    tables += [{"kind": "tan_cos", "coefficient": 2 * LINEAR[3]},
               {"kind": "polynomial", "coefficients": [LINEAR[4], 0.0, 300.0]},
               {"kind": "piecewise_linear", "displacement": [-0.3, -0.05, 0.05, 0.3],
                "load": [-20.0, -1.0, 1.0, 25.0], "smoothing": 0.02}]
    model = ModelFile.from_document(table_bushing_document(tables)).model
    states = random_spatial_states(model.upper.reference_pose, np.random.default_rng(4), 4, 0.25)
    for q, qdot in states:
        theirs = newton_euler_accelerations(
            model, q, qdot, 0.2,
            lambda b, lower_pose, q, qdot: b.wrenches(lower_pose, q, jnp.zeros(6), qdot)[1])
        ours = generalized_accelerations(model, 0.2, q, qdot)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-8,
                                   atol=1e-8 * float(jnp.abs(theirs).max()))


@pytest.mark.parametrize("change, message", [
    (lambda t: t.update(law={"kind": "spline"}), "law.kind"),
    (lambda t: t.update(stiffness=1.0), "either `stiffness`"),
    (lambda t: t["law"].update(displacement=[0.1, 0.0, 0.2, 0.3, 0.4, 0.5]), "increase"),
    (lambda t: t["law"].update(load=[0.0, 1.0]), "law.load"),
    (lambda t: t["law"].update(smoothing=-1.0), "smoothing"),
])
def test_bad_law_tables_in_model_files_name_the_entry(change, message):
    doc = l5_s1_document()
    change(doc["torsion"][0])
    with pytest.raises(ValueError, match=message):
        ModelFile.from_document(doc, source="l5_s1.toml")


def test_law_parameters_are_named_and_settable():
    model_file = ModelFile.from_document(l5_s1_document())
    names = [p.name for p in model_file.parameters]
    assert names[:2] == ["torsion[0].law.load[0]", "torsion[0].law.load[1]"]
    assert "torsion[0].damping" in names
    chosen = [p for p in model_file.parameters if p.name == "torsion[0].law.load[5]"]
    changed = apply_values(model_file.model, chosen, jnp.array([12.0]))
    assert float(changed.elements[0].law.load_values[5]) == 12.0


def quasi_static(noise, seed=0):
    law = spineid.l5_s1_law()
    x = np.radians(np.linspace(-5.8, 8.5, 400))
    rng = np.random.default_rng(seed)
    return spineid.LoadDisplacementData(x, np.asarray(law.load(x)) + noise *
                                        rng.standard_normal(x.size)), law


def test_phases_recovered_from_a_quasi_static_test_with_calibrated_errors():
    data, law = quasi_static(0.05)
    start = np.radians([-5.8, -4.5, -2.0, 2.2, 6.4, 8.5])
    fit = spineid.fit_load_law(data,
                               spineid.LawForm("piecewise_linear", start, free_breakpoints=True,
                                               smoothing=0.002))
    assert fit.converged
    nodes = np.asarray(fit.law.displacement)
    breakpoints = nodes[1:-1] / DEG
    errors = np.array([e for _, e in fit.derived["node_displacement"]])[1:-1] / DEG
    np.testing.assert_allclose(breakpoints, L5_S1_NODES_DEG[1:-1], atol=0.05)
    assert np.all(np.abs(breakpoints - L5_S1_NODES_DEG[1:-1]) < 5 * errors)
    slopes = np.asarray(fit.law.slopes) * DEG
    np.testing.assert_allclose(slopes[[0, 1, 3, 4]], [6.25, 5 / 3.3, 2.5 / 5.1, 7.5 / 1.7],
                               rtol=0.02)
    assert abs(slopes[2]) < 0.02  # the neutral zone
    assert 0.04 < fit.noise < 0.06
    report = fit.report()
    # The neutral zone's rise sits on its bound (zero stiffness): reported, not analysed.
    assert report["identifiability"]["n_parameters"] == len(fit.names) - 1
    assert any("rise[3]" in w for w in fit.warnings)
    assert report["law"]["kind"] == "piecewise_linear"


def test_dynamic_loop_of_fig_4_24_gives_back_the_phases_and_the_damper():
    # Liu 2001 section 4.3 / Fig 4-24 at a smaller size: simulate L5-S1 driven through its
    # database with the damper, then recover the phases from the loop (experiments/l5_s1_loop.py
    # runs the full one).
    import diffrax

    model = ModelFile.from_document(l5_s1_document()).model
    ts = np.linspace(0.0, 20.0, 801)
    solution = spineid.simulate(model, ts, solver=diffrax.Kvaerno5())
    angle = np.asarray(solution.q)[:, 0]
    moment = np.asarray(jax.vmap(model.applied_load)(jnp.asarray(ts)))[:, 2]
    law = model.elements[0].law
    # A loop: the damper separates loading from unloading around the table.
    table = np.asarray(law.load(angle))
    assert np.max(np.abs(moment - table)) > 0.5
    np.testing.assert_allclose([angle.min(), angle.max()], np.radians([-5.8, 8.5]), atol=2e-4)
    arm = np.asarray(model.upper.reference_pose[:2] - model.pin)
    inertia = float(model.upper.inertia + model.upper.mass * arm @ arm)
    data = spineid.LoadDisplacementData(angle, moment, ts)
    start = np.radians([-5.8, -4.6, -2.0, 2.2, 6.4, 8.5])
    fit = spineid.fit_load_law(data,
                               spineid.LawForm("piecewise_linear", start, free_breakpoints=True,
                                               smoothing=0.002),
                               dynamics=spineid.LawDynamics(damping=True, inertia=inertia))
    np.testing.assert_allclose(np.asarray(fit.law.displacement)[1:-1] / DEG,
                               L5_S1_NODES_DEG[1:-1], atol=0.03)
    assert abs(fit.damping - 10.0) < 0.05


def test_an_exact_fit_is_never_judged_as_not_explaining_the_data():
    # A flat law fitted to a constant load leaves residuals of 1e-13 (rounding) that are
    # neither white nor small beside a range of 0: judged "does NOT describe" before. Noise of
    # 1e-6 of the load is noise, and is judged as such.
    x = np.linspace(-0.1, 0.1, 50)
    exact = spineid.fit_load_law(spineid.LoadDisplacementData(x, np.full(50, 2.0)),
                                 spineid.LawForm("piecewise_linear", n_nodes=3))
    assert exact.goodness_of_fit.level == "explains"
    assert "an exact fit" in exact.summary() and not exact.goodness_of_fit.misfit
    noisy = spineid.fit_load_law(spineid.LoadDisplacementData(
        x, 2.0 + 2e-6 * np.random.default_rng(1).normal(size=50)),
        spineid.LawForm("piecewise_linear", n_nodes=3))
    assert "an exact fit" not in noisy.summary()
    assert noisy.noise == pytest.approx(2e-6, rel=0.4)


def test_rates_of_a_noisy_record_are_scipys_savitzky_golay_derivatives():
    # The rates a damper and an inertia use: scipy.signal.savgol_filter (quadratic, the
    # same window) as the oracle inside the record; exact on a quadratic at the ends too.
    from spineid.identify._kinds._rates import measured_rates

    signal = pytest.importorskip("scipy.signal")
    ts = np.linspace(0.0, 2.0, 201)
    x = np.sin(3 * ts) + 1e-3 * np.random.default_rng(4).normal(size=ts.size)
    velocity, acceleration = measured_rates(x, ts, 11)
    step = ts[1] - ts[0]
    inner = slice(5, -5)
    np.testing.assert_allclose(velocity[inner], signal.savgol_filter(
        x, 11, 2, deriv=1, delta=step)[inner], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(acceleration[inner], signal.savgol_filter(
        x, 11, 2, deriv=2, delta=step)[inner], rtol=1e-9, atol=1e-7)
    quadratic = 1.0 + 2.0 * ts - 0.75 * ts**2
    for window in (1, 7):
        velocity, acceleration = measured_rates(quadratic, ts, window)
        np.testing.assert_allclose(velocity, 2.0 - 1.5 * ts, atol=1e-9)
        np.testing.assert_allclose(acceleration, -1.5, atol=1e-6)
    for bad, message in (((x, None, 1), "needs the time column"),
                         ((x, ts, 4), "odd number"),
                         ((x, ts**2, 5), "equally spaced")):
        with pytest.raises(ValueError, match=message):
            measured_rates(*bad)


def test_table_command_writes_report_law_and_plot(tmp_path):
    data, _ = quasi_static(0.02, seed=2)
    csv = tmp_path / "test.csv"
    np.savetxt(csv, np.column_stack([data.displacement, data.load]), delimiter=",",
               header="displacement,load", comments="")
    nodes = ",".join(str(v) for v in np.radians(L5_S1_NODES_DEG))
    status = main(["table", str(csv), f"--nodes={nodes}", "--out", str(tmp_path / "out")])
    assert status == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["converged"] and len(report["parameters"]) == 6
    assert (tmp_path / "out" / "law_fit.png").stat().st_size > 10_000
    # The fitted law drops into a model file.
    law = read_toml(tmp_path / "out" / "law.toml")["law"]
    doc = l5_s1_document()
    doc["torsion"][0]["law"] = law
    fitted = ModelFile.from_document(doc).model.elements[0].law
    np.testing.assert_allclose(np.asarray(fitted.load_values), L5_S1_LOADS, atol=0.05)


@pytest.mark.parametrize("columns, use", [
    ("Disp_mm,Force_N", "a table bushing's translational degree of freedom (m, N)"),
    ("Angle_deg,Moment_Nm", "a [[torsion]] (rad, N m) or of a table bushing's rotational"),
])
def test_the_written_law_says_where_it_belongs(tmp_path, columns, use):
    # A shear test's law is a translation's (m, N), a flexion test's a rotation's (rad, N m).
    x = np.linspace(0.0, 2.0, 60)
    csv = tmp_path / "test.csv"
    np.savetxt(csv, np.column_stack([x, 3.0 * x + 4.0 * np.maximum(x - 1.0, 0.0)]),
               delimiter=",", header=columns, comments="")
    displacement, load = columns.split(",")
    assert main(["table", str(csv), "--displacement", displacement, "--load", load,
                 "--n-nodes", "3", "--no-plots", "--out", str(tmp_path / "out")]) == 0
    first = (tmp_path / "out" / "law.toml").read_text().splitlines()[0]
    assert first.startswith("# Fitted by `spineid table` from test.csv: use as the `law` of "
                            + use), first


def test_table_command_rejects_bad_data(tmp_path, capsys):
    csv = tmp_path / "bad.csv"
    csv.write_text("displacement,load\n0.0,1.0\n0.1,x\n0.2,3.0\n")
    assert main(["table", str(csv), "--out", str(tmp_path / "out")]) == 2
    assert "line 3, column load" in capsys.readouterr().err
    csv.write_text("displacement,moment\n0.0,1.0\n0.1,2.0\n0.2,3.0\n")
    assert main(["table", str(csv), "--out", str(tmp_path / "out")]) == 2
    assert "missing column" in capsys.readouterr().err
    csv.write_text("t,displacement,load\n0,0.0,1.0\n0,0.1,2.0\n1,0.2,3.0\n")
    assert main(["table", str(csv), "--damping", "--out", str(tmp_path / "out")]) == 2
    assert "strictly increasing" in capsys.readouterr().err
    # Variable projection needs free breakpoints: refused before anything is written.
    csv.write_text("displacement,load\n0.0,0.0\n0.1,1.0\n0.2,2.5\n0.3,4.0\n")
    assert main(["table", str(csv), "--solver", "varpro", "--out", str(tmp_path / "vp")]) == 2
    assert "free_breakpoints" in capsys.readouterr().err and not (tmp_path / "vp").exists()
    # Too few rows for a law: the count, and what a test needs, in the words of the file.
    for rows, header in ((0, "displacement,load"), (2, "Disp_mm,Force_N")):
        csv.write_text(header + "\n" + "".join(f"{k},{k}\n" for k in range(rows)))
        assert main(["table", str(csv), "--out", str(tmp_path / "few")]) == 2
        assert f"bad.csv: {rows} data row(s); at least 3 are needed" in capsys.readouterr().err


def test_database_tables_hold_known_cells():
    curve = spineid.liu_scoliosis_curve()
    assert list(curve["vertebra"][[0, 5, 16]]) == ["L5", "T12", "T1"]
    assert curve["sagittal_orientation"][0] == pytest.approx(np.radians(-8))
    assert curve["inferior_disc_height"][0] == pytest.approx(0.0157)
    assert curve["vertebra_height"][16] == pytest.approx(0.016)
    origins = spineid.liu_origin_nodes()
    np.testing.assert_allclose(origins["position"][4], [0.0, -0.0515, 0.1455])
    np.testing.assert_allclose(origins["position"][16], [0.0, -0.06604, 0.4279])
    nodes = spineid.liu_vertebra_nodes()
    assert len(nodes) == 17 * 17
    l5 = nodes["vertebra"] == "L5"
    np.testing.assert_allclose(nodes["local"][l5][4], [0.046, 0.043, 0.003])   # A1 node 5
    np.testing.assert_allclose(nodes["global"][l5][15], [0.0, 0.0734, -0.0048])  # A1 node 16
    t1 = nodes["vertebra"] == "T1"
    np.testing.assert_allclose(nodes["global"][t1][16], [0.0, 0.1, 0.4337])  # A17 node 17
    # Kept as printed: T10 node 12 has global x = +13 mm where the mirror pair needs -13.
    t10 = nodes["vertebra"] == "T10"
    assert nodes["global"][t10][11][0] == pytest.approx(0.013)
    implants = spineid.liu_implant_nodes()
    assert len(implants) == 170
    np.testing.assert_allclose(implants["local"][0], [0.0189, 0.043, 0.0072])   # B1 node 1
    np.testing.assert_allclose(implants["local"][9], [-0.003, 0.052, 0.011])    # B1 node 10, sic
    np.testing.assert_allclose(implants["local"][169], [-0.003, 0.034, -0.002])  # B17 node 10
    phases = spineid.liu_l5_s1_phases()
    np.testing.assert_allclose(phases["stiffness"] * DEG, [6.25, 5 / 3.3, 0, 2.5 / 5.1, 7.5 / 1.7])
    table1 = dict(zip(spineid.fritzkowski_parameters()["symbol"],
                      spineid.fritzkowski_parameters()["value"]))
    assert table1["k_A"] == 1e4 and table1["k_B"] == 3e4 and table1["k_O"] == 600.0
    christophy = spineid.christophy_stiffness()
    np.testing.assert_allclose(christophy["K_F_E"], np.asarray(spineid.K_F_E))
    assert christophy["K_D_E"][0, 1] == 0.0
    with pytest.raises(KeyError, match="columns are"):
        curve["height"]


def test_database_command_plots_geometry_and_laws(tmp_path):
    assert main(["database", "--out", str(tmp_path)]) == 0
    for name in ("geometry.png", "l5_s1_law.png"):
        assert (tmp_path / name).stat().st_size > 20_000


@pytest.mark.parametrize("solver", ["lm", spineid.LevenbergMarquardt()])
def test_polynomial_law_fit_is_the_linear_least_squares_solution(solver):
    # Oracle: numpy's linear least squares (the coefficients enter linearly). A test in m has
    # coefficients 1e2 .. 5e7 apart, and the loads are small: neither may stop the solver
    # short or inflate the estimated noise, whatever the solver's statistical stop.
    rng = np.random.default_rng(0)
    x = np.linspace(-1e-3, 1e-3, 400)
    y = 0.1 * (x / 1e-3) + 0.05 * (x / 1e-3) ** 3 + 1e-6 * rng.standard_normal(400)
    fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, y),
                               spineid.LawForm("polynomial", degree=3), solver=solver)
    powers = np.stack([x, x**2, x**3], axis=1)
    exact, *_ = np.linalg.lstsq(powers, y, rcond=None)
    residual = y - powers @ exact
    assert fit.converged
    np.testing.assert_allclose(fit.values, exact, rtol=1e-6, atol=1e-3 * np.max(fit.stderr))
    assert fit.noise == pytest.approx(np.sqrt(residual @ residual / (400 - 3)), rel=1e-6)


def test_table_nodes_must_be_fewer_than_points_and_extrapolation_is_said():
    x = np.linspace(0.0, 1e-3, 20)
    data = spineid.LoadDisplacementData(x, 1e4 * x)
    with pytest.raises(ValueError, match="20 nodes for 20 data points"):
        spineid.fit_load_law(data, spineid.LawForm(n_nodes=20))
    fit = spineid.fit_load_law(data, spineid.LawForm(nodes=[0.0, 0.5e-3, 2e-3]))
    assert any("outside the data" in w and "0.002" in w for w in fit.warnings)


def test_records_of_different_lengths_share_one_compilation_and_stay_exact(caplog):
    # Records of 1400 and 1500 points are padded to one length (1536) with samples of weight
    # zero: the second fit compiles nothing, and the padding changes no result. Oracle:
    # ordinary least squares by numpy (coefficients, noise with n - p degrees of freedom and
    # the standard errors sigma sqrt(diag((X^T X)^-1))).
    rng = np.random.default_rng(3)

    def record(n):
        x = np.linspace(-1e-3, 1e-3, n)
        return x, 0.1 * (x / 1e-3) + 0.05 * (x / 1e-3) ** 3 + 1e-3 * rng.standard_normal(n)

    spineid.fit_load_law(spineid.LoadDisplacementData(*record(1400)),
                         spineid.LawForm("polynomial", degree=3))
    x, y = record(1500)
    with jax.log_compiles(), caplog.at_level(logging.WARNING):
        fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, y),
                                   spineid.LawForm("polynomial", degree=3))
    compiled = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
    assert not compiled, compiled
    powers = np.stack([x, x**2, x**3], axis=1)
    exact, *_ = np.linalg.lstsq(powers, y, rcond=None)
    residual = y - powers @ exact
    sigma = np.sqrt(residual @ residual / (1500 - 3))
    assert fit.n_data == 1500 and fit.residuals.shape == (1500,)
    np.testing.assert_allclose(fit.values, exact, rtol=1e-7)
    assert fit.noise == pytest.approx(sigma, rel=1e-8)
    np.testing.assert_allclose(
        fit.stderr, sigma * np.sqrt(np.diag(np.linalg.inv(powers.T @ powers))), rtol=1e-6)


def test_the_law_figure_speaks_the_units_the_columns_came_in():
    # A tester's file in mm and N: the figure's axes are in mm and N, labelled so (it was
    # "displacement [deg]" over metres read as radians, and a load without a unit).
    path = sorted(spineid.dataset_path("lab_shear_tests").glob("*.csv"))[0]
    data = spineid.io.read_load_displacement(path, displacement="Disp_mm", load="Force_N")
    fit = spineid.fit_load_law(data, spineid.LawForm("piecewise_linear", n_nodes=3,
                                                     free_breakpoints=True))
    figure = spineid.plot_law_fit(fit, data, None)
    load_axis, residual_axis = figure.axes[:2]
    assert load_axis.get_ylabel() == "load [N]"
    assert residual_axis.get_xlabel() == "displacement [mm]"
    assert residual_axis.get_ylabel() == "data - fit [N]"
    shown = load_axis.lines[0].get_xdata()
    np.testing.assert_allclose(shown, data.displacement * 1e3)
    # Data without units read are drawn in SI, and said to be.
    plain = spineid.LoadDisplacementData(displacement=data.displacement, load=data.load)
    assert "SI" in spineid.plot_law_fit(fit, plain, None).axes[1].get_xlabel()


@pytest.mark.parametrize("read_as, units", [
    ({"displacement": {"unit": "mm"}, "load": {"unit": "N"}}, ("mm", "N")),
    ({"displacement": {"unit": "deg"}}, ("deg", "Nm")),
    ({"load": {"unit": "kN"}}, ("m", "kN")),
    ({"displacement": {"unit": "m"}, "load": {"unit": "N"}}, ("m", "N")),
    ({"displacement": {"column": "displacement"}}, None),
    (None, None),
])
def test_a_law_is_shown_in_the_units_its_columns_were_read_in(read_as, units):
    # law_units: the (displacement, load) units of a test's columns, the SI unit of the kind for
    # a column read without one; SI units named where the columns named them (Disp_m); None
    # where no column had a unit (spineid's own names).
    from spineid.identify._kinds._law_units import law_units

    assert law_units(read_as) == units


@pytest.mark.parametrize("unit, units, shown, factor", [
    ("load/displacement", ("mm", "N"), "N/mm", 1e-3),
    ("load/displacement^3", ("mm", "kN"), "kN/mm^3", 1e-9 / 1e3),
    ("load s/displacement", ("deg", "Nmm"), "Nmm s/deg", 1e3 * math.pi / 180),
    ("displacement", ("deg", "Nm"), "deg", 180 / math.pi),
])
def test_a_law_parameters_unit_in_a_labs_units(unit, units, shown, factor):
    # shown_in: a law parameter's abstract unit in the data's units, with the factor that
    # takes an SI value to them (1 N/m is 1e-3 N/mm; 1 N m s/rad is 1e3 pi/180 Nmm s/deg).
    from spineid.identify._kinds._law_units import shown_in

    name, value = shown_in(unit, units)
    assert name == shown and value == pytest.approx(factor, rel=1e-14)
