"""The output folders of the fitting verbs: the fitted model file, the JSON report and the plots
of a fit or a measure recovery, and what else the model can be written as (docs/cli.md)."""

import json
import math
import os
import pathlib
import re

import jax.numpy as jnp
import numpy as np

from ..elements import apply_values
from ..io import export_model, write_model_file, write_text_atomically
from ..io._exports import EXPORT_FORMATS
from ..plots import (
    plot_fit,
    plot_identifiability,
    plot_measure,
    plot_profile,
    plot_residuals,
)


def output_folder(out: str | pathlib.Path) -> pathlib.Path:
    """The output folder `--out` of a verb, checked before any computation (so that no fit
    runs for minutes and then fails to save): a `ValueError` with one line if it is an
    existing file, or if it (or, when missing, the nearest folder above it, where the verb
    will create it) is not a writable folder. Nothing is created here: refused input leaves
    no empty folder behind."""
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
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {'the folder' if existing == out.absolute() else existing}"
                         " is not writable")
    return out


def output_file(path: str | pathlib.Path) -> pathlib.Path:
    """An output file (`simulate --out`), checked before any computation: a `ValueError` with
    one line if `path` is a folder or its folder cannot be created or written
    (`output_folder`)."""
    path = pathlib.Path(path)
    if path.is_dir():
        raise ValueError(f"--out {path}: a folder; give a file name (e.g. {path / 'out.csv'})")
    try:
        output_folder(path.parent)  # created by the writer, once there is something to write
    except ValueError as error:
        reason = str(error).split(": ", 1)[-1]
        raise ValueError(f"--out {path}: its folder cannot be used ({reason})") from None
    return path


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


def write_profile_outputs(report: dict, profiles, out: pathlib.Path) -> list[pathlib.Path]:
    """Add `profiles` (`Profile`s) to a fit's `report` (its `profiles` entry), write it again
    as report.json, and plot each profile into `out`; returns the paths."""
    report = dict(report, profiles=[profile.to_dict() for profile in profiles])
    return [write_json(out / "report.json", report),
            *[plot_profile(profile, out / profile_file_name(profile.name))
              for profile in profiles]]


def write_fit_outputs(result, problem, out: pathlib.Path) -> list[pathlib.Path]:
    """Write fitted.toml, report.json (with `profiles: []`), the fit plots and, for a model that
    can be written in another program's format (`export_formats`), that file (e.g.
    fitted.osim) into `out`; returns the paths. Nothing is written for a result that holds a
    non-finite number (`refuse_non_finite`)."""
    refuse_non_finite(result.report(), "fit")
    if not all(np.all(np.isfinite(p)) for p in result.predictions):
        raise ValueError(
            "the simulation fails at the parameters the fit ended with (or, for a fit that "
            "could not begin, at the start), so nothing was written: start from values nearer "
            "the truth")
    out.mkdir(parents=True, exist_ok=True)
    channels = problem.channels
    paths = [
        write_model_file(out / "fitted.toml", problem.model_file, result.fitted_values()),
        write_json(out / "report.json", dict(result.report(), profiles=[])),
        plot_fit(result, channels, out / "fit.png"),
        plot_residuals(result, channels, out / "residuals.png"),
        plot_identifiability(result, out / "identifiability.png"),
    ]
    model = problem.model_file.model
    formats = model.export_formats()
    if formats:
        fitted = apply_values(model, problem.parameters, jnp.asarray(result.values))
        for name in formats:
            suffix = EXPORT_FORMATS[name][0]
            paths.append(export_model(fitted, name, out / f"fitted{suffix}"))
    return paths


def write_recovery_outputs(result, problem, out: pathlib.Path) -> list[pathlib.Path]:
    """Write fitted.toml (the atoms as [[springs]]), report.json and the plots of a measure
    recovery into `out`; returns the paths (none for a result with a non-finite number)."""
    refuse_non_finite(result.report(), "recovery")
    out.mkdir(parents=True, exist_ok=True)
    channels = problem.channels
    document = result.fitted_document(problem.model_file)
    return [
        write_model_file(out / "fitted.toml", problem.model_file, {}, document),
        write_json(out / "report.json", result.report()),
        *plot_measure(result, out / "density.png", out / "cumulative.png"),
        plot_fit(result, channels, out / "fit.png"),
        plot_residuals(result, channels, out / "residuals.png"),
    ]
