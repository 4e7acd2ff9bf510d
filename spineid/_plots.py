"""Pictures a person would rather look at than read. The only module drawing with matplotlib
(the command line picks its non-interactive backend; notebooks keep theirs)."""

import pathlib

import matplotlib.pyplot as plt
import numpy as np

from ._planar_elements import AxialSprings, VectorSprings
from ._planar_kinematics import body_point_position
from ._planar_pair import PlanarPair


def _save(figure, path):
    # Save and close the figure; without a path, hand it back (notebooks show it).
    figure.tight_layout()
    if path is None:
        return figure
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return pathlib.Path(path)


def plot_planar_trajectories(
    ts, poses: dict[str, np.ndarray], path: str | pathlib.Path, title: str = ""
) -> pathlib.Path:
    """Plot upper-body pose channels against time, one panel per channel, curves overlaid.

    **Arguments:** `ts` (s, `(k,)`); `poses` maps a label to an array `(k, 3)` of `x, y, theta`
    (m, m, rad), shown as displacement from the first sample in mm and degrees; `path` of the PNG.
    """
    figure, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    units = [("x", "mm", 1e3), ("y", "mm", 1e3), ("theta", "deg", np.degrees(1.0))]
    for label, pose in poses.items():
        pose = np.asarray(pose)
        for axis, (name, unit, scale), column in zip(axes, units, pose.T):
            axis.plot(ts, (column - column[0]) * scale, label=label, lw=1.2)
            axis.set_ylabel(f"{name} - {name}(0) [{unit}]")
    axes[-1].set_xlabel("t [s]")
    if len(poses) > 1:
        axes[0].legend(loc="upper right", fontsize="small")
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.suptitle(title or "Upper vertebra motion")
    return _save(figure, path)


def plot_planar_pair(pair: PlanarPair, path: str | pathlib.Path, title: str = "") -> pathlib.Path:
    """Draw the pair in its reference pose and the stiffness of its springs.

    Left: body centres and frames, vector springs as dots sized by stiffness, axial springs as
    lines (mm). Right: the spring measure, stiffness (N/m) against the anterior coordinate x.
    """
    figure, (sketch, measure) = plt.subplots(1, 2, figsize=(11, 4.5))
    lower, upper = pair.lower.reference_pose, pair.upper.reference_pose
    for name, pose, colour in (("lower", lower, "tab:gray"), ("upper", upper, "tab:blue")):
        centre = np.asarray(pose[:2]) * 1e3
        sketch.plot(*centre, "o", color=colour, ms=8, label=f"{name} centre of mass")
        for direction in ([6.0, 0.0], [0.0, 6.0]):
            tip = np.asarray(body_point_position(pose, np.asarray(direction) * 1e-3)) * 1e3
            sketch.annotate("", tip, centre, arrowprops=dict(arrowstyle="->", color=colour))
    for element in pair.elements:
        if isinstance(element, VectorSprings):
            points = np.asarray(body_point_position(lower, element.points_a)) * 1e3
            stiffness = np.asarray(element.stiffness)
            size = 20 + 200 * stiffness / max(stiffness.max(), 1e-300)
            sketch.scatter(points[:, 0], points[:, 1], s=size, color="tab:red", alpha=0.7,
                           label="vector springs (size ~ stiffness)")
            measure.stem(points[:, 0], stiffness, linefmt="tab:red", markerfmt="o",
                         basefmt=" ", label="vector springs")
        elif isinstance(element, AxialSprings):
            a = np.asarray(body_point_position(lower, element.points_a)) * 1e3
            b = np.asarray(body_point_position(upper, element.points_b)) * 1e3
            for i, (start, end) in enumerate(zip(a, b)):
                sketch.plot([start[0], end[0]], [start[1], end[1]], color="tab:green", lw=2,
                            label="axial springs" if i == 0 else None)
            measure.stem((a[:, 0] + b[:, 0]) / 2, np.asarray(element.stiffness),
                         linefmt="tab:green", markerfmt="s", basefmt=" ", label="axial springs")
    sketch.set_aspect("equal")
    sketch.set_xlabel("x (anterior) [mm]")
    sketch.set_ylabel("y (superior) [mm]")
    sketch.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    sketch.grid(alpha=0.3)
    measure.set_xlabel("x (anterior) [mm]")
    measure.set_ylabel("stiffness [N/m]")
    measure.set_title("spring measure")
    measure.grid(alpha=0.3)
    figure.suptitle(title or "Planar vertebral pair")
    return _save(figure, path)


