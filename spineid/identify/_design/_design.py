"""Experiment design: which of the experiments a rig can run (load cases, each a model with its
loads and initial pose, sampled at chosen times) tell the most about the free parameters.

Each candidate experiment `c` contributes the Fisher information `F_c = J_c^T J_c` of its
noise-weighted sensitivities `J_c = d(prediction / sigma) / d theta`, computed exactly by
forward-mode differentiation through the ODE at the nominal parameters (the model's values).
Independent experiments add: a design `S` has `F_S = sum_{c in S} F_c`, and its Cramer-Rao
covariance is `F_S^-1` (Fisher 1925; Fedorov, Theory of Optimal Experiments, 1972, ch. 2).
The criteria compare designs on the information in relative units, `M = D F D` with `D`
the nominal magnitudes (`D_ii = |theta_i|`; for a parameter whose nominal value is zero, such as
a coupling term, the magnitude that gives its column of sensitivities over all candidates the
median size of the others'):

- `"D"`: maximise `log det M` (the volume of the confidence ellipsoid, in relative units);
- `"A"`: minimise `trace M^-1` (the sum of the squared relative standard errors);
- `"E"`: maximise the smallest eigenvalue of `M` (the worst-determined direction);
- a sequence of parameter names: minimise the sum of their squared relative standard errors.

The search over the candidates is greedy (add the best candidate while the budget allows), then
exchanges (swap a chosen candidate for another while the criterion improves): Fedorov's
exchange algorithm for a discrete design space. What no selection can determine is the null
space of the information of all candidates together: it is reported, since no design among
these candidates will ever identify it.
"""

import dataclasses
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...io._design_file import LIMITS
from ...io._measurements import Measurement
from ...io._model_file import ModelFile
from ...models._loads import PLANAR_LOAD_COMPONENTS, SinusoidalLoad
from ...models._spatial_pair import SPATIAL_LOAD_COMPONENTS
from ...simulation._simulate import simulate
from .._common._analysis import value_scales
from .._common._result_family import json_number
from .._common._uncertainty import fisher_analysis, RANK_RTOL
from .._trajectory._objective import measured_sensitivities, resolved_scales
from .._trajectory._problem import FitProblem
from ._correlation import check_sampling, checked_correlation, design_sensitivities
from ._linearity import check_linearity, LinearityCheck

