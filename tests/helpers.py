"""Shared model builders for the tests: small documents in the file-contract schema, and the
Newton-Euler equations of a free body as an oracle."""

import copy
import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import spineid
from spineid import e_W, euler123_rotation

BASE = {
    "kind": "planar_pair",
    "lower": {"fixed": True, "pose": [0.0, 0.0, 0.0]},
    "upper": {"mass": 0.5, "inertia": 1.2e-3, "pose": [0.0, 0.03, 0.0]},
}

VECTOR_SPRINGS = [
    {"kind": "vector", "point": [x, 0.012], "stiffness": k, "damping": c}
    for x, k, c in [(-0.02, 2000.0, 1.0), (-0.005, 1500.0, 2.0), (0.01, 1000.0, 0.5),
                    (0.02, 2500.0, 1.5)]
]

AXIAL_SPRINGS = [
    {"kind": "axial", "lower_point": [-0.02, 0.010], "upper_point": [-0.016, 0.022],
     "stiffness": 27000.0, "damping": 40.0},
    {"kind": "axial", "lower_point": [0.018, 0.010], "upper_point": [0.02, 0.021],
     "stiffness": 15000.0, "damping": 25.0},
    {"kind": "axial", "lower_point": [0.0, 0.012], "upper_point": [0.006, 0.020],
     "stiffness": 9000.0, "damping": 10.0},
]

TORSION = [{"stiffness": 6.0, "damping": 0.004}]

LOADS = [
    {"component": "Fx", "amplitude": 6.0, "frequency": 4.0, "phase": 0.3},
    {"component": "Fy", "amplitude": 4.0, "frequency": 7.0, "phase": 0.0},
    {"component": "Mz", "amplitude": 0.08, "frequency": 5.0, "phase": 1.0},
]


def document(*, springs=(), torsion=(), loads=(), lower_free=False, gravity=None,
             initial_pose=None, upper_pose=None, undamped=False):
    """A planar-pair model document with the chosen elements."""
    doc = copy.deepcopy(BASE)
    if lower_free:
        doc["lower"] = {"fixed": False, "mass": 0.8, "inertia": 2.0e-3,
                        "pose": [0.001, -0.002, 0.05]}
    if upper_pose is not None:
        doc["upper"]["pose"] = list(upper_pose)
    if initial_pose is not None:
        doc["upper"]["initial_pose"] = list(initial_pose)
    doc["springs"] = copy.deepcopy(list(springs))
    doc["torsion"] = copy.deepcopy(list(torsion))
    if undamped:
        for element in doc["springs"] + doc["torsion"]:
            element["damping"] = 0.0
    doc["loads"] = copy.deepcopy(list(loads))
    if gravity is not None:
        doc["gravity"] = list(gravity)
    return doc


def noisy_pair_script(free: list[str]) -> str:
    """Python source, for a test's fresh process, that builds `problem`: a `FitProblem` of the
    bundled 4-axial-spring pair freeing `free`, on 0.2 s of its simulation with seeded noise."""
    return f"""
import numpy as np
import spineid
model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
ts = np.linspace(0.0, 0.2, 101)
clean = np.array([model_file.model.observe(q)
                  for q in spineid.simulate(model_file.model, ts).q])
data = clean + np.random.default_rng(0).normal(size=clean.shape) * [5e-6, 5e-6, 1.7e-4]
problem = spineid.FitProblem(model_file, spineid.Measurement(ts, data, ("x", "y", "theta")),
                             {free!r}, {{"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}})
"""


def model(**kwargs) -> spineid.PlanarPair:
    return spineid.model_from_document(document(**kwargs))


# Every kind of joint element, alone and together; tests parametrise over these.
ELEMENT_SETS = {
    "vector": dict(springs=VECTOR_SPRINGS),
    "axial": dict(springs=AXIAL_SPRINGS),
    "mixed": dict(springs=VECTOR_SPRINGS[:2] + AXIAL_SPRINGS, torsion=TORSION),
}

