"""Planar rigid-body kinematics (sagittal plane, x anterior, y superior)."""

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


def rotation_matrix(theta: Float[ArrayLike, ""]) -> Float[Array, "2 2"]:
    """Rotation matrix `R(theta) = [[cos, -sin], [sin, cos]]` (Liu 2001, eq 2-16).

    **Arguments:** `theta`, rotation angle of a body frame relative to the global frame (rad).

    **Returns:** the 2x2 matrix mapping body components of a vector to global components.
    """
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.array([[c, -s], [s, c]])


def _perpendicular(v: Float[Array, "... 2"]) -> Float[Array, "... 2"]:
    # e3 x v for a vector in the plane.
    return jnp.stack([-v[..., 1], v[..., 0]], axis=-1)


def body_point_position(
    pose: Float[Array, "3"], local_point: Float[Array, "*n 2"]
) -> Float[Array, "*n 2"]:
    """Global position `X + R(theta) g` of points fixed in a body (Liu 2001, eq 2-1).

    **Arguments:**
    - `pose`: `[x, y, theta]` of the body frame (m, m, rad).
    - `local_point`: point(s) in body coordinates (m), shape `(2,)` or `(n, 2)`.

    **Returns:** global coordinates (m), same shape as `local_point`.
    """
    return pose[:2] + local_point @ rotation_matrix(pose[2]).T


def body_point_velocity(
    pose: Float[Array, "3"], velocity: Float[Array, "3"], local_point: Float[Array, "*n 2"]
) -> Float[Array, "*n 2"]:
    """Global velocity `v + omega e3 x R(theta) g` of points fixed in a body.

    **Arguments:**
    - `pose`: `[x, y, theta]` (m, m, rad).
    - `velocity`: `[vx, vy, omega]` of the body frame (m/s, m/s, rad/s).
    - `local_point`: point(s) in body coordinates (m), shape `(2,)` or `(n, 2)`.

    **Returns:** global velocity (m/s), same shape as `local_point`.
    """
    arm = local_point @ rotation_matrix(pose[2]).T
    return velocity[:2] + velocity[2] * _perpendicular(arm)


def to_body_coordinates(
    pose: Float[ArrayLike, "3"], global_point: Float[ArrayLike, "*n 2"]
) -> Float[Array, "*n 2"]:
    """Body coordinates `R(theta)^T (p - X)` of global point(s) `p` for a body at `pose`.

    The inverse of `body_point_position`. Shapes as there.
    """
    pose = jnp.asarray(pose)
    return (jnp.asarray(global_point) - pose[:2]) @ rotation_matrix(pose[2])
