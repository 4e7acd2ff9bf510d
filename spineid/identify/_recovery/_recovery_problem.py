"""Measure-recovery problems: the curve on which springs may sit, the model a recovered measure
completes, the data, and the objective as a function of the measure's moments.

The motion depends on a measure of vector springs only through its moments
`m = [sum w, sum w (s - o), sum w |s - o|^2]` about an origin `o` (`SpringMeasure`), so the
objective takes the moments, and one forward-mode solve with 4 tangents gives the sensitivity
to any atom by the chain rule (`first_variation`).
"""

import dataclasses
import math
import pathlib
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...elements._planar_springs import SpringMeasure, VectorSprings
from ...io._columns import noise_in_si
from ...io._measurements import Measurement, read_measurement
from ...io._model_file import ModelFile, load_model_file
from ...models._pinned_pair import PinnedPair
from ...models._planar_pair import PlanarPair
from ...simulation._simulate import DEFAULT_ATOL, DEFAULT_RTOL
from .._common._goodness import checked_max_misfit, MAX_MISFIT
from .._common._noise import check_noise
from .._common._noise_model import checked_noise_model
from .._common._padding import data_rows, padded_records, trimmed
from .._trajectory._objective import simulated_observations, weighted_residuals
from .._trajectory._problem import channel_ranges, check_measurements


@dataclasses.dataclass(frozen=True)
class MeasureCurve:
    """A polyline in the global reference configuration on which springs may sit.

    `points` (m, `(k, 2)`). Positions on the curve are arc-length fractions `t` in `[0, 1]`.
    """

    points: np.ndarray

    @property
    def cumulative(self) -> np.ndarray:
        """Arc length at each vertex (m), `(k,)`."""
        steps = np.linalg.norm(np.diff(self.points, axis=0), axis=1)
        return np.concatenate([[0.0], np.cumsum(steps)])

    @property
    def length(self) -> float:
        """Total length (m)."""
        return float(self.cumulative[-1])

    @property
    def straight(self) -> bool:
        """Whether all vertices lie on one line (then only 3 moments are distinct)."""
        direction = self.points[-1] - self.points[0]
        offsets = self.points - self.points[0]
        cross = np.abs(direction[0] * offsets[:, 1] - direction[1] * offsets[:, 0])
        return bool(np.all(cross <= 1e-9 * self.length**2))

    def at(self, t: Float[Array, "..."]) -> Float[Array, "... 2"]:
        """Global points (m) at arc-length fractions `t` (piecewise linear, differentiable
        except at the vertices)."""
        fractions = jnp.asarray(self.cumulative / self.length)
        points = jnp.asarray(self.points)
        return jnp.stack(
            [jnp.interp(t, fractions, points[:, 0]), jnp.interp(t, fractions, points[:, 1])],
            axis=-1,
        )


def recovery_base_model(model: PlanarPair | PinnedPair) -> PlanarPair:
    """The model in which a recovered measure replaces the joint: a `PlanarPair` with the same
    bodies, loads, gravity and start pose. From a `PinnedPair` the pin is removed and its torsion
    springs kept; from a `PlanarPair` its vector springs are removed and the other elements kept.
    """
    if isinstance(model, PinnedPair):
        return PlanarPair(
            lower=model.lower,
            upper=model.upper,
            elements=tuple(model.elements),
            loads=model.loads,
            gravity=model.gravity,
            initial_pose=model.upper_pose(jnp.atleast_1d(model.initial_angle)),
        )
    if isinstance(model, PlanarPair):
        kept = tuple(e for e in model.elements if not isinstance(e, VectorSprings))
        return eqx.tree_at(lambda m: m.elements, model, kept)
    raise ValueError(f"measure recovery needs a planar model, got {type(model).__name__}")


