"""The family of results every fit returns: `FitResult` (trajectories), `LawFit` (load laws),
`StiffnessFit` (stiffness matrices), `SegmentFit` (motion segments), `SpineFit` (a spine's
levels) and `MeasureResult` (stiffness measures). Each explains itself the same way:
`summary()` (text for a person), `report()` (the dict written as report.json) and
`explains_data` (the verdict of its `goodness_of_fit`, `spineid.GoodnessOfFit`); each module
has its plots in `spineid.plots`.

Two levels, as lmfit's `MinimizerResult` and its `Parameters`:

- `AbstractResult` holds what every fit has: the cost, the number of data values, whether the
  solver converged, the noise the errors assume (in the kind's own layout) and whether it was
  estimated, warnings, the time taken and the verdict; `common_report()` writes those the same
  way for every kind.
- `AbstractParameterFit` adds a vector of named parameters with their units, starts, values,
  Cramer-Rao standard errors, bounds met, correlations and identifiability, and writes them as
  one table (`parameter_table`) and one list of report entries (`parameter_entries`). Trajectory,
  load-law, segment and spine-level fits are such fits. A stiffness matrix (`StiffnessFit`:
  entries of a symmetric 6x6 matrix, reported as the matrix) and a recovered measure
  (`MeasureResult`: atoms whose number is itself an outcome) are not, and say so.

Results are built once, complete, and not changed afterwards.
"""

import abc
import dataclasses

import numpy as np

from ._verdict import GoodnessOfFit
from ._uncertainty import Identifiability


def json_number(x) -> float | None:
    """`x` as a float for a JSON report, or `None` where it is not finite (a standard error
    that does not exist, a correlation with one)."""
    return None if not np.isfinite(x) else float(x)


def with_data_units(entries: list[dict], shown: list[tuple[str, float]] | None) -> list[dict]:
    """A report's parameter `entries` (SI), each whose unit differs in the data's units
    (`shown`: each parameter's unit there and the factor from SI, as `unit_in_lab` gives them)
    with `in_data_units` beside: its unit, value, standard error and start there."""
    for entry, (unit, factor) in zip(entries, shown or []):
        if unit != entry["unit"]:
            entry["in_data_units"] = {
                "unit": unit, "value": entry["value"] * factor, "start": entry["start"] * factor,
                **{key: None if entry[key] is None else entry[key] * factor
                   for key in ("stderr", "stderr_robust") if key in entry}}
    return entries


