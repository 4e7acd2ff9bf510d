"""Batches: many data files in one call, one run per file into OUT/<stem>/, summary.csv and
population.png; a failing file recorded and the batch going on; each file's result equal to
the run of that file alone; groups; folders, patterns and refusals; an interrupted batch keeping
its finished rows."""

import csv
import json
import pathlib

import numpy as np
import pytest

import spineid
from spineid.cli import _commands as verbs
from spineid.cli import main

pytestmark = pytest.mark.xdist_group("lab-data")  # (one worker: the axial fits compile once)


def law_file(path, n, slope, seed):
    # A two-phase torsion test in a tester's units (degrees, N m), n points.
    rng = np.random.default_rng(seed)
    x = np.linspace(-0.1, 0.1, n)
    y = np.where(x < 0.02, 40 * x, 0.8 + slope * (x - 0.02)) + rng.normal(0, 0.05, n)
    path.write_text("Rot_deg,Torque_Nm\n" + "".join(
        f"{float(a)!r},{float(b)!r}\n" for a, b in zip(np.degrees(x), y)))
    return path


def summary(out):
    with (out / "summary.csv").open() as file:
        return list(csv.DictReader(file))


TABLE = ["--displacement", "Rot_deg", "--load", "Torque_Nm", "--nodes=-0.1rad,0rad,0.1rad",
         "--free-breakpoints"]


def test_a_folder_of_tests_with_a_broken_file(tmp_path):
    folder = tmp_path / "tests"
    folder.mkdir()
    for i, (name, slope) in enumerate([("c5_Ant", 160), ("c6_Ant", 150), ("c5_Pos", 120)]):
        law_file(folder / f"{name}.csv", 200 + 40 * i, slope, i)
    (folder / "c7_Pos.csv").write_text("Rot_deg,Torque_Nm\n1,oops\n")
    (folder / "notes.txt").write_text("not data")
    out = tmp_path / "out"
    status = main(["table", str(folder), "--out", str(out), *TABLE, "--group", "(Ant|Pos)"])
    assert status == 11  # 10 + one file without a result
    rows = summary(out)
    assert [row["folder"] for row in rows] == ["c5_Ant", "c5_Pos", "c6_Ant", "c7_Pos"]
    assert [row["group"] for row in rows] == ["Ant", "Pos", "Ant", "Pos"]
    assert [row["status"] for row in rows] == ["ok", "ok", "ok", "failed"]
    assert "line 2, column Torque_Nm: expected a number" in rows[3]["error"]
    assert (out / "c7_Pos" / "error.txt").read_text().startswith(str(folder / "c7_Pos.csv"))
    assert (out / "c7_Pos" / "error.txt").read_text().count("c7_Pos.csv") == 1
    assert (out / "population.png").stat().st_size > 0
    marker = json.loads((out / "spineid-outputs.json").read_text())
    assert marker["complete"] and "c5_Ant/report.json" in marker["files"]
    # Each file's result equals the run of that file alone.
    alone = tmp_path / "alone"  # (without plots: the same numbers)
    assert main(["table", str(folder / "c6_Ant.csv"), "--out", str(alone), *TABLE,
                 "--no-plots"]) == 0
    assert (alone / "law.toml").is_file() and not list(alone.glob("*.png"))
    assert (out / "c6_Ant" / "law_fit.png").is_file()
    report = json.loads((alone / "report.json").read_text())
    batch_report = json.loads((out / "c6_Ant" / "report.json").read_text())
    assert batch_report["parameters"] == report["parameters"]
    for entry in report["parameters"]:
        assert float(rows[2][entry["name"]]) == entry["value"]
        assert float(rows[2][entry["name"] + " stderr"]) == entry["stderr"]
    assert "read " in (out / "c6_Ant" / "log.txt").read_text()


