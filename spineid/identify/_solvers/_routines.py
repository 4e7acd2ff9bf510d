"""The jitted routines behind the least-squares solvers other than spineid's own
Levenberg-Marquardt (`levenberg_marquardt`): optimistix's and jaxopt's Levenberg-Marquardt, and
optax's Adam and L-BFGS for first-order fits (gradients by reverse mode), with progress
printing. The solver objects of this folder call them. jaxopt and optax are
imported when their solver is first used: together they take about a third of `import spineid`
(jaxopt imports scipy.optimize).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx


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
    import jaxopt

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
    import optax

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
