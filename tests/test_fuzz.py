"""Fuzzing the command line: hypothesis mutates a bundled model file (`simulate`), a
load-displacement CSV (`table`), a quasi-static test (`stiffness`), a trajectory and its
start model (`fit`), and the options (types, signs, shapes, NaN and infinity, huge and tiny
magnitudes, missing keys and columns) and runs the verb in-process through its entry point.
Whatever the input: no traceback reaches the user, no case runs past its time limit, no NaN
or infinity is written as an answer, and an output folder is either not created (refused
input) or whole (its marker complete)."""

import contextlib
import json
import math
import pathlib
import signal
import tempfile
import threading
import time
import tomllib

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import spineid
from spineid.cli import main
from spineid.cli._outputs import MARKER

CASE_LIMIT_S = 60  # a case running longer counts as a hang
SETTINGS = settings(max_examples=24, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

BASE_MODEL = tomllib.loads(spineid.dataset_path("axial_4_springs.toml").read_text())

ODD_NUMBERS = [0.0, -1.0, 1e-300, -1e-300, 1e-12, 1e12, -1e12, 1e300, -1e300, math.nan,
               math.inf, -math.inf]
ODD_VALUES = st.one_of(
    st.sampled_from(ODD_NUMBERS),
    st.integers(-10**6, 10**6),
    st.sampled_from(["", "abc", "1e3", True, False, [], [1.0], [1.0, 2.0, 3.0, 4.0], {}]),
)
ODD_CELLS = ["nan", "inf", "-inf", "1e300", "-1e300", "1e-300", "", "abc", "0x10", "1,5"]


class _Hang(BaseException):
    """Raised by the watchdog in a case that runs past `CASE_LIMIT_S`."""


@contextlib.contextmanager
def _watchdog():
    # SIGALRM in the main thread; elsewhere the elapsed time is checked afterwards.
    armed = threading.current_thread() is threading.main_thread()
    if armed:
        def hang(signum, frame):
            raise _Hang
        previous = signal.signal(signal.SIGALRM, hang)
        signal.alarm(CASE_LIMIT_S)
    clock = time.perf_counter()
    try:
        yield
    finally:
        if armed:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - clock < CASE_LIMIT_S, "a case ran past its time limit"


def _run(arguments, capsys) -> int:
    # The entry point as the console script runs it; argparse's refusals exit with status 2.
    capsys.readouterr()
    with _watchdog():
        try:
            status = main(arguments)
        except SystemExit as stop:
            status = stop.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out, captured.err[-2000:]
    assert status in (0, 1, 2), (status, captured.err[-2000:])
    if status == 2:
        assert captured.err.strip(), "a refusal without a reason"
    return status


def _refuse_constant(name):
    raise AssertionError(f"{name} written as a value")


def _assert_finite(document, where=""):
    if isinstance(document, float):
        assert math.isfinite(document), f"non-finite {where}"
    elif isinstance(document, dict):
        for key, value in document.items():
            _assert_finite(value, f"{where}.{key}")
    elif isinstance(document, list):
        for k, value in enumerate(document):
            _assert_finite(value, f"{where}[{k}]")


def _assert_whole_and_finite(path: pathlib.Path):
    if path.suffix == ".json":
        json.loads(path.read_text(), parse_constant=_refuse_constant)
    elif path.suffix == ".csv":
        spineid.io.read_table(path)  # refuses NaN, infinity and truncation
    elif path.suffix == ".toml":
        _assert_finite(tomllib.loads(path.read_text()), path.name)
    elif path.suffix == ".png":
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _check_folder(out: pathlib.Path, status: int):
    if status == 2:
        assert not out.exists(), "refused input left an output folder"
        return
    marker = json.loads((out / MARKER).read_text())
    assert marker["complete"]
    names = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert names == set(marker["files"]) | {MARKER}
    for name in names:
        _assert_whole_and_finite(out / name)


def _leaf_paths(document, path=()):
    # Every key path of the document, tables and arrays of tables included.
    if isinstance(document, dict):
        for key, value in document.items():
            yield path + (key,)
            yield from _leaf_paths(value, path + (key,))
    elif isinstance(document, list) and document and isinstance(document[0], dict):
        for k, value in enumerate(document):
            yield from _leaf_paths(value, path + (k,))


MODEL_PATHS = list(_leaf_paths(BASE_MODEL))


def _mutated(document, path, action, value):
    document = json.loads(json.dumps(document))  # a deep copy
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if action == "delete":
        del parent[key]
    elif action == "scale" and isinstance(parent[key], (int, float)) \
            and not isinstance(parent[key], bool):
        parent[key] = parent[key] * value
    elif action == "scale" and isinstance(parent[key], list) and parent[key] \
            and all(isinstance(v, (int, float)) for v in parent[key]):
        parent[key] = [v * value for v in parent[key]]
    else:
        parent[key] = value
    return document


@SETTINGS
@given(mutations=st.lists(
    st.tuples(st.sampled_from(MODEL_PATHS), st.sampled_from(["replace", "delete", "scale"]),
              ODD_VALUES, st.sampled_from([1e-300, 1e-9, -1.0, 1e3, 1e12, 1e300])),
    min_size=1, max_size=2))
def test_simulate_a_mutated_model_file(mutations, capsys):
    document = BASE_MODEL
    for path, action, value, factor in mutations:
        try:
            document = _mutated(document, path, action, factor if action == "scale" else value)
        except (KeyError, IndexError, TypeError):  # a path an earlier mutation removed
            continue
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        model = folder / "model.toml"
        model.write_text(spineid.io.dumps_toml(document))
        out = folder / "out" / "motion.csv"
        status = _run(["simulate", str(model), "--out", str(out)], capsys)
        assert status in (0, 2)
        if status == 0:
            _, values = spineid.read_trajectory(out)
            assert np.all(np.isfinite(values))
        else:
            assert not out.exists() and not out.parent.exists()


def _with_cells(lines: list[str], cells) -> list[str]:
    # The CSV lines with each `(row, column, text)` of `cells` written into its cell.
    lines = list(lines)
    for row, column, cell in cells:
        parts = lines[row].split(",")
        parts[column] = cell
        lines[row] = ",".join(parts)
    return lines


def _law_data(folder: pathlib.Path) -> pathlib.Path:
    # A two-phase law with noise: 120 points.
    x = np.linspace(-0.1, 0.1, 120)
    load = np.where(x < 0.02, 10.0 * x, 0.2 + 40.0 * (x - 0.02))
    load = load + 0.01 * np.random.default_rng(0).normal(size=x.size)
    path = folder / "law.csv"
    spineid.io.write_table(path, {"t": np.linspace(0.0, 1.19, 120), "displacement": x,
                                  "load": load})
    return path


TABLE_OPTIONS = [[], ["--n-nodes", "3", "--free-breakpoints"], ["--n-nodes", "1"],
                 ["--n-nodes", "500"], ["--degree", "0", "--law", "polynomial"],
                 ["--law", "polynomial", "--degree", "2"], ["--nodes", "-1,0,1"],
                 ["--nodes", "0.05,0.01"], ["--smoothing", "1e300"], ["--noise", "1e-300"],
                 ["--noise", "nan"], ["--inertia", "-1"], ["--damping"],
                 ["--law", "tan_cos"], ["--law", "monotone_cubic", "--n-nodes", "4"],
                 ["--law", "polynomial", "--n-nodes", "3"], ["--law", "tan_cos",
                                                             "--free-breakpoints"],
                 ["--law", "monotone_cubic", "--smoothing", "0.01"],
                 ["--law", "polynomial", "--nodes", "0,0.05"]]


@SETTINGS
@given(cells=st.lists(st.tuples(st.integers(0, 120), st.integers(0, 2),
                                st.sampled_from(ODD_CELLS)), max_size=2),
       structure=st.sampled_from(["same", "no load column", "renamed header", "two rows",
                                  "repeated row", "utf-16", "empty"]),
       options=st.sampled_from(TABLE_OPTIONS))
def test_table_on_a_mutated_csv_with_odd_options(cells, structure, options, capsys):
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        data = _law_data(folder)
        lines = _with_cells(data.read_text().splitlines(), cells)  # header, 120 rows
        if structure == "no load column":
            lines = [",".join(line.split(",")[:2]) for line in lines]
        elif structure == "renamed header":
            lines[0] = "time,x,F"
        elif structure == "two rows":
            lines = lines[:3]
        elif structure == "repeated row":
            lines.insert(5, lines[5])
        text = "\n".join(lines) + "\n"
        if structure == "utf-16":
            data.write_bytes(text.encode("utf-16"))
        else:
            data.write_text("" if structure == "empty" else text)
        out = folder / "out"
        status = _run(["table", str(data), "--out", str(out), *options], capsys)
        _check_folder(out, status)


def _stiffness_data(folder: pathlib.Path) -> pathlib.Path:
    # A quasi-static test of a diagonal joint: 30 load cases of random deflections (m, rad).
    rng = np.random.default_rng(1)
    deflections = rng.normal(size=(30, 6)) * np.array([1e-3, 1e-3, 1e-3, 0.02, 0.02, 0.02])
    loads = deflections * np.array([2e5, 2e5, 8e5, 40.0, 40.0, 60.0])
    loads = loads + rng.normal(size=loads.shape) * np.array([1.0, 1.0, 1.0, 0.01, 0.01, 0.01])
    path = folder / "test.csv"
    spineid.io.write_table(path, dict(zip(
        ("Fx", "Fy", "Fz", "Mx", "My", "Mz", "dx", "dy", "dz", "b1", "b2", "b3"),
        np.hstack([loads, deflections]).T)))
    return path


STIFFNESS_OPTIONS = [[], ["--structure", "diagonal"], ["--structure", "sagittal"],
                     ["--linearised"], ["--noise", "Fx=1,Fy=1,Fz=1,Mx=0.01,My=0.01,Mz=0.01"],
                     ["--noise", "Fx=1e-300,Fy=1,Fz=1,Mx=0.01,My=0.01,Mz=0.01"],
                     ["--noise", "Fx=nan,Fy=1,Fz=1,Mx=0.01,My=0.01,Mz=0.01"],
                     ["--noise", "Fx=1,Fx=2"], ["--noise", "Fx=1"], ["--structure", "upper"]]


@SETTINGS
@given(cells=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 11),
                                st.sampled_from(ODD_CELLS + ["0", "1e12"])), max_size=2),
       structure=st.sampled_from(["same", "no Mz column", "all deflections zero", "two rows",
                                  "one deflection zero", "utf-16"]),
       options=st.sampled_from(STIFFNESS_OPTIONS))
