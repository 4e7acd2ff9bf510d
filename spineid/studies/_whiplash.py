"""The whiplash study of Fritzkowski and Walczak (seed 001 section 4): the head-neck chain in an
8.5 g rear-end pulse, its 'kinetic energy - work' check, what the head and the ligaments do, and
how the peak ligament force depends on the stiffness and damping parameters.
"""

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._programs import stored_call
from ..elements._parameters import apply_values, Parameter
from ..models._head_neck import (
    check_covers_pulse,
    EnergyWorkCheck,
    energy_work_check,
    energy_work_record,
    HeadNeckChain,
    solve_energy_work,
)
from ..simulation._simulate import (
    classify,
    describe_failure,
    refuse_oversized_output,
)
from ..simulation._windows import integrate_in_windows

LEVELS = ("T1-C7", "C7-C6", "C6-C5", "C5-C4", "C4-C3", "C3-C2", "C2-C1", "C1-C0")

# The diffrax results a window's stored program tells apart (its outputs must be arrays: the
# result travels as its index here): success, the step limit (which `integrate_in_windows` and
# `classify` tell apart) and any other failure as the last, which `classify` reports as a
# failed integration, as it would the original.
_RESULTS = ("successful", "max_steps_reached", "nonlinear_divergence")


@dataclasses.dataclass(frozen=True)
class WhiplashStudy:
    """One whiplash simulation and what it shows, as numpy arrays (SI units).

    Fields: `chain` (the simulated `HeadNeckChain`), `check` (the `EnergyWorkCheck`: `ts` `(k,)`, `q`, `qdot` `(k, n)`, `T_2`, `W`,
    `e_R`), `head` `(k, 2)` (head mass centre relative to the base point, m, global axes),
    `head_velocity` `(k, 2)` (m/s, relative to the base), `head_angle` `(k,)` (rad, + flexion),
    `ligament_forces` `(k, 2, n)` (N, anterior and posterior below each body, + tension),
    `joint_angles` `(k, n)` (rad), `potential_energy` `(k,)` (J, `U(t) - U(0)` in the base
    frame: springs and gravity), `seconds` (warm run time of the simulation, s).
    """

    chain: HeadNeckChain
    check: EnergyWorkCheck
    head: np.ndarray
    head_velocity: np.ndarray
    head_angle: np.ndarray
    ligament_forces: np.ndarray
    joint_angles: np.ndarray
    potential_energy: np.ndarray
    seconds: float

    @property
    def ts(self) -> np.ndarray:
        """Sample times (s), `(k,)`."""
        return np.asarray(self.check.ts)

    def summary(self) -> dict:
        """The numbers a reader wants first, JSON-ready: peak e_R, head motion extremes (mm,
        deg, m/s) with their times (s), peak tension per ligament level (N) and its time, and
        when the neck first takes the S-shape (one of the two upper joints flexed while one of
        the three lower extends) and the C-shape (every joint extended), as `[start, end]`
        (s)."""
        ts = self.ts
        head_mm = (self.head - self.head[0]) * 1e3
        forces = self.ligament_forces
        theta = self.joint_angles
        # S-shape: upper cervical flexion with lower extension (the head lags behind T1
        # without turning much); C-shape: every joint extended.
        s_shape = (theta[:, -2:].max(axis=1) > 0) & (theta[:, :3].min(axis=1) < 0)
        c_shape = np.all(theta < 0, axis=1)

        peak_force = {}
        for row, side in enumerate(("anterior", "posterior")):
            for level, name in enumerate(LEVELS[: forces.shape[2]]):
                index = int(np.argmax(forces[:, row, level]))
                peak_force[f"{side} {name}"] = {"force_N": float(forces[index, row, level]),
                                                "t_s": float(ts[index])}
        rearmost = int(np.argmin(head_mm[:, 0]))
        extension = int(np.argmin(self.head_angle))
        return {
            "t_end_s": float(ts[-1]),
            "n_steps": int(self.check.n_steps),
            "run_time_s": self.seconds,
            "peak_relative_error_e_R": float(np.max(np.asarray(self.check.relative_error))),
            "peak_relative_kinetic_energy_J": float(np.max(
                np.asarray(self.check.relative_kinetic_energy))),
            "head_rearward_mm": {"value": float(head_mm[rearmost, 0]),
                                   "t_s": float(ts[rearmost])},
            "head_extension_deg": {"value": float(np.degrees(self.head_angle[extension])),
                                   "t_s": float(ts[extension])},
            "peak_head_speed_m_per_s": float(np.linalg.norm(self.head_velocity, axis=1).max()),
            "s_shape_s": _interval(ts, s_shape),
            "c_shape_s": _interval(ts, c_shape),
            "peak_ligament_force": peak_force,
        }


