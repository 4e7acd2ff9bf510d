"""Whether a design's predicted standard errors hold over the estimates' own spread.

A design's Cramer-Rao errors (`spineid.design`) are those of the model linearised at the
nominal parameter values. The spread of fitted estimates follows them only where the
sensitivities stay about the same within that spread: the curvature of a nonlinear
regression model (Bates and Watts 1980, Relative curvature measures of nonlinearity, J R Stat
Soc B 42:1-25). `check_linearity` measures it where it matters, at the nominal values moved
by a few predicted standard errors along the least-determined principal directions of the
predicted covariance, by recomputing the information there.
"""

import dataclasses
import time

import numpy as np

from .._common._analysis import value_scales
from .._common._result_family import json_number
from .._common._uncertainty import fisher_analysis, numerical_rank
from .._trajectory._objective import resolved_scales
from ._correlation import design_sensitivities

LINEARITY_TOLERANCE = 0.2
"""How far (relative) a predicted standard error may change off the nominal values, on both
sides together or between the two sides, before `Design.check_linearity` says the
linearisation does not hold (the 20% within which a design's validation by noisy fits is
asked to agree)."""


def check_linearity(design, distance: float = 2.0, directions: int = 3) -> "LinearityCheck":
    """`design.check_linearity(distance, directions)` (`Design.check_linearity`, which
    documents it) for a `Design`."""
    started = time.perf_counter()
    if isinstance(distance, bool) or not (isinstance(distance, (int, float))
                                          and np.isfinite(distance) and distance > 0):
        raise ValueError(f"distance {distance!r}: expected a positive number of standard "
                         "errors")
    if isinstance(directions, bool) or not isinstance(directions, int) or directions < 1:
        raise ValueError(f"directions {directions!r}: expected a whole number >= 1")
    # Each chosen experiment on its own, with the channels it measures (the programs `design`
    # compiled for its candidates, run again at other parameter values).
    experiments = [(design.problems[name], design.measured.get(name)
                    or design.problems[name].channels) for name in design.chosen]

    def sensitivities(theta):
        return np.concatenate([design_sensitivities(problem, measured, theta,
                                                    design.correlation)
                               for problem, measured in experiments])

    values = np.asarray(design.values, dtype=float)
    nominal = sensitivities(values)
    scales = resolved_scales(nominal, values,
                             value_scales(values, experiments[0][0].transform()))
    _, singular, vt = np.linalg.svd(nominal * scales, full_matrices=False)
    rank = numerical_rank(singular)
    if directions > rank:
        raise ValueError(f"directions {directions!r}: expected a whole number from 1 to "
                         f"{rank} (the combinations the design determines)")

    def stderr(jacobian, theta):
        covariance, _ = fisher_analysis(jacobian, theta, scales, design.names)
        return np.sqrt(np.diag(covariance))

    reference = stderr(nominal, values)
    # The least-determined directions: the smallest singular values of the scaled
    # sensitivities; one predicted standard error along direction k is v_k / s_k (relative
    # units), D v_k / s_k in SI.
    steps = np.array([distance * scales * vt[k] / singular[k]
                      for k in range(rank - 1, rank - 1 - directions, -1)])
    ratios = []
    for step in steps:
        for sign in (1.0, -1.0):
            theta = values + sign * step
            try:
                jacobian = sensitivities(theta)
            except RuntimeError:  # (the solver gave up: the model cannot be simulated there)
                jacobian = np.full_like(nominal, np.nan)
            if not np.all(np.isfinite(jacobian)):
                ratios.append(np.full(len(values), np.nan))
                continue
            ratios.append(stderr(jacobian, theta) / reference)
    return LinearityCheck(names=list(design.names), distance=float(distance),
                          steps=steps, ratio=np.array(ratios),
                          seconds=time.perf_counter() - started)


