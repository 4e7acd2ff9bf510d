"""Identification of motion-segment parameters from quasi-static load-displacement results:
least squares through the vmapped equilibrium solve of `spineid.equilibrium`.

Data are rows of a quasi-static test (`spineid.QuasiStaticTest`: the load on the
upper vertebra and its displacement from the reference pose, `dx, dy, dz` in m and the 1-2-3
angles `b1, b2, b3` in rad). Residuals are `(displacement(theta) - measured) / sigma` per
channel; the derivative of the equilibrium with respect to the parameters comes from the
implicit function theorem (optimistix's implicit adjoint, forward mode), so a fit costs a few
Newton solves per Levenberg-Marquardt step, all load cases at once. The minimiser is spineid's
Levenberg-Marquardt (`spineid.LevenbergMarquardt`), which runs its stepwise form for this
objective (`stepwise`): compiling the equilibria dominates a segment fit, so the loop runs in
Python over one compiled function that gives residuals and Jacobian together. Standard errors and the
identifiability report are those of the trajectory fits (`spineid.Identifiability`): a facet
stiffness is determined only by cases that bring the facets into contact.
"""

import dataclasses
import time
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...elements._parameters import apply_values, Parameter, select_parameters
from ...io._columns import unit_in_lab, UNITS
from ...io._measurements import (
    DEFLECTION_COLUMNS, LOAD_COLUMNS, QUASI_STATIC_UNITS, QuasiStaticTest,
)
from ...io._model_file import ModelFile
from ...models._spatial_pair import SpatialPair
from ...simulation._equilibrium import equilibrium, equilibrium_change
from .._common._abstract_objective import AbstractObjective
from .._common._analysis import (
    analyse_parameters,
    linearised_at,
    not_converged_note,
    ParameterAnalysis,
    physical_jacobian,
)
from .._common._failure import failed, guarded
from .._common._goodness import assess_fit, checked_max_misfit, MAX_MISFIT, misfit_exceeds
from .._common._least_squares import linearised
from .._common._noise import (
    check_noise,
    innovations,
    iterated_prewhitening,
    judged_ranges,
    noise_from_residuals,
    NOISE_SETTLED,
    settle_noise,
    unsettled_note,
)
from .._common._noise_model import (
    AR, channel_noises, ChannelNoise, check_order, checked_noise_model, coefficient_matrix,
    drift_notes, supported_order, whiten_padded, White,
)
from .._common._result_family import AbstractParameterFit, with_data_units
from .._common._shown import in_unit, noise_line
from .._common._uncertainty import channel_records, hac_covariance
from .._common._transform import Transform
from .._solvers import LevenbergMarquardt, MultiStart
from ._run import check_kind_solver, run_solver
from ._matrix_units import motion_units