CRITERIA = ("D", "A", "E")
"""Named design criteria (module docstring); a sequence of parameter names asks for their
Cramer-Rao errors."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """An experiment the rig can run: `name`, `model` (the specimen's model with this
    experiment's loads and initial pose, built in Python or a `ModelFile`: the same free
    parameters and nominal values as every other candidate), `times` (s, `(k,)`, the
    sampling, from 0; its span is the experiment's duration), `channels` (the model's observed
    channels this experiment measures, e.g. `("theta",)` for a rig that tracks only the
    rotation; default every one): candidates that differ only in `channels` ask which
    measurement to add or keep."""

    name: str
    model: object
    times: np.ndarray
    channels: tuple[str, ...] | None = None

    def __post_init__(self):
        times = np.asarray(self.times, dtype=float)
        if times.ndim != 1 or times.size < 3 or not np.all(np.isfinite(times)) \
                or np.any(np.diff(times) <= 0) or times[0] < 0:
            raise ValueError(f"candidate {self.name!r}: times must be at least 3 increasing "
                             "finite sample times (s) from 0 or later")
        object.__setattr__(self, "times", times)
        if self.channels is not None:
            channels = (self.channels,) if isinstance(self.channels, str) \
                else tuple(self.channels)
            observed = tuple(self.system.observable_names)
            unknown = [c for c in channels if c not in observed]
            if not channels or unknown or len(set(channels)) != len(channels):
                raise ValueError(f"candidate {self.name!r}: channels {list(channels)}: expected "
                                 f"distinct names among the model's observed channels "
                                 f"{list(observed)}" + (f"; unknown {unknown}" if unknown
                                                        else ""))
            object.__setattr__(self, "channels", channels)

    @property
    def measured(self) -> tuple[str, ...]:
        """The channels this experiment measures (`channels`, or all the model observes)."""
        return tuple(self.system.observable_names) if self.channels is None else self.channels

    @property
    def system(self):
        """The model to simulate (`model`, or a `ModelFile`'s model)."""
        return self.model.model if isinstance(self.model, ModelFile) else self.model

    @property
    def duration(self) -> float:
        """Length of the experiment (s): the span of `times`."""
        return float(self.times[-1] - self.times[0])


def _load_names(model) -> tuple[str, ...]:
    names = getattr(model, "load_components", None)
    if names is not None:
        return tuple(names)
    size = sum(np.size(load.value(0.0)) for load in model.loads[:1]) if model.loads else 0
    return {3: PLANAR_LOAD_COMPONENTS, 6: SPATIAL_LOAD_COMPONENTS}.get(size, ())


def peak_loads(candidate: Candidate) -> tuple[float, float]:
    """`(force, moment)`: the largest absolute force component (N) and moment component (N m)
    the candidate's loads reach over its span (components named `F...` and `M...`), looked
    up on a grid ten times finer than its sampling."""
    model = candidate.system
    if not getattr(model, "loads", ()):
        return 0.0, 0.0
    names = _load_names(model)
    grid = np.linspace(candidate.times[0], candidate.times[-1], 10 * candidate.times.size)
    values = np.asarray(jax.vmap(lambda t: sum(load.value(t) for load in model.loads))(
        jnp.asarray(grid)))
    force = [i for i, n in enumerate(names) if n.startswith("F")]
    moment = [i for i, n in enumerate(names) if n.startswith("M")]
    peak = [float(np.max(np.abs(values[:, index]))) if index else 0.0
            for index in (force, moment)]
    return peak[0], peak[1]


BANDWIDTH_POWER = 0.99
"""The share of a tabulated load's power (its mean removed) below the frequency that
`peak_frequency` reports for it."""


def peak_frequency(candidate: Candidate) -> float:
    """The highest frequency (Hz) of the candidate's loads: for a sinusoidal load the largest
    `frequency` of its terms with a nonzero amplitude; for any other load (a table) the
    frequency below which `BANDWIDTH_POWER` of its power lies (the load's mean removed, a
    discrete Fourier transform on a grid ten times finer than the candidate's sampling).
    0 without loads."""
    model = candidate.system
    highest = 0.0
    for load in getattr(model, "loads", ()):
        if isinstance(load, SinusoidalLoad):
            driven = np.asarray(load.amplitude) != 0
            if np.any(driven):
                highest = max(highest, float(np.max(np.asarray(load.frequency)[driven])))
            continue
        grid = np.linspace(candidate.times[0], candidate.times[-1], 10 * candidate.times.size)
        values = np.asarray(jax.vmap(load.value)(jnp.asarray(grid))).reshape(grid.size, -1)
        power = np.sum(np.abs(np.fft.rfft(values - values.mean(axis=0), axis=0)) ** 2, axis=1)
        if power.sum() > 0:
            frequencies = np.fft.rfftfreq(grid.size, grid[1] - grid[0])
            cumulative = np.cumsum(power) / power.sum()
            highest = max(highest, float(frequencies[np.searchsorted(cumulative,
                                                                     BANDWIDTH_POWER)]))
    return highest


def _check_limits(candidates, limits) -> None:
    unknown = set(limits) - set(LIMITS)
    if unknown:
        raise ValueError(f"limits {sorted(unknown)}: expected 'force' (N), 'moment' (N m), "
                         "'frequency' (Hz), 'duration' (s, of each experiment), 'total' (s, of "
                         "the design) or 'motion' ({channel: largest change}, SI)")
    check_limit_values(limits, candidates[0].system if candidates else None)
    for candidate in candidates:
        force, moment = peak_loads(candidate)
        reached = {"force": force, "moment": moment, "duration": candidate.duration}
        if "frequency" in limits:
            reached["frequency"] = peak_frequency(candidate)
        for key, limit in limits.items():
            if key not in ("total", "motion") and reached[key] > limit * (1 + 1e-12):
                units = LIMITS[key]
                raise ValueError(f"candidate {candidate.name!r}: its {key} reaches "
                                 f"{reached[key]:.4g} {units}, beyond the rig's limit "
                                 f"{limit:.4g} {units}; leave it out or scale it down")


def check_limit_values(limits: dict, model) -> None:
    """Refuses (`ValueError`) a limit that is not a positive number, or a `"motion"` limit
    `check_motion_limits` refuses (`model`: the experiments' model, for its channels)."""
    for key, value in limits.items():
        if key == "motion":
            check_motion_limits(value, model)
        elif isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"limits[{key!r}] = {value!r}: expected a positive number")


