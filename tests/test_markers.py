"""Poses from motion-capture markers: the least-squares rigid fit of a cluster against scipy's
`Rotation.align_vectors` (Kabsch, an independent implementation), gaps and degenerate clusters,
the relative pose of a spatial and a planar pair read back from a .trc file written by
OpenSim's TRCFileAdapter, against the poses the markers were placed with, and a fit from a .trc
equal to the fit of the same poses from a CSV."""

import math
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import spineid

pytestmark = pytest.mark.xdist_group("lab-data")  # (one worker: the axial fits compile once)

CLUSTER = np.array([[0.02, 0.0, 0.01], [-0.015, 0.01, 0.0], [0.0, -0.02, 0.012],
                    [0.01, 0.015, -0.01]])  # m, body coordinates


def test_rigid_poses_equal_scipys_kabsch_with_noise_and_a_gap():
    rng = np.random.default_rng(0)
    frames = 40
    truth = Rotation.random(frames, random_state=1)
    shift = rng.uniform(-0.5, 0.5, (frames, 3))
    exact = np.stack([truth[k].apply(CLUSTER) for k in range(frames)]) + shift[:, None]
    seen = exact + rng.normal(0, 2e-4, exact.shape)
    seen[5, 2] = np.nan  # a gap: three markers left
    rotation, position, rms, valid = spineid.rigid_poses(CLUSTER, seen)
    assert valid.all()
    for k in range(frames):
        kept = np.all(np.isfinite(seen[k]), axis=1)
        body = CLUSTER[kept] - CLUSTER[kept].mean(axis=0)
        lab = seen[k, kept] - seen[k, kept].mean(axis=0)
        oracle, _ = Rotation.align_vectors(lab, body)  # rotates body onto lab
        np.testing.assert_allclose(rotation[k], oracle.as_matrix(), atol=1e-12)
        fitted = rotation[k] @ CLUSTER[kept].T + position[k][:, None]
        np.testing.assert_allclose(fitted.T.mean(axis=0), seen[k, kept].mean(axis=0),
                                   atol=1e-12)
        assert rms[k] == pytest.approx(
            math.sqrt(np.mean(np.sum((fitted.T - seen[k, kept]) ** 2, axis=1))), rel=1e-12)
    # The noise-free poses come back exactly, and each is a rotation (det +1).
    np.testing.assert_allclose(np.linalg.det(rotation), 1.0, atol=1e-12)
    np.testing.assert_allclose(spineid.rigid_poses(CLUSTER, exact)[0], truth.as_matrix(),
                               atol=1e-12)


def test_frames_without_a_pose():
    seen = np.repeat(CLUSTER[None], 3, axis=0)
    seen[1, :2] = np.nan  # two markers left
    line = np.array([[0.0, 0, 0], [0.01, 0, 0], [0.03, 0, 0], [0.02, 0.0, 0.0]])
    _, _, _, valid = spineid.rigid_poses(CLUSTER, seen)
    assert valid.tolist() == [True, False, True]
    rotation, _, rms, valid = spineid.rigid_poses(line, np.repeat(line[None], 2, axis=0))
    assert not valid.any() and np.isnan(rotation).all() and np.isnan(rms).all()
    with pytest.raises(ValueError, match=r"expected \(m, 3\) with m >= 3"):
        spineid.rigid_poses(CLUSTER[:2], seen[:, :2])


def write_trc(path, time, positions: dict, units="mm"):
    """A .trc file written by OpenSim's TRCFileAdapter (positions in m, written in `units`)."""
    opensim = pytest.importorskip("opensim")
    scale = {"mm": 1e3, "m": 1.0}[units]
    table = opensim.TimeSeriesTableVec3()
    table.setColumnLabels(list(positions))
    for k, t in enumerate(time):
        table.appendRow(float(t), opensim.RowVectorVec3(
            [opensim.Vec3(*map(float, scale * p[k])) for p in positions.values()]))
    table.addTableMetaDataString("DataRate", "100")
    table.addTableMetaDataString("Units", units)
    opensim.TRCFileAdapter.write(table, str(path))
    return path


