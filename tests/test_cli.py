"""The command line, run as a user would (in-process for speed)."""

import pathlib
import re

import numpy as np
import pytest

import spineid
from spineid.cli import main


def test_simulate_writes_trajectory(tmp_path, capsys):
    out = tmp_path / "traj.csv"
    assert main(["simulate", str(spineid.dataset_path("liu_8_springs.toml")), "--out", str(out)]) == 0
    ts, poses = spineid.read_trajectory(out)
    assert len(ts) == 501 and ts[-1] == pytest.approx(0.5)
    assert np.ptp(poses[:, 2]) > 1e-3
    # The line docs/cli.md shows (its capitals placeholders for the run's own values).
    cli = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    sample = cli.split("prints one line", 1)[1].split("```", 2)[1].strip()
    pattern = re.escape(sample)
    for placeholder, value in (("MODEL\\.toml", r"\S*liu_8_springs\.toml"),
                               ("STEPS", r"\d+"), ("SECONDS", r"[\d.]+"),
                               ("MODEL_trajectory\\.csv", r"\S*traj\.csv")):
        assert placeholder in pattern, placeholder
        pattern = pattern.replace(placeholder, value)
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(pattern, printed), (sample, printed)


def test_simulate_bad_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('kind = "planar_pair"\n[lower]\npose=[0,0,0]\nfixed=true\n'
                    '[upper]\nmass=-1\ninertia=1\npose=[0,0,0]\n')
    assert main(["simulate", str(path)]) == 2
    assert "upper.mass" in capsys.readouterr().err


