"""Least-squares identification through the ODE solve: the problem, the solvers, the result.

The residuals are `r = (observe(simulate(model(theta))) - data) / sigma`, stacked over samples,
channels and load cases (Liu 2001, eq 2-24, with noise weighting). Levenberg-Marquardt gets its
Jacobian by forward-mode autodiff through diffrax; first-order methods (optax) use reverse mode.
"""

import dataclasses
import math
import pathlib
import time
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array, ArrayLike, Float

from ._io import ModelFile, load_model_file, read_trajectory
from ._least_squares import DECREMENT_TOL, levenberg_marquardt
from ._parameters import Parameter, Transform, apply_values, select_parameters
from ._planar_elements import VectorSprings
from ._simulate import DEFAULT_ATOL, DEFAULT_RTOL, SimulationResult, simulate
from ._uncertainty import Identifiability, fisher_analysis

SOLVERS = ("lm", "jaxopt-lm", "optimistix-lm", "adam", "lbfgs")
# Chosen by measurement (experiments/solver_comparison.py, 20 poor starts per spread):
# spineid's own Levenberg-Marquardt (`spineid._least_squares`: jaxopt's damping rule, one
# forward-mode pass per accepted step, a statistical stop) took median 3-9 steps and 0.17-0.89 s
# on the 4-axial-spring and 8-spring problems, against jaxopt's 8-16 steps and 0.42-1.79 s and
# optimistix's 18-32 steps and 0.81-3.33 s, with the same or better success. jaxopt's and
# optimistix's LM remain available (jaxopt is no longer maintained).
DEFAULT_SOLVER = "lm"
# Batches of fits (multi-start, fit_many) run as one vmap. There optimistix is used: vmapped,
# jaxopt's LM ran 100 fits of the 4-axial-spring benchmark in 122 s with some not converged,
# optimistix in 24 s, all converged (experiments/benchmark_fit.py, 2-core CPU).
BATCH_SOLVER = "optimistix-lm"
# A parameter closer to a bound than this fraction of its standard error counts as on it.
BOUND_STDERR_FRACTION = 0.05
# Residual given to samples of a trial point whose integration failed: finite, so that the
# solver sees a huge cost and backs off instead of receiving NaN.
FAILED_RESIDUAL = 1e8


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measured trajectory: `ts` (s, `(k,)`), `values` (`(k, c)`, SI) of the named `channels`."""

    ts: np.ndarray
    values: np.ndarray
    channels: tuple[str, ...]
    source: str = "<data>"

    @classmethod
    def from_csv(cls, path, channels: Sequence[str]) -> "Measurement":
        """Read a trajectory CSV (formats.md) with the given pose channels."""
        ts, values = read_trajectory(path, tuple(channels))
        return cls(ts, values, tuple(channels), str(path))


class FitProblem:
    """What to fit: a model, measured trajectories (one per load case) and the free parameters.

    **Arguments:**
    - `model_file`: a `ModelFile` (named parameters; the model's values of free parameters are
      the starting guess, the others stay fixed).
    - `measurements`: one `Measurement` per load case.
    - `free`: `--free` groups (`stiffness`, `damping`, `torsion`) or parameter names.
    - `noise`: per-channel measurement standard deviation (SI), e.g. `{"x": 5e-6, "y": 5e-6,
      "theta": 1.7e-4}`; `None` estimates it from the residuals.
    - `models`: optional model per load case (same parameters, e.g. other loads); default the
      file's model for every case.

    Misuse (missing channels, too few data, nothing exciting the joint, unknown groups) raises
    `ValueError` before anything is solved.
    """

    def __init__(
        self,
        model_file: ModelFile,
        measurements: Sequence[Measurement] | Measurement,
        free: Sequence[str],
        noise: dict[str, float] | None = None,
        models: Sequence | None = None,
    ):
        if isinstance(measurements, Measurement):
            measurements = [measurements]
        self.model_file = model_file
        self.measurements = tuple(measurements)
        self.models = tuple(models) if models is not None else (model_file.model,) * len(
            self.measurements
        )
        if len(self.models) != len(self.measurements):
            raise ValueError(f"{len(self.models)} models for {len(self.measurements)} measurements")
        self.parameters = select_parameters(model_file.parameters, free, model_file.source)
        self.channels = tuple(model_file.model.observable_names)
        self.start = np.array([float(p.get(self.models[0])) for p in self.parameters])
        self._check_data()
        self.noise = None if noise is None else check_noise(self.channels, noise)
        for model in self.models:
            _check_excitation(model, model_file.source)

    @classmethod
    def from_files(cls, model_path, data_paths, free, noise=None) -> "FitProblem":
        """Problem from a model file and one or more trajectory CSV files (one model)."""
        model_file = load_model_file(model_path)
        if isinstance(data_paths, (str, pathlib.Path)):
            data_paths = [data_paths]
        channels = model_file.model.observable_names
        return cls(model_file, [Measurement.from_csv(p, channels) for p in data_paths], free, noise)

    @property
    def names(self) -> list[str]:
        """Names of the free parameters, in solver order."""
        return [p.name for p in self.parameters]

    def transform(self) -> Transform:
        """The map between the free parameters and the solver's coordinates, 0 at the start."""
        return Transform.around(self.parameters, self.start, self.model_file.source)

    def channel_ranges(self) -> np.ndarray:
        """Peak-to-peak range of each measured channel over all load cases (SI), `(c,)`."""
        return channel_ranges(self.measurements)

    @property
    def n_data(self) -> int:
        """Number of scalar residuals (samples x channels x load cases)."""
        return sum(m.values.size for m in self.measurements)

    def _check_data(self) -> None:
        check_measurements(self.measurements, self.channels, len(self.parameters))