def test_fit_each_file_on_its_own(tmp_path):
    model = spineid.dataset_path("axial_4_springs.toml")
    assert main(["simulate", str(model), "--out", str(tmp_path / "clean.csv")]) == 0
    table = spineid.read_table(tmp_path / "clean.csv")
    for i in range(2):
        rng = np.random.default_rng(i)
        noisy = {c: table[c] + rng.normal(0, 5e-6 if c != "theta" else 1e-4, table[c].size)
                 for c in ("x", "y", "theta")}
        spineid.write_table(tmp_path / f"run{i}.csv", {"t": table["t"], **noisy})
    out = tmp_path / "out"
    assert main(["fit", str(model), str(tmp_path / "run*.csv"), "--each", "--free",
                 "stiffness", "--solver", "lm", "--out", str(out)]) == 0
    rows = summary(out)
    assert [row["folder"] for row in rows] == ["run0", "run1"]
    assert all(row["status"] == "ok" and row["explains_data"] == "true" for row in rows)
    assert (out / "run1" / "fitted.toml").is_file()
    assert rows[0]["springs[0].stiffness"] != rows[1]["springs[0].stiffness"]
    assert {p.name for p in (out / "run1").glob("*.png")} == {
        "fit.png", "residuals.png", "identifiability.png"}
    bare = tmp_path / "bare"  # the same batch without its per-file plots
    assert main(["fit", str(model), str(tmp_path / "run*.csv"), "--each", "--free",
                 "stiffness", "--solver", "lm", "--out", str(bare), "--no-plots"]) == 0
    assert summary(bare)[0]["springs[0].stiffness"] == rows[0]["springs[0].stiffness"]
    assert (bare / "run1" / "report.json").is_file() and not list(bare.glob("run*/*.png"))
    assert (bare / "population.png").is_file()
    # Two files at once on two threads: the same numbers, each file's log its own printing,
    # every figure drawn.
    threaded = tmp_path / "threaded"
    assert main(["fit", str(model), str(tmp_path / "run*.csv"), "--each", "--free",
                 "stiffness", "--solver", "lm", "--out", str(threaded), "--threads", "2"]) == 0
    for row, alone in zip(summary(threaded), rows):
        assert {k: v for k, v in row.items() if k != "seconds"} == {
            k: v for k, v in alone.items() if k != "seconds"}
    for i in range(2):
        log = (threaded / f"run{i}" / "log.txt").read_text()
        assert log.count("fitting 4 parameter(s)") == 1 and f"run{i}.csv" in log
        assert f"run{1 - i}.csv" not in log
    assert len(list(threaded.glob("run*/*.png"))) == 6
    assert main(["fit", str(model), str(tmp_path / "run*.csv"), "--each", "--free",
                 "stiffness", "--out", str(tmp_path / "no"), "--threads", "2", "--executor",
                 "dask"]) == 2  # (a Dask worker runs one file at a time)
    assert not (tmp_path / "no").exists()


def test_refusals_and_names(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.md").write_text("x")
    assert main(["table", str(empty), str(empty), "--out", str(tmp_path / "o1")]) == 2
    assert main(["table", str(tmp_path / "none*.csv"), "--out", str(tmp_path / "o2")]) == 2
    law_file(tmp_path / "a.csv", 100, 150, 0)
    assert main(["table", str(tmp_path / "a.csv"), "--out", str(tmp_path / "o3"), *TABLE,
                 "--group", "(Ant|Pos)"]) == 2  # not a batch: no groups
    assert main(["table", str(tmp_path / "a.csv"), "--out", str(tmp_path / "o6"),
                 *TABLE]) == 0  # (the same run without it)
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        law_file(tmp_path / name / "same.csv", 120, 150, 1)
    assert main(["table", str(tmp_path / "one"), str(tmp_path / "two"), "--out",
                 str(tmp_path / "o4"), *TABLE, "--group", "(x"]) == 2  # a bad pattern
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 5))
    assert (tmp_path / "o6" / "report.json").is_file()
    (tmp_path / "three").mkdir()
    law_file(tmp_path / "three" / "same-2.csv", 120, 150, 2)
    assert main(["table", str(tmp_path / "one"), str(tmp_path / "two"), str(tmp_path / "three"),
                 "--out", str(tmp_path / "o5"), *TABLE, "--group", "(xyz)|same"]) == 0
    rows = summary(tmp_path / "o5")
    assert [row["folder"] for row in rows] == ["same", "same-2", "same-2-2"]
    # (an optional group that took no part in the match: "other", not a crash of the plot)
    assert [row["group"] for row in rows] == ["other", "other", "other"]
    # A batch written into the data folder: its summary.csv is not read as data next time.
    assert main(["table", str(tmp_path / "one"), str(tmp_path / "two"), "--out",
                 str(tmp_path / "one"), "--overwrite", *TABLE]) == 0
    assert (tmp_path / "one" / "same.csv").is_file()  # (the data stay)
    assert main(["table", str(tmp_path / "one"), str(tmp_path / "two"), "--out",
                 str(tmp_path / "o7"), *TABLE]) == 0
    assert len(summary(tmp_path / "o7")) == 2