def check_motion_limits(motion, model) -> None:
    """Refuses (`ValueError`) a `limits["motion"]` that is not a non-empty `{channel: positive
    number}` of channels `model` observes."""
    if not isinstance(motion, dict) or not motion:
        raise ValueError(f"limits['motion'] = {motion!r}: expected {{channel: largest change "
                         "from the first sample}} of the model's observed channels (SI)")
    observed = tuple(model.observable_names) if model is not None else ()
    unknown = [c for c in motion if model is not None and c not in observed]
    if unknown:
        raise ValueError(f"limits['motion']: channels {unknown} are not observed by the model "
                         f"(it observes {list(observed)})")
    for channel, value in motion.items():
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"limits['motion'][{channel!r}] = {value!r}: expected a positive "
                             "number (the channel's largest change, SI)")


def motion_beyond(name: str, model, observed: np.ndarray, motion: dict) -> str | None:
    """Why the noise-free observations `observed` (`(k, c)`, the model's channels) of the
    experiment `name` leave the joint's safe range `motion` (`{channel: largest change}`, SI:
    each channel's largest absolute change from its value at the first sample), or `None`
    when they keep within it (or `motion` is empty)."""
    channels = tuple(model.observable_names)
    units = dict(zip(channels, getattr(model, "observable_units", ("",) * len(channels))))
    for channel, limit in motion.items():
        column = observed[:, channels.index(channel)]
        peak = float(np.max(np.abs(column - column[0])))
        if not peak <= limit * (1 + 1e-12):
            return (f"{name}: its {channel} moves {peak:.4g} {units[channel]} from its start, "
                    f"beyond the joint's safe range {limit:.4g} {units[channel]} (simulated "
                    "at the nominal parameter values)")
    return None


def candidate_problem(candidate: Candidate, free: Sequence[str], noise: dict[str, float]
                      ) -> FitProblem:
    """The one-experiment `FitProblem` of `candidate`: its data the noise-free simulation at
    the nominal parameters, every channel the model observes, with `noise` (SI) for the
    channels it measures (the others carry a placeholder: their rows are left out of the
    information). Raises `ValueError` naming the candidate."""
    model = candidate.system
    channels = tuple(model.observable_names)
    missing = [c for c in candidate.measured if c not in noise]
    if missing:
        raise ValueError(f"candidate {candidate.name!r}: noise: give the standard deviation of "
                         f"the measured channel(s) {missing}")
    simulation = simulate(model, candidate.times)
    observed = np.asarray(jax.vmap(model.observe)(simulation.q))
    measurement = Measurement(candidate.times, observed, channels,
                              source=f"candidate {candidate.name!r}")
    every = {c: noise.get(c, 1.0) for c in channels}
    every.update({c: v for c, v in noise.items() if c not in channels})  # (refused by name)
    try:
        return FitProblem(candidate.model, measurement, free, every)
    except ValueError as error:
        raise ValueError(f"candidate {candidate.name!r}: {error}") from None


