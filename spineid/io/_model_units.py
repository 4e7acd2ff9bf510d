"""Parameter values with their units in model files (docs/formats/model-files.md, "Units").

A number in a model file is SI. A model parameter's value (the start of a fit: a stiffness, a
damping, a matrix entry) may instead be written as text with its unit, as a lab states it:
`stiffness = "27 N/mm"`, `damping = "0.35 N m s/deg"`, `stiffness = ["120 N/mm", ...]`. The
unit is a product of the units of `UNITS` (and `kg`), each with an optional whole power
(`mm^2`), separated by spaces, `*` or `.`, with at most one `/` before the denominator's:
`N/mm`, `N m/deg`, `Nmm/deg`, `kN/m`. Such text is read into SI before the model is built
(`quantities_in_document`), so every check of the kind applies to the SI value; its unit must
be of the parameter's kind (`N/mm` for a stiffness in N/m, not `N/deg`; radians count as a
ratio, so a symmetric matrix's mirrored entries, N/rad and N m/m, are of one kind). Beside the
parameters, the values whose kind the format declares by their key (`declared_unit`: masses,
inertias, points and positions, poses by their entries, orientations and phases, times, a
load's amplitude by its component, gravity) take a unit of that kind: `mass = "450 g"` is not
one (no `g`), `mass = "0.45 kg"`, `lower_point = ["-20 mm", "10 mm"]`, `pose = ["0 mm", "30 mm",
"5 deg"]`, `amplitude = "2 N m"` for an `Mz` load. Any other value (a head-neck posture already
in degrees, a frequency, a key whose kind depends on its model) is refused with a unit: it
stays SI (`check_quantities`). Text that does not read as a number with a unit is left for the
kind's reader, which refuses it where it expects a number (`DocumentChecker.number`) and keeps
it where it expects text (names, files).

The units are `UNITS`'s table rather than a units library, for the reason `quantity_in_si`
gives: a small closed set of spine-test quantities, errors that list exactly what is accepted,
no dependency at import.
"""

import re

from ._columns import UNITS

MASS_UNITS = {"kg": ("kg", 1.0)}
"""Units of mass beside `UNITS` (of a parameter per unit mass; no `g`: a pulse's peak is
stated in g, the gravity)."""

# A number followed by a unit expression (one that starts with a letter).
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*"
                       r"([A-Za-z][A-Za-z0-9^*/. ]*?)\s*$")


def unit_expression(text: str) -> tuple[float, dict[str, int]] | None:
    """A unit expression (`"N/mm"`, `"N m s/deg"`, `"kg mm^2"`) -> `(factor to SI, SI
    dimensions)`, the dimensions as exponents of `m`, `rad`, `N`, `s`, `kg` (`N m/rad` ->
    `{"N": 1, "m": 1, "rad": -1}`); `None` for text that is not one."""
    numerator, slash, denominator = text.partition("/")
    denominator = denominator.strip()
    if denominator.startswith("(") and denominator.endswith(")"):  # (`N m/(rad rad)`)
        denominator = denominator[1:-1]
    if "/" in denominator or (slash and not denominator.strip()) or not numerator.strip():
        return None
    factor, dimensions = 1.0, {}
    for sign, side in ((1, numerator), (-1, denominator)):
        for token in re.split(r"[\s*.]+", side.strip()) if side.strip() else []:
            name, _, power = token.partition("^")
            known = UNITS.get(name) or MASS_UNITS.get(name)
            if known is None or (power and not power.isdigit()):
                return None
            exponent = sign * int(power or "1")
            factor *= known[1] ** exponent
            for base in known[0].split():
                dimensions[base] = dimensions.get(base, 0) + exponent
    return factor, {base: e for base, e in dimensions.items() if e}


