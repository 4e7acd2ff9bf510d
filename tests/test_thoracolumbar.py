"""The thoracolumbar spine of Liu 2001 chapter 4: the 3-D T1-L5 model and its flexibility tests.

Oracles: Liu's printed node coordinates (the model's frames must carry the local nodes onto
them), the inverse of each joint law found by bisection in numpy (a pure moment about a joint's
own axis turns it by exactly that angle), the whole chain's energy gradient (zero at the
joint-by-joint equilibria), and a dynamic simulation (its held rotation is the quasi-static
one).
"""

import pathlib
import re
from contextlib import nullcontext

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
import spineid.plots
from helpers import MODEL_KINDS
from spineid.cli import main
from spineid.io import dumps_toml
from spineid.spines._thoracolumbar import THESIS_TO_SPINEID
from spineid.simulation import chain_residual, segment_pair

DATA = pathlib.Path(__file__).resolve().parents[1] / "datasets"
# One worker: the compiled tests of the spine are shared by the module's fixtures.
pytestmark = pytest.mark.xdist_group("thoracolumbar")


@pytest.fixture(scope="module")
def spine():
    return spineid.thoracolumbar_spine()


@pytest.fixture(scope="module")
def segments(spine):
    return spineid.segment_flexibility(spine, moment=10.0, steps=6)


@pytest.fixture(scope="module")
def whole(spine):
    with pytest.warns(RuntimeWarning, match="unstable equilibria.*flexion_extension"):
        return spineid.spine_flexibility(spine, "T1", moment=10.0, steps=6)


def test_body_frames_carry_liu_local_nodes_onto_his_global_ones(spine):
    nodes = spineid.liu_vertebra_nodes()
    geometry = spineid.liu_spine_geometry()
    typos = {"L4": (5, 6, 7, 8, 9, 10), "L3": (2,), "L1": (4,), "T10": (12,), "T6": (2,)}
    for k, name in enumerate(geometry.names):
        assert geometry.dropped[k] == typos.get(name, ())
        rows = (nodes["vertebra"] == name) & ~np.isin(nodes["node"], (13, 14, *typos.get(name, ())))
        local = nodes["local"][rows] @ THESIS_TO_SPINEID.T
        printed = nodes["global"][rows] @ THESIS_TO_SPINEID.T
        pose = np.asarray(spine.bodies[k].reference_pose)
        rotation = np.asarray(spineid.euler123_rotation(pose[3:]))
        # Node 1 is the local origin, half a body depth in front of the centre (e1 anterior).
        centre_local = np.array([-geometry.depths[k] / 2, 0.0, 0.0])
        placed = pose[:3] + (local - centre_local) @ rotation.T
        assert np.max(np.abs(placed - printed)) < 1e-3, name
    angles = np.degrees(geometry.node_angles)
    table = np.degrees(geometry.table_angles)
    assert np.allclose(angles[1:], table[1:], atol=0.1)
    assert angles[0] == pytest.approx(-table[0], abs=0.1)  # L5: nodes +8, Table 4-1 -8


def test_masses_share_de_leva_trunk_and_lumbar_levels_match_the_opensim_model(spine):
    masses = np.array([float(body.mass) for body in spine.bodies])
    assert masses.sum() == pytest.approx(73.0 * (0.1596 + 0.1633))
    # Christophy's OpenSim lumbar masses (datasets/lumbar_spine.toml): 1.67 to 1.82 kg.
    assert np.all((masses[:5] > 1.5) & (masses[:5] < 2.2))
    for body in spine.bodies:
        moments = np.linalg.eigvalsh(np.asarray(body.inertia))
        assert moments.min() > 0 and 2 * moments.max() <= moments.sum()


def test_model_file_is_the_python_model(spine):
    from_file = spineid.load_model(DATA / "thoracolumbar_spine.toml")
    assert from_file.body_names == spine.body_names
    assert len(from_file.loads) == 1
    left, right = jax.tree.leaves(eqx_strip_loads(from_file)), jax.tree.leaves(spine)
    assert len(left) == len(right)
    for a, b in zip(left, right):
        assert np.allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)


