"""The family of results every fit returns: `FitResult` (trajectories), `LawFit` (load laws),
`StiffnessFit` (stiffness matrices), `SegmentFit` (motion segments), `SpineFit` (a spine's
levels) and `MeasureResult` (stiffness measures). Each explains itself the same way:
`summary()` (text for a person), `report()` (the dict written as report.json) and
`explains_data` (the verdict of its `goodness_of_fit`, `spineid.GoodnessOfFit`); each module
has its plots in `spineid.plots`.
"""

import abc

import numpy as np


def json_number(x) -> float | None:
    """`x` as a float for a JSON report, or `None` where it is not finite (a standard error
    that does not exist, a correlation with one)."""
    return None if not np.isfinite(x) else float(x)


class AbstractResult(abc.ABC):
    """What every spineid fit returns (module docstring). Subclasses are dataclasses with a
    `goodness_of_fit` field."""

    @property
    def explains_data(self) -> bool | None:
        """Whether the model explains the data at the fitted values (`GoodnessOfFit`):
        `False` means the standard errors and intervals mean nothing; `None` where it cannot
        be judged (e.g. the noise of a stiffness test unknown)."""
        return self.goodness_of_fit.explains_data

    @abc.abstractmethod
    def report(self) -> dict:
        """Everything the fit found, JSON-ready (report.json)."""

    @abc.abstractmethod
    def summary(self) -> str:
        """A text report for a person: values, uncertainty, identifiability, the verdict."""