class _SegmentObjective(AbstractObjective):
    """Noise-weighted displacement residuals of every row of a quasi-static test, as a function
    of the unconstrained parameters `u` (`(p,)`): `(displacement(theta(u)) - measured) / sigma`,
    `(k * 6,)`, row by row, each channel whitened along the rows by its autoregression
    (`coefficients` `(6, q)`, zero-padded: `whiten_padded`, its first rows zero; all zero for
    white noise); a row without equilibrium gets `FAILED_RESIDUAL` in every channel, so that a
    solver refuses the step. A module (not a closure) whose coefficients always have the same
    shape, so that one compilation serves every fit of the same layout: the noise re-estimates
    and the refits under a noise model."""

    model: SpatialPair
    loads: Float[Array, "k 6"]
    data: Float[Array, "k 6"]
    sigma: Float[Array, " 6"]
    coefficients: Float[Array, "6 q"]
    transform: Transform
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    stepwise: ClassVar[bool] = True  # (compiling the equilibria dominates a fit)

    def solve_all(self, theta):
        """Displacements `(k, 6)` (m, rad) and equilibrium flags `(k,)` at physical `theta`."""
        fitted = apply_values(self.model, self.parameters, theta)
        solved = jax.vmap(lambda load: equilibrium(fitted, load))(self.loads)
        # (A row without equilibrium is given a fixed large residual by the caller.)
        changes = jax.vmap(lambda one: equilibrium_change(fitted, one))(solved)
        return changes, solved.converged

    def __call__(self, u, args=None):
        displacements, converged = self.solve_all(self.transform.to_physical(u))
        misfit = guarded((displacements - self.data) / self.sigma, converged[:, None])
        return whiten_padded(misfit, jnp.ones(misfit.shape[0]), self.coefficients).ravel()

    def white(self) -> "_SegmentObjective":
        """The same residuals, not whitened (whose `predictions_from` holds)."""
        return dataclasses.replace(self, coefficients=jnp.zeros_like(self.coefficients))

    def predictions_from(self, residuals) -> tuple[np.ndarray, np.ndarray]:
        """The displacements `(k, 6)` and equilibrium flags `(k,)` that produced `residuals`
        of the objective not whitened (`data + sigma r`; no equilibrium solved again: compiling
        one costs seconds)."""
        weighted = np.asarray(residuals).reshape(self.data.shape)
        solved = ~np.all(failed(weighted), axis=1)
        return np.asarray(self.data) + weighted * np.asarray(self.sigma), solved


