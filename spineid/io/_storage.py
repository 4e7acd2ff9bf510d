"""OpenSim's data files: storage tables (`.sto`, `.mot`) and marker trajectories (`.trc`), read
into SI arrays, and storage tables and marker files written for OpenSim users
(docs/formats/data-files.md).

- **Storage (`.sto`, `.mot`).** A header of `key=value` lines (or `key value` in the old SIMM
  `.mot`: `name`, `datacolumns`, `datarows`, `range`), ended by a line `endheader`, then a row of
  tab-separated column labels, the first `time`, then one row of numbers per sample. Version 1
  (OpenSim 3's `Storage`: first line the table's name, then `version=1`, `nRows`, `nColumns`,
  `inDegrees`) and versions 2 and 3 (OpenSim 4's `STOFileAdapter`: `inDegrees`, `DataType`,
  `version`, `OpenSimVersion`) are read the same way. `inDegrees=yes` says that the rotational
  columns are in degrees; which columns are rotational the file does not say, so the reader
  reports the flag and the caller converts the columns it knows to be angles
  (`StorageTable.radians`).
- **Marker trajectories (`.trc`).** Line 1 `PathFileType`, line 2 the names and line 3 the
  values of `DataRate`, `CameraRate`, `NumFrames`, `NumMarkers`, `Units`, ...; line 4
  `Frame#`, `Time` and each marker's name over its three columns; line 5 `X1 Y1 Z1 X2 ...`;
  then the frames. A marker missing in a frame is an empty cell (a gap, read as NaN). The
  coordinates are converted to metres from `Units` (`mm`, `cm`, `m`).

Every fault raises `ValueError` naming the file and the line.
"""

import dataclasses
import math
import pathlib
from collections.abc import Collection

import numpy as np

from ._atomic import atomic_path, readable_file

# Length units of a .trc file's `Units` field, in metres.
TRC_UNITS = {"mm": 1e-3, "cm": 1e-2, "dm": 1e-1, "m": 1.0}


@dataclasses.dataclass(frozen=True)
class StorageTable:
    """An OpenSim storage table: `time` (s, `(k,)`), `columns` (label -> `(k,)`, as in the file,
    in its order), `in_degrees` (the header's `inDegrees`: `True`, `False`, or `None` where it
    does not say), `header` (every header key and value, as text) and `source` (the path)."""

    time: np.ndarray
    columns: dict
    in_degrees: bool | None
    header: dict
    source: str = "<storage>"

    def radians(self, label: str) -> np.ndarray:
        """Column `label` as an angle in rad: converted from degrees where the header says
        `inDegrees=yes`. Raises `ValueError` for an unknown label, listing those present."""
        values = self.column(label)
        return np.radians(values) if self.in_degrees else values

    def column(self, label: str) -> np.ndarray:
        """Column `label` as stored (`(k,)`). Raises `ValueError` for an unknown label, listing
        those present."""
        if label not in self.columns:
            raise ValueError(f"{self.source}: no column {label!r}; its columns: "
                             f"{list(self.columns)}")
        return self.columns[label]


@dataclasses.dataclass(frozen=True)
class MarkerTrajectories:
    """Marker positions of a `.trc` file: `time` (s, `(k,)`), `markers` (name -> `(k, 3)`, m,
    in the file's laboratory axes; NaN where the marker is missing), `rate` (Hz, the
    `DataRate`), `units` (the file's own length unit) and `source` (the path)."""

    time: np.ndarray
    markers: dict
    rate: float
    units: str
    source: str = "<markers>"


def _text_lines(path: pathlib.Path, kind: str) -> list[str]:
    path = readable_file(path, "data file")
    try:
        content = path.read_text(encoding="utf-8-sig")  # (a byte-order mark is no text)
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a UTF-8 text file ({error.reason} at byte "
                         f"{error.start}); expected {kind}") from None
    return content.splitlines()


