"""Model files (TOML) and trajectories (CSV), per the spineid file contract.

Every violation raises `ValueError` naming the file, the key or row, and what was expected.
"""

import copy
import csv
import dataclasses
import math
import os
import pathlib
import tomllib
import warnings
from typing import Any

import jax.numpy as jnp
import numpy as np

from ._loads import AbstractLoad, SinusoidalLoad, TabulatedLoad
from ._parameters import Parameter
from ._load_laws import (
    LAW_KINDS, MonotoneCubicLaw, PiecewiseLinearLaw, PolynomialLaw, TanCosLaw,
)
from ._planar_elements import AxialSprings, NonlinearTorsion, TorsionSpring, VectorSprings
from ._pinned_pair import PinnedPair
from ._planar_chain import HeadNeckChain, TriangularPulse, head_neck_geometry
from ._planar_pair import PlanarBody, PlanarPair
from ._spatial_elements import FacetContacts, SpatialLigaments
from ._spatial_pair import (
    Bushing, SPATIAL_LOAD_COMPONENTS, SpatialBody, SpatialPair, TableBushing, UPPER,
)

PLANAR_LOAD_COMPONENTS = ("Fx", "Fy", "Mz")
PLANAR_TRAJECTORY_COLUMNS = ("t", "x", "y", "theta")
_MISSING = object()