def measured_data(problem: FitProblem, measured: Sequence[str] | None) -> Measurement:
    """The data of a candidate's one-experiment `problem` (`candidate_problem`) as the
    experiment records them: `NaN` in the channels not in `measured` (values not measured;
    `None`: every channel measured)."""
    measurement = problem.measurements[0]
    if measured is None:
        return measurement
    kept = np.isin(problem.channels, list(measured))
    return dataclasses.replace(measurement, values=np.where(kept, measurement.values, np.nan))


def candidate_sensitivities(candidate: Candidate, free: Sequence[str], noise: dict[str, float]
                            ) -> tuple[FitProblem, np.ndarray]:
    """`(problem, J)`: the one-experiment problem of `candidate` (`candidate_problem`) and the
    noise-weighted sensitivity matrix `J` of the channels it measures (`(k c, p)`, 1/SI of
    each parameter: d(prediction/sigma)/d theta, forward mode through the ODE; rows sample
    by sample, channels in the model's order). `noise` needs only the measured channels."""
    problem = candidate_problem(candidate, free, noise)
    return problem, measured_sensitivities(problem, candidate.measured, problem.start)


def _reason(problem: FitProblem, direction: dict) -> str:
    """Why the parameter change `direction` (`{name: coefficient}`, the largest 1) is seen by
    no candidate: from the model where it says (vector springs act on the motion only through
    the moments of their stiffness measure), else from the direction itself (one parameter
    that acts in no candidate; two that act as one; several that compensate each other)."""
    involved = [p for p in problem.parameters if p.name in direction]
    elements = getattr(problem.model, "elements", ())
    if involved and all(p.element is not None and p.field == "stiffness"
                        and type(elements[p.element]).__name__ == "VectorSprings"
                        for p in involved):
        return ("the vector springs act on the motion only through the moments of their "
                "stiffness measure (sum k, sum k s, sum k s s^T over the spring points s; Liu "
                "2001 eqs 2-6 to 2-29): no load protocol separates springs beyond those moments")
    names = sorted(direction, key=lambda n: -abs(direction[n]))
    if len(names) == 1:
        return (f"{names[0]} changes no candidate's predictions: it does not act in these "
                "experiments (a ligament that stays slack, a contact that never closes, a "
                "motion never excited); a load case that engages it is needed")
    if len(names) == 2:
        a, b = names
        return (f"{a} and {b} act as one in every candidate (changing {a} by "
                f"{direction[a]:+.3g} and {b} by {direction[b]:+.3g} times any amount changes "
                "no prediction, as two springs at one place): only a combination of them is "
                "determined; an experiment that loads them differently, or a measurement of "
                "one of them, separates them")
    return (f"{len(names)} parameters ({', '.join(names[:4])}"
            + (", ..." if len(names) > 4 else "") + ") compensate each other exactly in every "
            "candidate along one direction: these experiments see only combinations of them")


def _score(information: np.ndarray, criterion, targets: np.ndarray | None,
           ridge: float) -> float:
    # Larger is better. The ridge keeps a design that does not yet determine everything
    # comparable while the greedy search builds it up; it is far below any determined
    # direction (1e-9 of the mean eigenvalue of all candidates' information).
    m = information + ridge * np.eye(len(information))
    if criterion == "D":
        return float(np.linalg.slogdet(m)[1])
    if criterion == "E":
        return float(np.linalg.eigvalsh(m)[0])
    inverse = np.linalg.inv(m)
    diagonal = np.diag(inverse)
    return -float(np.sum(diagonal if targets is None else diagonal[targets]))


def shown_error(error: float, value: float) -> str:
    """A predicted standard error with its size relative to the nominal value, or "not
    identifiable" where it is not finite (the summaries of designs and protocols)."""
    return f"{error:.3g} ({abs(error / value):.1%})" if np.isfinite(error) \
        else "not identifiable"


