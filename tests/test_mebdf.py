"""Cash's modified extended BDF (spineid/simulation/_mebdf.py) as a diffrax solver: its
coefficients against the textbook ones and polynomial exactness on uneven times, its order of
convergence measured from an exact start, the choice of order (scaled derivatives against
closed forms, the rule's cases, a stiff oscillator against its exact solution, the restart
after a jump), stiff problems against scipy's Radau at a tight tolerance, jit, vmap and
gradients against the analytic derivative, the implicit form and index-1 DAEs (the pendulum,
the pinned pair in maximal coordinates against its one-coordinate model and Newton's law)."""

import functools
import importlib.util
import pathlib

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import spineid
from spineid.simulation._mebdf import (bdf_coefficients, extended_coefficients, next_order,
                                      scaled_derivatives)

pytestmark = pytest.mark.xdist_group("mebdf")


def test_coefficients_are_the_textbook_ones_and_exact_on_uneven_times():
    even = jnp.array([0.0, -1.0, -2.0, -3.0, -4.0])
    a, b = bdf_coefficients(even, 2)  # BDF2: y2 - 4/3 y1 + 1/3 y0 = 2/3 h f2
    np.testing.assert_allclose(a, [1.0, -4 / 3, 1 / 3, 0.0, 0.0], atol=1e-14)
    assert float(b) == pytest.approx(2 / 3)
    ahat, b1, b2 = extended_coefficients(even, 1)  # Cash's EBDF2: h (3/2 f1 - 1/2 f2)
    np.testing.assert_allclose(ahat, [1.0, -1.0, 0.0, 0.0, 0.0], atol=1e-14)
    assert (float(b1), float(b2)) == pytest.approx((1.5, -0.5))
    # Uneven past times: every polynomial of the formula's degree is differentiated exactly.
    s = jnp.array([0.0, -0.7, -1.9, -2.4, -3.8])
    for q in (1, 2, 3, 4):
        a, b = bdf_coefficients(s, q)
        ahat, b1, b2 = extended_coefficients(s, q, r=1.3)
        for degree in range(q + 2):
            c = np.random.default_rng(degree).normal(size=degree + 1)
            y, dy = np.polynomial.Polynomial(c), np.polynomial.Polynomial(c).deriv()
            if degree <= q:
                assert float(jnp.dot(a, y(np.asarray(s)))) == pytest.approx(
                    float(b) * dy(0.0), abs=1e-10)
            assert float(jnp.dot(ahat, y(np.asarray(s)))) == pytest.approx(
                float(b1) * dy(0.0) + float(b2) * dy(1.3), abs=1e-10)


def _forced(t, y, args):
    return jnp.array([-y[0] + jnp.sin(3 * t)])


def _exact(t):
    return 1.3 * np.exp(-t) + (np.sin(3 * t) - 3 * np.cos(3 * t)) / 10


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_the_order_of_convergence_is_the_correctors(order):
    # Constant steps from an exact history (so that no start-up steps of lower order count):
    # the global error falls as h^(order + 1).
    def error(n):
        h = 1.0 / n
        times = -h * np.arange(order + 1)
        # (The order fixed, its history full; no Jacobian yet.)
        state = spineid.MEBDFState(
            times=jnp.asarray(times), values=jnp.asarray(_exact(times))[:, None],
            filled=jnp.array(order + 1), slope=jnp.zeros(1), jacobian=jnp.zeros((1, 1)),
            n_jacobians=jnp.array(0), order=jnp.array(order), at_order=jnp.array(0),
            ramping=jnp.array(False), order_counts=jnp.zeros(order, int))
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(_forced), spineid.MEBDF(order, min_order=order, rtol=1e-14,
                                                   atol=1e-15, max_iterations=30),
            jnp.asarray(0.0), jnp.asarray(1.0), jnp.asarray(h), jnp.array([_exact(0.0)]),
            stepsize_controller=diffrax.ConstantStepSize(), solver_state=state, made_jump=False)
        # (times as arrays: one compilation for every step size)
        return abs(float(solution.ys[-1, 0]) - _exact(1.0))

    errors = [error(n) for n in (20, 40, 80)]
    slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(slopes - (order + 1)) < 0.35), slopes


def test_adaptive_steps_and_values_between_them_follow_the_solution():
    # Steps chosen by the controller (so the superfuture stage's history is uneven), values
    # saved between them (the Hermite dense output): within the tolerance's order.
    ts = jnp.linspace(0.0, 3.0, 601)
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(_forced), spineid.MEBDF(), 0.0, 3.0, 0.01, jnp.array([_exact(0.0)]),
        stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9),
        saveat=diffrax.SaveAt(ts=ts))
    assert int(solution.stats["num_accepted_steps"]) < len(ts)  # (most values interpolated)
    np.testing.assert_allclose(np.asarray(solution.ys[:, 0]), _exact(np.asarray(ts)),
                               atol=2e-6)


def _robertson(t, y, args):
    return jnp.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                      0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2])


def test_the_stiff_robertson_problem_agrees_with_scipys_radau():
    reference = solve_ivp(lambda t, y: np.asarray(_robertson(t, y, None)), (0.0, 40.0),
                          [1.0, 0.0, 0.0], method="Radau", rtol=1e-12,
                          atol=[1e-14, 1e-18, 1e-14],
                          jac=lambda t, y: np.asarray(jax.jacfwd(
                              lambda z: _robertson(t, z, None))(y))).y[:, -1]
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(_robertson), spineid.MEBDF(rtol=1e-9, atol=1e-13), 0.0, 40.0, 1e-6,
        jnp.array([1.0, 0.0, 0.0]),
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-10))
    np.testing.assert_allclose(np.asarray(solution.ys[-1]), reference, rtol=1e-5)
    assert int(solution.stats["num_accepted_steps"]) < 2000


