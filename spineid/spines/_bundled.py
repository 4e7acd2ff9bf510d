"""The bundled spines other than the pairs, built from the bundled tables: the lumbar Models 1-4
of Christophy et al. 2013 (`lumbar_spine_models`), the head-neck chain of Fritzkowski and
Walczak (`head_neck_chain`) and the L5-S1 law of Liu's thesis (`l5_s1_law`)."""

import numpy as np

from ..elements._load_laws import PiecewiseLinearLaw
from ..io._datasets import dataset_path, K_F_E, liu_l5_s1_phases
from ..io._kinds._head_neck import head_neck_arguments
from ..io._toml import read_toml
from ..models._head_neck import HeadNeckChain
from ..models._spatial_chain import SpatialChain, lumbar_models


def l5_s1_law(smoothing: float = 0.002) -> PiecewiseLinearLaw:
    """The L5-S1 phases of `liu_l5_s1_phases` as a `PiecewiseLinearLaw` (rad to N m), zero
    load in the neutral zone, with a `smoothing` width (rad, default 0.002 = 0.11 deg)."""
    phases = liu_l5_s1_phases()
    return PiecewiseLinearLaw.from_phase_table(phases["lower"], phases["upper"],
                                               phases["stiffness"], 0.0, smoothing)


def lumbar_spine_models(damping=None) -> dict[int, SpatialChain]:
    """Models 1-4 (`lumbar_models`) built from the bundled `lumbar_spine.toml` (L5 to L1
    centres from Liu 2001 Table 4-2, masses of the OpenSim lumbar model, cylinder inertia) with
    K_F^E of Christophy et al. 2013 eq 24 (`K_F_E`)."""
    table = read_toml(dataset_path("lumbar_spine.toml"))
    origins = np.asarray(table["origins_mm"], dtype=float) * 1e-3
    centres = origins[:, [1, 2, 0]]  # e1 = Y, e2 = Z, e3 = X
    masses = np.asarray(table["masses_kg"], dtype=float)
    r, h = table["cylinder_radius_m"], table["cylinder_height_m"]
    inertias = np.array([np.diag([m * (3 * r**2 + h**2) / 12, m * r**2 / 2,
                                  m * (3 * r**2 + h**2) / 12]) for m in masses])
    return lumbar_models(centres, masses, inertias, K_F_E, damping)


def head_neck_chain(document: dict | None = None, **parameters) -> HeadNeckChain:
    """The whiplash model of seed 001 from a `kind = "head_neck"` model document (default the
    bundled `datasets/head_neck.toml`: stand-in geometry, Table 1's stiffness and damping with
    ligament A posterior and B anterior as the paper's text orders them, gravity 9.81 m/s^2
    along -y, the 8.5 g pulse). `parameters` override any `HeadNeckChain.create` argument,
    e.g. `k_joint=500.0` or `pulse=TriangularPulse(peak=50.0)`."""
    path = dataset_path("head_neck.toml")
    source = str(path) if document is None else "<head_neck document>"
    document = read_toml(path) if document is None else document
    return HeadNeckChain.create(**{**head_neck_arguments(document, source), **parameters})
