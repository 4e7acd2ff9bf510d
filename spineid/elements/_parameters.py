"""Named model parameters with units and bounds, and how to read and set them in a model.

A `Parameter` names one scalar of a model (a path to an array field of an element, or of the
model itself) with its unit and bounds; identification selects parameters by name or group and
writes values into the model with `apply_values`, which is traceable (jit, vmap, grad).
"""

import dataclasses
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
    in that array, `None` for a scalar), `tied` (the field is an array whose entries all take
    this one value, e.g. the same ligament stiffness at every level of a chain), `lower` and
    `upper` bounds.
    """

    name: str
    group: str
    unit: str
    element: int | None
    field: str  # attribute path, dotted for nested modules: "law.load_values"
    row: int | None = None
    lower: float = 0.0
    upper: float = math.inf
    tied: bool = False

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
    `upper` bounds (one for every entry, or one per entry), and `tied` (one value for every
    entry of the array)."""

    field: str
    group: str
    unit: str | tuple[str, ...]
    lower: float | tuple[float, ...] = 0.0
    upper: float = math.inf
    tied: bool = False


def declared_parameters(model) -> tuple["Parameter", ...]:
    """Every parameter a model and its elements declare (`parameter_fields()`), named by their
    place in the model: `elements[2].stiffness[3]`, `elements[0].law.load_values[1]`,
    `k_joint`. A model built in Python is fitted with these (`FitProblem(model, ...)`); a model
    file names the same parameters by their place in the file instead."""
    owners = [(None, model)] + list(enumerate(getattr(model, "elements", ())))
    parameters = []
    for element, owner in owners:
        for spec in owner.parameter_fields():
            leaf = _leaf(owner, spec.field)
            path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", spec.field)
            prefix = path if element is None else f"elements[{element}].{path}"
            rows = [None] if spec.tied or jnp.ndim(leaf) == 0 else range(jnp.shape(leaf)[0])
            for row in rows:
                unit = spec.unit[row] if isinstance(spec.unit, tuple) else spec.unit
                lower = spec.lower[row] if isinstance(spec.lower, tuple) else spec.lower
                parameters.append(Parameter(
                    prefix if row is None else f"{prefix}[{row}]", spec.group, unit, element,
                    spec.field, row, lower, spec.upper, spec.tied))
    return tuple(parameters)


def _owner(model, element: int | None):
    # The module a parameter's field belongs to: an element, or the model itself.
    return model if element is None else model.elements[element]


def _leaf(element, field: str):
    # The array at a dotted path of an element: attributes, or tuple positions ("laws.3.x").
    def step(node, part):
        return node[int(part)] if part.isdigit() else getattr(node, part)

    return functools.reduce(step, field.split("."), element)


def apply_values(model, parameters: Sequence[Parameter], values: Float[Array, " p"]):
    """A copy of `model` with `parameters` set to `values` (traceable; one `tree_at` per array)."""
    by_leaf: dict[tuple[int | None, str], list[tuple[Parameter, int]]] = {}
    for position, parameter in enumerate(parameters):
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
            new_leaf = leaf.at[rows].set(values[positions])
        model = eqx.tree_at(
            lambda m, e=element, f=field: _leaf(_owner(m, e), f), model, new_leaf
        )
    return model


def select_parameters(
    parameters: Sequence[Parameter], free: Sequence[str], source: str = "model"
) -> tuple[Parameter, ...]:
    """The parameters named by `free`: group names (`stiffness`), parameter names
    (`springs[2].stiffness`) or a vector parameter's name without its index (`bushings[0].
    stiffness` for every `bushings[0].stiffness[k]`). An unknown entry raises `ValueError`
    listing what exists."""
    if isinstance(free, str):
        free = [free]
    groups = sorted({p.group for p in parameters})
    chosen: list[Parameter] = []
    for entry in free:
        matches = [p for p in parameters if p.group == entry or p.name == entry]
        if not matches:
            matches = [p for p in parameters if p.name.startswith(entry + "[")
                       and p.name[len(entry):].count("[") == 1 and p.name.endswith("]")]
        if not matches:
            raise ValueError(
                f"{source}: --free {entry!r}: no such parameter group in this model; the model "
                f"has the groups {groups} (or name single parameters such as "
                f"{parameters[0].name if parameters else 'springs[0].stiffness'!r})"
            )
        chosen.extend(p for p in matches if p not in chosen)
    if not chosen:
        raise ValueError(f"{source}: nothing to fit: give at least one --free group")
    return tuple(chosen)
