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

import numpy as np

from ...io._measurements import LOAD_COLUMNS, QuasiStaticTest
from ...kinematics._rotations import euler_basis
from .._common._goodness import assess_fit
from .._common._noise import (
    noise_from_residuals,
    NOISE_SETTLED,
    settle_noise,
    unsettled_note,
)
from .._common._result_family import AbstractResult, json_number
from .._common._uncertainty import fisher_analysis, Identifiability


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
    if exact:
        for row, beta in enumerate(test.deflections[:, 3:]):
            loads[row, 3:] = np.asarray(euler_basis(beta)) @ test.loads[row, 3:]
    return loads


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
    result (`spineid.AbstractResult`: `noise` is the `(6,)` load noise, N and N m; `converged`
    is always true, the fit being one linear solve; the `goodness_of_fit`, with the load noise
    estimated and test rows without an order, cannot tell). Not a
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
                 "stderr": json_number(self.stderr[i, j]), "unit": entry_unit(i, j)}
                for i, j in self.entries
            ],
            "matrix": self.matrix.tolist(),
            "noise": {c: float(s) for c, s in zip(LOAD_COLUMNS, self.noise)},
            "noise_estimated": self.noise_estimated,
            "identifiability": self.identifiability.to_dict(),
        }

    def summary(self) -> str:
        """Plain-text summary: the matrix, the entries with errors, warnings."""
        lines = [f"stiffness matrix ({self.structure}, {len(self.entries)} entries) from "
                 f"{self.n_data // 6} test rows; moments "
                 + ("mapped onto the Euler basis" if self.exact else "used as measured")
                 + f" (largest rotation {math.degrees(self.largest_rotation):.2f} deg)"]
        lines.append("         " + "".join(f"{a:>13s}" for a in AXES))
        for i, row in enumerate(self.matrix):
            lines.append(f"  {AXES[i]:>5s}  " + "".join(f"{v:13.5g}" for v in row))
        lines.append(f"{'entry':12s} {'value':>13s} {'stderr':>11s}  unit")
        for i, j in self.entries:
            lines.append(f"{entry_name(i, j):12s} {self.matrix[i, j]:13.6g} "
                         f"{self.stderr[i, j]:11.3g}  {entry_unit(i, j)}")
        lines.append(f"identifiability: rank {self.identifiability.rank} of "
                     f"{len(self.entries)} entries")
        return "\n".join(lines + self.verdict_lines())


def fit_stiffness_matrix(test: QuasiStaticTest, structure: str = "full",
                         noise: np.ndarray | None = None, exact: bool = True
                         ) -> StiffnessFit:
    """Fit `K` (`structure`: `full`, `sagittal` or `diagonal`) to a quasi-static test by
    weighted linear least squares on `K y = f` (module docstring).

    **Arguments:** `test`; `noise`: standard deviations of the 6 load channels (N, N m),
    default: estimated from the residuals; `exact`: map moments onto the Euler basis (default)
    or use them as measured (linearised; `conversion_effect` says what that costs).

    **Returns:** a `StiffnessFit` with standard errors (Cramer-Rao, exact for a linear model
    with Gaussian load noise) and the identifiability of the entries: a protocol that never
    moves a degree of freedom leaves its entries undetermined, and the report says which.
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

    def design(deflections):
        # Rows: load component i of each test row; columns: the entries (symmetric pairs).
        matrix = np.zeros((n, 6, len(entries)))
        for column, (i, j) in enumerate(entries):
            matrix[:, i, column] += deflections[:, j]
            if i != j:
                matrix[:, j, column] += deflections[:, i]
        return matrix

    def solve(target, sigma):
        a = (design(test.deflections) / sigma[None, :, None]).reshape(6 * n, -1)
        b = (target / sigma).ravel()
        values = np.linalg.lstsq(a, b, rcond=None)[0]
        return values, a, b

    noise_estimated = noise is None
    targets = {flag: generalized_loads(test, flag) for flag in (True, False)}
    sigma = np.ones(6) if noise_estimated else np.asarray(noise, dtype=float)
    if sigma.shape != (6,) or not np.all(np.isfinite(sigma) & (sigma > 0)):
        raise ValueError(f"noise {sigma.tolist()}: expected 6 positive load noise levels")
    notes = []
    if noise_estimated:
        # Provisional weights by each channel's scale, then the residual level per channel,
        # the weighted solve repeated until that settles (`settle_noise`, as every fit kind).
        scale = np.maximum(np.abs(targets[exact]).max(axis=0), 1e-12)

        def estimate(solved):
            values, a, b, weights = solved
            return noise_from_residuals((a @ values - b).reshape(n, 6) * weights,
                                        len(entries), scale)

        sigma = estimate((*solve(targets[exact], scale), scale))
        fits, sigma, change = settle_noise(
            lambda sigma, previous: (*solve(targets[exact], sigma), sigma), estimate, sigma)
        if change > NOISE_SETTLED:
            notes.append(unsettled_note(change))
    values, a, b = solve(targets[exact], sigma)
    other = solve(targets[not exact], sigma)[0]
    residuals = (a @ values - b).reshape(n, 6)
    scales = np.maximum(np.abs(values), np.abs(values).max() * 1e-6 + 1e-300)
    names = [entry_name(i, j) for i, j in entries]
    covariance, identifiability = fisher_analysis(a, values, scales, names)
    stderr_entries = np.sqrt(np.diag(covariance))
    matrix = np.zeros((6, 6))
    stderr = np.full((6, 6), np.nan)
    for (i, j), value, error in zip(entries, values, stderr_entries):
        matrix[i, j] = matrix[j, i] = value
        stderr[i, j] = stderr[j, i] = error
    for i in range(6):
        for j in range(6):
            if (min(i, j), max(i, j)) not in entries:
                stderr[i, j] = 0.0  # fixed at zero by the structure
    effect = float(np.nanmax(np.abs(values - other) / stderr_entries)) \
        if np.any(np.isfinite(stderr_entries)) else math.nan
    messages = list(identifiability.warnings) + notes
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
    if not exact and np.isfinite(effect) and effect > 1.0:
        messages.append(f"moments were used as measured, but mapping them onto the Euler basis "
                        f"changes an entry by {effect:.1f} standard errors: use exact=True")
    return StiffnessFit(
        matrix=matrix, stderr=stderr, structure=structure, entries=list(entries), exact=exact,
        largest_rotation=largest, conversion_effect=effect, noise=sigma,
        noise_estimated=noise_estimated, cost=0.5 * float(np.sum(residuals**2)), n_data=6 * n,
        converged=True, seconds=time.perf_counter() - clock,
        identifiability=identifiability, warnings=messages, residuals=residuals * sigma,
        predicted=(design(test.deflections) @ values),
        goodness_of_fit=assess_fit(
            [residuals], LOAD_COLUMNS, identifiability.rank, noise_given=not noise_estimated,
            sigma=dict(zip(LOAD_COLUMNS, map(float, sigma))), ordered=False),
    )
