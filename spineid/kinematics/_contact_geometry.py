"""Contact between the end faces of two cylinders: the facet-joint geometry of Kecskemethy,
Lange and Grabner (section 3.1), as pure JAX functions.

Each facet surface is a flat circular face: disc `i` has its centre `C_i` (m), the unit normal
`n_i` of its face pointing OUT of its cylinder (towards the partner), and its radius `r_i` (m).
Two facing faces have `n_1 . n_2 < 0`; their tilt `alpha` is the angle between `n_1` and
`-n_2` (`sin alpha = |n_1 x n_2|`), zero when the faces lie flat on each other. The solid of
cylinder `i` lies behind its face, on the side of `-n_i`. `c = C_2 - C_1`.

Skew contact (section 3.1.1, `skew_contact`), for a finite tilt, with `u = n_1 x n_2 / sin alpha`
along the line `l` where the two face planes meet:
- case 1, the edge of disc 1 on the face of disc 2: the rim point of disc 1 deepest in the solid
  of 2 is `P_1 = C_1 + r_1 u_a1`, `u_a1 = n_1 x u` (eq 1), at the depth
  `d_1 = c . n_2 + r_1 sin alpha` below face 2, measured along `n_2`; it holds while `P_1` lies
  over face 2 (within `r_2` of the axis of cylinder 2);
- case 2, the edge of disc 2 on the face of disc 1: `P_2 = C_2 + r_2 u_a2`, `u_a2 = -n_2 x u`
  (eq 2), depth `d_2 = -c . n_1 + r_2 sin alpha` along `n_1`;
- case 3, edge on edge: both rims cross `l`; the chord of disc `i` on `l` has its midpoint at
  the distance `a_i` from `C_i` and half-length `b_i = sqrt(r_i^2 - a_i^2)`; the penetration is
  the overlap of the two chords along `l`, `b_1 + b_2 - |c . u|` while neither chord holds the
  other, and the contact point is the middle of the overlap.
The printed depths of section 3.1.1 swap the radii and the normals between the two cases
(`c . n_1 - r_2 sin alpha` for case 1) and count the edge-edge penetration with the opposite sign
(`|c . u| - (b_1 + b_2)`, zero at contact); the forms above are the depths of the points eqs 1-2
define, checked against brute-force sampling of the rims (tests/test_contact_geometry.py).

Flat contact (section 3.1.2, `flat_contact`), for an almost flat contact, where the skew formulas
become singular: both circles are projected onto the plane of face 2. The paper neglects the
distortion of circle 1 to an ellipse with half-axes `r_1`, `r_1 cos alpha`; spineid takes the
ellipse's inscribed circle (radius `r_1 cos alpha`), which keeps the deepest rim point of disc 1
exact and moves the edge-on-edge corners by less than `r_1 (1 - cos alpha)`, a depth error below
`r_1 (1 - cos alpha) tan alpha` (3e-6 m for a 5 mm facet at 6 degrees). The overlap of the two projected discs is a lens; the depth of face 1
below face 2 is affine over it and largest at the point `P`: the deepest rim point of disc 1 when
it lies over face 2 (case 1: `cos phi_1 >= cos beta_1` in the paper), else the deepest rim point
of disc 2 when it lies under face 1 (case 2), else the deeper intersection of the two circles
(edge on edge). For parallel faces the paper puts the contact at the middle `M` of the part of
the centre line inside both discs, `L = (c + r_1 - r_2) / 2` from `C_1` (clipped to `[0, c]`,
which is `C_1` when disc 1 lies inside disc 2 and `C_2` when disc 2 lies inside disc 1).

State transition (section 3.1.3, `blended_contact`): the virtual contact point slides from `M`
to `P` with the tilt, `P' = M + (1 - exp(-C sin alpha)) (P - M)`, so that its distance from `M`
is the blending function `r = r_0 (1 - exp(-C sin alpha))`, `r_0 = |P - M|`. The penetration is
the local depth of face 1 below face 2 at `P'`, measured along `n_2`.

Smoothness: the blended depth is continuous in the poses; its derivative jumps where `P` moves
from one kind of lens vertex to another and where the projected discs stop overlapping, and
`sin alpha` (a norm) is not differentiable at exactly zero tilt, where the code uses
`sqrt(|n_1 x n_2|^2 + 1e-30)` so that derivatives stay finite (the blending factor vanishes
there, so the depth's derivative is still right). Derivatives of `skew_contact` jump between its
cases and do not exist at zero tilt (its line `l` is undefined there: use `flat_contact`).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

NO_CONTACT = 0
EDGE1_ON_FACE2 = 1
EDGE2_ON_FACE1 = 2
EDGE_ON_EDGE = 3
PARALLEL_FACES = 4
CONTACT_CASES = ("no contact", "edge 1 on face 2", "edge 2 on face 1", "edge on edge",
                 "parallel faces (skew contact undefined)")
"""Names of the contact situations, indexed by the `case` of a `ContactGeometry`."""

MIN_SKEW_SIN_TILT = 1e-9
"""Below this `sin alpha` the faces count as parallel for `skew_contact`: the line `l` where
their planes meet is then undefined (or lost in roundoff)."""

_TINY = 1e-30  # squared-length floor that keeps norms differentiable at zero


class ContactGeometry(eqx.Module):
    """Where and how deep two cylinder end faces overlap.

    Fields: `penetration` (m; positive when the faces overlap, negative or zero otherwise),
    `point` (`(3,)`, m, ground: the contact point), `normal` (`(3,)`, unit: the direction of the
    contact force on body 1, the owner of disc 1), `case` (`NO_CONTACT`, `EDGE1_ON_FACE2`,
    `EDGE2_ON_FACE1`, `EDGE_ON_EDGE`), `sin_tilt` (`sin alpha` of the two faces).
    """

    penetration: Float[Array, ""]
    point: Float[Array, "3"]
    normal: Float[Array, "3"]
    case: Int[Array, ""]
    sin_tilt: Float[Array, ""]


def _norm(vector):
    return jnp.sqrt(jnp.sum(vector**2) + _TINY)


def _root_or_zero(square):
    # sqrt(max(square, 0)) whose derivative stays finite (zero) where square <= 0, also in
    # reverse mode, where a discarded branch's infinite slope would otherwise give NaN.
    positive = square > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, square, 1.0)), 0.0)


def _in_plane(vector, normal):
    # The component of `vector` in the plane with unit `normal`.
    return vector - (vector @ normal) * normal


def skew_contact(centre1: Float[ArrayLike, "3"], normal1: Float[ArrayLike, "3"], radius1,
                 centre2: Float[ArrayLike, "3"], normal2: Float[ArrayLike, "3"], radius2,
                 throw: bool = True) -> ContactGeometry:
    """Contact of two tilted cylinder faces (Kecskemethy et al. section 3.1.1, eqs 1-2 and the
    depths below them; module docstring for the conventions and the printed signs).

    **Arguments:** disc centres (m, `(3,)`), outward unit face normals (`(3,)`) and radii (m) of
    disc 1 and disc 2, in ground coordinates. The faces must be tilted (`sin alpha` at least
    `MIN_SKEW_SIN_TILT`): parallel faces raise an error naming `flat_contact`, or with
    `throw=False` give the case `PARALLEL_FACES` (penetration 0, point midway between the
    centres, normal `n_2`: placeholders, not a contact).

    **Returns:** a `ContactGeometry`: the deeper of cases 1 and 2 whose point lies over the
    other face and penetrates it; else edge on edge when the chords on `l` overlap; else
    `NO_CONTACT` with a penetration <= 0 (the largest candidate depth, capped at 0). `normal` is
    `n_2` in case 1,
    `-n_1` in case 2 and along `-sign(c . u) u` in case 3.
    """
    c1, n1, c2, n2 = (jnp.asarray(x, dtype=float) for x in (centre1, normal1, centre2, normal2))
    r1, r2 = jnp.asarray(radius1, dtype=float), jnp.asarray(radius2, dtype=float)
    c = c2 - c1
    cross = jnp.cross(n1, n2)
    sin_tilt = _norm(cross)
    u = cross / sin_tilt
    u_a1 = jnp.cross(n1, u)
    u_a2 = -jnp.cross(n2, u)
    point1 = c1 + r1 * u_a1
    point2 = c2 + r2 * u_a2
    depth1 = c @ n2 + r1 * sin_tilt
    depth2 = -c @ n1 + r2 * sin_tilt
    over2 = _norm(_in_plane(point1 - c2, n2)) <= r2
    over1 = _norm(_in_plane(point2 - c1, n1)) <= r1
    # Edge on edge: the chords of both discs on the line l.
    a1 = (c @ n2) / (u_a1 @ n2)
    a2 = -(c @ n1) / (u_a2 @ n1)
    crosses = (jnp.abs(a1) < r1) & (jnp.abs(a2) < r2)
    b1 = _root_or_zero(r1**2 - a1**2)
    b2 = _root_or_zero(r2**2 - a2**2)
    s2 = c @ u  # position of chord 2's midpoint along u, from chord 1's
    low, high = jnp.maximum(-b1, s2 - b2), jnp.minimum(b1, s2 + b2)
    overlap = high - low
    foot1 = c1 + a1 * u_a1
    point3 = foot1 + 0.5 * (low + high) * u
    normal3 = -jnp.where(s2 >= 0, 1.0, -1.0) * u

    valid1 = over2 & (depth1 > 0)
    valid2 = over1 & (depth2 > 0)
    valid3 = crosses & (overlap > 0)
    pick1 = valid1 & (~valid2 | (depth1 >= depth2))
    pick2 = valid2 & ~pick1
    pick3 = valid3 & ~pick1 & ~pick2
    case = jnp.where(pick1, EDGE1_ON_FACE2,
                     jnp.where(pick2, EDGE2_ON_FACE1, jnp.where(pick3, EDGE_ON_EDGE, NO_CONTACT)))
    separated = jnp.minimum(jnp.maximum(jnp.maximum(depth1, depth2),
                                        jnp.where(crosses, overlap, -jnp.inf)), 0.0)
    penetration = jnp.where(pick1, depth1, jnp.where(pick2, depth2,
                                                     jnp.where(pick3, overlap, separated)))
    point = jnp.where(pick1, point1, jnp.where(pick2, point2,
                                               jnp.where(pick3, point3, 0.5 * (c1 + c2))))
    normal = jnp.where(pick1, n2, jnp.where(pick2, -n1, jnp.where(pick3, normal3, n2)))
    parallel = sin_tilt < MIN_SKEW_SIN_TILT
    case = jnp.where(parallel, PARALLEL_FACES, case)
    penetration = jnp.where(parallel, 0.0, penetration)
    point = jnp.where(parallel, 0.5 * (c1 + c2), point)
    normal = jnp.where(parallel, n2, normal)
    if throw:
        penetration = eqx.error_if(
            penetration, parallel,
            "skew_contact: the faces are parallel (sin alpha < 1e-9), so the line where their "
            "planes meet is undefined; use flat_contact or blended_contact (Kecskemethy et al. "
            "section 3.1.2), or pass throw=False to get the case 'parallel faces'")
    return ContactGeometry(penetration, point, normal, case, sin_tilt)


class FlatContact(eqx.Module):
    """The projection of two almost parallel faces onto face 2 (section 3.1.2).

    Fields (points in ground coordinates, m, on the plane of face 2): `deepest` (`P`, the lens
    point where face 1 lies deepest below face 2), `parallel` (`M`, the contact point of the
    parallel case), `depth_at_deepest` and `depth_at_parallel` (m, the local depth of face 1
    below face 2 there, along `n_2`), `case` (the kind of lens vertex `P` is, `NO_CONTACT` when
    the projected discs do not overlap), `sin_tilt`, `depth_gradient` (`(3,)`, in the plane of
    face 2: the local depth is `depth_at_parallel + depth_gradient . (X - M)` at a point `X`),
    `clearance` (m: distance between the projected centres less `r_1 + r_2`; positive when the
    projected discs are apart).
    """

    deepest: Float[Array, "3"]
    parallel: Float[Array, "3"]
    depth_at_deepest: Float[Array, ""]
    depth_at_parallel: Float[Array, ""]
    case: Int[Array, ""]
    sin_tilt: Float[Array, ""]
    depth_gradient: Float[Array, "3"]
    clearance: Float[Array, ""]


def flat_contact(centre1: Float[ArrayLike, "3"], normal1: Float[ArrayLike, "3"], radius1,
                 centre2: Float[ArrayLike, "3"], normal2: Float[ArrayLike, "3"], radius2
                 ) -> FlatContact:
    """Contact of two almost parallel, facing cylinder faces projected onto face 2
    (Kecskemethy et al. section 3.1.2, with the lens vertices of the module docstring and the
    parallel point `L = (c + r_1 - r_2) / 2`).

    **Arguments:** as `skew_contact`; the faces must face each other (`n_1 . n_2 < 0`).
    **Returns:** a `FlatContact`. Works at zero tilt (then every lens point is equally deep).
    """
    c1, n1, c2, n2 = (jnp.asarray(x, dtype=float) for x in (centre1, normal1, centre2, normal2))
    r1, r2 = jnp.asarray(radius1, dtype=float), jnp.asarray(radius2, dtype=float)
    facing = jnp.minimum(n1 @ n2, -1e-12)
    tilt = _in_plane(n1, n2)
    sin_tilt = _norm(tilt)

    def depth(point):
        # Local depth of face 1 below face 2 at a point of plane 2, along n2 (affine in point).
        return (point - c1) @ n1 / facing

    gradient = tilt / facing  # in plane 2; points to where face 1 lies deeper
    downhill = -tilt / sin_tilt
    centre1_projected = c1 - ((c1 - c2) @ n2) * n2
    # Rim 1 projects to an ellipse with half-axes r1 and r1 cos(alpha); its inscribed circle
    # stands in for it, so that the deepest rim point (on the short axis) is exact.
    r1 = r1 * -facing
    offset = c2 - centre1_projected
    distance = _norm(offset)
    along = offset / distance
    across = jnp.cross(n2, along)

    rim1 = centre1_projected + r1 * downhill
    rim2 = c2 + r2 * downhill
    valid1 = _norm(rim1 - c2) <= r2
    valid2 = _norm(rim2 - centre1_projected) <= r1
    a = (distance**2 + r1**2 - r2**2) / (2 * distance)
    intersect = (distance < r1 + r2) & (distance > jnp.abs(r1 - r2))
    half_chord = _root_or_zero(r1**2 - a**2)
    corners = centre1_projected + a * along + jnp.stack([half_chord, -half_chord])[:, None] * across
    corner = corners[jnp.argmax(corners @ downhill)]

    candidates = jnp.stack([rim1, rim2, corner])
    valid = jnp.stack([valid1, valid2, intersect])
    depths = jnp.where(valid, jnp.stack([depth(p) for p in candidates]), -jnp.inf)
    best = jnp.argmax(depths)
    overlapping = jnp.any(valid)
    case = jnp.where(overlapping, jnp.array([EDGE1_ON_FACE2, EDGE2_ON_FACE1, EDGE_ON_EDGE])[best],
                     NO_CONTACT)
    deepest = jnp.where(overlapping, candidates[best], 0.5 * (centre1_projected + c2))
    parallel = centre1_projected + jnp.clip(0.5 * (distance + r1 - r2), 0.0, distance) * along
    return FlatContact(deepest, parallel, depth(deepest), depth(parallel), case, sin_tilt,
                       gradient, distance - r1 - r2)


def blending_factor(sin_tilt, sharpness) -> Float[Array, ""]:
    """`1 - exp(-C sin alpha)`: the blending function `r / r_0` of section 3.1.3, for the
    constant `C = sharpness` (dimensionless). 0 for parallel faces, towards 1 for steep ones."""
    return 1.0 - jnp.exp(-sharpness * sin_tilt)


def blended_contact(centre1: Float[ArrayLike, "3"], normal1: Float[ArrayLike, "3"], radius1,
                    centre2: Float[ArrayLike, "3"], normal2: Float[ArrayLike, "3"], radius2,
                    sharpness=50.0) -> ContactGeometry:
    """The contact of two facing cylinder faces with the blended virtual contact point of
    Kecskemethy et al. section 3.1.3: `P' = M + (1 - exp(-C sin alpha)) (P - M)` between the
    parallel point `M` and the deepest lens point `P` of `flat_contact`.

    **Arguments:** as `flat_contact`, and the blending constant `C = sharpness` (the paper gives
    no value; 50 puts the point 63% of the way to the rim at a tilt of 1.1 degrees).
    **Returns:** a `ContactGeometry` with the depth of face 1 below face 2 at `P'` (along
    `n_2`), `point` = `P'` on the plane of face 2, `normal` = `n_2` (the force on body 1 pushes
    it out of face 2) and the `case` of `P`.
    """
    flat = flat_contact(centre1, normal1, radius1, centre2, normal2, radius2)
    share = blending_factor(flat.sin_tilt, sharpness)
    point = flat.parallel + share * (flat.deepest - flat.parallel)
    penetration = flat.depth_at_parallel + share * (flat.depth_at_deepest - flat.depth_at_parallel)
    # Projected discs apart: minus the clearance between their rims. The depth jumps there when
    # the faces overlap in height: a face that slides off the other's rim loses its contact.
    penetration = jnp.where(flat.case == NO_CONTACT, -flat.clearance, penetration)
    return ContactGeometry(penetration, point, jnp.asarray(normal2, dtype=float), flat.case,
                           flat.sin_tilt)