def check_measurements(measurements: Sequence[Measurement], channels: Sequence[str],
                       n_free: int) -> None:
    """Validate trajectories for a fit of `n_free` numbers: the model's `channels`, no sample
    before the motion starts (t = 0), at least 3 samples each and more values than `n_free`."""
    channels = tuple(channels)
    for measurement in measurements:
        if tuple(measurement.channels) != channels:
            raise ValueError(
                f"{measurement.source}: channels {list(measurement.channels)}; this model "
                f"is observed through {list(channels)}"
            )
        if measurement.ts[0] < 0:
            raise ValueError(
                f"{measurement.source}: first time {measurement.ts[0]:g} s is before the "
                f"motion starts (t = 0)"
            )
    n_data = sum(m.values.size for m in measurements)
    if n_data <= n_free or min(len(m.ts) for m in measurements) < 3:
        raise ValueError(
            f"{measurements[0].source}: {n_data} data values for {n_free} free "
            f"parameters: the data are shorter than the model needs (at least 3 samples "
            f"per trajectory and more values than free parameters)"
        )


def check_noise(channels: Sequence[str], noise: dict[str, float]) -> dict[str, float]:
    """Validate per-channel noise standard deviations (SI): one positive number per channel."""
    missing = [c for c in channels if c not in noise]
    unknown = [c for c in noise if c not in channels]
    if missing or unknown:
        raise ValueError(
            f"noise: give one standard deviation per channel {list(channels)}; "
            f"missing {missing}, unknown {unknown}"
        )
    for channel, sigma in noise.items():
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"noise: {channel}={sigma!r}: expected a positive number")
    return {c: float(noise[c]) for c in channels}


def _check_excitation(model, source: str) -> None:
    if not hasattr(model, "loads"):
        return  # driven otherwise (the head-neck chain by its base pulse): always excited
    loads_zero = all(
        not np.any(np.asarray(leaf))
        for load in model.loads
        for leaf in jax.tree_util.tree_leaves(
            load.amplitude if hasattr(load, "amplitude") else load.values
        )
    )
    start_pose = np.asarray(model.observe(model.initial_state()[0]))
    at_rest = np.allclose(start_pose, np.asarray(model.upper.reference_pose))
    no_gravity = not np.any(np.asarray(model.gravity))
    if loads_zero and at_rest and no_gravity:
        raise ValueError(
            f"{source}: nothing excites the joint: all loads are zero, there is no gravity and "
            f"the motion starts at rest in the reference pose, so the body never moves and the "
            f"data cannot determine any parameter. Add loads or an initial_pose."
        )


class _Objective(eqx.Module):
    """Noise-weighted residuals of all load cases, as a function of the parameters."""

    models: tuple
    ts: tuple
    data: tuple
    sigma: Float[Array, " c"]
    transform: Transform
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    adjoint: diffrax.AbstractAdjoint = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    rtol: float = eqx.field(static=True, default=DEFAULT_RTOL)
    atol: float = eqx.field(static=True, default=DEFAULT_ATOL)
    coarse_rtol: float = eqx.field(static=True, default=DEFAULT_RTOL)
    coarse_atol: float = eqx.field(static=True, default=DEFAULT_ATOL)

    def case_prediction(self, theta, case: int, exact=True) -> Float[Array, "k c"]:
        """Model output of load case `case` at physical parameters `theta` (inf if failed);
        `exact` (a boolean, may be traced) false integrates at the coarse tolerances."""
        model = apply_values(self.models[case], self.parameters, theta)
        if exact is True:
            rtol, atol = self.rtol, self.atol
        else:
            rtol = jnp.where(exact, self.rtol, self.coarse_rtol)
            atol = jnp.where(exact, self.atol, self.coarse_atol)
        solution = simulate(
            model, self.ts[case], adjoint=self.adjoint, throw=False, t0=0.0,
            max_steps=self.max_steps, rtol=rtol, atol=atol,
        )
        predicted = jax.vmap(model.observe)(solution.q)
        return jnp.where(solution.result == SimulationResult.successful, predicted, jnp.inf)

    def _weighted(self, predicted, case: int) -> Float[Array, " n"]:
        residual = ((predicted - self.data[case]) / self.sigma).ravel()
        return jnp.where(jnp.isfinite(residual), residual, FAILED_RESIDUAL)

    def case_residuals(self, theta, case: int) -> Float[Array, " n"]:
        """Noise-weighted residuals of one load case, flattened."""
        return self._weighted(self.case_prediction(theta, case), case)

    def residuals_and_predictions(self, theta, exact=True):
        """`(residuals, predictions per case)` at physical parameters, in one pass (`exact`:
        as in `case_prediction`)."""
        predictions = tuple(self.case_prediction(theta, i, exact)
                            for i in range(len(self.models)))
        residuals = jnp.concatenate([self._weighted(p, i) for i, p in enumerate(predictions)])
        return residuals, predictions

    def predictions_from(self, residuals: Float[ArrayLike, " n"]) -> list[np.ndarray]:
        """The model outputs per load case (`(k, c)` each, inf where the simulation failed)
        that produced these noise-weighted `residuals`: `data + sigma r`, no simulation."""
        residuals = np.asarray(residuals)
        sigma = np.asarray(self.sigma)
        predictions, first = [], 0
        for data in self.data:
            data = np.asarray(data)
            weighted = residuals[first:first + data.size].reshape(data.shape)
            first += data.size
            predictions.append(np.where(weighted == FAILED_RESIDUAL, np.inf,
                                        data + weighted * sigma))
        return predictions

    def physical_residuals(self, theta: Float[Array, " p"], exact=True) -> Float[Array, " n"]:
        """Residuals at physical parameter values `theta`, shape `(n_data,)`."""
        return self.residuals_and_predictions(theta, exact)[0]

    def at_precision(self, u: Float[Array, " p"], exact) -> Float[Array, " n"]:
        """Residuals at unconstrained coordinates `u`, integrated at the fit's tolerances where
        `exact`, at the coarse ones otherwise (`levenberg_marquardt(inexact_jacobians=True)`)."""
        return self.physical_residuals(self.transform.to_physical(u), exact)

    def __call__(self, u: Float[Array, " p"], args=None) -> Float[Array, " n"]:
        """Residuals at unconstrained coordinates `u` (the solver's `residuals(params, args)`)."""
        return self.physical_residuals(self.transform.to_physical(u))


