"""Standard errors and identifiability from the noise-weighted sensitivity matrix.

With residuals `r_i = (model_i(theta) - data_i) / sigma_i`, the Gauss-Newton Fisher information at
the optimum is `F = J^T J`, `J = dr/dtheta`, and its inverse is the Cramer-Rao lower bound on the
covariance of any unbiased estimate. When `J` is rank deficient, only combinations of parameters in
its row space are determined: the singular value decomposition `J D = U S V^T` (with `D` the
parameter scales, so that the decomposition does not depend on units) lists them, each with the
standard error `1 / s_k` in units of the parameter scales.
"""

import dataclasses
import math

import numpy as np

RANK_RTOL = 1e-7  # singular values below this fraction of the largest are structural zeros
POORLY_DETERMINED = 0.1  # relative standard error above which a warning is given


def numerical_rank(singular: np.ndarray) -> int:
    """How many combinations the data determine: the singular values of a scaled,
    noise-weighted Jacobian (sorted, largest first, as `np.linalg.svd` gives them) above
    `RANK_RTOL` of the largest; 0 when all are zero."""
    singular = np.asarray(singular, dtype=float)
    if singular.size == 0 or singular[0] <= 0:
        return 0
    return int(np.sum(singular > singular[0] * RANK_RTOL))


def shown_combination(combination: dict, units: dict) -> tuple[dict, dict]:
    """How a combination of `Identifiability.combinations` reads best (the one rule of a fit's
    summary and the posterior's combinations; the identifiability plot's heat map shows every
    combination on relative changes, where its columns compare): parameters of one unit as
    they are (a sum of stiffnesses, in SI); of several (`units`: name -> unit), on relative
    changes, each divided by its scale, so that they compare. Returns the form shown
    (`coefficients`, `value`, `standard_error`) and the scales `{name: s_j}` it divides by
    (empty when the parameters are shown as they are)."""
    relative = combination.get("relative")
    if relative is None or len({units.get(n) for n in relative["coefficients"]}) <= 1:
        return combination, {}
    return relative, {n: relative["scales"][n] for n in relative["coefficients"]}


@dataclasses.dataclass
class Identifiability:
    """What the data determine.

    Fields: `n_parameters`; `rank` (numerical rank of the scaled sensitivity matrix);
    `singular_values` (`s_k` of `J D`, dimensionless); `combinations` (one dict per identifiable
    direction: `singular_value`, `coefficients` {name: c_j in SI per parameter}, `value` of
    `sum_j c_j theta_j` and its `standard_error`, and `relative`, the same direction on
    relative changes, where parameters of different units compare: `coefficients` r_j of
    `sum_j r_j theta_j / s_j`, the `scales` s_j (about the values), its `value` and
    `standard_error`); `identifiable` (per parameter: whether it is
    individually determined); `warnings` (plain-language statements).
    """

    n_parameters: int
    rank: int
    singular_values: np.ndarray
    combinations: list[dict]
    identifiable: np.ndarray
    warnings: list[str]
    # Row space of the scaled sensitivity matrix, for errors of identifiable functions.
    _basis: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    _scales: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0), repr=False)
    _index: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, int), repr=False)

    def standard_error_of(self, gradient: np.ndarray) -> float:
        """Standard error (delta method) of a scalar function of the parameters with gradient
        `gradient` (`(p,)`, SI). NaN when the function is not determined by the data, i.e. its
        gradient leaves the row space of the sensitivity matrix."""
        gradient = np.asarray(gradient, dtype=float)
        if np.any(np.delete(gradient, self._index) != 0) or self._basis.shape[0] == 0:
            return float("nan")
        scaled = gradient[self._index] * self._scales[self._index]
        size = np.linalg.norm(scaled)
        if size == 0:
            return 0.0
        coordinates = self._basis @ scaled
        if np.linalg.norm(scaled - self._basis.T @ coordinates) > 1e-6 * size:
            return float("nan")
        return float(np.sqrt(np.sum((coordinates / self.singular_values[: len(coordinates)]) ** 2)))

    def to_dict(self) -> dict:
        """JSON-ready form (the `identifiability` entry of report.json)."""
        return {
            "n_parameters": self.n_parameters,
            "rank": self.rank,
            "singular_values": [float(s) for s in self.singular_values],
            "identifiable_combinations": self.combinations,
            "individually_identifiable": [bool(x) for x in self.identifiable],
            "warnings": list(self.warnings),
        }


