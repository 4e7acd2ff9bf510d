"""TOML documents: reading them, checking typed values in them with errors that name the file and
the key, setting parameter values by their path, and writing documents back.

Every violation raises `ValueError` naming the file, the key and what was expected (the file
contract: docs/formats/model-files.md).
"""

import math
import pathlib
import re
import sys
import tomllib
from typing import Any

import numpy as np

from ._atomic import readable_file


MISSING = object()

# Magnitudes no quantity of a spine model reaches in SI units: a number beyond them is a unit
# slip or a corrupted file, and left in, it swamps the motion in rounding (a pose of 1e300 m
# simulated to a "trajectory" with exit 0).
LARGEST_NUMBER = 1e20
MAX_SAMPLES = 10**7  # saved samples of a simulation
LARGEST_POSITION = 1e3  # m (and rad for the angles of a pose)
_POSITION_KEYS = ("pose", "initial_pose", "point", "lower_point", "upper_point", "position",
                  "centre")


class DocumentChecker:
    """Reads typed values out of a parsed TOML document, failing with the file and key."""

    def __init__(self, source: str, units: bool = True):
        # `units`: whether the document may write values with their units (a model file; a
        # design file may not), for the hint of `number`.
        self.source, self.units = source, units

    def fail(self, key: str, expected: str, got: Any = MISSING) -> None:
        found = "it is missing" if got is MISSING else f"got {got!r}"
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

    def number(self, table, name, key, *, minimum=None, positive=False, default=MISSING):
        if name not in table:
            if default is MISSING:
                self.fail(key, "a number")
            return default
        value = table[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, "a number" + (" (SI; a parameter's value, or a mass, length, "
                                         "angle, time or load, may carry its unit, e.g. "
                                         "'27 N/mm', '30 mm': docs/formats/model-files.md)"
                                         if isinstance(value, str) and self.units
                                         else " (SI)" if isinstance(value, str) else ""),
                      value)
        if not math.isfinite(value):
            self.fail(key, "a finite number", value)
        if abs(value) > LARGEST_NUMBER:
            self.fail(key, f"a number of magnitude at most {LARGEST_NUMBER:g} (SI units: this "
                      "one is outside any physical range)", value)
        if positive and value <= 0:
            self.fail(key, "a number > 0", value)
        if minimum is not None and value < minimum:
            self.fail(key, f"a number >= {minimum}", value)
        return float(value)

    def integer(self, table, name, key, *, minimum, default=MISSING):
        if name not in table:
            if default is MISSING:
                self.fail(key, "an integer")
            return default
        value = table[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(key, f"an integer >= {minimum}", value)
        return value

    def vector(self, table, name, key, length, *, default=MISSING):
        # length None: any non-empty list.
        expected = ("a non-empty list of numbers" if length is None
                    else f"a list of {length} numbers")
        if name not in table:
            if default is MISSING:
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
        largest = LARGEST_POSITION if name in _POSITION_KEYS else LARGEST_NUMBER
        if any(abs(v) > largest for v in value):
            self.fail(key, f"numbers of magnitude at most {largest:g} (SI units: "
                      + ("a position in m or an angle in rad; " if name in _POSITION_KEYS
                         else "") + "a larger one is outside any physical range)", value)
        return np.asarray(value, dtype=float)

    def boolean(self, table, name, key, *, default):
        value = table.get(name, default)
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value

    def choice(self, table, name, key, choices):
        value = table.get(name, MISSING)
        if value not in choices:
            self.fail(key, f"one of {list(choices)}", value)
        return value

    def tables(self, document, name):
        value = document.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail(name, f"an array of tables ([[{name}]])", value)
        return value


def read_toml(path: str | pathlib.Path, what: str = "model file") -> dict:
    """Parse a TOML file (`what` it is, for the messages); a missing or malformed file raises
    `ValueError` naming it."""
    path = readable_file(path, what)
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ValueError(f"{path}: {what} not found") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a UTF-8 text file ({error.reason} at byte "
                         f"{error.start}); a {what} is TOML text") from None
    except RecursionError:
        raise ValueError(f"{path}: arrays or tables nested too deeply to read (hundreds of "
                         f"levels); a {what} nests a few") from None
    except ValueError as error:  # (an integer longer than Python converts)
        raise ValueError(_long_number(path, error)) from None


def _long_number(path: pathlib.Path, error: ValueError) -> str:
    # The line and key of the first number too long to read (Python converts at most
    # `sys.get_int_max_str_digits()` digits of an integer, 4300 by default), or the parser's
    # own words where none is found.
    text = path.read_text(encoding="utf-8")
    found = re.search(r"\d{%d,}" % (sys.get_int_max_str_digits() + 1), text)
    if found is None:
        return f"{path}: not valid TOML: {error}"
    line = text.count("\n", 0, found.start()) + 1
    key = re.match(r"\s*([^=\s]+)\s*=", text.splitlines()[line - 1])
    return (f"{path}: line {line}: {key.group(1) + ' = ' if key else ''}a number of "
            f"{len(found.group())} digits, more than a number can have here")


def simulation_settings(document: dict, source: str = "<model>") -> tuple[float, int]:
    """`(t_end, n_samples)` of the `[simulation]` table (defaults 0.5 s and 501 samples)."""
    check = DocumentChecker(source)
    table = document.get("simulation", {})
    check.keys(table, "simulation", {"t_end", "n_samples"})
    t_end = check.number(table, "t_end", "simulation.t_end", positive=True, default=0.5)
    n_samples = check.integer(table, "n_samples", "simulation.n_samples", minimum=2, default=501)
    if n_samples > MAX_SAMPLES:
        check.fail("simulation.n_samples", f"an integer of at most {MAX_SAMPLES:g} (each sample "
                   "is kept in memory)", n_samples)
    return t_end, n_samples


def _toml_value(value) -> str:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):  # repr of numpy's float64 is np.float64(...)
        return repr(float(value))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise ValueError(f"cannot write {value!r} to TOML")


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key) -> str:
    # A bare key as it is; any other (a parameter name such as `springs[0].stiffness`, the key
    # of a `[priors]` entry) quoted, so that it reads back as one key.
    key = str(key)
    return key if _BARE_KEY.match(key) else _toml_value(key)


