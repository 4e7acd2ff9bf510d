"""Reading C3D motion-capture files (the binary format of most optical tracking systems) through
the pure-Python `c3d` package, an optional extra: `pip install 'spineid[c3d]'`.

What is read: the 3-D points (markers) of the file, named by `POINT:LABELS`, in the unit of
`POINT:UNITS` (`mm`, `cm`, `dm` or `m`; converted to metres), sampled at `POINT:RATE` (Hz). A
point whose residual is negative in a frame (C3D's mark of a marker not seen) is NaN there, as
a gap of a `.trc` file is. Times are `(frame - first frame) / rate`, s. Analog channels (force
plates, EMG) are not read. Floating-point and scaled-integer files, Intel, DEC and MIPS byte
orders are all decoded by the `c3d` package.

(ezc3d reads C3D too, but it cannot share an environment with opensim, which spineid's tests
use as an oracle; `c3d` is pure Python.)
"""

import math
import struct
import warnings

import numpy as np

from ._atomic import readable_file
from ._storage import MarkerTrajectories, TRC_UNITS


C3D_HINT = "reading C3D files needs the optional extra: pip install 'spineid[c3d]'"


def read_c3d(path) -> MarkerTrajectories:
    """Read the markers of a C3D file (module docstring), converting them to metres.

    **Returns:** `MarkerTrajectories` (`time` `(k,)` s, `markers` name -> `(k, 3)` m in the
    laboratory axes of the file, NaN where a marker is not seen; `rate` Hz; `units` the file's
    own). Raises `ValueError` naming the file for one that is not C3D, is truncated (fewer
    frames than its header says), has no points, has unnamed or repeated labels (`POINT:LABELS`
    and its continuations `LABELS2`, ...), or a `POINT:UNITS` that is not a length unit (any
    case); `ImportError` with the install command where the `c3d` package is missing.
    """
    try:
        import c3d
    except ImportError:
        raise ImportError(C3D_HINT) from None
    path = readable_file(path, "motion-capture file")
    if not path.is_file():
        raise ValueError(f"{path}: file not found")
    with path.open("rb") as handle, warnings.catch_warnings():
        # (c3d warns of every file without force plates or EMG: markers are all spineid reads)
        warnings.filterwarnings("ignore", message="No analog data found")
        warnings.filterwarnings("ignore", message="reached end of file")  # (refused below)
        try:
            reader = c3d.Reader(handle)
            used = int(reader.point_used)
            labels = []  # POINT:LABELS, continued in LABELS2, LABELS3, ... beyond 255 points
            for group in ("LABELS", *(f"LABELS{k}" for k in range(2, 100))):
                parameter = reader.get(f"POINT:{group}")
                if parameter is None or len(labels) >= used:
                    break
                labels += [str(label).strip() for label in parameter.string_array]
            labels = labels[:used]
            rate = float(reader.point_rate)
            first = int(reader.first_frame)
            expected = int(reader.frame_count)
            units_parameter = reader.get("POINT:UNITS")
            units = ("" if units_parameter is None
                     else units_parameter.string_value.strip().lower())
            frames, points = [], []
            for number, frame, _ in reader.read_frames(copy=True, analog_transform=False):
                frames.append(number)
                points.append(np.where(frame[:, 3:4] < 0, np.nan,
                                       frame[:, :3].astype(float)))
        except (ValueError, AssertionError, struct.error, IndexError, KeyError, TypeError,
                RuntimeError, EOFError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: not a readable C3D file ({error})") from None
    if len(frames) < expected:
        raise ValueError(f"{path}: the C3D file ends after {len(frames)} of its {expected} "
                         "frames (truncated?)")
    if not labels or not points or points[0].shape[0] == 0:
        raise ValueError(f"{path}: the C3D file holds no 3-D points (markers)")
    if len(labels) != points[0].shape[0]:
        raise ValueError(f"{path}: POINT:LABELS name {len(labels)} points, the frames hold "
                         f"{points[0].shape[0]}")
    if any(not label for label in labels) or len(set(labels)) != len(labels):
        raise ValueError(f"{path}: POINT:LABELS must name every point once, got {labels}")
    if units not in TRC_UNITS:
        raise ValueError(f"{path}: POINT:UNITS {units!r}: expected one of {list(TRC_UNITS)}")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"{path}: POINT:RATE {rate!r}: expected a positive frame rate")
    if len(frames) < 2:
        raise ValueError(f"{path}: {len(frames)} frame(s); at least 2 are needed")
    coordinates = np.stack(points) * TRC_UNITS[units]  # (k, m, 3), m
    time = (np.asarray(frames, dtype=float) - first) / rate
    return MarkerTrajectories(time, {name: coordinates[:, i] for i, name in enumerate(labels)},
                              rate, units, str(path))

