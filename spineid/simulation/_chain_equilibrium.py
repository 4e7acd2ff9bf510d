"""Quasi-static equilibria of a whole `SpatialChain` by Newton's method on all its `6 n`
coordinates at once: for chains whose joints do not decouple (links such as implant rods that
span levels, gravity), the assembly of pre-stressed links by continuation, and flexibility
tests of such chains.

Where a spine's joints carry a pure moment one after the other (no links, no gravity), the
joint-by-joint solves of `spine_flexibility` are faster; a test checks that both agree there.
"""

import dataclasses
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._programs import stored_call
from .._reported_checks import checks_reported_as_nan
from ..kinematics._rotations import euler123_angles, euler123_rotation
from ..models._spatial_chain import SpatialChain
from ._flexibility import (
    _joint_changes, _limits, _stability, _warn_extrapolated, chain_residual, FlexibilityTest,
    joint_axes, joint_names, load_steps,
)


class ChainEquilibrium(eqx.Module):
    """A whole-chain equilibrium solve: `q` (`(6 n,)`, every body's pose), `residual`
    (`(6 n,)`, N and N m, the imbalance left), `converged` (bool), `steps` (Newton steps)."""

    q: Float[Array, " n"]
    residual: Float[Array, " n"]
    converged: Array
    steps: Array


def _frames(chain: SpatialChain):
    # Joint frames: positions and rotations of frame 1 in the lower body (n, 3), (n, 3, 3) and
    # of frame 2 in the upper body.
    def stack(which):
        frames = [getattr(element, which) for element in chain.elements]
        return (jnp.stack([f[0] for f in frames]),
                jax.vmap(euler123_rotation)(jnp.stack([f[1] for f in frames])))

    return stack("frame1"), stack("frame2")


def _relative(chain: SpatialChain, q: Array) -> Array:
    # Joint coordinates: the pose of each joint's frame 2 in its frame 1, (n, 6) (translation
    # in frame 1 axes, 1-2-3 Euler angles of the relative rotation).
    poses = jnp.concatenate([chain.base_pose[None], q.reshape(-1, 6)])
    (p1, a1), (p2, a2) = _frames(chain)

    def one(lower, upper, p1, a1, p2, a2):
        r_lower, r_upper = euler123_rotation(lower[3:]), euler123_rotation(upper[3:])
        r1, r2 = r_lower @ a1, r_upper @ a2
        x1, x2 = lower[:3] + r_lower @ p1, upper[:3] + r_upper @ p2
        return jnp.concatenate([r1.T @ (x2 - x1), euler123_angles(r1.T @ r2)])

    return jax.vmap(one)(poses[:-1], poses[1:], p1, a1, p2, a2)


def _absolute(chain: SpatialChain, relative: Array) -> Array:
    # The inverse of `_relative`: body poses composed up the chain from the base, `(6 n,)`.
    (p1, a1), (p2, a2) = _frames(chain)

    def up(lower, inputs):
        step, p1, a1, p2, a2 = inputs
        r_lower = euler123_rotation(lower[3:])
        r1 = r_lower @ a1
        r2 = r1 @ euler123_rotation(step[3:])
        x2 = lower[:3] + r_lower @ p1 + r1 @ step[:3]
        r_upper = r2 @ a2.T
        # Unchecked: a trial pose at the angles' singularity is rejected by its residual.
        pose = jnp.concatenate([x2 - r_upper @ p2, euler123_angles(r_upper, check=False)])
        return pose, pose

    _, poses = jax.lax.scan(up, chain.base_pose, (relative, p1, a1, p2, a2))
    return poses.ravel()


