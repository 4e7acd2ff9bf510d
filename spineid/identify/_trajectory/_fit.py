"""Least-squares identification through the ODE solve: the problem, the solvers, the result.

The residuals are `r = (observe(simulate(model(theta))) - data) / sigma`, stacked over samples,
channels and load cases (Liu 2001, eq 2-24, with noise weighting). Levenberg-Marquardt gets its
Jacobian by forward-mode autodiff through diffrax; first-order methods (optax) use reverse mode.
"""

import time

import jax.numpy as jnp
import numpy as np

from .._common._analysis import value_scales
from .._common._failure import failed
from .._common._noise import check_noise
from .._common._uncertainty import Identifiability, fisher_analysis
from .._solvers import (
    AbstractLocalSolver,
    as_solver,
    Auto,
    check_solver,
    MultipleShooting,
    MultiStart,
)
from ._objective import _evaluate, forward_objective, resolved_scales
from ._problem import FitProblem
from ._result import FitResult
from ._run import _Run


TRAJECTORY_SOLVERS = (AbstractLocalSolver, MultipleShooting, MultiStart, Auto)
"""The solvers a trajectory fit takes (`spineid.VariableProjection` is for load laws)."""


def fit(problem: FitProblem, solver="auto", *, progress: bool | str = False) -> FitResult:
    """Fit the free parameters of `problem` by least squares through the ODE solve.

    **Arguments:**
    - `problem`: a `FitProblem` (model, data, free parameters, noise, simulation tolerances).
    - `solver`: a solver object carrying its options (`spineid.Auto()`, the default;
      `spineid.LevenbergMarquardt(...)`, `spineid.OptimistixLevenbergMarquardt(...)`,
      `spineid.JaxoptLevenbergMarquardt(...)`, `spineid.Adam(...)`, `spineid.LBFGS(...)`,
      `spineid.MultiStart(inner, n=...)`), or one of the command line's names (`"auto"`,
      `"lm"`, `"jaxopt-lm"`, `"optimistix-lm"`, `"adam"`, `"lbfgs"`) for its defaults.
    - `progress`: `True` prints the fit's stages and one line per local solve (steps, cost);
      `"steps"` also prints every solver step as it is taken (a host callback inside the
      compiled solve: that program is then compiled again in every process instead of being
      loaded from the persistent compilation cache, `spineid/_cache.py`).

    With the noise estimated (`problem.noise` is `None`) the fit runs with provisional weights
    (its statistical stop measured against the level its residuals show), estimates the noise
    per channel from its residuals and refines the fit with those, repeating the estimate and
    the refit until the estimate settles (`_Run.refine`). Under the problem's noise model
    (`FitProblem(noise_model=...)`, default `"auto"`) a channel whose residuals are correlated
    gets an autoregression, and the fit is refined again by generalized least squares under it
    (`_trajectory/_correlated.py`): its standard errors hold under that noise, with Newey-West
    errors of the white-weighted fit beside them (`stderr_robust`), and the verdict has three
    levels (`GoodnessOfFit.level`: explains, describes with a smooth misfit within
    `problem.max_misfit` of each channel's range, does not describe).

    **Returns:** a `FitResult`: values, Cramer-Rao standard errors, correlations,
    identifiability (SVD of the noise-weighted sensitivities), convergence, residuals, and
    whether the model explains the data (`goodness_of_fit`).
    """
    solver = check_solver("fit", as_solver(solver), TRAJECTORY_SOLVERS,
                          "a solver of trajectories: a local one (LevenbergMarquardt, "
                          "OptimistixLevenbergMarquardt, JaxoptLevenbergMarquardt, Adam, LBFGS), "
                          "MultipleShooting, MultiStart or Auto")
    clock = time.perf_counter()
    run = _Run(problem, solver.local(), progress)
    outcome, description = solver.search(run)
    return run.finish(outcome, clock, description)


def _noise_array(problem: FitProblem, noise: dict[str, float] | None) -> np.ndarray:
    noise = problem.noise if noise is None else check_noise(problem.channels, noise)
    if noise is None:
        raise ValueError("give the measurement noise per channel (noise=...) for this analysis "
                         "(a posterior also takes a fit's: posterior(problem, fit=result))")
    return np.array([noise[c] for c in problem.channels])


def analyse(
    problem: FitProblem, values=None, noise: dict[str, float] | None = None
) -> tuple[np.ndarray, Identifiability]:
    """What the data of `problem` would determine at parameter `values` (default: the start).

    Computes the noise-weighted sensitivity matrix by forward-mode autodiff through the ODE and
    returns `(covariance, identifiability)` as `fisher_analysis` does: the Cramer-Rao bound and
    the identifiable combinations. Useful to design experiments before fitting. `noise`
    defaults to the problem's; the simulations use the problem's `simulation_rtol`,
    `simulation_atol` and `simulation_max_steps`. Raises `ValueError` where the model cannot
    be simulated at `values`.
    """
    theta = problem.start if values is None else np.asarray(values, dtype=float)
    transform = problem.transform()
    objective = forward_objective(problem, _noise_array(problem, noise), transform)
    jacobian, residuals, _ = _evaluate(objective, jnp.asarray(theta))
    if np.any(failed(residuals)):
        raise ValueError(
            f"analyse: the model cannot be simulated at these values within the problem's "
            f"simulation_max_steps={problem.simulation_max_steps} (rtol "
            f"{problem.simulation_rtol:g}), so its sensitivities are not known there")
    jacobian = np.asarray(jacobian)
    scales = resolved_scales(jacobian, theta, value_scales(theta, transform))
    return fisher_analysis(jacobian, theta, scales, problem.names)
