"""OpenSim's data files: storage tables (.sto, .mot) and marker files (.trc) written by OpenSim's
own adapters (STOFileAdapter, TRCFileAdapter, the version-1 Storage class) read by spineid, a
storage table written by spineid read by OpenSim, the old SIMM .mot header, and clear refusals
of files that do not parse."""

import math
import pathlib

import numpy as np
import pytest

import spineid

opensim = pytest.importorskip("opensim")


def table(labels, time, columns, metadata):
    """An OpenSim `TimeSeriesTable` of `columns` `(k, c)` against `time`."""
    result = opensim.TimeSeriesTable()
    result.setColumnLabels(list(labels))
    for t, row in zip(time, columns):
        result.appendRow(float(t), opensim.RowVector([float(v) for v in row]))
    for key, value in metadata.items():
        result.addTableMetaDataString(key, value)
    return result


TIME = np.linspace(0.0, 0.5, 51)
ANGLE_DEG = 12.0 * np.sin(2 * np.pi * 3 * TIME)
SHIFT_M = 0.004 * np.cos(2 * np.pi * 3 * TIME)


@pytest.mark.parametrize("suffix", [".sto", ".mot"])
@pytest.mark.parametrize("degrees", [True, False])
def test_a_table_written_by_opensims_sto_adapter(tmp_path, suffix, degrees):
    angle = ANGLE_DEG if degrees else np.radians(ANGLE_DEG)
    path = tmp_path / f"coordinates{suffix}"
    opensim.STOFileAdapter.write(
        table(["flexion", "shift"], TIME, np.column_stack([angle, SHIFT_M]),
              {"inDegrees": "yes" if degrees else "no"}), str(path))
    read = spineid.read_storage(path)
    assert read.in_degrees is degrees and read.header["version"] in ("2", "3")
    np.testing.assert_allclose(read.time, TIME, rtol=0, atol=1e-15)
    np.testing.assert_allclose(read.radians("flexion"), np.radians(ANGLE_DEG), rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(read.column("shift"), SHIFT_M, rtol=1e-12)
    with pytest.raises(ValueError, match=r"no column 'extension'; its columns: \['flexion', "
                                         r"'shift'\]"):
        read.radians("extension")


def test_a_version_1_storage_written_by_opensims_storage_class(tmp_path):
    storage = opensim.Storage()
    storage.setName("old_results")
    labels = opensim.ArrayStr()
    for label in ("time", "q1", "q2"):
        labels.append(label)
    storage.setColumnLabels(labels)
    for t, a, s in zip(TIME, ANGLE_DEG, SHIFT_M):
        row = opensim.Vector(2, 0.0)
        row.set(0, float(a))
        row.set(1, float(s))
        storage.append(float(t), row)
    storage.setInDegrees(True)
    storage.printResult(storage, "old_results", str(tmp_path), -1, ".mot")
    read = spineid.read_storage(tmp_path / "old_results.mot")
    assert read.header["version"] == "1" and read.header["name"] == "old_results"
    assert read.in_degrees is True
    # Storage prints 8 decimals.
    np.testing.assert_allclose(read.radians("q1"), np.radians(ANGLE_DEG), atol=1e-9)
    np.testing.assert_allclose(read.column("q2"), SHIFT_M, atol=1e-8)


def test_the_old_simm_mot_header(tmp_path):
    # SIMM's header (no program here writes it): `key value` lines, no inDegrees.
    path = tmp_path / "simm.mot"
    rows = "\n".join(f"{t:.6f}\t{a:.6f}" for t, a in zip(TIME, ANGLE_DEG))
    path.write_text(f"name simm_motion\ndatacolumns 2\ndatarows {TIME.size}\nrange 0 0.5\n"
                    f"endheader\ntime\tflexion\n{rows}\n")
    read = spineid.read_storage(path)
    assert read.header["datarows"] == str(TIME.size) and read.in_degrees is None
    np.testing.assert_allclose(read.column("flexion"), ANGLE_DEG, atol=1e-6)


def test_a_table_written_by_spineid_is_read_by_opensim(tmp_path):
    path = spineid.write_storage(tmp_path / "fitted.sto", TIME,
                                 {"flexion": np.radians(ANGLE_DEG), "shift": SHIFT_M})
    read = opensim.TimeSeriesTable(str(path))
    assert list(read.getColumnLabels()) == ["flexion", "shift"]
    assert read.getTableMetaDataAsString("inDegrees") == "no"
    np.testing.assert_array_equal(np.array(read.getIndependentColumn()), TIME)
    np.testing.assert_array_equal(read.getDependentColumn("flexion").to_numpy(),
                                  np.radians(ANGLE_DEG))
    # OpenSim 3's Storage class reads it too.
    storage = opensim.Storage(str(path))
    assert storage.getSize() == TIME.size and not storage.isInDegrees()
    again = spineid.read_storage(path)  # and spineid, exactly
    np.testing.assert_array_equal(again.column("shift"), SHIFT_M)


@pytest.mark.parametrize("units, scale", [("mm", 1e-3), ("m", 1.0)])
def test_markers_written_by_opensims_trc_adapter_with_a_gap(tmp_path, units, scale):
    rng = np.random.default_rng(4)
    positions = rng.uniform(-100, 100, (TIME.size, 2, 3))
    markers = opensim.TimeSeriesTableVec3()
    markers.setColumnLabels(["C5_ant", "C5_post"])
    for k, t in enumerate(TIME):
        row = [opensim.Vec3(*map(float, positions[k, j])) for j in range(2)]
        if k == 7:
            row[1] = opensim.Vec3(math.nan, math.nan, math.nan)  # a gap
        markers.appendRow(float(t), opensim.RowVectorVec3(row))
    markers.addTableMetaDataString("DataRate", "100")
    markers.addTableMetaDataString("Units", units)
    path = tmp_path / "markers.trc"
    opensim.TRCFileAdapter.write(markers, str(path))
    read = spineid.read_trc(path)
    assert read.units == units and read.rate == 100.0 and list(read.markers) == ["C5_ant",
                                                                                "C5_post"]
    np.testing.assert_allclose(read.time, TIME, atol=1e-12)
    expected = positions * scale
    np.testing.assert_allclose(read.markers["C5_ant"], expected[:, 0], rtol=1e-9)
    gap = np.isnan(read.markers["C5_post"])
    assert np.array_equal(np.flatnonzero(gap.any(axis=1)), [7]) and gap[7].all()
    np.testing.assert_allclose(read.markers["C5_post"][~gap.any(axis=1)],
                               np.delete(expected[:, 1], 7, axis=0), rtol=1e-9)


def write(tmp_path, name, text) -> pathlib.Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD_HEADER = "version=3\ninDegrees=no\nendheader\n"


@pytest.mark.parametrize("name, text, message", [
    ("a.sto", "time\tq\n0\t1\n1\t2\n", "no 'endheader' line: not an OpenSim storage file"),
    ("a.sto", "", "empty file"),
    ("a.sto", GOOD_HEADER, r"no column labels after 'endheader' \(line 3\)"),
    ("a.sto", GOOD_HEADER + "t\tq\n0\t1\n1\t2\n", "line 4: the first column label must be "
                                                   "'time'"),
    ("a.sto", GOOD_HEADER + "time\tq\tq\n0\t1\t1\n1\t2\t2\n", r"repeated column labels \['q'\]"),
    ("a.sto", GOOD_HEADER + "time\tq\n0\t1\n1\t2\t3\n", "line 6: expected 2 values"),
    ("a.sto", GOOD_HEADER + "time\tq\n0\t1\n1\tx\n", "line 6, column q: expected a number"),
    ("a.sto", GOOD_HEADER + "time\tq\n0\t1\n1\tnan\n", "line 6, column q: expected a finite"),
    ("a.sto", GOOD_HEADER + "time\tq\n0\t1\n", r"1 data row\(s\)"),
    ("a.sto", GOOD_HEADER + "time\tq\n0\t1\n1\t2\n1\t3\n", "line 7: time must be strictly "
                                                           "increasing"),
    ("a.sto", "inDegrees=maybe\nendheader\ntime\tq\n0\t1\n1\t2\n",
     "inDegrees='maybe': expected yes or no"),
    ("a.trc", "Frame#\tTime\n", "line 1: expected 'PathFileType"),
    ("a.trc", "PathFileType\t4\nDataRate\tUnits\n100\tinch\nFrame#\tTime\tM\nX1\tY1\tZ1\n",
     "line 3: Units 'inch'"),
    ("a.trc", "PathFileType\t4\nDataRate\tUnits\n100\tmm\nTime\tM\nX1\tY1\tZ1\n",
     "line 4: expected 'Frame#', 'Time'"),
    ("a.trc", "PathFileType\t4\nDataRate\tUnits\n100\tmm\nFrame#\tTime\tM\t\t\n\tX1\tY1\tZ1\n"
              "\n1\t0\t1\t2\t3\n2\t0.01\t1\t2\t3\t4\n", "line 8: 6 cells"),
    ("a.trc", "PathFileType\t4\nDataRate\tUnits\n100\tmm\nFrame#\tTime\tM\t\t\n\tX1\tY1\tZ1\n"
              "\n1\t0\t1\t2\t3\n2\t0\t1\t2\t3\n", "line 8: time must be strictly increasing"),
], ids=["no endheader", "empty", "no labels", "no time", "repeated", "ragged", "text", "nan",
        "one row", "repeated time", "bad inDegrees", "trc no PathFileType", "trc units",
        "trc no Frame#", "trc ragged", "trc repeated time"])
def test_files_that_do_not_parse_are_refused_naming_the_line(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    reader = spineid.read_trc if name.endswith(".trc") else spineid.read_storage
    with pytest.raises(ValueError, match=message):
        reader(path)


def test_values_not_measured_are_read_only_where_allowed(tmp_path):
    path = write(tmp_path, "gaps.sto", GOOD_HEADER + "time\tq\tr\n0\t\t1\n1\t2\tnan\n2\t3\t4\n")
    every = spineid.read_storage(path, missing=True)
    assert np.isnan(every.columns["q"][0]) and np.isnan(every.columns["r"][1])
    with pytest.raises(ValueError, match="line 5, column q: expected a number"):
        spineid.read_storage(path, missing=["r"])
    # The time is never missing.
    gap_in_time = write(tmp_path, "t.sto", GOOD_HEADER + "time\tq\n0\t1\n\t2\n2\t3\n")
    with pytest.raises(ValueError, match="line 6"):
        spineid.read_storage(gap_in_time, missing=True)


def test_write_storage_refuses_unusable_columns(tmp_path):
    with pytest.raises(ValueError, match="column 'q' has shape"):
        spineid.write_storage(tmp_path / "a.sto", TIME, {"q": TIME[:-1]})
    with pytest.raises(ValueError, match="not 'time'"):
        spineid.write_storage(tmp_path / "a.sto", TIME, {"time": TIME})
    for time in (np.r_[TIME[:-1], np.nan], TIME[::-1]):
        with pytest.raises(ValueError, match="finite and strictly increasing"):
            spineid.write_storage(tmp_path / "a.sto", time, {"q": TIME})
    assert not (tmp_path / "a.sto").exists()
