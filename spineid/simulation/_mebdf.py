"""Cash's modified extended backward differentiation formulae (MEBDF) as a diffrax solver.

The cervical paper this project grew from integrates its equations of motion with MEBDFV, the
MEBDF code of Abdulla and Cash (Fritzkowski and Walczak, section 2.3). One step from `t_n` to
`t_(n+1) = t_n + h` of order `q` (Cash 1983) runs three implicit stages on the history
`y_n, y_(n-1), ..., y_(n+1-q)`:

1. the BDF of order `q` at `t_(n+1)`: `ybar_(n+1) + sum_j a_j y_(n+1-j) = h b f(ybar_(n+1))`;
2. the same BDF one step further, at the "superfuture" point `t_(n+2) = t_(n+1) + h`, with
   `ybar_(n+1)` in its history: `ybar_(n+2)`;
3. the extended formula of order `q + 1`, modified so that its implicit coefficient is the
   BDF's `b`: `y_(n+1) + sum_j ahat_j y_(n+1-j) = h [bhat_2 f(ybar_(n+2)) + b f(y_(n+1)) +
   (bhat_1 - b) f(ybar_(n+1))]`.

All three stages solve `z - h b f(t, z) = c` with one iteration matrix `I - h b J`, factorised
once per step: the chord (modified Newton) iteration of MEBDFV. As there, `J`, the Jacobian of
`f`, is kept from step to step while the iterations with it converge and contract every
correction by at least `CONTRACTION`; otherwise the step is solved again with the Jacobian at
its start (`reuse_jacobian`; measured in experiments/integrators.py). Under the implicit form
the third stage takes the derivatives at `ybar_(n+1)` and `ybar_(n+2)` as their BDF stages
define them, `(ybar - c) / (h b)` (what `f(ybar)` is for an explicit ODE, to the iteration's
tolerance), which is what lets the same stages solve the implicit form `M(t, y) y' = f(t, y)`
(`ImplicitTerm`) without inverting `M`: each stage solves `M(t, z) (z - c) = h b f(t, z)` with
the iteration matrix `M_0 - h b J` (`M_0` at the step's start; the term `dM/dy (z - c)`, of
order `h`, left out of it as MEBDFV leaves it), and with a singular `M` this is a semi-explicit
DAE of index 1 (Hairer and Wanner, section VI.1: BDF-type methods applied to `M y' = f`). The
coefficients are those of polynomial exactness on the actual past times (variable-coefficient
form: no interpolation of the history when the step size changes), from small linear systems
solved in each step. The local error estimate is `y_(n+1) - ybar_(n+1)`, the order-`q` BDF's
error against the order-`q + 1` result: an estimate of error order `q + 1`.

The order `q` varies between `min_order` and `max_order` (a simplified form of DASSL's rule,
Brenan, Campbell and Petzold 1996, section 5.2, on this history). From 1 at the start (and
after a jump) it rises by one per accepted step as the history fills; then, after each accepted
step, the scaled derivatives `T_p = h^p y^(p)` are estimated from the divided differences of
the new value and the history (`T_p`, which measures the error of the order `p - 1` formula,
needs `p` past points, so the history keeps `max_order + 1`): the order falls by one where
`T_q <= T_(q+1)` (a lower order would be as accurate: the series of derivatives has stopped
falling, as in a stiff transient or near a kink) and rises by one where `T_(q+2) < T_(q+1)`
after `q + 1` steps at the same order. Where `T_p` does not yet have its points, the order
stays. The choice is not differentiated (`stop_gradient`); the controller is told the error
order of `max_order` whatever the order (at a lower order it changes the step less than it
could: safe, slower). DASSL lowers above order 2 only where the order below has stopped falling
too (`T_(q-1)`, and weights); measured (experiments/integrators.py, rtol 1e-6) that test
changes the test set's steps by under 2% and keeps the stiff oscillator at order 4 (37259
steps, error 1.6e-4, against 29385 and 1.7e-7 with the test on `T_q` and `T_(q+1)` alone), so
it is not used.

What this solver is, and is not yet: explicit ODEs `y' = f(t, y)`
(`diffrax.ODETerm`), the implicit form `M(t, y) y' = f(t, y)` and semi-explicit DAEs of index
1 (`ImplicitTerm`; index 2 and 3 only after the user reduces the index, as the pendulum's
constraint differentiated twice, or the pinned pair in maximal coordinates, `_maximal.py`;
the constraint then drifts at the tolerance's level), variable
step and order (or the order fixed: `min_order = max_order`). A rejected step keeps its order
(DASSL also lowers it there where `T_q <= T_(q+1)`; diffrax discards a rejected step's solver
state, so here only accepted steps choose). A chord
iteration that does not converge rejects the step (the controller then shrinks it). The
controller is told the highest order's error order (above); the second
stage evaluates `f` one step past the step's end, so a step that ends at a jump (`jump_ts`)
sees the field beyond it, which the error estimate then has to shrink the step for.
"""

