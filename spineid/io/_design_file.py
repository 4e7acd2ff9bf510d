"""Design files (docs/formats/design-files.md): the experiments a rig can run on one specimen's
model, for `spineid design`. Each candidate replaces the model file's loads (and optionally
its initial pose) and sets its own duration and sampling. Instead of candidates, a file may
give one `[protocol]` whose load amplitudes, frequencies and phases vary continuously within
bounds (`ProtocolSpec`; `spineid.optimise_protocol` finds the best)."""

import copy
import dataclasses
import pathlib
import re

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..models._loads import SinusoidalLoad
from ._model_file import load_model_file, ModelFile
from ._toml import DocumentChecker, read_toml

_TOP = {"model", "free", "noise", "criterion", "budget", "baseline", "limits", "candidates",
        "protocol", "correlation"}
_CANDIDATE = {"name", "loads", "duration", "samples", "initial_pose", "channels"}
_PROTOCOL = {"loads", "duration", "samples", "initial_pose", "channels", "variables", "starts"}
VARIABLE_FIELDS = ("amplitude", "frequency", "phase")
LIMITS = {"force": "N", "moment": "N m", "frequency": "Hz", "duration": "s", "total": "s",
          "motion": None}
"""The rig's limits a design takes (a design file's `[limits]`, `spineid.design(limits=...)`),
with their units (`motion`: `{channel: largest change from the first sample}` in each observed
channel's own unit)."""
_VARIABLE = re.compile(r"^loads\[(\d+)\]\.(\w+)$")


@dataclasses.dataclass(frozen=True)
class ProtocolSpec:
    """The `[protocol]` of a design file: `model` (the specimen's `ModelFile` with the
    protocol's loads at their start values), `times` (s, `(k,)`), `channels` (measured, or
    `None` for all), `variables` (`{"loads[j].field": (low, high, start)}`, SI: N or N m, Hz,
    rad) and `starts` (ascents, or `None` for `optimise_protocol`'s default). `build(x)` is
    the model under the protocol `x` (`{name: value}`, JAX values: differentiable)."""

    model: ModelFile
    times: np.ndarray
    channels: list | None
    variables: dict
    starts: int | None

    def build(self, x: dict):
        """The model with each variable's load field set to `x[name]` (traceable)."""
        model = self.model.model
        load = model.loads[0]
        fields = {field: getattr(load, field) for field in VARIABLE_FIELDS}
        for name in self.variables:
            index, field = _VARIABLE.match(name).groups()
            fields[field] = fields[field].at[int(index)].set(x[name])
        return eqx.tree_at(lambda m: [getattr(m.loads[0], f) for f in VARIABLE_FIELDS], model,
                           [jnp.asarray(fields[f], dtype=float) for f in VARIABLE_FIELDS])


@dataclasses.dataclass(frozen=True)
class DesignFile:
    """A parsed design file: `model` (the `ModelFile` it names), `candidates` (`(name,
    ModelFile, times, channels)` per experiment: the model with the candidate's loads, its
    sample times in s, and the channels it measures or `None` for all; empty with a
    protocol), `free`, `noise` (channel -> SI), `criterion` (`"D"`, `"A"`, `"E"` or a list
    of parameter names), `budget`, `baseline` (candidate names), `limits` (dict), `source`,
    `protocol` (a `ProtocolSpec`, or `None` for a file of candidates), `correlation`
    (channel -> the coefficients `phi_1..phi_q` of its errors' autoregression; `noise` is
    then their marginal standard deviation; `spineid.design(correlation=...)`)."""

    model: ModelFile
    candidates: tuple
    free: list[str]
    noise: dict[str, float]
    criterion: object
    budget: int
    baseline: list[str]
    limits: dict
    source: str
    protocol: ProtocolSpec | None = None
    correlation: dict = dataclasses.field(default_factory=dict)