@dataclasses.dataclass
class Design:
    """The outcome of `design`.

    Fields: `names` (free parameters), `values` (nominal, SI), `criterion`, `chosen`
    (candidate names, in the order found), `stderr` and `baseline_stderr` (`(p,)`, SI:
    predicted Cramer-Rao errors with the design and with `baseline`, NaN where not
    individually identifiable), `baseline` (candidate names, or `()`), `identifiable` and
    `baseline_identifiable` (`(p,)` bool), `never` (what no selection of the candidates
    determines: each a parameter change `{name: component}` (SI, largest component 1) that
    changes no candidate's prediction, a null vector of all candidates' information
    together), `duration` (s, the chosen experiments' total), `seconds`, `warnings`,
    `correlation` (channel -> the coefficients of its errors' autoregression; `{}`: white).

    Not a `spineid.AbstractResult`: a design fits nothing (no data, no cost, no verdict); its
    standard errors are predictions, which `spineid.validate_design` checks by fits.
    """

    names: list[str]
    values: np.ndarray
    criterion: object
    chosen: tuple[str, ...]
    stderr: np.ndarray
    baseline: tuple[str, ...]
    baseline_stderr: np.ndarray
    identifiable: np.ndarray
    baseline_identifiable: np.ndarray
    never: list[dict]
    duration: float
    seconds: float
    warnings: list[str]
    problems: dict = dataclasses.field(repr=False, default_factory=dict)
    measured: dict = dataclasses.field(repr=False, default_factory=dict)
    correlation: dict = dataclasses.field(default_factory=dict)

    def relative_stderr(self) -> np.ndarray:
        """`(p,)`: predicted standard errors over the nominal magnitudes."""
        return self.stderr / np.abs(self.values)

    def problem(self, **simulation) -> FitProblem:
        """The `FitProblem` of the chosen experiments together (one load case each, their data
        the noise-free simulations at the nominal values, `NaN` in the channels an experiment
        does not measure: `Candidate(..., channels=...)`): simulate noise on it and fit, to
        check the design (`spineid.validate_design`, `fit_batch`). `simulation`: the fits'
        `simulation_rtol`, `simulation_atol`, `simulation_max_steps` (`FitProblem`'s; looser
        tolerances make long validations cheaper while the integration error stays far below
        the noise: measured on the head-neck chain's three pulses, one noisy fit took 380 s at
        rtol 1e-5 and 500-530 s at 1e-6, against 13 minutes or more at the default 1e-8, the
        estimates at 1e-5 and 1e-6 within 0.01 standard errors of each other)."""
        chosen = [self.problems[name] for name in self.chosen]
        measurements = [measured_data(problem, self.measured.get(name))
                        for name, problem in zip(self.chosen, chosen)]
        return FitProblem(chosen[0].model_file or chosen[0].model, measurements,
                          self.names, chosen[0].noise, models=[p.model for p in chosen],
                          **simulation)

    def check_linearity(self, distance: float = 2.0, directions: int = 3
                        ) -> "LinearityCheck":
        """Whether the predicted standard errors hold over the estimates' own spread.

        The Cramer-Rao errors are those of the model linearised at the nominal values: the
        spread of fitted estimates follows them only where the sensitivities stay about the
        same within that spread (the curvature of a nonlinear model, Bates and Watts 1980,
        J R Stat Soc B 42:1-25). This recomputes the chosen experiments' information at the
        nominal values moved by `distance` predicted standard errors along the `directions`
        least-determined principal directions of the predicted covariance (in relative units,
        both ways: `2 directions` points, each one forward-mode solve of every chosen
        experiment), and compares each parameter's predicted standard error there with the
        nominal one, on the two sides of each direction: an error that changes the same way
        on both sides changes the realised spread of fitted estimates ("spread"); one that
        grows on one side and shrinks on the other skews their distribution ("skew", the
        spread about the prediction, a symmetric interval misplaced). Beyond
        `LINEARITY_TOLERANCE` either way, validate the design by fitting noisy simulations of
        it (`Design.problem`, `fit_batch`) before trusting it. (Measured on the 21 entries of
        a full bushing matrix from three force cases, experiments/design_and_posterior.py:
        the five entries whose error grows 1.21-1.23 times on both sides are the five that 50
        noisy fits realised farthest above the prediction, 1.18-1.26 times; the entries only
        skewed, up to 1.35 / 0.74, realised 1.05-1.09 times. With the loads doubled the check
        holds, within 0.83-1.17, yet 50 fits still realised 1.24-1.25 times on three entries:
        a check that holds is not a validation.)

        **Returns:** a `LinearityCheck`. Raises `ValueError` for a non-positive `distance` or
        a `directions` outside 1 ... the number of identifiable combinations.
        """
        return check_linearity(self, distance, directions)

    def summary(self) -> str:
        """What to run and what it will determine, as text."""
        criterion = (self.criterion if isinstance(self.criterion, str)
                     else "Cramer-Rao errors of " + ", ".join(self.criterion))
        lines = [f"design ({criterion}-optimal): run {', '.join(self.chosen)} "
                 f"({self.duration:.3g} s of testing; found in {self.seconds:.1f} s)"]
        head = f"{'parameter':30s} {'nominal':>11s} {'stderr':>22s}"
        if self.baseline:
            head += f" {'with ' + '+'.join(self.baseline):>24s}"
        lines.append(head)

        for i, name in enumerate(self.names):
            error = shown_error(self.stderr[i], self.values[i])
            row = f"{name:30s} {self.values[i]:11.4g} {error:>22s}"
            if self.baseline:
                row += f" {shown_error(self.baseline_stderr[i], self.values[i]):>24s}"
            lines.append(row)
        gained = [n for n, a, b in zip(self.names, self.identifiable, self.baseline_identifiable)
                  if a and not b]
        if self.baseline and gained:
            lines.append("identifiable with the design, not with the baseline: "
                         + ", ".join(gained))
        for direction in self.never[:2]:
            lines.append("no selection of these candidates sees the change "
                         + ", ".join(f"{n} by {c:+.3g} t" for n, c in direction.items())
                         + " (any t)")
        if len(self.never) > 2:
            lines.append(f"... and {len(self.never) - 2} more such directions (report: "
                         f"never_determined): the candidates together determine "
                         f"{len(self.names) - len(self.never)} combinations of the "
                         f"{len(self.names)} parameters")
        if self.correlation:
            lines.append("errors correlated as autoregressions: " + "; ".join(
                f"{c} phi {', '.join(f'{v:.3g}' for v in phi)}"
                for c, phi in self.correlation.items()))
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    def report(self) -> dict:
        """JSON-ready form."""
        return {"correlation": {c: list(phi) for c, phi in self.correlation.items()},
                "criterion": self.criterion if isinstance(self.criterion, str)
                else list(self.criterion),
                "chosen": list(self.chosen), "baseline": list(self.baseline),
                "duration": self.duration, "seconds": self.seconds,
                "parameters": [{"name": n, "nominal": float(v), "stderr": json_number(e),
                                "baseline_stderr": json_number(b),
                                "identifiable": bool(i)}
                               for n, v, e, b, i in zip(self.names, self.values, self.stderr,
                                                        self.baseline_stderr,
                                                        self.identifiable)],
                "never_determined": self.never, "warnings": list(self.warnings)}


