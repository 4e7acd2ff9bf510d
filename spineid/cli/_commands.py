"""The verbs of the `spineid` command: each reads its inputs, calls the library and writes its
outputs (docs/cli.md). Nothing here computes what the library does not offer."""

import pathlib
import time

import jax
import numpy as np

from ..identify import (
    Auto,
    FitProblem,
    MultipleShooting,
    MultiStart,
    RecoveryProblem,
    fit,
    fit_load_law,
    LawDynamics,
    LawForm,
    fit_segment,
    fit_stiffness_matrix,
    recover,
    recover_grid,
    SlidingFrankWolfe,
)
from ..identify._kinds._law_units import law_units, shown_in
from ..identify._kinds._segment_fit import checked_segment_fit
from ..identify._solvers import SOLVER_NAMES
from ..io import (
    Measurement,
    QuasiStaticTest,
    dataset_path,
    dumps_toml,
    liu_l5_s1_phases,
    liu_vertebra_nodes,
    load_model_file,
    read_load_displacement,
    read_quasi_static,
    write_model_file,
    write_quasi_static,
    write_text_atomically,
    write_trajectory,
)
from ..io._columns import describe_columns, noise_in_si, parse_assignments, UNITS
from ..io._measurements import (DEFLECTION_COLUMNS, describe_markers, LOAD_COLUMNS,
                                QUASI_STATIC_UNITS)
from ..io._toml import read_toml
from ..simulation import simulate_in_windows
from ..simulation._simulate import DEFAULT_RTOL
from ..spines import l5_s1_law
from ..studies import peak_force_sensitivity, segment_study, whiplash_study
from ._arguments import (column_quantity, column_values, inertia_in_si, integrator,
                         misfit_fraction, parse_markers, parse_noise)
from ._outputs import (
    caution,
    figures,
    output_file,
    refuse_non_finite,
    refuse_unphysical,
    write_fit_outputs,
    write_motion,
    write_json,
    write_profile_outputs,
    write_recovery_outputs,
)

DEMO_MODELS = ("liu_8_springs.toml", "liu_16_springs.toml")
DEMO_FIT = ("liu_16_springs.toml", "liu_16_springs_measured.csv")
# Optical tracking noise of the bundled measurement: 5 um on x and y, 0.01 deg on theta.
DEMO_NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7453292519943295e-4}
NEUTRAL_STIFFNESS = 1500.0


def _simulate_file(model_path: pathlib.Path, windows: int = 1, progress=None,
                   time_warm: bool = True, solver=None):
    # The model file's motion, in `windows` windows (progress and interruption between them),
    # by `solver` (the model's own where `None`): (model, ts, observed poses, simulation, wall
    # seconds, the integration's seconds: warm, the first window timed again, with
    # `time_warm`).
    model_file = load_model_file(model_path)
    _print_quantities(model_file)
    model = model_file.model
    ts = model_file.simulation_times()
    start = time.perf_counter()
    solution, warm = simulate_in_windows(model, ts, windows=windows, time_warm=time_warm,
                                         on_window=progress and progress(float(ts[-1])),
                                         solver=solver)
    failure = solution.failure()
    if failure is not None:  # one sentence naming the limit hit, when, and what to change
        raise ValueError(f"{model_path}: {failure}")
    poses = np.asarray(jax.vmap(model.observe)(solution.q))
    return model, np.asarray(ts), poses, solution, time.perf_counter() - start, warm


def _loads_files(model_path: pathlib.Path) -> list[pathlib.Path]:
    # The files a model file reads (`loads_file`, an OpenSim `file`): inputs of the run too.
    try:
        document = read_toml(model_path)
    except ValueError:
        return []  # (the model's own error comes when it is read)
    loads = document.get("loads", [])  # (and an OpenSim model's `file`)
    named = [load.get("loads_file") for load in (loads if isinstance(loads, list) else [])
             if isinstance(load, dict)] + [document.get("file")]
    return [model_path.parent / name for name in named if isinstance(name, str)]


