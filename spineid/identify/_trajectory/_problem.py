"""Trajectory-fitting problems: a model, measured trajectories (one per load case), the free
parameters and the measurement noise, validated before anything is solved; and the helpers
that check data and noise for every fit.
"""

import copy
import dataclasses
import math
import pathlib
from collections.abc import Sequence

import diffrax
import numpy as np

from ...elements._parameters import (
    RECORD_GROUPS,
    apply_values,
    declared_parameters,
    select_parameters,
)
from ...io._columns import UNITS, column_unit, noise_in_si
from ...io._osim import rigid_inertia
from ...io._measurements import (
    MARKER_SUFFIXES, Measurement, own_markers_seen, read_measurement, registered_lab_frame,
    states_start,
)
from ...models._mechanics import AbstractLagrangianSystem
from ...simulation._mebdf import MEBDF
from ...simulation._modes import linear_modes
from ...io._model_file import ModelFile, load_model_file
from ...simulation._simulate import DEFAULT_ATOL, DEFAULT_RTOL, solver_for
from .._common._goodness import checked_max_misfit, MAX_MISFIT
from .._common._noise import check_noise, check_noise_max, measured_ranges
from .._common._noise_model import as_noise_model, checked_noise_model
from .._common._transform import Transform


class FitProblem:
    """What to fit: a model, measured trajectories (one per load case) and the free parameters.

    **Arguments:**
    - `model`: a model built in Python (any model kind: `PlanarPair`, `SpatialPair`,
      `HeadNeckChain`, ...; its elements declare their parameters, `declared_parameters`), or a
      `ModelFile` read from TOML; either way a parameter has the name a model file gives it
      (`springs[2].stiffness`, `bushings[0].stiffness[1][4]`). The model's values of the free
      parameters are the starting guess; the others stay fixed.
    - `measurements`: one `Measurement` per load case; a value `NaN` is one not measured (a
      gap in a marker's track, a channel this load case does not record): it adds nothing to
      the fit, its information or its goodness of fit (`n_data` counts the values measured).
    - `free`: groups (`stiffness`, `damping`, `torsion`, ...), parameter names, or the name of
      a vector or matrix parameter without its indices (`bushings[0].stiffness`: every
      entry). With several measurements, a record's own start (the groups `initial`,
      `initial_speeds` of a model read from OpenSim) is one parameter per record,
      `initial.<coordinate>@<k>`, and `<entry>@<k>` frees record `k`'s alone
      (`select_parameters`).
    - `noise`: per-channel measurement standard deviation (SI), e.g. `{"x": 5e-6, "y": 5e-6,
      "theta": 1.7e-4}`; `None` estimates it from the residuals.
    - `models`: optional model per load case (same parameters, e.g. other loads); default the
      file's model for every case.
    - `noise_max`: per-channel largest plausible noise (SI) when the noise is estimated; a fit
      whose estimated noise exceeds it does not explain the data (`GoodnessOfFit`). Default:
      1 mm for a position channel, 1 degree for an angle.
    - `simulation_rtol`, `simulation_atol`: ODE tolerances of the simulations inside the fit
      (default `simulate`'s): looser is faster and harmless while the integration error stays
      far below the measurement noise. `simulation_max_steps`: ODE steps allowed per simulation
      (default 20 000); a trial point that needs more counts as failed and the solver backs off.
      `simulation_solver`: the diffrax solver of those simulations (default each model's
      `preferred_solver()`, else `simulate`'s default), e.g. `spineid.MEBDF(rtol=1e-10,
      atol=1e-12)` for a stiff model (its chord iteration a hundred times tighter than the
      simulations' `rtol`, as `spineid fit --integrator mebdf` makes it); the fit's
      sensitivities are then derivatives through it. It must hold plain numbers (it is a
      static part of the compiled fit).
    - `noise_model`: with the noise estimated, how each channel's errors are correlated from
      sample to sample: `"auto"` (default: white where the residuals are, else the
      autoregressive order they need), `"white"`, `"ar:P"`, or `spineid.AR(...)` /
      `spineid.White()` (`spineid.identify._common._noise_model`); the fit is then weighted
      by it (generalized least squares) and its errors and verdict hold under it
      (`_trajectory/_correlated.py`). Given noise (`noise`) is white.
    - `max_misfit`: the largest smooth misfit (a fraction of each channel's range, or for a
      model's markers of the markers' motion, `misfit_ranges`; default 0.02) a fit with the
      noise estimated may leave and still describe its data (`GoodnessOfFit.level`).

    Misuse (missing channels, too few data, nothing exciting the joint, unknown groups) raises
    `ValueError` before anything is solved.
    """

    def __init__(
        self,
        model,
        measurements: Sequence[Measurement] | Measurement,
        free: Sequence[str],
        noise: dict[str, float] | None = None,
        models: Sequence | None = None,
        noise_max: dict[str, float] | None = None,
        *,
        simulation_rtol: float = DEFAULT_RTOL,
        simulation_atol: float = DEFAULT_ATOL,
        simulation_max_steps: int = 20_000,
        simulation_solver: diffrax.AbstractSolver | None = None,
        noise_model="auto",
        max_misfit: float = MAX_MISFIT,
    ):
        measurements = _records(measurements)
        if isinstance(model, ModelFile):
            self.model_file, self.model = model, model.model
            self.source, declared = model.source, model.parameters
        elif hasattr(model, "observable_names") and hasattr(model, "parameter_fields"):
            self.model_file, self.model = None, model
            self.source = f"{type(model).__name__} (built in Python)"
            declared = declared_parameters(model)
        else:
            raise ValueError(f"FitProblem: model is a {type(model).__name__}; expected a model "
                             "(PlanarPair, SpatialPair, ...) or a ModelFile")
        self.measurements = tuple(measurements)
        self.models = tuple(models) if models is not None else (self.model,) * len(
            self.measurements
        )
        if len(self.models) != len(self.measurements):
            raise ValueError(f"{len(self.models)} models for {len(self.measurements)} measurements")
        # (a record's own start, freed in a fit of several records, is one per record)
        self.parameters = select_parameters(declared, free, self.source,
                                            records=len(self.measurements))
        self.channels = tuple(self.model.observable_names)
        self.start = np.array([p.value(self.models[p.record or 0]) for p in self.parameters])
        self._check_data()
        read = {}  # (noise typed with units, `{"x": "5 um"}`, as `from_files` reads it)
        if isinstance(noise, dict) and any(isinstance(v, str) for v in noise.values()):
            noise, read = noise_in_si(noise, self.measurements, self.channels,
                                      self.model.observable_units, "noise")
        self.noise = None if noise is None else check_noise(self.channels, noise)
        self.noise_read: dict = read  # (how typed noise was read)
        self.started_from_data: list = []  # (`from_files`: files whose first row is the start)
        self.start_notes: list = []  # (`from_files`: records that start far from the model)
        self.noise_max = check_noise_max(self.channels, noise_max)
        self._check_unmeasured()
        self.noise_model = as_noise_model(noise_model)
        self.max_misfit = checked_max_misfit(max_misfit)
        self._check_noise_model()
        for name, value in (("simulation_rtol", simulation_rtol),
                            ("simulation_atol", simulation_atol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value!r}: expected a positive number")
        if isinstance(simulation_max_steps, bool) or not isinstance(simulation_max_steps, int) \
                or simulation_max_steps < 1:
            raise ValueError(f"simulation_max_steps={simulation_max_steps!r}: expected a "
                             "positive integer")
        self.simulation_rtol = float(simulation_rtol)
        self.simulation_atol = float(simulation_atol)
        self.simulation_max_steps = simulation_max_steps
        if simulation_solver is not None and not isinstance(simulation_solver,
                                                            diffrax.AbstractSolver):
            raise ValueError(f"simulation_solver={simulation_solver!r}: expected a diffrax "
                             "solver (spineid.MEBDF(), diffrax.Kvaerno4(), ...) or None")
        try:
            hash(simulation_solver)
        except TypeError:
            raise ValueError(f"simulation_solver={simulation_solver!r}: its options must be "
                             "plain numbers, not arrays (it is compiled into the fit)") from None
        self.simulation_solver = simulation_solver
        for case_model in self.models:
            if not case_model.is_excited():
                raise ValueError(
                    f"{self.source}: nothing excites the joint: all loads are zero, there "
                    "is no gravity and the motion starts at rest in the reference pose, so the "
                    "body never moves and the data cannot determine any parameter. Add loads or "
                    "an initial_pose (an OpenSim model: gravity, [initial] or [initial_speeds])."
                )

    @classmethod
    def from_files(cls, model_path, data_paths, free, noise=None, noise_max=None, *,
                   columns=None, units=None, markers=None, **options) -> "FitProblem":
        """Problem from a model file and one or more trajectory files (one model): CSV tables
        with spineid's column names in SI (`Measurement.from_csv`), or, with `columns`
        (channel or `t` -> the file's column) or `units` (channel or column -> unit name), or
        for OpenSim storage files (`.sto`, `.mot`), files with their own column names and
        units (`Measurement.from_file`); marker files (`.trc`) with `markers` (`{"upper":
        names, "lower": names}`, `spineid.io.markers_measurement`: body coordinates from the
        first complete frame, at the model's initial pose); `options`: the `simulation_*`
        options, `noise_model` and `max_misfit`. `noise` and `noise_max` may be typed with
        their units (`{"x": "10um", "theta": "0.02deg"}`), and a bare number as text is in the
        unit of the channel's column (`spineid.io.quantity_in_si`); numbers are SI. How each
        was read is kept in `noise_read` (`{channel: "10 um"}`). A states file of a model read
        from OpenSim that holds every free coordinate's value and speed starts its record's
        simulation from its first row (`spineid.io.states_start`; listed in
        `started_from_data`)."""
        model_file = load_model_file(model_path)
        if isinstance(data_paths, (str, pathlib.Path)):
            data_paths = [data_paths]
        model = model_file.model
        # (files read once: marker files for which markers they hold, then their channels;
        # storage files for their channels, then their first row as the start)
        parsed = {}
        if not markers and getattr(model, "markers", ()) and any(
                pathlib.Path(p).suffix.lower() in MARKER_SUFFIXES for p in data_paths):
            # A model with markers of its own (an OpenSim MarkerSet) observes them in marker
            # files: channels <marker>_x, _y, _z in ground.
            model = model.observing_markers(own_markers_seen(model, data_paths, parsed))
            model_file = dataclasses.replace(model_file, model=model)
        # (the initial pose only places a marker file's clusters)
        initial = np.asarray(model.observe(model.initial_state()[0])) if markers else None
        measurements = [read_measurement(p, model.observable_names, model.observable_units,
                                         columns=columns, column_units=units, markers=markers,
                                         initial=initial,
                                         own_markers=getattr(model, "observed", "") == "markers",
                                         parsed=parsed)
                        for p in data_paths]
        # A states file that holds every free coordinate's value and speed gives the start
        # of its own record (the model's defaults otherwise).
        # (not where the columns or units are the user's, or the models given)
        started = [None if columns or units or "models" in options else
                   states_start(p, model, parsed) for p in data_paths]
        # A marker fit that frees the lab frame, which the model file leaves at ground, starts
        # it registered to the first file's markers.
        notes = []
        if _registering(model_file, model, free, "models" in options, len(data_paths)):
            registered = registered_lab_frame(model, measurements[0])
            if registered is not None:
                model = registered
                frame = {"translation": np.asarray(model.lab_translation).tolist(),
                         "rotation": np.asarray(model.lab_rotation).tolist()}
                model_file = dataclasses.replace(model_file, model=model, document=dict(
                    model_file.document, lab_frame=frame))  # (what fitted.toml starts from)
                unit = _unit_of(measurements[0], measurements[0].channels[0]) or "m"
                shift = np.asarray(frame["translation"]) / UNITS[unit][1]
                notes.append(
                    f"{data_paths[0]}: the lab frame starts registered to the model's markers "
                    f"(translation {[float(f'{x:.4g}') for x in shift]} {unit}, "
                    f"rotation {np.round(np.degrees(frame['rotation']), 2).tolist()} deg)")
        if any(start is not None for start in started):
            options["models"] = [model if start is None else start for start in started]
        names, units_si = model.observable_names, model.observable_units
        noise, read = noise_in_si(noise, measurements, names, units_si)
        noise_max, _ = noise_in_si(noise_max, measurements, names, units_si, "--noise-max")
        problem = cls(model_file, measurements, free, noise, noise_max=noise_max, **options)
        problem.noise_read = read
        problem.started_from_data = [str(p) for p, start in zip(data_paths, started)
                                     if start is not None]
        problem.start_notes = notes + _start_notes(problem, data_paths, started)
        return problem

    @property
    def names(self) -> list[str]:
        """Names of the free parameters, in solver order."""
        return [p.name for p in self.parameters]

    def fitted_model(self, values, case: int = 0):
        """The model of load case `case` with the free parameters set to `values` (SI, `(p,)`,
        in the order of `names`; e.g. `result.values`)."""
        values = np.asarray(values, dtype=float)
        if values.shape != (len(self.parameters),):
            raise ValueError(f"fitted_model: {values.shape[0] if values.ndim else 0} values for "
                             f"{len(self.parameters)} free parameters {self.names}")
        return apply_values(self.models[case], self.parameters, values, record=case)

    def with_measurements(self, measurements) -> "FitProblem":
        """The same problem (models, free parameters, noise, options) with other data: one
        `Measurement` per load case, with this problem's channels (e.g. a noise draw of a
        Monte-Carlo study, or another specimen's test of the same protocol)."""
        measurements = _records(measurements)
        if len(measurements) != len(self.measurements):
            raise ValueError(f"with_measurements: {len(measurements)} measurements for "
                             f"{len(self.measurements)} load cases")
        other = copy.copy(self)
        other.measurements = measurements
        other._check_data()
        other._check_unmeasured()
        other._check_noise_model()
        return other

    def transform(self) -> Transform:
        """The map between the free parameters and the solver's coordinates, 0 at the start."""
        return Transform.around(self.parameters, self.start, self.source)

    def channel_ranges(self) -> np.ndarray:
        """Peak-to-peak range of each measured channel over all load cases (SI), `(c,)`."""
        return channel_ranges(self.measurements)

    def misfit_ranges(self) -> np.ndarray:
        """The range `(c,)` (SI) each channel's smooth misfit is judged against (the verdict's
        `max_misfit` is a fraction of it): the channel's own range (`channel_ranges`), but a
        model's markers (`observed == "markers"`) each the largest range of them all, the
        markers' motion: one component's own range depends on how the lab's axes lie (a
        marker moving along the lab's x has almost none in y, where filtered noise alone would
        then exceed the tolerance)."""
        ranges = self.channel_ranges()
        if getattr(self.model, "observed", "") == "markers" and ranges.size:
            return np.full_like(ranges, ranges.max())
        return ranges

    def one_branch(self, values) -> tuple[np.ndarray, np.ndarray]:
        """The affine map `v -> signs * v + shifts` (each `(p,)`) that takes the free
        parameters' `values` (SI, `(p,)`) to the same model with a freed lab frame's 1-2-3
        Euler angles (`lab_frame.rotation[i]`, rad; `euler123_rotation`) in one branch: where
        all three are free, the angles `euler123_angles` gives of their rotation (nu_2 in
        [-pi/2, pi/2], nu_1 and nu_3 in (-pi, pi]; the other branch `(nu_1 + pi, pi - nu_2,
        nu_3 + pi)` flips nu_2's sign); else each free angle turned by whole turns into
        (-pi, pi]. The rotation, and so every prediction, is unchanged; a solver leaves angles
        in any branch (a multi-start returned (10.99, 3.14, 3.44) rad for the lab's
        (pi/2, 0, 0.3)). Identity (`signs` 1, `shifts` 0) where no angle is free, for angles
        in that branch already, and for one not finite. (The branch `euler123_angles` gives of
        the rotation, but with the angles' own arithmetic, so that the map is exact and the
        Jacobian's columns only change sign; only for unbounded angles, as `lab_frame_fields`
        declares them, whose solver coordinate is then shifted alike.) An angle near +-pi may
        come back as either: compare angles by their difference modulo 2 pi."""
        values = np.asarray(values, dtype=float)
        signs, shifts = np.ones_like(values), np.zeros_like(values)
        where = {p.row: i for i, p in enumerate(self.parameters) if p.field == "lab_rotation"
                 and p.lower == -math.inf and p.upper == math.inf}
        if not where or not np.all(np.isfinite(values[list(where.values())])):
            return signs, shifts
        angles = np.array(self.models[0].lab_rotation, dtype=float)
        for row, i in where.items():
            angles[row] = values[i]
        if len(where) == 3 and np.cos(angles[1]) < 0:  # (nu_2 beyond +-pi/2: the other
            signs[where[1]] = -1.0  # branch; R_x(a + pi) R_y(pi - b) R_z(c + pi) = R_x(a)
            shifts[[where[0], where[1], where[2]]] = np.pi  # R_y(b) R_z(c))
        for i in where.values():  # whole turns into (-pi, pi], none for an angle within it
            turned = signs[i] * values[i] + shifts[i]
            shifts[i] -= 2 * np.pi * np.ceil((turned - np.pi) / (2 * np.pi))
        return signs, shifts

    def fitted_notes(self, values) -> list[str]:
        """What is wrong with the model at the free parameters' `values` (SI, `(p,)`) though
        a fit may end there: a body's inertia (`<body>.inertia[i]`, kg m^2, freed) that no rigid
        body has (`rigid_inertia`: a principal moment below 0 or above the sum of the other
        two), which bounds on the entries alone cannot keep out; a model file with it is
        refused when read. One sentence per body whose inertia is free; none where nothing is
        wrong, nor for values not finite (a fit that failed, which says so)."""
        bodies = sorted({p.row[0] for p in self.parameters if p.field == "inertia_entries"})
        if not bodies or not np.all(np.isfinite(values)):
            return []
        fitted = np.asarray(self.fitted_model(values).inertia_entries)
        return [f"The fitted inertia of {self.model.body_names[k]} ("
                f"{', '.join(f'{x:.4g}' for x in fitted[k])} kg m^2, Ixx Iyy Izz Ixy Ixz Iyz) "
                "is one no rigid body has (a principal moment below 0 or above the sum of the "
                "other two): the data do not hold it to a body's; fit its moments alone or give "
                "it from the body's shape (a model file with it is refused when read)."
                for k in bodies if not rigid_inertia(fitted[k])]

    @property
    def n_data(self) -> int:
        """Number of measured values (samples x channels x load cases, less those `NaN`: not
        measured)."""
        return measured_count(self.measurements)

    @property
    def complete(self) -> bool:
        """Whether every channel of every sample was measured (no `NaN` in the data)."""
        return not any(np.isnan(m.values).any() for m in self.measurements)

    def _check_unmeasured(self) -> None:
        # A channel no load case measures is harmless with the noise given (it adds nothing),
        # but leaves nothing to estimate its noise from.
        if self.noise is None:
            unmeasured = [c for i, c in enumerate(self.channels)
                          if all(np.isnan(m.values[:, i]).all() for m in self.measurements)]
            if unmeasured:
                raise ValueError(f"{self.source}: no load case measures {unmeasured}, so their "
                                 "noise cannot be estimated from the residuals: give the "
                                 "noise per channel")

    def _check_noise_model(self) -> None:
        # A given autoregressive order or coefficients must fit the records and name the
        # problem's channels (`checked_noise_model`).
        self.noise_model = checked_noise_model(self.noise_model, self.noise is not None,
                                               self.measurements, channels=self.channels,
                                               runs=True)

    def _check_data(self) -> None:
        check_measurements(self.measurements, self.channels, len(self.parameters),
                           missing=True, units=self.models[0].observable_units)


LARGEST_VALUE = 1e6
"""The largest magnitude of a measured length, angle, force or moment in SI (m, rad, N, N m):
beyond it no spine test lies, and a fit's residuals would overflow (data of 1e300 ran a
multi-start before failing)."""


def check_measurements(measurements: Sequence[Measurement], channels: Sequence[str],
                       n_free: int, missing: bool = False, units: Sequence[str] = ()) -> None:
    """Validate trajectories for a fit of `n_free` numbers: the model's `channels`, no sample
    before the motion starts (t = 0), at least 3 samples each and more measured values than
    `n_free`; no infinite value, and `NaN` (a value not measured) only where `missing`; in a
    channel whose SI unit (`units`, the model's `observable_units`) is a length, an angle, a
    force or a moment, no magnitude above `LARGEST_VALUE`."""
    channels = tuple(channels)
    for measurement in measurements:
        if tuple(measurement.channels) != channels:
            raise ValueError(
                f"{measurement.source}: channels {list(measurement.channels)}; this model "
                f"is observed through {list(channels)}"
            )
        values = np.asarray(measurement.values, dtype=float)
        if np.isinf(values).any():
            row, column = np.argwhere(np.isinf(values))[0]
            raise ValueError(f"{measurement.source}: {channels[column]} is infinite at sample "
                             f"{row + 1} (t = {measurement.ts[row]:g} s)")
        bounded = np.array([unit in ("m", "rad", "N", "N m") for unit in units]
                           + [False] * (len(channels) - len(units)))
        huge = np.isfinite(values) & (np.abs(values) > LARGEST_VALUE) & bounded
        if huge.any():
            row, column = np.argwhere(huge)[0]
            raise ValueError(f"{measurement.source}: {channels[column]} = {values[row, column]:g} "
                             f"at sample {row + 1} (t = {measurement.ts[row]:g} s): expected "
                             f"magnitudes of at most {LARGEST_VALUE:g} in SI units (m, rad, N, "
                             "N m); a column in other units needs its unit (--units)")
        if not missing and np.isnan(values).any():
            row, column = np.argwhere(np.isnan(values))[0]
            raise ValueError(f"{measurement.source}: {channels[column]} is missing (NaN) at "
                             f"sample {row + 1} (t = {measurement.ts[row]:g} s); this "
                             "analysis needs every value: fill or cut the gap")
        if measurement.ts[0] < 0:
            raise ValueError(
                f"{measurement.source}: first time {measurement.ts[0]:g} s is before the "
                f"motion starts (t = 0)"
            )
    n_data = measured_count(measurements)
    if n_data <= n_free or min(len(m.ts) for m in measurements) < 3:
        raise ValueError(
            f"{measurements[0].source}: {n_data} data values for {n_free} free "
            f"parameters: the data are shorter than the model needs (at least 3 samples "
            f"per trajectory and more values than free parameters)"
        )


def channel_ranges(measurements: Sequence[Measurement]) -> np.ndarray:
    """Peak-to-peak range of each channel's measured values over all `measurements` (SI),
    `(c,)`; 0 for a channel with none."""
    return measured_ranges(np.concatenate([m.values for m in measurements]))


def measured_count(measurements: Sequence[Measurement]) -> int:
    """The values measured (not `NaN`) in all `measurements`."""
    return sum(int(np.count_nonzero(~np.isnan(m.values))) for m in measurements)


def ringing_phase(problem: FitProblem) -> float:
    """The most phase (rad) a mode of the problem's models (at their start values, linearised
    about their initial state) runs through while it lasts within its record, simulated from
    t = 0 (`LinearModes.ringing_phase`; the largest over the load cases): `Auto`'s measure of
    a lightly damped problem."""
    phases = [linear_modes(model).ringing_phase(float(m.ts[-1]))  # (simulated from t = 0)
              for model, m in zip(problem.models, problem.measurements)
              if isinstance(model, AbstractLagrangianSystem)]
    return max(phases, default=0.0)


def integrator_names(models, solver: diffrax.AbstractSolver | None = None) -> list[str]:
    """The class names of the diffrax solvers that simulate `models` in a fit: `solver` (the
    fit's `simulation_solver`) where given, else each model's own (`solver_for`: its
    `preferred_solver()`, else spineid's `default_solver()`): `["Tsit5"]`, `["Kvaerno4"]` for
    the head-neck chain; each name once."""
    if solver is not None:
        return [type(solver).__name__]
    return list(dict.fromkeys(type(solver_for(model)).__name__ for model in models))


def integrated_implicitly(models, solver: diffrax.AbstractSolver | None = None) -> bool:
    """Whether any of `models` is integrated by an implicit solver (`solver`, the fit's
    `simulation_solver`, where given: an implicit Runge-Kutta method or `MEBDF`; else each
    model's `preferred_solver()`, e.g. `Kvaerno4` for the stiff head-neck chain). There `Auto`
    does not turn to multiple shooting but to more starts: on the head-neck chain (8 joint
    angles, the head's position observed; experiments/ringing_rule.py) a multiple-shooting
    fit, whose 16 state unknowns per segment are each a forward-mode tangent through the
    implicit integrator, stopped with an `EquinoxRuntimeError` from optimistix's
    implicit-function derivative (a linear solve checked with `throw=True` meeting a
    non-finite trial stage), and in a second run went on for over 15 minutes without
    finishing. (`_Run` catches such a check now: multiple shooting
    falls back to single shooting from the start, a local fit gives its start up; both are
    said in the result's warnings.)"""
    implicit = (diffrax.AbstractImplicitSolver, MEBDF)
    if solver is not None:
        return isinstance(solver, implicit)
    return any(isinstance(model.preferred_solver(), implicit)
               for model in models if isinstance(model, AbstractLagrangianSystem))


def _records(measurements) -> tuple[Measurement, ...]:
    """`measurements` (one `Measurement`, or any iterable of them, read once) as a tuple;
    a path, an array or anything else refused in one sentence."""
    if isinstance(measurements, Measurement):
        return (measurements,)
    try:
        records = (None,) if isinstance(measurements, (str, pathlib.Path)) else tuple(
            measurements)
    except TypeError:
        records = (None,)
    if not all(isinstance(m, Measurement) for m in records):
        raise ValueError("FitProblem: measurements must be spineid.Measurement(ts, values, "
                         "channels) or a list of them (FitProblem.from_files reads files)")
    return records


def _start_notes(problem, paths, started, far: float = 0.1) -> list[str]:
    """One line per record of a model read from OpenSim that starts elsewhere than the model:
    its first row is more than `far` of a channel's range over the record from the model's
    start, the record does not give its start (`states_start`), and the fit does not free
    it (`RECORD_GROUPS`): what to free instead. Empty for any other model."""
    model = problem.model
    freed = {p.record for p in problem.parameters if p.group in RECORD_GROUPS}
    if (not hasattr(model, "starting_at") or getattr(model, "observed", "") != "coordinates"
            or None in freed):
        return []
    notes = []
    for k, (path, start, measurement, case) in enumerate(zip(
            paths, started, problem.measurements, problem.models)):
        if start is not None or k in freed:
            continue
        values = np.asarray(measurement.values, dtype=float)
        ours = np.asarray(case.observe(case.initial_state()[0]), dtype=float)
        span = np.nanmax(values, axis=0) - np.nanmin(values, axis=0)
        gaps = values[0] - ours
        off = []
        for name, si_unit, gap, width in zip(measurement.channels, model.observable_units,
                                             gaps, span):
            if np.isfinite(gap) and abs(gap) > far * width:  # (said in the file's unit)
                unit = _unit_of(measurement, name) or si_unit
                off.append(f"{name} by {gap / UNITS.get(unit, ('', 1.0))[1]:+.2g} {unit}")
        if off:
            which = f"@{k + 1}" if freed else ""  # (another record's start is free already)
            notes.append(f"{path}: its first row is away from the model's start ({', '.join(off)}"
                         "); a record that starts elsewhere is fitted with its start free: "
                         f"--free initial{which} --free initial_speeds{which}")
    return notes


def _unit_of(measurement, channel: str) -> str | None:
    # The unit a record's column `channel` was read in (mm, deg, ...), `None` for SI.
    return column_unit([measurement], channel, "units")


def _registering(model_file, model, free, given, records: int) -> bool:
    # Whether a fit's lab frame starts registered to its marker data: the model observes
    # markers, the fit frees `lab_frame`, the models are not the caller's (`given`), and the
    # model file leaves the frame at ground (all zeros).
    if getattr(model, "observed", "") != "markers" or given:
        return False
    chosen = select_parameters(model_file.parameters, free, model_file.source, records)
    return any(p.group == "lab_frame" for p in chosen) and not (
        np.any(np.asarray(model.lab_translation)) or np.any(np.asarray(model.lab_rotation)))
