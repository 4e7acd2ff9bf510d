"""External loads on a body, as functions of time."""

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

PLANAR_LOAD_COMPONENTS = ("Fx", "Fy", "Mz")
"""Load components of the planar models (global axes, through the upper body's centre of mass)."""


class AbstractLoad(eqx.Module):
    """A generalized load `value(t)` with one entry per load component (N or N m)."""

    @abc.abstractmethod
    def value(self, t: Float[Array, ""]) -> Float[Array, " c"]:
        """The load components at time `t` (s)."""

    @abc.abstractmethod
    def is_zero(self) -> bool:
        """Whether the load is zero at all times (concrete parameters, not traced)."""


class SinusoidalLoad(AbstractLoad):
    """Sum of sinusoids `sum_j amplitude_j sin(2 pi frequency_j t + phase_j) direction_j`.

    The generalized forces of Liu (2001, eq 3-1) are of this form (with cosines, i.e. phases
    shifted by pi/2). Fields, one entry per term `j`: `amplitude` (N or N m), `frequency` (Hz),
    `phase` (rad), shape `(m,)`; `direction` (shape `(m, c)`) places each term on its load
    component (one-hot rows: e.g. `Fx, Fy, Mz` for the planar pair).
    """

    amplitude: Float[Array, " m"]
    frequency: Float[Array, " m"]
    phase: Float[Array, " m"]
    direction: Float[Array, "m c"]

    @classmethod
    def from_terms(cls, terms, components=PLANAR_LOAD_COMPONENTS) -> "SinusoidalLoad":
        """Load from `(component, amplitude, frequency, phase)` terms, e.g. `[("Fx", 6.0, 4.0,
        0.3), ("Mz", 0.08, 5.0, 1.0)]` (N or N m, Hz, rad), on the model's load `components`
        (`PLANAR_LOAD_COMPONENTS`, or `SPATIAL_LOAD_COMPONENTS` for the spatial pair); a term
        may leave out its phase (0)."""
        rows = []
        for term in terms:
            if not 3 <= len(term) <= 4 or term[0] not in components:
                raise ValueError(f"SinusoidalLoad.from_terms: term {term!r}: expected (component, "
                                 f"amplitude, frequency[, phase]) with a component of "
                                 f"{list(components)}")
            component, amplitude, frequency, *phase = term
            if not frequency >= 0:
                raise ValueError(f"SinusoidalLoad.from_terms: term {term!r}: frequency must be "
                                 ">= 0 Hz")
            rows.append((float(amplitude), float(frequency), float(phase[0]) if phase else 0.0,
                         np.eye(len(components))[list(components).index(component)]))
        if not rows:
            raise ValueError("SinusoidalLoad.from_terms: no terms")
        amplitude, frequency, phase, direction = map(np.asarray, zip(*rows))
        return cls(amplitude=jnp.asarray(amplitude), frequency=jnp.asarray(frequency),
                   phase=jnp.asarray(phase), direction=jnp.asarray(direction))

    def value(self, t):
        terms = self.amplitude * jnp.sin(2 * jnp.pi * self.frequency * t + self.phase)
        return terms @ self.direction

    def is_zero(self) -> bool:
        return not np.any(np.asarray(self.amplitude))


class TabulatedLoad(AbstractLoad):
    """Loads tabulated at increasing times, linearly interpolated and held constant outside.

    Fields: `times` (s, shape `(k,)`), `values` (N or N m, shape `(k, c)`).
    """

    times: Float[Array, " k"]
    values: Float[Array, "k c"]

    def value(self, t):
        return jnp.stack(
            [jnp.interp(t, self.times, column) for column in self.values.T], axis=-1
        )

    def is_zero(self) -> bool:
        return not np.any(np.asarray(self.values))
