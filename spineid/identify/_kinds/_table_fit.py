"""Fitting load laws to load-displacement data: quasi-static tests and loading/unloading loops.

The model of a measured load is `L = M(x; theta) + c x' + J x''`: the law `M` of
`spineid.elements` at the displacement `x`, a damper `c` on its rate when the data are a loop
recorded in time (the thesis' L5-S1 demonstration adds one, Liu 2001 section 4.3), and a known
inertia `J` when the loads are the applied ones of a dynamic test. Rates come from the sampled
`x(t)` by second-order finite differences.

Parameters and what keeps the law monotone (`LawForm.monotone`, the default for tables):
- `piecewise_linear`: the load at the first node and the rises between nodes (rises >= 0);
  with `LawForm.free_breakpoints` also the interior nodes, through positive gaps (so the nodes
  stay ordered) between the fixed end nodes.
- `monotone_cubic`: the node loads as above at fixed nodes (PCHIP keeps the curve monotone).
- `polynomial`: the coefficients; `tan_cos`: the coefficient (>= 0).
- `LawDynamics.damping`: `c >= 0`.
With free breakpoints of a `piecewise_linear` table the breakpoints are first placed at the
least-squares optimum by variable projection (`spineid.identify._kinds._breakpoints`: exact for one
interior breakpoint, coordinate-wise for more), so the local solver starts in the optimum's basin
instead of stopping at a local optimum of the breakpoint. Then, unless that projected
solution is already the optimum (one breakpoint, no smoothing, loads within their bounds), all
parameters are solved by spineid's Levenberg-Marquardt (`spineid.levenberg_marquardt`, the one
every fit uses; its gradient and step stops also end the drift of a parameter heading for its
bound, such as the rise of a flat neutral zone) in the unconstrained coordinates of `spineid.identify._common._transform.Transform`. The
solver object (`spineid.VariableProjection`, `spineid.LevenbergMarquardt`, a
`spineid.MultiStart` of it) chooses; standard
errors and identifiability from the Fisher matrix (`analyse_parameters`), as for every fit of
the identification engine.
"""

import dataclasses
import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ...elements._load_laws import (
    LAW_KINDS, MonotoneCubicLaw, PiecewiseLinearLaw, PolynomialLaw, TABLE_KINDS, TanCosLaw,
    check_monotone,
)
from ...elements._parameters import Parameter
from ...io._columns import UNITS
from ...io._measurements import LoadDisplacementData
from .._common._abstract_objective import AbstractObjective
from .._common._analysis import analyse_parameters, not_converged_note
from .._common._goodness import assess_fit, checked_max_misfit, MAX_MISFIT
from .._common._noise import NOISE_SETTLED, settle_noise, unsettled_note
from .._common._noise_model import (
    AR, ChannelNoise, check_order, checked_noise_model, drift_notes, fit_channel_noise,
    noise_under, sampled_noise_model, White, whiten_padded, whitened,
)
from .._common._padding import pad, padded_length, weights
from .._common._profile import Profiled
from .._common._result_family import json_number
from .._common._transform import Transform
from .._common._uncertainty import hac_covariance
from .._solvers import LAW_SOLVER, LevenbergMarquardt, MultiStart, VariableProjection
from ._breakpoints import projected_start, start_loads
from ._errors_in_variables import (checked_displacement_noise, effective_sd, load_noise_beside,
                                   typical_noise)
from ._law_form import LawDynamics, LawForm, misplaced_option
from ._law_units import law_summary, law_units, shown_in, si_names
from ._rates import measured_rates
from ._run import check_kind_solver, run_solver


