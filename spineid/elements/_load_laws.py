"""Nonlinear load-displacement laws of one degree of freedom, each defined by a stored energy.

A law maps a displacement `x` (m, or rad for rotations) to the elastic load `M(x) = dE/dx`
(N, or N m) that resists it; the element using the law applies `-M`. Every law is written as
its energy `E(x)` with `E(0) = 0`, and `load` and `stiffness` are its derivatives by autodiff,
so the mechanics core treats a law like any other elastic element and energy is conserved.

- `PiecewiseLinearLaw`: stiffness phases as tabulated by Liu (2001, section 4.3: five phases,
  a neutral zone of zero stiffness), with a smoothing width so that gradients exist.
- `MonotoneCubicLaw`: monotone piecewise-cubic (PCHIP, Fritsch-Carlson) interpolation of
  tabulated (displacement, load) points.
- `TanCosLaw`: `M = k tan(x/2) / cos(x/2)` (Fritzkowski and Walczak, eq 35).
- `PolynomialLaw`: `M = sum_j c_j x^j`, `j = 1..n` (`PolynomialLaw([k])` is a linear spring).

Outside the tabulated range the table laws continue linearly with their end slopes.
"""

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._parameters import ParameterField


LAW_KINDS = ("piecewise_linear", "monotone_cubic", "tan_cos", "polynomial")
"""The `kind` names of the laws in model files, `spineid table` and `fit_load_law`."""

TABLE_KINDS = ("piecewise_linear", "monotone_cubic")
"""The law kinds that are tables of node loads (a fit may move their nodes)."""


