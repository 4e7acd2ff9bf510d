"""Body poses from motion-capture markers: the least-squares rigid motion of a marker cluster
(Kabsch 1976; Soderkvist and Wedin 1993, "Determining the movements of the skeleton using
well-configured markers", J Biomech 26:1473), and the pose of one body relative to another.

A body carries `m >= 3` markers, not all on one line, at known body coordinates `c_i` (m, `(m,
3)`). In a frame the markers are seen at `x_i` (m, laboratory axes). The body's pose `(R, p)`
minimises `sum_i |R c_i + p - x_i|^2` over rotations `R` and translations `p`: with the
centroids `c_bar`, `x_bar` and the cross-covariance `H = sum_i (c_i - c_bar)(x_i - x_bar)^T =
U S V^T`, `R = V diag(1, 1, det(V U^T)) U^T` (the sign keeps `R` a rotation, not a reflection)
and `p = x_bar - R c_bar`. Markers missing in a frame (NaN, a gap) are left out of that frame's
fit; a frame with fewer than three markers, or with those it has on one line, has no pose.
These are numpy functions for reading data (host side), vectorised over frames.
"""

import numpy as np

# A cluster is "on one line" where its second singular value is below this fraction of its
# first: its rotation about that line is not determined.
COLLINEAR = 1e-6


def rigid_poses(body: np.ndarray, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray, np.ndarray]:
    """The least-squares rigid pose of a marker cluster in each frame (module docstring).

    **Arguments:** `body` `(m, 3)`: the markers' body coordinates (m); `seen` `(k, m, 3)`: where
    they are seen in each of `k` frames (m, laboratory axes; NaN where a marker is missing).

    **Returns:** `(rotation (k, 3, 3), position (k, 3), rms (k,), valid (k,))`: `rotation @ body_i
    + position` approximates `seen_i`; `rms` is the root-mean-square distance of the seen
    markers from the fitted ones (m); frames without a pose (`valid` false) hold NaN.
    """
    body = np.asarray(body, dtype=float)
    seen = np.asarray(seen, dtype=float)
    if body.ndim != 2 or body.shape[1] != 3 or body.shape[0] < 3:
        raise ValueError(f"body coordinates of shape {body.shape}: expected (m, 3) with m >= 3 "
                         "markers")
    if seen.ndim != 3 or seen.shape[1:] != body.shape:
        raise ValueError(f"seen markers of shape {seen.shape}: expected (frames, {body.shape[0]}, "
                         "3)")
    weight = np.all(np.isfinite(seen), axis=2).astype(float)  # (k, m): 1 where seen
    count = weight.sum(axis=1)
    filled = np.where(weight[..., None] > 0, seen, 0.0)
    safe = np.maximum(count, 1.0)[:, None]
    body_centroid = weight @ body / safe  # (k, 3)
    seen_centroid = np.einsum("km,kmj->kj", weight, filled) / safe
    body_centred = body[None] - body_centroid[:, None]  # (k, m, 3)
    seen_centred = (filled - seen_centroid[:, None]) * weight[..., None]
    covariance = np.einsum("kmi,kmj->kij", body_centred * weight[..., None], seen_centred)
    u, _, vt = np.linalg.svd(covariance)
    sign = np.sign(np.linalg.det(np.swapaxes(vt, 1, 2) @ np.swapaxes(u, 1, 2)))
    sign = np.where(sign == 0, 1.0, sign)
    correction = np.zeros((len(seen), 3, 3))
    correction[:, 0, 0] = correction[:, 1, 1] = 1.0
    correction[:, 2, 2] = sign
    rotation = np.swapaxes(vt, 1, 2) @ correction @ np.swapaxes(u, 1, 2)
    position = seen_centroid - np.einsum("kij,kj->ki", rotation, body_centroid)
    # The cluster of the markers seen must span a plane.
    spread = np.linalg.svd(body_centred * weight[..., None], compute_uv=False)  # (k, 3)
    valid = (count >= 3) & (spread[:, 1] > COLLINEAR * np.maximum(spread[:, 0], 1e-300))
    fitted = np.einsum("kij,mj->kmi", rotation, body) + position[:, None]
    squared = np.where(weight > 0, np.sum((fitted - filled) ** 2, axis=2), 0.0)
    rms = np.sqrt(squared.sum(axis=1) / safe[:, 0])
    invalid = ~valid
    rotation[invalid], position[invalid], rms[invalid] = np.nan, np.nan, np.nan
    return rotation, position, rms, valid


def relative_poses(upper_rotation, upper_position, lower_rotation=None, lower_position=None):
    """The pose of the upper body in the lower body's frame, `(R_l^T R_u, R_l^T (p_u - p_l))`,
    from both bodies' poses in the laboratory (`(k, 3, 3)`, `(k, 3)`, m); without a lower
    body's poses the laboratory is the lower body. **Returns:** `(rotation, position)`."""
    if lower_rotation is None:
        return np.asarray(upper_rotation), np.asarray(upper_position)
    transposed = np.swapaxes(np.asarray(lower_rotation), 1, 2)
    return (transposed @ np.asarray(upper_rotation),
            np.einsum("kij,kj->ki", transposed,
                      np.asarray(upper_position) - np.asarray(lower_position)))


def body_coordinates(seen: np.ndarray, rotation: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Body coordinates `R^T (x - p)` (`(m, 3)`, m) of markers seen at `x` (`(m, 3)`) on a body
    at the pose `(R (3, 3), p (3,))`: a cluster's coordinates from a frame whose pose is known
    (a static trial, or the first frame of a test that starts at the model's initial pose)."""
    return (np.asarray(seen, dtype=float) - np.asarray(position)) @ np.asarray(rotation)
