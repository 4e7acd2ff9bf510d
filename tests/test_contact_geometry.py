"""Cylinder end-face contact (Kecskemethy et al. section 3.1) against brute force: both rims,
the line where the face planes meet and the faces themselves sampled densely."""

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

import spineid  # noqa: F401  (float64)
from spineid.kinematics._contact_geometry import (
    EDGE1_ON_FACE2, EDGE2_ON_FACE1, EDGE_ON_EDGE, NO_CONTACT, PARALLEL_FACES,
)
from spineid import blended_contact, blending_factor, flat_contact, skew_contact

SKEW = jax.jit(jax.vmap(skew_contact))
FLAT = jax.jit(jax.vmap(flat_contact))
RIM = np.linspace(0.0, 2.0 * np.pi, 20000, endpoint=False)


def _unit(vector):
    return vector / np.linalg.norm(vector)


def _in_face_axes(normal):
    first = _unit(np.cross(normal, [0.3, 0.5, 0.8]))
    return first, np.cross(normal, first)


def _facing_discs(rng, count, max_tilt, spread):
    # Disc 2 somewhere; disc 1 facing it, tilted by up to max_tilt (rad), centre within spread.
    rows = []
    for _ in range(count):
        r1, r2 = rng.uniform(0.5, 2.0, 2)
        n2 = _unit(rng.normal(size=3))
        axis = _unit(np.cross(n2, rng.normal(size=3)))
        tilt = rng.uniform(0.0, max_tilt)
        n1 = -n2 * np.cos(tilt) + np.cross(axis, -n2) * np.sin(tilt)
        c2 = rng.normal(size=3) * 0.1
        c1 = c2 + rng.normal(size=3) * spread
        rows.append((c1, n1, r1, c2, n2, r2))
    return [np.array(column) for column in zip(*rows)]


def _rim(centre, normal, radius):
    first, second = _in_face_axes(normal)
    return centre + radius * (np.cos(RIM)[:, None] * first + np.sin(RIM)[:, None] * second)


def _deepest_rim_point(rim, centre, normal, radius):
    # Brute force: the rim sample deepest behind the other face, among those over that face.
    depth = -(rim - centre) @ normal
    lateral = rim - centre - np.outer((rim - centre) @ normal, normal)
    over = np.linalg.norm(lateral, axis=1) <= radius
    best = np.argmax(np.where(over, depth, -np.inf))
    return depth[best], rim[best]


def test_skew_contact_matches_sampled_rims_and_chords():
    rng = np.random.default_rng(0)
    c1, n1, r1, c2, n2, r2 = _facing_discs(rng, 2000, 1.2, 1.0)
    keep = np.linalg.norm(np.cross(n1, n2), axis=1) > 0.05  # skew: tilts above 3 degrees
    c1, n1, r1, c2, n2, r2 = (x[keep] for x in (c1, n1, r1, c2, n2, r2))
    result = SKEW(c1, n1, r1, c2, n2, r2)
    cases = np.asarray(result.case)
    assert {NO_CONTACT, EDGE1_ON_FACE2, EDGE2_ON_FACE1, EDGE_ON_EDGE} <= set(cases.tolist())
    resolution = 2.0 * np.pi / RIM.size
    for k in np.flatnonzero(cases != NO_CONTACT):
        depth, point = float(result.penetration[k]), np.asarray(result.point[k])
        if cases[k] == EDGE1_ON_FACE2:
            sampled, where = _deepest_rim_point(_rim(c1[k], n1[k], r1[k]), c2[k], n2[k], r2[k])
        elif cases[k] == EDGE2_ON_FACE1:
            sampled, where = _deepest_rim_point(_rim(c2[k], n2[k], r2[k]), c1[k], n1[k], r1[k])
        else:
            # Edge on edge: sample the line where the planes meet; the overlap of the two
            # chords is the part inside both discs.
            u = _unit(np.cross(n1[k], n2[k]))
            base = np.linalg.solve(np.stack([n1[k], n2[k], u]), [n1[k] @ c1[k], n2[k] @ c2[k], 0])
            s = np.linspace(-6.0, 6.0, 240001)
            line = base + s[:, None] * u
            inside = ((np.linalg.norm(line - c1[k], axis=1) <= r1[k])
                      & (np.linalg.norm(line - c2[k], axis=1) <= r2[k]))
            sampled, where = inside.sum() * (s[1] - s[0]), line[inside].mean(axis=0)
            assert depth == pytest.approx(sampled, abs=2e-4)
            assert np.linalg.norm(point - where) < 2e-4
            continue
        assert depth == pytest.approx(sampled, abs=4 * resolution**2 + 1e-12)
        assert np.linalg.norm(point - where) < 2 * resolution * max(r1[k], r2[k])
        assert depth > 0


