"""Output folders of the command line: refused when they hold files (unless --overwrite, which
removes only spineid's earlier outputs), a completion marker written last, and no partial or
mixed output when a run is interrupted at a random moment."""

import json
import os
import pathlib
import random
import signal
import stat
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

import spineid
import spineid.plots
from spineid.cli import main
from spineid.cli._outputs import MARKER


def _marker(folder: pathlib.Path) -> dict:
    return json.loads((folder / MARKER).read_text())


def test_a_folder_holding_files_is_refused_and_overwrite_replaces_only_spineid_outputs(
        tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["database", "--out", str(out)]) == 0
    marker = _marker(out)
    assert marker["complete"] and marker["verb"] == "database"
    assert sorted(marker["files"]) == ["geometry.png", "l5_s1_law.png"]
    assert sorted(p.name for p in out.iterdir()) == sorted(marker["files"] + [MARKER])
    capsys.readouterr()
    # Again into the same folder: refused before any work, nothing touched.
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert main(["database", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--overwrite" in error
    assert "the whole outputs of an earlier `spineid database`" in error
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    # A file of the user's own stays; the earlier outputs are replaced.
    (out / "notes.txt").write_text("mine")
    assert main(["database", "--out", str(out), "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert _marker(out)["complete"]


def test_overwrite_removes_a_stale_output_of_the_same_verb(tmp_path, capsys):
    # A planar fit into the folder of an earlier spatial fit left that fit's fitted.osim in
    # place, beside the new results. Now --overwrite removes the earlier outputs first.
    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    out = tmp_path / "fit"
    out.mkdir()
    (out / "fitted.osim").write_text("<OpenSimDocument/>")  # of an earlier spatial fit
    (out / "report.json").write_text('{"earlier": true}')
    (out / "notes.txt").write_text("mine")
    arguments = ["fit", str(model), str(data), "--free", "stiffness", "--noise",
                 "x=5e-6,y=5e-6,theta=1.7e-4", "--solver", "lm", "--out", str(out)]
    assert main(arguments) == 2
    assert "already holds files (fitted.osim, notes.txt, report.json)" in capsys.readouterr().err
    assert main(arguments + ["--overwrite"]) == 0
    assert not (out / "fitted.osim").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert "earlier" not in json.loads((out / "report.json").read_text())
    marker = _marker(out)
    assert marker["complete"] and "fitted.osim" not in marker["files"]
    assert sorted(marker["files"]) == sorted(
        ["fitted.toml", "report.json", "fit.png", "residuals.png", "identifiability.png"])


def test_an_interrupted_run_leaves_a_visibly_incomplete_folder(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(spineid.plots, "plot_load_laws", interrupted)  # the second plot
    out = tmp_path / "out"
    assert main(["database", "--out", str(out)]) == 130
    marker = _marker(out)
    assert marker["complete"] is False and marker["finished"] is None
    assert (out / "geometry.png").exists() and not (out / "l5_s1_law.png").exists()
    capsys.readouterr()
    assert main(["database", "--out", str(out)]) == 2
    assert "the INCOMPLETE outputs of an earlier `spineid database`" in capsys.readouterr().err


def test_simulate_refuses_an_existing_file_unless_overwrite(tmp_path, capsys):
    model = spineid.dataset_path("axial_4_springs.toml")
    out = tmp_path / "motion.csv"
    out.write_text("keep me")
    assert main(["simulate", str(model), "--out", str(out)]) == 2
    assert "the file exists; give --overwrite" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main(["simulate", str(model), "--out", str(out), "--overwrite"]) == 0
    assert len(spineid.read_trajectory(out)[0]) == 501


def _whole(path: pathlib.Path) -> None:
    # Each kind of output file reads back completely.
    if path.suffix == ".json":
        json.loads(path.read_text())
    elif path.suffix == ".csv":
        spineid.io.read_table(path)
    elif path.suffix == ".toml":
        spineid.load_model_file(path)
    elif path.suffix == ".png":
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


def _check_folder(out: pathlib.Path) -> str:
    # Whole, visibly incomplete, or not begun; never a temporary file, never a file the marker
    # does not list, never a "complete" marker missing a file. Returns which.
    if not out.exists() or not any(out.iterdir()):
        return "not begun"
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert not [n for n in names if pathlib.Path(n).name.startswith(".")], names
    marker = _marker(out)
    assert set(names) - {MARKER} <= set(marker["files"]), (names, marker)
    for name in names:
        _whole(out / name)
    if marker["complete"]:
        assert set(names) == set(marker["files"]) | {MARKER}
        return "complete"
    return "incomplete"


# A signal that lands in a garbage-collection callback is dropped by Python and sent again by
# spineid (test_a_signal_landing_in_a_garbage_collection_callback_is_not_lost); a run that ends
# before that leaves a whole result, which is checked like the others.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("verb", ["simulate", "fit"])
def test_runs_interrupted_at_random_moments_leave_no_partial_or_mixed_output(tmp_path, capsys,
                                                                             verb):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    model = spineid.dataset_path("axial_4_springs.toml")
    data = tmp_path / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    start = tmp_path / "start.toml"
    start.write_text(model.read_text().replace("stiffness = 27000.0", "stiffness = 32000.0"))
    out = tmp_path / ("motion.csv" if verb == "simulate" else "fit")
    arguments = (["simulate", str(start), "--out", str(out), "--overwrite"] if verb == "simulate"
                 else ["fit", str(start), str(data), "--free", "stiffness", "--noise",
                       "x=5e-6,y=5e-6,theta=1.7e-4", "--solver", "lm", "--out", str(out),
                       "--overwrite"])
    assert main(arguments) == 0  # compiled
    clock = time.perf_counter()
    assert main(arguments) == 0  # the time of a whole warm run
    duration = time.perf_counter() - clock
    seen, statuses = set(), []
    draw = random.Random(7)
    # A signal that comes after `main` has returned (and restored this handler) is ignored.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        for _ in range(8):
            # SIGTERM from another thread at a random moment of the run, as `kill` sends it.
            timer = threading.Timer(draw.uniform(0.0, 1.2 * duration),
                                    lambda: os.kill(os.getpid(), signal.SIGTERM))
            timer.start()
            try:
                status = main(arguments)
            finally:
                timer.cancel()
                timer.join()
            assert status in (0, 143)
            statuses.append(status)
            _check_outputs(verb, out, seen)
    finally:
        signal.signal(signal.SIGTERM, previous)
    capsys.readouterr()
    print(verb, statuses, seen)
    assert 143 in statuses  # (8 random moments: some runs are cut short)


def _check_outputs(verb, out, seen):
    if verb == "simulate":
        assert len(spineid.read_trajectory(out)[0]) == 501  # the earlier one or the new one
        assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []
        seen.add("whole")
    else:
        seen.add(_check_folder(out))


def test_a_time_limit_stops_a_run_with_one_line_and_an_incomplete_marker(tmp_path, capsys,
                                                                         monkeypatch):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("the time limit is a signal: it needs the main thread")
    error = _database_past_its_time_limit(tmp_path, capsys, monkeypatch, 2)
    assert error.count("\n") == 1 and "stopped at the time limit of 2 s" in error


def _database_past_its_time_limit(tmp_path, capsys, monkeypatch, limit, before=None):
    # `spineid database` made to run on for a minute (after `before()`), stopped by
    # `--time-limit limit`: status 124 within 30 s and an incomplete folder; returns stderr.
    original = spineid.plots.plot_load_laws

    def slow(*args, **kwargs):
        if before is not None:
            before()
        time.sleep(60)
        return original(*args, **kwargs)

    monkeypatch.setattr(spineid.plots, "plot_load_laws", slow)
    out = tmp_path / "out"
    clock = time.perf_counter()
    assert main(["database", "--out", str(out), "--time-limit", str(limit)]) == 124
    assert time.perf_counter() - clock < 30
    assert _marker(out)["complete"] is False
    return capsys.readouterr().err


def test_a_signal_landing_in_a_garbage_collection_callback_is_not_lost(tmp_path, capsys,
                                                                        monkeypatch):
    # Python drops what a gc callback raises ("Exception ignored in ..."); JAX installs one,
    # and so do test tools. The time limit lands in one here and must still stop the run.
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("the time limit is a signal: it needs the main thread")
    import gc

    arrived = []

    def slow_callback(phase, info):
        if phase == "start":
            clock = time.monotonic()
            try:
                time.sleep(6.0)  # the alarm (3 s: a margin for a loaded machine) arrives here
            finally:  # (what is raised here goes on to be dropped by Python)
                arrived.append(time.monotonic() - clock < 5.9)

    def collect():
        gc.callbacks.append(slow_callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(slow_callback)

    error = _database_past_its_time_limit(tmp_path, capsys, monkeypatch, 3, collect)
    assert "stopped at the time limit of 3 s" in error
    assert arrived == [True]  # (the alarm did land in the callback)


def test_a_stop_swallowed_where_no_one_reports_it_is_sent_again(tmp_path, capsys,
                                                                 monkeypatch):
    # Code that catches everything (here: the alarm lands in a `sleep` whose caller drops any
    # exception, as C code that clears errors does) must not cost the time limit: the stop is
    # sent again until the run answers it.
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("the time limit is a signal: it needs the main thread")
    swallowed = []

    def swallow():
        try:
            time.sleep(3.0)  # the alarm (1 s) arrives here
        except BaseException as stop:
            swallowed.append(type(stop).__name__)

    error = _database_past_its_time_limit(tmp_path, capsys, monkeypatch, 1, swallow)
    assert "stopped at the time limit of 1 s" in error
    assert swallowed == ["_TimedOut"]


def test_warnings_reach_the_user_as_one_line_each(tmp_path, capsys, monkeypatch):
    import warnings

    from spineid.cli import _commands

    def warns(arguments):
        warnings.warn("nodes lie outside the data:\n  their loads are extrapolated")
        return 0

    monkeypatch.setattr(_commands, "command_database", warns)
    assert main(["database", "--out", str(tmp_path / "out")]) == 0
    error = capsys.readouterr().err
    assert error == ("spineid: warning: nodes lie outside the data: their loads are "
                     "extrapolated\n")


def test_a_check_inside_compiled_code_is_one_line(tmp_path, capsys, monkeypatch):
    # A runtime check of equinox (such as the Euler angles' singularity) carries pages of
    # stack; the user gets the line spineid wrote.
    import equinox as eqx

    from spineid.cli import _commands

    def fails(arguments):
        raise eqx.EquinoxRuntimeError(
            "Above is the stack outside of JIT.\n  File x, line 1\n"
            "spineid.euler123_angles: the rotation is at the singularity\n\nmore stack")

    monkeypatch.setattr(_commands, "command_database", fails)
    assert main(["database", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == ("spineid: error: spineid.euler123_angles: the rotation "
                                       "is at the singularity\n")


def test_a_fit_that_cannot_be_simulated_on_a_millisecond_record_says_so(tmp_path):
    # A t column in ms makes a 0.5 s test a 500 s simulation, which fails: the refusal names
    # the span instead of advising a better start.
    import types

    import numpy as np

    from spineid.cli._outputs import OutputFolder, write_fit_outputs

    ts = np.arange(501.0)
    result = types.SimpleNamespace(report=lambda: {"cost": 1.0}, names=["k"],
                                   values=np.array([1.0]), predictions=[np.full((501, 3),
                                                                                np.inf)])
    problem = types.SimpleNamespace(measurements=[spineid.Measurement(
        ts, np.zeros((501, 3)), ("x", "y", "theta"))])
    out = OutputFolder(tmp_path / "out", "fit")
    with pytest.raises(ValueError, match="the data's t spans 500 s: if it is in milliseconds"):
        write_fit_outputs(result, problem, out)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not pathlib.Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("verb", [["table"], ["stiffness"]])
def test_an_unwritable_output_folder_is_refused_before_any_work(tmp_path, capsys, verb,
                                                                monkeypatch):
    # /proc refuses every new file, whatever the permission bits say (they say yes to a
    # superuser, as os.access does here): a probe file tells. A batch is refused whole.
    monkeypatch.setattr("spineid.cli._outputs.os.access", lambda *a, **k: True)
    data = tmp_path / "data.csv"
    data.write_text("displacement,load\n" + "".join(f"{k * 1e-4},{k * 2.0}\n" for k in range(20)))
    for arguments in ([str(data)], [str(data), str(data)]):
        assert main(verb + arguments + ["--out", "/proc/spineid-out"]) == 2
        printed = capsys.readouterr()
        assert "--out /proc/spineid-out: /proc is not writable (" in printed.err
        assert "fitting" not in printed.out


def _stand_in_result(names, channels, rng):
    # What the three figures of a fit read from a `FitResult`, with values of the sizes a
    # planar fit has (metres and radians; two load cases of 301 samples).
    ts = np.linspace(0.0, 0.5, 301)
    measurements = [SimpleNamespace(ts=ts, values=rng.normal(size=(301, len(channels))) * 1e-3)
                    for _ in range(2)]
    ident = SimpleNamespace(singular_values=np.logspace(3, -2, len(names)), rank=len(names) - 1,
                            n_parameters=len(names),
                            combinations=[{"coefficients": dict(zip(names, row))}
                                          for row in rng.normal(size=(len(names) - 1, len(names)))])
    return SimpleNamespace(
        names=names, identifiability=ident, measurements=measurements, cost=12.5,
        solver="levenberg-marquardt", noise={channel: 1e-5 for channel in channels},
        predictions=[m.values + 1e-5 for m in measurements],
        residuals=lambda: [rng.normal(size=(301, len(channels))) * 1e-5 for _ in range(2)])


@pytest.mark.parametrize("name_length", [2, 20, 45])
@pytest.mark.parametrize("figure_name", ["plot_fit", "plot_residuals", "plot_identifiability"])
def test_the_fixed_margins_of_a_fits_figures_keep_every_label_inside(figure_name, name_length):
    # The figures drawn once per file of a batch are laid out with fixed margins rather than
    # by measuring their labels (tight_layout): every text drawn must still lie inside the
    # figure, for short and long parameter names (rotated under the identifiability image).
    import matplotlib.pyplot as plt

    spineid.plots.use_file_backend()
    names = [f"{'p' * (name_length - 3)}[{k}]" for k in range(5)]
    channels = ("x", "y", "theta")
    result = _stand_in_result(names, channels, np.random.default_rng(name_length))
    draw = getattr(spineid.plots, figure_name)
    figure = draw(result, None) if figure_name == "plot_identifiability" else draw(
        result, channels, None)
    try:
        figure.canvas.draw()
        # (What is drawn, as matplotlib measures it for bbox_inches="tight", in inches.)
        drawn = figure.get_tightbbox(figure.canvas.get_renderer())
        width, height = figure.get_size_inches()
        assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01, (drawn, width, height)
        assert drawn.x1 <= width + 0.01 and drawn.y1 <= height + 0.01, (drawn, width, height)
        # and the margins are not wasteful either: the drawing spans most of the figure
        assert drawn.width > 0.9 * width and drawn.height > 0.85 * height, (drawn, width, height)
    finally:
        plt.close(figure)


@pytest.mark.parametrize("verdict, words", [
    # (the states real fits produce: with the noise given a level and the chi-square's p, as
    # a 4-spring fit of a lab's mm file gave; with it estimated a level and the misfit)
    (dict(level="explains", explains_data=True, noise_given=True, p_value=0.262),
     "explains the data (chi-square p = 0.262)"),
    (dict(level="does_not_describe", explains_data=False, noise_given=True, p_value=1e-9),
     "does NOT describe the data (chi-square p = 1e-09)"),
    (dict(level="describes", explains_data=None, noise_given=False, p_value=None,
          misfit={"x": {"fraction_of_range": 0.012}}),
     "describes the data, smooth misfit up to 1.2% of the range"),
    (dict(level=None, explains_data=None, noise_given=False, p_value=None), None),
])
def test_the_residual_figure_states_the_verdict(verdict, words):
    # The verdict on the residual figure, with the noise given (its level and the
    # chi-square's p) as with it estimated (its level and the smooth misfit); none where no
    # test was possible.
    import matplotlib.pyplot as plt

    from spineid.cli._drawing import FitFigureData

    spineid.plots.use_file_backend()
    channels = ("x", "y", "theta")
    result = _stand_in_result(["k[0]", "k[1]"], channels, np.random.default_rng(0))
    result.goodness_of_fit = SimpleNamespace(**dict(dict(misfit={}), **verdict))
    # (as the command draws it: from the numbers its figure workers receive)
    rng = np.random.default_rng(1)
    result.measurements = [spineid.Measurement(m.ts, m.values, channels)
                           for m in result.measurements]
    result.predictions = [m.values + rng.normal(size=m.values.shape) * 1e-5
                          for m in result.measurements]
    figure = spineid.plots.plot_residuals(FitFigureData.of(result), channels, None)
    try:
        title = figure.get_suptitle().splitlines()
        assert title[0] == "Residuals (data - fit) in units of the noise"
        assert title[1:] == ([words] if words else []), title
    finally:
        plt.close(figure)


def test_a_second_run_into_a_folder_another_run_is_writing_is_refused(tmp_path):
    # Two runs started together into one folder: the first to write locks it, the second is
    # refused in one line before it writes a file; once the first has finished, the folder
    # holds its whole result and a third run is refused as for any folder that holds one.
    from spineid.cli._outputs import OutputFolder

    out = tmp_path / "out"
    first, second = OutputFolder(out, "table"), OutputFolder(out, "table")
    (first / "report.json").write_text("{}")
    with pytest.raises(ValueError, match="another spineid run is writing into this folder"):
        second / "report.json"
    first.finish()
    assert _marker(out)["complete"] and _marker(out)["files"] == ["report.json"]
    with pytest.raises(ValueError, match="already holds the whole outputs"):
        OutputFolder(out, "table") / "report.json"
    late = OutputFolder(tmp_path / "other", "table")  # (checked while the folder was empty)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "report.json").write_text("{}")
    with pytest.raises(ValueError, match="already holds files"):
        late / "law.toml"


def test_resume_refuses_a_folder_that_holds_a_single_runs_result(tmp_path):
    # `fit --each --resume` into the folder of a finished single fit: not a batch to continue.
    from spineid.cli._outputs import OutputFolder

    single = OutputFolder(tmp_path / "out", "fit")
    (single / "report.json").write_text("{}")
    single.finish()
    with pytest.raises(ValueError, match="does not hold one \\(it holds a single run's result"):
        OutputFolder(tmp_path / "out", "fit", resume=True)


@pytest.mark.parametrize("writes", [0, 1, 2, 4])
def test_a_full_disk_ends_the_run_in_one_line_and_leaves_a_visibly_incomplete_folder(
        tmp_path, capsys, monkeypatch, writes):
    # The disk fills after `writes` files were flushed (the marker's rewrites among them):
    # every later flush fails as a full disk does. One line naming the cause, exit 2, and the
    # folder whole or visibly incomplete (no temporary file, no half-written one).
    import errno

    import spineid.io._atomic as atomic

    flushed = [0]

    class FullDisk:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def fsync(handle):
            if stat.S_ISDIR(os.fstat(handle).st_mode):  # (a folder's flush: no space needed)
                return os.fsync(handle)
            if flushed[0] >= writes:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            flushed[0] += 1
            return os.fsync(handle)

    monkeypatch.setattr(atomic, "os", FullDisk())
    out = tmp_path / "out"
    assert main(["database", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "No space left on device" in error, error
    # (Full from the first write: the folder made, its marker never written, nothing in it.)
    assert _check_folder(out) == ("not begun" if writes == 0 else "incomplete")


def test_a_fitted_inertia_no_body_has_is_said_in_the_result_and_fitted_toml(tmp_path):
    # A fit that frees a body's products of inertia can end at a matrix no rigid body has:
    # the problem says so in one sentence (the fit's warnings, a comment of fitted.toml), and
    # the reader's own check (the oracle) refuses the file those values make. A body whose
    # inertia is not freed is not judged (here C7's, no rigid body's in the .osim itself,
    # where OpenSim only warns and the reader keeps it).
    from spineid.io._measurements import Measurement
    from spineid.io._model_file import write_model_file
    (tmp_path / "neck.osim").write_text(spineid.dataset_path("neck_bushings.osim").read_text(
    ).replace("<inertia>0.00040000000000000002 0.00059999999999999995", "<inertia>0.0001 0.0001",
              1))
    (tmp_path / "neck.toml").write_text('kind = "opensim"\nfile = "neck.osim"\n')
    model_file = spineid.load_model_file(tmp_path / "neck.toml")
    channels = model_file.model.observable_names
    record = Measurement(np.linspace(0.0, 0.1, 11), np.zeros((11, len(channels))), channels)
    assert model_file.model.inertia_entries[0, :2].tolist() == [1e-4, 1e-4]  # (C7's)
    problem = spineid.FitProblem(model_file, record, ["C6.inertia"])
    assert problem.names[3] == "C6.inertia[3]" and problem.fitted_notes(problem.start) == []
    values = problem.start.copy()
    values[3] = 1e-3  # (Ixy above what moments of 4e-4 and 6e-4 allow)
    notes = problem.fitted_notes(values)
    assert len(notes) == 1 and notes[0].startswith("The fitted inertia of C6 (0.0004, 0.0006")
    path = write_model_file(tmp_path / "fitted.toml", model_file,
                            dict(zip(problem.names, values)), comments=tuple(notes))
    assert "# The fitted inertia of C6" in path.read_text()
    with pytest.raises(ValueError, match=r"C6\.inertia.*rigid body"):
        spineid.load_model_file(path)
