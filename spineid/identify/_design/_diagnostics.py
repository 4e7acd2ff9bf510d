"""Convergence diagnostics of Markov chains: the rank-normalised split R-hat and the bulk and
tail effective sample sizes of Vehtari, Gelman, Simpson, Carpenter and Buerkner (Bayesian
Analysis 16:667, 2021), computed with numpy on the host.

Every diagnostic works on split chains: each chain's first and second halves count as two
chains (the middle draw of an odd count left out), so that a chain that drifts shows up as two
halves that disagree. With `theta` one parameter's draws, `(M, N)` for `M` split chains of `N`
draws:

- rank normalisation (section 4.1): `z = Phi^-1((r - 3/8) / (M N + 1/4))` with `r` the rank of
  each draw among all `M N` (ties averaged); it makes the diagnostics work for heavy tails and
  infinite variances;
- R-hat (eq 4 on the normalised draws): `sqrt(((N - 1)/N W + B/N) / W)`, `W` the mean of the
  chains' variances, `B/N` the variance of their means; the rank-normalised R-hat is the larger
  of that of `z` (the bulk) and that of the normalised folded draws `|theta - median|` (the
  spread, section 4.2); above 1.01 the chains have not mixed;
- effective sample size (section 3.2, Geyer's initial monotone sequence as in Stan): with the
  chains' autocovariances `gamma_t` (biased, by FFT), `var+ = (N - 1)/N W + B/N` and
  `rho_t = 1 - (W - mean_m gamma_t,m) / var+`, the sums of pairs `rho_2k + rho_2k+1` are kept
  while positive and made non-increasing; `S_eff = M N / tau`, `tau = -1 + 2 sum rho_t`
  (floored at `1 / log10(M N)`); constant draws count as `M N` (as ArviZ counts them);
- bulk ESS: that of `z`; tail ESS: the smaller of the ESS of the indicators
  `theta <= q_5%` and `theta <= q_95%` (section 4.3; the quantiles of all the draws, the
  indicators then split).
"""

from statistics import NormalDist

import numpy as np

_INVERSE_NORMAL = np.vectorize(NormalDist().inv_cdf, otypes=[float])


def split_chains(draws: np.ndarray) -> np.ndarray:
    """`(2 M, N // 2)`: the first and last halves of each of `M` chains `(M, N)`."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half:]], axis=0)


def _ranks(values: np.ndarray) -> np.ndarray:
    # Ranks 1..n of a flat array, tied values sharing their mean rank.
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def rank_normalised(draws: np.ndarray) -> np.ndarray:
    """The normal scores of the draws' ranks among all of them (same shape)."""
    ranks = _ranks(draws.ravel())
    return _INVERSE_NORMAL((ranks - 0.375) / (draws.size + 0.25)).reshape(draws.shape)


def _r_hat(chains: np.ndarray) -> float:
    # The basic potential scale reduction of (M, N) chains.
    n = chains.shape[1]
    within = chains.var(axis=1, ddof=1).mean()
    between_over_n = chains.mean(axis=1).var(ddof=1)
    if not within > 0:
        return float("nan")
    return float(np.sqrt(((n - 1) / n * within + between_over_n) / within))


def r_hat(draws: np.ndarray) -> float:
    """Rank-normalised split R-hat of one parameter's chains `(M, N)` (module docstring)."""
    split = split_chains(np.asarray(draws, dtype=float))
    folded = np.abs(split - np.median(split))
    return max(_r_hat(rank_normalised(split)), _r_hat(rank_normalised(folded)))


def _autocovariances(chains: np.ndarray) -> np.ndarray:
    # Biased autocovariances of each chain, lags 0..N-1, by FFT (zero-padded: no wrap-around).
    n = chains.shape[1]
    centred = chains - chains.mean(axis=1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :n] / n


def _effective_size(chains: np.ndarray) -> float:
    # Effective sample size of (M, N) chains, Geyer's initial monotone sequence.
    m, n = chains.shape
    if n < 4:
        return float("nan")
    if np.ptp(chains) < np.finfo(float).resolution:  # constant (an indicator no draw crosses)
        return float(m * n)
    gamma = _autocovariances(chains)
    within = gamma[:, 0].mean() * n / (n - 1)
    plus = within * (n - 1) / n + (chains.mean(axis=1).var(ddof=1) if m > 1 else 0.0)
    if not plus > 0:
        return float("nan")
    rho = 1.0 - (within - gamma.mean(axis=0)) / plus
    rho[0] = 1.0
    kept = np.zeros(n)
    kept[:2] = rho[:2]
    # Initial positive sequence: pairs (rho_t+1, rho_t+2) while their sum is positive.
    t = 1
    even, odd = rho[0], rho[1]
    while t < n - 3 and even + odd > 0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0:
            kept[t + 1], kept[t + 2] = even, odd
        t += 2
    last = t - 2
    if even > 0:  # the first pair that was not kept adds its positive first term
        kept[last + 1] = even
    # Initial monotone sequence: no pair larger than the one before it.
    for t in range(1, last - 1, 2):
        if kept[t + 1] + kept[t + 2] > kept[t - 1] + kept[t]:
            kept[t + 1] = kept[t + 2] = (kept[t - 1] + kept[t]) / 2.0
    tau = -1.0 + 2.0 * kept[:last + 1].sum() + kept[last + 1:last + 2].sum()
    total = m * n
    return float(total / max(tau, 1.0 / np.log10(total)))


def ess_bulk(draws: np.ndarray) -> float:
    """Bulk effective sample size of one parameter's chains `(M, N)` (module docstring)."""
    return _effective_size(rank_normalised(split_chains(np.asarray(draws, dtype=float))))


def ess_tail(draws: np.ndarray) -> float:
    """Tail effective sample size (the 5% and 95% quantiles) of one parameter's chains
    `(M, N)` (module docstring)."""
    draws = np.asarray(draws, dtype=float)
    return min(_effective_size(split_chains((draws <= np.quantile(draws, q)).astype(float)))
               for q in (0.05, 0.95))


def diagnostics(chain_draws: np.ndarray) -> dict[str, np.ndarray]:
    """`{"r_hat", "ess_bulk", "ess_tail"}`, each `(p,)`, of draws `(chains, draws, p)`."""
    columns = [chain_draws[:, :, j] for j in range(chain_draws.shape[2])]
    return {"r_hat": np.array([r_hat(c) for c in columns]),
            "ess_bulk": np.array([ess_bulk(c) for c in columns]),
            "ess_tail": np.array([ess_tail(c) for c in columns])}
