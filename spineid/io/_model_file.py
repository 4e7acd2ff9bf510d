"""Model files: the registry of model kinds, reading a file into a model with its named
parameters, and writing a model file back with new parameter values.

A model kind is a reader registered under the `kind` name of its files: it takes the parsed
document, a `DocumentChecker` (errors naming the file and the key) and the file's folder, and
returns the model and its parameter declarations (`Parameter`s named by their path in the
document, so that fitted values can be written back). The built-in kinds are
`planar_pair`, `pinned_pair`, `spatial_pair`, `spatial_chain`, `head_neck`
(docs/formats/model-files.md) and `opensim` (docs/formats/opensim.md);
`register_model_kind` adds another without editing anything else.
"""

import copy
import dataclasses
import math
import os
import pathlib
from collections.abc import Callable, Sequence

import numpy as np

from ..elements._parameters import Parameter
from ..models._mechanics import AbstractLagrangianSystem
from ._atomic import write_text_atomically
from ._kinds._head_neck import read_head_neck
from ._kinds._opensim import opensim_document, read_opensim
from ._kinds._pinned_pair import read_pinned_pair
from ._kinds._planar_pair import read_planar_pair
from ._kinds._spatial_chain import read_spatial_chain
from ._kinds._spatial_pair import read_spatial_pair
from ._model_units import check_quantities, quantities_in_document, with_units_as_read
from ._toml import DocumentChecker, dumps_toml, read_toml, set_in_document, simulation_settings


ModelReader = Callable[
    [dict, DocumentChecker, pathlib.Path],
    tuple[AbstractLagrangianSystem, tuple[Parameter, ...]],
]
"""A model kind's reader: `(document, check, folder) -> (model, parameters)`. `document` is the
parsed TOML (`kind` already checked), `check` a `DocumentChecker` whose errors name the file
and key, `folder` where relative paths in the file point. The parameters are named by their path
in the document (`springs[3].stiffness`), so that `write_model_file` can write fitted values
back. A reader whose document names another file holding values (`kind = "opensim"`) may return
a third item, the document completed with those values, which the `ModelFile` keeps."""

_READERS: dict[str, ModelReader] = {
    "planar_pair": read_planar_pair,
    "pinned_pair": read_pinned_pair,
    "spatial_pair": read_spatial_pair,
    "spatial_chain": read_spatial_chain,
    "head_neck": read_head_neck,
    "opensim": read_opensim,
}


def register_model_kind(kind: str, reader: ModelReader) -> None:
    """Make model files of `kind = "<kind>"` readable by `load_model_file` (and so by every
    command and fit) with `reader` (see `ModelReader`). The model it returns must be an
    `AbstractLagrangianSystem` that implements `observe` and `observable_names`. Registering a
    kind that exists raises `ValueError` (unregister it first)."""
    if not isinstance(kind, str) or not kind.isidentifier():
        raise ValueError(f"model kind {kind!r}: expected a name such as 'planar_pair'")
    if kind in _READERS:
        raise ValueError(f"model kind {kind!r} is already registered")
    if not callable(reader):
        raise ValueError(f"model kind {kind!r}: the reader must be callable, got {reader!r}")
    _READERS[kind] = reader


def unregister_model_kind(kind: str) -> None:
    """Forget the model kind `kind` (a `ValueError` if it is not registered)."""
    if kind not in _READERS:
        raise ValueError(f"model kind {kind!r} is not registered; the kinds are "
                         f"{sorted(_READERS)}")
    del _READERS[kind]


def model_kinds() -> tuple[str, ...]:
    """The registered model kinds, in registration order."""
    return tuple(_READERS)


PRIOR_KINDS = ("lognormal", "normal", "uniform")
"""Prior families of a model file's `[priors]` table and of `spineid.posterior`:
`["lognormal", median, log_sd]` (the median of the distance above the parameter's lower
bound), `["normal", mean, sd]`, `["uniform", low, high]`, in the parameter's SI unit."""


