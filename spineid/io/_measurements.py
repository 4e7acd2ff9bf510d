"""Measured data, read from files into SI arrays: trajectories of a model's observed channels,
quasi-static load-displacement tests of a motion segment (six loads and six displacements per
row) and load-displacement records of one degree of freedom.
"""

import dataclasses
import math
import pathlib
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .._arrays import floats
from ..kinematics._markers import body_coordinates, relative_poses, rigid_poses
from ..kinematics._rotations import euler123_angles, euler123_rotation
from ._columns import STORAGE_SUFFIXES, UNITS, read_quantities, state_label, storage_table
from ._c3d import read_c3d
from ._storage import MarkerTrajectories, read_trc
from ._tables import has_columns, read_table, read_trajectory, write_table


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measured trajectory: `ts` (s, `(k,)`), `values` (`(k, c)`, SI; `NaN` where a value was
    not measured: a gap, or a channel not recorded) of the named `channels`;
    `read_as`: for data read from a file with its own column names or units, which column
    and unit each channel came from (`ColumnsRead.read_as`), else `None`."""

    ts: np.ndarray
    values: np.ndarray
    channels: tuple[str, ...]
    source: str = "<data>"
    read_as: dict | None = None

    def __post_init__(self):
        # Checked as it is made, in one sentence naming the source: numbers, one value per
        # sample and channel, finite times strictly increasing, distinct channel names.
        where = self.source
        channels = self.channels
        if not isinstance(channels, str):
            channels = tuple(channels)  # (an iterator is read once)
        if isinstance(channels, str) or not all(isinstance(c, str) and c for c in channels):
            raise ValueError(f"{where}: channels {channels!r}: expected a sequence of names, "
                             "e.g. ('x', 'y', 'theta')")
        if len(set(channels)) != len(channels):
            raise ValueError(f"{where}: channels {list(channels)}: a name is repeated")
        try:
            ts = np.asarray(self.ts, dtype=float)
            values = np.asarray(self.values, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: ts and values must be numbers") from None
        if ts.ndim != 1:
            raise ValueError(f"{where}: ts has shape {ts.shape}; expected the sample times "
                             "(k,), s")
        if values.shape != (ts.size, len(channels)):
            raise ValueError(f"{where}: values have shape {values.shape}; expected ({ts.size}, "
                             f"{len(channels)}): one row per time, one column per channel "
                             f"{list(channels)}")
        if not np.all(np.isfinite(ts)):
            raise ValueError(f"{where}: the times must be finite (sample "
                             f"{int(np.argmin(np.isfinite(ts))) + 1} is not)")
        if np.any(np.diff(ts) <= 0):
            raise ValueError(f"{where}: the times must be strictly increasing (sample "
                             f"{int(np.argmax(np.diff(ts) <= 0)) + 2} is not after the one "
                             "before)")
        object.__setattr__(self, "ts", ts)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "channels", channels)

    @classmethod
    def from_file(cls, path, channels: Sequence[str], units: Sequence[str], *,
                  columns: Mapping[str, str] | None = None,
                  column_units: Mapping[str, str] | None = None,
                  tables: dict | None = None) -> "Measurement":
        """Read a trajectory from a CSV table or an OpenSim storage file (`.sto`, `.mot`) with
        its own column names and units (`read_quantities`): `channels` with their SI `units`
        (a model's `observable_names` and `observable_units`), and the time `t`; `columns`
        maps a channel (or `t`) to the file's column, `column_units` gives units by channel or
        column; `tables` keeps a storage file's table read once (`read_quantities`). An empty
        cell or `NaN` of a channel is a value not measured (NaN). Warns, as `from_csv`, where
        the time looks like milliseconds."""
        wanted = {"t": "s", **dict(zip(channels, units))}
        read = read_quantities(path, wanted, columns=columns, units=column_units,
                               missing=channels, tables=tables)
        ts = read.values["t"]
        if looks_like_ms(ts) and read.read_as["t"]["unit"] == "s":
            _warn_ms(path, ts)
        values = np.stack([read.values[c] for c in channels], axis=1)
        return cls(ts, values, tuple(channels), str(path), read.read_as)

    @classmethod
    def from_markers(cls, markers: MarkerTrajectories, channels: Sequence[str], *,
                     upper: Mapping[str, Sequence[float]],
                     lower: Mapping[str, Sequence[float]] | None = None) -> "Measurement":
        """The upper body's pose relative to the lower body, from motion-capture markers
        (`spineid.kinematics.rigid_poses`: a least-squares rigid fit of each body's cluster
        per frame), as the channels of a planar (`x, y, theta`: the plane is the lower body's
        x-y plane) or spatial pair (`x, y, z, a1, a2, a3`, 1-2-3 Euler angles).

        **Arguments:** `markers` (`spineid.read_trc`); `upper`, `lower`: marker name -> its
        body coordinates (m, `(3,)`), at least three markers not on one line per body; without
        `lower` the laboratory is the lower body. Frames where a body has fewer than three
        markers seen (gaps) are dropped, with a warning that counts them.

        **Returns:** a `Measurement` (`read_as` says which markers made each body and how many
        frames were dropped). Raises `ValueError` for a marker not in the file (listing those
        present), channels of another model, or fewer than two frames left.
        """
        channels = tuple(channels)
        if channels not in (("x", "y", "theta"), ("x", "y", "z", "a1", "a2", "a3")):
            raise ValueError(f"{markers.source}: markers give the pose of a planar (x, y, theta) "
                             f"or spatial pair (x, y, z, a1, a2, a3), not channels {channels}")
        poses = []
        for body, cluster in (("upper", upper), ("lower", lower)):
            if cluster is None:
                poses.append((None, None, np.ones(markers.time.size, bool)))
                continue
            absent = [name for name in cluster if name not in markers.markers]
            if absent:
                raise ValueError(f"{markers.source}: {body} body markers {absent} are not in "
                                 f"the file; its markers: {list(markers.markers)}")
            coordinates = np.array([cluster[name] for name in cluster], dtype=float)
            seen = np.stack([markers.markers[name] for name in cluster], axis=1)
            rotation, position, _, valid = rigid_poses(coordinates, seen)
            poses.append((rotation, position, valid))
        (r_upper, p_upper, v_upper), (r_lower, p_lower, v_lower) = poses
        keep = v_upper & v_lower
        dropped = int(np.sum(~keep))
        if keep.sum() < 2:
            raise ValueError(f"{markers.source}: {keep.sum()} frame(s) where every body has "
                             "three markers seen (not on one line); at least 2 are needed")
        if dropped:
            warnings.warn(f"{markers.source}: {dropped} of {keep.size} frames dropped: a body "
                          "had fewer than three of its markers seen there (gaps)", stacklevel=2)
        rotation, position = relative_poses(
            r_upper[keep], p_upper[keep], None if r_lower is None else r_lower[keep],
            None if p_lower is None else p_lower[keep])
        if channels == ("x", "y", "theta"):
            theta = np.unwrap(np.arctan2(rotation[:, 1, 0], rotation[:, 0, 0]))
            values = np.column_stack([position[:, 0], position[:, 1], theta])
        else:
            angles = np.column_stack([
                np.arctan2(-rotation[:, 1, 2], rotation[:, 2, 2]),
                np.arctan2(rotation[:, 0, 2], np.hypot(rotation[:, 0, 0], rotation[:, 0, 1])),
                np.arctan2(-rotation[:, 0, 1], rotation[:, 0, 0])])  # (as euler123_angles)
            values = np.column_stack([position, np.unwrap(angles, axis=0)])
        read_as = {"markers": {"upper": list(upper), "lower": None if lower is None
                               else list(lower)},
                   "frames": {"read": int(keep.size), "dropped": dropped}}
        return cls(markers.time[keep], values, channels, markers.source, read_as)

    @classmethod
    def from_csv(cls, path, channels: Sequence[str]) -> "Measurement":
        """Read a trajectory CSV (docs/formats/data-files.md) with the given pose channels.
        Warns (`UserWarning`) where the time column looks like milliseconds (`looks_like_ms`)."""
        ts, values = read_trajectory(path, tuple(channels))
        if looks_like_ms(ts):
            _warn_ms(path, ts)
        return cls(ts, values, tuple(channels), str(path))


MARKER_SUFFIXES = (".trc", ".c3d")
"""Suffixes of the marker files `read_markers` reads."""


def read_markers(path) -> MarkerTrajectories:
    """The markers of a `.trc` (`read_trc`) or `.c3d` (`read_c3d`, an optional extra) file,
    chosen by the suffix: positions in m, NaN where a marker is not seen."""
    if pathlib.Path(path).suffix.lower() == ".c3d":
        return read_c3d(path)
    return read_trc(path)


def read_measurement(path, channels: Sequence[str], units: Sequence[str], *,
                     columns: Mapping[str, str] | None = None,
                     column_units: Mapping[str, str] | None = None,
                     markers: Mapping[str, Sequence[str]] | None = None,
                     initial: Sequence[float] | None = None,
                     own_markers: bool = False, parsed: dict | None = None) -> Measurement:
    """A trajectory file read for a model's `channels` (SI `units`): a CSV with spineid's own
    column names in SI (`Measurement.from_csv`), or, with `columns` or `column_units` given,
    for an OpenSim storage file (`.sto`, `.mot`), or for a CSV without a column of some channel's
    own name (its `NAME_UNIT` columns, `x_mm`, `theta_deg`, are found and converted without
    options), a file with its own names and units (`Measurement.from_file`),
    or a marker file (`.trc`, `.c3d`) with `markers` (`{"upper": names, "lower": names}`,
    `lower` optional) and the model's `initial` channel values (`markers_measurement`), or,
    with `own_markers` (a model observing markers of its own, `<marker>_x`, ...), by
    `marker_channels` (from the file's markers already read, where `parsed` holds them:
    `{path: MarkerTrajectories}`, as `own_markers_seen` fills it). `markers` given for a file
    that holds no markers is refused. A storage file's table read here is kept in `parsed`
    too (`{path: StorageTable}`), for `states_start` to read the start from."""
    suffix = pathlib.Path(path).suffix.lower()
    if suffix in MARKER_SUFFIXES:
        if own_markers:
            return marker_channels(path, channels, (parsed or {}).get(str(path)))
        if not markers:
            raise ValueError(f"{path}: a marker file ({suffix}) needs the markers of each body: "
                             "--markers 'upper=A,B,C[;lower=D,E,F]' (or a model with markers "
                             "of its own: an OpenSim MarkerSet)")
        if initial is None:
            raise ValueError(f"{path}: a marker file needs the model's initial pose")
        return markers_measurement(path, channels, markers, initial)
    if markers:
        raise ValueError(f"{path}: markers {dict(markers)} given for a file that is not a marker "
                         f"file ({', '.join(MARKER_SUFFIXES)}): its columns are the channels")
    # (a file without the channels' own names, e.g. `x_mm`, read as a tester's file)
    if columns or column_units or pathlib.Path(path).suffix.lower() in STORAGE_SUFFIXES or \
            not has_columns(path, ("t", *channels)):
        return Measurement.from_file(path, channels, units, columns=columns,
                                     column_units=column_units, tables=parsed)
    return Measurement.from_csv(path, channels)


def own_markers_seen(model, paths, parsed: dict | None = None) -> list[str]:
    """The names of `model`'s markers that every marker file of `paths` holds (a fit observes
    those; a warning names the model's markers left out); each file read is kept in `parsed`
    (`{str(path): MarkerTrajectories}`) where one is given, so that it is read once. Raises
    `ValueError` when `paths` mix marker files with others, or no marker of the model is in
    them."""
    suffixes = {pathlib.Path(p).suffix.lower() in MARKER_SUFFIXES for p in paths}
    if len(suffixes) > 1:
        raise ValueError(f"{[str(p) for p in paths]}: marker files (.trc, .c3d) and other data "
                         "files in one fit; a model observes either its markers or its "
                         "coordinates")
    names = [marker.name for marker in model.markers]
    seen = list(names)
    for path in paths:
        trajectories = read_markers(path)
        if parsed is not None:
            parsed[str(path)] = trajectories
        held = trajectories.markers
        if not any(name in held for name in names):
            raise ValueError(f"{path}: none of the model's markers {names} is in the file; "
                             f"its markers: {list(held)}")
        seen = [name for name in seen if name in held]
    if not seen:
        raise ValueError(f"{[str(p) for p in paths]}: no marker of the model is in every file")
    if len(seen) < len(names):
        warnings.warn(f"markers {[n for n in names if n not in seen]} of the model are not in "
                      f"the data ({', '.join(map(str, paths))}): not observed", stacklevel=2)
    return seen


def marker_channels(path, channels: Sequence[str], trajectories=None) -> Measurement:
    """The channels `<marker>_x`, `_y`, `_z` (m, the file's laboratory axes) of a marker file
    (`read_markers`, or its `trajectories` already read), as a model that observes its own
    markers names them (`MultibodyTree.observing_markers`); a marker not seen in a frame is a
    value not measured (NaN). Raises `ValueError` naming the model's markers the file lacks
    and listing its own."""
    trajectories = read_markers(path) if trajectories is None else trajectories
    wanted = [channel.rsplit("_", 1) for channel in channels]
    absent = sorted({name for name, _ in wanted if name not in trajectories.markers})
    if absent:
        raise ValueError(f"{path}: the model's markers {absent} are not in the file; its "
                         f"markers: {list(trajectories.markers)}")
    values = np.column_stack([trajectories.markers[name][:, "xyz".index(axis)]
                              for name, axis in wanted])
    read_as = {"markers": {"model": sorted({name for name, _ in wanted})},
               "units": trajectories.units,
               "unseen": int(np.sum(np.isnan(values).any(axis=1)))}
    return Measurement(trajectories.time, values, tuple(channels), str(path), read_as)


def describe_markers(read_as: dict) -> str:
    """What a measurement read from a marker file was made of, in words (its `read_as`): the
    markers of each body and the frames dropped (`Measurement.from_markers`), or the model's
    own markers, their unit and the frames with one not seen (`marker_channels`)."""
    bodies = read_as["markers"]
    if "model" in bodies:
        return (f"the model's markers {', '.join(bodies['model'])} ({read_as['units']}, in m); "
                f"{read_as['unseen']} frame(s) with one not seen (gaps: not measured)")
    return (f"the upper body's pose from markers {', '.join(bodies['upper'])}"
            + (f" relative to the lower body's {', '.join(bodies['lower'])}"
               if bodies["lower"] else " in the laboratory")
            + f"; {read_as['frames']['dropped']} of {read_as['frames']['read']} frames "
            "dropped (gaps)")


def markers_measurement(path, channels: Sequence[str], markers: Mapping[str, Sequence[str]],
                        initial: Sequence[float]) -> Measurement:
    """The upper body's pose from a marker file (`.trc`, `read_trc`; `.c3d`, `read_c3d`) by
    `Measurement.from_markers`, the markers' body coordinates taken from the first frame in
    which every named marker is seen: there the upper body is taken to be at the model's
    initial pose `initial` (its channel values: `x, y, theta` or `x, y, z, a1, a2, a3`,
    relative to the lower body) at t = 0 (earlier frames dropped and the times shifted, with a
    warning) and the lower body's frame to be the laboratory's. The angles are made continuous
    from the initial values. The marker noise of that one frame becomes a constant offset of
    every pose (about the noise itself): a static trial to take the coordinates from is not
    supported yet."""
    trajectories = read_markers(path)
    unknown = sorted(set(markers) - {"upper", "lower"})
    if unknown or "upper" not in markers:
        raise ValueError(f"--markers: bodies {sorted(markers)}: expected upper (and lower)")
    names = [name for body in ("upper", "lower") for name in markers.get(body, ())]
    absent = [name for name in names if name not in trajectories.markers]
    if absent:
        raise ValueError(f"{path}: markers {absent} are not in the file; its markers: "
                         f"{list(trajectories.markers)}")
    seen = np.stack([trajectories.markers[name] for name in names], axis=1)  # (k, m, 3)
    complete = np.flatnonzero(np.all(np.isfinite(seen), axis=(1, 2)))
    if complete.size == 0:
        raise ValueError(f"{path}: no frame in which all of {names} are seen: the markers' "
                         "body coordinates come from such a frame")
    reference = int(complete[0])
    first = seen[reference]
    initial = np.asarray(initial, dtype=float)
    if tuple(channels) == ("x", "y", "theta"):
        c, s = math.cos(initial[2]), math.sin(initial[2])
        rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        position = np.array([initial[0], initial[1], 0.0])
    elif tuple(channels) == ("x", "y", "z", "a1", "a2", "a3"):
        rotation, position = np.asarray(euler123_rotation(initial[3:])), initial[:3]
    else:
        raise ValueError(f"{path}: markers give the pose of a planar (x, y, theta) or spatial "
                         f"pair (x, y, z, a1, a2, a3), not channels {tuple(channels)}")
    upper = list(markers["upper"])
    body = body_coordinates(first[:len(upper)], rotation, position)
    lower = markers.get("lower")
    start = float(trajectories.time[reference])
    if reference or start != 0.0:
        # The reference frame is the model's initial state, simulated from t = 0.
        warnings.warn(f"{path}: the markers' body coordinates come from frame {reference + 1} "
                      f"(t = {start:g} s, the first that sees them all), taken as the model's "
                      f"initial pose at t = 0: the frames before it are dropped and the times "
                      f"shifted by {-start:g} s", stacklevel=2)
        kept = np.arange(trajectories.time.size) >= reference
        trajectories = dataclasses.replace(
            trajectories, time=trajectories.time[kept] - start,
            markers={name: xyz[kept] for name, xyz in trajectories.markers.items()})
    measurement = Measurement.from_markers(
        trajectories, channels, upper=dict(zip(upper, body)),
        lower=None if not lower else dict(zip(lower, first[len(upper):])))
    # Angles continuous from the model's initial values (not folded into (-pi, pi]).
    angles = [i for i, unit in enumerate(units_of_pose(channels)) if unit == "rad"]
    values = measurement.values.copy()
    turns = np.round((initial[angles] - values[0, angles]) / (2 * np.pi))
    values[:, angles] += 2 * np.pi * turns
    return dataclasses.replace(measurement, values=values)


def units_of_pose(channels: Sequence[str]) -> tuple[str, ...]:
    """The SI units of a pair's pose channels: m for `x, y, z`, rad for the angles."""
    return tuple("m" if channel in ("x", "y", "z") else "rad" for channel in channels)


def _warn_ms(path, ts):
    step = float(np.median(np.diff(ts)))
    warnings.warn(f"{path}: t spans {ts[-1] - ts[0]:g} s in steps of {step:g} s: if it is in "
                  "milliseconds, convert it to seconds (spineid reads SI units) or give its "
                  "unit (--units t=ms)", stacklevel=3)


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
    read_as: dict | None = None

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


# The SI unit of each column of a quasi-static test.
QUASI_STATIC_UNITS = dict(zip(LOAD_COLUMNS + DEFLECTION_COLUMNS,
                              ("N",) * 3 + ("N m",) * 3 + ("m",) * 3 + ("rad",) * 3))


def read_quasi_static(path: str | pathlib.Path, *, columns: Mapping[str, str] | None = None,
                      units: Mapping[str, str] | None = None) -> QuasiStaticTest:
    """Read a quasi-static test CSV with the columns `Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3`
    (SI units: N, N m, m, rad; extra columns are ignored). A tester's file with its own
    column names and units (`read_quantities`): `columns` maps these names to its columns,
    `units` gives units by name or column; without them, a file lacking a plain name is read
    so too (its `Fx_N`, `dx_mm` columns found by their names)."""
    if not columns and not units and has_columns(path, LOAD_COLUMNS + DEFLECTION_COLUMNS):
        table = read_table(path, LOAD_COLUMNS + DEFLECTION_COLUMNS, min_rows=1)
        read_as = None
    else:
        read = read_quantities(path, QUASI_STATIC_UNITS, columns=columns, units=units,
                               min_rows=1)
        table, read_as = read.values, read.read_as
    return QuasiStaticTest(np.stack([table[c] for c in LOAD_COLUMNS], axis=1),
                           np.stack([table[c] for c in DEFLECTION_COLUMNS], axis=1),
                           str(path), read_as)


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
    strictly increasing; `None` for a quasi-static table), `source` (for messages), `read_as`
    (which column and unit each came from, for a file with its own: `ColumnsRead.read_as`).
    Refused in one sentence: fewer than 3 rows, a value not finite, a displacement that never
    changes (no law can be read from it), times not strictly increasing (naming the rows).
    """

    displacement: np.ndarray
    load: np.ndarray
    time: np.ndarray | None = None
    source: str = "<data>"
    read_as: dict | None = None

    def __post_init__(self):
        x = np.asarray(self.displacement, dtype=float)
        y = np.asarray(self.load, dtype=float)
        if x.ndim != 1 or x.shape != y.shape:
            raise ValueError(f"{self.source}: displacement and load must be 1-D of equal length "
                             f"(one row each), got shapes {x.shape} and {y.shape}")
        if x.size < 3:
            raise ValueError(f"{self.source}: {x.size} data row(s); a load-displacement test "
                             "needs at least 3")
        for name, values in (("displacement", x), ("load", y)):
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                raise ValueError(f"{self.source}: {name} row {bad[0] + 1} is not a finite number")
        if np.ptp(x) == 0:
            raise ValueError(f"{self.source}: the displacement does not vary (the same in every "
                             "row); a load law needs loads at several displacements")
        object.__setattr__(self, "displacement", x)
        object.__setattr__(self, "load", y)
        if self.time is not None:
            t = np.asarray(self.time, dtype=float)
            if t.shape != x.shape or not np.all(np.isfinite(t)):
                raise ValueError(f"{self.source}: t must be finite, one per row")
            back = np.flatnonzero(np.diff(t) <= 0)
            if back.size:
                raise ValueError(f"{self.source}: t must be strictly increasing; row "
                                 f"{back[0] + 2} (t = {t[back[0] + 1]:g}) does not follow row "
                                 f"{back[0] + 1} (t = {t[back[0]]:g})")
            object.__setattr__(self, "time", t)


def read_load_displacement(path, *, displacement: str | None = None, load: str | None = None,
                           time: str | None = None,
                           units: Mapping[str, str] | None = None) -> LoadDisplacementData:
    """Read a CSV with the columns `displacement` and `load` (SI: m or rad, N or N m) and an
    optional `t` (s); other columns are ignored (docs/formats/data-files.md). Bad rows raise
    `ValueError` naming the line and column.

    A tester's file with its own column names and units (`read_quantities`): `displacement`,
    `load` and `time` name its columns, `units` gives units by quantity (`displacement`,
    `load`, `t`) or column; without them, a file whose columns are named `NAME_UNIT`
    (`displacement_mm`, `load_kN`) is read from those, each in the unit its name ends with;
    OpenSim storage files (`.sto`, `.mot`) are read this way too. A
    displacement and a load of different motions (an angle with a force, a length with a
    moment) are refused."""
    if displacement is None and load is None and time is None and not units and \
            pathlib.Path(path).suffix.lower() not in STORAGE_SUFFIXES and \
            has_columns(path, ("displacement", "load")):
        columns = read_table(path, ("displacement", "load"), optional=("t",), others="ignore",
                             min_rows=3)
        return LoadDisplacementData(columns["displacement"], columns["load"], columns.get("t"),
                                    str(path))
    mapping = {name: column for name, column in
               (("displacement", displacement), ("load", load), ("t", time)) if column}
    read = read_quantities(path, {"displacement": ("m", "rad"), "load": ("N", "N m"),
                                  "t": "s"}, columns=mapping, units=units, optional=("t",),
                           min_rows=3)  # (a law's fit needs three points or more)
    kinds = [UNITS.get(read.read_as[name]["unit"], (None,))[0]
             for name in ("displacement", "load")]
    if kinds in (["rad", "N"], ["m", "N m"]):
        raise ValueError(f"{path}: displacement in {read.read_as['displacement']['unit']} with "
                         f"load in {read.read_as['load']['unit']}: a rotation goes with a "
                         "moment (N m) and a translation with a force (N)")
    return LoadDisplacementData(read.values["displacement"], read.values["load"],
                                read.values.get("t"), str(path), read.read_as)


def states_start(path, model, parsed: dict | None = None):
    """The start a states file gives a model read from OpenSim (`spineid.MultibodyTree`):
    where an OpenSim storage file (`.sto`) whose first row is at t = 0 holds
    `<path>/value` and `<path>/speed` of every free coordinate (its component path, or a
    unique column ending in `/<name>/value`), the model started from that row
    (`MultibodyTree.starting_at`; degrees converted for rotational coordinates where
    `inDegrees=yes`; locked and coupled coordinates as the model has them). `None` for any
    other file or model, a file without every free coordinate's value and speed (or with one
    of them not measured in its first row), a first row at another time (a fit simulates from
    t = 0), or angles whose unit the header does not give (no `inDegrees`). Values not
    measured elsewhere in the file are the fit's business (`read_measurement`), not the
    start's. A table `read_measurement` already read is taken from `parsed` (`{path:
    StorageTable}`), not read again."""
    if pathlib.Path(path).suffix.lower() not in STORAGE_SUFFIXES or not hasattr(
            model, "starting_at") or getattr(model, "observed", "") != "coordinates":
        return None
    table = storage_table(path, parsed)
    if abs(float(table.time[0])) > 1e-9 * max(1.0, float(table.time[-1])):
        return None
    values = np.array(model.default_values, dtype=float)
    speeds = np.array(model.opensim_speeds(*model.initial_state()), dtype=float)
    paths = model.coordinate_paths or ()
    for i in model.free:
        name, unit = model.coordinate_names[i], model.coordinate_units[i]
        if unit == "rad" and table.in_degrees is None:
            return None
        found = []
        for kind in ("value", "speed"):
            exact = f"{paths[i]}/{kind}" if paths else None
            label = exact if exact in table.columns else state_label(table.columns, name, kind)
            if label is None:
                return None
            found.append(table.radians(label)[0] if unit == "rad" else table.columns[label][0])
        if not np.all(np.isfinite(found)):
            return None
        values[i], speeds[i] = found
    return model.starting_at(values, speeds)


def registered_lab_frame(model, measurement: Measurement):
    """A model read from OpenSim observing its markers (`MultibodyTree.observing_markers`),
    with the frame of its marker data (`lab_translation`, `lab_rotation`: 1-2-3 Euler angles)
    registered to the first frame of `measurement` (channels `<marker>_x`, `_y`, `_z`, m, lab
    axes) that sees three or more of its markers not on one line: the least-squares rigid
    motion (`rigid_poses`, Kabsch 1976) taking the markers at the model's start (ground) onto
    them. With the start off, the frame takes up the difference; a fit that frees `lab_frame`
    refines it. `None` where no frame qualifies."""
    q0, _ = model.initial_state()
    placed = np.asarray(model.marker_positions(q0), dtype=float)  # (m, 3), ground
    if len(placed) < 3:
        return None
    seen = np.asarray(measurement.values, dtype=float).reshape(len(measurement.ts), -1, 3)
    rotation, position, _, valid = rigid_poses(placed, seen)
    if not valid.any():
        return None
    first = int(np.flatnonzero(valid)[0])
    angles = np.asarray(euler123_angles(rotation[first], check=False))
    return dataclasses.replace(model, lab_translation=floats(position[first]),
                               lab_rotation=floats(angles))
