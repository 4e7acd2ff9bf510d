"""Many data files in one call: one run of a verb per file, a summary and a population plot
(docs/cli.md, "Batches").

`table`, `stiffness` and `recover` run as a batch when given several data files, a folder or a
glob pattern; `fit` when given `--each` (several files without it are the load cases of one
fit). Each file's run writes the verb's usual outputs into `OUT/<file stem>/`, with what it
printed in `log.txt` beside them; a file whose run fails gets its one-line error in
`OUT/<stem>/error.txt` and in its row of `OUT/summary.csv`, and the batch goes on. The summary
is written again (atomically) after every file, so an interrupted batch keeps every finished
row; `OUT/population.png` shows each fitted parameter across the files, grouped by `--group`.
The files of the whole batch are listed in one completion marker (`spineid-outputs.json`).
"""

import argparse
import contextlib
import glob
import io
import json
import math
import pathlib
import re
import sys
import time

import equinox as eqx

from ..io import write_table, write_text_atomically
from ..plots import plot_population
from ._outputs import MARKER, OutputFolder

# The files a folder given as data contributes.
DATA_SUFFIXES = (".csv", ".sto", ".mot", ".trc", ".c3d")

# Exit status of a batch in which N files gave no accepted result: BATCH_STATUS + min(N, 100),
# clear of 1 and 2 (one file's statuses), 124, 130 and 143.
BATCH_STATUS = 10
MAX_COUNTED = 100

# The files a batch writes into its folder, left out when that folder is read as data again.
_BATCH_OUTPUTS = ("summary.csv",)


def data_files(arguments: list[str], suffixes=DATA_SUFFIXES) -> list[pathlib.Path]:
    """The data files named by `arguments`: files as given, the data files (`suffixes`) of a
    folder (not its subfolders; not the summary of a batch written there), sorted, and the
    data files matching a glob pattern (one the shell did not expand; `**` reaches into
    subfolders), sorted. Raises `ValueError` for a folder without data files, a pattern
    without matches or a file that does not exist."""
    found: list[pathlib.Path] = []

    def data(p: pathlib.Path) -> bool:
        return p.is_file() and p.suffix.lower() in suffixes and not (
            p.name in _BATCH_OUTPUTS and (p.parent / MARKER).is_file())

    for argument in arguments:
        path = pathlib.Path(argument)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if data(p))
            if not inside:
                raise ValueError(f"{argument}: a folder with no data files "
                                 f"({', '.join(suffixes)})")
            found.extend(inside)
        elif path.exists():
            found.append(path)
        elif glob.has_magic(argument):
            matches = sorted(p for p in map(pathlib.Path, glob.glob(argument, recursive=True))
                             if data(p))
            if not matches:
                raise ValueError(f"{argument}: no data file ({', '.join(suffixes)}) matches "
                                 "this pattern")
            found.extend(matches)
        else:
            raise ValueError(f"{argument}: file not found")
    unique, seen = [], set()
    for path in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


def is_batch(arguments: list[str]) -> bool:
    """Whether the data arguments ask for a batch: several, a folder or a pattern."""
    return len(arguments) > 1 or any(
        pathlib.Path(a).is_dir() or (glob.has_magic(a) and not pathlib.Path(a).exists())
        for a in arguments)


def _stems(paths: list[pathlib.Path]) -> list[str]:
    # Each file's output folder name: its stem, made unique with -2, -3, ... in order (names
    # compared without case: one folder on a case-insensitive file system).
    names, used = [], set()
    for path in paths:
        stem = re.sub(r"[^A-Za-z0-9_.+-]+", "_", path.stem) or "data"
        name, count = stem, 1
        while name.lower() in used:
            count += 1
            name = f"{stem}-{count}"
        used.add(name.lower())
        names.append(name)
    return names


class _FileFolder:
    # The output folder of one file of a batch, `OUT/<stem>/`, inside the batch's folder:
    # what the verbs use of an `OutputFolder` (`folder / name`, `finish`, `subfolder`).
    def __init__(self, outer: OutputFolder, name: str):
        self.outer, self.name = outer, name
        self.path = outer.path / name

    def __truediv__(self, name: str) -> pathlib.Path:
        return self.outer.file(f"{self.name}/{name}")

    def finish(self) -> None:
        # The batch's marker is completed once, after the last file.
        pass

    def subfolder(self, name: str):
        return self.outer.subfolder(f"{self.name}/{name}")

    def __str__(self) -> str:
        return str(self.path)