import math
from typing import ClassVar

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float

from ..models._mechanics import equations_of_motion

CONTRACTION = 0.5
"""A reused Jacobian's chord iterations must shrink every correction at least this much (else
the step is solved again with a fresh Jacobian): where a rate was measured, the iterate is then
within the last correction, itself within the tolerance, of the root (a stage that converges at
its first correction has no rate measured, and is taken as it is)."""

MAX_ORDER = 5
"""The highest `max_order` the solver takes (its corrector is of order `max_order + 1`; Cash's
MEBDF are A-stable to order 4 and A(alpha)-stable, with shrinking angles, above)."""


def bdf_coefficients(s, q):
    """The BDF of order `q` through the scaled times `s` `(K + 1,)`: `s[0] = 0` the new point,
    `s[j] = (t_j - t_new) / h` the past ones, newest first (only the first `q` used; the others
    must be distinct and finite). **Returns:** `(a, b)`: `a` `(K + 1,)` with `a[0] = 1` and
    zeros past `q`, such that `sum_j a_j y(s_j) = b y'(0)` holds for every polynomial of
    degree `q`."""
    k = s.shape[0] - 1
    p = jnp.arange(k + 1)
    powers = s[None, 1:] ** p[:, None]  # (rows p, unknowns a_1..a_K)
    matrix = jnp.concatenate([powers, -(p == 1)[:, None].astype(s.dtype)], axis=1)
    rhs = -(p == 0).astype(s.dtype)
    # Rows past the order force the unused a_j to zero.
    fixed = jnp.zeros((k + 1, k + 1), s.dtype).at[p[1:], p[1:] - 1].set(1.0)
    used = p <= q
    x = jnp.linalg.solve(jnp.where(used[:, None], matrix, fixed), jnp.where(used, rhs, 0.0))
    return jnp.concatenate([jnp.ones(1, s.dtype), x[:k]]), x[k]


def extended_coefficients(s, q, r=1.0):
    """The extended BDF of order `q + 1` (Cash 1980) through the scaled times `s` (as
    `bdf_coefficients`) with the derivative also at the superfuture point `r` (`(t_(n+2) -
    t_(n+1)) / h`). **Returns:** `(ahat, bhat_1, bhat_2)` with `ahat[0] = 1`, such that
    `sum_j ahat_j y(s_j) = bhat_1 y'(0) + bhat_2 y'(r)` holds for every polynomial of degree
    `q + 1`."""
    k = s.shape[0] - 1
    p = jnp.arange(k + 2)
    powers = s[None, 1:] ** p[:, None]
    at_new = (p == 1).astype(s.dtype)
    at_future = p * r ** jnp.maximum(p - 1, 0)
    matrix = jnp.concatenate([powers, -at_new[:, None], -at_future[:, None]], axis=1)
    rhs = -(p == 0).astype(s.dtype)
    fixed = jnp.zeros((k + 2, k + 2), s.dtype).at[p[2:], p[2:] - 2].set(1.0)
    used = p <= q + 1
    x = jnp.linalg.solve(jnp.where(used[:, None], matrix, fixed), jnp.where(used, rhs, 0.0))
    return jnp.concatenate([jnp.ones(1, s.dtype), x[:k]]), x[k], x[k + 1]


