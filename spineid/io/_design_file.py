"""Design files (docs/formats/design-files.md): the experiments a rig can run on one specimen's
model, for `spineid design`. Each candidate replaces the model file's loads (and optionally
its initial pose) and sets its own duration and sampling."""

import copy
import dataclasses
import pathlib

import numpy as np

from ._model_file import load_model_file, ModelFile
from ._toml import DocumentChecker, read_toml

_TOP = {"model", "free", "noise", "criterion", "budget", "baseline", "limits", "candidates"}
_CANDIDATE = {"name", "loads", "duration", "samples", "initial_pose", "channels"}


@dataclasses.dataclass(frozen=True)
class DesignFile:
    """A parsed design file: `model` (the `ModelFile` it names), `candidates` (`(name,
    ModelFile, times, channels)` per experiment: the model with the candidate's loads, its
    sample times in s, and the channels it measures or `None` for all), `free`, `noise` (channel -> SI), `criterion` (`"D"`, `"A"`, `"E"` or a list
    of parameter names), `budget`, `baseline` (candidate names), `limits` (dict), `source`."""

    model: ModelFile
    candidates: tuple
    free: list[str]
    noise: dict[str, float]
    criterion: object
    budget: int
    baseline: list[str]
    limits: dict
    source: str


def _strings(check: DocumentChecker, document: dict, name: str, default=None) -> list[str]:
    value = document.get(name, default)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        check.fail(name, "a non-empty list of names", value)
    return value


def read_design_file(path: str | pathlib.Path) -> DesignFile:
    """Read and validate a design file; every mistake raises `ValueError` naming the file and
    the key (`candidates[2].duration`), before anything is simulated."""
    path = pathlib.Path(path)
    document = read_toml(path)
    check = DocumentChecker(str(path))
    check.keys(document, "", _TOP, {"model", "free", "noise", "candidates"})
    if not isinstance(document["model"], str):
        check.fail("model", "the path of a model file (relative to this file)",
                   document["model"])
    model_path = (path.parent / document["model"])
    if not model_path.is_file():
        check.fail("model", "an existing model file", str(model_path))
    model = load_model_file(model_path)
    free = _strings(check, document, "free")
    noise_table = document["noise"]
    check.keys(noise_table, "noise", set(model.model.observable_names))
    noise = {name: check.number(noise_table, name, f"noise.{name}", positive=True)
             for name in noise_table}
    criterion = document.get("criterion", "D")
    if isinstance(criterion, list):
        criterion = _strings(check, document, "criterion")
    elif not isinstance(criterion, str):
        check.fail("criterion", "'D', 'A', 'E' or a list of parameter names", criterion)
    budget = check.integer(document, "budget", "budget", minimum=1, default=1)
    baseline = _strings(check, document, "baseline") if "baseline" in document else []
    limits_table = document.get("limits", {})
    check.keys(limits_table, "limits", {"force", "moment", "duration", "total"})
    limits = {name: check.number(limits_table, name, f"limits.{name}", positive=True)
              for name in limits_table}
    tables = check.tables(document, "candidates")
    if not tables:
        check.fail("candidates", "at least one [[candidates]] table")
    candidates = []
    for i, table in enumerate(tables):
        key = f"candidates[{i}]"
        check.keys(table, key, _CANDIDATE, {"name", "loads", "duration"})
        if not isinstance(table["name"], str) or not table["name"]:
            check.fail(f"{key}.name", "a name", table["name"])
        duration = check.number(table, "duration", f"{key}.duration", positive=True)
        samples = check.integer(table, "samples", f"{key}.samples", minimum=3, default=201)
        changed = copy.deepcopy(model.document)
        changed["loads"] = copy.deepcopy(table["loads"])
        changed.pop("loads_file", None)
        if "initial_pose" in table:
            changed.setdefault("upper", {})["initial_pose"] = table["initial_pose"]
        try:
            candidate_model = ModelFile.from_document(changed, f"{path} {key}", model.folder)
        except ValueError as error:
            raise ValueError(f"{path}: {key} ({table['name']!r}): {error}") from None
        channels = None
        if "channels" in table:
            channels = table["channels"]
            observed = list(model.model.observable_names)
            if not isinstance(channels, list) or not channels or not all(
                    isinstance(c, str) and c in observed for c in channels) \
                    or len(set(channels)) != len(channels):
                check.fail(f"{key}.channels", f"distinct channels among {observed}", channels)
        candidates.append((table["name"], candidate_model,
                           np.linspace(0.0, duration, samples), channels))
    return DesignFile(model=model, candidates=tuple(candidates), free=free, noise=noise,
                      criterion=criterion, budget=budget, baseline=baseline, limits=limits,
                      source=str(path))
