"""Data files with their own column names and units: units from a column's suffix, from
`--units`, from an OpenSim file's header, SI for spineid's own names; ambiguity and units of
the wrong kind refused listing the columns; a fit read from a tester's file (millimetres,
degrees, milliseconds, other names) equal to the fit of the same data in SI."""

import csv
import json
import math
import re

import numpy as np
import pytest

import spineid
from spineid.cli import main
from spineid.io._columns import UNITS, parse_assignments, read_quantities, unit_in_lab

pytestmark = pytest.mark.xdist_group("lab-data")  # (one worker: the axial fits compile once)

TRAJECTORY = {"t": "s", "x": "m", "y": "m", "theta": "rad"}


def write_csv(path, columns: dict, comment: str | None = None):
    lines = ([comment] if comment else []) + [",".join(columns)]
    for row in zip(*columns.values()):
        lines.append(",".join(cell if isinstance(cell, str) else repr(float(cell))
                              for cell in row))
    path.write_text("\n".join(lines) + "\n")
    return path


T = np.linspace(0.0, 0.2, 21)
X, Y, THETA = 1e-3 * np.sin(30 * T), 2e-4 * np.cos(20 * T), 0.05 * np.sin(25 * T)


def test_units_from_suffixes_given_units_and_spineid_names(tmp_path):
    path = write_csv(tmp_path / "tester.csv", {
        "Time_ms": T * 1e3, "disp_x_mm": X * 1e3, "lateral": Y * 1e6, "theta": THETA,
        "operator": ["ab"] * T.size})  # a text column the reader does not need
    read = read_quantities(path, TRAJECTORY, columns={"t": "Time_ms", "x": "disp_x_mm",
                                                      "y": "lateral"}, units={"lateral": "um"})
    np.testing.assert_allclose(read.values["t"], T, rtol=1e-15)
    np.testing.assert_allclose(read.values["x"], X, rtol=1e-15)
    np.testing.assert_allclose(read.values["y"], Y, rtol=1e-15)
    np.testing.assert_array_equal(read.values["theta"], THETA)
    assert {name: (e["column"], e["unit"], e["rule"]) for name, e in read.read_as.items()} == {
        "t": ("Time_ms", "ms", "suffix"), "x": ("disp_x_mm", "mm", "suffix"),
        "y": ("lateral", "um", "given"), "theta": ("theta", "rad", "spineid name")}
    assert read.describe().endswith("t from 'Time_ms' in ms (suffix), x from 'disp_x_mm' in mm "
                                    "(suffix), y from 'lateral' in um (given)")
    # A unit given by the quantity's name wins over the column's suffix.
    again = read_quantities(path, TRAJECTORY, columns={"t": "Time_ms", "x": "disp_x_mm",
                                                       "y": "lateral"},
                            units={"x": "cm", "y": "mm"})
    np.testing.assert_allclose(again.values["x"], X * 1e3 * 1e-2, rtol=1e-15)


def test_a_quantity_is_found_in_the_one_column_of_its_name_with_a_unit_suffix(tmp_path):
    # No column `x`: `x_mm` is x (in mm, by its suffix); with a `t` and `t_ms` the own name
    # wins; two candidates (`y_mm`, `y_cm`) are none: refused as missing, listing the columns.
    path = write_csv(tmp_path / "named.csv", {"t": T, "t_ms": T * 1e3, "x_mm": X * 1e3,
                                              "y_um": Y * 1e6, "theta_deg": np.degrees(THETA)})
    read = read_quantities(path, TRAJECTORY)
    np.testing.assert_allclose(read.values["x"], X, rtol=1e-15)
    np.testing.assert_allclose(read.values["y"], Y, rtol=1e-15)
    np.testing.assert_allclose(read.values["theta"], THETA, rtol=1e-14)
    np.testing.assert_array_equal(read.values["t"], T)
    assert read.read_as["x"] == {"column": "x_mm", "unit": "mm", "factor": 1e-3,
                                 "rule": "suffix"}
    assert read.read_as["t"]["column"] == "t"
    both = write_csv(tmp_path / "both.csv", {"t": T, "x": X, "y_mm": Y * 1e3, "y_cm": Y * 1e2,
                                             "theta": THETA})
    with pytest.raises(ValueError, match=r"missing column\(s\) 'y' for y \(one of \['y_mm', "
                                         r"'y_cm'\] could be: name it\); its columns"):
        read_quantities(both, TRAJECTORY)
    # The readers of each kind of file, given no names nor units, find them so too.
    test = spineid.read_quasi_static(write_csv(tmp_path / "qs.csv", {
        **{f"{c}_{'N' if c[0] == 'F' else 'Nmm'}": np.arange(1.0, 4.0) * (k + 1)
           for k, c in enumerate(("Fx", "Fy", "Fz", "Mx", "My", "Mz"))},
        **{f"{c}_{'mm' if c[0] == 'd' else 'deg'}": np.arange(1.0, 4.0) * 0.1
           for c in ("dx", "dy", "dz", "b1", "b2", "b3")}}))
    np.testing.assert_allclose(test.loads[:, 3], 4e-3 * np.arange(1.0, 4.0))
    np.testing.assert_allclose(test.deflections[:, 0], 1e-4 * np.arange(1.0, 4.0))
    assert test.read_as["b1"]["unit"] == "deg"
    law = spineid.read_load_displacement(write_csv(tmp_path / "law.csv", {
        "displacement_mm": [0.0, 1.0, 2.0], "load_kN": [0.0, 0.5, 2.0]}))
    np.testing.assert_allclose(law.load, [0.0, 500.0, 2000.0])
    np.testing.assert_allclose(law.displacement, [0.0, 1e-3, 2e-3])
    measured = spineid.io.read_measurement(path, ("x", "y", "theta"), ("m", "m", "rad"))
    np.testing.assert_allclose(measured.values[:, 0], X, rtol=1e-15)


