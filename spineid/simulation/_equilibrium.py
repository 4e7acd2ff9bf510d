"""Quasi-static equilibria of a spatial pair under constant loads, by Newton's method.

The upper vertebra of a `SpatialPair` carries a constant load `[F, M]` (N, N m; lower-body =
ground axes, force at its centre of mass, which is also its frame origin and the landmark of
the displacements). Its equilibrium pose `q` solves

    dU/dq (q) = [F, EW(a)^T M],

the balance of the elastic generalized forces of every element (disc bushing, ligaments, facet
contacts) and gravity with the generalized load (Christophy et al. supplement S.18 for the
moment's generalized force). The displacement of an equilibrium is the change of the upper
body's pose from its reference: the offset of its centre (m, lower-body axes) and the 1-2-3
Euler angles of its rotation from the reference orientation (rad), the columns
`dx, dy, dz, b1, b2, b3` of a quasi-static test file.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float

from ..kinematics._rotations import E_W, euler123_angles, euler123_rotation
from ..models._mechanics import potential_gradient
from ..models._spatial_pair import SpatialPair


def equilibrium_residual(pair: SpatialPair, q: Float[Array, "6"], load: Float[Array, "6"]
                         ) -> Float[Array, "6"]:
    """`dU/dq - [F, EW(a)^T M]` (N, N m): zero at an equilibrium of `pair` under `load`."""
    elastic = potential_gradient(pair, q)
    return elastic - jnp.concatenate([load[:3], E_W(q[3:]).T @ load[3:]])


class Equilibrium(eqx.Module):
    """An equilibrium solve: `pose` (`(6,)`, the upper body's `[x, y, z, a1, a2, a3]`),
    `residual` (`(6,)`, N and N m, the imbalance left), `converged` (bool) and `steps`."""

    pose: Float[Array, "6"]
    residual: Float[Array, "6"]
    converged: Array
    steps: Array


def equilibrium(pair: SpatialPair, load: Float[Array, "6"], *, start=None, atol: float = 1e-9,
                max_steps: int = 100) -> Equilibrium:
    """The equilibrium pose of the upper body of `pair` under the constant `load` (`(6,)`,
    `[Fx, Fy, Fz, Mx, My, Mz]` in N and N m, ground axes): Newton's method (optimistix) on
    `equilibrium_residual` from `start` (default the reference pose).

    Differentiable with respect to the model's parameters and the load by the implicit function
    theorem: the pose is returned as one more Newton step `q* - J(q*)^-1 r(q*)` from the
    converged `q*`, whose derivative is `-J^-1 dr/dtheta` (forward and reverse mode). Where
    Newton fails the pose is not finite and `converged` is false, without raising, so that an
    optimiser can step back. `vmap`-able over loads and models. `converged` is false when
    Newton did not bring every residual below `atol` (N, N m) in `max_steps`: a load the segment
    cannot carry (a moment past the range of its elements) or an unstable model.
    """
    start = pair.upper.reference_pose if start is None else start
    fixed_pair, fixed_load = jax.lax.stop_gradient((pair, load))

    def residual(q, args):
        return equilibrium_residual(fixed_pair, q, fixed_load)

    solver = optx.Newton(rtol=1e-12, atol=atol)
    solution = optx.root_find(residual, solver, jax.lax.stop_gradient(start),
                              max_steps=max_steps, throw=False)
    root = solution.value
    jacobian = jax.jacfwd(residual)(root, None)
    step = jnp.linalg.solve(jacobian, equilibrium_residual(pair, root, load))
    pose = root - step
    left = residual(root, None)
    converged = ((solution.result == optx.RESULTS.successful)
                 & jnp.all(jnp.abs(left) <= 10 * atol) & jnp.all(jnp.isfinite(pose)))
    return Equilibrium(pose, left, converged, solution.stats["num_steps"])


def equilibrium_change(pair: SpatialPair, solved: Equilibrium) -> Float[Array, "6"]:
    """`pose_change` (m, rad; `(6,)`) of an `equilibrium` of `pair`, or zero where Newton did
    not converge: a case without equilibrium has no pose, and a pose far off would trip the
    Euler angles' singularity check, so the change is taken at the reference pose (callers
    report such a case as missing or give it a fixed residual). `vmap` over cases."""
    return pose_change(pair, jnp.where(solved.converged, solved.pose,
                                       pair.upper.reference_pose))


def pose_change(pair: SpatialPair, q: Float[Array, "6"]) -> Float[Array, "6"]:
    """Displacement of the upper body from its reference pose: the offset of its centre (m) in
    lower-body axes and the 1-2-3 Euler angles (rad) of its rotation from the reference
    orientation, in the reference body axes (module docstring)."""
    lower = euler123_rotation(pair.lower.reference_pose[3:])
    reference = pair.upper.reference_pose
    offset = lower.T @ (q[:3] - reference[:3])
    turn = euler123_rotation(reference[3:]).T @ euler123_rotation(q[3:])
    return jnp.concatenate([offset, euler123_angles(turn)])