@dataclasses.dataclass(frozen=True)
class LawFit(Profiled):
    """A load law fitted to load-displacement data, with what the data determine.

    Fields: those of every parameter fit (`spineid.AbstractParameterFit`; `noise` is the load
    noise, a float: the standard deviation of the errors; under an autoregressive noise model
    the errors rest on it through the model, `goodness_of_fit.noise_model`; the
    `goodness_of_fit` takes the residuals in the order of time, or of the
    displacement for a quasi-static table, where a wrong breakpoint leaves runs of one sign),
    and `kind`, `law` (the fitted `AbstractLoadLaw`), `damping` (N s/m or N m s/rad; 0 when not
    fitted), `derived` (node loads and phase slopes of tables with standard errors),
    `predicted` and `residuals` (`(n,)`, load units), `method` (how the optimum was sought, in
    words), `displacement_noise` (m or rad: errors in both variables, or `None`), `data_units`
    (`(displacement, load)` the test was read in, `law_units`; `None` for SI: `summary`'s).
    `profile(name)` gives a parameter's profile-likelihood interval.
    """

    kind: str
    law: object
    damping: float
    derived: dict
    predicted: np.ndarray
    residuals: np.ndarray
    method: str = "Levenberg-Marquardt"
    displacement_noise: float | None = None
    data_units: tuple[str, str] | None = None

    def law_table(self) -> dict:
        """The fitted law as a model-file `law` table (docs/formats/model-files.md), e.g. for
        `[[torsion]]`."""
        law = self.law
        if self.kind in TABLE_KINDS:
            table = {"kind": self.kind,
                     "displacement": np.asarray(law.displacement).tolist(),
                     "load": np.asarray(law.load_values).tolist()}
            if self.kind == "piecewise_linear":
                table["smoothing"] = float(law.smoothing)
            return table
        if self.kind == "tan_cos":
            return {"kind": "tan_cos", "coefficient": float(law.coefficient)}
        return {"kind": "polynomial", "coefficients": np.asarray(law.coefficients).tolist()}

    def report(self) -> dict:
        """JSON-ready report (`report.json` of `spineid table`, docs/cli.md): the fit report's
        layout plus the law table."""
        return self.common_report() | {
            "method": self.method,
            "law": self.law_table(),
            "damping": self.damping,
            "parameters": self.parameter_entries(),
            "derived": {key: [{"value": float(v), "stderr": json_number(e)} for v, e in entries]
                        for key, entries in self.derived.items()},
            "noise": self.noise,
            "noise_estimated": self.noise_estimated, "displacement_noise": self.displacement_noise,
            "identifiability": self.identifiability.to_dict(),
        }

    def summary(self, units: tuple[str, str] | None = None, si: bool = False) -> str:
        """Plain-text summary: parameters with standard errors, derived slopes, verdict; in
        `units` (`(displacement, load)` of `spineid.io`'s `UNITS`), by default those the test's
        columns were read in (`data_units`: `law_units`), said in a line (`law_summary`); in
        SI with `si` or for a test in SI."""
        units = None if si else units or self.data_units
        return "\n".join(law_summary(self, units) + self.verdict_lines(
            {"load": shown_in("load", units)} if units else None))


class _LawModel(eqx.Module):
    """The modelled load `M(x; theta) + c x' + J x''` at the data (module docstring) as a function
    of the physical parameters `theta` (`(p,)`, in the order `fit_load_law` declares them).
    A module, so that fits of the same layout (law kind, number of parameters, padded data
    length: `spineid.identify._common._padding`) share one compilation."""

    x: Float[Array, " n"]
    velocity: Float[Array, " n"]
    known: Float[Array, " n"]  # J x'': the inertial load, known
    node_x: Float[Array, " k"]  # the nodes (fixed), or the end nodes' span (free breakpoints)
    kind: str = eqx.field(static=True)
    n_law: int = eqx.field(static=True)
    free_breakpoints: bool = eqx.field(static=True)
    damping: bool = eqx.field(static=True)
    smoothing: float = eqx.field(static=True)

    def law(self, theta):
        """The law (`spineid.elements` load law) at parameters `theta`."""
        if self.kind in TABLE_KINDS:
            node_x = self.node_x
            moving = node_x.size - 2 if self.free_breakpoints else 0
            if self.free_breakpoints:
                gaps = jnp.concatenate([theta[:moving], node_x[-1:] - node_x[-2:-1]])
                fractions = jnp.cumsum(gaps) / jnp.sum(gaps)
                xs = node_x[0] + (node_x[-1] - node_x[0]) * jnp.concatenate(
                    [jnp.zeros(1), fractions])
            else:
                xs = node_x
            loads = theta[moving] + jnp.concatenate(
                [jnp.zeros(1), jnp.cumsum(theta[moving + 1:self.n_law])])
            if self.kind == "piecewise_linear":
                return PiecewiseLinearLaw(xs, loads, self.smoothing)
            return MonotoneCubicLaw(xs, loads)
        if self.kind == "polynomial":
            return PolynomialLaw(theta[:self.n_law])
        return TanCosLaw(theta[0])

    def __call__(self, theta):
        c = theta[-1] if self.damping else 0.0
        return self.law(theta).load(self.x) + c * self.velocity + self.known

    def stiffness(self, theta):
        """The law's tangent stiffness `M'(x)` at the data `(m,)` (errors in both variables)."""
        return self.law(theta).stiffness(self.x)

    def nodes_and_slopes(self, theta):
        """A table law's node displacements, node loads and phase slopes, concatenated."""
        table_law = self.law(theta)
        xs, ys = table_law.displacement, table_law.load_values
        return jnp.concatenate([xs, ys, jnp.diff(ys) / jnp.diff(xs)])


