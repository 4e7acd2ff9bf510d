"""CSV tables: the one reader and writer of every CSV spineid reads or writes (trajectories,
load tables, load-displacement tests, quasi-static tests, the bundled tables, the cases of a
segment study; docs/formats/data-files.md).

Every fault raises `ValueError` naming the file, the line or the column, and what was expected.
"""

import csv
import math
import pathlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ._atomic import atomic_path

PLANAR_TRAJECTORY_COLUMNS = ("t", "x", "y", "theta")


def read_table(
    path: str | pathlib.Path,
    required: Sequence[str] = (),
    *,
    optional: Sequence[str] = (),
    text: Sequence[str] = (),
    others: str = "numbers",
    min_rows: int = 2,
) -> dict[str, np.ndarray]:
    """Read a CSV with a header row into named columns.

    **Arguments:**
    - `path`: the CSV file.
    - `required`: columns that must be present; `optional`: columns read when present.
    - `text`: columns kept as text (arrays of `str`); every other column read is a float64 array
      of finite numbers.
    - `others`: what to do with columns that are neither required, optional nor text:
      `"numbers"` reads them as numbers too (the default), `"ignore"` leaves them unread.
    - `min_rows`: the fewest data rows accepted.

    Checks (each a `ValueError` naming the file, and the line or column): the file exists and
    is text, the `required` columns are present and no column name repeats, every row has one
    cell per column, every cell read as a number is a finite number, a column `t` is strictly
    increasing, and there are at least `min_rows` rows.

    **Returns:** `{column name: array (n,)}`, in the order of the header.
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
    if others not in ("numbers", "ignore"):
        raise ValueError(f"others={others!r}: expected 'numbers' or 'ignore'")
    wanted = set(required) | set(optional) | set(text)
    read = [i for i, name in enumerate(header) if others == "numbers" or name in wanted]
    columns: dict[str, list] = {header[i]: [] for i in read}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{path}: line {number}: expected {len(header)} values, got {len(row)}"
            )
        for i in read:
            name, cell = header[i], row[i]
            if name in text:
                columns[name].append(cell.strip())
                continue
            try:
                value = float(cell)
            except ValueError:
                raise ValueError(
                    f"{path}: line {number}, column {name}: expected a number, got {cell!r}"
                ) from None
            if not math.isfinite(value):
                raise ValueError(
                    f"{path}: line {number}, column {name}: expected a finite number, got "
                    f"{cell!r} (missing values, NaN and inf are not allowed)"
                )
            columns[name].append(value)
    n_rows = len(rows) - 1
    if n_rows < min_rows:
        raise ValueError(f"{path}: {n_rows} data row(s); at least {min_rows} are needed")
    table = {name: np.array(values, dtype=str if name in text else float)
             for name, values in columns.items()}
    if "t" in table and "t" not in text:
        steps = np.diff(table["t"])
        if np.any(steps <= 0):
            bad = int(np.argmax(steps <= 0)) + 3
            raise ValueError(
                f"{path}: line {bad}: t must be strictly increasing (unsorted or repeated time "
                f"{float(table['t'][bad - 2])!r})"
            )
    return table


def write_table(
    path: str | pathlib.Path,
    columns: Mapping[str, Sequence],
    *,
    number_format: Callable[[float], str] = lambda value: repr(float(value)),
) -> pathlib.Path:
    """Write named columns (equal lengths) as a CSV with a header row, atomically (the file is
    the old one or the whole new one, `spineid.io.atomic_path`).

    Numbers are written by `number_format` (default: `repr`, the shortest text that reads back
    to the same float64); text cells as they are. **Returns:** the path.
    """
    path = pathlib.Path(path)
    names = list(columns)
    values = [list(columns[name]) for name in names]
    lengths = {len(column) for column in values}
    if len(lengths) > 1:
        raise ValueError(f"{path}: columns of unequal lengths {sorted(lengths)} for {names}")
    with atomic_path(path) as temporary, temporary.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(names)
        for row in zip(*values):
            writer.writerow([cell if isinstance(cell, str) else number_format(cell)
                             for cell in row])
    return path


def read_trajectory(
    path: str | pathlib.Path, channels: tuple[str, ...] = PLANAR_TRAJECTORY_COLUMNS[1:]
) -> tuple[np.ndarray, np.ndarray]:
    """Read a trajectory CSV (`t` then the pose channels, e.g. `t,x,y,theta`;
    docs/formats/data-files.md).

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
    write_table(path, {"t": ts, **{name: values[:, k] for k, name in enumerate(channels)}})
