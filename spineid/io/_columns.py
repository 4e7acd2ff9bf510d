"""Data files with their own column names and units, read into spineid's quantities in SI
(docs/formats/data-files.md, "Files with other column names and units").

A reader asks for named quantities (`t`, `x`, `theta`, `Fx`, a displacement, ...), each with
its SI unit. Each is taken from the file's column of the same name, or of the name a mapping
gives (`--columns x=disp_x_mm`), or, where neither is there, from the one column named as the
quantity with a unit suffix (`dx_mm` for `dx`, `Fx_kN` for `Fx`). Its unit, in this order:
1. given (`--units x=mm`, keyed by the quantity or by the file's column);
2. the unit suffix of the column's name, its last `_`-separated part, matched exactly
   (`UNITS`: `Time_s`, `disp_x_mm`, `rot_deg`, `F_N`, `M_Nm`, ...; a moment's unit also as
   `SUFFIX_SPELLINGS` spell it: `M_N*mm`);
3. in an OpenSim storage file (`.sto`, `.mot`): its `inDegrees` for angles (an angle in a file
   without it, an old SIMM `.mot`, needs `--units`), SI otherwise;
4. SI where the column carries spineid's own name (`t`, `x`, `theta`, `Fx`, ...).
Otherwise the unit is unknown and the file is refused, listing every such column: spineid
never guesses a unit. A unit of another kind than the quantity (`x` from a column in `deg`) is
refused too. What was read from where, in which unit and by which rule is returned
(`ColumnsRead.read_as`) so that the verbs print it and write it into their reports.
"""

import dataclasses
import math
import pathlib
import re
from collections.abc import Collection, Mapping

import numpy as np

from ._storage import read_storage, StorageTable
from ._tables import read_table, table_header

# Unit names (a column's suffix or a `--units` value) -> (SI unit, factor to SI).
UNITS = {
    "s": ("s", 1.0), "ms": ("s", 1e-3),
    "m": ("m", 1.0), "dm": ("m", 1e-1), "cm": ("m", 1e-2), "mm": ("m", 1e-3),
    "um": ("m", 1e-6),
    "rad": ("rad", 1.0), "deg": ("rad", math.pi / 180.0),
    "N": ("N", 1.0), "kN": ("N", 1e3),
    "Nm": ("N m", 1.0), "Nmm": ("N m", 1e-3),
}

# Other spellings of a moment's unit in a column's suffix (`Mx_N*mm`), read as the one of
# `UNITS` they spell.
SUFFIX_SPELLINGS = {"N*mm": "Nmm", "N.mm": "Nmm", "N*m": "Nm", "N.m": "Nm"}

# The unit name of each SI unit.
SI_NAMES = {"s": "s", "m": "m", "rad": "rad", "N": "N", "N m": "Nm"}

# What each SI unit measures, for the messages.
KINDS = {"s": "a time", "m": "a length", "rad": "an angle", "N": "a force", "N m": "a moment"}

STORAGE_SUFFIXES = (".sto", ".mot")


@dataclasses.dataclass(frozen=True)
class ColumnsRead:
    """Quantities read from a data file: `values` (name -> `(k,)`, SI) and `read_as` (name ->
    `{"column", "unit", "factor", "rule"}`: the file's column, its unit, the factor to SI and
    which rule gave the unit, `"given"`, `"suffix"`, `"inDegrees"`, `"OpenSim SI"` or
    `"spineid name"`), `source` (the path)."""

    values: dict
    read_as: dict
    source: str

    def describe(self) -> str:
        """One line: each quantity, its column and unit where that is not spineid's own."""
        return describe_columns(self.read_as, self.source)


def describe_columns(read_as: dict, source: str) -> str:
    """One line on how the file `source` was read (a `read_as` of `read_quantities`): each
    quantity, its column and unit where that is not spineid's own."""
    parts = [f"{name} from {entry['column']!r} in {entry['unit']} ({entry['rule']})"
             for name, entry in read_as.items() if entry["rule"] != "spineid name"]
    return f"{source}: " + (", ".join(parts) if parts else "spineid's column names, SI units")