def test_jit_vmap_and_gradients_agree_with_the_analytic_solution():
    def y_end(rate, y0):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: -args * y), spineid.MEBDF(3), 0.0, 1.0, 0.01,
            y0, args=rate, stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10))
        return solution.ys[-1, 0]

    rates = jnp.array([0.5, 2.0, 10.0])
    ends = jax.jit(jax.vmap(y_end, in_axes=(0, None)))(rates, jnp.array([1.0]))
    np.testing.assert_allclose(ends, np.exp(-np.asarray(rates)), rtol=1e-6)
    gradient = jax.grad(y_end)(2.0, jnp.array([1.0]))  # d/dk exp(-k) = -exp(-k)
    assert float(gradient) == pytest.approx(-np.exp(-2.0), rel=1e-5)
    # Forward mode, as spineid's fits differentiate their simulations.
    forward = jax.jacfwd(lambda rate: diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, args: -args * y), spineid.MEBDF(3), 0.0, 1.0, 0.01,
        jnp.array([1.0]), args=rate, adjoint=diffrax.ForwardMode(),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10)).ys[-1, 0])(2.0)
    assert float(forward) == pytest.approx(-np.exp(-2.0), rel=1e-5)


def test_scaled_derivatives_are_exact_for_polynomials_and_the_order_follows_their_trend():
    # T_p = h^p y^(p): for a cubic on uneven times, 6 c_3 at p = 3 and zero above (divided
    # differences of a polynomial); for exp(lambda t) at equal steps, the backward differences
    # |1 - exp(-lambda h)|^p, which fall with p for a smooth solution (lambda h = 0.1: the order
    # rises once the history holds its points and q + 1 steps ran at the order) and grow in a
    # stiff transient (lambda h = -5: the order falls, but not below min_order).
    s = jnp.array([0.0, -0.7, -1.9, -2.4, -3.8, -4.1])
    cubic = 0.3 - 1.2 * s + 0.5 * s ** 2 + 2.0 * s ** 3
    derivatives = scaled_derivatives(s, cubic[:, None], jnp.ones(1))
    assert float(derivatives[3]) == pytest.approx(12.0, rel=1e-12)
    np.testing.assert_allclose(derivatives[4:], 0.0, atol=1e-11)

    even = -jnp.arange(6.0)
    for rate, trend in ((0.1, +1), (-5.0, -1)):
        values = jnp.exp(rate * even)[:, None]
        derivatives = scaled_derivatives(even, values, jnp.ones(1))
        np.testing.assert_allclose(derivatives[1:], abs(1 - np.exp(-rate)) ** np.arange(1, 6),
                                   rtol=1e-9)
        settled = next_order(derivatives, jnp.array(5), jnp.array(3), jnp.array(3),
                             jnp.array(False), 1, 4)
        assert int(settled[0]) == 3 + trend
        assert int(settled[1]) == 0  # (a new order: no steps at it yet)
    # Too few steps at the order, or too few points: the order stays.
    smooth = scaled_derivatives(even, jnp.exp(0.1 * even)[:, None], jnp.ones(1))
    assert int(next_order(smooth, jnp.array(5), jnp.array(3), jnp.array(2), jnp.array(False),
                          1, 4)[0]) == 3
    assert int(next_order(smooth, jnp.array(4), jnp.array(3), jnp.array(3), jnp.array(False),
                          1, 4)[0]) == 3
    # Ramping up from the start: one more per step while the history holds the points, then
    # no more ramping at the highest order.
    assert [int(v) for v in next_order(smooth, jnp.array(2), jnp.array(2), jnp.array(0),
                                       jnp.array(True), 1, 4)] == [3, 0, True]
    assert [int(v) for v in next_order(smooth, jnp.array(3), jnp.array(3), jnp.array(0),
                                       jnp.array(True), 1, 4)] == [4, 0, False]
    stiff = scaled_derivatives(even, jnp.exp(-5.0 * even)[:, None], jnp.ones(1))
    assert int(next_order(stiff, jnp.array(5), jnp.array(3), jnp.array(3), jnp.array(False),
                          3, 4)[0]) == 3
    # (T_(q+1) needs q + 1 past points: with q of them the order cannot fall.)
    assert int(next_order(stiff, jnp.array(3), jnp.array(3), jnp.array(3), jnp.array(False),
                          1, 4)[0]) == 3
    assert int(next_order(stiff, jnp.array(4), jnp.array(3), jnp.array(3), jnp.array(False),
                          1, 4)[0]) == 2


@functools.cache
def _integrators():
    # experiments/integrators.py, whose problems (fields, exact solutions, scipy references)
    # these tests run at smaller sizes.
    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "integrators.py"
    spec = importlib.util.spec_from_file_location("integrators_experiment", path)
    integrators = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(integrators)
    return integrators