_CHANNEL_DISPLAY = {"x": ("mm", 1e3), "y": ("mm", 1e3), "theta": ("deg", float(np.degrees(1.0)))}


def plot_fit(result, channels: tuple[str, ...], path: str | pathlib.Path) -> pathlib.Path:
    """Measured data (dots) against the fitted model (lines), one panel per channel, per load case.

    **Arguments:** a `FitResult`, the channel names, the PNG path.
    """
    figure, axes = plt.subplots(len(channels), 1, figsize=(8, 2.4 * len(channels)), sharex=True,
                                squeeze=False)
    for case, (measurement, predicted) in enumerate(zip(result.measurements, result.predictions)):
        for c, channel in enumerate(channels):
            unit, scale = _CHANNEL_DISPLAY.get(channel, ("SI", 1.0))
            axis = axes[c, 0]
            axis.plot(measurement.ts, measurement.values[:, c] * scale, ".", ms=2.5, alpha=0.5,
                      color=f"C{case}", label=f"data {case + 1}" if c == 0 else None)
            axis.plot(measurement.ts, predicted[:, c] * scale, "-", lw=1.2, color="k",
                      label="fit" if c == 0 and case == 0 else None)
            axis.set_ylabel(f"{channel} [{unit}]")
            axis.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("t [s]")
    figure.suptitle(f"Data and fit (cost {result.cost:.4g}, {result.solver})")
    return _save(figure, path)


def plot_residuals(result, channels: tuple[str, ...], path: str | pathlib.Path) -> pathlib.Path:
    """Noise-normalised residuals against time and their histogram against N(0, 1), per channel.

    Structure over time or a histogram wider than the normal curve means the model misses
    something or the noise level is wrong.
    """
    figure, axes = plt.subplots(len(channels), 2, figsize=(10, 2.4 * len(channels)),
                                gridspec_kw={"width_ratios": [3, 1]}, squeeze=False)
    grid = np.linspace(-4, 4, 200)
    for c, channel in enumerate(channels):
        sigma = result.noise[channel]
        pooled = []
        for case, (measurement, residual) in enumerate(zip(result.measurements, result.residuals())):
            normalised = residual[:, c] / sigma
            pooled.append(normalised)
            axes[c, 0].plot(measurement.ts, normalised, ".", ms=2.5, color=f"C{case}")
        axes[c, 0].axhline(0.0, color="k", lw=0.8)
        axes[c, 0].set_ylabel(f"{channel} residual / sigma")
        axes[c, 0].grid(alpha=0.3)
        axes[c, 1].hist(np.concatenate(pooled), bins=40, density=True, color="C0", alpha=0.6)
        axes[c, 1].plot(grid, np.exp(-grid**2 / 2) / np.sqrt(2 * np.pi), "k-", lw=1)
        axes[c, 1].set_xlim(-5, 5)
    axes[-1, 0].set_xlabel("t [s]")
    figure.suptitle("Residuals (data - fit) in units of the noise")
    return _save(figure, path)


def plot_identifiability(result, path: str | pathlib.Path) -> pathlib.Path:
    """The singular values of the scaled, noise-weighted sensitivity matrix (left) and the
    parameter coefficients of the identifiable combinations (right)."""
    ident = result.identifiability
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    singular = np.asarray(ident.singular_values)
    colours = ["tab:blue" if k < ident.rank else "tab:gray" for k in range(len(singular))]
    left.bar(np.arange(1, len(singular) + 1), np.maximum(singular, 1e-300), color=colours)
    left.set_yscale("log")
    left.set_xlabel("direction k")
    left.set_ylabel("singular value s_k")
    left.set_title(f"rank {ident.rank} of {ident.n_parameters} (grey: not identifiable)")
    left.grid(alpha=0.3)
    if ident.combinations:
        matrix = np.array([[comb["coefficients"].get(name, 0.0) for name in result.names]
                           for comb in ident.combinations])
        limit = np.max(np.abs(matrix))
        image = right.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
        right.set_yticks(range(len(matrix)), [f"comb. {k + 1}" for k in range(len(matrix))])
        right.set_xticks(range(len(result.names)), result.names, rotation=70, fontsize=7)
        figure.colorbar(image, ax=right, label="coefficient")
    right.set_title("identifiable combinations")
    return _save(figure, path)