def _strings(check: DocumentChecker, document: dict, name: str, default=None) -> list[str]:
    value = document.get(name, default)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        check.fail(name, "a non-empty list of names", value)
    return value


def read_design_file(path: str | pathlib.Path) -> DesignFile:
    """Read and validate a design file; every mistake raises `ValueError` naming the file and
    the key (`candidates[2].duration`), before anything is simulated."""
    path = pathlib.Path(path)
    document = read_toml(path, "design file")
    check = DocumentChecker(str(path), units=False)
    check.keys(document, "", _TOP, {"model", "free", "noise"})
    if ("candidates" in document) == ("protocol" in document):
        check.fail("candidates", "either [[candidates]] tables (experiments to choose from) or "
                   "one [protocol] table (loads to vary continuously), not "
                   + ("both" if "protocol" in document else "neither"))
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
    correlation = _correlation(check, document, model)
    criterion = document.get("criterion", "D")
    if isinstance(criterion, list):
        criterion = _strings(check, document, "criterion")
    elif not isinstance(criterion, str):
        check.fail("criterion", "'D', 'A', 'E' or a list of parameter names", criterion)
    budget = check.integer(document, "budget", "budget", minimum=1, default=1)
    baseline = _strings(check, document, "baseline") if "baseline" in document else []
    limits_table = document.get("limits", {})
    check.keys(limits_table, "limits", set(LIMITS))
    limits = {name: check.number(limits_table, name, f"limits.{name}", positive=True)
              for name in limits_table if name != "motion"}
    if "motion" in limits_table:  # the joint's safe range, per observed channel
        motion_table = limits_table["motion"]
        check.keys(motion_table, "limits.motion", set(model.model.observable_names))
        if not motion_table:
            check.fail("limits.motion", "at least one channel's largest change",
                       motion_table)
        limits["motion"] = {name: check.number(motion_table, name, f"limits.motion.{name}",
                                               positive=True) for name in motion_table}
    if "protocol" in document:
        if "correlation" in document:
            check.fail("correlation", "no such key with a [protocol] (its optimisation takes "
                       "the errors as white; a design of candidates takes correlated ones)",
                       document["correlation"])
        for key in ("budget", "baseline"):
            if key in document:
                check.fail(key, "no such key with a [protocol] (it designs one experiment)",
                           document[key])
        for key in ("duration", "total"):
            if key in limits:
                check.fail(f"limits.{key}", "no such limit with a [protocol] (its duration is "
                           "given)", limits[key])
        protocol = _read_protocol(document["protocol"], model, path, check)
        return DesignFile(model=model, candidates=(), free=free, noise=noise,
                          criterion=criterion, budget=1, baseline=[], limits=limits,
                          source=str(path), protocol=protocol)
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
        candidate_model = _with_loads(model, table, path, f"{key} ({table['name']!r})")
        channels = _channels(table, key, model, check)
        candidates.append((table["name"], candidate_model,
                           np.linspace(0.0, duration, samples), channels))
    names = [c[0] for c in candidates]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        check.fail("candidates", "distinct names; repeated", repeated)
    if budget > len(candidates):
        check.fail("budget", f"at most the number of candidates ({len(candidates)})", budget)
    unknown = [name for name in baseline if name not in names]
    if unknown:
        check.fail("baseline", f"names of candidates (among {names})", unknown)
    return DesignFile(model=model, candidates=tuple(candidates), free=free, noise=noise,
                      criterion=criterion, budget=budget, baseline=baseline, limits=limits,
                      source=str(path), correlation=correlation)


def _correlation(check: DocumentChecker, document: dict, model: ModelFile) -> dict:
    # `[correlation]`: channel -> a number or a list of numbers (whether the autoregression is
    # stationary, `spineid.design` checks).
    table = document.get("correlation", {})
    check.keys(table, "correlation", set(model.model.observable_names))
    correlation = {}
    for name, value in table.items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                 and np.isfinite(v) for v in values):
            check.fail(f"correlation.{name}", "the coefficients phi_1..phi_q of the errors' "
                       "autoregression (a number or a list of numbers)", value)
        correlation[name] = tuple(float(v) for v in values)
    return correlation