def _is_table_array(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def dumps_toml(document: dict) -> str:
    """Serialise a model document (scalars, arrays, tables, arrays of tables) as TOML."""
    lines = []
    for key, value in document.items():
        if not isinstance(value, dict) and not _is_table_array(value):
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in document.items():
        if isinstance(value, dict):
            lines += ["", f"[{_toml_key(key)}]"] + [f"{_toml_key(k)} = {_toml_value(v)}"
                                                    for k, v in value.items()]
        elif _is_table_array(value):
            for table in value:
                lines += ["", f"[[{_toml_key(key)}]]"] + [
                    f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


_PATH_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


def set_in_document(document: dict, name: str, value: float) -> None:
    """Set the entry `name` of a parsed model document: `springs[3].stiffness`,
    `bushings[0].damping[2]` (an entry of a list) or `bushings[0].stiffness[1][4]` (an entry
    of a matrix, which model files hold symmetric: its mirror entry `[4][1]` is set too;
    `[2][2]` of a matrix the file gives by its diagonal sets the diagonal's entry `[2]`).
    A tied parameter of an array of tables without an index (`facets.stiffness`) is set in
    every table."""
    node = document
    parts = name.split(".")
    for depth, part in enumerate(parts):
        match = _PATH_PART.match(part)
        if match is None:
            raise ValueError(f"not a parameter path: {name!r}")
        key = match.group(1)
        indices = [int(i) for i in re.findall(r"\d+", match.group(2))]
        if depth < len(parts) - 1:
            node = node[key]
            for i in indices:
                node = node[i]
            if isinstance(node, list):
                rest = ".".join(parts[depth + 1:])
                for table in node:
                    set_in_document(table, rest, value)
                return
            continue
        if not indices:
            node[key] = float(value)
        elif len(indices) == 1:
            node[key][indices[0]] = float(value)
        elif len(indices) == 2 and not isinstance(node[key][indices[0]], list):
            i, j = indices  # a diagonal entry of a matrix the file gives by its diagonal
            if i != j:
                raise ValueError(f"not an entry of the diagonal {key} holds: {name!r}")
            node[key][i] = float(value)
        elif len(indices) == 2:
            i, j = indices
            node[key][i][j] = node[key][j][i] = float(value)
        else:
            raise ValueError(f"not a parameter path: {name!r}")