def write_c3d(path, time, positions: dict, units="mm", scale=-1.0, rate=None):
    """A C3D file written by the c3d package's Writer (positions in m, written in `units`;
    `scale` < 0: float32 coordinates, > 0: 16-bit integers of that step). NaN: not seen."""
    c3d = pytest.importorskip("c3d")
    factor = {"mm": 1e3, "m": 1.0, "in": 1 / 0.0254}[units.lower()]
    writer = c3d.Writer(point_rate=rate or 1.0 / float(np.diff(time)[0]),
                        point_scale=scale, point_units=units.ljust(4))
    writer.set_point_labels(list(positions))
    for k in range(len(time)):
        points = np.zeros((len(positions), 5), np.float32)
        for i, p in enumerate(positions.values()):
            if np.all(np.isfinite(p[k])):
                points[i, :3] = factor * p[k]
            else:
                points[i, 3] = -1.0  # C3D's mark of a point not seen
        writer.add_frames([(points, np.zeros((0, 0), np.float32))])
    with open(path, "wb") as handle, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No analog data found")  # (markers only)
        writer.write(handle)
    return path


def test_c3d_markers_read_as_the_trc_of_the_same_markers(tmp_path):
    # Oracle: the same positions written by OpenSim's TRCFileAdapter (text) and by the c3d
    # package (binary float32, and 16-bit integers of a 0.1 mm step, truncated by the writer): one reading.
    rng = np.random.default_rng(4)
    time = np.arange(12) / 200.0
    positions = {name: rng.uniform(-0.4, 0.4, (time.size, 3)) for name in ("RASI", "LASI", "S1")}
    positions["LASI"][3] = np.nan
    trc = spineid.read_trc(write_trc(tmp_path / "a.trc", time, positions))
    floats = spineid.read_markers(write_c3d(tmp_path / "a.c3d", time, positions))
    integers = spineid.read_c3d(write_c3d(tmp_path / "b.c3d", time, positions, scale=0.1))
    for read, atol in ((floats, 1e-7), (integers, 1e-4 + 1e-9)):
        assert list(read.markers) == list(positions) and read.units == "mm"
        assert read.rate == pytest.approx(200.0)
        np.testing.assert_allclose(read.time, trc.time, atol=1e-9)
        for name in positions:
            np.testing.assert_allclose(read.markers[name], trc.markers[name], atol=atol)
        assert np.isnan(read.markers["LASI"][3]).all()


def test_bad_c3d_files_are_refused_by_name(tmp_path, monkeypatch):
    time = np.arange(3) / 100.0
    positions = {"A": np.zeros((3, 3)), "B": np.ones((3, 3))}
    with pytest.raises(ValueError, match=r"POINT:UNITS 'in': expected one of"):
        spineid.read_c3d(write_c3d(tmp_path / "inch.c3d", time, positions, units="in"))
    text = tmp_path / "text.c3d"
    text.write_text("Frame#,Time\n1,0.0\n")
    with pytest.raises(ValueError, match=r"text.c3d: not a readable C3D file"):
        spineid.read_c3d(text)
    with pytest.raises(ValueError, match="file not found"):
        spineid.read_c3d(tmp_path / "missing.c3d")
    with pytest.raises(ValueError, match=r"1 frame\(s\); at least 2"):
        spineid.read_c3d(write_c3d(tmp_path / "short.c3d", time[:1], positions, rate=100.0))
    whole = write_c3d(tmp_path / "whole.c3d", np.arange(40) / 100.0,
                      {"A": np.zeros((40, 3)), "B": np.ones((40, 3))}, units="MM")
    assert spineid.read_c3d(whole).units == "mm"  # (the unit's case does not matter)
    cut = tmp_path / "cut.c3d"
    cut.write_bytes(whole.read_bytes()[:-700])
    with pytest.raises(ValueError, match=r"cut.c3d: the C3D file ends after \d+ of its 40 "
                                         r"frames \(truncated\?\)"):
        spineid.read_c3d(cut)
    monkeypatch.setitem(__import__("sys").modules, "c3d", None)  # the extra not installed
    with pytest.raises(ImportError, match=r"pip install 'spineid\[c3d\]'"):
        spineid.read_c3d(tmp_path / "inch.c3d")


