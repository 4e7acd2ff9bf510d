"""Recovering a stiffness measure on a curve, on a fixed grid or off the grid.

Liu (2001, section 3.3) replaces a joint by a distribution of vector springs on a curve between
the vertebrae and identifies the stiffness of each spring; for a pin joint the stiffness
concentrates at the pin. Here the unknown is a nonnegative measure `mu = sum_i w_i delta_{s_i}`
on the model's `[measure]` curve, with total stiffness at most `max_stiffness` (an exact pin is
infinitely stiff, so some ceiling is needed; see `RecoveryProblem`):

- `recover_grid`: N springs at fixed, equally spaced points, nonnegative weights (Liu's
  experiment, Figs 3-19 to 3-37);
- `recover`: off the grid, by the sliding Frank-Wolfe method (Denoyelle, Duval, Peyre and
  Soubies 2019): add an atom where the first variation of the loss is most negative, refit the
  weights, move positions and weights jointly, prune, and stop when the Frank-Wolfe gap, a
  certificate that no measure on the curve lowers the loss to first order, is below tolerance.

Both rest on one fact (`SpringMeasure`): the motion depends on the measure only through its
moments `m = [sum w, sum w (s - o), sum w |s - o|^2]`, which are linear in the weights. So one
forward-mode solve with 4 tangents gives `dr/dm`, the sensitivity to any atom follows by the
chain rule, and the first variation `g(s) = dL/dm . [1, s - o, |s - o|^2]` is evaluated on a fine
grid of the curve with `vmap`. The weights and positions are updated by a projected
Levenberg-Marquardt method whose subproblem (box and total-stiffness constraints) is solved by
jaxopt's `ProjectedGradient`.
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
from jaxtyping import Array, Float

from ._identify import (
    channel_ranges,
    check_measurements,
    check_noise,
    FAILED_RESIDUAL,
    Measurement,
    noise_from_residuals,
)
from ._io import load_model_file, ModelFile
from ._pinned_pair import PinnedPair
from ._planar_elements import spring_moments, SpringMeasure, VectorSprings
from ._planar_pair import PlanarPair
from ._simulate import DEFAULT_ATOL, DEFAULT_RTOL, simulate, SimulationResult
from ._uncertainty import fisher_analysis, Identifiability

# Weights below this fraction of the total are removed from an off-grid measure.
PRUNE_FRACTION = 1e-12
# Atoms closer than this fraction of the curve length are merged.
MERGE_FRACTION = 1e-6
# Points of the Frank-Wolfe line search (log-spaced step fractions from 1e-6 to 1).
LINE_SEARCH_POINTS = 25
# Points of the scale search on each side of the current measure (`_Solver.scale_search`).
SCALE_SEARCH_POINTS = 9
# A refit stops when a step changes the cost by less than this fraction of it: 1e-7 of a
# half chi-square near n_data / 2 is far below what noise resolves, and the Frank-Wolfe
# certificate, not this, decides when the recovery is done.
REFIT_FTOL = 1e-7
# Ridge of the projected Levenberg-Marquardt subproblem, in scaled step units.
RIDGE = 1e-6


@dataclasses.dataclass(frozen=True)
class MeasureCurve:
    """A polyline in the global reference configuration on which springs may sit.

    `points` (m, `(k, 2)`). Positions on the curve are arc-length fractions `t` in `[0, 1]`.
    """

    points: np.ndarray

    @property
    def cumulative(self) -> np.ndarray:
        """Arc length at each vertex (m), `(k,)`."""
        steps = np.linalg.norm(np.diff(self.points, axis=0), axis=1)
        return np.concatenate([[0.0], np.cumsum(steps)])

    @property
    def length(self) -> float:
        """Total length (m)."""
        return float(self.cumulative[-1])

    @property
    def straight(self) -> bool:
        """Whether all vertices lie on one line (then only 3 moments are distinct)."""
        direction = self.points[-1] - self.points[0]
        offsets = self.points - self.points[0]
        cross = np.abs(direction[0] * offsets[:, 1] - direction[1] * offsets[:, 0])
        return bool(np.all(cross <= 1e-9 * self.length**2))

    def at(self, t: Float[Array, "..."]) -> Float[Array, "... 2"]:
        """Global points (m) at arc-length fractions `t` (piecewise linear, differentiable
        except at the vertices)."""
        fractions = jnp.asarray(self.cumulative / self.length)
        points = jnp.asarray(self.points)
        return jnp.stack(
            [jnp.interp(t, fractions, points[:, 0]), jnp.interp(t, fractions, points[:, 1])],
            axis=-1,
        )


def recovery_base_model(model: PlanarPair | PinnedPair) -> PlanarPair:
    """The model in which a recovered measure replaces the joint: a `PlanarPair` with the same
    bodies, loads, gravity and start pose. From a `PinnedPair` the pin is removed and its torsion
    springs kept; from a `PlanarPair` its vector springs are removed and the other elements kept.
    """
    if isinstance(model, PinnedPair):
        return PlanarPair(
            lower=model.lower,
            upper=model.upper,
            elements=tuple(model.elements),
            loads=model.loads,
            gravity=model.gravity,
            initial_pose=model.upper_pose(jnp.atleast_1d(model.initial_angle)),
        )
    if isinstance(model, PlanarPair):
        kept = tuple(e for e in model.elements if not isinstance(e, VectorSprings))
        return eqx.tree_at(lambda m: m.elements, model, kept)
    raise ValueError(f"measure recovery needs a planar model, got {type(model).__name__}")


class RecoveryProblem:
    """What to recover: a measure of vector springs on the model's `[measure]` curve.

    **Arguments:**
    - `model_file`: a `planar_pair` or `pinned_pair` `ModelFile` with a `[measure]` table; the
      measure replaces its vector springs (or its pin), everything else is kept as given.
    - `measurements`: one or more `Measurement`s of the upper body (`x, y, theta`), all of the
      model's load case.
    - `noise`: per-channel standard deviation (SI); `None` estimates it from the residuals.
    - `max_stiffness`: ceiling on the total stiffness of the measure (N/m). The default,
      `m (pi / dt)^2` with `m` the upper body's mass and `dt` the sampling interval, puts the
      measure's translational natural frequency at the Nyquist frequency of the data: a stiffer
      joint moves like a rigid one at this sampling rate. An exact pin is infinitely stiff in
      translation, so its recovered total sits on this ceiling.

    Raises `ValueError` for a model without `[measure]`, data with the wrong channels or too
    few samples, and data without rotation (the location of a pin is then not identifiable).
    """

    def __init__(
        self,
        model_file: ModelFile,
        measurements: Sequence[Measurement] | Measurement,
        noise: dict[str, float] | None = None,
        max_stiffness: float | None = None,
    ):
        if isinstance(measurements, Measurement):
            measurements = [measurements]
        self.model_file = model_file
        self.measurements = tuple(measurements)
        measure = model_file.document.get("measure")
        if measure is None:
            raise ValueError(
                f"{model_file.source}: no [measure] table: measure recovery needs the curve on "
                f"which springs may sit, e.g. [measure] kind = \"vector\", curve = [[x0, y0], "
                f"[x1, y1]]"
            )
        self.curve = MeasureCurve(np.asarray(measure["curve"], dtype=float))
        self.model = recovery_base_model(model_file.model)
        self.channels = tuple(self.model.observable_names)
        # The data fix at most the 4 moments of a measure.
        check_measurements(self.measurements, self.channels, 4)
        self.noise = None if noise is None else check_noise(self.channels, noise)
        self._check_rotation()
        if max_stiffness is None:
            dt = float(np.median(np.concatenate([np.diff(m.ts) for m in self.measurements])))
            max_stiffness = float(self.model.upper.mass) * (math.pi / dt) ** 2
        if not (math.isfinite(max_stiffness) and max_stiffness > 0):
            raise ValueError(f"max_stiffness={max_stiffness!r}: expected a positive number (N/m)")
        self.max_stiffness = float(max_stiffness)

    @classmethod
    def from_files(cls, model_path, data_paths, noise=None, max_stiffness=None):
        """Problem from a model file and one or more trajectory CSV files."""
        model_file = load_model_file(model_path)
        if isinstance(data_paths, (str, pathlib.Path)):
            data_paths = [data_paths]
        channels = model_file.model.observable_names
        measurements = [Measurement.from_csv(p, channels) for p in data_paths]
        return cls(model_file, measurements, noise, max_stiffness)

    @property
    def n_data(self) -> int:
        """Number of scalar residuals."""
        return sum(m.values.size for m in self.measurements)

    def channel_ranges(self) -> np.ndarray:
        """Peak-to-peak range of each channel over all measurements (SI), `(c,)`."""
        return channel_ranges(self.measurements)

    def _check_rotation(self) -> None:
        # A joint that never turns shows only its total stiffness: where the springs sit (the
        # pin) changes nothing in the data, and a fit would return its starting guess.
        turn = float(self.channel_ranges()[self.channels.index("theta")])
        floor = 1e-7 if self.noise is None else 5.0 * self.noise["theta"]
        if turn <= floor:
            raise ValueError(
                f"{self.measurements[0].source}: the data show no rotation (theta varies by "
                f"{turn:.3g} rad, below {floor:.3g} rad): the location of the springs (the pin) "
                f"is not identifiable from them. Use a load case that turns the vertebra (a "
                f"moment, or a force off the joint)."
            )


class _MeasureObjective(eqx.Module):
    """Noise-weighted residuals as a function of the stiffness moments of the measure."""

    model: PlanarPair
    ts: tuple
    data: tuple
    sigma: Float[Array, " c"]
    adjoint: diffrax.AbstractAdjoint = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    rtol: float = eqx.field(static=True, default=DEFAULT_RTOL)
    atol: float = eqx.field(static=True, default=DEFAULT_ATOL)

    def with_measure(self, moments, origin) -> PlanarPair:
        """The model with the measure of stiffness `moments` about `origin` appended."""
        element = SpringMeasure.from_moments(
            origin, moments, jnp.zeros(4), self.model.lower.reference_pose,
            self.model.upper.reference_pose,
        )
        return eqx.tree_at(lambda m: m.elements, self.model, self.model.elements + (element,))

    def residuals(self, moments, origin):
        """`(residuals (n,), predictions per measurement)` at the given moments."""
        model = self.with_measure(moments, origin)
        predictions, residuals = [], []
        for ts, data in zip(self.ts, self.data):
            solution = simulate(
                model, ts, adjoint=self.adjoint, throw=False, t0=0.0,
                max_steps=self.max_steps, rtol=self.rtol, atol=self.atol,
            )
            predicted = jax.vmap(model.observe)(solution.q)
            ok = solution.result == SimulationResult.successful
            predicted = jnp.where(ok, predicted, jnp.inf)
            weighted = ((predicted - data) / self.sigma).ravel()
            predictions.append(predicted)
            residuals.append(jnp.where(jnp.isfinite(weighted), weighted, FAILED_RESIDUAL))
        return jnp.concatenate(residuals), tuple(predictions)


def _objective(problem: RecoveryProblem, sigma, max_steps: int) -> _MeasureObjective:
    return _MeasureObjective(
        model=problem.model,
        ts=tuple(jnp.asarray(m.ts) for m in problem.measurements),
        data=tuple(jnp.asarray(m.values) for m in problem.measurements),
        sigma=jnp.asarray(sigma, dtype=float),
        adjoint=diffrax.ForwardMode(),
        max_steps=max_steps,
    )


@eqx.filter_jit
def _moment_jacobian(objective: _MeasureObjective, moments, origin):
    # One forward-mode solve with 4 tangents: dr/dm (n, 4), the residuals and predictions.
    def residuals_with_aux(m):
        residuals, predictions = objective.residuals(m, origin)
        return residuals, (residuals, predictions)

    jacobian, (residuals, predictions) = jax.jacfwd(residuals_with_aux, has_aux=True)(moments)
    return jacobian, residuals, predictions


@eqx.filter_jit
def _moment_cost(objective: _MeasureObjective, moments, origin):
    residuals = objective.residuals(moments, origin)[0]
    return 0.5 * jnp.sum(residuals**2)


@eqx.filter_jit
def _moment_costs(objective: _MeasureObjective, moments, origin):
    return jax.vmap(lambda m: _moment_cost(objective, m, origin))(moments)


def _features(points, origin) -> Float[Array, "k 4"]:
    # The moments of a unit atom at each point: [1, s - o, |s - o|^2].
    offset = points - origin
    return jnp.concatenate(
        [jnp.ones_like(offset[:, :1]), offset, jnp.sum(offset**2, axis=1, keepdims=True)], axis=1
    )


def first_variation(curve: MeasureCurve, moment_gradient, origin, t) -> Float[Array, " k"]:
    """The first variation of the loss: `g(s) = dL/dm . [1, s - o, |s - o|^2]`, the rate of change
    of the loss when stiffness (per N/m) is added at the curve points of fractions `t` (`(k,)`).
    Negative where adding a spring lowers the loss."""
    return jax.vmap(lambda point: _features(point[None], origin)[0] @ moment_gradient)(
        curve.at(t)
    )


def _project(x, bounds):
    # Projection onto {lower <= x <= upper, sum_i a_i x_i <= budget}: clip, then, if the budget is
    # exceeded, clip(x - nu a) with the multiplier nu >= 0 found by bisection.
    lower, upper, a, budget = bounds

    def clipped(nu):
        return jnp.clip(x - nu * a, lower, upper)

    def excess(nu):
        return jnp.sum(a * clipped(nu)) - budget

    high = jnp.max(jnp.where(a > 0, (x - lower) / jnp.where(a > 0, a, 1.0), 0.0)) + 1.0

    def bisect(_, interval):
        low, high = interval
        middle = 0.5 * (low + high)
        over = excess(middle) > 0
        return jnp.where(over, middle, low), jnp.where(over, high, middle)

    _, nu = jax.lax.fori_loop(0, 100, bisect, (jnp.zeros(()), high))
    return jnp.where(excess(0.0) > 0, clipped(nu), clipped(0.0))


@jax.jit
def _lm_subproblem(z, residuals, moment_jacobian, chain, damping, lower, upper, in_budget):
    """Step of the projected Levenberg-Marquardt method, with its trust region on the moments.

    The residuals depend on the atoms `z` only through the 4 moments (`SpringMeasure`), and
    they are nonlinear in the moments, not in how a measure represents them; so the damping
    acts on the change of the moments. With `J_m = dr/dm = U S V^T`, `C = dm/dz` and the
    column norms `D` of `J_m C` (scaled step `u = D dz`), the step minimises

        1/2 |c + A u|^2 + damping/2 |diag(d) C u / D|^2 + ridge/2 |u|^2

    (`c = U^T r`, `A = S V^T C / D`, `d` the column norms of `J_m`; the small ridge picks the
    least change among steps with equal moments) over `z + dz` in the box `[lower, upper]` with
    `sum(z[in_budget]) <= 1`. Its dual has 8 variables however many springs there are; the inner
    minimiser `u = proj(-G^T nu / ridge)` is a projection (`_project`), and jaxopt's L-BFGS
    solves the dual. Returns the trial point and the decrease of `1/2 |r + J dz|^2` it predicts.
    """
    jacobian = moment_jacobian @ chain
    scale = jnp.sqrt(jnp.sum(jacobian**2, axis=0))
    scale = jnp.maximum(scale, 1e-8 * jnp.max(scale) + 1e-300)
    u_basis, singular, vt = jnp.linalg.svd(moment_jacobian, full_matrices=False)
    moment_scale = jnp.sqrt(jnp.sum(moment_jacobian**2, axis=0))
    stacked = jnp.concatenate([
        singular[:, None] * vt @ chain,
        jnp.sqrt(damping) * moment_scale[:, None] * chain,
    ]) / scale
    target = jnp.concatenate([u_basis.T @ residuals, jnp.zeros(chain.shape[0])])
    bounds = ((lower - z) * scale, (upper - z) * scale, jnp.where(in_budget, 1.0 / scale, 0.0),
              1.0 - jnp.sum(jnp.where(in_budget, z, 0.0)))

    def inner(nu):
        return _project(-(stacked.T @ nu) / RIDGE, bounds)

    def negative_dual(nu):
        u = jax.lax.stop_gradient(inner(nu))  # Danskin: the inner minimiser is stationary
        return 0.5 * nu @ nu - nu @ target - 0.5 * RIDGE * u @ u - nu @ (stacked @ u)

    nu = jaxopt.LBFGS(negative_dual, maxiter=1000, tol=1e-12).run(jnp.zeros_like(target)).params
    step = inner(nu) / scale
    linear = residuals + jacobian @ step
    return z + step, 0.5 * jnp.sum(residuals**2) - 0.5 * jnp.sum(linear**2)


def _nnls(matrix: np.ndarray, target: np.ndarray, scale: float) -> np.ndarray:
    """Nonnegative least squares `min |A x - b|, x >= 0` by the Lawson-Hanson active-set method:
    exact, indifferent to rank deficiency, and its solutions are sparse (a basic solution).
    Stops when no gradient component of a zero variable exceeds `scale`."""
    n = matrix.shape[1]
    x, passive = np.zeros(n), np.zeros(n, bool)
    for _ in range(3 * n + 10):
        gradient = matrix.T @ (target - matrix @ x)
        if passive.all() or np.max(np.where(passive, -np.inf, gradient)) <= scale:
            break
        passive[np.argmax(np.where(passive, -np.inf, gradient))] = True
        while True:
            trial = np.zeros(n)
            trial[passive] = np.linalg.lstsq(matrix[:, passive], target, rcond=None)[0]
            if np.all(trial[passive] > 0):
                x = trial
                break
            blocking = passive & (trial <= 0)
            alpha = np.min(x[blocking] / (x[blocking] - trial[blocking]))
            x = x + alpha * (trial - x)
            passive &= x > 1e-15
            x[~passive] = 0.0
    return x


def _weights_subproblem(p, residuals, moment_jacobian, chain, damping):
    """Weights-only step of the projected Levenberg-Marquardt method (positions fixed): the
    problem of `_lm_subproblem` in the new weights `p' >= 0` with `sum p' <= 1` (a slack weight
    and a heavy row enforce the budget), solved exactly by `_nnls`."""
    moment_jacobian, chain = np.asarray(moment_jacobian), np.asarray(chain)
    u_basis, singular, vt = np.linalg.svd(moment_jacobian, full_matrices=False)
    sensitivity = singular[:, None] * vt @ chain
    moment_scale = np.sqrt(np.sum(moment_jacobian**2, axis=0))
    damped = np.sqrt(damping) * moment_scale[:, None] * chain
    c = u_basis.T @ np.asarray(residuals)
    budget_weight = 1e3 * max(np.abs(sensitivity).max(), np.abs(damped).max(), 1e-300)
    matrix = np.block([
        [sensitivity, np.zeros((sensitivity.shape[0], 1))],
        [damped, np.zeros((damped.shape[0], 1))],
        [np.full((1, p.size), budget_weight), np.full((1, 1), budget_weight)],
    ])
    target = np.concatenate([sensitivity @ p - c, damped @ p, [budget_weight]])
    threshold = 1e-12 * np.abs(sensitivity).max() * max(np.abs(c).max(), 1e-300)
    new = _nnls(matrix, target, threshold)[:-1]
    new = new / max(1.0, new.sum())
    linear = np.asarray(residuals) + moment_jacobian @ (chain @ (new - p))
    return new, 0.5 * float(np.sum(np.asarray(residuals) ** 2) - np.sum(linear**2))


@dataclasses.dataclass
class _Atoms:
    # Positions t (arc fractions) and weights p (fractions of max_stiffness) of a fixed number
    # of slots; inactive slots carry zero weight.
    t: np.ndarray
    p: np.ndarray
    active: np.ndarray

    def copy(self) -> "_Atoms":
        return _Atoms(self.t.copy(), self.p.copy(), self.active.copy())


class _Solver:
    """Projected Levenberg-Marquardt on atom positions and weights for one objective."""

    def __init__(self, problem: RecoveryProblem, objective: _MeasureObjective, progress):
        self.curve = problem.curve
        self.tau = problem.max_stiffness
        self.objective = objective
        self.progress = progress
        self.n_evaluations = 0

    def origin(self, atoms: _Atoms) -> jnp.ndarray:
        """The stiffness centroid of the atoms, or the curve's middle when empty."""
        if atoms.p.sum() <= 0:
            return jnp.asarray(self.curve.at(jnp.asarray(0.5)))
        points = np.asarray(self.curve.at(jnp.asarray(atoms.t)))
        return jnp.asarray(atoms.p @ points / atoms.p.sum())

    def moments_of(self, z, origin):
        half = z.size // 2
        return spring_moments(self.curve.at(z[:half]), self.tau * z[half:], origin)

    def jacobian(self, z, origin):
        """`((dr/dm (n, 4), dm/dz (4, 2a)), r (n,), predictions, dL/dm (4,))` at the atom
        vector `z = [t, p]`."""
        self.n_evaluations += 1
        moments = self.moments_of(z, origin)
        moment_jacobian, residuals, predictions = _moment_jacobian(
            self.objective, moments, origin
        )
        chain = jax.jacfwd(self.moments_of)(z, origin)
        return ((moment_jacobian, chain), residuals, predictions,
                moment_jacobian.T @ residuals)

    def cost(self, z, origin) -> float:
        self.n_evaluations += 1
        return float(_moment_cost(self.objective, self.moments_of(z, origin), origin))

    def _cheapest(self, candidates, origin) -> int:
        # Index of the cheapest of the candidate moments (k, 4), all costs in one vmapped solve.
        costs = np.asarray(_moment_costs(self.objective, candidates, origin))
        self.n_evaluations += len(candidates)
        return int(np.nanargmin(costs))

    def line_search(self, atoms: _Atoms, vertex: int) -> _Atoms:
        """The Frank-Wolfe step: the best measure `(1 - gamma) mu + gamma W delta_s` of the
        segment towards the atom `vertex` at full weight, `gamma` on a log grid. The grid jumps
        over resonances that trap a local step when a soft measure stiffens past the loads'
        frequencies."""
        origin = self.origin(atoms)
        gammas = np.concatenate([[0.0], np.logspace(-6, 0, LINE_SEARCH_POINTS)])
        current = self.moments_of(jnp.concatenate([jnp.asarray(atoms.t), jnp.asarray(atoms.p)]),
                                  origin)
        target = self.tau * _features(self.curve.at(jnp.asarray(atoms.t[vertex]))[None],
                                      origin)[0]
        gamma = gammas[self._cheapest(
            (1.0 - gammas)[:, None] * current + gammas[:, None] * target, origin)]
        atoms = atoms.copy()
        atoms.p *= 1.0 - gamma
        atoms.p[vertex] += gamma
        return atoms

    def scale_search(self, atoms: _Atoms) -> _Atoms:
        """The best measure `f mu` for `f` on a log grid from 0.1 up to the ceiling: the
        segment towards the zero measure and the ray beyond `mu`. A Gauss-Newton step along
        this ray can be tiny where the residuals oscillate with the measure's translational
        frequency (their derivative is large while the cost falls slowly), so it is searched
        directly."""
        total = atoms.p.sum()
        if total <= 0:
            return atoms
        origin = self.origin(atoms)
        factors = np.concatenate([np.logspace(-1, 0, SCALE_SEARCH_POINTS),
                                  np.logspace(0, -np.log10(total), SCALE_SEARCH_POINTS)[1:]])
        current = self.moments_of(jnp.concatenate([jnp.asarray(atoms.t), jnp.asarray(atoms.p)]),
                                  origin)
        factor = factors[self._cheapest(factors[:, None] * current[None], origin)]
        atoms = atoms.copy()
        atoms.p = np.minimum(atoms.p * factor, 1.0)
        return atoms

    def run(self, atoms: _Atoms, move_positions: bool, max_iterations: int = 60,
            ftol: float = REFIT_FTOL, eligible: np.ndarray | None = None
            ) -> tuple[_Atoms, bool, int]:
        """Minimise over the weights (and the positions of active atoms if `move_positions`)
        subject to `p >= 0`, `sum p <= 1` and `0 <= t <= 1`. A weights-only run may give weight
        to the `eligible` slots (default: the active ones), which become active. Returns the
        atoms, whether the relative cost change fell below `ftol`, and the number of
        iterations."""
        origin = self.origin(atoms)
        a = atoms.t.size
        columns = np.flatnonzero(atoms.active if eligible is None else eligible)
        z = jnp.concatenate([jnp.asarray(atoms.t), jnp.asarray(atoms.p)])
        movable = atoms.active & move_positions
        lower = jnp.concatenate([jnp.where(movable, 0.0, atoms.t), jnp.zeros(a)])
        upper = jnp.concatenate([jnp.where(movable, 1.0, atoms.t),
                                 jnp.where(atoms.active, 1.0, 0.0)])
        in_budget = jnp.concatenate([jnp.zeros(a, bool), jnp.ones(a, bool)])
        jacobian, residuals, _, _ = self.jacobian(z, origin)
        cost = 0.5 * float(jnp.sum(residuals**2))
        damping, converged, iteration = 1e-3, False, 0
        for iteration in range(1, max_iterations + 1):
            if move_positions:
                trial, predicted = _lm_subproblem(z, residuals, *jacobian, damping, lower,
                                                  upper, in_budget)
            else:
                moment_jacobian, chain = jacobian
                weights = np.zeros(a)
                weights[columns], predicted = _weights_subproblem(
                    np.asarray(z[a:])[columns], residuals, moment_jacobian,
                    np.asarray(chain)[:, a:][:, columns], damping)
                trial = jnp.concatenate([z[:a], jnp.asarray(weights)])
            predicted = float(predicted)
            if predicted <= ftol * cost + 1e-300:
                converged = True
                break
            trial_cost = self.cost(trial, origin)
            ratio = (cost - trial_cost) / predicted
            if self.progress == "verbose":
                print(f"    LM {iteration}: cost {cost:.8e}, trial {trial_cost:.8e}, predicted "
                      f"decrease {predicted:.3e}, damping {damping:.2e}", flush=True)
            if ratio > 1e-4:
                change = cost - trial_cost
                z, cost = trial, trial_cost
                jacobian, residuals, _, _ = self.jacobian(z, origin)
                damping = max(damping * max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3), 1e-9)
                if change <= ftol * cost:
                    converged = True
                    break
            else:
                damping *= 4.0
                if damping > 1e16:
                    converged = True  # no descent left at any step length: stationary
                    break
        z = np.asarray(z)
        p = np.clip(z[a:], 0.0, 1.0)
        return _Atoms(z[:a].copy(), p, atoms.active | (p > 0)), converged, iteration


