"""Frames fixed in bodies, and the relative motion of two such frames: the deflection of a
bushing (Christophy et al. 2013, eq 17; supplement sections 2-4), its rate, and the wrenches
a generalized force along the dual Euler basis exerts on the two frames.

Poses are `[x, y, z, a1, a2, a3]`: position (m) and 1-2-3 Euler angles (rad) of a body frame.
"""

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._rotations import e_T, euler123_angles, euler123_rotation


def frame_in_ground(pose, position, orientation):
    """Orientation `(3, 3)` and origin `(3,)` in ground of a frame fixed in a body at `pose`
    (`[x, y, z, a1, a2, a3]`), given its `position` (m) and 1-2-3 Euler `orientation` (rad) in
    body coordinates."""
    body = euler123_rotation(pose[3:])
    return body @ euler123_rotation(orientation), pose[:3] + body @ position


def body_points(pose: Float[Array, "6"], points: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
    """Ground positions (m) of points fixed in a body at `pose` (`[x, y, z, a1, a2, a3]`),
    given in its body coordinates, shape `(n, 3)`."""
    return pose[:3] + points @ euler123_rotation(pose[3:]).T


def to_body(pose, points) -> Float[Array, "n 3"]:
    """Body coordinates (m) of ground points `(n, 3)` for a body at `pose`."""
    return (jnp.asarray(points, dtype=float) - pose[:3]) @ euler123_rotation(pose[3:])


def bushing_deflection(rotation1: Float[ArrayLike, "3 3"], origin1: Float[ArrayLike, "3"],
                       rotation2: Float[ArrayLike, "3 3"], origin2: Float[ArrayLike, "3"]
                       ) -> Float[Array, "6"]:
    """The relative motion `y = [p (m), beta (rad)]` of frame 2 in frame 1 (eq 17).

    **Arguments:** the orientations `rotation1`, `rotation2` (`(3, 3)`, columns = frame axes in
    ground components) and origins `origin1`, `origin2` (m, ground) of the two frames.
    **Returns:** `(6,)`: `p = R_1^T (x_M - x_F)` and the 1-2-3 Euler angles of `R_FM = R_1^T R_2`.
    Raises near the singularity of the Euler angles.
    """
    rotation1 = jnp.asarray(rotation1, dtype=float)
    relative = rotation1.T @ jnp.asarray(rotation2, dtype=float)
    offset = rotation1.T @ (jnp.asarray(origin2, dtype=float) - jnp.asarray(origin1, dtype=float))
    return jnp.concatenate([offset, euler123_angles(relative)])


def bushing_deflection_rate(rotation1, origin1, rotation2, origin2,
                            angular_velocity1, velocity1, angular_velocity2, velocity2
                            ) -> Float[Array, "6"]:
    """The rate `y'` of the relative motion (m/s, rad/s; `(6,)`): `p'` the velocity of `M`
    relative to frame 1, differentiated in frame 1, and `beta' = eT(beta) w`, `w` the angular
    velocity of frame 2 relative to frame 1 in frame-2 components (supplement S.11, S.15).

    Angular velocities (rad/s) and the velocities of the frame origins (m/s) are in ground
    components, `(3,)` each.
    """
    rotation1 = jnp.asarray(rotation1, dtype=float)
    rotation2 = jnp.asarray(rotation2, dtype=float)
    y = bushing_deflection(rotation1, origin1, rotation2, origin2)
    relative_spin = jnp.asarray(angular_velocity2) - jnp.asarray(angular_velocity1)
    offset = jnp.asarray(origin2, dtype=float) - jnp.asarray(origin1, dtype=float)
    slide = (jnp.asarray(velocity2) - jnp.asarray(velocity1)
             - jnp.cross(jnp.asarray(angular_velocity1), offset))
    return jnp.concatenate([rotation1.T @ slide, e_T(y[3:]) @ (rotation2.T @ relative_spin)])


def bushing_wrenches(rotation1, origin1, rotation2, origin2, generalized_force
                     ) -> tuple[Float[Array, "2 3"], Float[Array, "2 3"]]:
    """The loads of a bushing generalized force `f` (`(6,)`: force on body 2 in frame-1
    components in N, then moment components along the Euler basis in N m) on both frames.

    **Returns:** `(wrench1, wrench2)`, each `[moment, force]` `(2, 3)` in ground components:
    `wrench2` acts on body 2 with the force through `M`, `wrench1` on body 1 with the force
    through `F` (equal and opposite, eq 23). The moment on body 2 is `R_2 eT(beta)^T f[3:]`,
    along the dual Euler basis (eq 17).
    """
    rotation1 = jnp.asarray(rotation1, dtype=float)
    rotation2 = jnp.asarray(rotation2, dtype=float)
    f = jnp.asarray(generalized_force, dtype=float)
    y = bushing_deflection(rotation1, origin1, rotation2, origin2)
    force = rotation1 @ f[:3]
    moment = rotation2 @ (e_T(y[3:]).T @ f[3:])
    lever = jnp.asarray(origin2, dtype=float) - jnp.asarray(origin1, dtype=float)
    wrench2 = jnp.stack([moment, force])
    wrench1 = jnp.stack([-moment - jnp.cross(lever, force), -force])
    return wrench1, wrench2