def test_varying_the_order_beats_a_fixed_one_where_stiff_modes_oscillate():
    # A mode of eigenvalues -1 +- 200i driven by sin t beside a slow one, to t = 40: once the
    # fast mode has decayed the steps span many of its periods, where a high fixed order damps
    # it poorly; the order chosen by the scaled derivatives drops there (measured by this test,
    # t = 40 at rtol 1e-4: 13429 steps and an error of 1.2e-4 against order 4's 19672 steps
    # and 0.15, relative to each component at the end; experiments/integrators.py runs it to
    # t = 50 at rtol 1e-6). Against the exact solution (the driven mode as a complex
    # exponential and its particular solution). After a jump (`jump_ts`) the order starts
    # again from 1.
    t = 40.0
    oscillator, exact = _integrators().oscillator, _integrators().oscillator_exact(t)
    runs = {}
    for min_order in (1, 4):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(oscillator), spineid.MEBDF(min_order=min_order, rtol=1e-6,
                                                       atol=1e-12),
            0.0, t, 1e-4, jnp.array([1.0, 0.0, 0.0]),
            saveat=diffrax.SaveAt(t1=True, solver_state=True), max_steps=50_000,
            stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-10))
        error = np.max(np.abs(np.asarray(solution.ys[-1]) - exact) / (1e-10 + np.abs(exact)))
        steps = int(solution.stats["num_accepted_steps"])
        counts = np.asarray(solution.solver_state.order_counts)
        assert counts.sum() == steps
        runs[min_order] = error, steps, counts
    (error, steps, counts), (fixed_error, fixed_steps, fixed_counts) = runs[1], runs[4]
    assert error < 1e-3 and error < fixed_error / 10
    assert steps < 0.8 * fixed_steps
    assert counts[:3].sum() > 0.1 * steps  # (orders below 4 in use)
    np.testing.assert_array_equal(fixed_counts[:3], [1, 1, 1])  # (the ramp from the start)
    jumped = diffrax.diffeqsolve(
        diffrax.ODETerm(oscillator), spineid.MEBDF(min_order=4), 0.0, 2.0, 1e-4,
        jnp.array([1.0, 0.0, 0.0]), saveat=diffrax.SaveAt(t1=True, solver_state=True),
        stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-10, jump_ts=[1.0]))
    np.testing.assert_array_equal(jumped.solver_state.order_counts[:3], [2, 2, 2])


@pytest.mark.parametrize("options, message", [
    (dict(max_order=0), "max_order 0"), (dict(max_order=6), "from 1 to 5"),
    (dict(max_iterations=0), "max_iterations 0"), (dict(min_order=0), "min_order 0"),
    (dict(min_order=5, max_order=4), "from 1 to max_order"),
    (dict(rtol=-1e-8), r"rtol -1e-08: expected a finite number > 0 \(or 0\)"),
    (dict(atol=0.0), "atol 0.0: expected a finite number > 0 "),
    (dict(atol=float("nan")), "atol nan")])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        spineid.MEBDF(**options)


def test_the_implicit_form_agrees_with_the_exact_solution_of_coupled_oscillators():
    # M q'' = -K q with a full mass matrix, as first-order equations [I 0; 0 M] y' = [v; -K q]:
    # MEBDF never inverts M; the exact solution is the matrix exponential of the explicit
    # system (scipy), and any other diffrax solver gets the explicit form from the term.
    from scipy.linalg import expm

    mass = np.array([[2.0, 0.5], [0.5, 1.0]])
    stiffness = np.array([[30.0, -10.0], [-10.0, 20.0]])
    big = np.block([[np.eye(2), np.zeros((2, 2))], [np.zeros((2, 2)), mass]])
    term = spineid.ImplicitTerm(
        lambda t, y, args: jnp.asarray(big),
        lambda t, y, args: jnp.concatenate([y[2:], -jnp.asarray(stiffness) @ y[:2]]))
    y0 = jnp.array([0.1, -0.05, 0.0, 0.2])
    ts = np.linspace(0.0, 2.0, 9)
    exact = np.stack([expm(t * np.block([[np.zeros((2, 2)), np.eye(2)],
                                         [-np.linalg.solve(mass, stiffness), np.zeros((2, 2))]]))
                      @ np.asarray(y0) for t in ts])
    for solver in (spineid.MEBDF(), diffrax.Tsit5()):
        solution = diffrax.diffeqsolve(
            term, solver, 0.0, 2.0, 1e-3, y0, saveat=diffrax.SaveAt(ts=jnp.asarray(ts)),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10))
        np.testing.assert_allclose(np.asarray(solution.ys), exact, atol=2e-6)


def _pendulum(t, y, args):
    # The pendulum of unit length as an index-1 DAE in Cartesian coordinates: x, y, u, v and
    # the multiplier l (force over length), its constraint x^2 + y^2 = 1 differentiated twice.
    x, z, u, v, multiplier = y
    g = 9.81
    return jnp.array([u, v, -multiplier * x, -multiplier * z - g,
                      u ** 2 + v ** 2 - multiplier * (x ** 2 + z ** 2) - g * z])


def test_an_index_one_dae_keeps_its_constraint_and_follows_the_pendulums_angle():
    # The oracle: scipy's Radau on the pendulum's angle, theta'' = -g sin(theta), tight.
    theta0, ts = 0.6, np.linspace(0.0, 2.0, 11)
    angle = solve_ivp(lambda t, s: [s[1], -9.81 * np.sin(s[0])], (0.0, 2.0), [theta0, 0.0],
                      method="Radau", rtol=1e-12, atol=1e-12, t_eval=ts).y[0]
    mass = jnp.diag(jnp.array([1.0, 1.0, 1.0, 1.0, 0.0]))  # (the last row is algebraic)
    start = jnp.array([np.sin(theta0), -np.cos(theta0), 0.0, 0.0, 9.81 * np.cos(theta0)])
    solution = diffrax.diffeqsolve(
        spineid.ImplicitTerm(lambda t, y, args: mass, _pendulum), spineid.MEBDF(), 0.0, 2.0,
        1e-4, start, saveat=diffrax.SaveAt(ts=jnp.asarray(ts)),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10))
    ys = np.asarray(solution.ys)
    np.testing.assert_allclose(np.arctan2(ys[:, 0], -ys[:, 1]), angle, atol=1e-5)
    assert np.max(np.abs(ys[:, 0] ** 2 + ys[:, 1] ** 2 - 1.0)) < 1e-5
    # The multiplier is the string's tension over the mass: g cos(theta) + theta'^2.
    rate = np.gradient(angle, ts)  # (coarse differences: 5% and 0.3 1/s^2)
    np.testing.assert_allclose(ys[:, 4], 9.81 * np.cos(angle) + rate ** 2, rtol=0.05, atol=0.3)