def test_flat_contact_matches_the_sampled_faces_within_the_projection_error():
    # The flat model projects circle 1 as a circle (the ellipse's inscribed one): its
    # deepest depth must agree with the exact deepest point of face 1 over face 2, found by
    # sampling face 1, within r1 (1 - cos alpha) tan alpha plus the sampling resolution.
    rng = np.random.default_rng(1)
    c1, n1, r1, c2, n2, r2 = _facing_discs(rng, 400, 0.15, 1.2)
    result = FLAT(c1, n1, r1, c2, n2, r2)
    radial = np.sqrt(np.linspace(0.0, 1.0, 200))
    angle = np.linspace(0.0, 2.0 * np.pi, 720, endpoint=False)
    radial, angle = (x.ravel() for x in np.meshgrid(radial, angle))
    cases = np.asarray(result.case)
    assert {EDGE1_ON_FACE2, EDGE2_ON_FACE1, EDGE_ON_EDGE, NO_CONTACT} <= set(cases.tolist())
    for k in range(len(c1)):
        first, second = _in_face_axes(n1[k])
        face = c1[k] + r1[k] * radial[:, None] * (np.cos(angle)[:, None] * first
                                                   + np.sin(angle)[:, None] * second)
        projected = face - np.outer((face - c2[k]) @ n2[k], n2[k])
        over = np.linalg.norm(projected - c2[k], axis=1) <= r2[k]
        sin_tilt = np.linalg.norm(np.cross(n1[k], n2[k]))
        tan_tilt = sin_tilt / np.sqrt(1 - sin_tilt**2)
        if cases[k] == NO_CONTACT:
            # Apart in projection: at most the sliver the circle approximation leaves out.
            assert over.mean() < 1e-3 or sin_tilt > 0.02
            assert float(result.clearance[k]) >= 0
            continue
        depth = -(face - c2[k]) @ n2[k]
        sampled = np.max(np.where(over, depth, -np.inf))
        tolerance = (r1[k] * (1 - np.sqrt(1 - sin_tilt**2)) * tan_tilt
                     + 2 * r1[k] * tan_tilt * 2 * np.pi / 720 + 1e-12)
        assert float(result.depth_at_deepest[k]) == pytest.approx(sampled, abs=tolerance)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.2, 3.0), st.floats(0.2, 3.0), st.floats(-4.0, 4.0), st.floats(-4.0, 4.0),
       st.floats(-1.0, 1.0))
def test_parallel_point_is_the_middle_of_the_overlap(r1, r2, x, y, gap):
    # Parallel faces: M is the middle of the part of the centre line inside both discs (found
    # by sampling that line), C1 when disc 1 lies inside disc 2 and C2 in the opposite case;
    # every point of the overlap is equally deep.
    c1, c2 = np.array([x, gap, y]), np.zeros(3)
    n1, n2 = np.array([0.0, -1.0, 0.0]), np.array([0.0, 1.0, 0.0])
    result = flat_contact(c1, n1, r1, c2, n2, r2)
    distance = np.hypot(x, y)
    if distance >= r1 + r2 - 1e-9:
        assert int(result.case) == NO_CONTACT
        return
    if distance > 1e-6:
        # The whole line through both centres, from C1 towards C2.
        s = np.linspace(-8.0, 8.0, 200001)
        line = np.array([x, 0.0, y]) + np.outer(s, [-x / distance, 0.0, -y / distance])
        inside = ((np.linalg.norm(line - [x, 0.0, y], axis=1) <= r1)
                  & (np.linalg.norm(line, axis=1) <= r2))
        middle = line[inside][[0, -1]].mean(axis=0)
        assert np.linalg.norm(np.asarray(result.parallel) - middle) < 1.6e-4
    assert float(result.depth_at_deepest) == pytest.approx(-gap, abs=1e-12)
    assert float(result.depth_at_parallel) == pytest.approx(-gap, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 1.2), st.floats(1.0, 200.0))
