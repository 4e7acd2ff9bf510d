"""Model and trajectory files: valid files load, bad ones fail naming the file and key."""

import copy
import math
import re

import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, TORSION, VECTOR_SPRINGS, document

FORMATS_EXAMPLE = """
kind = "planar_pair"
gravity = [0.0, 0.0]

[lower]
fixed = true
pose = [0.0, 0.0, 0.0]

[upper]
mass = 0.5
inertia = 1.2e-3
pose = [0.0, 0.03, 0.0]

[[springs]]
kind = "vector"
point = [-0.02, 0.012]
stiffness = 2000.0
damping = 4.0

[[springs]]
kind = "axial"
lower_point = [-0.02, 0.010]
upper_point = [-0.016, 0.022]
stiffness = 27000.0
damping = 40.0

[[torsion]]
stiffness = 6.0
damping = 0.004

[measure]
kind = "vector"
curve = [[-0.02, 0.01], [0.02, 0.01]]

[[loads]]
component = "Fx"
amplitude = 6.0
frequency = 4.0
phase = 0.3

[simulation]
t_end = 0.5
n_samples = 501
"""


def write(tmp_path, text, name="model.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_formats_example_loads(tmp_path):
    pair = spineid.load_model(write(tmp_path, FORMATS_EXAMPLE))
    kinds = [type(e).__name__ for e in pair.elements]
    assert kinds == ["VectorSprings", "AxialSprings", "TorsionSpring"]
    np.testing.assert_allclose(pair.elements[1].rest_length, np.hypot(0.004, 0.012))
    assert pair.lower.fixed and pair.n_dof == 3


@pytest.mark.parametrize("name", ["liu_8_springs.toml", "liu_16_springs.toml"])
def test_bundled_models_load(name):
    pair = spineid.load_model(spineid.dataset_path(name))
    assert len(pair.elements[0].stiffness) == int(name.split("_")[1])


def test_unknown_dataset_lists_what_exists():
    with pytest.raises(ValueError, match="liu_8_springs.toml"):
        spineid.dataset_path("nope.toml")


def bad(mutate):
    doc = document(springs=VECTOR_SPRINGS + AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    doc = copy.deepcopy(doc)
    mutate(doc)
    return doc


BAD_DOCUMENTS = {
    "unknown top key": (lambda d: d.update(colour="red"), "colour"),
    "unknown spring key": (lambda d: d["springs"][0].update(stifness=3.0), r"springs\[0\].stifness"),
    "unknown kind": (lambda d: d.update(kind="tripod"), "kind"),
    "wrong pose shape": (lambda d: d["upper"].update(pose=[0.0, 0.03]), r"upper.pose"),
    "zero mass": (lambda d: d["upper"].update(mass=0.0), r"upper.mass.*> 0"),
    "negative inertia": (lambda d: d["upper"].update(inertia=-1.0), r"upper.inertia"),
    "missing mass of free body": (lambda d: d["upper"].pop("mass"), r"upper.mass"),
    "fixed upper": (lambda d: d["upper"].update(fixed=True), r"upper.fixed"),
    "negative stiffness": (lambda d: d["springs"][1].update(stiffness=-5.0), r"springs\[1\].stiffness.*>= 0"),
    "nan stiffness": (lambda d: d["springs"][2].update(stiffness=float("nan")), r"springs\[2\].stiffness.*finite"),
    "inf damping": (lambda d: d["torsion"][0].update(damping=float("inf")), r"torsion\[0\].damping"),
    "string stiffness": (lambda d: d["springs"][0].update(stiffness="stiff"), r"springs\[0\].stiffness"),
    "coincident axial points": (
        lambda d: d["springs"][4].update(upper_point=d["springs"][4]["lower_point"]),
        r"springs\[4\].upper_point.*distinct",
    ),
    "unknown spring kind": (lambda d: d["springs"][0].update(kind="coil"), r"springs\[0\].kind"),
    "unknown load component": (lambda d: d["loads"][0].update(component="Fz"), r"loads\[0\].component"),
    "negative frequency": (lambda d: d["loads"][0].update(frequency=-1.0), r"loads\[0\].frequency"),
    "nan gravity": (lambda d: d.update(gravity=[0.0, float("nan")]), "gravity"),
    "short measure": (lambda d: d.update(measure={"kind": "vector", "curve": [[0.0, 0.0]]}), "measure.curve"),
    "zero-length measure": (
        lambda d: d.update(measure={"kind": "vector", "curve": [[0.0, 0.0], [0.0, 0.0]]}),
        "measure.curve.*nonzero length",
    ),
    "bad simulation": (lambda d: d.update(simulation={"t_end": 0.0}), "simulation.t_end"),
    "few samples": (lambda d: d.update(simulation={"n_samples": 1}), "simulation.n_samples"),
    "missing lower": (lambda d: d.pop("lower"), "lower"),
    "springs not tables": (lambda d: d.update(springs={"kind": "vector"}), "springs"),
}


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_bad_model_documents_fail_naming_the_key(case):
    mutate, pattern = BAD_DOCUMENTS[case]
    with pytest.raises(ValueError, match=pattern) as error:
        spineid.model_from_document(bad(mutate), source="bad.toml")
    assert str(error.value).startswith("bad.toml: ")


def test_malformed_and_missing_model_files(tmp_path):
    with pytest.raises(ValueError, match="not valid TOML"):
        spineid.load_model(write(tmp_path, "kind = planar"))
    with pytest.raises(ValueError, match="not found"):
        spineid.load_model(tmp_path / "absent.toml")


def test_loads_file_is_read_relative_to_model(tmp_path):
    (tmp_path / "loads.csv").write_text("t,Mz\n0,0\n1,2\n")
    text = FORMATS_EXAMPLE.replace(
        '[[loads]]\ncomponent = "Fx"\namplitude = 6.0\nfrequency = 4.0\nphase = 0.3',
        '[[loads]]\nloads_file = "loads.csv"',
    )
    pair = spineid.load_model(write(tmp_path, text))
    np.testing.assert_allclose(pair.applied_load(0.25), [0.0, 0.0, 0.5])


def test_trajectory_round_trip(tmp_path):
    ts = np.linspace(0, 1, 7)
    values = np.random.default_rng(1).normal(size=(7, 3))
    spineid.write_trajectory(tmp_path / "t.csv", ts, values)
    ts2, values2 = spineid.read_trajectory(tmp_path / "t.csv")
    np.testing.assert_array_equal(ts, ts2)
    np.testing.assert_array_equal(values, values2)


def test_trajectory_extra_columns_allowed(tmp_path):
    path = write(tmp_path, "t,x,y,theta,marker\n0,1,2,3,9\n1,1,2,3,9\n", "t.csv")
    ts, values = spineid.read_trajectory(path)
    assert values.shape == (2, 3)


BAD_TRAJECTORIES = {
    "missing column": ("t,x,y\n0,1,2\n1,1,2\n", "missing column.*theta"),
    "empty time": ("t,x,y,theta\n,1,2,3\n1,1,2,3\n", "line 2, column t"),
    "nan time": ("t,x,y,theta\n0,1,2,3\nnan,1,2,3\n", "line 3, column t.*finite"),
    "inf": ("t,x,y,theta\n0,1,2,3\n1,inf,2,3\n", "line 3, column x.*finite"),
    "unsorted": ("t,x,y,theta\n0,1,2,3\n2,1,2,3\n1,1,2,3\n", "line 4.*strictly increasing"),
    "repeated": ("t,x,y,theta\n0,1,2,3\n0,1,2,3\n", "line 3.*strictly increasing"),
    "too few rows": ("t,x,y,theta\n0,1,2,3\n", "at least 2"),
    "empty": ("", "empty file"),
    "ragged": ("t,x,y,theta\n0,1,2\n1,1,2,3\n", "line 2: expected 4 values"),
    "text": ("t,x,y,theta\n0,1,a,3\n1,1,2,3\n", "expected a number, got 'a'"),
}


def test_a_trajectory_channel_may_have_values_not_measured(tmp_path):
    # An empty cell or nan in a channel column: NaN (a gap); the time must be there.
    path = write(tmp_path, "t,x,y,theta\n0,1,,3\n1,nan,2,NaN\n2,1,2,3\n", "t.csv")
    ts, values = spineid.read_trajectory(path)
    np.testing.assert_array_equal(ts, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.isnan(values), [[False, True, False], [True, False, True],
                                                     [False, False, False]])


@pytest.mark.parametrize("case", list(BAD_TRAJECTORIES))
def test_bad_trajectories_fail_clearly(tmp_path, case):
    text, pattern = BAD_TRAJECTORIES[case]
    path = write(tmp_path, text, "traj.csv")
    with pytest.raises(ValueError, match=pattern) as error:
        spineid.read_trajectory(path)
    assert str(path) in str(error.value)


def test_outputs_are_written_atomically(tmp_path):
    # A writer interrupted half-way leaves the old file whole and no temporary behind.
    path = tmp_path / "cases.csv"
    spineid.write_table(path, {"t": [0.0, 1.0]})
    before = path.read_text()

    class Interrupted(Exception):
        pass

    def interrupting(value):
        if value > 0.5:
            raise Interrupted
        return repr(value)

    with pytest.raises(Interrupted):
        spineid.write_table(path, {"t": [0.0, 0.25, 0.75]}, number_format=interrupting)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.csv"]
    # The new file has the permissions a plainly created one gets (not mkstemp's 0600).
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    written = spineid.io.write_text_atomically(tmp_path / "atomic.txt", "y")
    assert written.read_text() == "y"
    assert (written.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777)
    # A figure goes through the same rename, in the format of the target's suffix.
    import matplotlib.pyplot as plt

    from spineid.plots import use_file_backend
    from spineid.plots._common import _save

    use_file_backend()
    saved = _save(plt.figure(), tmp_path / "figure.png")
    assert saved.read_bytes()[:4] == b"\x89PNG"
    # Without a suffix, matplotlib's default format and its suffix, as savefig does.
    assert _save(plt.figure(), tmp_path / "bare") == tmp_path / "bare.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "atomic.txt", "bare.png", "cases.csv", "figure.png", "plain.txt"]
    # A replaced file keeps its permissions; a link is written through.
    written.chmod(0o640)
    spineid.io.write_text_atomically(written, "z")
    assert (written.stat().st_mode & 0o777) == 0o640
    link = tmp_path / "link.txt"
    link.symlink_to(written)
    spineid.io.write_text_atomically(link, "through")
    assert link.is_symlink() and written.read_text() == "through"


@pytest.mark.parametrize("old, new, message", [
    ("pose = [0.0, 0.03, 0.0]", "pose = [0.0, 1e300, 0.0]",
     "upper.pose: expected numbers of magnitude at most 1000 (SI units: a position in m"),
    ("stiffness = 27000.0", "stiffness = 1e25",
     "springs[0].stiffness: expected a number of magnitude at most 1e+20"),
])
def test_magnitudes_outside_any_physical_range_are_refused(tmp_path, old, new, message):
    # A pose of 1e300 m simulated to a wrong trajectory (the motion lost in rounding), exit 0.
    text = spineid.dataset_path("axial_4_springs.toml").read_text()
    path = tmp_path / "model.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=re.escape(message)):
        spineid.load_model_file(path)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="named pipes are POSIX")
def test_inputs_that_are_not_regular_files_are_refused_before_opening(tmp_path):
    # A FIFO as a model or data file blocked the reader forever (in `open`).
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for read, what in ((spineid.load_model_file, "a model file"),
                       (spineid.io.read_table, "a CSV table"),
                       (spineid.read_storage, "a data file"),
                       (spineid.read_trc, "a data file"),
                       (spineid.read_quasi_static, "a CSV table"),
                       (spineid.read_load_displacement, "a CSV table"),
                       (lambda path: spineid.io.read_measurement(path, ("x",), ("m",)),
                        "a CSV table")):
        with pytest.raises(ValueError, match=re.escape(
                f"{fifo}: a named pipe (FIFO), not a regular file; {what} is a file")):
            read(fifo)
    with pytest.raises(ValueError, match="a folder, not a regular file"):
        spineid.io.read_table(tmp_path)


@pytest.mark.parametrize("extra, message", [
    ("extra = " + "[" * 20000 + "1" + "]" * 20000, "arrays or tables nested too deeply to read"),
    ("mass_note = 1" + "0" * 5000, "line 3: mass_note = a number of 5001 digits"),
])
def test_a_model_file_python_cannot_parse_is_refused_in_one_sentence(tmp_path, extra, message):
    # A RecursionError (arrays 20000 deep) and a ValueError naming no file or key (an integer
    # of 5001 digits) were what the command printed.
    path = tmp_path / "model.toml"
    path.write_text("kind = \"planar_pair\"\n\n" + extra + "\n")
    with pytest.raises(ValueError) as error:
        spineid.load_model_file(path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe",
                                     "t,x\n0,1\n".encode("utf-16")])