@dataclasses.dataclass
class MeasureResult:
    """A recovered stiffness measure, explaining itself.

    Fields: `method` (`"grid"` or `"off-grid"`); `positions` (m, arc length from the curve's
    first point, `(k,)`), `points` (m, global reference coordinates, `(k, 2)`) and `stiffness`
    (N/m, `(k,)`) of the atoms; `max_stiffness` (N/m, the ceiling on their total); `cost`,
    `n_data`, `converged`; `certified` and `gap` (off the grid: the final Frank-Wolfe gap, in
    cost units, and whether it met the tolerance); `moments` (total stiffness, centroid = pin
    estimate, rotational stiffness `sum K |s - c|^2` of the measure, with standard errors);
    `moment_identifiability` (SVD of the sensitivity to the moments), `atom_identifiability`
    (to the atoms' positions and weights), `atoms_supported` and `support_note`;
    `certificate` (`(arc positions (m), first variation per N/m)` on a fine grid); `history`
    (off the grid: one entry per Frank-Wolfe iteration); `predictions`, `measurements`, `noise`,
    `noise_estimated`, `warnings`, `seconds`, `curve`.
    """

    method: str
    positions: np.ndarray
    points: np.ndarray
    stiffness: np.ndarray
    max_stiffness: float
    cost: float
    n_data: int
    converged: bool
    certified: bool | None
    gap: float | None
    moments: dict
    moment_identifiability: Identifiability
    atom_identifiability: Identifiability
    atoms_supported: int
    support_note: str
    certificate: tuple[np.ndarray, np.ndarray]
    history: list[dict]
    predictions: list[np.ndarray]
    measurements: tuple[Measurement, ...]
    noise: dict[str, float]
    noise_estimated: bool
    warnings: list[str]
    seconds: float
    curve: MeasureCurve

    @property
    def solver(self) -> str:
        """How the measure was found (shown in plots)."""
        return f"{self.method} measure recovery"

    @property
    def pin(self) -> np.ndarray:
        """The stiffness-weighted centroid (m, global, `(2,)`): the pin estimate."""
        return np.asarray(self.moments["centroid"]["value"])

    @property
    def pin_stderr(self) -> np.ndarray:
        """Standard errors of the pin estimate (m, `(2,)`; NaN where not determined)."""
        return np.array([np.nan if e is None else e for e in self.moments["centroid"]["stderr"]])

    def probability(self) -> np.ndarray:
        """The weights normalised to a probability measure (Liu's display), `(k,)`."""
        total = self.stiffness.sum()
        return self.stiffness / total if total > 0 else self.stiffness

    def residuals(self) -> list[np.ndarray]:
        """Raw residuals `data - fit` per measurement, `(k, c)` (SI)."""
        return [m.values - p for m, p in zip(self.measurements, self.predictions)]

    def rms_error(self) -> np.ndarray:
        """Root-mean-square of the raw residuals per channel (SI), `(c,)`."""
        return np.sqrt(np.mean(np.concatenate(self.residuals()) ** 2, axis=0))

    @property
    def line_search_gain(self) -> float | None:
        """The cost decrease of the best Frank-Wolfe step when the recovery was certified by
        line search (the first-order gap overstating what any step achieves), else None."""
        return self.history[-1].get("line_search_gain") if self.history else None

    def report(self) -> dict:
        """JSON-ready report (formats.md `report.json`, with the measure's atoms)."""
        parameters = []
        for i, (position, stiffness) in enumerate(zip(self.positions, self.stiffness)):
            parameters.append({"name": f"springs[{i}].stiffness", "value": float(stiffness),
                               "stderr": None, "unit": "N/m",
                               "point": [float(x) for x in self.points[i]],
                               "arc_position": float(position)})
        ident = self.moment_identifiability.to_dict()
        ident["atoms"] = self.atom_identifiability.to_dict()
        return {
            "converged": bool(self.converged),
            "method": self.method,
            "cost": float(self.cost),
            "n_data": int(self.n_data),
            "seconds": float(self.seconds),
            "max_stiffness": self.max_stiffness,
            "certificate": {"certified": self.certified, "frank_wolfe_gap": self.gap,
                            "line_search_gain": self.line_search_gain},
            "atoms": [{"point": [float(x) for x in point], "arc_position": float(position),
                       "stiffness": float(k), "probability": float(q)}
                      for point, position, k, q in zip(self.points, self.positions,
                                                       self.stiffness, self.probability())],
            "pin": {"value": [float(x) for x in self.pin],
                    "stderr": self.moments["centroid"]["stderr"], "unit": "m"},
            "moments": self.moments,
            "atoms_supported": self.atoms_supported,
            "support_note": self.support_note,
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated},
            "rms_error": {c: float(e) for c, e in zip(("x", "y", "theta"), self.rms_error())},
            "parameters": parameters,
            "identifiability": ident,
            "history": self.history,
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        """A human-readable account of the recovery."""
        pin, error = self.pin * 1e3, self.pin_stderr * 1e3
        lines = [
            f"measure recovery ({self.method}): {'converged' if self.converged else 'NOT converged'}"
            f" in {self.seconds:.2f} s; cost {self.cost:.6g} ({self.n_data} data values)",
        ]
        if self.certified and self.line_search_gain is not None:
            lines.append(f"Frank-Wolfe gap {self.gap:.3g} (first order), but the best "
                         f"Frank-Wolfe step lowers the cost by only {self.line_search_gain:.2g}: "
                         "certified stationary by line search")
        elif self.certified is not None:
            lines.append(f"Frank-Wolfe gap {self.gap:.3g}: "
                         + ("certified stationary" if self.certified else "NOT certified"))
        lines.append(f"{len(self.stiffness)} atom(s), total {self.stiffness.sum():.6g} N/m "
                     f"(ceiling {self.max_stiffness:.4g} N/m)")
        for point, k, q in zip(self.points * 1e3, self.stiffness, self.probability()):
            lines.append(f"  at ({point[0]:8.4f}, {point[1]:8.4f}) mm: {k:12.6g} N/m ({q:.3f})")
        lines.append(
            "pin estimate (stiffness centroid): ("
            + ", ".join(f"{p:.4f} +- {'-' if not np.isfinite(e) else f'{e:.2g}'}"
                        for p, e in zip(pin, error)) + ") mm"
        )
        spread = self.moments["rotational_stiffness"]
        lines.append(f"rotational stiffness of the measure about it: {spread['value']:.4g} N m/rad")
        lines.append(f"atoms the data support: {self.atoms_supported}. {self.support_note}")
        for warning in self.warnings:
            lines.append(f"WARNING: {warning}")
        return "\n".join(lines)

    def fitted_document(self, model_file: ModelFile) -> dict:
        """The model file's document with the atoms as `[[springs]]` (a `planar_pair`)."""
        import copy

        document = copy.deepcopy(model_file.document)
        if document.get("kind") == "pinned_pair":
            document["kind"] = "planar_pair"
            del document["pin"]
        kept = [s for s in document.get("springs", []) if s.get("kind") != "vector"]
        atoms = [{"kind": "vector", "point": [float(x) for x in point], "stiffness": float(k)}
                 for point, k in zip(self.points, self.stiffness)]
        document["springs"] = atoms + kept
        return document


