"""Clinical flexibility tests of a spine model (a `SpatialChain`): pure moments of
flexion-extension, lateral bending and axial rotation applied to a vertebra, quasi-statically by
continuation (an equilibrium per load step, each started from the last) and dynamically (the
moment ramped in a simulation).

Directions are the axes of each joint's frame 1 (a bushing's frame on the lower vertebra):
lateral bending about its e1 (anterior) axis, axial rotation about e2 (superior),
flexion-extension about e3 (right; extension positive, flexion negative). A test's rotations are
the joint's relative rotation, the change of its bushing deflection (1-2-3 Euler angles of
frame 2 in frame 1, rad) from the reference; its range of motion is the primary rotation at the
largest positive moment minus that at the largest negative one (both sides together), and its
neutral zone the primary rotation between the moments `-nz_moment` and `+nz_moment`
(interpolated along the curve): the width of a joint's low-stiffness zone, the laxity that an
elastic model has in place of Panjabi's hysteresis-based definition.
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
from ..elements._base import unlabelled
from ..elements._bushings import TableBushing
from ..kinematics._rotations import euler123_angles, euler123_rotation
from ..models._loads import TabulatedLoad
from ..models._mechanics import potential_gradient
from ..models._spatial_chain import chain_generalized_loads, SpatialChain
from ..models._spatial_pair import SpatialBody, SpatialPair
from ._equilibrium import equilibrium
from ._simulate import simulate


DIRECTIONS = ("lateral_bending", "axial_rotation", "flexion_extension")
"""Test directions, in the order of the rotation axes e1, e2, e3 of a joint's frame 1."""


def _direction_index(direction: str, key: str = "direction") -> int:
    if direction not in DIRECTIONS:
        raise ValueError(f"{key} = {direction!r}: expected one of {list(DIRECTIONS)}")
    return DIRECTIONS.index(direction)


def load_steps(moment: float, steps: int) -> np.ndarray:
    """The moments of a test (N m, `(2 steps + 1,)`, increasing from `-moment` to `moment`):
    `moment (i / steps)^2` on each side, finer near zero where a neutral zone bends the
    curve."""
    if not moment > 0:
        raise ValueError(f"moment {moment!r}: expected a positive moment in N m")
    if int(steps) != steps or steps < 2:
        raise ValueError(f"steps {steps!r}: expected a whole number >= 2 of load steps per side")
    side = moment * (np.arange(1, steps + 1) / steps) ** 2
    return np.concatenate([-side[::-1], [0.0], side])


def check_sweepable(chain: SpatialChain, what: str) -> None:
    """Refuse, naming `what`, a chain a joint-by-joint flexibility test cannot solve: one with
    gravity (tests apply pure moments to a spine without it), with links spanning joints (an
    implant rod: `chain_flexibility` solves those), or whose joints differ in layout (element
    types, table sizes: they are solved as one batch)."""
    if np.any(np.asarray(chain.gravity) != 0):
        raise ValueError(f"{what}: the chain has gravity; flexibility tests apply pure moments "
                         "to a spine without it (build the model with gravity (0, 0, 0))")
    if chain.links:
        named = ", ".join(link.name or "unnamed" for link in chain.links)
        raise ValueError(f"{what}: the chain has links ({named}) that span joints, so a moment "
                         "does not pass joint by joint; use chain_flexibility, which solves "
                         "every coordinate at once")
    if len(chain.elements) > 1 and chain._stacked_elements() is None:
        raise ValueError(f"{what}: the chain's joints differ in layout (element types or table "
                         "sizes) and cannot be solved as one batch")