def test_files_that_are_not_utf8_text_are_refused_with_their_name(tmp_path, content):
    for name, read in (("data.csv", spineid.io.read_table),
                       ("model.toml", spineid.load_model_file)):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ValueError, match=re.escape(f"{path}: not a UTF-8 text file")):
            read(path)


def test_trajectories_are_plain_csv_that_other_readers_take_as_written(tmp_path):
    # The header first: numpy's genfromtxt with names and the csv module read it as a table.
    path = tmp_path / "motion.csv"
    values = np.random.default_rng(0).normal(size=(11, 3))
    spineid.io.write_trajectory(path, np.linspace(0, 1, 11), values)
    table = np.genfromtxt(path, delimiter=",", names=True)
    assert table.dtype.names == ("t", "x", "y", "theta")
    np.testing.assert_array_equal(np.stack([table[c] for c in ("x", "y", "theta")], 1), values)
    import csv
    with path.open(newline="") as file:
        assert next(csv.reader(file)) == ["t", "x", "y", "theta"]


def test_a_truncated_trajectory_announcing_its_rows_is_refused(tmp_path):
    # Older versions announced the rows in a first comment line; such files are still checked.
    path = tmp_path / "motion.csv"
    spineid.io.write_table(path, {"t": np.linspace(0, 1, 11), **{c: np.zeros(11) for c in
                                                                 ("x", "y", "theta")}},
                           announce_rows=True)
    text = path.read_text()
    assert text.startswith("# spineid: 11 rows\n")
    ts, _ = spineid.read_trajectory(path)  # whole: read as written
    assert len(ts) == 11
    for cut in (text[:text.rindex("\n", 0, -1) + 1],  # the last row lost
                text[:-3]):  # the last row cut short
        path.write_text(cut)
        with pytest.raises(ValueError, match="truncated"):
            spineid.read_trajectory(path)
    # Errors name the file's own line numbers, the comment counted.
    lines = text.splitlines()
    lines[5] = "0.3,abc,0,0"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 6, column x"):
        spineid.read_trajectory(path)