def _objective(problem: FitProblem, sigma: np.ndarray, transform: Transform, adjoint, max_steps,
               rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, coarse_rtol=None, coarse_atol=None):
    return _Objective(
        models=problem.models,
        ts=tuple(jnp.asarray(m.ts) for m in problem.measurements),
        data=tuple(jnp.asarray(m.values) for m in problem.measurements),
        sigma=jnp.asarray(sigma),
        transform=transform,
        parameters=problem.parameters,
        adjoint=adjoint,
        max_steps=max_steps,
        rtol=rtol,
        atol=atol,
        coarse_rtol=rtol if coarse_rtol is None else coarse_rtol,
        coarse_atol=atol if coarse_atol is None else coarse_atol,
    )


def _progress_printer(enabled: bool):
    if not enabled:
        return False

    def show(**values):
        jax.debug.print(
            "  LM step {step}: cost {cost:.6e} (trial {trial:.6e})",
            step=values["num_steps"][1],
            cost=values["loss_last_accepted_step"][1],
            trial=values["loss_this_step"][1],
        )

    return show


@eqx.filter_jit
def _solve_lm(objective, u0, rtol, atol, max_steps, verbose):
    solver = optx.LevenbergMarquardt(rtol=rtol, atol=atol, verbose=verbose)
    solution = optx.least_squares(objective, solver, u0, max_steps=max_steps, throw=False)
    return solution.value, solution.result == optx.RESULTS.successful, solution.stats["num_steps"]


def _jaxopt_solver(objective, rtol, atol, max_steps):
    # With a materialised Jacobian jaxopt builds it by jax.jacfwd (forward mode, as diffrax's
    # ForwardMode needs); jaxopt 0.8.5 ignores a `jac_fun` given together with materialize_jac.
    return jaxopt.LevenbergMarquardt(
        residual_fun=objective, materialize_jac=True, solver="cholesky", maxiter=max_steps,
        stop_criterion="madsen-nielsen", xtol=rtol, gtol=atol, implicit_diff=False,
    )


@eqx.filter_jit
def _solve_jaxopt_lm(objective, u0, rtol, atol, max_steps):
    params, state = _jaxopt_solver(objective, rtol, atol, max_steps).run(u0)
    return params, state.iter_num < max_steps, state.iter_num


def _solve_jaxopt_lm_showing_progress(objective, u0, rtol, atol, max_steps):
    # Same iterations and stopping rule (Madsen-Nielsen) as `run`, one compiled update per
    # step, so that each step can be printed as it happens.
    solver = _jaxopt_solver(objective, rtol, atol, max_steps)
    update = jax.jit(solver.update)
    u, state = u0, jax.jit(solver.init_state)(u0)
    for step in range(1, max_steps + 1):
        u, state = update(u, state)
        print(f"  LM step {step}: cost {float(state.value):.6e}, damping "
              f"{float(state.damping_factor):.3g}", flush=True)
        small_gradient = float(jnp.max(jnp.abs(state.gradient))) <= atol
        small_step = float(jnp.linalg.norm(state.delta)) <= rtol * (
            float(jnp.linalg.norm(u)) - rtol
        )
        if small_gradient or small_step:
            return u, jnp.array(True), jnp.array(step)
    return u, jnp.array(False), jnp.array(max_steps)


