"""A long integration in consecutive windows, so that Python gets control between them."""

import time
from collections.abc import Callable

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np


def integrate_in_windows(solve: Callable, ts, state, *, windows: int, max_steps: int,
                         successful, max_steps_reached, on_window: Callable | None = None,
                         time_warm: bool = True):
    """Integrate over the save times `ts` (s, `(k,)`, concrete) in `windows` consecutive
    windows of equal sample count, each started from the state where the last ended.

    `solve(window_ts, state) -> (ys, result, n_steps)` integrates one window (a compiled
    function: every window has the same shape, the last padded with repeats of `ts[-1]`, so
    it compiles once) from `state` (a pytree of arrays) at `window_ts[0]`, saving `ys` (the
    same pytree, a leading axis over `window_ts`); `result` is compared with `successful`;
    `n_steps` counts its accepted solver steps. Between windows Python runs: `on_window(t,
    n_steps)` (after every window but the last) hears the time reached (s) and the steps
    taken so far, and a signal handler (Ctrl-C, SIGTERM, a time limit) can end the run.
    `max_steps` bounds the steps of the whole run, compared with the accepted steps between
    windows: a run that has taken that many before its end stops there with
    `max_steps_reached` (one window may take up to the limit `solve` itself applies). A
    failed window ends the run: the samples not reached are `inf`.

    Returns `(ys, result, n_steps, seconds)`: `ys` over all of `ts`, the first failure (or
    `successful`), the accepted steps, and the wall time (s) of the run; with `time_warm`
    the first window (whose call compiles) is run again and timed warm, so that `seconds`
    leaves the compilation out.
    """
    if not (isinstance(windows, int) and windows >= 1):
        raise ValueError(f"windows={windows!r}: expected a whole number >= 1")
    ts = np.asarray(ts, dtype=float)
    k = ts.size
    # Strongly typed float64 leaves, placed on the device (committed), as a stored program
    # (`spineid/_programs.py`) returns its outputs: every window's call then has the same
    # signature, so that its program is compiled (or loaded) once, not again for the second
    # window (a plain `jit` returns uncommitted outputs for uncommitted inputs; either is
    # consistent this way).
    device = jax.extend.backend.get_default_device()
    state = jax.tree.map(lambda a: jax.device_put(jnp.asarray(a, dtype=float), device), state)
    parts = [jax.tree.map(lambda a: a[None], state)]
    n_steps, result, seconds = 0, successful, 0.0
    per = -(-(k - 1) // min(windows, max(k - 1, 1)))  # samples per window after its first
    for start in range(0, k - 1, max(per, 1)):
        fresh = min(per, k - 1 - start)
        window_ts = jax.device_put(ts[np.minimum(np.arange(start, start + per + 1), k - 1)],
                                   device)
        clock = time.perf_counter()
        ys, window_result, taken = solve(window_ts, state)
        taken = int(taken)  # (waits for the window)
        elapsed = time.perf_counter() - clock
        if start == 0 and time_warm and bool(window_result == successful):
            clock = time.perf_counter()  # the first call compiled: timed again, warm
            int(solve(window_ts, state)[2])
            elapsed = time.perf_counter() - clock
        seconds += elapsed
        n_steps += taken
        parts.append(jax.tree.map(lambda a, n=fresh: a[1:1 + n], ys))
        ended = start + fresh == k - 1
        if bool(window_result == successful) and n_steps >= max_steps and not ended:
            window_result = max_steps_reached
        if not bool(window_result == successful):
            result = window_result
            missing = k - 1 - start - fresh  # not reached: infinite, as diffrax leaves them
            parts.append(jax.tree.map(
                lambda a, n=missing: jnp.full((n,) + a.shape, jnp.inf), state))
            break
        state = jax.tree.map(lambda a, n=fresh: a[n], ys)
        if on_window is not None and not ended:
            on_window(float(ts[start + fresh]), n_steps)
    ys = jax.tree.map(lambda *columns: jnp.concatenate(columns), *parts)
    return ys, result, n_steps, seconds