def test_a_table_law_whose_load_decreases_is_read_with_a_warning(tmp_path):
    # Negative stiffness: allowed (softening), but the solver gave up on it without a word.
    text = spineid.dataset_path("l5_s1_pair.toml").read_text()
    path = tmp_path / "softening.toml"
    path.write_text(text.replace("load = [-10.0, -5.0, 0.0, 0.0, 2.5, 10.0]",
                                 "load = [-10.0, -5.0, 0.0, 0.0, 12.5, 10.0]"))
    with pytest.warns(UserWarning, match=r"torsion\[0\]\.law: load decreases from entry 4"):
        spineid.load_model_file(path)


def test_a_time_column_in_milliseconds_is_read_with_a_warning(tmp_path):
    path = tmp_path / "motion.csv"
    spineid.io.write_trajectory(path, np.arange(501.0), np.zeros((501, 3)))  # 0-500 "s"
    with pytest.warns(UserWarning, match="t spans 500 s in steps of 1 s: if it is in "
                                         "milliseconds"):
        spineid.Measurement.from_csv(path, ("x", "y", "theta"))
    spineid.io.write_trajectory(path, np.linspace(0, 0.5, 501), np.zeros((501, 3)))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spineid.Measurement.from_csv(path, ("x", "y", "theta"))  # seconds: no warning


