"""The map between physical parameter values and the unconstrained vector a solver sees.

Solvers see an unconstrained vector `u`; a parameter with a finite lower bound `a` only maps as
`value = a + scale exp(u)` (positive quantities: stiffness, damping), one with both bounds as
`value = a + (b - a) sigmoid(u)`, an unbounded one as `value = start + scale u`. `scale` is the
starting distance from the bound, so `u = 0` at the start and `u` is of order one.
"""

import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._arrays import floats
from ..._programs import stored_call
from ...elements._parameters import Parameter


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
        return cls(floats(lower), floats(upper), floats(scale), floats(start))

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

    def evaluated(self, u) -> tuple[np.ndarray, np.ndarray]:
        """`(to_physical(u), d to_physical / du)` at the unconstrained point `u` `(p,)`, as
        numpy arrays (physical units, and physical units per unit of `u`; the transform is
        elementwise, so its Jacobian is this diagonal), from one compiled program: outside
        `jit`, where an operation at a time would dispatch (and in a new process load) dozens
        of small programs."""
        theta, slope = stored_call(_physical_and_slope, self, floats(u))
        return np.asarray(theta), np.asarray(slope)

    def at_bound(self, values, relative: float = 1e-6, within=None) -> np.ndarray:
        """Which values sit on a bound: within `relative` of the starting distance from it, or
        within the distances `within` (`(p,)`, physical units; NaN entries never count)."""
        values = np.asarray(values)
        lower, upper = np.asarray(self.lower), np.asarray(self.upper)
        margin = relative * np.asarray(self.scale)
        if within is not None:
            margin = np.fmax(margin, np.asarray(within, dtype=float))
        near_lower = np.isfinite(lower) & (values - lower <= margin)
        near_upper = np.isfinite(upper) & (upper - values <= margin)
        return near_lower | near_upper


@eqx.filter_jit
def _physical_and_slope(transform: Transform, u) -> tuple:
    return jax.jvp(transform.to_physical, (u,), (jnp.ones_like(u),))


def _sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))


def _logit(p):
    p = jnp.clip(p, 1e-300, 1 - 1e-16)
    return jnp.log(p) - jnp.log1p(-p)
