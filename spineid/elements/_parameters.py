"""Named model parameters with units and bounds, and how to read and set them in a model.

A `Parameter` names one scalar of a model (a path to an array field of an element, or of the
model itself) with its unit and bounds; identification selects parameters by name or group and
writes values into the model with `apply_values`, which is traceable (jit, vmap, grad).
"""

import dataclasses
import difflib
import functools
import math
import re
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One scalar parameter of a model.

    Fields: `name` (a path into the model file, e.g. `springs[3].stiffness`), `group` (the
    `--free` group it belongs to), `unit` (SI), `element` and `field` (where it lives:
    `model.elements[element].<field>`, or `model.<field>` for `element=None`), `row` (its entry
    in that array: an index, a pair of indices for an entry of a 2-D array such as a body's
    centre of mass, or `None` for a scalar), `tied` (the field is an array whose entries all take
    this one value, e.g. the same ligament stiffness at every level of a chain), `lower` and
    `upper` bounds, and `record`: `None` for a parameter of the model, which every record of a
    fit shares; for one record's own (its start, `RECORD_GROUPS`, in a fit of several records)
    that record's position (0, 1, ...), its name then `<name>@<k>` with `k = record + 1`.
    """

    name: str
    group: str
    unit: str
    element: int | None
    field: str  # attribute path, dotted for nested modules: "law.load_values"
    row: int | tuple[int, int] | None = None
    lower: float = 0.0
    upper: float = math.inf
    tied: bool = False
    record: int | None = None

    @property
    def shared_name(self) -> str:
        """The name without a record's suffix (`initial.C7_flexion` for `initial.C7_flexion@2`),
        the one a model file names it by (its `[priors]`); `name` itself for a parameter of the
        model."""
        found = None if self.record is None else _RECORD.fullmatch(self.name)
        return self.name if found is None else found.group(1)

    def get(self, model) -> Float[Array, ""]:
        """The parameter's value in `model`."""
        leaf = _leaf(_owner(model, self.element), self.field)
        if self.tied:
            return leaf.ravel()[0]
        return leaf if self.row is None else leaf[self.row]

    def value(self, model) -> float:
        """The parameter's value in a concrete `model` (not under `jit`) as a Python float, read
        on the host (no compiled program per field, as `get` outside `jit` would run)."""
        leaf = np.asarray(_leaf(_owner(model, self.element), self.field))
        if self.tied:
            return float(leaf.ravel()[0])
        return float(leaf if self.row is None else leaf[self.row])


@dataclasses.dataclass(frozen=True)
class ParameterField:
    """A field of an element (or of a model) that holds parameters, as the element declares it:
    `field` (attribute path, dotted through nested modules and tuple positions:
    `law.load_values`, `laws.3.coefficient`), `group` (the name `free=` uses for every such
    field, e.g. `stiffness`), `unit` (SI; one for every entry, or one per entry), `lower` and
    `upper` bounds (one for every entry, or one per entry), `tied` (one value for every
    entry of the array), `name` (the field's path in parameter names and model files, when it
    differs from `field`: a law's `load_values` are the file's `load`) and `rows`, how an
    entry is named: `"entries"` (`bushings[0].damping[2]`), `"members"` (each row is one
    member of the element's collection: `springs[2].stiffness`) or `"matrix"` (the 21 packed
    entries of a symmetric 6x6 matrix: `bushings[0].stiffness[1][4]`); `labels`, one name per
    entry, names the entries `<label>.<name>` instead (a model's body masses: `head.mass`),
    and, for a field of one row per label (a body's centre of mass, `(n, 3)`), its entries
    `<label>.<name>[i]`, with `unit` and `lower` by entry `i` where they are tuples; with
    `keyed`, `<name>.<label>` (a model's start, `initial.C7_flexion`, as model files key it);
    `entries`, the rows that are parameters (default: every row; a model's start: its free
    coordinates')."""

    field: str
    group: str
    unit: str | tuple[str, ...]
    lower: float | tuple[float, ...] = 0.0
    upper: float = math.inf
    tied: bool = False
    name: str | None = None
    rows: str = "entries"
    labels: tuple[str, ...] | None = None
    keyed: bool = False
    entries: tuple[int, ...] | None = None


RECORD_GROUPS = ("initial", "initial_speeds")
"""Groups of parameters that belong to one record, not to the model: the start of a motion
(a model's `initial.<coordinate>` and `initial_speeds.<coordinate>`). A fit of several records
frees them once per record (`select_parameters(records=...)`, `Parameter.record`)."""

_MATRIX = np.triu_indices(6)  # the packing of symmetric 6x6 matrices (row-major upper part)


