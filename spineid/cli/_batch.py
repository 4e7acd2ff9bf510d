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
import threading
import time

import equinox as eqx

from ..executors import Dask, Local
from ..executors import run_batch as parallel_run
from ..io import write_table, write_text_atomically
from ..identify._kinds._law_units import in_si, law_units, shown_in
from ..identify._kinds._matrix_units import entry_in, matrix_units
from ..identify._kinds._stiffness_fit import AXES
from ._arguments import in_option_terms
from ._outputs import figures, MARKER, OutputFolder

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
        misfits = [entry.get("fraction_of_range") for entry in
                   (goodness.get("misfit") or {}).values() if isinstance(entry, dict)]
        misfits = [m for m in misfits if isinstance(m, (int, float))]
        row.update({"converged": report.get("converged"),
                    "explains_data": goodness.get("explains_data"),
                    "level": goodness.get("level"),
                    "misfit %": round(100 * max(misfits), 4) if misfits else None,
                    "cost": report.get("cost"), "units": _units_read(report)})
        entries = [] if verb == "recover" else list(report.get("parameters", []))
        # A trajectory fit's parameters also in the data's units (`in_data_units`).
        entries += [dict(entry["in_data_units"],
                         name=f"{entry['name']} ({entry['in_data_units']['unit']})")
                    for entry in list(entries)
                    if isinstance(entry, dict) and isinstance(entry.get("in_data_units"), dict)]
        # A table law: first what a lab reads off it, the breakpoints (where they were fitted)
        # and the stiffness of each phase.
        if verb == "table" and isinstance(report.get("derived"), dict):
            knees, slopes = law_entries(report)
            entries = knees + _in_lab_units(report, knees, slopes) + slopes + entries
        if verb == "stiffness":
            entries += _matrix_in_lab_units(report, entries)
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


def law_entries(report: dict) -> tuple[list, list]:
    """The breakpoints `breakpoint[k]` (where they were fitted: the law has gap parameters)
    and the phase slopes `slope[k]` of a table law's report, `{name, value, stderr}` each, SI."""
    derived = report.get("derived") or {}
    free = any(str(entry.get("name", "")).startswith("gap[")
               for entry in report.get("parameters", []) if isinstance(entry, dict))
    knees = [dict(entry, name=f"breakpoint[{k}]") for k, entry in
             enumerate(derived.get("node_displacement", [])[1:-1], start=1)] if free else []
    slopes = [dict(entry, name=f"slope[{k}]")
              for k, entry in enumerate(derived.get("slopes", []), start=1)]
    return knees, slopes


def _in_lab_units(report: dict, knees: list, slopes: list) -> list:
    # The breakpoints and slopes of a table law also in the units of the file's columns
    # (`breakpoint[1] (mm)`, `slope[1] (N/mm)`), where the file gave its displacement or load
    # in a unit of its own (`law_units`, as the printed summary); none where both are SI.
    units = law_units(_read_as(report))
    if units is None or in_si(units):
        return []

    def converted(entry, kind):
        unit, factor = shown_in(kind, units)
        error = entry.get("stderr")
        return dict(entry, name=f"{entry['name']} ({unit})", value=entry["value"] * factor,
                    stderr=error * factor if isinstance(error, (int, float)) else error)

    return [converted(entry, kind) for kind, entries in (("displacement", knees),
                                                          ("load/displacement", slopes))
            for entry in entries if isinstance(entry.get("value"), (int, float))]


def _matrix_in_lab_units(report: dict, entries: list) -> list:
    # A stiffness matrix's entries also in the units of the test's columns (`K[tx,tx] (N/mm)`,
    # `K[rx,rx] (Nmm/deg)`), as its printed summary (`matrix_units`); none where all are SI.
    units = matrix_units(_read_as(report))
    shown = []
    for entry in entries if units else []:
        found = re.fullmatch(r"K\[(\w+),(\w+)\]", str(entry.get("name", "")))
        if found and set(found.groups()) <= set(AXES) and isinstance(entry.get("value"),
                                                                      (int, float)):
            unit, factor = entry_in(AXES.index(found[1]), AXES.index(found[2]), units)
            error = entry.get("stderr")
            shown.append(dict(entry, name=f"{entry['name']} ({unit})",
                              value=entry["value"] * factor,
                              stderr=error * factor if isinstance(error, (int, float)) else error))
    return shown


