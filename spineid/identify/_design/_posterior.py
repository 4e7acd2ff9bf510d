"""Bayesian posteriors over the residuals of a `FitProblem`, sampled by the No-U-Turn Sampler
(Hoffman and Gelman, JMLR 15:1593, 2014) of blackjax (the optional extra `spineid[bayes]`).

With noise `sigma` per channel given, the likelihood of the data is Gaussian,
`log L(theta) = -1/2 sum_i r_i(theta)^2` with `r_i` the noise-weighted residuals of the fit
(the same simulation, observation and weighting as every trajectory fit), and the posterior is
`p(theta | data) ~ L(theta) prior(theta)`. The sampler moves in the fit's unconstrained
coordinates `u` (`theta = T(u)`: a logarithm for a parameter bounded below, a logistic map
for one bounded on both sides), so the density it sees carries the Jacobian of `T`:
`log p(u) = log L(T(u)) + log prior(T(u)) + sum_j log |dT_j/du_j|`.

Whether the model explains the data is checked against the posterior too (Gelman, Meng and
Stern, Statistica Sinica 6:733, 1996): the discrepancy `chi2(y, theta) = sum_i r_i^2` of the
data at a draw `theta`, against that of data replicated from the model at the same draw,
`y_rep = f(theta) + sigma eps`, whose discrepancy is `sum eps_i^2`, chi-square with `n` (the
number of data values) degrees of freedom. The posterior predictive p-value
`P(chi2(y_rep, theta) >= chi2(y, theta) | y)` is the mean over draws of the chi-square
survival function at `chi2(y, theta)`: exact for Gaussian noise, no replicate simulated. A
right model gives p near 1/2 or above (the check is conservative); a model that lacks an
effect the data show, or noise stated too small, gives p near 0. The model is said not to
explain the data below `ALPHA` (1%), as a fit says it (`GoodnessOfFit`).

The noise of a fit (`posterior(problem, fit=result)`) is the likelihood's: each channel's
standard deviation, given or estimated by the fit, and where the fit found its errors correlated
(an autoregressive noise model, `spineid.AR`, docs/goodness-of-fit.md) the likelihood is that
of the innovations, `r_i` the residuals whitened by each channel's autoregression and weighted
by its innovations' deviation (the first `q` samples of each record of a channel of order `q`
conditioned on, as the fit's generalized least squares does: Box and Jenkins' conditional
likelihood). A posterior that treated correlated errors as white would be too narrow by
about the factor its fit's white standard errors are (for AR(1) errors of coefficient `phi`
and slowly varying sensitivities, `sqrt((1 - phi) / (1 + phi))`), and its predictive check
would reject a right model; the check then counts the innovations.

Several chains (4 by default) run one after another (or vmapped together, for accelerators),
each with its own adaptation, the first from the start and the others dispersed about it; their agreement is measured by the rank-normalised
split R-hat and their information by the bulk and tail effective sample sizes (Vehtari et al.,
Bayesian Analysis 16:667, 2021; `_diagnostics.py`, equal to ArviZ's on the same draws), and
`Posterior.to_inference_data()` hands the draws to ArviZ.

Where the problem is near-linear and the prior flat beside the likelihood, the posterior is
the Gaussian of the Cramer-Rao covariance (a test checks it); where a parameter is weakly
determined, the posterior shows what the linearised interval cannot (skew, a floor, a ridge
along an unidentifiable combination, bounded only by the prior).
"""

import dataclasses
import importlib.util
import math
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..._arrays import floats
from ...io._model_file import PRIOR_KINDS
from .._common._analysis import value_scales
from .._common._goodness import ALPHA, chi_square_sf
from .._common._result_family import json_number
from .._common._noise_model import ChannelNoise, coefficient_matrix
from .._common._uncertainty import fisher_analysis, numerical_rank, shown_combination
from .._trajectory._fit import _noise_array
from .._trajectory._objective import _evaluate, _Objective, forward_objective, resolved_scales
from .._trajectory._problem import FitProblem
from .._trajectory._result import FitResult
from ._diagnostics import diagnostics
from ._sampler import (
    _Density, _log_density_at, _prior_curvature, _sample,
)



