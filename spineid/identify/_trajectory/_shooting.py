"""Multiple shooting for trajectory fits (Bock 1981; Bock and Plitt 1984).

Single shooting integrates each load case from its start over the whole record, so that a
stiffness a few times off puts the simulated oscillation out of phase with the data after a
few periods, and the cost, as a function of the stiffness, has a valley for every phase slip:
Levenberg-Marquardt stops in whichever it starts in. Multiple shooting cuts each record into
`M` segments at sample times `t_0 < t_{i_1} < ... < t_{i_{M-1}}` and makes the state
`x_j = (q, qdot)` at the start of every segment but the first an unknown of its own. Each
segment is integrated from its own state over its own short stretch, where the phase cannot
slip far, and continuity residuals

    c_j = (x(t_{i_{j+1}}; theta, x_j) - x_{j+1}) / s_c,        j = 0 .. M-2,

tie the segments together (`s_c`: the state change that one noise standard deviation of the
data stands for, divided by `continuity_weight`). The unknowns are
`z = (u, s_1, ..., s_{M-1})`, the solver's parameter coordinates and the segment states in
units of the motion's range, started at states read off the data (positions by a few
Gauss-Newton steps of `observe` from the simulated start, velocities from a local quadratic
fit of the data; only the channels measured at a sample move its state, and a value not
measured adds no residual). The problem is solved by spineid's Levenberg-Marquardt with a Jacobian built
block by block: each segment's sensitivities to `u` and to its own state only, one
forward-mode pass of `p + 2 n` directions over all segments at once (vmapped), not `p + 2 n
(M - 1)`. The estimate is then polished by single shooting from the parameters found, so
that the result, its standard errors and its verdict are those of the ordinary problem.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...elements._parameters import apply_values
from ...simulation._simulate import SimulationResult, simulate
from .._common._abstract_objective import AbstractObjective
from .._common._failure import guarded
from .._common._least_squares import levenberg_marquardt
from .._common._noise import measured_ranges
from ._objective import _Objective


class _Case(eqx.Module):
    """The segments of one load case: padded save times `ts` `(M, L)` (a segment saves from
    its start sample through the next segment's start sample, then pads beyond it), start
    times `t0` `(M,)`, data indices `index` `(M, L)`, `counted` `(M, L)` (the sample is a
    data residual of this segment), `end` `(M,)` (position of the next segment's start in a
    segment's saves), the states' offsets `(M, 2, n)` and scales `(2, n)`, and the
    continuity scale `(2, n)`."""

    ts: Float[Array, "M L"]
    t0: Float[Array, " M"]
    index: Array
    counted: Array
    end: Array
    offset: Float[Array, "M 2 n"]
    scale: Float[Array, "2 n"]
    continuity: Float[Array, "2 n"]

    @property
    def width(self) -> int:
        """The number of this case's state unknowns, `(M - 1) 2 n` (the first segment starts
        from the model's own initial state)."""
        segments, _, n = self.offset.shape
        return (segments - 1) * 2 * n


def segment_bounds(n_samples: int, segments: int) -> np.ndarray:
    """Sample indices where the `segments` segments of a record of `n_samples` start, and its
    last sample: `(segments + 1,)`, as even as the samples allow."""
    return np.round(np.linspace(0, n_samples - 1, segments + 1)).astype(int)


def counted_samples(bounds: np.ndarray, j: int) -> np.ndarray:
    """The samples whose residuals segment `j` counts: its own but the last, which the next
    segment counts, except in the last segment (the record's last sample)."""
    return np.arange(bounds[j], bounds[j + 1] + (j == len(bounds) - 2))


def n_states(objective: _Objective) -> int:
    """The length `2 n_dof` of the models' state `(q, qdot)`."""
    # (its shape only: traced abstractly, no program run)
    return 2 * jax.eval_shape(objective.models[0].initial_state)[0].shape[0]


def shortest_record(objective: _Objective) -> int:
    """Samples of the shortest load case."""
    return min(objective.lengths())


def segments_problem(objective: _Objective, segments: int, owner: str = "MultipleShooting"
                     ) -> str | None:
    """Why the records of `objective` cannot be cut into `segments` segments (a segment would
    hold fewer samples, or fewer values measured, than the model has states, so its start
    state could not be determined by its data), or `None` if they can."""
    states = n_states(objective)
    shortest = shortest_record(objective)
    per_segment = (shortest - 1) // segments + 1
    if per_segment >= states:
        if objective.complete():
            return None
        fewest = min(_measured_per_segment(objective, segments))
        if fewest >= states:
            return None
        return (f"{owner}(segments={segments}): a segment would hold only {fewest} values "
                f"measured (the others NaN), fewer than the {states} states (q and qdot) it "
                "starts from; use fewer segments, or single shooting")
    return (f"{owner}(segments={segments}): the shortest record has {shortest} samples, so a "
            f"segment would hold about {per_segment}, fewer than the {states} states (q and "
            f"qdot) the segment starts from; use at most {max((shortest - 1) // states, 1)} "
            "segments")


def _measured_per_segment(objective: _Objective, segments: int) -> list[int]:
    """Values measured in each segment of each load case (over its `counted_samples`)."""
    counts = []
    for k, present in zip(objective.lengths(), objective.present):
        measured = np.sum(np.asarray(present)[:k] > 0, axis=1)
        bounds = segment_bounds(k, segments)
        counts += [int(np.sum(measured[counted_samples(bounds, j)])) for j in range(segments)]
    return counts


def _data_rate(ts: np.ndarray, values: np.ndarray, i: int, half: int,
               present: np.ndarray) -> np.ndarray:
    """The time derivative of the data at sample `i`: slope of a least-squares quadratic over
    each channel's values measured (`present` `(k, c)`) within `half` samples of it, `(c,)`;
    NaN for a channel with fewer than 3 there."""
    window = slice(max(i - half, 0), min(i + half + 1, len(ts)))
    dt = ts[window] - ts[i]
    design = np.stack([np.ones_like(dt), dt, dt**2], axis=1)
    rate = np.full(values.shape[1], np.nan)
    for c in range(values.shape[1]):
        kept = present[window, c]
        if np.count_nonzero(kept) >= 3:
            rate[c] = np.linalg.lstsq(design[kept], values[window, c][kept], rcond=None)[0][1]
    return rate


@eqx.filter_jit
def _observe(model, q):
    return model.observe(q)


@eqx.filter_jit
def _observe_jacobian(model, q):
    return jax.jacfwd(model.observe)(q)


def _start_states(model, ts: np.ndarray, data: np.ndarray, bounds: np.ndarray,
                  rtol: float, atol: float, max_steps: int, present: np.ndarray,
                  solver=None) -> np.ndarray:
    """States `(M, 2, n)` at the segments' start samples: the simulation at the start
    parameters, moved onto the data (positions by Gauss-Newton on `observe`, velocities by the
    pseudo-inverse of its Jacobian applied to the data's rate), `(q, qdot)` per segment; only
    the channels measured there (`present` `(k, c)`) move it, in the least change that
    matches them (`solver`: the fit's, `simulate`'s default where `None`)."""
    simulation = simulate(model, jnp.asarray(ts), throw=False, t0=0.0, rtol=rtol, atol=atol,
                          max_steps=max_steps, solver=solver)
    q_all, qdot_all = np.asarray(simulation.q), np.asarray(simulation.qdot)
    rest_q, rest_qdot = (np.asarray(x) for x in model.initial_state())
    half = max(2, min(10, int(np.min(np.diff(bounds))) // 2))
    states = []
    for i in bounds[:-1]:
        q = q_all[i] if np.all(np.isfinite(q_all[i])) else rest_q
        qdot = qdot_all[i] if np.all(np.isfinite(qdot_all[i])) else rest_qdot
        rows = present[i]
        for _ in range(3 if rows.any() else 0):
            pinv = np.linalg.pinv(np.asarray(_observe_jacobian(model, jnp.asarray(q)))[rows])
            q = q + pinv @ (data[i] - np.asarray(_observe(model, jnp.asarray(q))))[rows]
        jacobian = np.asarray(_observe_jacobian(model, jnp.asarray(q)))
        rate = _data_rate(ts, data, i, half, present)
        seen = np.isfinite(rate)
        if seen.any():
            qdot = qdot + np.linalg.pinv(jacobian[seen]) @ (rate - jacobian @ qdot)[seen]
        states.append(np.stack([q, qdot]))
    return np.stack(states)


def _case_layout(objective: _Objective, case: int, segments: int, continuity_weight: float
                 ) -> _Case:
    k = objective.lengths()[case]  # (the records are padded beyond their data)
    ts = np.asarray(objective.ts[case])[:k]
    data = np.asarray(objective.data[case])[:k]
    present = np.asarray(objective.present[case])[:k] > 0  # (data are 0 where not measured)
    sigma = np.asarray(objective.sigma)
    model = objective.models[case]
    bounds = segment_bounds(len(ts), segments)
    length = int(np.max(np.diff(bounds))) + 1
    step = float(np.min(np.diff(ts))) if len(ts) > 1 else 1.0
    seg_ts, index, counted, end = [], [], [], []
    for j in range(segments):
        first, last = bounds[j], bounds[j + 1]
        own = np.arange(first, last + 1)
        pad = length - own.size
        seg_ts.append(np.concatenate([ts[own], ts[last] + step * np.arange(1, pad + 1)]))
        index.append(np.concatenate([own, np.full(pad, last)]))
        mask = np.zeros(length, bool)
        mask[:counted_samples(bounds, j).size] = True
        counted.append(mask)
        end.append(own.size - 1)
    offset = _start_states(model, ts, data, bounds, objective.rtol, objective.atol,
                           objective.max_steps, present, objective.solver)
    jacobian = np.asarray(_observe_jacobian(model, jnp.asarray(offset[0, 0])))
    pinv = np.abs(np.linalg.pinv(jacobian))
    motion = np.ptp(offset, axis=0)  # (2, n) range over the segment starts
    range_q = np.maximum(motion[0], pinv @ measured_ranges(np.where(present, data, np.nan)))
    range_q = np.where(range_q > 0, range_q, 1.0)
    duration = max(float(ts[-1] - ts[0]) / segments, step)
    range_qdot = np.maximum(motion[1], range_q / duration)
    noise_q = pinv @ sigma
    # A coordinate the channels do not see: a continuity tolerance of 0.1% of its range.
    noise_q = np.where(noise_q > 0, noise_q, 1e-3 * range_q)
    continuity = np.stack([noise_q, noise_q / duration]) / continuity_weight
    t0 = np.array([0.0] + [ts[b] for b in bounds[1:-1]])
    return _Case(ts=jnp.asarray(np.stack(seg_ts)), t0=jnp.asarray(t0),
                 index=jnp.asarray(np.stack(index)), counted=jnp.asarray(np.stack(counted)),
                 end=jnp.asarray(np.array(end)), offset=jnp.asarray(offset),
                 scale=jnp.asarray(np.stack([range_q, range_qdot])),
                 continuity=jnp.asarray(continuity))


class _ShootingObjective(AbstractObjective):
    """Residuals of the multiple-shooting problem (module docstring) as a function of
    `z = (u, states)`: per load case the data residuals of every segment (zeros where a saved
    point is not that segment's sample) and the continuity residuals."""

    base: _Objective
    cases: tuple

    @property
    def n_parameters(self) -> int:
        return self.base.transform.start.shape[0]

    def _states(self, z, case: int) -> Float[Array, "M 2 n"]:
        # The scaled segment states of `case` out of z, with zeros for the first segment.
        layout = self.cases[case]
        n_segments, _, n = layout.offset.shape
        first = self.n_parameters + sum(c.width for c in self.cases[:case])
        free = z[first:first + layout.width].reshape(n_segments - 1, 2, n)
        return jnp.concatenate([jnp.zeros((1, 2, n), z.dtype), free])

    def _segment(self, u, s, case: int, j):
        # Data residuals `(L c,)` and end state `(2, n)` of segment `j` of `case` (traced j).
        base, layout = self.base, self.cases[case]
        model = apply_values(base.models[case], base.parameters, base.transform.to_physical(u),
                             record=case)
        rest = jnp.stack(model.initial_state())
        x = jnp.where(j == 0, rest, layout.offset[j] + layout.scale * s)
        solution = simulate(model, layout.ts[j], adjoint=base.adjoint, throw=False,
                            t0=layout.t0[j], y0=(x[0], x[1]), max_steps=base.max_steps,
                            rtol=base.rtol, atol=base.atol, solver=base.solver)
        ok = solution.result == SimulationResult.successful
        predicted = jax.vmap(model.observe)(solution.q)
        data = base.data[case][layout.index[j]]
        residuals = jnp.where(layout.counted[j][:, None], (predicted - data) / base.sigma, 0.0)
        residuals = residuals * base.present[case][layout.index[j]]  # (0: not measured)
        end = jnp.stack([solution.q[layout.end[j]], solution.qdot[layout.end[j]]])
        return jnp.where(ok, residuals.ravel(), jnp.inf), jnp.where(ok, end, jnp.inf)

    def _continuity(self, ends, states, case: int):
        layout = self.cases[case]
        following = layout.offset[1:] + layout.scale * states[1:]
        return ((ends[:-1] - following) / layout.continuity).ravel()

    def __call__(self, z, args=None) -> Float[Array, " n"]:
        u = z[:self.n_parameters]
        parts = []
        for case, layout in enumerate(self.cases):
            states = self._states(z, case)
            segments = jnp.arange(layout.offset.shape[0])
            data, ends = jax.vmap(lambda s, j, c=case: self._segment(u, s, c, j))(states,
                                                                                    segments)
            parts += [data.ravel(), self._continuity(ends, states, case)]
        residuals = jnp.concatenate(parts)
        return guarded(residuals)

    def linearise(self, z, exact=None):
        """`(residuals, jacobian)` at `z`: each segment differentiated in forward mode with
        respect to `u` and its own state only, the blocks placed in the sparse pattern of the
        whole problem (module docstring). `exact` is ignored: the shooting phase takes every
        Jacobian at the simulation's tolerances (`levenberg_marquardt` without
        `inexact_jacobians`)."""
        p = self.n_parameters
        u = z[:p]
        residual_blocks, jacobian_blocks = [], []
        column = p
        for case, layout in enumerate(self.cases):
            n_segments, _, n = layout.offset.shape
            states = self._states(z, case)

            def one(s, j, case=case):
                def of(u_, s_):
                    data, end = self._segment(u_, s_, case, j)
                    return (data, end), (data, end)

                jac, values = jax.jacfwd(of, argnums=(0, 1), has_aux=True)(u, s)
                return values, jac

            (data, ends), ((d_u, d_s), (e_u, e_s)) = jax.vmap(one)(
                states, jnp.arange(n_segments))
            # d_u (M, Lc, p), d_s (M, Lc, 2, n), e_u (M, 2, n, p), e_s (M, 2, n, 2, n).
            # Segment j >= 1 owns state block j - 1; `own[j, b]` says so, `next_[j, b]` marks
            # the block of segment j + 1, which continuity residual j subtracts.
            m, k = n_segments, 2 * n
            own = jnp.eye(m, m - 1, k=-1, dtype=z.dtype)
            next_ = jnp.eye(m - 1, m - 1, dtype=z.dtype)
            rows_data = data.shape[1]
            data_states = jnp.einsum("jrs,jb->jrbs", d_s.reshape(m, rows_data, k), own)
            data_jacobian = jnp.concatenate(
                [d_u, data_states.reshape(m, rows_data, (m - 1) * k)], axis=2
            ).reshape(m * rows_data, -1)
            continuity = layout.continuity.ravel()
            scale = layout.scale.ravel()
            end_states = jnp.einsum("jrs,jb->jrbs", e_s[:-1].reshape(m - 1, k, k), own[:-1])
            following = jnp.einsum("jb,s,rs->jrbs", next_, scale, jnp.eye(k, dtype=z.dtype))
            link_jacobian = jnp.concatenate(
                [e_u[:-1].reshape(m - 1, k, p),
                 (end_states - following).reshape(m - 1, k, (m - 1) * k)], axis=2
            ) / continuity[None, :, None]
            link_jacobian = link_jacobian.reshape((m - 1) * k, -1)
            width = self.cases[case].width
            # Place this case's state columns after the previous cases'.
            total = p + sum(c.width for c in self.cases)
            for part in (data_jacobian, link_jacobian):
                full = jnp.zeros((part.shape[0], total), z.dtype)
                full = full.at[:, :p].set(part[:, :p])
                full = full.at[:, column:column + width].set(part[:, p:])
                jacobian_blocks.append(full)
            residual_blocks += [data.ravel(), self._continuity(ends, states, case)]
            column += width
        residuals = jnp.concatenate(residual_blocks)
        jacobian = jnp.concatenate(jacobian_blocks)
        finite = jnp.isfinite(residuals)
        return (guarded(residuals),
                jnp.where(finite[:, None] & jnp.isfinite(jacobian), jacobian, 0.0))


def shooting_objective(objective: _Objective, segments: int, continuity_weight: float
                       ) -> _ShootingObjective:
    """The multiple-shooting problem of a single-shooting `objective` (its models, data, noise
    weights, transform and tolerances), each load case cut into `segments` segments; a
    `ValueError` if a segment would be shorter than the model's state."""
    problem = segments_problem(objective, segments)
    if problem is not None:
        raise ValueError(problem)
    return _ShootingObjective(objective, tuple(
        _case_layout(objective, case, segments, continuity_weight)
        for case in range(len(objective.models))))


def shooting_start(objective: _ShootingObjective, u0) -> Float[Array, " P"]:
    """The unknowns `z` at the start: parameters `u0` and every segment state on its offset."""
    extra = sum(c.width for c in objective.cases)
    return jnp.concatenate([jnp.asarray(u0, dtype=float), jnp.zeros(extra)])


def solve_shooting(objective: _ShootingObjective, u0, *, max_steps: int, decrement_tol: float,
                   xtol: float, gtol: float, progress: bool = False, provisional: bool = False):
    """Levenberg-Marquardt on the multiple-shooting problem from parameters `u0`
    (unconstrained): `(u, converged, steps)`; `provisional`: the weights are a placeholder
    for a noise still to be estimated (`levenberg_marquardt`)."""
    solution = levenberg_marquardt(objective, shooting_start(objective, u0),
                                   max_steps=max_steps, decrement_tol=decrement_tol,
                                   xtol=xtol, gtol=gtol, progress=progress,
                                   linearise=objective.linearise,
                                   provisional=jnp.asarray(bool(provisional)))
    p = objective.n_parameters
    return np.asarray(solution.value[:p]), bool(solution.converged), int(solution.steps)