def _number(path, number: int, cell: str, label: str, allow_missing: bool = False) -> float:
    text = cell.strip()
    if not text and allow_missing:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}: line {number}, column {label}: expected a number, got "
                         f"{cell!r}") from None
    if not math.isfinite(value) and not (allow_missing and math.isnan(value)):
        raise ValueError(f"{path}: line {number}, column {label}: expected a finite number, "
                         f"got {cell!r}")
    return value


def _strictly_increasing(path, time: np.ndarray, line_numbers: list[int]):
    steps = np.diff(time)
    if np.any(steps <= 0):
        bad = int(np.argmax(steps <= 0)) + 1
        raise ValueError(f"{path}: line {line_numbers[bad]}: time must be strictly increasing "
                         f"(unsorted or repeated time {float(time[bad])!r})")


def read_storage(path, missing: Collection[str] | bool = ()) -> StorageTable:
    """Read an OpenSim storage file (`.sto` or `.mot`, versions 1-3 and the old SIMM `.mot`
    header; module docstring). Columns labelled in `missing` (or every column, for `True`)
    may hold values not measured (an empty cell or `NaN`: NaN); the time never.

    **Returns:** a `StorageTable` (times in s; columns as stored: convert angles with
    `StorageTable.radians`). Raises `ValueError` naming the file and line for a missing
    `endheader`, a row with the wrong number of cells, a cell that is not a finite number, a
    repeated label, fewer than two rows, or a time that does not increase.
    """
    path = pathlib.Path(path)
    lines = _text_lines(path, "an OpenSim storage file (.sto, .mot)")
    end = next((i for i, line in enumerate(lines) if line.strip().lower() == "endheader"), None)
    if end is None:
        raise ValueError(f"{path}: no 'endheader' line: not an OpenSim storage file (.sto, "
                         f".mot); its first line: {lines[0][:80]!r}" if lines else
                         f"{path}: empty file; expected an OpenSim storage file")
    header = {}
    for line in lines[:end]:
        text = line.strip()
        if not text:
            continue
        if not header and "=" not in text and " " not in text:
            header["name"] = text  # (version 1: the first line is the table's name)
            continue
        key, _, value = text.partition("=") if "=" in text else text.partition(" ")
        header[key.strip()] = value.strip()
    # The labels: the first non-blank line after the header.
    start = next((i for i in range(end + 1, len(lines)) if lines[i].strip()), None)
    if start is None:
        raise ValueError(f"{path}: no column labels after 'endheader' (line {end + 1})")
    labels = [label.strip() for label in lines[start].split("\t")]
    if len(labels) == 1:  # (some writers separate by spaces)
        labels = lines[start].split()
    while labels and not labels[-1]:
        labels.pop()
    if not labels or labels[0].lower() != "time":
        raise ValueError(f"{path}: line {start + 1}: the first column label must be 'time', "
                         f"got {labels[:1]}")
    if len(set(labels)) != len(labels):
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        raise ValueError(f"{path}: line {start + 1}: repeated column labels {repeated}")
    rows, numbers = [], []
    for index in range(start + 1, len(lines)):
        text = lines[index].strip()
        if not text:
            continue
        cells = text.split("\t") if "\t" in text else text.split()
        while len(cells) > len(labels) and not cells[-1].strip():
            cells.pop()
        if len(cells) != len(labels):
            raise ValueError(f"{path}: line {index + 1}: expected {len(labels)} values "
                             f"({len(labels)} column labels), got {len(cells)}")
        rows.append([_number(path, index + 1, cell, label, label != labels[0] and (
                         missing is True or (missing is not False and label in missing)))
                     for cell, label in zip(cells, labels)])
        numbers.append(index + 1)
    if len(rows) < 2:
        raise ValueError(f"{path}: {len(rows)} data row(s); at least 2 are needed")
    table = np.array(rows, dtype=float)
    _strictly_increasing(path, table[:, 0], numbers)
    degrees = header.get("inDegrees", "").lower()
    in_degrees = {"yes": True, "true": True, "no": False, "false": False}.get(degrees)
    if degrees and in_degrees is None:
        raise ValueError(f"{path}: inDegrees={header['inDegrees']!r}: expected yes or no")
    return StorageTable(table[:, 0], {label: table[:, j] for j, label in
                                      enumerate(labels[1:], start=1)},
                        in_degrees, header, str(path))