def default_prior(parameter, start: float) -> tuple:
    """The weakly informative prior of a free parameter without one given: log-normal about
    its start with a log standard deviation of `ln 10` (a decade either way at one sigma)
    for a parameter bounded below only (a stiffness, a damping), uniform between the bounds
    for one bounded on both sides, and normal about the start with ten times its magnitude
    (at least 10 SI units) for an unbounded one."""
    lower, upper = parameter.lower, parameter.upper
    if math.isfinite(lower) and math.isfinite(upper):
        return ("uniform", float(lower), float(upper))
    if math.isfinite(lower):
        return ("lognormal", float(start - lower), math.log(10.0))
    return ("normal", float(start), 10.0 * max(abs(float(start)), 1.0))


def _check_priors(problem: FitProblem, priors: dict | None) -> list[tuple]:
    # The model file's priors of the free parameters, then those given (which win).
    # (a record's own parameter, `<name>@<k>`, takes the model file's prior of `<name>`)
    written = problem.model_file.priors if problem.model_file is not None else {}
    shared_names = {p.name: p.shared_name for p in problem.parameters}
    priors = {**{n: written[base] for n, base in shared_names.items() if base in written},
              **dict(priors or {})}
    unknown = [name for name in priors if name not in problem.names]
    if unknown:
        raise ValueError(f"priors for {unknown}, which are not free parameters; the free "
                         f"parameters are {problem.names}")
    out = []
    for parameter, start in zip(problem.parameters, problem.start):
        prior = priors.get(parameter.name, default_prior(parameter, start))
        if (not isinstance(prior, (tuple, list)) or len(prior) != 3
                or prior[0] not in PRIOR_KINDS):
            raise ValueError(f"prior of {parameter.name} = {prior!r}: expected (kind, a, b) "
                             f"with kind one of {list(PRIOR_KINDS)}")
        kind, a, b = prior[0], float(prior[1]), float(prior[2])
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"prior of {parameter.name} = {prior!r}: numbers must be finite")
        if kind in ("lognormal", "normal") and not b > 0:
            raise ValueError(f"prior of {parameter.name} = {prior!r}: its scale must be > 0")
        if kind == "lognormal" and not a > 0:
            raise ValueError(f"prior of {parameter.name} = {prior!r}: a log-normal median "
                             "must be > 0 (of the distance above the lower bound)")
        if kind == "uniform" and not a < b:
            raise ValueError(f"prior of {parameter.name} = {prior!r}: expected low < high")
        if kind == "uniform" and not a <= start <= b:
            raise ValueError(f"prior of {parameter.name} = {prior!r}: the start {start:g} lies "
                             "outside it")
        out.append((kind, a, b, float(parameter.lower)))
    return out


@eqx.filter_jit
def _discrepancies(objective: _Objective, u):
    return jax.vmap(lambda v: jnp.sum(objective(v) ** 2))(u)