def _sigma(problem: RecoveryProblem) -> np.ndarray:
    if problem.noise is not None:
        return np.array([problem.noise[c] for c in problem.channels])
    # Provisional weights: comparable channels; the noise level comes after the fit.
    return np.maximum(problem.channel_ranges(), 1e-12) * 1e-3


def _estimate_noise(problem, residuals, sigma, n_free) -> np.ndarray:
    raw = np.asarray(residuals).reshape(-1, len(problem.channels)) * sigma
    return noise_from_residuals(raw, n_free, problem.channel_ranges())


def _analyse(problem, solver: _Solver, atoms: _Atoms, positions_free: bool):
    """Moments with standard errors, identifiability and the atoms the data support."""
    keep = atoms.active & (atoms.p > 0)
    kept = _Atoms(atoms.t[keep], atoms.p[keep], np.ones(keep.sum(), bool))
    origin = solver.origin(kept)
    z = jnp.concatenate([jnp.asarray(kept.t), jnp.asarray(kept.p)])
    (moment_jacobian, chain), residuals, predictions, moment_gradient = solver.jacobian(z, origin)
    jacobian = moment_jacobian @ chain
    moments = np.asarray(solver.moments_of(z, origin))
    moment_jacobian, _, _ = _moment_jacobian(solver.objective, jnp.asarray(moments), origin)
    moment_jacobian = np.asarray(moment_jacobian)
    curve, tau = problem.curve, problem.max_stiffness

    # Moment coordinates the measures on this curve can reach: on a straight curve the first
    # moment lies along it.
    if curve.straight:
        direction = (curve.points[-1] - curve.points[0]) / curve.length
        basis = np.zeros((4, 3))
        basis[0, 0], basis[1:3, 1], basis[3, 2] = 1.0, direction, 1.0
        names = ["total_stiffness", "first_moment", "second_moment"]
    else:
        basis = np.eye(4)
        names = ["total_stiffness", "first_moment_x", "first_moment_y", "second_moment"]
    coordinates = np.linalg.lstsq(basis, moments, rcond=None)[0]
    total = float(moments[0])
    at_ceiling = kept.p.sum() >= 1.0 - 1e-6
    active = np.ones(len(names), bool)
    active[0] = not at_ceiling
    length = curve.length
    scales = np.array([max(total, 1e-300), max(total, 1e-300) * length]
                      + [max(total, 1e-300) * length] * (basis.shape[1] - 3)
                      + [max(total, 1e-300) * length**2])
    _, moment_ident = fisher_analysis(moment_jacobian @ basis, coordinates, scales, names, active)
    _, all_moments = fisher_analysis(moment_jacobian @ basis, coordinates, scales, names)

    def to_moments(q):
        return jnp.asarray(basis) @ q

    def centroid(q, axis):
        m = to_moments(q)
        return origin[axis] + m[1 + axis] / m[0]

    def rotational(q):
        m = to_moments(q)
        return m[3] - jnp.sum(m[1:3] ** 2) / m[0]

    q = jnp.asarray(coordinates)

    def with_error(function):
        # A coordinate on its bound (the total on the ceiling) is known, not estimated: the
        # error is conditional on it.
        value = float(function(q))
        gradient = np.where(active, np.asarray(jax.grad(function)(q)), 0.0)
        error = moment_ident.standard_error_of(gradient)
        return value, (None if not np.isfinite(error) else error)

    cx, cx_err = with_error(lambda v: centroid(v, 0))
    cy, cy_err = with_error(lambda v: centroid(v, 1))
    k_rot, k_rot_err = with_error(rotational)
    total_err = None if at_ceiling else with_error(lambda v: to_moments(v)[0])[1]
    moment_report = {
        "total_stiffness": {"value": total, "stderr": total_err, "unit": "N/m",
                            "at_ceiling": bool(at_ceiling)},
        "centroid": {"value": [cx, cy], "stderr": [cx_err, cy_err], "unit": "m"},
        "rotational_stiffness": {"value": k_rot, "stderr": k_rot_err, "unit": "N m/rad"},
    }

    atom_names = [f"atoms[{i}].position" for i in range(kept.t.size)] + [
        f"atoms[{i}].stiffness" for i in range(kept.t.size)]
    atom_values = np.concatenate([kept.t * length, kept.p * tau])
    atom_scales = np.concatenate([np.full(kept.t.size, length), np.maximum(kept.p * tau, 1e-300)])
    atom_jacobian = np.asarray(jacobian) / np.concatenate([np.full(kept.t.size, length),
                                                            np.full(kept.t.size, tau)])
    atom_active = np.concatenate([np.full(kept.t.size, positions_free),
                                  np.full(kept.t.size, not at_ceiling or kept.t.size > 1)])
    _, atom_ident = fisher_analysis(atom_jacobian, atom_values, atom_scales, atom_names,
                                    atom_active)

    spread_significant = (k_rot_err is not None and k_rot > 2.0 * k_rot_err)
    n_moments = all_moments.rank
    if spread_significant:
        supported = 2
        note = (f"The data determine {n_moments} moments of the measure (total stiffness, "
                f"centroid, spread); the spread about the centroid is significantly positive "
                f"({k_rot:.3g} +- {k_rot_err:.2g} N m/rad), so the data call for 2 atoms"
                + (", determined only up to one combination (4 parameters, 3 moments)."
                   if n_moments < 4 else "."))
    else:
        supported = 1
        note = (f"The data determine {n_moments} moments of the measure (total stiffness, "
                f"centroid, spread); the spread is not significantly positive, so one atom "
                f"(a pin) explains them: more atoms are not supported by the data.")
    return dict(
        moments=moment_report, moment_identifiability=moment_ident,
        atom_identifiability=atom_ident, atoms_supported=supported, support_note=note,
        residuals=np.asarray(residuals), predictions=[np.asarray(p) for p in predictions],
        moment_gradient=np.asarray(moment_gradient), origin=np.asarray(origin), kept=kept,
    )


