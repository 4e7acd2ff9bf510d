"""Levenberg-Marquardt for residuals computed through an ODE solve, with a statistical stop.

Minimises `1/2 |r(u)|^2` for noise-weighted residuals `r` (`(n,)`) of unconstrained parameters
`u` (`(p,)`), with the damping update of Madsen, Nielsen and Tingleff ("Methods for non-linear
least squares problems", 2004, Algorithm 3.16: `(J^T J + mu I) h = -J^T r`, gain ratio
`rho`, `mu <- mu max(1/3, 1 - (2 rho - 1)^3)` on success, `mu <- mu nu, nu <- 2 nu` on
failure). The damping `mu I` acts on spineid's unconstrained coordinates, which are relative
(logarithmic) changes for positive parameters, so it limits relative steps; Marquardt's scaling
`mu diag(J^T J)` saved steps on well-posed fits (5 instead of 8 on notebook 6's head-neck fit)
but let a weakly determined stiffness jump by a factor 1e5 and stall on a parameter that heads
for its bound, so it is not used. Two things differ from general-purpose implementations, both because a residual
evaluation here is a whole simulation:

- The residuals and the Jacobian of an accepted point come from ONE forward-mode pass
  (`jax.jacfwd` with the residuals as auxiliary output), and a rejected trial costs only its
  residuals (`lax.cond`), never a Jacobian. The pass is traced once, inside the loop, so
  compiling a fit costs one Jacobian through the ODE, not two.
- It stops when the remaining decrease of the cost that the Gauss-Newton model predicts,
  `delta = 1/2 g^T (J^T J)^+ g` with `g = J^T r` (the Newton decrement), falls below
  `decrement_tol` times the scale of the noise (`max(1, 2 cost / (n - p))`). With residuals
  divided by their noise, `2 delta` is the squared distance of the current point from the
  optimum of the model in standard errors (the Mahalanobis norm of the Fisher information), so
  the default `1e-4` stops within about 0.014 standard errors: iterating further changes no
  reported digit that the data support. A rank-deficient Jacobian (unidentifiable directions)
  is handled by the pseudo-inverse: only identifiable directions count. The classical tests on
  a small gradient (`gtol`) and a small step (`xtol`, relative to `|u|`) also stop it.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

DECREMENT_TOL = 1e-4
"""Default statistical stop: Gauss-Newton decrement in (noise-scaled) half chi-square units."""

_TAU = 1e-3  # initial damping relative to the largest diagonal entry of J^T J (MNT 2004)
_MAX_DAMPING = 1e16  # relative to the largest diagonal entry: the model is no longer trusted


class LeastSquaresSolution(eqx.Module):
    """Result of `levenberg_marquardt`.

    Fields: `value` (`(p,)`, the solution), `residuals` (`(n,)`) and `jacobian` (`(n, p)`,
    `dr/du`) at it, `cost` (`1/2 |r|^2`), `decrement` (the Gauss-Newton decrement left),
    `converged` (a stopping test was met, not `max_steps`), `steps` (iterations, accepted or
    not), `jacobians` (forward-mode passes made).
    """

    value: Float[Array, " p"]
    residuals: Float[Array, " n"]
    jacobian: Float[Array, "n p"]
    cost: Float[Array, ""]
    decrement: Float[Array, ""]
    converged: Array
    steps: Array
    jacobians: Array


def _linearise(function, u):
    def with_aux(v):
        r = function(v)
        return r, r

    jacobian, residuals = jax.jacfwd(with_aux, has_aux=True)(u)
    return residuals, jacobian


def _decrement(gradient, normal):
    # 1/2 g^T (J^T J)^+ g by a symmetric eigendecomposition; eigenvalues below a relative
    # cutoff (directions the data do not determine) are left out.
    eigenvalues, vectors = jnp.linalg.eigh(normal)
    cutoff = 1e-14 * jnp.max(jnp.abs(eigenvalues))
    projected = vectors.T @ gradient
    safe = jnp.where(eigenvalues > cutoff, eigenvalues, 1.0)
    return 0.5 * jnp.sum(jnp.where(eigenvalues > cutoff, projected**2 / safe, 0.0))


@eqx.filter_jit
def levenberg_marquardt(function, u0: Float[Array, " p"], *, max_steps: int = 200,
                        decrement_tol: float = DECREMENT_TOL, xtol: float = 1e-10,
                        gtol: float = 1e-10, progress: bool = False) -> LeastSquaresSolution:
    """Minimise `1/2 |function(u)|^2` from `u0` (the method and its stop: the docstring of
    `spineid._least_squares`; Madsen, Nielsen and Tingleff 2004, Algorithm 3.16).

    **Arguments:** `function(u) -> r`, residuals `(n,)` of parameters `(p,)`, differentiable in
    forward mode (an ODE solve with `diffrax.ForwardMode()`); a failed evaluation should return
    large finite residuals so that the step is rejected. `max_steps` bounds the iterations;
    `decrement_tol` (statistical stop), `xtol` (step relative to `|u|`) and `gtol` (largest
    gradient entry) are the stopping tests; `progress` prints every accepted step.

    **Returns:** a `LeastSquaresSolution`. Jit-compiled; `vmap`-able over `u0` (then both
    branches of the step run for every member, as `lax.cond` becomes a select).
    """
    n = jax.eval_shape(function, u0).shape[0]
    p = u0.shape[0]
    dof = max(n - p, 1)

    def measures(residuals, jacobian):
        gradient = jacobian.T @ residuals
        normal = jacobian.T @ jacobian
        cost = 0.5 * jnp.sum(residuals**2)
        return gradient, normal, cost

    def stopped(u, step, gradient, normal, cost):
        noise_scale = jnp.maximum(1.0, 2.0 * cost / dof)
        statistical = _decrement(gradient, normal) <= decrement_tol * noise_scale
        small_gradient = jnp.max(jnp.abs(gradient)) <= gtol
        small_step = jnp.linalg.norm(step) <= xtol * (jnp.linalg.norm(u) + xtol)
        return statistical | small_gradient | small_step

    # The Jacobian is computed at the top of an iteration that follows an accepted step (the
    # point is "stale"), so that a single forward-mode pass appears in the compiled loop: a
    # second copy (for the start) would double the compilation, which for a Jacobian through
    # an ODE solve takes longer than most fits.
    dtype = u0.dtype
    state = dict(u=u0, residuals=jnp.zeros(n, dtype), jacobian=jnp.zeros((n, p), dtype),
                 damping=jnp.asarray(-1.0, dtype), increase=jnp.asarray(2.0, dtype),
                 step=jnp.full_like(u0, jnp.inf), steps=jnp.asarray(0), passes=jnp.asarray(0),
                 stale=jnp.asarray(True), done=jnp.asarray(False),
                 hopeless=jnp.asarray(False))

    def cond(state):
        going = ~state["done"] & ~state["hopeless"] & (state["steps"] < max_steps)
        return going | state["stale"]

    def body(state):
        u, step = state["u"], state["step"]
        residuals, jacobian, passes = jax.lax.cond(
            state["stale"],
            lambda: _linearise(function, u) + (state["passes"] + 1,),
            lambda: (state["residuals"], state["jacobian"], state["passes"]))
        gradient, normal, cost = measures(residuals, jacobian)
        largest = jnp.max(jnp.diag(normal))
        damping = jnp.where(state["damping"] < 0, _TAU * largest, state["damping"])
        done = stopped(u, step, gradient, normal, cost)
        if progress:
            jax.debug.print("  LM step {s}: cost {c:.6e}, damping {d:.3g}, decrement {g:.3g}",
                            s=state["steps"], c=cost, d=damping, g=_decrement(gradient, normal),
                            ordered=True)

        def take_step(_):
            step = jnp.linalg.solve(normal + damping * jnp.eye(p, dtype=dtype), -gradient)
            trial_residuals = function(u + step)
            trial_cost = 0.5 * jnp.sum(trial_residuals**2)
            predicted = 0.5 * step @ (damping * step - gradient)
            gain = (cost - trial_cost) / jnp.maximum(predicted, jnp.finfo(dtype).tiny)
            accept = (gain > 0) & jnp.isfinite(trial_cost)
            return (jnp.where(accept, u + step, u),
                    jnp.where(accept, trial_residuals, residuals),
                    jnp.where(accept,
                              damping * jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3),
                              damping * state["increase"]),
                    jnp.where(accept, 2.0, 2.0 * state["increase"]), accept, step)

        def no_step(_):
            return u, residuals, damping, state["increase"], jnp.asarray(False), step

        may_step = ~done & (state["steps"] < max_steps)
        u, residuals, damping, increase, accepted, step = jax.lax.cond(
            may_step, take_step, no_step, None)
        return dict(u=u, residuals=residuals, jacobian=jacobian, damping=damping,
                    increase=increase, step=step, steps=state["steps"] + may_step,
                    passes=passes, stale=accepted, done=done,
                    hopeless=damping > _MAX_DAMPING * jnp.maximum(largest, 1e-300))

    state = jax.lax.while_loop(cond, body, state)
    gradient, normal, cost = measures(state["residuals"], state["jacobian"])
    return LeastSquaresSolution(state["u"], state["residuals"], state["jacobian"], cost,
                                _decrement(gradient, normal), state["done"], state["steps"],
                                state["passes"])