class _Checker:
    """Reads typed values out of a parsed TOML document, failing with the file and key."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, expected: str, got: Any = _MISSING) -> None:
        found = "it is missing" if got is _MISSING else f"got {got!r}"
        raise ValueError(f"{self.source}: {key}: expected {expected}, {found}")

    def keys(self, table: Any, key: str, allowed: set[str], required: set[str] = frozenset()):
        if not isinstance(table, dict):
            self.fail(key or "<top level>", "a table", table)
        for name in table:
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                self.fail(where, f"one of the known keys {sorted(allowed)} (unknown key)", name)
        for name in sorted(required):
            if name not in table:
                self.fail(f"{key}.{name}" if key else name, "a value")

    def number(self, table, name, key, *, minimum=None, positive=False, default=_MISSING):
        if name not in table:
            if default is _MISSING:
                self.fail(key, "a number")
            return default
        value = table[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, "a number", value)
        if not math.isfinite(value):
            self.fail(key, "a finite number", value)
        if positive and value <= 0:
            self.fail(key, "a number > 0", value)
        if minimum is not None and value < minimum:
            self.fail(key, f"a number >= {minimum}", value)
        return float(value)

    def integer(self, table, name, key, *, minimum, default=_MISSING):
        if name not in table:
            if default is _MISSING:
                self.fail(key, "an integer")
            return default
        value = table[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(key, f"an integer >= {minimum}", value)
        return value

    def vector(self, table, name, key, length, *, default=_MISSING):
        # length None: any non-empty list.
        expected = ("a non-empty list of numbers" if length is None
                    else f"a list of {length} numbers")
        if name not in table:
            if default is _MISSING:
                self.fail(key, expected)
            return np.asarray(default, dtype=float)
        value = table[name]
        if (
            not isinstance(value, list)
            or (len(value) == 0 if length is None else len(value) != length)
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)
        ):
            self.fail(key, expected, value)
        if not all(math.isfinite(v) for v in value):
            self.fail(key, "finite numbers", value)
        return np.asarray(value, dtype=float)

    def boolean(self, table, name, key, *, default):
        value = table.get(name, default)
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value

    def choice(self, table, name, key, choices):
        value = table.get(name, _MISSING)
        if value not in choices:
            self.fail(key, f"one of {list(choices)}", value)
        return value

    def tables(self, document, name):
        value = document.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail(name, f"an array of tables ([[{name}]])", value)
        return value


def read_toml(path: str | pathlib.Path) -> dict:
    """Parse a TOML file; a missing or malformed file raises `ValueError` naming it."""
    path = pathlib.Path(path)
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ValueError(f"{path}: model file not found") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """A validated model file: the model, its named parameters and the parsed document.

    Fields: `model` (e.g. a `PlanarPair`), `parameters` (every named `Parameter`, in file
    order), `document` (the parsed TOML, used to write fitted models back in the same schema),
    `source` (file name for messages) and `folder` (where relative paths in it point).
    """

    model: PlanarPair | PinnedPair | SpatialPair | HeadNeckChain
    parameters: tuple[Parameter, ...]
    document: dict
    source: str
    folder: pathlib.Path

    @classmethod
    def from_document(
        cls, document: dict, source: str = "<model>", folder: pathlib.Path | None = None
    ) -> "ModelFile":
        """Validate a parsed model document and build its model."""
        check = _Checker(source)
        kind = check.choice(document, "kind", "kind", ("planar_pair", "pinned_pair",
                                                      "spatial_pair", "head_neck"))
        folder = pathlib.Path(".") if folder is None else pathlib.Path(folder)
        build = {"planar_pair": _planar_pair, "pinned_pair": _pinned_pair,
                 "spatial_pair": _spatial_pair, "head_neck": _head_neck}[kind]
        model, parameters = build(document, check, folder)
        return cls(model, parameters, copy.deepcopy(document), source, folder)

    def simulation_times(self) -> np.ndarray:
        """Sample times `linspace(0, t_end, n_samples)` of the `[simulation]` table (s)."""
        t_end, n_samples = simulation_settings(self.document, self.source)
        return np.linspace(0.0, t_end, n_samples)


def load_model_file(path: str | pathlib.Path) -> ModelFile:
    """Read and validate a model file (formats.md); see `ModelFile`."""
    path = pathlib.Path(path)
    return ModelFile.from_document(read_toml(path), source=str(path), folder=path.parent)


def load_model(path: str | pathlib.Path) -> PlanarPair | PinnedPair:
    """Read and validate a model file (formats.md) and build the model.

    **Arguments:** `path` to a TOML model file; relative `loads_file` paths in it are resolved
    against the file's folder.

    **Returns:** the model (`PlanarPair` for `kind = "planar_pair"`, `PinnedPair` for
    `kind = "pinned_pair"`), in SI units.
    """
    return load_model_file(path).model


def model_from_document(
    document: dict, source: str = "<model>", folder: pathlib.Path | None = None
) -> PlanarPair | PinnedPair:
    """Build a model from an already parsed model document (same rules as `load_model`)."""
    return ModelFile.from_document(document, source, folder).model


def _planar_body(table, key, check, allow_fixed: bool) -> tuple[PlanarBody, np.ndarray | None]:
    allowed = {"fixed", "pose", "mass", "inertia"} | ({"initial_pose"} if key == "upper" else set())
    check.keys(table, key, allowed, {"pose"})
    fixed = check.boolean(table, "fixed", f"{key}.fixed", default=False)
    if fixed and not allow_fixed:
        check.fail(f"{key}.fixed", "false (the upper body must be free)", True)
    pose = check.vector(table, "pose", f"{key}.pose", 3)
    if fixed:
        mass, inertia = 1.0, 1.0
    else:
        mass = check.number(table, "mass", f"{key}.mass", positive=True)
        inertia = check.number(table, "inertia", f"{key}.inertia", positive=True)
    initial = check.vector(table, "initial_pose", f"{key}.initial_pose", 3, default=pose)
    body = PlanarBody(
        mass=jnp.asarray(mass), inertia=jnp.asarray(inertia), reference_pose=jnp.asarray(pose),
        fixed=fixed,
    )
    return body, initial


def _planar_pair(document, check, folder) -> tuple[PlanarPair, tuple[Parameter, ...]]:
    check.keys(
        document,
        "",
        {"kind", "gravity", "lower", "upper", "springs", "torsion", "measure", "loads",
         "simulation"},
        {"lower", "upper"},
    )
    gravity = check.vector(document, "gravity", "gravity", 2, default=[0.0, 0.0])
    lower, _ = _planar_body(document["lower"], "lower", check, allow_fixed=True)
    upper, initial_pose = _planar_body(document["upper"], "upper", check, allow_fixed=False)

    elements = []
    vector_rows, axial_rows = [], []
    for index, spring in enumerate(check.tables(document, "springs")):
        key = f"springs[{index}]"
        kind = check.choice(spring, "kind", f"{key}.kind", ("vector", "axial"))
        stiffness = check.number(spring, "stiffness", f"{key}.stiffness", minimum=0.0)
        damping = check.number(spring, "damping", f"{key}.damping", minimum=0.0, default=0.0)
        if kind == "vector":
            check.keys(spring, key, {"kind", "point", "stiffness", "damping"}, {"point"})
            point = check.vector(spring, "point", f"{key}.point", 2)
            vector_rows.append((point, stiffness, damping, index))
        else:
            check.keys(
                spring, key, {"kind", "lower_point", "upper_point", "stiffness", "damping"},
                {"lower_point", "upper_point"},
            )
            lower_point = check.vector(spring, "lower_point", f"{key}.lower_point", 2)
            upper_point = check.vector(spring, "upper_point", f"{key}.upper_point", 2)
            if np.linalg.norm(upper_point - lower_point) < 1e-9:
                check.fail(
                    f"{key}.upper_point",
                    "an attachment point distinct from lower_point (an axial spring needs a "
                    "line of action)",
                    upper_point.tolist(),
                )
            axial_rows.append((lower_point, upper_point, stiffness, damping, index))
    parameters: list[Parameter] = []

    def spring_parameters(file_indices):
        for row, file_index in enumerate(file_indices):
            for field, unit in (("stiffness", "N/m"), ("damping", "N s/m")):
                parameters.append(
                    Parameter(f"springs[{file_index}].{field}", field, unit, len(elements),
                              field, row)
                )

    if vector_rows:
        points, stiffness, damping, file_indices = map(np.asarray, zip(*vector_rows))
        spring_parameters(file_indices)
        elements.append(
            VectorSprings.from_reference(
                points, stiffness, damping, lower.reference_pose, upper.reference_pose
            )
        )
    if axial_rows:
        lower_points, upper_points, stiffness, damping, file_indices = map(
            np.asarray, zip(*axial_rows)
        )
        spring_parameters(file_indices)
        elements.append(
            AxialSprings.from_reference(
                lower_points, upper_points, stiffness, damping, lower.reference_pose,
                upper.reference_pose,
            )
        )
    _append_torsion(document, check, lower, upper, elements, parameters)
    loads = _common_tables(document, check, folder)
    model = PlanarPair(
        lower=lower,
        upper=upper,
        elements=tuple(elements),
        loads=loads,
        gravity=jnp.asarray(gravity),
        initial_pose=jnp.asarray(initial_pose),
    )
    parameters.sort(key=lambda p: _parameter_order(p.name))
    return model, tuple(parameters)


def _append_torsion(document, check, lower, upper, elements, parameters) -> None:
    # [[torsion]] tables: spring-dampers on the relative angle, at rest in the reference pose;
    # linear (`stiffness`) or nonlinear (`law`).
    rest_angle = upper.reference_pose[2] - lower.reference_pose[2]
    for index, torsion in enumerate(check.tables(document, "torsion")):
        key = f"torsion[{index}]"
        check.keys(torsion, key, {"stiffness", "damping", "law"})
        if ("stiffness" in torsion) == ("law" in torsion):
            check.fail(key, "either `stiffness` (linear, N m/rad) or a `law` table (nonlinear)",
                       sorted(torsion))
        damping = jnp.asarray(
            check.number(torsion, "damping", f"{key}.damping", minimum=0.0, default=0.0))
        if "law" in torsion:
            law, law_parameters = load_law(torsion["law"], f"{key}.law", check, "rad", "N m")
            for name, field, row, unit, lower_bound in law_parameters:
                parameters.append(Parameter(f"{key}.law.{name}", "torsion", unit, len(elements),
                                            f"law.{field}", row, lower_bound))
            element = NonlinearTorsion(law=law, damping=damping, rest_angle=rest_angle)
        else:
            parameters.append(Parameter(f"{key}.stiffness", "torsion", "N m/rad", len(elements),
                                        "stiffness"))
            element = TorsionSpring(
                stiffness=jnp.asarray(
                    check.number(torsion, "stiffness", f"{key}.stiffness", minimum=0.0)),
                damping=damping, rest_angle=rest_angle)
        parameters.append(Parameter(f"{key}.damping", "torsion", "N m s/rad", len(elements),
                                    "damping"))
        elements.append(element)


def load_law(table, key: str, check: "_Checker", displacement_unit: str, load_unit: str):
    """A load law from its model-file table (`kind` one of `LAW_KINDS`; formats.md), and its
    parameters as `(name, field, row, unit, lower_bound)`: the node loads of tables, the
    coefficient(s) of analytic laws."""
    check.keys(table, key, {"kind", "displacement", "load", "smoothing", "coefficient",
                            "coefficients"}, {"kind"})
    kind = check.choice(table, "kind", f"{key}.kind", LAW_KINDS)
    if kind in ("piecewise_linear", "monotone_cubic"):
        allowed = {"kind", "displacement", "load"} | ({"smoothing"} if kind == "piecewise_linear"
                                                     else set())
        check.keys(table, key, allowed, {"displacement", "load"})
        x = check.vector(table, "displacement", f"{key}.displacement", None)
        y = check.vector(table, "load", f"{key}.load", len(x))
        try:
            if kind == "piecewise_linear":
                smoothing = check.number(table, "smoothing", f"{key}.smoothing", minimum=0.0,
                                         default=0.0)
                law = PiecewiseLinearLaw(x, y, smoothing)
            else:
                law = MonotoneCubicLaw(x, y)
        except ValueError as error:
            raise ValueError(f"{check.source}: {key}: {error}") from None
        return law, [(f"load[{k}]", "load_values", k, load_unit, -math.inf)
                     for k in range(len(x))]
    if kind == "tan_cos":
        check.keys(table, key, {"kind", "coefficient"}, {"coefficient"})
        law = TanCosLaw(check.number(table, "coefficient", f"{key}.coefficient", positive=True))
        return law, [("coefficient", "coefficient", None, f"{load_unit}/{displacement_unit}",
                      0.0)]
    check.keys(table, key, {"kind", "coefficients"}, {"coefficients"})
    coefficients = check.vector(table, "coefficients", f"{key}.coefficients", None)
    return PolynomialLaw(coefficients), [
        (f"coefficients[{k}]", "coefficients", k, f"{load_unit}/{displacement_unit}^{k + 1}",
         -math.inf) for k in range(len(coefficients))]


def _common_tables(document, check, folder) -> tuple[AbstractLoad, ...]:
    # Tables every planar kind shares: [measure], [[loads]] and [simulation].
    if "measure" in document:
        _check_measure(document["measure"], check)
    if "simulation" in document:
        simulation_settings(document, check.source)
    return _loads(document, check, folder, PLANAR_LOAD_COMPONENTS)


def _pinned_pair(document, check, folder) -> tuple[PinnedPair, tuple[Parameter, ...]]:
    check.keys(
        document,
        "",
        {"kind", "gravity", "lower", "upper", "pin", "torsion", "measure", "loads", "simulation"},
        {"lower", "upper", "pin"},
    )
    gravity = check.vector(document, "gravity", "gravity", 2, default=[0.0, 0.0])
    lower, _ = _planar_body(document["lower"], "lower", check, allow_fixed=True)
    if not lower.fixed:
        check.fail("lower.fixed", "true (the pin is fixed in the lower body)", False)
    upper, initial_pose = _planar_body(document["upper"], "upper", check, allow_fixed=False)
    check.keys(document["pin"], "pin", {"point"}, {"point"})
    pin = check.vector(document["pin"], "point", "pin.point", 2)
    elements: list = []
    parameters: list[Parameter] = []
    _append_torsion(document, check, lower, upper, elements, parameters)
    model = PinnedPair(
        lower=lower,
        upper=upper,
        pin=jnp.asarray(pin),
        elements=tuple(elements),
        loads=_common_tables(document, check, folder),
        gravity=jnp.asarray(gravity),
        initial_angle=jnp.asarray(initial_pose[2]),
    )
    on_circle = np.asarray(model.centre_of_mass(initial_pose[2]))
    if np.linalg.norm(on_circle - initial_pose[:2]) > 1e-9:
        check.fail(
            "upper.initial_pose",
            f"a pose the pin allows: x, y = {on_circle.tolist()} for that angle",
            initial_pose.tolist(),
        )
    return model, tuple(parameters)


BUSHING_AXES = ("tx", "ty", "tz", "rx", "ry", "rz")


def _spatial_body(table, key, check) -> tuple[SpatialBody, np.ndarray]:
    allowed = {"fixed", "pose", "mass", "inertia"} | ({"initial_pose"} if key == "upper" else set())
    check.keys(table, key, allowed, {"pose"})
    fixed = check.boolean(table, "fixed", f"{key}.fixed", default=False)
    if key == "lower" and not fixed:
        check.fail("lower.fixed", "true (spatial pairs with a moving lower body are not "
                                  "supported yet)", False)
    if key == "upper" and fixed:
        check.fail("upper.fixed", "false (the upper body must be free)", True)
    pose = check.vector(table, "pose", f"{key}.pose", 6)
    mass, inertia = 1.0, np.eye(3)
    if not fixed:
        mass = check.number(table, "mass", f"{key}.mass", positive=True)
        values = table.get("inertia")
        length = len(values) if isinstance(values, list) and len(values) in (3, 6) else 3
        values = check.vector(table, "inertia", f"{key}.inertia", length)
        inertia = np.diag(values[:3])
        if length == 6:
            (ixy, ixz, iyz) = values[3:]
            inertia[0, 1] = inertia[1, 0] = ixy
            inertia[0, 2] = inertia[2, 0] = ixz
            inertia[1, 2] = inertia[2, 1] = iyz
        moments = np.linalg.eigvalsh(inertia)
        if moments.min() <= 0:
            check.fail(f"{key}.inertia", "a positive definite inertia tensor (principal "
                                         f"moments {moments.tolist()} kg m^2)", values.tolist())
        if 2 * moments.max() > moments.sum() * (1 + 1e-12):
            check.fail(f"{key}.inertia", "principal moments that satisfy the triangle "
                                         "inequality (no moment larger than the other two "
                                         f"together; got {moments.tolist()} kg m^2)",
                       values.tolist())
    initial = check.vector(table, "initial_pose", f"{key}.initial_pose", 6, default=pose)
    if abs(np.cos(pose[4])) < 1e-3 or abs(np.cos(initial[4])) < 1e-3:
        check.fail(f"{key}.pose", "a pose away from a2 = +-90 degrees (the singularity of the "
                                  "1-2-3 Euler angles)", pose.tolist())
    body = SpatialBody(mass=jnp.asarray(mass), inertia=jnp.asarray(inertia),
                       reference_pose=jnp.asarray(pose), fixed=fixed)
    return body, initial


def _bushing_matrix(check, table, name, key) -> tuple[np.ndarray, list[tuple[str, int]]]:
    # A 6-vector (the diagonal) or a symmetric 6x6 array; returns the matrix and, for each
    # entry the file holds, its parameter-name suffix and packed row.
    value = table.get(name)
    rows = np.flatnonzero(UPPER[0] == UPPER[1])
    if isinstance(value, list) and value and isinstance(value[0], list):
        if len(value) != 6 or any(not isinstance(row, list) or len(row) != 6 for row in value):
            check.fail(f"{key}.{name}", "6 numbers (the diagonal) or a 6x6 array", value)
        matrix = np.array([check.vector({"row": row}, "row", f"{key}.{name}[{i}]", 6)
                           for i, row in enumerate(value)])
        asymmetry = np.abs(matrix - matrix.T)
        if asymmetry.max() > 1e-9 * max(np.abs(matrix).max(), 1e-300):
            i, j = np.unravel_index(np.argmax(asymmetry), asymmetry.shape)
            check.fail(f"{key}.{name}[{i}][{j}]",
                       f"a symmetric matrix ({name}[{j}][{i}] = {matrix[j, i]:g})",
                       matrix[i, j])
        entries = [(f"[{i}][{j}]", row) for row, (i, j) in enumerate(zip(*UPPER))]
    else:
        diagonal = check.vector(table, name, f"{key}.{name}", 6,
                                default=np.zeros(6) if name == "damping" else _MISSING)
        matrix = np.diag(diagonal)
        entries = [(f"[{i}]", int(row)) for i, row in enumerate(rows)]
    if np.any(np.diag(matrix) < 0):
        i = int(np.argmin(np.diag(matrix)))
        check.fail(f"{key}.{name}", f"a nonnegative diagonal ({BUSHING_AXES[i]} entry)",
                   float(matrix[i, i]))
    return matrix, entries


def _bushing_unit(field: str, i: int, j: int) -> str:
    # Entry (i, j) maps the deflection component j (m or rad) to the load component i (N or N m).
    load = "N" if i < 3 else "N m"
    per = "m" if j < 3 else "rad"
    unit = f"{load}/{per}" if field == "stiffness" else f"{load} s/{per}"
    return unit.replace("N m/m", "N").replace("N m s/m", "N s")


def _bushing_frame(check, bushing, name, key, bodies: tuple[str, ...]):
    frame = bushing.get(name)
    if not isinstance(frame, dict):
        check.fail(f"{key}.{name}", "a table { body, position, orientation }", frame)
    check.keys(frame, f"{key}.{name}", {"body", "position", "orientation"}, {"body"})
    check.choice(frame, "body", f"{key}.{name}.body", bodies)
    return (check.vector(frame, "position", f"{key}.{name}.position", 3, default=np.zeros(3)),
            check.vector(frame, "orientation", f"{key}.{name}.orientation", 3,
                         default=np.zeros(3)))


def _spatial_pair(document, check, folder) -> tuple[SpatialPair, tuple[Parameter, ...]]:
    check.keys(document, "", {"kind", "gravity", "lower", "upper", "bushings", "ligaments",
                              "facets", "loads", "simulation"}, {"lower", "upper"})
    gravity = check.vector(document, "gravity", "gravity", 3, default=np.zeros(3))
    lower, _ = _spatial_body(document["lower"], "lower", check)
    upper, initial_pose = _spatial_body(document["upper"], "upper", check)
    elements, parameters = [], []
    for index, bushing in enumerate(check.tables(document, "bushings")):
        key = f"bushings[{index}]"
        kind = check.choice(bushing, "kind", f"{key}.kind", ("classic", "spine", "table"))
        if kind == "table":
            check.keys(bushing, key, {"kind", "frame1", "frame2", "laws", "damping"},
                       {"kind", "frame1", "frame2", "laws"})
        else:
            check.keys(bushing, key, {"kind", "frame1", "frame2", "stiffness", "damping"},
                       {"kind", "frame1", "frame2", "stiffness"})
        # The deflection is that of frame 2 in frame 1: frame 1 on the lower body (as in the
        # papers and OpenSim models), so that the stiffness matrix means what it says.
        frame1 = _bushing_frame(check, bushing, "frame1", key, ("lower",))
        frame2 = _bushing_frame(check, bushing, "frame2", key, ("upper",))
        if kind == "table":
            elements.append(_table_bushing(check, bushing, key, frame1, frame2, lower, upper,
                                           len(elements), parameters))
            continue
        stiffness, stiffness_entries = _bushing_matrix(check, bushing, "stiffness", key)
        damping, damping_entries = _bushing_matrix(check, bushing, "damping", key)
        smallest = np.linalg.eigvalsh(stiffness).min()
        if smallest < 0:
            warnings.warn(f"{check.source}: {key}.stiffness is not positive semi-definite "
                          f"(smallest eigenvalue {smallest:.4g}): the joint is unstable in "
                          "some direction", stacklevel=2)
        for field, entries in (("stiffness", stiffness_entries), ("damping", damping_entries)):
            for suffix, row in entries:
                i, j = UPPER[0][row], UPPER[1][row]
                parameters.append(Parameter(
                    f"{key}.{field}{suffix}", f"bushing.{field}", _bushing_unit(field, i, j),
                    len(elements), field, row, lower=0.0 if i == j else -math.inf))
        elements.append(Bushing.create(kind, frame1, frame2, stiffness, damping,
                                       lower.reference_pose, upper.reference_pose))
    if document.get("ligaments"):
        elements.append(_spatial_ligaments(document, check, lower, upper, len(elements),
                                           parameters))
    if document.get("facets"):
        elements.append(_facet_contacts(document, check, lower, upper, len(elements),
                                        parameters))
    if "simulation" in document:
        simulation_settings(document, check.source)
    model = SpatialPair(
        lower=lower, upper=upper, elements=tuple(elements),
        loads=_loads(document, check, folder, SPATIAL_LOAD_COMPONENTS),
        gravity=jnp.asarray(gravity), initial_pose=jnp.asarray(initial_pose),
    )
    return model, tuple(parameters)


def _spatial_ligaments(document, check, lower, upper, element, parameters):
    # [[ligaments]]: tension-only spring-dampers between global points of the reference pose.
    tables = check.tables(document, "ligaments")
    lower_points, upper_points, stiffness, damping = [], [], [], []
    for index, table in enumerate(tables):
        key = f"ligaments[{index}]"
        check.keys(table, key, {"name", "lower_point", "upper_point", "stiffness", "damping"},
                   {"lower_point", "upper_point", "stiffness"})
        lower_points.append(check.vector(table, "lower_point", f"{key}.lower_point", 3))
        upper_points.append(check.vector(table, "upper_point", f"{key}.upper_point", 3))
        if np.linalg.norm(upper_points[-1] - lower_points[-1]) < 1e-9:
            check.fail(f"{key}.upper_point", "a point apart from lower_point (a ligament of "
                                             "zero length has no direction)",
                       upper_points[-1].tolist())
        stiffness.append(check.number(table, "stiffness", f"{key}.stiffness", minimum=0.0))
        damping.append(check.number(table, "damping", f"{key}.damping", minimum=0.0,
                                    default=0.0))
        for field, unit in (("stiffness", "N/m"), ("damping", "N s/m")):
            parameters.append(Parameter(f"{key}.{field}", f"ligaments.{field}", unit, element,
                                        field, index))
    return SpatialLigaments.from_reference(np.array(lower_points), np.array(upper_points),
                                           stiffness, damping, lower.reference_pose,
                                           upper.reference_pose)


def _facet_disc(check, table, name, key):
    disc = table.get(name)
    if not isinstance(disc, dict):
        check.fail(f"{key}.{name}", "a table { centre, normal, radius }", disc)
    check.keys(disc, f"{key}.{name}", {"centre", "normal", "radius"},
               {"centre", "normal", "radius"})
    centre = check.vector(disc, "centre", f"{key}.{name}.centre", 3)
    normal = check.vector(disc, "normal", f"{key}.{name}.normal", 3)
    if np.linalg.norm(normal) < 1e-12:
        check.fail(f"{key}.{name}.normal", "a nonzero vector (the face's outward normal)",
                   normal.tolist())
    radius = check.number(disc, "radius", f"{key}.{name}.radius", positive=True)
    return centre, normal / np.linalg.norm(normal), radius


def _facet_contacts(document, check, lower, upper, element, parameters):
    # [[facets]]: penalty contact between a face on the upper and one on the lower body.
    tables = check.tables(document, "facets")
    columns = {name: [] for name in ("upper", "lower", "stiffness", "damping", "blending")}
    for index, table in enumerate(tables):
        key = f"facets[{index}]"
        check.keys(table, key, {"name", "upper", "lower", "stiffness", "damping", "blending"},
                   {"upper", "lower", "stiffness"})
        upper_disc = _facet_disc(check, table, "upper", key)
        lower_disc = _facet_disc(check, table, "lower", key)
        facing = float(upper_disc[1] @ lower_disc[1])
        if facing > -0.5:
            check.fail(f"{key}.upper.normal", "a normal facing the lower face (the outward "
                       "normals of facing faces point at each other; their angle must exceed "
                       f"120 degrees, got {math.degrees(math.acos(max(-1.0, min(1.0, facing)))):.1f})",
                       upper_disc[1].tolist())
        columns["upper"].append(upper_disc)
        columns["lower"].append(lower_disc)
        columns["stiffness"].append(check.number(table, "stiffness", f"{key}.stiffness",
                                                 minimum=0.0))
        columns["damping"].append(check.number(table, "damping", f"{key}.damping", minimum=0.0,
                                               default=0.0))
        columns["blending"].append(check.number(table, "blending", f"{key}.blending",
                                                positive=True, default=50.0))
        parameters.append(Parameter(f"{key}.stiffness", "facets.each_stiffness", "N/m",
                                    element, "stiffness", index))
    for field, unit in (("stiffness", "N/m"), ("damping", "N s/m")):
        parameters.append(Parameter(f"facets.{field}", f"facets.{field}", unit, element, field,
                                    tied=True))
    upper_discs, lower_discs = columns["upper"], columns["lower"]
    facets = FacetContacts.from_reference(
        [d[0] for d in upper_discs], [d[1] for d in upper_discs], [d[2] for d in upper_discs],
        [d[0] for d in lower_discs], [d[1] for d in lower_discs], [d[2] for d in lower_discs],
        columns["stiffness"], columns["damping"], columns["blending"],
        lower.reference_pose, upper.reference_pose)
    depths = np.asarray(facets.penetrations(lower.reference_pose, upper.reference_pose))
    if np.any(depths > 1e-9):
        index = int(np.argmax(depths))
        check.fail(f"facets[{index}]", "faces that do not overlap in the reference pose (a "
                   f"penetration of {depths[index] * 1e3:.4g} mm would preload the segment)",
                   "overlapping faces")
    return facets


_HEAD_NECK_VERTEBRA_ROWS = ("body_depth", "body_height", "spinous_reach", "disc_height")
_HEAD_NECK_SCALARS = ("base_disc_height", "base_depth", "base_spinous_reach", "head_inertia")
# (document key, HeadNeckChain field, --free group, unit)
_HEAD_NECK_PARAMETERS = (
    ("ligaments.anterior_stiffness", "k_anterior", "ligaments.stiffness", "N/m"),
    ("ligaments.posterior_stiffness", "k_posterior", "ligaments.stiffness", "N/m"),
    ("ligaments.anterior_damping", "c_anterior", "ligaments.damping", "N s/m"),
    ("ligaments.posterior_damping", "c_posterior", "ligaments.damping", "N s/m"),
    ("joints.stiffness", "k_joint", "joints.stiffness", "N m/rad"),
    ("joints.damping", "c_joint", "joints.damping", "N m s/rad"),
)


def head_neck_arguments(document: dict, source: str = "<model>") -> dict:
    """Validate a `kind = "head_neck"` document (datasets/head_neck.toml shows every key) and
    return the keyword arguments of `HeadNeckChain.create`: geometry by `head_neck_geometry`,
    Table-1-like ligament and joint parameters (one value for every level), gravity `(2,)`
    (m/s^2) and the `TriangularPulse`."""
    check = _Checker(source)
    check.keys(document, "", {"kind", "gravity", "ligaments", "joints", "pulse", "simulation",
                              "geometry"}, {"ligaments", "joints", "pulse", "geometry"})
    keys_of = {}  # table name -> its keys, from the parameter names "table.key"
    for name, *_ in _HEAD_NECK_PARAMETERS:
        table_name, key = name.split(".")
        keys_of.setdefault(table_name, set()).add(key)
    for table_name, keys in keys_of.items():
        check.keys(document[table_name], table_name, keys)
    values = {field: check.number(document[name.split(".")[0]], name.split(".")[1], name,
                                  minimum=0.0)
              for name, field, _, _ in _HEAD_NECK_PARAMETERS}
    pulse_table = document["pulse"]
    check.keys(pulse_table, "pulse", {"peak", "t_peak", "t_end", "direction"},
               {"peak", "t_peak", "t_end"})
    t_peak = check.number(pulse_table, "t_peak", "pulse.t_peak", positive=True)
    t_end = check.number(pulse_table, "t_end", "pulse.t_end", positive=True)
    if t_end <= t_peak:
        check.fail("pulse.t_end", f"a time after pulse.t_peak = {t_peak:g} s", t_end)
    direction = check.vector(pulse_table, "direction", "pulse.direction", 2,
                             default=(1.0, 0.0))
    if abs(np.linalg.norm(direction) - 1.0) > 1e-9:
        check.fail("pulse.direction", "a unit vector", direction.tolist())
    pulse = TriangularPulse(peak=check.number(pulse_table, "peak", "pulse.peak"),
                            t_peak=t_peak, t_end=t_end, direction=tuple(direction.tolist()))
    if "simulation" in document:
        simulation_end, _ = simulation_settings(document, source)
        if simulation_end < t_end:
            check.fail("simulation.t_end", f"at least the pulse's end, pulse.t_end = {t_end:g} "
                       "s (a simulation shorter than its pulse never sees the whole impact)",
                       simulation_end)
    geometry = document["geometry"]
    check.keys(geometry, "geometry", {"bodies", "masses", "tilt_deg", "base_tilt_deg",
                                      "head_centre", "head_anterior", "head_posterior",
                                      *_HEAD_NECK_VERTEBRA_ROWS, *_HEAD_NECK_SCALARS},
               {"masses", "tilt_deg", "base_tilt_deg", "head_centre", "head_anterior",
                "head_posterior", *_HEAD_NECK_VERTEBRA_ROWS, *_HEAD_NECK_SCALARS})
    masses = check.vector(geometry, "masses", "geometry.masses", None)
    n = masses.size
    table = {"masses": masses,
             "tilt_deg": check.vector(geometry, "tilt_deg", "geometry.tilt_deg", n),
             "base_tilt_deg": check.number(geometry, "base_tilt_deg", "geometry.base_tilt_deg")}
    for name in _HEAD_NECK_VERTEBRA_ROWS:
        table[name] = check.vector(geometry, name, f"geometry.{name}", n - 1)
        if np.any(table[name] <= 0):
            check.fail(f"geometry.{name}", "lengths > 0", table[name].tolist())
    for name in _HEAD_NECK_SCALARS:
        table[name] = check.number(geometry, name, f"geometry.{name}", positive=True)
    for name in ("head_centre", "head_anterior", "head_posterior"):
        table[name] = check.vector(geometry, name, f"geometry.{name}", 2)
    gravity = check.vector(document, "gravity", "gravity", 2, default=np.zeros(2))
    return dict(head_neck_geometry(table), **values, gravity=gravity, pulse=pulse)


def _head_neck(document, check, folder) -> tuple[HeadNeckChain, tuple[Parameter, ...]]:
    try:
        chain = HeadNeckChain.create(**head_neck_arguments(document, check.source))
    except ValueError as error:
        if str(error).startswith(check.source):
            raise
        raise ValueError(f"{check.source}: {error}") from None
    parameters = tuple(Parameter(name, group, unit, None, field, tied=True)
                       for name, field, group, unit in _HEAD_NECK_PARAMETERS)
    return chain, parameters


def _table_bushing(check, bushing, key, frame1, frame2, lower, upper, element, parameters):
    # kind = "table": one load law per degree of freedom [tx, ty, tz, rx, ry, rz].
    laws_table = bushing["laws"]
    if not isinstance(laws_table, list) or len(laws_table) != 6:
        check.fail(f"{key}.laws", "a list of 6 law tables (tx, ty, tz, rx, ry, rz)", laws_table)
    laws = []
    for k, table in enumerate(laws_table):
        rotation = k >= 3
        law, law_parameters = load_law(table, f"{key}.laws[{k}]", check,
                                       "rad" if rotation else "m", "N m" if rotation else "N")
        laws.append(law)
        for name, field, row, unit, lower_bound in law_parameters:
            parameters.append(Parameter(f"{key}.laws[{k}].{name}", "bushing.laws", unit, element,
                                        f"laws.{k}.{field}", row, lower_bound))
    damping = check.vector(bushing, "damping", f"{key}.damping", 6, default=np.zeros(6))
    if np.any(damping < 0):
        check.fail(f"{key}.damping", "6 numbers >= 0 (diagonal damping of a table bushing)",
                   damping.tolist())
    for k in range(6):
        parameters.append(Parameter(f"{key}.damping[{k}]", "bushing.damping",
                                    _bushing_unit("damping", k, k), element, "damping", k, 0.0))
    return TableBushing.create(frame1, frame2, laws, damping, lower.reference_pose,
                               upper.reference_pose)


def _parameter_order(name: str):
    # File order: springs by index, then torsion; stiffness before damping within each.
    table, rest = name.split("[", 1)
    index, field = rest.split("].")
    return (table != "springs", int(index), field != "stiffness")


def _check_measure(measure, check) -> None:
    check.keys(measure, "measure", {"kind", "curve"}, {"kind", "curve"})
    check.choice(measure, "kind", "measure.kind", ("vector",))
    curve = measure["curve"]
    if not isinstance(curve, list) or len(curve) < 2:
        check.fail("measure.curve", "a polyline of at least 2 points [[x, y], ...]", curve)
    points = np.stack(
        [check.vector({"p": p}, "p", f"measure.curve[{i}]", 2) for i, p in enumerate(curve)]
    )
    if np.sum(np.linalg.norm(np.diff(points, axis=0), axis=1)) <= 0:
        check.fail("measure.curve", "a polyline of nonzero length", curve)


def _loads(document, check, folder, components) -> tuple[AbstractLoad, ...]:
    terms = []
    tables = []
    for index, load in enumerate(check.tables(document, "loads")):
        key = f"loads[{index}]"
        if "loads_file" in load:
            check.keys(load, key, {"loads_file"})
            name = load["loads_file"]
            if not isinstance(name, str):
                check.fail(f"{key}.loads_file", "a file name", name)
            times, values = read_loads_csv(folder / name, components)
            tables.append(TabulatedLoad(times=jnp.asarray(times), values=jnp.asarray(values)))
            continue
        check.keys(
            load, key, {"component", "amplitude", "frequency", "phase"},
            {"component", "amplitude", "frequency"},
        )
        component = check.choice(load, "component", f"{key}.component", components)
        terms.append(
            (
                check.number(load, "amplitude", f"{key}.amplitude"),
                check.number(load, "frequency", f"{key}.frequency", minimum=0.0),
                check.number(load, "phase", f"{key}.phase", default=0.0),
                np.eye(len(components))[components.index(component)],
            )
        )
    loads: list[AbstractLoad] = []
    if terms:
        amplitude, frequency, phase, direction = map(np.asarray, zip(*terms))
        loads.append(
            SinusoidalLoad(
                amplitude=jnp.asarray(amplitude), frequency=jnp.asarray(frequency),
                phase=jnp.asarray(phase), direction=jnp.asarray(direction),
            )
        )
    return tuple(loads + tables)


def simulation_settings(document: dict, source: str = "<model>") -> tuple[float, int]:
    """`(t_end, n_samples)` of the `[simulation]` table (defaults 0.5 s and 501 samples)."""
    check = _Checker(source)
    table = document.get("simulation", {})
    check.keys(table, "simulation", {"t_end", "n_samples"})
    t_end = check.number(table, "t_end", "simulation.t_end", positive=True, default=0.5)
    n_samples = check.integer(table, "n_samples", "simulation.n_samples", minimum=2, default=501)
    return t_end, n_samples


def read_table(
    path: str | pathlib.Path, required: tuple[str, ...], *, min_rows: int = 2
) -> dict[str, np.ndarray]:
    """Read a numeric CSV with a header row into named float64 columns.

    Checks (each a `ValueError` naming the file, row or column): the `required` columns are
    present, every cell is a finite number, the first column `t` is strictly increasing, and
    there are at least `min_rows` rows. Extra columns are kept.
    """
    path = pathlib.Path(path)
    try:
        with path.open(newline="") as file:
            rows = [row for row in csv.reader(file) if row and any(cell.strip() for cell in row)]
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    if not rows:
        raise ValueError(f"{path}: empty file; expected a header row {','.join(required)}")
    header = [name.strip() for name in rows[0]]
    missing = [name for name in required if name not in header]
    if missing:
        raise ValueError(
            f"{path}: header {header}: missing column(s) {missing}; expected {list(required)}"
        )
    if len(set(header)) != len(header):
        raise ValueError(f"{path}: header {header}: repeated column names")
    data = np.empty((len(rows) - 1, len(header)))
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{path}: line {number}: expected {len(header)} values, got {len(row)}"
            )
        for column, cell in enumerate(row):
            try:
                value = float(cell)
            except ValueError:
                raise ValueError(
                    f"{path}: line {number}, column {header[column]}: expected a number, "
                    f"got {cell!r}"
                ) from None
            if not math.isfinite(value):
                raise ValueError(
                    f"{path}: line {number}, column {header[column]}: expected a finite "
                    f"number, got {cell!r} (missing values, NaN and inf are not allowed)"
                )
            data[number - 2, column] = value
    if data.shape[0] < min_rows:
        raise ValueError(f"{path}: {data.shape[0]} data row(s); at least {min_rows} are needed")
    columns = {name: data[:, index] for index, name in enumerate(header)}
    if "t" in columns:
        steps = np.diff(columns["t"])
        if np.any(steps <= 0):
            bad = int(np.argmax(steps <= 0)) + 3
            raise ValueError(
                f"{path}: line {bad}: t must be strictly increasing (unsorted or repeated time "
                f"{columns['t'][bad - 2]!r})"
            )
    return columns


def read_trajectory(
    path: str | pathlib.Path, channels: tuple[str, ...] = PLANAR_TRAJECTORY_COLUMNS[1:]
) -> tuple[np.ndarray, np.ndarray]:
    """Read a trajectory CSV (`t` then the pose channels, e.g. `t,x,y,theta`).

    **Returns:** `(ts, values)` with `ts` (s, shape `(k,)`) and `values` (SI, shape
    `(k, len(channels))`) in the order of `channels`.
    """
    columns = read_table(path, ("t",) + tuple(channels))
    return columns["t"], np.stack([columns[name] for name in channels], axis=1)


def read_loads_csv(path, components: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Read a load table `t,<components...>`; absent components are zero.

    **Returns:** `(times, values)`, shapes `(k,)` and `(k, len(components))` (N, N m).
    """
    columns = read_table(path, ("t",))
    present = [name for name in components if name in columns]
    if not present:
        raise ValueError(f"{path}: expected at least one load column of {list(components)}")
    zeros = np.zeros_like(columns["t"])
    return columns["t"], np.stack([columns.get(name, zeros) for name in components], axis=1)