def group_of(path: pathlib.Path, pattern: re.Pattern | None) -> str:
    """The group of a file: the first capture group of `pattern` found in its name (the whole
    match without groups), `"other"` where it does not match, `""` without a pattern."""
    if pattern is None:
        return ""
    match = pattern.search(path.name)
    if match is None:
        return "other"
    return (match.group(1) if pattern.groups else match.group(0)) or "other"


def _summary_row(path, stem, group, status, seconds, report, error, verb) -> dict:
    # One row of summary.csv: the file, its outcome, and per parameter its value and error
    # (for `recover`, the measure's moments: its atoms differ from file to file; a fit of
    # vector springs adds them too; a table law its breakpoints and phase slopes).
    row = {"file": str(path), "folder": stem, "group": group, "status": status,
           "seconds": round(seconds, 3), "error": error or ""}
    if report is not None:
        goodness = report.get("goodness_of_fit") or {}
        row.update({"converged": report.get("converged"),
                    "explains_data": goodness.get("explains_data"),
                    "cost": report.get("cost"), "units": _units_read(report)})
        entries = [] if verb == "recover" else list(report.get("parameters", []))
        # A table law: first what a lab reads off it, the breakpoints (where they were fitted)
        # and the stiffness of each phase.
        derived = report.get("derived") if verb == "table" else None
        if isinstance(derived, dict):
            # (breakpoints only where they were fitted: the law has gap parameters)
            free = any(str(entry.get("name", "")).startswith("gap[") for entry in entries
                       if isinstance(entry, dict))
            knees = [dict(entry, name=f"breakpoint[{k}]") for k, entry in
                     enumerate(derived.get("node_displacement", [])[1:-1], start=1)] \
                if free else []
            slopes = [dict(entry, name=f"slope[{k}]")
                      for k, entry in enumerate(derived.get("slopes", []), start=1)]
            entries = knees + slopes + entries
        moments = report.get("moments")
        if isinstance(moments, dict):
            entries += [dict(entry, name=name) for name, entry in moments.items()
                        if isinstance(entry, dict) and "value" in entry]
        for entry in entries:
            if isinstance(entry, dict) and "name" in entry and \
                    isinstance(entry.get("value"), (int, float)):
                row[entry["name"]] = entry["value"]
                row[f"{entry['name']} stderr"] = entry.get("stderr")
    return row


def _units_read(report: dict) -> str:
    # How the file's quantities were read: `name=column [unit]` where the file had its own
    # columns ("SI" for spineid's own names), from the report's `data` entries.
    parts = []
    for entry in report.get("data") or []:
        read_as = entry.get("read_as") if isinstance(entry, dict) else None
        if not isinstance(read_as, dict):
            continue
        for name, how in read_as.items():
            if isinstance(how, dict) and "unit" in how:
                parts.append(f"{name}={how.get('column', name)} [{how['unit']}]")
    return "; ".join(parts) if parts else "SI"


def _mixed_units(rows: list[dict]) -> str | None:
    # A note where the files of a batch were read in different units for one quantity (each
    # converted to SI, so their results compare; said, because it is often a mistake).
    units: dict[str, dict[str, int]] = {}
    for row in rows:
        for part in filter(None, (row.get("units") or "").split("; ")):
            if part == "SI" or "=" not in part or "[" not in part:
                continue
            name, unit = part.split("=", 1)[0], part.rsplit("[", 1)[1].rstrip("]")
            units.setdefault(name, {}).setdefault(unit, 0)
            units[name][unit] += 1
    mixed = {name: counts for name, counts in units.items() if len(counts) > 1}
    if not mixed:
        return None
    return ("note: the files were read in different units (each converted to SI, see the "
            "units column of summary.csv): " + "; ".join(
                f"{name} in " + ", ".join(f"{unit} ({count} files)"
                                          for unit, count in counts.items())
                for name, counts in mixed.items()))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def _write_summary(out: OutputFolder, rows: list[dict]) -> pathlib.Path:
    names = []
    for row in rows:
        names.extend(name for name in row if name not in names)
    return write_table(out / "summary.csv",
                       {name: [_cell(row.get(name)) for row in rows] for name in names})


