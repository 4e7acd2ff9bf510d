"""Named model parameters with units and bounds, and their unconstrained coordinates.

Solvers see an unconstrained vector `u`; a parameter with a finite lower bound `a` only maps as
`value = a + scale exp(u)` (positive quantities: stiffness, damping), one with both bounds as
`value = a + (b - a) sigmoid(u)`, an unbounded one as `value = start + scale u`. `scale` is the
starting distance from the bound, so `u = 0` at the start and `u` is of order one.
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


class Transform(eqx.Module):
    """Map between physical parameter values and the solver's unconstrained vector."""

    lower: Float[Array, " p"]
    upper: Float[Array, " p"]
    scale: Float[Array, " p"]
    start: Float[Array, " p"]

    @classmethod
    def around(cls, parameters: Sequence[Parameter], start, names_source: str = "model"):
        """A transform with `u = 0` at the physical values `start` (shape `(p,)`)."""
        start = np.asarray(start, dtype=float)
        lower = np.array([p.lower for p in parameters], dtype=float)
        upper = np.array([p.upper for p in parameters], dtype=float)
        for p, value, a, b in zip(parameters, start, lower, upper):
            if math.isfinite(b) and not math.isfinite(a):
                raise ValueError(f"{names_source}: {p.name}: an upper bound needs a lower bound")
            if not (a < value < b) and math.isfinite(a):
                raise ValueError(
                    f"{names_source}: {p.name} = {value:g} starts on or outside its bound "
                    f"({a:g}, {b:g}); give a starting value inside it (a free {p.group} "
                    f"parameter must start > {a:g})"
                )
        scale = np.where(np.isfinite(lower), start - lower, np.maximum(np.abs(start), 1.0))
        return cls(jnp.asarray(lower), jnp.asarray(upper), jnp.asarray(scale), jnp.asarray(start))

    def _bounds(self):
        # Which bounds exist, and finite stand-ins for the missing ones.
        has_lower, has_upper = jnp.isfinite(self.lower), jnp.isfinite(self.upper)
        safe_lower = jnp.where(has_lower, self.lower, 0.0)
        width = jnp.where(has_upper, self.upper - safe_lower, 1.0)
        return has_lower, has_upper, safe_lower, width

    def to_physical(self, u: Float[Array, " p"]) -> Float[Array, " p"]:
        """Physical values from unconstrained coordinates."""
        has_lower, has_upper, safe_lower, width = self._bounds()
        # Keep the unused branch finite so that its (discarded) derivative is not NaN.
        one_sided = safe_lower + self.scale * jnp.exp(jnp.where(has_upper, 0.0, u))
        two_sided = safe_lower + width * _sigmoid(u + _logit((self.start - safe_lower) / width))
        unbounded = self.start + self.scale * u
        return jnp.where(has_lower, jnp.where(has_upper, two_sided, one_sided), unbounded)

    def to_unconstrained(self, values: Float[Array, " p"]) -> Float[Array, " p"]:
        """Unconstrained coordinates of physical values (inverse of `to_physical`)."""
        has_lower, has_upper, safe_lower, width = self._bounds()
        one_sided = jnp.log(jnp.maximum(values - safe_lower, 1e-300) / self.scale)
        two_sided = _logit((values - safe_lower) / width) - _logit(
            (self.start - safe_lower) / width
        )
        unbounded = (values - self.start) / self.scale
        return jnp.where(has_lower, jnp.where(has_upper, two_sided, one_sided), unbounded)

    def at_bound(self, values, relative: float = 1e-6, within=None) -> np.ndarray:
        """Which values sit on a bound: within `relative` of the starting distance from it, or
        within the distances `within` (`(p,)`, physical units; NaN entries never count)."""
        values = np.asarray(values)
        margin = relative * np.asarray(self.scale)
        if within is not None:
            margin = np.fmax(margin, np.asarray(within, dtype=float))
        near_lower = np.isfinite(self.lower) & (values - self.lower <= margin)
        near_upper = np.isfinite(self.upper) & (self.upper - values <= margin)
        return near_lower | near_upper


def _sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))


def _logit(p):
    p = jnp.clip(p, 1e-300, 1 - 1e-16)
    return jnp.log(p) - jnp.log1p(-p)


_PATH_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


def set_in_document(document: dict, name: str, value: float) -> None:
    """Set the entry `name` of a parsed model document: `springs[3].stiffness`,
    `bushings[0].stiffness[2]` (an entry of a list) or `bushings[0].stiffness[1][4]` (an entry
    of a matrix, which model files hold symmetric: its mirror entry `[4][1]` is set too).
    A tied parameter of an array of tables without an index (`facets.stiffness`) is set in
    every table."""
    node = document
    parts = name.split(".")
    for depth, part in enumerate(parts):
        match = _PATH_PART.match(part)
        if match is None:
            raise ValueError(f"not a parameter path: {name!r}")
        key = match.group(1)
        indices = [int(i) for i in re.findall(r"\d+", match.group(2))]
        if depth < len(parts) - 1:
            node = node[key]
            for i in indices:
                node = node[i]
            if isinstance(node, list):
                rest = ".".join(parts[depth + 1:])
                for table in node:
                    set_in_document(table, rest, value)
                return
            continue
        if not indices:
            node[key] = float(value)
        elif len(indices) == 1:
            node[key][indices[0]] = float(value)
        elif len(indices) == 2:
            i, j = indices
            node[key][i][j] = node[key][j][i] = float(value)
        else:
            raise ValueError(f"not a parameter path: {name!r}")