def eqx_strip_loads(chain):
    return spineid.SpatialChain(base_pose=chain.base_pose, bodies=chain.bodies,
                                elements=chain.elements, loads=(), gravity=chain.gravity,
                                names=chain.names)


def _inverse(law, moments):
    # The angles at which `law` carries `moments`: the law tabulated on a fine grid (one
    # vectorised call) and inverted by interpolation (laws are increasing).
    grid = np.linspace(-0.4, 0.4, 2_000_001)
    return np.interp(moments, np.asarray(law.load(grid)), grid)


def test_segment_tests_turn_each_joint_by_its_law_inverse(spine, segments):
    assert segments.converged.all() and segments.extrapolated() == []
    for j in (0, 4, 9, 16):
        laws = spine.elements[j].laws
        for d in range(3):
            rotations = segments.rotations[j, d]
            assert np.allclose(rotations[:, d], _inverse(laws[3 + d], segments.moments),
                               atol=1e-8)
            assert np.max(np.abs(np.delete(rotations, d, axis=1))) < 1e-9  # no coupling
            assert np.max(np.abs(segments.translations[j, d])) < 1e-9


def test_ranges_of_motion_are_the_sources(segments):
    ranges = spineid.joint_ranges()
    rom = segments.range_of_motion()
    assert segments.joints == tuple(ranges["joint"])
    assert np.allclose(rom[:, 0], 2 * ranges["lateral_bending"], atol=1e-8)
    assert np.allclose(rom[:, 1], 2 * ranges["axial_rotation"], atol=1e-8)
    assert np.allclose(rom[1:, 2], ranges["flexion_extension"][1:], atol=1e-8)
    # L5-S1 flexion-extension: Liu's phases, -5.8 to 8.5 degrees at -+10 N m.
    assert np.degrees(rom[0, 2]) == pytest.approx(14.3, abs=1e-6)
    assert np.degrees(segments.primary()[0, 2, 0]) == pytest.approx(-8.5, abs=1e-6)  # flexion
    with pytest.raises(ValueError, match="nz_moment"):
        segments.neutral_zone(20.0)
    nz = np.degrees(segments.neutral_zone(0.25))
    assert 2.8 < nz[0, 2] < 3.4  # Liu's neutral zone is +-1.7 degrees (smoothed corners)


def test_whole_spine_moment_passes_through_every_joint_below_it(spine, segments, whole):
    test = whole
    assert test.converged.all() and test.loaded == "T1"
    # Flexion-extension stays sagittal: every joint turns as in its own segment test.
    assert np.allclose(test.rotations[:, 2], segments.rotations[:, 2], atol=1e-8)
    # ... but a fixed-direction flexion moment of 10 N m buckles the flexed spine sideways
    # (its sagittal equilibrium unstable), while small moments and the other directions are
    # stable.
    assert test.stable[:2].all() and test.stable[2, 4:9].all()
    assert not test.stable[2, 0] and not test.stable[2, -1]
    # The whole chain (102 coordinates) is in equilibrium at every returned pose.
    axes = np.asarray(segment_pair(spine, 16).elements[0].frames(
        spine.bodies[15].reference_pose, spine.bodies[16].reference_pose)[0])
    for d in range(3):
        for i in (0, 4, 12):
            load = np.zeros(spine.n_dof)
            load[-3:] = test.moments[i] * axes[:, d]
            residual = jax.jit(chain_residual)(spine, jnp.asarray(test.poses[d, i]),
                                               jnp.asarray(load))
            assert float(jnp.max(jnp.abs(residual))) < 1e-7
    # A moment on T6 leaves the joints above it at rest.
    middle = spineid.spine_flexibility(spine, "T6", moment=5.0, steps=3)
    above = middle.joints.index("T5-T6")
    assert np.max(np.abs(middle.rotations[above:])) < 1e-10
    assert np.max(np.abs(middle.rotations[:above])) > 1e-3


def test_dynamic_test_settles_on_the_quasi_static_rotation(spine, segments):
    run = spineid.dynamic_flexibility(spine, "L4-L5", "flexion_extension", moment=-10.0,
                                      ramp=0.5, hold=0.3, samples=41)
    quasi_static = segments.rotations[1, 2, 0]
    assert run.moment[-1] == -10.0
    assert np.allclose(run.rotations[-1], quasi_static, atol=1e-6)