def test_a_head_neck_file_with_a_mass_missing_names_the_masses(tmp_path):
    # Seven masses for eight bodies blamed geometry.tilt_deg, the first list read after them.
    text = spineid.dataset_path("head_neck.toml").read_text()
    path = tmp_path / "seven.toml"
    path.write_text(text.replace("masses = [0.523, 0.454, 0.384, 0.379, 0.376, 0.526, 0.418, "
                                 "3.847]", "masses = [0.523, 0.454, 0.384, 0.379, 0.376, 0.526, "
                                 "3.847]"))
    with pytest.raises(ValueError, match=r"geometry.masses has 7 values .* geometry.tilt_deg "
                                         r"has 8 \(expected 7\), geometry.body_depth has 7 "
                                         r"\(expected 6\)"):
        spineid.load_model_file(path)


def test_documents_holding_numpy_values_are_written_as_valid_toml():
    # Oracle: Python's own TOML parser. numpy's float64 is a float whose repr is
    # `np.float64(...)` (numpy 2), which is not TOML; a model built with numpy values (a start
    # scaled by a factor) must still be written as numbers.
    import tomllib

    document = {"kind": "planar_pair", "scale": np.float64(35100.0), "count": np.int64(3),
                "fixed": np.bool_(True), "pose": np.array([0.0, 0.03, 0.0]),
                "springs": [{"stiffness": np.float64(1.5e4) * 1.3, "nodes": [np.int32(1), 2]}]}
    parsed = tomllib.loads(spineid.io.dumps_toml(document))
    assert parsed == {"kind": "planar_pair", "scale": 35100.0, "count": 3, "fixed": True,
                      "pose": [0.0, 0.03, 0.0],
                      "springs": [{"stiffness": 1.5e4 * 1.3, "nodes": [1, 2]}]}


