"""A stiffness matrix in the units of the quasi-static test it was fitted to:
`StiffnessFit.summary(units=...)`.

Entry `(i, j)` of `K` is load component `i` (a force for `i < 3`, N; a moment, N m) per
deflection component `j` (a translation for `j < 3`, m; a rotation, rad). A tester's file gives
its forces, moments, translations and rotations each in a unit of its own (`Fx_kN`, `Mx_Nmm`,
`dx_mm`, `b1_deg`); `matrix_units` names them and `entry_in` gives each entry in them."""

from ...io._columns import UNITS
from ...io._measurements import DEFLECTION_COLUMNS, LOAD_COLUMNS

_GROUPS = (("force", LOAD_COLUMNS[:3], "N"), ("moment", LOAD_COLUMNS[3:], "Nm"),
           ("length", DEFLECTION_COLUMNS[:3], "m"), ("angle", DEFLECTION_COLUMNS[3:], "rad"))
"""Each kind of column of a quasi-static test, its columns and the name of its SI unit."""


def matrix_units(read_as: dict | None) -> tuple[str, str, str, str] | None:
    """The units `(force, moment, length, angle)` (names of `UNITS`) a quasi-static test's
    columns were read in, from its `read_as` (`{"Fx": {"unit": "N", ...}, ...}`; a column
    read without one is SI); `None` where every one is SI, or where the columns of one kind
    came in different units (the summary then stays SI)."""
    return _units_of(read_as, _GROUPS)


def motion_units(read_as: dict | None) -> tuple[str, str] | None:
    """The units `(length, angle)` of a quasi-static test's motion columns (`dx`..`b3`), as
    `matrix_units` finds them, whatever its load columns' units."""
    return _units_of(read_as, _GROUPS[2:])


def _units_of(read_as, groups) -> tuple | None:
    # The one unit of each group's columns; None where one group's disagree or all are SI.
    chosen = []
    for _, columns, si in groups:
        found = {((read_as or {}).get(column) or {}).get("unit") or si for column in columns}
        if len(found) != 1 or not found <= set(UNITS):
            return None
        chosen.append(found.pop())
    if all(UNITS[unit][1] == 1.0 for unit in chosen):
        return None
    return tuple(chosen)


def loads_in(units: tuple[str, str, str, str]) -> dict[str, tuple[str, float]]:
    """Each load column (`Fx`..`Mz`, the verdict's channels) in `units` (`matrix_units`) with
    the factor that takes its SI value to it: `Fx` in `("kN", "Nm", "mm", "deg")` ->
    `("kN", 1e-3)`."""
    return {column: (units[0 if k < 3 else 1], 1.0 / UNITS[units[0 if k < 3 else 1]][1])
            for k, column in enumerate(LOAD_COLUMNS)}


def entry_in(i: int, j: int, units: tuple[str, str, str, str]) -> tuple[str, float]:
    """Entry `(i, j)`'s unit in `units` (`matrix_units`) and the factor that takes its SI
    value to it: `(0, 0)` in `("N", "Nm", "mm", "deg")` -> `("N/mm", 1e-3)`, `(3, 3)` ->
    `("Nm/deg", pi/180)`."""
    load, moved = units[0 if i < 3 else 1], units[2 if j < 3 else 3]
    return f"{load}/{moved}", UNITS[moved][1] / UNITS[load][1]


def described(units: tuple[str, str, str, str]) -> str:
    """The line that says a summary is in the test's units."""
    return (f"(in the test's units: forces {units[0]}, moments {units[1]}, translations "
            f"{units[2]}, rotations {units[3]}; report.json and stiffness.toml in SI)")
