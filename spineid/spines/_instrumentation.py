"""Spinal instrumentation on Liu's thoracolumbar spine: rods clamped to screws or hooks at the
attachment points of the thesis' Appendix B, each rod a chain of beam segments (`rod_segment`)
linking the instrumented vertebrae of a `SpatialChain`.

Appendix B lists ten points per vertebra (local coordinates of the Appendix A tables) without
naming them; the text names "pedicle screws, transverse process hooks, and lamina hooks". By
their positions they pair off, odd nodes on the left (+x of the tables), even on the right:
1-2 at the pedicles (about 17-21 mm from the mid-plane, 30-62 mm behind the front of the body),
3-4 and 5-6 at the transverse processes (20-34 mm out), 7-8 and 9-10 at the laminae (3 mm out,
farther back). `IMPLANT_POINTS` names them so.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from ..elements._rods import rod_material, rod_segment
from ..io._datasets import liu_implant_nodes
from ..kinematics._rotations import euler123_angles, euler123_rotation
from ..models._spatial_chain import ChainLink, SpatialChain
from ._thoracolumbar import liu_spine_geometry, SpineGeometry, THESIS_TO_SPINEID


IMPLANT_POINTS = {"pedicle": (1, 2), "transverse_process": (3, 4),
                  "transverse_process_base": (5, 6), "lamina": (7, 8),
                  "lamina_inferior": (9, 10)}
"""Appendix B node numbers `(left, right)` of each kind of attachment point (module docstring:
names inferred from the points' positions)."""

SIDES = ("left", "right")


def implant_point(vertebra: str, point: str = "pedicle", side: str = "left",
                  geometry: SpineGeometry | None = None, key: str = "vertebra") -> np.ndarray:
    """`(3,)` (m): the Appendix B attachment point `point` (`IMPLANT_POINTS`) on `side` of
    `vertebra` in its body frame of `thoracolumbar_spine` (origin the centre of the vertebral
    body, e1 anterior, e2 superior, e3 right). A vertebra without Appendix B points (the
    sacrum, a cervical vertebra), an unknown point or side raise `ValueError` naming `key`."""
    if point not in IMPLANT_POINTS:
        raise ValueError(f"point {point!r}: expected one of {list(IMPLANT_POINTS)}")
    if side not in SIDES:
        raise ValueError(f"side {side!r}: expected one of {list(SIDES)}")
    geometry = liu_spine_geometry() if geometry is None else geometry
    table = liu_implant_nodes()
    if vertebra not in geometry.names:
        raise ValueError(f"{key} = {vertebra!r}: no screw or hook points (Liu's Appendix B "
                         f"covers {geometry.names[0]} ... {geometry.names[-1]})")
    node = IMPLANT_POINTS[point][SIDES.index(side)]
    local = table["local"][(table["vertebra"] == vertebra) & (table["node"] == node)][0]
    depth = geometry.depths[geometry.names.index(vertebra)]
    return THESIS_TO_SPINEID @ (local - np.array([0.0, depth / 2, 0.0]))


@dataclasses.dataclass(frozen=True)
class Rod:
    """A rod clamped at an attachment point of each of `levels` (vertebra names, bottom up, at
    least two): `side` (`"left"` or `"right"`), `point` (`IMPLANT_POINTS`, default the pedicle
    screws), `diameter` (m, default 5.5 mm), `material` (a name of `ROD_MATERIALS` or `(E in
    Pa, Poisson's ratio)`, default titanium alloy), `head_offset` (m, default 0: how far behind
    the attachment point the rod's axis runs, the height of the screw head), `name` (default
    `"<side> rod"`)."""

    levels: tuple[str, ...]
    side: str = "left"
    point: str = "pedicle"
    diameter: float = 5.5e-3
    material: object = "titanium"
    head_offset: float = 0.0
    name: str = ""

    def __post_init__(self):
        if isinstance(self.levels, str) or len(self.levels) < 2:
            raise ValueError(f"Rod levels {self.levels!r}: expected at least two vertebra "
                             "names, bottom up, such as ('T12', 'T11', ...)")
        if len(set(self.levels)) != len(self.levels):
            raise ValueError(f"Rod levels {self.levels!r}: a vertebra is listed twice")
        if self.side not in SIDES:
            raise ValueError(f"Rod side {self.side!r}: expected one of {list(SIDES)}")
        if self.point not in IMPLANT_POINTS:
            raise ValueError(f"Rod point {self.point!r}: expected one of "
                             f"{list(IMPLANT_POINTS)}")
        if not self.diameter > 0 or not self.head_offset >= 0:
            raise ValueError(f"Rod: diameter {self.diameter!r} must be > 0 m and head_offset "
                             f"{self.head_offset!r} >= 0 m")
        rod_material(self.material)
        object.__setattr__(self, "levels", tuple(self.levels))
        object.__setattr__(self, "name", self.name or f"{self.side} rod")


def _shape_poses(chain: SpatialChain, shape) -> np.ndarray:
    if shape is None:
        return np.asarray(chain.initial_state()[0])
    if isinstance(shape, SpatialChain):
        if shape.body_names != chain.body_names:
            raise ValueError("instrument: shape's vertebrae differ from the chain's: "
                             f"{list(shape.body_names)} against {list(chain.body_names)}")
        return np.asarray(shape.initial_state()[0])
    poses = np.asarray(shape, dtype=float)
    if poses.shape != (chain.n_dof,):
        raise ValueError(f"instrument: shape must be a SpatialChain or {chain.n_dof} pose "
                         f"coordinates, got shape {poses.shape}")
    return poses


def rod_links(chain: SpatialChain, rod: Rod, shape=None,
              geometry: SpineGeometry | None = None) -> tuple[ChainLink, ...]:
    """The segments of `rod` as `ChainLink`s of `chain`, one between each two consecutive
    `rod.levels`: a straight beam from clamp to clamp (the attachment point moved `head_offset`
    behind, along -e1), at rest when the vertebrae sit at the poses of `shape` (the rod's
    contour: a `SpatialChain` of the same vertebrae, e.g. the spine with its curve reduced, or
    `(6 n,)` poses; default `chain`'s own rest shape, a rod bent to fit the spine in situ).
    Levels must be free bodies of `chain`, in order bottom up, with Appendix B points;
    otherwise `ValueError` naming `levels[i]`."""
    geometry = liu_spine_geometry() if geometry is None else geometry
    target = _shape_poses(chain, shape).reshape(-1, 6)
    indices, clamps = [], []
    for i, level in enumerate(rod.levels):
        key = f"{rod.name} levels[{i}]"
        point = implant_point(level, rod.point, rod.side, geometry, key)
        index = chain.body_index(level, key)
        if indices and index <= indices[-1]:
            raise ValueError(f"{key} = {level!r} is not above {rod.levels[i - 1]!r} in the "
                             f"chain; list a rod's levels bottom up")
        indices.append(index)
        clamps.append(point + np.array([-rod.head_offset, 0.0, 0.0]))
    links = []
    for (a, b), (pa, pb), (la, lb) in zip(zip(indices, indices[1:]), zip(clamps, clamps[1:]),
                                          zip(rod.levels, rod.levels[1:])):
        ra, rb = (np.asarray(euler123_rotation(jnp.asarray(target[i, 3:]))) for i in (a, b))
        ga, gb = target[a, :3] + ra @ pa, target[b, :3] + rb @ pb
        length = float(np.linalg.norm(gb - ga))
        along = (gb - ga) / length
        front = ra[:, 0] + rb[:, 0]
        front = front - (front @ along) * along
        front /= np.linalg.norm(front)
        axes = np.column_stack([front, along, np.cross(front, along)])
        middle = 0.5 * (ga + gb)
        frames = [(r.T @ (middle - target[i, :3]), np.asarray(euler123_angles(r.T @ axes)))
                  for i, r in ((a, ra), (b, rb))]
        links.append(ChainLink(lower=a + 1, upper=b + 1,
                               element=rod_segment(*frames, length, rod.diameter, rod.material),
                               name=f"{rod.name} {lb}-{la}"))
    return tuple(links)


def instrument(chain: SpatialChain, rods, shape=None) -> SpatialChain:
    """`chain` with `rods` (`Rod`s) added as links (`rod_links`), all contoured to `shape`
    (default the chain's rest shape). The rods are at rest in `shape`, so where the chain's
    rest shape differs (a scoliotic spine and a straighter rod) they pre-stress it:
    `assemble_links` finds the posture the rods pull it into. Replaces no existing link."""
    if isinstance(rods, Rod):
        rods = (rods,)
    if not rods:
        raise ValueError("instrument: no rods given")
    names = [rod.name for rod in rods]
    if len(set(names)) != len(names):
        raise ValueError(f"instrument: rod names repeat ({names}); give each rod a name")
    geometry = liu_spine_geometry()
    links = sum((rod_links(chain, rod, shape, geometry) for rod in rods), ())
    return SpatialChain(base_pose=chain.base_pose, bodies=chain.bodies,
                        elements=chain.elements, loads=chain.loads, gravity=chain.gravity,
                        names=chain.names, links=chain.links + links)
