"""CSV tables: the one reader and writer of every CSV spineid reads or writes (trajectories,
load tables, load-displacement tests, quasi-static tests, the bundled tables, the cases of a
segment study; docs/formats/data-files.md).

Every fault raises `ValueError` naming the file, the line or the column, and what was expected.
"""

import csv
import io
import math
import pathlib
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ._atomic import atomic_path, readable_file

PLANAR_TRAJECTORY_COLUMNS = ("t", "x", "y", "theta")
_ANNOUNCED = re.compile(r"\s*#\s*spineid:\s*(\d+)\s+rows\b")


def read_table(
    path: str | pathlib.Path,
    required: Sequence[str] = (),
    *,
    optional: Sequence[str] = (),
    text: Sequence[str] = (),
    others: str = "numbers",
    min_rows: int = 2,
    missing: Sequence[str] = (),
) -> dict[str, np.ndarray]:
    """Read a CSV with a header row into named columns.

    **Arguments:**
    - `path`: the CSV file.
    - `required`: columns that must be present; `optional`: columns read when present.
    - `text`: columns kept as text (arrays of `str`); every other column read is a float64 array
      of finite numbers.
    - `others`: what to do with columns that are neither required, optional nor text:
      `"numbers"` reads them as numbers too (the default), `"text"` as text (unchecked),
      `"ignore"` leaves them unread.
    - `min_rows`: the fewest data rows accepted.
    - `missing`: number columns that may hold values not measured: an empty cell, `nan` or
      `NaN` there reads as NaN (a gap in a measured trajectory).

    Lines starting with `#` before the header are comments. One of the form
    `# spineid: N rows` (written by `write_table(..., announce_rows=True)`) announces the
    number of data rows: a file with fewer, or whose last line is cut short (no final line
    break), is refused as truncated.

    Checks (each a `ValueError` naming the file, and the line or column): the file exists and
    is UTF-8 text, the `required` columns are present and no column name repeats, every row has one
    cell per column, every cell read as a number is a finite number, a column `t` is strictly
    increasing, and there are at least `min_rows` rows.

    **Returns:** `{column name: array (n,)}`, in the order of the header.
    """
    path = readable_file(path, "CSV table")
    try:
        # ("utf-8-sig": a spreadsheet's byte-order mark is not part of the first column's name)
        with path.open(newline="", encoding="utf-8-sig") as file:
            content = file.read()
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a UTF-8 text file ({error.reason} at byte "
                         f"{error.start}); expected a CSV table") from None
    # Leading comment lines (blank lines among them skipped), split at "\n" only: csv
    # reads the rest, with its own rules for line breaks inside quoted cells.
    comments, position, announced = 0, 0, None
    while position < len(content):
        end = content.find("\n", position)
        end = len(content) if end < 0 else end + 1
        line = content[position:end].strip()
        if line and not line.startswith("#"):
            break
        if line:
            comments += 1
            match = _ANNOUNCED.match(line)
            if match and announced is None:
                announced = int(match.group(1))
        position = end
    rows = [row for row in csv.reader(io.StringIO(content[position:], newline=""))
            if row and any(cell.strip() for cell in row)]
    if announced is not None:
        found = max(len(rows) - 1, 0)
        if found < announced or not content.endswith("\n"):
            raise ValueError(f"{path}: truncated: {found} data row(s)"
                             f"{'' if content.endswith(chr(10)) else ', the last cut short'}, "
                             f"where its first line announces {announced} (an interrupted write "
                             "or copy); write it again")
        if found > announced:
            raise ValueError(f"{path}: {found} data rows where its first line announces "
                             f"{announced}: rows were added after spineid wrote it; remove that "
                             "first line if they belong there")
    if not rows:
        raise ValueError(f"{path}: empty file; expected a header row {','.join(required)}")
    header = [name.strip() for name in rows[0]]
    absent = [name for name in required if name not in header]
    if absent:
        raise ValueError(
            f"{path}: header {header}: missing column(s) {absent}; expected {list(required)}"
        )
    if len(set(header)) != len(header):
        raise ValueError(f"{path}: header {header}: repeated column names")
    if others not in ("numbers", "text", "ignore"):
        raise ValueError(f"others={others!r}: expected 'numbers', 'text' or 'ignore'")
    wanted = set(required) | set(optional) | set(text)
    if others == "text":
        text = set(text) | {name for name in header if name not in wanted}
    read = [i for i, name in enumerate(header) if others != "ignore" or name in wanted]
    columns: dict[str, list] = {header[i]: [] for i in read}
    for number, row in enumerate(rows[1:], start=2 + comments):
        if len(row) != len(header):
            raise ValueError(
                f"{path}: line {number}: expected {len(header)} values, got {len(row)}"
            )
        for i in read:
            name, cell = header[i], row[i]
            if name in text:
                columns[name].append(cell.strip())
                continue
            if name in missing and cell.strip().lower() in ("", "nan"):
                columns[name].append(math.nan)
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
            bad = int(np.argmax(steps <= 0)) + 1  # the data row, from 0
            raise ValueError(
                f"{path}: line {bad + 2 + comments}: t must be strictly increasing (unsorted "
                f"or repeated time {float(table['t'][bad])!r})"
            )
    return table


