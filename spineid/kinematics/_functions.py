"""Functions of one coordinate as OpenSim models use them: in the transform axes of a
`CustomJoint` (a rotation angle or translation as a function of a coordinate) and in
`CoordinateCouplerConstraint`s (a dependent coordinate as a function of an independent one).

Each is an equinox Module whose arrays are parameters, evaluated at a scalar `x` (the
coordinate: rad or m) and differentiable in `x` and in its parameters; the values equal
OpenSim's own `calcValue` (tests/test_osim_models.py checks the splines' and the others'
against the `opensim` package; its Python API lacks `NaturalCubicSpline`, checked against its
definition and, with the multiplier, through a model OpenSim reads):

- `Constant(value)`: `f(x) = value`.
- `LinearFunction(slope, intercept)`: `f(x) = slope x + intercept`.
- `PolynomialFunction(coefficients)`: `f(x) = sum_k c_k x^(n-k)`, highest power first
  (SimTK's `Function::Polynomial`).
- `MultiplierFunction(function, scale)`: `f(x) = scale g(x)`.
- `PiecewiseLinearFunction(x, y)`: linear interpolation of the points, continued linearly with
  the end segments' slopes.
- `SimmSpline(x, y)`: the cubic spline of Forsythe, Malcolm and Moler (Computer Methods for
  Mathematical Computations, 1977, section 4.4), whose end conditions match the third
  derivatives of the cubics through the first and last four points; continued linearly with
  the end slopes outside the points (OpenSim's `SimmSpline`).
- `NaturalCubicSpline(x, y)`: the cubic spline with zero second derivative at both ends;
  continued linearly outside the points.

A coupler of several independent coordinates, or a transform axis of several coordinates,
uses `MultivariatePolynomial` (OpenSim's `MultivariatePolynomialFunction`), a function of a
vector `x` `(d,)`.
"""

import abc
import typing

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._arrays import floats


class AbstractCoordinateFunction(eqx.Module):
    """A function of one coordinate `x` (rad or m) as an OpenSim model uses it."""

    @abc.abstractmethod
    def __call__(self, x: Float[ArrayLike, ""]) -> Float[Array, ""]:
        """The value at the scalar `x` (rad or m, as the axis it drives)."""

    def prepared(self) -> "AbstractCoordinateFunction":
        """The same function with what does not depend on `x` computed once (a spline's
        coefficients), for a caller that evaluates it many times in one program (the
        kinematics of a right-hand side, traced for each derivative). Default: itself."""
        return self


class Constant(AbstractCoordinateFunction):
    """`f(x) = value` (OpenSim `Constant`)."""

    value: Float[Array, ""]

    def __call__(self, x):
        """`value`, whatever `x`."""
        return self.value + 0.0 * x


class LinearFunction(AbstractCoordinateFunction):
    """`f(x) = slope x + intercept` (OpenSim `LinearFunction`, coefficients `[slope,
    intercept]`)."""

    slope: Float[Array, ""]
    intercept: Float[Array, ""]

    def __call__(self, x):
        """`slope x + intercept`."""
        return self.slope * x + self.intercept


class PolynomialFunction(AbstractCoordinateFunction):
    """`f(x) = c_0 x^n + c_1 x^(n-1) + ... + c_n` (OpenSim `PolynomialFunction`, coefficients
    highest power first), evaluated by Horner's rule."""

    coefficients: Float[Array, " m"]

    def __call__(self, x):
        """The polynomial at `x`."""
        value = jnp.zeros_like(jnp.asarray(x, dtype=float))
        for c in self.coefficients:
            value = value * x + c
        return value


class MultiplierFunction(AbstractCoordinateFunction):
    """`f(x) = scale g(x)` (OpenSim `MultiplierFunction`: `function` and `scale`)."""

    function: AbstractCoordinateFunction
    scale: Float[Array, ""]

    def __call__(self, x):
        """`scale` times the wrapped function at `x`."""
        return self.scale * self.function(x)

    def prepared(self) -> "MultiplierFunction":
        """The same product, its function prepared."""
        return MultiplierFunction(self.function.prepared(), self.scale)


def _check_points(name: str, x, y) -> None:
    # (Checked where the points are concrete; a model rebuilt under jit or vmap is not.)
    if isinstance(x, jax.core.Tracer) or isinstance(y, jax.core.Tracer):
        return
    x = jnp.asarray(x)
    if x.ndim != 1 or jnp.shape(y) != x.shape or x.shape[0] < 2:
        raise ValueError(f"{name}: x and y must be two lists of the same length, at least 2 "
                         f"points; got shapes {jnp.shape(x)} and {jnp.shape(y)}")
    if not bool(jnp.all(jnp.diff(x) > 0)):
        raise ValueError(f"{name}: x must increase strictly; got {list(map(float, x))}")


def _segment(x, points):
    # Index i of the segment [x_i, x_(i+1)] holding x (0 below the points, n - 2 above).
    return jnp.clip(jnp.searchsorted(points, x, side="right") - 1, 0, points.shape[0] - 2)