def test_options_no_file_could_make_right_refuse_the_batch_before_it_starts(tmp_path, capsys):
    # An option wrong for every file of a batch (a channel the verb's data never have, a
    # tolerance or noise in a unit no load has, a stiffness tolerance not a percentage) is one
    # line and exit 2, nothing written, as for one file: not a batch of failed files (before:
    # exit 14, summary.csv, population.png and an error.txt per file).
    tables, tests = tmp_path / "tables", tmp_path / "tests"
    tables.mkdir(), tests.mkdir()
    rng = np.random.default_rng(3)
    for k in range(2):
        law_file(tables / f"t{k}.csv", 100, 150, k)
        deflections = rng.normal(size=(40, 6)) * np.array([1e-3] * 3 + [0.05] * 3)
        spineid.write_quasi_static(tests / f"s{k}.csv", spineid.QuasiStaticTest(
            deflections @ spineid.K_F_E.T + rng.normal(size=(40, 6)), deflections))
    refused = [(["table", str(tables), *TABLE], ["--max-misfit", "3deg"], "--max-misfit"),
               (["table", str(tables), *TABLE], ["--noise", "2deg"], "--noise"),
               (["table", str(tables), *TABLE], ["--noise-model", "phi:Fq=0.5"],
                "--noise-model phi:Fq=0.5: the data have no channel 'Fq'"),
               (["stiffness", str(tests)], ["--max-misfit", "3deg"], "--max-misfit 3deg"),
               (["stiffness", str(tests)], ["--max-misfit", "40N"], "--max-misfit 40N"),
               (["stiffness", str(tests)], ["--noise-model", "phi:Fq=0.5;Fx=0.3"],
                "the channels are Fx, Fy, Fz, Mx, My, Mz")]
    capsys.readouterr()
    for k, (verb, option, said) in enumerate(refused):
        out = tmp_path / f"out{k}"
        assert main([*verb, *option, "--out", str(out), "--no-plots"]) == 2, option
        error = capsys.readouterr().err.strip()
        assert error.startswith("spineid: error: ") and said in error, error
        assert "\n" not in error and not out.exists(), option
    # What rests on a file is still each file's: a bare tolerance in its load column's unit.
    assert main(["table", str(tables), *TABLE, "--max-misfit", "0.5", "--out",
                 str(tmp_path / "bare"), "--no-plots"]) == 0
    assert main(["stiffness", str(tests), "--max-misfit", "3%", "--out",
                 str(tmp_path / "percent"), "--no-plots"]) == 0
    assert len(summary(tmp_path / "percent")) == 2


