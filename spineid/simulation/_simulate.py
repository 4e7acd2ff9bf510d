"""Integration of the equations of motion with diffrax."""

import os

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..models._mechanics import (
    AbstractLagrangianSystem, lagrangian_vector_field, reported_vector_field)
from .._reported_checks import checks_reported_as_nan
from ._windows import integrate_in_windows


class SimulationResult(eqx.Enumeration):
    """Outcome of `simulate`: `successful` or the reason the integration failed."""

    successful = ""
    max_steps_reached = (
        "spineid.simulate: the maximum number of solver steps was reached before the last "
        "requested time. The model may be very stiff or unstable (check stiffness signs, masses "
        "and loads), or raise `max_steps` of `spineid.simulate`."
    )
    non_finite_state = (
        "spineid.simulate: the state became infinite or NaN. The model is unstable or its "
        "parameters are not physical (negative stiffness or mass, huge loads)."
    )
    integration_failed = (
        "spineid.simulate: the ODE solver failed (its step size collapsed or a nonlinear solve "
        "did not converge). Check the model for instability or discontinuous loads."
    )


class Simulation(eqx.Module):
    """A simulated motion, saved at the requested times.

    Fields: `ts` (s, `(k,)`), `q` and `qdot` (`(k, n_dof)`), `result` (a `SimulationResult`),
    `n_steps` (accepted solver steps). When `result` is not successful, `q` and `qdot` hold
    `inf` from the failure on.
    """

    ts: Float[Array, " k"]
    q: Float[Array, "k n"]
    qdot: Float[Array, "k n"]
    result: SimulationResult
    n_steps: Array

    def failure(self) -> str | None:
        """`None` where the integration reached the last requested time; otherwise one
        sentence: why it failed (the `SimulationResult` message, which says what to change)
        and the last saved time with a finite state. For one simulation (not a vmapped batch);
        outside `jit`."""
        return describe_failure(self.result, self.ts, self.q, self.qdot, self.n_steps)


def describe_failure(result: SimulationResult, ts, q, qdot, n_steps) -> str | None:
    """`None` for a successful integration, else one sentence: the reason (`result`'s
    message, which says what to change), the requested span of `ts` (s, `(k,)`), the last
    saved time whose state (`q`, `qdot`, `(k, n)`) is finite, and the `n_steps` taken. For one
    integration, outside `jit`."""
    if bool(result == SimulationResult.successful):
        return None
    ts = np.asarray(ts)
    finite = np.all(np.isfinite(np.asarray(q)), axis=1) & np.all(
        np.isfinite(np.asarray(qdot)), axis=1)
    bad = np.flatnonzero(~finite)
    reached = (f"the last finite state is at t = {ts[bad[0] - 1]:g} s" if bad.size and bad[0]
               else "no requested time was reached" if bad.size
               else f"at t = {ts[-1]:g} s")
    return (f"{SimulationResult[result]} (requested {ts[0]:g} to {ts[-1]:g} s; "
            f"{reached}; {int(n_steps)} steps taken)")


def classify(diffrax_result, q, qdot) -> SimulationResult:
    """The `SimulationResult` of a diffrax solve that returned `diffrax_result` with saved
    states `q`, `qdot`: successful only if diffrax succeeded and every state is finite."""
    finite = jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(qdot))
    return SimulationResult.where(
        diffrax_result == diffrax.RESULTS.successful,
        SimulationResult.where(
            finite, SimulationResult.successful, SimulationResult.non_finite_state
        ),
        SimulationResult.where(
            diffrax_result == diffrax.RESULTS.max_steps_reached,
            SimulationResult.max_steps_reached,
            SimulationResult.integration_failed,
        ),
    )


