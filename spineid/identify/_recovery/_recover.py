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
import time

import jax.numpy as jnp
import numpy as np

from .._solvers import check_solver, GridFrankWolfe, SlidingFrankWolfe
from ._recovery_problem import (
    RecoveryProblem, _features, _moment_costs, _objective, first_variation,
)
from ._recovery_result import lowers, MeasureResult, _estimate_noise, _finish, _sigma
from ._recovery_solver import MERGE_FRACTION, _Atoms, _prune, _Solver


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, flush=True)


def recover_grid(problem: RecoveryProblem, n_springs: int | GridFrankWolfe, *,
                 progress: bool = False) -> MeasureResult:
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
    (`certified` either way), or after `max_rounds` rounds. `n_springs` is the number of
    springs, or a `spineid.GridFrankWolfe` that carries it with the other options
    (`gap_tolerance`, `max_rounds`, `max_iterations`, `simulation_max_steps`); it is
    `recover(problem, GridFrankWolfe(...))`. `progress` prints each round.

    **Returns:** a `MeasureResult` with all `n_springs` springs (zeros included), the pin
    estimate (stiffness centroid) with its standard error, the identifiability of the moments
    and the certificate.
    """
    options = n_springs if isinstance(n_springs, GridFrankWolfe) else GridFrankWolfe(n_springs)
    n_springs, steps = options.n_springs, options.simulation_max_steps
    settings = dict(slide=False, gap_tolerance=options.gap_tolerance,
                    max_rounds=options.max_rounds, max_iterations=options.max_iterations)
    clock = time.perf_counter()
    sigma = _sigma(problem)
    noise_estimated = problem.noise is None
    grid = np.linspace(0.0, 1.0, n_springs) if n_springs > 1 else np.array([0.5])
    solver = _Solver(problem, _objective(problem, sigma, steps), progress)
    atoms = _best_vertex(problem, solver, grid, options.vertex_batch)
    _say(progress, f"  grid N={n_springs}: start from spring {np.flatnonzero(atoms.active)[0]} "
                   f"at {atoms.p.sum():.0e} of the ceiling")
    search = _conditional_gradient(problem, solver, atoms, grid, **settings)
    if noise_estimated:
        sigma = _estimate_noise(problem, search.residuals, sigma, 3)
        solver = _Solver(problem, _objective(problem, sigma, steps), progress)
        search = _conditional_gradient(problem, solver, search.atoms, grid,
                                       history=search.history, **settings)
    result = _finish(problem, solver, search.atoms, "grid", False, search.converged,
                     search.certified, search.gap, search.history, sigma, noise_estimated,
                     clock, 1001)
    # The grid keeps its zero weights: the figures show the whole grid.
    return dataclasses.replace(
        result, positions=grid * problem.curve.length,
        points=np.asarray(problem.curve.at(jnp.asarray(grid))).reshape(-1, 2),
        stiffness=search.atoms.p * problem.max_stiffness)


FIRST_ATOM_CANDIDATES = 33
"""Positions on the curve at which `recover` tries its first atom alone."""


VERTEX_FRACTIONS = (1e-3, 1e-2, 1e-1, 1.0)
"""Fractions of the ceiling at which a single atom is tried (`_best_vertex`)."""


def even_batches(rows: np.ndarray, batch: int) -> list[np.ndarray]:
    """`rows` `(n, ...)` in `ceil(n / batch)` batches of one size (at most `batch`), the last
    padded with copies of the last row (fewer than the number of batches), so that a vmapped
    program compiles once for all of them: a batch's results past `n` in all are padding."""
    count = max(1, math.ceil(len(rows) / batch))
    size = math.ceil(len(rows) / count)
    padded = np.concatenate([rows, np.repeat(rows[-1:], count * size - len(rows), axis=0)])
    return np.split(padded, count)


