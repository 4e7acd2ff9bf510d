"""Instrumentation of Liu's thoracolumbar spine: rods clamped at the Appendix B screw points,
the correction they impose on a scoliotic curve and the motion they take away.

Oracles: a clamped-clamped Euler-Bernoulli beam element written here from the textbook
(Przemieniecki 1968) with rotations by scipy, scipy's minimiser on the instrumented spine's
potential energy, the joint-by-joint solve of a pure moment (`spine_flexibility`), and statics
that hold whatever the model: the loads a rod puts on its clamps balance, and the joints outside
the instrumented span carry nothing from the correction (the rods and the span form a closed
system), so a pure moment turns them exactly as before.

The suite works on the lumbar part of the spine (L5-L1 on the sacrum): the same code paths as
the 17 levels, a tenth of the coordinates.
"""

import jax
import numpy as np
import pytest
import scipy.optimize
from scipy.spatial.transform import Rotation

import spineid
from spineid.io import dumps_toml
from spineid.models import SpatialChain

pytestmark = pytest.mark.xdist_group("instrumentation")

LUMBAR = ("L5", "L4", "L3", "L2", "L1")
RODS = (spineid.Rod(("L4", "L3", "L2", "L1"), side="left"),
        spineid.Rod(("L4", "L3", "L2", "L1"), side="right"))


def lumbar(chain: SpatialChain) -> SpatialChain:
    n = len(LUMBAR)
    assert chain.body_names[1:n + 1] == LUMBAR
    return SpatialChain(base_pose=chain.base_pose, bodies=chain.bodies[:n],
                        elements=chain.elements[:n], loads=(), gravity=chain.gravity,
                        names=chain.names[:n + 1])


@pytest.fixture(scope="module")
def scoliotic():
    # The bundled curve's lumbar part bends L4-L1 by 18 degrees to the right (coronal).
    return lumbar(spineid.thoracolumbar_spine(curve=spineid.spinal_curve()))


@pytest.fixture(scope="module")
def straight():
    return lumbar(spineid.thoracolumbar_spine())


@pytest.fixture(scope="module")
def correction(scoliotic, straight):
    with pytest.warns(RuntimeWarning, match="beyond their laws' tables"):
        return spineid.correct_curve(scoliotic, RODS, shape=straight, steps=6)


def _beam_stiffness(length, modulus, poisson, diameter):
    # The 12x12 stiffness of a clamped-clamped round beam along local x, node dofs
    # [ux, uy, uz, rx, ry, rz]: axial, torsion, bending in x-y (v, rz) and x-z (w, ry; the
    # slope dw/dx is -ry, hence the sign flips of the coupling terms).
    area, inertia = np.pi * diameter**2 / 4, np.pi * diameter**4 / 64
    shear_modulus = modulus / (2 * (1 + poisson))
    k = np.zeros((12, 12))
    for dof, stiffness in ((0, modulus * area / length), (3, shear_modulus * 2 * inertia / length)):
        k[np.ix_([dof, dof + 6], [dof, dof + 6])] = stiffness * np.array([[1, -1], [-1, 1]])
    L = length
    bending = modulus * inertia / L**3 * np.array([[12, 6 * L, -12, 6 * L],
                                                   [6 * L, 4 * L * L, -6 * L, 2 * L * L],
                                                   [-12, -6 * L, 12, -6 * L],
                                                   [6 * L, 2 * L * L, -6 * L, 4 * L * L]])
    k[np.ix_([1, 5, 7, 11], [1, 5, 7, 11])] = bending
    flip = np.array([1, -1, 1, -1])
    k[np.ix_([2, 4, 8, 10], [2, 4, 8, 10])] = bending * np.outer(flip, flip)
    return k


@pytest.mark.parametrize("point, material", [("pedicle", "titanium"),
                                             ("lamina", "cobalt_chrome")])