def table_header(path) -> list[str]:
    """The column names of the CSV at `path` (its first row after the `#` comment lines), read
    without the rest; empty for anything but a regular file that can be read (its reader
    then says why: a FIFO is never opened, it would block)."""
    if not pathlib.Path(path).is_file():
        return []
    try:
        with pathlib.Path(path).open(newline="", encoding="utf-8-sig") as file:
            for line in file:
                if line.strip() and not line.strip().startswith("#"):
                    return [name.strip() for name in next(csv.reader([line]), [])]
    except (OSError, UnicodeDecodeError):
        return []
    return []


def has_columns(path, names: Sequence[str]) -> bool:
    """Whether the header of the CSV at `path` holds every one of `names` (`table_header`)."""
    return set(names) <= set(table_header(path))


def write_table(
    path: str | pathlib.Path,
    columns: Mapping[str, Sequence],
    *,
    number_format: Callable[[float], str] = lambda value: repr(float(value)),
    announce_rows: bool = False,
) -> pathlib.Path:
    """Write named columns (equal lengths) as a CSV with a header row, atomically (the file is
    the old one or the whole new one, `spineid.io.atomic_path`). With `announce_rows` the
    first line is the comment `# spineid: N rows`, so that `read_table` refuses a truncated
    copy (other readers skip it as a comment: `pandas.read_csv(path, comment="#")`,
    `numpy.loadtxt`).

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
        writer = csv.writer(file, lineterminator="\n")
        if announce_rows:
            file.write(f"# spineid: {lengths.pop() if lengths else 0} rows\n")
        writer.writerow(names)
        for row in zip(*values):
            writer.writerow([cell if isinstance(cell, str) else number_format(cell)
                             for cell in row])
    return path


def read_trajectory(
    path: str | pathlib.Path, channels: tuple[str, ...] = PLANAR_TRAJECTORY_COLUMNS[1:]
) -> tuple[np.ndarray, np.ndarray]:
    """Read a trajectory CSV (`t` then the pose channels, e.g. `t,x,y,theta`;
    docs/formats/data-files.md); an empty cell (or `nan`) of a channel is a value not
    measured, NaN.

    **Returns:** `(ts, values)` with `ts` (s, shape `(k,)`) and `values` (SI, shape
    `(k, len(channels))`) in the order of `channels`.
    """
    columns = read_table(path, ("t",) + tuple(channels), missing=tuple(channels))
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
    """Write `t` and the channel columns to a plain CSV file (the header first, as spreadsheets,
    `numpy.genfromtxt(names=True)` and `pandas.read_csv` expect) with full float64 precision,
    atomically: the file is whole or absent, and a result folder's completion marker
    (`spineid-outputs.json`) says whether the folder is. Files that older versions wrote with a
    first line `# spineid: N rows` are still checked against it when read (`read_table`)."""
    ts = np.asarray(ts)
    values = np.asarray(values).reshape(len(ts), -1)
    if values.shape[1] != len(channels):
        raise ValueError(f"{path}: {values.shape[1]} value columns for channels {channels}")
    write_table(path, {"t": ts, **{name: values[:, k] for k, name in enumerate(channels)}})
