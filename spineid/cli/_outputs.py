"""The outputs of the command line's verbs (docs/cli.md, "Output folders"): the one place that
checks an output folder before any work, writes into it and marks it complete; and the writers
of the fitting verbs (the fitted model file, the JSON report and the plots of a fit or a measure
recovery, and what else the model can be written as)."""

import contextlib
import datetime
import json
import math
import os
import pathlib
import re
import secrets
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np

try:
    import fcntl  # (advisory locks of an output folder; not on Windows)
except ImportError:
    fcntl = None

from .. import __version__
from ..elements import apply_values
from ..io import (
    export_model, write_model_file, write_storage, write_text_atomically, write_trajectory,
    write_trc,
)
from ..io._exports import EXPORT_FORMATS
from ..io._measurements import looks_like_ms
from ..io._toml import LARGEST_NUMBER
from .. import plots
from . import _drawing
from ._drawing import FitFigureData


class _OneFigureAtATime:
    """The plot functions of `spineid.plots` (`figures.plot_fit(...)`), drawing one figure at a
    time: pyplot's state belongs to the process, and a batch's files may run on threads
    (`--threads`). pyplot loads with the first figure drawn, so that a verb that draws nothing
    (`--no-plots`) never imports it.

    A SIGTERM that comes while a figure is drawn waits until it is done (`defer`; a second
    one does not wait): a figure cut off half-drawn can leave matplotlib unable to draw the
    next one in the same process ("Invalid bounding box"), which matters to a caller of `main`
    that goes on. (The time limit and Ctrl-C do not wait.)
    """

    _drawing = threading.RLock()
    _depth = [0]  # figures being drawn (by the thread holding `_drawing`)
    _deferred: list = []  # stops that came meanwhile

    def __getattr__(self, name: str):
        function = getattr(plots, name)

        def drawn(*args, **kwargs):
            with self._drawing:
                self._depth[0] += 1
                try:
                    return function(*args, **kwargs)
                finally:
                    self._depth[0] -= 1
                    if not self._depth[0] and self._deferred:
                        raise self._deferred.pop()

        return drawn

    def together(self, jobs) -> list:
        """Draw `jobs` (`(plot function name, arguments)` each, arguments of plain numbers:
        `FitFigureData`) in the worker processes the command's entry started
        (`spineid.cli._drawing`), all at once, else here, one after another; returns what each
        plot function returned."""
        return _drawing.draw(jobs, lambda name, args: getattr(self, name)(*args))

    def defer(self, stop) -> bool:
        """Whether `stop` (an exception class) is kept to be raised when the figure being
        drawn is done: while one is drawn and no stop is kept already."""
        if self._depth[0] and not self._deferred:
            self._deferred.append(stop)
            return True
        return False

    def forget_deferred(self) -> None:
        """Drop a kept stop (a new run begins)."""
        self._deferred.clear()


figures = _OneFigureAtATime()


def output_folder(out: str | pathlib.Path) -> pathlib.Path:
    """The output folder `--out` of a verb, checked before any computation (so that no fit
    runs for minutes and then fails to save): a `ValueError` with one line if it is an
    existing file, or if it (or, when missing, the nearest folder above it, where the verb
    will create it) is not a writable folder (a probe file is created and removed there).
    Nothing else is created here: refused input leaves no empty folder behind."""
    out = pathlib.Path(out)
    if out.is_symlink() and not out.exists():
        raise ValueError(f"--out {out}: a link to nothing; give a folder")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: an existing file, not a folder; give a folder (it is "
                         "created if missing)")
    existing = out.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: cannot be created, {existing} is a file")
    where = 'the folder' if existing == out.absolute() else existing
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {where} is not writable")
    # (The permission bits do not tell for a superuser, nor for /proc or a full disk.) The
    # probe's name is chosen before it is created, so that an interruption (SIGTERM, Ctrl-C)
    # landing anywhere, even inside the call that creates it, still has it removed.
    probe = existing / f".spineid-probe-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as error:
        raise ValueError(f"--out {out}: {where} is not writable ({error.strerror})") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
    return out