def test_an_interrupted_batch_keeps_its_finished_rows(tmp_path, monkeypatch):
    for i in range(3):
        law_file(tmp_path / f"s{i}.csv", 100 + 10 * i, 150, i)
    run, calls = verbs.command_table, []

    def interrupted_at_the_second(arguments):
        calls.append(arguments.data)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run(arguments)

    monkeypatch.setattr(verbs, "command_table", interrupted_at_the_second)
    from spineid.cli import _main
    parser = _main.build_parser
    monkeypatch.setattr(_main, "build_parser", lambda: _set_table(parser()))
    out = tmp_path / "out"
    assert main(["table", str(tmp_path / "s*.csv"), "--out", str(out), *TABLE]) == 130
    rows = summary(out)
    assert [row["folder"] for row in rows] == ["s0"] and rows[0]["status"] == "ok"
    assert not json.loads((out / "spineid-outputs.json").read_text())["complete"]
    first = (out / "s0" / "report.json").read_text()
    # Resumed: only the files not finished run (the second, where it stopped, and the third).
    calls.clear()
    monkeypatch.setattr(verbs, "command_table", lambda arguments: (
        calls.append(arguments.data), run(arguments))[1])
    assert main(["table", str(tmp_path / "s*.csv"), "--out", str(out), *TABLE,
                 "--resume"]) == 0
    assert [pathlib.Path(c).name for c in calls] == ["s1.csv", "s2.csv"]
    assert [row["folder"] for row in summary(out)] == ["s0", "s1", "s2"]
    assert (out / "s0" / "report.json").read_text() == first  # (not run again)
    marker = json.loads((out / "spineid-outputs.json").read_text())
    assert marker["complete"] and {"s0/report.json", "s2/report.json"} <= set(marker["files"])
    # Another batch (other options) is not mixed into this one; nor is --resume a batch of
    # another verb's folder, or given with --overwrite.
    assert main(["table", str(tmp_path / "s*.csv"), "--out", str(out), *TABLE[:-1],
                 "--resume"]) == 2
    assert main(["table", str(tmp_path / "s*.csv"), "--out", str(out), *TABLE, "--resume",
                 "--overwrite"]) == 2
    assert main(["table", str(tmp_path / "s0.csv"), "--out", str(tmp_path / "one"), *TABLE,
                 "--resume"]) == 2


@pytest.mark.own_process
def test_a_batch_on_two_dask_workers_equals_the_local_batch(tmp_path, capsys):
    for i in range(4):
        law_file(tmp_path / f"s{i}.csv", 100 + 10 * i, 150 - 5 * i, i)
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["table", str(tmp_path / "s*.csv"), "--out", str(local), *TABLE]) == 0
    assert main(["table", str(tmp_path / "s*.csv"), "--out", str(remote), *TABLE,
                 "--executor", "dask", "--workers", "2"]) == 0
    assert "dask local cluster of 2 worker process(es)" in capsys.readouterr().out
    here, there = summary(local), summary(remote)
    assert [r["folder"] for r in there] == [r["folder"] for r in here]
    for a, b in zip(here, there):
        for name in ("breakpoint[1]", "slope[1]", "slope[2]", "cost"):
            assert float(b[name]) == pytest.approx(float(a[name]), rel=1e-10, abs=1e-14)
    assert (remote / "s3" / "log.txt").is_file() and (remote / "population.png").is_file()
    assert main(["table", str(tmp_path / "s0.csv"), "--out", str(tmp_path / "x"), *TABLE,
                 "--executor", "dask"]) == 2  # (one file is not a batch)
    assert "only for a batch" in capsys.readouterr().err


def _set_table(parser):
    # The parser with `table` bound to the (patched) verb of the module.
    subparsers = parser._subparsers._group_actions[0].choices
    subparsers["table"].set_defaults(run=verbs.command_table)
    return parser


# The truths the bundled lab folder was made with (experiments/make_bundled_data.py prints them;
# datasets/README.md lists them): knee (mm), then the stiffness of each phase (N/mm).
LAB_TRUTH = {"S01_Pos": (1.4759, 11.738, 67.410), "S02_Ant": (1.4447, 9.744, 91.111),
             "S03_Pos": (0.9013, 9.194, 68.335), "S04_Ant": (1.0708, 14.535, 93.961),
             "S05_Pos": (1.2752, 9.299, 60.884), "S06_Ant": (1.5223, 10.438, 96.453),
             "S07_Pos": (0.9989, 12.140, 62.689), "S08_Ant": (1.1484, 10.198, 96.767)}


