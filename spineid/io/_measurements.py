"""Measured data, read from files into SI arrays: trajectories of a model's observed channels,
quasi-static load-displacement tests of a motion segment (six loads and six displacements per
row) and load-displacement records of one degree of freedom.
"""

import dataclasses
import math
import pathlib
import warnings
from collections.abc import Sequence

import numpy as np

from ._tables import read_table, read_trajectory, write_table


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measured trajectory: `ts` (s, `(k,)`), `values` (`(k, c)`, SI) of the named `channels`."""

    ts: np.ndarray
    values: np.ndarray
    channels: tuple[str, ...]
    source: str = "<data>"

    @classmethod
    def from_csv(cls, path, channels: Sequence[str]) -> "Measurement":
        """Read a trajectory CSV (docs/formats/data-files.md) with the given pose channels.
        Warns (`UserWarning`) where the time column looks like milliseconds (`looks_like_ms`)."""
        ts, values = read_trajectory(path, tuple(channels))
        if looks_like_ms(ts):
            step = float(np.median(np.diff(ts)))
            warnings.warn(f"{path}: t spans {ts[-1] - ts[0]:g} s in steps of {step:g} s: if it "
                          "is in milliseconds, convert it to seconds (spineid reads SI units)",
                          stacklevel=2)
        return cls(ts, values, tuple(channels), str(path))


def looks_like_ms(ts: np.ndarray) -> bool:
    """Whether times `ts` (`(k,)`, meant in s) look like milliseconds: a record of at least 50 s
    sampled every 0.5 s or more, where spine motion records sample at tens of Hz or faster."""
    ts = np.asarray(ts, dtype=float)
    return ts.size >= 3 and ts[-1] - ts[0] >= 50.0 and float(np.median(np.diff(ts))) >= 0.5


LOAD_COLUMNS = ("Fx", "Fy", "Fz", "Mx", "My", "Mz")
DEFLECTION_COLUMNS = ("dx", "dy", "dz", "b1", "b2", "b3")


@dataclasses.dataclass
class QuasiStaticTest:
    """Load-displacement rows of a quasi-static test: `loads` `(n, 6)` (`Fx..Mz`, N and N m,
    lower-body axes, moment about the upper landmark) and `deflections` `(n, 6)` (`dx, dy, dz`
    in m, lower-body axes; `b1, b2, b3` 1-2-3 Euler angles in rad)."""

    loads: np.ndarray
    deflections: np.ndarray
    source: str = "<test>"

    def __post_init__(self):
        self.loads = np.asarray(self.loads, dtype=float)
        self.deflections = np.asarray(self.deflections, dtype=float)
        for name, array in (("loads", self.loads), ("deflections", self.deflections)):
            if array.ndim != 2 or array.shape[1] != 6:
                raise ValueError(f"{self.source}: {name} must have 6 columns, got shape "
                                 f"{array.shape}")
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{self.source}: {name} hold NaN or infinite values")
        if len(self.loads) != len(self.deflections):
            raise ValueError(f"{self.source}: {len(self.loads)} load rows but "
                             f"{len(self.deflections)} deflection rows")
        if np.any(np.abs(np.cos(self.deflections[:, 4])) < 1e-3):
            row = int(np.argmin(np.abs(np.cos(self.deflections[:, 4]))))
            raise ValueError(f"{self.source}: row {row + 1}: b2 = "
                             f"{math.degrees(self.deflections[row, 4]):.3f} deg is at the "
                             "singularity of the 1-2-3 Euler angles (+-90 deg)")


def read_quasi_static(path: str | pathlib.Path) -> QuasiStaticTest:
    """Read a quasi-static test CSV with the columns `Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3`
    (SI units: N, N m, m, rad; extra columns are ignored)."""
    columns = read_table(path, LOAD_COLUMNS + DEFLECTION_COLUMNS, min_rows=1)
    return QuasiStaticTest(np.stack([columns[c] for c in LOAD_COLUMNS], axis=1),
                           np.stack([columns[c] for c in DEFLECTION_COLUMNS], axis=1),
                           str(path))


def write_quasi_static(path: str | pathlib.Path, test: QuasiStaticTest) -> pathlib.Path:
    """Write a quasi-static test as a CSV `Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3` (SI units, 12
    significant digits), one row per load case: the file `read_quasi_static` reads."""
    columns = {name: test.loads[:, k] for k, name in enumerate(LOAD_COLUMNS)}
    columns.update({name: test.deflections[:, k] for k, name in enumerate(DEFLECTION_COLUMNS)})
    return write_table(path, columns, number_format=lambda value: f"{value:.12g}")


@dataclasses.dataclass(frozen=True)
class LoadDisplacementData:
    """A load-displacement record of one degree of freedom.

    Fields: `displacement` (m or rad, `(n,)`), `load` (N or N m, `(n,)`), `time` (s, `(n,)`,
    strictly increasing; `None` for a quasi-static table), `source` (for messages).
    """

    displacement: np.ndarray
    load: np.ndarray
    time: np.ndarray | None = None
    source: str = "<data>"

    def __post_init__(self):
        x = np.asarray(self.displacement, dtype=float)
        y = np.asarray(self.load, dtype=float)
        if x.ndim != 1 or x.shape != y.shape or x.size < 3:
            raise ValueError(f"{self.source}: displacement and load must be 1-D of equal length "
                             f">= 3, got shapes {x.shape} and {y.shape}")
        for name, values in (("displacement", x), ("load", y)):
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                raise ValueError(f"{self.source}: {name} row {bad[0] + 1} is not a finite number")
        object.__setattr__(self, "displacement", x)
        object.__setattr__(self, "load", y)
        if self.time is not None:
            t = np.asarray(self.time, dtype=float)
            if t.shape != x.shape or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
                raise ValueError(f"{self.source}: t must be finite and strictly increasing, one "
                                 f"per row")
            object.__setattr__(self, "time", t)

    def rates(self, window: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """`(x', x'')` (`(n,)` each): second-order finite differences in time, or with an odd
        `window > 1` the derivatives of local quadratic least-squares fits over `window`
        samples (Savitzky and Golay 1964; equal time steps), which keeps the noise of a
        measured `x` from swamping its rates. Needs `time`."""
        if self.time is None:
            raise ValueError(f"{self.source}: a damper or an inertia needs the time column t")
        velocity = np.gradient(self.displacement, self.time, edge_order=2)
        acceleration = np.gradient(velocity, self.time, edge_order=2)
        if window <= 1:
            return velocity, acceleration
        steps = np.diff(self.time)
        if window % 2 == 0 or window > self.time.size:
            raise ValueError(f"rate window {window}: expected an odd number of samples at most "
                             f"{self.time.size}")
        if np.ptp(steps) > 1e-9 * steps.mean():
            raise ValueError(f"{self.source}: a rate window needs equally spaced times")
        half = window // 2
        offsets = np.arange(-half, half + 1) * steps.mean()
        # Rows of the pseudo-inverse of [1, s, s^2]: value, slope and half the curvature.
        weights = np.linalg.pinv(np.vander(offsets, 3, increasing=True))
        inner = slice(half, self.time.size - half)
        windows = np.lib.stride_tricks.sliding_window_view(self.displacement, window)
        velocity[inner] = windows @ weights[1]
        acceleration[inner] = 2.0 * windows @ weights[2]
        return velocity, acceleration


def read_load_displacement(path) -> LoadDisplacementData:
    """Read a CSV with the columns `displacement` and `load` (SI: m or rad, N or N m) and an
    optional `t` (s); other columns are ignored (docs/formats/data-files.md). Bad rows raise
    `ValueError` naming the line and column."""
    columns = read_table(path, ("displacement", "load"), optional=("t",), others="ignore",
                         min_rows=1)
    return LoadDisplacementData(columns["displacement"], columns["load"], columns.get("t"),
                                str(path))