def _chain_text(edit):
    text = (DATA / "thoracolumbar_spine.toml").read_text()
    return edit(text)


@pytest.mark.parametrize("edit, key", [
    # T1 listed before T2: the joints no longer join neighbours.
    (lambda t: t.replace('name = "T2"', 'name = "TX"').replace('name = "T1"', 'name = "T2"')
     .replace('name = "TX"', 'name = "T1"'), r"joints\[15\]\.upper"),
    # L3 deleted (its body table): a joint too many and a missing vertebra.
    (lambda t: re.sub(r'\[\[bodies\]\]\nname = "L3"\n(?:.*\n){3}', "", t),
     r"joints\[2\]\.upper: expected 'L2'.*'L3' is not a body of this file"),
    (lambda t: t.replace('name = "L2"', 'name = "L4"', 1), r"bodies\[3\]\.name"),
    (lambda t: t.replace('lower = "L1"', 'lower = "L9"', 1), r"joints\[5\]\.lower"),
    (lambda t: t.replace('lower = "L1"\n', '', 1), r"joints\[5\]\.lower: .*it names no body"),
])
def test_chain_files_with_vertebrae_out_of_order_or_missing_name_the_key(tmp_path, edit, key):
    path = tmp_path / "spine.toml"
    path.write_text(_chain_text(edit))
    with pytest.raises(ValueError, match=key):
        spineid.load_model(path)


def test_chain_loads_are_body_forces_and_moments_like_a_pairs(spine):
    # Body L4's load [F, M] in the chain and in its motion segment (a SpatialPair, whose loads
    # are checked against Newton-Euler in tests/test_spatial_pair.py) give the same
    # generalized forces at a turned pose.
    load = spineid.SinusoidalLoad.from_terms(
        [("Fx", 3.0, 0.0, np.pi / 2), ("My", 0.7, 0.0, np.pi / 2), ("Mz", -1.1, 0.0, np.pi / 2)],
        spineid.SPATIAL_LOAD_COMPONENTS)
    rows = np.asarray(load.direction)
    chain_load = spineid.SinusoidalLoad(
        amplitude=load.amplitude, frequency=load.frequency, phase=load.phase,
        direction=jnp.asarray(np.pad(rows, ((0, 0), (6, spine.n_dof - 12)))))
    chain = spineid.SpatialChain(base_pose=spine.base_pose, bodies=spine.bodies,
                                 elements=spine.elements, loads=(chain_load,),
                                 gravity=spine.gravity, names=spine.names)
    q = np.asarray(chain.initial_state()[0]).copy()
    q[6:12] += [0.001, -0.002, 0.0005, 0.2, -0.3, 0.4]
    pair = segment_pair(spine, 1, (load,))
    expected = pair.generalized_forces(0.0, jnp.asarray(q[6:12]), jnp.zeros(6))
    got = chain.generalized_forces(0.0, jnp.asarray(q), jnp.zeros(spine.n_dof))
    np.testing.assert_allclose(got[6:12], expected, rtol=1e-12, atol=1e-12)
    assert np.all(np.asarray(got[:6]) == 0) and np.all(np.asarray(got[12:]) == 0)
    assert chain.load_components[6:9] == ("Fx_L4", "Fy_L4", "Fz_L4")