def _best_vertex(problem: RecoveryProblem, solver: _Solver, grid: np.ndarray,
                 batch: int = GridFrankWolfe.vertex_batch) -> _Atoms:
    # The cheapest measure among single grid springs at the VERTEX_FRACTIONS of the ceiling,
    # `batch` of them simulated in one vmapped solve.
    origin = jnp.asarray(problem.curve.at(jnp.asarray(0.5)))
    unit = np.asarray(_features(problem.curve.at(jnp.asarray(grid)), origin))
    fractions = np.asarray(VERTEX_FRACTIONS)
    candidates = (fractions[:, None, None] * problem.max_stiffness * unit[None]).reshape(-1, 4)
    batches = even_batches(candidates, batch)
    if solver.progress and len(batches) > 1:
        # (A large grid's silent part otherwise: 8000 simulations for N = 2000, about a
        # minute on a 2-core CPU; the bar's estimate of the time left from the second batch.)
        from tqdm import tqdm

        batches = tqdm(batches, desc=f"  grid N={grid.size}: each spring alone at "
                       f"{len(fractions)} fractions of the ceiling", unit="batch",
                       leave=False)
    costs = np.concatenate([
        np.asarray(_moment_costs(solver.objective, jnp.asarray(chunk), origin))
        for chunk in batches
    ])[:len(candidates)]  # (the last batch's padding off)
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
    residuals = np.asarray(residuals)[solver.objective.data_rows()]  # (the padding off)
    return gap, 0.5 * float(np.sum(residuals**2)), residuals, per_weight


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
    first = len(history)  # (this search's rounds: a refit after the noise estimate has its own)
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
        if len(history) - first > max_rounds:
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
                _say(solver.progress, f"  the best Frank-Wolfe step {lowers(gain)} (tolerance "
                                      f"{tolerance:.1e}): certified by line search")
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


def recover(problem: RecoveryProblem, solver: SlidingFrankWolfe | GridFrankWolfe | None = None,
            *, progress: bool = False) -> MeasureResult:
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

    `solver` carries the options (default `spineid.SlidingFrankWolfe()`: at most 4 atoms, the
    first variation on 2001 points, the gap tolerance above, 60 iterations per refit); a
    `spineid.GridFrankWolfe(n_springs, ...)` recovers on a fixed grid instead
    (`recover_grid`). `progress` prints each round.

    **Returns:** a `MeasureResult` with the atoms, the final gap and `certified`, the pin
    estimate with its standard error and how many atoms the data support. Raises `ValueError`
    for a solver that is neither.
    """
    solver = SlidingFrankWolfe() if solver is None else check_solver(
        "recover", solver, (SlidingFrankWolfe, GridFrankWolfe),
        "a spineid.SlidingFrankWolfe(...) or a spineid.GridFrankWolfe(n_springs, ...)")
    if isinstance(solver, GridFrankWolfe):
        return recover_grid(problem, solver, progress=progress)
    max_atoms, fine_grid = solver.max_atoms, solver.fine_grid
    gap_tolerance, max_iterations = solver.gap_tolerance, solver.max_iterations
    simulation_max_steps = solver.simulation_max_steps
    clock = time.perf_counter()
    sigma = _sigma(problem)
    noise_estimated = problem.noise is None
    candidates = np.linspace(0.0, 1.0, fine_grid)
    atoms = _Atoms(np.full(max_atoms, 0.5), np.zeros(max_atoms), np.zeros(max_atoms, bool))
    fitter = _Solver(problem, _objective(problem, sigma, simulation_max_steps), progress)
    # The first atom: the first variation of the empty measure describes a free body, a poor
    # guide, so the best single atom on a coarse grid starts the measure (`_best_vertex`).
    first = _best_vertex(problem, fitter, np.linspace(0.0, 1.0, FIRST_ATOM_CANDIDATES))
    atoms.t[0], atoms.p[0], atoms.active[0] = first.t[first.active][0], first.p.sum(), True
    settings = dict(slide=True, gap_tolerance=gap_tolerance, max_rounds=2 * max_atoms + 1,
                    max_iterations=max_iterations)
    search = _conditional_gradient(problem, fitter, atoms, candidates, **settings)
    if noise_estimated:
        sigma = _estimate_noise(problem, search.residuals, sigma,
                                2 * int(search.atoms.active.sum()))
        fitter = _Solver(problem, _objective(problem, sigma, simulation_max_steps), progress)
        search = _conditional_gradient(problem, fitter, search.atoms, candidates,
                                       history=search.history, **settings)
    return _finish(problem, fitter, search.atoms, "off-grid", True, search.converged,
                   search.certified, search.gap, search.history, sigma, noise_estimated, clock,
                   fine_grid)