def segment_pair(chain: SpatialChain, joint: int, loads=()) -> SpatialPair:
    """Joint `joint` of `chain` as a motion segment: the body below it fixed at its reference
    pose (the base for joint 0), the body above it free, the joint's bushing between them;
    `loads` on the free body (`SPATIAL_LOAD_COMPONENTS`, default none)."""
    if not 0 <= joint < len(chain.bodies):
        raise ValueError(f"joint {joint}: the chain has joints 0 ... {len(chain.bodies) - 1}")
    if joint == 0:
        lower = SpatialBody(mass=jnp.asarray(1.0), inertia=jnp.eye(3),
                            reference_pose=chain.base_pose, fixed=True)
    else:
        below = chain.bodies[joint - 1]
        lower = SpatialBody(mass=below.mass, inertia=below.inertia,
                            reference_pose=below.reference_pose, fixed=True)
    upper = chain.bodies[joint]
    # (The joint's label, its name in the chain, is left behind: the pairs of all joints then
    # share one structure and are solved together.)
    return SpatialPair(lower=lower, upper=upper, elements=(unlabelled(chain.elements[joint]),),
                       loads=tuple(loads),
                       gravity=chain.gravity, initial_pose=upper.reference_pose)


def _axes(pair: SpatialPair) -> Float[Array, "3 3"]:
    # Ground directions of the joint's frame-1 axes (columns) at the reference pose.
    return pair.elements[0].frames(pair.lower.reference_pose, pair.upper.reference_pose)[0]


def joint_axes(chain: SpatialChain, joint: int) -> np.ndarray:
    """`(3, 3)`: the ground directions (columns) of joint `joint`'s frame-1 axes at the
    reference pose: lateral bending, axial rotation and flexion-extension (`DIRECTIONS`)."""
    return np.asarray(_axes(segment_pair(chain, joint)))


def _rotation_change(pair: SpatialPair, pose) -> Float[Array, "6"]:
    bushing = pair.elements[0]
    return bushing.deflection(pair.lower.reference_pose, pose) - bushing.reference


def _sweep(pair: SpatialPair, direction: Array, moments: Array):
    # One direction, both sides by continuation from the reference; returns (k, 6) changes of
    # the joint's deflection and (k,) flags, in the order of `moments` (increasing, zero in the
    # middle).
    axis = _axes(pair) @ jax.nn.one_hot(direction, 3)
    middle = moments.shape[0] // 2

    def step(pose, moment):
        load = jnp.concatenate([jnp.zeros(3), moment * axis])
        solved = equilibrium(pair, load, start=pose)
        pose = jnp.where(solved.converged, solved.pose, pose)
        return pose, (_rotation_change(pair, pose), solved.converged)

    start = pair.upper.reference_pose
    _, (up, up_ok) = jax.lax.scan(step, start, moments[middle:])
    _, (down, down_ok) = jax.lax.scan(step, start, moments[:middle][::-1])
    return (jnp.concatenate([down[::-1], up]), jnp.concatenate([down_ok[::-1], up_ok]))


@eqx.filter_jit
def _all_segments(pairs: SpatialPair, moments: Array):
    directions = jnp.arange(3)
    per_pair = jax.vmap(lambda pair: jax.vmap(lambda d: _sweep(pair, d, moments))(directions))
    with checks_reported_as_nan():  # (a failed check: no equilibrium, not a raise)
        return per_pair(pairs)