def test_spatial_pose_of_the_upper_body_relative_to_a_moving_lower_body(tmp_path):
    rng = np.random.default_rng(2)
    time = np.arange(30) / 100.0
    angles = np.column_stack([0.2 * np.sin(7 * time), 0.15 * np.cos(5 * time) - 0.1,
                              0.3 * np.sin(3 * time + 0.4)])  # 1-2-3 Euler angles, rad
    shift = np.column_stack([0.002 * np.sin(4 * time), 0.001 * time, 0.03 + 0.001 * time])
    lower_rotation = Rotation.from_rotvec(rng.normal(0, 0.3, (time.size, 3)))
    lower_position = rng.uniform(-0.2, 0.2, (time.size, 3))
    relative = Rotation.from_euler("XYZ", angles)  # R_x(a1) R_y(a2) R_z(a3)
    upper_rotation = lower_rotation * relative
    upper_position = lower_position + lower_rotation.apply(shift)
    lower_cluster = CLUSTER[[0, 1, 2]] * 1.5
    names = ("U1", "U2", "U3", "U4")
    positions = {name: upper_rotation.apply(np.repeat(c[None], time.size, 0)) + upper_position
                 for name, c in zip(names, CLUSTER)}
    positions.update({f"L{i}": lower_rotation.apply(np.repeat(c[None], time.size, 0))
                      + lower_position for i, c in enumerate(lower_cluster)})
    positions["U2"][4] = np.nan  # upper keeps three markers
    positions["L1"][9] = np.nan  # lower has two: the frame is dropped
    path = write_trc(tmp_path / "spine.trc", time, positions)
    markers = spineid.read_trc(path)
    with pytest.warns(UserWarning, match="1 of 30 frames dropped"):
        measurement = spineid.Measurement.from_markers(
            markers, ("x", "y", "z", "a1", "a2", "a3"),
            upper=dict(zip(names, CLUSTER)),
            lower={f"L{i}": c for i, c in enumerate(lower_cluster)})
    keep = np.arange(time.size) != 9
    np.testing.assert_allclose(measurement.ts, time[keep], atol=1e-12)
    # The .trc holds millimetres to OpenSim's printed precision.
    np.testing.assert_allclose(measurement.values[:, :3], shift[keep], atol=1e-8)
    np.testing.assert_allclose(measurement.values[:, 3:], angles[keep], atol=1e-6)
    assert measurement.read_as["frames"] == {"read": 30, "dropped": 1}


def test_planar_pose_in_the_laboratory_and_refusals(tmp_path):
    time = np.arange(20) / 100.0
    theta = 0.5 * np.sin(6 * time) + 3.0  # beyond pi: unwrapped, not folded
    x, y = 0.01 * np.cos(5 * time), 0.004 * time
    rotation = Rotation.from_euler("z", theta[:, None])
    body = {"A": [0.01, 0.0, 0.0], "B": [0.0, 0.02, 0.0], "C": [-0.01, -0.01, 0.005]}
    positions = {name: rotation.apply(np.repeat(np.array(c)[None], time.size, 0))
                 + np.column_stack([x, y, np.zeros_like(x)]) for name, c in body.items()}
    markers = spineid.read_trc(write_trc(tmp_path / "pair.trc", time, positions, units="m"))
    measurement = spineid.Measurement.from_markers(markers, ("x", "y", "theta"), upper=body)
    np.testing.assert_allclose(measurement.values, np.column_stack([x, y, theta]), atol=1e-9)
    with pytest.raises(ValueError, match=r"upper body markers \['D'\] are not in the file; its "
                                         r"markers: \['A', 'B', 'C'\]"):
        spineid.Measurement.from_markers(markers, ("x", "y", "theta"), upper={"D": [0, 0, 0]})
    with pytest.raises(ValueError, match="not channels"):
        spineid.Measurement.from_markers(markers, ("q0",), upper=body)


