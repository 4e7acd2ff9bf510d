"""Pictures of planar pairs: their motion and their springs."""

import pathlib

import matplotlib.pyplot as plt
import numpy as np

from ..kinematics._planar import body_point_position
from ..models._planar_pair import PlanarPair
from ._common import _save


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
        attached = element.attachment_points(lower, upper)
        if attached is None:
            continue  # no points to draw (a torsion spring)
        a, b = (np.asarray(points) * 1e3 for points in attached)
        stiffness = np.asarray(element.stiffness)
        if np.allclose(a, b):  # springs at a material point: vector springs
            size = 20 + 200 * stiffness / max(stiffness.max(), 1e-300)
            sketch.scatter(a[:, 0], a[:, 1], s=size, color="tab:red", alpha=0.7,
                           label="vector springs (size ~ stiffness)")
            measure.stem(a[:, 0], stiffness, linefmt="tab:red", markerfmt="o",
                         basefmt=" ", label="vector springs")
        else:  # springs along a line: axial springs
            for i, (start, end) in enumerate(zip(a, b)):
                sketch.plot([start[0], end[0]], [start[1], end[1]], color="tab:green", lw=2,
                            label="axial springs" if i == 0 else None)
            measure.stem((a[:, 0] + b[:, 0]) / 2, stiffness,
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