def test_a_spreadsheets_byte_order_mark_is_not_part_of_the_header(tmp_path):
    # Excel's "CSV UTF-8" starts with a byte-order mark; the first column is still `t`.
    path = tmp_path / "excel.csv"
    path.write_bytes("t,x,y,theta\n0,0,0,0\n0.1,1e-3,0,0\n".encode("utf-8-sig"))
    ts, values = spineid.read_trajectory(path)
    np.testing.assert_array_equal(ts, [0.0, 0.1])
    assert values[1, 0] == 1e-3


@pytest.mark.parametrize("ts, values, channels, match", [
    (np.arange(10.0), np.zeros((9, 3)), ("x", "y", "theta"),
     r"shape \(9, 3\); expected \(10, 3\)"),
    (np.arange(10.0), np.zeros((10, 2)), ("x", "y", "theta"), r"expected \(10, 3\)"),
    (np.arange(10.0), np.zeros((10, 3)), "xyz", "a sequence of names"),
    (np.arange(10.0), np.zeros((10, 2)), ("x", "x"), "repeated"),
    (np.arange(10.0)[::-1], np.zeros((10, 3)), ("x", "y", "theta"), "strictly increasing"),
    (np.r_[0.0, np.nan, 2.0], np.zeros((3, 3)), ("x", "y", "theta"), "sample 2 is not"),
    (["a", "b"], np.zeros((2, 3)), ("x", "y", "theta"), "must be numbers"),
])
def test_a_measurement_that_cannot_be_one_is_refused_as_it_is_made(ts, values, channels, match):
    with pytest.raises(ValueError, match=match):
        spineid.Measurement(ts, values, channels, source="trial 3")