@eqx.filter_jit
def _linearised(model: _LawModel, theta, derived: bool = False):
    # The modelled loads (`(m,)`, padded) and their Jacobian `(m, p)` at `theta`, or with
    # `derived` a table's nodes and slopes and theirs: compiled once per layout, where the same
    # evaluated op by op compiles every operation for every new data length.
    function = model.nodes_and_slopes if derived else model
    return function(theta), jax.jacfwd(function)(theta)


_tangent = eqx.filter_jit(lambda model, theta: model.stiffness(theta))


class _LawResiduals(AbstractObjective):
    """Noise-weighted residuals `weight (M(theta(u)) - observed) / sigma`, `(m,)` (padded: the
    weight is zero beyond the data), of the unconstrained parameters `u`; with `held` (an
    index) that parameter is held at `held_value` (unconstrained) and `u` holds the others (a
    profile's refit). Under an autoregressive noise model (`coefficients` `phi`, `(q,)`) the
    residuals are taken in the order `sequence` (`(m,)`, a permutation: the samples' order,
    then the padding) and whitened, `a_t = r_t - sum_k phi_k r_(t-k)`, the first `q` left out
    (`spineid.identify._common._noise_model`); `sigma` is then the innovations' standard
    deviation: generalized least squares. With `displacement_sd` (errors in both variables) each
    residual is weighted by its effective deviation instead (`_errors_in_variables`)."""

    model: _LawModel
    observed: Float[Array, " m"]
    weight: Float[Array, " m"]
    sigma: Float[Array, ""]
    transform: Transform
    held_value: Float[Array, ""]
    coefficients: Float[Array, " q"]
    sequence: Int[Array, " m"]
    displacement_sd: Float[Array, ""] | None = None
    held: int | None = eqx.field(static=True, default=None)

    def __call__(self, u, args=None):
        if self.held is not None:
            u = jnp.concatenate([u[:self.held], self.held_value[None], u[self.held:]])
        theta = self.transform.to_physical(u)
        sigma = self.sigma if self.displacement_sd is None else effective_sd(
            self.sigma, self.model.stiffness(theta), self.displacement_sd)
        residuals = (self.model(theta) - self.observed) * self.weight / sigma
        return whitened_in_order(residuals, self.weight, self.coefficients, self.sequence)

    def samples(self):
        """The data's samples whitened (the rest is padding, or left out by the whitening)."""
        return (jnp.sum(self.weight) - self.coefficients.size).astype(int)


def whitened_in_order(residuals, weight, coefficients, sequence):
    """`residuals` `(m,)` (zero where `weight` is) whitened in the order `sequence` by the
    autoregression `coefficients` `(q,)` (`whiten_padded`); the residuals themselves without
    coefficients."""
    if coefficients.shape[0] == 0:
        return residuals
    return whiten_padded(residuals[sequence][:, None], weight[sequence],
                         coefficients[None, :])[:, 0]


def _default_nodes(data: LoadDisplacementData, count: int) -> np.ndarray:
    return np.linspace(data.displacement.min(), data.displacement.max(), count)