def _finish(problem, solver, atoms, method, positions_free, converged, certified, gap, history,
            sigma, noise_estimated, clock, fine_grid) -> MeasureResult:
    analysis = _analyse(problem, solver, atoms, positions_free)
    kept = analysis["kept"]
    curve, tau = problem.curve, problem.max_stiffness
    t_fine = jnp.linspace(0.0, 1.0, fine_grid)
    certificate = np.asarray(first_variation(
        curve, jnp.asarray(analysis["moment_gradient"]), jnp.asarray(analysis["origin"]), t_fine
    ))
    warnings = []
    error = np.array([np.nan if e is None else e
                      for e in analysis["moments"]["centroid"]["stderr"]])
    if not np.all(np.isfinite(error)) or np.max(error) > 0.1 * curve.length:
        warnings.append(
            "The pin location (stiffness centroid) is poorly determined by these data "
            f"(standard errors {error.tolist()} m against a curve {curve.length:.3g} m long); "
            "do not read the atoms as a location."
        )
    if analysis["moments"]["total_stiffness"]["at_ceiling"]:
        warnings.append(
            f"The total stiffness sits on its ceiling max_stiffness = {tau:.4g} N/m: the data "
            "call for a stiffer joint (an exact pin is infinitely stiff in translation). The "
            "location is still determined; the total is only a lower bound."
        )
    if np.any(analysis["residuals"] == FAILED_RESIDUAL):
        warnings.append("The simulation failed at the recovered measure; do not use it.")
        converged = False
    points = np.asarray(curve.at(jnp.asarray(kept.t))).reshape(-1, 2)
    residuals = analysis["residuals"]
    return MeasureResult(
        method=method,
        positions=kept.t * curve.length,
        points=points,
        stiffness=kept.p * tau,
        max_stiffness=tau,
        cost=float(0.5 * np.sum(residuals**2)),
        n_data=problem.n_data,
        converged=bool(converged),
        certified=certified,
        gap=gap,
        moments=analysis["moments"],
        moment_identifiability=analysis["moment_identifiability"],
        atom_identifiability=analysis["atom_identifiability"],
        atoms_supported=analysis["atoms_supported"],
        support_note=analysis["support_note"],
        certificate=(np.asarray(t_fine) * curve.length, certificate / tau),
        history=history,
        predictions=analysis["predictions"],
        measurements=problem.measurements,
        noise={c: float(s) for c, s in zip(problem.channels, sigma)},
        noise_estimated=noise_estimated,
        warnings=warnings,
        seconds=time.perf_counter() - clock,
        curve=curve,
    )


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, flush=True)