def test_a_rod_segment_is_the_clamped_beam_element(straight, point, material):
    rod = spineid.Rod(("L3", "L2"), side="right", point=point, material=material)
    (link,) = spineid.rod_links(straight, rod)
    poses = np.asarray(straight.initial_state()[0]).reshape(-1, 6)
    lower, upper = poses[link.lower - 1], poses[link.upper - 1]

    def clamp(level, pose):
        local = spineid.implant_point(level, point, "right")
        return pose[:3] + Rotation.from_euler("XYZ", pose[3:]).apply(local)

    a, b = clamp("L3", lower), clamp("L2", upper)
    length = np.linalg.norm(b - a)
    x = (b - a) / length
    y = np.cross(x, [1.0, 0.0, 0.0])
    y /= np.linalg.norm(y)
    to_local = np.stack([x, y, np.cross(x, y)])
    k = _beam_stiffness(length, *spineid.ROD_MATERIALS[material], rod.diameter)
    rng = np.random.default_rng(7)
    for _ in range(3):
        moves = rng.normal(size=(2, 6)) * np.array([1e-7] * 3 + [1e-5] * 3)
        moved = [np.concatenate([pose[:3] + move[:3], (Rotation.from_rotvec(move[3:])
                                                       * Rotation.from_euler("XYZ", pose[3:])
                                                       ).as_euler("XYZ")])
                 for pose, move in zip((lower, upper), moves)]
        # Each clamp moves with its body: translation plus rotation about the body's origin.
        u = np.concatenate([np.concatenate([to_local @ (move[:3] + np.cross(move[3:], c - pose[:3])),
                                            to_local @ move[3:]])
                            for move, c, pose in zip(moves, (a, b), (lower, upper))])
        expected = -k @ u
        (m1, f1), (m2, f2) = link.element.wrenches(*moved, np.zeros(6), np.zeros(6))
        _, x1, _, x2 = link.element.frames(*moved)
        got = []
        for force, moment, origin, level, pose in ((f1, m1, x1, "L3", moved[0]),
                                                   (f2, m2, x2, "L2", moved[1])):
            at_clamp = np.asarray(moment) + np.cross(np.asarray(origin) - clamp(level, pose),
                                                     np.asarray(force))
            got += [to_local @ np.asarray(force), to_local @ at_clamp]
        got = np.concatenate(got)
        # Moments are compared on the scale of the end moments a force of that size makes
        # over the segment's length (the geometric terms left out of the beam are of the
        # order of the rotations, 1e-5).
        forces = np.max(np.abs(expected[[0, 1, 2, 6, 7, 8]]))
        moments = np.max(np.abs(expected[[3, 4, 5, 9, 10, 11]])) + length * forces
        scale = np.array([forces] * 3 + [moments] * 3)
        np.testing.assert_array_less(np.abs(got - expected), 1e-3 * np.tile(scale, 2))


def test_the_chain_solve_matches_the_joint_by_joint_solve_of_a_pure_moment(straight):
    # The same load steps as the motion test below, which reuses this compilation.
    joint_by_joint = spineid.spine_flexibility(straight, "L1", moment=4.0, steps=2,
                                               stability=False)
    whole = spineid.chain_flexibility(straight, "L1", moment=4.0, steps=2, stability=False)
    assert np.all(whole.converged)
    np.testing.assert_allclose(whole.rotations, joint_by_joint.rotations, atol=1e-8)
    np.testing.assert_allclose(whole.translations, joint_by_joint.translations, atol=1e-9)


def test_rods_contoured_to_the_spine_in_situ_change_nothing(scoliotic):
    correction = spineid.correct_curve(scoliotic, RODS, steps=6)  # the fixture's compilation
    np.testing.assert_allclose(correction.q, correction.rest, atol=1e-12)
    np.testing.assert_allclose(correction.screw_loads, 0.0, atol=1e-6)
    assert correction.beyond_tables == ()


def test_the_correction_is_the_minimum_of_the_potential_energy(correction):
    chain = correction.chain
    q0 = correction.rest

    # Scaled coordinates: millimetres and centiradians, so BFGS sees a rounder problem.
    scale = np.tile([1e-3, 1e-3, 1e-3, 1e-2, 1e-2, 1e-2], len(chain.bodies))
    energy = jax.jit(jax.value_and_grad(lambda z: chain.potential_energy(0.0, q0 + scale * z)))

    def value_and_gradient(z):
        value, gradient = energy(z)
        return float(value), np.asarray(gradient)

    found = scipy.optimize.minimize(value_and_gradient, np.zeros_like(q0), jac=True,
                                    method="BFGS", options={"gtol": 1e-9, "maxiter": 20000})
    assert float(chain.potential_energy(0.0, correction.q)) <= found.fun + 1e-6
    np.testing.assert_allclose(q0 + scale * found.x, correction.q, atol=1e-5)


def test_the_rods_pull_the_curve_straighter_and_their_loads_balance(correction, scoliotic):
    before, after = correction.cobb_angle()
    assert np.degrees(before) == pytest.approx(18.0, abs=1.0)
    assert 0.0 < after < 0.5 * before
    assert np.all(correction.path.converged)
    # The L5-S1 and L4-L5 joints lie below the rods: nothing of the correction reaches them.
    np.testing.assert_allclose(correction.joint_changes[:2], 0.0, atol=1e-9)
    # Each rod is in equilibrium: what it puts on its clamps sums to no force and no moment.
    poses = np.asarray(correction.q).reshape(-1, 6)
    for rod in RODS:
        force, moment = np.zeros(3), np.zeros(3)
        for (name, level), load in zip(correction.screws, correction.screw_loads):
            if name != rod.name:
                continue
            pose = poses[scoliotic.body_index(level)]
            turn = Rotation.from_euler("XYZ", pose[3:])
            at = pose[:3] + turn.apply(spineid.implant_point(level, rod.point, rod.side))
            f, m = turn.apply(load[:3]), turn.apply(load[3:])
            force += f
            moment += m + np.cross(at, f)
        assert np.linalg.norm(force) < 1e-6 * np.abs(correction.screw_loads[:, :3]).max()
        assert np.linalg.norm(moment) < 1e-6 * np.abs(correction.screw_loads[:, 3:]).max() + 1e-9
    assert np.abs(correction.screw_loads[:, :3]).max() > 1.0
    text = correction.report()
    assert "Cobb angle L4-L1" in text and "left rod L3" in text and "right rod L1" in text