class ImplicitTerm(diffrax.AbstractTerm):
    """The equations `M(t, y) y' = f(t, y)` of `y` `(n,)` (a 1-D array): `mass(t, y, args)` the
    `(n, n)` matrix `M`, `vector_field(t, y, args)` the `(n,)` right-hand side `f` (the
    equations of motion in their Lagrangian form, `M(q) q'' = f(q, q')`, as first-order
    equations; a DAE where `M` is singular: zero rows for the algebraic equations `0 = g(t,
    y)`). `spineid.MEBDF` solves it without inverting `M` in its steps (module docstring; only
    the dense output's slope at the start and after a jump takes `M`'s pseudo-inverse); to
    every other diffrax solver it is the explicit ODE `y' = M^-1 f` (`vf` solves with `M`:
    NaN for a DAE, whose singular `M` only MEBDF integrates)."""

    mass: object
    vector_field: object

    def vf(self, t, y, args):
        return jnp.linalg.solve(self.mass(t, y, args), self.vector_field(t, y, args))

    def algebraic_residual(self, t, y, args) -> Float[Array, " n"]:
        """How far `y` `(n,)` at `t` is from the algebraic equations of a DAE: `f(t, y)`
        projected onto the left null space of `M(t, y)` (its singular directions, singular
        values at most `NULL_SPACE` of the largest once its rows and columns are scaled to a
        largest entry of 1; for `M` with zero rows, those rows of `f`), `(n,)` in `f`'s
        units; zero at consistent values, and for a regular `M`."""
        return _off_constraints(self.mass(t, y, args), self.vector_field(t, y, args))

    def consistent(self, t, y, args, iterations: int = 20) -> Float[Array, " n"]:
        """`y` `(n,)` with its algebraic variables (those `M(t, y)` does not act on: its right
        null space) moved the least onto the algebraic equations (Gauss-Newton on
        `algebraic_residual`, `iterations` steps), the others kept: consistent initial values
        for an index-1 DAE whose start `MEBDF` refuses."""
        y = jnp.asarray(y)
        for _ in range(iterations):
            # (The null spaces held at the current `y`: differentiating an SVD is NaN where
            # singular values repeat, as blockdiag(I, M) has them.)
            left, right = _null_spaces(self.mass(t, y, args))

            def equations(z, left=left):
                return left.T @ self.vector_field(t, z, args)

            jacobian = jax.jacfwd(equations)(y) @ right
            y = y - right @ (jnp.linalg.pinv(jacobian) @ equations(y))
        return y

    def contr(self, t0, t1, **kwargs):
        del kwargs
        return t1 - t0

    def prod(self, vf, control):
        return jax.tree_util.tree_map(lambda v: control * v, vf)


NULL_SPACE = 1e-10
"""A mass matrix's singular value at most this fraction of its largest, its rows and columns
scaled to a largest entry of 1, is zero: its direction belongs to the algebraic equations
(`ImplicitTerm.algebraic_residual`)."""

CONSISTENT = 1e-7
"""`MEBDF` starts an implicit term only where its algebraic residual is at most this fraction of
`1 + max |f|` (consistent values; `ImplicitTerm.consistent` projects onto them)."""


def _null_spaces(mass):
    # Orthonormal bases `(n, n)` of the left and right null spaces of `mass`, as columns (the
    # others zero). Their dimension: the singular values at most `NULL_SPACE` of the largest of
    # `mass` equilibrated on both sides (rows, then columns, scaled to a largest entry of 1),
    # so that a regular `M` of equations, or variables, in units far apart (`blockdiag(I, M)`
    # with inertias of 1e-12 kg m^2) is not called singular. Each space from the SVD of `mass`
    # equilibrated on its other side, which leaves it unchanged (the right null space from the
    # rows scaled, the left from the columns), its last singular directions. (Zero rows and
    # columns stay zero; a row that should be zero but holds round-off is scaled up with the
    # others and counted as a differential equation.)
    def scaled(matrix):
        return matrix / _row_scales(matrix)[:, None]

    n = mass.shape[0]
    both = jnp.linalg.svd(scaled(scaled(mass).T).T, compute_uv=False)
    null = jnp.arange(n) >= n - jnp.sum(both <= NULL_SPACE * jnp.max(both))
    _, _, right_t = jnp.linalg.svd(scaled(mass))
    left, _, _ = jnp.linalg.svd(scaled(mass.T).T)
    return left * null[None, :], right_t.T * null[None, :]