def recover_grid(
    problem: RecoveryProblem,
    n_springs: int,
    *,
    gap_tolerance: float = 1e-3,
    max_rounds: int = 30,
    max_iterations: int = 60,
    simulation_max_steps: int = 50_000,
    progress: bool = False,
) -> MeasureResult:
    """Fixed-grid recovery (Liu 2001, section 3.3): `n_springs` vector springs equally spaced on
    the `[measure]` curve (end points included), nonnegative stiffnesses with total at most
    `problem.max_stiffness`.

    The loss is not convex in the stiffnesses (the motion depends nonlinearly on them, with
    resonances in between), and a fit of all weights from a uniform start stalls at one of its
    other stationary points. So the fit starts from the best vertex of the feasible set: every
    grid spring alone at 1e-3, 1e-2, 0.1 and 1 times the ceiling, all costs in one vmapped
    solve. From there it runs fully corrective Frank-Wolfe over the grid (`recover` with the
    positions held on the grid): add the spring whose first variation is most negative (line
    search on the Frank-Wolfe segment), refit all weights by projected Levenberg-Marquardt
    whose steps are exact nonnegative least-squares problems (`_weights_subproblem`), and stop
    when the Frank-Wolfe gap over the grid is at most `gap_tolerance * max(cost, n_data)`, or
    when the refit stalls and the best Frank-Wolfe step (line search) gains less than that
    (`certified` either way), or after `max_rounds` rounds.

    **Returns:** a `MeasureResult` with all `n_springs` springs (zeros included), the pin
    estimate (stiffness centroid) with its standard error, the identifiability of the moments
    and the certificate.
    """
    if n_springs < 1:
        raise ValueError(f"n_springs={n_springs}: expected at least 1")
    clock = time.perf_counter()
    sigma = _sigma(problem)
    noise_estimated = problem.noise is None
    grid = np.linspace(0.0, 1.0, n_springs) if n_springs > 1 else np.array([0.5])
    solver = _Solver(problem, _objective(problem, sigma, simulation_max_steps), progress)
    atoms = _best_vertex(problem, solver, grid)
    _say(progress, f"  grid N={n_springs}: start from spring {np.flatnonzero(atoms.active)[0]} "
                   f"at {atoms.p.sum():.0e} of the ceiling")
    search = _conditional_gradient(problem, solver, atoms, grid, slide=False,
                                   gap_tolerance=gap_tolerance, max_rounds=max_rounds,
                                   max_iterations=max_iterations)
    if noise_estimated:
        sigma = _estimate_noise(problem, search.residuals, sigma, 3)
        solver = _Solver(problem, _objective(problem, sigma, simulation_max_steps), progress)
        search = _conditional_gradient(problem, solver, search.atoms, grid, slide=False,
                                       gap_tolerance=gap_tolerance, max_rounds=max_rounds,
                                       max_iterations=max_iterations, history=search.history)
    result = _finish(problem, solver, search.atoms, "grid", False, search.converged,
                     search.certified, search.gap, search.history, sigma, noise_estimated,
                     clock, 1001)
    # The grid keeps its zero weights: the figures show the whole grid.
    result.positions = grid * problem.curve.length
    result.points = np.asarray(problem.curve.at(jnp.asarray(grid))).reshape(-1, 2)
    result.stiffness = search.atoms.p * problem.max_stiffness
    return result