def output_file(path: str | pathlib.Path, overwrite: bool = False,
                inputs: tuple = ()) -> pathlib.Path:
    """An output file (`simulate --out`), checked before any computation: a `ValueError` with
    one line if `path` is a folder, something other than a file (a device, a pipe: never
    replaced, `--overwrite` or not), one of the run's `inputs` (paths), an existing file
    (unless `overwrite`), or its folder cannot be created or written (`output_folder`)."""
    path = pathlib.Path(path)
    if path.is_dir():
        raise ValueError(f"--out {path}: a folder; give a file name (e.g. {path / 'out.csv'})")
    if path.exists() and not path.is_file():
        raise ValueError(f"--out {path}: not a regular file (a device or a pipe); give a file "
                         "name")
    if any(path.exists() and pathlib.Path(given).exists()
           and path.resolve() == pathlib.Path(given).resolve() for given in inputs):
        raise ValueError(f"--out {path}: the run's own input; give another name")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise ValueError(f"--out {path}: the file exists; give --overwrite to replace it, or "
                         "another name")
    try:
        output_folder(path.parent)  # created by the writer, once there is something to write
    except ValueError as error:
        reason = str(error).split(": ", 1)[-1]
        raise ValueError(f"--out {path}: its folder cannot be used ({reason})") from None
    return path


MARKER = "spineid-outputs.json"
"""The completion marker of an output folder (docs/cli.md, "Output folders")."""

_FIT_FILES = ("fitted.toml", *(f"fitted{suffix}" for suffix, _ in EXPORT_FORMATS.values()),
              "report.json", "fit.png", "residuals.png", "identifiability.png")
# The files each verb writes (names relative to its folder; `profile_*.png` are the profile
# plots): what `--overwrite` removes besides the files an earlier run's marker lists.
VERB_OUTPUTS = {
    "fit": (*_FIT_FILES, "profile_*.png"),
    "recover": ("fitted.toml", "report.json", "density.png", "cumulative.png", "fit.png",
                "residuals.png"),
    "stiffness": ("report.json", "stiffness.toml", "loads.png"),
    "table": ("report.json", "law.toml", "law_fit.png", "profile_*.png"),
    "posterior": ("report.json", "draws.csv", "posterior.png", "trace.png", "posterior.nc"),
    "database": ("geometry.png", "l5_s1_law.png"),
    "whiplash": ("head.csv", "whiplash.png", "snapshots.png", "summary.json"),
    "segment": ("cases.csv", "segment.png", "report.json", "fitted.toml", "summary.json"),
    "spine": ("flexibility.csv", "report.json", "flexibility.png", "spine.png", "poses.csv",
              "scales.csv", "fitted.toml", "screws.csv"),
    "demo": ("liu_8_springs.csv", "liu_16_springs.csv", "liu_8_springs_model.png",
             "liu_16_springs_model.png", "trajectories.png",
             *(f"fit_liu_16_springs/{name}" for name in _FIT_FILES)),
}