def test_bad_flexibility_requests_say_what_is_wrong(spine):
    with pytest.raises(ValueError, match="body = 'S1' is the chain's fixed base"):
        spineid.spine_flexibility(spine, "S1")
    with pytest.raises(ValueError, match="no such body"):
        spineid.spine_flexibility(spine, "C7")
    with pytest.raises(ValueError, match="joint 'L6-L5'"):
        spineid.segment_flexibility(spine, joints=["L6-L5"])
    with pytest.raises(ValueError, match="direction = 'twist'"):
        spineid.dynamic_flexibility(spine, "L4-L5", "twist")
    with pytest.raises(ValueError, match="moment"):
        spineid.segment_flexibility(spine, moment=-1.0)
    with pytest.raises(ValueError, match="joints is empty"):
        spineid.segment_flexibility(spine, joints=[])
    heavy = spineid.thoracolumbar_spine(gravity=(0.0, -9.81, 0.0))
    for test in (spineid.segment_flexibility, lambda c: spineid.spine_flexibility(c, "T1")):
        with pytest.raises(ValueError, match="the chain has gravity"):
            test(heavy)
    with pytest.warns(RuntimeWarning, match="beyond the joint laws' tables.*L5-S1 lateral"):
        beyond = spineid.segment_flexibility(spine, moment=14.0, steps=6)  # compiled shapes
    assert len(beyond.extrapolated()) == 17 * 3


def test_simulate_command_runs_a_chain_file(tmp_path):
    document = MODEL_KINDS["spatial_chain"].document  # L5 and L4 of the bundled file
    path = tmp_path / "two.toml"
    path.write_text(dumps_toml(document))
    out = tmp_path / "motion.csv"
    assert main(["simulate", str(path), "--out", str(out)]) == 0
    header = next(line for line in out.read_text().splitlines() if line.startswith("t,"))
    assert header.endswith("x_L4,y_L4,z_L4,a1_L4,a2_L4,a3_L4")
    ts, poses = spineid.read_trajectory(out, spineid.load_model(path).observable_names)
    assert len(ts) == 51 and np.ptp(poses[:, -1]) > 1e-3


def test_flexibility_plots_are_written(spine, segments, whole, tmp_path):
    spineid.plots.use_file_backend()
    assert spineid.plot_flexibility(segments, tmp_path / "curves.png").stat().st_size > 10_000
    assert spineid.plot_flexibility(whole, tmp_path / "whole.png").stat().st_size > 10_000
    path = spineid.plot_spine(spine, whole.poses[:, 8], tmp_path / "spine.png",
                              labels=list(spineid.DIRECTIONS))
    assert path.stat().st_size > 10_000


def test_the_spine_flexibility_command_gives_the_python_tests_numbers(segments, tmp_path,
                                                                       capsys):
    # `spineid spine flexibility` on the bundled file (read, not built in Python) gives the
    # segment tests of the Python model; its CSV holds every curve; bad requests are one line.
    import json

    out = tmp_path / "segments"
    assert main(["spine", "flexibility", "--out", str(out), "--steps", "6", "--no-plots"]) == 0
    report = json.loads((out / "report.json").read_text())
    rom = np.degrees(segments.range_of_motion())
    for j, joint in enumerate(segments.joints):
        for d, direction in enumerate(spineid.DIRECTIONS):
            assert report["joints"][joint][direction]["range_of_motion_deg"] == \
                pytest.approx(rom[j, d], rel=1e-9, abs=1e-9)
    table = np.genfromtxt(out / "flexibility.csv", delimiter=",", names=True, dtype=None,
                          encoding="utf-8")  # (numpy's reader: text and numbers alike)
    assert len(table) == 17 * 3 * 13 and np.all(table["equilibrium"] == 1)
    assert table["joint"][0] == "L5-S1" and table["direction"][-1] == "flexion_extension"
    np.testing.assert_allclose(table["rx_deg"], np.degrees(segments.rotations[..., 0]).ravel(),
                               atol=1e-9)
    # The whole spine, the moment on T1: the spine at the largest moments is drawn too.
    whole = tmp_path / "whole"
    assert main(["spine", "flexibility", "--out", str(whole), "--loaded", "T1", "--steps", "2",
                 "--moment", "0.2"]) == 0  # (below the neutral zone's 0.25 N m: within 0.2)
    assert json.loads((whole / "report.json").read_text())["neutral_zone_within_N_m"] == 0.2
    assert (whole / "spine.png").stat().st_size > 10_000
    assert "stable" in (whole / "flexibility.csv").read_text().splitlines()[0]
    capsys.readouterr()
    for arguments, message in (
            (["--joints", "L5-S1", "--loaded", "T1"], "give one of the two"),
            ([str(spineid.dataset_path("c5_c6.toml"))], "needs a kind = \"spatial_chain\""),
            (["--loaded", "S1"], "the chain's fixed base"),
            (["--moment", "0"], "a positive number of at most 1000 N m")):
        with pytest.raises(SystemExit) if arguments[0] == "--moment" else nullcontext():
            status = main(["spine", "flexibility", "--out", str(tmp_path / "bad"), *arguments])
            assert status == 2
        assert message in capsys.readouterr().err