class AbstractLoadLaw(eqx.Module):
    """A load-displacement law `M(x)` of one degree of freedom with stored energy `E(x)`."""

    @abc.abstractmethod
    def energy(self, x: Float[ArrayLike, ""]) -> Float[Array, ""]:
        """Stored energy `E(x) = int_0^x M` (J) at the scalar displacement `x` (m or rad)."""

    def load(self, x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
        """Elastic load `M(x) = dE/dx` (N or N m), elementwise over `x` of any shape."""
        return jnp.vectorize(jax.grad(self.energy))(jnp.asarray(x, dtype=float))

    def stiffness(self, x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
        """Tangent stiffness `dM/dx` (N/m or N m/rad), elementwise over `x` of any shape."""
        return jnp.vectorize(jax.grad(jax.grad(self.energy)))(jnp.asarray(x, dtype=float))

    @abc.abstractmethod
    def parameter_fields(self, displacement_unit: str, load_unit: str, group: str,
                         prefix: str = "") -> tuple[ParameterField, ...]:
        """The fields holding the law's parameters, in `group`, for a law from displacements in
        `displacement_unit` to loads in `load_unit`; `prefix` is the law's path in its element
        (e.g. `law.`)."""


def _traced(*values) -> bool:
    # Whether any value is an abstract tracer (inside jit, vmap or grad): no concrete checks.
    return any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(values))


def _check_nodes(displacement, load, what: str):
    # Concrete checks of tabulated nodes, before any tracing.
    x = np.asarray(displacement, dtype=float)
    y = np.asarray(load, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"{what}: displacement and load must be 1-D arrays of equal length >= 2, "
                         f"got shapes {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError(f"{what}: displacement and load must be finite numbers")
    steps = np.diff(x)
    if np.any(steps <= 0):
        k = int(np.argmax(steps <= 0))
        raise ValueError(f"{what}: displacements must increase strictly; entry {k + 1} "
                         f"({x[k + 1]:g}) does not exceed entry {k} ({x[k]:g})")
    return x, y


def check_monotone(load, what: str) -> None:
    """Raise `ValueError` naming the first entry where the tabulated `load` decreases
    (negative stiffness where a monotone law is required)."""
    y = np.asarray(load, dtype=float)
    drops = np.flatnonzero(np.diff(y) < 0)
    if drops.size:
        k = int(drops[0])
        raise ValueError(f"{what}: load decreases from entry {k} ({y[k]:g}) to entry {k + 1} "
                         f"({y[k + 1]:g}): negative stiffness where a monotone law is required")


def _smooth_ramp_integral(u, width):
    # Integral of the ramp max(0, u) smoothed by a quadratic over |u| < width/2: the ramp is
    # C1 and its slope (the stiffness step) is continuous; exact outside the window.
    w = jnp.maximum(width, 1e-300)
    inside = (u + 0.5 * w) ** 3 / (6.0 * w)
    above = 0.5 * u**2 + w**2 / 24.0
    sharp = 0.5 * jnp.maximum(u, 0.0) ** 2
    smooth = jnp.where(u <= -0.5 * w, 0.0, jnp.where(u >= 0.5 * w, above, inside))
    return jnp.where(width > 0, smooth, sharp)


class PiecewiseLinearLaw(AbstractLoadLaw):
    """Piecewise-linear load between tabulated nodes: stiffness phases (Liu 2001, section 4.3).

    The load is `M(x) = y_0 + s_0 (x - x_0) + sum_j (s_j - s_{j-1}) ramp(x - x_j)` over the
    interior nodes, with `s_j` the slope of phase `j` and `ramp(u) = max(0, u)` smoothed by a
    quadratic over `|u| < smoothing / 2`: the stiffness then changes linearly across each
    breakpoint instead of jumping, the load is C1, and away from the breakpoints the law is
    exactly the table. Beyond the first and last node the end phases continue.

    Fields: `displacement` (m or rad, `(n,)`, increasing), `load` (N or N m, `(n,)`), `smoothing`
    (same unit as `displacement`; 0 gives the sharp table, whose stiffness jumps).
    """

    displacement: Float[Array, " n"]
    load_values: Float[Array, " n"]
    smoothing: Float[Array, ""]

    def parameter_fields(self, displacement_unit, load_unit, group, prefix=""):
        """The node loads (`load_values`, in `load_unit`, unbounded)."""
        return (ParameterField(f"{prefix}load_values", group, load_unit, -math.inf,
                               name=f"{prefix}load"),)

    def __init__(self, displacement, load, smoothing=0.0, monotone: bool = False):
        """Nodes `(displacement, load)`, shapes `(n,)`; `monotone=True` rejects a decreasing
        load. Raises `ValueError` on unsorted nodes or a smoothing wider than a phase."""
        self.displacement = jnp.asarray(displacement, dtype=float)
        self.load_values = jnp.asarray(load, dtype=float)
        self.smoothing = jnp.asarray(smoothing, dtype=float)
        if _traced(displacement, load, smoothing):
            return  # built from parameters inside a fit: checked by construction
        x, y = _check_nodes(displacement, load, "piecewise-linear law")
        if monotone:
            check_monotone(y, "piecewise-linear law")
        width = float(smoothing)
        if width < 0 or width > np.min(np.diff(x)):
            raise ValueError(f"piecewise-linear law: smoothing {width:g} must lie between 0 "
                             f"and the shortest phase ({np.min(np.diff(x)):g})")

    @classmethod
    def from_phases(cls, bounds, stiffness, zero_load_at=0.0, smoothing=0.0):
        """Phases `[bounds[j], bounds[j + 1]]` of constant `stiffness[j]` (`(n - 1,)`, N/m or
        N m/rad), the load zero at `zero_load_at` (Liu 2001 section 4.3 lists phases this way:
        bounds in degrees, stiffness as load per phase over its width)."""
        x = np.asarray(bounds, dtype=float)
        k = np.asarray(stiffness, dtype=float)
        if k.shape != (x.size - 1,):
            raise ValueError(f"piecewise-linear law: {x.size} bounds need {x.size - 1} "
                             f"stiffness values, got {k.size}")
        _check_nodes(x, np.zeros_like(x), "piecewise-linear law")
        y = np.concatenate([[0.0], np.cumsum(k * np.diff(x))])
        # Shift so that the load vanishes at zero_load_at (within or beyond the table).
        return cls(x, y - _linear_table(x, y, float(zero_load_at)), smoothing)

    @classmethod
    def from_phase_table(cls, lower, upper, stiffness, zero_load_at=0.0, smoothing=0.0):
        """Phases given as rows `[lower[j], upper[j]]` with `stiffness[j]` (each `(m,)`), as a
        database lists them; consecutive phases must meet: an overlap or a gap raises
        `ValueError` naming the phases. Then as `from_phases`."""
        lower = np.asarray(lower, dtype=float)
        upper = np.asarray(upper, dtype=float)
        for j in range(lower.size):
            if not upper[j] > lower[j]:
                raise ValueError(f"phase {j + 1}: upper bound {upper[j]:g} does not exceed its "
                                 f"lower bound {lower[j]:g}")
        for j in range(lower.size - 1):
            if upper[j] != lower[j + 1]:
                kind = "overlap" if upper[j] > lower[j + 1] else "leave a gap"
                raise ValueError(f"phases {j + 1} and {j + 2} {kind}: phase {j + 1} ends at "
                                 f"{upper[j]:g}, phase {j + 2} starts at {lower[j + 1]:g}")
        bounds = np.concatenate([lower, upper[-1:]])
        return cls.from_phases(bounds, stiffness, zero_load_at, smoothing)

    @property
    def slopes(self) -> Float[Array, " n-1"]:
        """Stiffness of each phase (N/m or N m/rad), `(n - 1,)`."""
        return jnp.diff(self.load_values) / jnp.diff(self.displacement)

    def _primitive(self, x):
        # int_{x_0}^{x} M.
        x0, y0 = self.displacement[0], self.load_values[0]
        slopes = self.slopes
        steps = jnp.diff(slopes)
        interior = self.displacement[1:-1]
        ramps = _smooth_ramp_integral(x - interior, self.smoothing) \
            - _smooth_ramp_integral(x0 - interior, self.smoothing)
        return y0 * (x - x0) + 0.5 * slopes[0] * (x - x0) ** 2 + jnp.sum(steps * ramps)

    def energy(self, x):
        x = jnp.asarray(x, dtype=float)
        return self._primitive(x) - self._primitive(jnp.zeros_like(x))


def _linear_table(x, y, at):
    # The sharp piecewise-linear table with end phases continued, at one point (numpy).
    if at <= x[0]:
        return y[0] + (at - x[0]) * (y[1] - y[0]) / (x[1] - x[0])
    if at >= x[-1]:
        return y[-1] + (at - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2])
    return float(np.interp(at, x, y))


def pchip_slopes(displacement: Float[Array, " n"], load: Float[Array, " n"]) -> Float[Array, " n"]:
    """Node slopes of the monotone cubic interpolant (Fritsch and Carlson 1980 in the form of
    Fritsch and Butland 1984, with the three-point shape-preserving end rule), `(n,)`.

    Zero where the data turn or are flat on either side, so the interpolant never overshoots;
    the same slopes as `scipy.interpolate.PchipInterpolator`.
    """
    h = jnp.diff(displacement)
    delta = jnp.diff(load) / h
    if displacement.shape[0] == 2:
        return jnp.stack([delta[0], delta[0]])
    w1 = 2.0 * h[1:] + h[:-1]
    w2 = h[1:] + 2.0 * h[:-1]
    flat = (jnp.sign(delta[1:]) != jnp.sign(delta[:-1])) | (delta[:-1] == 0) | (delta[1:] == 0)
    safe_left = jnp.where(flat, 1.0, delta[:-1])
    safe_right = jnp.where(flat, 1.0, delta[1:])
    harmonic = (w1 + w2) / (w1 / safe_left + w2 / safe_right)
    interior = jnp.where(flat, 0.0, harmonic)

    def end(h0, h1, m0, m1):
        d = ((2.0 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
        d = jnp.where(jnp.sign(d) != jnp.sign(m0), 0.0, d)
        return jnp.where((jnp.sign(m0) != jnp.sign(m1)) & (jnp.abs(d) > 3.0 * jnp.abs(m0)),
                         3.0 * m0, d)

    first = end(h[0], h[1], delta[0], delta[1])
    last = end(h[-1], h[-2], delta[-1], delta[-2])
    return jnp.concatenate([first[None], interior, last[None]])


class MonotoneCubicLaw(AbstractLoadLaw):
    """Monotone piecewise-cubic interpolation of tabulated `(displacement, load)` points.

    Cubic Hermite segments with the PCHIP node slopes of `pchip_slopes`: the load passes through
    every point, is C1, and is monotone wherever the data are, so a table of an increasing
    load-displacement curve never gets a negative stiffness. Beyond the first and last point
    the load continues linearly with the end slopes. The energy integrates each cubic exactly
    (Simpson's rule is exact for cubics).

    Fields: `displacement` (m or rad, `(n,)`, increasing) and `load_values` (N or N m, `(n,)`).
    """

    displacement: Float[Array, " n"]
    load_values: Float[Array, " n"]

    def parameter_fields(self, displacement_unit, load_unit, group, prefix=""):
        """The node loads (`load_values`, in `load_unit`, unbounded)."""
        return (ParameterField(f"{prefix}load_values", group, load_unit, -math.inf,
                               name=f"{prefix}load"),)

    def __init__(self, displacement, load, monotone: bool = False):
        """Points `(displacement, load)`, shapes `(n,)`, `n >= 2`; `monotone=True` rejects a
        decreasing load. Raises `ValueError` on unsorted points."""
        self.displacement = jnp.asarray(displacement, dtype=float)
        self.load_values = jnp.asarray(load, dtype=float)
        if _traced(displacement, load):
            return  # built from parameters inside a fit: checked by construction
        x, y = _check_nodes(displacement, load, "monotone cubic law")
        if monotone:
            check_monotone(y, "monotone cubic law")

    def _segment(self, i, x, slopes):
        # The cubic of segment i at x.
        x0, x1 = self.displacement[i], self.displacement[i + 1]
        y0, y1 = self.load_values[i], self.load_values[i + 1]
        h = x1 - x0
        t = (x - x0) / h
        return (y0 * (1 + 2 * t) * (1 - t) ** 2 + h * slopes[i] * t * (1 - t) ** 2
                + y1 * t**2 * (3 - 2 * t) - h * slopes[i + 1] * t**2 * (1 - t))

    def _primitive(self, x):
        # int_{x_0}^{x} M.
        xs, ys = self.displacement, self.load_values
        slopes = pchip_slopes(xs, ys)
        n = xs.shape[0]
        segments = jnp.arange(n - 1)
        middles = 0.5 * (xs[:-1] + xs[1:])
        pieces = jnp.diff(xs) / 6.0 * (ys[:-1] + 4.0 * jax.vmap(
            lambda i, m: self._segment(i, m, slopes))(segments, middles) + ys[1:])
        cumulative = jnp.concatenate([jnp.zeros(1), jnp.cumsum(pieces)])
        i = jnp.clip(jnp.searchsorted(xs, x, side="right") - 1, 0, n - 2)
        # Clamp the point into its segment so that the unused branches stay finite.
        inside_x = jnp.where(x < xs[0], xs[0], jnp.where(x > xs[-1], xs[-1], x))
        within = cumulative[i] + (inside_x - xs[i]) / 6.0 * (
            ys[i] + 4.0 * self._segment(i, 0.5 * (xs[i] + inside_x), slopes)
            + self._segment(i, inside_x, slopes))
        below = ys[0] * (x - xs[0]) + 0.5 * slopes[0] * (x - xs[0]) ** 2
        above = cumulative[-1] + ys[-1] * (x - xs[-1]) + 0.5 * slopes[-1] * (x - xs[-1]) ** 2
        return jnp.where(x < xs[0], below, jnp.where(x > xs[-1], above, within))

    def energy(self, x):
        x = jnp.asarray(x, dtype=float)
        return self._primitive(x) - self._primitive(jnp.zeros_like(x))


class TanCosLaw(AbstractLoadLaw):
    """`M = k tan(x/2) / cos(x/2)`, the rotational joint spring of Fritzkowski and Walczak
    (eq 35); energy `E = 2 k (1 / cos(x/2) - 1)`. Linear with stiffness `k/2` at small angles,
    stiffening without bound as `|x| -> pi` (valid for `|x| < pi` only).

    Field: `coefficient` (`k`, N m/rad nominally: the law is nonlinear).
    """

    coefficient: Float[Array, ""]

    def parameter_fields(self, displacement_unit, load_unit, group, prefix=""):
        """The coefficient `k` (`load_unit/displacement_unit`, >= 0)."""
        return (ParameterField(f"{prefix}coefficient", group,
                               f"{load_unit}/{displacement_unit}", 0.0),)

    def __init__(self, coefficient):
        self.coefficient = jnp.asarray(coefficient, dtype=float)

    def energy(self, x):
        return 2.0 * self.coefficient * (1.0 / jnp.cos(0.5 * jnp.asarray(x, dtype=float)) - 1.0)


class PolynomialLaw(AbstractLoadLaw):
    """`M = sum_j c_j x^j` for `j = 1..n`, energy `sum_j c_j x^(j+1) / (j+1)`; odd terms
    give a law symmetric about zero.

    Field: `coefficients` (`(n,)`: `c_1` in N/m or N m/rad, `c_2` per m^2 or rad^2, ...).
    """

    coefficients: Float[Array, " n"]

    def parameter_fields(self, displacement_unit, load_unit, group, prefix=""):
        """The coefficients `c_k` of `x^(k+1)` (`load_unit/displacement_unit^(k+1)`,
        unbounded)."""
        units = tuple(f"{load_unit}/{displacement_unit}^{k + 1}"
                      for k in range(self.coefficients.shape[0]))
        return (ParameterField(f"{prefix}coefficients", group, units, -math.inf),)

    def __init__(self, coefficients):
        coefficients = jnp.atleast_1d(jnp.asarray(coefficients, dtype=float))
        if coefficients.ndim != 1:
            raise ValueError(f"polynomial law: coefficients must be a 1-D list, got shape "
                             f"{coefficients.shape}")
        self.coefficients = coefficients

    def energy(self, x):
        x = jnp.asarray(x, dtype=float)
        powers = jnp.arange(2, self.coefficients.shape[0] + 2)
        return jnp.sum(self.coefficients * x**powers / powers)