def test_an_inconsistent_dae_start_is_refused_measured_and_projected():
    # The pendulum's multiplier 1 1/s^2 off its consistent value (g cos(theta)): the algebraic
    # residual is exactly that offset times x^2 + z^2 = 1 (in the last equation alone); MEBDF
    # refuses the start; `consistent` moves the multiplier alone back (x, z, u, v kept); a
    # regular mass matrix has no algebraic residual.
    theta0 = 0.6
    mass = jnp.diag(jnp.array([1.0, 1.0, 1.0, 1.0, 0.0]))
    term = spineid.ImplicitTerm(lambda t, y, args: mass, _pendulum)
    good = jnp.array([np.sin(theta0), -np.cos(theta0), 0.3, 0.4, 0.0])
    good = good.at[4].set(9.81 * np.cos(theta0) + 0.25)  # (u^2 + v^2 = 0.25)
    bad = good.at[4].add(1.0)
    np.testing.assert_allclose(term.algebraic_residual(0.0, bad, None), [0, 0, 0, 0, -1.0],
                               atol=1e-12)
    np.testing.assert_allclose(term.algebraic_residual(0.0, good, None), 0.0, atol=1e-12)
    with pytest.raises(Exception, match="violate the DAE's algebraic equations"):
        diffrax.diffeqsolve(term, spineid.MEBDF(), 0.0, 0.1, 1e-3, bad,
                            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8))
    np.testing.assert_allclose(term.consistent(0.0, bad, None), good, rtol=1e-12, atol=1e-12)
    regular = spineid.ImplicitTerm(lambda t, y, args: jnp.eye(5) + 0.1, _pendulum)
    np.testing.assert_allclose(regular.algebraic_residual(0.0, bad, None), 0.0, atol=1e-12)
    # A mass matrix that depends on the state, with repeated singular values (as the
    # Lagrangian form's blockdiag(I, M) has): the same, no NaN from the SVD's derivative.
    moving = spineid.ImplicitTerm(
        lambda t, y, args: jnp.diag(jnp.array([1.0 + 0 * y[0], 1.0, 1.0, 1.0, 0.0 * y[4]])),
        _pendulum)
    np.testing.assert_allclose(moving.consistent(0.0, bad, None), good, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(spineid.ImplicitTerm(lambda t, y, args: (1 + 0 * y[0])
                                                    * jnp.eye(5), _pendulum).consistent(
        0.0, bad, None), bad)


def test_equations_in_units_far_apart_are_not_taken_for_algebraic_ones():
    # The pendulum with its velocity equations multiplied by 1e-12 (a mass of 1e-12 kg: rows of
    # M and f alike): the same DAE. Its singular values 1e-12 of the largest are not its null
    # space (before: every velocity equation counted as algebraic, their residual reported
    # and moved by `consistent`); the multiplier's row alone is, as at unit scale. A regular M
    # of such rows has no algebraic equation, coupled or not.
    theta0, scale = 0.6, jnp.array([1.0, 1.0, 1e-12, 1e-12, 1.0])
    mass = jnp.diag(scale.at[4].set(0.0))
    term = spineid.ImplicitTerm(lambda t, y, args: mass,
                                lambda t, y, args: scale * _pendulum(t, y, args))
    good = jnp.array([np.sin(theta0), -np.cos(theta0), 0.3, 0.4, 9.81 * np.cos(theta0) + 0.25])
    bad = good.at[4].add(1.0)
    np.testing.assert_allclose(term.algebraic_residual(0.0, bad, None), [0, 0, 0, 0, -1.0],
                               atol=1e-12)
    np.testing.assert_allclose(term.consistent(0.0, bad, None), good, rtol=1e-12, atol=1e-12)
    regular = spineid.ImplicitTerm(lambda t, y, args: jnp.diag(scale),
                                   lambda t, y, args: scale * _pendulum(t, y, args))
    np.testing.assert_allclose(regular.algebraic_residual(0.0, bad, None), 0.0, atol=1e-30)
    coupled = jnp.array([[2.0, 1.0], [1e-12, 2e-12]])  # (regular; its rows 1e12 apart)
    two = spineid.ImplicitTerm(lambda t, y, args: coupled, lambda t, y, args: coupled @ y)
    np.testing.assert_allclose(two.algebraic_residual(0.0, jnp.array([0.3, -0.2]), None), 0.0,
                               atol=1e-30)
    singular = spineid.ImplicitTerm(lambda t, y, args: coupled.at[1].set(0.0),
                                    lambda t, y, args: jnp.array([y[0], y[0] - 1.0]))
    np.testing.assert_allclose(singular.algebraic_residual(0.0, jnp.array([3.0, 0.0]), None),
                               [0.0, 2.0], atol=1e-12)
    # Integrated, it follows the pendulum at unit scale.
    ts = jnp.linspace(0.0, 0.5, 6)
    runs = [diffrax.diffeqsolve(
        spineid.ImplicitTerm(lambda t, y, args, m=m: m, f), spineid.MEBDF(), 0.0, 0.5, 1e-4,
        good, saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10)).ys
        for m, f in ((mass, term.vector_field),
                     (jnp.diag(jnp.array([1.0, 1.0, 1.0, 1.0, 0.0])), _pendulum))]
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-6, atol=1e-8)
    # The slope at the start (the dense output's) with rows 1e-15 of the others: as at unit
    # scale (before: the pseudo-inverse's cutoff dropped them, their slopes 0).
    slopes = [spineid.MEBDF().init(spineid.ImplicitTerm(
        lambda t, y, args, s=s: jnp.diag(s.at[4].set(0.0)),
        lambda t, y, args, s=s: s * _pendulum(t, y, args)), 0.0, 0.5, good, None).slope
        for s in (scale.at[2:4].set(1e-15), jnp.ones(5))]
    assert float(jnp.max(jnp.abs(slopes[1][2:4]))) > 1.0
    np.testing.assert_allclose(slopes[0], slopes[1], rtol=1e-10, atol=1e-12)
    # A variable in units 1e15 apart (a column of M 1e-15 of the other in every row): its
    # slope kept too.
    columns = jnp.array([[1.0, 1e-15], [1.0, 2e-15]])
    slope = jnp.array([0.3, 5e14])
    start = spineid.MEBDF().init(spineid.ImplicitTerm(lambda t, y, args: columns,
                                                      lambda t, y, args: columns @ slope),
                                 0.0, 1.0, jnp.zeros(2), None).slope
    np.testing.assert_allclose(start, slope, rtol=1e-10)