def command_simulate(arguments) -> int:
    """`spineid simulate MODEL [--out CSV|STO|TRC]`: simulate a model file, write its motion."""
    path = pathlib.Path(arguments.model)
    out = output_file(arguments.out or f"{path.stem}_trajectory.csv",  # before the work
                      arguments.overwrite, inputs=(path, *_loads_files(path)))
    if out.suffix.lower() == ".trc" and not getattr(load_model_file(path).model, "markers", ()):
        raise ValueError(f"{out}: a marker file (.trc) needs a model with markers (an OpenSim "
                         "model's MarkerSet); write .sto, .mot or .csv")
    model, ts, poses, solution, seconds, _ = _simulate_file(
        path, windows=10, progress=_integration_progress, time_warm=False,
        solver=_integrator(arguments))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_motion(out, ts, poses, model, solution)
    print(
        f"simulated {path} over {ts[-1]:g} s ({len(ts)} samples, {int(solution.n_steps)} "
        f"solver steps{_integrator_text(arguments)}, {seconds:.2f} s) -> {out}"
    )
    return 0


def _print_quantities(model_file) -> None:
    # The line on values a model file wrote with their units, where it wrote any.
    line = model_file and model_file.describe_quantities()
    if line:
        print(line, flush=True)


def _integrator(arguments):
    # The solver `--integrator` names, at `simulate`'s default tolerance; `None` without it.
    name = getattr(arguments, "integrator", None)
    return None if name is None else integrator(name, DEFAULT_RTOL)


def _integrator_text(arguments) -> str:
    # ", by NAME" where `--integrator` names the solver.
    name = getattr(arguments, "integrator", None)
    return "" if name is None else f", by {name}"


def command_demo(arguments) -> int:
    """`spineid demo [--out DIR]`: the main job on bundled data."""
    out = arguments.output
    print(f"spineid demo: bundled Liu-style spring pairs -> {out}/")
    header = (f"{'model':22s} {'springs':>7s} {'sum K [N/m]':>12s} {'steps':>6s} "
              f"{'first run [s]':>13s} {'warm [ms]':>9s} {'max |dx| [mm]':>13s} "
              f"{'max |dtheta| [deg]':>18s}")
    print(header)
    print("-" * len(header))
    trajectories = {}
    for name in DEMO_MODELS:
        path = dataset_path(name)
        model, ts, poses, solution, first, warm = _simulate_file(path)
        stem = pathlib.Path(name).stem
        write_trajectory(out / f"{stem}.csv", ts, poses, model.observable_names)
        figures.plot_planar_pair(model, out / f"{stem}_model.png", title=stem)
        trajectories[stem] = poses
        springs = model.elements[0]
        displacement = poses - poses[0]
        print(
            f"{stem:22s} {len(springs.stiffness):7d} {float(np.sum(springs.stiffness)):12.0f} "
            f"{int(solution.n_steps):6d} {first:13.2f} {warm * 1e3:9.2f} "
            f"{np.max(np.abs(displacement[:, 0])) * 1e3:13.4f} "
            f"{np.degrees(np.max(np.abs(displacement[:, 2]))):18.3f}"
        )
    figures.plot_planar_trajectories(ts, trajectories, out / "trajectories.png",
                             title="Liu-style pairs under the same sinusoidal loads")
    print(f"wrote {len(DEMO_MODELS)} trajectories (CSV), model pictures and trajectories.png")
    _demo_fit(out.subfolder("fit_liu_16_springs"))
    out.finish()
    return 0


def _demo_fit(out) -> None:
    model_name, data_name = DEMO_FIT
    truth = load_model_file(dataset_path(model_name))
    neutral = {p.name: NEUTRAL_STIFFNESS for p in truth.parameters if p.group == "stiffness"}
    start = truth.with_values(neutral, source=f"{model_name} (neutral start)")
    measurement = Measurement.from_csv(dataset_path(data_name), start.model.observable_names)
    problem = FitProblem(start, measurement, ["stiffness"], DEMO_NOISE)
    print(f"\nfitting the 16 spring stiffnesses to {data_name} from a neutral start "
          f"(all {NEUTRAL_STIFFNESS:g} N/m), tracking noise 5 um / 0.01 deg ...", flush=True)
    result = fit(problem)
    print(result.summary())
    truth_values = [p.get(truth.model) for p in problem.parameters]
    total = float(sum(truth_values))
    print(f"true total stiffness of the bundled model: {total:.6g} N/m")
    paths = write_fit_outputs(result, problem, out)
    print("wrote " + ", ".join(str(p) for p in paths))


