"""The projected Levenberg-Marquardt method on the positions and weights of a measure's atoms:
box and total-stiffness constraints, exact nonnegative least-squares refits of the weights,
and pruning and merging of atoms.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ...elements._planar_springs import spring_moments
from ._recovery_problem import (
    RecoveryProblem, _MeasureObjective, _features, _moment_cost, _moment_costs,
    _moment_jacobian,
)


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

    import jaxopt  # when first needed: it imports scipy.optimize

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