@dataclasses.dataclass(frozen=True)
class LinearityCheck:
    """The outcome of `Design.check_linearity`.

    Fields: `names` (free parameters), `distance` (predicted standard errors moved),
    `steps` (`(k, p)`, SI: the parameter change of each of the `k` least-determined principal
    directions, most weakly determined first; each point is the nominal values plus or minus
    one), `ratio` (`(2 k, p)`: each parameter's predicted standard error at nominal + step 1,
    nominal - step 1, nominal + step 2, ... over the nominal one; NaN where the model could not
    be simulated or the parameter is not identifiable there), `seconds`.

    Two ways the linearisation fails, told apart by the two sides of each direction (ratios
    `r+` and `r-`):
    - **spread**, `both_ways = sqrt(r+ r-)`: the error grows (or shrinks) on both sides, so
      the realised spread of fitted estimates is larger (smaller) than predicted;
    - **skew**, `one_way = sqrt(r+ / r-)`: the error grows on one side and shrinks on the
      other, so the estimates' distribution is skewed: the spread may still be the predicted
      one, but a symmetric interval misplaces it (profiles, `FitResult.profile`, or the
      posterior, `spineid.posterior`, place it).
    A parameter departs where either leaves `1 +- LINEARITY_TOLERANCE` (by its logarithm).
    """

    names: list[str]
    distance: float
    steps: np.ndarray
    ratio: np.ndarray
    seconds: float

    @property
    def simulated(self) -> bool:
        """Whether every moved point could be simulated."""
        return not bool(np.any(np.all(np.isnan(self.ratio), axis=1)))

    def both_ways(self) -> np.ndarray:
        """`(k, p)`: `sqrt(r+ r-)` per direction and parameter (NaN where a side is)."""
        return np.sqrt(self.ratio[0::2] * self.ratio[1::2])

    def one_way(self) -> np.ndarray:
        """`(k, p)`: `sqrt(r+ / r-)` per direction and parameter (NaN where a side is)."""
        return np.sqrt(self.ratio[0::2] / self.ratio[1::2])

    @staticmethod
    def farthest(factors: np.ndarray) -> np.ndarray:
        """`(p,)`: per parameter, the factor of `factors` (`(k, p)`, as `both_ways()` or
        `one_way()` give them) farthest from 1 by its logarithm; NaN where no direction has a
        finite one."""
        factors = np.asarray(factors, dtype=float)
        out = np.full(factors.shape[1], np.nan)
        for j in range(factors.shape[1]):
            column = factors[:, j][np.isfinite(factors[:, j])]
            if column.size:
                out[j] = column[np.argmax(np.abs(np.log(column)))]
        return out

    def _departing(self, factors: np.ndarray) -> dict[str, float]:
        limit = np.log1p(LINEARITY_TOLERANCE)
        out = {name: float(f) for name, f in zip(self.names, self.farthest(factors))
               if np.isfinite(f) and abs(np.log(f)) > limit}
        return dict(sorted(out.items(), key=lambda item: -abs(np.log(item[1]))))

    def spread_changes(self) -> dict[str, float]:
        """`{name: both_ways}` of the parameters whose realised spread will differ from the
        prediction (the direction farthest from 1), worst first."""
        return self._departing(self.both_ways())

    def skews(self) -> dict[str, float]:
        """`{name: one_way}` of the parameters whose estimates will be skewed (the direction
        farthest from 1), worst first."""
        return self._departing(self.one_way())

    @property
    def holds(self) -> bool:
        """Whether every point could be simulated and no parameter departs, either way."""
        return self.simulated and not self.spread_changes() and not self.skews()

    def summary(self) -> str:
        """The verdict and the parameters it concerns, as text."""
        k = len(self.steps)
        where = (f"{self.distance:g} predicted standard errors along the {k} least-determined "
                 f"direction(s), both ways")
        if self.holds:
            finite = self.ratio[np.isfinite(self.ratio)]
            return (f"linearisation holds: at {where}, every predicted standard error stays "
                    f"within {finite.min():.2f}-{finite.max():.2f} of the nominal one "
                    f"({self.seconds:.1f} s)")
        lines = [f"linearisation does not hold within the estimates' spread: at {where} "
                 f"({self.seconds:.1f} s)"]
        if not self.simulated:
            lines.append("  the model cannot be simulated at some of those points: the "
                         "estimates' spread reaches where the model fails")
        spread, skews = self.spread_changes(), self.skews()
        if spread:
            lines.append("  spread: the predicted error changes the same way on both sides, so "
                         "the realised errors will differ from the prediction: "
                         + ", ".join(f"{n} x{f:.2f}" for n, f in spread.items()))
        if skews:
            lines.append("  skew: the predicted error grows on one side and shrinks on the "
                         "other, so the estimates will be skewed and a symmetric interval "
                         "misplaces them (profile or posterior): "
                         + ", ".join(f"{n} x{f:.2f} / x{1 / f:.2f}" for n, f in skews.items()))
        lines.append("  validate the design by fitting noisy simulations of it "
                     "(Design.problem, fit_batch)")
        return "\n".join(lines)

    def report(self) -> dict:
        """JSON-ready form."""
        return {"distance": self.distance, "holds": self.holds,
                "simulated": self.simulated, "spread_changes": self.spread_changes(),
                "skews": self.skews(), "steps": self.steps.tolist(),
                "ratio": [[json_number(r) for r in row] for row in self.ratio],
                "seconds": self.seconds}
