"""`spineid spine`: the analyses of a whole spine (a `spatial_chain` model, Liu's thoracolumbar
spine by default) from the command line; `spine flexibility` runs the clinical flexibility test
of every motion segment, or of the whole spine under a moment on one vertebra (and writes the
vertebrae's poses), `spine levels` fits each level's stiffness scales to such poses, `spine
instrument` pulls a curved spine onto rods (docs/cli.md; the poses file:
docs/formats/data-files.md)."""

import math
import pathlib

import numpy as np

from ..identify import fit_spine_levels, scaled_laws
from ..io import chain_document, dataset_path, dumps_toml, load_model_file, read_table
from ..io import write_table
from ..io import write_text_atomically
from ..models import SpatialChain
from ..simulation import DIRECTIONS, joint_names, segment_flexibility, spine_flexibility
from ..spines import Rod, spinal_curve, thoracolumbar_spine
from ..studies import correct_curve, motion_change
from ._arguments import parse_noise
from ._outputs import figures, write_json

POSE_COLUMNS = ("x_m", "y_m", "z_m", "a1_rad", "a2_rad", "a3_rad")
"""The pose columns of a poses file: each body's position (m) and 1-2-3 Euler angles (rad) in
ground, as `SpatialChain.poses` gives them."""

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
    if test.poses is not None:  # (the whole spine: what `spine levels` fits)
        paths.append(write_table(out / "poses.csv", _pose_rows(test, chain)))
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


def _pose_rows(test, chain: SpatialChain) -> dict:
    # poses.csv: one row per direction, moment and free body (docs/formats/data-files.md).
    bodies = chain.body_names[1:]
    poses = np.asarray(test.poses).reshape(3, test.moments.size, len(bodies), 6)
    columns = {"direction": np.repeat(np.array(DIRECTIONS), test.moments.size * len(bodies)),
               "moment_N_m": np.tile(np.repeat(test.moments, len(bodies)), 3),
               "body": np.tile(np.array(bodies), 3 * test.moments.size)}
    columns.update({name: poses[..., k].ravel() for k, name in enumerate(POSE_COLUMNS)})
    return columns


def read_spine_poses(path) -> tuple[tuple[str, ...], np.ndarray, tuple[str, ...], np.ndarray]:
    """A poses file (docs/formats/data-files.md, "Spine poses"): rows `direction, moment_N_m,
    body, x_m, y_m, z_m, a1_rad, a2_rad, a3_rad`, every body at every moment of every
    direction. **Returns:** `(directions, moments (k,), bodies, poses (m, k, b, 6))`, in the
    order of their first appearance; a `ValueError` naming the file and row otherwise."""
    needed = ("direction", "moment_N_m", "body", *POSE_COLUMNS)
    columns = read_table(path, needed, text=("direction", "body"), others="ignore",
                         min_rows=1)  # (the file, its text, its header and numbers checked)
    table = {}
    for row, (direction, moment, body) in enumerate(zip(
            columns["direction"], columns["moment_N_m"], columns["body"]), start=1):
        key = (str(direction).strip(), float(moment), str(body).strip())
        if key in table:
            raise ValueError(f"{path}: data row {row}: {key[0]} at {moment:g} N m for {key[2]} "
                             "is given twice")
        table[key] = [float(columns[c][row - 1]) for c in POSE_COLUMNS]
    directions = tuple(dict.fromkeys(d for d, _, _ in table))
    moments = np.array(sorted({m for _, m, _ in table}))
    bodies = tuple(dict.fromkeys(b for _, _, b in table))
    absent = [key for key in ((d, m, b) for d in directions for m in moments for b in bodies)
              if key not in table]
    if absent:
        d, m, b = absent[0]
        raise ValueError(f"{path}: no pose of {b} at {m:g} N m of {d} ({len(absent)} missing): "
                         "every body at every moment of every direction")
    poses = np.array([[[table[(d, m, b)] for b in bodies] for m in moments]
                      for d in directions])
    return directions, moments, bodies, poses


def command_spine_levels(arguments) -> int:
    """`spineid spine levels [MODEL] POSES.csv --loaded BODY --out DIR`: each joint's rotational
    stiffness scales (one per direction, multiplying its laws' loads: `spineid.scaled_laws`)
    fitted to the measured poses of a whole-spine flexibility test, the moment on `--loaded`
    (`spineid.fit_spine_levels`: through the chain's equilibria, the start read off the data;
    `--observed` fits to some bodies only). Writes report.json (the fit's report), scales.csv
    (joint, direction, scale, standard error) and fitted.toml (the model with its laws
    scaled). Exit status 1 when the fit is not converged or not accepted."""
    chain, source = _spine(arguments.model)
    directions, moments, bodies, poses = read_spine_poses(arguments.poses)
    observed = bodies
    if arguments.observed is not None:
        observed = tuple(name.strip() for name in arguments.observed.split(",") if name.strip())
        unknown = [name for name in observed if name not in bodies]
        if unknown:
            raise ValueError(f"--observed {unknown}: not in {arguments.poses} (its bodies: "
                             f"{list(bodies)})")
        poses = poses[:, :, [bodies.index(name) for name in observed]]
    noise = parse_noise(arguments.noise)
    print(f"spineid spine levels: {source}, {len(observed)} bodies observed in "
          f"{len(directions)} directions at {moments.size} moments (the moment on "
          f"{arguments.loaded}); fitting {3 * len(chain.bodies)} scales through the "
          "equilibria (the first step compiles them)", flush=True)
    result = fit_spine_levels(chain, arguments.loaded, moments, poses, observed=observed,
                              directions=directions, noise=noise, progress=True)
    print(result.summary())
    out = arguments.output
    joints = [name.rsplit(" ", 1) for name in result.names]
    paths = [write_json(out / "report.json", dict(result.report(), model=source,
                                                  poses=str(arguments.poses))),
             write_table(out / "scales.csv", {
                 "joint": [j for j, _ in joints], "direction": [d for _, d in joints],
                 "scale": result.values,
                 "stderr": [float("nan") if not np.isfinite(e) else e for e in result.stderr]}),
             write_text_atomically(out / "fitted.toml", (
                 f"# Fitted by `spineid spine levels` from {pathlib.Path(arguments.poses).name}: "
                 "each joint's rotational laws scaled by its fitted scales.\n"
                 + dumps_toml(chain_document(scaled_laws(
                     chain, np.asarray(result.values).reshape(-1, 3))))))]
    out.finish()
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if result.converged and result.accepted is not False else 1