# Copies of the saved states a run holds at once (diffrax's buffer, the outputs, the host copy).
_COPIES = 4


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux `MemAvailable`, else the free
    physical pages), or `None` where the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def refuse_oversized_output(n_samples: int, n_values: int, what: str) -> None:
    """A `ValueError` before anything is allocated if saving `n_samples` samples of `n_values`
    float64 values (the states of a run, a few copies at once) would not fit in the memory
    available (`available_memory`)."""
    needed = _COPIES * 8 * int(n_samples) * int(n_values)
    available = available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"{what} would save {n_samples} samples of {n_values} values, about "
            f"{needed / 2**30:.3g} GiB with its working copies, more than the "
            f"{available / 2**30:.3g} GiB of memory available: simulate a shorter span or "
            "save fewer samples")


DEFAULT_RTOL = 1e-8
DEFAULT_ATOL = 1e-10


def default_solver() -> diffrax.AbstractSolver:
    """The integrator spineid uses unless told otherwise: `diffrax.Tsit5` (explicit 5(4)).

    Chosen by measurement (`experiments/solver_choice.py`, bundled 16-spring pair, 0.5 s,
    2-core CPU): at the default `rtol=1e-8, atol=1e-10` it reaches a relative error of 1.5e-9 in
    6.5 ms warm, faster than any other candidate at that accuracy (Dopri8 needs 8.1 ms for
    1.7e-9); at looser tolerances Dopri5 is within 8% of it, and only for errors near 1e-11 does
    Dopri8 catch up. The implicit Kvaerno3/Kvaerno5 were 10 to 40 times slower because the spring
    pairs are not stiff; stiff models (contact) may pass an implicit solver.
    """
    return diffrax.Tsit5()


def solver_for(system: AbstractLagrangianSystem) -> diffrax.AbstractSolver:
    """The solver that simulates `system` when none is given: its `preferred_solver()` (e.g.
    `Kvaerno4` for the stiff head-neck chain), else `default_solver()` (`Tsit5`)."""
    preferred = system.preferred_solver()
    return default_solver() if preferred is None else preferred


@eqx.filter_jit
def simulate(
    system: AbstractLagrangianSystem,
    ts: Float[ArrayLike, " k"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    adjoint: diffrax.AbstractAdjoint | None = None,
    max_steps: int = 100_000,
    throw: bool = True,
    t0: float | None = None,
    y0: tuple | None = None,
) -> Simulation:
    """Integrate a system from its `initial_state()` (or `y0`) at `t0`, saving at every time
    in `ts`.

    **Arguments:**
    - `system`: any `AbstractLagrangianSystem` (e.g. `PlanarPair`); its equations of motion are
      Lagrange's equations (see `spineid.models`, Liu 2001 eq 2-9).
    - `ts`: increasing save times (s), shape `(k,)`.
    - `solver`: a diffrax solver; default the system's `preferred_solver()`, else
      `default_solver()`.
    - `rtol`, `atol`: tolerances of the adaptive step-size controller (PID).
    - `adjoint`: how to differentiate: `diffrax.RecursiveCheckpointAdjoint()` (default; reverse
      mode, `jax.grad`/`jax.jacrev`) or `diffrax.ForwardMode()` (`jax.jvp`/`jax.jacfwd`, the
      efficient choice for Jacobians with few parameters).
    - `max_steps`: the most solver steps allowed.
    - `throw`: raise on failure (default). With `throw=False` the failure is reported in
      `result`, as needed inside fits that must back off instead of crashing.
    - `t0`: start time of the motion (s), at most `ts[0]`; default `ts[0]`.
    - `y0`: start state `(q, qdot)` (`(n_dof,)` each) instead of the system's
      `initial_state()`: a segment of a motion started from a state other than rest (the
      segments of multiple shooting, `spineid.MultipleShooting`).

    **Returns:** a `Simulation`. Jit-compiled; `jax.vmap` over systems (parameters, loads) works.
    """
    if not isinstance(system, AbstractLagrangianSystem):
        raise ValueError(f"spineid.simulate: {type(system).__name__} is not a spineid model "
                         "(a PlanarPair, SpatialPair, chain, ... or a model file's .model)")
    ts = jnp.asarray(ts, dtype=float)
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"spineid.simulate: ts has shape {ts.shape}; expected one or more "
                         "save times (k,), s")
    y0 = system.initial_state() if y0 is None else y0
    # (Shapes are known while tracing: refused before anything is allocated.)
    refuse_oversized_output(ts.shape[0], 2 * y0[0].size, "spineid.simulate")
    # (Not throwing, the checks traced inside the solve report NaN states instead of calling
    # back into Python: a fit's program can then be cached; see `_reported_checks`.)
    with checks_reported_as_nan(active=not throw):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(lagrangian_vector_field if throw else _vector_field_reporting),
            solver_for(system) if solver is None else solver,
            t0=ts[0] if t0 is None else t0,
            t1=ts[-1],
            dt0=None,
            y0=y0,
            args=system,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol,
                                                      jump_ts=system.jump_times()),
            adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
            max_steps=max_steps,
            throw=False,
        )
    q, qdot = solution.ys
    result = classify(solution.result, q, qdot)
    if throw:
        q = result.error_if(q, result != SimulationResult.successful)
    return Simulation(
        ts=ts, q=q, qdot=qdot, result=result, n_steps=solution.stats["num_accepted_steps"]
    )