class OutputFolder:
    """The output folder `--out` of one run of a verb.

    Checked when made, before any computation (`output_folder`), and refused with one line
    (a `ValueError`) if it already holds files, unless `overwrite`. Nothing is created until
    the first file is asked for (`file`): the folder (with its parents) is made then, and with
    `overwrite` the earlier outputs are removed first: the files an earlier run's marker lists
    and those this verb writes (`VERB_OUTPUTS`); other files are left alone. The completion
    marker `spineid-outputs.json` (verb, spineid version, files, times) is rewritten before
    every file with `"complete": false` and, by `finish`, with `"complete": true` once every
    file is written, so a folder either holds a whole result or says it does not. With
    `resume` (a batch's `--resume`) a folder holding an earlier run of the same verb is taken
    as it is: nothing is removed, and its marker's files stay listed.

    Two runs into one folder: the first to write locks the folder (an advisory lock of the
    folder itself, no file: released by `finish` or `release`, and by the operating system when
    the process ends; not on Windows), and checks again under the lock that the folder holds
    no other run's files; a second run is refused there in one line, before it writes a file.
    """

    def __init__(self, path: str | pathlib.Path, verb: str, overwrite: bool = False,
                 resume: bool = False):
        self.path, self.verb, self.overwrite = output_folder(path), verb, overwrite
        self.resume, self._lock = resume, None
        self.files: list[str] = []
        self.started = None
        held = self._held()
        if resume:
            # A batch to continue: its files are kept, and listed again by the marker.
            earlier = self._marker()
            single = earlier is not None and "report.json" in earlier.get("files", [])
            if held and (earlier is None or earlier.get("verb") != verb or single):
                raise ValueError(f"--out {path}: --resume continues a batch of `spineid "
                                 f"{verb}`, and this folder does not hold one"
                                 + (" (it holds a single run's result)" if single else ""))
            if earlier is not None:
                self.files = [name for name in earlier.get("files", [])
                              if isinstance(name, str)]
            return
        if held and overwrite:
            for name in self._earlier_outputs():  # what --overwrite cannot remove: said now
                entry = self.path / name
                if entry.exists() and not entry.is_symlink() and not entry.is_file():
                    raise ValueError(f"--out {path}: {name} is in the way of this verb's "
                                     "outputs and is not a file; move it away")
        if held and not overwrite:
            self._refuse_held(path, held)
        if self.path.is_dir():
            self._take_lock()  # (an existing folder: locked before the work, not after it)

    def _refuse_held(self, path, held: list[str]) -> None:
        # The folder holds files (of another run) and this one neither replaces nor resumes.
        if held:
            earlier = self._marker()
            what = ("files" if earlier is None else
                    f"the {'whole' if earlier.get('complete') else 'INCOMPLETE'} outputs of "
                    f"an earlier `spineid {earlier.get('verb', '?')}`")
            shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4
                                           else "")
            raise ValueError(f"--out {path}: already holds {what} ({shown}); give --overwrite "
                             "to replace them, or another folder")

    def _held(self) -> list[str]:
        # The names in the folder, if it exists.
        if not self.path.is_dir():
            return []
        return sorted(entry.name for entry in self.path.iterdir())

    def _marker(self) -> dict | None:
        # The marker of an earlier run, if the folder has a readable one.
        try:
            content = json.loads((self.path / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return content if isinstance(content, dict) else None

    def file(self, name: str) -> pathlib.Path:
        """The path to write output `name` (relative to the folder, e.g. `report.json` or
        `fit_liu_16_springs/report.json`) to; the first call prepares the folder (class
        docstring), every call records the name in the marker (still incomplete)."""
        if self.started is None:
            self._prepare()
        if name not in self.files:
            self.files.append(name)
            self._write_marker(complete=False)
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _earlier_outputs(self) -> list[str]:
        # The earlier outputs `--overwrite` removes: the names the earlier marker lists and
        # those of this verb's outputs, each a path inside the folder (a marker is data, not a
        # list of paths to trust: an absolute name or one leading out is ignored).
        earlier = self._marker() or {}
        names = {name for name in earlier.get("files", []) if isinstance(name, str)}
        names |= {str(path.relative_to(self.path)) for pattern in VERB_OUTPUTS.get(self.verb, ())
                  for path in self.path.glob(pattern)}
        names.discard(MARKER)
        return sorted(name for name in names if not pathlib.PurePath(name).is_absolute()
                      and ".." not in pathlib.PurePath(name).parts)

    def _take_lock(self) -> None:
        # The folder's lock, or one line saying another run holds it.
        if fcntl is None:
            return
        if self._lock is not None:
            return
        handle = os.open(self.path, os.O_RDONLY)  # (the folder's own descriptor)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            raise ValueError(f"--out {self.path}: another spineid run is writing into this "
                             "folder; wait for it to finish, or give another folder") from None
        except OSError as error:  # (a filesystem without locks: NFS, SMB, some clusters')
            os.close(handle)
            warnings.warn(f"--out {self.path}: the folder cannot be locked on this filesystem "
                          f"({error.strerror or error}); a second run into it is not refused")
            return
        self._lock = handle

    def release(self) -> None:
        """Let go of the folder's lock (after `finish`, or when the run ends otherwise)."""
        if self._lock is not None:
            os.close(self._lock)  # (closing the descriptor releases its lock)
            self._lock = None

    def _prepare(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        if not self.overwrite and not self.resume:
            try:  # (another run may have written here since this one was checked)
                self._refuse_held(self.path, self._held())
            except ValueError:
                self.release()
                raise
        self.started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        if not self.overwrite:
            return
        names = self._earlier_outputs()
        # First a marker that lists what is removed and says incomplete: interrupted on the
        # way, the folder claims no whole result and holds no file its marker does not list.
        self.files = names
        self._write_marker(complete=False)
        root = self.path.resolve()
        for name in names:
            path = self.path / name
            parent = path.parent.resolve()
            inside = parent == root or root in parent.parents  # (not through a linked folder)
            if inside and (path.is_symlink() or path.is_file()):  # a link itself, not its file
                path.unlink()
        self.files = []
        for folder in sorted({(self.path / name).parent for name in names}, reverse=True):
            if folder != self.path and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()

    def _write_marker(self, complete: bool) -> None:
        finished = (datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                    if complete else None)
        content = {"verb": self.verb, "spineid": __version__, "complete": complete,
                   "started": self.started, "finished": finished, "files": self.files}
        write_text_atomically(self.path / MARKER, json.dumps(content, indent=2) + "\n")

    def finish(self) -> None:
        """Mark the folder complete: every file of the run is written."""
        if self.started is None:
            self._prepare()
        self._write_marker(complete=True)
        self.release()

    def __truediv__(self, name: str) -> pathlib.Path:
        return self.file(name)

    def __str__(self) -> str:
        return str(self.path)

    def subfolder(self, name: str) -> "_Subfolder":
        """A folder inside this one whose files this folder's marker lists."""
        return _Subfolder(self, name)


class _Subfolder:
    # `folder / name` for a folder inside an `OutputFolder`, recorded in the outer marker.
    def __init__(self, outer: OutputFolder, name: str):
        self.outer, self.name = outer, name

    def __truediv__(self, name: str) -> pathlib.Path:
        return self.outer.file(f"{self.name}/{name}")

    def __str__(self) -> str:
        return str(self.outer.path / self.name)


def non_finite_field(content, where: str = "") -> str | None:
    """The first field of a report (nested dicts and lists) holding NaN or infinity, as
    `cost` or `parameters[2].value`; `None` if every number is finite. Reports write a
    quantity that does not exist (a standard error of an unidentifiable parameter) as null,
    so a non-finite number in one is a result that must not be presented."""
    if isinstance(content, float):
        return None if math.isfinite(content) else where
    items = (content.items() if isinstance(content, dict)
             else enumerate(content) if isinstance(content, (list, tuple)) else ())
    for key, value in items:
        found = non_finite_field(value, f"{where}.{key}" if isinstance(key, str) and where
                                 else key if isinstance(key, str) else f"{where}[{key}]")
        if found is not None:
            return found
    return None


def refuse_non_finite(report: dict, what: str) -> None:
    """A `ValueError` (one line, before anything is written) if `report` holds NaN or
    infinity as a value (`non_finite_field`)."""
    field = non_finite_field(report)
    if field is not None:
        raise ValueError(
            f"the {what} gave a non-finite number ({field}), so nothing was written: a data "
            "value, a noise or a start far outside its physical range makes the residuals "
            "overflow; check the data and the options")


def caution(result) -> str:
    """The first line of a fitted model file or fragment whose fit is not to be used as it
    is (`result.converged` false, or `result.accepted` false: it does not describe its data),
    without the `# ` a TOML comment adds; empty otherwise."""
    what = ("did not converge" if not result.converged else
            "does not describe its data" if result.accepted is False else None)
    return "" if what is None else (f"CAUTION: this fit {what} (report.json's goodness_of_fit "
                                    "and warnings say why); check it before use.")


def refuse_unphysical(names, values, what: str) -> None:
    """A `ValueError` (one line, before anything is written) if a fitted value is larger in
    magnitude than any physical quantity (`LARGEST_NUMBER`, the bound the model files are read
    with): a fit that ran off to infinity would write a model file spineid refuses to read."""
    for name, value in zip(names, np.asarray(values, dtype=float)):
        if abs(value) > LARGEST_NUMBER:
            raise ValueError(
                f"the {what} ended with {name} = {value:g}, outside any physical range (the "
                f"model files take at most {LARGEST_NUMBER:g}), so nothing was written: the "
                "data do not determine it, or the start was far off; fix it or start nearer")


def write_json(path: pathlib.Path, content: dict) -> pathlib.Path:
    """Write `content` as indented JSON, atomically; returns the path. A `ValueError` if it
    holds NaN or infinity (`refuse_non_finite`): JSON has no such numbers, and a result file
    never presents one as a value."""
    refuse_non_finite(content, f"result for {path.name}")
    return write_text_atomically(path, json.dumps(content, indent=2, allow_nan=False) + "\n")


def profile_file_name(name: str) -> str:
    """The plot file of a parameter's profile: `profile_<name>.png`, the name's brackets and
    dots made file-safe (`springs[0].stiffness` -> `profile_springs_0_stiffness.png`)."""
    return "profile_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") + ".png"


def write_profile_outputs(report: dict, profiles, out: OutputFolder, plots: bool = True
                          ) -> list[pathlib.Path]:
    """Add `profiles` (`Profile`s) to a fit's `report` (its `profiles` entry), write it again
    as report.json, and (with `plots`) plot each profile into `out`; returns the paths."""
    report = dict(report, profiles=[profile.to_dict() for profile in profiles])
    return [write_json(out / "report.json", report),
            *[figures.plot_profile(profile, out / profile_file_name(profile.name))
              for profile in (profiles if plots else [])]]


def write_fit_outputs(result, problem, out: OutputFolder, plots: bool = True
                      ) -> list[pathlib.Path]:
    """Write fitted.toml, report.json (with `profiles: []`), the fit plots (unless `plots` is
    false) and, for a model that can be written in another program's format
    (`export_formats`), that file (e.g. fitted.osim) into `out`; returns the paths. Nothing is
    written for a result that holds a non-finite number (`refuse_non_finite`)."""
    refuse_non_finite(result.report(), "fit")
    refuse_unphysical(result.names, result.values, "fit")
    if not all(np.all(np.isfinite(p)) for p in result.predictions):
        spans = [m.ts[-1] - m.ts[0] for m in problem.measurements if looks_like_ms(m.ts)]
        hint = (f"; the data's t spans {max(spans):g} s: if it is in milliseconds, convert it "
                "to seconds" if spans else ": start from values nearer the truth")
        raise ValueError(
            "the simulation fails at the parameters the fit ended with (or, for a fit that "
            f"could not begin, at the start), so nothing was written{hint}")
    channels = problem.channels
    undetermined = [name for name, known, bound in zip(
        result.names, result.identifiability.identifiable, result.at_bound)
        if not known and not bound]
    comments = (f"Not determined by the data one by one (their values depend on the start): "
                f"{', '.join(undetermined)}; see report.json's identifiability.",
                ) if undetermined else ()
    comments += tuple(problem.fitted_notes(result.values))  # (an inertia no body has)
    comments = (caution(result),) * bool(caution(result)) + comments
    # (each record's own start, fitted in a fit of several records, is in report.json alone:
    # the model file keeps one start, the model's)
    by_name = result.fitted_values()
    shared = {p.name: by_name[p.name] for p in problem.parameters if p.record is None}
    if len(shared) < len(problem.parameters):
        comments += ("Each record's start was fitted (names ending in @<record>): see "
                     "report.json; this file keeps the model's start.",)
    paths = [
        write_model_file(out / "fitted.toml", problem.model_file, shared, comments=comments),
        write_json(out / "report.json", dict(result.report(), profiles=[])),
    ]
    if plots:
        shown = FitFigureData.of(result)
        paths += figures.together([("plot_fit", (shown, channels, out / "fit.png")),
                                   ("plot_residuals", (shown, channels, out / "residuals.png")),
                                   ("plot_identifiability", (shown, out / "identifiability.png"))])
    model = problem.model_file.model
    formats = model.export_formats()
    if formats:
        fitted = apply_values(model, problem.parameters, jnp.asarray(result.values))
        for name in formats:
            suffix = EXPORT_FORMATS[name][0]
            paths.append(export_model(fitted, name, out / f"fitted{suffix}"))
    return paths


def write_recovery_outputs(result, problem, out: OutputFolder, plots: bool = True
                           ) -> list[pathlib.Path]:
    """Write fitted.toml (the atoms as [[springs]]), report.json and (unless `plots` is false)
    the plots of a measure recovery into `out`; returns the paths (none for a result with a
    non-finite number)."""
    refuse_non_finite(result.report(), "recovery")
    channels = problem.channels
    document = result.fitted_document(problem.model_file)
    paths = [
        write_model_file(out / "fitted.toml", problem.model_file, {}, document),
        write_json(out / "report.json", result.report()),
    ]
    if plots:
        paths += [*figures.plot_measure(result, out / "density.png", out / "cumulative.png"),
                  figures.plot_fit(result, channels, out / "fit.png"),
                  figures.plot_residuals(result, channels, out / "residuals.png")]
    return paths


def write_motion(out: pathlib.Path, ts, observed, model, solution) -> None:
    """Write a simulated motion: an OpenSim storage file (`.sto`, `.mot`: the model's
    `storage_columns`, for a model read from OpenSim its states' labels, rad, m and their
    rates), a marker file (`.trc`, mm: the markers of a model that has them) or a CSV of the
    observed channels `(k, c)` by the model's `observable_names`."""
    if out.suffix.lower() in (".sto", ".mot"):
        columns = model.storage_columns(solution.q, solution.qdot)
        write_storage(out, ts, {label: np.asarray(v) for label, v in columns.items()},
                      name=out.stem)
    elif out.suffix.lower() == ".trc":  # (a model with markers: command_simulate checks)
        placed = np.asarray(jax.vmap(model.marker_positions)(solution.q))
        write_trc(out, ts, {m.name: placed[:, k] for k, m in enumerate(model.markers)})
    else:
        write_trajectory(out, ts, observed, model.observable_names)