def write_storage(path, time, columns, *, in_degrees: bool = False,
                  name: str = "spineid") -> pathlib.Path:
    """Write `columns` (label -> `(k,)`) against `time` (s, `(k,)`) as an OpenSim storage file
    (version 1, which OpenSim 3 and 4 read; tab-separated, numbers to full float64
    precision), atomically (`spineid.io.atomic_path`). `in_degrees` is written as the header's
    `inDegrees`: say `True` only if the rotational columns are in degrees.

    **Returns:** the path. Raises `ValueError` for columns of another length than `time`, a
    label with a tab or line break, or a label `time`, and for times that are not finite and
    strictly increasing (OpenSim's readers need them so).
    """
    path = pathlib.Path(path)
    time = np.asarray(time, dtype=float)
    if time.ndim != 1 or not np.all(np.isfinite(time)) or np.any(np.diff(time) <= 0):
        raise ValueError(f"{path}: time must be finite and strictly increasing (s, (k,))")
    values = {label: np.asarray(column, dtype=float) for label, column in columns.items()}
    for label, column in values.items():
        if column.shape != time.shape:
            raise ValueError(f"{path}: column {label!r} has shape {column.shape}; time has "
                             f"{time.shape}")
        if any(c in label for c in "\t\r\n") or label.lower() == "time" or not label:
            raise ValueError(f"{path}: column label {label!r}: labels must be non-empty, "
                             "without tabs or line breaks, and not 'time'")
    lines = [name, "version=1", f"nRows={time.size}", f"nColumns={len(values) + 1}",
             f"inDegrees={'yes' if in_degrees else 'no'}", "endheader",
             "\t".join(["time", *values])]
    for k in range(time.size):
        lines.append("\t".join(repr(float(v)) for v in
                               [time[k], *(column[k] for column in values.values())]))
    with atomic_path(path) as temporary:
        temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_trc(path, time, markers, *, units: str = "mm") -> pathlib.Path:
    """Write marker positions `markers` (name -> `(k, 3)`, m, NaN where a marker is not seen)
    against `time` (s, `(k,)`, finite and strictly increasing) as a `.trc` file (module
    docstring) in `units` (`TRC_UNITS`; numbers to full precision, a gap an empty cell),
    atomically. Its `DataRate` is one over the median time step. **Returns:** the path.
    Raises `ValueError` for bad times, shapes, names (empty, tabs or line breaks) or units."""
    path = pathlib.Path(path)
    time = np.asarray(time, dtype=float)
    if time.ndim != 1 or time.size < 2 or not np.all(np.isfinite(time)) or np.any(
            np.diff(time) <= 0):
        raise ValueError(f"{path}: time must be finite and strictly increasing (s, (k,), k >= 2)")
    if units not in TRC_UNITS:
        raise ValueError(f"{path}: units {units!r}: expected one of {list(TRC_UNITS)}")
    values = {name: np.asarray(p, dtype=float) / TRC_UNITS[units] for name, p in markers.items()}
    for name, p in values.items():
        if p.shape != (time.size, 3):
            raise ValueError(f"{path}: marker {name!r} has shape {p.shape}; expected "
                             f"({time.size}, 3)")
        if not name or any(c in name for c in "\t\r\n"):
            raise ValueError(f"{path}: marker name {name!r}: names must be non-empty, without "
                             "tabs or line breaks")
    rate = 1.0 / float(np.median(np.diff(time)))
    lines = [f"PathFileType\t4\t(X/Y/Z)\t{path.name}",
             "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\t"
             "OrigDataStartFrame\tOrigNumFrames",
             f"{rate:g}\t{rate:g}\t{time.size}\t{len(values)}\t{units}\t{rate:g}\t1\t"
             f"{time.size}",
             "\t".join(["Frame#", "Time"] + [f"{name}\t\t" for name in values]).rstrip("\t"),
             "\t".join(["", ""] + [f"{axis}{k}" for k in range(1, len(values) + 1)
                                   for axis in "XYZ"]),
             ""]
    for i, t in enumerate(time):
        cells = [str(i + 1), repr(float(t))]
        cells += ["" if math.isnan(v) else repr(float(v)) for p in values.values() for v in p[i]]
        lines.append("\t".join(cells))
    with atomic_path(path) as temporary:
        temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_trc(path) -> MarkerTrajectories:
    """Read a marker trajectory file (`.trc`, module docstring), converting the coordinates to
    metres from its `Units`.

    **Returns:** `MarkerTrajectories` (NaN where a marker is missing). Raises `ValueError`
    naming the file and line for a header that does not parse, unknown `Units`, a frame with
    too many cells, a cell that is not a number, or a time that does not increase.
    """
    path = pathlib.Path(path)
    lines = _text_lines(path, "a marker trajectory file (.trc)")
    if len(lines) < 5 or not lines[0].startswith("PathFileType"):
        raise ValueError(f"{path}: line 1: expected 'PathFileType ...' (a .trc marker file), "
                         f"got {lines[0][:60]!r}" if lines else f"{path}: empty file")
    keys = [key.strip() for key in lines[1].split("\t")]
    settings = [value.strip() for value in lines[2].split("\t")]
    info = dict(zip(keys, settings))
    units = info.get("Units", "")
    if units not in TRC_UNITS:
        raise ValueError(f"{path}: line 3: Units {units!r}: expected one of "
                         f"{list(TRC_UNITS)}")
    try:
        rate = float(info.get("DataRate", "nan"))
    except ValueError:
        raise ValueError(f"{path}: line 3: DataRate {info.get('DataRate')!r}: expected a "
                         "number") from None
    names_line = lines[3].split("\t")
    if len(names_line) < 2 or names_line[0].strip() != "Frame#" or \
            names_line[1].strip() != "Time":
        raise ValueError(f"{path}: line 4: expected 'Frame#', 'Time' and the marker names, got "
                         f"{lines[3][:60]!r}")
    names = [name.strip() for name in names_line[2::3] if name.strip()]
    if not names:
        raise ValueError(f"{path}: line 4: no marker names")
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: line 4: repeated marker names")
    width = 2 + 3 * len(names)
    time, frames, numbers = [], [], []
    for index in range(5, len(lines)):
        if not lines[index].strip():
            continue
        cells = lines[index].rstrip("\r\n").split("\t")
        while len(cells) > width and not cells[-1].strip():
            cells.pop()
        if len(cells) > width:
            raise ValueError(f"{path}: line {index + 1}: {len(cells)} cells where Frame#, Time "
                             f"and {len(names)} markers x 3 make {width}")
        cells += [""] * (width - len(cells))  # trailing missing markers
        time.append(_number(path, index + 1, cells[1], "Time"))
        numbers.append(index + 1)
        frames.append([_number(path, index + 1, cell, f"{names[j // 3]} {'XYZ'[j % 3]}",
                               allow_missing=True)
                       for j, cell in enumerate(cells[2:])])
    if len(time) < 2:
        raise ValueError(f"{path}: {len(time)} frame(s); at least 2 are needed")
    time = np.array(time)
    _strictly_increasing(path, time, numbers)
    coordinates = np.array(frames, dtype=float).reshape(len(time), len(names), 3)
    coordinates *= TRC_UNITS[units]
    return MarkerTrajectories(time, {name: coordinates[:, i] for i, name in enumerate(names)},
                              rate, units, str(path))
