"""Bundled data: the files shipped inside the package (`spineid/datasets` in a wheel), found by
name (`dataset_path`), and its tables read as labelled columns in SI (`DataTable`). The models
built from them are `spineid.spines`'."""

import dataclasses
import importlib.resources
import pathlib

import numpy as np

from ._tables import read_table


def dataset_path(name: str) -> pathlib.Path:
    """Path of a bundled data file or folder, e.g. `dataset_path("liu_8_springs.toml")`,
    `dataset_path("lab_shear_tests")`.

    Looks in the installed package first and then in the source tree's `datasets/` folder;
    an unknown name raises `ValueError` listing the files that exist.
    """
    candidates = [
        pathlib.Path(str(importlib.resources.files("spineid"))) / "datasets",
        pathlib.Path(__file__).resolve().parents[2] / "datasets",
    ]
    for folder in candidates:
        if (folder / name).exists():
            return folder / name
    available = sorted(
        {p.name for folder in candidates if folder.is_dir() for p in folder.iterdir()}
    )
    raise ValueError(f"unknown dataset {name!r}; bundled files are {available}")


@dataclasses.dataclass(frozen=True)
class DataTable:
    """A bundled table as labelled columns: `columns` (name -> `np.ndarray`, numbers in SI
    units; text columns as arrays of `str`), `units` (name -> unit), `source` (the reference
    and table), `notes` (what the loader converted, and where the transcription notes are).
    `table["name"]` is a column; `len(table)` the number of rows."""

    columns: dict
    units: dict
    source: str
    notes: str = ""

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; the columns are {list(self.columns)}")
        return self.columns[name]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))


