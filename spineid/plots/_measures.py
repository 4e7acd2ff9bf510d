"""Pictures of recovered stiffness measures, as Liu (2001) draws them (Figs 3-19 to 3-37)."""

import pathlib

import matplotlib.pyplot as plt
import numpy as np

from ._common import _save


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