def test_terms_it_cannot_integrate_are_refused():
    with pytest.raises(ValueError, match="ODETerm or a spineid.ImplicitTerm, not ControlTerm"):
        diffrax.diffeqsolve(diffrax.ControlTerm(lambda t, y, args: -y,
                                                lambda t0, t1=None: t0 if t1 is None else t1 - t0),
                            spineid.MEBDF(), 0.0, 1.0, 0.1, jnp.array([1.0]))
    with pytest.raises(ValueError, match="takes a 1-D array"):
        diffrax.diffeqsolve(spineid.ImplicitTerm(lambda t, y, a: jnp.eye(2), lambda t, y, a: -y),
                            spineid.MEBDF(), 0.0, 1.0, 0.1, jnp.ones((2, 2)))


@pytest.mark.parametrize("term", [
    diffrax.ODETerm(lambda t, y, args: -y * (1.0 + t)),
    spineid.ImplicitTerm(lambda t, y, args: (2.0 + t) * jnp.eye(1),
                         lambda t, y, args: -(2.0 + t) * y * (1.0 + t))])
def test_backwards_in_time(term):
    # y' = -(1 + t) y from t = 1 back to t = 0 (the implicit form with a mass that depends on
    # time): y(t) = y(1) exp((1 + 1/2) - (t + t^2/2)), saved between the steps too (diffrax
    # reverses time for its solver; before, MEBDF ignored the direction).
    ts = jnp.linspace(1.0, 0.0, 6)
    solution = diffrax.diffeqsolve(term, spineid.MEBDF(), 1.0, 0.0, -0.01, jnp.array([1.0]),
                                   saveat=diffrax.SaveAt(ts=ts),
                                   stepsize_controller=diffrax.PIDController(rtol=1e-9,
                                                                             atol=1e-12))
    exact = np.exp(1.5 - (np.asarray(ts) + np.asarray(ts) ** 2 / 2))
    np.testing.assert_allclose(np.asarray(solution.ys[:, 0]), exact, rtol=1e-6)
    assert float(solution.ys[-1, 0]) == pytest.approx(np.exp(1.5), rel=1e-7)


def test_gradients_through_an_implicit_term_from_its_first_saved_time():
    # Reverse mode through the implicit form with values saved from t0 on (the dense output's
    # first slope: NaN gradients before, through a least-squares solve), against forward mode
    # and central differences.
    def saved(rate, adjoint):
        # (A mass that depends on the parameter and has a repeated singular value, as
        # blockdiag(I, M) has: where a least-squares solve's derivative is NaN.)
        term = spineid.ImplicitTerm(lambda t, y, k: (k / 3.0) * jnp.eye(2),
                                    lambda t, y, k: (k / 3.0) * jnp.array([y[1], -k * y[0]]))
        solution = diffrax.diffeqsolve(
            term, spineid.MEBDF(), 0.0, 1.0, 0.01, jnp.array([1.0, 0.0]), args=rate,
            saveat=diffrax.SaveAt(ts=jnp.array([0.0, 0.13, 0.5, 1.0])), adjoint=adjoint,
            stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-11))
        return jnp.sum(solution.ys[:, 0])

    reverse = float(jax.grad(saved)(3.0, diffrax.RecursiveCheckpointAdjoint()))
    forward = float(jax.jacfwd(saved)(3.0, diffrax.ForwardMode()))
    step = 1e-5
    checkpoints = diffrax.RecursiveCheckpointAdjoint()
    central = (float(saved(3.0 + step, checkpoints)) - float(saved(3.0 - step, checkpoints))
               ) / (2 * step)
    # (y'' = -k y: the sum of cos(sqrt(k) t) over the saved times.)
    exact = float(sum(-t * np.sin(np.sqrt(3.0) * t) / (2 * np.sqrt(3.0))
                      for t in (0.0, 0.13, 0.5, 1.0)))
    assert np.isfinite(reverse)
    assert reverse == pytest.approx(exact, rel=1e-5)
    assert forward == pytest.approx(exact, rel=1e-5)
    assert central == pytest.approx(exact, rel=1e-4)


