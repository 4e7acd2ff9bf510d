"""The numbers and functions of an OpenSim model file (`spineid/io/_osim.py`): a property's
text and its list of numbers, and a component's function (`Constant`, `LinearFunction`,
`PolynomialFunction`, `PiecewiseLinearFunction`, `SimmSpline`, `NaturalCubicSpline`,
`MultiplierFunction` of one coordinate; `MultivariatePolynomialFunction` of one or several)
as a `spineid.kinematics` function. Each refusal goes through the reader's `fail` (one sentence
naming the component's path)."""

import numpy as np

from .._arrays import floats
from ..kinematics._functions import (
    SUPPORTED_FUNCTIONS,
    MultivariatePolynomial,
    coordinate_function,
    multivariate_exponents,
)


def text_of(element, tag, default=None):
    """The stripped text of `element`'s child `<tag>`, or `default` where it has none."""
    found = element.find(tag)
    if found is None or found.text is None:
        return default
    return found.text.strip()


def numbers_of(reader, element, tag, size, where, default=None):
    """The numbers of `element`'s child `<tag>` (a float64 array, `(size,)` where `size` is
    given), or `default` where it is missing; anything else (no number, another count, not
    finite) refused through `reader.fail`, naming the component's path `where`."""
    text = text_of(element, tag)
    if text is None:
        if default is None:
            reader.fail(f"{where}: <{tag}> is missing")
        return np.asarray(default, dtype=float)
    try:
        values = np.array([float(v) for v in text.split()], dtype=float)
    except ValueError:
        reader.fail(f"{where}: <{tag}> = {text!r} is not a list of numbers")
    if size is not None and values.shape != (size,):
        reader.fail(f"{where}: <{tag}> has {values.size} numbers; expected {size}")
    if not np.all(np.isfinite(values)):
        reader.fail(f"{where}: <{tag}> = {text!r} holds a value that is not finite")
    return values


def function_holder(element):
    """The element holding a component's function: a <function> property wrapping it, or the
    component itself when the function is written in place (<SimmSpline name="function">);
    `None` where there is none."""
    wrapper = element.find("function")
    if wrapper is not None:
        return wrapper
    if any(child.get("name") == "function" for child in element):
        return element
    return None


def function_of(reader, element, where, dimension: int | None = None):
    """The function of a property element holding one function element: of one coordinate,
    or of `dimension` coordinates (a coupler's independent ones, a transform axis's) a
    `MultivariatePolynomial` (of one, either)."""
    children = [child for child in element if isinstance(child.tag, str)]
    named = [child for child in children if child.get("name") == "function"]
    children = named or children
    if len(children) != 1:
        reader.fail(f"{where}: expected one function, found {len(children)}")
    node = children[0]
    kind = node.tag
    if kind == "MultivariatePolynomialFunction" and dimension is None:
        reader.fail(f"{where}: a MultivariatePolynomialFunction here; spineid reads one as "
                    "the function of a transform axis's coordinates or of a coupler's "
                    "independent ones (not of none, inside a MultiplierFunction or of time)")
    if kind == "MultivariatePolynomialFunction" or (dimension or 1) > 1:
        return _multivariate(reader, node, where, dimension)
    if kind == "Constant":
        return coordinate_function(kind, value=float(numbers_of(reader, node, "value", 1,
                                                                where)[0]))
    if kind == "LinearFunction":
        slope, intercept = numbers_of(reader, node, "coefficients", 2, where)
        return coordinate_function(kind, slope=slope, intercept=intercept)
    if kind == "PolynomialFunction":
        return coordinate_function(kind, coefficients=numbers_of(reader, node, "coefficients",
                                                                 None, where))
    if kind in ("PiecewiseLinearFunction", "SimmSpline", "NaturalCubicSpline"):
        x = numbers_of(reader, node, "x", None, where)
        y = numbers_of(reader, node, "y", None, where)
        try:
            return coordinate_function(kind, x=x, y=y)
        except ValueError as error:
            reader.fail(f"{where}: {error}")
    if kind == "MultiplierFunction":
        inner = function_holder(node)
        if inner is None:
            reader.fail(f"{where}: MultiplierFunction has no <function>")
        scale = float(numbers_of(reader, node, "scale", 1, where, default=[1.0])[0])
        return coordinate_function(kind, function=function_of(reader, inner, where),
                                   scale=scale)
    reader.fail(f"{where}: function {kind} is not supported; supported are "
                f"{', '.join(SUPPORTED_FUNCTIONS)}")


def _multivariate(reader, node, where, dimension: int):
    # OpenSim's MultivariatePolynomialFunction (`dimension`, `order`, `coefficients` in
    # `multivariate_exponents`' order) of `dimension` coordinates (a coupler's independent
    # ones, a transform axis's).
    if node.tag != "MultivariatePolynomialFunction":
        reader.fail(f"{where}: {dimension} coordinates with a {node.tag}; a function of "
                    "several coordinates must be a MultivariatePolynomialFunction")
    size = int(numbers_of(reader, node, "dimension", 1, where)[0])
    if size != dimension:
        reader.fail(f"{where}: a MultivariatePolynomialFunction of dimension {size} for "
                    f"{dimension} coordinate(s)")
    exponents = multivariate_exponents(size, int(numbers_of(reader, node, "order", 1, where)[0]))
    return MultivariatePolynomial(
        floats(numbers_of(reader, node, "coefficients", len(exponents), where)), exponents)