def plot_measure(result, density_path, cumulative_path, truth=None) -> list[pathlib.Path]:
    """The recovered stiffness measure as Liu draws it (Figs 3-19 to 3-34): the probability
    density (stiffness normalised to sum 1) against the position along the `[measure]` curve
    (mm), and its cumulative distribution, with the pin estimate (+- 2 standard errors) and, if
    given, the true pin `truth` (m, global `(2,)`)."""
    positions = np.asarray(result.positions) * 1e3
    probability = result.probability()
    curve = result.curve
    start = curve.points[0]
    direction = (curve.points[-1] - start) / max(np.linalg.norm(curve.points[-1] - start), 1e-300)

    def along(point):
        return float(np.dot(np.asarray(point) - start, direction)) * 1e3

    pin, error = along(result.pin), result.pin_stderr[0] * 1e3

    def decorate(axis):
        axis.axvline(pin, color="tab:red", lw=1.2, label=f"pin estimate {pin:.3f} mm")
        if np.isfinite(error) and error > 0:
            axis.axvspan(pin - 2 * error, pin + 2 * error, color="tab:red", alpha=0.15)
        if truth is not None:
            axis.axvline(along(truth), color="k", ls="--", lw=1, label="true pin")
        axis.set_xlabel("position along the measure curve [mm]")
        axis.set_xlim(0.0, curve.length * 1e3)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")

    label = f"{result.method}, {len(positions)} spring(s)"
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.vlines(positions, 0.0, probability, color="tab:blue", lw=1.5)
    axis.plot(positions, probability, "*", color="tab:blue", ms=5)
    axis.set_ylabel("probability (stiffness / total)")
    axis.set_title(f"Stiffness density ({label}); total {result.stiffness.sum():.4g} N/m")
    decorate(axis)
    density = _save(figure, density_path)
    figure, axis = plt.subplots(figsize=(7, 4))
    order = np.argsort(positions)
    xs = np.concatenate([[0.0], positions[order], [curve.length * 1e3]])
    ys = np.concatenate([[0.0], np.cumsum(probability[order]), [probability.sum()]])
    axis.step(xs, ys, where="post", color="tab:blue")
    axis.set_ylabel("cumulative distribution")
    axis.set_title(f"Cumulative stiffness ({label})")
    decorate(axis)
    return [density, _save(figure, cumulative_path)]


def plot_grid_study(results, prefix, truth=None) -> list[pathlib.Path]:
    """All grid sizes together: densities and cumulative distributions overlaid (Liu's Figs
    3-35, 3-36) and pin error, cost and run time against N (Fig 3-37). `results` is a list of
    `(N, MeasureResult, seconds)`; files are `PREFIX_density.png` (density above, cumulative
    below) and `PREFIX_error.png`."""
    prefix = str(prefix)
    colours = plt.cm.viridis(np.linspace(0, 0.9, len(results)))
    figure, (density, cumulative) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for (n, result, _), colour in zip(results, colours):
        positions = np.asarray(result.positions) * 1e3
        probability = result.probability()
        density.plot(positions, probability, "-*", color=colour, ms=3, lw=0.8, label=f"N={n}")
        cumulative.step(positions, np.cumsum(probability), where="post", color=colour,
                        label=f"N={n}")
    for axis in (density, cumulative):
        if truth is not None:
            curve = results[0][1].curve
            direction = (curve.points[-1] - curve.points[0]) / curve.length
            axis.axvline(np.dot(np.asarray(truth) - curve.points[0], direction) * 1e3,
                         color="k", ls="--", lw=1, label="true pin")
        axis.grid(alpha=0.3)
    density.set_ylabel("probability")
    cumulative.set_ylabel("cumulative")
    cumulative.set_xlabel("position along the measure curve [mm]")
    density.legend(fontsize="x-small", ncol=3)
    density.set_title("Recovered stiffness on grids of N springs")
    paths = [_save(figure, prefix + "_density.png")]
    figure, (error_axis, cost_axis, time_axis) = plt.subplots(1, 3, figsize=(13, 4))
    ns = [n for n, _, _ in results]
    if truth is not None:
        errors = [abs(r.pin[0] - truth[0]) * 1e3 for _, r, _ in results]
        error_axis.semilogx(ns, errors, "o-", base=2)
        error_axis.set_ylabel("pin error [mm]")
    cost_axis.loglog(ns, [r.cost for _, r, _ in results], "o-", base=2)
    cost_axis.set_ylabel("final cost (1/2 chi-square)")
    time_axis.semilogx(ns, [s for _, _, s in results], "o-", base=2)
    time_axis.set_ylabel("run time [s]")
    for axis in (error_axis, cost_axis, time_axis):
        axis.set_xlabel("number of springs N")
        axis.grid(alpha=0.3)
    figure.suptitle("Grid recovery of a pin against the number of springs (cf. Liu Fig 3-37)")
    paths.append(_save(figure, prefix + "_error.png"))
    return paths