def quantity_in(text: str, unit: str) -> float | None:
    """A number typed with its unit (`"1800 Nmm"`, `"20N"`, `"0.5 N/mm"`) in `unit`, an SI
    unit or one of `UNITS`' (`"N m"`, `"mm"`, `"N/m"`), or bare (in `unit`); `None` for text
    that is not a number with a unit, and a `ValueError` for a unit of another kind."""
    try:
        return float(text)  # (bare, `1e5` included)
    except ValueError:
        pass
    match = _QUANTITY.match(text)
    if match is None:
        return None
    given, wanted = unit_expression(match.group(2)), unit_expression(unit)
    if given is None:
        known = ", ".join([*UNITS, *MASS_UNITS])
        raise ValueError(f"unknown unit {match.group(2).strip()!r} (units: {known}, with "
                         "powers, products and one '/': N/mm, N m/deg)")
    if given[1] != wanted[1]:  # (the radian counted: N m/deg is not a moment)
        raise ValueError(f"{match.group(2).strip()} is not a unit of {unit}")
    return float(match.group(1)) * given[0] / wanted[0]


def si_dimensions(unit: str) -> dict[str, int] | None:
    """The dimensions of an SI unit as parameters declare it (`"N m/rad"`, `"kg m^2"`,
    `"N m/(rad rad)"`); `None` for one `unit_expression` does not read."""
    parsed = unit_expression(unit)
    return None if parsed is None else parsed[1]


def _physical(dimensions: dict[str, int]) -> dict[str, int]:
    # The dimensions without the radian (a ratio of lengths): a symmetric matrix's mirrored
    # entries (N/rad and N m/m) are of one kind, and a unit written per degree or per radian
    # is of an angle's kind either way (its factor converts it).
    return {base: e for base, e in dimensions.items() if base != "rad"}


DECLARED_UNITS = {
    "mass": "kg", "masses": "kg", "inertia": "kg m^2", "head_inertia": "kg m^2",
    **dict.fromkeys(("point", "lower_point", "upper_point", "position", "centre", "radius",
                     "curve", "body_depth", "body_height", "spinous_reach", "disc_height",
                     "base_disc_height", "base_depth", "base_spinous_reach", "head_centre",
                     "head_anterior", "head_posterior"), "m"),
    "orientation": "rad", "phase": "rad", "t_end": "s", "t_peak": "s",
    "gravity": "m/s^2", "peak": "m/s^2",
}
"""The SI unit of the values that are not parameters, by their key, in every kind that has the
key (docs/formats/model-files.md): a value written with its unit there must be of this kind.
(`pose`, `initial_pose` and a load's `amplitude` are declared by `declared_unit`.)"""


def declared_unit(table: dict, key: str):
    """The SI unit the format declares for `table[key]` where it is not a parameter: a unit,
    a tuple of units by entry (a planar pose `(m, m, rad)`, a spatial one `(m, m, m, rad, rad,
    rad)`), or `None` for a key whose kind the format does not declare."""
    if key in ("pose", "initial_pose") and isinstance(table[key], list):
        return {3: ("m", "m", "rad"), 6: ("m",) * 3 + ("rad",) * 3}.get(len(table[key]))
    if key == "amplitude" and isinstance(table.get("component"), str):
        return {"F": "N", "M": "N m"}.get(table["component"][:1])
    return DECLARED_UNITS.get(key)


def quantities_in_document(document: dict, source: str) -> tuple[dict, dict[str, tuple]]:
    """The model document with every value written with its unit (module docstring) in SI,
    and what was read: `{path: (text, SI dimensions, SI value, declared SI unit or None)}`,
    each path as the document nests it (`springs[0].stiffness`, `bushings[0].stiffness[3]`;
    `check_quantities` names the parameter). Text that is not a number with a unit stays as it
    is, and the `[priors]` table (SI) is not read."""
    read: dict[str, tuple] = {}

    def walk(value, name, declared=None):
        if isinstance(value, dict):
            # (An OpenSim model file's `[initial]` and `[initial_speeds]` are keyed by its
            # coordinates' names, whatever they are: no declared kind there.)
            own = name not in ("initial", "initial_speeds")
            return {key: walk(item, f"{name}.{key}" if name else str(key),
                              declared_unit(value, key) if own else None)
                    for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{name}[{i}]",
                         declared[i] if isinstance(declared, tuple) else declared)
                    for i, item in enumerate(value)]
        match = _QUANTITY.match(value) if isinstance(value, str) else None
        parsed = None if match is None else unit_expression(match.group(2))
        if parsed is None:
            return value
        si = float(match.group(1)) * parsed[0]
        read[name] = (value.strip(), parsed[1], si,
                      declared if isinstance(declared, str) else None)
        return si

    converted = walk({k: v for k, v in document.items() if k != "priors"}, "")
    if "priors" in document:
        converted["priors"] = document["priors"]
    return converted, read


