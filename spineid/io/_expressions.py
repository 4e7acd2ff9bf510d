"""Polynomial expressions of an OpenSim `ExpressionBasedBushingForce` (`Mx_expression`, ...),
read into their terms.

OpenSim evaluates each expression with Lepton in the six deflections `theta_x, theta_y,
theta_z` (rad, body-fixed X-Y-Z angles of frame 2 in frame 1) and `delta_x, delta_y, delta_z`
(m). spineid reads those that are polynomials: numbers, the six names, `+`, `-`, `*`, `/` by a
number, `^` (or `**`) to a whole power of 0 or more, and parentheses, expanded into a sum of
monomials `c prod_v d_v^e_v`. Anything else (functions such as `exp` or `sin`, a division by
a deflection, other names) is refused by `polynomial_terms` in one sentence.
"""

import ast
import math

from ..models._tree_parts import DEFLECTIONS, LOADS, monomial

EXPRESSIONS = tuple(f"{load}_expression" for load in LOADS)
"""The six expressions' properties, in OpenSim's order (moments about frame 1's axes, then
forces)."""


def polynomial_terms(text: str, where: str) -> dict[tuple[int, ...], float]:
    """The expression `text` as `{exponents (6,): coefficient}` over `DEFLECTIONS` (a term
    written with a zero coefficient, `0*theta_x^3`, is kept: a coefficient to fit; a zero
    constant is left out). Raises `ValueError` naming `where` and the expression when it is
    not a polynomial of the deflections."""
    source = (text or "0").strip().replace("^", "**")
    try:
        tree = ast.parse(source, mode="eval")
        return {e: c for e, c in _expand(tree.body).items() if c != 0.0 or any(e)}
    except (SyntaxError, ValueError, TypeError, RecursionError) as error:
        detail = f" ({error})" if isinstance(error, ValueError) else ""
        raise ValueError(f"{where}: {text.strip()!r} is not a polynomial of "
                         f"{', '.join(DEFLECTIONS)} (numbers, + - *, / by a number, ^ to a "
                         f"whole power){detail}") from None


def _constant(value: float) -> dict:
    return {(0,) * len(DEFLECTIONS): float(value)}


def _add(a: dict, b: dict, sign: float = 1.0) -> dict:
    out = dict(a)
    for exponents, coefficient in b.items():
        out[exponents] = out.get(exponents, 0.0) + sign * coefficient
    return out


def _multiply(a: dict, b: dict) -> dict:
    out: dict = {}
    for ea, ca in a.items():
        for eb, cb in b.items():
            exponents = tuple(x + y for x, y in zip(ea, eb))
            out[exponents] = out.get(exponents, 0.0) + ca * cb
    return out


def _number(polynomial: dict) -> float | None:
    # The polynomial's value where it is a constant, else None.
    terms = {e: c for e, c in polynomial.items() if c != 0.0}
    if not terms:
        return 0.0
    if set(terms) == {(0,) * len(DEFLECTIONS)}:
        return terms[(0,) * len(DEFLECTIONS)]
    return None


def _expand(node) -> dict:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return _constant(node.value)
    if isinstance(node, ast.Name):
        if node.id not in DEFLECTIONS:
            raise ValueError(f"unknown name {node.id!r}")
        exponents = [0] * len(DEFLECTIONS)
        exponents[DEFLECTIONS.index(node.id)] = 1
        return {tuple(exponents): 1.0}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        inner = _expand(node.operand)
        return inner if isinstance(node.op, ast.UAdd) else _multiply(_constant(-1.0), inner)
    if isinstance(node, ast.BinOp):
        left, right = _expand(node.left), _expand(node.right)
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return _add(left, right, 1.0 if isinstance(node.op, ast.Add) else -1.0)
        if isinstance(node.op, ast.Mult):
            return _multiply(left, right)
        if isinstance(node.op, ast.Div):
            divisor = _number(right)
            if divisor is None or divisor == 0.0:
                raise ValueError("a division by a deflection or by zero")
            return _multiply(left, _constant(1.0 / divisor))
        if isinstance(node.op, ast.Pow):
            power = _number(right)
            if power is None or power < 0 or power != math.floor(power) or power > 16:
                raise ValueError("a power that is not a whole number from 0 to 16")
            out = _constant(1.0)
            for _ in range(int(power)):
                out = _multiply(out, left)
            return out
    raise ValueError(f"{ast.unparse(node)!r} is not part of a polynomial")


def render_terms(terms: list[tuple[tuple[int, ...], float]]) -> str:
    """An expression Lepton reads back to the same polynomial: `c*theta_x^2*delta_y + ...`
    (each coefficient at full precision, negative ones in parentheses); `0.0` for none."""
    pieces = []
    for exponents, coefficient in terms:
        number = f"({coefficient!r})" if coefficient < 0 else repr(coefficient)
        pieces.append("*".join(filter(None, (number, monomial(exponents)))))
    return " + ".join(pieces) if pieces else "0.0"
