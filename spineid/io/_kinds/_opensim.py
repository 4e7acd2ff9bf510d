"""The reader of `kind = "opensim"` model files: an OpenSim model (`.osim`, read by
`spineid.read_osim`) with what the TOML changes: locks, start values and speeds, gravity and
the bushings' properties (docs/formats/opensim.md). A `.osim` given where a model file is
expected is read as such a document with nothing changed.

Keys: `file` (the `.osim`, relative to the TOML's folder), `locked` and `unlocked` (lists of
coordinate names), `[initial]` and `[initial_speeds]` (coordinate name -> rad or m, rad/s or
m/s: OpenSim's speeds, an angular velocity for ball and free joints), `gravity` (m/s^2, 3
numbers), `[simulation]`, and one table per `BushingForce` named after it, with any of
`rotational_stiffness`, `translational_stiffness`, `rotational_damping`,
`translational_damping` (3 numbers each, SI), or, for an `ExpressionBasedBushingForce`,
`coefficients` (its terms' coefficients, in the order of `ExpressionBushing.terms`),
`rotational_damping` and `translational_damping`; one per `CoordinateLimitForce` named after
it, with any of `upper_stiffness`, `upper_limit`, `lower_stiffness`, `lower_limit`,
`transition`, `damping` (numbers in SI: N m/rad, rad, N m s/rad for a rotational coordinate,
N/m, m, N s/m for a translational one; the `.osim` holds degrees); one per body named after
it, with any of `mass` (kg, > 0), `mass_center` (m, 3 numbers, body axes) and `inertia` (kg
m^2, 6 numbers `Ixx Iyy Izz Ixy Ixz Iyz` about the centre of mass, a rigid body's: principal
moments >= 0, none above the sum of the other two), as OpenSim's `<Body>` holds them (a body
and a force of one name share a table). The parameters are the bushings' properties, named
`<bushing>.<property>[i]` in the groups `bushings.<property>`, the limits',
`<limit>.<property>` in `coordinate_limits.<property>`, and the bodies', `<body>.mass`,
`<body>.mass_center[i]` and `<body>.inertia[i]` in `bodies.mass`, `bodies.mass_center` and
`bodies.inertia`, and the start's, `initial.<coordinate>` and `initial_speeds.<coordinate>`
(the free coordinates' but a ball or free joint's rotations) in `initial` and
`initial_speeds`. `[lab_frame]`, for a model with markers: the frame its marker data are in,
`translation` (m) and `rotation` (rad, 1-2-3 Euler angles), `x_lab = translation + R x_ground`
(`R` of the angles, `R_x R_y R_z`; default zeros, the data in ground), parameters
`lab_frame.translation[i]` and `lab_frame.rotation[i]` in `lab_frame`. `[[loads]]`
add constant loads from t = 0 (as `PrescribedForce`s of constants, beside the file's own):
`body` (a body's name), `force` (N), `torque` (N m), `point` (m, in the body; default its
origin), `in_ground` (the force and torque in ground axes, default true; else the body's),
`name` (for messages).
"""

import dataclasses
import difflib
import pathlib

import equinox as eqx
import numpy as np

from ..._arrays import floats
from ...elements._parameters import declared_parameters
from ...kinematics._functions import coordinate_function
from ...models._multibody import coordinate_rates, coordinate_speeds
from ...models._tree_parts import LIMIT_PROPERTIES, PrescribedLoad, component_label
from .._osim import NONNEGATIVE, read_osim, rigid_inertia
from .._toml import DocumentChecker

_KEYS = {"kind", "file", "locked", "unlocked", "initial", "initial_speeds", "gravity",
         "simulation", "loads", "lab_frame"}
_LOAD_KEYS = {"name", "body", "force", "point", "torque", "in_ground"}


def opensim_document(path: pathlib.Path) -> dict:
    """The model document of a `.osim` file read as a model file: the file, nothing changed."""
    return {"kind": "opensim", "file": path.name}


def _names(check, document, key, known):
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        check.fail(key, "a list of coordinate names", value)
    for name in value:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=3)
            check.fail(key, f"coordinates of the model ({', '.join(near) or ', '.join(known)}"
                       f"{' are near' if near else ''})", name)
    return value


def _coordinate_table(check, document, key, model):
    table = document.get(key, {})
    check.keys(table, key, set(model.coordinate_names))
    return {name: check.number(table, name, f"{key}.{name}") for name in table}


