"""The sampler of `spineid.posterior`: the log density it sees in whitened coordinates, the
chains' dispersed starts, Stan's window adaptation and the No-U-Turn draws of blackjax (the
optional extra `spineid[bayes]`), for chains vmapped together or one after another.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...io._model_file import PRIOR_KINDS
from .._trajectory._objective import _Objective


def _log_prior(theta, kinds, values) -> jax.Array:
    # The log prior density of the physical values `theta` `(p,)` (up to a constant): `kinds`
    # `(p,)` each parameter's family as its index in `PRIOR_KINDS`, `values` `(p, 3)` their
    # `a, b` and the shift of a log-normal (its parameter's lower bound where finite). Every
    # family is evaluated for every parameter and the parameter's own kept, with the others'
    # inputs made harmless (a log of 1, a scale of 1), so that their gradients are zero, not
    # NaN; kinds as an array let a posterior with priors of other families reuse the programs.
    a, b, shift = values[:, 0], values[:, 1], values[:, 2]
    lognormal, normal, uniform = (kinds == PRIOR_KINDS.index(k)
                                  for k in ("lognormal", "normal", "uniform"))
    scale = jnp.where(lognormal | normal, b, 1.0)
    above = jnp.where(lognormal, theta - shift, 1.0)
    z = (jnp.log(above) - jnp.log(jnp.where(lognormal, a, 1.0))) / scale
    terms = jnp.where(lognormal, -0.5 * z**2 - jnp.log(above), 0.0)
    terms = terms + jnp.where(normal, -0.5 * ((theta - a) / scale) ** 2, 0.0)
    outside = uniform & ((theta < a) | (theta > b))
    return jnp.sum(terms) + jnp.where(jnp.any(outside), -jnp.inf, 0.0)


class _Density(eqx.Module):
    """The log posterior density the sampler sees (module docstring), at whitened coordinates
    `z` (`u = u0 + W z`, `W W^T` the inverse of the Laplace approximation's information).

    The compiled programs of `posterior` take it as an argument: a later posterior of a problem
    of the same structure (other data, priors of other values or families, another start)
    runs them again instead of compiling its own (20-40 s each on a planar pair).
    """

    objective: _Objective  # the noise-weighted residuals, and the transform `theta = T(u)`
    kinds: jax.Array  # (p,) int: each prior's family, its index in `PRIOR_KINDS`
    priors: jax.Array  # (p, 3): a, b and shift per parameter (`_log_prior`)
    u0: jax.Array  # (p,), unconstrained
    whitening: jax.Array  # (p, p)

    def log_prior(self, u):
        """The prior in `u`: of the physical values, times the Jacobian of `T` (elementwise)."""
        to_physical = self.objective.transform.to_physical
        slope = jax.jacfwd(to_physical)(u).diagonal()
        return (_log_prior(to_physical(u), self.kinds, self.priors)
                + jnp.sum(jnp.log(jnp.abs(slope))))

    def log_density(self, u):
        """`log L + log prior` at `u`, `-inf` where it is not finite."""
        objective = self.objective

        @jax.custom_vjp
        def log_likelihood(u):
            return -0.5 * jnp.sum(objective(u) ** 2)

        def log_likelihood_forward(u):
            # The gradient -J^T r from the p forward-mode sensitivities of one pass through
            # the ODE: with few parameters far cheaper than reverse mode through the solve.
            jacobian, residuals = jax.jacfwd(lambda v: (objective(v),) * 2, has_aux=True)(u)
            return -0.5 * jnp.sum(residuals**2), -(jacobian.T @ residuals)

        log_likelihood.defvjp(log_likelihood_forward,
                              lambda gradient, cotangent: (cotangent * gradient,))
        value = log_likelihood(u) + self.log_prior(u)
        return jnp.where(jnp.isfinite(value), value, -jnp.inf)

    def __call__(self, z):
        return self.log_density(self.u0 + self.whitening @ z)


@eqx.filter_jit
def _log_density_at(density: _Density, u):
    return density.log_density(u)


@eqx.filter_jit
def _prior_curvature(density: _Density, u):
    return -jax.hessian(density.log_prior)(u)


@eqx.filter_jit
def _adapted(density: _Density, keys, starts, warmup: int):
    # Stan's window adaptation of the step size and the mass matrix, `warmup` steps from each
    # chain's start `(chains, p)` (whitened), the chains side by side (vmapped).
    import blackjax  # (the optional extra; `posterior` checks it is there)

    def one(key, start):
        adaptation = blackjax.window_adaptation(blackjax.nuts, density)
        (state, parameters), _ = adaptation.run(key, start, num_steps=warmup)
        return state, parameters

    return jax.vmap(one)(keys, starts)


@eqx.filter_jit
def _drawn(density: _Density, parameters, state, keys):
    # One NUTS step per key `(chains, k)` in each chain: the last states, and per draw
    # `(z, divergent, acceptance)`, each `(chains, k, ...)`.
    import blackjax

    def chain(parameters, state, keys):
        step = blackjax.nuts(density, **parameters).step

        def one(state, key):
            state, info = step(key, state)
            return state, (state.position, info.is_divergent, info.acceptance_rate)

        return jax.lax.scan(one, state, keys)

    return jax.vmap(chain)(parameters, state, keys)


START_SPREAD = 2.0
"""The chains after the first start at `START_SPREAD` times a unit normal in the whitened
coordinates (about twice the posterior's spread where the Laplace approximation holds: starts
overdispersed, as R-hat needs), drawn back towards the first start where the density is 0."""


def _sample(density: _Density, key, chains: int, warmup: int, samples: int,
            together: bool, report=None):
    # The chains' whitened draws `(chains, samples, p)`, their divergences and acceptance
    # rates `(chains, samples)` and mean step size: the chains vmapped all at once
    # (`together`) or one after another (each a batch of one, so every chain runs the same
    # compiled programs). `report(done)` after each tenth of the draws.
    key_warmup, key_draws, key_starts = jax.random.split(key, 3)
    starts = _starts(density, key_starts, chains)
    adapt_keys = jax.random.split(key_warmup, chains)
    keys = jax.random.split(key_draws, chains * samples).reshape(chains, samples, -1)
    groups = [np.arange(chains)] if together else [np.array([c]) for c in range(chains)]
    runs = [list(_adapted(density, adapt_keys[g], starts[g], warmup)) for g in groups]
    out = [([], [], []) for _ in groups]
    for index in np.array_split(np.arange(samples), min(10, samples)):
        for run, group, collected in zip(runs, groups, out):
            run[0], drawn = _drawn(density, run[1], run[0], keys[group][:, index])
            for into, value in zip(collected, drawn):
                into.append(np.asarray(value))
        if report is not None:
            report(int(index[-1]) + 1)
    z, divergent, acceptance = (np.concatenate([np.concatenate(c[k], axis=1) for c in out])
                                for k in range(3))
    step = np.concatenate([np.asarray(run[1]["step_size"]) for run in runs])
    return z, divergent, acceptance, float(step.mean())


VECTORIZE_NOTE = """Measured on the three-spring planar pair (`experiments/benchmark_chains.py`:
400 draws and 100 warm-up steps per chain, 2-core CPU, warm, nothing else running): one chain
8.9 s, 4 chains one after another 35.0 s (3.93 times), 4 chains vmapped 48.8 s (5.48 times),
the same draws; the vmapped No-U-Turn trees and adaptive ODE steps run in lockstep, every
chain's step as long as the longest's. On an accelerator the balance may turn."""


def _starts(density: _Density, key, chains: int) -> jax.Array:
    # `(chains, p)` whitened starts: the first at the problem's start (z = 0), the others
    # dispersed (`START_SPREAD`), each halved towards 0 until its density is positive.
    starts = START_SPREAD * np.asarray(jax.random.normal(key, (chains, density.u0.shape[0])))
    starts[0] = 0.0
    whitening, u0 = np.asarray(density.whitening), np.asarray(density.u0)
    for start in starts[1:]:
        for _ in range(30):
            if np.isfinite(float(_log_density_at(density, jnp.asarray(u0 + whitening @ start)))):
                break
            start *= 0.5
    return jnp.asarray(starts)
