"""The result of a trajectory fit, explaining itself: values, Cramer-Rao standard errors,
correlations, identifiability, convergence, residuals, and for vector-spring measures the
identifiable moments.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ...elements._planar_springs import VectorSprings
from ...io._columns import column_unit, unit_in_lab, UNITS
from ...io._measurements import Measurement
from ...kinematics._planar import body_point_position
from .._common._profile import Profiled
from .._common._result_family import with_data_units
from .._common._shown import data_channel_units, noise_line
from .._common._uncertainty import shown_combination
from ._problem import FitProblem


@dataclasses.dataclass(frozen=True)
class FitResult(Profiled):
    """The outcome of `fit`, explaining itself.

    Fields: those of every parameter fit (`spineid.AbstractParameterFit`: names, units, start,
    values, standard errors, bounds met, correlations, identifiability, cost, convergence, noise
    per channel, warnings, time, and `goodness_of_fit`: whether the model explains the data at
    the returned values; the standard errors mean something only if it does), and
    `covariance`, `message`, `n_steps`, `solver` (what ran; `, simulated by NAME` where the
    problem names its `simulation_solver`), `start_costs` (final cost from
    each start run, under the weights of the search: with the noise estimated, provisional
    weights of 1e-3 of each channel's range, so on another scale than `cost`; compare them
    with each other), `starts` (`run`: starts run, `skipped`: starts whose simulation failed),
    `moments` (identifiable summaries of a vector-spring measure, with standard errors),
    `stderr_robust` (under an autoregressive noise model: Newey-West errors of the white-weighted
    fit; `None` otherwise; `noise` is then each channel's own standard deviation, and
    `goodness_of_fit.noise_model` the autoregressions),
    `predictions` (per load case, `(k, c)`), `measurements`, `noise_given_as` (how noise typed
    with units was read, `FitProblem.noise_read`: `{channel: "5 um"}`), `integrators` (the
    diffrax solvers that simulated the models, `("Tsit5",)`; `integrator_names`).
    `profile(name)` gives a parameter's profile-likelihood interval.
    """

    covariance: np.ndarray
    message: str
    n_steps: int
    solver: str
    start_costs: list[float]
    starts: dict
    moments: dict
    predictions: list[np.ndarray]
    measurements: tuple[Measurement, ...]
    noise_given_as: dict = dataclasses.field(default_factory=dict)
    integrators: tuple[str, ...] = ()

    def residuals(self) -> list[np.ndarray]:
        """Raw residuals `data - fit` per load case, `(k, c)` (SI)."""
        return [m.values - p for m, p in zip(self.measurements, self.predictions)]

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid fit`, docs/cli.md)."""
        return self.common_report() | {
            "message": self.message,
            "solver": self.solver,
            "integrators": list(self.integrators),
            "n_steps": int(self.n_steps),
            "start_costs": [float(c) for c in self.start_costs],
            "starts": dict(self.starts),
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated,
                      "given_as": dict(self.noise_given_as)},
            "parameters": with_data_units(self.parameter_entries(), self.shown_units()),
            "correlation": self.correlation_report(),
            "identifiability": self.identifiability.to_dict(),
            "moments": self.moments,
            "data": [{"source": m.source, "read_as": m.read_as} for m in self.measurements],
        }

    def channel_units(self, si: bool = False) -> dict[str, tuple[str, float]]:
        """Each channel's unit as its data were read (mm, deg, ...: where every file gave it in
        the same one) and the factor that takes an SI value to it (`{"x": ("mm", 1e3)}`);
        channels in SI, or files in different units, left out; none with `si`."""
        return data_channel_units(self.measurements, self.noise, si)

    def data_units(self) -> dict[str, str]:
        """The data's own units of length and angle (`{"m": "mm", "rad": "deg"}`, names of
        `UNITS`): those every file gives its length (or angle) channels in; a kind is left out
        where the data are in SI or its channels disagree, every kind where the files do."""
        found: dict[str, set] = {}
        for channel in self.noise:
            try:
                unit = column_unit(self.measurements, channel, "units")
            except ValueError:  # (files in different units: SI says it once for all)
                return {}
            if unit is not None:
                found.setdefault(UNITS[unit][0], set()).add(unit)
        return {kind: next(iter(units)) for kind, units in found.items()
                if kind in ("m", "rad") and len(units) == 1}

    def shown_units(self, si: bool = False) -> list[tuple[str, float]] | None:
        """Each parameter's unit in the data's units and the factor from SI to it
        (`unit_in_lab` with `data_units`); `None` with `si` or where nothing changes."""
        lab = {} if si else self.data_units()
        shown = [unit_in_lab(unit, lab.get("m"), lab.get("rad")) for unit in self.units]
        return shown if any(u != si_unit for (u, _), si_unit in zip(shown, self.units)) \
            else None

    def summary(self, si: bool = False) -> str:
        """A human-readable table of the fit: each channel's noise, and the parameters, in the
        units the data came in (where the files say them: N/mm, N m/deg, mm for data in mm and
        deg; `data_units`; the verdict's noise and misfit of each channel likewise), or in SI
        with `si`."""
        in_units, channels = self.shown_units(si), self.channel_units(si)
        lab = self.data_units()
        lines = [
            f"fit with {self.solver}: {'converged' if self.converged else 'NOT converged'} "
            f"after {self.n_steps} steps in {self.seconds:.2f} s; cost {self.cost:.6g} "
            f"({self.n_data} data values)",
            noise_line(self.noise, self.noise_estimated, self.goodness_of_fit.shown(channels)),
            "",
            *([f"parameters in the data's units ({', '.join(lab.values())}; SI in report.json, "
               "and here with summary(si=True) or fit --si):"] if in_units else []),
            *self.parameter_table(shown=in_units),
        ]
        ident = self.identifiability
        units = dict(zip(self.names, self.units))
        for k, combination in enumerate(ident.combinations):
            shown, scales = shown_combination(combination, units)
            terms = " ".join(
                f"{c:+.3g}*{n}" + (f"/{scales[n]:.3g}" if scales else "")
                for n, c in list(shown["coefficients"].items())[:6]
            )
            more = len(shown["coefficients"]) - 6
            # (Of one unit, in the data's units where the table is.)
            one_unit = not scales and len({units.get(n) for n in shown["coefficients"]}) == 1
            unit, factor = in_units[self.names.index(next(iter(shown["coefficients"])))] \
                if one_unit and in_units else ("", 1.0)
            lines.append(
                f"  combination {k + 1}: {terms}{f' ... (+{more} terms)' if more > 0 else ''}"
                f" = {shown['value'] * factor:.6g} +- {shown['standard_error'] * factor:.2g}"
                + (f" {unit}" if unit else "")
            )
        if self.moments:
            lines.append("vector-spring measure (identifiable moments):")
            kinds = {} if si else lab  # (in the data's units, as the parameters)
            for key, entry in self.moments.items():
                unit, factor = unit_in_lab(entry["unit"], kinds.get("m"), kinds.get("rad"))
                value, error = entry["value"], entry["stderr"]
                shown = (", ".join(f"{v * factor:.6g}" for v in value)
                         if isinstance(value, list) else f"{value * factor:.6g}")
                shown_error = (", ".join("-" if e is None else f"{e * factor:.2g}"
                                         for e in error) if isinstance(error, list)
                               else ("-" if error is None else f"{error * factor:.2g}"))
                lines.append(f"  {key:22s} {shown} +- {shown_error} {unit}")
        return "\n".join(lines + self.verdict_lines(channels))