def imported_arviz():
    """ArviZ, imported without the announcement of its coming refactor that it makes once a day
    (a `FutureWarning` about ArviZ itself, which a spineid user can do nothing about); an
    `ImportError` with the install hint where it is missing."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor",
                                    category=FutureWarning)
            import arviz
    except ImportError:
        raise ImportError("Posterior.to_inference_data needs ArviZ: pip install "
                          "'spineid[bayes]'") from None
    return arviz


@dataclasses.dataclass
class Posterior:
    """Samples of the posterior of a `FitProblem` (`posterior`).

    Fields: `names`, `draws` (`(chains * samples, p)`, SI, chain after chain; `chain_draws`
    gives them `(chains, samples, p)`), `chains`, `priors` (the `(kind, a, b)` used per
    parameter), `effective_samples` (the bulk effective sample size, `(p,)`), `ess_tail` and
    `r_hat` (`(p,)`: the rank-normalised diagnostics of Vehtari et al. 2021, `_diagnostics.py`),
    `acceptance` (mean acceptance rate), `divergences` (count), `step_size` (the chains' mean),
    `seconds`, `warnings`, `sample_stats` (`diverging`, `acceptance_rate`, each
    `(chains, samples)`); the posterior predictive check
    (module docstring): `chi_square` (the data's discrepancy `sum r^2` at the draws checked,
    `(m,)`), `n_data` (its degrees of freedom under replication), `predictive_p` (the
    posterior predictive p-value) and `explains_data` (`predictive_p >= ALPHA`); what the
    data determine (the identifiable combinations of the Fisher information at the start, as
    a fit reports them, `Identifiability`): `rank`, and `combinations`, one dict per
    combination `sum_j c_j theta_j`: `coefficients` `{name: c_j}` (where its parameters are
    of several units, on relative changes: `sum_j c_j theta_j / s_j`, the `scales` `{name:
    s_j}` beside, as a fit's summary shows them), its posterior `mean`, `sd`, `low95`,
    `high95`, and the linearised `stderr` beside them; `noise_model` (channel ->
    the noise the likelihood assumed, as a fit's report gives it: `order`, `coefficients`,
    `innovation_sd`, `sd`, `described`, and its `source`, given or estimated by the fit).

    Not a `spineid.AbstractResult`: it holds draws rather than one estimate with Cramer-Rao
    errors, and its check of the model is the posterior predictive one, not a
    `GoodnessOfFit`.
    """

    names: list[str]
    draws: np.ndarray
    priors: list[tuple]
    effective_samples: np.ndarray
    acceptance: float
    divergences: int
    step_size: float
    seconds: float
    warnings: list[str]
    chi_square: np.ndarray
    n_data: int
    predictive_p: float
    combinations: list = dataclasses.field(default_factory=list)
    rank: int = 0
    noise_model: dict = dataclasses.field(default_factory=dict)
    chains: int = 1
    r_hat: np.ndarray | None = None
    ess_tail: np.ndarray | None = None
    sample_stats: dict = dataclasses.field(default_factory=dict)

    @property
    def chain_draws(self) -> np.ndarray:
        """The draws chain by chain, `(chains, samples, p)` (SI)."""
        return self.draws.reshape(self.chains, -1, self.draws.shape[1])

    def to_inference_data(self):
        """The draws as an ArviZ `InferenceData`: group `posterior` with one variable per
        parameter, `(chain, draw)`, named as the fit names it (SI values), and group
        `sample_stats` (`diverging`, `acceptance_rate`), so that `az.summary`,
        `az.plot_trace`, `az.plot_pair` and `to_netcdf` work on them. Needs ArviZ
        (`pip install 'spineid[bayes]'`)."""
        arviz = imported_arviz()
        chains = self.chain_draws
        return arviz.from_dict(
            posterior={name: chains[:, :, j] for j, name in enumerate(self.names)},
            sample_stats={key: np.asarray(value) for key, value in self.sample_stats.items()},
            attrs={"inference_library": "blackjax (NUTS), by spineid.posterior",
                   "units": "SI"})

    @property
    def explains_data(self) -> bool:
        """Whether the model explains the data at the posterior: the posterior predictive
        p-value is at least `ALPHA` (module docstring)."""
        return bool(self.predictive_p >= ALPHA)

    def check_sentence(self) -> str:
        """The posterior predictive check in one sentence."""
        verdict = ("the model explains the data" if self.explains_data else
                   "the model does NOT explain the data (an effect the model lacks, a wrong "
                   "model, or noise stated too small)")
        return (f"posterior predictive check: sum of squared weighted residuals at the draws "
                f"{np.median(self.chi_square):.5g} (median of {len(self.chi_square)}) for "
                f"{self.n_data} data values, p = {self.predictive_p:.3g}: {verdict}")

    @property
    def mean(self) -> np.ndarray:
        """Posterior means (SI, `(p,)`)."""
        return self.draws.mean(axis=0)

    @property
    def sd(self) -> np.ndarray:
        """Posterior standard deviations (SI, `(p,)`)."""
        return self.draws.std(axis=0, ddof=1)

    def interval(self, level: float = 0.95) -> np.ndarray:
        """`(p, 2)`: the central credible interval of each parameter (SI)."""
        tail = 50.0 * (1.0 - level)
        return np.percentile(self.draws, [tail, 100.0 - tail], axis=0).T

    def summary(self, shown: list[tuple[str, float]] | None = None,
                channels: dict[str, tuple[str, float]] | None = None) -> str:
        """Mean, standard deviation, 95% interval, R-hat and bulk and tail effective sample
        sizes per parameter: in SI, or each parameter in its unit of `shown` (unit, factor from
        SI; a fit's `shown_units()`: the data's units) with a unit column, the likelihood's
        noise of each channel of `channels` (channel -> unit, factor: `channel_units()`) in its
        unit. The priors stay as the model file states them, SI."""
        factors = np.array([factor for _, factor in shown]) if shown else np.ones(
            len(self.names))
        width = max([8] + [len(unit) for unit, _ in shown or []])  # (the unit column)
        lines = [f"posterior: {self.chains} chain(s) of {len(self.draws) // self.chains} draws "
                 f"(NUTS) in {self.seconds:.1f} s; acceptance {self.acceptance:.2f}, "
                 f"{self.divergences} divergent, step {self.step_size:.3g}",
                 f"{'parameter':30s} {'mean':>11s} {'sd':>10s} {'2.5%':>11s} {'97.5%':>11s}"
                 f" {'R-hat':>6s} {'ESS bulk':>8s} {'ESS tail':>8s}"
                 + (f"  {'unit':>{width}s}  prior (SI)" if shown else "  prior")]
        interval = self.interval() * factors[:, None]
        r_hat = self.r_hat if self.r_hat is not None else np.full(len(self.names), np.nan)
        tail = self.ess_tail if self.ess_tail is not None else r_hat
        for j, name in enumerate(self.names):
            kind, a, b = self.priors[j][:3]
            lines.append(f"{name:30s} {self.mean[j] * factors[j]:11.5g} "
                         f"{self.sd[j] * factors[j]:10.3g} "
                         f"{interval[j, 0]:11.5g} {interval[j, 1]:11.5g} {r_hat[j]:6.3f} "
                         f"{self.effective_samples[j]:8.0f} {tail[j]:8.0f}  "
                         + (f"{shown[j][0]:>{width}s}  " if shown else "")
                         + f"{kind}({a:.3g}, {b:.3g})")
        if self.noise_model:
            lines.append("likelihood: " + "; ".join(
                f"{channel} {ChannelNoise.from_dict(entry).describe((channels or {}).get(channel))}"
                f" ({entry['source']})" for channel, entry in self.noise_model.items()))
        lines.append(self.check_sentence())
        if self.rank < len(self.names):
            lines.append(f"the data determine {self.rank} combination(s) of the "
                         f"{len(self.names)} parameters; their posteriors (linearised error "
                         "beside):")
            for combination in self.combinations:
                scales = combination.get("scales", {})
                terms = " ".join(f"{c:+.3g} {n}" + (f"/{scales[n]:.3g}" if n in scales else "")
                                 for n, c in combination["coefficients"].items())
                lines.append(f"  {terms}: {combination['mean']:.6g} +- {combination['sd']:.3g}"
                             f" (95% {combination['low95']:.6g} to {combination['high95']:.6g};"
                             f" linearised +- {combination['stderr']:.3g})")
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    def report(self) -> dict:
        """JSON-ready form (draws left out: `draws` holds them)."""
        interval = self.interval()
        return {"draws": int(len(self.draws)), "chains": int(self.chains),
                "acceptance": self.acceptance,
                "divergences": self.divergences, "step_size": self.step_size,
                "seconds": self.seconds, "warnings": list(self.warnings),
                "rank": int(self.rank), "combinations": list(self.combinations),
                "noise_model": {c: dict(e) for c, e in self.noise_model.items()},
                "predictive_check": {"p": float(self.predictive_p),
                                     "explains_data": self.explains_data,
                                     "n_data": int(self.n_data),
                                     "chi_square_median": float(np.median(self.chi_square)),
                                     "draws_checked": int(len(self.chi_square))},
                "parameters": [{"name": n, "mean": float(self.mean[j]),
                                "sd": float(self.sd[j]), "low95": float(interval[j, 0]),
                                "high95": float(interval[j, 1]),
                                "effective_samples": json_number(self.effective_samples[j]),
                                "ess_bulk": json_number(self.effective_samples[j]),
                                "ess_tail": json_number(np.nan if self.ess_tail is None
                                                        else self.ess_tail[j]),
                                "r_hat": json_number(np.nan if self.r_hat is None
                                                     else self.r_hat[j]),
                                "prior": list(self.priors[j][:3])}
                               for j, n in enumerate(self.names)]}


R_HAT = 1.01
"""The rank-normalised split R-hat above which the chains are said not to agree (Vehtari et
al. 2021, section 5)."""

CHECKED_DRAWS = 200
"""Draws, evenly spaced through the chain, at which the posterior predictive check simulates
the model (its p-value is a mean over draws: 200 put its Monte-Carlo error near 0.01-0.02)."""


def predictive_check(objective, u, n_data: int) -> tuple[np.ndarray, float]:
    """The posterior predictive check (module docstring) at the unconstrained draws `u`
    `(m, p)`: `(chi_square (m,), p_value)`, with `objective(u)` the noise-weighted residuals
    `(n,)` and `n_data` the data values they hold (padding excluded)."""
    costs = np.asarray(_discrepancies(objective, jnp.asarray(u)))
    survival = [chi_square_sf(c, n_data) if np.isfinite(c) else 0.0 for c in costs]
    return costs, float(np.mean(survival))


def likelihood_noise(problem: FitProblem, fit: FitResult | None
                     ) -> tuple[np.ndarray, np.ndarray | None, dict[str, dict]]:
    """The noise of the posterior's likelihood (module docstring): `(sigma (c,), coefficients
    (c, q) or None, {channel: its noise as a fit's report gives it, with "source"})`, from the
    fit `fit` of `problem` where it is given (its noise per channel, and its autoregressions
    where it fitted a noise model), from the problem's given noise otherwise."""
    if fit is not None and not isinstance(fit, FitResult):
        raise ValueError(f"fit: expected the FitResult of spineid.fit(problem), got "
                         f"{type(fit).__name__}")
    if fit is not None and (
            list(fit.names) != list(problem.names) or set(fit.noise) != set(problem.channels)
            or len(fit.measurements) != len(problem.measurements)
            or not all(np.array_equal(a.ts, b.ts) and np.array_equal(a.values, b.values,
                                                                       equal_nan=True)
                       for a, b in zip(fit.measurements, problem.measurements))):
        raise ValueError(f"fit: a fit of {list(fit.names)} with channels {list(fit.noise)} "
                         f"to other data, not of this problem's free parameters "
                         f"{list(problem.names)} and data")
    if fit is None:
        sigma, fitted, source = _noise_array(problem, None), {}, "given"
    else:
        sigma = np.array([fit.noise[c] for c in problem.channels])
        fitted = fit.goodness_of_fit.noise_model
        source = "estimated by the fit" if fit.noise_estimated else "given"
    # (A channel a noise model leaves out is white, of the fit's deviation.)
    noises = [ChannelNoise.from_dict(fitted[c]) if c in fitted
              else ChannelNoise(0, (), float(s), float(s))
              for c, s in zip(problem.channels, sigma)]
    described = {c: n.to_dict() | {"described": n.describe(), "source": source}
                 for c, n in zip(problem.channels, noises)}
    if not any(n.order for n in noises):
        return sigma, None, described
    return np.array([n.innovation for n in noises]), coefficient_matrix(noises), described


def posterior(problem: FitProblem, *, fit: FitResult | None = None, priors: dict | None = None,
              samples: int = 1000, warmup: int = 300, chains: int = 4, start=None,
              seed: int = 0, vectorize_chains: bool = False,
              progress: bool = False) -> Posterior:
    """Sample the posterior of `problem`'s free parameters (module docstring) with NUTS.

    **Arguments:** `problem`, `fit` (its `FitResult` of `spineid.fit(problem)`: the
    likelihood then takes the fit's noise, estimated or given, and its noise model where it
    fitted one, and the draws start at its values; without it the problem's noise must be
    given, white), `priors`
    (`{name: (kind, a, b)}`, `PRIOR_KINDS`; for the others those of the model file's
    `[priors]` table, then `default_prior`), `samples` and
    `warmup` (draws kept per chain, and adaptation steps of each chain's step size and mass
    matrix, Stan's window adaptation), `chains` (run one after another, each compiled program
    shared; the first starts at `start`, the others dispersed about it, `START_SPREAD`, so
    that their agreement, R-hat, means something), `start` (SI values, `(p,)`; default the problem's start: a
    fit's optimum, `FitResult.values`, shortens the warm-up), `seed`, `vectorize_chains`
    (run the chains as one vmapped program instead of one after another: for accelerators;
    on a CPU it was slower, `_sampler.VECTORIZE_NOTE`), `progress` (print the draws done
    every tenth of the way).

    **Returns:** a `Posterior`, with its posterior predictive check at `CHECKED_DRAWS` draws
    (a warning when the model does not explain the data). Needs blackjax (`pip install 'spineid[bayes]'`).
    """
    if importlib.util.find_spec("blackjax") is None:  # (the programs below import it)
        raise ImportError("spineid.posterior needs blackjax: pip install 'spineid[bayes]'")
    for name, value, least, most in (("samples", samples, 10, 10**6),
                                     ("warmup", warmup, 10, 10**6), ("chains", chains, 1, 64)):
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise ValueError(f"{name} {value!r}: expected a whole number from {least} to "
                             f"{most}")
    started = time.perf_counter()
    sigma, coefficients, noise_model = likelihood_noise(problem, fit)
    prior = _check_priors(problem, priors)
    transform = problem.transform()
    objective = forward_objective(problem, sigma, transform, coefficients)
    n_data = int(objective.samples())
    if start is None:
        start = problem.start if fit is None else fit.values
    start = np.asarray(start, dtype=float)
    if start.shape != problem.start.shape or not np.all(np.isfinite(start)):
        raise ValueError(f"start: expected {len(problem.names)} finite values (SI), got "
                         f"{np.shape(start)}")
    u0 = transform.to_unconstrained(jnp.asarray(start))
    density = _Density(objective, jax.device_put(np.array([PRIOR_KINDS.index(kind)
                                                           for kind, *_ in prior])),
                       floats([[a, b, lower if math.isfinite(lower) else 0.0]
                               for _, a, b, lower in prior]),
                       u0, floats(np.eye(len(start))))
    if not np.isfinite(float(_log_density_at(density, u0))):
        raise ValueError("posterior: the start has zero posterior density (outside a prior's "
                         "support, or the model cannot be simulated there)")
    # Whitening by the Laplace approximation at the start (the Fisher information of the exact
    # sensitivities plus the prior's curvature, in u): the sampler then sees a posterior close
    # to a unit normal wherever the problem is near-linear, and takes long steps along
    # correlated or badly scaled parameters (without it: steps of 0.02 and 8 minutes for the
    # three-spring pair; measured).
    sensitivity = np.asarray(_evaluate(objective, transform.to_physical(u0))[0])
    scaled = sensitivity * np.asarray(jax.jacfwd(transform.to_physical)(u0)).diagonal()
    curvature = np.asarray(_prior_curvature(density, u0))
    information = scaled.T @ scaled + 0.5 * (curvature + curvature.T)
    singular = np.linalg.svd(scaled, compute_uv=False)
    unseen = len(singular) - numerical_rank(singular)
    messages = []
    if unseen:
        messages.append(
            f"the data determine {len(singular) - unseen} combinations of the "
            f"{len(singular)} parameters: along the other {unseen} direction(s) the posterior "
            "is the prior, stretched along a curved ridge the sampler follows slowly (measured: "
            "8 vector springs with 5 such directions took over 12 minutes for 400 steps); "
            "sample the identifiable combinations' model instead, or give narrower priors")
        warnings.warn("posterior: " + messages[-1], RuntimeWarning, stacklevel=2)
    values, vectors = np.linalg.eigh(information)
    values = np.maximum(values, 1e-12 * max(values.max(), 1e-300))
    whitening = vectors / np.sqrt(values)  # u = u0 + W z, W W^T = information^-1
    density = dataclasses.replace(density, whitening=floats(whitening))

    z, divergent, acceptance, step_size = _sample(
        density, jax.random.PRNGKey(seed), chains, warmup, samples, vectorize_chains,
        (lambda done: print(f"posterior: {done} of {samples} draws in each of {chains} "
                            f"chain(s) ({time.perf_counter() - started:.1f} s)", flush=True))
        if progress else None)
    # Chain after chain, `(chains * samples, p)`.
    u = np.asarray(u0) + z.reshape(-1, len(start)) @ whitening.T
    draws = np.asarray(jax.vmap(transform.to_physical)(jnp.asarray(u)))
    chain_diagnostics = diagnostics(draws.reshape(chains, samples, -1))
    divergences = int(divergent.sum())
    notes = list(messages)
    unmixed = [n for n, r in zip(problem.names, chain_diagnostics["r_hat"]) if not r <= R_HAT]
    if np.all(np.ptp(draws.reshape(chains, samples, -1), axis=1) == 0):
        # (every chain at one point: R-hat is 0 / 0, and no diagnostic of mixing applies)
        notes.append(f"the chains never moved (acceptance {float(np.mean(acceptance)):.2f}): "
                     "no proposal was accepted, so the draws repeat each chain's start; give "
                     "the sampler a longer warm-up to find its step (warmup=...)")
        warnings.warn("posterior: " + notes[-1], RuntimeWarning, stacklevel=2)
    elif unmixed:
        largest = np.asarray(chain_diagnostics["r_hat"], float)
        largest = np.nanmax(largest) if np.any(np.isfinite(largest)) else np.nan
        notes.append(f"R-hat above {R_HAT} for {', '.join(unmixed)} (largest "
                     f"{largest:.3g}): "
                     + (f"the {chains} chains" if chains > 1 else "the two halves of the chain")
                     + " do not agree: not mixed yet, or a posterior of several modes or a "
                     "long ridge; draw more (samples=...) and look at the trace plot before "
                     "reading these draws")
        warnings.warn("posterior: " + notes[-1], RuntimeWarning, stacklevel=2)
    if divergences:
        notes.append(f"{divergences} divergent transitions: the posterior has regions the "
                        "sampler's step cannot follow (strong curvature); its draws there may "
                        "be biased")
    checked = np.unique(np.linspace(0, len(u) - 1, min(CHECKED_DRAWS, len(u))).astype(int))
    chi_square, predictive_p = predictive_check(objective, u[checked], n_data)
    if predictive_p < ALPHA:
        notes.append(f"the model does not explain the data: posterior predictive p = "
                     f"{predictive_p:.3g} (the data's sum of squared weighted residuals, "
                     f"median {np.median(chi_square):.4g} over the draws, against a chi-square "
                     f"of {n_data} degrees of freedom); the posterior describes the "
                     "parameters of a model that misses an effect the data show (or the noise "
                     "is stated too small), and its intervals are not to be trusted")
        warnings.warn("posterior: " + notes[-1], RuntimeWarning, stacklevel=2)
    _, identifiability = fisher_analysis(
        sensitivity, start, resolved_scales(sensitivity, start, value_scales(start, transform)),
        problem.names)
    combinations = posterior_combinations(identifiability, draws, problem.names,
                                          [p.unit for p in problem.parameters])
    fewest = np.minimum(chain_diagnostics["ess_bulk"], chain_diagnostics["ess_tail"])
    low = [n for n, e in zip(problem.names, fewest) if not e >= 100]
    if low:
        notes.append(f"fewer than 100 effective draws (bulk or tail) for {', '.join(low)}: "
                     "draw more (samples=...) before reading their tails")
    return Posterior(names=list(problem.names), draws=draws,
                     priors=[p[:3] for p in prior],
                     effective_samples=chain_diagnostics["ess_bulk"],
                     acceptance=float(acceptance.mean()),
                     divergences=divergences,
                     step_size=step_size,
                     seconds=time.perf_counter() - started, warnings=notes,
                     chi_square=chi_square, n_data=n_data,
                     predictive_p=predictive_p, combinations=combinations,
                     rank=identifiability.rank, noise_model=noise_model, chains=chains,
                     r_hat=chain_diagnostics["r_hat"], ess_tail=chain_diagnostics["ess_tail"],
                     sample_stats={"diverging": divergent, "acceptance_rate": acceptance})


def posterior_combinations(identifiability, draws: np.ndarray, names, units) -> list[dict]:
    """The posterior of each identifiable combination of `identifiability` (a fit's
    `Identifiability`) from the `draws` `(m, p)` (SI) of the parameters `names` in `units`:
    `coefficients`, their `mean`, `sd`, `low95`, `high95` along the draws and the linearised
    `stderr`. Parameters of one unit as they are (a sum of stiffnesses); of several, on
    relative changes, each divided by its scale (`scales` beside: as a fit's summary shows
    them), so that they compare."""
    units = dict(zip(names, units))
    combinations = []
    for combination in identifiability.combinations:
        shown, scales = shown_combination(combination, units)
        weights = np.array([shown["coefficients"].get(n, 0.0) / scales.get(n, 1.0)
                            for n in names])
        along = np.asarray(draws) @ weights
        low95, high95 = np.percentile(along, [2.5, 97.5])
        combinations.append({"coefficients": shown["coefficients"],
                             **({"scales": scales} if scales else {}),
                             "mean": float(along.mean()), "sd": float(along.std(ddof=1)),
                             "low95": float(low95), "high95": float(high95),
                             "stderr": shown["standard_error"]})
    return combinations