def test_spine_levels_recovers_the_scales_of_the_spine_that_made_the_poses(tmp_path, capsys):
    # The command-line pipeline of a lab: a whole-spine flexibility test writes the vertebrae's
    # poses; `spine levels` fits each joint's scales to them. Poses made by L5-L4 on the sacrum
    # with its laws scaled by known factors give those factors back, starting from the model.
    import json

    document = MODEL_KINDS["spatial_chain"].document
    base = spineid.ModelFile.from_document(document).model
    truth = np.array([[1.5, 0.8, 1.2], [0.7, 1.3, 0.9]])
    made = tmp_path / "made.toml"
    made.write_text(dumps_toml(spineid.chain_document(spineid.scaled_laws(base, truth))))
    model = tmp_path / "model.toml"
    model.write_text(dumps_toml(spineid.chain_document(base)))
    test = tmp_path / "test"
    assert main(["spine", "flexibility", str(made), "--loaded", "L4", "--steps", "3",
                 "--moment", "4", "--no-plots", "--out", str(test)]) == 0
    assert main(["spine", "levels", str(model), str(test / "poses.csv"), "--loaded", "L4",
                 "--noise", "position=0.01mm,angle=0.001deg", "--out",
                 str(tmp_path / "fit")]) == 0
    report = json.loads((tmp_path / "fit" / "report.json").read_text())
    np.testing.assert_allclose([p["value"] for p in report["parameters"]], truth.ravel(),
                               rtol=1e-4)
    fitted = spineid.load_model(tmp_path / "fit" / "fitted.toml")
    np.testing.assert_allclose(
        [float(law.load_values[-1]) for element in fitted.elements for law in element.laws[3:]],
        [float(law.load_values[-1]) for element in spineid.scaled_laws(base, truth).elements
         for law in element.laws[3:]], rtol=1e-4)
    capsys.readouterr()
    lines = (test / "poses.csv").read_text().splitlines()
    (tmp_path / "short.csv").write_text("\n".join(lines[:-1]) + "\n")
    assert main(["spine", "levels", str(model), str(tmp_path / "short.csv"), "--loaded", "L4",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "no pose of L4 at 4 N m of flexion_extension (1 missing)" in capsys.readouterr().err


def test_the_spine_instrument_command_is_the_python_correction(tmp_path, capsys):
    # `spineid spine instrument` pulls the scoliotic spine onto two rods as
    # `spineid.correct_curve` does in Python: the same Cobb angles and clamp loads.
    import json

    levels = ("T12", "T11", "T10")
    assert main(["spine", "instrument", "--levels", ",".join(levels), "--steps", "2",
                 "--no-plots", "--out", str(tmp_path / "rods")]) == 0
    report = json.loads((tmp_path / "rods" / "report.json").read_text())
    curve = spineid.spinal_curve()
    rods = (spineid.Rod(levels, side="left"), spineid.Rod(levels, side="right"))
    correction = spineid.correct_curve(spineid.thoracolumbar_spine(curve=curve), rods,
                                       spineid.thoracolumbar_spine(curve=0.5 * curve), 2)
    before, after = np.degrees(correction.cobb_angle())
    assert report["cobb_angle_deg"] == pytest.approx({"before": before, "after": after},
                                                     rel=1e-9)
    assert after < 0.8 * before
    np.testing.assert_allclose([c["force_N"] + c["moment_N_m"] for c in report["clamps"]],
                               correction.screw_loads, rtol=1e-9, atol=1e-9)
    assert [(c["rod"], c["vertebra"]) for c in report["clamps"]] == list(correction.screws)
    capsys.readouterr()
    assert main(["spine", "instrument", "--levels", "T9,T12", "--steps", "2",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "list a rod's levels bottom up" in capsys.readouterr().err