def test_stiffness_on_a_mutated_test_with_odd_options(cells, structure, options, capsys):
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        data = _stiffness_data(folder)
        lines = _with_cells(data.read_text().splitlines(), cells)
        if structure == "no Mz column":
            lines = [",".join(line.split(",")[:5] + line.split(",")[6:]) for line in lines]
        elif structure == "all deflections zero":
            lines = lines[:1] + [",".join(line.split(",")[:6] + ["0"] * 6) for line in lines[1:]]
        elif structure == "one deflection zero":
            lines = lines[:1] + [",".join(line.split(",")[:11] + ["0"]) for line in lines[1:]]
        elif structure == "two rows":
            lines = lines[:3]
        text = "\n".join(lines) + "\n"
        if structure == "utf-16":
            data.write_bytes(text.encode("utf-16"))
        else:
            data.write_text(text)
        out = folder / "out"
        status = _run(["stiffness", str(data), "--out", str(out), *options], capsys)
        _check_folder(out, status)


_FIT_FILES = {}


def _fit_files(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    # The 4-spring planar pair over 0.2 s (101 samples) with tracking noise, and a start model
    # with every stiffness 1.3x the truth; the data are simulated once per process.
    document = json.loads(json.dumps(BASE_MODEL))
    document["simulation"] = {"t_end": 0.2, "n_samples": 101}
    if "data" not in _FIT_FILES:
        model = folder / "truth.toml"
        model.write_text(spineid.io.dumps_toml(document))
        truth = spineid.load_model_file(model)
        motion = spineid.simulate(truth.model, np.linspace(0.0, 0.2, 101))
        observed = np.asarray(jax.vmap(truth.model.observe)(motion.q))
        observed = observed + 5e-6 * np.random.default_rng(2).normal(size=observed.shape)
        _FIT_FILES["data"] = "\n".join(
            ["t,x,y,theta"] + [",".join(f"{v:.17g}" for v in (t, *row))
                               for t, row in zip(np.asarray(motion.ts), observed)]) + "\n"
    for spring in document["springs"]:
        spring["stiffness"] *= 1.3
    start, data = folder / "start.toml", folder / "data.csv"
    start.write_text(spineid.io.dumps_toml(document))
    data.write_text(_FIT_FILES["data"])
    return start, data


FIT_OPTIONS = [
    ["--free", "stiffness"], ["--free", "stiffness", "--solver", "lm"],
    ["--free", "stiffness", "--noise", "x=5e-6,y=5e-6,theta=1e-4"],
    ["--free", "stiffness", "--noise", "x=5e-6,x=1"], ["--free", "stiffness", "--noise", "x=-1"],
    ["--free", "stiffness", "--noise", "x=1e-300,y=5e-6,theta=1e-4"],
    ["--free", "stiffness", "--max-steps", "0"], ["--free", "stiffness", "--max-steps", "1"],
    ["--free", "stiffness", "--starts", "0"], ["--free", "stiffness", "--seed", "-1"],
    ["--free", "stiffness", "--solver", "newton"], ["--free", "mass"], ["--free", ""],
    ["--free", "stiffness", "--profile", "nothing"], ["--free", "stiffness", "--noise-max", "x=0"],
]


@SETTINGS
@given(cells=st.lists(st.tuples(st.integers(0, 101), st.integers(0, 3),
                                st.sampled_from(ODD_CELLS)), max_size=1),
       structure=st.sampled_from(["same", "same", "same", "milliseconds", "no theta column",
                                  "time reversed", "two rows", "huge start"]),
       options=st.sampled_from(FIT_OPTIONS))
def test_fit_on_mutated_data_with_odd_options(cells, structure, options, capsys):
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        start, data = _fit_files(folder)
        lines = _with_cells(data.read_text().splitlines(), cells)
        if structure == "milliseconds":
            lines = lines[:1] + [",".join([f"{1e3 * float(line.split(',')[0]):.6g}"]
                                          + line.split(",")[1:]) for line in lines[1:]]
        elif structure == "no theta column":
            lines = [",".join(line.split(",")[:3]) for line in lines]
        elif structure == "time reversed":
            lines = lines[:1] + lines[:0:-1]
        elif structure == "two rows":
            lines = lines[:3]
        elif structure == "huge start":
            text = start.read_text()
            assert "stiffness = 35100.0" in text  # (the first spring's start, 1.3x)
            start.write_text(text.replace("stiffness = 35100.0", "stiffness = 1e12"))
        data.write_text("\n".join(lines) + "\n")
        out = folder / "out"
        status = _run(["fit", str(start), str(data), "--out", str(out), *options], capsys)
        _check_folder(out, status)