def plot_stiffness_fit(fit, test, path: str | pathlib.Path) -> pathlib.Path:
    """Quasi-static test: measured against fitted generalized load per component (points on
    the diagonal fit), and the fitted matrix as an image."""
    from ._stiffness_fit import AXES, LOAD_COLUMNS, generalized_loads

    figure, axes = plt.subplots(2, 4, figsize=(15, 6.5))
    measured = generalized_loads(test, fit.exact)
    for k, axis in enumerate(axes.ravel()[:6]):
        unit = "N" if k < 3 else "N m"
        low, high = measured[:, k].min(), measured[:, k].max()
        axis.plot([low, high], [low, high], color="gray", lw=1)
        axis.plot(fit.predicted[:, k], measured[:, k], ".", ms=4)
        rms = np.sqrt(np.mean(fit.residuals[:, k] ** 2))
        axis.set_title(f"{LOAD_COLUMNS[k]}: rms misfit {rms:.3g} {unit}", fontsize=9)
        axis.set_xlabel(f"fitted K y [{unit}]")
        axis.set_ylabel(f"measured [{unit}]")
    image = axes[1, 2]
    magnitude = np.log10(np.abs(fit.matrix) + 1e-300)
    shown = image.imshow(np.where(fit.matrix != 0, magnitude, np.nan), cmap="viridis")
    image.set_xticks(range(6), AXES)
    image.set_yticks(range(6), AXES)
    image.set_title("log10 |K| (blank: zero)")
    figure.colorbar(shown, ax=image, fraction=0.046)
    axes[1, 3].axis("off")
    axes[1, 3].text(0.0, 0.5, fit.summary().splitlines()[0], fontsize=8, wrap=True,
                    va="center")
    figure.suptitle(f"stiffness matrix fit ({fit.structure}): measured vs fitted loads")
    figure.tight_layout()
    return _save(figure, path)


def plot_spine_geometry(nodes, path: str | pathlib.Path, title: str = "") -> pathlib.Path:
    """The vertebrae of a node table (`spineid.liu_vertebra_nodes()`: global positions in m)
    in a lateral (y-z) and a frontal (x-z) view, in mm: each vertebra's body outline (nodes
    1-4), its processes (nodes 5-17) as points, and the chain of origins (node 1)."""
    figure, (lateral, frontal) = plt.subplots(1, 2, figsize=(9, 8), sharey=True)
    vertebrae = list(dict.fromkeys(nodes["vertebra"]))
    positions = np.asarray(nodes["global"]) * 1e3
    origins = []
    for name in vertebrae:
        rows = positions[nodes["vertebra"] == name]
        origins.append(rows[0])
        body = rows[[0, 1, 2, 3, 0]]
        lateral.plot(body[:, 1], body[:, 2], color="tab:blue", lw=1.2)
        lateral.plot(rows[4:, 1], rows[4:, 2], ".", color="tab:orange", ms=4)
        frontal.plot(rows[4:, 0], rows[4:, 2], ".", color="tab:orange", ms=4)
        lateral.annotate(name, rows[0, 1:], textcoords="offset points", xytext=(-28, -3),
                         fontsize=7)
    origins = np.array(origins)
    lateral.plot(origins[:, 1], origins[:, 2], "k--", lw=0.8, label="origins (node 1)")
    frontal.plot(origins[:, 0], origins[:, 2], "k--", lw=0.8)
    lateral.set_xlabel("y (antero-posterior, + posterior) [mm]")
    lateral.set_ylabel("z (superior) [mm]")
    frontal.set_xlabel("x (lateral) [mm]")
    for axis in (lateral, frontal):
        axis.set_aspect("equal")
        axis.grid(alpha=0.3)
    lateral.legend(loc="lower right", fontsize="small")
    lateral.set_title("lateral view")
    frontal.set_title("frontal view")
    if title:
        figure.suptitle(title)
    return _save(figure, path)