def _read_protocol(table, model: ModelFile, path: pathlib.Path,
                   check: DocumentChecker) -> ProtocolSpec:
    # The [protocol] table: the loads at their start, the sampling, the variables' bounds.
    check.keys(table, "protocol", _PROTOCOL, {"loads", "duration", "variables"})
    duration = check.number(table, "duration", "protocol.duration", positive=True)
    samples = check.integer(table, "samples", "protocol.samples", minimum=3, default=201)
    starts = check.integer(table, "starts", "protocol.starts", minimum=1, default=None)
    loads = table["loads"]
    if not isinstance(loads, list) or not loads or not all(
            isinstance(load, dict) and "loads_file" not in load for load in loads):
        check.fail("protocol.loads", "a non-empty list of sinusoidal loads ({component, "
                   "amplitude, frequency[, phase]}; a load file cannot vary)", loads)
    start_model = _with_loads(model, table, path, "protocol")
    model_loads = getattr(start_model.model, "loads", ())
    if not model_loads or not isinstance(model_loads[0], SinusoidalLoad):
        check.fail("protocol.loads", f"loads the model kind {model.kind!r} applies as "
                   "sinusoids (a planar or spatial pair or chain)", loads)
    variables_table = table["variables"]
    if not isinstance(variables_table, dict) or not variables_table:
        check.fail("protocol.variables", 'a table of at least one "loads[j].field" = [low, '
                   f"high] with field one of {list(VARIABLE_FIELDS)}", variables_table)
    variables = {}
    for name, bounds in variables_table.items():
        key = f'protocol.variables."{name}"'
        match = _VARIABLE.match(name)
        if match is None or match.group(2) not in VARIABLE_FIELDS \
                or int(match.group(1)) >= len(loads):
            check.fail(key, f"a name loads[j].field with j < {len(loads)} (the protocol's "
                       f"loads) and field one of {list(VARIABLE_FIELDS)}", name)
        index, field = int(match.group(1)), match.group(2)
        start = loads[index].get(field, 0.0 if field == "phase" else None)
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(
                isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
                and bounds[0] < bounds[1] and bounds[0] <= start <= bounds[1]):
            check.fail(key, f"[low, high] around the load's start value {start!r}", bounds)
        if field == "frequency" and bounds[0] < 0:
            check.fail(key, "frequencies >= 0 Hz", bounds)
        variables[name] = (float(bounds[0]), float(bounds[1]), float(start))
    channels = _channels(table, "protocol", model, check)
    return ProtocolSpec(model=start_model, times=np.linspace(0.0, duration, samples),
                        channels=channels, variables=variables, starts=starts)


def _with_loads(model: ModelFile, table: dict, path: pathlib.Path, key: str) -> ModelFile:
    # The specimen's model with an experiment's loads (and initial pose, if given).
    changed = copy.deepcopy(model.document)
    changed["loads"] = copy.deepcopy(table["loads"])
    changed.pop("loads_file", None)
    if "initial_pose" in table:
        changed.setdefault("upper", {})["initial_pose"] = table["initial_pose"]
    try:
        return ModelFile.from_document(changed, f"{path} {key}", model.folder)
    except ValueError as error:
        raise ValueError(f"{path}: {key}: {error}") from None


def _channels(table: dict, key: str, model: ModelFile, check: DocumentChecker):
    # An experiment's measured channels: `None` (all) or distinct observed channels.
    if "channels" not in table:
        return None
    channels = table["channels"]
    observed = list(model.model.observable_names)
    if not isinstance(channels, list) or not channels or not all(
            isinstance(c, str) and c in observed for c in channels) \
            or len(set(channels)) != len(channels):
        check.fail(f"{key}.channels", f"distinct channels among {observed}", channels)
    return channels