# Christophy et al. 2013 eq 24 (the package's transcription, `spineid.K_F_E`), nested lists.
K_F_E = spineid.K_F_E.tolist()


def newton_euler_accelerations(model, q, qdot, t, bushing_load):
    """Pose accelerations of a spatial pair's upper body by Newton-Euler: `m x'' = F`,
    `I w' + w x I w = M` (body axes), then `a''` from `w = eW(a) a'`. `bushing_load(bushing,
    lower_pose, q, qdot)` gives each bushing's `(moment, force)` on the upper body at frame 2's
    origin (ground axes), by whatever explicit path the test checks."""
    load = model.applied_load(t)
    force = load[:3] + model.upper.mass * model.gravity
    moment = load[3:]
    lower = model.lower.reference_pose
    for bushing in model.elements:
        m2, f2 = bushing_load(bushing, lower, q, qdot)
        arm = bushing.frames(lower, q)[3] - q[:3]
        force = force + f2
        moment = moment + m2 + jnp.cross(arm, f2)
    rotation = euler123_rotation(q[3:])
    spin = e_W(q[3:]) @ qdot[3:]
    inertia = model.upper.inertia
    spin_rate = jnp.linalg.solve(inertia, rotation.T @ moment - jnp.cross(spin, inertia @ spin))
    # w' = eW a'' + (d eW/dt) a'
    _, ew_rate = jax.jvp(lambda a: e_W(a) @ qdot[3:], (q[3:],), (qdot[3:],))
    angles = jnp.linalg.solve(e_W(q[3:]), spin_rate - ew_rate)
    return jnp.concatenate([force / model.upper.mass, angles])


def random_spatial_states(reference_pose, rng, n, angle):
    """`n` states `(q, qdot)` of a spatial pair's upper body drawn from `rng`: translations
    within 2 mm and rotations within `angle` (rad) of `reference_pose`, rates within 0.5."""
    for _ in range(n):
        q = reference_pose + jnp.asarray(
            np.concatenate([rng.uniform(-2e-3, 2e-3, 3), rng.uniform(-angle, angle, 3)]))
        yield q, jnp.asarray(rng.uniform(-0.5, 0.5, 6))


@dataclasses.dataclass(frozen=True)
class ModelKind:
    """A small instance of one model kind, for the properties every kind must have.

    `document`: a model file document of the kind, short enough for the suite; `stiffness`: the
    name of a stiffness parameter its data determine; `conservative(document)`: the same model
    without damping and loads, moved by gravity alone, so that `T + U` stays constant."""

    document: dict
    stiffness: str
    conservative: Callable[[dict], dict]


def _unloaded(document: dict) -> dict:
    # Loads of zero amplitude: the model keeps its structure (one compiled simulation serves
    # both), but nothing is applied.
    document = copy.deepcopy(document)
    for load in document.get("loads", []):
        load["amplitude"] = 0.0
    return document


def _planar_conservative(document: dict) -> dict:
    conservative = _unloaded(document)
    for table in conservative.get("springs", []) + conservative.get("torsion", []):
        table["damping"] = 0.0
    conservative["gravity"] = [0.0, -9.81]
    return conservative


def _spatial_conservative(document: dict) -> dict:
    # Pairs' bushings and chains' joints alike.
    conservative = _unloaded(document)
    for bushing in conservative.get("bushings", []) + conservative.get("joints", []):
        bushing["damping"] = [0.0] * 6
    conservative["gravity"] = [0.0, -9.81, 0.0]
    return conservative


def _head_neck_conservative(document: dict) -> dict:
    conservative = copy.deepcopy(document)
    conservative["pulse"]["peak"] = 0.0  # the base stays where it is
    for key in ("anterior_damping", "posterior_damping"):
        conservative["ligaments"][key] = 0.0
    conservative["joints"]["damping"] = 0.0
    return conservative


def _short(document: dict, t_end: float, n_samples: int) -> dict:
    document = copy.deepcopy(document)
    document["simulation"] = {"t_end": t_end, "n_samples": n_samples}
    return document


