"""Ligaments and facet contacts between two vertebrae in 3-D, as energies and dissipation
functions for the mechanics core (Kecskemethy, Lange and Grabner: the C5-C6 segment's ligaments
and facet joints).

Both elements push or pull one way only: a ligament carries tension, never compression, and a
facet contact pushes, never pulls. Their damping obeys the same rule: the dissipation function
`unilateral_dissipation` gives the damping force `c s'` of a Kelvin-Voigt element only until
the total force `k s + c s'` would change sign, and then exactly cancels the spring, so a fast
release never produces a pulling contact or a pushing ligament.
"""

from typing import ClassVar

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._arrays import floats
from ..kinematics._contact_geometry import ContactGeometry, blended_contact
from ..kinematics._frames import body_points, to_body
from ..kinematics._rotations import euler123_rotation
from ._base import AbstractSpatialElement
from ._parameters import ParameterField


def unilateral_dissipation(stretch, rate, stiffness, damping) -> Float[Array, "..."]:
    """Rayleigh function (W) of a one-way Kelvin-Voigt element of stretch `s` (m; active while
    `s > 0`) and rate `s'` (m/s): `1/2 c s'^2` while `k s + c s' >= 0`, continued linearly
    beyond, so that the total force `k s + c s'` never changes sign. Zero while `s <= 0`."""
    spring = stiffness * jnp.maximum(stretch, 0.0)
    safe = jnp.where(damping > 0, damping, 1.0)
    viscous = 0.5 * damping * rate**2
    released = -spring * rate - spring**2 / (2.0 * safe)
    active = jnp.where(damping * rate + spring >= 0, viscous, released)
    return jnp.where(stretch > 0, active, 0.0)


@jax.jit
def _ligaments_in_bodies(lower_pose, upper_pose, lower_points, upper_points):
    # Attachment points in body coordinates and the reference lengths, as one compiled
    # program (run eagerly, each operation would be a program of its own: spineid/_arrays.py).
    return (to_body(lower_pose, lower_points), to_body(upper_pose, upper_points),
            jnp.linalg.norm(upper_points - lower_points, axis=-1))


@jax.jit
def _facets_in_bodies(lower_pose, upper_pose, upper_centres, upper_normals, lower_centres,
                      lower_normals):
    # Facet centres and unit normals in body coordinates, as one compiled program.
    def normals(pose, values):
        return (values / jnp.linalg.norm(values, axis=-1, keepdims=True)
                ) @ euler123_rotation(pose[3:])

    return (to_body(upper_pose, upper_centres), normals(upper_pose, upper_normals),
            to_body(lower_pose, lower_centres), normals(lower_pose, lower_normals))


class SpatialLigaments(AbstractSpatialElement):
    """Tension-only ligaments between points of the lower and the upper body.

    Energy `1/2 sum_l k_l max(L_l - L0_l, 0)^2`, dissipation `unilateral_dissipation` of the
    stretch `L - L0`: the force on the upper body is `-(k (L - L0) + c L')` along the ligament
    while it is taut and the sum is a tension, zero otherwise (the Kelvin elements of the
    paper's MADYMO model, without their toe region).

    Fields: `lower_points`, `upper_points` (m, `(n, 3)`, body coordinates), `rest_length` (m),
    `stiffness` (N/m), `damping` (N s/m), each `(n,)`.
    """

    collection: ClassVar[str] = "ligaments"

    lower_points: Float[Array, "n 3"]
    upper_points: Float[Array, "n 3"]
    rest_length: Float[Array, " n"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]

    def parameter_fields(self):
        """`stiffness` (N/m) and `damping` (N s/m) of each ligament, >= 0 (groups
        `ligaments.stiffness`, `ligaments.damping`)."""
        return (ParameterField("stiffness", "ligaments.stiffness", "N/m", rows="members"),
                ParameterField("damping", "ligaments.damping", "N s/m", rows="members"))

    @classmethod
    def from_reference(cls, lower_points: Float[ArrayLike, "n 3"],
                       upper_points: Float[ArrayLike, "n 3"], stiffness, damping,
                       lower_pose, upper_pose, rest_length=None) -> "SpatialLigaments":
        """Ligaments attached at ground points (m, `(n, 3)`) of the reference poses; the rest
        length is their reference length unless `rest_length` (m, `(n,)`) is given."""
        lower, upper, length = _ligaments_in_bodies(floats(lower_pose), floats(upper_pose),
                                                    floats(lower_points), floats(upper_points))
        return cls(lower, upper, length if rest_length is None else floats(rest_length),
                   floats(stiffness), floats(damping))

    def lengths(self, lower_pose, upper_pose) -> Float[Array, " n"]:
        """Ligament lengths `L` (m), `(n,)`."""
        span = body_points(upper_pose, self.upper_points) - body_points(lower_pose,
                                                                        self.lower_points)
        return jnp.linalg.norm(span, axis=-1)

    def tensions(self, lower_pose, upper_pose) -> Float[Array, " n"]:
        """Elastic tensions `k max(L - L0, 0)` (N), `(n,)`."""
        return self.stiffness * jnp.maximum(self.lengths(lower_pose, upper_pose)
                                            - self.rest_length, 0.0)

    def energy(self, lower_pose, upper_pose):
        stretch = jnp.maximum(self.lengths(lower_pose, upper_pose) - self.rest_length, 0.0)
        return 0.5 * jnp.sum(self.stiffness * stretch**2)

    def dissipation(self, lower_pose, upper_pose, lower_velocity, upper_velocity):
        lengths, rates = jax.jvp(self.lengths, (lower_pose, upper_pose),
                                 (lower_velocity, upper_velocity))
        return jnp.sum(unilateral_dissipation(lengths - self.rest_length, rates,
                                              self.stiffness, self.damping))