def test_after_a_jump_the_implicit_terms_values_between_steps_hold():
    # y' = -y + H(t - 0.5) as M y' = f with M = 3: values saved just after the jump (1e-9 to
    # 1e-3 s after it) follow the
    # exact solution as closely as the explicit form's (the dense output's slope at the jump's
    # start is the field's beyond it).
    ts = jnp.asarray(0.5 + np.logspace(-9, -3, 13))

    def run(term):
        return np.asarray(diffrax.diffeqsolve(
            term, spineid.MEBDF(), 0.0, 1.0, 0.01, jnp.array([1.0]),
            saveat=diffrax.SaveAt(ts=ts), stepsize_controller=diffrax.PIDController(
                rtol=1e-8, atol=1e-10, jump_ts=jnp.array([0.5]))).ys[:, 0])

    def field(t, y):
        return -y + jnp.where(t >= 0.5, 1.0, 0.0)

    at_jump = np.exp(-0.5)
    exact = 1.0 + (at_jump - 1.0) * np.exp(-(np.asarray(ts) - 0.5))
    explicit = run(diffrax.ODETerm(lambda t, y, args: field(t, y)))
    implicit = run(spineid.ImplicitTerm(lambda t, y, args: 3.0 * jnp.eye(1),
                                        lambda t, y, args: 3.0 * field(t, y)))
    # (With the slope from before the jump: 1.7e-8 against the explicit form's 5.8e-9.)
    assert np.max(np.abs(implicit - exact)) < 1.5 * np.max(np.abs(explicit - exact))


@pytest.mark.parametrize("name, bound", [("van der Pol (mu 1000)", 1e-3), ("HIRES", 1e-5)])
def test_stiff_benchmarks_agree_with_scipys_radau(name, bound):
    # At rtol 1e-6 against scipy's Radau at 1e-10 (experiments/integrators.py, which also
    # measured scipy's BDF at 1e-6: 1.9e-4 and 8.7e-6, in more steps): the global error stays
    # within the bound, relative to each component's size, with the Jacobian reused.
    integrators = _integrators()
    mebdf_solve, PROBLEMS, reference = (integrators.mebdf_solve, integrators.PROBLEMS,
                                        integrators.reference)

    problem = PROBLEMS[name]
    exact = reference(problem, 1e-10)
    end, steps, jacobians, orders = mebdf_solve(problem, 1e-6)()
    assert int(jnp.sum(orders)) == int(steps)
    assert np.max(np.abs(np.asarray(end) - exact) / (problem[3] + np.abs(exact))) < bound
    assert int(steps) < 2000
    # The modified Newton iteration keeps its Jacobian across steps, and takes a fresh one where
    # its iterations crawl (measured, accepted steps: 184 of 1523 and 59 of 280 took one).
    assert 10 <= int(jacobians) < int(steps) / 3


def test_the_head_neck_chains_implicit_equations_follow_its_simulation():
    # The chain's equations of motion in their implicit form (Kane's mass matrix never
    # inverted) through 0.15 s of the whiplash pulse, against `spineid.simulate` of the explicit
    # form by Kvaerno5 at a tight tolerance; its derivative against central differences.
    chain = spineid.load_model_file(spineid.dataset_path("head_neck.toml")).model
    ts = jnp.linspace(0.0, 0.15, 7)
    reference = spineid.simulate(chain, ts, solver=diffrax.Kvaerno5(), rtol=1e-10, atol=1e-12)
    n = chain.n_dof
    solution = diffrax.diffeqsolve(
        spineid.lagrangian_implicit_term(), spineid.MEBDF(), 0.0, 0.15, 1e-5,
        jnp.concatenate(chain.initial_state()), args=chain, saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9,
                                                  jump_ts=chain.jump_times()))
    np.testing.assert_allclose(np.asarray(solution.ys[:, :n]), np.asarray(reference.q),
                               atol=1e-6)
    # The derivative of the last joint's angle at 0.15 s in one joint's stiffness, forward mode
    # through MEBDF and the implicit form, against central differences of the explicit form by
    # Kvaerno5 (the program above; measured 2.7760e-4 rad/(N m/rad) both, 4e-8 apart).
    import equinox as eqx

    def stiffened(stiffness):
        return eqx.tree_at(lambda m: m.k_joint, chain, chain.k_joint.at[3].set(stiffness))

    def last_angle(stiffness):
        changed = stiffened(stiffness)
        return diffrax.diffeqsolve(
            spineid.lagrangian_implicit_term(), spineid.MEBDF(rtol=1e-10, atol=1e-12), 0.0,
            0.15, 1e-5, jnp.concatenate(changed.initial_state()), args=changed,
            adjoint=diffrax.ForwardMode(), stepsize_controller=diffrax.PIDController(
                rtol=1e-8, atol=1e-10, jump_ts=changed.jump_times())).ys[-1, n - 1]

    stiffness, step = float(chain.k_joint[3]), 1e-4 * float(chain.k_joint[3])
    ends = [float(spineid.simulate(stiffened(stiffness + sign * step), ts,
                                   solver=diffrax.Kvaerno5(), rtol=1e-10, atol=1e-12).q[-1, -1])
            for sign in (1, -1)]
    central = (ends[0] - ends[1]) / (2 * step)
    assert abs(central) > 1e-5
    assert float(jax.jacfwd(last_angle)(stiffness)) == pytest.approx(central, rel=1e-5)
    # Kane's form is Lagrange's equations from the energies (the Hessian of T), both the mass
    # matrix and the forces. (Both jitted: run op by op, the chain's Kane form took 17 s.)
    q, qdot = jnp.full(n, 0.05), jnp.full(n, -0.3)
    mass, forces = eqx.filter_jit(type(chain).equations_of_motion)(chain, 0.05, q, qdot)
    from_energies = eqx.filter_jit(spineid.lagrange_equations)(chain, 0.05, q, qdot)
    np.testing.assert_allclose(np.asarray(mass), np.asarray(from_energies[0]), rtol=1e-10,
                               atol=1e-14)
    np.testing.assert_allclose(np.asarray(forces), np.asarray(from_energies[1]), rtol=1e-8,
                               atol=1e-10)