FIRST_ATOM_CANDIDATES = 33
"""Positions on the curve at which `recover` tries its first atom alone."""
VERTEX_FRACTIONS = (1e-3, 1e-2, 1e-1, 1.0)
"""Fractions of the ceiling at which a single atom is tried (`_best_vertex`)."""


def _best_vertex(problem: RecoveryProblem, solver: _Solver, grid: np.ndarray) -> _Atoms:
    # The cheapest measure among single grid springs at the VERTEX_FRACTIONS of the ceiling.
    origin = jnp.asarray(problem.curve.at(jnp.asarray(0.5)))
    unit = np.asarray(_features(problem.curve.at(jnp.asarray(grid)), origin))
    fractions = np.asarray(VERTEX_FRACTIONS)
    candidates = (fractions[:, None, None] * problem.max_stiffness * unit[None]).reshape(-1, 4)
    costs = np.concatenate([
        np.asarray(_moment_costs(solver.objective, jnp.asarray(chunk), origin))
        for chunk in np.array_split(candidates, max(1, math.ceil(len(candidates) / 256)))
    ])
    solver.n_evaluations += len(candidates)
    best = int(np.nanargmin(costs))
    atoms = _Atoms(grid.copy(), np.zeros(grid.size), np.zeros(grid.size, bool))
    atoms.p[best % grid.size] = fractions[best // grid.size]
    atoms.active[best % grid.size] = True
    return atoms


def _frank_wolfe_gap(problem, solver, atoms, candidates):
    """`(gap, cost, residuals, first variation per unit weight at the candidates)`."""
    origin = solver.origin(atoms)
    z = jnp.concatenate([jnp.asarray(atoms.t), jnp.asarray(atoms.p)])
    _, residuals, _, moment_gradient = solver.jacobian(z, origin)
    per_weight = problem.max_stiffness * np.asarray(
        first_variation(problem.curve, moment_gradient, origin, candidates))
    at_atoms = problem.max_stiffness * np.asarray(
        first_variation(problem.curve, moment_gradient, origin, jnp.asarray(atoms.t)))
    lowest = min(per_weight.min(), at_atoms[atoms.active].min(initial=np.inf))
    gap = float(np.sum(atoms.p * at_atoms) - min(0.0, lowest))
    return gap, 0.5 * float(np.sum(np.asarray(residuals) ** 2)), residuals, per_weight


@dataclasses.dataclass
class _Search:
    atoms: _Atoms
    converged: bool
    certified: bool
    gap: float
    history: list
    residuals: np.ndarray


def _conditional_gradient(problem, solver, atoms, candidates, *, slide, gap_tolerance,
                          max_rounds, max_iterations, history=None) -> _Search:
    """Fully corrective Frank-Wolfe from `atoms`; with `slide` the atoms are free slots whose
    positions move after each weight refit (sliding Frank-Wolfe), without it the slots are the
    `candidates` themselves (a fixed grid)."""
    history = [] if history is None else history
    t_candidates = jnp.asarray(candidates)
    converged, certified, gap, previous = True, False, math.inf, math.inf
    residuals = None
    for _ in range(max_rounds + 1):
        gap, cost, residuals, per_weight = _frank_wolfe_gap(problem, solver, atoms, t_candidates)
        tolerance = gap_tolerance * max(cost, problem.n_data)
        history.append({"iteration": len(history), "atoms": int(atoms.active.sum()),
                        "cost": cost, "gap": gap})
        _say(solver.progress, f"  Frank-Wolfe {len(history) - 1}: {int(atoms.active.sum())} "
                              f"atom(s), cost {cost:.6e}, gap {gap:.3e} (tolerance "
                              f"{tolerance:.1e})")
        if gap <= tolerance:
            certified = True
            break
        if len(history) > max_rounds:
            _say(solver.progress, f"  {max_rounds} rounds done; stopping uncertified")
            break
        best = int(np.argmin(per_weight))
        shrink = per_weight[best] >= 0.0  # the Frank-Wolfe vertex is the zero measure
        if shrink:
            slot, known = None, False
        elif slide:
            new = float(candidates[best])
            near = atoms.active & (np.abs(atoms.t - new) <= MERGE_FRACTION)
            known = bool(near.any())
            slot = None if known else next(iter(np.flatnonzero(~atoms.active)), None)
        else:
            slot, known = best, bool(atoms.active[best])
        if (shrink or known) and previous - cost <= 1e-9 * cost:
            # Stalled: the refit cannot use the first-order gain the gap promises (the loss is
            # strongly curved along that direction). Take the Frank-Wolfe step itself by line
            # search; if even that gains less than the tolerance, the point is certified by
            # the decrease the best step achieves rather than by its linear bound.
            if shrink:
                trial = solver.scale_search(atoms)
            else:
                index = int(np.flatnonzero(near)[0]) if slide else slot
                trial = solver.line_search(atoms, index)
            gain = cost - solver.cost(jnp.concatenate([jnp.asarray(trial.t),
                                                       jnp.asarray(trial.p)]),
                                      solver.origin(trial))
            if gain <= tolerance:
                certified = True
                history[-1]["line_search_gain"] = float(gain)
                _say(solver.progress, f"  the best Frank-Wolfe step lowers the cost by only "
                                      f"{gain:.2e} (tolerance {tolerance:.1e}): certified by "
                                      "line search")
                break
            atoms = trial
        if not (shrink or known) and slot is None:
            _say(solver.progress, f"  all {atoms.t.size} atom slots used; stopping uncertified")
            break
        previous = cost
        if not (shrink or known):
            if slide:
                atoms.t[slot] = new
            atoms.p[slot], atoms.active[slot] = 0.0, True
            atoms = solver.line_search(atoms, slot)
        # Refit: on the grid, all weights by exact NNLS steps; off the grid, positions and
        # weights together (a weights-only refit of a lone atom crawls: the centroid is off).
        atoms, converged, _ = solver.run(atoms, move_positions=slide,
                                         max_iterations=max_iterations,
                                         eligible=np.ones(atoms.t.size, bool))
        atoms = _prune(solver.scale_search(atoms))
    return _Search(atoms, converged, certified, float(gap), history, np.asarray(residuals))


def recover(
    problem: RecoveryProblem,
    *,
    max_atoms: int = 4,
    fine_grid: int = 2001,
    gap_tolerance: float = 1e-3,
    max_iterations: int = 60,
    simulation_max_steps: int = 50_000,
    progress: bool = False,
) -> MeasureResult:
    """Off-the-grid recovery by sliding Frank-Wolfe over nonnegative measures on the curve.

    Each iteration evaluates the first variation `g(s)` (`first_variation`) on `fine_grid`
    points, computes the Frank-Wolfe gap `sum_i w_i g(s_i) - W min(0, min_s g(s))` (`W` the
    ceiling `problem.max_stiffness`: the most any measure on the curve lowers the linearised
    loss) and stops when it is below `gap_tolerance` times `max(cost, n_data)` (cost in units of
    half a chi-square, whose noise scatter is sqrt(n_data / 2): 1e-3 n_data is 0.05 of it for
    1500 data). Otherwise it adds an atom at the minimiser of `g` (a line search along the
    Frank-Wolfe segment sets its first weight; the first atom is instead the best single atom
    among `FIRST_ATOM_CANDIDATES` positions and `VERTEX_FRACTIONS` of the ceiling, because the
    first variation of the empty measure describes a free body), moves positions and weights
    together (projected Levenberg-Marquardt), searches the scale of the whole measure (`_Solver.scale_search`),
    prunes atoms whose weight falls below `PRUNE_FRACTION` of the total and merges coinciding
    ones. The loss is not convex in the measure (the motion
    depends nonlinearly on the stiffness), so the certificate is one of stationarity, not of
    global optimality.

    **Returns:** a `MeasureResult` with the atoms, the final gap and `certified`, the pin
    estimate with its standard error and how many atoms the data support.
    """
    if max_atoms < 1:
        raise ValueError(f"max_atoms={max_atoms}: expected at least 1")
    clock = time.perf_counter()
    sigma = _sigma(problem)
    noise_estimated = problem.noise is None
    candidates = np.linspace(0.0, 1.0, fine_grid)
    atoms = _Atoms(np.full(max_atoms, 0.5), np.zeros(max_atoms), np.zeros(max_atoms, bool))
    solver = _Solver(problem, _objective(problem, sigma, simulation_max_steps), progress)
    # The first atom: the first variation of the empty measure describes a free body, a poor
    # guide, so the best single atom on a coarse grid starts the measure (`_best_vertex`).
    first = _best_vertex(problem, solver, np.linspace(0.0, 1.0, FIRST_ATOM_CANDIDATES))
    atoms.t[0], atoms.p[0], atoms.active[0] = first.t[first.active][0], first.p.sum(), True
    settings = dict(slide=True, gap_tolerance=gap_tolerance, max_rounds=2 * max_atoms + 1,
                    max_iterations=max_iterations)
    search = _conditional_gradient(problem, solver, atoms, candidates, **settings)
    if noise_estimated:
        sigma = _estimate_noise(problem, search.residuals, sigma,
                                2 * int(search.atoms.active.sum()))
        solver = _Solver(problem, _objective(problem, sigma, simulation_max_steps), progress)
        search = _conditional_gradient(problem, solver, search.atoms, candidates,
                                       history=search.history, **settings)
    return _finish(problem, solver, search.atoms, "off-grid", True, search.converged,
                   search.certified, search.gap, search.history, sigma, noise_estimated, clock,
                   fine_grid)


def _prune(atoms: _Atoms) -> _Atoms:
    atoms = atoms.copy()
    total = atoms.p[atoms.active].sum()
    atoms.active &= atoms.p > PRUNE_FRACTION * max(total, 1e-300)
    order = np.flatnonzero(atoms.active)
    for i in order:
        for j in order:
            if j > i and atoms.active[i] and atoms.active[j] and \
                    abs(atoms.t[i] - atoms.t[j]) <= MERGE_FRACTION:
                weight = atoms.p[i] + atoms.p[j]
                atoms.t[i] = (atoms.p[i] * atoms.t[i] + atoms.p[j] * atoms.t[j]) / weight
                atoms.p[i], atoms.active[j] = weight, False
    atoms.p[~atoms.active] = 0.0
    return atoms
