"""Named model parameters with units and bounds, and how to read and set them in a model.

A `Parameter` names one scalar of a model (a path to an array field of an element, or of the
model itself) with its unit and bounds; identification selects parameters by name or group and
writes values into the model with `apply_values`, which is traceable (jit, vmap, grad).
"""

import dataclasses
import functools
import math
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
    """The parameters named by `free`: group names (`stiffness`) or parameter names
    (`springs[2].stiffness`). An unknown entry raises `ValueError` listing what exists."""
    groups = sorted({p.group for p in parameters})
    chosen: list[Parameter] = []
    for entry in free:
        matches = [p for p in parameters if p.group == entry or p.name == entry]
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