def _read_as(report: dict) -> dict:
    # The first `read_as` of a report's `data` entries (how its file's columns were read).
    return next((entry.get("read_as") for entry in report.get("data") or []
                 if isinstance(entry, dict) and isinstance(entry.get("read_as"), dict)), {})


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


# Arguments that say where and how a batch runs or prints, not what it computes: left out of
# the key that a resumed batch must match (`si`: the units of the printed summaries only).
_HOW = ("output", "out", "overwrite", "resume", "executor", "scheduler", "workers", "threads",
        "data", "time_limit", "run", "si")


def _batch_key(arguments, data: list[pathlib.Path]) -> str:
    # What the batch computes: the verb, its options and every file (name, size, time).
    options = {k: v for k, v in sorted(vars(arguments).items()) if k not in _HOW}
    files = []
    for path in data:
        status = path.stat()
        files.append([str(path.resolve()), status.st_size, status.st_mtime_ns])
    return json.dumps({"options": options, "files": files}, default=str, sort_keys=True)


def uses_dask(arguments) -> bool:
    """Whether the options send a batch to Dask: `--executor dask`, or a `--scheduler` given
    (which implies it)."""
    return (getattr(arguments, "executor", "local") == "dask"
            or getattr(arguments, "scheduler", None) is not None)


def executor_of(arguments):
    """The executor the options ask for: `--executor local` (default; this process, on
    `--threads` threads) or `dask` (`--workers` local worker processes, or the cluster at
    `--scheduler`)."""
    scheduler = getattr(arguments, "scheduler", None)
    threads = getattr(arguments, "threads", None)
    if not uses_dask(arguments):
        if getattr(arguments, "workers", None) is not None:
            raise ValueError("--workers: only with --executor dask")
        return Local(threads=threads or 1)
    if threads is not None:
        raise ValueError("--threads: only with --executor local (a Dask worker runs one "
                         "file at a time; --workers sets how many)")
    return Dask(scheduler=scheduler, workers=getattr(arguments, "workers", None) or 2)


class _ThreadsOutput:
    """`sys.stdout` or `sys.stderr` while a batch's files run on threads of this process: what
    a thread writes goes to the buffer it captures into (`_captured`: its file's log.txt),
    anything else to the stream this stands in for."""

    def __init__(self, stream):
        self.stream, self.local = stream, threading.local()

    def _target(self):
        return getattr(self.local, "buffer", None) or self.stream

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