# A number as typed, with its unit or without: `10um`, `0.02 deg`, `5e-6`, `1.5e+3N`.
QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def parse_quantity(text: str, what: str) -> tuple[float, str | None] | None:
    """A number typed with its unit or bare (`"10um"`, `"0.02 deg"`, `"5e-6"`) ->
    `(number, unit)`, the unit one of `UNITS` or `None`, the number as typed (not converted);
    `None` for text that is not a number (each option says what it expected). Raises
    `ValueError` naming `what` for an unknown unit, listing the known ones. Every option that
    takes a quantity reads it here."""
    match = QUANTITY.match(text)
    if match is None:
        return None
    unit = match.group(2) or None
    if unit is not None and unit not in UNITS:
        raise ValueError(f"{what + ' ' if what else ''}{text!r}: unknown unit {unit!r}; known "
                         f"units: {list(UNITS)}")
    return float(match.group(1)), unit


def quantity_in_si(text, si_unit: str, column_unit: str | None = None,
                   what: str = "value") -> tuple[float, str]:
    """A number a user typed, with its unit (`"10um"`, `"0.02deg"`, one of `UNITS`) or bare,
    in SI (`si_unit`: `"m"`, `"rad"`, ...), and how it was read (`"10 um"`, `"0.01 mm, the
    column's unit"`, `"5e-06 m (SI)"`). A bare number is in `column_unit` (the unit of the
    data file's column it belongs to) where there is one, else SI; a number (not text) is SI.
    Raises `ValueError` naming `what` for text that is not a number with a unit, an unknown
    unit (listing the known ones) or a unit of another kind than `si_unit`.

    The units are the table `UNITS` rather than a units library: the quantities of spine
    tests are a small closed set (lengths, angles, times, forces, moments), and a table gives
    errors that list exactly what is accepted, with no dependency at import."""
    if not isinstance(text, str):
        return float(text), f"{float(text):g} {si_unit} (SI)"
    quantity = parse_quantity(text, what)
    if quantity is None:
        raise ValueError(f"{what} {text!r}: expected a number, with or without a unit "
                         f"(e.g. 10um, 0.02deg, 5e-6)")
    number, unit = quantity
    if unit:
        how = f"{number:g} {unit}"
    elif column_unit is not None:
        unit, how = column_unit, f"{number:g} {column_unit}, the column's unit"
    else:
        return number, f"{number:g} {si_unit} (SI)"
    base, factor = UNITS[unit]
    if base != si_unit:
        raise ValueError(f"{what} {text!r}: {unit} is {KINDS[base]}, expected "
                         f"{KINDS.get(si_unit, si_unit)} (in {si_unit})")
    return number * factor, how


def unit_in_lab(si_unit: str, length: str | None = None, angle: str | None = None
                ) -> tuple[str, float]:
    """A parameter's SI unit (`"N/m"`, `"N m/rad"`, `"N s/m"`, `"m"`, `"kg m^2"`, ...) in a
    lab's units: each length (`m`, but not the metre of a moment, `N m`) in `length`, each
    angle (`rad`) in `angle` (names of `UNITS`, `None` keeping SI), with the factor that takes
    a value in SI to it: `("N/m", "mm")` -> `("N/mm", 1e-3)`, `("N m/rad", None, "deg")` ->
    `("N m/deg", pi/180)`."""
    def lab(base, numerator, before):
        moment = base == "m" and numerator and before == "N"
        return length if base == "m" and not moment else angle if base == "rad" else None

    return units_substituted(si_unit, lab)


def units_substituted(unit: str, lab) -> tuple[str, float]:
    """`unit` (`"numerator tokens/denominator tokens"`, each token `name` or `name^power`) with
    each token's name replaced by `lab(name, in_numerator, token_before)` where that is a name
    of `UNITS` (other tokens kept), and the factor that takes a value in `unit`'s own (SI)
    names to the new ones: `lab` = {m: mm} takes `"N/m^2"` to `("N/mm^2", 1e-6)`."""
    numerator, _, denominator = unit.partition("/")
    factor, sides = 1.0, []
    for sign, tokens in ((1, numerator.split()), (-1, denominator.split())):
        shown = []
        for k, token in enumerate(tokens):
            base, _, power = token.partition("^")
            name = lab(base, sign == 1, tokens[k - 1] if k else None)
            if name is None or name not in UNITS or not (power or "1").isdigit():
                shown.append(token)
                continue
            factor *= UNITS[name][1] ** (-sign * int(power or "1"))
            shown.append(name + (f"^{power}" if power else ""))
        sides.append(" ".join(shown))
    return sides[0] + (f"/{sides[1]}" if sides[1] else ""), factor