def _row_scales(matrix):
    # The largest magnitude in each row of `matrix` `(n,)`, 1 for a zero row: the rows divided
    # by it have a largest entry of 1 (the rows' half of equilibrating a matrix on both sides,
    # `_null_spaces` and `_least_slope`; the columns' half is that of the transpose).
    largest = jnp.max(jnp.abs(matrix), axis=1)
    return jnp.where(largest > 0, largest, 1.0)


def _off_constraints(mass, right_hand):
    # `right_hand` `(n,)` projected onto the left null space of `mass` `(n, n)`: the algebraic
    # equations' residual (`ImplicitTerm.algebraic_residual`).
    left, _ = _null_spaces(mass)
    return left @ (left.T @ right_hand)


def _lagrangian_mass(t, y, system):
    # blockdiag(I, M(t, q)) of the state `y = (q, qdot)` `(2n,)`.
    n = y.shape[0] // 2
    mass, _ = equations_of_motion(system, t, y[:n], y[n:])
    return jnp.block([[jnp.eye(n, dtype=y.dtype), jnp.zeros((n, n), y.dtype)],
                      [jnp.zeros((n, n), y.dtype), mass]])


def _lagrangian_forces(t, y, system):
    # (qdot, f(t, q, qdot)) of the state `y = (q, qdot)` `(2n,)`.
    n = y.shape[0] // 2
    return jnp.concatenate([y[n:], equations_of_motion(system, t, y[:n], y[n:])[1]])


def lagrangian_implicit_term() -> ImplicitTerm:
    """The equations of motion of any spineid model in their implicit form, `M(t, q) qddot =
    f(t, q, qdot)` as first-order equations of the state `y = (q, qdot)` `(2 n_dof,)`:
    `blockdiag(I, M) y' = (qdot, f)` (the model's `equations_of_motion`, Liu 2001 eq 2-9; the
    head-neck chain's in Kane's form, eqs 37-46). The model is the solve's `args`:
    `diffrax.diffeqsolve(spineid.lagrangian_implicit_term(), spineid.MEBDF(), t0, t1, dt0,
    jnp.concatenate(model.initial_state()), args=model, ...)`; MEBDF's steps never invert
    `M`."""
    return ImplicitTerm(_lagrangian_mass, _lagrangian_forces)


class MEBDFState(eqx.Module):
    """What `MEBDF` carries from step to step (`diffrax.SaveAt(solver_state=True)` returns it):
    `times` `(max_order + 1,)` and `values` `(max_order + 1, n)`, the last accepted times and
    flat states, newest first, of which `filled` are set; `slope` `(n,)`, the slope at the last
    accepted point (an implicit term's dense output); `jacobian` `(n, n)`, the last Jacobian of
    the right-hand side, and `n_jacobians`, how many were taken (with the one at the start);
    `order`, the order of the next step, `at_order`, how many accepted steps ran at it, and
    `ramping`, whether the order is still rising from the start (module docstring);
    `order_counts` `(max_order,)`, how many accepted steps ran at each order 1, 2, ...."""

    times: Array
    values: Array
    filled: Array
    slope: Array
    jacobian: Array
    n_jacobians: Array
    order: Array
    at_order: Array
    ramping: Array
    order_counts: Array


def scaled_derivatives(s, history, weights):
    """The scaled derivatives `T_p = h^p y^(p)`, `p = 0 .. K`, of the values `history` `(K + 1,
    n)` at the scaled times `s` `(K + 1,)` (units of the step `h`, newest first, distinct) as
    `p!` times the divided difference of the first `p + 1` points, each as the root mean square
    of its components over `weights` `(n,)` (`(K + 1,)`; exact for a polynomial of degree `p`,
    equal to the backward differences at equal steps: what DASSL's modified divided
    differences measure, Brenan, Campbell and Petzold 1996, section 5.2)."""
    table, norms = history, [jnp.sqrt(jnp.mean((history[0] / weights) ** 2))]
    for m in range(1, s.shape[0]):
        gap = s[:-m] - s[m:]
        table = (table[:-1] - table[1:]) / jnp.where(gap == 0, 1.0, gap)[:, None]
        norms.append(math.factorial(m) * jnp.sqrt(jnp.mean((table[0] / weights) ** 2)))
    return jnp.stack(norms)