class PiecewiseLinearFunction(AbstractCoordinateFunction):
    """Linear interpolation of the points `(x_i, y_i)` (OpenSim `PiecewiseLinearFunction`),
    continued with the first and last segments' slopes. Fields `x`, `y` `(n,)`, `x`
    increasing."""

    x: Float[Array, " n"]
    y: Float[Array, " n"]

    def __check_init__(self):
        _check_points("PiecewiseLinearFunction", self.x, self.y)

    def __call__(self, x):
        """The interpolated value at `x`."""
        i = _segment(x, self.x)
        slope = (self.y[i + 1] - self.y[i]) / (self.x[i + 1] - self.x[i])
        return self.y[i] + slope * (x - self.x[i])


def _cubic_value(x, points, y, b, c, d):
    # sum of the cubic on the segment holding x; linear with the end slope b outside.
    n = points.shape[0]
    i = _segment(x, points)
    dx = x - points[i]
    inside = y[i] + dx * (b[i] + dx * (c[i] + dx * d[i]))
    below = y[0] + b[0] * (x - points[0])
    above = y[n - 1] + b[n - 1] * (x - points[n - 1])
    return jnp.where(x < points[0], below, jnp.where(x > points[n - 1], above, inside))


def _tridiagonal(lower, diagonal, upper, rhs):
    # Thomas algorithm over Python lists of scalars (a few points: unrolled).
    n = len(diagonal)
    diagonal, rhs = list(diagonal), list(rhs)
    for i in range(1, n):
        factor = lower[i] / diagonal[i - 1]
        diagonal[i] = diagonal[i] - factor * upper[i - 1]
        rhs[i] = rhs[i] - factor * rhs[i - 1]
    solution = [None] * n
    solution[n - 1] = rhs[n - 1] / diagonal[n - 1]
    for i in range(n - 2, -1, -1):
        solution[i] = (rhs[i] - upper[i] * solution[i + 1]) / diagonal[i]
    return solution


def _spline_coefficients(x, y, natural: bool):
    # (b, c, d) of y_i + b_i dx + c_i dx^2 + d_i dx^3 on each segment, from the second
    # derivatives' halves c_i solving the usual tridiagonal system with the chosen end rows.
    n = x.shape[0]
    h = [x[i + 1] - x[i] for i in range(n - 1)]
    slopes = [(y[i + 1] - y[i]) / h[i] for i in range(n - 1)]
    if n == 2:
        b = jnp.stack([slopes[0], slopes[0]])
        zero = jnp.zeros(2)
        return b, zero, zero
    lower = [0.0] + [h[i - 1] for i in range(1, n - 1)] + [h[n - 2]]
    upper = [h[0]] + [h[i] for i in range(1, n - 1)] + [0.0]
    diagonal = [None] + [2.0 * (h[i - 1] + h[i]) for i in range(1, n - 1)] + [None]
    rhs = [None] + [slopes[i] - slopes[i - 1] for i in range(1, n - 1)] + [None]
    if natural:
        diagonal[0], diagonal[n - 1], upper[0], lower[n - 1] = 1.0, 1.0, 0.0, 0.0
        rhs[0] = rhs[n - 1] = 0.0 * slopes[0]
    else:
        # Forsythe-Malcolm-Moler: the third derivative at each end equals that of the cubic
        # through the four end points (with three points, a parabola: zero right sides).
        diagonal[0], diagonal[n - 1] = -h[0], -h[n - 2]
        rhs[0] = rhs[n - 1] = 0.0 * slopes[0]
        if n > 3:
            left = (rhs[2] / (x[3] - x[1]) - rhs[1] / (x[2] - x[0]))
            right = (rhs[n - 2] / (x[n - 1] - x[n - 3]) - rhs[n - 3] / (x[n - 2] - x[n - 4]))
            rhs[0] = left * h[0] ** 2 / (x[3] - x[0])
            rhs[n - 1] = -right * h[n - 2] ** 2 / (x[n - 1] - x[n - 4])
    sigma = _tridiagonal(lower, diagonal, upper, rhs)
    b = [slopes[i] - h[i] * (sigma[i + 1] + 2.0 * sigma[i]) for i in range(n - 1)]
    b.append(slopes[n - 2] + h[n - 2] * (sigma[n - 2] + 2.0 * sigma[n - 1]))
    d = [(sigma[i + 1] - sigma[i]) / h[i] for i in range(n - 1)]
    d.append(d[n - 2])
    return jnp.stack(b), 3.0 * jnp.stack(sigma), jnp.stack(d)


