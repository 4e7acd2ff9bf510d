"""Pictures of the bundled spine database: vertebral geometry and load laws."""

import pathlib

import matplotlib.pyplot as plt
import numpy as np

from ._common import _save


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