def column_unit(measurements, channel: str, what: str) -> str | None:
    """The unit of the column `channel` was read from in every one of `measurements` (their
    `read_as`; for a model's markers, the marker file's unit), or `None` where each is in SI
    (spineid's own column names); a `ValueError`
    naming `what` where the files disagree (a bare number would mean two things)."""
    found = set()
    for measurement in measurements:
        read_as = getattr(measurement, "read_as", None) or {}
        entry = read_as.get(channel)
        unit = None if entry is None else entry.get("unit")
        if "model" in (read_as.get("markers") or {}):  # (a model's markers: one unit for all)
            unit = read_as.get("units")
        # (a column in an SI unit, such as an OpenSim file's metres, reads as SI does)
        found.add(None if unit not in UNITS or UNITS[unit][1] == 1.0 else unit)
    if len(found) > 1:
        raise ValueError(f"{what}: the data files give {channel} in different units "
                         f"({', '.join(sorted(str(u or 'SI') for u in found))}): give the unit "
                         f"with the number (e.g. {channel}=10um)")
    return found.pop() if found else None


def noise_in_si(noise, measurements, channels, units, what: str = "--noise"):
    """Per-channel noise as typed (`{channel: "10um"}`, bare text in the channel's column
    unit, numbers in SI; `quantity_in_si`) -> `({channel: SI value}, {channel: how it was
    read})`; `None` as it is. `channels` and `units` are the model's channels and their SI
    units (`observable_names`, `observable_units`)."""
    if noise is None:
        return None, {}
    si_units = dict(zip(channels, units))
    values, read = {}, {}
    for channel, text in noise.items():
        if channel not in si_units:  # (the problem refuses it, naming the model's channels)
            values[channel], read[channel] = float("nan"), str(text)
            continue
        typed = parse_quantity(text, f"{what} {channel}") if isinstance(text, str) else None
        bare = typed is not None and typed[1] is None
        unit = column_unit(measurements, channel, what) if bare else None
        values[channel], read[channel] = quantity_in_si(
            text, si_units[channel] or "SI", unit, f"{what} {channel}")
    return values, read


def parse_assignments(text: str | None, option: str) -> dict[str, str]:
    """`NAME=VALUE,NAME=VALUE` (a command line's `--columns` or `--units`) as a dict. Raises
    `ValueError` naming `option` for an entry without `=`, an empty side or a repeated name."""
    if text is None:
        return {}
    result = {}
    for entry in (part.strip() for part in text.split(",")):
        name, equals, value = entry.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name or not value:
            raise ValueError(f"{option}: {entry!r}: expected NAME=VALUE (comma-separated)")
        if name in result:
            raise ValueError(f"{option}: {name!r} given twice")
        result[name] = value
    return result


def _unit(name: str, option: str = "--units") -> tuple[str, float]:
    if name not in UNITS:
        raise ValueError(f"{option}: unknown unit {name!r}; known units: {list(UNITS)}")
    return UNITS[name]


def _check_gaps(path, table, complete) -> None:
    # A storage file read with gaps allowed: each column of `complete` (the columns of
    # quantities that may not have values missing) without a NaN, or refused naming the first.
    for label in sorted(complete & set(table.columns)):
        empty = np.flatnonzero(np.isnan(table.columns[label]))
        if empty.size:
            raise ValueError(f"{path}: column {label!r} has no value at t = "
                             f"{table.time[empty[0]]:g} s (row {empty[0] + 1} of the data); "
                             "values may be missing only in measured channels")


def state_label(labels, name: str, kind: str = "value") -> str | None:
    """The one label of `labels` that is coordinate `name`'s `kind` (`value` or `speed`) in
    an OpenSim states file (`/jointset/J/<name>/<kind>`), or `None` if none or several."""
    found = [label for label in labels if label.endswith(f"/{name}/{kind}")]
    return found[0] if len(found) == 1 else None


