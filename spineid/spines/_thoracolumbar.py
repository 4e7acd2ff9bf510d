"""The thoracolumbar spine of Liu 2001, chapter 4: seventeen vertebrae T1-L5 on a fixed sacrum,
placed and oriented from the thesis' node tables, joined by table bushings whose moment-rotation
laws follow published ranges of motion (datasets/thoracolumbar/README.md).

Axes. Liu's Appendix A tables use x lateral (left, if right-handed), y posterior and z superior
(datasets/liu2001/TRANSCRIPTION.md); spineid uses e1 anterior, e2 superior, e3 right
(Christophy et al. 2013). A point `p` of the tables is `M p` in spineid with the proper rotation
`M` (`THESIS_TO_SPINEID`): e1 = -y, e2 = z, e3 = -x. A body's axes follow the same map, so its
flexion-extension turns about e3 (extension positive), lateral bending about e1 (to the right
positive) and axial rotation about e2.

Body frames. Each vertebra's local system (Appendix A "local" columns, origin at node 1, the
anterior mid-height point of the body) is placed by the least-squares rigid fit of its local
onto its global node coordinates (Kabsch), leaving out nodes 13/14 (placed at the facet joint,
not rotated from their local columns; TRANSCRIPTION.md item 6) and then, one at a time, any node
more than 1 mm off the fit (the printed typos: L4 nodes 5-10, L3 node 2, L1 node 4, T10 node 12,
T6 node 2). The fitted sagittal angles agree with Table 4-1 to 0.1 degree except at L5, whose
nodes are rotated by +8 degrees where Table 4-1 prints -8 (item 7): the model follows the nodes.
The frames are then made exactly mid-sagittal (rotation about the lateral axis only, centre on
the mid-plane): the fits of node sets left asymmetric by a dropped typo lean up to 0.13 mm and
1e-4 rad out of the plane, enough to tip a whole-spine test off its symmetric path.
The body's centre of mass is the centre of its vertebral body (half its depth behind node 1).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ..elements._bushings import TableBushing
from ..elements._load_laws import PiecewiseLinearLaw
from ..io._datasets import (
    christophy_stiffness, dataset_path, liu_l5_s1_phases, liu_scoliosis_curve, liu_vertebra_nodes,
)
from ..io._tables import read_table
from ..kinematics._markers import rigid_poses
from ..kinematics._rotations import axial, axis_rotation, euler123_angles
from ..models._spatial_chain import SpatialChain
from ..models._spatial_pair import SpatialBody


THESIS_TO_SPINEID = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
"""`p_spineid = M p_thesis`: Liu's (x left, y posterior, z superior) to spineid's (e1 anterior,
e2 superior, e3 right); a proper rotation."""

TEST_MOMENT = 10.0
"""N m: the moment at which every joint law reaches its range of motion (Liu's L5-S1 phases end
at +-10 N m, the moment of Panjabi et al. 1994)."""

NEUTRAL_ZONE_MOMENT = 0.25
"""N m carried at the edges of each neutral zone (Liu's has none; see the sources' README)."""

# Liu's L5-S1 phases as fractions of each side's range, with the moments they reach (N m):
# flexion side 1.7, 6.8, 8.5 degrees -> 0, 2.5, 10; extension side 1.7, 5.0, 5.8 -> 0, 5, 10.
_FLEXION_SHAPE = (np.array([1.7, 6.8, 8.5]) / 8.5,
                  np.array([NEUTRAL_ZONE_MOMENT, 0.25 * TEST_MOMENT, TEST_MOMENT]))
_EXTENSION_SHAPE = (np.array([1.7, 5.0, 5.8]) / 5.8,
                    np.array([NEUTRAL_ZONE_MOMENT, 0.5 * TEST_MOMENT, TEST_MOMENT]))
_FLEXION_SHARE = 8.5 / 14.3
_TRANSLATION_RANGE = 5e-3  # m: the linear translation laws are tabulated over +-5 mm

DE_LEVA_TRUNK_SHARE = 0.1596 + 0.1633
"""Upper plus middle trunk of de Leva 1996 (men), as a share of body mass."""


@dataclasses.dataclass(frozen=True)
class SpineGeometry:
    """Vertebral frames of Liu's thoracolumbar spine in spineid axes, bottom up (L5 ... T1).

    Fields: `names` (17), `centres` (`(17, 3)`, m: the centres of the vertebral bodies),
    `rotations` (`(17, 3, 3)`: body axes e1 anterior, e2 superior, e3 right in ground),
    `heights`, `disc_heights` (Table 4-1: vertebra and inferior disc heights, m), `depths` (m,
    the body's depth, node 3), `node_angles` and `table_angles` (rad: the sagittal angle of the
    node fit and of Table 4-1), `dropped` (per vertebra, the nodes left out of the fit besides
    13/14), `fit_rms` (m, per vertebra), `base_position` (m, `(3,)`: the sacrum's superior
    endplate centre), `disc_gaps` (m: the distance between each vertebra's inferior endplate
    centre and the superior endplate centre below, the base for L5).
    """

    names: tuple[str, ...]
    centres: np.ndarray
    rotations: np.ndarray
    heights: np.ndarray
    disc_heights: np.ndarray
    depths: np.ndarray
    node_angles: np.ndarray
    table_angles: np.ndarray
    dropped: tuple[tuple[int, ...], ...]
    fit_rms: np.ndarray
    base_position: np.ndarray
    disc_gaps: np.ndarray
    base_rotation: np.ndarray | None = None

    @property
    def base_axes(self) -> np.ndarray:
        """`(3, 3)`: the sacrum's axes in ground (`base_rotation`, by default L5's)."""
        return self.rotations[0] if self.base_rotation is None else self.base_rotation

    def disc_frames(self) -> tuple[np.ndarray, np.ndarray]:
        """`(centres (17, 3), rotations (17, 3, 3))`: each disc's centre, midway between the
        endplate centres above and below it, and its axes, halfway between the two
        vertebrae's (the frame of `thoracolumbar_spine`'s joints), bottom up from L5-S1."""
        rotations = np.concatenate([self.base_axes[None], self.rotations])
        ups = rotations[:, :, 1]
        heights = np.concatenate([[0.0], self.heights])
        lower = np.concatenate([[self.base_position], self.centres])
        top = lower[:-1] + heights[:-1, None] / 2 * ups[:-1]
        bottom = self.centres - self.heights[:, None] / 2 * ups[1:]
        return 0.5 * (top + bottom), np.array([_halfway(rotations[k], rotations[k + 1])
                                              for k in range(len(self.names))])


def liu_spine_geometry(tolerance: float = 1e-3) -> SpineGeometry:
    """The body frames of Liu's 17 vertebrae (module docstring): robust rigid fits of Appendix
    A's local onto global node coordinates, nodes farther than `tolerance` (m) from the fit left
    out one at a time. The sacrum (the fixed base) lies one L5 disc height (Table 4-1) below
    L5's inferior endplate, along L5's superior axis. Raises `ValueError` for a tolerance
    that is not positive or that leaves fewer than 4 nodes of a vertebra."""
    if not tolerance > 0:
        raise ValueError(f"tolerance {tolerance!r}: expected a positive distance in m")
    nodes, curve = liu_vertebra_nodes(), liu_scoliosis_curve()
    names = tuple(str(v) for v in curve["vertebra"])
    centres, rotations, depths, angles, dropped, rms = [], [], [], [], [], []
    for name in names:
        rows = nodes["vertebra"] == name
        local, seen, number = nodes["local"][rows], nodes["global"][rows], nodes["node"][rows]
        keep = ~np.isin(number, (13, 14))
        while True:
            fitted, shifts, _, _ = rigid_poses(local[keep], seen[keep][None])
            rotation, shift = fitted[0], shifts[0]
            miss = np.linalg.norm(seen - (local @ rotation.T + shift), axis=1)
            worst = int(np.argmax(np.where(keep, miss, -1.0)))
            if miss[worst] <= tolerance:
                break
            keep[worst] = False
            if keep.sum() < 4:
                raise ValueError(f"liu_spine_geometry: tolerance {tolerance:g} m leaves fewer "
                                 f"than 4 nodes of {name}")
        depth = float(local[number == 3][0, 1])
        centre_thesis = shift + rotation @ np.array([0.0, depth / 2, 0.0])
        rms.append(float(np.sqrt(np.mean(miss[keep] ** 2))))
        # Liu's vertebrae are mirror-symmetric about the mid-sagittal plane; a fit on a node
        # set left asymmetric by a dropped typo leans up to 0.13 mm and 1e-4 rad out of it.
        # The model keeps the fitted sagittal angle and centre and is exactly symmetric.
        angle = np.arctan2(rotation[2, 1], rotation[1, 1])
        cos, sin = np.cos(angle), np.sin(angle)
        rotation = np.array([[1.0, 0.0, 0.0], [0.0, cos, -sin], [0.0, sin, cos]])
        centre_thesis[0] = 0.0
        centres.append(THESIS_TO_SPINEID @ centre_thesis)
        rotations.append(THESIS_TO_SPINEID @ rotation @ THESIS_TO_SPINEID.T)
        angles.append(angle)
        dropped.append(tuple(int(n) for n in number[~keep & ~np.isin(number, (13, 14))]))
        depths.append(depth)
    centres, rotations = np.array(centres), np.array(rotations)
    heights = np.asarray(curve["vertebra_height"], float)
    discs = np.asarray(curve["inferior_disc_height"], float)
    up = rotations[:, :, 1]
    base = centres[0] - (heights[0] / 2 + discs[0]) * up[0]
    superior = np.vstack([base, centres[:-1] + heights[:-1, None] / 2 * up[:-1]])
    inferior = centres - heights[:, None] / 2 * up
    return SpineGeometry(
        names=names, centres=centres, rotations=rotations, heights=heights, disc_heights=discs,
        depths=np.array(depths), node_angles=np.array(angles),
        table_angles=np.asarray(curve["sagittal_orientation"], float), dropped=tuple(dropped),
        fit_rms=np.array(rms), base_position=base,
        disc_gaps=np.linalg.norm(inferior - superior, axis=1), base_rotation=rotations[0])


def bent_geometry(geometry: SpineGeometry, curve) -> SpineGeometry:
    """`geometry` with its joints turned by `curve` (`(17, 3)`, rad, bottom up from L5-S1:
    each joint's rotation vector in its disc frame's axes, `[lateral bending (e1, to the right
    positive), axial rotation (e2, to the left positive), flexion-extension (e3, extension
    positive)]`, the order of `DIRECTIONS`): joint by joint from the sacrum, every vertebra
    above the disc turned about the disc's centre. With `thoracolumbar_spine(curve=...)` the
    turned shape is the spine's rest shape (a structural curve such as a scoliosis); the
    sacrum stays where it is."""
    curve = np.asarray(curve, dtype=float)
    if curve.shape != (len(geometry.names), 3) or not np.all(np.isfinite(curve)):
        raise ValueError(f"curve: expected finite rotations (rad) of shape "
                         f"({len(geometry.names)}, 3), got shape {curve.shape}")
    centres, rotations = geometry.centres.copy(), geometry.rotations.copy()
    for k in range(len(geometry.names)):
        if not np.any(curve[k]):
            continue
        bent = dataclasses.replace(geometry, centres=centres, rotations=rotations)
        disc_centre, disc = (a[k] for a in bent.disc_frames())
        vector = disc @ curve[k]
        angle = float(np.linalg.norm(vector))
        turn = np.asarray(_axis_rotation(vector / angle, angle))
        centres = centres.copy()
        centres[k:] = disc_centre + (centres[k:] - disc_centre) @ turn.T
        rotations = rotations.copy()
        rotations[k:] = turn @ rotations[k:]
    return dataclasses.replace(geometry, centres=centres, rotations=rotations,
                               base_rotation=geometry.base_axes)


def sagittal_curve(geometry: SpineGeometry | None = None) -> np.ndarray:
    """`(17, 3)` (rad): Table 4-1's sagittal shape as joint rotations for `bent_geometry`: each
    joint's flexion-extension (third column, extension positive) is the sagittal angle of the
    vertebra above relative to the one below (as the node fit places them; L5-S1 zero, the
    sacrum sharing L5's orientation). `bent_geometry(g, -c * sagittal_curve(g))` straightens the
    spine's sagittal curves by the share `c`."""
    geometry = liu_spine_geometry() if geometry is None else geometry
    rotations = np.concatenate([geometry.base_axes[None], geometry.rotations])
    relative = np.einsum("kji,kjl->kil", rotations[:-1], rotations[1:])
    curve = np.zeros((len(geometry.names), 3))
    curve[:, 2] = np.arctan2(relative[:, 1, 0], relative[:, 0, 0])
    return curve


def spinal_curve(path=None, geometry: SpineGeometry | None = None) -> np.ndarray:
    """`(17, 3)` (rad) joint rotations for `bent_geometry` read from a CSV file (default the
    bundled `datasets/thoracolumbar/scoliotic_curve.csv`, a synthetic right thoracic curve of
    40 degrees Cobb): a `joint` column naming joints as `joint_names` does (`"T8-T9"`, upper
    first), and any of `lateral_bending_deg`, `axial_rotation_deg`, `flexion_extension_deg`
    (degrees, signs of `bent_geometry`); joints not listed keep zero. An unknown or repeated
    joint, or a file with none of the three columns, is refused naming it."""
    geometry = liu_spine_geometry() if geometry is None else geometry
    path = dataset_path("thoracolumbar/scoliotic_curve.csv") if path is None else path
    columns = ("lateral_bending_deg", "axial_rotation_deg", "flexion_extension_deg")
    table = read_table(path, ("joint",), optional=columns, text=("joint",), others="ignore",
                       min_rows=1)
    if not any(c in table for c in columns):
        raise ValueError(f"{path}: expected at least one of the columns {list(columns)}")
    names = ("S1",) + geometry.names
    joints = [f"{names[k + 1]}-{names[k]}" for k in range(len(geometry.names))]
    curve = np.zeros((len(joints), 3))
    seen = set()
    for row, joint in enumerate(table["joint"]):
        if joint not in joints:
            raise ValueError(f"{path}: joint {str(joint)!r} (data row {row + 1}) is not a joint of "
                             f"the spine; expected one of {joints}")
        if joint in seen:
            raise ValueError(f"{path}: joint {str(joint)!r} is listed twice")
        seen.add(joint)
        for d, column in enumerate(columns):
            if column in table:
                curve[joints.index(joint), d] = np.radians(table[column][row])
    return curve


def _halfway(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    # The rotation halfway between two (the geodesic midpoint).
    relative = lower.T @ upper
    angle = np.arccos(np.clip((np.trace(relative) - 1) / 2, -1.0, 1.0))
    if angle < 1e-12:
        return lower
    axis = np.asarray(_axial(relative)) / np.sin(angle)
    return lower @ np.asarray(_axis_rotation(axis, angle / 2))


# (Jitted: the geometry calls them hundreds of times on numpy arrays, where each eager call
# dispatched its dozen operations one by one, about 5 ms, 3 s of a spine's construction.)
_axial, _axis_rotation = jax.jit(axial), jax.jit(axis_rotation)


def joint_ranges() -> dict[str, np.ndarray]:
    """`datasets/thoracolumbar/ranges_of_motion.csv`: White and Panjabi's representative ranges
    per joint (`joint` names such as `"L5-S1"`; `flexion_extension`, `lateral_bending`,
    `axial_rotation` in rad: both sides together for flexion-extension, one side for the
    others)."""
    table = read_table(dataset_path("thoracolumbar/ranges_of_motion.csv"), text=("joint",),
                       min_rows=1)
    return {"joint": np.array([str(j) for j in table["joint"]]),
            "flexion_extension": np.radians(np.asarray(table["flexion_extension_deg"], float)),
            "lateral_bending": np.radians(np.asarray(table["lateral_bending_one_side_deg"],
                                                     float)),
            "axial_rotation": np.radians(np.asarray(table["axial_rotation_one_side_deg"],
                                                    float))}


def rotation_law(negative: float, positive: float, negative_shape, positive_shape,
                 smoothing_share: float = 0.1) -> PiecewiseLinearLaw:
    """A moment-rotation law (rad to N m) reaching `-TEST_MOMENT` at `-negative` and
    `+TEST_MOMENT` at `positive` (rad, both > 0), each side shaped by `(angle fractions,
    moments)` (three nodes from the neutral zone's edge to the range's end); corners smoothed
    over `smoothing_share` of the shortest phase."""
    x = np.concatenate([-negative * negative_shape[0][::-1], positive * positive_shape[0]])
    y = np.concatenate([-negative_shape[1][::-1], positive_shape[1]])
    return PiecewiseLinearLaw(x, y, smoothing_share * np.min(np.diff(x)))


def joint_laws(joint: str, ranges: dict[str, np.ndarray]) -> tuple[PiecewiseLinearLaw, ...]:
    """The six laws `[tx, ty, tz, rx, ry, rz]` of one joint (datasets/thoracolumbar/README.md):
    linear translations (K_D^E of Christophy et al. 2013), lateral bending (rx) and axial
    rotation (ry) symmetric, flexion (rz < 0) and extension (rz > 0) from the joint's range,
    at L5-S1 Liu's phases."""
    if joint not in ranges["joint"]:
        raise ValueError(f"joint {joint!r}: no ranges of motion; expected one of "
                         f"{list(ranges['joint'])}")
    k = int(np.flatnonzero(ranges["joint"] == joint)[0])
    stiffness = np.diag(christophy_stiffness()["K_D_E"])
    laws = [PiecewiseLinearLaw([-_TRANSLATION_RANGE, _TRANSLATION_RANGE],
                               [-s * _TRANSLATION_RANGE, s * _TRANSLATION_RANGE])
            for s in stiffness[:3]]
    for direction in ("lateral_bending", "axial_rotation"):
        side = float(ranges[direction][k])
        laws.append(rotation_law(side, side, _FLEXION_SHAPE, _FLEXION_SHAPE))
    if joint == "L5-S1":
        phases = liu_l5_s1_phases()
        flexion, extension = float(phases["upper"][-1]), float(-phases["lower"][0])
    else:
        total = float(ranges["flexion_extension"][k])
        flexion, extension = _FLEXION_SHARE * total, (1 - _FLEXION_SHARE) * total
    laws.append(rotation_law(flexion, extension, _FLEXION_SHAPE, _EXTENSION_SHAPE))
    return tuple(laws)


def segment_masses(geometry: SpineGeometry, body_mass: float, trunk_share: float
                   ) -> np.ndarray:
    """Mass of each level (kg): `trunk_share * body_mass` shared in proportion to vertebra plus
    inferior disc height (datasets/thoracolumbar/README.md)."""
    heights = geometry.heights + geometry.disc_heights
    return trunk_share * body_mass * heights / heights.sum()


def thoracolumbar_spine(body_mass: float = 73.0, trunk_share: float = DE_LEVA_TRUNK_SHARE,
                        rotation_damping: float = 1.0, translation_damping: float = 2000.0,
                        gravity=(0.0, 0.0, 0.0), curve=None) -> SpatialChain:
    """Liu's thoracolumbar spine (chapter 4): L5 ... T1 on a fixed sacrum `"S1"`, each level
    joined to the one below by a `TableBushing` at the centre of the disc between them.

    **Arguments:** `body_mass` (kg) and `trunk_share` (of body mass, default de Leva's upper plus
    middle trunk) give the masses (`segment_masses`); `rotation_damping` (N m s/rad) and
    `translation_damping` (N s/m), the same at every level; `gravity` (m/s^2, ground axes, e2
    superior; default none, as in a flexibility test); `curve` (`(17, 3)`, rad: joint
    rotations that `bent_geometry` applies to Liu's shape, such as `spinal_curve()`'s
    scoliosis; the bent shape is the rest shape, every joint unloaded in it).

    **Returns:** a `SpatialChain` named `("S1", "L5", ..., "T1")`; joint `k` joins body `k - 1`
    (the sacrum for `k = 0`) to body `k`; its frames sit at the disc centre, midway between
    the two endplate centres, oriented halfway between the two vertebrae (so its rz is the
    joint's flexion-extension, rx its lateral bending, ry its axial rotation: module
    docstring). Laws from `joint_laws`.
    """
    if not body_mass > 0 or not 0 < trunk_share <= 1:
        raise ValueError(f"thoracolumbar_spine: body_mass {body_mass!r} must be > 0 kg and "
                         f"trunk_share {trunk_share!r} within (0, 1]")
    if rotation_damping < 0 or translation_damping < 0:
        raise ValueError("thoracolumbar_spine: damping must be >= 0")
    geometry = liu_spine_geometry()
    if curve is not None:
        geometry = bent_geometry(geometry, curve)
    masses = segment_masses(geometry, body_mass, trunk_share)
    ranges = joint_ranges()
    base_pose = np.concatenate([geometry.base_position,
                                np.asarray(euler123_angles(geometry.base_axes))])
    poses = [base_pose]
    bodies = []
    for k, name in enumerate(geometry.names):
        radius, height = geometry.depths[k] / 2, geometry.heights[k]
        lateral = masses[k] * (3 * radius**2 + height**2) / 12
        inertia = np.diag([lateral, masses[k] * radius**2 / 2, lateral])
        pose = np.concatenate([geometry.centres[k],
                               np.asarray(euler123_angles(geometry.rotations[k]))])
        poses.append(pose)
        bodies.append(SpatialBody(mass=jnp.asarray(masses[k]), inertia=jnp.asarray(inertia),
                                  reference_pose=jnp.asarray(pose)))
    rotations = np.vstack([geometry.base_axes[None], geometry.rotations])
    discs = geometry.disc_frames()
    damping = np.array([translation_damping] * 3 + [rotation_damping] * 3)
    elements = []
    names = ("S1",) + geometry.names
    for k in range(len(bodies)):
        lower, upper = poses[k], poses[k + 1]
        centre, disc = discs[0][k], discs[1][k]
        frames = [(rotations[i].T @ (centre - pose[:3]),
                   np.asarray(euler123_angles(rotations[i].T @ disc)))
                  for i, pose in ((k, lower), (k + 1, upper))]
        laws = joint_laws(f"{names[k + 1]}-{names[k]}", ranges)
        elements.append(TableBushing.create(frames[0], frames[1], laws, damping, lower, upper))
    return SpatialChain(base_pose=jnp.asarray(base_pose), bodies=tuple(bodies),
                        elements=tuple(elements), loads=(),
                        gravity=jnp.asarray(gravity, dtype=float), names=names)
