"""Levenberg-Marquardt for residuals computed through an ODE solve, with a statistical stop.

Minimises `1/2 |r(u)|^2` for noise-weighted residuals `r` (`(n,)`) of unconstrained parameters
`u` (`(p,)`), with the damping update of Madsen, Nielsen and Tingleff ("Methods for non-linear
least squares problems", 2004, Algorithm 3.16: `(J^T J + mu I) h = -J^T r`, gain ratio
`rho`, `mu <- mu max(1/3, 1 - (2 rho - 1)^3)` on success, `mu <- mu nu, nu <- 2 nu` on
failure). The damping `mu I` acts on spineid's unconstrained coordinates, which are relative
(logarithmic) changes for positive parameters, so it limits relative steps; Marquardt's scaling
`mu diag(J^T J)` saved steps on well-posed fits (5 instead of 8 on notebook 6's head-neck fit)
but let a weakly determined stiffness jump by a factor 1e5 and stall on a parameter that heads
for its bound, so it is not used. What differs from general-purpose implementations comes from
a residual evaluation here being a whole simulation:

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
  reported digit that the data support. Where the weights are a placeholder for a noise still
  to be estimated (`provisional`), the scale is `2 cost / (n - p)` without the floor at 1: the
  stop is then measured against the noise level the residuals show, however far below the
  placeholder it is. A rank-deficient Jacobian (unidentifiable directions)
  is handled by the pseudo-inverse: only identifiable directions count. The classical tests on
  a small gradient (`gtol`) and a small step (`xtol`, relative to `|u|`) also stop it.
- Near the optimum (decrement below 100 `decrement_tol`, within about 0.14 standard errors)
  an accepted step no larger than 1e-3 in every unconstrained coordinate (0.1% for a positive
  parameter) keeps its Jacobian: the stop is tested with it and the new residuals, and only
  if that fails is a new pass made. The Jacobian returned then belongs to a point at most that
  step away, which changes standard errors by far less than their own uncertainty; the pass
  it saves is, on a 6-parameter ODE fit, worth about seven simulations.
- A stall also stops it, as converged: three tries in a row from exact Jacobians, one of them
  rejected, that each lowered the cost by less than the statistical stop's threshold, with a
  decrement left below 1000 times it (within about 0.45 standard errors). The linear model
  then promises a decrease that no damping delivers: the cost is resolved no finer than the
  residuals' own numerical error (an ODE solved to its tolerance), or it falls towards an
  asymptote along a direction the data barely determine. Measured on an OpenSim neck's 24
  bushing stiffnesses, where one stiffness heads for infinity: refits that had crawled 18 and
  35 steps at 3.9 s each, the cost unchanged in its seventh digit, a decrement of 0.011 left.
- Optionally (`inexact_jacobians`) the Jacobians on the way are cheap approximations (an ODE
  at a looser tolerance). A Jacobian error changes the path, not the optimum: the condition
  `J^T r = 0` and the stop are checked with an exact Jacobian and exact residuals. The solver
  turns exact for good when an inexact step is rejected or lowers the cost by less than 20%
  (near the optimum, or a misleading Jacobian: 89 crawling steps instead of 9 on the spatial
  pair with Jacobians at rtol 1e-2 before this rule), and when an exact Jacobian taken to
  confirm an inexact stop (decrement below 100 `decrement_tol`) does not confirm it.
- Optionally (`single_pass`) every trial point is evaluated with its Jacobian, so the compiled
  loop holds one traced evaluation instead of two (residuals, and residuals with Jacobian).
  Where compiling the residuals costs more than running them, as through the nine equilibrium
  solves of a segment fit (19.5 s to compile the residuals alone, 24 s with their Jacobian, a
  warm fit 0.04 s on a 2-core CPU), this nearly halves the time of a fit; a rejected trial
  then costs a Jacobian. The damping update and the stopping tests are the same.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..._programs import placement_device, stored_call

DECREMENT_TOL = 1e-4
"""Default statistical stop: Gauss-Newton decrement in (noise-scaled) half chi-square units."""

_TAU = 1e-3  # initial damping relative to the largest diagonal entry of J^T J (MNT 2004)
_NEAR = 100.0  # decrement (in units of decrement_tol) within ~0.14 standard errors
_FINAL_STEP = 1e-3  # largest final step (unconstrained units) that keeps its Jacobian
_COARSE_PROGRESS = 0.2  # an inexact Jacobian's step that lowers the cost less ends that phase
_MAX_DAMPING = 1e16  # relative to the largest diagonal entry: the model is no longer trusted
_STALL_STEPS = 3  # tries in a row, one rejected, that lowered the cost by under the stop's ...
_STALL = 1000.0  # ... threshold, with a decrement left under this many (~0.45 standard errors)


class LeastSquaresSolution(eqx.Module):
    """Result of `levenberg_marquardt`.

    Fields: `value` (`(p,)`, the solution), `residuals` (`(n,)`) at it, `jacobian` (`(n, p)`,
    `dr/du`, exact) at it or one final small step before it (module docstring), `cost`
    (`1/2 |r|^2`), `decrement` (the Gauss-Newton decrement left), `converged` (a stopping test
    was met, not `max_steps`), `steps` (iterations that tried a step, accepted or not),
    `jacobians` (forward-mode passes made, exact or not), `damping` (the damping left, for a
    refit that starts where this fit ended: `levenberg_marquardt(damping=...)`),
    `linearised_at` (`(p,)`: where `jacobian` was taken, `value` or the point before a final
    small step; a caller that maps the Jacobian to other coordinates takes their slope there).
    """

    value: Float[Array, " p"]
    residuals: Float[Array, " n"]
    jacobian: Float[Array, "n p"]
    cost: Float[Array, ""]
    decrement: Float[Array, ""]
    converged: Array
    steps: Array
    jacobians: Array
    damping: Array
    linearised_at: Float[Array, " p"]


def _linearise(function, u, exact):
    def with_aux(v):
        r = function(v, exact)
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


def _noise_scale(cost, dof, provisional):
    # The scale of the statistical stop: the noise level the residuals show, `2 cost / dof`,
    # but never below the level the weights assume (1), unless the weights are provisional
    # (a placeholder noise, to be estimated from the residuals), when it counts either way.
    # (`provisional` may be a traced boolean: one compilation serves both kinds of pass.)
    scale = 2.0 * cost / dof
    return jnp.where(provisional, scale, jnp.maximum(1.0, scale))


def _stopped(decrement, threshold, gradient, step, u, xtol, gtol):
    # The stopping tests: the statistical one (the decrement below `threshold`), a small
    # gradient, a small step relative to `u`.
    return ((decrement <= threshold) | (jnp.max(jnp.abs(gradient)) <= gtol)
            | (jnp.linalg.norm(step) <= xtol * (jnp.linalg.norm(u) + xtol)))


def _stall_counts(stalled, rejections, tried, exact, accepted, decrease, threshold):
    # The run of tries in a row, from exact Jacobians, that lowered the cost by less than
    # `threshold` (nothing a statistic can see), and how many of them were rejected: `(stalled,
    # rejections)` after this iteration's try (`tried`) or none.
    small = tried & exact & (decrease < threshold)
    return (jnp.where(small, stalled + 1, jnp.where(tried, 0, stalled)),
            jnp.where(small, rejections + jnp.where(accepted, 0, 1),
                      jnp.where(tried, 0, rejections)))


def _stalled(stalled, rejections, decrement, threshold):
    # The stop on a stall (module docstring): the linear model promises a decrease that tries
    # of every damping do not deliver, and what it promises is statistically small.
    return (stalled >= _STALL_STEPS) & (rejections > 0) & (decrement <= _STALL * threshold)


def _damped_step(normal, gradient, damping):
    # The step `(J^T J + mu I) h = -J^T r` and the decrease of the cost the model predicts
    # for it, `1/2 h^T (mu h - g)` (MNT 2004, eq 3.13 and Algorithm 3.16).
    p = gradient.shape[0]
    step = jnp.linalg.solve(normal + damping * jnp.eye(p, dtype=gradient.dtype), -gradient)
    return step, 0.5 * step @ (damping * step - gradient)


def _judged(cost, trial_cost, predicted, damping, increase):
    # Gain ratio of a trial, whether it is accepted, and the damping after it (MNT 2004,
    # Algorithm 3.16): `(accept, damping, increase)`.
    tiny = jnp.finfo(jnp.result_type(cost)).tiny
    gain = (cost - trial_cost) / jnp.maximum(predicted, tiny)
    accept = (gain > 0) & jnp.isfinite(trial_cost)
    return (accept,
            jnp.where(accept, damping * jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3),
                      damping * increase),
            jnp.where(accept, 2.0, 2.0 * increase))


def _hopeless(damping, largest):
    # Damping so large that the linear model is no longer trusted anywhere.
    return damping > _MAX_DAMPING * jnp.maximum(largest, 1e-300)


@eqx.filter_jit
def levenberg_marquardt(function, u0: Float[Array, " p"], *, max_steps: int = 200,
                        decrement_tol: float = DECREMENT_TOL, xtol: float = 1e-10,
                        gtol: float = 1e-10, inexact_jacobians: bool = False,
                        progress: bool = False, linearise=None,
                        single_pass: bool = False,
                        provisional: bool = False, samples=None,
                        damping=None) -> LeastSquaresSolution:
    """Minimise `1/2 |function(u)|^2` from `u0` (the method and its stops: the docstring of
    the module `spineid/identify/_common/_least_squares.py`; Madsen, Nielsen and Tingleff 2004,
    Algorithm 3.16).

    **Arguments:** `function(u) -> r`, residuals `(n,)` of parameters `(p,)`, differentiable in
    forward mode (an ODE solve with `diffrax.ForwardMode()`); a failed evaluation should return
    large finite residuals so that the step is rejected. `max_steps` bounds the iterations;
    `decrement_tol` (statistical stop), `xtol` (step relative to `|u|`) and `gtol` (largest
    gradient entry) are the stopping tests; `progress` prints every iteration.
    `provisional=True` says the residuals are weighted by a placeholder noise that will be
    estimated from them: the statistical stop is then measured against the noise level the
    residuals show (`2 cost / (n - p)`) however small it is, not floored at the assumed one,
    so that a placeholder far larger than the real noise does not stop the fit early.
    With `inexact_jacobians=True`, `function(u, exact)` takes a second argument, a boolean
    scalar array, and may be cheaper and less accurate where it is false (an ODE solved at a
    looser tolerance): the Jacobians on the way to the optimum are taken with `exact` false,
    every residual used for a cost and the Jacobian that confirms the stop with `exact` true
    (the module docstring says when the solver falls back to exact Jacobians).
    `linearise(u, exact) -> (residuals, jacobian)`, if given, replaces the forward-mode
    pass over `function` (a problem whose Jacobian has a known sparsity, such as multiple
    shooting, builds it block by block). `samples` (an integer scalar array; default the length
    of the residuals) counts the residuals that are data, for residuals padded with zeros to a
    shared length (`spineid.identify._common._padding`): the degrees of freedom of the statistical stop
    are `samples - p`. `damping` (a scalar, array or float): the damping to start from, for a
    refit from where an earlier fit of nearly the same residuals ended (its `damping`), never
    above the default start, `1e-3` of the largest diagonal entry of `J^T J` (two-pass loop
    only; give an array: a float is compiled into the program, one compilation per value).

    **Returns:** a `LeastSquaresSolution`. Jit-compiled; `vmap`-able over `u0` (then both
    branches of the step run for every member, as `lax.cond` becomes a select).
    """
    if single_pass:
        if samples is not None:
            raise ValueError("levenberg_marquardt: single_pass counts every residual as data "
                             "(samples is not supported there)")
        if inexact_jacobians:
            raise ValueError("levenberg_marquardt: single_pass and inexact_jacobians exclude "
                             "each other")
        if damping is not None:
            raise ValueError("levenberg_marquardt: a start damping is taken by the two-pass "
                             "loop only (single_pass=False)")
        return _single_pass(function, u0, max_steps, decrement_tol, xtol, gtol, progress,
                            linearise, provisional)
    if not inexact_jacobians:
        plain = function
        function = lambda u, exact: plain(u)  # noqa: E731
    exact_flag = jnp.asarray(True)
    n = jax.eval_shape(function, u0, exact_flag).shape[0]
    p = u0.shape[0]
    dof = max(n - p, 1) if samples is None else jnp.maximum(samples - p, 1)

    def measures(residuals, jacobian):
        gradient = jacobian.T @ residuals
        normal = jacobian.T @ jacobian
        cost = 0.5 * jnp.sum(residuals**2)
        return gradient, normal, cost

    # The Jacobian is computed at the top of an iteration that follows an accepted step (the
    # point is "stale"), so that a single forward-mode pass appears in the compiled loop: a
    # second copy (for the start) would double the compilation, which for a Jacobian through
    # an ODE solve takes longer than most fits. Flags: `exact` (the Jacobian in hand is
    # exact), `exact_next` (the next pass is), `reused` (the Jacobian in hand was taken one
    # final small step before `u`), `confirming` (it was taken to confirm a stop).
    dtype = u0.dtype
    false, true = jnp.asarray(False), jnp.asarray(True)
    state = dict(u=u0, residuals=jnp.zeros(n, dtype), jacobian=jnp.zeros((n, p), dtype),
                 damping=-jnp.asarray(jnp.inf if damping is None else damping, dtype),
                 increase=jnp.asarray(2.0, dtype), step=jnp.full_like(u0, jnp.inf),
                 steps=jnp.asarray(0), passes=jnp.asarray(0),
                 stale=true, exact_next=jnp.asarray(not inexact_jacobians), exact=false,
                 always_exact=jnp.asarray(not inexact_jacobians), confirming=false,
                 reused=false, done=false, hopeless=false, stalled=jnp.asarray(0),
                 stall_rejections=jnp.asarray(0), at=u0)

    def cond(state):
        going = ~state["done"] & ~state["hopeless"] & (state["steps"] < max_steps)
        return going | state["stale"]

    def body(state):
        u, step, stale = state["u"], state["step"], state["stale"]
        fresh_residuals, jacobian, passes = jax.lax.cond(
            stale,
            lambda: (_linearise(function, u, state["exact_next"]) if linearise is None
                     else tuple(linearise(u, state["exact_next"])))
            + (state["passes"] + 1,),
            lambda: (state["residuals"], state["jacobian"], state["passes"]))
        at = jnp.where(stale, u, state["at"])  # (where the Jacobian in hand was taken)
        # An inexact pass's residuals are used only at the start, where there are no others.
        residuals = jnp.where(stale & (state["exact_next"] | (state["passes"] == 0)),
                              fresh_residuals, state["residuals"])
        exact = jnp.where(stale, state["exact_next"], state["exact"])
        reused = state["reused"] & ~stale
        gradient, normal, cost = measures(residuals, jacobian)
        decrement = _decrement(gradient, normal)
        noise_scale = _noise_scale(cost, dof, provisional)
        largest = jnp.max(jnp.diag(normal))
        # (before the first step the state holds minus the start asked for, capped here)
        damping = jnp.where(state["damping"] < 0,
                            jnp.minimum(-state["damping"], _TAU * largest), state["damping"])
        threshold = decrement_tol * noise_scale
        converged = (_stopped(decrement, jnp.where(exact, 1.0, _NEAR) * threshold, gradient,
                              step, u, xtol, gtol)
                     | (exact & _stalled(state["stalled"], state["stall_rejections"],
                                         decrement, threshold)))
        finished = converged | state["hopeless"] | (state["steps"] >= max_steps)
        confirm = finished & ~exact  # a stop needs an exact Jacobian at this point
        refresh = reused & ~converged  # the reused Jacobian does not confirm it: take one here
        near = exact & ~reused & (decrement <= _NEAR * decrement_tol * noise_scale)
        if progress:
            jax.debug.print("  LM step {s}: cost {c:.6e}, damping {d:.3g}, decrement {g:.3g}, "
                            "exact Jacobian {e}", s=state["steps"], c=cost, d=damping,
                            g=decrement, e=exact, ordered=True)

        def take_step(_):
            step, predicted = _damped_step(normal, gradient, damping)
            trial_residuals = function(u + step, exact_flag)
            accept, new_damping, increase = _judged(
                cost, 0.5 * jnp.sum(trial_residuals**2), predicted, damping, state["increase"])
            return (jnp.where(accept, u + step, u),
                    jnp.where(accept, trial_residuals, residuals), new_damping, increase,
                    accept, step)

        def no_step(_):
            return u, residuals, damping, state["increase"], jnp.asarray(False), step

        may_step = ~finished & ~refresh
        u, residuals, damping, increase, accepted, step = jax.lax.cond(
            may_step, take_step, no_step, None)
        stalled, stall_rejections = _stall_counts(
            state["stalled"], state["stall_rejections"], may_step, exact, accepted,
            cost - 0.5 * jnp.sum(residuals**2), threshold)
        # A small accepted step from near the optimum keeps its exact Jacobian (see the module
        # docstring); the stop is then tested with it at the new point.
        keep = accepted & near & (jnp.max(jnp.abs(step)) <= _FINAL_STEP)
        rejected = may_step & ~accepted & ~exact
        slow = accepted & ~exact & (jnp.sum(residuals**2) > 2.0 * (1.0 - _COARSE_PROGRESS) * cost)
        always_exact = (state["always_exact"] | (state["confirming"] & ~converged) | rejected
                        | slow)
        return dict(u=u, residuals=residuals, jacobian=jacobian, damping=damping,
                    increase=increase, step=step, steps=state["steps"] + may_step,
                    passes=passes, stale=(accepted & ~keep) | confirm | rejected | refresh,
                    exact_next=confirm | refresh | always_exact, exact=exact,
                    always_exact=always_exact, confirming=confirm, reused=keep,
                    done=converged & exact, hopeless=_hopeless(damping, largest),
                    stalled=stalled, stall_rejections=stall_rejections, at=at)

    state = jax.lax.while_loop(cond, body, state)
    gradient, normal, cost = measures(state["residuals"], state["jacobian"])
    return LeastSquaresSolution(state["u"], state["residuals"], state["jacobian"], cost,
                                _decrement(gradient, normal), state["done"], state["steps"],
                                state["passes"], state["damping"], state["at"])


def _single_pass_start(n, u0):
    p, dtype = u0.shape[0], u0.dtype
    return dict(u=u0, residuals=jnp.zeros(n, dtype), jacobian=jnp.zeros((n, p), dtype),
                cost=jnp.asarray(jnp.inf, dtype), predicted=jnp.asarray(0.0, dtype),
                step=jnp.zeros_like(u0), damping=jnp.asarray(-1.0, dtype),
                increase=jnp.asarray(2.0, dtype), steps=jnp.asarray(0),
                passes=jnp.asarray(0), first=jnp.asarray(True), done=jnp.asarray(False),
                hopeless=jnp.asarray(False), decrement=jnp.asarray(jnp.inf, dtype),
                stalled=jnp.asarray(0), stall_rejections=jnp.asarray(0))


def _single_pass_going(state, max_steps):
    return state["first"] | (~state["done"] & ~state["hopeless"]
                             & (state["steps"] < max_steps))


def _single_pass_trial(state):
    # The start point in the first iteration, the trial point `u + step` after that.
    return state["u"] + jnp.where(state["first"], 0.0, state["step"])


def _single_pass_update(state, trial_residuals, trial_jacobian, decrement_tol, xtol, gtol,
                        progress, provisional=False):
    # One iteration of the single-pass loop after its evaluation at `_single_pass_trial`:
    # accept or refuse the trial, test the stops at the current point, compute the next step
    # (Madsen, Nielsen and Tingleff 2004, Algorithm 3.16), with the helpers of the two-pass
    # loop.
    n, p = state["jacobian"].shape
    first = state["first"]
    trial_cost = 0.5 * jnp.sum(trial_residuals**2)
    judged, damping, increase = _judged(state["cost"], trial_cost, state["predicted"],
                                        state["damping"], state["increase"])
    accept = first | judged
    u = jnp.where(accept, _single_pass_trial(state), state["u"])
    residuals = jnp.where(accept, trial_residuals, state["residuals"])
    jacobian = jnp.where(accept, trial_jacobian, state["jacobian"])
    cost = jnp.where(accept, trial_cost, state["cost"])
    gradient, normal = jacobian.T @ residuals, jacobian.T @ jacobian
    largest = jnp.max(jnp.diag(normal))
    damping = jnp.where(first, _TAU * largest, damping)
    increase = jnp.where(first, 2.0, increase)
    decrement = _decrement(gradient, normal)
    tried = jnp.where(first, jnp.inf, state["step"])
    threshold = decrement_tol * _noise_scale(cost, max(n - p, 1), provisional)
    stalled, stall_rejections = _stall_counts(
        state["stalled"], state["stall_rejections"], ~first, jnp.asarray(True), judged,
        state["cost"] - cost, threshold)
    done = (_stopped(decrement, threshold, gradient, tried, u, xtol, gtol)
            | _stalled(stalled, stall_rejections, decrement, threshold))
    if progress:
        jax.debug.print("  LM step {s}: cost {c:.6e}, damping {d:.3g}, decrement {g:.3g}",
                        s=state["steps"], c=cost, d=damping, g=decrement, ordered=True)
    step, predicted = _damped_step(normal, gradient, damping)
    return dict(u=u, residuals=residuals, jacobian=jacobian, cost=cost, predicted=predicted,
                step=step, damping=damping, increase=increase,
                steps=state["steps"] + jnp.where(first, 0, 1), passes=state["passes"] + 1,
                first=jnp.asarray(False), done=done, hopeless=_hopeless(damping, largest),
                decrement=decrement, stalled=stalled, stall_rejections=stall_rejections)


def _single_pass_solution(state):
    gradient = state["jacobian"].T @ state["residuals"]
    return LeastSquaresSolution(state["u"], state["residuals"], state["jacobian"], state["cost"],
                                _decrement(gradient, state["jacobian"].T @ state["jacobian"]),
                                state["done"], state["steps"], state["passes"],
                                state["damping"], state["u"])


def _evaluator(function, linearise):
    true = jnp.asarray(True)
    if linearise is None:
        return lambda v: _linearise(lambda w, _: function(w), v, true)
    return lambda v: tuple(linearise(v, true))


def _single_pass(function, u0, max_steps, decrement_tol, xtol, gtol, progress, linearise,
                 provisional):
    # The loop of `levenberg_marquardt(single_pass=True)`: each iteration evaluates residuals
    # and Jacobian once (`_single_pass_update`).
    evaluate = _evaluator(function, linearise)

    def body(state):
        return _single_pass_update(state, *evaluate(_single_pass_trial(state)), decrement_tol,
                                   xtol, gtol, progress, provisional)

    state = jax.lax.while_loop(lambda state: _single_pass_going(state, max_steps), body,
                               _single_pass_start(jax.eval_shape(function, u0).shape[0], u0))
    return _single_pass_solution(state)


@eqx.filter_jit
def linearised(function, u: Float[Array, " p"]
               ) -> tuple[Float[Array, " n"], Float[Array, "n p"]]:
    """The residuals `(n,)` of `function` at `u` and their Jacobian `(n, p)`, compiled once for
    every `function` of the same layout (the evaluation `stepwise_levenberg_marquardt` runs; a
    fit that needs its residuals again, under other weights, reuses the compilation)."""
    return _evaluator(function, None)(u)


_update_compiled = eqx.filter_jit(_single_pass_update)


_start_compiled = jax.jit(_single_pass_start, static_argnums=0)


def stepwise_levenberg_marquardt(function, u0: Float[Array, " p"], *, max_steps: int = 200,
                                 decrement_tol: float = DECREMENT_TOL, xtol: float = 1e-10,
                                 gtol: float = 1e-10, progress: bool = False,
                                 provisional: bool = False) -> LeastSquaresSolution:
    """`levenberg_marquardt(function, u0, single_pass=True, ...)` (the same iterations, the
    same stops and result) run as a Python loop over two compiled functions: the residuals
    with their Jacobian (run from its stored program where an earlier process traced it,
    `spineid/_programs.py`), and the update of the iteration; `progress` prints the compiled
    loop's lines from Python.

    For residuals whose compilation dominates a fit: XLA compiled the Jacobian of the nine
    equilibrium solves of a segment fit in 21 s on its own, and in 46 s inside a
    `lax.while_loop` (2-core CPU, one measurement each), while a warm fit takes 0.04 s.
    `function` should be an `equinox.Module` (its arrays are arguments, not constants, so
    every fit of the same layout shares the compilation). Not `vmap`-able (a host loop).
    """
    u0 = jnp.asarray(u0)
    # (The first evaluation gives the number of residuals: tracing `function` for its shape
    # alone would cost as much as tracing it for the compilation, seconds for an equilibrium.)
    # (Each evaluation runs from its stored program where an earlier process traced it: the
    # tracing of the spine's 51 scales through 33 equilibria took 6.4 s of a 17 s command.)
    # Every array placed on the device as the compiled steps return theirs, so that each
    # program is compiled (or loaded) once, not once more for the first call's placement; the
    # progress printed here, since a program that prints is compiled again in every process.
    if not u0.committed:
        u0 = jax.device_put(u0, placement_device(jax.tree.leaves(function)))
    residuals, jacobian = stored_call(linearised, function, u0)
    state = _start_compiled(residuals.shape[0], u0)
    while True:
        steps = int(state["steps"]) if progress else 0
        state = _update_compiled(state, residuals, jacobian, decrement_tol, xtol, gtol, False,
                                 provisional)
        if progress:
            print(f"  LM step {steps}: cost {float(state['cost']):.6e}, damping "
                  f"{float(state['damping']):.3g}, decrement {float(state['decrement']):.3g}",
                  flush=True)
        if not bool(_single_pass_going(state, max_steps)):
            break
        residuals, jacobian = stored_call(linearised, function, _single_pass_trial(state))
    return _single_pass_solution(state)