@dataclasses.dataclass(kw_only=True, frozen=True)
class AbstractResult(abc.ABC):
    """What every spineid fit returns (module docstring).

    Fields shared by every kind: `cost` (half the sum of squared noise-weighted residuals),
    `n_data` (values fitted), `converged`, `noise` (the noise the standard errors assume, SI, in
    the kind's layout: per channel, or one load noise), `noise_estimated` (from the residuals,
    or given), `warnings` (plain-language statements), `seconds` (wall time of the fit) and
    `goodness_of_fit` (a `GoodnessOfFit`)."""

    cost: float
    n_data: int
    converged: bool
    noise: object
    noise_estimated: bool
    warnings: list[str]
    seconds: float
    goodness_of_fit: GoodnessOfFit

    @property
    def explains_data(self) -> bool | None:
        """Whether the model explains the data at the fitted values (`GoodnessOfFit`):
        `False` means the standard errors and intervals mean nothing; `None` where it cannot
        be judged (e.g. the noise of a stiffness test unknown)."""
        return self.goodness_of_fit.explains_data

    @property
    def accepted(self) -> bool | None:
        """Whether the values and standard errors are usable: the model explains or describes
        the data (`GoodnessOfFit.level`; `None` where it cannot be judged)."""
        return self.goodness_of_fit.accepted

    def common_report(self) -> dict:
        """The report entries every kind writes alike: `converged`, `cost`, `n_data`,
        `seconds`, `warnings` and `goodness_of_fit`."""
        return {"converged": bool(self.converged), "cost": float(self.cost),
                "n_data": int(self.n_data), "seconds": float(self.seconds),
                "warnings": list(self.warnings),
                "goodness_of_fit": self.goodness_of_fit.to_dict()}

    def verdict_lines(self, shown: dict[str, tuple[str, float]] | None = None) -> list[str]:
        """The summary's closing lines, alike for every kind: the warnings and the verdict
        (its channels' noise and misfit in the units of `shown`, channel -> unit and factor
        from SI: `GoodnessOfFit.summary`)."""
        return [f"WARNING: {w}" for w in self.warnings] + [self.goodness_of_fit.summary(shown)]

    @abc.abstractmethod
    def report(self) -> dict:
        """Everything the fit found, JSON-ready (report.json)."""

    @abc.abstractmethod
    def summary(self) -> str:
        """A text report for a person: values, uncertainty, identifiability, the verdict."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class AbstractParameterFit(AbstractResult):
    """A fit of a vector of named parameters (module docstring).

    Fields: `names`, `units` (SI), `start` and `values` (`(p,)`, SI), `stderr` (`(p,)`,
    Cramer-Rao under the noise the fit assumes; NaN where a parameter is not individually
    identifiable or sits on a bound), `at_bound` (`(p,)` bool), `correlation` (`(p, p)`, NaN
    where a standard error is), `identifiability`, and `stderr_robust` (`(p,)` or `None`: the
    Newey-West standard errors of the ordinary least-squares estimate, robust to correlated
    noise of any form, beside the errors under the noise model; kinds that compute them)."""

    names: list[str]
    units: list[str]
    start: np.ndarray
    values: np.ndarray
    stderr: np.ndarray
    at_bound: np.ndarray
    correlation: np.ndarray
    identifiability: Identifiability
    stderr_robust: np.ndarray | None = None

    def fitted_values(self) -> dict[str, float]:
        """Free parameter name -> fitted value (SI)."""
        return {name: float(v) for name, v in zip(self.names, self.values)}

    def parameter_entries(self) -> list[dict]:
        """One report entry per parameter: `name`, `value`, `stderr` (`None` where there is
        none), `unit`, `start`, `at_bound`, `identifiable`."""
        return [{"name": name, "value": float(self.values[i]),
                 "stderr": json_number(self.stderr[i]), "unit": self.units[i],
                 "start": float(self.start[i]), "at_bound": bool(self.at_bound[i]),
                 "identifiable": bool(self.identifiability.identifiable[i])}
                | ({} if self.stderr_robust is None
                   else {"stderr_robust": json_number(self.stderr_robust[i])})
                for i, name in enumerate(self.names)]

    def correlation_report(self) -> list[list[float | None]]:
        """The correlation matrix for a JSON report (`None` where not defined)."""
        return [[json_number(x) for x in row] for row in self.correlation]

    def parameter_table(self, label: str = "parameter", value: str = "value",
                        shown: list[tuple[str, float]] | None = None) -> list[str]:
        """The summary's table of parameters, alike for every kind: name (under `label`),
        start, value (under `value`), standard error, unit and a note (`at bound`: no
        standard error, the Cramer-Rao bound does not apply there; `not identifiable alone`:
        the data determine it only in combination with others). `shown`: each parameter's unit
        and the factor from SI to it (the data's units: `unit_in_lab`); default SI."""
        units, factors = zip(*shown) if shown else (self.units, np.ones(len(self.names)))
        start, values = self.start * np.asarray(factors), self.values * np.asarray(factors)
        stderr = self.stderr * np.asarray(factors)
        robust_errors = None if self.stderr_robust is None else self.stderr_robust * np.asarray(
            factors)
        width = max([28] + [len(name) + 1 for name in self.names])
        robust = self.stderr_robust is not None
        lines = [f"{label:{width}s} {'start':>12s} {value:>12s} {'stderr':>11s} "
                 + (f"{'robust':>11s} " if robust else "") + f"{'unit':>9s}  note"]
        for i, name in enumerate(self.names):
            if self.at_bound[i]:
                note, error = "at bound", "-"
            elif not self.identifiability.identifiable[i] or not np.isfinite(stderr[i]):
                note, error = "not identifiable alone", "-"
            else:
                note, error = "", f"{stderr[i]:.3g}"
            other = (f"{robust_errors[i]:11.3g} " if np.isfinite(robust_errors[i])
                     else f"{'-':>11s} ") if robust else ""
            lines.append(f"{name:{width}s} {start[i]:12.6g} {values[i]:12.6g} "
                         f"{error:>11s} {other}{units[i]:>9s}  {note}".rstrip())
        ident = self.identifiability
        lines.append(f"identifiability: rank {ident.rank} of {ident.n_parameters} free "
                     "parameters")
        return lines