@contextlib.contextmanager
def _threads_output(threaded: bool):
    # Where several files run at once in this process, each thread's printing is routed to
    # its own file's log (`_captured`); `contextlib.redirect_stdout` swaps the process's stream.
    if not threaded:
        yield
        return
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ThreadsOutput(sys.stdout), _ThreadsOutput(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _captured(log: io.StringIO):
    # What the verb prints, into `log`: this thread's share of the routed streams, or the
    # process's streams redirected (one file at a time, or a worker process).
    routed = [s for s in (sys.stdout, sys.stderr) if isinstance(s, _ThreadsOutput)]
    if routed:
        for stream in routed:
            stream.local.buffer = log
        try:
            yield
        finally:
            for stream in routed:
                stream.local.buffer = None
        return
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        yield


class _WorkerFolder:
    # The output folder of one file, `OUT/<stem>/`, where the file's run happens (this process
    # or a worker's): what the verbs use of an `OutputFolder`, the files it was asked for
    # recorded for the batch's marker.
    def __init__(self, path: pathlib.Path, prefix: str = ""):
        self.path, self.prefix, self.files = path, prefix, []

    def __truediv__(self, name: str) -> pathlib.Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        self.files.append(f"{self.prefix}{name}")
        return path

    def finish(self) -> None:
        pass  # (the batch's marker is completed once, after the last file)

    def subfolder(self, name: str) -> "_WorkerFolder":
        inner = _WorkerFolder(self.path / name, f"{self.prefix}{name}/")
        inner.files = self.files  # (one list: the outer folder's)
        return inner

    def __str__(self) -> str:
        return str(self.path)


def run_file(job: dict) -> dict:
    """One file of a batch (wherever it runs): the verb on a copy of the arguments whose data
    is that file and whose output is `OUT/<stem>/`, what it printed in `log.txt`, its error in
    `error.txt`; returns `{"row", "files", "accepted"}` (the summary row, the files written,
    relative to `OUT`, and whether the verb returned 0)."""
    path, stem, out = pathlib.Path(job["path"]), job["stem"], pathlib.Path(job["out"])
    single = argparse.Namespace(**job["arguments"])
    # (`fit` takes a list of load cases; the other verbs one file.)
    setattr(single, job["data_field"], [str(path)] if job["command"] == "fit" else str(path))
    single.output = folder = _WorkerFolder(out / stem)
    single.out = str(out / stem)
    log = io.StringIO()
    clock = time.perf_counter()
    error, status, report = None, 2, None
    try:
        with _captured(log):
            status = job["verb"](single)
    except (ValueError, OSError, MemoryError, eqx.EquinoxRuntimeError) as caught:
        error = in_option_terms(" ".join(str(caught).split())) or type(caught).__name__
        if isinstance(caught, OSError) and caught.filename:
            error = f"{caught.filename}: {caught.strerror or caught}"
    seconds = time.perf_counter() - clock
    report_path = out / stem / "report.json"
    if error is None and report_path.is_file():
        report = json.loads(report_path.read_text(encoding="utf-8"))
    outcome = ("failed" if error is not None else "ok" if status == 0 else
               "not accepted")  # (did not converge, or its verdict rejects the fit)
    if error is not None:
        named = error.startswith(f"{path}:")  # (the file named once where the error does)
        write_text_atomically(folder / "error.txt", f"{error if named else f'{path}: {error}'}\n")
        log.write(f"spineid: error: {error}\n")
    write_text_atomically(folder / "log.txt", log.getvalue())
    return {"row": _summary_row(path, stem, job["group"], outcome, seconds, report, error,
                                job["command"]),
            "files": [f"{stem}/{name}" for name in dict.fromkeys(folder.files)],
            "accepted": status == 0 and error is None}


def run_batch(arguments, verb, data: list[pathlib.Path], data_field: str = "data") -> int:
    """Run `verb` (a `command_*` function) once per file of `data` (`run_file`) on the
    executor the options ask for (`executor_of`: this process, or Dask workers), each file's
    run a task; write summary.csv as each file's run arrives and population.png at the end
    (module docstring). The runs are kept in `OUT/.batch/` as they complete, so that
    `--resume` continues an interrupted batch with the files not yet done.

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
    executor = executor_of(arguments)
    stems = _stems(data)
    shared = {k: v for k, v in vars(arguments).items() if k not in ("output", "run")}
    jobs = [{"verb": verb, "arguments": shared, "path": str(path), "stem": stem,
             "out": str(out.path), "group": group_of(path, pattern), "data_field": data_field,
             "command": arguments.command} for path, stem in zip(data, stems)]
    rows: dict[int, dict] = {}
    accepted: dict[int, bool] = {}
    progress = _progress(len(data), arguments.command)

    def arrived(records):
        for record in records:
            index = record["index"]
            if record["ok"]:
                result = record["result"]
                for name in result["files"]:
                    out.file(name)  # (listed in the batch's marker)
                rows[index], accepted[index] = result["row"], result["accepted"]
            else:  # (a task that failed as a whole: its worker died)
                rows[index] = _summary_row(data[index], stems[index], jobs[index]["group"],
                                           "failed", 0.0, None, record["error"],
                                           arguments.command)
                accepted[index] = False
            _write_summary(out, [rows[i] for i in sorted(rows)])
            progress(data[index], rows[index]["status"], rows[index]["seconds"])

    out.file(".batch/batch.json")  # (prepares the folder; listed in the marker)
    with _threads_output(isinstance(executor, Local) and executor.threads > 1):
        try:
            parallel_run(run_file, jobs, executor=executor, chunk=1, out=out.path / ".batch",
                         resume=getattr(arguments, "resume", False), overwrite=True,
                         key=_batch_key(arguments, data), on_chunk=arrived)
        finally:  # (the bar's line ended before an error is printed under it)
            progress.close()
    ordered = [rows[i] for i in sorted(rows)]
    failed = sum(not ok for ok in accepted.values())
    population = figures.plot_population(
        ordered, out / "population.png",
        title=f"spineid {arguments.command}: {len(ordered)} files")
    mixed = _mixed_units(ordered)
    if mixed:
        print(mixed, flush=True)
    out.finish()
    print(f"{len(ordered) - failed} of {len(ordered)} files accepted; wrote "
          f"{out.path / 'summary.csv'}, {population} and one folder per file"
          + (f" ({executor.describe()})" if executor != Local() else ""),
          flush=True)
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

    update.close = lambda: bar is not None and bar.close()
    return update