def _loads(check, document, model) -> tuple[PrescribedLoad, ...]:
    # `[[loads]]`: constant forces and torques on bodies, as PrescribedForces of constants.
    loads = document.get("loads", [])
    if not isinstance(loads, list) or not all(isinstance(load, dict) for load in loads):
        check.fail("loads", "a list of tables ([[loads]])", loads)
    out = []
    for k, load in enumerate(loads):
        where = f"loads[{k}]"
        check.keys(load, where, _LOAD_KEYS, {"body"})
        body = load["body"]
        if body not in model.body_names:
            near = difflib.get_close_matches(str(body), model.body_names, n=3)
            check.fail(f"{where}.body", "a body of the model (" + (
                f"near: {', '.join(near)}" if near else ', '.join(model.body_names)) + ")",
                body)
        vectors = {key: check.vector(load, key, f"{where}.{key}", 3, default=np.zeros(3))
                   for key in ("force", "point", "torque")}
        in_ground = check.boolean(load, "in_ground", f"{where}.in_ground", default=True)
        constants = {key: tuple(coordinate_function("Constant", value=v) for v in vector)
                     for key, vector in vectors.items()}
        out.append(PrescribedLoad(
            str(load.get("name", where)), model.body_names.index(body),
            (floats(np.zeros(3)), floats(np.eye(3))), constants["force"],
            constants["point"], constants["torque"], bool(in_ground), False))
    return tuple(out)


def read_opensim(document: dict, check: DocumentChecker, folder: pathlib.Path):
    """Build the model of a `kind = "opensim"` document (module docstring); returns the model,
    its parameters and the document completed with every bushing's, limit's and body's
    table (the file's values where the TOML gives none), so that fitted values can be written
    back by name."""
    bushing_names = [key for key, value in document.items()
                     if key not in _KEYS and isinstance(value, dict)]
    check.keys({k: v for k, v in document.items() if k not in bushing_names}, "", _KEYS,
               {"kind", "file"})
    if not isinstance(document["file"], str) or not document["file"]:
        check.fail("file", "the path of an OpenSim model (.osim)", document["file"])
    if not (folder / document["file"]).exists():
        check.fail("file", f"an existing OpenSim model (.osim; relative to {folder})",
                   document["file"])
    model = read_osim(folder / document["file"])
    names = model.coordinate_names
    locked = set(_names(check, document, "locked", names))
    unlocked = set(_names(check, document, "unlocked", names))
    both = sorted(locked & unlocked)
    if both:
        check.fail("unlocked", "coordinates not also in locked", both)
    dependent = {coupler.dependent for coupler in model.couplers}
    for key, listed in (("locked", locked), ("unlocked", unlocked)):
        coupled = sorted(names[i] for i in dependent if names[i] in listed)
        if coupled:
            check.fail(key, "independent coordinates (these follow others through "
                       "CoordinateCouplerConstraints)", coupled)
    free = tuple(i for i, name in enumerate(names) if i not in dependent
                 and name not in locked and (i in model.free or name in unlocked))
    values = np.array(model.default_values)
    # (the file's speeds, OpenSim's kind: a ball or free joint's are an angular velocity)
    speeds = np.array(coordinate_speeds(model.joints, model.default_values,
                                        model.default_speeds))
    for key, table in (("initial", values), ("initial_speeds", speeds)):
        for name, value in _coordinate_table(check, document, key, model).items():
            index = names.index(name)
            if index in dependent:
                check.fail(f"{key}.{name}", "a value of an independent coordinate (this one "
                           "follows another through a CoordinateCouplerConstraint)", value)
            if key == "initial_speeds" and index not in free and value != 0.0:
                check.fail(f"{key}.{name}", "0 for a locked coordinate", value)
            table[index] = value
    gravity = check.vector(document, "gravity", "gravity", 3, default=model.gravity)
    model = dataclasses.replace(
        model, free=free, default_values=floats(values), gravity=floats(gravity),
        default_speeds=coordinate_rates(model.joints, floats(values), floats(speeds)))
    model = dataclasses.replace(model, prescribed=model.prescribed + _loads(check, document,
                                                                            model))
    model = _lab_frame(check, document, model)
    labels = [bushing.label for bushing in model.elements]
    limit_labels = [component_label(limit.name) for limit in model.limits]
    body_labels = [component_label(body) for body in model.body_names]
    # (the start, as parameters `initial.<coordinate>` and `initial_speeds.<coordinate>` set)
    # (the free coordinates', and any other the document gives: a locked one's start)
    started = {i for i in free} | {names.index(name) for key in ("initial", "initial_speeds")
                                   for name in document.get(key, {})}
    completed = dict(document, initial={names[i]: float(values[i]) for i in sorted(started)},
                     initial_speeds={names[i]: float(speeds[i]) for i in sorted(started)})
    if model.markers:  # (the frame of marker data, as parameters `lab_frame.*` set)
        completed["lab_frame"] = {"translation": np.asarray(model.lab_translation).tolist(),
                                  "rotation": np.asarray(model.lab_rotation).tolist()}
    named = labels + limit_labels + body_labels
    for name in bushing_names:
        if name not in named:
            near = difflib.get_close_matches(name, named + sorted(_KEYS), n=3)
            check.fail(name, "a table named after a BushingForce, CoordinateLimitForce or "
                       "body of the model (" + (f"near: {', '.join(near)}" if near else
                                                f"it has {', '.join(named)}") + ")", name)
    model, bodies = _body_tables(check, document, model, body_labels,
                                 set(labels) | set(limit_labels))
    for k, label in enumerate(labels):
        table = _force_table(document, label, bodies)
        bushing = model.elements[k]
        # (a BushingForce's four properties; an ExpressionBasedBushingForce's coefficients,
        # in the order of its `terms`, and dampings)
        fields = {f.field: f.lower for f in bushing.parameter_fields()}
        check.keys(table, label, set(fields))
        for prop, lower in fields.items():
            if prop in table:
                size = int(np.size(getattr(bushing, prop)))
                vector = check.vector(table, prop, f"{label}.{prop}", size)
                if lower == 0.0 and np.any(vector < 0):
                    check.fail(f"{label}.{prop}", NONNEGATIVE, table[prop])
                bushing = eqx.tree_at(lambda b, p=prop: getattr(b, p), bushing, floats(vector))
        model = eqx.tree_at(lambda m, i=k: m.elements[i], model, bushing)
        completed[label] = {prop: np.asarray(getattr(bushing, prop)).tolist()
                            for prop in fields}
    for k, label in enumerate(limit_labels):
        model, completed[label] = _limit_table(check, _force_table(document, label, bodies),
                                               label, model, k)
    for label, table in bodies.items():  # (beside a force's properties where it has its name)
        completed[label] = dict(completed.get(label, {}), **table)
    return model, declared_parameters(model), completed


