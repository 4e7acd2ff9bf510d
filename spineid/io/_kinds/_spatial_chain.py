"""The reader and writer of `kind = "spatial_chain"` model files: vertebrae in 3-D stacked on a
fixed base, each joined to the one below by a bushing (classic, spine or table), such as the
thoracolumbar spine of `datasets/thoracolumbar_spine.toml` (docs/formats/model-files.md).

Bodies are listed bottom up; joint `k` joins the body below (`bodies[k - 1]`, the base for
`k = 0`) to `bodies[k]`, and names both: a vertebra out of order, missing or unknown is an error
naming the key.
"""

import jax.numpy as jnp
import numpy as np

from ...elements._bushings import Bushing, TableBushing
from ...elements._load_laws import PiecewiseLinearLaw
from ...elements._parameters import Parameter
from ...models._spatial_chain import SpatialChain
from ...models._spatial_pair import SpatialBody
from .._toml import MISSING, simulation_settings
from ._shared import file_parameters, read_loads
from ._spatial_pair import read_bushing, spatial_body


def _name(check, table, key) -> str:
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        check.fail(f"{key}.name", "a body name such as \"L5\"", name)
    return name


def read_spatial_chain(document, check, folder) -> tuple[SpatialChain, tuple[Parameter, ...]]:
    """`(chain, parameters)` of a `spatial_chain` document (module docstring)."""
    check.keys(document, "", {"kind", "gravity", "base", "bodies", "joints", "loads",
                              "simulation"}, {"base", "bodies", "joints"})
    gravity = check.vector(document, "gravity", "gravity", 3, default=np.zeros(3))
    base_table = document["base"]
    check.keys(base_table, "base", {"name", "pose"}, {"name", "pose"})
    names = [_name(check, base_table, "base")]
    base_pose = check.vector(base_table, "pose", "base.pose", 6)
    if abs(np.cos(base_pose[4])) < 1e-3:
        check.fail("base.pose", "a pose away from a2 = +-90 degrees (the singularity of the "
                                "1-2-3 Euler angles)", base_pose.tolist())
    base = SpatialBody(mass=jnp.asarray(1.0), inertia=jnp.eye(3),
                       reference_pose=jnp.asarray(base_pose), fixed=True)
    bodies = []
    body_tables = check.tables(document, "bodies")
    if not body_tables:
        check.fail("bodies", "at least one body (a list of [[bodies]] tables)", [])
    for index, table in enumerate(body_tables):
        key = f"bodies[{index}]"
        name = _name(check, table, key)
        if name in names:
            check.fail(f"{key}.name", "a name no other body or the base has", name)
        names.append(name)
        if table.get("fixed", False):
            check.fail(f"{key}.fixed", "false (only the base of a chain is fixed)", True)
        body, _ = spatial_body({k: v for k, v in table.items() if k != "name"}, key, check)
        bodies.append(body)
    joint_tables = check.tables(document, "joints")
    elements, diagonal_only = [], set()
    below = [base] + bodies
    for index, joint in enumerate(joint_tables[:len(bodies)]):
        key = f"joints[{index}]"
        for side, expected in (("lower", names[index]), ("upper", names[index + 1])):
            given = joint.get(side, MISSING)
            if given == expected:
                continue
            if given is MISSING:
                where = "it names no body"
            elif given not in names:
                where = f"{given!r} is not a body of this file"
            elif given == names[0]:
                where = f"{given!r} is the base"
            else:
                where = f"{given!r} is bodies[{names.index(given) - 1}]"
            check.fail(f"{key}.{side}", f"{expected!r}: joint {index} joins {names[index]!r} "
                       f"(below) to {names[index + 1]!r}; list the bodies bottom up, one joint "
                       f"per body in the same order ({where})", given)
        elements.append(read_bushing(check, joint, key, below[index], bodies[index],
                                     (names[index], names[index + 1]), diagonal_only,
                                     extra_keys=("lower", "upper")))
    if len(joint_tables) != len(bodies):
        check.fail("joints", f"{len(bodies)} joints, one per body in the order of [[bodies]] "
                             f"(joint k joins the body below to bodies[k])", len(joint_tables))
    if "simulation" in document:
        simulation_settings(document, check.source)
    chain = SpatialChain(base_pose=jnp.asarray(base_pose), bodies=tuple(bodies),
                         elements=tuple(elements), loads=(), gravity=jnp.asarray(gravity),
                         names=tuple(names))
    loads = read_loads(document, check, folder, chain.load_components)
    if loads:
        chain = SpatialChain(base_pose=chain.base_pose, bodies=chain.bodies,
                             elements=chain.elements, loads=loads, gravity=chain.gravity,
                             names=chain.names)
    return chain, file_parameters(chain, diagonal_only)


def _numbers(values) -> list:
    # Rounding residue of the frame algebra (|x| < 1e-14 m, rad) written as zero.
    values = np.asarray(values, dtype=float).ravel()
    return [float(v) for v in np.where(np.abs(values) < 1e-14, 0.0, values)]


def _law_table(law) -> dict:
    if not isinstance(law, PiecewiseLinearLaw):
        raise ValueError(f"chain_document: a {type(law).__name__} cannot be written yet "
                         "(piecewise-linear laws only)")
    table = {"kind": "piecewise_linear", "displacement": _numbers(law.displacement),
             "load": _numbers(law.load_values)}
    if float(law.smoothing) > 0:
        table["smoothing"] = float(law.smoothing)
    return table


def chain_document(chain: SpatialChain) -> dict:
    """The `spatial_chain` model-file document of `chain` (`dumps_toml` writes it): base,
    bodies and joints (table bushings with piecewise-linear laws, or classic and spine
    bushings), gravity. Loads are not written (give them in the file's `[[loads]]`)."""
    if chain.links:
        raise ValueError(f"chain_document: the chain has {len(chain.links)} links (implant rods "
                         "or other bushings spanning joints), which the spatial_chain file kind "
                         "cannot hold yet; write the spine without them and add them in Python "
                         "(spineid.instrument)")
    names = chain.body_names
    document = {"kind": "spatial_chain", "gravity": _numbers(chain.gravity),
                "base": {"name": names[0], "pose": _numbers(chain.base_pose)}, "bodies": [],
                "joints": []}
    for k, body in enumerate(chain.bodies):
        inertia = np.asarray(body.inertia)
        values = _numbers(np.diag(inertia))
        if np.any(inertia - np.diag(np.diag(inertia))):
            values += [float(inertia[0, 1]), float(inertia[0, 2]), float(inertia[1, 2])]
        document["bodies"].append({"name": names[k + 1], "mass": float(body.mass),
                                   "inertia": values, "pose": _numbers(body.reference_pose)})
    for k, element in enumerate(chain.elements):
        frames = {}
        for frame, body in (("frame1", names[k]), ("frame2", names[k + 1])):
            position, orientation = getattr(element, frame)
            frames[frame] = {"body": body, "position": _numbers(position),
                             "orientation": _numbers(orientation)}
        joint = {"lower": names[k], "upper": names[k + 1]}
        if isinstance(element, TableBushing):
            joint.update(kind="table", **frames, laws=[_law_table(law) for law in element.laws],
                         damping=_numbers(element.damping))
        elif isinstance(element, Bushing):
            joint.update(kind=element.kind, **frames,
                         stiffness=[_numbers(row) for row in element.stiffness_matrix],
                         damping=[_numbers(row) for row in element.damping_matrix])
        else:
            raise ValueError(f"chain_document: joint {k} is a {type(element).__name__}; "
                             "expected a bushing")
        document["joints"].append(joint)
    return document