def fisher_analysis(
    jacobian: np.ndarray, values: np.ndarray, scales: np.ndarray, names: list[str],
    active: np.ndarray | None = None, units: list[str] | None = None,
) -> tuple[np.ndarray, Identifiability]:
    """Covariance (Cramer-Rao bound) and identifiability from a noise-weighted Jacobian.

    **Arguments:**
    - `jacobian`: `dr/dtheta` at the optimum, shape `(n_data, p)`, residuals divided by noise.
    - `values`: the parameter values, `(p,)`; `scales`: positive typical magnitudes, `(p,)`.
    - `names`: parameter names; `active`: parameters to analyse (default all; parameters on a
      bound are left out and get no standard error); `units`: the parameters' SI units, for
      the warnings' numbers (default none shown).

    **Returns:** `(covariance, identifiability)`; `covariance` is `(p, p)` with NaN in the rows and
    columns of parameters that are not individually identifiable or not active. Its warnings
    name parameters not identifiable one by one, those whose relative standard error exceeds
    `POORLY_DETERMINED`, and those whose value is zero within its error (said so, without a
    relative error).
    """
    jacobian = np.asarray(jacobian, dtype=float)
    p = jacobian.shape[1]
    active = np.ones(p, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    index = np.flatnonzero(active)
    scaled = jacobian[:, index] * scales[index]
    covariance = np.full((p, p), np.nan)
    identifiable = np.zeros(p, dtype=bool)
    combinations: list[dict] = []
    if index.size == 0:
        return covariance, Identifiability(0, 0, np.zeros(0), [], identifiable, [], _scales=scales)
    _, singular, vt = np.linalg.svd(scaled, full_matrices=False)
    rank = numerical_rank(singular)
    basis = vt[:rank]
    scaled_covariance = basis.T @ np.diag(singular[:rank] ** -2.0) @ basis
    in_row_space = np.linalg.norm(np.eye(index.size) - basis.T @ basis, axis=0) < 1e-6
    block = scaled_covariance * np.outer(scales[index], scales[index])
    for a, i in enumerate(index):
        identifiable[i] = in_row_space[a]
        for b, j in enumerate(index):
            if in_row_space[a] and in_row_space[b]:
                covariance[i, j] = block[a, b]
    for k in range(rank):
        coefficients = np.zeros(p)
        coefficients[index] = vt[k] / scales[index]
        norm = np.max(np.abs(coefficients))
        sign = np.sign(coefficients[np.argmax(np.abs(coefficients))])
        coefficients *= sign / norm
        # The same direction on relative changes `theta_j / scale_j` (scales: about the values),
        # where parameters of different units compare: `vt[k]` itself, normalised alike.
        relative = vt[k] * np.sign(vt[k][np.argmax(np.abs(vt[k]))]) / np.max(np.abs(vt[k]))
        combinations.append(
            {
                "singular_value": float(singular[k]),
                "coefficients": {
                    names[j]: float(coefficients[j]) for j in index if abs(coefficients[j]) > 1e-12
                },
                "value": float(coefficients @ values),
                # The combination along v_k has standard error 1/s_k in scaled units; the
                # normalisation above multiplies it by sign/norm.
                "standard_error": float(1.0 / (singular[k] * norm)),
                "relative": {
                    "coefficients": {names[j]: float(r) for j, r in zip(index, relative)
                                     if abs(r) > 1e-12},
                    "scales": {names[j]: float(scales[j]) for j in index},
                    "value": float(relative @ (values[index] / scales[index])),
                    "standard_error": float(1.0 / (singular[k] * np.max(np.abs(vt[k])))),
                },
            }
        )
    warnings = []
    if rank < index.size:
        warnings.append(
            f"Only {rank} of the {index.size} free parameters are identifiable from these data: "
            f"the data determine {rank} combination(s) of them (identifiable_combinations), "
            f"not each parameter on its own. Parameters not individually identifiable get no "
            f"standard error; their fitted values depend on the starting guess."
        )
    for i in index:
        if identifiable[i]:
            error = np.sqrt(covariance[i, i])
            relative = error / max(abs(values[i]), 1e-300)
            # (a value zero within its error, an intercept say, has no relative error worth
            # stating: it is said to be indistinguishable from zero instead)
            if relative > POORLY_DETERMINED and abs(values[i]) > error:
                warnings.append(
                    f"{names[i]} is identifiable but poorly determined: relative standard "
                    f"error {relative:.0%}."
                )
            elif relative > POORLY_DETERMINED:
                unit = f" {units[i]}" if units and units[i] else ""
                warnings.append(f"{names[i]} is not distinguishable from zero: {values[i]:.3g} "
                                f"+- {error:.2g}{unit}.")
    return covariance, Identifiability(
        n_parameters=int(index.size), rank=rank, singular_values=singular,
        combinations=combinations, identifiable=identifiable, warnings=warnings,
        _basis=basis, _scales=np.asarray(scales, dtype=float), _index=index,
    )


def standard_errors(covariance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(stderr, correlation)` of a covariance `(p, p)` (as `fisher_analysis` gives it): the
    square roots of its diagonal `(p,)` and the correlation matrix `(p, p)`; NaN in the rows of
    parameters without a standard error (not individually identifiable, on a bound)."""
    stderr = np.sqrt(np.diag(np.asarray(covariance, dtype=float)))
    return stderr, correlation_matrix(covariance, stderr)


def correlation_matrix(covariance: np.ndarray, stderr: np.ndarray) -> np.ndarray:
    """The correlations `(p, p)` of a covariance `(p, p)` with standard errors `stderr` `(p,)`:
    NaN in the rows and columns of parameters whose standard error is NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(covariance, dtype=float) / np.outer(stderr, stderr)


def newey_west_lags(n: int) -> int:
    """The number of lags of a Newey-West covariance for `n` samples: `floor(4 (n/100)^(2/9))`
    (Newey and West 1994)."""
    return int(math.floor(4.0 * (max(n, 1) / 100.0) ** (2.0 / 9.0)))


def hac_covariance(jacobian: np.ndarray, residuals: np.ndarray, records: list[np.ndarray],
                   columns: np.ndarray, lags: int | None = None) -> np.ndarray:
    """The heteroscedasticity- and autocorrelation-consistent (Newey-West) covariance `(p, p)`
    of an ordinary least-squares estimate, robust to any noise correlated over fewer than
    `lags` samples: `B S B`, `B = (J^T J)^-1` and `S = sum_l w_l (G_l + G_l^T)` of the scores
    `g_t = J_t e_t`, `G_l = sum_t g_t g_(t-l)^T` within each record, Bartlett weights
    `w_l = 1 - l / (lags + 1)` (`w_0 = 1/2` on `G_0 + G_0^T`; Newey and West 1987, as
    statsmodels' `cov_type="HAC"` without small-sample correction).

    **Arguments:** `jacobian` `(n, p)`: derivatives of the modelled values by the parameters
    (SI, not weighted); `residuals` `(n,)`: data - model; `records`: index arrays into the `n`
    samples, each a record in the order of its samples (no correlation across records);
    `columns`: `(p,)` bool, the parameters analysed (the rest get NaN); `lags`: default
    `newey_west_lags` of the longest record."""
    jacobian = np.asarray(jacobian, dtype=float)
    residuals = np.asarray(residuals, dtype=float)
    if lags is None:
        lags = newey_west_lags(max((len(r) for r in records), default=1))
    return record_hac_covariance(
        jacobian.T @ jacobian, ((jacobian[np.asarray(r)], residuals[np.asarray(r)])
                                for r in records), columns, lags)


def record_hac_covariance(gram: np.ndarray, records, columns: np.ndarray,
                          lags: int) -> np.ndarray:
    """`hac_covariance` from its parts, for systems too large to hold at once: `gram` `(p, p)`
    is `J^T J` over every row, `records` an iterable of `(J_r (k, p), e_r (k,))`, each
    record's rows of the Jacobian and its residuals in sample order (consumed once, so that
    only one record's rows need exist at a time)."""
    gram, index, norms = _hac_columns(gram, columns)
    if index.size == 0:
        return np.full(gram.shape, np.nan)
    meat = np.zeros((index.size, index.size))
    for rows, errors in records:
        meat += hac_meat(np.asarray(rows, dtype=float)[:, index] / norms
                         * np.asarray(errors)[:, None], lags)
    return _hac_sandwich(gram, meat, index, norms)


def factored_hac_covariance(gram: np.ndarray, rows: np.ndarray, maps: np.ndarray,
                            errors: np.ndarray, columns: np.ndarray, lags: int) -> np.ndarray:
    """`record_hac_covariance` of records whose Jacobians share a factor: record `r`'s rows
    are `rows @ maps[r]` (`rows` `(k, m)`, `maps` `(r, m, p)`), its residuals `errors[:, r]`
    (`errors` `(k, r)`), as the load channels of one quasi-static test (`rows` its
    deflections, `maps[r]` the entries that load channel `r`). Record `r`'s meat is then
    `maps_r^T S_r maps_r` with `S_r` the `(m, m)` meat of the scores `rows * e_r`; the scores
    of every record are formed at once, `m r` columns instead of `p` per record."""
    gram, index, norms = _hac_columns(gram, columns)
    if index.size == 0:
        return np.full(gram.shape, np.nan)
    rows, errors = np.asarray(rows, dtype=float), np.asarray(errors, dtype=float)
    k, m = rows.shape
    r = errors.shape[1]
    scores = (rows[:, :, None] * errors[:, None, :]).reshape(k, m * r)
    every = hac_meat(scores, lags)  # (record r's block: the columns r, r + r', ...)
    meat = np.zeros((index.size, index.size))
    for record in range(r):
        scaled = np.asarray(maps[record], dtype=float)[:, index] / norms
        meat += scaled.T @ every[record::r, record::r] @ scaled
    return _hac_sandwich(gram, (meat + meat.T) / 2.0, index, norms)


def hac_meat(scores: np.ndarray, lags: int) -> np.ndarray:
    """The Newey-West meat `(q, q)` of one record's scores `g` `(k, q)` in sample order:
    `G_0 + sum_l w_l (G_l + G_l^T)`, `G_l = sum_t g_t g_(t-l)^T`, Bartlett weights
    `w_l = 1 - l / (lags + 1)` (`hac_covariance`), symmetric to the last bit."""
    # (the lags' sum `sum_l w_l g[l:]^T g[:-l]` as one product: `g^T h`, `h` the scores
    # delayed by each lag and weighted, summed)
    delayed = np.zeros_like(scores)
    for lag in range(1, min(lags, len(scores) - 1) + 1):
        delayed[lag:] += (1.0 - lag / (lags + 1.0)) * scores[:-lag]
    cross = scores.T @ delayed
    return scores.T @ scores + (cross + cross.T)


def _hac_columns(gram, columns):
    # The Gram matrix, the columns analysed and their norms (columns scaled to unit norm for
    # the inverse: SI columns of a polynomial law in metres differ by many orders of magnitude).
    gram = np.asarray(gram, dtype=float)
    index = np.flatnonzero(columns)
    norms = np.sqrt(np.maximum(np.diag(gram)[index], 0.0))
    return gram, index, np.where(norms > 0, norms, 1.0)


def _hac_sandwich(gram, meat, index, norms):
    # `B S B` in the analysed columns (NaN elsewhere), `B` the pseudo-inverse of the scaled Gram.
    covariance = np.full(gram.shape, np.nan)
    bread = np.linalg.pinv(gram[np.ix_(index, index)] / np.outer(norms, norms))
    covariance[np.ix_(index, index)] = bread @ meat @ bread / np.outer(norms, norms)
    return covariance


def channel_records(lengths: list[int], channels: int) -> list[np.ndarray]:
    """The rows of each channel of each record in data laid out sample by channel within each
    record of `lengths` samples (`channels` per sample), one index array per channel and
    record in sample order: the `records` of `hac_covariance` where correlation between
    channels is not modelled."""
    records, first = [], 0
    for k in lengths:
        records.extend(first + j + channels * np.arange(k) for j in range(channels))
        first += k * channels
    return records


def sandwich_error(covariance: np.ndarray, gradient: np.ndarray) -> float | None:
    """The standard error `sqrt(g^T C g)` of a function of parameters with `covariance`
    `(p, p)` (NaN rows and columns where not analysed) and `gradient` `g` `(p,)` (zero outside
    the parameters analysed); `None` where it is not finite."""
    used = np.asarray(gradient) != 0
    g = np.asarray(gradient, dtype=float)[used]
    variance = float(g @ np.asarray(covariance)[np.ix_(used, used)] @ g)
    return math.sqrt(variance) if np.isfinite(variance) and variance >= 0 else None