def plot_load_laws(laws: dict, path: str | pathlib.Path, span, unit: str = "deg",
                   load_unit: str = "N m", points: dict | None = None) -> pathlib.Path:
    """Load-displacement curves of load laws (`label -> AbstractLoadLaw`, SI) over `span`
    (`(lower, upper)` in SI), with the displacement shown in `unit` (`deg` or `mm`), and
    optional data `points` (`label -> (displacement, load)`) overlaid; a second panel shows
    the tangent stiffness."""
    scale = np.degrees(1.0) if unit == "deg" else 1e3
    x = np.linspace(span[0], span[1], 600)
    figure, (load_axis, stiffness_axis) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    for label, (displacement, load) in (points or {}).items():
        load_axis.plot(np.asarray(displacement) * scale, load, ".", ms=3, alpha=0.6,
                       label=label)
    for label, law in laws.items():
        load_axis.plot(x * scale, np.asarray(law.load(x)), lw=1.6, label=label)
        stiffness_axis.plot(x * scale, np.asarray(law.stiffness(x)) / scale, lw=1.4,
                            label=label)
    load_axis.set_ylabel(f"load [{load_unit}]")
    stiffness_axis.set_ylabel(f"stiffness [{load_unit}/{unit}]")
    stiffness_axis.set_xlabel(f"displacement [{unit}]")
    for axis in (load_axis, stiffness_axis):
        axis.grid(alpha=0.3)
        axis.axhline(0.0, color="k", lw=0.5)
    load_axis.legend(fontsize="small")
    return _save(figure, path)


