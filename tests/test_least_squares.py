"""spineid's Levenberg-Marquardt against a certified NIST result, its statistical stop, and its
bookkeeping (one forward-mode pass per accepted step)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spineid import levenberg_marquardt

# NIST StRD nonlinear regression "Misra1a" (lower difficulty): y = b1 (1 - exp(-b2 x)),
# certified values and standard deviations, start 1 of the two certified starts.
MISRA1A_X = np.array([77.6, 114.9, 141.1, 190.8, 239.9, 289.0, 332.8, 378.4, 434.8, 477.3,
                      536.8, 593.1, 689.1, 760.0])
MISRA1A_Y = np.array([10.07, 14.73, 17.94, 23.93, 29.61, 35.18, 40.02, 44.82, 50.76, 55.05,
                      61.01, 66.40, 75.47, 81.78])
CERTIFIED = np.array([2.3894212918e02, 5.5015643181e-04])
CERTIFIED_SD = np.array([2.7070075241e00, 7.2668688436e-06])
CERTIFIED_RSS = 1.2455138894e-01
START = np.array([500.0, 1e-4])
# Residuals divided by the certified residual standard deviation, as spineid weights by noise.
SIGMA = np.sqrt(CERTIFIED_RSS / (MISRA1A_X.size - 2))


def misra1a(u):
    b = START * jnp.exp(u)  # log coordinates, as spineid's positive parameters
    return (b[0] * (1.0 - jnp.exp(-b[1] * MISRA1A_X)) - MISRA1A_Y) / SIGMA


def test_certified_nist_result_and_the_statistical_stop():
    exact = levenberg_marquardt(misra1a, jnp.zeros(2), decrement_tol=0.0)
    assert bool(exact.converged)
    np.testing.assert_allclose(START * np.exp(exact.value), CERTIFIED, rtol=1e-8)
    assert float(2 * exact.cost * SIGMA**2) == pytest.approx(CERTIFIED_RSS, rel=1e-8)
    # The default stops within a hundredth or so of a standard error, in fewer passes.
    early = levenberg_marquardt(misra1a, jnp.zeros(2))
    assert bool(early.converged) and float(early.decrement) <= 1e-4
    assert np.all(np.abs(START * np.exp(early.value) - CERTIFIED) <= 0.02 * CERTIFIED_SD)
    assert int(early.jacobians) < int(exact.jacobians)


def test_one_traced_forward_pass_run_once_per_accepted_step():
    calls = {"jacobian": 0}
    original = jax.jacfwd

    # Count traced Jacobians: one, in the loop body (a second copy would double compilation).
    def counting(*args, **kwargs):
        calls["jacobian"] += 1
        return original(*args, **kwargs)

    jax.jacfwd = counting
    try:
        solution = levenberg_marquardt(lambda u: misra1a(u) * 1.0, jnp.array([1.5, -1.0]))
    finally:
        jax.jacfwd = original
    assert calls["jacobian"] == 1
    # A start this poor forces rejected steps: they cost no Jacobian.
    assert int(solution.jacobians) < int(solution.steps) + 1
    assert bool(solution.converged)
    np.testing.assert_allclose(START * np.exp(solution.value), CERTIFIED, rtol=1e-3)


def test_unidentifiable_directions_do_not_prevent_convergence():
    # Only u0 + u1 is determined by these residuals: J^T J is singular.
    def residuals(u):
        return jnp.array([u[0] + u[1] - 1.0, 2.0 * (u[0] + u[1]) - 2.0, jnp.sin(u[2])])

    solution = levenberg_marquardt(residuals, jnp.array([3.0, -1.0, 0.3]))
    assert bool(solution.converged)
    assert float(solution.value[0] + solution.value[1]) == pytest.approx(1.0, abs=1e-3)


def test_vmaps_over_starts():
    starts = jnp.array([[0.0, 0.0], [-0.3, 0.8], [0.5, 0.3]])
    solutions = jax.vmap(lambda u0: levenberg_marquardt(misra1a, u0))(starts)
    assert bool(jnp.all(solutions.converged))
    values = START * np.exp(np.asarray(solutions.value))
    assert np.all(np.abs(values - CERTIFIED) <= 0.02 * CERTIFIED_SD)


def misra1a_inexact(error, scale=1.0):
    """Misra1a whose inexact evaluations (exact false) compute the model with b2 off by the
    relative `error` (residuals and Jacobian wrong by about that much), and whose inexact
    Jacobian is `scale` times the true one (the residuals' values unchanged)."""
    def residuals(u, exact):
        b = START * jnp.exp(u)
        b2 = jnp.where(exact, b[1], b[1] * (1.0 + error))
        r = (b[0] * (1.0 - jnp.exp(-b2 * MISRA1A_X)) - MISRA1A_Y) / SIGMA
        return r + jnp.where(exact, 0.0, scale - 1.0) * (r - jax.lax.stop_gradient(r))
    return residuals


@pytest.mark.parametrize("error, scale", [(0.02, 1.0), (0.5, 1.0), (0.0, 10.0)])
def test_inexact_jacobians_change_the_path_not_the_optimum(error, scale):
    # A 2% error is a looser ODE tolerance. A 50% error misleads the first step, which fails;
    # a Jacobian ten times too large makes every step a tenth of what it should be, each one
    # accepted: in both cases the solver must turn to exact Jacobians instead of crawling.
    solution = levenberg_marquardt(misra1a_inexact(error, scale), jnp.zeros(2),
                                   inexact_jacobians=True)
    assert bool(solution.converged)
    assert np.all(np.abs(START * np.exp(solution.value) - CERTIFIED) <= 0.02 * CERTIFIED_SD)
    # The residuals and the Jacobian returned (standard errors come from it) are the exact ones.
    np.testing.assert_allclose(solution.residuals, misra1a(solution.value), rtol=1e-12)
    np.testing.assert_allclose(solution.jacobian, jax.jacfwd(misra1a)(solution.value),
                               rtol=1e-3)
    exact = levenberg_marquardt(misra1a, jnp.zeros(2))
    assert int(solution.steps) <= int(exact.steps) + 3


def test_the_final_small_step_keeps_its_jacobian():
    # Near the optimum one Gauss-Newton step lands on it: the Jacobian taken before that step
    # is within 1e-3 of the one at the optimum and confirms the stop, so no pass is made after
    # it (every step here is accepted: one pass per step, not one more).
    near = jnp.log(CERTIFIED * (1.0 + CERTIFIED_SD / CERTIFIED) / START)
    solution = levenberg_marquardt(misra1a, near)
    assert bool(solution.converged) and float(solution.decrement) <= 1e-4
    assert int(solution.jacobians) == int(solution.steps)
    np.testing.assert_allclose(solution.jacobian, jax.jacfwd(misra1a)(solution.value),
                               rtol=1e-3)


class _Misra1a(__import__("equinox").Module):
    # The residuals as a module (arrays as fields), as the stepwise loop wants them.
    x: jax.Array
    y: jax.Array

    def __call__(self, u):
        b = START * jnp.exp(u)
        return (b[0] * (1.0 - jnp.exp(-b[1] * self.x)) - self.y) / SIGMA


@pytest.mark.parametrize("start", [np.zeros(2), np.array([1.5, -1.0])])
def test_single_pass_and_stepwise_loops_reach_the_certified_result(start):
    from spineid.identify._common._least_squares import stepwise_levenberg_marquardt

    residuals = _Misra1a(jnp.asarray(MISRA1A_X), jnp.asarray(MISRA1A_Y))
    single = levenberg_marquardt(residuals, jnp.asarray(start), single_pass=True,
                                 decrement_tol=0.0)
    stepwise = stepwise_levenberg_marquardt(residuals, start, decrement_tol=0.0)
    for solution in (single, stepwise):
        assert bool(solution.converged)
        np.testing.assert_allclose(START * np.exp(solution.value), CERTIFIED, rtol=1e-8)
        assert float(2 * solution.cost * SIGMA**2) == pytest.approx(CERTIFIED_RSS, rel=1e-8)
    # The same iterations, whether the loop is compiled or run from Python.
    assert int(single.steps) == int(stepwise.steps)
    np.testing.assert_allclose(single.value, stepwise.value, rtol=1e-12)
    # Every evaluation in a single pass gives a Jacobian: one per iteration.
    assert int(single.jacobians) == int(single.steps) + 1
    # The statistical stop applies as in the two-pass loop.
    early = stepwise_levenberg_marquardt(residuals, start)
    assert bool(early.converged) and float(early.decrement) <= 1e-4
    assert np.all(np.abs(START * np.exp(early.value) - CERTIFIED) <= 0.02 * CERTIFIED_SD)


def test_the_stepwise_loop_prints_the_compiled_loops_progress_lines(capfd):
    # The stepwise loop prints from Python (a compiled program that prints cannot be stored:
    # spineid/_programs.py), line for line what the compiled single pass prints.
    from spineid.identify._common._least_squares import stepwise_levenberg_marquardt

    residuals = _Misra1a(jnp.asarray(MISRA1A_X), jnp.asarray(MISRA1A_Y))
    start = jnp.asarray([1.5, -1.0])
    levenberg_marquardt(residuals, start, single_pass=True, progress=True)
    jax.effects_barrier()
    compiled = capfd.readouterr().out.splitlines()
    stepwise_levenberg_marquardt(residuals, start, progress=True)
    printed = capfd.readouterr().out.splitlines()
    assert len(compiled) > 3 and printed == compiled


def test_single_pass_refuses_inexact_jacobians():
    with pytest.raises(ValueError, match="single_pass and inexact_jacobians"):
        levenberg_marquardt(lambda u, exact: misra1a(u), jnp.zeros(2), single_pass=True,
                            inexact_jacobians=True)


@pytest.mark.parametrize("loop", ["two-pass", "single-pass", "stepwise"])
def test_a_placeholder_noise_far_too_large_does_not_stop_the_fit_early(loop):
    """Weights of a placeholder noise 100x the real one: the statistical stop, floored at the
    assumed noise, stops about 1.4 real standard errors short; `provisional=True` measures it
    against the residuals' own level and stops within about 0.014 of them."""
    from spineid.identify._common._least_squares import stepwise_levenberg_marquardt

    residuals = _Misra1a(jnp.asarray(MISRA1A_X), jnp.asarray(MISRA1A_Y))
    placeholder = lambda u: residuals(u) / 100.0  # noqa: E731
    start = jnp.array([1.5, -1.0])

    def run(provisional):
        if loop == "stepwise":
            scaled = _Scaled(residuals, 0.01)
            return stepwise_levenberg_marquardt(scaled, start, provisional=provisional)
        return levenberg_marquardt(placeholder, start, single_pass=loop == "single-pass",
                                   provisional=provisional)

    provisional, floored = run(True), run(False)
    for solution in (provisional, floored):
        assert bool(solution.converged)
    off = lambda s: np.abs(START * np.exp(s.value) - CERTIFIED) / CERTIFIED_SD  # noqa: E731
    assert np.all(off(provisional) <= 0.02)
    assert np.all(off(floored) <= 1.5)  # within the 1.4 real standard errors it allows


class _Scaled(__import__("equinox").Module):
    inner: _Misra1a
    factor: float

    def __call__(self, u):
        return self.inner(u) * self.factor


@jax.custom_jvp
def _roughness(u, rows):
    # An error of the residuals (1e-3 of their noise) that their Jacobian does not see, as an
    # ODE solved to its tolerance has: a different rounding at every point.
    phase = 1e5 * jnp.sum(u * jnp.array([1.0, 1.7, 2.3]))
    return 1e-3 * jnp.sin(phase + rows)


@_roughness.defjvp
def _roughness_jvp(primals, tangents):
    return _roughness(*primals), jnp.zeros_like(primals[1])


class _Rough(eqx.Module):
    x: jax.Array
    y: jax.Array

    def __call__(self, u):
        return self.x @ u - self.y + _roughness(u, jnp.arange(self.y.shape[0], dtype=u.dtype))


@pytest.mark.parametrize("loop", ["two-pass", "single-pass", "stepwise"])
def test_a_stall_at_the_residuals_resolution_stops_near_the_least_squares_optimum(loop):
    """Residuals resolved to 1e-3 of their unit noise, with a direction the data barely
    determine: near the optimum the linear model promises a decrease (a decrement of about
    0.007) that no try delivers. The fit stops on the stall, within 0.45 standard errors of
    numpy's least-squares optimum, in 16 tries where it once tried 23 (the damping raised until
    the steps fell below `xtol`)."""
    from spineid.identify._common._least_squares import stepwise_levenberg_marquardt

    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 3))
    x[:, 2] = x[:, 1] + 1e-3 * rng.standard_normal(200)  # a nearly flat direction
    y = x @ np.array([1.0, 2.0, -1.0]) + rng.standard_normal(200)
    residuals, start = _Rough(jnp.asarray(x), jnp.asarray(y)), jnp.array([3.0, -2.0, 5.0])
    if loop == "stepwise":
        solution = stepwise_levenberg_marquardt(residuals, start)
    else:
        solution = levenberg_marquardt(residuals, start, single_pass=loop == "single-pass")
    assert bool(solution.converged)
    assert 1e-4 < float(solution.decrement) <= 0.1  # (not the decrement's stop: the stall's)
    best = np.linalg.lstsq(x, y, rcond=None)[0]
    off = np.asarray(solution.value) - best
    assert 0.5 * off @ (x.T @ x) @ off <= 0.1
    assert int(solution.steps) <= 16


