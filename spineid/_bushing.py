"""Bushing elements between two frames: OpenSim's classic BushingForce and the SpineBushing.

A bushing joins frame 1 (origin `F`, on the lower body) and frame 2 (origin `M`, on the upper
body). Its relative motion is the 6-array (Christophy et al. 2013, eq 17)

    y = [p_1, p_2, p_3, beta_1, beta_2, beta_3],

the position `p` of `M` relative to `F` in frame-1 components and the 1-2-3 (body-fixed X-Y-Z)
Euler angles `beta` of the rotation of frame 2 relative to frame 1. (OpenSim's deflection holds
the same numbers with the rotations first.) The generalized force `f = -K (y - y_0) - D y'` acts
on body 2: its first three entries are the force at `M` in frame-1 components, its last three
the moment components along the Euler basis, so the moment is `sum_i f_(3+i) g~^i` along the
dual Euler basis (eq 17; in frame-2 components `eT(beta)^T f[3:]`, supplement S.15). Body 1
receives the equal and opposite wrench, moved to `F` (eqs 18 and 23). Stiffness and damping
matrices are ordered the same way, like eq 24 and the model files.

- `classic`: `y_0 = 0`, OpenSim's BushingForce; zero load only when the frames coincide, so
  frames placed at the two vertebral centres load the neutral posture (eq 19).
- `spine`: `y_0` = the relative motion in the reference pose, the SpineBushing (eqs 22-23);
  no load in the neutral posture, with a full symmetric 6x6 stiffness.

For symmetric `K` and `D` these forces derive from the energy `U = 1/2 (y - y_0)^T K (y - y_0)`
and the dissipation function `R = 1/2 y'^T D y'` (`y'` is linear in the velocities), which is how
the mechanics core uses them; `bushing_wrenches` computes the same loads explicitly, as OpenSim
does, for tests and inverse dynamics.
"""

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._rotations import e_T, euler123_angles


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


def bushing_force(stiffness: Float[ArrayLike, "6 6"], damping: Float[ArrayLike, "6 6"],
                  deflection: Float[ArrayLike, "6"], rate: Float[ArrayLike, "6"],
                  reference: Float[ArrayLike, "6"] | None = None) -> Float[Array, "6"]:
    """The generalized force on body 2: `f = -K (y - y_0) - D y'` (eqs 18, 22), with
    `y_0 = reference` (zero for the classic bushing). Stiffness in N/m, N m/rad and the coupling
    units between (N/rad, N m/m), ordered `[translations, rotations]` like `y` (eq 24)."""
    y = jnp.asarray(deflection, dtype=float)
    if reference is not None:
        y = y - jnp.asarray(reference, dtype=float)
    return -jnp.asarray(stiffness) @ y - jnp.asarray(damping) @ jnp.asarray(rate)