@dataclasses.dataclass(frozen=True)
class FlexibilityTest:
    """Quasi-static flexibility tests, joint by joint or of a whole spine.

    Fields: `joints` (names, e.g. `"L5-S1"`), `moments` (N m, `(k,)`, increasing),
    `rotations` (`(joints, 3 directions, k, 3)`, rad: the joint's rotation change rx, ry, rz
    under each moment of each direction; `DIRECTIONS` order), `translations` (same shape, m),
    `converged` (`(joints, 3, k)`), `limits` (`(joints, 6, 2)`: each law's first and last node,
    m or rad, or NaN where the joint has no table), `loaded` (the body carrying the moment in a
    whole-spine test, or `None` for joint-by-joint tests), `poses` (whole-spine tests: `(3, k,
    6 n)`, the chain's poses), `stable` (whole-spine tests: `(3, k)`, whether the equilibrium
    is statically stable: every eigenvalue of the tangent stiffness `d(chain_residual)/dq` has a
    positive real part, so no load-free disturbance grows statically (divergence); a fixed-
    direction moment is not conservative, and dynamic stability (flutter) is not checked).
    """

    joints: tuple[str, ...]
    moments: np.ndarray
    rotations: np.ndarray
    translations: np.ndarray
    converged: np.ndarray
    limits: np.ndarray
    loaded: str | None = None
    poses: np.ndarray | None = None
    stable: np.ndarray | None = None

    def primary(self) -> np.ndarray:
        """`(joints, 3, k)`: each direction's rotation about its own axis (rad)."""
        return np.stack([self.rotations[:, d, :, d] for d in range(3)], axis=1)

    def range_of_motion(self) -> np.ndarray:
        """`(joints, 3)` (rad): primary rotation at the largest moment minus at the most
        negative one, both sides together; columns in `DIRECTIONS` order."""
        primary = self.primary()
        return primary[..., -1] - primary[..., 0]

    def neutral_zone(self, nz_moment: float = 0.25) -> np.ndarray:
        """`(joints, 3)` (rad): primary rotation between `-nz_moment` and `+nz_moment` (N m),
        interpolated along each curve (module docstring); `nz_moment` must lie within the
        tested moments."""
        if not 0 < nz_moment <= self.moments[-1]:
            raise ValueError(f"nz_moment {nz_moment!r}: expected a moment in (0, "
                             f"{self.moments[-1]:g}] N m, within the test")
        primary = self.primary()
        high = np.apply_along_axis(lambda r: np.interp(nz_moment, self.moments, r), -1, primary)
        low = np.apply_along_axis(lambda r: np.interp(-nz_moment, self.moments, r), -1, primary)
        return high - low

    def extrapolated(self) -> list[str]:
        """Joint and direction of every test whose rotation left its law's table (the law's
        end phase continued beyond the sources' range), as `"L5-S1 flexion_extension"`."""
        out = []
        for j, joint in enumerate(self.joints):
            for d, direction in enumerate(DIRECTIONS):
                low, high = self.limits[j, 3 + d]
                reached = self.rotations[j, d, :, d]
                if np.any(reached < low * (1 + 1e-9)) or np.any(reached > high * (1 + 1e-9)):
                    out.append(f"{joint} {direction}")
        return out

    def table(self, nz_moment: float = 0.25) -> str:
        """The ranges of motion and neutral zones (within `nz_moment`, N m) in degrees, one row
        per joint."""
        rom, nz = np.degrees(self.range_of_motion()), np.degrees(self.neutral_zone(nz_moment))
        head = f"{'joint':<9}" + "".join(f"{'ROM ' + d[:7]:>15}{'NZ':>7}" for d in DIRECTIONS)
        rows = [head] + [f"{joint:<9}" + "".join(f"{rom[j, d]:15.2f}{nz[j, d]:7.2f}"
                                                 for d in range(3))
                         for j, joint in enumerate(self.joints)]
        return "\n".join(rows)


def _limits(chain: SpatialChain) -> np.ndarray:
    rows = []
    for element in chain.elements:
        if isinstance(element, TableBushing):
            rows.append([[float(law.displacement[0]), float(law.displacement[-1])]
                         if hasattr(law, "displacement") else [np.nan, np.nan]
                         for law in element.laws])
        else:
            rows.append([[np.nan, np.nan]] * 6)
    return np.array(rows)


def joint_names(chain: SpatialChain) -> tuple[str, ...]:
    """`"<upper>-<lower>"` for every joint of `chain`, bottom up (`"L5-S1"`, ..., `"T1-T2"`)."""
    names = chain.body_names
    return tuple(f"{names[k + 1]}-{names[k]}" for k in range(len(chain.bodies)))


def _warn_extrapolated(test: FlexibilityTest) -> FlexibilityTest:
    left = test.extrapolated()
    if left:
        warnings.warn(f"flexibility test: rotations beyond the joint laws' tables (the end "
                      f"phases extrapolated) in {len(left)} tests: {', '.join(left[:6])}"
                      f"{' ...' if len(left) > 6 else ''}", RuntimeWarning, stacklevel=3)
    if not np.all(test.converged):
        failed = int(np.sum(~test.converged))
        warnings.warn(f"flexibility test: {failed} load steps found no equilibrium (reported "
                      "as not converged; their rotations are those of the last converged step)",
                      RuntimeWarning, stacklevel=3)
    return test