def test_blending_function_moves_the_point_from_the_centre_to_the_rim(tilt, sharpness):
    # A disc on a large plane: P' lies r = r0 (1 - exp(-C sin alpha)) from the disc's centre
    # (section 3.1.3) towards its lowest rim point (r0 the radius; seen from above, r cos
    # alpha), and the depth there is that of the point P' of the disc.
    radius, height = 0.5, 0.1
    n1 = np.array([np.sin(tilt), -np.cos(tilt), 0.0])
    centre = np.array([0.0, height, 0.0])
    result = blended_contact(centre, n1, radius, np.zeros(3), np.array([0.0, 1.0, 0.0]), 50.0,
                             sharpness)
    share = float(blending_factor(np.sin(tilt), sharpness))
    offset = np.asarray(result.point) - np.array([0.0, 0.0, 0.0])
    assert share == pytest.approx(1 - np.exp(-sharpness * np.sin(tilt)), rel=1e-12)
    assert np.linalg.norm(offset) == pytest.approx(share * radius * np.cos(tilt), abs=1e-9)
    assert float(result.penetration) == pytest.approx(
        share * radius * np.sin(tilt) - height, abs=1e-9)
    assert int(result.case) == EDGE1_ON_FACE2


def test_blended_depth_is_continuous_and_differentiable_through_flat():
    # Through zero tilt the blended depth and its derivatives stay finite and continuous, and
    # jvp agrees with central differences (the blending factor vanishes where sin alpha does).
    def depth(angle):
        n1 = jnp.array([0.0, -1.0, 0.0]) * jnp.cos(angle) + jnp.array([1.0, 0.0, 0.0]) * jnp.sin(
            angle)
        return blended_contact(np.array([0.2, 0.01, 0.1]), n1, 0.5, np.zeros(3),
                               np.array([0.0, 1.0, 0.0]), 0.6).penetration

    for angle in (0.0, 1e-7, 0.01, -0.02):
        slope = jax.grad(depth)(angle)
        assert np.isfinite(float(slope))
        step = 1e-6
        if angle != 0.0:
            assert float(slope) == pytest.approx(
                (float(depth(angle + step)) - float(depth(angle - step))) / (2 * step), rel=1e-4,
                abs=1e-8)
    assert np.isfinite(float(jax.hessian(depth)(0.0)))


def test_skew_contact_refuses_parallel_faces_and_names_the_alternative():
    centre1, centre2 = np.array([0.1, 0.02, 0.0]), np.zeros(3)
    down, up = np.array([0.0, -1.0, 0.0]), np.array([0.0, 1.0, 0.0])
    with pytest.raises(Exception, match="faces are parallel.*flat_contact"):
        skew_contact(centre1, down, 0.5, centre2, up, 0.5)
    result = jax.jit(skew_contact, static_argnames="throw")(centre1, down, 0.5, centre2, up, 0.5,
                                                           throw=False)
    assert int(result.case) == PARALLEL_FACES
    assert np.all(np.isfinite(np.asarray(result.point))) and float(result.penetration) == 0.0
    # The flat model is the one defined there: the faces overlap, 0.02 apart.
    flat = flat_contact(centre1, down, 0.5, centre2, up, 0.5)
    assert float(flat.depth_at_parallel) == pytest.approx(-0.02, abs=1e-12)