def element_labels(model) -> list:
    """The name of each element of `model` in parameter names, as model files write it: the
    element's own `label` where a reader or the user gave one, else its collection (the
    element class's `collection`, e.g. `springs`, `bushings`; a model may rename it, as a
    chain calls its bushings `joints`) and its place there, counted in element order:
    `torsion[1]` for a second torsion element; a tuple of member names (`springs[3]`, ...)
    for an element whose rows are members of the collection."""
    counts: dict[str, int] = {}
    labels = []
    for index, element in enumerate(getattr(model, "elements", ())):
        collection = _collection(model, element)
        start = counts.get(collection, 0)
        members = [spec for spec in element.parameter_fields() if spec.rows == "members"]
        size = int(np.shape(_leaf(element, members[0].field))[0]) if members else 1
        counts[collection] = start + size
        given = getattr(element, "label", None)
        if given is not None:
            if isinstance(given, tuple) != bool(members) or (members and len(given) != size):
                raise ValueError(
                    f"elements[{index}] ({type(element).__name__}): label {given!r}: expected "
                    + (f"one name per member, {size}" if members else "one name (a string)"))
            labels.append(given)
        elif members:
            labels.append(tuple(f"{collection}[{start + k}]" for k in range(size)))
        else:
            labels.append(f"{collection}[{start}]")
    return labels


def _collection(model, element) -> str:
    # The collection an element belongs to in parameter names: its class's, as the model
    # calls it (a chain calls its bushings `joints`).
    collection = getattr(type(element), "collection", "elements")
    return getattr(model, "collection_names", {}).get(collection, collection)


def _row_name(spec: ParameterField, label, path: str, row: int | None,
              collection: str) -> str:
    # The name of one entry of a declared field (see `ParameterField.rows`).
    if isinstance(label, tuple):  # an element whose rows are members of its collection
        if spec.tied or row is None:  # one value for every member: the collection's
            return f"{collection}.{path}"
        return f"{label[row]}.{path}"
    prefix = path if label is None else f"{label}.{path}"
    if row is None:
        return prefix
    if spec.labels is not None:  # entries named by the owner (a model's bodies)
        if isinstance(row, tuple):  # an entry of the label's row: `head.mass_center[1]`
            return f"{spec.labels[row[0]]}.{prefix}[{row[1]}]"
        return f"{prefix}.{spec.labels[row]}" if spec.keyed else f"{spec.labels[row]}.{prefix}"
    if spec.rows == "matrix":
        return f"{prefix}[{_MATRIX[0][row]}][{_MATRIX[1][row]}]"
    return f"{prefix}[{row}]"


def declared_parameters(model) -> tuple["Parameter", ...]:
    """Every parameter a model and its elements declare (`parameter_fields()`), named as model
    files name them (`element_labels`): `springs[2].stiffness`, `torsion[0].law.load[1]`,
    `bushings[0].stiffness[1][4]`, `facets.stiffness`, or a model's own `k_joint`. The same
    name reads the same in Python, model files, `--free` and reports. Members of an element
    come one after another with their fields (`springs[0].stiffness`, `springs[0].damping`,
    `springs[1].stiffness`, ...), as files list them."""
    owners = [(None, None, model)] + [
        (element, label, owner) for element, (label, owner) in enumerate(
            zip(element_labels(model), getattr(model, "elements", ())))]
    parameters = []
    for element, label, owner in owners:
        entries = []
        for order, spec in enumerate(owner.parameter_fields()):
            leaf = _leaf(owner, spec.field)
            path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", spec.name or spec.field)
            rows = [None] if spec.tied or jnp.ndim(leaf) == 0 else range(jnp.shape(leaf)[0])
            if spec.labels is not None and jnp.ndim(leaf) == 2:  # (label, entry) pairs
                rows = list(np.ndindex(jnp.shape(leaf)))
            if spec.entries is not None:
                rows = list(spec.entries)
            for row in rows:
                entry = row[-1] if isinstance(row, tuple) else row
                unit = spec.unit[entry] if isinstance(spec.unit, tuple) else spec.unit
                lower = spec.lower[entry] if isinstance(spec.lower, tuple) else spec.lower
                # Members one after another (fields within each); tied fields after them.
                key = (0, row, order) if spec.rows == "members" and not spec.tied else (1, order)
                collection = None if element is None else _collection(model, owner)
                entries.append((key, Parameter(
                    _row_name(spec, label, path, row, collection), spec.group, unit, element,
                    spec.field, row, lower, spec.upper, spec.tied)))
        parameters += [parameter for _, parameter in sorted(entries, key=lambda e: e[0])]
    return tuple(parameters)


def _owner(model, element: int | None):
    # The module a parameter's field belongs to: an element, or the model itself.
    return model if element is None else model.elements[element]


def _leaf(element, field: str):
    # The array at a dotted path of an element: attributes, or tuple positions ("laws.3.x").
    def step(node, part):
        return node[int(part)] if part.isdigit() else getattr(node, part)

    return functools.reduce(step, field.split("."), element)