@dataclasses.dataclass(frozen=True)
class SegmentFit(AbstractParameterFit):
    """The outcome of `fit_segment`.

    Fields: those of every parameter fit (`spineid.AbstractParameterFit`; `noise` per channel,
    SI, the errors' own deviations under a noise model; `stderr` the Cramer-Rao errors, or
    under noise no autoregression describes those of a sandwich, `_sandwiched`;
    `stderr_robust` where an autoregression was fitted; the `goodness_of_fit`: with the noise
    estimated, a record's verdict has three levels, while the rows of a test of load cases have
    no order and only the noise's plausibility is checked: `fit_segment`), and `n_steps`,
    `predicted` (`(k, 6)` displacements of the fitted model), `measured` (`(k, 6)`),
    `equilibria_converged` (`(k,)`), `data_units` (`(length, angle)` the test's motion was
    read in, `motion_units`; `None` for SI: `summary`'s and the report's `in_data_units`).
    """

    n_steps: int
    predicted: np.ndarray
    measured: np.ndarray
    equilibria_converged: np.ndarray
    data_units: tuple[str, str] | None = None

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid segment --fit`, docs/cli.md)."""
        return self.common_report() | {
            "n_steps": int(self.n_steps),
            "noise": {"sigma": self.noise, "estimated_from_residuals": self.noise_estimated},
            "parameters": with_data_units(self.parameter_entries(), [
                unit_in_lab(unit, *(self.data_units or (None, None))) for unit in self.units]),
            "correlation": self.correlation_report(),
            "identifiability": self.identifiability.to_dict(),
            "equilibria_converged": [bool(x) for x in self.equilibria_converged],
        }

    def summary(self, units: tuple[str, str] | None = None, si: bool = False) -> str:
        """A human-readable table of the fit: with every length in `units[0]` and every angle
        in `units[1]` (names of `spineid.io`'s `UNITS`; by default those the test's deflection
        columns were read in, `data_units`: `(mm, deg)` gives the parameters in N/mm, N m/deg,
        and the noise of `dx`..`b3` in mm and deg), said in a line; in SI with `si` or for a
        test in SI."""
        units = None if si else units or self.data_units
        length, angle = units or (None, None)
        shown = [unit_in_lab(unit, length, angle) for unit in self.units]
        channels = {column: (kind, 1.0 / UNITS[kind][1]) for column, kind in zip(
            DEFLECTION_COLUMNS, [length] * 3 + [angle] * 3) if kind in UNITS}
        lab = units is not None and any(factor != 1.0 for _, factor in channels.values())
        lines = [f"segment fit: {'converged' if self.converged else 'NOT converged'} after "
                 f"{self.n_steps} steps in {self.seconds:.2f} s; cost {self.cost:.6g} "
                 f"({self.n_data} data values)",
                 noise_line(self.noise, self.noise_estimated, channels if lab else None),
                 *([f"(in the test's units: translations {length}, rotations {angle}; "
                    "report.json in SI)"] if lab else []),
                 *self.parameter_table(shown=shown if lab else None)]
        return "\n".join(lines + self.verdict_lines(channels if lab else None))


def checked_segment_fit(model_file: ModelFile, test: QuasiStaticTest, free, noise=None,
                        solver=None, noise_model="auto", max_misfit: float = MAX_MISFIT):
    """The checks of `fit_segment`'s arguments (as there), made before any equilibrium is
    solved: the command line makes them before its nine load cases. **Returns:** the free
    `Parameter`s, the given noise `(6,)` or `None`, the noise model and the misfit fraction.
    Raises `ValueError` as `fit_segment` does."""
    check_kind_solver("fit_segment", LevenbergMarquardt() if solver is None else solver)
    if not isinstance(model_file.model, SpatialPair):
        raise ValueError(f"{model_file.source}: a segment fit needs a kind = \"spatial_pair\" "
                         "model")
    parameters = select_parameters(model_file.parameters, free, model_file.source)
    measured = np.asarray(test.deflections)
    if measured.size <= len(parameters):
        raise ValueError(f"{test.source}: {measured.size} data values for {len(parameters)} "
                         "free parameters: need more load cases")
    sigma_given = (None if noise is None else
                   np.array(list(check_noise(DEFLECTION_COLUMNS, noise).values())))
    kind_of_noise = checked_noise_model(noise_model, sigma_given is not None, [], "noise_model",
                                        DEFLECTION_COLUMNS)
    check_order(kind_of_noise, [len(measured)], "noise_model")
    return parameters, sigma_given, kind_of_noise, checked_max_misfit(max_misfit)


def fit_segment(model_file: ModelFile, test: QuasiStaticTest, free, noise=None,
                solver: LevenbergMarquardt | MultiStart | None = None, *,
                noise_model="auto", max_misfit: float = MAX_MISFIT,
                progress: bool = False) -> SegmentFit:
    """Fit the free parameters of a segment model (a `spatial_pair` model file) to the
    displacements of a quasi-static test, through the equilibrium solve of every row.

    **Arguments:** `model_file` (its values of free parameters are the start), `test` (rows of
    load and displacement), `free` (groups such as `facets.stiffness`, `bushing.stiffness`,
    `ligaments.stiffness`, or parameter names), `noise` (`{dx, dy, dz: m, b1, b2, b3: rad}`,
    white; default: estimated per channel from the residuals, the fit refined with it until the
    estimate settles, `settle_noise`),
    `solver` (a `spineid.LevenbergMarquardt` carrying `max_steps` and the stopping
    tolerances, default `LevenbergMarquardt()`; or a `spineid.MultiStart` of one, its starts
    drawn around the model file's values: `spineid/identify/_kinds/_run.py`),
    `noise_model` (with the noise estimated; `"auto"`, `"white"`, `spineid.AR(...)` or their
    command-line names) and `max_misfit` (the smooth misfit a fit may leave, a fraction of the
    motion's amplitude: the largest range of the translations, or of the rotations). A test of
    `RECORD_ROWS` rows or more, fitted under `"auto"` or an `AR`, is a record in the order of
    its rows (a tester's continuous loading): each channel's noise may then be correlated from
    row to row, the autoregression is fitted to the residuals and the fit refined under it
    (generalized least squares by iterated prewhitening, Seber and Wild 1989, section 6.2, as
    the trajectory fits: `spineid/identify/_trajectory/_correlated.py`; the first rows of each
    channel left out, Cochrane-Orcutt; where an autoregression is far from describing a
    channel's noise, the errors from the sandwich of the whitened scores, `_sandwiched`),
    Newey-West errors of the white-weighted estimate stand beside its errors where a channel
    needed an order (`stderr_robust`), and the verdict has three levels
    (docs/goodness-of-fit.md); a row without equilibrium at the white-weighted fit
    leaves the noise white, said so (and fails the verdict). Fewer rows, or `"white"`: load cases
    without an order, white noise, the verdict checks the noise's plausibility only. The
    residuals are those of the module docstring; spineid's Levenberg-Marquardt
    (`spineid.levenberg_marquardt`, the one every fit uses) minimises them, with the Jacobian
    through the equilibrium solve by the implicit function theorem. `progress` prints every
    iteration (the first waits for the compilation of the equilibria's Jacobian, about 20 s on
    a 2-core CPU).

    **Returns:** a `SegmentFit`. Raises `ValueError` for a model that is not a spatial pair,
    fewer data than parameters, bad noise, a noise model the test cannot support (an order
    beyond a tenth of its rows, coefficients beside given noise), a solver it cannot run, or
    rows whose loads find no equilibrium at the values the first fit reaches (naming them: a
    load the model cannot carry there leaves a residual no parameter moves, and would swamp
    the noise estimated and the verdict).
    """
    started = time.perf_counter()
    if solver is None:
        solver = LevenbergMarquardt()
    parameters, sigma_given, kind_of_noise, max_misfit = checked_segment_fit(
        model_file, test, free, noise, solver, noise_model, max_misfit)
    local = solver.local()
    model = model_file.model
    measured = np.asarray(test.deflections)
    record = (sigma_given is None and len(measured) >= RECORD_ROWS
              and not isinstance(kind_of_noise, White))
    notes_first = []
    if sigma_given is None and len(measured) >= RECORD_ROWS and not record:
        notes_first.append(f"the {len(measured)} rows are taken as load cases in no order "
                           "(noise_model white): a noise correlated from row to row is not looked "
                           "for, and would make the standard errors too small; fit under 'auto' "
                           "to test it")
    if not record:
        kind_of_noise = White()
    start = np.array([p.value(model) for p in parameters])
    transform = Transform.around(parameters, start, model_file.source)
    ranges = np.maximum(np.ptp(measured, axis=0), np.abs(measured).max(axis=0))
    sigma = sigma_given if sigma_given is not None else np.maximum(1e-3 * ranges, 1e-12)
    # (Whitening coefficients padded to the widest order `auto` or the model given may take on
    # these rows: a record's fits under white, `auto` and `ar:P` are one compiled program.)
    width = max(supported_order(kind_of_noise, len(measured)),
                supported_order(AR(), len(measured)), 1)
    objective = _SegmentObjective(model, jnp.asarray(test.loads), jnp.asarray(measured),
                                  jnp.asarray(sigma), jnp.zeros((6, width)), transform,
                                  tuple(parameters))

    # With the noise to be estimated, the first pass's weights stand in for it
    # (`provisional`): its statistical stop is measured against the residuals' own level.
    solution, how, notes = run_solver(solver, objective, transform, np.zeros(len(parameters)),
                                      progress=progress, provisional=sigma_given is None)
    converged, steps = solution.converged, solution.steps
    _check_equilibria(test, objective.predictions_from(solution.residuals)[1], solution.steps)
    if isinstance(solver, MultiStart):
        notes.insert(0, f"solved by {how}")
    notes.extend(notes_first)
    if sigma_given is None:
        def estimate(fitted):
            solution, objective = fitted
            raw = objective.predictions_from(solution.residuals)[0] - measured
            return noise_from_residuals(raw, len(parameters), ranges)

        def refit(sigma, previous):
            refitted = dataclasses.replace(objective, sigma=jnp.asarray(sigma))
            start = (solution if previous is None else previous[0]).value
            return local.solve(refitted, start, progress), refitted

        fits, sigma, change = settle_noise(refit, estimate, estimate((solution, objective)))
        if change > NOISE_SETTLED:
            notes.append(unsettled_note(change))
        solution, objective = fits[-1]
        converged, steps = solution.converged, steps + sum(f[0].steps for f in fits)
    white_solution = solution
    predicted_white, solved_white = objective.predictions_from(solution.residuals)
    raw_white = predicted_white - measured
    # Each channel's smooth misfit is judged against the motion's amplitude of its kind (the
    # largest range of the translations, or of the rotations): the axial displacement of a
    # bending test moves little, and the smooth part of its correlated noise alone can be a few
    # percent of its own range.
    judged = np.maximum(judged_ranges(raw_white, ranges),
                        np.repeat([ranges[:3].max(), ranges[3:].max()], 3))
    correlated = None
    if isinstance(kind_of_noise, AR) and not np.all(solved_white):
        notes.append("the noise model was not applied: no equilibrium at the white-weighted "
                     "fit for rows " + ", ".join(str(i + 1) for i in np.flatnonzero(~solved_white))
                     + "; the standard errors assume white noise")
    elif (isinstance(kind_of_noise, AR)
            and not misfit_exceeds([raw_white], judged, max_misfit)):
        correlated = _under_noise_model(local, objective, solution.value, raw_white, ranges,
                                        len(parameters), kind_of_noise, notes, progress)
    noises = None
    if correlated is not None:
        solution, objective, noises = correlated
        converged, steps = solution.converged, steps + solution.steps
        sigma = innovations(noises)
    values, jacobian = physical_jacobian(solution.jacobian, solution.value, transform,
                                         linearised_at(solution))
    predicted, equilibria = objective.white().predictions_from(
        linearised(objective.white(), solution.value)[0] if noises else solution.residuals)
    names = [p.name for p in parameters]
    units = [p.unit for p in parameters]
    analysis = analyse_parameters(jacobian, values, names, units, transform)
    sandwiched = None
    if noises and np.all(equilibria) and any(n.whitened is not None
                                             and n.innovation ** 2 > SANDWICHED * n.whitened ** 2
                                             for n in noises.values()):
        sandwiched = _sandwiched(analysis, jacobian, np.asarray(solution.residuals),
                                 len(measured), values, names, units, transform)
    analysis = analysis if sandwiched is None else sandwiched
    messages = list(analysis.warnings) + notes + ([SANDWICHED_NOTE] if sandwiched else [])
    robust = None
    if noises:
        # Beside them, Newey-West errors of the white-weighted estimate (each channel a record
        # in the order of the rows).
        least_squares, white_jacobian = physical_jacobian(
            white_solution.jacobian, white_solution.value, transform, linearised_at(white_solution))
        robust = np.sqrt(np.maximum(np.diag(hac_covariance(
            white_jacobian, -np.asarray(white_solution.residuals), channel_records(
                [len(measured)], 6), analysis.identifiability.identifiable
            & ~analysis.at_bound)), 0.0))
        messages.extend(drift_notes(values, least_squares, robust,
                                    max(n.order for n in noises.values())))
        ordered = ", ".join(f"{c} as AR({n.order})" for c, n in noises.items() if n.order)
        messages.extend([f"the rows were taken as a record in their order (a sweep), the noise "
                         f"of {ordered} from row to row; for separate load cases in no order, "
                         "fit under noise_model 'white' (--noise-model white)"] * bool(ordered))
    if not np.all(equilibria):
        messages.append("no equilibrium found for rows "
                        + ", ".join(str(i + 1) for i in np.flatnonzero(~equilibria))
                        + " at the fitted values")
    if not converged:
        messages.append(not_converged_note(local.max_steps))
    marginal = np.array([n.marginal for n in noises.values()]) if noises else sigma
    residuals = (predicted - measured) / marginal
    channel_sigma = dict(zip(DEFLECTION_COLUMNS, map(float, marginal)))
    return SegmentFit(
        names=names, units=[p.unit for p in parameters], start=start, values=values,
        stderr=analysis.stderr, at_bound=analysis.at_bound, correlation=analysis.correlation,
        cost=0.5 * float(np.sum(np.asarray(solution.residuals)**2)), n_data=int(measured.size),
        converged=converged, n_steps=steps, noise=channel_sigma,
        noise_estimated=sigma_given is None, identifiability=analysis.identifiability,
        predicted=predicted, measured=measured, equilibria_converged=equilibria,
        warnings=messages, seconds=time.perf_counter() - started, stderr_robust=robust,
        data_units=motion_units(getattr(test, "read_as", None)),
        goodness_of_fit=assess_fit(
            [np.where(equilibria[:, None], residuals, np.inf)], DEFLECTION_COLUMNS,
            analysis.identifiability.rank, noise_given=sigma_given is not None,
            sigma=channel_sigma, ordered=record, noise_models=noises,
            units=dict(zip(DEFLECTION_COLUMNS, ("m",) * 3 + ("rad",) * 3)),
            misfit_residuals=[raw_white] if noises else None,
            **({"ranges": dict(zip(DEFLECTION_COLUMNS, map(float, judged))),
                "max_misfit": dict.fromkeys(DEFLECTION_COLUMNS, max_misfit)} if record
               else {})))


SANDWICHED = 2.0
"""A segment fit's errors come from the sandwich of its whitened scores (`_sandwiched`) where
a channel's autoregression has an own innovation variance (the one that gives it the
residuals' variance) more than this many times that of the residuals it whitens: measured on
100 records each (`experiments/coverage_correlated.py`'s segment records), filtered noise gave
2.75-4.67, AR(1) noise at rho 0.9 at most 1.63 (above `INCONSISTENT`, 1.5, in 10 of them,
where the sandwich covered the truth less often than the model's errors: 74% against 93%)."""

SANDWICHED_NOTE = ("standard errors from the generalized fit's whitened scores (Newey-West "
                   "over the rows): an autoregression does not describe the noise here")


def _sandwiched(analysis: ParameterAnalysis, jacobian: np.ndarray, residuals: np.ndarray,
                rows: int, values, names, units, transform) -> ParameterAnalysis | None:
    """The analysis of a fit whose errors come from the sandwich of its whitened scores: the
    prewhitened HAC covariance of the generalized least-squares estimate (Andrews and Monahan
    1992; `hac_covariance` of the whitened sensitivities `jacobian` `(6 rows, p)` and residuals
    `(6 rows,)`, each channel a record in the order of the rows, Newey-West's lags), for a fit
    where an autoregression does not describe a channel's noise (its own innovation variance
    more than `SANDWICHED` times the whitened residuals'). Its identifiability, combinations
    and warnings are those of that covariance (`analyse_parameters` of a square root of its
    inverse). `None` (the noise model's errors stand) where a free parameter is not
    identifiable on its own.

    Why: noise low-pass filtered along the rows is far more predictable one row ahead than
    any autoregression of order at most 9 says, and a segment's sensitivities change from one
    load case to the next, so its information lies where the whitened residuals are smallest:
    the noise model's own errors were 2-3 times too large (calibration 0.35, coverage 100%;
    with the sandwich 1.00, 99%: 100 records of `experiments/coverage_correlated.py --part
    segment`, docs/goodness-of-fit.md); under AR(1) noise the model's errors stand (the
    sandwich 1.15-1.44 times too small there)."""
    active = ~analysis.at_bound
    if not np.all(analysis.identifiability.identifiable[active]):
        return None
    covariance = hac_covariance(jacobian, residuals, channel_records([rows], 6), active)
    try:
        root = np.linalg.cholesky(np.linalg.inv(covariance[np.ix_(active, active)]))
    except np.linalg.LinAlgError:
        return None
    effective = np.zeros((int(active.sum()), len(values)))
    effective[:, active] = root.T  # (effective^T effective: the inverse of the covariance)
    return analyse_parameters(effective, values, names, units, transform)


def _check_equilibria(test, solved, steps):
    # Refuses a fit some of whose rows found no equilibrium at the values its first pass reached.
    if np.all(solved):
        return
    # (The loads in the units of the tester's columns where the file said them, else SI.)
    rows = np.flatnonzero(~np.asarray(solved))
    read_as = test.read_as or {}
    shown_as = [(read_as[name]["unit"], 1.0 / read_as[name]["factor"]) if name in read_as
                else (QUASI_STATIC_UNITS[name], 1.0) for name in LOAD_COLUMNS]
    shown = "; ".join(
        f"row {i + 1}: loads " + ", ".join(
            f"{name} {in_unit(value, unit)}"
            for name, value, unit in zip(LOAD_COLUMNS, test.loads[i], shown_as))
        for i in rows[:3]) + ("; ..." if len(rows) > 3 else "")
    raise ValueError(
        f"{test.source}: {len(rows)} row(s) found no equilibrium of the model at the values the "
        f"fit reached after {steps} step(s) ({shown}): loads beyond what the model "
        "carries there, or an equilibrium its solve cannot reach. Leave those rows out, or "
        "start elsewhere (spineid segment --starts N, spineid.MultiStart in Python)")


RECORD_ROWS = 10
"""A quasi-static test of this many rows or more is a record in the order of its rows: its noise
may be correlated from row to row (`fit_segment`); an autoregression needs ten rows per order."""


def _under_noise_model(local, objective, u, raw, ranges, n_free, model, notes, progress):
    # The fit from the white-weighted solution `u` (its `objective`, raw residuals `raw` (k, 6),
    # fit - data) under the noise model `model` (an `AR`): each channel's autoregression from
    # the residuals; where one needs an order, the fit weighted by the whitening filters and
    # the autoregressions estimated again from its residuals until the innovations settle
    # (`iterated_prewhitening`, as every fit kind); the innovations' deviations at last from
    # the final fit under the coefficients it was weighted with (statsmodels' GLSAR scale).
    # Returns `(solution, objective, noises)` or `None` where every channel is white; `notes`
    # get what the caller should say.
    measured = np.asarray(objective.data)

    def weighted_by(found: dict[str, ChannelNoise], sigma):
        matrix = np.zeros(objective.coefficients.shape)
        own = coefficient_matrix(list(found.values()))
        matrix[:, :own.shape[1]] = own
        return dataclasses.replace(objective, sigma=jnp.asarray(sigma),
                                   coefficients=jnp.asarray(matrix))

    def refit(found, sigma, previous):
        weighted = weighted_by(found, sigma)
        start = u if previous is None else previous[0].value
        return local.solve(weighted, start, progress), weighted

    def residuals_of(fitted):
        white = fitted[1].white()
        return [white.predictions_from(linearised(white, fitted[0].value)[0])[0] - measured]

    whitened = iterated_prewhitening(
        channel_noises(DEFLECTION_COLUMNS, ranges, n_free, [raw], model), refit, residuals_of,
        lambda found, **how: channel_noises(DEFLECTION_COLUMNS, ranges, n_free, found, model,
                                            **how))
    if whitened is None:
        return None
    notes.extend(whitened.notes)
    fits, final = whitened.fits, whitened.noises
    weighted = weighted_by(final, innovations(final))
    residuals, jacobian = linearised(weighted, fits[-1][0].value)
    solution = dataclasses.replace(
        fits[-1][0], steps=sum(int(f[0].steps) for f in fits),
        linearisation=(0.5 * float(jnp.sum(residuals ** 2)), residuals, jacobian))
    return solution, weighted, final