def chain_equilibrium(chain: SpatialChain, load: Float[Array, " n"], *, start=None,
                      atol: float = 1e-7, max_steps: int = 60, max_move: float = 0.05
                      ) -> ChainEquilibrium:
    """The equilibrium of `chain` under the constant body loads `load` (`(6 n,)`, `[F_k, M_k]`
    per body in ground axes, N and N m; `chain.load_components`): Newton's method on
    `chain_residual` in joint coordinates (the pose of each joint's frame 2 in its frame 1, so
    that a step turning a joint carries every body above it rigidly about the joint; the Jacobian `(6 n, 6 n)`
    by forward-over-reverse differentiation, a dense solve per step, each shortened to at most `max_move` per coordinate (m, rad) and halved
    until the residual's norm falls) from `start` (`(6 n,)`, default the reference poses),
    until every residual is below `atol` (N, N m) or `max_steps`. Never raises: `converged` says whether it got
    there (a load the chain cannot carry, or a start too far for Newton). `jit`- and
    `vmap`-able."""
    start = chain.initial_state()[0] if start is None else jnp.asarray(start, dtype=float)
    load = jnp.asarray(load, dtype=float)

    def residual(u):
        return chain_residual(chain, _absolute(chain, u.reshape(-1, 6)), load)

    def admissible(u):
        # Every joint's second Euler angle kept 3 degrees short of its singularity, where the
        # joints' deflections are not defined: a step of a diverging solve (a buckling spine)
        # stops at that bound instead of evaluating the laws there.
        bound = jnp.pi / 2 - 0.05
        return u.reshape(-1, 6).at[:, 4].set(jnp.clip(u.reshape(-1, 6)[:, 4], -bound, bound)
                                             ).ravel()

    def going(state):
        q, r, k = state
        return (jnp.max(jnp.abs(r)) > atol) & (k < max_steps) & jnp.all(jnp.isfinite(q))

    def newton(state):
        # A Newton step, shortened to at most `max_move` (m, rad) per coordinate and then
        # halved until the residual's norm falls (Armijo): a full step from a joint's neutral
        # zone, where the tangent stiffness nearly vanishes, would overshoot far.
        q, r, k = state
        step = jnp.linalg.solve(jax.jacfwd(residual)(q), r)
        length = jnp.minimum(1.0, max_move / jnp.max(jnp.abs(step)))
        norm = jnp.linalg.norm(r)

        def worse(search):
            t, r_t = search
            return (~(jnp.linalg.norm(r_t) <= (1 - 1e-4 * t) * norm)) & (t > 1e-4)

        def halve(search):
            t = search[0] / 2
            return t, residual(admissible(q - t * step))

        t, r_t = jax.lax.while_loop(worse, halve,
                                    (length, residual(admissible(q - length * step))))
        return admissible(q - t * step), r_t, k + 1

    u = _relative(chain, start).ravel()
    u, left, steps = jax.lax.while_loop(going, newton, (u, residual(u), jnp.asarray(0)))
    q = _absolute(chain, u.reshape(-1, 6))
    converged = jnp.all(jnp.abs(left) <= atol) & jnp.all(jnp.isfinite(q))
    return ChainEquilibrium(q, left, converged, steps)


def _continued(chain_at, fractions: Array, start: Array, atol: float):
    # Equilibria of `chain_at(fraction)` (no external load) along `fractions`, each started
    # from the last converged one; returns (k, 6 n) poses and (k,) flags.
    def step(q, fraction):
        solved = chain_equilibrium(chain_at(fraction), jnp.zeros_like(q), start=q, atol=atol)
        q = jnp.where(solved.converged, solved.q, q)
        return q, (q, solved.converged)

    _, (poses, converged) = jax.lax.scan(step, start, fractions)
    return poses, converged


def engaged(chain: SpatialChain, fraction, start=None) -> SpatialChain:
    """`chain` with every link's reference moved the share `fraction` (0 to 1) of the way from
    its deflection at the pose `start` (default the reference poses; a link there carries no
    load at 0) to its own reference (at 1): the homotopy by which `assemble_links` brings
    pre-stressed links, such as a rod contoured straighter than the spine, into place."""
    q = chain.initial_state()[0] if start is None else start
    poses = chain.poses(q)
    references = []
    for link in chain.links:
        at_start = link.element.deflection(poses[link.lower], poses[link.upper])
        references.append(at_start + fraction * (link.element.reference - at_start))
    return eqx.tree_at(lambda c: [link.element.reference for link in c.links], chain,
                       references)


@dataclasses.dataclass(frozen=True)
class ChainPath:
    """Equilibria along a continuation: `fractions` (`(k,)`, the homotopy parameter, or the
    load factor), `poses` (`(k, 6 n)`), `converged` (`(k,)`)."""

    fractions: np.ndarray
    poses: np.ndarray
    converged: np.ndarray

    @property
    def q(self) -> np.ndarray:
        """The last equilibrium (`(6 n,)`)."""
        return self.poses[-1]


@eqx.filter_jit
def _assemble(chain, start, fractions, atol: float):
    # (A stored program, `stored_call`: its solves' equinox checks traced as NaN, a step
    # without equilibrium, so that no host callback keeps it from being stored.)
    with checks_reported_as_nan():
        return _continued(lambda f: engaged(chain, f, start), fractions, start, atol)


def assemble_links(chain: SpatialChain, steps: int = 10, atol: float = 1e-7) -> ChainPath:
    """The equilibrium of `chain` once its links are in place: their references moved from
    their deflections at the chain's reference poses (no load) to their own in `steps` equal
    steps (`engaged`), each equilibrium (`chain_equilibrium`) started from the last. This is how
    a surgeon's reduction brings a spine onto a rod: `ChainPath.q` is the corrected posture.
    Warns where a step found no equilibrium."""
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps {steps!r}: expected a whole number >= 1 of assembly steps")
    if not chain.links:
        raise ValueError("assemble_links: the chain has no links to assemble")
    fractions = np.arange(1, steps + 1) / steps
    start = chain.initial_state()[0]
    poses, converged = stored_call(_assemble, chain, start, jnp.asarray(fractions),
                                   float(atol))
    path = ChainPath(fractions, np.asarray(poses), np.asarray(converged))
    if not np.all(path.converged):
        warnings.warn(f"assemble_links: {int(np.sum(~path.converged))} of {steps} steps found "
                      "no equilibrium (the last converged poses are kept); try more steps",
                      RuntimeWarning, stacklevel=2)
    return path