def _read_csv(name: str, text: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    # A bundled table: its `text` columns as strings, every other column as numbers.
    return read_table(dataset_path(name), text=text, min_rows=1)


_MM = 1e-3


_LIU = "J. Liu, MS thesis, University of Florida (2001)"


_LIU_NOTES = ("transcribed exactly as printed (mm, deg) and converted to SI here; suspected "
              "typos of the source are listed, not fixed, in datasets/liu2001/TRANSCRIPTION.md")


def liu_scoliosis_curve() -> DataTable:
    """Liu 2001 Table 4-1: per vertebra (L5..T1, 17 rows) the sagittal orientation (rad), the
    vertebra height (m) and the inferior disc height (m)."""
    raw = _read_csv("liu2001/scoliosis_curve.csv", ("vertebra",))
    return DataTable(
        columns={"vertebra": np.array(raw["vertebra"]),
                 "sagittal_orientation": np.radians(np.array(raw["sagittal_orientation_deg"],
                                                             float)),
                 "vertebra_height": _MM * np.array(raw["vertebra_height_mm"], float),
                 "inferior_disc_height": _MM * np.array(raw["inferior_disc_height_mm"], float)},
        units={"vertebra": "", "sagittal_orientation": "rad", "vertebra_height": "m",
               "inferior_disc_height": "m"},
        source=f"{_LIU}, Table 4-1 (scoliosis curve data)", notes=_LIU_NOTES)


def liu_origin_nodes() -> DataTable:
    """Liu 2001 Table 4-2: the origin node of each vertebra's local system (L5..T1) in the
    spine's global system, `position` `(17, 3)` in m."""
    raw = _read_csv("liu2001/origin_nodes.csv", ("vertebra",))
    position = _MM * np.array([raw[f"global_{a}_mm"] for a in "xyz"], float).T
    return DataTable(columns={"vertebra": np.array(raw["vertebra"]), "position": position},
                     units={"vertebra": "", "position": "m"},
                     source=f"{_LIU}, Table 4-2 (coordinates of origin nodes)", notes=_LIU_NOTES)


def liu_vertebra_nodes() -> DataTable:
    """Liu 2001 Tables A1-A17: 17 primary nodes per vertebra (L5..T1, 289 rows): `table`,
    `vertebra`, `node` (1..17), `local` and `global` positions `(289, 3)` in m.

    Axes of the tables (checked against the heights of Table 4-1; TRANSCRIPTION.md): x lateral,
    y antero-posterior (+y posterior), z superior; node 1 is the anterior mid-height point of
    the vertebral body, the local origin."""
    raw = _read_csv("liu2001/vertebra_nodes.csv", ("table", "vertebra"))
    return DataTable(
        columns={"table": np.array(raw["table"]), "vertebra": np.array(raw["vertebra"]),
                 "node": np.array(raw["node"], int),
                 "local": _MM * np.array([raw[f"local_{a}_mm"] for a in "xyz"], float).T,
                 "global": _MM * np.array([raw[f"global_{a}_mm"] for a in "xyz"], float).T},
        units={"table": "", "vertebra": "", "node": "", "local": "m", "global": "m"},
        source=f"{_LIU}, Appendix A, Tables A1-A17 (geometry of modeling nodes)",
        notes=_LIU_NOTES)


def liu_implant_nodes() -> DataTable:
    """Liu 2001 Tables B1-B17: 10 screw and hook attachment points per vertebra (170 rows):
    `table`, `vertebra`, `node`, `local` `(170, 3)` in m (local system of Tables A)."""
    raw = _read_csv("liu2001/implant_nodes.csv", ("table", "vertebra"))
    return DataTable(
        columns={"table": np.array(raw["table"]), "vertebra": np.array(raw["vertebra"]),
                 "node": np.array(raw["node"], int),
                 "local": _MM * np.array([raw[f"local_{a}_mm"] for a in "xyz"], float).T},
        units={"table": "", "vertebra": "", "node": "", "local": "m"},
        source=f"{_LIU}, Appendix B, Tables B1-B17 (attaching positions of screws and hooks)",
        notes=_LIU_NOTES)


def liu_l5_s1_phases() -> DataTable:
    """Liu 2001 section 4.3: the five stiffness phases of the L5-S1 flexion-extension law:
    `lower`, `upper` (rad), `stiffness` (N m/rad) per phase.

    As printed: bounds in degrees and stiffness as "load change / phase width", e.g. 5/0.8,
    with the unit printed as Nm/mm where Nm/deg is meant; phase 3 (-1.7 to 1.7 deg) is the
    neutral zone of zero stiffness. The printed "initial condition" of each phase is its lower
    bound (garbled in the source for phases 1-3). `l5_s1_law()` turns the phases into a law."""
    raw = _read_csv("liu2001/l5_s1_phases.csv")
    lower = np.array(raw["lower_deg"], float)
    upper = np.array(raw["upper_deg"], float)
    stiffness = np.array(raw["load_change_nm"], float) / (upper - lower)
    return DataTable(
        columns={"phase": np.array(raw["phase"], int), "lower": np.radians(lower),
                 "upper": np.radians(upper), "stiffness": np.degrees(stiffness)},
        units={"phase": "", "lower": "rad", "upper": "rad", "stiffness": "N m/rad"},
        source=f"{_LIU}, section 4.3 (L5-S1 two-body demonstration)",
        notes="stiffness printed in N m per degree (labelled Nm/mm in the source)")


def fritzkowski_parameters() -> DataTable:
    """Fritzkowski and Walczak, Table 1: the joint parameters of the head-neck model (`symbol`,
    `value` in SI, `unit`, `description`; the same values at every level)."""
    raw = _read_csv("fritzkowski_table1.csv", ("symbol", "unit", "description"))
    return DataTable(
        columns={"symbol": np.array(raw["symbol"]), "value": np.array(raw["value"], float),
                 "unit": np.array(raw["unit"]), "description": np.array(raw["description"])},
        units={"symbol": "", "value": "see unit", "unit": "", "description": ""},
        source="Fritzkowski and Walczak, Table 1", notes="see datasets/fritzkowski_table1.md")


def christophy_stiffness() -> DataTable:
    """Christophy et al. 2013: the experimental stiffness matrix `K_F^E` (eq 24, `(6, 6)`,
    order `[tx, ty, tz, rx, ry, rz]`: N/m, N/rad, N m/rad) and its diagonal `K_D^E` (eq 25)."""
    return DataTable(
        columns={"K_F_E": np.array(K_F_E), "K_D_E": np.diag(np.diag(K_F_E))},
        units={"K_F_E": "N/m, N/rad, N m/rad", "K_D_E": "N/m, N m/rad"},
        source="Christophy et al., Multibody Syst Dyn 30:413 (2013), eqs 24-25")


K_F_E = np.array([
    [500000.0, 0.0, 0.0, 0.0, 0.0, 11000.0],
    [0.0, 2500000.0, 0.0, 0.0, 0.0, -5000.0],
    [0.0, 0.0, 500000.0, -12000.0, 13500.0, 0.0],
    [0.0, 0.0, -12000.0, 400.0, -300.0, 0.0],
    [0.0, 0.0, 13500.0, -300.0, 850.0, 0.0],
    [11000.0, -5000.0, 0.0, 0.0, 0.0, 600.0],
])
"""K_F^E, the full experimental lumbar stiffness matrix of Christophy et al. 2013 eq 24 (N/m,
N/rad, N m/rad; `[tx, ty, tz, rx, ry, rz]`); its diagonal is K_D^E (eq 25)."""
