"""Pictures of the studies: the whiplash simulation, the head-neck chain's snapshots, the nine load
cases of a motion segment and the disc settling on a plane.
"""

import pathlib

import matplotlib.pyplot as plt
import numpy as np

from ..studies._segment import MORONEY_STIFFNESS
from ..studies._whiplash import LEVELS
from ._common import _save


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
