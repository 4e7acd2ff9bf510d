"""Pictures of spine flexibility tests: moment-rotation curves per level, and the deformed spine
in three views."""

import pathlib

import matplotlib.pyplot as plt
import numpy as np

from ..kinematics._rotations import euler123_rotation
from ..simulation._flexibility import DIRECTIONS
from ._common import _save

_TITLES = {"lateral_bending": "lateral bending (+ right)",
           "axial_rotation": "axial rotation (+ left)",
           "flexion_extension": "flexion (-) / extension (+)"}


def plot_flexibility(test, path: str | pathlib.Path | None = None, title: str = ""):
    """Moment-rotation curves of a `FlexibilityTest`, one panel per direction, one curve per
    joint (colour from the base up), rotation in degrees against the applied moment in N m;
    unstable equilibria of a whole-spine test (`test.stable`) dotted. Saves to `path`, or
    returns the figure without one."""
    figure, axes = plt.subplots(1, 3, figsize=(14, 5), sharey=True)
    colours = plt.cm.viridis(np.linspace(0, 1, len(test.joints)))
    primary = np.degrees(test.primary())
    for d, axis in enumerate(axes):
        unstable = (np.zeros(test.moments.size, bool) if test.stable is None
                    else ~test.stable[d])
        for j, joint in enumerate(test.joints):
            axis.plot(np.where(unstable, np.nan, primary[j, d]), test.moments, color=colours[j],
                      lw=1.3, label=joint if d == 0 else None)
            if unstable.any():
                axis.plot(primary[j, d], test.moments, ":", color=colours[j], lw=1.0)
        axis.set_title(_TITLES[DIRECTIONS[d]])
        axis.set_xlabel("rotation [deg]")
        axis.axhline(0.0, color="k", lw=0.5)
        axis.axvline(0.0, color="k", lw=0.5)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("moment [N m]")
    axes[0].legend(fontsize=6, ncol=2, loc="upper left")
    heading = title or ("whole spine, moment on " + test.loaded if test.loaded
                        else "motion segments, the vertebra below fixed")
    figure.suptitle(heading)
    return _save(figure, path)


def plot_spine(chain, poses=None, path: str | pathlib.Path | None = None, labels=None,
               title: str = ""):
    """A spine (`SpatialChain`) in three views, in mm: sagittal (e1 anterior against e2
    superior), frontal (e3 right against e2) and transverse (e3 against e1), each vertebra's
    centre joined up the chain with a short tick along its anterior axis; the reference posture
    dashed, and each of `poses` (`(m, 6 n)` chain poses, labelled by `labels`) solid."""
    figure, axes = plt.subplots(1, 3, figsize=(13, 6))
    reference = np.concatenate([np.asarray(b.reference_pose) for b in chain.bodies])
    shown = [(reference, "reference", "--")]
    if poses is not None:
        poses = np.atleast_2d(np.asarray(poses))
        labels = labels or [f"pose {i}" for i in range(len(poses))]
        shown += [(pose, label, "-") for pose, label in zip(poses, labels)]
    views = [((0, 1), "sagittal", "anterior e1 [mm]", "superior e2 [mm]"),
             ((2, 1), "frontal", "right e3 [mm]", "superior e2 [mm]"),
             ((2, 0), "transverse", "right e3 [mm]", "anterior e1 [mm]")]
    base = np.asarray(chain.base_pose[:3]) * 1e3
    for number, (pose, label, style) in enumerate(shown):
        rows = pose.reshape(-1, 6)
        centres = np.vstack([base, rows[:, :3] * 1e3])
        ticks = np.array([np.asarray(euler123_rotation(r[3:]))[:, 0] for r in rows]) * 8.0
        colour = "0.5" if number == 0 else f"C{number - 1}"
        for axis, ((i, j), name, xlabel, ylabel) in zip(axes, views):
            axis.plot(centres[:, i], centres[:, j], style, color=colour, marker="o", ms=3,
                      lw=1.2, label=label)
            for centre, tick in zip(centres[1:], ticks):
                axis.plot([centre[i], centre[i] + tick[i]], [centre[j], centre[j] + tick[j]],
                          "-", color=colour, lw=1.0)
            axis.set_title(name)
            axis.set_xlabel(xlabel)
            axis.set_ylabel(ylabel)
    for axis in axes:
        axis.set_aspect("equal", adjustable="datalim")
        axis.grid(alpha=0.3)
    names = chain.body_names
    for k, row in enumerate(reference.reshape(-1, 6)):
        axes[0].annotate(names[k + 1], row[[0, 1]] * 1e3, textcoords="offset points",
                         xytext=(-22, -2), fontsize=6)
    axes[0].legend(fontsize="small")
    if title:
        figure.suptitle(title)
    return _save(figure, path)