def test_an_opensim_storage_file_gives_its_angles_units(tmp_path):
    opensim = pytest.importorskip("opensim")
    table = opensim.TimeSeriesTable()
    table.setColumnLabels(["pelvis_tx", "pelvis_ty", "pelvis_tilt"])
    for row in zip(T, X, Y, np.degrees(THETA)):
        table.appendRow(float(row[0]), opensim.RowVector([float(v) for v in row[1:]]))
    table.addTableMetaDataString("inDegrees", "yes")
    path = tmp_path / "coordinates.mot"
    opensim.STOFileAdapter.write(table, str(path))
    read = read_quantities(path, TRAJECTORY, columns={"x": "pelvis_tx", "y": "pelvis_ty",
                                                      "theta": "pelvis_tilt"})
    np.testing.assert_allclose(read.values["theta"], THETA, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(read.values["x"], X, rtol=1e-12)
    assert read.read_as["theta"]["rule"] == "inDegrees" and read.read_as["theta"]["unit"] == "deg"
    assert read.read_as["x"]["rule"] == "OpenSim SI" and read.read_as["t"]["column"] == "time"


@pytest.mark.parametrize("columns, units, message", [
    ({"x": "disp", "y": "lat"}, {}, r"the unit of 'disp' \(for x, a length\), 'lat' \(for y, a "
                                    r"length\) is not known: no unit suffix"),
    ({"x": "disp_deg"}, {}, r"column 'disp_deg' read as x, a length, but its unit 'deg' "
                            r"\(suffix\) is an angle"),
    ({"x": "disp_mm"}, {"x": "furlong"}, "--units: unknown unit 'furlong'"),
    ({"x": "nothere_mm"}, {}, r"missing column\(s\) 'nothere_mm' for x; its columns: \['t', "
                              r"'disp_mm', 'disp_deg', 'disp', 'lat', 'y', 'theta'\]"),
    ({"z": "disp_mm"}, {}, r"--columns: \['z'\] are not quantities this file is read for"),
    ({"x": "disp_mm"}, {"Fx": "N"}, r"--units: \['Fx'\] name neither a quantity read"),
], ids=["no suffix", "wrong kind", "unknown unit", "missing column", "unknown quantity",
        "stray unit"])
def test_unusable_columns_and_units_are_refused(tmp_path, columns, units, message):
    path = write_csv(tmp_path / "tester.csv", {"t": T, "disp_mm": X, "disp_deg": X, "disp": X,
                                               "lat": Y, "y": Y, "theta": THETA})
    with pytest.raises(ValueError, match=message):
        read_quantities(path, TRAJECTORY, columns=columns, units=units)


def test_a_testers_odd_files_are_read_or_refused_saying_why(tmp_path):
    # A moment's unit spelt N*mm or N.m reads as Nmm, Nm; a quantity whose only candidate
    # column has a unit spineid does not know is refused naming that unit (not "missing"); a
    # file separated by semicolons, and time running back, say so; a test whose displacement
    # never changes is refused before a fit.
    loads = {"Mx_N*mm": [1.0, 2.0, 4.0], "My_N.m": [1.0, 2.0, 4.0]}
    read = read_quantities(write_csv(tmp_path / "spelt.csv", loads), {"Mx": "N m", "My": "N m"})
    np.testing.assert_allclose(read.values["Mx"], [1e-3, 2e-3, 4e-3], rtol=1e-15)
    np.testing.assert_allclose(read.values["My"], [1.0, 2.0, 4.0])
    assert (read.read_as["Mx"]["unit"], read.read_as["My"]["unit"]) == ("Nmm", "Nm")
    furlong = write_csv(tmp_path / "furlong.csv", {"t": T, "x_furlong": X, "y": Y,
                                                   "theta": THETA})
    with pytest.raises(ValueError, match=r"'x_furlong' would be x but its unit 'furlong' is "
                                         r"not one spineid knows \(s, ms, m,"):
        read_quantities(furlong, TRAJECTORY)
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text("# export\nt;x;y;theta\n0,0;1,5;0,0;0,0\n")
    with pytest.raises(ValueError, match=r"its header seems separated by semicolons \('t;x;y;"
                                         r"theta'\); spineid reads comma-separated files"):
        read_quantities(semicolons, TRAJECTORY)
    back = write_csv(tmp_path / "back.csv", {"Time_s": [0.0, 0.1, 0.1, 0.2],
                                             "displacement": [0.0, 1.0, 2.0, 3.0],
                                             "load": [0.0, 1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match=r"strictly increasing; data row 3 \(0.1\) does not "
                                         r"follow data row 2 \(0.1\)"):
        spineid.read_load_displacement(back, time="Time_s")
    still = write_csv(tmp_path / "still.csv", {"displacement_mm": [1.0] * 5,
                                               "load_N": [0.0, 1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match="the displacement does not vary"):
        spineid.read_load_displacement(still)


def test_assignments_are_parsed_and_refused_by_name():
    assert parse_assignments("t=Time_s, x = disp_mm", "--columns") == {"t": "Time_s",
                                                                        "x": "disp_mm"}
    assert parse_assignments(None, "--units") == {}
    for text, message in (("x", "expected NAME=VALUE"), ("x=", "expected NAME=VALUE"),
                          ("x=a,x=b", "'x' given twice")):
        with pytest.raises(ValueError, match=f"--columns: .*{message}"):
            parse_assignments(text, "--columns")


def test_every_unit_converts_to_its_si_unit():
    # Each factor against an independent statement of the unit.
    inch_free = {"s": 1, "ms": 0.001, "m": 1, "dm": 0.1, "cm": 0.01, "mm": 0.001, "um": 1e-6,
                 "rad": 1,
                 "deg": math.pi / 180, "N": 1, "kN": 1000, "Nm": 1, "Nmm": 0.001}
    assert {name: factor for name, (_, factor) in UNITS.items()} == pytest.approx(inch_free)


@pytest.mark.parametrize("si_unit, length, angle, unit, factor", [
    ("N/m", "mm", "deg", "N/mm", 1e-3),          # 27000 N/m is 27 N/mm
    ("N m/rad", "mm", "deg", "N m/deg", math.pi / 180),  # the moment's metre stays
    ("N m s/rad", "cm", "deg", "N m s/deg", math.pi / 180),
    ("N s/m", "um", None, "N s/um", 1e-6),
    ("m", "mm", "deg", "mm", 1e3),
    ("rad", None, "deg", "deg", 180 / math.pi),
    ("kg m^2", "mm", None, "kg mm^2", 1e6),
    ("N", "mm", "deg", "N", 1.0),
    ("N/m", None, None, "N/m", 1.0),
])
def test_parameter_units_in_a_labs_units(si_unit, length, angle, unit, factor):
    assert unit_in_lab(si_unit, length, angle) == (unit, pytest.approx(factor, rel=1e-15))


def _noisy_records(tmp_path, seed):
    # The bundled four-spring pair simulated, with tracking noise (5 um, 1e-4 rad), written
    # as si_noisy.csv in SI under spineid's names; the model's path, the table and the noisy
    # channels.
    model = spineid.dataset_path("axial_4_springs.toml")
    si = tmp_path / "si.csv"
    main(["simulate", str(model), "--out", str(si)])
    table = spineid.read_table(si)
    rng = np.random.default_rng(seed)
    noisy = {c: table[c] + rng.normal(0, 5e-6 if c != "theta" else 1e-4, table[c].size)
             for c in ("x", "y", "theta")}
    write_csv(tmp_path / "si_noisy.csv", {"t": table["t"], **noisy})
    return model, table, noisy


def test_a_fit_of_a_testers_file_equals_the_fit_of_the_same_data_in_si(tmp_path):
    model, table, noisy = _noisy_records(tmp_path, 1)
    write_csv(tmp_path / "tester.csv", {
        "Time_ms": table["t"] * 1e3, "Disp_X_mm": noisy["x"] * 1e3,
        "Disp_Y_mm": noisy["y"] * 1e3, "Rot_Z_deg": np.degrees(noisy["theta"])})
    common = ["--free", "stiffness", "--solver", "lm"]
    assert main(["fit", str(model), str(tmp_path / "si_noisy.csv"), "--out",
                 str(tmp_path / "a"), *common]) == 0
    assert main(["fit", str(model), str(tmp_path / "tester.csv"), "--out", str(tmp_path / "b"),
                 "--columns", "t=Time_ms,x=Disp_X_mm,y=Disp_Y_mm,theta=Rot_Z_deg",
                 *common]) == 0
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in "ab")
    for pa, pb in zip(a["parameters"], b["parameters"]):
        assert pb["value"] == pytest.approx(pa["value"], rel=1e-9)
        assert pb["stderr"] == pytest.approx(pa["stderr"], rel=1e-6)
    assert b["data"][0]["read_as"]["theta"] == {"column": "Rot_Z_deg", "unit": "deg",
                                                "factor": math.pi / 180, "rule": "suffix"}
    assert a["data"][0]["read_as"] is None
    # Without the mapping the tester's columns are named, not guessed.
    assert main(["fit", str(model), str(tmp_path / "tester.csv"), "--out", str(tmp_path / "c"),
                 *common]) == 2
    assert not (tmp_path / "c").exists()


def test_table_and_stiffness_read_testers_files(tmp_path, capsys):
    # table: a torsion test in degrees and N m with the tester's names, against the same data
    # in SI under spineid's names.
    rng = np.random.default_rng(3)
    angle = np.linspace(-0.1, 0.1, 200)
    moment = np.where(angle < 0.02, 40 * angle, 0.8 + 160 * (angle - 0.02))
    moment = moment + rng.normal(0, 0.05, angle.size)
    write_csv(tmp_path / "si.csv", {"displacement": angle, "load": moment})
    write_csv(tmp_path / "tester.csv", {"Rot_Y_deg": np.degrees(angle), "Torque_Nm": moment,
                                        "Specimen": ["C5-C6 #3"] * angle.size})
    # The nodes bare in each file's displacement unit (SI for `displacement`, degrees for
    # `Rot_Y_deg`), or with their unit.
    si_nodes = ["--nodes=-0.1,0.0,0.1", "--free-breakpoints"]
    assert main(["table", str(tmp_path / "si.csv"), "--out", str(tmp_path / "a"),
                 *si_nodes]) == 0
    tester = ["--displacement", "Rot_Y_deg", "--load", "Torque_Nm", "--free-breakpoints"]
    assert main(["table", str(tmp_path / "tester.csv"), "--out", str(tmp_path / "b"), *tester,
                 "--nodes=-0.1rad,0rad,0.1rad"]) == 0
    degrees = float(np.degrees(0.1))
    assert main(["table", str(tmp_path / "tester.csv"), "--out", str(tmp_path / "nodes_deg"),
                 *tester, f"--nodes=-{degrees!r},0,{degrees!r}"]) == 0
    a, b, c = (json.loads((tmp_path / d / "report.json").read_text())
               for d in ("a", "b", "nodes_deg"))
    for pa, pb, pc in zip(a["parameters"], b["parameters"], c["parameters"]):
        assert pb["value"] == pytest.approx(pa["value"], rel=1e-9, abs=1e-12)
        assert pc["value"] == pytest.approx(pa["value"], rel=1e-6, abs=1e-9)
    assert c["nodes_given_as"] == f"-{degrees:g}, 0, {degrees:g} deg, the column's unit"
    # In Python too, a fit's summary is in the test's units unless SI is asked for.
    fit = spineid.fit_load_law(spineid.read_load_displacement(
        tmp_path / "tester.csv", displacement="Rot_Y_deg", load="Torque_Nm"),
        spineid.LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True))
    assert "(in the data's units: displacement deg, load Nm;" in fit.summary()
    assert "slopes (Nm/deg)" in fit.summary()
    assert "in the data's units" not in fit.summary(si=True)
    # So is the width of the rounded corners.
    for folder, width in (("width_rad", "0.01rad"), ("width_deg", repr(float(np.degrees(0.01))))):
        assert main(["table", str(tmp_path / "tester.csv"), "--out", str(tmp_path / folder),
                     *tester, "--nodes=-0.1rad,0rad,0.1rad", "--smoothing", width]) == 0
    d, e = (json.loads((tmp_path / f / "report.json").read_text())
            for f in ("width_rad", "width_deg"))
    assert e["smoothing_given_as"].endswith("deg, the column's unit")
    assert [p["value"] for p in e["parameters"]] == pytest.approx(
        [p["value"] for p in d["parameters"]], rel=1e-6, abs=1e-9)
    assert [p["value"] for p in d["parameters"]] != pytest.approx(
        [p["value"] for p in b["parameters"]], rel=1e-6, abs=1e-9)
    # The tester's file also gets the law in its own units: the knee near 0.02 rad (1.146
    # deg), the stiffnesses 40 and 160 N m/rad (0.698 and 2.79 N m/deg).
    printed = capsys.readouterr().out.split("fitting a piecewise_linear law")[-1]
    assert "(in the data's units: displacement deg, load Nm; report.json in SI, rad, Nm)" \
        in printed
    knee = float(re.search(r"^node_displacement \(deg\): \S+ \+- \S+, (\S+)", printed,
                           re.M).group(1))
    soft, stiff = map(float, re.search(r"^slopes \(Nm/deg\): (\S+) \+- \S+, (\S+)", printed,
                                        re.M).groups())
    assert knee == pytest.approx(1.146, abs=0.1)
    assert (soft, stiff) == pytest.approx((0.698, 2.79), rel=0.05)
    assert b["data"][0]["read_as"]["displacement"]["unit"] == "deg"
    # A rotation with a force is refused.
    assert main(["table", str(tmp_path / "tester.csv"), "--out", str(tmp_path / "c"),
                 "--displacement", "Rot_Y_deg", "--load", "Torque_Nm",
                 "--units", "load=N"]) == 2
    # stiffness: loads in N and N mm, motions in mm and degrees.
    stiffness = np.diag([9e4, 2.2e5, 7.5e4, 55.0, 38.0, 70.0])
    deflections = rng.uniform(-1, 1, (24, 6)) * np.array([3e-4] * 3 + [0.03] * 3)
    test = spineid.QuasiStaticTest(deflections @ stiffness, deflections)
    spineid.write_quasi_static(tmp_path / "si_test.csv", test)
    si = spineid.read_table(tmp_path / "si_test.csv")
    names = {"Fx": "Shear_X_N", "Fy": "Shear_Y_N", "Fz": "Axial_N", "Mx": "Mx_Nmm",
             "My": "My_Nmm", "Mz": "Mz_Nmm", "dx": "dx_mm", "dy": "dy_mm", "dz": "dz_mm",
             "b1": "b1_deg", "b2": "b2_deg", "b3": "b3_deg"}
    factor = {"N": 1.0, "Nmm": 1e3, "mm": 1e3, "deg": 180 / math.pi}
    write_csv(tmp_path / "tester_test.csv", {
        column: si[name] * factor[column.rsplit("_", 1)[1]] for name, column in names.items()})
    assert main(["stiffness", str(tmp_path / "si_test.csv"), "--out", str(tmp_path / "d"),
                 "--structure", "diagonal"]) in (0, 1)
    capsys.readouterr()
    assert main(["stiffness", str(tmp_path / "tester_test.csv"), "--out", str(tmp_path / "e"),
                 "--structure", "diagonal", "--columns",
                 ",".join(f"{k}={v}" for k, v in names.items())]) in (0, 1)
    # Printed in the tester's units: 9e4 N/m is 90 N/mm, 55 N m/rad is 55e3 pi/180 Nmm/deg.
    printed = capsys.readouterr().out
    assert ("(in the test's units: forces N, moments Nmm, translations mm, rotations deg; "
            "report.json and stiffness.toml in SI)") in printed
    entries = {line.split()[0]: (float(line.split()[1]), line.split()[-1])
               for line in printed.splitlines() if line.startswith("K[")}
    assert entries["K[tx,tx]"][0] == pytest.approx(90.0, rel=1e-6)
    assert entries["K[tx,tx]"][1] == "N/mm" and entries["K[rx,rx]"][1] == "Nmm/deg"
    assert entries["K[rx,rx]"][0] == pytest.approx(55e3 * math.pi / 180, rel=1e-6)
    # The verdict's noise of each load in its column's unit too (N mm for the moments).
    verdict = printed.split("goodness of fit:", 1)[1]
    for column, unit in (("Fx", "N"), ("Mx", "Nmm"), ("Mz", "Nmm")):
        line = re.search(rf"noise model of {column}: (.*)", verdict).group(1)
        assert line.endswith((f" {unit}", f" {unit})")) and "sd" in line, verdict
    d, e = (json.loads((tmp_path / x / "report.json").read_text()) for x in "de")
    np.testing.assert_allclose(e["matrix"], d["matrix"], rtol=1e-9)
    np.testing.assert_allclose(np.diag(e["matrix"])[:4], np.diag(stiffness)[:4], rtol=1e-9)
    assert e["data"][0]["read_as"]["Mx"] == {"column": "Mx_Nmm", "unit": "Nmm", "factor": 1e-3,
                                             "rule": "suffix"}
    # A batch of such files gives each entry in the test's units too, beside SI.
    (tmp_path / "batch").mkdir()
    (tmp_path / "batch" / "tester_test.csv").write_text(
        (tmp_path / "tester_test.csv").read_text())
    assert main(["stiffness", str(tmp_path / "batch"), "--out", str(tmp_path / "f"),
                 "--structure", "diagonal", "--no-plots", "--columns",
                 ",".join(f"{k}={v}" for k, v in names.items())]) in (0, 11)
    with (tmp_path / "f" / "summary.csv").open() as file:
        row = next(csv.DictReader(file))
    for name, unit, factor in (("K[tx,tx]", "N/mm", 1e-3), ("K[rx,rx]", "Nmm/deg",
                                                             1e3 * math.pi / 180)):
        assert float(row[f"{name} ({unit})"]) == pytest.approx(float(row[name]) * factor)
        assert float(row[f"{name} ({unit}) stderr"]) == pytest.approx(
            float(row[f"{name} stderr"]) * factor)


def test_table_and_stiffness_noise_is_read_in_the_columns_units(tmp_path, capsys):
    # One rule for a bare number in every verb: in the unit of its column (N m, deg, N mm
    # here), SI for spineid's own columns; with a unit as typed; a unit of another kind refused.
    rng = np.random.default_rng(5)
    angle = np.linspace(-0.1, 0.1, 120)
    moment = 40 * angle + rng.normal(0, 0.05, angle.size)
    write_csv(tmp_path / "tester.csv", {"Rot_Y_deg": np.degrees(angle), "Torque_Nm": moment})
    table = ["table", str(tmp_path / "tester.csv"), "--displacement", "Rot_Y_deg", "--load",
             "Torque_Nm", "--law", "polynomial", "--degree", "1", "--no-plots"]
    reports = []
    for k, noise in enumerate((["--noise", "0.05", "--displacement-noise", "0.01"],
                               ["--noise", "50Nmm", "--displacement-noise", "0.01deg"])):
        assert main([*table, "--out", str(tmp_path / f"t{k}"), *noise]) in (0, 1)
        reports.append(json.loads((tmp_path / f"t{k}" / "report.json").read_text()))
    for report in reports:
        assert report["noise"] == pytest.approx(0.05, rel=1e-12)
        assert report["displacement_noise"] == pytest.approx(math.radians(0.01), rel=1e-12)
    assert reports[0]["noise_given_as"] == {"load": "0.05 Nm, the column's unit",
                                            "displacement": "0.01 deg, the column's unit"}
    assert reports[1]["noise_given_as"]["load"] == "50 Nmm"
    assert "noise given: load 0.05 Nm, the column's unit" in capsys.readouterr().out
    assert main([*table, "--out", str(tmp_path / "bad"), "--noise", "2mm"]) == 2
    assert "--noise '2mm': mm is a length, expected a moment" in capsys.readouterr().err
    # A column under spineid's own name read beside one with its unit: bare is SI.
    write_csv(tmp_path / "named.csv", {"displacement": np.degrees(angle), "load": moment})
    assert main(["table", str(tmp_path / "named.csv"), "--units", "displacement=deg", "--law",
                 "polynomial", "--degree", "1", "--no-plots", "--out", str(tmp_path / "named"),
                 "--noise", "0.05"]) in (0, 1)
    named = json.loads((tmp_path / "named" / "report.json").read_text())
    assert named["noise"] == 0.05 and named["noise_given_as"]["load"] == "0.05 N m (SI)"
    # (the moment's kind from the angle beside it; with no unit in either column, not named)
    write_csv(tmp_path / "bare.csv", {"displacement": angle, "load": moment})
    assert main(["table", str(tmp_path / "bare.csv"), "--law", "polynomial", "--degree", "1",
                 "--no-plots", "--out", str(tmp_path / "bare"), "--noise", "0.05",
                 "--displacement-noise", "1e-4"]) in (0, 1)
    bare = json.loads((tmp_path / "bare" / "report.json").read_text())["noise_given_as"]
    assert bare == {"load": "0.05 in SI (N or N m: neither column gives a unit)",
                    "displacement": "0.0001 in SI (m or rad: neither column gives a unit)"}
    # stiffness: Fx..Fz in N, moments in N mm; a bare Mx=1 is 1 N mm.
    stiffness = np.diag([9e4, 2.2e5, 7.5e4, 55.0, 38.0, 70.0])
    deflections = rng.uniform(-1, 1, (24, 6)) * np.array([3e-4] * 3 + [0.03] * 3)
    loads = deflections @ stiffness + rng.normal(0, 1, (24, 6)) * np.array([1.0] * 3 + [1e-3] * 3)
    names = ["Fx_N", "Fy_N", "Fz_N", "Mx_Nmm", "My_Nmm", "Mz_Nmm"]
    write_csv(tmp_path / "test.csv", dict(
        zip(names, (loads * np.array([1.0] * 3 + [1e3] * 3)).T),
        **dict(zip(("dx", "dy", "dz", "b1", "b2", "b3"), deflections.T))))
    columns = ",".join(f"{n.split('_')[0]}={n}" for n in names)
    for k, noise in enumerate(("Fx=1,Fy=1,Fz=1,Mx=1,My=1,Mz=1",
                               "Fx=1N,Fy=1N,Fz=1N,Mx=1Nmm,My=0.001Nm,Mz=1Nmm")):
        assert main(["stiffness", str(tmp_path / "test.csv"), "--out", str(tmp_path / f"s{k}"),
                     "--structure", "diagonal", "--columns", columns, "--noise", noise,
                     "--no-plots"]) in (0, 1)
        report = json.loads((tmp_path / f"s{k}" / "report.json").read_text())
        assert report["noise"] == pytest.approx(dict(zip(
            ("Fx", "Fy", "Fz", "Mx", "My", "Mz"), [1.0] * 3 + [1e-3] * 3)), rel=1e-12)
    assert report["noise_given_as"]["My"] == "0.001 Nm"


def test_a_named_time_column_must_exist_and_simm_angles_need_their_unit(tmp_path):
    path = write_csv(tmp_path / "law.csv", {"Rot_deg": np.degrees(X), "Torque_Nm": Y})
    with pytest.raises(ValueError, match=r"missing column\(s\) 'Tme_s' for t"):
        spineid.read_load_displacement(path, displacement="Rot_deg", load="Torque_Nm",
                                       time="Tme_s")
    read = spineid.read_load_displacement(path, displacement="Rot_deg", load="Torque_Nm")
    assert read.time is None  # (no time column named, none there: a quasi-static law)
    simm = tmp_path / "simm.mot"
    rows = "\n".join("\t".join(repr(float(v)) for v in row) for row in zip(T, X, Y, THETA))
    simm.write_text(f"name run\ndatacolumns 4\ndatarows {T.size}\nendheader\n"
                    f"time\tx\ty\ttheta\n{rows}\n")
    with pytest.raises(ValueError, match=r"'theta' \(for theta, an angle: the file has no "
                                         r"inDegrees\) is not known"):
        read_quantities(simm, TRAJECTORY)
    read = read_quantities(simm, TRAJECTORY, units={"theta": "rad"})
    np.testing.assert_array_equal(read.values["theta"], THETA)
    np.testing.assert_array_equal(read.values["x"], X)  # (lengths: OpenSim SI)


def test_noise_typed_with_units_or_in_the_columns_units_is_the_noise_in_si(tmp_path, capsys):
    # The same noise three ways: SI numbers for a file in SI; bare numbers for a tester's file
    # in mm and degrees (the columns' units); numbers with their units. One fit, one answer.
    model, table, noisy = _noisy_records(tmp_path, 4)
    write_csv(tmp_path / "tester.csv", {
        "t": table["t"], "Disp_X_mm": noisy["x"] * 1e3, "Disp_Y_mm": noisy["y"] * 1e3,
        "Rot_Z_deg": np.degrees(noisy["theta"])})
    columns = ["--columns", "x=Disp_X_mm,y=Disp_Y_mm,theta=Rot_Z_deg"]
    common = ["--free", "stiffness", "--solver", "lm"]
    runs = {"si": [str(tmp_path / "si_noisy.csv"), "--noise", "x=5e-6,y=5e-6,theta=1e-4"],
            "bare": [str(tmp_path / "tester.csv"), *columns, "--noise",
                     f"x=0.005,y=0.005,theta={math.degrees(1e-4)!r}"],
            "units": [str(tmp_path / "tester.csv"), *columns, "--noise",
                      "x=5um,y=0.005mm,theta=1e-4rad"]}
    reports, printed = {}, {}
    for name, arguments in runs.items():
        assert main(["fit", str(model), *arguments, "--out", str(tmp_path / name),
                     *common]) == 0
        printed[name] = capsys.readouterr().out
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
    for name in ("bare", "units"):
        for pa, pb in zip(reports["si"]["parameters"], reports[name]["parameters"]):
            assert pb["value"] == pytest.approx(pa["value"], rel=1e-8)
            assert pb["stderr"] == pytest.approx(pa["stderr"], rel=1e-6)
    assert "noise given: x 0.005 mm, the column's unit" in printed["bare"]
    assert reports["units"]["noise"]["given_as"] == {"x": "5 um", "y": "0.005 mm",
                                                     "theta": "0.0001 rad"}
    assert "noise given: x 5 um, y 0.005 mm, theta 0.0001 rad" in printed["units"]
    assert "noise given: x 5e-06 m (SI)" in printed["si"]
    # The summary gives each channel's noise in the unit its column was in.
    assert "noise sigma (given): x=0.005 mm, y=0.005 mm, theta=0.00573 deg" in printed["bare"]
    assert "noise sigma (given): x=5e-06 m, y=5e-06 m, theta=0.0001 rad" in printed["si"]
    # And the parameters in the data's units (N/mm for a file in mm), SI beside in the report.
    assert "parameters in the data's units (mm, deg; SI in report.json" in printed["bare"]
    assert "parameters in the data's units" not in printed["si"]
    for entry in reports["bare"]["parameters"]:
        assert entry["unit"] == "N/m"
        lab = entry["in_data_units"]
        assert lab["unit"] == "N/mm"
        assert lab["value"] == pytest.approx(entry["value"] / 1000, rel=1e-12)
        assert lab["stderr"] == pytest.approx(entry["stderr"] / 1000, rel=1e-12)
        assert f"{entry['value'] / 1000:12.6g}" in printed["bare"]
    assert "in_data_units" not in reports["si"]["parameters"][0]
    combinations = [line for line in printed["bare"].splitlines() if "combination" in line]
    assert combinations and all(line.endswith(" N/mm") for line in combinations)
    assert main(["fit", str(model), *runs["bare"], "--out", str(tmp_path / "in_si"), "--si",
                 *common]) == 0
    in_si = capsys.readouterr().out
    assert "parameters in the data's units" not in in_si and " N/mm " not in in_si
    assert f"{reports['bare']['parameters'][0]['value']:12.6g}" in in_si
    # A unit of the wrong kind, or a bare number for files whose columns disagree: refused.
    assert main(["fit", str(model), *runs["units"][:3], "--noise", "x=5deg,y=5um,theta=1e-4",
                 "--out", str(tmp_path / "wrong"), *common]) == 2
    assert "deg is an angle, expected a length" in capsys.readouterr().err


def test_a_bare_noise_for_files_whose_columns_disagree_is_refused():
    from types import SimpleNamespace

    from spineid.io._columns import noise_in_si

    def read(unit):
        return SimpleNamespace(read_as={"x": {"column": "x", "unit": unit, "rule": "suffix"}})

    # Metres and spineid's own names are both SI: a bare number is SI for both.
    assert noise_in_si({"x": "5e-6"}, [read("m"), SimpleNamespace(read_as=None)], ["x"],
                       ["m"])[0] == {"x": 5e-6}
    assert noise_in_si({"x": "5"}, [read("um"), read("um")], ["x"], ["m"])[0] == {
        "x": pytest.approx(5e-6)}
    with pytest.raises(ValueError, match="give the unit with the number"):
        noise_in_si({"x": "0.005"}, [read("mm"), read("m")], ["x"], ["m"])
    # With its unit the number means one thing whatever the files.
    assert noise_in_si({"x": "5um"}, [read("mm"), read("m")], ["x"], ["m"])[0] == {
        "x": pytest.approx(5e-6)}


@pytest.mark.parametrize("text, match", [
    ("x=5furlong", "unknown unit 'furlong'"), ("x=-5um", "positive finite"),
    ("x=abc", "expected CHANNEL=SIGMA"), ("=5um", "expected CHANNEL=SIGMA")])
def test_bad_noise_text_is_refused_in_one_line(text, match):
    from spineid.cli._arguments import parse_noise
    with pytest.raises(ValueError, match=match):
        parse_noise(text, typed=True)


def test_a_stiffness_matrix_is_shown_in_its_tests_units_only_where_each_kind_has_one():
    # matrix_units: (force, moment, length, angle) of a test's columns, SI for a column read
    # without a unit; None where all are SI or one kind's columns disagree.
    from spineid.identify._kinds._matrix_units import entry_in, matrix_units

    def read_as(**units):
        return {column: {"unit": unit} for column, unit in units.items()}

    lab = read_as(Fx="kN", Fy="kN", Fz="kN", dx="mm", dy="mm", dz="mm", b1="deg", b2="deg",
                  b3="deg")
    assert matrix_units(lab) == ("kN", "Nm", "mm", "deg")
    assert entry_in(0, 3, ("kN", "Nm", "mm", "deg")) == ("kN/deg", pytest.approx(
        math.pi / 180 / 1e3))
    assert entry_in(4, 1, ("kN", "Nmm", "mm", "deg")) == ("Nmm/mm", pytest.approx(1.0))
    assert matrix_units(dict(lab, Fz={"unit": "N"})) is None
    assert matrix_units(read_as(Fx="N", dx="m")) is None and matrix_units(None) is None


def test_a_lab_file_in_mm_takes_its_nodes_in_mm_and_says_where_they_lie_in_mm(tmp_path, capsys):
    # The README's shear tests (Disp_mm, Force_N): nodes typed bare are millimetres, and a node
    # beyond the data is reported in millimetres, as the summary around it is.
    data = spineid.dataset_path("lab_shear_tests") / "S01_Pos.csv"
    columns = ["--displacement", "Disp_mm", "--load", "Force_N", "--noise-model", "white"]
    assert main(["table", str(data), "--out", str(tmp_path / "in"), *columns,
                 "--nodes=0,1.5,2.9"]) in (0, 1)
    printed = capsys.readouterr().out
    assert "nodes given: 0, 1.5, 2.9 mm, the column's unit" in printed
    assert re.search(r"^node_displacement \(mm\): 0 \+- 0, 1\.5 \+- 0, 2\.9 \+- 0$", printed,
                     re.M)
    assert "outside the data" not in printed
    assert main(["table", str(data), "--out", str(tmp_path / "out"), *columns,
                 "--nodes=0,1.5,5mm"]) in (0, 1)
    printed = capsys.readouterr().out
    assert "nodes 5 mm lie outside the data (0 to 2.992 mm)" in printed, printed
    # So is a smoothing wider than a phase, refused.
    assert main(["table", str(data), "--out", str(tmp_path / "wide"), *columns,
                 "--nodes=0,1.5,2.9", "--smoothing", "2"]) == 2
    assert "smoothing 2 mm: expected between 0 and the shortest phase 1.4 mm" in \
        capsys.readouterr().err
    # Nodes out of order are refused as typed (once said in metres: "nodes [0.003, 0.001]").
    assert main(["table", str(data), "--out", str(tmp_path / "order"), *columns,
                 "--nodes=3,1"]) == 2
    assert ("--nodes '3,1' (read as 3, 1 mm, the column's unit): expected at least 2 "
            "increasing displacements") in capsys.readouterr().err
    assert not (tmp_path / "order").exists()


def test_a_dynamic_test_in_degrees_takes_its_inertia_with_its_unit(tmp_path, capsys):
    # A torsion test of a specimen swung fast enough that its inertia shows in the applied
    # torque (Rot_deg, Torque_Nm, Time_s): the known inertia typed in kg mm^2 is the SI one.
    t = np.linspace(0.0, 2.0, 801)
    angle = 0.1 * np.sin(2 * np.pi * 1.5 * t)  # rad
    stiffness, inertia = 2.0, 0.01  # N m/rad, kg m^2
    torque = stiffness * angle - inertia * (2 * np.pi * 1.5) ** 2 * angle
    torque = torque + np.random.default_rng(7).normal(0.0, 1e-3, t.size)
    write_csv(tmp_path / "swing.csv", {"Time_s": t, "Rot_deg": np.degrees(angle),
                                       "Torque_Nm": torque})
    columns = ["--displacement", "Rot_deg", "--load", "Torque_Nm", "--time", "Time_s",
               "--n-nodes", "2", "--noise-model", "white", "--si"]
    reports = []
    for folder, typed in (("si", "0.01"), ("mm", "10000kg mm^2")):
        assert main(["table", str(tmp_path / "swing.csv"), "--out", str(tmp_path / folder),
                     *columns, "--inertia", typed]) in (0, 1)
        reports.append(json.loads((tmp_path / folder / "report.json").read_text()))
    capsys.readouterr()
    values = [[p["value"] for p in report["parameters"]] for report in reports]
    assert values[1] == pytest.approx(values[0], rel=1e-9, abs=1e-12)
    slope = reports[0]["derived"]["slopes"][0]["value"]
    assert slope == pytest.approx(stiffness, rel=0.01)
    # A translation's unit for a rotation's inertia is refused.
    assert main(["table", str(tmp_path / "swing.csv"), "--out", str(tmp_path / "kg"),
                 *columns, "--inertia", "0.01kg"]) == 2
    assert "expected a rotation's (kg m^2) inertia" in capsys.readouterr().err