def _interval(ts, mask) -> list[float] | None:
    # First and last time (s) of the first uninterrupted stretch in which `mask` holds.
    if not np.any(mask):
        return None
    first = int(np.argmax(mask))
    after = np.flatnonzero(~mask[first:])
    last = first + (int(after[0]) - 1 if after.size else int(mask[first:].size) - 1)
    return [float(ts[first]), float(ts[last])]


# Measured over 0-5 s on a 2-core CPU (experiments/whiplash.py): the chain is stiff, explicit
# Tsit5 is bound by stability (95k steps at any tolerance, 8-9 s); Kvaerno4 at rtol 1e-5 takes
# 1.6k steps in 0.7-0.8 s with e_R about 4e-6; Kvaerno5 rejects half its steps at this tolerance.
DEFAULT_SOLVER = diffrax.Kvaerno4()
DEFAULT_RTOL = 1e-5


def whiplash_study(chain: HeadNeckChain, t_end: float = 5.0, n_samples: int | None = None,
                   solver=None, rtol: float = DEFAULT_RTOL, atol: float | None = None,
                   max_steps: int = 200_000, windows: int = 10, progress=None
                   ) -> WhiplashStudy:
    """Simulate the chain from rest through its pulse to `t_end` (s), with `n_samples` output
    samples (default one per millisecond), with its work as `energy_work_check` integrates it
    (eqs 49-55; implicit `Kvaerno4` at `rtol` by default: the chain is stiff; at most
    `max_steps` solver steps in all) and collect what `WhiplashStudy` holds. The span is
    integrated in `windows` consecutive windows (`spineid.integrate_in_windows`; the
    step-size controller starts afresh in each, a few more steps): after each,
    `progress(t, n_steps)` (if given) hears the time reached (s) and the steps taken, and an
    interruption or a time limit (a Python signal handler) is answered. The windows' solve
    runs from a stored program (`spineid/_programs.py`), so that a later process loads it
    instead of tracing it (`spineid whiplash --t-end 0.2` in a second process: 5 s, 12 s
    before; docs/performance.md). `seconds` is the warm run time (the first window, which
    compiles, timed again). Raises `ValueError` for a simulation shorter than the pulse,
    saved samples that would not fit in memory (before anything is allocated), and a failed
    integration (one sentence: the limit hit, how far it got, the steps taken)."""
    n_samples = n_samples or int(round(t_end * 1000)) + 1
    ts = np.linspace(0.0, t_end, n_samples)
    solver = DEFAULT_SOLVER if solver is None else solver
    atol = rtol * 1e-2 if atol is None else atol
    refuse_oversized_output(n_samples, 2 * chain.n_dof + 3, "the whiplash simulation")
    check_covers_pulse(chain, t_end)
    q0, qdot0 = chain.initial_state()
    (q, qdot, work), result, n_steps, seconds = integrate_in_windows(
        lambda window_ts, state: _stored_window(chain, window_ts, state, solver, rtol, atol,
                                                max_steps),
        ts, (q0, qdot0, jnp.zeros(())), windows=windows, max_steps=max_steps,
        successful=diffrax.RESULTS.successful,
        max_steps_reached=diffrax.RESULTS.max_steps_reached, on_window=progress)
    check = energy_work_record(chain, jnp.asarray(ts), q, qdot, work, jnp.asarray(n_steps),
                               result)
    failure = describe_failure(classify(check.result, check.q, check.qdot), check.ts, check.q,
                               check.qdot, check.n_steps)
    if failure is not None:  # one sentence naming the limit hit and when, no traceback
        failure = failure.replace("raise `max_steps` of `spineid.simulate`", "raise `max_steps` "
                                  "of `spineid.whiplash_study` (`spineid whiplash --max-steps`)")
        raise ValueError(f"the whiplash simulation failed: {failure}")
    head, head_velocity = jax.vmap(lambda q, qdot: jax.jvp(chain.observe, (q,), (qdot,)))(
        check.q, check.qdot)
    forces = jax.vmap(chain.ligament_forces)(check.ts, check.q, check.qdot)
    # Potential energy in the base frame: the same springs and gravity, base held at the start.
    potential = jax.vmap(lambda q: chain.potential_energy(0.0, q))(check.q)
    return WhiplashStudy(
        chain=chain, check=check, head=np.asarray(head), head_velocity=np.asarray(head_velocity),
        head_angle=np.asarray(check.q[:, -1]), ligament_forces=np.asarray(forces),
        joint_angles=np.asarray(jax.vmap(chain.joint_angles)(check.q)),
        potential_energy=np.asarray(potential - potential[0]), seconds=seconds)


