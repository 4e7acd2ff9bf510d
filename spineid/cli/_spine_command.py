"""`spineid spine`: the analyses of a whole spine (a `spatial_chain` model, Liu's thoracolumbar
spine by default) from the command line; `spine flexibility` runs the clinical flexibility test
of every motion segment, or of the whole spine under a moment on one vertebra (docs/cli.md)."""

import pathlib

import numpy as np

from ..io import dataset_path, load_model_file, write_table
from ..models import SpatialChain
from ..simulation import DIRECTIONS, segment_flexibility, spine_flexibility
from ._outputs import figures, write_json

SPINE_MODEL = "thoracolumbar_spine.toml"
"""The bundled model `spine` verbs take without one: Liu's T1-L5 spine on the sacrum."""


def _spine(path) -> tuple[SpatialChain, str]:
    # The chain of a spatial_chain model file (the bundled spine by default).
    path = pathlib.Path(path or dataset_path(SPINE_MODEL))
    model = load_model_file(path).model
    if not isinstance(model, SpatialChain):
        raise ValueError(f"{path}: spineid spine needs a kind = \"spatial_chain\" model (a "
                         f"spine of several vertebrae), not a {type(model).__name__}")
    return model, str(path)


def command_spine_flexibility(arguments) -> int:
    """`spineid spine flexibility [MODEL] --out DIR`: moment-rotation curves in the three
    directions (flexion-extension, lateral bending, axial rotation), from `-moment` to
    `+moment` in `steps` steps per side: of each motion segment with the vertebra below fixed
    (`spineid.segment_flexibility`; `--joints` chooses some), or, with `--loaded BODY`, of the
    whole spine under a moment of fixed direction on that vertebra, the base fixed
    (`spineid.spine_flexibility`, with the static stability of every equilibrium). Writes
    flexibility.csv (one row per joint, direction and moment: the joint's rotation in degrees
    and translation in mm, whether the step found an equilibrium, and, for the whole spine,
    whether it is stable), report.json (per joint and direction the range of motion and the
    neutral zone in degrees, the tests whose rotation left the law's table) and
    flexibility.png (and spine.png for the whole spine: the spine at the largest moments).
    Exit status 1 when a step found no equilibrium."""
    chain, source = _spine(arguments.model)
    joints = None if arguments.joints is None else [
        name.strip() for name in arguments.joints.split(",") if name.strip()]
    if arguments.loaded is not None and joints is not None:
        raise ValueError("--joints chooses motion segments; --loaded tests the whole spine "
                         "(every joint): give one of the two")
    what = (f"the whole spine, the moment on {arguments.loaded}" if arguments.loaded
            else "each motion segment, the vertebra below fixed")
    print(f"spineid spine flexibility: {source}, {what}, +-{arguments.moment:g} N m in "
          f"{arguments.steps} steps per side (the first solve compiles, about 15 s)",
          flush=True)
    test = (spine_flexibility(chain, arguments.loaded, arguments.moment, arguments.steps)
            if arguments.loaded else
            segment_flexibility(chain, arguments.moment, arguments.steps, joints))
    nz_moment = min(0.25, float(test.moments[-1]))  # (a smaller test: its largest moment)
    rom, nz = np.degrees(test.range_of_motion()), np.degrees(test.neutral_zone(nz_moment))
    report = {
        "model": source, "loaded": test.loaded, "moment_N_m": float(arguments.moment),
        "steps": int(arguments.steps), "directions": list(DIRECTIONS),
        "neutral_zone_within_N_m": nz_moment,
        "joints": {joint: {direction: {"range_of_motion_deg": float(rom[j, d]),
                                       "neutral_zone_deg": float(nz[j, d])}
                           for d, direction in enumerate(DIRECTIONS)}
                   for j, joint in enumerate(test.joints)},
        "beyond_tables": test.extrapolated(),
        "equilibria_found": int(np.sum(test.converged)),
        "equilibria_missing": int(np.sum(~test.converged))}
    if test.stable is not None:
        report["unstable_steps"] = int(np.sum(~test.stable))
    out = arguments.output
    paths = [write_table(out / "flexibility.csv", _rows(test)),
             write_json(out / "report.json", report)]
    if not arguments.no_plots:
        paths.append(figures.plot_flexibility(test, out / "flexibility.png"))
        if test.poses is not None:
            ends = [test.poses[d, index] for d in range(3) for index in (0, -1)]
            labels = [f"{direction} {sign}{arguments.moment:g} N m"
                      for direction in DIRECTIONS for sign in ("-", "+")]
            paths.append(figures.plot_spine(chain, np.array(ends), out / "spine.png", labels))
    out.finish()
    print(test.table(nz_moment))
    print("(degrees: range of motion between the largest moments, neutral zone within "
          f"+-{nz_moment:g} N m)")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if bool(np.all(test.converged)) else 1


def _rows(test) -> dict:
    # flexibility.csv: one row per joint, direction and moment.
    n_joints, n_moments = len(test.joints), test.moments.size
    shape = (n_joints, 3, n_moments)
    columns = {
        "joint": np.repeat(np.array(test.joints), 3 * n_moments),
        "direction": np.tile(np.repeat(np.array(DIRECTIONS), n_moments), n_joints),
        "moment_N_m": np.broadcast_to(test.moments, shape).ravel(),
        **{f"r{axis}_deg": np.degrees(test.rotations[..., k]).ravel()
           for k, axis in enumerate("xyz")},
        **{f"t{axis}_mm": 1e3 * test.translations[..., k].ravel()
           for k, axis in enumerate("xyz")},
        "equilibrium": test.converged.astype(int).ravel()}
    if test.stable is not None:
        columns["stable"] = np.broadcast_to(test.stable, shape).astype(int).ravel()
    return columns