def design(candidates: Sequence[Candidate], free: Sequence[str], noise: dict[str, float], *,
           criterion="D", budget: int = 1, baseline: Sequence[str] = (),
           limits: dict | None = None, correlation: dict | None = None) -> Design:
    """Choose `budget` of the `candidates` (distinct experiments) that best determine the
    `free` parameters under `noise` (per channel standard deviations, SI), by `criterion`
    (`"D"`, `"A"`, `"E"`, or a sequence of free parameter names whose Cramer-Rao errors to
    minimise; module docstring), within the rig's `limits`: `"force"` (N), `"moment"` (N m),
    `"frequency"` (Hz, of the loads: `peak_frequency`), `"duration"` (s) and `"motion"` (the
    joint's safe range: `{channel: largest change}` of observed channels from their values at
    the first sample, SI, on the candidate's simulation at the nominal values) that every
    candidate must keep within (one beyond them is refused), and `"total"` (s), the longest
    total test time of the chosen experiments. `baseline`: names of candidates that make the
    current protocol, whose predicted errors are reported beside the design's.
    `correlation`: the channels whose errors are correlated from sample to sample, `{channel:
    (phi_1, ..., phi_q)}` (a stationary autoregression per sample at the candidates' own
    sampling, which must be even; `noise` then its marginal standard deviation; a fit's
    `goodness_of_fit.noise_model` serves as it is where the fit's data were sampled at the same
    rate): the information is that of those errors (`spineid.identify._design._correlation`).

    Returns a `Design`. Candidates that cannot be simulated or do not excite the joint, a
    criterion naming a parameter that is not free, a candidate beyond the limits, repeated
    names, a budget beyond the candidates, or a `correlation` that is not a stationary
    autoregression of an observed channel (or one of candidates sampled unevenly) raise
    `ValueError` naming them.
    """
    started = time.perf_counter()
    candidates = list(candidates)
    if not candidates:
        raise ValueError("design: no candidate experiments given")
    labels = [c.name for c in candidates]
    if len(set(labels)) != len(labels):
        raise ValueError(f"design: candidate names repeat: {labels}")
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= len(
            candidates):
        raise ValueError(f"budget {budget!r}: expected a whole number of experiments from 1 "
                         f"to {len(candidates)} (the candidates)")
    baseline = [baseline] if isinstance(baseline, str) else list(baseline)
    unknown = [name for name in baseline if name not in labels]
    if unknown:
        raise ValueError(f"baseline {unknown}: not among the candidates {labels}")
    if isinstance(criterion, str):
        if criterion not in CRITERIA:
            raise ValueError(f"criterion {criterion!r}: expected one of {list(CRITERIA)} or "
                             "a list of free parameter names")
    elif not criterion or isinstance(criterion, (bytes, dict)):
        raise ValueError(f"criterion {criterion!r}: expected one of {list(CRITERIA)} or a "
                         "list of free parameter names")
    limits = dict(limits or {})
    _check_limits(candidates, limits)
    correlation = checked_correlation(correlation, candidates[0].system.observable_names)
    check_sampling(candidates, correlation)
    durations = {c.name: c.duration for c in candidates}
    total = limits.get("total", np.inf)
    if min(durations.values()) > total:
        raise ValueError(f"limits['total'] = {total} s: shorter than every candidate "
                         f"(the shortest lasts {min(durations.values()):.4g} s)")
    problems, jacobians = {}, {}
    for candidate in candidates:  # (every candidate simulated and checked first)
        problems[candidate.name] = candidate_problem(candidate, free, noise)
        beyond = motion_beyond(f"candidate {candidate.name!r}", candidate.system,
                               problems[candidate.name].measurements[0].values,
                               limits.get("motion", {}))
        if beyond:
            raise ValueError(beyond + "; leave it out or scale its loads down")
    for candidate in candidates:
        problem = problems[candidate.name]
        jacobians[candidate.name] = design_sensitivities(problem, candidate.measured,
                                                         problem.start, correlation)
    first = problems[labels[0]]
    names, values = first.names, first.start
    for label in labels[1:]:
        other = problems[label]
        if other.names != names or not np.allclose(other.start, values, rtol=1e-12, atol=0):
            raise ValueError(f"candidate {label!r}: its free parameters or their values differ "
                             f"from {labels[0]!r}'s ({other.names} = {other.start} against "
                             f"{names} = {values}); every candidate is the same specimen")
    targets = None
    if not isinstance(criterion, str):
        criterion = tuple(criterion)
        missing = [name for name in criterion if name not in names]
        if missing:
            raise ValueError(f"criterion names {missing}, which are not free parameters; the "
                             f"free parameters are {names}")
        targets = np.array([names.index(name) for name in criterion])
    # (A parameter whose nominal value is zero, a coupling term, is scaled by what all the
    # candidates together resolve of it: one SI unit made 11 of the 21 entries of a full
    # bushing matrix look unidentifiable from any protocol.)
    scales = resolved_scales(np.concatenate([jacobians[label] for label in labels]), values,
                             value_scales(values, first.transform()))
    information = {label: (jacobians[label] * scales).T @ (jacobians[label] * scales)
                   for label in labels}
    everything = sum(information.values())
    eigenvalues, vectors = np.linalg.eigh(everything)
    ridge = 1e-9 * max(float(np.trace(everything)) / len(names), 1e-300)

    def score(selection) -> float:
        if sum(durations[label] for label in selection) > total * (1 + 1e-12):
            return -np.inf
        return _score(sum(information[label] for label in selection), criterion, targets,
                      ridge)

    chosen: list[str] = []
    for _ in range(budget):  # greedy, while the total time allows
        scored = [(score(chosen + [label]), label) for label in labels if label not in chosen]
        best_score, best = max(scored)
        if best_score == -np.inf:
            break
        chosen.append(best)
    improved = True
    while improved:  # exchanges
        improved = False
        current = score(chosen)
        for i in range(len(chosen)):
            for label in labels:
                if label in chosen:
                    continue
                trial = chosen[:i] + [label] + chosen[i + 1:]
                if score(trial) > current + 1e-12 * abs(current):
                    chosen, current, improved = trial, score(trial), True
    warnings = []

    def predicted(selection):
        if not selection:
            return np.full(len(names), np.nan), np.zeros(len(names), bool)
        jacobian = np.concatenate([jacobians[label] for label in selection])
        covariance, identifiability = fisher_analysis(jacobian, values, scales, names)
        return np.sqrt(np.diag(covariance)), identifiability.identifiable

    stderr, identifiable = predicted(chosen)
    baseline_stderr, baseline_identifiable = predicted(list(baseline))
    tolerance = (RANK_RTOL ** 2) * eigenvalues[-1]
    never = []
    for k in np.flatnonzero(eigenvalues <= tolerance):
        # A null vector v of the scaled information is the parameter change D v (SI) that
        # changes no candidate's prediction (to first order).
        direction = vectors[:, k] * scales
        direction /= direction[np.argmax(np.abs(direction))]
        never.append({name: float(c) for name, c in zip(names, direction) if abs(c) > 1e-9})
    reasons = [_reason(first, direction) for direction in never]
    if never:
        warnings.append(
            f"{len(never)} direction(s) of parameter change are seen by no selection of these "
            "candidates (the null space of all their information together), so the parameters "
            "along them are determined by none: a different kind of experiment or another "
            "measured channel is needed, not more of these")
    warnings += sorted({reason for reason in reasons if reason})
    if not np.all(identifiable):
        left = [n for n, ok in zip(names, identifiable) if not ok]
        warnings.append(f"not identifiable with the design: {', '.join(left)}")
    if len(chosen) < budget:
        warnings.append(f"{len(chosen)} of the {budget} experiments asked for fit in the total "
                        f"test time of {total:g} s")
    duration = float(sum(durations[label] for label in chosen))
    return Design(names=list(names), values=np.asarray(values), criterion=criterion,
                  chosen=tuple(chosen), stderr=stderr, baseline=tuple(baseline),
                  baseline_stderr=baseline_stderr, identifiable=identifiable,
                  baseline_identifiable=baseline_identifiable, never=never,
                  duration=duration, seconds=time.perf_counter() - started,
                  warnings=warnings, problems=problems,
                  measured={c.name: c.channels for c in candidates}, correlation=correlation)
