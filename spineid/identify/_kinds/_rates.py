"""The rates of a measured displacement that a load law with a damper or an inertia needs."""

import numpy as np


def measured_rates(displacement, time, window: int = 1,
                   source: str = "<data>") -> tuple[np.ndarray, np.ndarray]:
    """`(x', x'')` of a measured displacement `x` (`(n,)`, m or rad) at the times `time`
    (`(n,)`, s, strictly increasing; `None` is refused: a damper or an inertia needs them),
    each `(n,)` in the displacement's unit per s and per s^2: second-order finite differences
    (`numpy.gradient`), or with an odd `window > 1` the first and second derivatives of local
    quadratic least-squares fits over `window` samples at equal time steps (Savitzky and Golay
    1964; the ends keep the finite differences), which keeps the noise of a measured `x` from
    swamping its rates. `source` names the data in errors."""
    if time is None:
        raise ValueError(f"{source}: a damper or an inertia needs the time column t")
    x, time = np.asarray(displacement, float), np.asarray(time, float)
    velocity = np.gradient(x, time, edge_order=2)
    acceleration = np.gradient(velocity, time, edge_order=2)
    if window <= 1:
        return velocity, acceleration
    steps = np.diff(time)
    if window % 2 == 0 or window > time.size:
        raise ValueError(f"rate window {window}: expected an odd number of samples at most "
                         f"{time.size}")
    if np.ptp(steps) > 1e-9 * steps.mean():
        raise ValueError(f"{source}: a rate window needs equally spaced times")
    half = window // 2
    offsets = np.arange(-half, half + 1) * steps.mean()
    # Rows of the pseudo-inverse of [1, s, s^2]: value, slope and half the curvature.
    weights = np.linalg.pinv(np.vander(offsets, 3, increasing=True))
    inner = slice(half, time.size - half)
    windows = np.lib.stride_tricks.sliding_window_view(x, window)
    velocity[inner] = windows @ weights[1]
    acceleration[inner] = 2.0 * windows @ weights[2]
    return velocity, acceleration