@eqx.filter_jit
def _solve_optax(objective, u0, optimizer_name: str, learning_rate, max_steps,
                 batch_size=None, key=None):
    def loss(u):
        return 0.5 * jnp.sum(objective(u) ** 2)

    n_cases = len(objective.models)

    def minibatch_loss(u, step_key):
        # A random subset of the load cases, scaled to estimate the full cost without bias;
        # lax.cond simulates only the chosen cases.
        chosen = jax.random.permutation(step_key, n_cases)[:batch_size]
        mask = jnp.zeros(n_cases, dtype=bool).at[chosen].set(True)
        theta = objective.transform.to_physical(u)
        total = 0.0
        for case in range(n_cases):
            total = total + jax.lax.cond(
                mask[case],
                lambda th, c=case: 0.5 * jnp.sum(objective.case_residuals(th, c) ** 2),
                lambda th: jnp.zeros((), dtype=u.dtype),
                theta,
            )
        return total * n_cases / batch_size

    def stationary(value, grad):
        # First-order methods stop (or are judged converged) on a small gradient.
        return optax.tree.norm(grad) <= 1e-6 * (1.0 + value)

    if optimizer_name == "adam":
        optimizer = optax.adam(learning_rate)

        def step(carry, step_key):
            u, state = carry
            if batch_size is None:
                grad = jax.grad(loss)(u)
            else:
                grad = jax.grad(minibatch_loss)(u, step_key)
            updates, state = optimizer.update(grad, state, u)
            return (optax.apply_updates(u, updates), state), None

        keys = jax.random.split(jax.random.PRNGKey(0) if key is None else key, max_steps)
        (u, _), _ = jax.lax.scan(step, (u0, optimizer.init(u0)), keys)
        value, grad = jax.value_and_grad(loss)(u)
        return u, stationary(value, grad), jnp.array(max_steps)
    optimizer = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(loss)

    def body(carry):
        u, state, count, _ = carry
        value, grad = value_and_grad(u, state=state)
        updates, state = optimizer.update(grad, state, u, value=value, grad=grad, value_fn=loss)
        return optax.apply_updates(u, updates), state, count + 1, stationary(value, grad)

    def cond(carry):
        return (carry[2] < max_steps) & ~carry[3]

    u, _, count, small = jax.lax.while_loop(
        cond, body, (u0, optimizer.init(u0), jnp.array(0), jnp.array(False))
    )
    return u, small, count


@dataclasses.dataclass
class FitResult:
    """The outcome of `fit`, explaining itself.

    Fields: `names`, `units`, `start`, `values` (SI), `stderr` (Cramer-Rao standard errors, NaN
    where a parameter is not individually identifiable or sits on a bound), `at_bound`,
    `covariance`, `correlation`, `cost` (half the sum of squared noise-weighted residuals),
    `n_data`, `converged`, `message`, `n_steps`, `solver`, `start_costs` (final cost from each
    start), `noise` (per channel) and `noise_estimated`, `identifiability`, `moments` (identifiable
    summaries of a vector-spring measure, with standard errors), `predictions` (per load case,
    `(k, c)`), `measurements`, `warnings`, `seconds`.
    """

    names: list[str]
    units: list[str]
    start: np.ndarray
    values: np.ndarray
    stderr: np.ndarray
    at_bound: np.ndarray
    covariance: np.ndarray
    correlation: np.ndarray
    cost: float
    n_data: int
    converged: bool
    message: str
    n_steps: int
    solver: str
    start_costs: list[float]
    noise: dict[str, float]
    noise_estimated: bool
    identifiability: Identifiability
    moments: dict
    predictions: list[np.ndarray]
    measurements: tuple[Measurement, ...]
    warnings: list[str]
    seconds: float

    def fitted_values(self) -> dict[str, float]:
        """Free parameter name -> fitted value (SI)."""
        return {name: float(v) for name, v in zip(self.names, self.values)}

    def residuals(self) -> list[np.ndarray]:
        """Raw residuals `data - fit` per load case, `(k, c)` (SI)."""
        return [m.values - p for m, p in zip(self.measurements, self.predictions)]

    def report(self) -> dict:
        """JSON-ready report (formats.md `report.json`)."""

        def number(x):
            return None if not np.isfinite(x) else float(x)

        parameters = []
        for i, name in enumerate(self.names):
            entry = {
                "name": name, "value": float(self.values[i]), "stderr": number(self.stderr[i]),
                "unit": self.units[i], "start": float(self.start[i]),
                "at_bound": bool(self.at_bound[i]),
                "identifiable": bool(self.identifiability.identifiable[i]),
            }
            parameters.append(entry)
        return {
            "converged": bool(self.converged),
            "message": self.message,
            "cost": float(self.cost),
            "n_data": int(self.n_data),
            "solver": self.solver,
            "n_steps": int(self.n_steps),
            "seconds": float(self.seconds),
            "start_costs": [float(c) for c in self.start_costs],
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated},
            "parameters": parameters,
            "correlation": [[number(x) for x in row] for row in self.correlation],
            "identifiability": self.identifiability.to_dict(),
            "moments": self.moments,
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        """A human-readable table of the fit."""
        lines = [
            f"fit with {self.solver}: {'converged' if self.converged else 'NOT converged'} "
            f"after {self.n_steps} steps in {self.seconds:.2f} s; cost {self.cost:.6g} "
            f"({self.n_data} data values)",
            "noise sigma " + ("(estimated from residuals)" if self.noise_estimated else "(given)")
            + ": " + ", ".join(f"{k}={v:.3g}" for k, v in self.noise.items()),
            "",
            f"{'parameter':28s} {'start':>12s} {'value':>12s} {'stderr':>11s} {'unit':>9s}  note",
        ]
        for i, name in enumerate(self.names):
            if self.at_bound[i]:
                note, error = "at bound", "-"
            elif not self.identifiability.identifiable[i]:
                note, error = "not identifiable alone", "-"
            else:
                note, error = "", f"{self.stderr[i]:.3g}"
            lines.append(
                f"{name:28s} {self.start[i]:12.6g} {self.values[i]:12.6g} {error:>11s} "
                f"{self.units[i]:>9s}  {note}"
            )
        ident = self.identifiability
        lines += ["", f"identifiability: rank {ident.rank} of {ident.n_parameters} free parameters"]
        for k, combination in enumerate(ident.combinations):
            terms = " ".join(
                f"{c:+.3g}*{n}" for n, c in list(combination["coefficients"].items())[:6]
            )
            more = len(combination["coefficients"]) - 6
            lines.append(
                f"  combination {k + 1}: {terms}{f' ... (+{more} terms)' if more > 0 else ''}"
                f" = {combination['value']:.6g} +- {combination['standard_error']:.2g}"
            )
        if self.moments:
            lines.append("vector-spring measure (identifiable moments):")
            for key, entry in self.moments.items():
                value = entry["value"]
                shown = (", ".join(f"{v:.6g}" for v in value) if isinstance(value, list)
                         else f"{value:.6g}")
                error = entry["stderr"]
                shown_error = (", ".join("-" if e is None else f"{e:.2g}" for e in error)
                               if isinstance(error, list)
                               else ("-" if error is None else f"{error:.2g}"))
                lines.append(f"  {key:22s} {shown} +- {shown_error} {entry['unit']}")
        for warning in self.warnings:
            lines.append(f"WARNING: {warning}")
        return "\n".join(lines)


