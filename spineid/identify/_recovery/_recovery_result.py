"""The result of a measure recovery, explaining itself: the atoms, the pin estimate and the
moments with standard errors, what the data support, the Frank-Wolfe certificate, residuals.
"""

import copy
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from ...io._measurements import Measurement
from ...io._model_file import ModelFile
from .._common._failure import failed
from .._common._goodness import assess_fit
from .._common._noise import noise_from_residuals
from .._common._noise_model import channel_noises, usable_noise_model, whitened_jacobian
from .._common._result_family import AbstractResult
from .._common._shown import data_channel_units
from .._common._uncertainty import (
    channel_records,
    fisher_analysis,
    hac_covariance,
    Identifiability,
    sandwich_error,
)
from ._recovery_problem import MeasureCurve, RecoveryProblem, _moment_jacobian, first_variation
from ._recovery_solver import _Atoms, _Solver


def lowers(gain: float) -> str:
    """What a step that changes the cost by `-gain` does, in words: `lowers the cost by only
    1.2e-03`, or `does not lower the cost` for a gain of zero or less (a step that raises it)."""
    return f"lowers the cost by only {gain:.2g}" if gain > 0 else "does not lower the cost"


@dataclasses.dataclass(frozen=True)
class MeasureResult(AbstractResult):
    """A recovered stiffness measure, explaining itself.

    Fields: `method` (`"grid"` or `"off-grid"`); `positions` (m, arc length from the curve's
    first point, `(k,)`), `points` (m, global reference coordinates, `(k, 2)`) and `stiffness`
    (N/m, `(k,)`) of the atoms; `max_stiffness` (N/m, the ceiling on their total); `cost`,
    `n_data`, `converged`; `certified` and `gap` (off the grid: the final Frank-Wolfe gap, in
    cost units, and whether it met the tolerance); `moments` (total stiffness, centroid = pin
    estimate, rotational stiffness `sum K |s - c|^2` of the measure, with standard errors);
    `moment_identifiability` (SVD of the sensitivity to the moments), `atom_identifiability`
    (to the atoms' positions and weights), `atoms_supported` and `support_note`;
    `certificate` (`(arc positions (m), first variation per N/m)` on a fine grid); `history`
    (off the grid: one entry per Frank-Wolfe iteration); `predictions`, `measurements`,
    `curve`; and those of every result (`spineid.AbstractResult`; `noise` per channel, SI; the
    `goodness_of_fit`: whether the recovered measure explains the data). Not a
    `spineid.AbstractParameterFit`: the number of atoms is itself an outcome, and their
    positions and weights are not determined one by one (`atom_identifiability`); the moments
    are what carries standard errors.
    """

    method: str
    positions: np.ndarray
    points: np.ndarray
    stiffness: np.ndarray
    max_stiffness: float
    certified: bool | None
    gap: float | None
    moments: dict
    moment_identifiability: Identifiability
    atom_identifiability: Identifiability
    atoms_supported: int
    support_note: str
    certificate: tuple[np.ndarray, np.ndarray]
    history: list[dict]
    predictions: list[np.ndarray]
    measurements: tuple[Measurement, ...]
    curve: MeasureCurve

    @property
    def solver(self) -> str:
        """How the measure was found (shown in plots)."""
        return f"{self.method} measure recovery"

    @property
    def pin(self) -> np.ndarray:
        """The stiffness-weighted centroid (m, global, `(2,)`): the pin estimate."""
        return np.asarray(self.moments["centroid"]["value"])

    @property
    def pin_stderr(self) -> np.ndarray:
        """Standard errors of the pin estimate (m, `(2,)`; NaN where not determined)."""
        return np.array([np.nan if e is None else e for e in self.moments["centroid"]["stderr"]])

    def probability(self) -> np.ndarray:
        """The weights normalised to a probability measure (Liu's display), `(k,)`."""
        total = self.stiffness.sum()
        return self.stiffness / total if total > 0 else self.stiffness

    def residuals(self) -> list[np.ndarray]:
        """Raw residuals `data - fit` per measurement, `(k, c)` (SI)."""
        return [m.values - p for m, p in zip(self.measurements, self.predictions)]

    def rms_error(self) -> np.ndarray:
        """Root-mean-square of the raw residuals per channel (SI), `(c,)`."""
        return np.sqrt(np.mean(np.concatenate(self.residuals()) ** 2, axis=0))

    @property
    def line_search_gain(self) -> float | None:
        """The cost decrease of the best Frank-Wolfe step when the recovery was certified by
        line search (the first-order gap overstating what any step achieves), else None."""
        return self.history[-1].get("line_search_gain") if self.history else None

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid recover`, docs/cli.md)."""
        parameters = []
        for i, (position, stiffness) in enumerate(zip(self.positions, self.stiffness)):
            parameters.append({"name": f"springs[{i}].stiffness", "value": float(stiffness),
                               "stderr": None, "unit": "N/m",
                               "point": [float(x) for x in self.points[i]],
                               "arc_position": float(position)})
        ident = self.moment_identifiability.to_dict()
        ident["atoms"] = self.atom_identifiability.to_dict()
        return self.common_report() | {
            "method": self.method,
            "max_stiffness": self.max_stiffness,
            "certificate": {"certified": self.certified, "frank_wolfe_gap": self.gap,
                            "line_search_gain": self.line_search_gain},
            "atoms": [{"point": [float(x) for x in point], "arc_position": float(position),
                       "stiffness": float(k), "probability": float(q)}
                      for point, position, k, q in zip(self.points, self.positions,
                                                       self.stiffness, self.probability())],
            "pin": {"value": [float(x) for x in self.pin],
                    "stderr": self.moments["centroid"]["stderr"], "unit": "m"}
            | ({"stderr_robust": self.moments["centroid"]["stderr_robust"]}
               if "stderr_robust" in self.moments["centroid"] else {}),
            "moments": self.moments,
            "atoms_supported": self.atoms_supported,
            "support_note": self.support_note,
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated},
            "rms_error": {c: float(e) for c, e in zip(("x", "y", "theta"), self.rms_error())},
            "parameters": parameters,
            "identifiability": ident,
            "history": self.history,
            "data": [{"source": m.source, "read_as": m.read_as} for m in self.measurements],
        }

    def summary(self) -> str:
        """A human-readable account of the recovery."""
        pin, error = self.pin * 1e3, self.pin_stderr * 1e3
        lines = [
            f"measure recovery ({self.method}): {'converged' if self.converged else 'NOT converged'}"
            f" in {self.seconds:.2f} s; cost {self.cost:.6g} ({self.n_data} data values)",
        ]
        if self.certified and self.line_search_gain is not None:
            lines.append(f"Frank-Wolfe gap {self.gap:.3g} (first order), but the best "
                         f"Frank-Wolfe step {lowers(self.line_search_gain)}: "
                         "certified stationary by line search")
        elif self.certified is not None:
            lines.append(f"Frank-Wolfe gap {self.gap:.3g}: "
                         + ("certified stationary" if self.certified else "NOT certified"))
        lines.append(f"{len(self.stiffness)} atom(s), total {self.stiffness.sum():.6g} N/m "
                     f"(ceiling {self.max_stiffness:.4g} N/m)")
        for point, k, q in zip(self.points * 1e3, self.stiffness, self.probability()):
            lines.append(f"  at ({point[0]:8.4f}, {point[1]:8.4f}) mm: {k:12.6g} N/m ({q:.3f})")
        lines.append(
            "pin estimate (stiffness centroid): ("
            + ", ".join(f"{p:.4f} +- {'-' if not np.isfinite(e) else f'{e:.2g}'}"
                        for p, e in zip(pin, error)) + ") mm"
        )
        robust = self.moments["centroid"].get("stderr_robust")
        if robust is not None:
            lines.append("  robust (Newey-West) standard errors of the white-weighted pin: ("
                         + ", ".join("-" if e is None else f"{e * 1e3:.2g}" for e in robust)
                         + ") mm")
        spread = self.moments["rotational_stiffness"]
        lines.append(f"rotational stiffness of the measure about it: {spread['value']:.4g} N m/rad")
        lines.append(f"atoms the data support: {self.atoms_supported}. {self.support_note}"
                     + ("" if self.certified is not False else " (Not certified: the measure may "
                        "not be stationary yet, and a spread it has not shed can look supported.)"))
        lines += self.verdict_lines(data_channel_units(self.measurements, self.noise))
        return "\n".join(lines)

    def fitted_document(self, model_file: ModelFile) -> dict:
        """The model file's document with the atoms as `[[springs]]` (a `planar_pair`)."""
        document = copy.deepcopy(model_file.document)
        if document.get("kind") == "pinned_pair":
            document["kind"] = "planar_pair"
            del document["pin"]
        kept = [s for s in document.get("springs", []) if s.get("kind") != "vector"]
        atoms = [{"kind": "vector", "point": [float(x) for x in point], "stiffness": float(k)}
                 for point, k in zip(self.points, self.stiffness)]
        document["springs"] = atoms + kept
        return document


def _sigma(problem: RecoveryProblem) -> np.ndarray:
    if problem.noise is not None:
        return np.array([problem.noise[c] for c in problem.channels])
    # Provisional weights: comparable channels; the noise level comes after the fit.
    return np.maximum(problem.channel_ranges(), 1e-12) * 1e-3


def _estimate_noise(problem, residuals, sigma, n_free) -> np.ndarray:
    raw = np.asarray(residuals).reshape(-1, len(problem.channels)) * sigma
    return noise_from_residuals(raw, n_free, problem.channel_ranges())


def _blocks(problem, residuals, sigma) -> list[np.ndarray]:
    # The data rows of noise-weighted residuals `(n,)` as raw residuals `(k, c)` per record.
    raw, blocks, first = np.asarray(residuals), [], 0
    for measurement in problem.measurements:
        size = measurement.values.size
        blocks.append(raw[first:first + size].reshape(measurement.values.shape) * sigma)
        first += size
    return blocks


def _analyse(problem, solver: _Solver, atoms: _Atoms, positions_free: bool, noises=None,
             sigma=None):
    """Moments with standard errors, identifiability and the atoms the data support; under an
    autoregressive noise model (`noises`: channel -> `ChannelNoise`, the residuals weighted by
    `sigma` `(c,)`) the errors from the whitened sensitivities (`whitened_jacobian`), and
    beside them (`stderr_robust`) the Newey-West errors of the white-weighted estimate, each
    channel of each load case a record (`hac_covariance`)."""
    keep = atoms.active & (atoms.p > 0)
    kept = _Atoms(atoms.t[keep], atoms.p[keep], np.ones(keep.sum(), bool))
    origin = solver.origin(kept)
    z = jnp.concatenate([jnp.asarray(kept.t), jnp.asarray(kept.p)])
    (moment_jacobian, chain), residuals, predictions, moment_gradient = solver.jacobian(z, origin)
    jacobian = moment_jacobian @ chain
    moments = np.asarray(solver.moments_of(z, origin))
    moment_jacobian, _, _ = _moment_jacobian(solver.objective, jnp.asarray(moments), origin)
    moment_jacobian = np.asarray(moment_jacobian)
    rows, lengths = solver.objective.data_rows(), [len(m.ts) for m in problem.measurements]
    weighted = moment_jacobian[rows]  # (the white-weighted sensitivities: Newey-West's)
    if noises is not None:
        ordered = [noises[c] for c in problem.channels]
        moment_jacobian = whitened_jacobian(moment_jacobian[rows], lengths, ordered, sigma)
        jacobian = whitened_jacobian(np.asarray(jacobian)[rows], lengths, ordered, sigma)
    curve, tau = problem.curve, problem.max_stiffness

    # Moment coordinates the measures on this curve can reach: on a straight curve the first
    # moment lies along it.
    if curve.straight:
        direction = (curve.points[-1] - curve.points[0]) / curve.length
        basis = np.zeros((4, 3))
        basis[0, 0], basis[1:3, 1], basis[3, 2] = 1.0, direction, 1.0
        names = ["total_stiffness", "first_moment", "second_moment"]
    else:
        basis = np.eye(4)
        names = ["total_stiffness", "first_moment_x", "first_moment_y", "second_moment"]
    coordinates = np.linalg.lstsq(basis, moments, rcond=None)[0]
    total = float(moments[0])
    at_ceiling = kept.p.sum() >= 1.0 - 1e-6
    active = np.ones(len(names), bool)
    active[0] = not at_ceiling
    length = curve.length
    scales = np.array([max(total, 1e-300), max(total, 1e-300) * length]
                      + [max(total, 1e-300) * length] * (basis.shape[1] - 3)
                      + [max(total, 1e-300) * length**2])
    _, moment_ident = fisher_analysis(moment_jacobian @ basis, coordinates, scales, names, active)
    _, all_moments = fisher_analysis(moment_jacobian @ basis, coordinates, scales, names)
    robust = None if noises is None else hac_covariance(
        weighted @ basis, np.asarray(residuals)[rows],
        channel_records(lengths, len(problem.channels)), active)

    def to_moments(q):
        return jnp.asarray(basis) @ q

    def centroid(q, axis):
        m = to_moments(q)
        return origin[axis] + m[1 + axis] / m[0]

    def rotational(q):
        m = to_moments(q)
        return m[3] - jnp.sum(m[1:3] ** 2) / m[0]

    q = jnp.asarray(coordinates)

    def with_error(function):
        # A coordinate on its bound (the total on the ceiling) is known, not estimated: the
        # error is conditional on it.
        value = float(function(q))
        gradient = np.where(active, np.asarray(jax.grad(function)(q)), 0.0)
        error = moment_ident.standard_error_of(gradient)
        determined = np.isfinite(error)  # (a robust error only where the data determine it)
        return (value, error if determined else None,
                sandwich_error(robust, gradient) if robust is not None and determined else None)

    cx, cx_err, cx_robust = with_error(lambda v: centroid(v, 0))
    cy, cy_err, cy_robust = with_error(lambda v: centroid(v, 1))
    k_rot, k_rot_err, k_rot_robust = with_error(rotational)
    _, total_err, total_robust = (None, None, None) if at_ceiling else with_error(
        lambda v: to_moments(v)[0])
    # (Within a standard error of the ceiling counts as on it: the data cannot tell it from
    # a joint the ceiling holds back, and the total is then a lower bound too.)
    near = total_err is not None and np.isfinite(total_err) and tau - total < total_err
    moment_report = {
        "total_stiffness": {"value": total, "stderr": total_err, "unit": "N/m",
                            "at_ceiling": bool(at_ceiling or near)},
        "centroid": {"value": [cx, cy], "stderr": [cx_err, cy_err], "unit": "m"},
        "rotational_stiffness": {"value": k_rot, "stderr": k_rot_err, "unit": "N m/rad"},
    }
    if robust is not None:
        for entry, error in zip(moment_report.values(),
                                (total_robust, [cx_robust, cy_robust], k_rot_robust)):
            entry["stderr_robust"] = error

    atom_names = [f"atoms[{i}].position" for i in range(kept.t.size)] + [
        f"atoms[{i}].stiffness" for i in range(kept.t.size)]
    atom_values = np.concatenate([kept.t * length, kept.p * tau])
    atom_scales = np.concatenate([np.full(kept.t.size, length), np.maximum(kept.p * tau, 1e-300)])
    atom_jacobian = np.asarray(jacobian) / np.concatenate([np.full(kept.t.size, length),
                                                            np.full(kept.t.size, tau)])
    atom_active = np.concatenate([np.full(kept.t.size, positions_free),
                                  np.full(kept.t.size, not at_ceiling or kept.t.size > 1)])
    _, atom_ident = fisher_analysis(atom_jacobian, atom_values, atom_scales, atom_names,
                                    atom_active)

    spread_significant = (k_rot_err is not None and k_rot > 2.0 * k_rot_err)
    n_moments = all_moments.rank
    if spread_significant:
        supported = 2
        note = (f"The data determine {n_moments} moments of the measure (total stiffness, "
                f"centroid, spread); the spread about the centroid is significantly positive "
                f"({k_rot:.3g} +- {k_rot_err:.2g} N m/rad), so the data call for 2 atoms"
                + (", determined only up to one combination (4 parameters, 3 moments)."
                   if n_moments < 4 else "."))
    else:
        supported = 1
        note = (f"The data determine {n_moments} moments of the measure (total stiffness, "
                f"centroid, spread); the spread is not significantly positive, so one atom "
                f"(a pin) explains them: more atoms are not supported by the data.")
    return dict(
        moments=moment_report, moment_identifiability=moment_ident,
        atom_identifiability=atom_ident, atoms_supported=supported, support_note=note,
        residuals=np.asarray(residuals)[solver.objective.data_rows()],
        predictions=solver.objective.trimmed(predictions),
        moment_gradient=np.asarray(moment_gradient), origin=np.asarray(origin), kept=kept,
    )


def _finish(problem, solver, atoms, method, positions_free, converged, certified, gap, history,
            sigma, noise_estimated, clock, fine_grid) -> MeasureResult:
    analysis = _analyse(problem, solver, atoms, positions_free)
    warnings, noises, judged = [], None, {}
    if noise_estimated and not np.any(failed(analysis["residuals"])):
        # Under a noise model: each channel's autoregression from the residuals, and the
        # errors under it (the measure itself stays the white-weighted one: its errors are
        # then the noise model's Cramer-Rao bound, which the white-weighted estimate attains
        # where the sensitivities vary slowly against the noise's correlation, Grenander 1954;
        # where they do not, they are somewhat too small).
        model, note = usable_noise_model(problem.noise_model, False, problem.measurements,
                                         problem.channels)
        warnings += [note] if note else []
        blocks = _blocks(problem, analysis["residuals"], sigma)
        fitted = channel_noises(problem.channels, problem.channel_ranges(),
                                analysis["moment_identifiability"].rank, blocks, model)
        if any(n.order for n in fitted.values()):
            noises = fitted
            analysis = _analyse(problem, solver, atoms, positions_free, noises, sigma)
            sigma = np.array([n.marginal for n in noises.values()])
        judged = {"ranges": dict(zip(problem.channels, map(float, problem.channel_ranges()))),
                  "max_misfit": dict.fromkeys(problem.channels, problem.max_misfit)}
    kept = analysis["kept"]
    curve, tau = problem.curve, problem.max_stiffness
    t_fine = jnp.linspace(0.0, 1.0, fine_grid)
    certificate = np.asarray(first_variation(
        curve, jnp.asarray(analysis["moment_gradient"]), jnp.asarray(analysis["origin"]), t_fine
    ))
    error = np.array([np.nan if e is None else e
                      for e in analysis["moments"]["centroid"]["stderr"]])
    if not np.all(np.isfinite(error)) or np.max(error) > 0.1 * curve.length:
        warnings.append(
            "The pin location (stiffness centroid) is poorly determined by these data "
            f"(standard errors {error.tolist()} m against a curve {curve.length:.3g} m long); "
            "do not read the atoms as a location."
        )
    if analysis["moments"]["total_stiffness"]["at_ceiling"]:
        warnings.append(
            f"The total stiffness sits on its ceiling max_stiffness = {tau:.4g} N/m (or within "
            "a standard error of it): the data call for a stiffer joint (an exact pin is "
            "infinitely stiff in translation). The location is still determined; the total is "
            "only a lower bound."
        )
    if np.any(failed(analysis["residuals"])):
        warnings.append("The simulation failed at the recovered measure; do not use it.")
        converged = False
    points = np.asarray(curve.at(jnp.asarray(kept.t))).reshape(-1, 2)
    residuals = analysis["residuals"]
    return MeasureResult(
        method=method,
        positions=kept.t * curve.length,
        points=points,
        stiffness=kept.p * tau,
        max_stiffness=tau,
        cost=float(0.5 * np.sum(residuals**2)),
        n_data=problem.n_data,
        converged=bool(converged),
        certified=certified,
        gap=gap,
        moments=analysis["moments"],
        moment_identifiability=analysis["moment_identifiability"],
        atom_identifiability=analysis["atom_identifiability"],
        atoms_supported=analysis["atoms_supported"],
        support_note=analysis["support_note"],
        certificate=(np.asarray(t_fine) * curve.length, certificate / tau),
        history=history,
        predictions=analysis["predictions"],
        measurements=problem.measurements,
        noise={c: float(s) for c, s in zip(problem.channels, sigma)},
        noise_estimated=noise_estimated,
        warnings=warnings,
        seconds=time.perf_counter() - clock,
        curve=curve,
        goodness_of_fit=assess_fit(
            [(m.values - p) / sigma for m, p in zip(problem.measurements,
                                                    analysis["predictions"])],
            problem.channels, analysis["moment_identifiability"].rank,
            noise_given=not noise_estimated, sigma=dict(zip(problem.channels, map(float, sigma))),
            units=dict(zip(problem.channels, problem.model.observable_units)),
            noise_models=noises, **judged),
    )
