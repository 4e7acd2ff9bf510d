"""Values with their units in model files (docs/formats/model-files.md, "Units").

A number in a model file is SI. A value may instead be written as text with its unit, as a lab
states it: `stiffness = "27 N/mm"`, `damping = "0.35 N m s/deg"`, `mass = "380 g"`,
`position = ["2 mm", "12 mm", "0 mm"]`. The unit is a product of the units of `UNITS` (and
`kg`, `g`), each with an optional whole power (`mm^2`), separated by spaces, `*` or `.`, with
at most one `/` before the denominator's: `N/mm`, `N m/deg`, `Nmm/deg`, `kg mm^2`. Such text
is read into SI before the model is built (`quantities_in_document`), so every check of the
kind applies to the SI value; where the value is a model parameter, its unit must be of the
parameter's kind (`N/mm` for a stiffness in N/m, not `N/deg`), else the file is refused naming
the key. The text each value was read from stays on the model file (`ModelFile.quantities`).

The units are `UNITS`'s table rather than a units library, for the reason `quantity_in_si`
gives: a small closed set of spine-test quantities, errors that list exactly what is accepted,
no dependency at import.
"""

import re

from ._columns import UNITS

MASS_UNITS = {"kg": ("kg", 1.0), "g": ("kg", 1e-3)}
"""Units of mass beside `UNITS` (a model's masses and inertias)."""

# A number followed by a unit expression (one that starts with a letter).
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*"
                       r"([A-Za-z][A-Za-z0-9^*/. ]*?)\s*$")


def unit_expression(text: str) -> tuple[float, dict[str, int]] | None:
    """A unit expression (`"N/mm"`, `"N m s/deg"`, `"kg mm^2"`) -> `(factor to SI, SI
    dimensions)`, the dimensions as exponents of `m`, `rad`, `N`, `s`, `kg` (`N m/rad` ->
    `{"N": 1, "m": 1, "rad": -1}`); `None` for text that is not one."""
    numerator, slash, denominator = text.partition("/")
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
    """The dimensions of an SI unit as parameters declare it (`"N m/rad"`, `"kg m^2"`);
    `None` for one `unit_expression` does not read (a dimensionless `"-"`)."""
    parsed = unit_expression(unit)
    return None if parsed is None else parsed[1]


def quantities_in_document(document: dict, source: str) -> tuple[dict, dict[str, tuple]]:
    """The model document with every value written with its unit (module docstring) in SI,
    and what was read: `{name: (text, SI dimensions, SI value)}`, the names as parameters are named
    (`springs[0].stiffness`, `bushings[0].stiffness[1][4]`). The `[priors]` table stays as it
    is (SI). Raises `ValueError` naming the file and key for text that is a number followed by
    something that is not a unit, listing the units known."""
    read: dict[str, tuple] = {}

    def walk(value, name):
        if isinstance(value, dict):
            return {key: walk(item, f"{name}.{key}" if name else str(key))
                    for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, f"{name}[{i}]") for i, item in enumerate(value)]
        match = _QUANTITY.match(value) if isinstance(value, str) else None
        if match is None:
            return value
        parsed = unit_expression(match.group(2))
        if parsed is None:
            raise ValueError(
                f"{source}: {name}: {value!r} is not a number with a unit: units are products "
                f"of {', '.join(list(UNITS) + list(MASS_UNITS))} with whole powers (mm^2) and "
                "at most one '/' (e.g. '27 N/mm', '0.5 N m/deg'); a bare number is SI")
        si = float(match.group(1)) * parsed[0]
        read[name] = (value.strip(), parsed[1], si)
        return si

    converted = walk({k: v for k, v in document.items() if k != "priors"}, "")
    if "priors" in document:
        converted["priors"] = document["priors"]
    return converted, read


def check_quantities(read: dict[str, tuple], parameters, source: str) -> None:
    """Refuse a parameter (of `parameters`, each with `name` and SI `unit`) written with a
    unit of another kind than its own (`read`: `quantities_in_document`'s), naming the key,
    the unit written and the parameter's SI unit."""
    units = {p.name: p.unit for p in parameters}
    for name, (text, dimensions, _) in read.items():
        expected = si_dimensions(units[name]) if name in units else None
        if expected is not None and expected != dimensions:
            raise ValueError(f"{source}: {name}: {text!r} is not of the parameter's kind "
                             f"(its SI unit is {units[name]}; e.g. N/mm for N/m, N m/deg "
                             "for N m/rad)")
