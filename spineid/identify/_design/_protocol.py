"""Continuous experiment design: the loading protocol's numbers (amplitudes, frequencies,
phases, an initial pose) chosen by gradient ascent of a design criterion, differentiated
through the ODE.

`design` chooses among candidate experiments a rig can run; here (`ProtocolProblem`,
`optimise_protocol`) the experiment is a function `build(x) -> model` of a few named design variables `x` within bounds (the rig's limits), and
the criterion of the Fisher information (module `_design`: D, A, E or the Cramer-Rao errors of
named parameters, in relative units `M = D F D`) is maximised over `x`. The information
`F(x) = J(x)^T J(x)`, with `J(x) = d(prediction(theta, x) / sigma) / d theta` at the nominal
parameters, comes from forward-mode sensitivities through the ODE; its derivative with respect
to `x` from a second forward-mode pass over those (forward over forward: one tangent per design
variable), so the criterion and its gradient are exact to the ODE tolerance. The optimiser is
scipy's L-BFGS-B on the design variables scaled to [0, 1] within their bounds, from the start
and from the corners' midpoints of a small grid (the criterion has a local optimum per
resonance of the joint: a frequency started below one resonance stays there); with the joint's
safe range as a limit, scipy's SLSQP with that range as a constraint at every sample.
"""

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from ...elements._parameters import apply_values
from ...simulation._simulate import simulate
from .._common._analysis import value_scales
from .._common._result_family import json_number
from .._common._uncertainty import fisher_analysis
from .._trajectory._problem import FitProblem
from ._design import (
    candidate_problem, Candidate, check_limit_values, CRITERIA, measured_data, peak_frequency,
    peak_loads, shown_error,
)

GRID_PER_VARIABLE = 3
"""Starts of the gradient ascent per design variable (evenly inside the bounds), besides the
given start; at most `MAX_STARTS` in all."""

MAX_STARTS = 12


@dataclasses.dataclass
class Protocol:
    """The outcome of `optimise_protocol`.

    Fields: `variables` (`{name: value}` at the optimum), `start` (`{name: value}` given),
    `names` (free parameters), `values` (their nominal values, SI), `criterion`, `score`
    (the criterion at the optimum: log det M for D, minus the summed squared relative errors for
    A and named parameters, the smallest eigenvalue of M for E; larger is better),
    `start_score`, `stderr` and `start_stderr` (`(p,)`, SI, predicted Cramer-Rao errors at the
    optimum and at the start; NaN where not individually identifiable), `at_bound` (the
    variables that ended at a bound: the rig's limit is what holds the design back there),
    `peak_force` and `peak_moment` (N, N m, at the optimum), `evaluations`, `seconds`,
    `warnings`, `model` (the optimum's model, to simulate and fit), `peak_motion`
    (`{channel: largest change from the first sample}` at the optimum of the channels a
    motion limit bounds, SI), `source` (the `ProtocolProblem` it solves).

    Not a `spineid.AbstractResult`, for the reason `Design` is not: it predicts errors and fits
    nothing.
    """

    variables: dict
    start: dict
    names: list[str]
    values: np.ndarray
    criterion: object
    score: float
    start_score: float
    stderr: np.ndarray
    start_stderr: np.ndarray
    at_bound: list[str]
    peak_force: float
    peak_moment: float
    evaluations: int
    seconds: float
    warnings: list[str]
    model: object = dataclasses.field(repr=False, default=None)
    peak_motion: dict = dataclasses.field(default_factory=dict)
    source: object = dataclasses.field(repr=False, default=None)

    def problem(self, **simulation) -> FitProblem:
        """The `FitProblem` of the optimal protocol (its data the noise-free simulation at the
        nominal values, sampled at the problem's times, `NaN` in the channels not measured):
        simulate noise on it and fit, to check the design, as `Design.problem`.
        `simulation`: the fits' `simulation_rtol`, `simulation_atol`,
        `simulation_max_steps`."""
        if self.source is None:
            raise ValueError("Protocol.problem: this protocol does not carry the "
                             "ProtocolProblem it solves (made by optimise_protocol, it does)")
        source = self.source
        candidate = Candidate("optimum", self.model, source.times, source.channels)
        problem = candidate_problem(candidate, source.free, source.noise)
        return FitProblem(self.model, measured_data(problem, source.channels), problem.names,
                          problem.noise, **simulation)

    def _unit(self, channel: str) -> str:
        names = tuple(getattr(self.model, "observable_names", ()))
        units = tuple(getattr(self.model, "observable_units", ()))
        return units[names.index(channel)] if channel in names and units else ""

    def summary(self) -> str:
        """The optimal protocol and what it determines against the start, as text."""
        criterion = (self.criterion if isinstance(self.criterion, str)
                     else "Cramer-Rao errors of " + ", ".join(self.criterion))
        lines = [f"protocol ({criterion}-optimal, {self.evaluations} evaluations in "
                 f"{self.seconds:.1f} s): "
                 + ", ".join(f"{k} = {v:.4g} (start {self.start[k]:.4g})"
                             for k, v in self.variables.items()),
                 f"criterion {self.score:.5g} (start {self.start_score:.5g}); peak force "
                 f"{self.peak_force:.4g} N, peak moment {self.peak_moment:.4g} N m"
                 + "".join(f", {c} moves {v:.4g} {self._unit(c)}"
                           for c, v in self.peak_motion.items())]
        if self.at_bound:
            lines.append("at a bound (the rig's limit holds the design back): "
                         + ", ".join(self.at_bound))
        lines.append(f"{'parameter':30s} {'nominal':>11s} {'stderr':>22s} {'at the start':>22s}")

        for i, name in enumerate(self.names):
            lines.append(f"{name:30s} {self.values[i]:11.4g} "
                         f"{shown_error(self.stderr[i], self.values[i]):>22s} "
                         f"{shown_error(self.start_stderr[i], self.values[i]):>22s}")
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    def report(self) -> dict:
        """JSON-ready form."""
        return {"criterion": self.criterion if isinstance(self.criterion, str)
                else list(self.criterion),
                "variables": dict(self.variables), "start": dict(self.start),
                "score": self.score, "start_score": self.start_score,
                "at_bound": list(self.at_bound), "peak_force": self.peak_force,
                "peak_moment": self.peak_moment, "peak_motion": dict(self.peak_motion),
                "evaluations": self.evaluations,
                "seconds": self.seconds, "warnings": list(self.warnings),
                "parameters": [{"name": n, "nominal": float(v), "stderr": json_number(e),
                                "start_stderr": json_number(s)}
                               for n, v, e, s in zip(self.names, self.values, self.stderr,
                                                     self.start_stderr)]}