def check_priors_table(table, names: Sequence[str], check: DocumentChecker) -> dict:
    """The `[priors]` table of a model file checked against the parameter `names` it
    declares: `{name: (kind, a, b)}`; a mistake raises `ValueError` naming the key."""
    if not isinstance(table, dict):
        check.fail("priors", "a table of parameter name = [kind, a, b]", table)
    out = {}
    for name, prior in table.items():
        key = f"priors.{name}"
        if name not in names:
            check.fail(key, f"the name of a parameter of this model ({', '.join(names[:6])}"
                       + (", ..." if len(names) > 6 else "") + ")", name)
        if not (isinstance(prior, list) and len(prior) == 3 and prior[0] in PRIOR_KINDS
                and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v) for v in prior[1:])):
            check.fail(key, f"[kind, a, b] with kind one of {list(PRIOR_KINDS)} and finite "
                       "numbers a, b", prior)
        kind, a, b = prior[0], float(prior[1]), float(prior[2])
        if kind in ("lognormal", "normal") and b <= 0:
            check.fail(key, f"a {kind} prior with a scale > 0", prior)
        if kind == "lognormal" and a <= 0:
            check.fail(key, "a log-normal prior with a median > 0 (of the distance above the "
                       "parameter's lower bound)", prior)
        if kind == "uniform" and not a < b:
            check.fail(key, "a uniform prior with low < high", prior)
        out[name] = (kind, a, b)
    return out


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """A validated model file: the model, its named parameters and the parsed document.

    Fields: `model` (an `AbstractLagrangianSystem`, e.g. a `PlanarPair`), `parameters` (every
    named `Parameter`, in file order), `document` (the parsed TOML, used to write fitted models
    back in the same schema; values written with their units are SI numbers in it), `source`
    (file name for messages), `folder` (where relative paths in it point) and `quantities`
    (`{path: (text, SI value)}`: each value the file wrote with its unit, keyed by its path in
    the document, `{"bushings[0].stiffness[3]": ("0.52 N m/deg", 29.8)}`; `_model_units.py`).
    """

    model: AbstractLagrangianSystem
    parameters: tuple[Parameter, ...]
    document: dict
    source: str
    folder: pathlib.Path
    quantities: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_document(
        cls, document: dict, source: str = "<model>", folder: pathlib.Path | None = None
    ) -> "ModelFile":
        """Validate a parsed model document and build its model with the reader registered for
        its `kind` (`register_model_kind`)."""
        check = DocumentChecker(source)
        document, quantities = quantities_in_document(document, source)
        kind = check.choice(document, "kind", "kind", tuple(_READERS))
        folder = pathlib.Path(".") if folder is None else pathlib.Path(folder)
        # (`[priors]` belongs to every kind: checked here, not by the kind's reader.)
        # (A reader may return the document it completed: values the file it names holds.)
        model, parameters, *completed = _READERS[kind](
            {k: v for k, v in document.items() if k != "priors"}, check, folder)
        if completed:
            document = {**completed[0], **({"priors": document["priors"]}
                                           if "priors" in document else {})}
        if "priors" in document:
            check_priors_table(document["priors"], [p.name for p in parameters], check)
        return cls(model, tuple(parameters), copy.deepcopy(document), source, folder,
                   check_quantities(quantities, parameters, source))

    def describe_quantities(self) -> str | None:
        """One line on the values the file wrote with their units, each with its SI value
        (`springs[0].stiffness 27 N/mm = 27000`); `None` where it wrote none."""
        if not self.quantities:
            return None
        return f"{self.source}: values with units, read in SI: " + ", ".join(
            f"{name} {text} = {si:.6g}" for name, (text, si) in self.quantities.items())

    @property
    def priors(self) -> dict:
        """The `[priors]` table: `{parameter name: (kind, a, b)}` (`PRIOR_KINDS`), the priors
        `spineid.posterior` uses for these parameters unless given others; `{}` without one."""
        return {name: tuple(prior) for name, prior in self.document.get("priors", {}).items()}

    @property
    def kind(self) -> str:
        """The model kind (`kind` of the document), e.g. `"planar_pair"`."""
        return self.document["kind"]

    def with_values(self, values: dict[str, float], source: str | None = None) -> "ModelFile":
        """The same model file with the parameters in `values` (name -> SI value) set, read
        again from the changed document (so every check of the kind applies); `source` names
        the new file in messages (default: this one's)."""
        document = copy.deepcopy(self.document)
        for name, value in values.items():
            set_in_document(document, name, value)
        return ModelFile.from_document(document, self.source if source is None else source,
                                       self.folder)

    def simulation_times(self) -> np.ndarray:
        """Sample times `linspace(0, t_end, n_samples)` of the `[simulation]` table (s)."""
        t_end, n_samples = simulation_settings(self.document, self.source)
        return np.linspace(0.0, t_end, n_samples)


