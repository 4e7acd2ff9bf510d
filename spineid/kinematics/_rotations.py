"""Rotation kinematics for spatial vertebral pairs: rotation tensors, the 1-2-3 Euler angles,
the Euler and dual Euler bases and the relative motion of a pair.

Conventions (Christophy et al. 2011, supplement sections 2-4): a fixed basis `E_i` and a
body-fixed basis `e_i = Q E_i`; a 3x3 array `Q` holds the components `Q_ik = E_i . Q E_k`, so
`Q @ a_e` gives the fixed components of a vector whose body components are `a_e` (S.5). The 1-2-3
Euler angles `nu = (nu_1, nu_2, nu_3)` (rad) compose `Q = L(nu_3, g_3) L(nu_2, g_2) L(nu_1, g_1)`
(S.6) with `g_1 = E_1`, `g_2 = L(nu_1, E_1) E_2`, `g_3 = e_3`; as matrices `Q = R_x(nu_1)
R_y(nu_2) R_z(nu_3)`, the body-fixed X-Y-Z sequence that OpenSim's BushingForce also uses. The
set is singular at `nu_2 = +-90 degrees`, where `nu_1` and `nu_3` turn about the same axis.

All functions are pure JAX: they jit, vmap and differentiate.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

GIMBAL_TOLERANCE = 1e-6
"""Smallest `|cos nu_2|` accepted where the 1-2-3 set is inverted or its `T` matrices are
formed: closer to `nu_2 = +-90 degrees` (within about 1e-6 rad) the angles are undefined."""


def skew(a: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """The skew-symmetric matrix `[a]x` with `[a]x b = a x b` (any frame, `(3,)` -> `(3, 3)`)."""
    a = jnp.asarray(a, dtype=float)
    zero = jnp.zeros_like(a[0])
    return jnp.array([[zero, -a[2], a[1]], [a[2], zero, -a[0]], [-a[1], a[0], zero]])


def axial(w: Float[ArrayLike, "3 3"]) -> Float[Array, "3"]:
    """The axial vector of the skew part of `w`, the inverse of `skew`."""
    w = jnp.asarray(w, dtype=float)
    return 0.5 * jnp.array([w[2, 1] - w[1, 2], w[0, 2] - w[2, 0], w[1, 0] - w[0, 1]])


_LEVI_CIVITA = np.zeros((3, 3, 3))
for _i, _j, _k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
    _LEVI_CIVITA[_i, _j, _k], _LEVI_CIVITA[_i, _k, _j] = 1.0, -1.0


def axis_rotation(axis: Float[ArrayLike, "3"], angle: Float[ArrayLike, ""]) -> Float[Array, "3 3"]:
    """`L(angle, g)`: the counterclockwise rotation by `angle` (rad) about the unit vector `g`
    (Rodrigues' formula `I + sin a [g]x + (1 - cos a) [g]x^2`), components in the frame of `g`."""
    # (skew by one contraction with the Levi-Civita symbol: a far smaller program than the
    # matrix assembled entry by entry, which matters where kinematics are traced many times.)
    g = -jnp.einsum("ijk,k->ij", _LEVI_CIVITA, jnp.asarray(axis, dtype=float))
    return jnp.eye(3) + jnp.sin(angle) * g + (1.0 - jnp.cos(angle)) * g @ g


def _elementary(index: int, angle) -> Float[Array, "3 3"]:
    c, s = jnp.cos(angle), jnp.sin(angle)
    one, zero = jnp.ones_like(c), jnp.zeros_like(c)
    if index == 0:
        rows = [[one, zero, zero], [zero, c, -s], [zero, s, c]]
    elif index == 1:
        rows = [[c, zero, s], [zero, one, zero], [-s, zero, c]]
    else:
        rows = [[c, -s, zero], [s, c, zero], [zero, zero, one]]
    return jnp.array(rows)


def euler123_rotation(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """The rotation tensor of the 1-2-3 Euler angles `nu` (rad): `Q = R_x(nu_1) R_y(nu_2)
    R_z(nu_3)`, fixed-basis components `(3, 3)` (supplement S.6)."""
    nu = jnp.asarray(nu, dtype=float)
    if nu.shape != (3,):  # (JAX would clamp an index beyond the end, not refuse it)
        raise ValueError(f"euler123_rotation: angles of shape {nu.shape}; expected the three "
                         "1-2-3 Euler angles (3,), rad (jax.vmap over a batch)")
    return _elementary(0, nu[0]) @ _elementary(1, nu[1]) @ _elementary(2, nu[2])


def _check_gimbal(nu, cos_nu2, where: str):
    return eqx.error_if(
        nu, jnp.abs(cos_nu2) < GIMBAL_TOLERANCE,
        f"spineid.{where}: the rotation is at the singularity of the 1-2-3 Euler angles "
        "(nu_2 = beta_2 within 1e-6 rad of +-90 degrees): nu_1 and nu_3 are not defined "
        "there. Choose landmark frames whose relative rotation stays away from a 90 degree "
        "turn about the second axis.",
    )


def euler123_angles(rotation: Float[ArrayLike, "3 3"], check: bool = True
                    ) -> Float[Array, "3"]:
    """The 1-2-3 Euler angles (rad) of a rotation tensor `(3, 3)` (inverse of
    `euler123_rotation`): `nu_2 = asin(Q_13)` in [-pi/2, pi/2], `nu_1 = atan2(-Q_23, Q_33)`,
    `nu_3 = atan2(-Q_12, Q_11)` in (-pi, pi]. Raises (also under jit) near the singularity
    `|cos nu_2| < GIMBAL_TOLERANCE` instead of returning arbitrary angles; `check=False` (for
    a solver's trial points, which it rejects by their residual) returns them unchecked."""
    q = jnp.asarray(rotation, dtype=float)
    cos_nu2 = jnp.hypot(q[0, 0], q[0, 1])
    nu = jnp.array([
        jnp.arctan2(-q[1, 2], q[2, 2]),
        jnp.arctan2(q[0, 2], cos_nu2),
        jnp.arctan2(-q[0, 1], q[0, 0]),
    ])
    return _check_gimbal(nu, cos_nu2, "euler123_angles") if check else nu


def euler_basis(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """The Euler basis `g_1, g_2, g_3` of the 1-2-3 set (S.14) as rows, fixed-basis
    components `(3, 3)`: `g_1 = E_1`, `g_2 = cos nu_1 E_2 + sin nu_1 E_3`, `g_3 = e_3`. The
    angular velocity is `omega = sum_i nu_i' g_i` (S.8)."""
    nu = jnp.asarray(nu, dtype=float)
    g1 = jnp.array([1.0, 0.0, 0.0])
    g2 = _elementary(0, nu[0])[:, 1]
    g3 = euler123_rotation(nu)[:, 2]
    return jnp.stack([g1, g2, g3])


def dual_euler_basis(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """The dual Euler basis `g^1, g^2, g^3` as rows (fixed-basis components, `(3, 3)`), defined
    by `g_i . g^j = delta_ij` (S.7). Moments conjugate to the Euler angles act along it:
    `M = sum_i -dU/dnu_i g^i` (S.24). Raises near the singularity."""
    nu = jnp.asarray(nu, dtype=float)
    nu = _check_gimbal(nu, jnp.cos(nu[1]), "dual_euler_basis")
    return jnp.linalg.inv(euler_basis(nu)).T


def e_T(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """`eT` of S.15: `nu' = eT omega_e`, with `omega_e` the body-fixed (corotational)
    components of the angular velocity; `(eT)_ij = g^i . e_j`. Raises near the singularity."""
    nu = jnp.asarray(nu, dtype=float)
    nu = _check_gimbal(nu, jnp.cos(nu[1]), "e_T")
    c3, s3, sec2, tan2 = jnp.cos(nu[2]), jnp.sin(nu[2]), 1.0 / jnp.cos(nu[1]), jnp.tan(nu[1])
    return jnp.array([
        [c3 * sec2, -s3 * sec2, 0.0],
        [s3, c3, 0.0],
        [-c3 * tan2, s3 * tan2, 1.0],
    ])


def e_W(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """`eW` of S.16: `omega_e = eW nu'`; `(eW)_ij = e_i . g_j`. Regular everywhere."""
    nu = jnp.asarray(nu, dtype=float)
    c2, s2, c3, s3 = jnp.cos(nu[1]), jnp.sin(nu[1]), jnp.cos(nu[2]), jnp.sin(nu[2])
    return jnp.array([
        [c2 * c3, s3, 0.0],
        [-c2 * s3, c3, 0.0],
        [s2, 0.0, 1.0],
    ])


def E_T(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """`ET` of S.17: `nu' = ET Omega`, with `Omega` the fixed-basis components of the angular
    velocity; `(ET)_ij = g^i . E_j = eT Q^T`. Raises near the singularity."""
    nu = jnp.asarray(nu, dtype=float)
    nu = _check_gimbal(nu, jnp.cos(nu[1]), "E_T")
    c1, s1, sec2, tan2 = jnp.cos(nu[0]), jnp.sin(nu[0]), 1.0 / jnp.cos(nu[1]), jnp.tan(nu[1])
    return jnp.array([
        [1.0, tan2 * s1, -tan2 * c1],
        [0.0, c1, s1],
        [0.0, -s1 * sec2, c1 * sec2],
    ])


def E_W(nu: Float[ArrayLike, "3"]) -> Float[Array, "3 3"]:
    """`EW` of S.18: `Omega = EW nu'`; `(EW)_ij = E_i . g_j = Q eW`. Regular everywhere."""
    nu = jnp.asarray(nu, dtype=float)
    c1, s1, c2, s2 = jnp.cos(nu[0]), jnp.sin(nu[0]), jnp.cos(nu[1]), jnp.sin(nu[1])
    return jnp.array([
        [1.0, 0.0, s2],
        [0.0, c1, -c2 * s1],
        [0.0, s1, c2 * c1],
    ])


def angular_velocity(rotation: Float[ArrayLike, "3 3"],
                     rotation_rate: Float[ArrayLike, "3 3"]) -> Float[Array, "3"]:
    """Fixed-basis components of the angular velocity of `Q(t)`: the axial vector of
    `Q' Q^T` (rad/s; `rotation`, `rotation_rate` `(3, 3)`)."""
    return axial(jnp.asarray(rotation_rate) @ jnp.asarray(rotation).T)


class RelativeMotion(eqx.Module):
    """The motion of body 2 relative to body 1 at landmarks `A` (supplement S.19-S.20).

    Fields: `y` (m, `(3,)`): `y_A = x_A^2 - x_A^1` in the fixed basis; `rotation` (`(3, 3)`):
    `R = Q_2 Q_1^T`, which maps `e_i^1` to `e_i^2`; `beta` (rad, `(3,)`): the 1-2-3 Euler
    angles of `R`. The Euler basis of `beta` (`euler_basis(beta)`) spans the rate of `R`:
    `axial(R' R^T) = sum_i beta_i' g~_i`. That rate equals `omega^2 - R omega^1`, which is the
    `omega^2 - omega^1` of S.22 only while body 1 does not turn.
    """

    y: Float[Array, "3"]
    rotation: Float[Array, "3 3"]
    beta: Float[Array, "3"]


def relative_motion(x1: Float[ArrayLike, "3"], q1: Float[ArrayLike, "3 3"],
                    x2: Float[ArrayLike, "3"], q2: Float[ArrayLike, "3 3"]) -> RelativeMotion:
    """The relative motion `(y_A, R, beta)` of a pair (S.19-S.20) from the fixed-basis
    positions `x1`, `x2` (m, `(3,)`) of the landmarks and the rotation tensors `q1`, `q2`
    (`(3, 3)`) of the bodies. Raises near the singularity of `beta`."""
    x1, x2 = jnp.asarray(x1, dtype=float), jnp.asarray(x2, dtype=float)
    rotation = jnp.asarray(q2, dtype=float) @ jnp.asarray(q1, dtype=float).T
    return RelativeMotion(y=x2 - x1, rotation=rotation, beta=euler123_angles(rotation))