@pytest.fixture(scope="module")
def four_springs():
    """The bundled four-axial-spring pair, its stiffnesses' names and values, and 0.1 s at 1 kHz
    of the pair with every stiffness 25% higher, simulated by the default solver (Tsit5)."""
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    ts = np.linspace(0.0, 0.1, 101)
    probe = spineid.FitProblem(model_file, spineid.Measurement(
        ts, np.zeros((ts.size, 3)), ("x", "y", "theta")), ["stiffness"], SD)
    truth = 1.25 * probe.start
    model = spineid.apply_values(model_file.model, probe.parameters, jnp.asarray(truth))
    observed = np.array([model.observe(q) for q in spineid.simulate(model, ts).q])
    return model_file, ts, observed, truth


SD = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}


def test_a_fit_through_mebdf_recovers_what_another_integrator_simulated(four_springs,
                                                                       monkeypatch):
    # `FitProblem(simulation_solver=spineid.MEBDF(...))`: the fit's simulations and their
    # forward-mode sensitivities go through MEBDF (every simulation the fit traces is handed
    # it); the data are Tsit5's. From the file's values (25% low) the fit reaches the truth to
    # the integrators' difference; `integrated_implicitly` keeps `Auto` from multiple shooting.
    from spineid.identify._trajectory import _objective
    from spineid.identify._trajectory._problem import integrated_implicitly, integrator_names

    solvers, simulate = [], _objective.simulate

    def recorded(*args, **kwargs):
        solvers.append(kwargs.get("solver"))
        return simulate(*args, **kwargs)

    monkeypatch.setattr(_objective, "simulate", recorded)
    model_file, ts, observed, truth = four_springs
    mebdf = spineid.MEBDF(rtol=1e-10, atol=1e-12)
    problem = spineid.FitProblem(model_file, spineid.Measurement(ts, observed, ("x", "y",
                                                                                "theta")),
                                 ["stiffness"], SD, simulation_solver=mebdf)
    result = spineid.fit(problem, "auto")
    assert solvers and all(solver is mebdf for solver in solvers)
    assert result.converged and result.solver.endswith(", simulated by MEBDF")
    assert result.report()["integrators"] == ["MEBDF"]
    np.testing.assert_allclose(result.values, truth, rtol=1e-4)
    assert integrated_implicitly(problem.models, mebdf)
    assert not integrated_implicitly(problem.models, diffrax.Tsit5())
    assert not integrated_implicitly(problem.models)
    assert integrator_names(problem.models) == ["Tsit5"]
    chain = spineid.load_model_file(spineid.dataset_path("head_neck.toml")).model
    assert integrator_names([chain, chain, problem.models[0]]) == ["Kvaerno4", "Tsit5"]
    with pytest.raises(ValueError, match="simulation_solver='mebdf': expected a diffrax solver"):
        spineid.FitProblem(model_file, problem.measurements, ["stiffness"], SD,
                           simulation_solver="mebdf")
    with pytest.raises(ValueError, match="its options must be plain numbers"):
        spineid.FitProblem(model_file, problem.measurements, ["stiffness"], SD,
                           simulation_solver=spineid.MEBDF(rtol=jnp.asarray(1e-8)))


def test_the_simulate_and_fit_verbs_take_an_integrator(tmp_path, capsys, monkeypatch):
    # `spineid simulate MODEL --integrator mebdf`: the simulation is handed MEBDF (its chord
    # iteration at rtol / 100) and the motion written agrees with the default solver's (Tsit5)
    # to well within the tolerances; `fit --integrator mebdf` makes the problem's
    # `simulation_solver` (the fit itself stopped: `FitProblem` is tested above); an unknown
    # name is refused by name.
    from spineid.cli import _commands, main

    solvers, windows = [], _commands.simulate_in_windows

    def recorded(*args, **kwargs):
        solvers.append(kwargs.get("solver"))
        return windows(*args, **kwargs)

    monkeypatch.setattr(_commands, "simulate_in_windows", recorded)
    model = str(spineid.dataset_path("axial_4_springs.toml"))
    written = {}
    for name in ("mebdf", None):
        out = tmp_path / f"{name}.csv"
        assert main(["simulate", model, "--out", str(out)]
                    + (["--integrator", name] if name else [])) == 0
        assert ("by mebdf" in capsys.readouterr().out) == (name is not None)
        written[name] = np.genfromtxt(out, delimiter=",", names=True)
    for column in ("x", "y", "theta"):
        scale = np.ptp(written[None][column])
        np.testing.assert_allclose(written["mebdf"][column], written[None][column],
                                   atol=1e-6 * scale)
    assert isinstance(solvers[0], spineid.MEBDF) and solvers[1] is None
    assert (solvers[0].rtol, solvers[0].atol) == (1e-10, 1e-12)
    with pytest.raises(SystemExit):
        main(["simulate", model, "--integrator", "bdf", "--out", str(tmp_path / "bdf.csv")])
    assert "expected one of kvaerno4, kvaerno5, mebdf" in capsys.readouterr().err
    problems = []

    def stop(problem, *args, **kwargs):
        problems.append(problem)
        raise ValueError("stopped before fitting")

    monkeypatch.setattr(_commands, "fit", stop)
    assert main(["fit", model, str(tmp_path / "mebdf.csv"), "--free", "stiffness",
                 "--integrator", "kvaerno5", "--out", str(tmp_path / "fit")]) == 2
    assert isinstance(problems[0].simulation_solver, diffrax.Kvaerno5)
    assert "with auto, by kvaerno5" in capsys.readouterr().out


