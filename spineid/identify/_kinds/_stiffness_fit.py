"""Stiffness matrices fitted to quasi-static load-displacement tests (flexibility/stiffness
protocols), respecting the Euler-angle and dual-Euler-basis definitions of the bushing.

A test row holds the load applied to the upper vertebra, force `F` (N) and moment `M` (N m) in
the lower body's axes, the moment about the upper landmark, and the measured relative motion
`y = [p, beta]` (m, 1-2-3 Euler angles in rad; `spineid.bushing_deflection`). At equilibrium
the bushing balances the load, so `K y = f` with the generalized load `f = [F, G(beta) M]`: `G`
has the Euler basis vectors `g~_i` as rows, because the stiffness moments act along the dual basis
(Christophy et al. 2013 eq 17; supplement S.7, S.34). `K` enters linearly, so for any of the
structures below the fit is one linear least-squares problem:

- `full`: symmetric, 21 entries;
- `sagittal`: symmetric about the sagittal plane (axes: e1 anterior, e2 superior, e3 right),
  12 entries: the diagonal and the couplings within {tx, ty, rz} and within {tz, rx, ry}, the
  pattern of eq 24;
- `diagonal`: 6 entries.

Common lab practice takes the moments as measured (`G = I`), which is right to first order in
the rotations. Both paths are linear least squares here, so the exact one costs nothing more;
`fit_stiffness_matrix` uses it by default, fits the linearised one too and reports by how many
standard errors the entries differ: with precise load cells, rotations of a fraction of a
degree already make a measurable difference (see tests/test_stiffness_fit.py).
"""

import dataclasses
import math
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ...io._measurements import LOAD_COLUMNS, QuasiStaticTest
from ...kinematics._rotations import euler_basis
from .._common._analysis import analyse_parameters
from .._common._goodness import assess_fit, checked_max_misfit, MAX_MISFIT
from .._common._noise import (
    iterated_prewhitening,
    judged_ranges,
    noise_from_residuals,
    NOISE_SETTLED,
    settle_noise,
    unsettled_note,
)
from .._common._noise_model import (
    AR, channel_noises, check_order, checked_noise_model, drift_notes, whitened,
)
from .._common._result_family import AbstractResult, json_number
from .._common._uncertainty import factored_hac_covariance, Identifiability, newey_west_lags
from ._matrix_units import described, entry_in, loads_in, matrix_units


AXES = ("tx", "ty", "tz", "rx", "ry", "rz")


_EVEN, _ODD = (0, 1, 5), (2, 3, 4)  # components even / odd under the sagittal mirror z -> -z


STRUCTURES = {
    "full": [(i, j) for i in range(6) for j in range(i, 6)],
    "sagittal": sorted([(i, i) for i in range(6)]
                       + [(i, j) for group in (_EVEN, _ODD) for i in group for j in group
                          if i < j]),
    "diagonal": [(i, i) for i in range(6)],
}


def generalized_loads(test: QuasiStaticTest, exact: bool = True) -> np.ndarray:
    """`f = [F, G(beta) M]` per row `(n, 6)`: the moment's components along the Euler basis of
    the measured rotation (exact), or the moment as measured (`exact=False`)."""
    loads = test.loads.copy()
    if exact and len(loads):
        bases = np.asarray(_euler_bases(jnp.asarray(test.deflections[:, 3:])))
        loads[:, 3:] = np.einsum("nij,nj->ni", bases, test.loads[:, 3:])
    return loads


_euler_bases = jax.jit(jax.vmap(euler_basis))  # (n, 3) Euler angles -> (n, 3, 3) bases


LARGEST_PLAUSIBLE_DEG = 45.0
"""A test rotating a joint further than this (deg) is said to be implausible: angles in degrees
read as radians (a motion segment's range is a few to about 20 degrees)."""


def entry_name(i: int, j: int) -> str:
    """`K[tx,ry]`-style name of a stiffness entry."""
    return f"K[{AXES[i]},{AXES[j]}]"


def entry_unit(i: int, j: int) -> str:
    """SI unit of stiffness entry `(i, j)` (load component `i` per deflection component `j`)."""
    unit = f"{'N' if i < 3 else 'N m'}/{'m' if j < 3 else 'rad'}"
    return "N" if unit == "N m/m" else unit