def command_spine_instrument(arguments) -> int:
    """`spineid spine instrument --levels L1,...,T4 --out DIR`: Liu's spine with a curve
    (`--curve`, a CSV of joint rotations, default the bundled scoliosis:
    `spineid.spinal_curve`) as its rest shape, pulled onto rods clamped at an attachment point
    of each of `--levels` (`--point`, `--sides`, `--diameter`, `--material`), the rods contoured
    to the spine with `--contour` times its curve (`spineid.correct_curve`, in `--steps`
    continuation steps). With `--moment`, the whole-spine flexibility test (the moment on
    `--body`) before and with the rods (`spineid.motion_change`). Writes report.json (the Cobb
    angle of the instrumented levels before and after, each clamp's loads, each joint's
    change, the laws driven past their tables; with `--moment` each level's range of motion
    before and after), screws.csv and spine.png (the spine before and on the rods)."""
    levels = tuple(name.strip() for name in arguments.levels.split(",") if name.strip())
    sides = tuple(side.strip() for side in arguments.sides.split(",") if side.strip())
    if not sides or len(set(sides)) != len(sides):
        raise ValueError(f"--sides {arguments.sides!r}: expected left, right or left,right")
    rods = tuple(Rod(levels, side=side, point=arguments.point,
                     diameter=arguments.diameter * 1e-3, material=arguments.material)
                 for side in sides)
    curve = spinal_curve(arguments.curve)
    spine = thoracolumbar_spine(curve=curve)
    contour = thoracolumbar_spine(curve=arguments.contour * curve)
    print(f"spineid spine instrument: Liu's spine on the curve of "
          f"{arguments.curve or 'the bundled scoliosis'}, {len(rods)} rod(s) at the "
          f"{arguments.point} points of {', '.join(levels)}, contoured to {arguments.contour:g} "
          f"of the curve; {arguments.steps} steps (the first compiles, about a minute)",
          flush=True)
    change = None
    if arguments.moment is not None:
        change = motion_change(spine, rods, shape=contour, body=arguments.body,
                               moment=arguments.moment, steps=arguments.steps,
                               assembly_steps=arguments.steps, stability=False)
        correction = change.correction
    else:
        correction = correct_curve(spine, rods, contour, arguments.steps)
    before, after = correction.cobb_angle()
    report = {
        "levels": list(levels), "sides": list(sides), "point": arguments.point,
        "diameter_mm": arguments.diameter, "material": arguments.material,
        "contour": arguments.contour, "curve": str(arguments.curve or "bundled scoliosis"),
        "cobb_angle_deg": {"before": math.degrees(before), "after": math.degrees(after)},
        "clamps": [{"rod": rod, "vertebra": level, "force_N": load[:3].tolist(),
                    "moment_N_m": load[3:].tolist()}
                   for (rod, level), load in zip(correction.screws, correction.screw_loads)],
        "joint_changes": {joint: {"rotation_deg": np.degrees(change_[3:]).tolist(),
                                  "translation_mm": (1e3 * change_[:3]).tolist()}
                          for joint, change_ in zip(joint_names(spine),
                                                    correction.joint_changes)},
        "beyond_tables": list(correction.beyond_tables)}
    if change is not None:
        ratios = change.ratios()
        report["range_of_motion_kept"] = {
            joint: dict(zip(DIRECTIONS, map(float, row)))
            for joint, row in zip(change.before.joints, ratios)}
    out = arguments.output
    loads = correction.screw_loads
    paths = [write_json(out / "report.json", report),
             write_table(out / "screws.csv", {
                 "rod": [rod for rod, _ in correction.screws],
                 "vertebra": [level for _, level in correction.screws],
                 **{f"F{axis}_N": loads[:, k] for k, axis in enumerate(("ant", "sup", "right"))},
                 **{f"M{axis}_N_m": loads[:, 3 + k]
                    for k, axis in enumerate(("ant", "sup", "right"))}})]
    if not arguments.no_plots:
        paths.append(figures.plot_spine(spine, [correction.q], out / "spine.png",
                                        labels=["on the rods"]))
    out.finish()
    print(correction.report())
    if change is not None:
        print(change.table())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