@eqx.filter_jit
def _whiplash_window(chain, ts, state, solver, rtol, atol, max_steps):
    # One window of `whiplash_study` (`solve_energy_work`, not throwing) as a tuple of arrays,
    # the diffrax result as its index in `_RESULTS`, so that `stored_call` keeps its program
    # for the next process (its tracing: 15-23 s on 2 cores; loaded: under a second).
    ys, result, n_steps = solve_energy_work(chain, ts, state, solver, rtol, atol, max_steps,
                                            diffrax.RecursiveCheckpointAdjoint(), False)
    index = len(_RESULTS) - 1
    for i, name in reversed(list(enumerate(_RESULTS[:-1]))):
        index = jnp.where(result == getattr(diffrax.RESULTS, name), i, index)
    return (*ys, index, n_steps)


def _stored_window(chain, ts, state, solver, rtol, atol, max_steps):
    # `_whiplash_window` from its stored program (`stored_call`), the diffrax result rebuilt.
    *ys, index, n_steps = stored_call(_whiplash_window, chain, ts, state, solver, float(rtol),
                                      float(atol), int(max_steps))
    return tuple(ys), getattr(diffrax.RESULTS, _RESULTS[int(index)]), n_steps


def peak_force_sensitivity(chain: HeadNeckChain, parameters: tuple[Parameter, ...],
                           t_end: float = 0.4, n_samples: int = 401, rtol: float = 1e-7
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivity of the peak ligament tension (over all levels, both sides, 0-`t_end` s) to
    the `parameters`: returns `(peak force (N), elasticities (p,))`, the elasticity of
    parameter `p_j` being `(p_j / F) dF/dp_j` (percent change of the peak per percent change of
    the parameter), by forward-mode differentiation through the simulation. The peak is a
    maximum over samples: its derivative is that of the sample where it is reached. Raises
    `ValueError` where the integration fails."""
    # energy_work_check (traced with these concrete times) refuses a run shorter than the pulse.
    ts = jnp.linspace(0.0, t_end, n_samples)
    values = jnp.stack([p.get(chain) for p in parameters])

    def peak(theta):
        model = apply_values(chain, parameters, theta)
        check = energy_work_check(model, ts, DEFAULT_SOLVER, rtol, rtol * 1e-2,
                                  adjoint=diffrax.ForwardMode(), throw=False)
        return jnp.max(jax.vmap(model.ligament_forces)(check.ts, check.q, check.qdot))

    gradient, force = jax.jacfwd(lambda theta: (peak(theta),) * 2, has_aux=True)(values)
    if not (np.isfinite(force) and np.all(np.isfinite(gradient))):  # a failed integration
        raise ValueError(f"the sensitivity run (0 to {t_end:g} s, rtol {rtol:g}) failed: the "
                         "integration did not reach its end or its state became non-finite; "
                         "check the model's parameters")
    return np.asarray(force), np.asarray(gradient * values / force)