def load_model_file(path: str | pathlib.Path) -> ModelFile:
    """Read and validate a model file (docs/formats/model-files.md); see `ModelFile`."""
    path = pathlib.Path(path)
    if path.suffix.lower() == ".osim":  # an OpenSim model as it is (`kind = "opensim"`)
        return ModelFile.from_document(opensim_document(path), source=str(path),
                                       folder=path.parent)
    return ModelFile.from_document(read_toml(path), source=str(path), folder=path.parent)


def load_model(path: str | pathlib.Path) -> AbstractLagrangianSystem:
    """Read and validate a model file (docs/formats/model-files.md) and build the model.

    **Arguments:** `path` to a TOML model file; relative `loads_file` paths in it are resolved
    against the file's folder.

    **Returns:** the model of the file's kind (`PlanarPair` for `kind = "planar_pair"`,
    `PinnedPair`, `SpatialPair`, `HeadNeckChain`, or that of a registered kind), in SI units.
    """
    return load_model_file(path).model


def model_from_document(
    document: dict, source: str = "<model>", folder: pathlib.Path | None = None
) -> AbstractLagrangianSystem:
    """Build a model from an already parsed model document (same rules as `load_model`)."""
    return ModelFile.from_document(document, source, folder).model


def write_model_file(
    path: str | pathlib.Path, model_file: ModelFile, values: dict[str, float],
    document: dict | None = None, comments: tuple[str, ...] = (),
) -> pathlib.Path:
    """Write `model_file` (or `document`, a changed copy of its document) with the parameters
    in `values` (name -> SI value) replaced, `comments` (lines of text) first as TOML comments.

    The schema stays that of the input, so the result can be simulated or fitted again;
    relative `loads_file` paths are rewritten to stay valid from the new file's folder; values
    the input wrote with their units (`"27 N/mm"`, `ModelFile.quantities`) are written in
    those units (`with_units_as_read`), the others in SI. Into a `document` of another layout (a
    recovery's springs put first) the values set are written in SI: the file's paths no longer
    name its values.
    """
    path = pathlib.Path(path)
    layout_kept = document is None
    document = copy.deepcopy(model_file.document if document is None else document)
    for name, value in values.items():
        set_in_document(document, name, value)
    if layout_kept:
        with_units_as_read(document, model_file.quantities)
    if document.get("kind") == "opensim" and isinstance(document.get("file"), str):
        target = (model_file.folder / document["file"]).resolve()
        document["file"] = os.path.relpath(target, path.parent.resolve())
    for load in document.get("loads", []):
        if "loads_file" in load:
            target = (model_file.folder / load["loads_file"]).resolve()
            load["loads_file"] = os.path.relpath(target, path.parent.resolve())
    header = "".join(f"# {line}\n" for text in comments for line in text.splitlines())
    write_text_atomically(path, header + dumps_toml(document))
    return path