def apply_values(model, parameters: Sequence[Parameter], values: Float[Array, " p"],
                 record: int | None = None):
    """A copy of `model` with `parameters` set to `values` (traceable; one `tree_at` per array):
    the model's (`Parameter.record` `None`) and those of `record` (the position of the record
    `model` simulates in a fit of several; `None`: the model's alone)."""
    by_leaf: dict[tuple[int | None, str], list[tuple[Parameter, int]]] = {}
    for position, parameter in enumerate(parameters):
        if parameter.record is not None and parameter.record != record:
            continue
        by_leaf.setdefault((parameter.element, parameter.field), []).append(
            (parameter, position)
        )
    for (element, field), entries in by_leaf.items():
        leaf = _leaf(_owner(model, element), field)
        first, position = entries[0]
        if first.tied:
            new_leaf = jnp.full(leaf.shape, values[position], dtype=leaf.dtype)
        elif first.row is None:
            new_leaf = jnp.asarray(values[position], dtype=leaf.dtype)
        else:
            rows = np.array([parameter.row for parameter, _ in entries])
            positions = np.array([position for _, position in entries])
            # (rows of pairs index a 2-D field entry by entry)
            new_leaf = leaf.at[tuple(rows.T) if rows.ndim == 2 else rows].set(values[positions])
        model = eqx.tree_at(
            lambda m, e=element, f=field: _leaf(_owner(m, e), f), model, new_leaf
        )
    return model


_INDICES = re.compile(r"(\[\d+\])+")
_RECORD = re.compile(r"(.+)@(\d+)")
_ONE_INDEX = re.compile(r".*\[\d+\]\.[A-Za-z_]\w*\[(\d+)\]")


def select_parameters(
    parameters: Sequence[Parameter], free: Sequence[str], source: str = "model",
    records: int = 1,
) -> tuple[Parameter, ...]:
    """The parameters named by `free`: group names (`stiffness`), parameter names
    (`springs[2].stiffness`), a vector or matrix parameter's name without its indices
    (`bushings[0].stiffness` for every `bushings[0].stiffness[i][j]`), or a diagonal entry of
    a matrix by one index (`bushings[0].stiffness[3]` for `bushings[0].stiffness[3][3]`). An
    unknown entry raises `ValueError` listing what exists. In a fit of `records` records
    (more than one), a record's own parameter (`RECORD_GROUPS`: its start) is one per record,
    `<name>@<k>` for record `k` (1, 2, ... in the records' order; `Parameter.record`), and an
    entry that ends in `@<k>` frees record `k`'s alone (`initial@2`, `initial.C7_flexion@2`);
    `@<k>` beyond the records, in a fit of one record, or on a parameter of the model (shared
    by every record) raises `ValueError`."""
    if isinstance(free, str):
        free = [free]
    groups = sorted({p.group for p in parameters})
    chosen: list[Parameter] = []
    for text in free:
        entry, only = _record_entry(text, records, source)
        matches = [p for p in parameters if p.group == entry or p.name == entry]
        diagonal = _ONE_INDEX.fullmatch(entry)
        if not matches and diagonal:  # a diagonal entry by its index alone: `stiffness[3]`
            matches = [p for p in parameters if p.name == f"{entry}[{diagonal.group(1)}]"]
        if not matches and not entry.endswith("]"):  # every entry of a vector or matrix
            matches = [p for p in parameters if p.name.startswith(entry)
                       and _INDICES.fullmatch(p.name[len(entry):])]
        if not matches:
            near = difflib.get_close_matches(
                entry, groups + [p.name for p in parameters]
                + sorted({_INDICES.sub("", p.name) for p in parameters}), n=3, cutoff=0.7)
            raise ValueError(
                f"{source}: --free {entry!r}: no such parameter group in this model; "
                + (f"near: {', '.join(near)}; " if near else "") + f"the model "
                f"has the groups {groups} (or name single parameters such as "
                f"{parameters[0].name if parameters else 'springs[0].stiffness'!r})"
            )
        if only is not None and not any(p.group in RECORD_GROUPS for p in matches):
            raise ValueError(f"{source}: --free {text!r}: {entry} is the model's, shared by "
                             "every record; only a record's start (the groups "
                             f"{', '.join(RECORD_GROUPS)}) takes @<record>")
        chosen.extend(p for p in _per_record(matches, records, only) if p not in chosen)
    if not chosen:
        raise ValueError(f"{source}: nothing to fit: give at least one --free group")
    return tuple(chosen)


def _record_entry(text: str, records: int, source: str) -> tuple[str, int | None]:
    # A `--free` entry without its `@<k>` and the record it names (0-based; `None`: none).
    found = _RECORD.fullmatch(text)
    if found is None:
        return text, None
    k = int(found.group(2))
    if records < 2:
        raise ValueError(f"{source}: --free {text!r}: @<k> names one of several records fitted "
                         f"together, and this fit has one (--each fits each file alone): give "
                         f"{found.group(1)!r} without @{found.group(2)}")
    if not 1 <= k <= records:
        raise ValueError(f"{source}: --free {text!r}: there is no record {k} (this fit has "
                         f"{records}: @1 to @{records}, in the order the data are given)")
    return found.group(1), k - 1


def _per_record(matches: Sequence[Parameter], records: int, only: int | None
                ) -> list[Parameter]:
    # Each of a record's own parameters once per record (or for record `only`) where a fit has
    # several records; the others as they are.
    chosen = []
    for p in matches:
        if records < 2 or p.group not in RECORD_GROUPS:
            chosen.append(p)
        else:
            chosen.extend(dataclasses.replace(p, name=f"{p.name}@{k + 1}", record=k)
                          for k in ((only,) if only is not None else range(records)))
    return chosen