def next_order(derivatives, filled, order, at_order, ramping, min_order, max_order):
    """The order after an accepted step of order `order` (module docstring; DASSL's rule
    simplified, Brenan, Campbell and Petzold 1996, section 5.2): `derivatives` `(K + 1,)` the scaled
    derivatives `T_p` through the new value and the `filled` past values before it (`T_p` known
    where `p <= filled`), `at_order` the accepted steps at `order` before this one, `ramping`
    whether the order still rises by one per step from the start. **Returns:** `(order,
    at_order, ramping)` for the next step."""
    size = derivatives.shape[0]

    def known(p):
        return (p <= filled) & (p < size)

    def value(p):
        return derivatives[jnp.minimum(p, size - 1)]

    lower = (order > min_order) & known(order + 1) & (value(order) <= value(order + 1))
    rise_ramping = ramping & (filled >= order)
    rise_settled = (~ramping & (at_order + 1 >= order + 1) & known(order + 2)
                    & (value(order + 2) < value(order + 1)))
    rise = ~lower & (order < max_order) & (rise_ramping | rise_settled)
    new = order - lower.astype(order.dtype) + rise.astype(order.dtype)
    return (new, jnp.where(new == order, at_order + 1, 0),
            ramping & ~lower & (new < max_order))


class MEBDF(diffrax.AbstractAdaptiveSolver):
    """Cash's modified extended BDF (module docstring), for `diffrax.diffeqsolve` with an
    adaptive step-size controller (`diffrax.PIDController`) or constant steps.

    **Fields:** `max_order` (1-5, default 4: the highest BDF order, the corrector's one more)
    and `min_order` (default 1; the order varies between them by the error estimates, module
    docstring; `min_order = max_order` fixes it once the history holds that many points);
    `rtol` (>= 0), `atol` (> 0) (the chord iteration's stop: every
    component of the last correction within `atol + rtol |z|`; keep them about ten times
    tighter than the controller's); `max_iterations` (chord iterations per stage before the
    step is rejected); `reuse_jacobian` (default true: keep the last Jacobian while its
    iterations contract, module docstring; false: a fresh one every step, the better choice
    under `vmap`, where both branches run). The state is an `MEBDFState` (history, slope,
    Jacobian, order).

    Use: `diffrax.diffeqsolve(diffrax.ODETerm(f), spineid.MEBDF(), t0, t1, dt0, y0,
    stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9))`, or with
    `spineid.ImplicitTerm(mass, f)` for `M y' = f` and index-1 DAEs (give `dt0`: the first
    step's size cannot be guessed from a singular `M`, and start from consistent values,
    `0 = g(t0, y0)`); jit, vmap and
    differentiation (reverse mode, and forward mode with `adjoint=diffrax.ForwardMode()`:
    the chord loop is a bounded `eqx.internal.while_loop`) work as with diffrax's own
    solvers. Values between steps (`SaveAt(ts=...)`) come from the cubic Hermite polynomial
    through each step's ends and slopes (third order, whatever the step's order).
    """

    term_structure: ClassVar = diffrax.AbstractTerm  # (ODETerm or ImplicitTerm: `step`)
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation

    max_order: int = eqx.field(static=True, default=4)
    min_order: int = eqx.field(static=True, default=1)
    rtol: float = 1e-8
    atol: float = 1e-11
    max_iterations: int = eqx.field(static=True, default=8)
    reuse_jacobian: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if not (isinstance(self.max_order, int) and 1 <= self.max_order <= MAX_ORDER):
            raise ValueError(f"MEBDF max_order {self.max_order!r}: expected a whole number "
                             f"from 1 to {MAX_ORDER}")
        if not (isinstance(self.min_order, int) and 1 <= self.min_order <= self.max_order):
            raise ValueError(f"MEBDF min_order {self.min_order!r}: expected a whole number "
                             f"from 1 to max_order ({self.max_order})")
        for name, least in (("rtol", 0.0), ("atol", None)):
            # (Plain numbers checked here; arrays, as under a trace, are the caller's.)
            value = getattr(self, name)
            if isinstance(value, (int, float)) and not (
                    math.isfinite(value) and (value > 0 or value == least)):
                raise ValueError(f"MEBDF {name} {value!r}: expected a finite number > 0"
                                 + (" (or 0)" if least is not None else "")
                                 + " (the chord iteration's stop: |correction| <= atol + "
                                 "rtol |z|)")
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(f"MEBDF max_iterations {self.max_iterations!r}: expected a whole "
                             "number >= 1")

    def order(self, terms):
        del terms
        return self.max_order + 1

    def error_order(self, terms):
        del terms
        return self.max_order + 1

    def init(self, terms, t0, t1, y0, args):
        del t1
        terms, direction = _unwrapped(terms)
        _check_term(terms, y0)
        flat, unravel = ravel_pytree(y0)
        k = self.max_order + 1
        times = jnp.full(k, t0, dtype=flat.dtype)
        values = jnp.zeros((k, flat.size), flat.dtype).at[0].set(flat)
        # The slope at the last accepted point (the dense output's, under an implicit term):
        # at the start `M y' = f` by the pseudo-inverse. M and f evaluated once, for the slope
        # and for the check that a DAE starts from consistent values.
        slope = jnp.zeros_like(flat)
        if isinstance(terms, ImplicitTerm):
            mass = terms.mass(direction * t0, flat, args)
            right_hand = terms.vector_field(direction * t0, flat, args)
            slope = direction * _least_slope(mass, right_hand)
            residual = _off_constraints(mass, right_hand)
            values = eqx.error_if(
                values, jnp.max(jnp.abs(residual)) > CONSISTENT * (
                    1.0 + jnp.max(jnp.abs(right_hand))),
                "MEBDF: the initial values violate the DAE's algebraic equations "
                "(ImplicitTerm.algebraic_residual(t0, y0, args) says by how much; "
                "ImplicitTerm.consistent(t0, y0, args) moves its algebraic variables onto them)")
        f = _field(terms, direction, args, unravel)
        return MEBDFState(times, values, jnp.array(1), slope,
                          jax.jacfwd(lambda z: f(t0, z))(flat), jnp.array(1), jnp.array(1),
                          jnp.array(0), jnp.array(True),
                          jnp.zeros(self.max_order, jnp.asarray(1).dtype))

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        # (An equinox module, not a NamedTuple: a NamedTuple's generated `__new__` belongs
        # to no module, which the program store takes for a replacement made at run time.)
        times, values, count = solver_state.times, solver_state.values, solver_state.filled
        slope0, jacobian0 = solver_state.slope, solver_state.jacobian
        n_jacobians, q, at_order = (solver_state.n_jacobians, solver_state.order,
                                    solver_state.at_order)
        ramping, order_counts = solver_state.ramping, solver_state.order_counts
        flat0, unravel = ravel_pytree(y0)
        k = self.max_order + 1
        dtype = flat0.dtype
        # After a jump (or at the start) the history is the step's start alone, the order 1.
        count = jnp.where(made_jump, 1, count)
        q, at_order = jnp.where(made_jump, 1, q), jnp.where(made_jump, 0, at_order)
        ramping = ramping | made_jump
        times, values = times.at[0].set(t0), values.at[0].set(flat0)
        h = t1 - t0
        inner, direction = _unwrapped(terms)
        implicit = isinstance(inner, ImplicitTerm)
        f = _field(inner, direction, args, unravel)

        if implicit:
            def times_mass(t, z, v):
                return inner.mass(direction * t, z, args) @ v

            # After a jump the slope at the start is the field's beyond it.
            slope0 = jax.lax.cond(made_jump, lambda: _start_slope(inner, direction, t0, flat0,
                                                                   args), lambda: slope0)
            start_mass = inner.mass(direction * t0, flat0, args)
        else:
            def times_mass(t, z, v):
                return v

            start_mass = jnp.eye(flat0.size, dtype=dtype)

        j = jnp.arange(1, k + 1)
        past = jnp.where(j <= count, (times - t1) / h, -(j + 0.5))  # scaled past times
        s1 = jnp.concatenate([jnp.zeros(1, dtype), past])
        a1, b1 = bdf_coefficients(s1, q)
        # The superfuture BDF: its history is ybar_(n+1), then y_n, y_(n-1), ...
        s2 = jnp.concatenate([jnp.array([0.0, -1.0], dtype), past[:-1] - 1.0])
        a2, b2 = bdf_coefficients(s2, q)
        ahat, bhat1, bhat2 = extended_coefficients(s1, q)

        def stages(jacobian, reused):
            # The three stages with the chord matrix of `jacobian`: `(y1, ybar1, slope,
            # converged, contracted)`, the last whether every correction measured shrank the
            # one before by at least `CONTRACTION`. A `reused` Jacobian's iteration stops at the
            # first that does not (its step is then solved again with a fresh one), so that it
            # never runs off to values that would poison the derivatives of the step.
            iteration = jsl.lu_factor(start_mass - h * b1 * jacobian)

            def solve(t, b, known, start):
                # M(t, z) (z - known) = h b f(t, z), by the chord iteration with `iteration`.
                def body(state):
                    z, _, k_done, last, slow = state
                    z = jnp.where(jnp.isfinite(z), z, start)  # (finite operands, as ever)
                    correction = jsl.lu_solve(iteration,
                                              h * b * f(t, z) - times_mass(t, z, z - known))
                    size = jnp.max(jnp.abs(correction) / (self.atol + self.rtol * jnp.abs(z)))
                    slow = slow | ((k_done > 0) & (size > CONTRACTION * last))
                    return z + correction, size <= 1.0, k_done + 1, size, slow

                z, converged, _, _, slow = eqxi.while_loop(
                    lambda state: ~state[1] & ~(reused & state[4]), body,
                    (start, jnp.array(False), 0, jnp.array(1.0, dtype), jnp.array(False)),
                    max_steps=self.max_iterations, kind="bounded")
                return z, converged, ~slow

            known1 = -jnp.tensordot(a1[1:], values, axes=1)
            ybar1, ok1, fast1 = solve(t1, b1, known1, flat0)
            history2 = jnp.concatenate([ybar1[None], values[:-1]])
            known2 = -jnp.tensordot(a2[1:], history2, axes=1)
            ybar2, ok2, fast2 = solve(t1 + h, b2, known2, 2 * ybar1 - flat0)
            # (Under an implicit term the stages' derivatives as their formulas define them,
            # `M^-1 f` not inverted; for an explicit ODE `f` itself.)
            if implicit:
                slope1, slope2 = (ybar1 - known1) / (h * b1), (ybar2 - known2) / (h * b2)
            else:
                slope1, slope2 = f(t1, ybar1), f(t1 + h, ybar2)
            known3 = (-jnp.tensordot(ahat[1:], values, axes=1)
                      + h * (bhat2 * slope2 + (bhat1 - b1) * slope1))
            y1, ok3, fast3 = solve(t1, b1, known3, ybar1)
            converged = ok1 & ok2 & ok3 & jnp.all(jnp.isfinite(y1))
            return y1, ybar1, (y1 - known3) / (h * b1), converged, fast1 & fast2 & fast3

        def fresh():
            # The Jacobian of `f` at the step's start, and the stages with it.
            jacobian = jax.jacfwd(lambda z: f(t0, z))(flat0)
            return (*stages(jacobian, False)[:4], jacobian, n_jacobians + 1)

        if self.reuse_jacobian:
            # The last Jacobian first; a fresh one where its iterations fail or crawl.
            reused = stages(jacobian0, True)
            y1, ybar1, slope, converged, jacobian, n_jacobians = jax.lax.cond(
                reused[3] & reused[4], lambda: (*reused[:4], jacobian0, n_jacobians), fresh)
        else:
            y1, ybar1, slope, converged, jacobian, n_jacobians = fresh()
        error = jnp.where(converged, y1 - ybar1, jnp.inf)
        # The next step's order, from the new value and the whole history (not differentiated).
        derivatives = scaled_derivatives(
            jax.lax.stop_gradient(s1), jax.lax.stop_gradient(jnp.concatenate([y1[None], values])),
            jax.lax.stop_gradient(self.atol + self.rtol * jnp.abs(y1)))
        order, at_order, ramping = next_order(derivatives, count, q, at_order, ramping,
                                              self.min_order, self.max_order)
        new_state = MEBDFState(jnp.concatenate([jnp.array([t1], dtype), times[:-1]]),
                               jnp.concatenate([y1[None], values[:-1]]),
                               jnp.minimum(count + 1, k), jnp.where(converged, slope, slope0),
                               jacobian, n_jacobians, order, at_order, ramping,
                               order_counts.at[q - 1].add(1))
        y1_tree = unravel(y1)
        result = diffrax.RESULTS.where(converged, diffrax.RESULTS.successful,
                                       diffrax.RESULTS.nonlinear_max_steps_reached)
        # Dense output: the cubic Hermite polynomial through both ends and their slopes.
        # (Under an implicit term the slopes are the correctors' own, `M` not inverted.)
        k0 = slope0 if implicit else f(t0, flat0)
        k1 = slope if implicit else f(t1, y1)
        dense = dict(y0=y0, y1=y1_tree, k0=unravel(h * k0), k1=unravel(h * k1))
        return y1_tree, unravel(error), dense, new_state, result

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