def test_fit_reads_a_marker_file_as_the_same_poses(tmp_path):
    # Noisy poses of the bundled 4-axial-spring pair, written once as spineid's CSV and once
    # as markers on the upper body (an OpenSim .trc in mm): the two fits agree.
    from spineid.cli import main

    model = spineid.dataset_path("axial_4_springs.toml")
    main(["simulate", str(model), "--out", str(tmp_path / "clean.csv")])
    table = spineid.read_table(tmp_path / "clean.csv")
    rng = np.random.default_rng(5)
    noise = rng.normal(0, 1, (table["t"].size, 3)) * np.array([5e-6, 5e-6, 1e-4])
    noise[0] = 0.0  # the first frame, at the model's initial pose, places the markers
    pose = np.column_stack([table["x"], table["y"], table["theta"]]) + noise
    columns = dict(zip(("x", "y", "theta"), pose.T))
    spineid.write_table(tmp_path / "poses.csv", {"t": table["t"], **columns})
    body = {"A": [0.01, 0.0, 0.0], "B": [0.0, 0.012, 0.002], "C": [-0.01, -0.005, -0.003]}
    rotation = Rotation.from_euler("z", pose[:, 2:3])
    lab = {name: rotation.apply(np.repeat(np.array(c)[None], len(pose), 0))
           + np.column_stack([pose[:, :2], np.zeros(len(pose))]) for name, c in body.items()}
    trc = write_trc(tmp_path / "markers.trc", table["t"], lab)
    common = ["--free", "stiffness", "--solver", "lm", "--noise", "x=5e-6,y=5e-6,theta=1e-4"]
    assert main(["fit", str(model), str(tmp_path / "poses.csv"), "--out", str(tmp_path / "a"),
                 *common]) == 0
    assert main(["fit", str(model), str(trc), "--out", str(tmp_path / "b"), "--markers",
                 "upper=A,B,C", *common]) == 0
    import json
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in "ab")
    for pa, pb in zip(a["parameters"], b["parameters"]):
        assert abs(pb["value"] - pa["value"]) <= 0.01 * pa["stderr"]
    assert b["data"][0]["read_as"]["frames"] == {"read": table["t"].size, "dropped": 0}
    assert main(["fit", str(model), str(trc), "--out", str(tmp_path / "c"), *common]) == 2
    # The same markers in a C3D file written by the c3d package (float32 millimetres).
    c3d_file = write_c3d(tmp_path / "markers.c3d", table["t"], lab)
    assert main(["fit", str(model), str(c3d_file), "--out", str(tmp_path / "d"), "--markers",
                 "upper=A,B,C", *common]) == 0
    d = json.loads((tmp_path / "d" / "report.json").read_text())
    for pa, pd in zip(a["parameters"], d["parameters"]):
        assert abs(pd["value"] - pa["value"]) <= 0.05 * pa["stderr"]
    # Markers named for a file of columns: refused, not ignored.
    assert main(["fit", str(model), str(tmp_path / "poses.csv"), "--out", str(tmp_path / "e"),
                 "--markers", "upper=A,B,C", *common]) == 2


def test_the_reference_frame_starts_the_record(tmp_path):
    # A cropped trial: times from 1 s, the first frame with a gap; the model's initial pose
    # at theta = 2 pi + 0.1 (angles kept continuous from it, not folded).
    time = 1.0 + np.arange(12) / 100.0
    theta = 0.1 + 0.2 * (time - time[1])
    rotation = Rotation.from_euler("z", theta[:, None])
    body = {"A": [0.01, 0.0, 0.0], "B": [0.0, 0.02, 0.0], "C": [-0.01, -0.01, 0.005]}
    positions = {name: rotation.apply(np.repeat(np.array(c)[None], time.size, 0))
                 for name, c in body.items()}
    positions["B"][0] = np.nan
    path = write_trc(tmp_path / "cropped.trc", time, positions, units="m")
    initial = np.array([0.0, 0.0, 2 * np.pi + 0.1])
    with pytest.warns(UserWarning, match=r"from frame 2 \(t = 1.01 s.*shifted by -1.01 s"):
        measurement = spineid.io.markers_measurement(path, ("x", "y", "theta"),
                                                     {"upper": ["A", "B", "C"]}, initial)
    np.testing.assert_allclose(measurement.ts, time[1:] - time[1], atol=1e-12)
    np.testing.assert_allclose(measurement.values[:, 2], theta[1:] + 2 * np.pi, atol=1e-9)
    np.testing.assert_allclose(measurement.values[:, :2], 0.0, atol=1e-9)