def _vector_spring_moments(problem: FitProblem, values, identifiability) -> dict:
    """Identifiable summaries of the vector-spring measure: total stiffness, the
    stiffness-weighted centroid (the pin estimate) and the radius of gyration."""
    model = problem.models[0]
    springs = [e for e in getattr(model, "elements", ()) if isinstance(e, VectorSprings)]
    if not springs:
        return {}
    element = model.elements.index(springs[0])
    free_rows = {
        p.row: i for i, p in enumerate(problem.parameters)
        if p.element == element and p.field == "stiffness"
    }
    if not free_rows:
        return {}
    from ._planar_kinematics import body_point_position

    points = jnp.asarray(body_point_position(model.lower.reference_pose, springs[0].points_a))

    def stiffness_vector(theta):
        stiffness = springs[0].stiffness
        for row, i in free_rows.items():
            stiffness = stiffness.at[row].set(theta[i])
        return stiffness

    def total(theta):
        return jnp.sum(stiffness_vector(theta))

    def centroid(theta, axis):
        k = stiffness_vector(theta)
        return jnp.sum(k * points[:, axis]) / jnp.sum(k)

    def gyration(theta):
        k = stiffness_vector(theta)
        c = jnp.sum(k[:, None] * points, axis=0) / jnp.sum(k)
        return jnp.sqrt(jnp.sum(k * jnp.sum((points - c) ** 2, axis=1)) / jnp.sum(k))

    theta = jnp.asarray(values)

    def with_error(function):
        value = float(function(theta))
        error = identifiability.standard_error_of(np.asarray(jax.grad(function)(theta)))
        return value, (None if not np.isfinite(error) else error)

    t, t_err = with_error(total)
    cx, cx_err = with_error(lambda th: centroid(th, 0))
    cy, cy_err = with_error(lambda th: centroid(th, 1))
    g, g_err = with_error(gyration)
    return {
        "total_stiffness": {"value": t, "stderr": t_err, "unit": "N/m"},
        "centroid": {"value": [cx, cy], "stderr": [cx_err, cy_err], "unit": "m"},
        "radius_of_gyration": {"value": g, "stderr": g_err, "unit": "m"},
    }


VECTOR_MEASURE_NOTE = (
    "The motion depends on a measure of vector springs only through its total stiffness, its "
    "first moment and its second moment (the springs' separation is affine in the attachment "
    "point and the rotation part is isotropic), so at most 4 combinations of their "
    "stiffnesses are identifiable, 3 when the springs lie on a straight line or a circle, "
    "however many springs there are. The moments are reported with standard errors; "
    "individual springs need a sparsity prior (measure recovery)."
)


