"""Tables that several model kinds share: rigid bodies of a planar pair, torsion elements, load
laws, loads (sinusoids and load tables) and the `[measure]` curve.
"""

import dataclasses
import warnings

import numpy as np

from ..._arrays import floats
from ...elements._load_laws import (
    check_monotone, LAW_KINDS, MonotoneCubicLaw, PiecewiseLinearLaw, PolynomialLaw, TABLE_KINDS,
    TanCosLaw,
)
from ...elements._bushings import UPPER
from ...elements._parameters import (
    declared_parameters, element_labels, Parameter,
)
from ...elements._planar_springs import NonlinearTorsion, TorsionSpring
from ...models._loads import (
    PLANAR_LOAD_COMPONENTS, AbstractLoad, SinusoidalLoad, TabulatedLoad,
)
from ...models._planar_pair import PlanarBody
from .._tables import read_loads_csv
from .._toml import DocumentChecker, simulation_settings


def planar_body(table, key, check, allow_fixed: bool) -> tuple[PlanarBody, np.ndarray | None]:
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
        mass=floats(mass), inertia=floats(inertia), reference_pose=floats(pose),
        fixed=fixed,
    )
    return body, initial


def labelled(element, label):
    """`element` named `label` in parameter names (the file's own numbering: `torsion[2]`, or
    one member name per row, `("springs[0]", "springs[3]")`)."""
    return dataclasses.replace(element, label=label)


def file_parameters(model, diagonal_only=()) -> tuple[Parameter, ...]:
    """The parameters a model file names: every one its model declares
    (`spineid.declared_parameters`: names, units, bounds and groups come from the elements),
    less the couplings of the bushing matrices the file gives by their diagonal only
    (`diagonal_only`: `(element label, field)` pairs, e.g. `("bushings[0]", "damping")`)."""
    labels = element_labels(model)

    def named(p):
        return not (p.element is not None and (labels[p.element], p.field) in diagonal_only
                    and p.row is not None and UPPER[0][p.row] != UPPER[1][p.row])

    return tuple(p for p in declared_parameters(model) if named(p))


def append_torsion(document, check, lower, upper, elements) -> None:
    # [[torsion]] tables: spring-dampers on the relative angle, at rest in the reference pose;
    # linear (`stiffness`) or nonlinear (`law`).
    rest_angle = floats(np.asarray(upper.reference_pose)[2] - np.asarray(lower.reference_pose)[2])
    for index, torsion in enumerate(check.tables(document, "torsion")):
        key = f"torsion[{index}]"
        check.keys(torsion, key, {"stiffness", "damping", "law"})
        if ("stiffness" in torsion) == ("law" in torsion):
            check.fail(key, "either `stiffness` (linear, N m/rad) or a `law` table (nonlinear)",
                       sorted(torsion))
        damping = floats(
            check.number(torsion, "damping", f"{key}.damping", minimum=0.0, default=0.0))
        if "law" in torsion:
            law = load_law(torsion["law"], f"{key}.law", check)
            element = NonlinearTorsion(law=law, damping=damping, rest_angle=rest_angle,
                                       label=key)
        else:
            element = TorsionSpring(
                stiffness=floats(
                    check.number(torsion, "stiffness", f"{key}.stiffness", minimum=0.0)),
                damping=damping, rest_angle=rest_angle, label=key)
        elements.append(element)


def load_law(table, key: str, check: "DocumentChecker"):
    """A load law from its model-file table (`kind` one of `LAW_KINDS`;
    docs/formats/model-files.md); the law declares its parameters (the node loads of tables,
    named `load[k]` as in the file, the coefficient(s) of analytic laws)."""
    check.keys(table, key, {"kind", "displacement", "load", "smoothing", "coefficient",
                            "coefficients"}, {"kind"})
    kind = check.choice(table, "kind", f"{key}.kind", LAW_KINDS)
    if kind in TABLE_KINDS:
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
        try:  # allowed (softening after a failure), but rarely meant: said once
            check_monotone(y, f"{check.source}: {key}")
        except ValueError as error:
            warnings.warn(f"{error}; a joint with negative stiffness can be unstable, and its "
                          "simulation fail", stacklevel=2)
    elif kind == "tan_cos":
        check.keys(table, key, {"kind", "coefficient"}, {"coefficient"})
        law = TanCosLaw(check.number(table, "coefficient", f"{key}.coefficient", positive=True))
    else:
        check.keys(table, key, {"kind", "coefficients"}, {"coefficients"})
        law = PolynomialLaw(check.vector(table, "coefficients", f"{key}.coefficients", None))
    return law


def planar_common_tables(document, check, folder) -> tuple[AbstractLoad, ...]:
    # Tables every planar kind shares: [measure], [[loads]] and [simulation].
    if "measure" in document:
        check_measure(document["measure"], check)
    if "simulation" in document:
        simulation_settings(document, check.source)
    return read_loads(document, check, folder, PLANAR_LOAD_COMPONENTS)


def parameter_order(name: str):
    # File order: springs by index, then torsion; stiffness before damping within each.
    table, rest = name.split("[", 1)
    index, field = rest.split("].")
    return (table != "springs", int(index), field != "stiffness")


def check_measure(measure, check) -> None:
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


def read_loads(document, check, folder, components) -> tuple[AbstractLoad, ...]:
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
            tables.append(TabulatedLoad(times=floats(times), values=floats(values)))
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
                amplitude=floats(amplitude), frequency=floats(frequency),
                phase=floats(phase), direction=floats(direction),
            )
        )
    return tuple(loads + tables)