def segment_flexibility(chain: SpatialChain, moment: float = 10.0, steps: int = 20,
                        joints=None) -> FlexibilityTest:
    """Flexibility tests of every joint of `chain` (or of the named `joints`), each as a
    motion segment with the vertebra below fixed (`segment_pair`), in the three directions,
    from `-moment` to `moment` (N m) in `steps` load steps per side (`load_steps`).

    All segments and directions are solved at once (vmapped Newton solves, `equilibrium`, one
    compiled program per chain layout). Returns a `FlexibilityTest`; warns where a rotation
    leaves its law's table or a step has no equilibrium. The joints must share one layout
    (the same element types and law sizes, as in `thoracolumbar_spine`).
    """
    check_sweepable(chain, "segment_flexibility")
    names = joint_names(chain)
    if isinstance(joints, str):
        joints = [joints]
    chosen = list(range(len(names)) if joints is None
                  else [_joint_index(names, j) for j in joints])
    if not chosen:
        raise ValueError("segment_flexibility: joints is empty; name at least one joint")
    pairs = [segment_pair(chain, k) for k in chosen]
    try:
        stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *pairs)
    except ValueError as error:
        raise ValueError("segment_flexibility: the joints differ in layout (element types or "
                         f"table sizes) and cannot be solved together: {error}") from None
    moments = load_steps(moment, steps)
    changes, converged = stored_call(_all_segments, stacked, jnp.asarray(moments))
    changes = np.asarray(changes)
    return _warn_extrapolated(FlexibilityTest(
        joints=tuple(names[k] for k in chosen), moments=moments, rotations=changes[..., 3:],
        translations=changes[..., :3], converged=np.asarray(converged),
        limits=_limits(chain)[chosen]))


def _joint_index(names: tuple[str, ...], joint: str) -> int:
    if joint not in names:
        raise ValueError(f"joint {joint!r}: no such joint; expected one of {list(names)}")
    return names.index(joint)


def chain_residual(chain: SpatialChain, q: Float[Array, " n"], load: Float[Array, " n"]
                   ) -> Float[Array, " n"]:
    """`dU/dq - Q(q, load)` (N, N m; `(6 n,)`): zero at an equilibrium of the chain under the
    body loads `load` (`[F_k, M_k]` per body, ground axes; `chain_generalized_loads`)."""
    elastic = potential_gradient(chain, q)
    return elastic - chain_generalized_loads(q, load)


def _carried(lower_now, lower_before, upper_before):
    # The upper pose that keeps its relative pose to the lower body when the lower body moves
    # from `lower_before` to `lower_now` (a rigid carry; start of the next Newton solve).
    r_now, r_before = euler123_rotation(lower_now[3:]), euler123_rotation(lower_before[3:])
    relative = r_before.T @ euler123_rotation(upper_before[3:])
    offset = r_before.T @ (upper_before[:3] - lower_before[:3])
    return jnp.concatenate([lower_now[:3] + r_now @ offset, euler123_angles(r_now @ relative)])


def _chain_step(chain: SpatialChain, loaded: int, moment: Array, before: Array, atol: float):
    # One load step of a pure moment `moment` (ground axes) on body `loaded`: joint by joint
    # from the base, each joint's upper body in equilibrium under the moment (zero above the
    # loaded body) with its lower body where the joints below put it. Returns (n, 6) poses and
    # flags.
    elements = chain._stacked_elements()
    bodies = jax.tree.map(lambda *leaves: jnp.stack(leaves), *chain.bodies)
    lowers_before = jnp.concatenate([chain.base_pose[None], before[:-1]])

    def joint(lower_now, inputs):
        k, element, body, lower_before, upper_before = inputs
        pair = SpatialPair(
            lower=SpatialBody(mass=jnp.asarray(1.0), inertia=jnp.eye(3),
                              reference_pose=lower_now, fixed=True),
            upper=body, elements=(element,), loads=(), gravity=jnp.zeros(3),
            initial_pose=body.reference_pose)
        load = jnp.concatenate([jnp.zeros(3), jnp.where(k <= loaded, 1.0, 0.0) * moment])
        solved = equilibrium(pair, load, start=_carried(lower_now, lower_before, upper_before),
                             atol=atol)
        return solved.pose, (solved.pose, solved.converged)

    indices = jnp.arange(len(chain.bodies))
    _, (poses, converged) = jax.lax.scan(
        joint, chain.base_pose, (indices, elements, bodies, lowers_before, before))
    return poses, jnp.all(converged)


