"""The `spineid` command line. The only module that parses arguments."""

import argparse
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from ._datasets import dataset_path
from ._identify import DEFAULT_SOLVER, SOLVERS
from ._io import (
    dumps_toml,
    load_model,
    load_model_file,
    ModelFile,
    read_toml,
    simulation_settings,
    write_model_file,
    write_trajectory,
)
from ._load_laws import LAW_KINDS
from ._opensim_export import write_opensim_model
from ._parameters import apply_values
from ._simulate import simulate
from ._spatial_pair import Bushing, SpatialPair

matplotlib.use("Agg")  # files only: no display needed
DEMO_MODELS = ("liu_8_springs.toml", "liu_16_springs.toml")
DEMO_FIT = ("liu_16_springs.toml", "liu_16_springs_measured.csv")
# Optical tracking noise of the bundled measurement: 5 um on x and y, 0.01 deg on theta.
DEMO_NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7453292519943295e-4}
NEUTRAL_STIFFNESS = 1500.0


def _simulate_file(model_path: pathlib.Path):
    model = load_model(model_path)
    t_end, n_samples = simulation_settings(read_toml(model_path), str(model_path))
    ts = jnp.linspace(0.0, t_end, n_samples)
    start = time.perf_counter()
    solution = simulate(model, ts)
    poses = np.asarray(jax.vmap(model.observe)(solution.q))
    seconds = time.perf_counter() - start
    return model, np.asarray(ts), poses, solution, seconds


def _command_simulate(arguments) -> int:
    path = pathlib.Path(arguments.model)
    model, ts, poses, solution, seconds = _simulate_file(path)
    out = pathlib.Path(arguments.out or f"{path.stem}_trajectory.csv")
    write_trajectory(out, ts, poses, model.observable_names)
    print(
        f"simulated {path} over {ts[-1]:g} s ({len(ts)} samples, {int(solution.n_steps)} "
        f"solver steps, {seconds:.2f} s) -> {out}"
    )
    return 0


def _command_demo(arguments) -> int:
    from ._plots import plot_planar_pair, plot_planar_trajectories

    out = pathlib.Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"spineid demo: bundled Liu-style spring pairs -> {out}/")
    header = (f"{'model':22s} {'springs':>7s} {'sum K [N/m]':>12s} {'steps':>6s} "
              f"{'first run [s]':>13s} {'warm [ms]':>9s} {'max |dx| [mm]':>13s} "
              f"{'max |dtheta| [deg]':>18s}")
    print(header)
    print("-" * len(header))
    trajectories = {}
    for name in DEMO_MODELS:
        path = dataset_path(name)
        model, ts, poses, solution, first = _simulate_file(path)
        start = time.perf_counter()
        simulate(model, jnp.asarray(ts)).q.block_until_ready()
        warm = time.perf_counter() - start
        stem = pathlib.Path(name).stem
        write_trajectory(out / f"{stem}.csv", ts, poses, model.observable_names)
        plot_planar_pair(model, out / f"{stem}_model.png", title=stem)
        trajectories[stem] = poses
        springs = model.elements[0]
        displacement = poses - poses[0]
        print(
            f"{stem:22s} {len(springs.stiffness):7d} {float(np.sum(springs.stiffness)):12.0f} "
            f"{int(solution.n_steps):6d} {first:13.2f} {warm * 1e3:9.2f} "
            f"{np.max(np.abs(displacement[:, 0])) * 1e3:13.4f} "
            f"{np.degrees(np.max(np.abs(displacement[:, 2]))):18.3f}"
        )
    plot_planar_trajectories(ts, trajectories, out / "trajectories.png",
                             title="Liu-style pairs under the same sinusoidal loads")
    print(f"wrote {len(DEMO_MODELS)} trajectories (CSV), model pictures and trajectories.png")
    _demo_fit(out / "fit_liu_16_springs")
    return 0


def _demo_fit(out: pathlib.Path) -> None:
    import copy

    from ._identify import FitProblem, Measurement, fit

    model_name, data_name = DEMO_FIT
    truth = load_model_file(dataset_path(model_name))
    neutral = copy.deepcopy(truth.document)
    for spring in neutral["springs"]:
        spring["stiffness"] = NEUTRAL_STIFFNESS
    start = ModelFile.from_document(neutral, f"{model_name} (neutral start)", truth.folder)
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