class CubicTable(AbstractCoordinateFunction):
    """A piecewise cubic with its coefficients: `y_i + b_i d + c_i d^2 + d_i d^3` on segment
    `i` (`d = x - x_i`), linear with the end slopes `b` outside the points; what the splines
    are `prepared()` into. Fields `x`, `y`, `b`, `c`, `d` `(n,)`."""

    x: Float[Array, " n"]
    y: Float[Array, " n"]
    b: Float[Array, " n"]
    c: Float[Array, " n"]
    d: Float[Array, " n"]

    def __call__(self, x):
        """The cubic's value at `x`."""
        return _cubic_value(x, self.x, self.y, self.b, self.c, self.d)


class _InterpolatingSpline(AbstractCoordinateFunction):
    # A cubic spline through the points `(x_i, y_i)`, linear outside them; its end condition
    # (`natural`) is the subclass's.
    x: Float[Array, " n"]
    y: Float[Array, " n"]
    natural: typing.ClassVar[bool]

    def __check_init__(self):
        _check_points(type(self).__name__, self.x, self.y)

    def __call__(self, x):
        """The spline's value at `x`."""
        return self.prepared()(x)

    def prepared(self) -> CubicTable:
        """The spline as a `CubicTable` (its coefficients solved once)."""
        return CubicTable(self.x, self.y,
                          *_spline_coefficients(self.x, self.y, natural=self.natural))


class SimmSpline(_InterpolatingSpline):
    """OpenSim's `SimmSpline` through the points `(x_i, y_i)` (module docstring: the
    Forsythe-Malcolm-Moler cubic spline, linear outside the points). Fields `x`, `y` `(n,)`,
    `x` increasing, `n >= 2` (two points: a line)."""

    natural: typing.ClassVar[bool] = False


class NaturalCubicSpline(_InterpolatingSpline):
    """OpenSim's `NaturalCubicSpline` through the points `(x_i, y_i)`: zero second derivative
    at both ends, linear outside the points. Fields `x`, `y` `(n,)`, `x` increasing."""

    natural: typing.ClassVar[bool] = True


def multivariate_exponents(dimension: int, order: int) -> tuple[tuple[int, ...], ...]:
    """The exponents `(e_1, ..., e_d)` of the terms `x_1^e_1 ... x_d^e_d` of total degree up to
    `order` in `dimension` variables, in the order of OpenSim's
    `MultivariatePolynomialFunction` coefficients: the first variable's exponent outermost,
    each from 0 up (for two variables and order 2: `1, y, y^2, x, x y, x^2`)."""
    if dimension == 0:
        return ((),)
    return tuple((first,) + rest for first in range(order + 1)
                 for rest in multivariate_exponents(dimension - 1, order - first))


class MultivariatePolynomial(eqx.Module):
    """A polynomial of several coordinates (OpenSim's `MultivariatePolynomialFunction`, in a
    `CoordinateCouplerConstraint` of several independent coordinates or a `TransformAxis` of
    several coordinates; of one, either): `f(x) = sum_k c_k
    prod_i x_i^(e_ki)` at `x` `(d,)` (rad or m), the terms in `multivariate_exponents`' order.
    Fields `coefficients` `(m,)` and `exponents` (static, `(m, d)` as tuples)."""

    coefficients: Float[Array, " m"]
    exponents: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    def __call__(self, x: Float[ArrayLike, " d"]) -> Float[Array, ""]:
        """The polynomial at `x` `(d,)` (powers by repeated products: finite derivatives at
        zero)."""
        x = jnp.asarray(x, dtype=float)
        exponents = np.array(self.exponents, dtype=int).reshape(len(self.exponents), -1)
        powers = [jnp.ones_like(x)]
        for _ in range(int(exponents.max(initial=0))):
            powers.append(powers[-1] * x)
        table = jnp.stack(powers)  # (order + 1, d): x_i^k at [k, i]
        terms = jnp.prod(table[exponents, np.arange(exponents.shape[1])], axis=1)
        return jnp.sum(self.coefficients * terms)

    def prepared(self) -> "MultivariatePolynomial":
        """Itself (nothing to compute once)."""
        return self


def coordinate_function(kind: str, **values) -> AbstractCoordinateFunction:
    """The function of OpenSim class name `kind` (one of `SUPPORTED_FUNCTIONS`) from its
    numbers (`value`; `slope`, `intercept`; `coefficients`; `x`, `y`; `function`, `scale`), as
    float64 arrays."""
    if kind not in _CLASSES:
        raise ValueError(f"function {kind!r} is not supported; expected one of "
                         f"{list(SUPPORTED_FUNCTIONS)}")
    arrays = {key: value if isinstance(value, AbstractCoordinateFunction) else floats(value)
              for key, value in values.items()}
    return _CLASSES[kind](**arrays)


_CLASSES = {"Constant": Constant, "LinearFunction": LinearFunction,
            "PolynomialFunction": PolynomialFunction, "MultiplierFunction": MultiplierFunction,
            "PiecewiseLinearFunction": PiecewiseLinearFunction, "SimmSpline": SimmSpline,
            "NaturalCubicSpline": NaturalCubicSpline}
SUPPORTED_FUNCTIONS = tuple(_CLASSES)
"""OpenSim function classes `coordinate_function` builds."""