LAB_VALUES = [("stiffness = 27000.0", 'stiffness = "27 N/mm"'),
              ("damping = 40.0", 'damping = "0.04 N s/mm"'),
              ("stiffness = 9000.0", 'stiffness = "9 kN/m"'),
              ("stiffness = 12000.0", 'stiffness = "12e3 N/m"')]
"""Lines of the bundled four-spring pair and the same values as a lab writes them."""


def _lab_model() -> str:
    # The bundled four-spring pair with LAB_VALUES written in a lab's units (each line once).
    text = spineid.dataset_path("axial_4_springs.toml").read_text()
    for si, lab in LAB_VALUES:
        assert text.count(si) == 1, si
        text = text.replace(si, lab)
    return text


def test_parameter_values_written_with_their_units_are_the_si_model(tmp_path):
    # The bundled four-spring pair with its parameters written as a lab would (N/mm, N s/mm,
    # kN/m): the same model as the SI file, simulated alike; the parameters start from the SI
    # values and the file says what it read.
    path = tmp_path / "lab.toml"
    path.write_text(_lab_model())
    lab = spineid.load_model_file(path)
    si = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = np.linspace(0.0, 0.05, 51)
    np.testing.assert_allclose(np.asarray(spineid.simulate(lab.model, ts).q),
                               np.asarray(spineid.simulate(si.model, ts).q), rtol=1e-12,
                               atol=1e-15)
    starts = {p.name: p.value(lab.model) for p in lab.parameters}
    assert starts["springs[0].stiffness"] == pytest.approx(27000.0, rel=1e-15)
    assert starts["springs[0].damping"] == pytest.approx(40.0, rel=1e-15)
    assert starts["springs[2].stiffness"] == pytest.approx(9000.0, rel=1e-15)
    assert lab.quantities["springs[0].stiffness"] == ("27 N/mm", pytest.approx(27000.0))
    line = lab.describe_quantities()
    assert "springs[0].stiffness 27 N/mm = 27000" in line and si.describe_quantities() is None
    # Written back (a fit's fitted.toml) in the units the file used, SI where it used none.
    fitted = {"springs[0].stiffness": 26410.0, "springs[1].stiffness": 15500.0,
              "springs[2].stiffness": 9000.0}
    written = spineid.write_model_file(tmp_path / "fitted.toml", lab, fitted)
    text = written.read_text()
    for line in ('stiffness = "26.41 N/mm"', 'damping = "0.04 N s/mm"',
                 "stiffness = 15500.0", 'stiffness = "9 kN/m"', 'stiffness = "12000 N/m"'):
        assert line in text, line
    again = spineid.load_model_file(written)
    values = {p.name: p.value(again.model) for p in again.parameters}
    for name, value in {**fitted, "springs[3].stiffness": 12000.0}.items():
        assert values[name] == pytest.approx(value, rel=1e-14), name