def _by_suffix(source: dict, columns: Mapping, present) -> dict[str, list[str]]:
    # A quantity whose own name is no column of `present` (nor was it mapped) is read from the
    # one column `NAME_UNIT` (`dx_mm`, `Fx_kN`): `source` updated. Returns the quantities with
    # several such columns (none taken), and those columns.
    ambiguous = {}
    for name, column in list(source.items()):
        if name in columns or column in present:
            continue
        found = [c for c in present if c.rpartition("_")[0] == name
                 and _suffix_unit(c) in UNITS]
        if len(found) == 1:
            source[name] = found[0]
        elif found:
            ambiguous[name] = found
    return ambiguous


def _suffix_unit(column: str) -> str | None:
    # The unit a column's name ends with (`_mm`; `_N*mm` read as `Nmm`), or None without `_`.
    if "_" not in column:
        return None
    suffix = column.rpartition("_")[2]
    return SUFFIX_SPELLINGS.get(suffix, suffix)


def _missing_hints(source: dict, present) -> str:
    # Why a missing column might be missing: a column `NAME_SUFFIX` of an unknown unit.
    table = {"displacement": "--displacement", "load": "--load", "t": "--time"}
    hints = [f"{c!r} would be {name} but its unit {c.rpartition('_')[2]!r} is not one spineid "
             f"knows ({', '.join(UNITS)}): convert the column to one of them, or name it and "
             f"its unit (" + (f"spineid table: {table[name]} {c}" if name in table else
                              f"--columns {name}={c}") + f" --units {name}=UNIT)"
             for name, column in source.items() if column not in present
             for c in present if c.rpartition("_")[0] == name and _suffix_unit(c) not in UNITS]
    return "".join(f"; {hint}" for hint in hints)


def _check_stray_units(units: Mapping, wanted: Mapping, source: dict) -> None:
    # A `--units` entry must name a quantity read or the column it is read from.
    stray = sorted(set(units) - set(wanted) - set(source.values()))
    if stray:
        raise ValueError(f"--units: {stray} name neither a quantity read ({list(wanted)}) nor "
                         f"a column read ({sorted(set(source.values()))})")


def storage_table(path, tables: dict | None = None) -> StorageTable:
    """The OpenSim storage file `path` read with gaps allowed in every column
    (`read_storage(path, missing=True)`), taken from `tables` (`{str(path): StorageTable}`)
    where an earlier reader kept it, and kept there otherwise; `tables=None` reads it."""
    table = None if tables is None else tables.get(str(path))
    if table is None:
        table = read_storage(path, missing=True)
        if tables is not None:
            tables[str(path)] = table
    return table