@dataclasses.dataclass(frozen=True)
class StiffnessFit(AbstractResult):
    """A stiffness matrix fitted to a quasi-static test, with what the test determines.

    Fields: `matrix` (`(6, 6)`, SI, `[tx, ty, tz, rx, ry, rz]`), `stderr` (`(6, 6)`, NaN where
    not determined), `structure`, `entries` (`[(i, j)]`), `exact` (whether moments were mapped
    onto the Euler basis), `largest_rotation` (rad), `conversion_effect` (largest change of a
    fitted entry between the exact and linearised paths, relative to its standard error),
    `identifiability`, `residuals` `(n, 6)` and `predicted` `(n, 6)` loads; and those of every
    result (`spineid.AbstractResult`: `noise` is the `(6,)` load noise, N and N m, the standard
    deviations of the errors themselves under a noise model; `converged` is always true, the fit
    being one or a few linear solves; the `goodness_of_fit`: with the noise estimated the rows
    are a record in the order of the file and the verdict has three levels; with white noise
    given they are taken without an order and the chi-square tells); `stderr_robust` (`(6, 6)`
    or `None`: the Newey-West errors of the weighted least-squares estimate where a load
    channel's noise needed an autoregression); `data_units` (`(force, moment, length, angle)`
    the test was read in, `matrix_units`; `None` for SI: `summary`'s). Not a
    `spineid.AbstractParameterFit`: its parameters are the entries of a symmetric matrix and
    are reported as that matrix, `(6, 6)` values and standard errors.
    """

    matrix: np.ndarray
    stderr: np.ndarray
    structure: str
    entries: list
    exact: bool
    largest_rotation: float
    conversion_effect: float
    identifiability: Identifiability
    residuals: np.ndarray
    predicted: np.ndarray
    stderr_robust: np.ndarray | None = None
    data_units: tuple[str, str, str, str] | None = None

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid stiffness`, docs/cli.md): the fit
        report's layout plus the matrix."""
        return self.common_report() | {
            "structure": self.structure,
            "moments": "euler basis (exact)" if self.exact else "as measured (linearised)",
            "largest_rotation_deg": math.degrees(self.largest_rotation),
            "conversion_effect_in_stderr": json_number(self.conversion_effect),
            "parameters": [
                {"name": entry_name(i, j), "value": float(self.matrix[i, j]),
                 "stderr": json_number(self.stderr[i, j]), "unit": entry_unit(i, j),
                 "determined": bool(determined)}
                | ({} if self.stderr_robust is None
                   else {"stderr_robust": json_number(self.stderr_robust[i, j])})
                for (i, j), determined in zip(self.entries, self.identifiability.identifiable)
            ],
            "matrix": self.matrix.tolist(),
            "noise": {c: float(s) for c, s in zip(LOAD_COLUMNS, self.noise)},
            "noise_estimated": self.noise_estimated,
            "identifiability": self.identifiability.to_dict(),
        }

    def undetermined(self) -> list[str]:
        """The names of the entries the test does not determine alone (their values are not
        measured: those of the minimum-norm solution, 0 for a degree of freedom the test never
        loads or moves, a share of a combination for entries the test sees only together)."""
        return [entry_name(i, j) for (i, j), determined
                in zip(self.entries, self.identifiability.identifiable) if not determined]

    def summary(self, units: tuple[str, str, str, str] | None = None, si: bool = False
                ) -> str:
        """Plain-text summary: the matrix, the entries with errors, warnings; in `units`
        (`(force, moment, length, angle)` of `spineid.io`'s `UNITS`), by default those the
        test's columns were read in (`data_units`: `_matrix_units.matrix_units`), said in a
        line; in SI with `si` or for a test in SI."""
        units = None if si else units or self.data_units
        def shown(i, j):  # (unit, factor from SI) of entry (i, j)
            return entry_in(i, j, units) if units else (entry_unit(i, j), 1.0)

        lines = [f"stiffness matrix ({self.structure}, {len(self.entries)} entries) from "
                 f"{self.n_data // 6} test rows; moments "
                 + ("mapped onto the Euler basis" if self.exact else "used as measured")
                 + f" (largest rotation {math.degrees(self.largest_rotation):.2f} deg)"]
        lines += [described(units)] if units else []
        lines.append("         " + "".join(f"{a:>13s}" for a in AXES))
        for i, row in enumerate(self.matrix):
            lines.append(f"  {AXES[i]:>5s}  " + "".join(f"{v * shown(i, j)[1]:13.5g}"
                                                         for j, v in enumerate(row)))
        robust = self.stderr_robust is not None
        lines.append(f"{'entry':12s} {'value':>13s} {'stderr':>11s} "
                     + ("robust sd   " if robust else "") + " unit")
        for (i, j), determined in zip(self.entries, self.identifiability.identifiable):
            unit, factor = shown(i, j)
            lines.append(f"{entry_name(i, j):12s} {self.matrix[i, j] * factor:13.6g} "
                         + (f"{self.stderr[i, j] * factor:11.3g} " if determined
                            else f"{'-':>11s} ")
                         + (f"{self.stderr_robust[i, j] * factor:11.3g} " if robust and determined
                            else f"{'-':>11s} " if robust else "")
                         + f" {unit}" + ("" if determined else "  not determined by the test"))
        lines.append(f"identifiability: rank {self.identifiability.rank} of "
                     f"{len(self.entries)} entries")
        return "\n".join(lines + self.verdict_lines(loads_in(units) if units else None))


def fit_stiffness_matrix(test: QuasiStaticTest, structure: str = "full",
                         noise: np.ndarray | None = None, exact: bool = True,
                         noise_model="auto", max_misfit: float = MAX_MISFIT) -> StiffnessFit:
    """Fit `K` (`structure`: `full`, `sagittal` or `diagonal`) to a quasi-static test by
    weighted linear least squares on `K y = f` (module docstring), or by generalized least
    squares where the load noise is correlated from row to row.

    **Arguments:** `test`; `noise`: standard deviations of the 6 load channels (N, N m; white),
    default: estimated from the residuals; `exact`: map moments onto the Euler basis (default)
    or use them as measured (linearised; `conversion_effect` says what that costs);
    `noise_model` (with the noise estimated): `"auto"` (default: each load channel white where
    its residuals are, else the autoregressive order AIC chooses), `"white"`, `"ar:P"` or a
    `spineid.AR`; the rows are then taken in the order they were recorded (a tester's sweep);
    `max_misfit`: the largest smooth misfit accepted, a fraction of each load channel's range
    (default 2%; `docs/goodness-of-fit.md`).

    **Returns:** a `StiffnessFit` with standard errors (Cramer-Rao, exact for a linear model
    with Gaussian load noise: under an autoregression, those of the generalized least-squares
    estimate, Seber and Wild 1989 section 6.2, with the Newey-West errors of the weighted
    least-squares estimate beside them as `stderr_robust`) and the identifiability of the
    entries: a protocol that never moves a degree of freedom leaves its entries undetermined,
    and the report says which.
    """
    clock = time.perf_counter()
    if structure not in STRUCTURES:
        raise ValueError(f"structure {structure!r}: expected one of {list(STRUCTURES)}")
    entries = STRUCTURES[structure]
    largest = float(np.max(np.abs(test.deflections[:, 3:]), initial=0.0))
    exact = bool(exact)
    n = len(test.loads)
    if n * 6 < len(entries):
        raise ValueError(f"{test.source}: {n} rows give {6 * n} equations for "
                         f"{len(entries)} entries; record more load cases")
    if not np.any(np.asarray(test.deflections)):
        raise ValueError(f"{test.source}: every deflection is zero, so the loads determine no "
                         "stiffness; check the displacement columns (dx..b3)")
    noise_estimated = noise is None
    kind_of_noise = checked_noise_model(noise_model, not noise_estimated, [], "noise_model",
                                        LOAD_COLUMNS)
    check_order(kind_of_noise, [n], "noise_model")
    max_misfit = checked_max_misfit(max_misfit)

    # Load component i of a test row is sum_j,k selection[i, j, k] y_j x_k: y the row's
    # deflections, x the entries (a symmetric pair counted both ways).
    selection = np.zeros((6, 6, len(entries)))
    for column, (i, j) in enumerate(entries):
        selection[i, j, column] += 1.0
        if i != j:
            selection[j, i, column] += 1.0
    deflections = np.asarray(test.deflections, dtype=float)

    def predicted(values):  # (n, 6): the loads of the matrix `values` at each row
        return deflections @ (selection @ values).T

    def solve(target, sigma, noises=None):  # -> (values, a, b)
        # The least-squares solution with each channel weighted by `sigma` (6,) and, given
        # `noises` (one ChannelNoise per channel), whitened along the rows by its
        # autoregression first (its first `p` rows left out: Cochrane-Orcutt); `(a, b)` the
        # system compressed (`_compressed_system`).
        a, b, rows = _compressed_system(deflections, target, selection, sigma, noises)
        # (numpy's cut-off of the whole system's singular values, eps max(rows, p), not of the
        # compressed one's: the same minimum-norm solution where entries are barely seen)
        cutoff = np.finfo(float).eps * max(rows, len(entries))
        return np.linalg.lstsq(a, b, rcond=cutoff)[0], a, b

    targets = {flag: generalized_loads(test, flag) for flag in (True, False)}
    sigma = np.ones(6) if noise_estimated else np.asarray(noise, dtype=float)
    if sigma.shape != (6,) or not np.all(np.isfinite(sigma) & (sigma > 0)):
        raise ValueError(f"noise {sigma.tolist()}: expected 6 positive load noise levels")
    notes = []
    ranges = np.ptp(targets[exact], axis=0)
    if noise_estimated:
        # Provisional weights by each channel's scale, then the residual level per channel,
        # the weighted solve repeated until that settles (`settle_noise`, as every fit kind).
        scale = np.maximum(np.abs(targets[exact]).max(axis=0), 1e-12)

        def estimate(solved):
            return noise_from_residuals(predicted(solved[0]) - targets[exact], len(entries),
                                        scale)

        sigma = estimate((*solve(targets[exact], scale), scale))
        fits, sigma, change = settle_noise(
            lambda sigma, previous: (*solve(targets[exact], sigma), sigma), estimate, sigma)
        if change > NOISE_SETTLED:
            notes.append(unsettled_note(change))
    # The weighted least-squares estimate; under an autoregression the generalized one after it.
    least_squares, a, b = solve(targets[exact], sigma)
    values, noises, white_sigma = least_squares, None, sigma
    if noise_estimated and isinstance(kind_of_noise, AR):
        found, noises, more = _generalized(
            lambda sigma, noises: solve(targets[exact], sigma, noises),
            lambda values: predicted(values) - targets[exact],
            predicted(least_squares) - targets[exact], np.maximum(ranges, scale), len(entries),
            kind_of_noise)
        notes.extend(more)
        if found is None:
            noises = None  # (white: the weighted fit stands)
        else:
            values = found
            sigma = np.array([noise.innovation for noise in noises])
            a, b, _ = _compressed_system(deflections, targets[exact], selection, sigma,
                                         noises)
    other = solve(targets[not exact], sigma, noises)[0]
    marginal = np.array([noise.marginal for noise in noises]) if noises else sigma
    residuals = (predicted(values) - targets[exact]) / marginal
    scales = np.maximum(np.abs(values), np.abs(values).max() * 1e-6 + 1e-300)
    names = [entry_name(i, j) for i, j in entries]
    analysis = analyse_parameters(a, values, names, [entry_unit(i, j) for i, j in entries],
                                  scales=scales)
    identifiability, stderr_entries = analysis.identifiability, analysis.stderr
    # Beside them, Newey-West errors of the weighted least-squares estimate (each load channel
    # a record in the order of the rows, its rows of the weighted system `Y E_c / sigma_c`:
    # the Gram matrix from `Y^T Y` and the meat from the scores of `Y`, never the whole system).
    robust = None
    if noises:
        errors = (targets[exact] - predicted(least_squares)) / white_sigma
        maps = selection / white_sigma[:, None, None]
        moments = deflections.T @ deflections
        gram = sum(maps[c].T @ moments @ maps[c] for c in range(6))
        robust = np.sqrt(np.diag(factored_hac_covariance(
            gram, deflections, maps, errors, identifiability.identifiable, newey_west_lags(n))))
    matrix, stderr = _symmetric(entries, values, stderr_entries)
    stderr_robust = None if robust is None else _symmetric(entries, values, robust)[1]
    effect = float(np.nanmax(np.abs(values - other) / stderr_entries)) \
        if np.any(np.isfinite(stderr_entries)) else math.nan
    messages = list(analysis.warnings) + notes
    if noises:
        messages.extend(drift_notes(values, least_squares, robust,
                                    max(noise.order for noise in noises)))
    undetermined = [names[k] for k in range(len(names)) if not identifiability.identifiable[k]]
    if undetermined:
        messages.append("the test does not determine " + ", ".join(undetermined)
                        + ": load or move those degrees of freedom")
    eigenvalues = np.linalg.eigvalsh(matrix)
    if eigenvalues.min() <= 0:
        text = (f"the fitted stiffness matrix is not positive definite (smallest eigenvalue "
                f"{eigenvalues.min():.4g}): as a bushing it makes the joint unstable")
        messages.append(text)
        warnings.warn(text, stacklevel=2)
    read_as = getattr(test, "read_as", None) or {}  # (angles read in a unit said: no doubt)
    if largest > math.radians(LARGEST_PLAUSIBLE_DEG) and all(
            (read_as.get(c) or {}).get("rule", "spineid name") == "spineid name"
            for c in ("b1", "b2", "b3")):
        messages.append(f"the test's largest rotation is {math.degrees(largest):.0f} deg, far "
                        "beyond a motion segment's: if the file's angles are degrees under "
                        "spineid's own names (b1..b3 are read as rad), give their unit (columns "
                        "named b1_deg, or units b1=deg)")
    if not exact and np.isfinite(effect) and effect > 1.0:
        messages.append(f"moments were used as measured, but mapping them onto the Euler basis "
                        f"changes an entry by {effect:.1f} standard errors: fit with exact=True "
                        "(the command line's default, without --linearised)")
    return StiffnessFit(
        matrix=matrix, stderr=stderr, structure=structure, entries=list(entries), exact=exact,
        largest_rotation=largest, conversion_effect=effect, noise=marginal,
        noise_estimated=noise_estimated, cost=0.5 * float(np.sum((a @ values - b) ** 2)),
        n_data=6 * n, converged=True, seconds=time.perf_counter() - clock,
        identifiability=identifiability, warnings=messages, residuals=residuals * marginal,
        predicted=predicted(values), stderr_robust=stderr_robust,
        data_units=matrix_units(getattr(test, "read_as", None)),
        goodness_of_fit=assess_fit(
            [residuals], LOAD_COLUMNS, identifiability.rank, noise_given=not noise_estimated,
            sigma=dict(zip(LOAD_COLUMNS, map(float, marginal))), ordered=noise_estimated,
            noise_models=dict(zip(LOAD_COLUMNS, noises)) if noises else None,
            ranges=dict(zip(LOAD_COLUMNS, map(float, judged_ranges(
                predicted(least_squares) - targets[exact], ranges)))) if noise_estimated
            else None,
            max_misfit=dict.fromkeys(LOAD_COLUMNS, max_misfit),
            misfit_residuals=[predicted(least_squares) - targets[exact]],
            magnitudes=dict(zip(LOAD_COLUMNS, map(float, np.abs(targets[exact]).max(axis=0))))),
    )


def _symmetric(entries, values, errors):
    # The `(6, 6)` matrix of the fitted `entries` and that of their errors (NaN where not
    # determined, 0 where the structure fixes an entry at zero).
    matrix, stderr = np.zeros((6, 6)), np.zeros((6, 6))
    for (i, j), value, error in zip(entries, values, errors):
        matrix[i, j] = matrix[j, i] = value
        stderr[i, j] = stderr[j, i] = error
    return matrix, stderr


def _compressed_system(deflections, target, selection, sigma, noises=None):
    # The stacked least-squares system of the entries (each load channel's rows whitened by its
    # autoregression, `noises`, where given, and divided by `sigma` (6,)), compressed exactly:
    # channel c's rows are `[Y_c | b_c]` (deflections and load, `(n, 7)`) = `Q_c R_c`, so its
    # equations `Y_c E_c x = b_c` (`E_c = selection[c]`) hold the information of
    # `R_c[:, :6] E_c x = R_c[:, 6]`, at most 7 rows (Golub and Van Loan 2013, section 5.3):
    # the same sum of squares at every x, so the same solution (minimum-norm where rank
    # deficient), Fisher matrix and singular values, for O(49 n) work and no (6n, p) array
    # (built only for the Newey-West errors beside a noise model's). Also returns the number
    # of rows of the whole system.
    a, b, rows = [], [], 0
    for c in range(6):
        channel = np.column_stack([deflections, target[:, c]])
        if noises is not None:  # (every column along the rows at once)
            channel = whitened(channel, noises[c].coefficients)
        r = np.linalg.qr(channel / sigma[c], mode="r")
        a.append(r[:, :6] @ selection[c])
        b.append(r[:, 6])
        rows += len(channel)
    return np.concatenate(a), np.concatenate(b), rows


def _generalized(solve, residuals_of, raw, ranges, n_free, kind_of_noise):
    # Each load channel's autoregression from the weighted least-squares residuals `raw`
    # (n, 6); where one needs an order, generalized least squares by iterated prewhitening
    # (`iterated_prewhitening`: the orders kept, the coefficients re-estimated from each
    # refit's residuals `residuals_of(values)` until the innovations settle, the innovations'
    # deviations at last taken from the final fit under the coefficients it was weighted with,
    # as statsmodels' `GLSAR` at those). Returns `(values or None, noises (6 ChannelNoise),
    # notes)`: `None` where every channel is white.
    first = channel_noises(LOAD_COLUMNS, ranges, n_free, [raw], kind_of_noise)
    whitened = iterated_prewhitening(
        first, lambda found, sigma, previous: solve(sigma, list(found.values()))[0],
        lambda values: [residuals_of(values)],
        lambda found, **how: channel_noises(LOAD_COLUMNS, ranges, n_free, found, kind_of_noise,
                                            **how))
    if whitened is None:
        return None, list(first.values()), []
    return whitened.fits[-1], list(whitened.noises.values()), whitened.notes