def fit_load_law(
    data: LoadDisplacementData,
    law: LawForm | str = "piecewise_linear",
    *,
    dynamics: LawDynamics | None = None,
    noise=None,
    displacement_noise: float | None = None,
    max_misfit: float = MAX_MISFIT,
    solver="auto",
    **misplaced,
) -> LawFit:
    """Fit a load law (module docstring) to `data` by least squares.

    **Arguments:** `law`: a `spineid.LawForm` (its kind, nodes, free breakpoints, smoothing,
    monotonicity, degree), or a kind's name for its defaults; `dynamics`: a
    `spineid.LawDynamics` (a damper to fit, a known inertia, the rates' window; default none:
    a quasi-static test); `noise`: the load noise, estimated from the residuals
    under a noise model (`spineid.identify._common._noise_model`): `None` or `"auto"` (the
    default: white where the residuals are, else the autoregressive order their AIC prefers),
    `"white"`, `"ar:P"` or `spineid.AR(P)`, `"phi:..."` or `spineid.AR(coefficients=phi)`
    (the autoregression given: only its innovations' deviation estimated); or given, a
    standard deviation (load units, white);
    the fit is then generalized least squares under that model, in the order of the samples
    (time, or the displacement of a table without time); `max_misfit`: the tolerance of a
    smooth misfit, a fraction of the load's range (`GoodnessOfFit.level`);
    `solver`: `"auto"` (the default: `"varpro"` for free breakpoints of a `piecewise_linear`
    table, `"lm"` otherwise); `"varpro"` or a `spineid.VariableProjection` (the breakpoints
    at the least-squares optimum first, module docstring; its `inner` refines); `"lm"`
    (`spineid.LevenbergMarquardt(max_steps=500, rtol=1e-12, atol=1e-12, decrement_tol=0)`:
    a law fit is cheap, so it runs to the classical stops) or any `LevenbergMarquardt`,
    which starts from the form's nodes as given (a local optimum of the breakpoints is then
    possible); or a `spineid.MultiStart` of a `LevenbergMarquardt`, from the given start and
    starts drawn around it (`spineid/identify/_kinds/_run.py`); `displacement_noise`: the
    standard deviation of the measured displacement (m or rad), for errors in both variables:
    each residual weighted by its effective deviation `sqrt(sigma^2 + (M'(x) sigma_x)^2)`
    (`spineid.identify._kinds._errors_in_variables`; the load noise is then white).

    **Returns:** a `LawFit`. Raises `ValueError` on unusable arguments (a `VariableProjection`
    for a law without free breakpoints of a `piecewise_linear` table: nothing to project; an
    option of the law or the dynamics given to `fit_load_law` itself, naming its object).
    """
    if misplaced:
        raise misplaced_option(next(iter(misplaced)))
    law = LawForm(law) if isinstance(law, str) else law
    if not isinstance(law, LawForm):
        raise ValueError(f"law {law!r}: expected a spineid.LawForm or one of "
                         f"{list(LAW_KINDS)}")
    dynamics = LawDynamics() if dynamics is None else dynamics
    if not isinstance(dynamics, LawDynamics):
        raise ValueError(f"dynamics {dynamics!r}: expected a spineid.LawDynamics")
    kind, free_breakpoints, smoothing = law.kind, law.free_breakpoints, law.smoothing
    monotone, damping, inertia = law.monotone, dynamics.damping, dynamics.inertia
    clock = time.perf_counter()
    displacement_sd = checked_displacement_noise(displacement_noise)
    projectable = kind == "piecewise_linear" and free_breakpoints
    if isinstance(solver, str) and solver in ("auto", "varpro", "lm"):
        solver = (VariableProjection() if solver == "varpro" or (solver == "auto" and projectable)
                  else LAW_SOLVER)
    check_kind_solver("fit_load_law", solver, (VariableProjection,),
                      "\"auto\" or spineid.VariableProjection(...)")
    if isinstance(solver, VariableProjection) and not projectable:
        raise ValueError("solver VariableProjection: it searches the breakpoints of a "
                         "piecewise_linear law with free_breakpoints=True; this fit has none "
                         f"(kind {kind!r}, free_breakpoints={free_breakpoints})")
    velocity = acceleration = np.zeros_like(data.displacement)
    if dynamics.needs_rates:
        velocity, acceleration = measured_rates(data.displacement, data.time,
                                                dynamics.rate_window, data.source)
    n = data.displacement.size
    length = padded_length(n)  # shared by records of similar length: one compilation
    x, observed = jnp.asarray(pad(data.displacement, length)), jnp.asarray(pad(data.load, length))
    weight = jnp.asarray(weights(n, length))
    load_unit = "load"
    damping_start, method, exact = 0.0, "Levenberg-Marquardt", False
    parameters: list[Parameter] = []
    starts: list[float] = []
    notes: list[str] = []  # warnings found while setting up

    def add(name, unit, start, lower=-math.inf):
        parameters.append(Parameter(name, "law", unit, 0, "", None, lower))
        starts.append(start)

    table = law.table
    if table:
        node_x = np.asarray(_default_nodes(data, law.n_nodes) if law.nodes is None
                            else law.nodes, float)
        if node_x.size >= data.displacement.size:
            raise ValueError(f"{node_x.size} nodes for {data.displacement.size} data points: "
                             "a table law needs fewer nodes than points")
        low, high = float(np.min(data.displacement)), float(np.max(data.displacement))
        span = max(high - low, 1e-300)
        beyond = node_x[(node_x < low - 1e-9 * span) | (node_x > high + 1e-9 * span)]
        # (in the displacement's unit of the summary, `law_units`, where the file gave one)
        unit = (law_units(data.read_as) or (None,))[0]
        factor, unit = (UNITS[unit][1], f" {unit}") if unit in UNITS else (1.0, "")
        if beyond.size:
            notes.append(f"nodes {', '.join(f'{v / factor:g}' for v in beyond)}{unit} lie "
                         f"outside the data ({low / factor:g} to {high / factor:g}{unit}): "
                         "their loads are extrapolated, not measured")
        if kind == "piecewise_linear" and not 0 <= smoothing <= np.min(np.diff(node_x)):
            raise ValueError(f"smoothing {smoothing / factor:g}{unit}: expected between 0 and "
                             f"the shortest phase {np.min(np.diff(node_x)) / factor:g}{unit}")
        start = start_loads(data, node_x)
        spread = max(np.ptp(data.load), 1e-12)
        if free_breakpoints:
            if node_x.size < 3:
                raise ValueError("free_breakpoints needs at least 3 nodes (interior ones move)")
            if isinstance(solver, VariableProjection):
                node_x, start, damping_start, method = projected_start(
                    data, node_x, velocity if damping else None, inertia * acceleration,
                    smoothing)
            # The end nodes stay (beyond them the end phases continue, so moving an end node
            # along its phase changes nothing: not identifiable). The interior nodes move with
            # positive gaps, all but the last free: x_j = x_0 + span * cumsum(g)_j / sum(g).
            for k, gap in enumerate(np.diff(node_x)[:-1], start=1):
                add(f"gap[{k}]", "displacement", float(gap), 0.0)
        # One breakpoint of a sharp table whose least-squares loads (and damper) satisfy the
        # bounds: the projected solution is the optimum itself (no local search follows).
        exact = (method.startswith("exact") and float(smoothing) == 0.0 and displacement_sd is None
                 and (not monotone or bool(np.all(np.diff(start) > 0)))
                 and (not damping or damping_start > 0))
        add("load[0]", load_unit, float(start[0]))
        for k, rise in enumerate(np.diff(start), start=1):
            if monotone:
                add(f"rise[{k}]", load_unit, float(rise if exact else max(rise, 1e-3 * spread)),
                    0.0)
            else:
                add(f"rise[{k}]", load_unit, float(rise))
    elif kind == "polynomial":
        degree = law.degree
        # The coefficients enter linearly: start at their least-squares values (without the
        # damper), so that each has the scale of its own power of the displacement (a cubic
        # coefficient of a test in m is ~1e7 times the linear one) and the solver starts near
        # the optimum.
        powers = np.stack([data.displacement ** (k + 1) for k in range(degree)], axis=1)
        coefficients = np.linalg.lstsq(powers, data.load - inertia * acceleration,
                                       rcond=None)[0]
        for k in range(degree):
            add(f"coefficients[{k}]", f"load/displacement^{k + 1}", float(coefficients[k]))
    else:
        small = np.abs(data.displacement) < 0.5 * np.max(np.abs(data.displacement))
        ratio = np.sum(data.load[small] * data.displacement[small]) / max(
            np.sum(data.displacement[small] ** 2), 1e-300)
        add("coefficient", "load/displacement", float(max(2.0 * ratio, 1e-6)), 0.0)
    if damping:
        scale = np.ptp(data.load) / max(np.ptp(velocity), 1e-300)
        add("damping", "load s/displacement",
            float(damping_start if damping_start > 0 else 1e-2 * scale), 0.0)
    n_law = len(parameters) - int(damping)
    model = _LawModel(x, jnp.asarray(pad(velocity, length, 0.0)),
                      jnp.asarray(pad(inertia * acceleration, length, 0.0)),
                      jnp.asarray(node_x if table else np.zeros(2)), kind, n_law,
                      bool(table and free_breakpoints), bool(damping), float(smoothing))
    build = model.law
    transform = Transform.around(parameters, np.array(starts), "load law fit")
    local = solver.local()

    noise_estimated = not (isinstance(noise, (int, float, np.integer, np.floating))
                           and not isinstance(noise, bool))
    noise_model = (checked_noise_model(noise, False, [], "noise", ["load"]) if noise_estimated
                   else White())
    if displacement_sd is not None and isinstance(noise_model, AR):
        if noise_model.fixed:
            raise ValueError(f"noise {noise_model.shown}: with displacement_noise (errors in both "
                             "variables) the load noise is white; use auto or white")
        noise_model = White()
    max_misfit = checked_max_misfit(max_misfit)
    check_order(noise_model, [n], "noise")
    noise_model, note = sampled_noise_model(noise_model, [] if data.time is None
                                            else [data.time], "noise")
    notes.extend([note] if note else [])
    # The samples in their order: of time, or of the displacement of a table without time (a
    # tester's ramp: the two agree); the padding after them.
    order = np.arange(n) if data.time is not None else np.argsort(data.displacement,
                                                                   kind="stable")
    sequence = jnp.asarray(np.concatenate([order, np.arange(n, length)]))

    def residuals_at(sigma, coefficients=()):
        return _LawResiduals(model, observed, weight, jnp.asarray(sigma, float), transform,
                             jnp.asarray(0.0), jnp.asarray(coefficients, float).reshape(-1),
                             sequence, None if displacement_sd is None
                             else jnp.asarray(displacement_sd, float))

    estimates, used = [], []  # the noise estimated after each fit; each refit's weights
    # (Sharp breakpoints at the search's optimum, loads unclipped, white weights: where a node
    # meets a data point the cost has a kink, where no step lowers it: a solve that takes none
    # from there ends at an optimum.)
    kinked = (table and free_breakpoints and not smoothing and displacement_sd is None
              and method.startswith(("exact", "coordinate")) and not (monotone and bool(np.any(
                  np.diff(start) < 1e-3 * spread))))
    def settled(solution, u0, white=True) -> bool:  # noqa: E306
        return bool(solution.converged or kinked and white and np.allclose(solution.value, u0,
                                                                           0.0, 1e-9))

    def refit(sigma, theta):  # (the local solver from `theta`, under the latest estimate)
        used.append(estimates[-1])
        u0 = transform.to_unconstrained(jnp.asarray(theta))
        solution = local.solve(residuals_at(sigma, estimates[-1].coefficients), u0)
        return transform.to_physical(solution.value), settled(solution, u0,
                                                              not estimates[-1].order)

    sigma = 1.0 if noise_estimated else float(noise)
    if not (np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"noise {sigma:g}: expected a positive finite load noise")
    if exact:
        method = ("exact least-squares breakpoint by variable projection (Hudson 1966), loads "
                  "by linear least squares")
        theta, converged = jnp.asarray(starts), True
    else:
        # (`provisional`: the first pass's weights stand in for a noise still to be estimated)
        first, how, more = run_solver(local if isinstance(solver, VariableProjection) else solver,
                                      residuals_at(sigma), transform, np.zeros(len(parameters)),
                                      provisional=noise_estimated)
        notes.extend(more)
        theta, converged = transform.to_physical(first.value), settled(first, 0.0 * first.value)
        if isinstance(solver, MultiStart):
            method = how
    least_squares = np.asarray(theta)  # (the ordinary least-squares estimate)
    if noise_estimated:
        floor = 1e-13 * max(float(np.ptp(data.load)), 1e-300)  # (noise-free data)

        def beside(theta, raw):
            # The load noise beside the displacement noise (errors in both variables).
            sd, note = load_noise_beside(raw, np.asarray(_tangent(model, theta))[:n],
                                         displacement_sd, len(parameters), floor)
            return ChannelNoise(0, (), sd, sd), note

        def estimate(theta, kind_of_noise=noise_model):
            raw = np.asarray(_linearised(model, theta)[0])[:n] - data.load
            estimates.append(beside(theta, raw)[0] if displacement_sd is not None else
                             fit_channel_noise([raw[order]], kind_of_noise, len(parameters),
                                               "load").floored(floor))
            return np.array([estimates[-1].innovation])

        sigma = estimate(theta)  # (chooses the order of "auto": kept in the refits)
        chosen = (noise_model if isinstance(noise_model, AR) and noise_model.fixed
                  else AR(estimates[-1].order) if estimates[-1].order else White())
        if not exact or estimates[-1].order:  # (the exact optimum holds under white noise)
            fits, sigma, change = settle_noise(
                lambda sigma, previous: refit(float(sigma[0]),
                                              theta if previous is None else previous[0]),
                lambda fitted: estimate(fitted[0], chosen), sigma)
            if change > NOISE_SETTLED:
                notes.append(unsettled_note(change))
            theta, converged = fits[-1]
    values = np.asarray(theta)
    predicted, jacobian = (np.asarray(a)[:n] for a in _linearised(model, theta))
    residuals = predicted - data.load
    if noise_estimated and displacement_sd is not None:
        channel_noise, note = beside(theta, residuals)
        notes.extend([note] if note else [])
        sigma = channel_noise.innovation
    elif noise_estimated:
        # The errors take the innovations' deviation from the last fit's own residuals, under
        # the coefficients it was weighted with (as generalized least squares does).
        weighted_by = used[-1] if used else estimates[-1]
        channel_noise = noise_under([residuals[order]], weighted_by.coefficients,
                                    len(parameters)).floored(floor)
        sigma = channel_noise.innovation
    else:
        channel_noise = ChannelNoise(0, (), sigma, sigma)
    coefficients = channel_noise.coefficients
    # Each row's deviation: the innovations', or with errors in both variables the effective one.
    deviations = np.full(n, sigma) if displacement_sd is None else effective_sd(
        sigma, np.asarray(_tangent(model, theta))[:n], displacement_sd)
    rows = deviations[order][len(coefficients):]
    innovations = whitened(residuals[order], coefficients) / rows
    names, units = [p.name for p in parameters], [p.unit for p in parameters]
    si = law_units(data.read_as)  # (the warnings' SI units, where the file says its kind)
    analysis = analyse_parameters(
        np.stack([whitened(column, coefficients) for column in jacobian[order].T], axis=1)
        / rows[:, None], values, names,
        [shown_in(unit, si_names(si))[0] if si else "" for unit in units], transform)
    identifiability, on_bound = analysis.identifiability, analysis.at_bound
    # Beside them, Newey-West errors of the ordinary least-squares estimate (robust to noise
    # correlated in any way over a few samples).
    ols_predicted, ols_jacobian = (np.asarray(a)[:n] for a in _linearised(model,
                                                                           least_squares))
    stderr_robust = None if displacement_sd is not None else np.sqrt(np.diag(hac_covariance(
        ols_jacobian, data.load - ols_predicted, [order],
        ~on_bound & identifiability.identifiable)))
    fitted = build(theta)
    derived = {}
    messages = notes + list(analysis.warnings)
    if stderr_robust is not None:
        messages.extend(drift_notes(values, least_squares, stderr_robust, channel_noise.order))
    if table:
        values_all, rows = (np.asarray(a) for a in _linearised(model, theta, derived=True))
        with_errors = [(float(v), identifiability.standard_error_of(row))
                       for v, row in zip(values_all, rows)]
        k = len(fitted.displacement)
        derived["node_displacement"] = with_errors[:k]
        derived["node_load"] = with_errors[k:2 * k]
        derived["slopes"] = with_errors[2 * k:]
        if monotone:
            check_monotone(np.asarray(fitted.load_values), "fitted law")
    if not converged:
        messages.append(not_converged_note(local.max_steps))
    held = _HeldLawRefit(residuals_at(sigma, coefficients), np.asarray(theta), local)
    return LawFit(
        refit=held, lower_bounds=np.array([p.lower for p in parameters]),
        upper_bounds=np.array([p.upper for p in parameters]),
        kind=kind, law=fitted, damping=float(values[-1]) if damping else 0.0, names=names,
        units=units, start=np.array(starts), values=values, stderr=analysis.stderr,
        at_bound=on_bound, correlation=analysis.correlation, derived=derived,
        noise=float(channel_noise.marginal),
        stderr_robust=stderr_robust, seconds=time.perf_counter() - clock,
        noise_estimated=noise_estimated, cost=0.5 * float(np.sum(innovations ** 2)),
        n_data=int(residuals.size), converged=converged, identifiability=identifiability,
        warnings=messages, predicted=predicted, residuals=residuals, method=method,
        displacement_noise=displacement_sd, data_units=law_units(data.read_as),
        goodness_of_fit=assess_fit(
            [(residuals / (deviations if displacement_sd is not None
                           else channel_noise.marginal))[order][:, None]], ("load",),
            identifiability.rank, noise_given=not noise_estimated,
            sigma={"load": float(channel_noise.marginal)},
            noise_models={"load": typical_noise(deviations)} if displacement_sd is not None
            else {"load": channel_noise} if noise_estimated else None,
            ranges={"load": float(np.ptp(data.load))}, max_misfit={"load": max_misfit},
            magnitudes={"load": float(np.max(np.abs(data.load)))},
            misfit_residuals=[((predicted if displacement_sd else ols_predicted) - data.load)
                              [order][:, None]]),
    )