def test_a_refit_from_the_damping_a_fit_ended_with_takes_fewer_steps_to_the_same_optimum():
    # A refit of nearly the same residuals (weights 1% lighter) from the optimum of the first
    # fit: from the default damping, 1e-3 of the largest curvature, its first steps only bring
    # the damping down; from the damping the first fit ended with, it is a Gauss-Newton step.
    # A start damping above the default is capped there (the same iterations as the default).
    first = levenberg_marquardt(misra1a, jnp.array([1.5, -1.0]), decrement_tol=0.0)
    assert bool(first.converged) and 0 < float(first.damping) < np.inf
    reweighted = lambda u: misra1a(u) / 1.01  # noqa: E731
    near = first.value + jnp.array([0.02, -0.02])
    default = levenberg_marquardt(reweighted, near, decrement_tol=0.0)
    warm = levenberg_marquardt(reweighted, near, decrement_tol=0.0, damping=first.damping)
    capped = levenberg_marquardt(reweighted, near, decrement_tol=0.0,
                                 damping=jnp.asarray(1e30))
    for solution in (default, warm, capped):
        assert bool(solution.converged)
        np.testing.assert_allclose(START * np.exp(solution.value), CERTIFIED, rtol=1e-8)
    assert int(warm.steps) < int(default.steps)
    assert int(capped.steps) == int(default.steps)
    with pytest.raises(ValueError, match="two-pass loop only"):
        levenberg_marquardt(misra1a, near, single_pass=True, damping=first.damping)