def run_batch(arguments, verb, data: list[pathlib.Path], data_field: str = "data") -> int:
    """Run `verb` (a `command_*` function) once per file of `data`, each with its own copy of
    `arguments` whose `data_field` is that file and whose output is `OUT/<stem>/`; write
    summary.csv after every file and population.png at the end (module docstring).

    **Returns:** the exit status: 0 when every file gave an accepted result (its verb
    returned 0), else `BATCH_STATUS` plus the number of files that did not (counted up to
    `MAX_COUNTED`).
    Interruptions (Ctrl-C, SIGTERM, `--time-limit`) are not caught: they end the batch with
    every finished file and its summary row kept.
    """
    out: OutputFolder = arguments.output
    pattern = None
    if getattr(arguments, "group", None):
        try:
            pattern = re.compile(arguments.group)
        except re.error as error:
            raise ValueError(f"--group {arguments.group!r}: not a regular expression "
                             f"({error})") from None
    stems = _stems(data)
    rows: list[dict] = []
    failed = 0
    progress = _progress(len(data), arguments.command)
    for path, stem in zip(data, stems):
        single = argparse.Namespace(**vars(arguments))
        # (`fit` takes a list of load cases; the other verbs one file.)
        setattr(single, data_field, [str(path)] if arguments.command == "fit" else str(path))
        single.output = _FileFolder(out, stem)
        single.out = str(out.path / stem)
        log = io.StringIO()
        clock = time.perf_counter()
        error, status, report = None, 2, None
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                status = verb(single)
        except (ValueError, OSError, MemoryError, eqx.EquinoxRuntimeError) as caught:
            error = " ".join(str(caught).split()) or type(caught).__name__
            if isinstance(caught, OSError) and caught.filename:
                error = f"{caught.filename}: {caught.strerror or caught}"
        seconds = time.perf_counter() - clock
        report_path = out.path / stem / "report.json"
        if error is None and report_path.is_file():
            report = json.loads(report_path.read_text(encoding="utf-8"))
        outcome = ("failed" if error is not None else "ok" if status == 0 else
                   "not accepted")  # (did not converge, or does not explain the data)
        if error is not None:
            write_text_atomically(out / f"{stem}/error.txt", f"{path}: {error}\n")
            log.write(f"spineid: error: {error}\n")
        write_text_atomically(out / f"{stem}/log.txt", log.getvalue())
        failed += status != 0 or error is not None
        rows.append(_summary_row(path, stem, group_of(path, pattern), outcome, seconds, report,
                                 error, arguments.command))
        _write_summary(out, rows)
        progress(path, outcome, seconds)
    population = plot_population(rows, out / "population.png",
                                 title=f"spineid {arguments.command}: {len(rows)} files")
    mixed = _mixed_units(rows)
    if mixed:
        print(mixed, flush=True)
    out.finish()
    print(f"{len(rows) - failed} of {len(rows)} files accepted; wrote {out.path / 'summary.csv'}"
          f", {population} and one folder per file", flush=True)
    return 0 if not failed else BATCH_STATUS + min(failed, MAX_COUNTED)


def _progress(total: int, verb: str):
    # A progress bar over the files (tqdm, on the terminal's error stream), or one line per
    # file where tqdm is not installed.
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    bar = None if tqdm is None else tqdm(total=total, desc=f"spineid {verb}", unit="file",
                                         file=sys.__stderr__, leave=True)
    done = [0]

    def update(path, outcome, seconds):
        done[0] += 1
        if bar is not None:
            bar.set_postfix_str(f"{path.name}: {outcome.split(' (')[0]}")
            bar.update(1)
            if done[0] == total:
                bar.close()
        else:
            print(f"[{done[0]}/{total}] {path}: {outcome} ({seconds:.2f} s)", flush=True)

    return update
