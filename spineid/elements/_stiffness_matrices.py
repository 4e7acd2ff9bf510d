"""Stiffness matrices of a joint potential `U(Y, beta)` (supplement sections 5-6): the Hessian
`H`, the Cartesian stiffness `K^c` (S.31 with the pre-stress term of S.33) and `K^D` (S.39,
whose printed pre-stress term lacks a factor; see `dual_basis_stiffness`),
for a pair whose lower body is fixed (`Q_1 = I`, so `E~T` is `E_T(beta)` of S.17).

`U` is any function of the 6-array `y = [Y_1, Y_2, Y_3, beta_1, beta_2, beta_3]` (m, rad) returning
energy (J), e.g. `lambda y: 0.5 * (y - y0) @ K @ (y - y0)` for a SpineBushing. The matrices are
`(6, 6)`, ordered `[translations, rotations]`. They coincide (`K^c = K^D = H`) only where
`E~T = I` (no rotation) and `D = 0` (no pre-stress: `dU/dbeta = 0`); the experimental `K^E`
of S.34 (moments along the Euler basis) measured at small uniaxial steps tends to `K^D`, so it
approximates `H` wherever there is no pre-stress (S.36), whatever the rotation.
`experimental_stiffness` emulates that measurement with finite steps, and `compare_stiffnesses`
tabulates how far each matrix is from `H` at a posture (`experiments/stiffness_matrices.py`).

Note: S.31 prints the Hessian as `[[H^1, H^3], [H^3^T, H^2]]` with `H^3_ij = d2U/dbeta_i dY_j`;
the upper-right block of the Hessian in `[Y, beta]` order is `d2U/dY_i dbeta_j`, the transpose
of that `H^3`. The functions here take the Hessian from `jax.hessian`, which has no such ambiguity.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics._rotations import (
    E_T, E_W, euler123_angles, euler123_rotation, euler_basis, skew,
)


def potential_hessian(potential, y: Float[Array, "6"]) -> Float[Array, "6 6"]:
    """`H = d2U/dy2` (S.32) at `y`."""
    return jax.hessian(potential)(jnp.asarray(y, dtype=float))


def prestress_term(potential, y: Float[Array, "6"]) -> Float[Array, "3 3"]:
    """`D_pq = sum_i sum_r d(E~T)_ip/dbeta_r (E~T)_rq dU/dbeta_i` (S.33): zero without
    pre-stress (`dU/dbeta = 0`)."""
    y = jnp.asarray(y, dtype=float)
    beta = y[3:]
    gradient = jax.grad(potential)(y)[3:]
    t = E_T(beta)
    dt = jax.jacfwd(E_T)(beta)  # dt[i, p, r] = d(E~T)_ip / dbeta_r
    return jnp.einsum("ipr,rq,i->pq", dt, t, gradient)


def cartesian_stiffness(potential, y: Float[Array, "6"]) -> Float[Array, "6 6"]:
    """`K^c` of S.31: `diag(I, E~T^T) H diag(I, E~T) + diag(0, D)`. It maps small Cartesian
    displacements and rotations of body 2 (fixed-basis components, S.29) to the decrease of
    the Cartesian force and moment on it (S.30); not symmetric under pre-stress."""
    y = jnp.asarray(y, dtype=float)
    block = jnp.zeros((6, 6)).at[:3, :3].set(jnp.eye(3)).at[3:, 3:].set(E_T(y[3:]))
    stiffness = block.T @ potential_hessian(potential, y) @ block
    return stiffness.at[3:, 3:].add(prestress_term(potential, y))


def dual_basis_stiffness(potential, y: Float[Array, "6"], as_printed: bool = False
                         ) -> Float[Array, "6 6"]:
    """`K^D` (S.37-S.39): increments of the force and of the moment's components along the
    Euler basis `(Delta M) . g~_j` (S.38) against increments of `Y` and of the Euler angles.

    From S.30 and S.31 it is `diag(I, E~W^T) K^c diag(I, E~W) = H + diag(0, E~W^T D E~W)`
    (checked against the definition by automatic differentiation in the tests). S.39 prints the
    pre-stress term as `D E~T^{-1} = D E~W`, without the leading `E~W^T`; the two agree only when
    the rotation is small (`E~W = I` to first order) or there is no pre-stress.
    `as_printed=True` returns the printed form, to show the difference.
    """
    y = jnp.asarray(y, dtype=float)
    rate = E_W(y[3:])  # E~T^{-1} = E~W (S.13)
    term = prestress_term(potential, y) @ rate
    if not as_printed:
        term = rate.T @ term
    return potential_hessian(potential, y).at[3:, 3:].add(term)


def joint_loads(potential, y: Float[Array, "6"]) -> Float[Array, "6"]:
    """The Cartesian force and moment on body 2 from the potential (S.24), fixed-basis
    components `[F, M]`: `F = -dU/dY`, `M = -sum_i dU/dbeta_i g~^i`."""
    y = jnp.asarray(y, dtype=float)
    gradient = jax.grad(potential)(y)
    return jnp.concatenate([-gradient[:3], -E_T(y[3:]).T @ gradient[3:]])


def perturbed(y: Float[Array, "6"], displacement: Float[Array, "6"]) -> Float[Array, "6"]:
    """`y` after a small Cartesian motion of body 2: translation `displacement[:3]` and
    rotation `displacement[3:]` (rotation vector, fixed basis) applied to its orientation."""
    turned = jax.scipy.linalg.expm(skew(displacement[3:])) @ euler123_rotation(y[3:])
    return jnp.concatenate([y[:3] + displacement[:3], euler123_angles(turned)])


def experimental_stiffness(potential, y: Float[Array, "6"], steps, moments: str = "euler"
                           ) -> Float[Array, "6 6"]:
    """`K^E` (S.34-S.35) as a displacement-controlled rig measures it on a pair whose lower body
    is fixed: from the posture `y`, six uniaxial steps, each moving one coordinate by
    `steps[j]` (a translation along `E_j` in m, or one Euler-angle increment in rad, S.34's
    `Delta beta . g~^j`); the load cell reports the change of the force and moment on body 2
    (`joint_loads`); column `j` is `-(change of the loads) / steps[j]` (a secant, S.35).

    `moments="euler"` (S.34 as written): the force change's fixed-basis components (the lower
    body is fixed, so `e^1_i = E_i`) and the moment change's components along the Euler basis
    at the starting posture, `(Delta M) . g~_i`. As the steps shrink `K^E` tends to `K^D`
    (S.37-S.39, `dual_basis_stiffness`): `H` wherever there is no pre-stress, at any posture.
    `moments="cartesian"`: the moment change's fixed-basis components, as the load cell gives
    them before any conversion (not S.34); it tends to `K^c diag(I, G)`, with `G` the map from
    Euler-angle increments to the rotation vector, which is `I` only at the neutral posture.

    `steps`: scalar or `(6,)`. For a nonlinear potential the secant differs from the tangent
    by the steps' size against the scale on which `H` changes.
    """
    if moments not in ("euler", "cartesian"):
        raise ValueError(f"moments={moments!r}: expected \"euler\" (S.34) or \"cartesian\"")
    y = jnp.asarray(y, dtype=float)
    steps = jnp.broadcast_to(jnp.asarray(steps, dtype=float), (6,))
    before = joint_loads(potential, y)
    basis = jnp.eye(6)
    if moments == "euler":
        basis = basis.at[3:, 3:].set(euler_basis(y[3:]))  # rows g~_i at the start

    def column(j):
        after = joint_loads(potential, y.at[j].add(steps[j]))
        return -basis @ (after - before) / steps[j]

    return jax.vmap(column, out_axes=1)(jnp.arange(6))


def block_scale(hessian: Float[Array, "6 6"]) -> Float[Array, "6 6"]:
    """Per entry, the largest magnitude of `hessian` in its block (translation-translation,
    translation-rotation with its transpose, rotation-rotation); 1 where a block is zero. Dividing
    a difference of stiffness matrices by it compares N/m, N/rad and N m/rad entries fairly."""
    blocks = (slice(0, 3), slice(3, 6))
    scale = jnp.ones((6, 6))
    for rows in blocks:
        for columns in blocks:
            largest = jnp.maximum(jnp.abs(hessian[rows, columns]).max(),
                                  jnp.abs(hessian[columns, rows]).max())
            scale = scale.at[rows, columns].set(jnp.where(largest > 0, largest, 1.0))
    return scale


def compare_stiffnesses(potential, y: Float[Array, "6"], steps) -> dict[str, float]:
    """How far `K^c` (S.31), `K^D` (S.39) and `K^E` (`experimental_stiffness` with `steps`) are
    from the Hessian `H` at `y`: for each, the largest absolute difference of an entry divided
    by the largest entry of `H` in the same block (`block_scale`).
    Also `"asymmetry of K^c"` on the same scale. Returns plain floats keyed by matrix name."""
    hessian = potential_hessian(potential, y)
    scale = block_scale(hessian)
    kc = cartesian_stiffness(potential, y)
    matrices = {"K^c": kc, "K^D": dual_basis_stiffness(potential, y),
                "K^E": experimental_stiffness(potential, y, steps)}
    table = {name: float(jnp.abs((m - hessian) / scale).max()) for name, m in matrices.items()}
    table["asymmetry of K^c"] = float(jnp.abs((kc - kc.T) / scale).max())
    return table