def _parse_noise(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    noise = {}
    for item in text.split(","):
        channel, _, value = item.partition("=")
        try:
            noise[channel.strip()] = float(value)
        except ValueError:
            raise ValueError(
                f"--noise {text!r}: expected CHANNEL=SIGMA pairs separated by commas, e.g. "
                f"x=5e-6,y=5e-6,theta=1.7e-4"
            ) from None
    return noise


def write_fit_outputs(result, problem, out: pathlib.Path) -> list[pathlib.Path]:
    """Write fitted.toml, report.json and the fit plots into `out`; returns the paths."""
    from ._plots import plot_fit, plot_identifiability, plot_residuals

    out.mkdir(parents=True, exist_ok=True)
    channels = problem.channels
    paths = [
        write_model_file(out / "fitted.toml", problem.model_file, result.fitted_values()),
        out / "report.json",
        plot_fit(result, channels, out / "fit.png"),
        plot_residuals(result, channels, out / "residuals.png"),
        plot_identifiability(result, out / "identifiability.png"),
    ]
    (out / "report.json").write_text(json.dumps(result.report(), indent=2))
    model = problem.model_file.model
    if isinstance(model, SpatialPair) and all(isinstance(b, Bushing) for b in model.elements):
        # The identified bushings as an OpenSim model, loadable by OpenSim 4.x (linear
        # bushings only: OpenSim has no element for a table per degree of freedom).
        fitted = apply_values(problem.model_file.model, problem.parameters,
                              jnp.asarray(result.values))
        paths.append(write_opensim_model(fitted, out / "fitted.osim"))
    return paths


def _command_fit(arguments) -> int:
    from ._identify import FitProblem, fit

    problem = FitProblem.from_files(
        arguments.model, arguments.data, arguments.free, _parse_noise(arguments.noise)
    )
    print(
        f"fitting {len(problem.names)} parameter(s) of {arguments.model} to "
        f"{', '.join(arguments.data)} ({problem.n_data} data values) with {arguments.solver}, "
        f"{arguments.starts} start(s)",
        flush=True,
    )
    result = fit(problem, solver=arguments.solver, starts=arguments.starts, seed=arguments.seed,
                 max_steps=arguments.max_steps, progress=True)
    paths = write_fit_outputs(result, problem, pathlib.Path(arguments.out))
    print(result.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if result.converged else 1


def write_recovery_outputs(result, problem, out: pathlib.Path) -> list[pathlib.Path]:
    """Write fitted.toml (the atoms as [[springs]]), report.json and the plots of a measure
    recovery into `out`; returns the paths."""
    from ._plots import plot_fit, plot_measure, plot_residuals

    out.mkdir(parents=True, exist_ok=True)
    channels = problem.channels
    document = result.fitted_document(problem.model_file)
    paths = [
        write_model_file(out / "fitted.toml", problem.model_file, {}, document),
        out / "report.json",
        *plot_measure(result, out / "density.png", out / "cumulative.png"),
        plot_fit(result, channels, out / "fit.png"),
        plot_residuals(result, channels, out / "residuals.png"),
    ]
    (out / "report.json").write_text(json.dumps(result.report(), indent=2))
    return paths


def _command_recover(arguments) -> int:
    from ._measure import recover, recover_grid, RecoveryProblem

    problem = RecoveryProblem.from_files(
        arguments.model, arguments.data, _parse_noise(arguments.noise), arguments.max_stiffness
    )
    method = "off the grid" if arguments.grid is None else f"on a grid of {arguments.grid}"
    print(f"recovering the stiffness measure of {arguments.model} on its [measure] curve "
          f"({problem.curve.length * 1e3:.4g} mm) {method} from {arguments.data} "
          f"({problem.n_data} data values; total stiffness at most "
          f"{problem.max_stiffness:.4g} N/m)", flush=True)
    if arguments.grid is None:
        result = recover(problem, max_atoms=arguments.max_atoms, progress=True)
    else:
        result = recover_grid(problem, arguments.grid, progress=True)
    paths = write_recovery_outputs(result, problem, pathlib.Path(arguments.out))
    print(result.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if result.converged else 1


def _command_stiffness(arguments) -> int:
    from ._plots import plot_stiffness_fit
    from ._stiffness_fit import fit_stiffness_matrix, LOAD_COLUMNS, read_quasi_static

    test = read_quasi_static(arguments.data)
    noise = _parse_noise(arguments.noise)
    if noise is not None:
        unknown = sorted(set(noise) - set(LOAD_COLUMNS))
        missing = [c for c in LOAD_COLUMNS if c not in noise]
        if unknown or missing:
            raise ValueError(f"--noise: give all of {list(LOAD_COLUMNS)}"
                             + (f"; unknown {unknown}" if unknown else "")
                             + (f"; missing {missing}" if missing else ""))
        noise = np.array([noise[c] for c in LOAD_COLUMNS])
    fit = fit_stiffness_matrix(test, arguments.structure, noise, exact=not arguments.linearised)
    out = pathlib.Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(fit.report(), indent=2))
    fragment = {"bushings": [{"kind": "spine", "stiffness": fit.matrix.tolist()}]}
    (out / "stiffness.toml").write_text(
        "# Fitted by `spineid stiffness` from " + pathlib.Path(arguments.data).name + ": paste "
        "into a spatial_pair model and add frame1, frame2 (and damping).\n"
        + dumps_toml(fragment))
    plot = plot_stiffness_fit(fit, test, out / "loads.png")
    print(fit.summary())
    print(f"wrote {out / 'report.json'}, {out / 'stiffness.toml'}, {plot}")
    return 0


def _numbers_argument(text: str | None, what: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        return np.array([float(v) for v in text.split(",")])
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected comma-separated numbers") from None


def _command_table(arguments) -> int:
    from ._plots import plot_law_fit
    from ._table_fit import fit_load_law, read_load_displacement

    data = read_load_displacement(arguments.data)
    print(f"fitting a {arguments.law} law to {len(data.load)} points of {arguments.data}",
          flush=True)
    fit = fit_load_law(
        data, arguments.law, _numbers_argument(arguments.nodes, "--nodes"),
        n_nodes=arguments.n_nodes, free_breakpoints=arguments.free_breakpoints,
        smoothing=arguments.smoothing, monotone=not arguments.not_monotone,
        degree=arguments.degree, damping=arguments.damping, inertia=arguments.inertia,
        noise=arguments.noise)
    out = pathlib.Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(fit.report(), indent=2))
    (out / "law.toml").write_text(
        "# Fitted by `spineid table` from " + pathlib.Path(arguments.data).name + ": use as the "
        "`law` of a [[torsion]] (rad, N m) or of a table bushing's degree of freedom.\n"
        + dumps_toml({"law": fit.law_table()}))
    plot = plot_law_fit(fit, data, out / "law_fit.png", unit=arguments.unit)
    print(fit.summary())
    print(f"wrote {out / 'report.json'}, {out / 'law.toml'}, {plot}")
    return 0 if fit.converged else 1


def _command_database(arguments) -> int:
    from ._datasets import l5_s1_law, liu_l5_s1_phases, liu_vertebra_nodes
    from ._plots import plot_load_laws, plot_spine_geometry

    out = pathlib.Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    nodes = liu_vertebra_nodes()
    paths = [plot_spine_geometry(nodes, out / "geometry.png",
                                 "T1-L5 primary nodes (Liu 2001, Tables A1-A17)")]
    phases = liu_l5_s1_phases()
    span = (phases["lower"][0] - 0.01, phases["upper"][-1] + 0.01)
    paths.append(plot_load_laws({"L5-S1 flexion-extension phases": l5_s1_law()},
                                out / "l5_s1_law.png", span))
    print(f"{nodes.source}: {len(nodes)} nodes; {phases.source}: {len(phases)} phases")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _command_whiplash(arguments) -> int:
    from ._plots import plot_chain_snapshots, plot_whiplash
    from ._planar_chain import HeadNeckChain
    from ._whiplash import peak_force_sensitivity, whiplash_study

    path = pathlib.Path(arguments.model or dataset_path("head_neck.toml"))
    model_file = load_model_file(path)
    chain = model_file.model
    if not isinstance(chain, HeadNeckChain):
        raise ValueError(f"{path}: whiplash needs a kind = \"head_neck\" model file")
    out = pathlib.Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"spineid whiplash: {path}, 0-{arguments.t_end:g} s (Kvaerno4, rtol "
          f"{arguments.rtol:g}) -> {out}/", flush=True)
    study = whiplash_study(chain, arguments.t_end, rtol=arguments.rtol)
    summary = study.summary()
    if arguments.sensitivity:
        print("sensitivity of the peak ligament force (forward mode through 0-0.3 s) ...",
              flush=True)
        force, elasticity = peak_force_sensitivity(chain, model_file.parameters, t_end=0.3)
        summary["peak_force_sensitivity"] = {
            "window_s": 0.3, "peak_force_N": float(force),
            "elasticity": {p.name: float(e) for p, e in zip(model_file.parameters, elasticity)}}
    write_trajectory(out / "head.csv", study.ts, study.head, chain.observable_names)
    paths = [out / "head.csv",
             plot_whiplash(study, out / "whiplash.png"),
             plot_chain_snapshots(study, (0.0, 0.06, 0.1, 0.14, 0.2, 0.3), out / "snapshots.png")]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    paths.append(out / "summary.json")
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


def _command_segment(arguments) -> int:
    from ._plots import plot_segment_study
    from ._segment import segment_study, solve_load_cases
    from ._stiffness_fit import DEFLECTION_COLUMNS, LOAD_COLUMNS

    path = pathlib.Path(arguments.model or dataset_path("c5_c6.toml"))
    model_file = load_model_file(path)
    pair = model_file.model
    if not isinstance(pair, SpatialPair):
        raise ValueError(f"{path}: segment needs a kind = \"spatial_pair\" model file")
    document = model_file.document
    facet_names = [t.get("name", f"facets[{i}]") for i, t in enumerate(document.get("facets", []))]
    ligament_names = [t.get("name", f"ligaments[{i}]")
                      for i, t in enumerate(document.get("ligaments", []))]
    out = pathlib.Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"spineid segment: {path}, nine load cases ({arguments.force:g} N, "
          f"{arguments.moment:g} N m) -> {out}/", flush=True)
    start = time.perf_counter()
    study = segment_study(pair, arguments.force, arguments.moment, facet_names, ligament_names)
    first = time.perf_counter() - start
    loads = jnp.asarray(study.loads)
    warm = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(solve_load_cases(pair, loads))
        warm.append(time.perf_counter() - start)
    summary = study.summary()
    summary["timing_s"] = {"first_with_compilation": first, "warm_best_of_5": min(warm)}
    # One row per case in LOAD_CASES order, as a quasi-static test file (fit-ready).
    header = [*LOAD_COLUMNS, *DEFLECTION_COLUMNS]
    rows = np.concatenate([study.loads, study.displacements], axis=1)
    cases_path = out / "cases.csv"
    cases_path.write_text(",".join(header) + "\n" + "".join(
        ",".join(f"{v:.12g}" for v in row) + "\n" for row in rows))
    print(f"  {'case':4s} {'dx':>8s} {'dy':>8s} {'dz':>8s} {'b1':>7s} {'b2':>7s} {'b3':>7s}  "
          f"(mm, deg)  facet forces [N]")
    for k, case in enumerate(study.cases):
        d = study.displacements[k]
        forces = " ".join(f"{f:6.1f}" for f in study.facet_forces[k])
        flag = "" if study.converged[k] else "  NO EQUILIBRIUM"
        print(f"  {case:4s} " + " ".join(f"{1e3 * v:8.4f}" for v in d[:3]) + " "
              + " ".join(f"{np.degrees(v):7.3f}" for v in d[3:]) + f"  {forces}{flag}")
    print("  rotational stiffness [N m/deg]: " + ", ".join(
        f"{case} {entry['model']:.2f} (Moroney/AnyBody {entry['moroney_anybody']:.2f})"
        for case, entry in summary["rotational_stiffness_N_m_per_deg"].items()))
    print(f"  nine equilibria vmapped: {first:.2f} s with compilation, "
          f"{1e3 * min(warm):.2f} ms warm")
    paths = [cases_path, plot_segment_study(study, out / "segment.png")]
    if arguments.fit:
        from ._segment_fit import fit_segment
        from ._stiffness_fit import read_quasi_static

        if not arguments.free:
            raise ValueError("--fit needs at least one --free group (e.g. facets.stiffness)")
        test = read_quasi_static(arguments.fit)
        result = fit_segment(model_file, test, arguments.free, _parse_noise(arguments.noise))
        (out / "report.json").write_text(json.dumps(result.report(), indent=2) + "\n")
        write_model_file(out / "fitted.toml", model_file,
                         dict(zip(result.names, map(float, result.values))))
        print(result.summary())
        paths += [out / "report.json", out / "fitted.toml"]
        for warning in summary["warnings"]:
            print(f"  note: {warning}")
    else:
        for warning in summary["warnings"]:
            print(f"  note: {warning}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    paths.append(out / "summary.json")
    print("wrote " + ", ".join(str(p) for p in paths))
    if arguments.fit:
        return 0 if result.converged else 1
    return 0 if bool(np.all(study.converged)) else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `spineid` command."""
    parser = argparse.ArgumentParser(
        prog="spineid",
        description="Parameter identification and inverse problems for the intervertebral joint.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    simulate_parser = commands.add_parser("simulate", help="simulate a model file, write a CSV")
    simulate_parser.add_argument("model", help="model file (TOML)")
    simulate_parser.add_argument("--out", help="trajectory CSV (default: MODEL_trajectory.csv)")
    simulate_parser.set_defaults(run=_command_simulate)
    fit_parser = commands.add_parser(
        "fit", help="fit model parameters to measured trajectories by least squares"
    )
    fit_parser.add_argument("model", help="model file (TOML); its values are the starting guess")
    fit_parser.add_argument("data", nargs="+", help="trajectory CSV file(s), one per load case")
    fit_parser.add_argument("--free", action="append", required=True, metavar="GROUP",
                            help="parameter group to fit (stiffness, damping, torsion) or a "
                                 "parameter name; repeat for several")
    fit_parser.add_argument("--noise", metavar="CH=SIGMA,...",
                            help="measurement noise per channel (SI); default: estimated")
    fit_parser.add_argument("--out", required=True, help="output folder")
    fit_parser.add_argument("--solver", default=DEFAULT_SOLVER, choices=SOLVERS,
                            help=f"least-squares solver (default {DEFAULT_SOLVER}: spineid's "
                                 "Levenberg-Marquardt)")
    fit_parser.add_argument("--starts", type=int, default=1, help="number of starts (multi-start)")
    fit_parser.add_argument("--seed", type=int, default=0, help="seed of the random starts")
    fit_parser.add_argument("--max-steps", type=int, default=None, help="solver iterations")
    fit_parser.set_defaults(run=_command_fit)
    recover_parser = commands.add_parser(
        "recover", help="recover a stiffness measure (and a pin) on the model's [measure] curve"
    )
    recover_parser.add_argument("model", help="model file (TOML) with a [measure] table")
    recover_parser.add_argument("data", help="trajectory CSV of the upper body")
    recover_parser.add_argument("--out", required=True, help="output folder")
    recover_parser.add_argument("--noise", metavar="CH=SIGMA,...",
                                help="measurement noise per channel (SI); default: estimated")
    recover_parser.add_argument("--grid", type=int, metavar="N",
                                help="fit N equally spaced springs instead of off-grid atoms")
    recover_parser.add_argument("--max-atoms", type=int, default=4,
                                help="most atoms off the grid (default 4)")
    recover_parser.add_argument("--max-stiffness", type=float, metavar="N_PER_M",
                                help="ceiling on the total stiffness (default: translational "
                                     "frequency at the data's Nyquist frequency)")
    recover_parser.set_defaults(run=_command_recover)
    stiffness_parser = commands.add_parser(
        "stiffness", help="fit a 6x6 stiffness matrix to a quasi-static load-displacement test"
    )
    stiffness_parser.add_argument("data", help="CSV with Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3")
    stiffness_parser.add_argument("--out", required=True, help="output folder")
    stiffness_parser.add_argument("--structure", default="full",
                                  choices=("full", "sagittal", "diagonal"),
                                  help="symmetric 21 entries, sagittal-symmetric 12 (eq 24 "
                                       "pattern) or diagonal 6 (default full)")
    stiffness_parser.add_argument("--noise", metavar="Fx=SIGMA,...",
                                  help="load noise per channel (N, N m); default: estimated")
    stiffness_parser.add_argument("--linearised", action="store_true",
                                  help="use moments as measured instead of mapping them onto "
                                       "the Euler basis")
    stiffness_parser.set_defaults(run=_command_stiffness)
    table_parser = commands.add_parser(
        "table", help="fit a nonlinear load law to load-displacement data (a test or a loop)")
    table_parser.add_argument("data", help="CSV with displacement,load[,t] (m or rad; N or N m)")
    table_parser.add_argument("--out", required=True, help="output folder")
    table_parser.add_argument("--law", default="piecewise_linear", choices=LAW_KINDS)
    table_parser.add_argument("--nodes", metavar="X0,X1,...",
                              help="node displacements of a table law (default: --n-nodes "
                                   "evenly over the data)")
    table_parser.add_argument("--n-nodes", type=int, default=6)
    table_parser.add_argument("--free-breakpoints", action="store_true",
                              help="also fit the interior node displacements (phase bounds)")
    table_parser.add_argument("--smoothing", type=float, default=0.0,
                              help="smoothing width of piecewise_linear (SI; default 0)")
    table_parser.add_argument("--not-monotone", action="store_true",
                              help="allow a table load to decrease (negative stiffness)")
    table_parser.add_argument("--degree", type=int, default=3, help="polynomial degree")
    table_parser.add_argument("--damping", action="store_true",
                              help="fit a damper on the displacement rate (needs column t)")
    table_parser.add_argument("--inertia", type=float, default=0.0,
                              help="known inertia of a dynamic test (kg m^2 or kg)")
    table_parser.add_argument("--noise", type=float, help="load noise; default: estimated")
    table_parser.add_argument("--unit", default="deg", choices=("deg", "mm"),
                              help="displacement unit of the plot (default deg)")
    table_parser.set_defaults(run=_command_table)
    database_parser = commands.add_parser(
        "database", help="plot the bundled spine database (geometry, L5-S1 load law)")
    database_parser.add_argument("--out", default="spineid-database", help="output folder")
    database_parser.set_defaults(run=_command_database)
    whiplash_parser = commands.add_parser(
        "whiplash", help="the head-neck chain in a rear-end pulse: plots, energy check, summary")
    whiplash_parser.add_argument("model", nargs="?",
                                 help="kind = \"head_neck\" model file (default: the bundled "
                                      "datasets/head_neck.toml)")
    whiplash_parser.add_argument("--out", default="spineid-whiplash", help="output folder")
    whiplash_parser.add_argument("--t-end", type=float, default=5.0,
                                 help="simulated time (s, default 5)")
    whiplash_parser.add_argument("--rtol", type=float, default=1e-5,
                                 help="relative tolerance of the integrator (default 1e-5)")
    whiplash_parser.add_argument("--sensitivity", action="store_true",
                                 help="also the elasticities of the peak ligament force with "
                                      "respect to the stiffness and damping parameters")
    whiplash_parser.set_defaults(run=_command_whiplash)
    segment_parser = commands.add_parser(
        "segment", help="the nine quasi-static load cases of a motion segment (C5-C6 by "
                        "default): equilibria, displacements, facet forces; optionally a fit")
    segment_parser.add_argument("model", nargs="?",
                                help="spatial_pair model file with bushings, [[ligaments]] and "
                                     "[[facets]] (default: the bundled datasets/c5_c6.toml)")
    segment_parser.add_argument("--out", default="spineid-segment", help="output folder")
    segment_parser.add_argument("--force", type=float, default=20.0,
                                help="shear, tension and compression load (N, default 20)")
    segment_parser.add_argument("--moment", type=float, default=1.8,
                                help="bending and torsion moment (N m, default 1.8)")
    segment_parser.add_argument("--fit", metavar="DATA.csv",
                                help="fit the --free parameters to a quasi-static test "
                                     "(Fx..Mz,dx,dy,dz,b1,b2,b3, like the written cases.csv)")
    segment_parser.add_argument("--free", action="append", metavar="GROUP",
                                help="facets.stiffness, bushing.stiffness, ligaments.stiffness "
                                     "or a parameter name; repeat for several")
    segment_parser.add_argument("--noise", metavar="dx=SIGMA,...",
                                help="displacement noise of dx,dy,dz (m) and b1,b2,b3 (rad); "
                                     "default: estimated from the residuals")
    segment_parser.set_defaults(run=_command_segment)
    demo_parser = commands.add_parser("demo", help="the main job on bundled data")
    demo_parser.add_argument("--out", default="spineid-demo", help="output folder")
    demo_parser.set_defaults(run=_command_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `spineid` console script; returns the exit status."""
    arguments = build_parser().parse_args(argv)
    try:
        return arguments.run(arguments)
    except ValueError as error:
        print(f"spineid: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