@eqx.filter_jit
def _loaded_paths(chain, start, side, units, atol: float):
    # side: (s + 1,) moments from 0 up; units: (3, 6 n) unit body loads per direction. Each
    # direction's two sides are continued from the unloaded equilibrium, solved from `start` by
    # the first step (moment 0) of every sweep: one traced Newton solve serves the whole test.
    # Returns poses (6, s + 1, 6 n), flags (6, s + 1) and joint changes (6, s + 1, n, 6),
    # rows 2 d and 2 d + 1 the positive and negative side of direction d.
    def sweep(unit):
        def step(q, moment):
            solved = chain_equilibrium(chain, moment * unit, start=q, atol=atol)
            q = jnp.where(solved.converged, solved.q, q)
            return q, (q, solved.converged, _joint_changes(chain, q))

        return jax.lax.scan(step, start, side)[1]

    with checks_reported_as_nan():  # (stored, as `_assemble`)
        return jax.vmap(sweep)(jnp.stack([units, -units], axis=1).reshape(-1, units.shape[1]))


def chain_flexibility(chain: SpatialChain, body: str, moment: float = 10.0, steps: int = 20,
                      start=None, atol: float = 1e-7, stability: bool = True
                      ) -> FlexibilityTest:
    """A whole-spine flexibility test solved on all coordinates at once (`chain_equilibrium`):
    a pure moment on `body` about each axis of its joint's frame 1 at the reference pose
    (`joint_axes`; `DIRECTIONS`), from `-moment` to `moment` (N m) in `steps` steps per side
    (`load_steps`), each side continued from the unloaded equilibrium.

    The unloaded equilibrium is solved first from `start` (`(6 n,)`, default the reference
    poses; for an instrumented spine, `assemble_links(...).q`), so links and gravity may load
    the spine before the test. Rotations and translations are each joint's deflection change
    from that unloaded equilibrium (`limits` are shifted by it, so that `extrapolated` still
    finds the rotations that leave a law's table). `stability` and the warnings as in
    `spine_flexibility`. A spine under a moment of fixed direction can have several
    equilibria, and coarse steps may jump to another one (measured on the scoliotic spine
    under 5 N m of axial moment: 3 steps per side ended 1 degree away from the 10-step path at
    L1-L2, which the joint-by-joint solve confirms): use steps fine enough that a halving
    changes nothing.
    Returns a `FlexibilityTest` (`loaded = body`, `poses` of every step)."""
    k = chain.body_index(body)
    moments = load_steps(moment, steps)
    q0 = chain.initial_state()[0] if start is None else jnp.asarray(start, dtype=float)
    if q0.shape != (chain.n_dof,):
        raise ValueError(f"start: expected {chain.n_dof} coordinates, got shape {q0.shape}")
    axes = joint_axes(chain, k)
    units = np.zeros((3, chain.n_dof))
    units[:, 6 * k + 3:6 * k + 6] = axes.T
    paths, flags, changes = (np.asarray(a) for a in stored_call(
        _loaded_paths, chain, q0, jnp.asarray(moments[steps:]), jnp.asarray(units), float(atol)))
    if not np.all(flags[:, 0]):
        raise ValueError("chain_flexibility: no unloaded equilibrium found from start")

    def both_sides(a):
        # (6, s + 1, ...) sweeps -> (3, 2 s + 1, ...) along `moments`.
        a = a.reshape((3, 2) + a.shape[1:])
        return np.concatenate([a[:, 1, :0:-1], a[:, 0]], axis=1)

    poses, converged, changes = both_sides(paths), both_sides(flags), both_sides(changes)
    preload = changes[0, steps]  # the unloaded equilibrium, as changes from the references
    changes = np.moveaxis(changes - preload, 2, 0)  # (joints, 3, k, 6)
    stable = _stability(chain, k, moments, axes, poses) if stability else None
    if stability and not np.all(stable[converged]):
        warnings.warn(f"chain_flexibility: statically unstable equilibria under the moment on "
                      f"{body} in {int(np.sum(~stable))} steps (divergence: the spine would "
                      "buckle there)", RuntimeWarning, stacklevel=2)
    joints = len(chain.bodies)
    return _warn_extrapolated(FlexibilityTest(
        joints=joint_names(chain), moments=moments, rotations=changes[..., 3:],
        translations=changes[..., :3],
        converged=np.broadcast_to(converged, (joints,) + converged.shape).copy(),
        limits=_limits(chain) - preload[:, :, None], loaded=body, poses=poses,
        stable=stable))