def _field(term, direction, args, unravel):
    # `f(t, z)` of the flat state `z` in the solver's time `tau = direction t` (`term`
    # unwrapped): `dy/dtau = direction y'` of an explicit term, or an implicit term's right-hand
    # side likewise.
    if isinstance(term, ImplicitTerm):
        return lambda t, z: direction * term.vector_field(direction * t, z, args)
    return lambda t, z: direction * ravel_pytree(term.vf(direction * t, unravel(z), args))[0]


def _start_slope(term: ImplicitTerm, direction, t, y, args):
    # The slope `y'` `(n,)` in the solver's time at `t` from `M y' = f`, by the pseudo-inverse
    # of `M` (a DAE's algebraic slopes 0; differentiable, unlike a least-squares solve at
    # repeated singular values): the dense output's slope at the start and after a jump.
    right = _field(term, direction, args, None)(t, y)
    return _least_slope(term.mass(direction * t, y, args), right)


def _least_slope(mass, right_hand):
    # `pinv(M) f` `(n,)` of `M` equilibrated on both sides as `_null_spaces` counts the
    # algebraic equations (rows, then columns, scaled to a largest entry of 1: `R M C`, the
    # slope `C pinv(R M C) R f`), so that equations, or variables, in units far apart keep
    # their slopes; an algebraic equation's zero row and column stay zero.
    rows = _row_scales(mass)
    columns = _row_scales((mass / rows[:, None]).T)
    return (jnp.linalg.pinv(mass / rows[:, None] / columns[None, :])
            @ (right_hand / rows)) / columns


def _unwrapped(terms):
    # `diffeqsolve` hands its solver the term wrapped with the direction of integration
    # (diffrax's `WrapTerm`, which integrates in `tau = direction t`): the term and direction.
    if hasattr(terms, "direction") and hasattr(terms, "term"):
        return terms.term, terms.direction
    return terms, 1


def _check_term(terms, y0):
    # MEBDF's terms: an explicit ODE or the implicit form, nothing else (a control term's
    # `vf` is no derivative).
    if not isinstance(terms, (diffrax.ODETerm, ImplicitTerm)):
        raise ValueError(f"MEBDF integrates a diffrax.ODETerm or a spineid.ImplicitTerm, not "
                         f"{type(terms).__name__}")
    if isinstance(terms, ImplicitTerm) and jnp.ndim(y0) != 1:
        raise ValueError(f"ImplicitTerm: y0 of shape {jnp.shape(y0)}; the implicit form takes "
                         "a 1-D array (its mass matrix acts on it)")