def _check_variables(variables: dict) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(variables, dict) or not variables:
        raise ValueError("variables: expected {name: (low, high, start)} with at least one "
                         "design variable")
    names, low, high, start = [], [], [], []
    for name, bounds in variables.items():
        try:
            a, b, s = (float(v) for v in bounds)
        except (TypeError, ValueError):
            raise ValueError(f"variables[{name!r}] = {bounds!r}: expected (low, high, start)"
                             ) from None
        if not (np.isfinite([a, b, s]).all() and a < b and a <= s <= b):
            raise ValueError(f"variables[{name!r}] = ({a:g}, {b:g}, {s:g}): expected finite "
                             "low < high with the start between them")
        names.append(str(name))
        low.append(a)
        high.append(b)
        start.append(s)
    return names, np.array(low), np.array(high), np.array(start)


class ProtocolProblem:
    """A continuous design problem (module docstring): the protocol `build(x) -> model` of named
    design variables within bounds, its sampling, the parameters to determine, the noise and
    the criterion. `optimise_protocol` solves it; `criterion(x)` evaluates it.

    **Arguments:**
    - `build`: `x -> model`, with `x` a dict `{name: scalar}` (JAX values: build with
      `eqx.tree_at` or arithmetic, not Python `float()`), returning the specimen's model
      under the protocol `x` (its nominal parameter values the same for every `x`).
    - `variables`: `{name: (low, high, start)}` (the bounds are the rig's: e.g. an amplitude
      up to the force limit, a frequency up to the actuator's bandwidth).
    - `times`: the sampling (s, `(k,)`, from 0).
    - `free`, `noise`: the parameters to determine and the per-channel noise (SI), as for
      `design`; `channels` the measured channels (default all the model observes).
    - `criterion`: `"D"`, `"A"`, `"E"` or a list of free parameter names.

    Bad variables, a criterion naming a parameter that is not free, a build that does not give
    a model, or noise missing for a measured channel raise `ValueError`.
    """

    def __init__(self, build: Callable[[dict], object], variables: dict, times,
                 free: Sequence[str], noise: dict[str, float], *, criterion="D",
                 channels: Sequence[str] | None = None):
        self.labels, self.low, self.high, self.x0 = _check_variables(variables)
        self.build = build
        self.times = np.asarray(times, dtype=float)
        if isinstance(criterion, str):
            if criterion not in CRITERIA:
                raise ValueError(f"criterion {criterion!r}: expected one of {list(CRITERIA)} "
                                 "or a list of free parameter names")
        else:
            criterion = tuple(criterion)
        self.criterion_name = criterion
        first = self.model_at(self.x0)
        if not hasattr(first, "observable_names"):
            raise ValueError(f"build returned a {type(first).__name__}; expected a model")
        # (The protocol at its start as a candidate: its sampling, channels and noise are
        # checked, and its problem gives the parameters and their nominal values, exactly as
        # `design` would.)
        candidate = Candidate("start", first, self.times, channels)
        observed = tuple(first.observable_names)
        problem = candidate_problem(candidate, free, noise)
        self.names, self.values = problem.names, problem.start
        self.channels = candidate.measured
        self.free, self.noise = free, dict(noise)
        targets = None
        if criterion not in CRITERIA:
            unknown = [n for n in criterion if n not in self.names]
            if unknown:
                raise ValueError(f"criterion names {unknown}, which are not free parameters; "
                                 f"the free parameters are {self.names}")
            targets = jnp.asarray([self.names.index(n) for n in criterion])
        kept = jnp.asarray([observed.index(c) for c in candidate.measured])
        sigma = jnp.asarray([noise[c] for c in candidate.measured])
        self.scales = value_scales(self.values, problem.transform())
        ts, parameters, values = jnp.asarray(self.times), problem.parameters, self.values

        def weighted_prediction(theta, x):
            model = apply_values(self.model_at(x), parameters, theta)
            solution = simulate(model, ts, adjoint=diffrax.ForwardMode(), throw=False, t0=0.0)
            return (jax.vmap(model.observe)(solution.q)[:, kept] / sigma).ravel()

        def sensitivities(x):
            # Relative sensitivities: d(prediction / sigma) / d(theta / |theta|).
            return jax.jacfwd(weighted_prediction)(jnp.asarray(values), x) * self.scales

        def score(x):
            jacobian = sensitivities(x)
            information = jacobian.T @ jacobian
            if criterion == "D":
                return jnp.linalg.slogdet(information)[1]
            if criterion == "E":
                return jnp.linalg.eigvalsh(information)[0]
            diagonal = jnp.diag(jnp.linalg.inv(information))
            return -jnp.sum(diagonal if targets is None else diagonal[targets])

        def observed(x):  # (the motion at the nominal values, for the joint's safe range)
            model = self.model_at(x)
            solution = simulate(model, ts, adjoint=diffrax.ForwardMode(), throw=False, t0=0.0)
            return jax.vmap(model.observe)(solution.q)

        def observed_with_value(x):  # (the motion twice: differentiated, and as it is)
            motion = observed(x)
            return motion, motion

        self._observed = jax.jit(observed)
        # (`(d observed / dx, observed)` from one forward-mode pass: one simulation traced.)
        self._observed_jacobian = jax.jit(jax.jacfwd(observed_with_value, has_aux=True))
        self._sensitivities = jax.jit(sensitivities)
        self._value_and_gradient = jax.jit(lambda x: (score(x), jax.jacfwd(score)(x)))

    def model_at(self, x) -> object:
        """The model under the protocol `x` (`(d,)` in the order of `variables`, or a dict)."""
        if isinstance(x, dict):
            x = [x[name] for name in self.labels]
        x = jnp.asarray(x, dtype=float)
        return self.build({name: x[i] for i, name in enumerate(self.labels)})

    def criterion(self, x) -> tuple[float, dict]:
        """`(value, gradient)` of the criterion at the protocol `x` (a dict `{name: value}`;
        larger is better): `gradient` `{name: d value / d x_name}`, exact through the ODE."""
        point = jnp.asarray([float(x[name]) for name in self.labels])
        value, gradient = self._value_and_gradient(point)
        return float(value), {n: float(g) for n, g in zip(self.labels, np.asarray(gradient))}

    def stderr(self, x) -> np.ndarray:
        """Predicted Cramer-Rao errors (SI, `(p,)`) under the protocol `x` (`(d,)`); NaN
        where a parameter is not individually identifiable."""
        jacobian = np.asarray(self._sensitivities(jnp.asarray(x, dtype=float))) / self.scales
        covariance, identifiability = fisher_analysis(jacobian, self.values, self.scales,
                                                      self.names)
        return np.where(identifiability.identifiable, np.sqrt(np.diag(covariance)), np.nan)


