"""What instrumentation does to a spine: the correction of a scoliotic curve pulled onto
straighter rods (the posture, the Cobb angle, the loads each screw or hook carries) and the
change of each level's motion in a flexibility test once the rods are in place."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..spines._instrumentation import implant_point, instrument, Rod
from ..kinematics._rotations import euler123_rotation
from ..models._spatial_chain import SpatialChain
from ..simulation import (
    assemble_links, chain_flexibility, ChainPath, DIRECTIONS, FlexibilityTest, joint_names,
)
from ..simulation._flexibility import (
    _joint_changes, _limits, check_sweepable, spine_flexibility,
)


def coronal_tilts(q) -> np.ndarray:
    """`(n,)` (rad): each body's tilt in the ground's coronal plane, the angle of its superior
    axis e2 towards the right (e3) at the chain poses `q` (`(6 n,)`)."""
    rotations = np.asarray(jax.vmap(euler123_rotation)(np.asarray(q).reshape(-1, 6)[:, 3:]))
    return np.arctan2(rotations[:, 2, 1], rotations[:, 1, 1])


def _changes(chain: SpatialChain, q) -> np.ndarray:
    # (joints, 6): each joint's deflection from its law's reference at the poses `q`.
    return np.asarray(_joint_changes(chain, jnp.asarray(q)))


def _beyond_tables(chain: SpatialChain, changes: np.ndarray) -> list[str]:
    # "joint direction" of every rotation outside its law's table (as `extrapolated`).
    limits = _limits(chain)[:, 3:]
    return [f"{joint} {direction}" for j, joint in enumerate(joint_names(chain))
            for d, direction in enumerate(DIRECTIONS)
            if changes[j, 3 + d] < limits[j, d, 0] * (1 + 1e-9)
            or changes[j, 3 + d] > limits[j, d, 1] * (1 + 1e-9)]


@dataclasses.dataclass(frozen=True)
class Correction:
    """A spine pulled onto rods (`correct_curve`).

    Fields: `chain` (the instrumented chain), `rest` and `q` (`(6 n,)`: the poses before, at
    the spine's rest shape, and after, at the equilibrium with the rods), `path` (the
    assembly's `ChainPath`), `screws` (`(rod name, vertebra)` of each clamp), `screw_loads`
    (`(clamps, 6)`: the force (N) and moment (N m, about the clamp) that the rod exerts on the
    vertebra through that clamp, in the vertebra's body axes e1 anterior, e2 superior, e3
    right), `joint_changes` (`(joints, 6)`: each joint's deflection change, m and rad),
    `levels` (the instrumented vertebrae), `beyond_tables` (joint laws driven past their
    tables, extrapolated).
    """

    chain: SpatialChain
    rest: np.ndarray
    q: np.ndarray
    path: ChainPath
    screws: tuple[tuple[str, str], ...]
    screw_loads: np.ndarray
    joint_changes: np.ndarray
    levels: tuple[str, ...]
    beyond_tables: tuple[str, ...]

    def cobb_angle(self, levels=None) -> tuple[float, float]:
        """`(before, after)` (rad): the largest difference of coronal tilts (`coronal_tilts`)
        among `levels` (vertebra names; default the instrumented ones): the Cobb angle of
        the curve they span, at the rest shape and with the rods."""
        levels = self.levels if levels is None else tuple(levels)
        index = [self.chain.body_index(level, "levels") for level in levels]
        before, after = coronal_tilts(self.rest)[index], coronal_tilts(self.q)[index]
        return float(np.ptp(before)), float(np.ptp(after))

    def report(self) -> str:
        """The Cobb angle, the loads per clamp and the largest joint rotations, as text."""
        before, after = np.degrees(self.cobb_angle())
        lines = [f"Cobb angle {self.levels[0]}-{self.levels[-1]}: {before:.1f} deg -> "
                 f"{after:.1f} deg ({100 * (1 - after / before):.0f}% correction)" if before
                 else "no coronal curve among the instrumented levels",
                 f"{'clamp':<16}{'F ant':>9}{'F sup':>9}{'F right':>9}{'|F|':>8}"
                 f"{'|M|':>8}  (N, N m; vertebra axes)"]
        for (rod, level), load in zip(self.screws, self.screw_loads):
            lines.append(f"{rod + ' ' + level:<16}{load[0]:9.1f}{load[1]:9.1f}{load[2]:9.1f}"
                         f"{np.linalg.norm(load[:3]):8.1f}{np.linalg.norm(load[3:]):8.2f}")
        if self.beyond_tables:
            lines.append("beyond the joint laws' tables (extrapolated): "
                         + ", ".join(self.beyond_tables))
        return "\n".join(lines)


def _clamp_loads(chain: SpatialChain, rods, q) -> tuple[tuple, np.ndarray]:
    # The rods' loads on each vertebra at its clamp (body axes), links in `instrument` order.
    poses = chain.poses(np.asarray(q))
    links = chain.links[len(chain.links) - sum(len(r.levels) - 1 for r in rods):]
    loads = np.asarray(chain.link_loads(np.asarray(q)))[len(chain.links) - len(links):]
    screws, out, k = [], [], 0
    for rod in rods:
        totals = {level: np.zeros(6) for level in rod.levels}
        for (la, lb) in zip(rod.levels, rod.levels[1:]):
            link, load = links[k], loads[k]
            _, x1, _, x2 = (np.asarray(a) for a in link.element.frames(poses[link.lower],
                                                                      poses[link.upper]))
            for level, body, row, origin in ((la, link.lower, 0, x1), (lb, link.upper, 1, x2)):
                rotation = np.asarray(euler123_rotation(poses[body][3:]))
                clamp = poses[body][:3] + rotation @ (
                    implant_point(level, rod.point, rod.side)
                    + np.array([-rod.head_offset, 0.0, 0.0]))
                force, moment = load[row, :3], load[row, 3:]
                moment = moment + np.cross(origin - clamp, force)
                totals[level] += np.concatenate([rotation.T @ force, rotation.T @ moment])
            k += 1
        for level in rod.levels:
            screws.append((rod.name, level))
            out.append(totals[level])
    return tuple(screws), np.array(out)


def correct_curve(chain: SpatialChain, rods, shape=None, steps: int = 10) -> Correction:
    """Pull `chain` (a spine at its rest shape, e.g. `thoracolumbar_spine(curve=...)`) onto
    `rods` (`Rod`s) contoured to `shape` (`instrument`; e.g. the spine with its curve halved):
    the rods' rest shapes are reached in `steps` continuation steps (`assemble_links`).

    Returns a `Correction` (posture, Cobb angle, loads per clamp, joint changes); warns when a
    joint law is driven past its table (the end phase extrapolated: the correction then rests
    on the stiffness assumed beyond the sources' range)."""
    rods = (rods,) if isinstance(rods, Rod) else tuple(rods)
    instrumented = instrument(chain, rods, shape)
    path = assemble_links(instrumented, steps)
    rest = np.asarray(chain.initial_state()[0])
    screws, loads = _clamp_loads(instrumented, rods, path.q)
    after = _changes(chain, path.q)
    changes = after - _changes(chain, rest)
    beyond = tuple(_beyond_tables(chain, after))
    if beyond:
        warnings.warn(f"correct_curve: {len(beyond)} joint rotations beyond their laws' tables "
                      f"(extrapolated): {', '.join(beyond[:6])}{' ...' if len(beyond) > 6 else ''}",
                      RuntimeWarning, stacklevel=2)
    levels = tuple(dict.fromkeys(level for rod in rods for level in rod.levels))
    levels = tuple(sorted(levels, key=lambda v: chain.body_index(v, "levels")))
    return Correction(chain=instrumented, rest=rest, q=np.asarray(path.q), path=path,
                      screws=screws, screw_loads=loads, joint_changes=changes, levels=levels,
                      beyond_tables=beyond)


@dataclasses.dataclass(frozen=True)
class MotionChange:
    """Flexibility tests of one spine without and with instrumentation (`motion_change`):
    `before` and `after` (`FlexibilityTest`s, the moment on the same body), `correction` (the
    `Correction` the test with rods starts from)."""

    before: FlexibilityTest
    after: FlexibilityTest
    correction: Correction

    def ratios(self) -> np.ndarray:
        """`(joints, 3)`: each joint's range of motion with the rods over that without."""
        return self.after.range_of_motion() / self.before.range_of_motion()

    def table(self) -> str:
        """Ranges of motion (degrees) per joint and direction, without and with the rods."""
        before, after = (np.degrees(t.range_of_motion()) for t in (self.before, self.after))
        head = f"{'joint':<9}" + "".join(f"{d[:14]:>22}" for d in DIRECTIONS)
        rows = [head, f"{'':<9}" + f"{'without':>11}{'with':>11}" * 3]
        for j, joint in enumerate(self.before.joints):
            rows.append(f"{joint:<9}" + "".join(f"{before[j, d]:11.2f}{after[j, d]:11.2f}"
                                                 for d in range(3)))
        return "\n".join(rows)


def motion_change(chain: SpatialChain, rods, shape=None, body: str = "T1",
                  moment: float = 5.0, steps: int = 10, assembly_steps: int = 10,
                  stability: bool = True) -> MotionChange:
    """The whole-spine flexibility test (a pure moment on `body` up to `moment` N m in `steps`
    steps per side: `spine_flexibility` where the joints carry it one by one, else
    `chain_flexibility`) of `chain` alone and with `rods` (contoured to
    `shape`, pulled into place by `correct_curve`, the test starting from the corrected
    posture; `stability` as in `chain_flexibility`). `MotionChange.table` compares each level's
    range of motion."""
    correction = correct_curve(chain, rods, shape, assembly_steps)
    try:  # without links or gravity the joint-by-joint solve is exact, and faster
        check_sweepable(chain, "motion_change")
        before = spine_flexibility(chain, body, moment, steps, stability=stability)
    except ValueError:
        before = chain_flexibility(chain, body, moment, steps, stability=stability)
    after = chain_flexibility(correction.chain, body, moment, steps, start=correction.q,
                              stability=stability)
    return MotionChange(before=before, after=after, correction=correction)