class _HeldLawRefit:
    """Least cost of a law fit with parameter `i` held at `v` and the others refitted
    (spineid's Levenberg-Marquardt in the unconstrained coordinates, warm-started from the
    solution at the nearest value held before), at the fit's noise: the points of
    `LawFit.profile`. Every refit of the same layout shares one compilation."""

    def __init__(self, residuals: _LawResiduals, theta, solver: LevenbergMarquardt):
        self.residuals, self.theta, self.solver = residuals, theta, solver
        self.solutions = {}

    def __call__(self, i: int, v: float) -> float:
        self.solutions.setdefault((i, float(self.theta[i])), self.theta)  # the optimum itself
        seen = [held for (j, held) in self.solutions if j == i]
        nearest = min(seen, key=lambda held: abs(held - v))
        theta = np.array(self.solutions[(i, nearest)])
        theta[i] = v
        transform = self.residuals.transform
        u = np.asarray(transform.to_unconstrained(jnp.asarray(theta)))
        residuals = dataclasses.replace(self.residuals, held=i, held_value=jnp.asarray(u[i]))
        u_rest = jnp.asarray(np.delete(u, i))
        if u_rest.size:
            u_rest = self.solver.solve(residuals, u_rest).value
        cost = 0.5 * float(jnp.sum(residuals(u_rest) ** 2))
        full = np.insert(np.asarray(u_rest), i, float(u[i]))
        theta = np.array(transform.to_physical(jnp.asarray(full)))
        theta[i] = v
        self.solutions[(i, v)] = theta
        return cost if np.isfinite(cost) else math.inf