def fit(
    problem: FitProblem,
    *,
    solver: str = DEFAULT_SOLVER,
    starts: int = 1,
    seed: int = 0,
    start_spread: float = 1.0,
    max_steps: int | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    decrement_tol: float = DECREMENT_TOL,
    learning_rate: float = 0.05,
    batch_size: int | None = None,
    simulation_max_steps: int = 20_000,
    simulation_rtol: float = DEFAULT_RTOL,
    simulation_atol: float = DEFAULT_ATOL,
    jacobian_rtol: float | None = None,
    jacobian_atol: float | None = None,
    progress: bool = False,
) -> FitResult:
    """Fit the free parameters of `problem` by least squares through the ODE solve.

    **Arguments:**
    - `solver`: `"lm"` (spineid's Levenberg-Marquardt, `spineid._least_squares`, the default),
      `"jaxopt-lm"` or `"optimistix-lm"`, all with Jacobians by forward-mode autodiff through
      diffrax; `"adam"` or `"lbfgs"` (optax, gradients by reverse mode) for many parameters.
    - `starts`: number of starts; start 0 is the model's values, the others are drawn with
      `seed`, log-normally around it (`start_spread` in unconstrained units), solved together
      with `vmap` (Levenberg-Marquardt starts by `BATCH_SOLVER`). The lowest cost wins.
    - `max_steps`: solver iterations (default 200 for LM, 2000 for adam/lbfgs).
    - `rtol`, `atol`: LM termination tolerances on the step in unconstrained parameters
      (relative) and on the gradient of the cost.
    - `decrement_tol`: `"lm"` also stops when the cost can fall by less than this (half
      chi-square units, scaled by the reduced chi-square when it exceeds 1): the default stops
      within about 0.01 standard errors of the optimum. 0 switches this test off.
    - `learning_rate`: for adam.
    - `batch_size`: with adam, fit stochastic mini-batches of this many load cases per step
      (drawn with `seed`) instead of all of them.
    - `simulation_max_steps`: ODE steps allowed per simulation; a trial point that needs more
      counts as failed and the solver backs off.
    - `simulation_rtol`, `simulation_atol`: ODE tolerances inside the fit. The defaults are
      `simulate`'s; looser values are faster and harmless while the integration error stays far
      below the measurement noise.
    - `jacobian_rtol`, `jacobian_atol`: ODE tolerances of the Jacobians that `"lm"` takes on
      the way to the optimum (the residuals, and the Jacobian that confirms the stop and gives
      the standard errors, use the simulation tolerances; `spineid._least_squares`). Default:
      `simulation_rtol` times 100, at most 1e-3 and never tighter than `simulation_rtol`, and
      `simulation_atol` scaled by the same factor. `jacobian_rtol=simulation_rtol` takes every
      Jacobian at the simulation tolerances.
    - `progress`: print the solver's progress.

    **Returns:** a `FitResult`: values, Cramer-Rao standard errors, correlations,
    identifiability (SVD of the noise-weighted sensitivities), convergence and residuals.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver {solver!r}: expected one of {list(SOLVERS)}")
    if starts < 1:
        raise ValueError(f"starts={starts}: expected at least 1")
    if batch_size is not None and (solver != "adam" or
                                   not 1 <= batch_size <= len(problem.measurements)):
        raise ValueError(
            f"batch_size={batch_size}: mini-batches need solver='adam' and 1 <= batch_size <= "
            f"{len(problem.measurements)} (the number of load cases)"
        )
    first_order = solver in ("adam", "lbfgs")
    if jacobian_rtol is None:
        jacobian_rtol = max(simulation_rtol, min(100.0 * simulation_rtol, 1e-3))
    if jacobian_atol is None:
        jacobian_atol = simulation_atol * jacobian_rtol / simulation_rtol
    if jacobian_rtol < simulation_rtol or jacobian_atol < simulation_atol:
        raise ValueError(
            f"jacobian_rtol={jacobian_rtol}, jacobian_atol={jacobian_atol}: the Jacobians' ODE "
            f"tolerances cannot be tighter than the simulation's ({simulation_rtol}, "
            f"{simulation_atol})"
        )
    inexact = jacobian_rtol != simulation_rtol or jacobian_atol != simulation_atol
    max_steps = max_steps or (2000 if first_order else 200)
    clock = time.perf_counter()
    transform = problem.transform()
    adjoint = diffrax.RecursiveCheckpointAdjoint() if first_order else diffrax.ForwardMode()
    noise_estimated = problem.noise is None
    if noise_estimated:
        # Provisional weights: comparable channels; the real noise level comes after the fit.
        sigma = np.maximum(problem.channel_ranges(), 1e-12) * 1e-3
    else:
        sigma = np.array([problem.noise[c] for c in problem.channels])

    def solve(objective, u0):
        if solver == "lm" and u0.ndim == 1:
            solution = levenberg_marquardt(objective.at_precision if inexact else objective, u0,
                                           max_steps=max_steps, decrement_tol=decrement_tol,
                                           xtol=rtol, gtol=atol, inexact_jacobians=inexact,
                                           progress=progress)
            # Its last exact forward-mode pass is at the solution (or one small final step
            # before it): the cost and the sensitivities of the result come from the solver
            # instead of being computed again.
            return (solution.value, solution.converged, solution.steps,
                    (solution.cost, solution.residuals, solution.jacobian))
        if solver in ("lm", "jaxopt-lm", "optimistix-lm") and u0.ndim == 2:
            return eqx.filter_vmap(
                lambda start: _solve_lm(objective, start, rtol, atol, max_steps, False)
            )(u0) + (None,)
        if solver == "optimistix-lm":
            return _solve_lm(objective, u0, rtol, atol, max_steps,
                             _progress_printer(progress and u0.ndim == 1)) + (None,)
        if solver == "jaxopt-lm" and progress and u0.ndim == 1:
            return _solve_jaxopt_lm_showing_progress(objective, u0, rtol, atol,
                                                     max_steps) + (None,)
        if solver == "jaxopt-lm":
            return _solve_jaxopt_lm(objective, u0, rtol, atol, max_steps) + (None,)
        return _solve_optax(objective, u0, solver, learning_rate, max_steps, batch_size,
                            jax.random.PRNGKey(seed)) + (None,)

    tolerances = dict(rtol=simulation_rtol, atol=simulation_atol, coarse_rtol=jacobian_rtol,
                      coarse_atol=jacobian_atol)
    objective = _objective(problem, sigma, transform, adjoint, simulation_max_steps, **tolerances)
    n_free = len(problem.parameters)
    key = jax.random.PRNGKey(seed)
    starts_u = jnp.concatenate(
        [jnp.zeros((1, n_free)),
         start_spread * jax.random.normal(key, (starts - 1, n_free))]
    )
    start_costs = []
    best = None
    chunk = 8
    for first in range(0, starts, chunk):
        batch = starts_u[first:first + chunk]
        if starts == 1:
            results = [solve(objective, batch[0])]
        elif first_order:
            results = [r + (None,) for r in zip(*eqx.filter_vmap(
                lambda u0: solve(objective, u0)[:3])(batch))]
        else:
            u, converged, steps, _ = solve(objective, batch)
            results = [r + (None,) for r in zip(u, converged, steps)]
        for u, converged, steps, linearisation in results:
            cost = float(_cost(objective, u) if linearisation is None else linearisation[0])
            start_costs.append(cost)
            if best is None or cost < best[3]:
                best = (u, bool(converged), int(steps), cost, linearisation)
        if progress and starts > 1:
            print(f"  starts {min(first + chunk, starts)}/{starts} done, best cost "
                  f"{best[3]:.6e}", flush=True)
    u, converged, n_steps, cost, linearisation = best

    theta = np.asarray(transform.to_physical(u))
    if noise_estimated:
        sigma = _estimate_noise(problem, theta, objective)
        if progress:
            print("  noise estimated from the residuals: "
                  + ", ".join(f"{c}={v:.3g}" for c, v in zip(problem.channels, sigma))
                  + "; refining the fit with these weights", flush=True)
        objective = _objective(problem, sigma, transform, adjoint, simulation_max_steps,
                               **tolerances)
        u, converged, steps, linearisation = solve(objective, u)
        n_steps += int(steps)
        converged = bool(converged)
        theta = np.asarray(transform.to_physical(u))
    # The transform is elementwise: dr/dtheta = dr/du / (dtheta/du), column by column.
    slope = np.asarray(jax.jvp(transform.to_physical, (u,), (jnp.ones_like(u),))[1])
    if linearisation is not None and np.all(np.abs(slope) > 0):
        residuals, jacobian = linearisation[1], np.asarray(linearisation[2]) / slope
        predictions = objective.predictions_from(residuals)
    else:  # no Jacobian at the solution yet, or a parameter pressed flat against its bound
        jacobian, residuals, predictions = _evaluate(objective, jnp.asarray(theta))
    jacobian, residuals = np.asarray(jacobian), np.asarray(residuals)
    predictions = [np.asarray(p) for p in predictions]
    cost = float(0.5 * np.sum(residuals**2))
    failed = bool(np.any(residuals == FAILED_RESIDUAL))

    names = problem.names
    # The statistical stop leaves a parameter that heads for its bound within about 0.01 of
    # its standard error from it (further iterations could gain nothing measurable): that close,
    # it counts as on the bound, where the Cramer-Rao error does not apply.
    unbounded_covariance, _ = fisher_analysis(jacobian, theta, _scales(theta, transform), names)
    at_bound = transform.at_bound(
        theta, within=BOUND_STDERR_FRACTION * np.sqrt(np.diag(unbounded_covariance)))
    covariance, identifiability = fisher_analysis(
        jacobian, theta, _scales(theta, transform), names, ~at_bound
    )
    stderr = np.sqrt(np.diag(covariance))  # NaN where not individually identifiable
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = covariance / np.outer(stderr, stderr)
    warnings = list(identifiability.warnings)
    if identifiability.rank < identifiability.n_parameters and any(
        p.field == "stiffness" and p.element is not None
        and isinstance(problem.models[0].elements[p.element], VectorSprings)
        for p in problem.parameters
    ):
        warnings.append(VECTOR_MEASURE_NOTE)
    for i in np.flatnonzero(at_bound):
        warnings.append(
            f"{names[i]} ended on its bound ({theta[i]:.3g} {problem.parameters[i].unit}, within "
            f"{BOUND_STDERR_FRACTION:g} of a standard error of it); it is reported without a "
            f"standard error."
        )
    if failed:
        warnings.append("The simulation failed at the returned parameters; do not use them.")
        converged = False
    if not np.any(np.abs(jacobian) > 0):
        warnings.append(
            "The data are insensitive to every free parameter (zero sensitivity): nothing "
            "excites the joint in a way these parameters affect."
        )
    message = "converged" if converged else (
        "the solver stopped without meeting its tolerances (max_steps reached or failed); "
        "try more steps, more starts or another solver"
    )
    result = FitResult(
        names=names,
        units=[p.unit for p in problem.parameters],
        start=problem.start,
        values=theta,
        stderr=stderr,
        at_bound=at_bound,
        covariance=covariance,
        correlation=correlation,
        cost=cost,
        n_data=problem.n_data,
        converged=bool(converged),
        message=message,
        n_steps=n_steps,
        solver=solver,
        start_costs=start_costs,
        noise={c: float(s) for c, s in zip(problem.channels, sigma)},
        noise_estimated=noise_estimated,
        identifiability=identifiability,
        moments={},
        predictions=predictions,
        measurements=problem.measurements,
        warnings=warnings,
        seconds=time.perf_counter() - clock,
    )
    result.moments = _vector_spring_moments(problem, theta, identifiability)
    return result


@eqx.filter_jit
def _evaluate(objective: _Objective, theta):
    # Everything a result needs in one compiled pass: the noise-weighted sensitivity matrix
    # dr/dtheta (forward mode, physical units), the residuals and the predicted trajectories
    # (the auxiliary output of the same jacfwd).
    forward = dataclasses.replace(objective, adjoint=diffrax.ForwardMode())

    def residuals_with_aux(th):
        residuals, predictions = forward.residuals_and_predictions(th)
        return residuals, (residuals, predictions)

    jacobian, (residuals, predictions) = jax.jacfwd(residuals_with_aux, has_aux=True)(theta)
    return jacobian, residuals, predictions


@eqx.filter_jit
def _cost(objective: _Objective, u):
    return 0.5 * jnp.sum(objective(u) ** 2)


def _scales(theta, transform: Transform) -> np.ndarray:
    return np.where(np.abs(theta) > 0, np.abs(theta), np.asarray(transform.scale))


def _noise_array(problem: FitProblem, noise: dict[str, float] | None) -> np.ndarray:
    noise = problem.noise if noise is None else check_noise(problem.channels, noise)
    if noise is None:
        raise ValueError("give the measurement noise per channel (noise=...) for this analysis")
    return np.array([noise[c] for c in problem.channels])


def analyse(
    problem: FitProblem, values=None, noise: dict[str, float] | None = None
) -> tuple[np.ndarray, Identifiability]:
    """What the data of `problem` would determine at parameter `values` (default: the start).

    Computes the noise-weighted sensitivity matrix by forward-mode autodiff through the ODE and
    returns `(covariance, identifiability)` as `fisher_analysis` does: the Cramer-Rao bound and
    the identifiable combinations. Useful to design experiments before fitting. `noise`
    defaults to the problem's.
    """
    theta = problem.start if values is None else np.asarray(values, dtype=float)
    transform = problem.transform()
    objective = _objective(
        problem, _noise_array(problem, noise), transform, diffrax.ForwardMode(), 20_000
    )
    jacobian = np.asarray(_evaluate(objective, jnp.asarray(theta))[0])
    return fisher_analysis(jacobian, theta, _scales(theta, transform), problem.names)


@eqx.filter_jit
def _solve_batch(objective, batch, solver: str, rtol: float, atol: float, max_steps: int):
    # vmapped Levenberg-Marquardt over data sets; at module level so that a second call with
    # the same problem and shapes reuses the compilation.
    def one(case_data):
        single = eqx.tree_at(lambda o: o.data, objective, case_data)
        u0 = jnp.zeros_like(single.transform.start)
        if solver == "optimistix-lm":
            u, converged, _ = _solve_lm(single, u0, rtol, atol, max_steps, False)
        else:
            u, converged, _ = _solve_jaxopt_lm(single, u0, rtol, atol, max_steps)
        theta = single.transform.to_physical(u)
        jacobian, residuals, _ = _evaluate(single, theta)
        return theta, jacobian, converged, 0.5 * jnp.sum(residuals**2)

    return jax.vmap(one)(batch)


def fit_many(
    problem: FitProblem,
    data: Sequence[np.ndarray],
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 200,
    solver: str = BATCH_SOLVER,
) -> dict[str, np.ndarray]:
    """Fit the same problem to a batch of data sets at once (`vmap` over LM solves).

    **Arguments:** `data`, one array per load case of shape `(batch, k, c)` (e.g. noise draws
    for a Monte Carlo study); the problem's noise must be given; `solver` one of the
    Levenberg-Marquardt solvers (`"jaxopt-lm"`, `"optimistix-lm"`).

    **Returns:** `values` `(batch, p)`, Cramer-Rao `stderr` `(batch, p)` (full-rank problems;
    NaN where the Fisher information is singular), `converged` `(batch,)`, `cost` `(batch,)`.
    """
    if solver not in ("jaxopt-lm", "optimistix-lm"):
        raise ValueError(f"fit_many solver {solver!r}: expected 'jaxopt-lm' or 'optimistix-lm'")
    sigma = _noise_array(problem, None)
    objective = _objective(problem, sigma, problem.transform(), diffrax.ForwardMode(), 20_000)
    batch = tuple(jnp.asarray(d) for d in data)
    if len(batch) != len(problem.measurements):
        raise ValueError(f"{len(batch)} data arrays for {len(problem.measurements)} load cases")

    theta, jacobian, converged, cost = _solve_batch(objective, batch, solver, rtol, atol,
                                                    max_steps)
    fisher = np.einsum("bni,bnj->bij", np.asarray(jacobian), np.asarray(jacobian))
    stderr = np.full(np.shape(theta), np.nan)
    for b, information in enumerate(fisher):
        if np.linalg.cond(information) < 1e12:
            stderr[b] = np.sqrt(np.diag(np.linalg.inv(information)))
    return {"values": np.asarray(theta), "stderr": stderr, "converged": np.asarray(converged),
            "cost": np.asarray(cost)}


def _estimate_noise(problem, theta, objective: _Objective) -> np.ndarray:
    """Per-channel noise from the residuals of a fit, corrected for the fitted degrees of
    freedom: sigma_c^2 = sum r_c^2 / (n_c (1 - p / n))."""
    unit = eqx.tree_at(lambda o: o.sigma, objective, jnp.ones(len(problem.channels)))
    n_channels = len(problem.channels)
    raw = np.concatenate([
        np.asarray(unit.case_residuals(jnp.asarray(theta), i)).reshape(-1, n_channels)
        for i in range(len(problem.models))
    ])
    return noise_from_residuals(raw, len(problem.parameters), problem.channel_ranges())


def noise_from_residuals(raw: np.ndarray, n_free: int, ranges: np.ndarray) -> np.ndarray:
    """Per-channel noise from raw residuals `(k, c)` (SI) of a fit with `n_free` parameters:
    sigma_c^2 = sum r_c^2 / (n_c (1 - p / n)), floored at roundoff of each channel's `ranges`
    (noise-free data would give 0)."""
    dof = max(1.0 - n_free / raw.size, 1e-3)
    sigma = np.sqrt(np.mean(raw**2, axis=0) / dof)
    return np.maximum(sigma, 1e-13 * np.maximum(ranges, 1e-300))


def channel_ranges(measurements: Sequence[Measurement]) -> np.ndarray:
    """Peak-to-peak range of each channel over all `measurements` (SI), `(c,)`."""
    return np.ptp(np.concatenate([m.values for m in measurements]), axis=0)