class FacetContacts(AbstractSpatialElement):
    """Facet joints as penalty contacts between cylinder end faces (Kecskemethy et al. 3.1).

    Facet `l` is a flat circular face on the upper body (disc 1: the inferior facet of the upper
    vertebra) against one on the lower body (disc 2: the superior facet of the lower vertebra),
    with the blended contact geometry of `blended_contact` (projection onto the lower face,
    virtual contact point between the parallel and the deepest point). Energy
    `1/2 sum_l k_l max(d_l, 0)^2` of the penetrations `d_l`; dissipation
    `unilateral_dissipation` of `d_l`: the contact pushes with `k d + c d'`, never pulls.

    Fields (body coordinates, m): `upper_centres`, `upper_normals`, `lower_centres`,
    `lower_normals` (`(n, 3)`; unit outward face normals), `upper_radii`, `lower_radii` (m),
    `stiffness` (N/m), `damping` (N s/m), `sharpness` (the blending constant `C`), each `(n,)`.
    """

    collection: ClassVar[str] = "facets"

    upper_centres: Float[Array, "n 3"]
    upper_normals: Float[Array, "n 3"]
    upper_radii: Float[Array, " n"]
    lower_centres: Float[Array, "n 3"]
    lower_normals: Float[Array, "n 3"]
    lower_radii: Float[Array, " n"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]
    sharpness: Float[Array, " n"]

    def parameter_fields(self):
        """Each facet's contact `stiffness` (N/m, group `facets.each_stiffness`: the facets
        are members of the model's `facets`), and one contact `stiffness` (N/m) and one
        `damping` (N s/m) for every facet (tied: groups `facets.stiffness`, `facets.damping`),
        all >= 0."""
        return (ParameterField("stiffness", "facets.each_stiffness", "N/m", rows="members"),
                ParameterField("stiffness", "facets.stiffness", "N/m", tied=True),
                ParameterField("damping", "facets.damping", "N s/m", tied=True))

    @classmethod
    def from_reference(cls, upper_centres, upper_normals, upper_radii, lower_centres,
                       lower_normals, lower_radii, stiffness, damping, sharpness,
                       lower_pose, upper_pose) -> "FacetContacts":
        """Facets given in ground coordinates of the reference poses (centres in m, `(n, 3)`;
        normals `(n, 3)`, normalised here; radii in m, `(n,)`)."""
        upper, upper_turned, lower, lower_turned = _facets_in_bodies(
            floats(lower_pose), floats(upper_pose), floats(upper_centres), floats(upper_normals),
            floats(lower_centres), floats(lower_normals))
        return cls(upper, upper_turned, floats(upper_radii), lower, lower_turned,
                   floats(lower_radii), floats(stiffness), floats(damping), floats(sharpness))

    def geometry(self, lower_pose, upper_pose) -> ContactGeometry:
        """The contact geometry of every facet (`ContactGeometry` with a leading axis `n`)."""
        upper_turn = euler123_rotation(upper_pose[3:])
        lower_turn = euler123_rotation(lower_pose[3:])
        return jax.vmap(blended_contact)(
            body_points(upper_pose, self.upper_centres), self.upper_normals @ upper_turn.T,
            self.upper_radii, body_points(lower_pose, self.lower_centres),
            self.lower_normals @ lower_turn.T, self.lower_radii, self.sharpness)

    def penetrations(self, lower_pose, upper_pose) -> Float[Array, " n"]:
        """Penetrations `d` (m), `(n,)`; positive in contact."""
        return self.geometry(lower_pose, upper_pose).penetration

    def contact_forces(self, lower_pose, upper_pose) -> Float[Array, " n"]:
        """Elastic contact forces `k max(d, 0)` (N), `(n,)`."""
        return self.stiffness * jnp.maximum(self.penetrations(lower_pose, upper_pose), 0.0)

    def energy(self, lower_pose, upper_pose):
        depth = jnp.maximum(self.penetrations(lower_pose, upper_pose), 0.0)
        return 0.5 * jnp.sum(self.stiffness * depth**2)

    def dissipation(self, lower_pose, upper_pose, lower_velocity, upper_velocity):
        depths, rates = jax.jvp(self.penetrations, (lower_pose, upper_pose),
                                (lower_velocity, upper_velocity))
        return jnp.sum(unilateral_dissipation(depths, rates, self.stiffness, self.damping))