def test_a_bushing_given_by_its_diagonal_takes_units_of_each_entrys_kind(tmp_path):
    # The C5-C6 disc's stiffness diagonal in a lab's units (N/mm, N m/deg): entries 0-2 are
    # translations, 3-5 rotations (`bushings[0].stiffness[3][3]` in N m/rad); a rotation's
    # entry in N/mm is refused naming it.
    text = spineid.dataset_path("c5_c6.toml").read_text()
    diagonal = "stiffness = [6.0e4, 6.0e5, 6.0e4, 30.0, 40.0, 20.0]"
    deg = math.pi / 180
    lab = ('stiffness = ["60 N/mm", "600 N/mm", "60 N/mm", '
           f'"{30 * deg!r} N m/deg", "{40 * deg!r} N m/deg", "{20 * deg!r} N m/deg"]')
    path = tmp_path / "disc.toml"
    path.write_text(text.replace(diagonal, lab))
    read = spineid.load_model_file(path)
    reference = spineid.load_model_file(spineid.dataset_path("c5_c6.toml"))
    for parameter in reference.parameters:
        assert parameter.value(read.model) == pytest.approx(parameter.value(reference.model),
                                                            rel=1e-12)
    path.write_text(text.replace(diagonal, lab.replace(f'"{20 * deg!r} N m/deg"', '"20 N/mm"')))
    with pytest.raises(ValueError, match=re.escape(
            "bushings[0].stiffness[5]: '20 N/mm' is not of the parameter's kind "
            "(bushings[0].stiffness[5][5] is in N m/rad")):
        spineid.load_model_file(path)


@pytest.mark.parametrize("old, new, message", [
    ('stiffness = "27 N/mm"', 'stiffness = "27 N/deg"',
     "springs[0].stiffness: '27 N/deg' is not of the parameter's kind (springs[0].stiffness "
     "is in N/m"),
    ('damping = "0.04 N s/mm"', 'damping = "0.04 N/mm"', "springs[0].damping: '0.04 N/mm'"),
    ('stiffness = "27 N/mm"', 'stiffness = "27 N/mmm"',
     "springs[0].stiffness: expected a number (SI; a parameter's value, or a mass, length, "
     "angle, time or load"),
    ("mass = 0.5", 'mass = "0.5 mm"', "upper.mass: '0.5 mm' is not of this value's kind "
     "(in kg)"),
    ("pose = [0.0, 0.03, 0.0]", 'pose = [0.0, 0.03, "30 mm"]',
     "upper.pose[2]: '30 mm' is not of this value's kind (an angle)"),
    ("amplitude = 0.08", 'amplitude = "0.08 N"', "loads[2].amplitude: '0.08 N' is not of this "
     "value's kind (in N m)"),
    ("frequency = 4.0", 'frequency = "4 s"', "loads[0].frequency: '4 s': a unit is read on a "
     "model parameter and on the values whose kind the format declares"),
    ("phase = 1.0", 'phase = "2 mm/m"', "loads[2].phase: '2 mm/m' is not of this value's kind "
     "(an angle)"),
    ("mass = 0.5", 'mass = "500 g"', "upper.mass: expected a number (SI"),
])
def test_a_unit_that_is_not_one_or_not_the_parameters_kind_is_refused(tmp_path, old, new,
                                                                       message):
    path = tmp_path / "lab.toml"
    path.write_text(_lab_model().replace(old, new))
    with pytest.raises(ValueError, match=re.escape(message)):
        spineid.load_model_file(path)


