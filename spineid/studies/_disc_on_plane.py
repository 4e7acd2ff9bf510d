"""The disc dropped on a plane of Kecskemethy, Lange and Grabner (Figs 8-9): a free disc whose
face contacts a fixed plane through the blended contact geometry, settling flat.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..elements._ligaments_facets import FacetContacts
from ..kinematics._frames import body_points
from ..models._spatial_pair import SpatialBody, SpatialPair


def disc_on_plane(radius: float = 0.01, mass: float = 0.05, tilt: float = 0.4363,
                  stiffness: float = 2.0e4, damping: float = 20.0, sharpness: float = 50.0,
                  drop: float = 5e-4) -> SpatialPair:
    """The disc-on-plane example of Kecskemethy et al. (Figs 8-9): a free disc (a thin
    cylinder of `radius` m and `mass` kg; its face is disc 1 of a `FacetContacts`) released at
    rest, tilted by `tilt` rad about the z axis with its lowest rim point `drop` m above a fixed
    plane (disc 2: radius 1 m, normal +y), under gravity 9.81 m/s^2 along -y. Contact
    `stiffness` (N/m), `damping` (N s/m) and blending constant `sharpness`.

    **Returns:** a `SpatialPair` (`spineid.simulate` it; `flat_transition` reads the result).
    """
    if not (radius > 0 and mass > 0):
        raise ValueError(f"disc_on_plane: radius {radius!r} m and mass {mass!r} kg must be > 0")
    lying = jnp.array([0.0, radius, 0.0, 0.0, 0.0, 0.0])  # reference: lying flat, face down
    thin = mass * radius**2
    disc = SpatialBody(mass=jnp.asarray(float(mass)),
                       inertia=jnp.diag(jnp.array([thin / 4, thin / 2, thin / 4])),
                       reference_pose=lying)
    ground = SpatialBody(mass=jnp.asarray(1.0), inertia=jnp.eye(3), reference_pose=jnp.zeros(6),
                         fixed=True)
    contact = FacetContacts.from_reference(
        [[0.0, radius, 0.0]], [[0.0, -1.0, 0.0]], [radius], [[0.0, 0.0, 0.0]],
        [[0.0, 1.0, 0.0]], [1.0], [stiffness], [damping], [sharpness],
        ground.reference_pose, lying)
    # The face centre sits `radius` below the disc's centre of mass along its axis.
    centre_height = drop + radius * jnp.sin(tilt) + radius * jnp.cos(tilt)
    start = jnp.array([-radius * jnp.sin(tilt), centre_height, 0.0, 0.0, 0.0, tilt])
    return SpatialPair(lower=ground, upper=disc, elements=(contact,), loads=(),
                       gravity=jnp.array([0.0, -9.81, 0.0]), initial_pose=start)


def flat_transition(pair: SpatialPair, poses: Float[Array, "k 6"]):
    """`(sin_tilt, relative_offset)` `(k,)` along a motion of `disc_on_plane`: `sin alpha` of
    the disc's face against the plane and `r / r0` (Kecskemethy et al. Fig 9), the distance
    of the virtual contact point from the disc's centre over the disc's radius, both seen on
    the plane (where the radius appears as `r0 cos alpha`)."""
    contact = pair.elements[0]
    lower = pair.lower.reference_pose
    plane_normal = contact.lower_normals[0]  # the plane is fixed in ground

    def one(q):
        geometry = contact.geometry(lower, q)
        face_centre = body_points(q, contact.upper_centres)[0]
        seen = face_centre - ((face_centre - contact.lower_centres[0]) @ plane_normal) * plane_normal
        offset = jnp.linalg.norm(geometry.point[0] - seen)
        cos_tilt = jnp.sqrt(1.0 - geometry.sin_tilt[0] ** 2)
        return geometry.sin_tilt[0], offset / (contact.upper_radii[0] * cos_tilt)

    return jax.vmap(one)(poses)
