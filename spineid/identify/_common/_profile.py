"""Profile-likelihood intervals of single parameters (Venzon and Moolgavkar 1988; Raue et al.
2009, Bioinformatics 25: 1923-1929), as pyPESTO's profiles and lmfit's `conf_interval` give them.

The profile of parameter `i` is the least cost with `theta_i` held at a value `v` and every other
free parameter refitted, `PL(v) = min cost(theta | theta_i = v)`. With Gaussian noise of known
level, `2 (PL(v) - cost_min)` is asymptotically chi-square with one degree of freedom, so the
interval at confidence `level` is where it stays below the quantile `chi2_1(level)` (3.84 at 95%).
On a problem linear in the parameters the profile is the parabola `((v - v_hat) / stderr)^2`
and the interval is the Cramer-Rao one, `v_hat +- z stderr`; where the model is nonlinear the
profile bends and the interval becomes asymmetric, and where the data do not bound a parameter
the profile stays flat and the interval is open (reported as such, never clipped silently).
With the noise estimated, the profile holds the noise at its estimate (the usual
approximation; the interval is then slightly too narrow for few data).

The walk: from the optimum, steps of half a Cramer-Rao standard error (or 5% of the value
where the standard error is unknown) outward on each side, doubling while the profile stays
below a tenth of the threshold, each point refitted from the nearest one's solution, until the
profile exceeds the threshold; the crossing is then placed by linear interpolation of the square
root of the profile between the bracketing points (exact for a quadratic profile) and confirmed
by a refit there, repeated until the profile at the crossing is within 1% of the threshold.
"""

import dataclasses
import math
import numbers
from collections.abc import Callable

import numpy as np
from jax.scipy.special import ndtri

from ._result_family import AbstractParameterFit

# Largest number of walk steps per side before the interval is declared open.
MAX_STEPS = 16


def chi_square_quantile_1(level: float) -> float:
    """The `level` quantile of the chi-square distribution with one degree of freedom."""
    return float(ndtri(0.5 * (1.0 + level))) ** 2


@dataclasses.dataclass
class Profile:
    """The profile likelihood of one parameter.

    Fields: `name`, `unit`, `value` (the fitted value, SI), `stderr` (its Cramer-Rao standard
    error), `level` (confidence), `threshold` (`chi2_1(level)`), `points` (`(m,)` values, sorted)
    and `delta` (`(m,)` `2 (PL - cost_min)` there), `interval` (`(lower, upper)`; the bound
    itself where the profile stays below the threshold up to the parameter's bound, `-inf`/`inf`
    where it does not reach the threshold within the walk: the data do not bound the parameter
    on that side), `crlb_interval` (`value +- z stderr`),
    `noise_estimated`, `lower_cost` (a point of the walk with a cost below the fit's: the fit
    had not reached the optimum; `None` normally), `fits` (refits made), `explains_data` (the
    fit's verdict, `spineid.GoodnessOfFit`: where it is false the interval means nothing, as
    the likelihood it comes from assumes a model that explains the data; `None` unknown).
    """

    name: str
    unit: str
    value: float
    stderr: float
    level: float
    threshold: float
    points: np.ndarray
    delta: np.ndarray
    interval: tuple[float, float]
    crlb_interval: tuple[float, float]
    noise_estimated: bool
    lower_cost: float | None
    fits: int
    explains_data: bool | None = None

    @property
    def asymmetry(self) -> float:
        """`(upper - value) / (value - lower)`: 1 for a symmetric (linear) interval."""
        lower, upper = self.interval
        return (upper - self.value) / (self.value - lower)

    def to_dict(self) -> dict:
        """JSON-ready (`profiles` of report.json)."""
        def number(x):
            return float(x) if np.isfinite(x) else None

        return {"name": self.name, "unit": self.unit, "value": self.value,
                "stderr": number(self.stderr), "level": self.level,
                "threshold": self.threshold,
                "interval": [number(v) for v in self.interval],
                "crlb_interval": [number(v) for v in self.crlb_interval],
                "noise_estimated": self.noise_estimated,
                "points": [float(v) for v in self.points],
                "delta_chi_square": [float(d) if math.isfinite(d) else None
                                     for d in self.delta],
                "lower_cost_found": self.lower_cost, "explains_data": self.explains_data}

    def summary(self, shown: tuple[str, float] | None = None) -> str:
        """One line per interval: profile against Cramer-Rao; in SI, or in the unit of
        `shown` (`(unit, factor from SI)`, as a fit's summary shows the parameter in the
        data's units)."""
        unit, factor = shown or (self.unit, 1.0)
        lower, upper = np.asarray(self.interval) * factor
        sides = [f"{lower:.6g}" if np.isfinite(lower) else "unbounded",
                 f"{upper:.6g}" if np.isfinite(upper) else "unbounded"]
        crlb = ", ".join(f"{v * factor:.6g}" for v in self.crlb_interval)
        line = (f"{self.name}: {self.level:.0%} profile interval [{sides[0]}, {sides[1]}] "
                f"{unit} around {self.value * factor:.6g} (Cramer-Rao [{crlb}])")
        if self.lower_cost is not None:
            line += ("; WARNING: the profile found a lower cost than the fit "
                     f"({self.lower_cost:.6g}): the fit had not reached the optimum")
        if self.explains_data is False:
            line += ("; WARNING: the fit does not explain the data, so this interval (like its "
                     "standard error) means nothing: fix the fit first")
        return line


