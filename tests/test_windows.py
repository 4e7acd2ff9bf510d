"""Integration in windows (`spineid.integrate_in_windows`, `spineid.simulate_in_windows`): the
samples, states and step counts against an exact solution and against one `simulate`, a failure
in the middle, the step budget, and record lengths at the edges."""

import jax.numpy as jnp
import numpy as np
import pytest

import spineid

OK, FAILED, TOO_MANY = 0, 1, 2


def decay(fail_after=np.inf, steps=10):
    # One window of x' = -x, solved exactly; windows starting at or after `fail_after` fail
    # half-way (the samples from there infinite, as diffrax leaves them).
    calls = []

    def solve(window_ts, state):
        calls.append(np.asarray(window_ts))
        ys = state * jnp.exp(-(window_ts - window_ts[0]))
        if float(window_ts[0]) >= fail_after:
            ys = ys.at[ys.size // 2:].set(jnp.inf)
            return ys, FAILED, steps // 2
        return ys, OK, steps
    return solve, calls


def run(solve, ts, **options):
    return spineid.integrate_in_windows(solve, ts, jnp.asarray(2.0), successful=OK,
                                        max_steps_reached=TOO_MANY, **options)


@pytest.mark.parametrize("k, windows", [(101, 10), (101, 7), (5, 10), (2, 3), (2, 1)])
def test_windows_join_into_the_exact_solution(k, windows):
    ts = np.linspace(0.0, 1.0, k)
    solve, calls = decay()
    heard = []
    ys, result, n_steps, _ = run(solve, ts, windows=windows, max_steps=10**6,
                                 on_window=lambda t, n: heard.append((t, n)))
    np.testing.assert_allclose(ys, 2.0 * np.exp(-ts), rtol=1e-12)
    assert result == OK
    used = min(windows, k - 1)
    assert len(calls) == used + 1  # the first window twice (timed warm)
    assert {c.size for c in calls} == {-(-(k - 1) // used) + 1}  # one compiled shape
    assert n_steps == 10 * used and len(heard) == used - 1
    assert [t for t, _ in heard] == sorted(t for t, _ in heard) and heard[-1][0] < 1.0 \
        if heard else True


def test_a_failed_window_ends_the_run_with_the_rest_infinite():
    ts = np.linspace(0.0, 1.0, 101)
    solve, calls = decay(fail_after=0.5)
    ys, result, n_steps, _ = run(solve, ts, windows=10, max_steps=10**6)
    assert result == FAILED and len(calls) == 1 + 6  # windows 0-5, the first twice
    finite = np.isfinite(np.asarray(ys))
    assert finite[:55].all() and not finite[55:].any()  # half of window 5, then nothing
    np.testing.assert_allclose(ys[:55], 2.0 * np.exp(-ts[:55]), rtol=1e-12)
    assert n_steps == 5 * 10 + 5


def test_the_step_budget_counts_over_windows():
    ts = np.linspace(0.0, 1.0, 101)
    solve, _ = decay(steps=30)
    ys, result, n_steps, _ = run(solve, ts, windows=10, max_steps=100)
    assert result == TOO_MANY and n_steps == 120  # stopped after the fourth window
    assert np.isfinite(np.asarray(ys[:41])).all() and not np.isfinite(np.asarray(ys[41:])).any()
    # A budget reached with the last window is a finished run.
    _, result, n_steps, _ = run(solve, ts, windows=10, max_steps=300)
    assert result == OK and n_steps == 300


def test_one_sample_and_bad_window_counts():
    solve, calls = decay()
    ys, result, n_steps, _ = run(solve, np.zeros(1), windows=10, max_steps=10)
    assert ys.shape == (1,) and float(ys[0]) == 2.0 and result == OK and n_steps == 0
    assert calls == []
    for windows in (0, -1, 2.5):
        with pytest.raises(ValueError, match=f"windows={windows!r}"):
            run(solve, np.linspace(0, 1, 5), windows=windows, max_steps=10)


def test_simulate_in_windows_agrees_with_one_simulation_and_reports_a_failure():
    model = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml")).model
    ts = np.linspace(0.0, 0.2, 201)
    whole = spineid.simulate(model, jnp.asarray(ts))
    windowed, seconds = spineid.simulate_in_windows(model, ts, windows=8)
    assert windowed.failure() is None and seconds > 0
    np.testing.assert_allclose(windowed.q, whole.q, atol=1e-8 * float(jnp.max(jnp.abs(whole.q))))
    # Too few steps for the whole run: stopped between windows, and said so.
    stopped, _ = spineid.simulate_in_windows(model, ts, windows=8,
                                             max_steps=int(whole.n_steps) // 2)
    assert "maximum number of solver steps" in stopped.failure()
    assert not np.isfinite(np.asarray(stopped.q[-1])).any()