def moment_sweep(chain: SpatialChain, loaded: int, moments: Float[Array, " k"],
                 axis: Float[Array, "3"], atol: float = 1e-9):
    """The chain's equilibria under a pure moment `moments[i] * axis` (N m; `axis` a unit
    vector in ground) on body `loaded` (its index), the moments as `load_steps` gives them
    (increasing, zero in the middle): continued from the reference outwards on each side,
    joint by joint (`spine_flexibility`). Returns `(poses (k, 6 n), converged (k,))`; a step
    without equilibrium keeps the last converged poses. Differentiable with respect to the
    chain's parameters (implicit function theorem in each joint's solve); `vmap`-able."""
    def step(before, moment):
        poses, ok = _chain_step(chain, loaded, moment * axis, before, atol)
        poses = jnp.where(ok, poses, before)
        return poses, (poses.ravel(), ok)

    start = chain.initial_state()[0].reshape(-1, 6)
    middle = moments.shape[0] // 2
    _, (up, up_ok) = jax.lax.scan(step, start, moments[middle:])
    _, (down, down_ok) = jax.lax.scan(step, start, moments[:middle][::-1])
    return jnp.concatenate([down[::-1], up]), jnp.concatenate([down_ok[::-1], up_ok])


@eqx.filter_jit
def _tangent_eigenvalues(chain: SpatialChain, poses: Array, loads: Array):
    tangent = jax.jacfwd(chain_residual, argnums=1)
    with checks_reported_as_nan():
        return (jax.vmap(lambda q, load: jnp.linalg.eigvals(tangent(chain, q, load)))(poses,
                                                                                     loads),)


@eqx.filter_jit
def _chain_sweeps(chain: SpatialChain, loaded: int, moments: Array, axes: Array, atol: float):
    with checks_reported_as_nan():
        poses, converged = jax.vmap(
            lambda axis: moment_sweep(chain, loaded, moments, axis, atol))(axes.T)
        changes = jax.vmap(jax.vmap(lambda q: _joint_changes(chain, q)))(poses)
    return poses, converged, changes


def _stability(chain, k, moments, axes, poses) -> np.ndarray:
    # (3, len(moments)): whether each equilibrium's tangent stiffness is positive (real parts).
    body_loads = np.zeros((3, moments.size, chain.n_dof))
    for d in range(3):
        body_loads[d, :, 6 * k + 3:6 * k + 6] = moments[:, None] * np.asarray(axes)[:, d]
    eigenvalues = np.asarray(stored_call(
        _tangent_eigenvalues, chain, jnp.asarray(poses).reshape(-1, chain.n_dof),
        jnp.asarray(body_loads.reshape(-1, chain.n_dof)))[0])
    return np.all(eigenvalues.real > 0, axis=1).reshape(3, moments.size)


def _joint_changes(chain: SpatialChain, q: Float[Array, " n"]) -> Float[Array, "n 6"]:
    poses = chain.poses(q)
    return jnp.stack([element.deflection(poses[k], poses[k + 1]) - element.reference
                      for k, element in enumerate(chain.elements)])