def walk_profile(refit: Callable[[float], float], value: float, stderr: float,
                 bounds: tuple[float, float], cost_min: float, level: float = 0.95,
                 scale: float | None = None
                 ) -> tuple[np.ndarray, np.ndarray, tuple[float, float], float | None, int]:
    """The profile walk (module docstring) of one parameter.

    `refit(v)` returns the least cost with the parameter held at `v` (the caller refits the
    others, warm-started from the solution at the nearest value it has seen; `inf` when the
    refit fails, which counts as beyond the threshold); `value`, `stderr`: the fitted value and
    its Cramer-Rao error; `bounds` of the parameter; `cost_min` the fit's cost; `scale`: a
    typical magnitude of the parameter, for the first step where the standard error is
    unknown. Steps double while the profile stays below a tenth of the threshold. Returns
    `(points, delta, interval, lower_cost, fits)` as the `Profile` fields.
    """
    threshold = chi_square_quantile_1(level)
    if np.isfinite(stderr) and stderr > 0:
        first_step = 0.5 * stderr
    else:
        first_step = 0.05 * max(abs(value), abs(scale or 0.0), 1e-12)
    seen: dict[float, float] = {value: 0.0}
    lowest = cost_min
    fits = 0

    def delta(v):
        nonlocal lowest, fits
        if v not in seen:
            cost = refit(v)
            fits += 1
            lowest = min(lowest, cost) if np.isfinite(cost) else lowest
            seen[v] = 2.0 * (cost - cost_min) if np.isfinite(cost) else math.inf
        return seen[v]

    ends = []
    for side in (-1.0, 1.0):
        end = side * math.inf
        bound = bounds[0] if side < 0 else bounds[1]
        inner, step, v = (value, 0.0), first_step, value
        for _ in range(MAX_STEPS):
            v = v + side * step
            if not bounds[0] < v < bounds[1]:
                # Next to the bound: if the profile is still below the threshold there, the
                # bound, not the data, ends the interval.
                if not np.isfinite(bound):
                    break
                v = bound + 1e-6 * (value - bound)
                d = delta(v)
                end = bound if d < threshold else _crossing(delta, inner, (v, d), threshold)
                break
            d = delta(v)
            if d >= threshold:
                end = _crossing(delta, inner, (v, d), threshold)
                break
            inner = (v, d)
            if d < 0.1 * threshold:
                step *= 2.0
        ends.append(end)
    points = np.array(sorted(seen))
    # A lower cost counts when it matters on the scale of the threshold (the fit's own stop
    # leaves it within about 1e-4 of the optimum in these units).
    lower_cost = lowest if 2.0 * (cost_min - lowest) > 1e-2 else None
    return points, np.array([seen[v] for v in points]), (ends[0], ends[1]), lower_cost, fits