class RecoveryProblem:
    """What to recover: a measure of vector springs on the model's `[measure]` curve.

    **Arguments:**
    - `model_file`: a `planar_pair` or `pinned_pair` `ModelFile` with a `[measure]` table; the
      measure replaces its vector springs (or its pin), everything else is kept as given.
    - `measurements`: one or more `Measurement`s of the upper body (`x, y, theta`), all of the
      model's load case.
    - `noise`: per-channel standard deviation (SI); `None` estimates it from the residuals.
    - `max_stiffness`: ceiling on the total stiffness of the measure (N/m). The default,
      `m (pi / dt)^2` with `m` the upper body's mass and `dt` the sampling interval, puts the
      measure's translational natural frequency at the Nyquist frequency of the data: a stiffer
      joint moves like a rigid one at this sampling rate. An exact pin is infinitely stiff in
      translation, so its recovered total sits on this ceiling.
    - `noise_model`, `max_misfit`: with the noise estimated, how each channel's errors are
      correlated and the largest smooth misfit a recovery may leave, as for `FitProblem`; the
      measure is the white-weighted one, its errors the noise model's Cramer-Rao bound (which
      that estimate attains where the sensitivities vary slowly against the noise's
      correlation; `spineid.identify._recovery._recovery_result`).

    Raises `ValueError` for a model without `[measure]`, data with the wrong channels or too
    few samples, and data without rotation (the location of a pin is then not identifiable).
    """

    def __init__(
        self,
        model_file: ModelFile,
        measurements: Sequence[Measurement] | Measurement,
        noise: dict[str, float] | None = None,
        max_stiffness: float | None = None,
        *,
        noise_model="auto",
        max_misfit: float = MAX_MISFIT,
    ):
        if isinstance(measurements, Measurement):
            measurements = [measurements]
        self.model_file = model_file
        self.measurements = tuple(measurements)
        measure = model_file.document.get("measure")
        if measure is None:
            raise ValueError(
                f"{model_file.source}: no [measure] table: measure recovery needs the curve on "
                f"which springs may sit, e.g. [measure] kind = \"vector\", curve = [[x0, y0], "
                f"[x1, y1]]"
            )
        self.curve = MeasureCurve(np.asarray(measure["curve"], dtype=float))
        self.model = recovery_base_model(model_file.model)
        self.channels = tuple(self.model.observable_names)
        # The data fix at most the 4 moments of a measure.
        check_measurements(self.measurements, self.channels, 4,
                           units=self.model.observable_units)
        self.noise = None if noise is None else check_noise(self.channels, noise)
        self.noise_read: dict = {}  # (`from_files`: how typed noise was read)
        self.noise_model = checked_noise_model(noise_model, self.noise is not None,
                                               self.measurements, channels=self.channels)
        self.max_misfit = checked_max_misfit(max_misfit)
        self._check_rotation()
        if max_stiffness is None:
            dt = float(np.median(np.concatenate([np.diff(m.ts) for m in self.measurements])))
            max_stiffness = float(self.model.upper.mass) * (math.pi / dt) ** 2
        if not (math.isfinite(max_stiffness) and max_stiffness > 0):
            raise ValueError(f"max_stiffness={max_stiffness!r}: expected a positive number (N/m)")
        self.max_stiffness = float(max_stiffness)

    @classmethod
    def from_files(cls, model_path, data_paths, noise=None, max_stiffness=None, *,
                   columns=None, units=None, **options):
        """Problem from a model file and one or more trajectory files (`columns`, `units`: a
        file's own column names and units, as `FitProblem.from_files`; `options`:
        `noise_model`, `max_misfit`); `noise` as `FitProblem.from_files` takes it (with units,
        or bare text in the column's unit), how it was read kept in `noise_read`."""
        model_file = load_model_file(model_path)
        if isinstance(data_paths, (str, pathlib.Path)):
            data_paths = [data_paths]
        model = model_file.model
        measurements = [read_measurement(p, model.observable_names, model.observable_units,
                                         columns=columns, column_units=units)
                        for p in data_paths]
        noise, read = noise_in_si(noise, measurements, model.observable_names,
                                  model.observable_units)
        problem = cls(model_file, measurements, noise, max_stiffness, **options)
        problem.noise_read = read
        return problem

    @property
    def n_data(self) -> int:
        """Number of scalar residuals."""
        return sum(m.values.size for m in self.measurements)

    def channel_ranges(self) -> np.ndarray:
        """Peak-to-peak range of each channel over all measurements (SI), `(c,)`."""
        return channel_ranges(self.measurements)

    def _check_rotation(self) -> None:
        # A joint that never turns shows only its total stiffness: where the springs sit (the
        # pin) changes nothing in the data, and a fit would return its starting guess.
        turn = float(self.channel_ranges()[self.channels.index("theta")])
        floor = 1e-7 if self.noise is None else 5.0 * self.noise["theta"]
        if turn <= floor:
            raise ValueError(
                f"{self.measurements[0].source}: the data show no rotation (theta varies by "
                f"{turn:.3g} rad, below {floor:.3g} rad): the location of the springs (the pin) "
                f"is not identifiable from them. Use a load case that turns the vertebra (a "
                f"moment, or a force off the joint)."
            )