def spine_flexibility(chain: SpatialChain, body: str, moment: float = 10.0, steps: int = 20,
                      atol: float = 1e-9, stability: bool = True) -> FlexibilityTest:
    """Whole-spine flexibility tests: a pure moment on `body` (a free body's name, e.g.
    `"T1"`) about each axis of its joint's frame 1 at the reference pose (a fixed direction in
    ground), from `-moment` to `moment` (N m) in `steps` steps per side, every other body free
    and the base fixed.

    Without gravity a pure moment passes unchanged through every joint below the loaded body
    and none above it, so each step is solved joint by joint from the base: the upper body of
    each joint in equilibrium (`equilibrium`, 6 coordinates) under the moment, its lower body
    where the joints below put it, started from the last step's relative pose. The whole
    chain's equilibrium residual (`chain_residual`, all `6 n` coordinates) vanishes there, as a
    test checks. A chain with gravity is refused (its joints do not decouple).

    With `stability` (default) every equilibrium's tangent stiffness (`6 n x 6 n`) is checked
    for static stability (`stable`; divergence, not flutter); where one is unstable (a
    fixed-direction moment can make a spine buckle) a `RuntimeWarning` says so. Without it
    `stable` is `None` (half the time).

    Returns a `FlexibilityTest` over all joints (every joint's rotations under the moment on
    `body`, `loaded = body`, with the chain's `poses`). The base cannot be loaded: a `body`
    that is the base or unknown raises `ValueError`.
    """
    k = chain.body_index(body)
    check_sweepable(chain, "spine_flexibility")
    moments = load_steps(moment, steps)
    axes = joint_axes(chain, k)
    poses, converged, changes = stored_call(_chain_sweeps, chain, k, jnp.asarray(moments),
                                            jnp.asarray(axes), float(atol))
    changes = np.asarray(changes)
    changes = np.moveaxis(changes, 2, 0)  # (joints, 3, k, 6)
    joints = len(chain.bodies)
    stable = _stability(chain, k, moments, axes, poses) if stability else None
    if stability and not np.all(stable[np.asarray(converged)]):
        worst = []
        for d in range(3):
            for side, chosen in (("negative", moments < 0), ("positive", moments > 0)):
                unstable = np.abs(moments[chosen & ~stable[d]])
                if unstable.size:
                    worst.append(f"{DIRECTIONS[d]} {side} beyond {unstable.min():g} N m")
        warnings.warn(f"spine_flexibility: unstable equilibria under a fixed-direction moment on "
                      f"{body} ({'; '.join(worst)}): statically unstable (divergence), the spine "
                      "would buckle there; the path reported is the equilibrium continued from "
                      "the reference, not the motion a real spine would take", RuntimeWarning,
                      stacklevel=2)
    return _warn_extrapolated(FlexibilityTest(
        joints=joint_names(chain), moments=moments, rotations=changes[..., 3:],
        translations=changes[..., :3],
        converged=np.broadcast_to(np.asarray(converged), (joints,) + converged.shape).copy(),
        limits=_limits(chain), loaded=body, poses=np.asarray(poses), stable=stable))


@dataclasses.dataclass(frozen=True)
class DynamicFlexibility:
    """A flexibility test in time: `ts` (s), `moment` (N m, `(k,)`, the applied moment),
    `rotations` (`(k, 3)`, rad: the joint's rotation change), `joint`, `direction`."""

    joint: str
    direction: str
    ts: np.ndarray
    moment: np.ndarray
    rotations: np.ndarray


def dynamic_flexibility(chain: SpatialChain, joint: str, direction: str, moment: float = 10.0,
                        ramp: float = 1.0, hold: float = 0.5, samples: int = 301
                        ) -> DynamicFlexibility:
    """A dynamic flexibility test of one joint as a motion segment (`segment_pair`): the pure
    moment about the joint's `direction` axis ramped linearly from 0 to `moment` (N m, either
    sign) over `ramp` seconds and held for `hold` seconds, integrated from rest (`simulate`).
    With enough damping the held rotation equals the quasi-static one at the same moment."""
    check_sweepable(chain, "dynamic_flexibility")
    index = _joint_index(joint_names(chain), joint)
    d = _direction_index(direction)
    if not ramp > 0 or hold < 0:
        raise ValueError(f"ramp {ramp!r} must be > 0 s and hold {hold!r} >= 0 s")
    axis = joint_axes(chain, index)[:, d]
    times = np.array([0.0, ramp, ramp + hold])
    values = np.zeros((3, 6))
    values[1:, 3:] = moment * axis
    pair = segment_pair(chain, index, (TabulatedLoad(times=jnp.asarray(times),
                                                     values=jnp.asarray(values)),))
    ts = np.linspace(0.0, ramp + hold, samples)
    run = simulate(pair, jnp.asarray(ts))
    rotations = np.asarray(jax.vmap(lambda q: _rotation_change(pair, q))(run.q))[:, 3:]
    return DynamicFlexibility(joint=joint, direction=direction, ts=ts,
                              moment=np.interp(ts, times, [0.0, moment, moment]),
                              rotations=rotations)