def _small_head_neck() -> dict:
    # Two vertebrae and the head of the bundled chain (C2, C1, head) on its pulse.
    document = spineid.io.read_toml(spineid.dataset_path("head_neck.toml"))
    geometry = document["geometry"]
    for key in ("masses", "tilt_deg", "bodies"):
        geometry[key] = geometry[key][-3:]
    for key in ("body_depth", "body_height", "spinous_reach", "disc_height"):
        geometry[key] = geometry[key][-2:]
    return _short(document, 0.12, 61)


def _bundled(name: str) -> dict:
    return spineid.io.read_toml(spineid.dataset_path(name))


def _small_spine() -> dict:
    # L5 and L4 of the bundled thoracolumbar spine on its sacrum, shaken at L4.
    document = _bundled("thoracolumbar_spine.toml")
    document["bodies"] = document["bodies"][:2]
    document["joints"] = document["joints"][:2]
    document["loads"] = [{"component": "Mz_L4", "amplitude": 3.0, "frequency": 20.0},
                         {"component": "Fx_L4", "amplitude": 40.0, "frequency": 30.0}]
    return _short(document, 0.05, 51)


def _small_neck() -> dict:
    # The bundled OpenSim neck (three levels) with C6's flexion free only (C7's bending
    # coupled to its locked flexion), swinging under gravity.
    free = {"C6_flexion"}
    coordinates = [f"{level}_{motion}" for level in ("C7", "C6", "C5")
                   for motion in ("flexion", "bending", "rotation")]
    locked = [name for name in coordinates if name not in free and name != "C7_bending"]
    return {"kind": "opensim", "file": str(spineid.dataset_path("neck_bushings.osim")),
            "locked": locked, "simulation": {"t_end": 0.15, "n_samples": 31}}


def _opensim_conservative(document: dict) -> dict:
    conservative = copy.deepcopy(document)
    for bushing in ("T1_C7_bushing", "C7_C6_bushing", "C6_C5_bushing"):
        conservative[bushing] = {"rotational_damping": [0.0] * 3,
                                 "translational_damping": [0.0] * 3}
    return conservative


MODEL_KINDS = {
    "planar_pair": ModelKind(
        _short(document(springs=AXIAL_SPRINGS[:2], torsion=TORSION, loads=LOADS), 0.2, 101),
        "springs[0].stiffness", _planar_conservative),
    "pinned_pair": ModelKind(_short(_bundled("pinned_pair.toml"), 0.2, 101),
                             "torsion[0].stiffness", _planar_conservative),
    "spatial_pair": ModelKind(_short(_bundled("spatial_pair.toml"), 0.15, 151),
                              "bushings[0].stiffness[5][5]", _spatial_conservative),
    "head_neck": ModelKind(_small_head_neck(), "joints.stiffness", _head_neck_conservative),
    "spatial_chain": ModelKind(_small_spine(), "joints[1].laws[0].load[1]",
                               _spatial_conservative),
    "opensim": ModelKind(_small_neck(), "C7_C6_bushing.rotational_stiffness[2]",
                         _opensim_conservative),
}
"""Every built-in model kind (`spineid.model_kinds()`), a small instance of each."""


# Every solver object, with its default options (and the wrappers around spineid's
# Levenberg-Marquardt): the solver-interface tests run over this list.
SOLVERS = {
    "lm": spineid.LevenbergMarquardt(),
    "optimistix-lm": spineid.OptimistixLevenbergMarquardt(),
    "jaxopt-lm": spineid.JaxoptLevenbergMarquardt(),
    "adam": spineid.Adam(),
    "lbfgs": spineid.LBFGS(),
    "shooting": spineid.MultipleShooting(),
    "multistart": spineid.MultiStart(n=2),
    "multistart-shooting": spineid.MultiStart(spineid.MultipleShooting(), n=2),
    "varpro": spineid.VariableProjection(),
    "auto": spineid.Auto(),
}