def test_the_readmes_lab_workflow_on_the_bundled_folder(tmp_path, capsys):
    # The README's one command: a folder of a tester's files (its own column names, mm and N)
    # in; per-specimen fits, summary.csv with each specimen's knee and phase stiffnesses, and
    # the population plot out. Each recovers its truth within four standard errors.
    out = tmp_path / "shear"
    folder = spineid.dataset_path("lab_shear_tests")
    assert main(["table", str(folder), "--displacement", "Disp_mm", "--load", "Force_N",
                 "--n-nodes", "3", "--free-breakpoints", "--group", "(Ant|Pos)",
                 "--out", str(out)]) == 0
    assert "8 of 8 files accepted" in capsys.readouterr().out
    with open(out / "summary.csv", newline="") as handle:
        rows = {row["folder"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == sorted(LAB_TRUTH)
    for name, (knee, soft, stiff) in LAB_TRUTH.items():
        row = rows[name]
        assert row["group"] == name[-3:] and row["status"] == "ok"
        for column, truth in (("breakpoint[1]", knee * 1e-3), ("slope[1]", soft * 1e3),
                              ("slope[2]", stiff * 1e3), ("breakpoint[1] (mm)", knee),
                              ("slope[1] (N/mm)", soft), ("slope[2] (N/mm)", stiff)):
            assert abs(float(row[column]) - truth) <= 4 * float(row[f"{column} stderr"]) \
                + 1e-4 * truth, (name, column)
        assert (out / name / "law_fit.png").is_file() and (out / name / "law.toml").is_file()
    assert (out / "population.png").stat().st_size > 20_000


def test_files_read_in_different_units_are_said_and_listed():
    # Each file is converted to SI, so its results compare; a batch whose files came in
    # different units says so once and lists each file's reading in summary.csv's `units`.
    from spineid.cli._batch import _mixed_units, _units_read

    def report(unit):
        return {"data": [{"source": "f.csv", "read_as": {
            "displacement": {"column": f"Disp_{unit}", "unit": unit, "rule": "suffix"},
            "load": {"column": "Force_N", "unit": "N", "rule": "suffix"}}}]}

    assert _units_read(report("mm")) == "displacement=Disp_mm [mm]; load=Force_N [N]"
    assert _units_read({"data": [{"source": "f.csv", "read_as": None}]}) == "SI"
    rows = [{"units": _units_read(report(unit))} for unit in ("mm", "mm", "m")] + [
        {"units": "SI"}, {}]
    note = _mixed_units(rows)
    assert note.startswith("note: the files were read in different units")
    assert "displacement in mm (2 files), m (1 files)" in note and "load in" not in note
    assert _mixed_units(rows[:2]) is None


def test_a_fits_parameters_in_the_data_units_reach_summary_csv_and_the_population_plot(
        tmp_path, monkeypatch):
    # A trajectory fit of data in mm reports its stiffness in N/mm beside SI (`in_data_units`):
    # summary.csv gets both columns, the population plot draws the N/mm one alone.
    import matplotlib.axes

    from spineid.cli._batch import _summary_row

    report = {"converged": True, "goodness_of_fit": {}, "parameters": [
        {"name": "springs[0].stiffness", "value": 27000.0, "stderr": 30.0, "unit": "N/m",
         "in_data_units": {"unit": "N/mm", "value": 27.0, "stderr": 0.03, "start": 25.0}},
        {"name": "upper.mass", "value": 0.5, "stderr": 0.01, "unit": "kg"}]}
    row = _summary_row("f.csv", "f", "", "ok", 1.0, report, None, "fit")
    assert (row["springs[0].stiffness"], row["springs[0].stiffness stderr"]) == (27000.0, 30.0)
    assert (row["springs[0].stiffness (N/mm)"],
            row["springs[0].stiffness (N/mm) stderr"]) == (27.0, 0.03)
    titles = []
    original = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda axis, text, *a, **k: titles.append(text) or original(
                            axis, text, *a, **k))
    spineid.plot_population([row, dict(row, folder="g")], tmp_path / "population.png")
    assert titles == ["upper.mass", "springs[0].stiffness (N/mm)"]
    # A file of the batch in SI (no column in N/mm) keeps the SI panel, which holds every file.
    in_si = {k: v for k, v in row.items() if "(N/mm)" not in k}
    titles.clear()
    spineid.plot_population([row, dict(in_si, folder="g")], tmp_path / "population.png")
    assert titles == ["springs[0].stiffness", "upper.mass", "springs[0].stiffness (N/mm)"]
