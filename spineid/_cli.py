"""The `spineid` command line. The only module that parses arguments."""

import argparse
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from ._datasets import dataset_path
from ._io import load_model, read_toml, simulation_settings, write_trajectory
from ._simulate import simulate

DEMO_MODELS = ("liu_8_springs.toml", "liu_16_springs.toml")


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
    return 0


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