def _vector_field_reporting(t, y, system):
    # `lagrangian_vector_field` under a name of its own for the solves that do not throw:
    # `diffeqsolve` keeps one trace per vector field, so a solve traced with its checks
    # reported as NaN never reuses one traced with them raising, nor the other way round (and
    # the model's own checks give NaN wherever they are traced: `reported_vector_field`).
    return reported_vector_field(t, y, system)


def simulate_in_windows(
    system: AbstractLagrangianSystem,
    ts: Float[ArrayLike, " k"],
    *,
    windows: int = 10,
    on_window=None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    max_steps: int = 100_000,
    time_warm: bool = True,
) -> tuple[Simulation, float]:
    """The motion of `system` from its `initial_state()` at `ts[0]` (Lagrange's equations,
    Liu 2001 eq 2-9), as `simulate(system, ts, throw=False)` gives it, integrated in
    consecutive windows (`integrate_in_windows`): one compiled `simulate` with `y0`, called
    once per window from Python, so that a long run shows progress and can be interrupted or
    stopped at a time limit between windows. The step-size controller starts afresh in each
    window (a few more steps; the motion agrees with one window's to the tolerance).

    **Arguments:**
    - `system`, `solver`, `rtol`, `atol`: as for `simulate`.
    - `ts`: increasing save times (s), shape `(k,)`, concrete (not under `jit`).
    - `windows`: how many windows of equal sample count (at most `k - 1`).
    - `on_window(t, n_steps)`: called after each window but the last with the time reached (s)
      and the accepted steps so far.
    - `max_steps`: bounds the accepted steps of the whole run, compared between windows (one
      window may take up to this many itself).
    - `time_warm`: run the first window again to time it without its compilation.

    **Returns:** `(simulation, seconds)`: a `Simulation` (a failed window ends the run: its
    `result` says why, the samples not reached are `inf`, as `Simulation.failure` reads them)
    and the wall time (s) of the run (warm with `time_warm`). Saved samples that would not fit
    in memory are refused before anything runs (`ValueError`)."""
    ts = np.asarray(ts, dtype=float)
    state = system.initial_state()
    refuse_oversized_output(ts.size, 2 * state[0].size, "spineid.simulate")

    def solve(window_ts, state):
        run = simulate(system, window_ts, solver=solver, rtol=rtol, atol=atol,
                       max_steps=max_steps, throw=False, y0=state)
        return (run.q, run.qdot), run.result, run.n_steps

    (q, qdot), result, n_steps, seconds = integrate_in_windows(
        solve, ts, state, windows=windows, max_steps=max_steps,
        successful=SimulationResult.successful,
        max_steps_reached=SimulationResult.max_steps_reached, on_window=on_window,
        time_warm=time_warm)
    return Simulation(ts=jnp.asarray(ts), q=q, qdot=qdot, result=result,
                      n_steps=jnp.asarray(n_steps)), seconds