def _fit_solver(arguments):
    # The solver object the --solver, --starts, --seed and --max-steps options stand for.
    local = SOLVER_NAMES["lm" if arguments.solver in ("auto", "shooting") else arguments.solver]
    options = {} if arguments.max_steps is None else {"max_steps": arguments.max_steps}
    inner = local(**options)
    if arguments.solver == "shooting":
        if arguments.starts is not None and arguments.starts != 1:
            raise ValueError(f"--starts {arguments.starts} with --solver shooting: multiple "
                             "shooting runs from the file's values only (use --solver auto, "
                             "which turns to it and then to more starts)")
        return MultipleShooting(inner=inner)
    if arguments.solver == "auto":
        starts = {} if arguments.starts is None else {"starts": arguments.starts}
        return Auto(inner=inner, seed=arguments.seed, **starts)
    if arguments.starts is not None and arguments.starts > 1:
        return MultiStart(inner=inner, n=arguments.starts, seed=arguments.seed)
    if arguments.starts is not None and arguments.starts < 1:
        raise ValueError(f"--starts {arguments.starts}: expected a positive integer")
    return inner


def command_fit(arguments) -> int:
    """`spineid fit MODEL DATA... --free GROUP --out DIR`: fit through the ODE solve."""
    solver = _fit_solver(arguments)
    problem = FitProblem.from_files(
        arguments.model, arguments.data, arguments.free,
        parse_noise(arguments.noise, typed=True),
        noise_max=parse_noise(arguments.noise_max, "--noise-max", typed=True),
        columns=parse_assignments(arguments.columns, "--columns"),
        units=parse_assignments(arguments.units, "--units"),
        markers=parse_markers(arguments.markers), noise_model=arguments.noise_model,
        max_misfit=misfit_fraction(arguments.max_misfit),
        simulation_solver=_integrator(arguments))
    _check_profiles(arguments.profile, problem.names)
    _print_quantities(problem.model_file)
    _print_columns(problem.measurements, problem.noise_read)
    for path in problem.started_from_data:
        print(f"{path}: the simulation starts from its first row (coordinates and speeds)")
    for note in problem.start_notes:
        print(note)
    print(
        f"fitting {len(problem.names)} parameter(s) of {arguments.model} to "
        f"{', '.join(arguments.data)} ({problem.n_data} data values) with "
        f"{arguments.solver}{_integrator_text(arguments)}",
        flush=True,
    )
    result = fit(problem, solver, progress="steps" if arguments.steps else True)
    out = arguments.output
    plots = not arguments.no_plots
    paths = write_fit_outputs(result, problem, out, plots)
    print(result.summary(si=arguments.si))
    # Profiles after the fit's files are written: a long fit is never lost to a profile.
    profiles = _profiles(result, arguments.profile, result.shown_units(si=arguments.si))
    if profiles:
        paths += write_profile_outputs(result.report(), profiles, out, plots)[1:]
    out.finish()
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if result.converged and result.accepted is not False else 1


def _print_columns(measurements, noise_read=None):
    # Which column and unit each channel (or load, displacement) was read from, where the file
    # had its own; for a marker file, which markers made each body and how many frames were
    # dropped. (Trajectories, quasi-static tests and load-displacement data alike.)
    for measurement in measurements:
        read_as = measurement.read_as
        if read_as is None:
            continue
        if "markers" in read_as:
            print(f"read {measurement.source}: {describe_markers(read_as)}", flush=True)
        else:
            print("read " + describe_columns(read_as, measurement.source), flush=True)
    if noise_read:  # (the noise as typed, and the unit each number was read in)
        print("noise given: " + ", ".join(f"{channel} {how}"
                                          for channel, how in noise_read.items()), flush=True)