def plot_law_fit(fit, data, path: str | pathlib.Path, unit: str = "deg") -> pathlib.Path:
    """A `LawFit` against its data: the measured loads and the fitted law (with its nodes) over
    the displacement, the fitted load including the damper, and the residuals."""
    scale = np.degrees(1.0) if unit == "deg" else 1e3
    figure, (load_axis, residual_axis) = plt.subplots(
        2, 1, figsize=(7, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    x = np.asarray(data.displacement)
    load_axis.plot(x * scale, data.load, ".", ms=3, color="0.5", label="data")
    if fit.damping:
        load_axis.plot(x * scale, fit.predicted, lw=1.0, color="tab:green",
                       label=f"fit with damper c = {fit.damping:.3g}")
    grid = np.linspace(x.min(), x.max(), 600)
    load_axis.plot(grid * scale, np.asarray(fit.law.load(grid)), lw=1.8, color="tab:blue",
                   label=f"fitted {fit.kind} law")
    if hasattr(fit.law, "displacement"):
        nodes = np.asarray(fit.law.displacement)
        load_axis.plot(nodes * scale, np.asarray(fit.law.load(nodes)), "o", color="tab:blue",
                       ms=5, label="nodes")
    residual_axis.plot(x * scale, fit.residuals, ".", ms=3)
    residual_axis.axhline(0.0, color="k", lw=0.5)
    load_axis.set_ylabel("load")
    residual_axis.set_ylabel("fit - data")
    residual_axis.set_xlabel(f"displacement [{unit}]")
    load_axis.legend(fontsize="small")
    for axis in (load_axis, residual_axis):
        axis.grid(alpha=0.3)
    return _save(figure, path)


def _chain_outline(chain, q):
    # Per body the polygon anterior-inferior, anterior-superior, posterior-superior,
    # posterior-inferior corner (m, relative to the base point at t = 0), and the pivots.
    pivots = np.asarray(chain.pivots(0.0, q))
    corners = [np.asarray(chain.points(0.0, q, offsets)) for offsets in (
        chain.anterior_lower, chain.anterior_upper, chain.posterior_upper,
        chain.posterior_lower)]
    return pivots, np.stack(corners, axis=1)  # (n, 2), (n, 4, 2)


def plot_chain_snapshots(study, times, path: str | pathlib.Path | None = None):
    """Snapshots of the head-neck chain at `times` (s), one panel each, in the frame of the
    moving T1 (mm, x anterior, y superior; grey: the start posture): vertebrae as outlines
    through their ligament attachments, pivots joined by the links, the head as its mass
    centre with a circle (seed 001 Fig 7). Returns the PNG's path, or the figure if `path` is
    None."""
    chain, ts = study.chain, study.ts
    figure, axes = plt.subplots(1, len(times), figsize=(2.6 * len(times), 3.6), sharey=True)
    axes = np.atleast_1d(axes)

    def draw(axis, q, colour, alpha):
        pivots, corners = _chain_outline(chain, q)
        head = np.asarray(chain.points(0.0, q, chain.centres))[-1] * 1e3
        axis.plot(*(pivots * 1e3).T, "-o", color=colour, ms=2.5, lw=1, alpha=alpha)
        axis.plot(*np.vstack([pivots[-1] * 1e3, head]).T, "-", color=colour, lw=1, alpha=alpha)
        for body in corners[:-1]:
            axis.fill(*(body * 1e3).T, color=colour, alpha=0.25 * alpha, lw=0)
        axis.add_patch(plt.Circle(tuple(head), 45.0, fill=False, color=colour, alpha=alpha))
        axis.plot(*head, "o", color=colour, ms=4, alpha=alpha)

    start = np.zeros(chain.n_dof)
    for axis, time_ in zip(axes, times):
        index = int(np.argmin(np.abs(ts - time_)))
        draw(axis, start, "0.6", 0.6)
        draw(axis, np.asarray(study.check.q[index]), "tab:blue", 1.0)
        axis.set_title(f"t = {ts[index] * 1e3:.0f} ms")
        axis.set_aspect("equal")
        axis.set_xlabel("x [mm]")
        axis.set_xlim(-110, 110)
    axes[0].set_ylabel("y [mm] (relative to T1)")
    figure.suptitle("Head-neck chain in the frame of T1 (grey: start)")
    return _save(figure, path)


def plot_whiplash(study, path: str | pathlib.Path | None = None, window: float = 0.4):
    """The whiplash study on one page (seed 001 Figs 8-11): head displacement and velocity
    relative to T1, head angle, anterior and posterior ligament tensions per level over the
    first `window` seconds; kinetic energy `T_2`, work `W` and potential energy over the whole
    run; the 'kinetic energy - work' error `e_R(t)` (log scale)."""
    from ._whiplash import LEVELS

    ts = study.ts
    early = ts <= window
    ms = ts[early] * 1e3
    figure, axes = plt.subplots(2, 3, figsize=(15, 8))
    displacement = (study.head - study.head[0]) * 1e3
    axes[0, 0].plot(ms, displacement[early, 0], label="x (anterior)")
    axes[0, 0].plot(ms, displacement[early, 1], label="y (superior)")
    twin = axes[0, 0].twinx()
    twin.plot(ms, np.degrees(study.head_angle[early]), "k--", lw=1, label="head angle")
    twin.set_ylabel("head angle [deg] (+ flexion)")
    axes[0, 0].set(xlabel="t [ms]", ylabel="head displacement [mm]",
                   title="Head relative to T1 (cf. Fig 8)")
    axes[0, 0].legend(loc="lower left", fontsize="small")
    twin.legend(loc="lower right", fontsize="small")
    axes[0, 1].plot(ms, study.head_velocity[early, 0], label="x")
    axes[0, 1].plot(ms, study.head_velocity[early, 1], label="y")
    axes[0, 1].set(xlabel="t [ms]", ylabel="head velocity [m/s]", title="Head velocity rel. T1")
    axes[0, 1].legend(fontsize="small")
    colours = plt.cm.viridis(np.linspace(0, 0.9, study.ligament_forces.shape[2]))
    for level, colour in enumerate(colours):
        axes[0, 2].plot(ms, study.ligament_forces[early, 0, level], color=colour,
                        label=LEVELS[level])
        axes[1, 0].plot(ms, study.ligament_forces[early, 1, level], color=colour,
                        label=LEVELS[level])
    axes[0, 2].set(xlabel="t [ms]", ylabel="tension [N]", title="Anterior ligaments (B)")
    axes[1, 0].set(xlabel="t [ms]", ylabel="tension [N]", title="Posterior ligaments (A) "
                   "(cf. Fig 9)")
    axes[0, 2].legend(fontsize="x-small", ncol=2)
    check = study.check
    axes[1, 1].plot(ts, np.asarray(check.relative_kinetic_energy), label="T_2 (kinetic, rel. T1)")
    axes[1, 1].plot(ts, np.asarray(check.work), "--", label="W (work of all forces)")
    axes[1, 1].plot(ts, study.potential_energy, label="U - U(0) (springs, gravity)")
    axes[1, 1].set(xlabel="t [s]", ylabel="energy [J]", title="Energies (cf. Fig 10)")
    axes[1, 1].legend(fontsize="small")
    axes[1, 2].semilogy(ts, np.maximum(np.asarray(check.relative_error), 1e-17))
    axes[1, 2].axhline(0.0103, color="tab:red", ls=":", label="paper's peak (MEBDFV)")
    axes[1, 2].axhline(1e-5, color="tab:green", ls=":", label="target 1e-5")
    axes[1, 2].set(xlabel="t [s]", ylabel="e_R", title="Kinetic energy - work error (cf. Fig 11)")
    axes[1, 2].legend(fontsize="small")
    for axis in axes.ravel():
        axis.grid(alpha=0.3)
    return _save(figure, path)


def plot_segment_study(study, path: str | pathlib.Path | None = None):
    """The nine load cases of a segment like Kecskemethy et al. Fig 10: per case the main and
    coupled translations (mm) and rotations (deg) of the upper vertebra, the facet contact
    forces, and the rotational stiffness against Moroney's (via AnyBody)."""
    from ._segment import MORONEY_STIFFNESS

    figure, axes = plt.subplots(2, 2, figsize=(13, 8))
    cases = np.arange(len(study.cases))
    width = 0.26
    for block, (axis, scale, unit, labels) in enumerate(
            ((axes[0, 0], 1e3, "mm", ("dx (AP)", "dy (axial)", "dz (lateral)")),
             (axes[0, 1], 180 / np.pi, "deg", ("b1 (lat. bending)", "b2 (axial rot.)",
                                               "b3 (flex-ext)")))):
        for j in range(3):
            axis.bar(cases + (j - 1) * width, scale * study.displacements[:, 3 * block + j],
                     width, label=labels[j])
        axis.axhline(0.0, color="gray", lw=0.8)
        axis.set_xticks(cases, study.cases)
        axis.set_ylabel(f"displacement of the upper vertebra [{unit}]")
        axis.set_title(("translations" if block == 0 else "rotations")
                       + ": main (the load's own direction) and coupled")
        axis.legend(fontsize=8)
    forces = study.facet_forces
    for j in range(forces.shape[1]):
        name = study.facet_names[j] if j < len(study.facet_names) else f"facet {j}"
        axes[1, 0].bar(cases + (j - 0.5) * 0.4, forces[:, j], 0.4, label=name)
    axes[1, 0].set_xticks(cases, study.cases)
    axes[1, 0].set_ylabel("facet contact force [N]")
    axes[1, 0].set_title("facet contact (zero: the facets are apart)")
    if forces.shape[1]:
        axes[1, 0].legend(fontsize=8)
    stiffness = study.rotational_stiffness()
    names = [c for c in MORONEY_STIFFNESS if c in stiffness]
    positions = np.arange(len(names))
    axes[1, 1].bar(positions - 0.2, [stiffness[c] for c in names], 0.4, label="model")
    axes[1, 1].bar(positions + 0.2, [MORONEY_STIFFNESS[c] for c in names], 0.4,
                   label="Moroney 1988 via AnyBody")
    axes[1, 1].set_xticks(positions, names)
    axes[1, 1].set_ylabel("rotational stiffness [N m/deg]")
    axes[1, 1].set_title("moment / main rotation")
    axes[1, 1].legend(fontsize=8)
    figure.suptitle("motion segment: nine quasi-static load cases (Kecskemethy et al. Fig 10)")
    return _save(figure, path)


def plot_flat_transition(times, sin_tilt, relative_offset, path=None):
    """A disc settling on a plane (Kecskemethy et al. Fig 9): the distance of the virtual
    contact point from the disc's centre over its radius, `r / r0`, and `sin alpha` of the
    tilt, against time (s)."""
    figure, axis = plt.subplots(figsize=(8, 4))
    axis.plot(times, relative_offset, label="r / r0 (virtual contact point)")
    axis.plot(times, sin_tilt, label="sin alpha (tilt)")
    axis.set_xlabel("t [s]")
    axis.set_ylim(bottom=0)
    axis.legend()
    axis.set_title("steep-to-flat transition of a disc on a plane")
    return _save(figure, path)