def test_rods_take_the_motion_of_the_levels_they_span_and_leave_the_rest(scoliotic, straight):
    with pytest.warns(RuntimeWarning):
        change = spineid.motion_change(scoliotic, RODS, shape=straight, body="L1", moment=4.0,
                                       steps=2, assembly_steps=6, stability=False)
    ratios = change.ratios()
    # Axial rotation keeps the most (about a tenth): two parallel rods resist it least.
    assert np.all(ratios[2:] < 0.2)
    assert np.all(ratios[2:, [0, 2]] < 0.05)
    # A pure moment on L1 passes unchanged through the joints below the rods, which the
    # correction did not deflect: their motion is exactly as before.
    np.testing.assert_allclose(ratios[:2], 1.0, rtol=1e-6)
    assert "L1-L2" in change.table()


def test_the_bundled_scoliosis_and_the_straightened_shapes():
    geometry = spineid.liu_spine_geometry()
    spine = spineid.thoracolumbar_spine(curve=spineid.spinal_curve())
    tilts = np.degrees(spineid.coronal_tilts(spine.initial_state()[0]))
    main = [spine.body_index(v) for v in ("T12", "T11", "T10", "T9", "T8", "T7", "T6", "T5")]
    assert np.ptp(tilts[main]) == pytest.approx(37.0, abs=1.0)
    # Undoing the sagittal curve joint by joint leaves every vertebra with the sacrum's axes.
    flat = spineid.bent_geometry(geometry, -spineid.sagittal_curve(geometry))
    np.testing.assert_allclose(flat.rotations, np.broadcast_to(geometry.base_axes, (17, 3, 3)),
                               atol=1e-12)
    unchanged = spineid.bent_geometry(geometry, np.zeros((17, 3)))
    np.testing.assert_array_equal(unchanged.centres, geometry.centres)


def _curve_file(tmp_path, text):
    path = tmp_path / "curve.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize("make, match", [
    (lambda: spineid.Rod(("L2",)), "at least two vertebra names"),
    (lambda: spineid.Rod("L2"), "at least two vertebra names"),
    (lambda: spineid.Rod(("L2", "L2")), "listed twice"),
    (lambda: spineid.Rod(("L2", "L1"), side="middle"), "side 'middle'"),
    (lambda: spineid.Rod(("L2", "L1"), point="spinous"), "point 'spinous'"),
    (lambda: spineid.Rod(("L2", "L1"), diameter=0.0), "diameter"),
    (lambda: spineid.Rod(("L2", "L1"), material="wood"), "material 'wood'"),
    (lambda: spineid.Rod(("L2", "L1"), material=(-1.0, 0.3)), "Young's modulus"),
    (lambda: spineid.implant_point("C5"), "no screw or hook points"),
])
def test_bad_rods_say_what_is_wrong(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("levels, match", [
    (("S1", "L5"), r"left rod levels\[0\] = 'S1': no screw or hook points"),
    (("L2", "T5"), r"left rod levels\[1\] = 'T5': no such body"),
    (("L1", "L2"), r"left rod levels\[1\] = 'L2' is not above 'L1'"),
])
def test_rods_at_levels_without_screw_points_name_the_key(straight, levels, match):
    with pytest.raises(ValueError, match=match):
        spineid.instrument(straight, spineid.Rod(levels))


@pytest.mark.parametrize("text, match", [
    ("joint,lateral_bending_deg\nL4-L3,2\n", "joint 'L4-L3' .* is not a joint"),
    ("joint,lateral_bending_deg\nL3-L4,2\nL3-L4,1\n", "listed twice"),
    ("joint,comment\nL3-L4,x\n", "at least one of the columns"),
])
def test_bad_curve_files_name_the_joint(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        spineid.spinal_curve(_curve_file(tmp_path, text))


def test_instrumented_chains_are_refused_where_rods_would_be_lost(straight):
    instrumented = spineid.instrument(straight, RODS)
    with pytest.raises(ValueError, match="links .*left rod L3-L4.* use chain_flexibility"):
        spineid.spine_flexibility(instrumented, "L1")
    with pytest.raises(ValueError, match="cannot hold yet"):
        dumps_toml(spineid.chain_document(instrumented))
    with pytest.raises(ValueError, match="no rods"):
        spineid.instrument(straight, ())
    with pytest.raises(ValueError, match="rod names repeat"):
        spineid.instrument(straight, (RODS[0], RODS[0]))
    with pytest.raises(ValueError, match="no links to assemble"):
        spineid.assemble_links(straight)
    with pytest.raises(ValueError, match="steps 0"):
        spineid.assemble_links(instrumented, steps=0)
    with pytest.raises(ValueError, match="'S1' is the chain's fixed base"):
        spineid.chain_flexibility(instrumented, "S1")
    with pytest.raises(ValueError, match="curve: expected finite rotations"):
        spineid.thoracolumbar_spine(curve=np.zeros((16, 3)))