def write_trajectory(
    path: str | pathlib.Path, ts, values, channels: tuple[str, ...] = PLANAR_TRAJECTORY_COLUMNS[1:]
) -> None:
    """Write `t` and the channel columns to a CSV file with full float64 precision."""
    ts = np.asarray(ts)
    values = np.asarray(values).reshape(len(ts), -1)
    if values.shape[1] != len(channels):
        raise ValueError(f"{path}: {values.shape[1]} value columns for channels {channels}")
    with pathlib.Path(path).open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(("t",) + tuple(channels))
        for t, row in zip(ts, values):
            writer.writerow([repr(float(t))] + [repr(float(v)) for v in row])


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise ValueError(f"cannot write {value!r} to TOML")


def _is_table_array(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def dumps_toml(document: dict) -> str:
    """Serialise a model document (scalars, arrays, tables, arrays of tables) as TOML."""
    lines = []
    for key, value in document.items():
        if not isinstance(value, dict) and not _is_table_array(value):
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in document.items():
        if isinstance(value, dict):
            lines += ["", f"[{key}]"] + [f"{k} = {_toml_value(v)}" for k, v in value.items()]
        elif _is_table_array(value):
            for table in value:
                lines += ["", f"[[{key}]]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def write_model_file(
    path: str | pathlib.Path, model_file: ModelFile, values: dict[str, float],
    document: dict | None = None,
) -> pathlib.Path:
    """Write `model_file` (or `document`, a changed copy of its document) with the parameters
    in `values` (name -> SI value) replaced.

    The schema stays that of the input, so the result can be simulated or fitted again;
    relative `loads_file` paths are rewritten to stay valid from the new file's folder.
    """
    from ._parameters import set_in_document

    path = pathlib.Path(path)
    document = copy.deepcopy(model_file.document if document is None else document)
    for name, value in values.items():
        set_in_document(document, name, value)
    for load in document.get("loads", []):
        if "loads_file" in load:
            target = (model_file.folder / load["loads_file"]).resolve()
            load["loads_file"] = os.path.relpath(target, path.parent.resolve())
    path.write_text(dumps_toml(document))
    return path
