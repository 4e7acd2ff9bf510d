"""The reader of `kind = "head_neck"` model files: the head-neck chain of Fritzkowski and Walczak
on a base driven by a triangular pulse (docs/formats/model-files.md; `datasets/head_neck.toml`
shows every key).
"""

import numpy as np

from ...elements._parameters import declared_parameters, Parameter
from ...models._head_neck import HeadNeckChain, TriangularPulse, head_neck_geometry
from .._toml import DocumentChecker, simulation_settings


_HEAD_NECK_VERTEBRA_ROWS = ("body_depth", "body_height", "spinous_reach", "disc_height")


_HEAD_NECK_SCALARS = ("base_disc_height", "base_depth", "base_spinous_reach", "head_inertia")


# (document key, HeadNeckChain field); groups, units and bounds are the model's declaration
# (`HeadNeckChain.parameter_fields`), whose names are these keys.
_HEAD_NECK_PARAMETERS = (
    ("ligaments.anterior_stiffness", "k_anterior"),
    ("ligaments.posterior_stiffness", "k_posterior"),
    ("ligaments.anterior_damping", "c_anterior"),
    ("ligaments.posterior_damping", "c_posterior"),
    ("joints.stiffness", "k_joint"),
    ("joints.damping", "c_joint"),
)


def head_neck_arguments(document: dict, source: str = "<model>") -> dict:
    """Validate a `kind = "head_neck"` document (datasets/head_neck.toml shows every key) and
    return the keyword arguments of `HeadNeckChain.create`: geometry by `head_neck_geometry`,
    Table-1-like ligament and joint parameters (one value for every level), gravity `(2,)`
    (m/s^2) and the `TriangularPulse`."""
    check = DocumentChecker(source)
    check.keys(document, "", {"kind", "gravity", "ligaments", "joints", "pulse", "simulation",
                              "geometry"}, {"ligaments", "joints", "pulse", "geometry"})
    keys_of = {}  # table name -> its keys, from the parameter names "table.key"
    for name, *_ in _HEAD_NECK_PARAMETERS:
        table_name, key = name.split(".")
        keys_of.setdefault(table_name, set()).add(key)
    for table_name, keys in keys_of.items():
        check.keys(document[table_name], table_name, keys)
    values = {field: check.number(document[name.split(".")[0]], name.split(".")[1], name,
                                  minimum=0.0)
              for name, field in _HEAD_NECK_PARAMETERS}
    pulse_table = document["pulse"]
    check.keys(pulse_table, "pulse", {"peak", "t_peak", "t_end", "direction"},
               {"peak", "t_peak", "t_end"})
    t_peak = check.number(pulse_table, "t_peak", "pulse.t_peak", positive=True)
    t_end = check.number(pulse_table, "t_end", "pulse.t_end", positive=True)
    if t_end <= t_peak:
        check.fail("pulse.t_end", f"a time after pulse.t_peak = {t_peak:g} s", t_end)
    direction = check.vector(pulse_table, "direction", "pulse.direction", 2,
                             default=(1.0, 0.0))
    if abs(np.linalg.norm(direction) - 1.0) > 1e-9:
        check.fail("pulse.direction", "a unit vector", direction.tolist())
    pulse = TriangularPulse(peak=check.number(pulse_table, "peak", "pulse.peak"),
                            t_peak=t_peak, t_end=t_end, direction=tuple(direction.tolist()))
    if "simulation" in document:
        simulation_end, _ = simulation_settings(document, source)
        if simulation_end < t_end:
            check.fail("simulation.t_end", f"at least the pulse's end, pulse.t_end = {t_end:g} "
                       "s (a simulation shorter than its pulse never sees the whole impact)",
                       simulation_end)
    geometry = document["geometry"]
    check.keys(geometry, "geometry", {"bodies", "masses", "tilt_deg", "base_tilt_deg",
                                      "head_centre", "head_anterior", "head_posterior",
                                      *_HEAD_NECK_VERTEBRA_ROWS, *_HEAD_NECK_SCALARS},
               {"masses", "tilt_deg", "base_tilt_deg", "head_centre", "head_anterior",
                "head_posterior", *_HEAD_NECK_VERTEBRA_ROWS, *_HEAD_NECK_SCALARS})
    masses = check.vector(geometry, "masses", "geometry.masses", None)
    n = masses.size
    # The per-body lists must agree with the masses: a disagreement names them all, not the
    # first list read after the masses.
    expected = {"tilt_deg": n, **{name: n - 1 for name in _HEAD_NECK_VERTEBRA_ROWS}}
    wrong = {name: len(geometry[name]) for name in expected
             if isinstance(geometry.get(name), list) and len(geometry[name]) != expected[name]}
    if wrong:
        raise ValueError(
            f"{check.source}: geometry.masses has {n} values (bodies: the vertebrae and the "
            "head) but " + ", ".join(f"geometry.{name} has {length} (expected {expected[name]})"
                                     for name, length in wrong.items())
            + ": give one mass and one tilt per body and one vertebra row per body below the "
            "head")
    table = {"masses": masses,
             "tilt_deg": check.vector(geometry, "tilt_deg", "geometry.tilt_deg", n),
             "base_tilt_deg": check.number(geometry, "base_tilt_deg", "geometry.base_tilt_deg")}
    for name in _HEAD_NECK_VERTEBRA_ROWS:
        table[name] = check.vector(geometry, name, f"geometry.{name}", n - 1)
        if np.any(table[name] <= 0):
            check.fail(f"geometry.{name}", "lengths > 0", table[name].tolist())
    for name in _HEAD_NECK_SCALARS:
        table[name] = check.number(geometry, name, f"geometry.{name}", positive=True)
    for name in ("head_centre", "head_anterior", "head_posterior"):
        table[name] = check.vector(geometry, name, f"geometry.{name}", 2)
    gravity = check.vector(document, "gravity", "gravity", 2, default=np.zeros(2))
    return dict(head_neck_geometry(table), **values, gravity=gravity, pulse=pulse)


def read_head_neck(document, check, folder) -> tuple[HeadNeckChain, tuple[Parameter, ...]]:
    try:
        chain = HeadNeckChain.create(**head_neck_arguments(document, check.source))
    except ValueError as error:
        if str(error).startswith(check.source):
            raise
        raise ValueError(f"{check.source}: {error}") from None
    return chain, declared_parameters(chain)