def _vector_spring_moments(problem: FitProblem, values, identifiability) -> dict:
    """Identifiable summaries of the vector-spring measure: total stiffness, the
    stiffness-weighted centroid (the pin estimate) and the radius of gyration."""
    model = problem.models[0]
    springs = [e for e in getattr(model, "elements", ()) if isinstance(e, VectorSprings)]
    if not springs:
        return {}
    element = model.elements.index(springs[0])
    free_rows = {
        p.row: i for i, p in enumerate(problem.parameters)
        if p.element == element and p.field == "stiffness"
    }
    if not free_rows:
        return {}
    points = jnp.asarray(body_point_position(model.lower.reference_pose, springs[0].points_a))

    def stiffness_vector(theta):
        stiffness = springs[0].stiffness
        for row, i in free_rows.items():
            stiffness = stiffness.at[row].set(theta[i])
        return stiffness

    def total(theta):
        return jnp.sum(stiffness_vector(theta))

    def centroid(theta, axis):
        k = stiffness_vector(theta)
        return jnp.sum(k * points[:, axis]) / jnp.sum(k)

    def gyration(theta):
        k = stiffness_vector(theta)
        c = jnp.sum(k[:, None] * points, axis=0) / jnp.sum(k)
        return jnp.sqrt(jnp.sum(k * jnp.sum((points - c) ** 2, axis=1)) / jnp.sum(k))

    theta = jnp.asarray(values)

    def with_error(function):
        value = float(function(theta))
        error = identifiability.standard_error_of(np.asarray(jax.grad(function)(theta)))
        return value, (None if not np.isfinite(error) else error)

    t, t_err = with_error(total)
    cx, cx_err = with_error(lambda th: centroid(th, 0))
    cy, cy_err = with_error(lambda th: centroid(th, 1))
    g, g_err = with_error(gyration)
    return {
        "total_stiffness": {"value": t, "stderr": t_err, "unit": "N/m"},
        "centroid": {"value": [cx, cy], "stderr": [cx_err, cy_err], "unit": "m"},
        "radius_of_gyration": {"value": g, "stderr": g_err, "unit": "m"},
    }


VECTOR_MEASURE_NOTE = (
    "The motion depends on a measure of vector springs only through its total stiffness, its "
    "first moment and its second moment (the springs' separation is affine in the attachment "
    "point and the rotation part is isotropic), so at most 4 combinations of their "
    "stiffnesses are identifiable, 3 when the springs lie on a straight line or a circle, "
    "however many springs there are. The moments are reported with standard errors; "
    "individual springs need a sparsity prior (measure recovery)."
)