@pytest.mark.parametrize("name, kind", [("kvaerno4", diffrax.Kvaerno4),
                                        ("kvaerno5", diffrax.Kvaerno5), ("mebdf", spineid.MEBDF)])
def test_the_integrator_options_solver_and_its_tolerances(name, kind):
    # --integrator's solver for a controller at rtol 1e-8: MEBDF's chord iteration stops at
    # rtol / 100 and atol rtol / 1e4; diffrax's solvers carry no tolerance of their own.
    from spineid.cli._arguments import integrator, integrator_option

    solver = integrator(integrator_option(f" {name.upper()} "), 1e-8)
    assert type(solver) is kind
    if kind is spineid.MEBDF:
        assert (solver.rtol, solver.atol) == (pytest.approx(1e-10), pytest.approx(1e-12))


def test_the_pinned_pair_in_maximal_coordinates_follows_its_one_coordinate_model():
    # Two bodies and a pin in maximal coordinates (pose, velocity and the pin's force; an
    # index-1 DAE) against the one-coordinate PinnedPair by Tsit5 (Lagrange's equations of
    # the second kind), under gravity and the file's two loads; the pin's force against Newton's
    # second law on the upper body, m a = loads + m g + lambda, with `a` from the
    # one-coordinate motion and its equations of motion (measured: 1.6e-9 rad, 9e-12 m, 6e-8 N
    # of 5 N); its derivative against central differences.
    import copy

    from spineid.models._mechanics import equations_of_motion

    document = copy.deepcopy(
        spineid.load_model_file(spineid.dataset_path("pinned_pair.toml")).document)
    document["gravity"] = [0.0, -9.81]
    model = spineid.ModelFile.from_document(document).model
    ts = jnp.linspace(0.0, 0.5, 26)
    reference = spineid.simulate(model, ts, rtol=1e-11, atol=1e-13)
    theta, rate = reference.q[:, 0], reference.qdot[:, 0]
    start = spineid.pinned_pair_maximal_start(model)
    ys = np.asarray(diffrax.diffeqsolve(
        spineid.pinned_pair_maximal_term(), spineid.MEBDF(), 0.0, 0.5, 1e-5, start, args=model,
        saveat=diffrax.SaveAt(ts=ts), max_steps=100_000,
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10)).ys)
    assert np.ptp(np.asarray(theta)) > 0.05  # (it moves)
    np.testing.assert_allclose(ys[:, 2], theta, atol=1e-7)
    on_circle = np.asarray(jax.vmap(model.centre_of_mass)(jnp.asarray(ys[:, 2])))
    np.testing.assert_allclose(ys[:, :2], on_circle, atol=1e-9)
    np.testing.assert_allclose(ys[:, 5], rate, atol=1e-6)
    velocity = jax.vmap(lambda a, w: jax.jvp(model.centre_of_mass, (a,), (w,))[1])(theta, rate)
    np.testing.assert_allclose(ys[:, 3:5], np.asarray(velocity), atol=1e-8)

    def acceleration(t, angle, speed):
        mass, force = equations_of_motion(model, t, angle[None], speed[None])
        alpha = jnp.linalg.solve(mass, force)[0]
        arm = jax.jacfwd(model.centre_of_mass)
        return arm(angle) * alpha + jax.jacfwd(arm)(angle) * speed ** 2

    newton = (model.upper.mass * jax.vmap(acceleration)(ts, theta, rate)
              - jax.vmap(model.applied_load)(ts)[:, :2] - model.upper.mass * model.gravity)
    assert float(jnp.max(jnp.abs(newton))) > 1.0
    np.testing.assert_allclose(ys[:, 6:], np.asarray(newton), atol=1e-5)
    # The start's force is Newton's at t = 0.
    np.testing.assert_allclose(start[6:], np.asarray(newton[0]), rtol=1e-10)
    term = spineid.pinned_pair_maximal_term()

    # Forward-mode derivative of the angle at 0.2 s in the torsion stiffness through the DAE
    # and MEBDF, against central differences of the one-coordinate model (measured: 0.0118675
    # rad/(N m/rad) both, 4e-8 apart relative).
    import equinox as eqx

    def stiffened(stiffness):
        return eqx.tree_at(lambda m: m.elements[0].stiffness, model, stiffness)

    def angle(stiffness):
        changed = stiffened(stiffness)
        return diffrax.diffeqsolve(
            term, spineid.MEBDF(), 0.0, 0.2, 1e-5, spineid.pinned_pair_maximal_start(changed),
            args=changed, saveat=diffrax.SaveAt(t1=True), adjoint=diffrax.ForwardMode(),
            stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-11)).ys[-1, 2]

    stiffness = jnp.asarray(model.elements[0].stiffness)
    step = 1e-4 * float(stiffness)
    ends = [float(spineid.simulate(stiffened(stiffness + sign * step), jnp.array([0.0, 0.2]),
                                   rtol=1e-12, atol=1e-14).q[-1, 0]) for sign in (1, -1)]
    central = (ends[0] - ends[1]) / (2 * step)
    assert abs(central) > 1e-3
    assert float(jax.jacfwd(angle)(stiffness)) == pytest.approx(central, rel=1e-6)