def parameter_of(path: str, names) -> str | None:
    """The parameter (of `names`) a document `path` sets: the same name, the tied parameter of
    an array of tables (`facets[1].stiffness` -> `facets.stiffness`), a matrix's diagonal
    entry given by the diagonal (`stiffness[3]` -> `stiffness[3][3]`) or the mirror of a
    symmetric matrix's entry (`stiffness[4][1]` -> `stiffness[1][4]`); `None` for none."""
    tail = re.match(r"^(.*?)((?:\[\d+\])*)$", path)
    stem, indices = tail.group(1), [int(i) for i in re.findall(r"\d+", tail.group(2))]
    candidates = [path]
    if len(indices) == 1:
        candidates.append(f"{stem}[{indices[0]}][{indices[0]}]")
    if len(indices) == 2:
        candidates.append(f"{stem}[{indices[1]}][{indices[0]}]")
    candidates += [re.sub(r"\[\d+\]\.", ".", c) for c in candidates]
    return next((c for c in candidates if c in names), None)


def check_quantities(read: dict[str, tuple], parameters, source: str) -> dict[str, tuple]:
    """Refuse a value written with its unit (`read`: `quantities_in_document`'s) that is
    neither a parameter's (of `parameters`, each with `name` and SI `unit`) nor one whose kind
    the format declares (`declared_unit`), or whose unit is not of that kind, naming the key;
    returns `{path: (text, SI value)}` of those read."""
    units = {p.name: p.unit for p in parameters}
    for path, (text, dimensions, _, declared) in read.items():
        name = parameter_of(path, units)
        if name is None and declared is not None:
            # (Exactly the declared kind: an angle in deg or rad, not a ratio of lengths; a
            # moment in N m, not N m/rad.)
            if si_dimensions(declared) != dimensions:
                kind = "an angle" if declared == "rad" else f"in {declared}"
                raise ValueError(f"{source}: {path}: {text!r} is not of this value's kind "
                                 f"({kind})")
            continue
        if name is None:
            raise ValueError(f"{source}: {path}: {text!r}: a unit is read on a model parameter "
                             "and on the values whose kind the format declares (masses, "
                             "inertias, points, poses of 3 or 6 entries, times, a load's "
                             "amplitude: docs/formats/model-files.md); write this value as an "
                             "SI number")
        expected = si_dimensions(units[name])
        if expected is None:
            raise ValueError(f"{source}: {path}: {text!r}: {name}'s unit ({units[name]}) is "
                             "not one a file can state; write this value as an SI number")
        if _physical(expected) != _physical(dimensions):
            raise ValueError(f"{source}: {path}: {text!r} is not of the parameter's kind "
                             f"({name} is in {units[name]}; e.g. N/mm for N/m, N m/deg for "
                             "N m/rad)")
    return {path: (text, si) for path, (text, _, si, _) in read.items()}


def with_units_as_read(document: dict, quantities: dict[str, tuple]) -> dict:
    """`document` (SI; changed in place and returned) with each value the file wrote with its
    unit (`quantities`: `{path: (text, SI value)}`, `ModelFile.quantities`) written back in
    that unit, whatever its value now is: a fitted 26410 N/m that the file gave as `"27 N/mm"`
    becomes `"26.41 N/mm"` (15 significant digits). A path the document no longer holds as a
    number is left alone."""
    for path, (text, _) in quantities.items():
        unit = _QUANTITY.match(text).group(2)
        factor = unit_expression(unit)[0]
        node, steps = document, re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)
        keys = [int(index) if index else key for key, index in steps]
        try:
            for key in keys[:-1]:
                node = node[key]
            value = node[keys[-1]]
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            node[keys[-1]] = f"{value / factor:.15g} {unit}"
    return document