class _MeasureObjective(eqx.Module):
    """Noise-weighted residuals as a function of the stiffness moments of the measure."""

    model: PlanarPair
    ts: tuple  # (m,) per measurement, padded as a trajectory fit's (`spineid.identify._common._padding`)
    data: tuple  # (m, c) per measurement, padded
    weights: tuple  # (m,) per measurement: 1 for a sample of the data, 0 for padding
    sigma: Float[Array, " c"]
    adjoint: diffrax.AbstractAdjoint = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    rtol: float = eqx.field(static=True, default=DEFAULT_RTOL)
    atol: float = eqx.field(static=True, default=DEFAULT_ATOL)

    def with_measure(self, moments, origin) -> PlanarPair:
        """The model with the measure of stiffness `moments` about `origin` appended."""
        element = SpringMeasure.from_moments(
            origin, moments, jnp.zeros(4), self.model.lower.reference_pose,
            self.model.upper.reference_pose,
        )
        return eqx.tree_at(lambda m: m.elements, self.model, self.model.elements + (element,))

    def residuals(self, moments, origin):
        """`(residuals (n_padded,), predictions per measurement (m, c))` at the given moments:
        zero residuals beyond the data (`data_rows`, `trimmed` take the padding off)."""
        model = self.with_measure(moments, origin)
        predictions, residuals = [], []
        for ts, data, weight in zip(self.ts, self.data, self.weights):  # (as `_Objective`)
            predicted = simulated_observations(model, ts, adjoint=self.adjoint,
                                               max_steps=self.max_steps, rtol=self.rtol,
                                               atol=self.atol)
            predictions.append(predicted)
            residuals.append(weighted_residuals(predicted, data, self.sigma, weight))
        return jnp.concatenate(residuals), tuple(predictions)

    def data_rows(self) -> np.ndarray:
        """`(n_padded,)` bool: which of the flat residuals are data."""
        return data_rows(self.weights, self.sigma.shape[0])

    def trimmed(self, predictions) -> list[np.ndarray]:
        """Per-measurement model outputs `(m, c)` cut to the data's samples `(k, c)`."""
        return trimmed(predictions, self.weights)


def _objective(problem: RecoveryProblem, sigma, max_steps: int) -> _MeasureObjective:
    ts, data, weights = padded_records(problem.measurements)
    return _MeasureObjective(
        model=problem.model,
        ts=tuple(map(jnp.asarray, ts)),
        data=tuple(map(jnp.asarray, data)),
        weights=tuple(map(jnp.asarray, weights)),
        sigma=jnp.asarray(sigma, dtype=float),
        adjoint=diffrax.ForwardMode(),
        max_steps=max_steps,
    )


@eqx.filter_jit
def _moment_jacobian(objective: _MeasureObjective, moments, origin):
    # One forward-mode solve with 4 tangents: dr/dm (n, 4), the residuals and predictions.
    def residuals_with_aux(m):
        residuals, predictions = objective.residuals(m, origin)
        return residuals, (residuals, predictions)

    jacobian, (residuals, predictions) = jax.jacfwd(residuals_with_aux, has_aux=True)(moments)
    return jacobian, residuals, predictions


@eqx.filter_jit
def _moment_cost(objective: _MeasureObjective, moments, origin):
    residuals = objective.residuals(moments, origin)[0]
    return 0.5 * jnp.sum(residuals**2)


@eqx.filter_jit
def _moment_costs(objective: _MeasureObjective, moments, origin):
    return jax.vmap(lambda m: _moment_cost(objective, m, origin))(moments)


def _features(points, origin) -> Float[Array, "k 4"]:
    # The moments of a unit atom at each point: [1, s - o, |s - o|^2].
    offset = points - origin
    return jnp.concatenate(
        [jnp.ones_like(offset[:, :1]), offset, jnp.sum(offset**2, axis=1, keepdims=True)], axis=1
    )


def first_variation(curve: MeasureCurve, moment_gradient, origin, t) -> Float[Array, " k"]:
    """The first variation of the loss: `g(s) = dL/dm . [1, s - o, |s - o|^2]`, the rate of change
    of the loss when stiffness (per N/m) is added at the curve points of fractions `t` (`(k,)`).
    Negative where adding a spring lowers the loss."""
    return jax.vmap(lambda point: _features(point[None], origin)[0] @ moment_gradient)(
        curve.at(t)
    )
