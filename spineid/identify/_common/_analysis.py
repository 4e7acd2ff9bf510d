"""The tail every fit kind shares: from the sensitivities of the weighted residuals at the
solution to the values' standard errors, correlations, identifiability, the parameters that
ended on a bound, and the notes the result carries about them.

A fit hands over the Jacobian `J = dr/dtheta` `(n, p)` of its noise-weighted residuals by the
physical parameters (`physical_jacobian` applies the chain rule from a solver's unconstrained
coordinates), the values, names and units, and how a value counts as on its bound:
- `RelativeBound` (load-law and segment fits, which run their solver to its classical stops):
  within a fraction of the starting distance from the bound;
- `StandardErrorBound` (trajectory fits, whose statistical stop leaves a value heading for its
  bound within a small fraction of its standard error from it: closer, more steps could gain
  nothing measurable).
A value on its bound is known, not estimated: it is left out of the Fisher analysis
(`fisher_analysis`, the Cramer-Rao bound `(J^T J)^-1` on the other parameters) and reported
without a standard error.
"""

import dataclasses

import numpy as np

from ._uncertainty import fisher_analysis, Identifiability, standard_errors

ZERO_SENSITIVITY_NOTE = (
    "The data are insensitive to every free parameter (zero sensitivity): nothing excites the "
    "joint in a way these parameters affect."
)


def value_scales(values, transform) -> np.ndarray:
    """The scale of each parameter for the rank decisions `(p,)`: its magnitude, or for a value
    of zero the transform's scale (its starting distance from a bound, or its start)."""
    values = np.asarray(values, dtype=float)
    return np.where(np.abs(values) > 0, np.abs(values), np.asarray(transform.scale))


def linearised_at(solution):
    """Where a `LocalSolution`'s Jacobian was taken (`(p,)`, unconstrained), where its solver
    says (Levenberg-Marquardt's fourth linearisation entry), else `None` (at its value)."""
    linearisation = solution.linearisation
    return None if linearisation is None or len(linearisation) < 4 else linearisation[3]


def physical_jacobian(jacobian_u, u, transform, taken=None) -> tuple[np.ndarray, np.ndarray]:
    """`(theta, J)`: the physical values `(p,)` at the unconstrained point `u` `(p,)` and the
    Jacobian `(n, p)` by them, from the Jacobian `jacobian_u` `(n, p)` by `u` taken at `taken`
    (default `u`; Levenberg-Marquardt's `linearised_at`, one small final step before it) (the
    transform is elementwise: `dr/dtheta_j = (dr/du_j) / (dtheta_j/du_j)`, the slope where the
    Jacobian was taken)."""
    theta, slope = transform.evaluated(u)
    if taken is not None:
        slope = transform.evaluated(np.asarray(taken))[1]
    return theta, np.asarray(jacobian_u) / slope[None, :]


@dataclasses.dataclass(frozen=True)
class RelativeBound:
    """A value counts as on its bound within `relative` of its starting distance from it.
    Scales: the larger of a value's magnitude and that distance."""

    relative: float = 1e-4

    def __call__(self, jacobian, values, transform, names):
        scales = np.maximum(np.abs(values), np.asarray(transform.scale))
        return transform.at_bound(values, relative=self.relative), scales


@dataclasses.dataclass(frozen=True)
class StandardErrorBound:
    """A value counts as on its bound within `fraction` of its standard error (computed as if
    no bound were there) from it, and within `start_fraction` of its starting distance from it
    (a standard error far larger than the value, under noise given far too large, puts no value
    on its bound). Scales: `value_scales`."""

    fraction: float = 0.05
    start_fraction: float = 0.1

    def __call__(self, jacobian, values, transform, names):
        scales = value_scales(values, transform)
        unbounded, _ = fisher_analysis(jacobian, values, scales, names)
        start, lower, upper = (np.asarray(a) for a in (transform.start, transform.lower,
                                                       transform.upper))
        within = np.minimum(self.fraction * np.sqrt(np.diag(unbounded)),
                            self.start_fraction * np.fmin(np.abs(start - lower),
                                                          np.abs(upper - start)))
        return transform.at_bound(values, within=within), scales


@dataclasses.dataclass(frozen=True)
class ParameterAnalysis:
    """The uncertainty of a fit's values.

    Fields: `covariance` `(p, p)` (Cramer-Rao, physical units; NaN rows for parameters without
    a standard error), `identifiability` (`spineid.Identifiability`), `at_bound` `(p,)` bool,
    `stderr` `(p,)`, `correlation` `(p, p)`, and `warnings`: the identifiability's statements,
    one line per parameter on its bound, and the zero-sensitivity note where it applies."""

    covariance: np.ndarray
    identifiability: Identifiability
    at_bound: np.ndarray
    stderr: np.ndarray
    correlation: np.ndarray
    warnings: tuple[str, ...]


def analyse_parameters(jacobian, values, names: list[str], units: list[str], transform=None,
                       bound=RelativeBound(), scales=None) -> ParameterAnalysis:
    """The `ParameterAnalysis` of a fit (module docstring).

    **Arguments:** `jacobian` `(n, p)`: the noise-weighted residuals' derivatives by the
    physical parameters (rows of the data only); `values` `(p,)`; `names`, `units`; `transform`
    (the fit's `Transform`, its bounds and scales; `None` for a fit without bounds, which
    then needs `scales`); `bound`: a `RelativeBound` or `StandardErrorBound`; `scales`
    `(p,)`: overrides the bound rule's scales of the rank decisions."""
    jacobian, values = np.asarray(jacobian, dtype=float), np.asarray(values, dtype=float)
    if transform is None:
        at_bound, rule_scales = np.zeros(values.size, bool), scales
    else:
        at_bound, rule_scales = bound(jacobian, values, transform, names)
    covariance, identifiability = fisher_analysis(
        jacobian, values, rule_scales if scales is None else scales, names, active=~at_bound,
        units=units)
    stderr, correlation = standard_errors(covariance)  # NaN where not identifiable alone
    warnings = list(identifiability.warnings)
    warnings.extend(f"{names[i]} ended on its bound ({values[i]:.3g}{' ' * bool(units[i])}"
                    f"{units[i]}); it is reported without a standard error."
                    for i in np.flatnonzero(at_bound))
    if not np.any(np.abs(jacobian) > 0):
        warnings.append(ZERO_SENSITIVITY_NOTE)
    return ParameterAnalysis(covariance, identifiability, at_bound, stderr, correlation,
                             tuple(warnings))


def not_converged_note(max_steps: int | None = None, per_pass: bool = True) -> str:
    """The note of a local solve that stopped before its tolerances: at its step limit
    `max_steps` (of each pass, for a fit refitted as its noise settles: `per_pass`), or on a
    step that lowered nothing."""
    limit = ("its step limit" if max_steps is None else f"the limit of {max_steps} steps"
             + (" per pass" if per_pass else ""))
    return (f"Levenberg-Marquardt did not converge ({limit} reached, or no step lowered the "
            "cost)")
