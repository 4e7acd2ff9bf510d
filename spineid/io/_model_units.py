"""Parameter values with their units in model files (docs/formats/model-files.md, "Units").

A number in a model file is SI. A model parameter's value (the start of a fit: a stiffness, a
damping, a matrix entry) may instead be written as text with its unit, as a lab states it:
`stiffness = "27 N/mm"`, `damping = "0.35 N m s/deg"`, `stiffness = ["120 N/mm", ...]`. The
unit is a product of the units of `UNITS` (and `kg`), each with an optional whole power
(`mm^2`), separated by spaces, `*` or `.`, with at most one `/` before the denominator's:
`N/mm`, `N m/deg`, `Nmm/deg`, `kN/m`. Such text is read into SI before the model is built
(`quantities_in_document`), so every check of the kind applies to the SI value; its unit must
be of the parameter's kind (`N/mm` for a stiffness in N/m, not `N/deg`; radians count as a
ratio, so a symmetric matrix's mirrored entries, N/rad and N m/m, are of one kind), and a value
that is not a parameter's (a mass, a position, a load, whose kind the file does not declare, or a
head-neck posture in degrees) is refused: it stays SI (`check_quantities`). Text that does not
read as a number with a unit is left for the kind's reader, which refuses it where it expects
a number (`DocumentChecker.number`) and keeps it where it expects text (names, files).

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


def quantities_in_document(document: dict, source: str) -> tuple[dict, dict[str, tuple]]:
    """The model document with every value written with its unit (module docstring) in SI,
    and what was read: `{path: (text, SI dimensions, SI value)}`, each path as the document
    nests it (`springs[0].stiffness`, `bushings[0].stiffness[3]`; `check_quantities` names the
    parameter). Text that is not a number with a unit stays as it is, and the `[priors]` table
    (SI) is not read."""
    read: dict[str, tuple] = {}

    def walk(value, name):
        if isinstance(value, dict):
            return {key: walk(item, f"{name}.{key}" if name else str(key))
                    for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{name}[{i}]") for i, item in enumerate(value)]
        match = _QUANTITY.match(value) if isinstance(value, str) else None
        parsed = None if match is None else unit_expression(match.group(2))
        if parsed is None:
            return value
        si = float(match.group(1)) * parsed[0]
        read[name] = (value.strip(), parsed[1], si)
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
    """Refuse a value written with its unit (`read`: `quantities_in_document`'s) that is not a
    parameter's (of `parameters`, each with `name` and SI `unit`) or whose unit is not of the
    parameter's kind, naming the key; returns `{path: (text, SI value)}` of those read."""
    units = {p.name: p.unit for p in parameters}
    for path, (text, dimensions, _) in read.items():
        name = parameter_of(path, units)
        if name is None:
            raise ValueError(f"{source}: {path}: {text!r}: a unit is read on a model parameter "
                             "only (a stiffness, a damping: the values a fit starts from); "
                             "write this value as an SI number")
        expected = si_dimensions(units[name])
        if expected is None:
            raise ValueError(f"{source}: {path}: {text!r}: {name}'s unit ({units[name]}) is "
                             "not one a file can state; write this value as an SI number")
        if _physical(expected) != _physical(dimensions):
            raise ValueError(f"{source}: {path}: {text!r} is not of the parameter's kind "
                             f"({name} is in {units[name]}; e.g. N/mm for N/m, N m/deg for "
                             "N m/rad)")
    return {path: (text, si) for path, (text, _, si) in read.items()}


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