def test_geometry_masses_and_loads_written_with_their_units_are_the_si_model(tmp_path):
    # The bundled four-spring pair, tilted 0.1 rad under gravity, with every value that is not
    # a parameter written as a lab would (g is no unit: kg; mm, deg, kg mm^2, N mm, mm/s^2):
    # the same model as the SI file, its motion equal to rounding; a fitted file writes them
    # back as the file gave them.
    text = spineid.dataset_path("axial_4_springs.toml").read_text()
    text = text.replace("pose = [0.0, 0.03, 0.0]", "pose = [0.0, 0.03, 0.1]").replace(
        "gravity = [0.0, 0.0]", "gravity = [0.0, -9.81]")
    (tmp_path / "si.toml").write_text(text)
    for si, lab in [("mass = 0.5", 'mass = "0.5 kg"'),
                    ("inertia = 1.2e-3", 'inertia = "1200 kg mm^2"'),
                    ("pose = [0.0, 0.03, 0.1]",
                     f'pose = ["0 mm", "3 cm", "{math.degrees(0.1)!r} deg"]'),
                    ("lower_point = [-0.02, 0.010]", 'lower_point = ["-20 mm", "10 mm"]'),
                    ("amplitude = 0.08", 'amplitude = "80 Nmm"'),
                    ("phase = 1.0", f'phase = "{math.degrees(1.0)!r} deg"'),
                    ("gravity = [0.0, -9.81]", 'gravity = ["0 m/s^2", "-9810 mm/s^2"]')]:
        assert text.count(si) == 1, si
        text = text.replace(si, lab)
    path = tmp_path / "lab.toml"
    path.write_text(text)
    lab = spineid.load_model_file(path)
    si = spineid.load_model_file(tmp_path / "si.toml")
    ts = np.linspace(0.0, 0.05, 51)
    np.testing.assert_allclose(np.asarray(spineid.simulate(lab.model, ts).q),
                               np.asarray(spineid.simulate(si.model, ts).q), rtol=1e-12,
                               atol=1e-15)
    assert lab.quantities["upper.inertia"] == ("1200 kg mm^2", pytest.approx(1.2e-3))
    assert lab.quantities["springs[0].lower_point[0]"] == ("-20 mm", pytest.approx(-0.02))
    written = spineid.write_model_file(tmp_path / "fitted.toml", lab,
                                       {"springs[0].stiffness": 26410.0}).read_text()
    assert 'inertia = "1200 kg mm^2"' in written and '"3 cm"' in written


def test_text_that_is_no_quantity_stays_text(tmp_path):
    # A file name that starts with a number is no quantity (an OpenSim example's name).
    from spineid.io._model_units import quantities_in_document

    document = {"kind": "opensim", "file": "3DGaitModel2392.osim", "other": "2.osim",
                "names": ["1st left", "1e3", "10 mm.csv"]}
    converted, read = quantities_in_document(document, "m.toml")
    assert converted == document and read == {}


def test_a_full_bushing_matrix_takes_units_on_its_mirrored_entries(tmp_path):
    # A full stiffness matrix whose coupling of the lateral shear (1) and bending (4) is
    # written both ways, each in its own entry's unit: `[1][4]` a force per angle (N/deg),
    # `[4][1]` a moment per length (N m/mm); one parameter, `bushings[0].stiffness[1][4]`.
    # A force per length in the mirrored entry is refused.
    text = spineid.dataset_path("c5_c6.toml").read_text()
    diagonal = [6.0e4, 6.0e5, 6.0e4, 30.0, 40.0, 20.0]
    rows = [[repr(diagonal[i]) if i == j else "0.0" for j in range(6)] for i in range(6)]
    rows[1][4] = f'"{1000.0 * math.pi / 180!r} N/deg"'
    rows[4][1] = '"1 N m/mm"'
    full = "stiffness = [" + ", ".join("[" + ", ".join(row) + "]" for row in rows) + "]"
    path = tmp_path / "coupled.toml"
    path.write_text(text.replace("stiffness = [6.0e4, 6.0e5, 6.0e4, 30.0, 40.0, 20.0]", full))
    model_file = spineid.load_model_file(path)
    (coupling,) = [p for p in model_file.parameters if p.name == "bushings[0].stiffness[1][4]"]
    assert coupling.value(model_file.model) == pytest.approx(1000.0, rel=1e-12)
    assert model_file.quantities["bushings[0].stiffness[4][1]"] == ("1 N m/mm",
                                                                    pytest.approx(1000.0))
    path.write_text(text.replace("stiffness = [6.0e4, 6.0e5, 6.0e4, 30.0, 40.0, 20.0]",
                                 full.replace('"1 N m/mm"', '"1 N/mm"')))
    with pytest.raises(ValueError, match=re.escape(
            "bushings[0].stiffness[4][1]: '1 N/mm' is not of the parameter's kind")):
        spineid.load_model_file(path)