def optimise_protocol(problem: ProtocolProblem, *, limits: dict | None = None,
                      starts: int | None = None) -> Protocol:
    """The design variables within their bounds that maximise the problem's criterion, by
    L-BFGS-B on the variables scaled to [0, 1] with the exact gradient (module docstring).

    `limits`: `"force"` (N), `"moment"` (N m) and `"frequency"` (Hz, `peak_frequency`),
    checked at the optimum (a protocol whose loads exceed them is refused: bound the
    amplitudes and frequencies instead); `"motion"`, the joint's safe range `{channel: largest
    change from the first sample}` (SI, observed channels, simulated at the nominal values),
    a constraint of the ascent: with it the ascent is scipy's SLSQP with
    `((y_c(t) - y_c(0)) / limit_c)^2 <= 1` at every sample (exact gradients through the ODE;
    `limit_c` `MOTION_MARGIN` inside the limit), and the best protocol that keeps within the
    limit wins. `starts`: how many starts of the ascent
    (default: the given start and a grid of `GRID_PER_VARIABLE` per variable, at most
    `MAX_STARTS`). Returns a `Protocol`; raises `ValueError` for an unknown limit or where no
    start finds a protocol within the motion limit.
    """
    from scipy.optimize import minimize

    started = time.perf_counter()
    if not isinstance(problem, ProtocolProblem):
        raise ValueError(f"optimise_protocol: expected a ProtocolProblem, got "
                         f"{type(problem).__name__}")
    limits = dict(limits or {})
    unknown = set(limits) - {"force", "moment", "frequency", "motion"}
    if unknown:
        raise ValueError(f"limits {sorted(unknown)}: expected 'force' (N), 'moment' (N m), "
                         "'frequency' (Hz) or 'motion' ({channel: largest change}); "
                         "bound the design variables for the rest")
    check_limit_values(limits, problem.model_at(problem.x0))
    motion = limits.get("motion")
    labels, low, high, x0 = problem.labels, problem.low, problem.high, problem.x0
    span = high - low
    evaluations = [0]

    def negative(z):
        evaluations[0] += 1
        value, gradient = problem._value_and_gradient(jnp.asarray(low + span * z))
        value, gradient = float(value), np.asarray(gradient, dtype=float) * span
        if not np.isfinite(value) or not np.all(np.isfinite(gradient)):
            return 1e300, np.zeros_like(z)  # (a protocol the joint cannot be simulated under)
        return -value, -gradient

    grid = [(np.arange(GRID_PER_VARIABLE) + 0.5) / GRID_PER_VARIABLE] * len(labels)
    others = [np.array(p) for p in itertools.product(*grid)]
    count = min(MAX_STARTS, 1 + len(others)) if starts is None else starts
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"starts {starts!r}: expected a whole number >= 1")
    # The given start, then grid points spread evenly over the grid.
    chosen = np.unique(np.linspace(0, len(others) - 1, count - 1).round().astype(int)) \
        if count > 1 else []
    points = [(x0 - low) / span] + [others[i] for i in chosen]
    start_score = -negative(points[0])[0]
    bounds = [(0.0, 1.0)] * len(labels)
    best = None
    if motion is None:
        for point in points:
            found = minimize(negative, point, jac=True, method="L-BFGS-B", bounds=bounds)
            if best is None or found.fun < best.fun:
                best = found
    else:
        margins, margins_jacobian, reached = _motion_constraint(problem, motion, low, span)
        constraint = {"type": "ineq", "fun": margins, "jac": margins_jacobian}
        peaks = []
        for point in points:
            found = minimize(negative, point, jac=True, method="SLSQP", bounds=bounds,
                             constraints=[constraint])
            peaks.append(reached(np.clip(found.x, 0.0, 1.0)))
            within = all(peaks[-1][c] <= motion[c] for c in motion)
            if within and (best is None or found.fun < best.fun):
                best = found
        if best is None:
            least = {c: min(p[c] for p in peaks) for c in motion}
            raise ValueError(
                "no protocol within the variables' bounds that keeps the joint's motion within "
                f"its safe range was found from {len(points)} start(s) (the least change each "
                "channel reached, against its limit: "
                + ", ".join(f"{c} {v:.4g} / {motion[c]:.4g}" for c, v in least.items())
                + "); lower the amplitudes' bounds")
    x = low + span * np.clip(best.x, 0.0, 1.0)
    optimum = problem.model_at(x)
    warnings = []
    candidate = Candidate("optimum", optimum, problem.times)
    force, moment = peak_loads(candidate)
    reached_limits = {"force": (force, "N", "amplitudes"), "moment": (moment, "N m",
                                                                     "amplitudes")}
    if "frequency" in limits:
        reached_limits["frequency"] = (peak_frequency(candidate), "Hz", "frequencies")
    for key, (value, unit, what) in reached_limits.items():
        if key in limits and value > limits[key] * (1 + 1e-9):
            raise ValueError(f"the optimal protocol's {key} reaches {value:.4g} {unit}, "
                             f"beyond the rig's limit {limits[key]:.4g} {unit}: bound the "
                             f"{what} within it")
    peak_motion = {} if motion is None else reached(np.clip(best.x, 0.0, 1.0))
    stderr, start_stderr = problem.stderr(x), problem.stderr(x0)
    at_bound = [name for name, z in zip(labels, best.x) if z <= 1e-6 or z >= 1 - 1e-6]
    if not np.all(np.isfinite(stderr)):
        left = [n for n, e in zip(problem.names, stderr) if not np.isfinite(e)]
        warnings.append(f"not identifiable with the optimal protocol: {', '.join(left)}")
    return Protocol(variables={n: float(v) for n, v in zip(labels, x)},
                    start={n: float(v) for n, v in zip(labels, x0)}, names=list(problem.names),
                    values=np.asarray(problem.values), criterion=problem.criterion_name,
                    score=-float(best.fun), start_score=start_score, stderr=stderr,
                    start_stderr=start_stderr, at_bound=at_bound, peak_force=force,
                    peak_moment=moment, evaluations=evaluations[0],
                    seconds=time.perf_counter() - started, warnings=warnings, model=optimum,
                    peak_motion=peak_motion, source=problem)