_BODY_KEYS = ("mass", "mass_center", "inertia")
INERTIA = ("a rigid body's inertia, 6 numbers Ixx Iyy Izz Ixy Ixz Iyz (kg m^2): principal "
           "moments >= 0, none above the sum of the other two")


def _lab_frame(check, document, model):
    # `[lab_frame]`: the frame marker data are in (`translation`, m, and `rotation`, rad, 1-2-3
    # Euler angles: `lab_positions`), for a model with markers.
    table = document.get("lab_frame", {})
    if not isinstance(table, dict):
        check.fail("lab_frame", "a table with translation and rotation", table)
    check.keys(table, "lab_frame", {"translation", "rotation"})
    if table and not model.markers:
        check.fail("lab_frame", "no table (the model has no markers, an OpenSim <MarkerSet>, "
                   "whose data it would place)", table)
    return dataclasses.replace(model, **{
        f"lab_{key}": floats(check.vector(table, key, f"lab_frame.{key}", 3,
                                          default=np.zeros(3)))
        for key in ("translation", "rotation")})


def _force_table(document, label, bodies) -> dict:
    # A force's table, less the keys of a body of the same name (`bodies`, by label).
    return {key: value for key, value in document.get(label, {}).items()
            if not (key in _BODY_KEYS and label in bodies)}


def _body_tables(check, document, model, body_labels, forces):
    # The bodies' tables: `mass` (kg, > 0), `mass_center` (m, 3) and `inertia` (kg m^2, 6) of
    # each body whose table gives them, set in `model`; returns the model and every body's
    # three by its label (for the completed document). A table of a body that is no force's
    # (`forces`: their labels) holds nothing else.
    masses, centres = np.array(model.masses), np.array(model.mass_centers)
    inertias = np.array(model.inertia_entries)
    for k, label in enumerate(body_labels):
        table = document.get(label, {})
        if label not in forces:
            check.keys(table, label, set(_BODY_KEYS))
        if "mass" in table:
            masses[k] = check.number(table, "mass", f"{label}.mass", positive=True)
        if "mass_center" in table:
            centres[k] = check.vector(table, "mass_center", f"{label}.mass_center", 3)
        if "inertia" in table:
            given = check.vector(table, "inertia", f"{label}.inertia", 6)
            # (checked where it is not the file's own: OpenSim only warns about a file's)
            if not np.array_equal(given, inertias[k]) and not rigid_inertia(given):
                check.fail(f"{label}.inertia", INERTIA, table["inertia"])
            inertias[k] = given
    model = dataclasses.replace(model, masses=floats(masses), mass_centers=floats(centres),
                                inertia_entries=floats(inertias))
    return model, {label: {"mass": float(masses[k]), "mass_center": centres[k].tolist(),
                           "inertia": inertias[k].tolist()}
                   for k, label in enumerate(body_labels)}


def _limit_table(check, table, label, model, k):
    # A CoordinateLimitForce's table: any of its six properties (SI: rad or m, N m/rad or
    # N/m, N m s/rad or N s/m) set in limit `k` of `model`; returns the model and the table
    # completed with every property.
    check.keys(table, label, set(LIMIT_PROPERTIES))
    limit = model.limits[k]
    for prop, (field, _, lower) in LIMIT_PROPERTIES.items():
        if prop in table:
            # (OpenSim's own rule: stiffnesses and transition > 0, damping >= 0)
            value = check.number(table, prop, f"{label}.{prop}",
                                 positive=lower == 0.0 and prop != "damping",
                                 minimum=0.0 if prop == "damping" else None)
            limit = eqx.tree_at(lambda m, f=field: getattr(m, f), limit, floats(value))
    model = eqx.tree_at(lambda m: m.limits[k], model, limit)
    return model, {prop: float(getattr(limit, field))
                   for prop, (field, _, _) in LIMIT_PROPERTIES.items()}

