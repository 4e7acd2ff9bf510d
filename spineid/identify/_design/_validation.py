"""A design checked by the experiment it predicts: simulate it many times with noise, fit each
simulation, and compare the spread of the estimates with the predicted standard errors.

The Cramer-Rao errors of a design are those of the model linearised at the nominal values;
where the model is nonlinear over the estimates' own spread they can be too small or too large
(`Design.check_linearity` warns beforehand). Fitting noisy simulations measures what the
design would really deliver. Each fit starts from the nominal values, so what is measured is
the estimator's spread, not whether a fit from afar reaches the optimum. Under correlated
errors (`design(..., correlation=...)`) the errors simulated are those autoregressions, and
each copy is fitted as a lab would fit it: the noise estimated, its model `"auto"`
(`correlated_copies`).
"""

import dataclasses
import math
import time

import numpy as np

from ...executors._batch import written_chunk
from ...executors._chunks import DEFAULT_CHUNK
from ...executors._executors import Local
from .._common._result_family import json_number
from .._solvers import LevenbergMarquardt
from .._trajectory._batch_fits import BatchFits, fit_batch
from .._trajectory._problem import FitProblem
from ._correlation import correlated_copies
from ._design import Design
from ._protocol import Protocol


@dataclasses.dataclass
class DesignValidation:
    """What `validate_design` measured.

    Fields: `names` (free parameters), `values` (their nominal values, SI), `predicted` (the
    design's Cramer-Rao errors, SI, `(p,)`), `realised` (the standard deviation of the
    estimates over the fits that ended, SI, `(p,)`), `repetitions`, `seed`, `fitted` (fits
    that ended), `converged`, `explaining` (fits whose model explains their data), `errors`
    (`{index: error}` of fits that failed), `seconds`, `fits` (the `BatchFits`).

    Not a `spineid.AbstractResult`: it summarises many fits (each a `FitResult` in the batch)
    and has no cost or verdict of its own.
    """

    names: list[str]
    values: np.ndarray
    predicted: np.ndarray
    realised: np.ndarray
    repetitions: int
    seed: int
    fitted: int
    converged: int
    explaining: int
    errors: dict
    seconds: float
    fits: BatchFits = dataclasses.field(repr=False, default=None)

    @property
    def ratio(self) -> np.ndarray:
        """Realised / predicted standard error per parameter, `(p,)`."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.realised / self.predicted

    @property
    def uncertainty(self) -> float:
        """The relative uncertainty of a standard deviation from `fitted` draws,
        `1 / sqrt(2 (n - 1))`: a ratio this far from 1 is within chance (e.g. 0.10 for 50)."""
        return 1.0 / math.sqrt(2.0 * max(self.fitted - 1, 1))

    def beyond(self, spreads: float = 2.0) -> list[str]:
        """Parameters whose ratio is farther from 1 than `spreads` times `uncertainty`."""
        return [n for n, r in zip(self.names, self.ratio)
                if not (abs(r - 1.0) <= spreads * self.uncertainty)]

    def summary(self) -> str:
        """The comparison, parameter by parameter, as text."""
        ratio = self.ratio
        lines = [f"validated by {self.repetitions} noisy fits ({self.seconds:.1f} s; "
                 f"{self.fitted} ended, {self.converged} converged, {self.explaining} explain "
                 f"their data): realised / predicted standard error {np.nanmin(ratio):.2f}-"
                 f"{np.nanmax(ratio):.2f}, median {np.nanmedian(ratio):.2f} (a spread of "
                 f"{self.fitted} draws is itself uncertain by about {self.uncertainty:.0%})"]
        lines.append(f"{'parameter':30s} {'predicted':>11s} {'realised':>11s} {'ratio':>7s}")
        for name, p, r, q in zip(self.names, self.predicted, self.realised, ratio):
            lines.append(f"{name:30s} {p:11.4g} {r:11.4g} {q:7.2f}")
        far = self.beyond()
        if far:
            lines.append("WARNING: beyond two of those spreads: " + ", ".join(far)
                         + " (the linearised errors do not hold there: trust the realised ones)")
        if self.errors:
            lines.append(f"WARNING: {len(self.errors)} fit(s) failed and are left out")
        return "\n".join(lines)

    def report(self) -> dict:
        """JSON-ready form."""
        return {"repetitions": self.repetitions, "seed": self.seed, "fitted": self.fitted,
                "converged": self.converged, "explaining": self.explaining,
                "seconds": self.seconds, "uncertainty": self.uncertainty,
                "beyond_two_spreads": self.beyond(),
                "errors": {str(k): v for k, v in self.errors.items()},
                "parameters": [{"name": n, "predicted": json_number(p),
                                "realised": json_number(r), "ratio": json_number(q)}
                               for n, p, r, q in zip(self.names, self.predicted,
                                                     self.realised, self.ratio)]}


def noisy_copies(problem: FitProblem, repetitions: int, seed: int = 0) -> list[FitProblem]:
    """`repetitions` copies of a design's `problem` whose data are its noise-free data plus
    Gaussian noise of the problem's standard deviations (`numpy`'s generator seeded by `seed`,
    drawn copy by copy, load case by load case); values not measured stay `NaN`."""
    sigma = np.array([problem.noise[c] for c in problem.channels])
    rng = np.random.default_rng(seed)
    return [problem.with_measurements([
        dataclasses.replace(m, values=m.values + rng.normal(size=m.values.shape) * sigma)
        for m in problem.measurements]) for _ in range(repetitions)]


def validation_chunk(repetitions: int) -> int:
    """The fits per chunk of a validation of `repetitions`: a tenth of them (ten progress steps),
    at most `DEFAULT_CHUNK`, so that a long validation (`--validate 10000`) shows its progress
    and tqdm's estimate of the time left after its first few dozen fits, not its first
    thousand. (A validation resumed keeps the chunks its folder was cut into.)"""
    return min(max(1, repetitions // 10), DEFAULT_CHUNK)


def validate_design(design, repetitions: int = 50, *, seed: int = 0, executor=None,
                    progress: bool = False, out=None, resume: bool = False,
                    **simulation) -> DesignValidation:
    """Simulate a design `repetitions` times with noise and fit each simulation (module
    docstring): the realised standard errors against the predicted ones.

    **Arguments:** `design`, a `Design` (`spineid.design`) or a `Protocol`
    (`spineid.optimise_protocol`); `repetitions` (at least 2; 50 know a spread to about 10%);
    `seed` of the noise; `executor` (`spineid.Local(threads=...)`, default one thread, or
    `spineid.Dask(...)`), `progress`, `out` and `resume` as for `fit_batch` (a folder the fits
    stream to, and continue from); `simulation`: the fits' `simulation_rtol`,
    `simulation_atol`, `simulation_max_steps` (`Design.problem`).

    Under a design's `correlation` the noise simulated is those autoregressions, and each copy
    is fitted with its noise estimated and the noise model `"auto"` (`correlated_copies`).

    **Returns:** a `DesignValidation`. Raises `ValueError` for something other than a design,
    fewer than 2 repetitions, fewer than 2 fits that ended, or, under correlated errors, a
    chosen experiment that does not measure every channel.
    """
    if not isinstance(design, (Design, Protocol)):
        raise ValueError(f"validate_design: a {type(design).__name__}; expected a Design "
                         "(spineid.design) or a Protocol (spineid.optimise_protocol)")
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 2:
        raise ValueError(f"validate_design: repetitions={repetitions!r}: expected an integer "
                         "of at least 2 (50 know a spread to about 10%)")
    clock = time.perf_counter()
    problem = design.problem(**simulation)
    correlation = getattr(design, "correlation", {})
    copies = (correlated_copies(problem, correlation, repetitions, seed) if correlation
              else noisy_copies(problem, repetitions, seed))
    fits = fit_batch(copies, LevenbergMarquardt(), executor=executor or Local(),
                     chunk=(resume and written_chunk(out)) or validation_chunk(repetitions),
                     out=out, resume=resume, progress=progress)
    ended = np.all(np.isfinite(fits.values), axis=1)
    if np.count_nonzero(ended) < 2:
        raise ValueError(f"validate_design: {np.count_nonzero(ended)} of {repetitions} fits "
                         "ended; a spread needs 2: " + fits.summary().replace("\n", "; "))
    return DesignValidation(
        names=list(problem.names), values=np.asarray(design.values, dtype=float),
        predicted=np.asarray(design.stderr, dtype=float),
        realised=np.std(fits.values[ended], axis=0, ddof=1), repetitions=repetitions,
        seed=seed, fitted=int(np.count_nonzero(ended)),
        converged=int(np.count_nonzero(fits.converged)),
        explaining=int(np.count_nonzero(fits.explains_data)), errors=dict(fits.errors),
        seconds=time.perf_counter() - clock, fits=fits)