def read_quantities(path, wanted: Mapping[str, str | tuple[str, ...]], *,
                    columns: Mapping[str, str] | None = None,
                    units: Mapping[str, str] | None = None, optional: Collection[str] = (),
                    min_rows: int = 2, missing: Collection[str] = (),
                    tables: dict | None = None) -> ColumnsRead:
    """Read the quantities `wanted` (name -> SI unit: `"s"`, `"m"`, `"rad"`, `"N"`, `"N m"`, or a
    tuple of those it may be in: a displacement in m or rad) from a CSV table or an OpenSim
    storage file, converted to SI (module docstring).

    **Arguments:** `columns`: quantity -> the file's column (default: the quantity's own
    name); `units`: quantity or column -> unit name (`UNITS`); `optional`: quantities read only
    where their column is present; `min_rows`: the fewest rows; `missing`: quantities that
    may have values not measured (an empty cell or `NaN`: NaN); `tables`: a storage file's
    table (`read_storage`, every column allowed gaps) is taken from it by path where it is
    there, and kept in it otherwise (`storage_table`), so that a file is parsed once.

    **Returns:** a `ColumnsRead`. Raises `ValueError` naming the file for a mapping or unit of
    an unknown quantity, a column that is not in the file (listing those present), a unit of
    the wrong kind, or columns whose unit is unknown (listing them all).
    """
    path = pathlib.Path(path)
    columns, units = dict(columns or {}), dict(units or {})
    unknown = sorted(set(columns) - set(wanted))
    if unknown:
        raise ValueError(f"--columns: {unknown} are not quantities this file is read for; "
                         f"expected some of {list(wanted)}")
    source = {name: columns.get(name, name) for name in wanted}
    storage = path.suffix.lower() in STORAGE_SUFFIXES
    if storage and "t" in wanted and "t" not in columns:
        source["t"] = "time"  # (a storage file's time column)
    if storage:  # (gaps checked once a states file's `/value` labels are resolved)
        table = storage_table(path, tables)
        present = {"time": table.time, **table.columns}
        for name, column in source.items():  # (a coordinate's `/jointset/J/C/value`)
            if name not in columns and column not in present:
                source[name] = state_label(present, name) or column
        ambiguous = _by_suffix(source, columns, present)
        _check_stray_units(units, wanted, source)
        _check_gaps(path, table, {source[n] for n in source if n not in missing})
    else:  # (the columns read checked as numbers, the others kept as text)
        header = table_header(path)
        for separator, said in ((";", "semicolons"), ("\t", "tabs")):
            if len(header) == 1 and separator in header[0] and header[0] not in source.values():
                raise ValueError(f"{path}: its header seems separated by {said} "
                                 f"({header[0]!r}); spineid reads comma-separated files with "
                                 "decimal points")
        ambiguous = _by_suffix(source, columns, header)
        _check_stray_units(units, wanted, source)  # (before a long file is read)
        present = read_table(path, optional=sorted(set(source.values())), others="text",
                             min_rows=min_rows,
                             missing=sorted({source[name] for name in missing if name in source}))
    for name in optional:  # (one whose column was named must be there)
        if name not in columns and source[name] not in present:
            del source[name]
    wanted = {name: kinds for name, kinds in wanted.items() if name in source}
    missing = [f"{column!r} for {name}" + (f" (one of {ambiguous[name]} could be: name it)"
                                           if name in ambiguous else "")
               for name, column in source.items() if column not in present]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; its columns: "
                         f"{list(present)} (name them with --columns QUANTITY=COLUMN; "
                         "spineid table: --displacement, --load, --time)"
                         + _missing_hints(source, present))
    read_as, unknown_units = {}, []
    for name, kinds in wanted.items():
        column = source[name]
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        if kinds in (("",), ()):  # (a channel of unknown unit: any)
            kinds = tuple(KINDS)
        si = kinds[0] if len(kinds) == 1 else None  # (None: SI, whichever it is)
        given = units.get(name, units.get(column))
        suffix = _suffix_unit(column)
        if given is not None:
            unit, rule = given, "given"
        elif suffix in UNITS:
            unit, rule = suffix, "suffix"
        elif storage and si == "rad" and table.in_degrees is not None:
            unit, rule = ("deg" if table.in_degrees else "rad"), "inDegrees"
        elif storage and si is not None and si != "rad":
            unit, rule = SI_NAMES[si], "OpenSim SI"
        elif storage and "rad" in kinds:  # (no inDegrees: an old SIMM .mot, degrees by habit)
            unknown_units.append(f"{column!r} (for {name}, an angle: the file has no "
                                 "inDegrees)")
            continue
        elif column == name:
            unit, rule = SI_NAMES.get(si, "SI"), "spineid name"
        else:
            unknown_units.append(f"{column!r} (for {name}, "
                                 f"{' or '.join(KINDS[k] for k in kinds)})")
            continue
        unit_si, factor = _unit(unit) if unit != "SI" else (None, 1.0)
        if unit_si is not None and unit_si not in kinds:
            raise ValueError(f"{path}: column {column!r} read as {name}, "
                             f"{' or '.join(KINDS[k] for k in kinds)}, but its unit {unit!r} "
                             f"({rule}) is {KINDS[unit_si]}")
        read_as[name] = {"column": column, "unit": unit, "factor": factor, "rule": rule}
    if unknown_units:
        raise ValueError(
            f"{path}: the unit of {', '.join(unknown_units)} is not known: no unit suffix "
            f"({', '.join('_' + u for u in UNITS)}) and not spineid's own column name; give "
            "it with --units QUANTITY=UNIT (spineid never guesses a unit)")
    values = {name: np.asarray(present[entry["column"]], dtype=float) * entry["factor"]
              for name, entry in read_as.items()}
    back = np.flatnonzero(np.diff(values["t"]) <= 0) if "t" in values else []
    if len(back):
        column = read_as["t"]["column"]
        raise ValueError(f"{path}: column {column!r} (time) must be strictly increasing; data "
                         f"row {back[0] + 2} ({present[column][back[0] + 1]:g}) does not follow "
                         f"data row {back[0] + 1} ({present[column][back[0]]:g})")
    return ColumnsRead(values, read_as, str(path))