def command_recover(arguments) -> int:
    """`spineid recover MODEL DATA --out DIR`: a stiffness measure on the `[measure]` curve."""
    problem = RecoveryProblem.from_files(
        arguments.model, arguments.data, parse_noise(arguments.noise, typed=True),
        arguments.max_stiffness,
        columns=parse_assignments(arguments.columns, "--columns"),
        units=parse_assignments(arguments.units, "--units"), noise_model=arguments.noise_model,
        max_misfit=misfit_fraction(arguments.max_misfit))
    _print_columns(problem.measurements, problem.noise_read)
    method = "off the grid" if arguments.grid is None else f"on a grid of {arguments.grid}"
    print(f"recovering the stiffness measure of {arguments.model} on its [measure] curve "
          f"({problem.curve.length * 1e3:.4g} mm) {method} from {arguments.data} "
          f"({problem.n_data} data values; total stiffness at most "
          f"{problem.max_stiffness:.4g} N/m)", flush=True)
    if arguments.grid is None:
        result = recover(problem, SlidingFrankWolfe(max_atoms=arguments.max_atoms),
                         progress=True)
    else:
        result = recover_grid(problem, arguments.grid, progress=True)
    paths = write_recovery_outputs(result, problem, arguments.output, not arguments.no_plots)
    arguments.output.finish()
    print(result.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if result.converged and result.accepted is not False else 1


def command_stiffness(arguments) -> int:
    """`spineid stiffness TEST --out DIR`: a 6x6 stiffness matrix from a quasi-static test."""
    test = read_quasi_static(arguments.data,
                             columns=parse_assignments(arguments.columns, "--columns"),
                             units=parse_assignments(arguments.units, "--units"))
    _print_columns([test])
    noise, read = parse_noise(arguments.noise, typed=True), {}
    if noise is not None:
        unknown = sorted(set(noise) - set(LOAD_COLUMNS))
        missing = [c for c in LOAD_COLUMNS if c not in noise]
        if unknown or missing:
            raise ValueError(f"--noise: give all of {list(LOAD_COLUMNS)}"
                             + (f"; unknown {unknown}" if unknown else "")
                             + (f"; missing {missing}" if missing else ""))
        noise, read = noise_in_si(noise, [test], LOAD_COLUMNS,
                                  [QUASI_STATIC_UNITS[c] for c in LOAD_COLUMNS])
        _print_columns([], read)
        noise = np.array([noise[c] for c in LOAD_COLUMNS])
    result = fit_stiffness_matrix(test, arguments.structure, noise,
                                  exact=not arguments.linearised,
                                  noise_model=arguments.noise_model,
                                  max_misfit=misfit_fraction(arguments.max_misfit))
    out = arguments.output
    refuse_non_finite(result.report(), "stiffness fit")
    report = write_json(out / "report.json", dict(
        result.report(), data=[{"source": test.source, "read_as": test.read_as}],
        noise_given_as=read))
    fragment = {"bushings": [{"kind": "spine", "stiffness": result.matrix.tolist()}]}
    write_text_atomically(
        out / "stiffness.toml", f"# {caution(result)}\n" * bool(caution(result))
        + "# Fitted by `spineid stiffness` from " + pathlib.Path(arguments.data).name + ": paste "
        "into a spatial_pair model and add frame1, frame2 (and damping).\n"
        + (f"# Not determined by the test: {', '.join(result.undetermined())} (their values "
           "are not measured: 0, or a minimum-norm share); give them values before use.\n"
           if result.undetermined() else "")
        + dumps_toml(fragment))
    plots = [] if arguments.no_plots else [figures.plot_stiffness_fit(result, test, out / "loads.png")]
    out.finish()
    print(result.summary(si=arguments.si))
    print(", ".join(["wrote " + str(report), str(out / "stiffness.toml"), *map(str, plots)]))
    return 0 if result.accepted is not False else 1


def _check_profiles(names: list[str], free: list[str]) -> None:
    # Refuse, before any fitting, a profile of a parameter the fit does not free.
    for name in names:
        if name not in free:
            raise ValueError(f"--profile {name}: not a free parameter of this fit; the free "
                             f"parameters are {free}")


def _profiles(result, names: list[str], shown: list[tuple[str, float]] | None = None) -> list:
    # The requested profiles (each name once), announced and summarised (a profile refits the
    # others many times), in the units of the fit's summary (`shown`, one per parameter).
    _check_profiles(names, list(result.names))
    profiles = []
    for name in dict.fromkeys(names):
        print(f"profiling {name} ...", flush=True)
        profiles.append(result.profile(name))
        print(profiles[-1].summary(shown[list(result.names).index(name)] if shown else None),
              flush=True)
    return profiles


def command_table(arguments) -> int:
    """`spineid table DATA --out DIR`: a nonlinear load law from load-displacement data."""
    data = read_load_displacement(arguments.data, displacement=arguments.displacement,
                                  load=arguments.load, time=arguments.time,
                                  units=parse_assignments(arguments.units, "--units"))
    _print_columns([data])
    if arguments.noise is not None and arguments.noise_model not in ("auto", "white"):
        raise ValueError(f"--noise-model {arguments.noise_model}: --noise is white; give one of the two")
    load_unit = ((data.read_as or {}).get("load") or {}).get("unit")
    max_misfit = misfit_fraction(arguments.max_misfit, float(np.ptp(data.load)), load_unit,
                                 UNITS[load_unit][0] if load_unit in UNITS else None)
    # Noise typed with its unit, or bare in its column's unit (SI where the file gave none,
    # of the kind the other column's unit says: a moment beside an angle).
    column_unit = ((data.read_as or {}).get("displacement") or {}).get("unit")
    rotational = ({"rad": True, "m": False}.get(UNITS[column_unit][0])
                  if column_unit in UNITS else
                  {"N m": True, "N": False}.get(UNITS.get(load_unit, (None,))[0]))
    typed = {"load": (arguments.noise, load_unit,
                      {True: ("N m",), False: ("N",)}.get(rotational, ("N", "N m"))),
             "displacement": (arguments.displacement_noise, column_unit,
                              {True: ("rad",), False: ("m",)}.get(rotational, ("m", "rad")))}
    noise, read = {}, {}
    for channel, (text, unit, kinds) in typed.items():
        if text is not None:
            option = "--noise" if channel == "load" else "--displacement-noise"
            noise[channel], read[channel] = column_quantity(text, option, unit, kinds)
    _print_columns([], read)
    # The law's displacements (nodes, smoothing width) typed as the noise is: with their unit,
    # or bare in the displacement column's.
    nodes, smoothing, shape_read = None, 0.0, {}
    if arguments.nodes is not None:
        nodes, shape_read["nodes"] = column_values(arguments.nodes, "--nodes",
                                                   *typed["displacement"][1:])
        if nodes.size < 2 or np.any(~(np.diff(nodes) > 0)):  # (said as typed, not in SI)
            raise ValueError(f"--nodes {arguments.nodes!r} (read as {shape_read['nodes']}): "
                             "expected at least 2 increasing displacements")
    if arguments.smoothing is not None:
        smoothing, shape_read["smoothing"] = column_quantity(
            arguments.smoothing, "--smoothing", *typed["displacement"][1:], "non-negative")
    for option, how in shape_read.items():
        print(f"{option} given: {how}", flush=True)
    print(f"fitting a {arguments.law} law to {len(data.load)} points of {arguments.data}",
          flush=True)
    law = LawForm(arguments.law, nodes, n_nodes=arguments.n_nodes,
                  free_breakpoints=arguments.free_breakpoints, smoothing=smoothing,
                  monotone=not arguments.not_monotone, degree=arguments.degree)
    displacement_unit = (law_units(data.read_as) or (None,))[0]  # (its kind: rad or m)
    inertia = inertia_in_si(arguments.inertia, {"rad": True, "m": False}.get(
        UNITS.get(displacement_unit, (None,))[0]))
    result = fit_load_law(data, law, dynamics=LawDynamics(arguments.damping, inertia),
                          noise=noise.get("load", arguments.noise_model), max_misfit=max_misfit,
                          solver=arguments.solver, displacement_noise=noise.get("displacement"))
    out = arguments.output
    refuse_non_finite(result.report(), "law fit")  # before the first file is written
    contents = dict(result.report(), data=[{"source": data.source, "read_as": data.read_as}],
                    noise_given_as=read, **{f"{k}_given_as": v for k, v in shape_read.items()})
    report = write_json(out / "report.json", dict(contents, profiles=[]))
    kind = UNITS.get(displacement_unit, (None,))[0]  # (a rotation's law, a translation's)
    use = {"rad": "a [[torsion]] (rad, N m) or of a table bushing's rotational degree of "
           "freedom", "m": "a table bushing's translational degree of freedom (m, N)"}.get(
        kind, "a [[torsion]] (rad, N m) or of a table bushing's degree of freedom")
    write_text_atomically(out / "law.toml", f"# {caution(result)}\n" * bool(caution(result))
                          + "# Fitted by `spineid table` from "
                          f"{pathlib.Path(arguments.data).name}: use as the `law` of {use}.\n"
                          + dumps_toml({"law": result.law_table()}))
    plots = not arguments.no_plots
    plot = [figures.plot_law_fit(result, data, out / "law_fit.png", unit=arguments.unit)] if plots else []
    units = None if arguments.si else law_units(data.read_as)
    print(result.summary(units=units, si=arguments.si))
    profiles = _profiles(result, arguments.profile,
                         [shown_in(unit, units) for unit in result.units] if units else None)
    profile_plots = write_profile_outputs(contents, profiles, out, plots)[1:] if profiles else []
    out.finish()
    print(", ".join(["wrote " + str(report), str(out / "law.toml"),
                     *map(str, plot + profile_plots)]))
    return 0 if result.converged and result.accepted is not False else 1


def command_database(arguments) -> int:
    """`spineid database [--out DIR]`: plots of the bundled spine database."""
    out = arguments.output
    nodes = liu_vertebra_nodes()
    paths = [figures.plot_spine_geometry(nodes, out / "geometry.png",
                                 "T1-L5 primary nodes (Liu 2001, Tables A1-A17)")]
    phases = liu_l5_s1_phases()
    span = (phases["lower"][0] - 0.01, phases["upper"][-1] + 0.01)
    paths.append(figures.plot_load_laws({"L5-S1 flexion-extension phases": l5_s1_law()},
                                out / "l5_s1_law.png", span))
    out.finish()
    print(f"{nodes.source}: {len(nodes)} nodes; {phases.source}: {len(phases)} phases")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _model_file_of_kind(path: pathlib.Path, kind: str, verb: str):
    model_file = load_model_file(path)
    if model_file.kind != kind:
        raise ValueError(f"{path}: {verb} needs a kind = \"{kind}\" model file")
    return model_file


def command_whiplash(arguments) -> int:
    """`spineid whiplash [MODEL]`: the head-neck chain in its rear-end pulse."""
    path = pathlib.Path(arguments.model or dataset_path("head_neck.toml"))
    model_file = _model_file_of_kind(path, "head_neck", "whiplash")
    chain = model_file.model
    out = arguments.output
    solver = integrator(arguments.integrator, arguments.rtol)
    print(f"spineid whiplash: {path}, 0-{arguments.t_end:g} s ({type(solver).__name__}, rtol "
          f"{arguments.rtol:g}) -> {out}/", flush=True)
    study = whiplash_study(chain, arguments.t_end, rtol=arguments.rtol,
                           max_steps=arguments.max_steps, solver=solver,
                           progress=_integration_progress(arguments.t_end))
    summary = study.summary()
    if arguments.sensitivity:
        print("sensitivity of the peak ligament force (forward mode through 0-0.3 s) ...",
              flush=True)
        force, elasticity = peak_force_sensitivity(chain, model_file.parameters, t_end=0.3)
        summary["peak_force_sensitivity"] = {
            "window_s": 0.3, "peak_force_N": float(force),
            "elasticity": {p.name: float(e) for p, e in zip(model_file.parameters, elasticity)}}
    refuse_non_finite(summary, "whiplash study")  # before the first file is written
    head = out / "head.csv"
    write_trajectory(head, study.ts, study.head, chain.observable_names)
    paths = [head,
             figures.plot_whiplash(study, out / "whiplash.png"),
             figures.plot_chain_snapshots(study, (0.0, 0.06, 0.1, 0.14, 0.2, 0.3), out / "snapshots.png"),
             write_json(out / "summary.json", summary)]
    out.finish()
    strongest = max(summary["peak_ligament_force"].items(), key=lambda kv: kv[1]["force_N"])
    print(f"  {summary['n_steps']} steps, {study.seconds:.2f} s warm; peak e_R "
          f"{summary['peak_relative_error_e_R']:.2e} (paper 0.0103)")
    print(f"  head: rearmost {summary['head_rearward_mm']['value']:.1f} mm (x, relative to "
          f"T1) at {summary['head_rearward_mm']['t_s'] * 1e3:.0f} ms, extension "
          f"{summary['head_extension_deg']['value']:.1f} deg at "
          f"{summary['head_extension_deg']['t_s'] * 1e3:.0f} ms")
    print(f"  S-shape {summary['s_shape_s']} s, C-shape {summary['c_shape_s']} s")
    print(f"  strongest ligament: {strongest[0]} {strongest[1]['force_N']:.1f} N at "
          f"{strongest[1]['t_s'] * 1e3:.0f} ms")
    if arguments.sensitivity:
        print("  peak force elasticities: " + ", ".join(
            f"{name} {value:+.2f}" for name, value in
            summary["peak_force_sensitivity"]["elasticity"].items()))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _integration_progress(t_end: float, every_s: float = 2.0):
    # Prints how far a windowed integration has got, at most once per `every_s` seconds of wall
    # time (so a run of a few seconds prints nothing).
    start = time.perf_counter()
    last = [start]

    def show(t: float, n_steps: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= every_s:  # (not called after the last window)
            last[0] = now
            print(f"  t = {t:.3g} of {t_end:g} s, {n_steps} steps, {now - start:.0f} s",
                  flush=True)
    return show


def command_segment(arguments) -> int:
    """`spineid segment [MODEL]`: the nine quasi-static load cases of a motion segment, and
    optionally a fit of its parameters to a quasi-static test."""
    path = pathlib.Path(arguments.model or dataset_path("c5_c6.toml"))
    model_file = _model_file_of_kind(path, "spatial_pair", "segment")
    if arguments.fit and not arguments.free:
        raise ValueError("--fit needs at least one --free group (e.g. facets.stiffness)")
    if arguments.starts is not None and not arguments.fit:
        raise ValueError("--starts: only with --fit")
    if arguments.seed is not None and arguments.starts is None:
        raise ValueError("--seed: only with --starts (it draws the starts)")
    for option in ("columns", "units", "si", "free", "noise", "max_misfit"):
        if getattr(arguments, option) and not arguments.fit:
            raise ValueError(f"--{option.replace('_', '-')}: only with --fit (it concerns the "
                             "fitted test)")
    if arguments.noise_model != "auto" and not arguments.fit:
        raise ValueError("--noise-model: only with --fit (it concerns the fitted test)")
    # (refused before the nine cases are solved)
    max_misfit = misfit_fraction(arguments.max_misfit)
    noise = parse_noise(arguments.noise, typed=True)
    solver = None if arguments.starts is None else MultiStart(n=arguments.starts,
                                                                seed=arguments.seed or 0)
    test, noise_read, result, studied = None, {}, None, model_file
    if arguments.fit:
        test = read_quasi_static(arguments.fit,
                                 columns=parse_assignments(arguments.columns, "--columns"),
                                 units=parse_assignments(arguments.units, "--units"))
        _print_columns([test])
        # (a bare number in the unit of its channel's column, SI for spineid's own columns)
        noise, noise_read = noise_in_si(noise, [test], DEFLECTION_COLUMNS,
                                        [QUASI_STATIC_UNITS[c] for c in DEFLECTION_COLUMNS])
        _print_columns([], noise_read)
        checked_segment_fit(model_file, test, arguments.free, noise, solver,
                            arguments.noise_model, max_misfit)
        print(f"fitting {', '.join(arguments.free)} to {arguments.fit} through the equilibria "
              "(the first step waits for their compilation, about 20 s) ...", flush=True)
        result = fit_segment(model_file, test, arguments.free, noise, solver,
                             noise_model=arguments.noise_model, progress=True,
                             max_misfit=max_misfit)
        refuse_non_finite(result.report(), "segment fit")
        refuse_unphysical(result.names, result.values, "segment fit")
        print(result.summary(si=arguments.si))
        fitted = dict(zip(result.names, map(float, result.values)))
        studied = model_file.with_values(fitted)  # (the nine cases: the fitted model's)
    document = studied.document
    facet_names, ligament_names = ([t.get("name", f"{group}[{i}]") for i, t in enumerate(
        document.get(group, []))] for group in ("facets", "ligaments"))
    out = arguments.output
    print(f"spineid segment: {path}{' as fitted' * bool(result)}, nine load cases "
          f"({arguments.force:g} N, {arguments.moment:g} N m) -> {out}/", flush=True)
    study = segment_study(studied.model, arguments.force, arguments.moment, facet_names,
                          ligament_names, timed=True)
    summary = study.summary()
    print(f"  {'case':4s} {'dx':>8s} {'dy':>8s} {'dz':>8s} {'b1':>7s} {'b2':>7s} {'b3':>7s}  "
          f"(mm, deg)  facet forces [N]")
    for k, case in enumerate(study.cases):
        d = study.displacements[k]
        forces = " ".join(f"{f:6.1f}" for f in study.facet_forces[k])
        flag = "" if study.converged[k] else "  NO EQUILIBRIUM"
        print(f"  {case:4s} " + " ".join(f"{1e3 * v:8.4f}" for v in d[:3]) + " "
              + " ".join(f"{np.degrees(v):7.3f}" for v in d[3:]) + f"  {forces}{flag}")
    print("  rotational stiffness [N m/deg]: " + ", ".join(
        f"{case} " + ("none (no equilibrium)" if entry["model"] is None
                      else f"{entry['model']:.2f}")
        + f" (Moroney/AnyBody {entry['moroney_anybody']:.2f})"
        for case, entry in summary["rotational_stiffness_N_m_per_deg"].items()))
    print(f"  nine equilibria vmapped: {study.timing['first_with_compilation']:.2f} s with "
          f"compilation, {1e3 * study.timing['warm_best_of_5']:.2f} ms warm")
    refuse_non_finite(summary, "segment study")  # every check before the first file
    for warning in summary["warnings"]:
        print(f"  note: {warning}")
    # The cases with an equilibrium, in LOAD_CASES order, as a quasi-static test (fit-ready);
    # a case without one has no pose to write.
    solved = np.asarray(study.converged, dtype=bool)
    paths = []
    if np.any(solved):
        paths.append(write_quasi_static(out / "cases.csv", QuasiStaticTest(
            study.loads[solved], study.displacements[solved])))
    if not np.all(solved):
        print(f"  cases.csv leaves out the {int(np.sum(~solved))} case(s) without equilibrium")
    paths.append(figures.plot_segment_study(study, out / "segment.png"))
    if result is not None:
        paths.append(write_json(out / "report.json", dict(
            result.report(), data=[{"source": test.source, "read_as": test.read_as}],
            noise_given_as=noise_read)))
        paths.append(write_model_file(out / "fitted.toml", model_file, fitted,
                                      comments=(caution(result),) * bool(caution(result))))
    paths.append(write_json(out / "summary.json", summary))
    out.finish()
    print("wrote " + ", ".join(str(p) for p in paths))
    if arguments.fit:
        return 0 if result.converged and result.accepted is not False else 1
    return 0 if bool(np.all(study.converged)) else 1