MOTION_MARGIN = 1e-3
"""The search keeps the motion within this fraction below each limit: SLSQP ends up to a few
1e-5 (relative) beyond a constraint where the largest sample switches, and the protocol it
returns must keep within the limit itself."""


def _motion_constraint(problem: ProtocolProblem, motion: dict, low, span):
    """`(margins, jacobian, reached)` on the scaled variables `z` (`x = low + span z`):
    `margins(z)` = `1 - ((y_c(t) - y_c(0)) / limit_c)^2` at every sample and limited channel
    (`limit_c` `MOTION_MARGIN` below the channel's limit; `>= 0` within the safe range, -1
    where the joint cannot be simulated), its Jacobian, and
    `reached(z)` = `{channel: largest change from the first sample}`."""
    channels = tuple(problem.model_at(problem.x0).observable_names)
    index = np.array([channels.index(c) for c in motion])
    limit = np.array([float(motion[c]) for c in motion]) * (1.0 - MOTION_MARGIN)

    def changes(x, observed=None):
        y = np.asarray(problem._observed(x) if observed is None else observed)[:, index]
        return (y - y[0]) / limit

    def margins(z):
        out = (1.0 - changes(jnp.asarray(low + span * z)) ** 2).ravel()
        return np.where(np.isfinite(out), out, -1.0)

    def jacobian(z):
        x = jnp.asarray(low + span * z)
        dy, observed = problem._observed_jacobian(x)
        y = changes(x, observed)
        dy = np.asarray(dy)[:, index, :]
        dy = (dy - dy[:1]) / limit[:, None]
        out = (-2.0 * y[:, :, None] * dy * span).reshape(-1, len(span))
        return np.where(np.isfinite(out), out, 0.0)

    def reached(z):
        y = changes(jnp.asarray(low + span * z)) * limit
        return {c: float(np.max(np.abs(y[:, j]))) if np.all(np.isfinite(y[:, j])) else np.inf
                for j, c in enumerate(motion)}

    return margins, jacobian, reached