def _crossing(delta, inner, outer, threshold, rounds: int = 8) -> float:
    # The threshold crossing inside the bracket [inner (below), outer (at or above)], by linear
    # interpolation of sqrt(delta) (exact for a quadratic profile, whose square root is linear
    # on each side of the optimum), or bisection where that cannot apply (an infinite value: a
    # failed refit). Refined until the profile there is within 1% of the threshold, keeping
    # the bracket, or until the bracket has shrunk to 1e-9 of its width.
    width = abs(outer[0] - inner[0])
    estimate = outer[0]
    for _ in range(rounds):
        (a, da), (b, db) = inner, outer
        root_a, root_b = math.sqrt(max(da, 0.0)), math.sqrt(db) if np.isfinite(db) else math.inf
        target = math.sqrt(threshold)
        if np.isfinite(root_b) and root_b > root_a:
            estimate = a + (target - root_a) * (b - a) / (root_b - root_a)
        else:
            estimate = 0.5 * (a + b)
        if not min(a, b) < estimate < max(a, b):
            estimate = 0.5 * (a + b)
        d = delta(estimate)
        if np.isfinite(d) and abs(d - threshold) <= 1e-2 * threshold:
            return float(estimate)
        if d < threshold:
            inner = (estimate, d)
        else:
            outer = (estimate, d)
        if abs(outer[0] - inner[0]) <= 1e-9 * width:
            break
    return float(estimate)


def profile_parameter(refit: Callable[[int, float], float], names, units, values, stderr,
                      lower_bounds, upper_bounds, cost, noise_estimated: bool, name: str,
                      level: float = 0.95, scales=None, explains_data: bool | None = None
                      ) -> Profile:
    """The `Profile` of the free parameter `name` of a fit with `names`, `units`, fitted
    `values`, `stderr`, bounds and `cost`; `refit(i, v)`: least cost with parameter `i` held at
    `v`; `scales`: typical magnitudes (e.g. the start values), for a parameter without a
    standard error; `explains_data`: the fit's verdict, carried into the profile. Raises
    `ValueError` for a name that is not a free parameter, or a level outside (0, 1)."""
    if name not in names:
        raise ValueError(f"profile: {name!r} is not a free parameter of this fit; the free "
                         f"parameters are {list(names)} (a fixed parameter has no profile: "
                         "free it and fit again)")
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"profile: level={level!r}: expected a confidence between 0 and 1")
    i = list(names).index(name)
    value, error = float(values[i]), float(stderr[i])
    points, delta, interval, lower_cost, fits = walk_profile(
        lambda v: refit(i, v), value, error, (float(lower_bounds[i]), float(upper_bounds[i])),
        float(cost), float(level), None if scales is None else float(scales[i]))
    z = math.sqrt(chi_square_quantile_1(level))
    return Profile(name=name, unit=units[i], value=value, stderr=error, level=float(level),
                   threshold=chi_square_quantile_1(level), points=points, delta=delta,
                   interval=interval, crlb_interval=(value - z * error, value + z * error),
                   noise_estimated=noise_estimated, lower_cost=lower_cost, fits=fits,
                   explains_data=explains_data)


@dataclasses.dataclass(frozen=True)
class Profiled(AbstractParameterFit):
    """A result whose parameters have profiles (`profile(name)`): it holds `refit(i, v)` (least
    cost with free parameter `i` held at `v`, the others refitted; set by the fit that made
    the result) and the parameters' bounds."""

    refit: Callable[[int, float], float] | None = dataclasses.field(
        default=None, repr=False, compare=False, kw_only=True)
    lower_bounds: np.ndarray | None = dataclasses.field(default=None, repr=False, kw_only=True)
    upper_bounds: np.ndarray | None = dataclasses.field(default=None, repr=False, kw_only=True)

    def profile(self, name: str, level: float = 0.95) -> Profile:
        """The profile-likelihood interval of free parameter `name` at confidence `level`
        (module `spineid.identify._common._profile`: every other free parameter refitted at each point;
        equal to the Cramer-Rao interval on a linear problem, asymmetric where the problem is
        not). Costs a few to a few tens of refits; `spineid.plot_profile` draws it. Raises
        `ValueError` for a name that is not a free parameter."""
        if self.refit is None:
            raise ValueError("profile: this result holds no problem to refit")
        return profile_parameter(self.refit, self.names, self.units, self.values, self.stderr,
                                 self.lower_bounds, self.upper_bounds, self.cost,
                                 self.noise_estimated, name, level,
                                 self.start, self.explains_data)