def test_simulate_that_fails_says_why_in_one_line_and_writes_nothing(tmp_path, capsys):
    # A stiffness of 2.7e15 N/m makes the explicit solver take ~1e5 steps: the step limit.
    text = spineid.dataset_path("axial_4_springs.toml").read_text()
    path = tmp_path / "stiff.toml"
    path.write_text(text.replace("stiffness = 27000.0", "stiffness = 2.7e15", 1))
    out = tmp_path / "motion.csv"
    assert main(["simulate", str(path), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert "maximum number of solver steps" in error and "requested 0 to 0.5 s" in error
    assert not out.exists()


def test_demo_writes_trajectories_and_plots(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    for name in ("liu_8_springs.csv", "liu_16_springs.csv", "trajectories.png",
                 "liu_8_springs_model.png"):
        assert (tmp_path / name).stat().st_size > 0
    printed = capsys.readouterr().out
    assert "liu_16_springs" in printed and "warm" in printed
    # The demo also fits the bundled measurement and gives the identifiability verdict.
    assert "rank 3 of 16" in printed and "total_stiffness" in printed
    assert (tmp_path / "fit_liu_16_springs" / "report.json").stat().st_size > 0
    # The fitted model says which of its values the data did not determine.
    fitted = (tmp_path / "fit_liu_16_springs" / "fitted.toml").read_text()
    assert fitted.startswith("# Not determined by the data one by one")
    assert "springs[15].stiffness" in fitted.splitlines()[0]
    assert spineid.load_model_file(tmp_path / "fit_liu_16_springs" / "fitted.toml")
    # The README's sample of what the demo prints is what it prints (its lines, "..." for
    # those left out).
    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    sample = readme.split("the fit says so:", 1)[1].split("```", 2)[1]
    lines = [line for line in sample.splitlines() if line.strip() not in ("", "...")]
    assert len(lines) >= 5
    for line in lines:
        assert line in printed, line


def test_console_entry_point_runs_outside_the_source_tree(tmp_path):
    # From another folder, `python -m spineid` imports the installed package: with a wheel
    # install (as the README's commands do) this checks that the bundled data ship inside it.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "spineid", "simulate",
         str(spineid.dataset_path("liu_16_springs.toml")), "--out", "traj.csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "traj.csv").stat().st_size > 0
    # The process's exit status is the verb's: 2 for refused input, with its one line.
    refused = subprocess.run([sys.executable, "-m", "spineid", "simulate", "missing.toml", "--out",
                              "other.csv"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert refused.returncode == 2 and "missing.toml" in refused.stderr, refused.stderr
    assert not (tmp_path / "other.csv").exists()
    listed = subprocess.run(
        [sys.executable, "-c", "import spineid; print(spineid.dataset_path('liu_8_springs.toml'))"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert listed.returncode == 0 and listed.stdout.strip().endswith("liu_8_springs.toml")


def test_fit_writes_model_report_and_plots(tmp_path, capsys):
    import json

    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    # Start 20% off the truth, from a copy of the model file.
    text = model.read_text().replace("stiffness = 27000.0", "stiffness = 32000.0")
    start = tmp_path / "start.toml"
    start.write_text(text)
    out = tmp_path / "fit"
    code = main(["fit", str(start), str(data), "--free", "stiffness", "--noise",
                 "x=5e-6,y=5e-6,theta=1.7e-4", "--out", str(out)])
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["converged"] and report["n_data"] == 3 * 501
    assert {"cost", "parameters", "identifiability"} <= set(report)
    first = report["parameters"][0]
    assert first["name"] == "springs[0].stiffness"
    assert first["value"] == pytest.approx(27000.0, rel=1e-6) and first["stderr"] > 0
    assert report["identifiability"]["rank"] == 4
    for name in ("fit.png", "residuals.png", "identifiability.png"):
        assert (out / name).stat().st_size > 0
    # fitted.toml has the same schema and the identified values: it simulates back to the data.
    refit = spineid.load_model_file(out / "fitted.toml")
    assert refit.parameters[0].get(refit.model) == pytest.approx(27000.0, rel=1e-6)
    printed = capsys.readouterr().out
    assert re.search(r"^  lm: \d+ step\(s\), cost ", printed, re.MULTILINE)
    assert "LM step" not in printed  # (every step only with --steps)
    code = main(["fit", str(start), str(data), "--free", "stiffness", "--noise",
                 "x=5e-6,y=5e-6,theta=1.7e-4", "--out", str(tmp_path / "steps"), "--steps"])
    assert code == 0 and "LM step 1: cost" in capsys.readouterr().out


def test_a_fit_whose_cost_overflows_writes_nothing(tmp_path, capsys):
    # One data cell of 1e300: the residuals overflow. Before, report.json said converged with
    # cost Infinity and fitted.toml held the start; now nothing is written and the reason is
    # one line (status 2).
    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    lines = data.read_text().splitlines()
    cells = lines[100].split(",")
    cells[1] = "1e300"  # (a length no test reaches: refused before the fit, naming it)
    lines[100] = ",".join(cells)
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "fit"
    arguments = ["fit", str(model), str(data), "--free", "stiffness", "--solver", "lm",
                 "--out", str(out), "--noise"]
    assert main([*arguments, "x=5e-6,y=5e-6,theta=1.7e-4"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "x = 1e+300 at sample 100" in error
    cells[1] = "1e5"  # (within the limit, but divided by a noise of 1e-160: it overflows)
    lines[100] = ",".join(cells)
    data.write_text("\n".join(lines) + "\n")
    assert main([*arguments, "x=1e-160,y=5e-6,theta=1.7e-4"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "non-finite number (cost)" in error
    assert not out.exists()  # nothing written, not even the folder


@pytest.mark.parametrize("solver, noise", [
    ("lm", ["--noise", "x=5e-6,y=5e-6,theta=1.7e-4"]),
    ("adam", ["--noise", "x=5e-6,y=5e-6,theta=1.7e-4"]),
    ("adam", []),  # the noise estimate must not start the solver again from there
])
def test_a_fit_from_a_start_that_cannot_be_simulated_writes_nothing(tmp_path, capsys, solver,
                                                                    noise):
    # A start of 2.7e11 N/m: the explicit integrator hits its step limit at every trial point.
    # Before, fitted.toml and fit.png were written, then a matplotlib error (lm), or nothing
    # was printed for minutes (adam: 2000 reverse-mode steps); now one line, soon.
    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    start = tmp_path / "far.toml"
    start.write_text(model.read_text().replace("stiffness = 27000.0", "stiffness = 2.7e11"))
    out = tmp_path / "fit"
    code = main(["fit", str(start), str(data), "--free", "stiffness", *noise,
                 "--solver", solver, "--out", str(out)])
    assert code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "the simulation fails at the parameters" in error
    assert not out.exists()  # nothing written, not even the folder


def test_fit_with_unknown_group_is_a_clear_error(tmp_path, capsys):
    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    main(["simulate", str(model), "--out", str(data)])
    code = main(["fit", str(model), str(data), "--free", "bushing.stiffness", "--out",
                 str(tmp_path / "fit")])
    assert code == 2
    assert "no such parameter group" in capsys.readouterr().err
    assert main(["fit", str(model), str(data), "--free", "stiffness", "--noise", "x:1",
                 "--out", str(tmp_path / "fit")]) == 2


@pytest.mark.parametrize("verb", [
    ["table", "DATA"], ["stiffness", "DATA"], ["fit", "MODEL", "DATA", "--free", "stiffness"],
    ["demo"], ["database"], ["whiplash"], ["segment"], ["recover", "MODEL", "DATA"],
])
def test_an_output_place_that_cannot_be_used_is_refused_before_any_work(tmp_path, capsys,
                                                                         verb):
    # An existing file as the output folder: one line naming it, exit 2, before the inputs
    # are even read (DATA and MODEL do not exist).
    blocked = tmp_path / "taken"
    blocked.write_text("keep me")
    arguments = [str(tmp_path / a) if a in ("DATA", "MODEL") else a for a in verb]
    assert main(arguments + ["--out", str(blocked)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "taken: an existing file, not a folder" in error
    assert blocked.read_text() == "keep me"


def test_simulate_output_file_is_checked_and_its_folder_created(tmp_path, capsys):
    model = spineid.dataset_path("axial_4_springs.toml")
    assert main(["simulate", str(model), "--out", str(tmp_path)]) == 2
    assert "a folder; give a file name" in capsys.readouterr().err
    nested = tmp_path / "new" / "deeper" / "motion.csv"
    assert main(["simulate", str(model), "--out", str(nested)]) == 0
    assert nested.read_text().startswith("t,x,y,theta\n")  # (plain CSV: the header first)


def test_os_errors_are_one_line(tmp_path, capsys):
    # A folder given as the data file: the operating system's reason, with the path.
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(tmp_path) in error and "Traceback" not in error


def test_a_stop_sent_again_once_or_until_answered(monkeypatch):
    # The resender behind lost stops: once after its delay, or again and again until the run
    # answers, one repeating sender per run and signal, nothing once the run has ended.
    import signal
    import time

    from spineid.cli import _main

    received = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    monkeypatch.setattr(_main, "_RUN_NUMBER", [12345])
    monkeypatch.setattr(_main, "_persisting", set())
    _main._RUNNING.set()
    try:
        _main._resend(signal.SIGUSR1, 0.02)
        time.sleep(0.3)
        assert received == [signal.SIGUSR1]
        _main._resend(signal.SIGUSR1, 0.02, repeat=True)
        _main._resend(signal.SIGUSR1, 0.02, repeat=True)  # (the same run: no second sender)
        assert _main._persisting == {(12345, signal.SIGUSR1)}
        deadline = time.monotonic() + 10.0
        while len(received) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(received) >= 4  # (sent again and again)
        _main._ANSWERING.set()
        time.sleep(0.2)  # (a send under way lands)
        sent = len(received)
        time.sleep(0.2)
        assert len(received) == sent  # (answered: no more)
    finally:
        _main._ANSWERING.clear()
        _main._RUNNING.clear()
        signal.signal(signal.SIGUSR1, previous)


def test_the_console_stopped_by_sigterm_ends_with_143_and_one_line(tmp_path):
    # The console ends a stopped run at once (`os._exit`), not through the interpreter's
    # teardown, where native threads of the computation cut short may still run (an abort,
    # "pure virtual method called", was seen once): status 143 and one line, every time.
    import signal
    import subprocess
    import sys
    import time

    process = subprocess.Popen([sys.executable, "-m", "spineid", "segment", "--out", "seg"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().startswith("spineid segment:")  # (at work now)
    time.sleep(1.0)
    clock = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, error = process.communicate(timeout=120)
    assert process.returncode == 143, error[-2000:]
    assert error.startswith("spineid: terminated;") and error.count("\n") == 1, error[-2000:]
    assert time.monotonic() - clock < 60


@pytest.mark.parametrize("stop, status, word", [
    (lambda: (_ for _ in ()).throw(KeyboardInterrupt), 130, "interrupted"),
    (lambda: __import__("os").kill(__import__("os").getpid(),
                                   __import__("signal").SIGTERM), 143, "terminated"),
])
def test_interrupt_and_sigterm_end_with_one_line_and_no_partial_file(tmp_path, capsys,
                                                                      monkeypatch, stop,
                                                                      status, word):
    import threading

    from spineid.cli import _commands
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    target = tmp_path / "out" / "report.json"

    def interrupted_while_writing(arguments):
        target.parent.mkdir()
        with spineid.io.atomic_path(target) as temporary:
            temporary.write_text("{half")
            stop()
            import time
            time.sleep(5)  # the signal arrives here at the latest
        return 0

    monkeypatch.setattr(_commands, "command_demo", interrupted_while_writing)
    assert main(["demo", "--out", str(tmp_path / "out")]) == status
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and word in error
    assert list((tmp_path / "out").iterdir()) == []  # neither report.json nor a temporary


@pytest.mark.parametrize("arguments, message", [
    (["fit", "M", "D", "--free", "s", "--out", "o", "--max-steps", "0"],
     "--max-steps: '0': expected a whole number >= 1"),
    (["fit", "M", "D", "--free", "s", "--out", "o", "--starts", "-1"], "--starts"),
    (["fit", "M", "D", "--free", "s", "--out", "o", "--seed", "-1"], "--seed"),
    (["table", "D", "--out", "o", "--inertia", "-1"], "--inertia: '-1': expected an inertia >= 0"),
    (["table", "D", "--out", "o", "--inertia", "2N"], "--inertia: '2N': expected an inertia >= 0"),
    (["table", "D", "--out", "o", "--degree", "0"], "--degree"),
    (["table", "D", "--out", "o", "--n-nodes", "1"], "--n-nodes"),
    (["whiplash", "--t-end", "nan"], "--t-end"),
    (["whiplash", "--t-end", "1e5"], "at most 600"),
    (["whiplash", "--rtol=-1e-5"], "--rtol"),
    (["whiplash", "--rtol", "0"], "--rtol"),
    (["whiplash", "--integrator", "rk4"], "expected one of kvaerno4, kvaerno5, mebdf"),
    (["segment", "--force", "-3"], "--force"),
    (["recover", "M", "D", "--out", "o", "--grid", "1"], "--grid"),
    (["fit", "M", "D", "--free", "s", "--out", "o", "--starts", "1000000000"],
     "from 1 to 10000"),
    (["recover", "M", "D", "--out", "o", "--grid", "100000"], "from 2 to 2000"),
    (["design", "D", "--out", "o", "--validate", "100000"], "from 2 to 10000"),
])
def test_option_values_out_of_range_are_refused_before_any_work(arguments, message, capsys,
                                                                tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(arguments)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_a_noise_channel_given_twice_is_refused(tmp_path, capsys):
    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    data.write_text("t,x,y,theta\n0,0,0,0\n0.1,0,0,0\n")
    code = main(["fit", str(model), str(data), "--free", "stiffness", "--noise",
                 "x=5e-6,x=1,y=1,theta=1", "--out", str(tmp_path / "out")])
    assert code == 2 and "channel 'x' is given twice" in capsys.readouterr().err


@pytest.mark.parametrize("verb, noise", [
    ("fit", "x=-1,y=1,theta=1"), ("fit", "x=nan,y=1,theta=1"),
    ("stiffness", "Fx=nan,Fy=1,Fz=1,Mx=1,My=1,Mz=1"), ("stiffness", "Fx=0,Fy=1,Fz=1,Mx=1,My=1,Mz=1"),
])
def test_a_noise_that_is_not_a_positive_finite_number_is_refused_by_name(verb, noise, tmp_path,
                                                                        capsys):
    # (stiffness with Fx=nan said "SVD did not converge in Linear Least Squares")
    data = tmp_path / "data.csv"
    if verb == "fit":
        data.write_text("t,x,y,theta\n0,0,0,0\n0.1,0,0,0\n")
        arguments = ["fit", str(spineid.dataset_path("axial_4_springs.toml")), str(data),
                     "--free", "stiffness"]
    else:
        data.write_text("Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3\n" + "1,0,0,0,0,0,1e-3,0,0,0,0,0\n" * 4)
        arguments = ["stiffness", str(data)]
    assert main([*arguments, "--noise", noise, "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "expected a positive finite standard deviation" in error
    assert noise.split(",")[0] in error and not (tmp_path / "out").exists()


def test_hostile_inputs_get_one_line_each(tmp_path, capsys, monkeypatch):
    # A storage file without its header's end names its first line; a time limit beyond any
    # timer is refused by the option; a C3D file without the optional extra gets the install
    # hint in one line, no traceback.
    model = str(spineid.dataset_path("axial_4_springs.toml"))
    storage = tmp_path / "motion.sto"
    storage.write_text("not a storage header\ntime\tx\n0\t0\n")
    assert main(["fit", model, str(storage), "--free", "stiffness", "--out",
                 str(tmp_path / "a")]) == 2
    error = capsys.readouterr().err
    assert "its first line: 'not a storage header'" in error and "{" not in error
    try:
        status = main(["simulate", model, "--out", str(tmp_path / "m.csv"), "--time-limit",
                       "1e308"])
    except SystemExit as stop:
        status = stop.code
    assert status == 2 and "--time-limit" in capsys.readouterr().err
    monkeypatch.setitem(__import__("sys").modules, "c3d", None)  # (import c3d fails)
    markers = tmp_path / "trial.c3d"
    markers.write_bytes(b"\x00" * 512)
    assert main(["fit", model, str(markers), "--free", "stiffness", "--markers",
                 "upper=A,B,C;lower=D,E,F", "--out", str(tmp_path / "b")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "pip install 'spineid[c3d]'" in error
    assert "Traceback" not in error
    # NaN among the nodes is the nodes' fault, not the smoothing's.
    table = tmp_path / "law.csv"
    table.write_text("displacement,load\n" + "".join(f"{x},{2 * x}\n" for x in range(10)))
    assert main(["table", str(table), "--nodes=0,nan,9", "--unit", "mm", "--out",
                 str(tmp_path / "c")]) == 2
    assert "--nodes 'nan': expected a number" in capsys.readouterr().err


def test_overwrite_never_replaces_the_runs_input_or_what_is_not_a_file(tmp_path, capsys):
    model = tmp_path / "m.toml"
    model.write_text(spineid.dataset_path("axial_4_springs.toml").read_text())
    before = model.read_text()
    assert main(["simulate", str(model), "--out", str(model), "--overwrite"]) == 2
    assert "the run's own input" in capsys.readouterr().err
    assert model.read_text() == before
    import os
    pipe = tmp_path / "pipe.csv"
    os.mkfifo(pipe)
    assert main(["simulate", str(model), "--out", str(pipe), "--overwrite"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert not pipe.is_file()
    # Nor a file the model reads its loads from.
    (tmp_path / "loads.csv").write_text("t,Fx\n0,0\n0.5,6\n")
    text = before.split("[[loads]]")[0] + '[[loads]]\nloads_file = "loads.csv"\n'
    if "[simulation]" in before:
        text += "[simulation]" + before.split("[simulation]", 1)[1]
    model.write_text(text)
    assert main(["simulate", str(model), "--out", str(tmp_path / "loads.csv"),
                 "--overwrite"]) == 2
    assert "the run's own input" in capsys.readouterr().err
    assert (tmp_path / "loads.csv").read_text() == "t,Fx\n0,0\n0.5,6\n"


def test_a_table_fit_of_a_testers_file_prints_its_numbers_in_the_files_units(tmp_path, capsys):
    # A shear test in mm and N: the summary's parameters, node displacements and slopes in mm,
    # N and N/mm (said in a line), each the report's SI value converted; --si prints SI.
    import json

    data = spineid.dataset_path("lab_shear_tests") / "S01_Pos.csv"
    arguments = ["table", str(data), "--displacement", "Disp_mm", "--load", "Force_N",
                 "--n-nodes", "3", "--free-breakpoints", "--no-plots"]
    assert main(arguments + ["--out", str(tmp_path / "lab"), "--profile", "gap[1]"]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "lab" / "report.json").read_text())
    # The profile interval in mm too, around the value the summary prints.
    interval = report["profiles"][0]
    line = re.search(r"^gap\[1\]: 95% profile interval \[([\d.]+), ([\d.]+)\] mm around "
                     r"([\d.]+)", printed, re.M)
    assert line, printed
    assert [float(v) for v in line.groups()] == pytest.approx(
        [1e3 * interval["interval"][0], 1e3 * interval["interval"][1],
         1e3 * interval["value"]], rel=1e-5)
    assert "(in the data's units: displacement mm, load N; report.json in SI, m, N)" in printed
    gap = next(p for p in report["parameters"] if p["name"] == "gap[1]")
    row = next(line for line in printed.splitlines() if line.startswith("gap[1] ")).split()
    assert float(row[2]) == pytest.approx(1e3 * gap["value"], rel=1e-5) and row[-1] == "mm"
    assert float(row[3]) == pytest.approx(1e3 * gap["stderr"], rel=1e-2)
    slopes = re.search(r"^slopes \(N/mm\): ([\d.]+) \+- ([\d.]+), ([\d.]+)", printed, re.M)
    assert slopes, printed
    for printed_value, entry in zip(map(float, slopes.group(1, 3)), report["derived"]["slopes"]):
        assert printed_value == pytest.approx(entry["value"] / 1e3, rel=1e-3)
    knee = re.search(r"^node_displacement \(mm\): 0 \+- 0, ([\d.]+)", printed, re.M)
    assert float(knee.group(1)) == pytest.approx(
        1e3 * report["derived"]["node_displacement"][1]["value"], rel=1e-3)
    # The verdict's noise and misfit in the file's units too.
    noise = report["goodness_of_fit"]["noise_model"]["load"]["sd"]
    assert f"noise model of load: white, sd {noise:.3g} N\n" in printed
    assert re.search(r"misfit of load: smooth part RMS [\d.e-]+ N \(", printed), printed
    assert main(arguments + ["--out", str(tmp_path / "si"), "--si"]) == 0
    printed = capsys.readouterr().out
    assert "data's units" not in printed and re.search(r"^slopes: [\d.]+e\+04", printed, re.M)
    assert f"noise model of load: white, sd {noise:.3g}\n" in printed
    # A file in SI units (Disp_m, Force_N) names them: m and N, no line about the units.
    rows = np.genfromtxt(data, delimiter=",", names=True)
    np.savetxt(tmp_path / "si.csv", np.stack([rows["Disp_mm"] / 1e3, rows["Force_N"]], 1),
               delimiter=",", header="Disp_m,Force_N", comments="")
    assert main(["table", str(tmp_path / "si.csv"), "--displacement", "Disp_m", "--load",
                 "Force_N", "--n-nodes", "3", "--free-breakpoints",
                 "--no-plots", "--out", str(tmp_path / "named")]) == 0
    printed = capsys.readouterr().out
    assert "data's units" not in printed and f"white, sd {noise:.3g} N\n" in printed
    assert next(line for line in printed.splitlines() if line.startswith("gap[1] ")).split()[
        -1] == "m"


@pytest.mark.parametrize("arguments, attribute, value", [
    (["segment", "--moment", "1800Nmm"], "moment", 1.8),
    (["segment", "--moment", "1.8"], "moment", 1.8),
    (["segment", "--force", "0.02kN"], "force", 20.0),
    (["spine", "flexibility", "--moment", "7500 Nmm"], "moment", 7.5),
    (["spine", "instrument", "--levels", "L1,T12", "--diameter", "0.55cm"], "diameter", 5.5),
    (["recover", "m.toml", "d.csv", "--out", "o", "--max-stiffness", "50N/mm"],
     "max_stiffness", 5e4),
    (["recover", "m.toml", "d.csv", "--out", "o", "--max-stiffness", "1e5"],
     "max_stiffness", 1e5),
    (["segment", "--force", "1E2"], "force", 100.0),
    (["whiplash", "--t-end", "300ms"], "t_end", 0.3),
])
def test_options_stated_in_a_unit_take_a_number_with_its_unit(arguments, attribute, value):
    # Every number a user types can carry its unit: an option in N m takes 1800Nmm, one in mm
    # takes 0.55cm; a bare number stays in the option's own unit.
    from spineid.cli import build_parser

    parsed = build_parser().parse_args(arguments)
    assert getattr(parsed, attribute) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("arguments, attribute, value", [
    (["table", "d.csv", "--nodes", "-6,-2,2,6", "--out", "o"], "nodes", "-6,-2,2,6"),
    (["table", "d.csv", "--smoothing", "-.5"], None, "--smoothing: '-.5': expected a non-neg"),
    (["table", "d.csv", "--max-misfit", "-2%"], None, "--max-misfit: '-2%': expected a positive"),
    (["segment", "--moment", "-1.5Nm"], None, "expected a positive number"),
])
def test_an_option_value_with_a_minus_sign_is_the_options(arguments, attribute, value, capsys):
    # Argparse takes `-6,-2,2,6` for an option: the value is joined to its option first, so
    # that nodes left of zero parse and a negative number is refused by the option's own rule.
    from spineid.cli import build_parser
    from spineid.cli._main import _signed_values

    assert _signed_values(["fit", "--", "-1.csv"]) == ["fit", "--", "-1.csv"]
    if attribute is not None:
        assert getattr(build_parser().parse_args(_signed_values(arguments)), attribute) == value
        return
    with pytest.raises(SystemExit):
        build_parser().parse_args(_signed_values(arguments))
    assert value in capsys.readouterr().err


@pytest.mark.parametrize("arguments, message", [
    (["segment", "--moment", "3N"], "N is not a unit of N m"),
    (["segment", "--force", "2deg"], "deg is not a unit of N"),
    (["spine", "flexibility", "--moment", "2000000Nmm"], "at most 1000 N m"),
    (["segment", "--moment=-1Nm"], "expected a positive number"),
    (["segment", "--moment", "2Nm/deg"], "Nm/deg is not a unit of N m"),
    (["segment", "--force", "1 N/rad"], "N/rad is not a unit of N"),
    (["segment", "--force", "3 lbf"], "unknown unit 'lbf'"),
])
def test_a_number_with_a_unit_of_another_kind_is_refused(arguments, message, capsys):
    from spineid.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(arguments)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("0,1.5mm,3", "some values with a unit and some bare"),
    ("0,1.5,3,", "an empty value"),
    ("0,1mm,0.1deg", "values of two kinds"),
])
def test_values_typed_for_a_column_without_a_unit_are_of_one_kind_and_all_given(text, message):
    # (`table --nodes` for a file whose displacement column has no unit: SI or all typed)
    from spineid.cli._arguments import column_values

    with pytest.raises(ValueError, match=re.escape(message)):
        column_values(text, "--nodes", None, ("m", "rad"))
    values, how = column_values("0mm,1.5mm,3mm", "--nodes", None, ("m", "rad"))
    assert list(values) == pytest.approx([0.0, 1.5e-3, 3e-3]) and how == "0, 1.5, 3 mm"


def test_an_inertia_is_read_in_the_kind_of_the_displacement():
    # `table --inertia`: kg m^2 for a rotation, kg for a translation, bare or with its unit.
    from spineid.cli._arguments import inertia_in_si

    assert inertia_in_si("120kg mm^2", True) == pytest.approx(1.2e-4)
    assert inertia_in_si("0.4", True) == inertia_in_si("0.4", False) == 0.4
    assert inertia_in_si("0.4kg", None) == 0.4 and inertia_in_si("2 kg m^2", None) == 2.0
    with pytest.raises(ValueError, match="a rotation's"):
        inertia_in_si("0.4kg", True)
    with pytest.raises(ValueError, match="a translation's"):
        inertia_in_si("1 kg m^2", False)


@pytest.mark.parametrize("message, shown", [
    ("noise_model ar:4: the shortest record has 30 samples",
     "--noise-model ar:4: the shortest record has 30 samples"),
    ("noise ar:3: with displacement_noise (errors in both variables)",
     "--noise-model ar:3: with --displacement-noise (errors in both variables)"),
    ("noise phi:0.5: no channel 'theta'", "--noise-model phi:0.5: no channel 'theta'"),
    ("max_misfit: expected a percentage", "--max-misfit: expected a percentage"),
    ("noise_max: unknown channel(s) ['z']", "--noise-max: unknown channel(s) ['z']"),
    ("(noise_model white): not looked for", "(--noise-model white): not looked for"),
    ("displacement_noise=-1.0: expected", "--displacement-noise=-1.0: expected"),
    ("may serve better: noise='white'.", "may serve better: --noise-model white."),
    # left as they are: file names and folders, quoted column names, longer names, prose
    *[(text, text) for text in (
        "noise_model.csv: a segment fit needs", "noise_max-2.csv: bad", "runs/noise_model/a.sto",
        "C:\\data\\noise_model.csv: bad", "no column 'noise_max'", "my_noise_model: x",
        "noise_model_x", "the noise estimated from the residuals", "the noise: 5")],
    ("noise: x=0.0: expected a positive number", "--noise: x=0.0: expected a positive number"),
    ("a long ridge; draw more (samples=...) and", "a long ridge; draw more (--samples N) and"),
    ("the simulation ends at 0.01 s, before the pulse does (0.1 s)",
     "--t-end: the simulation ends at 0.01 s, before the pulse does (0.1 s)"),
    ("Rod levels ('L1',): expected at least two", "--levels ('L1',): expected at least two"),
])
def test_a_fit_functions_message_names_the_commands_options(message, shown):
    # The fit functions name their Python arguments; the command line shows its options.
    from spineid.cli._arguments import in_option_terms

    assert in_option_terms(message) == shown
