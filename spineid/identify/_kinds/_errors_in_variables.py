"""Errors in both variables of a load-law fit: a displacement measured with noise.

A displacement error `d_i` of standard deviation `sigma_x` reaches the load residual through the
law's tangent stiffness, `L_i - M(x_i + d_i) ~ L_i - M(x_i) - M'(x_i) d_i`, so the residual at
the measured displacement has the effective variance

    s_i^2 = sigma_L^2 + M'(x_i)^2 sigma_x^2

(Clutton-Brock 1967; Orear 1982, "Least squares when both variables have uncertainties", Am. J.
Phys. 50, 912). Each residual is weighted by `1 / s_i`, `s_i` computed from the parameters being
fitted: for a straight line this is the orthogonal-distance (Deming) criterion itself, so the
fit equals orthogonal distance regression (`scipy.odr`, the tests' oracle); for a curved law it
is its first-order approximation, good while `sigma_x` is small against the displacement over
which the slope changes (a sharp knee is not). The load noise `sigma_L`, where not given, is the
one that gives the weighted residuals unit variance (`load_noise_beside`). The damper's rate,
differenced from the same noisy displacements, is not included: give a damped loop's rate noise
its own thought.
"""

import math

import numpy as np

from .._common._noise_model import ChannelNoise


def checked_displacement_noise(value) -> float | None:
    """`displacement_noise` of `fit_load_law`: `None`, or a positive finite standard deviation
    of the displacement (m or rad, as the data); `ValueError` in one sentence otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(value) and value > 0):
        raise ValueError(f"displacement_noise={value!r}: expected a positive standard deviation "
                         "of the displacement (m or rad, as the data), or None")
    return float(value)


def effective_sd(sigma, stiffness, displacement_sd):
    """`s_i = sqrt(sigma^2 + (M'(x_i) sigma_x)^2)` (module docstring): `sigma` the load noise,
    `stiffness` `(n,)` the law's tangent stiffness at the data (load per displacement),
    `displacement_sd` `sigma_x`; numpy or JAX arrays alike."""
    return (sigma ** 2 + (stiffness * displacement_sd) ** 2) ** 0.5


def load_noise_beside(raw: np.ndarray, stiffness: np.ndarray, displacement_sd: float,
                      n_free: float, floor: float) -> tuple[float, str | None]:
    """The load noise `sigma_L` that, beside the displacement noise, gives the residuals `raw`
    `(n,)` (load units) unit weighted variance: the root of
    `sum r_i^2 / (sigma_L^2 + c_i) = n - n_free`, `c_i = (M'(x_i) sigma_x)^2` (decreasing in
    `sigma_L^2`, found by bisection). Where the displacement noise alone gives the residuals
    less than unit variance, `sigma_L` is `floor`, with a note: `(sigma_L, note or None)`."""
    squares = np.asarray(raw, dtype=float) ** 2
    c = np.maximum((np.asarray(stiffness, dtype=float) * displacement_sd) ** 2, 1e-300)
    target = max(squares.size - n_free, 1.0)

    def excess(v):
        return float(np.sum(squares / (v + c))) - target

    if excess(0.0) > 0:
        low, high = 0.0, max(float(np.sum(squares)) / target, floor ** 2)
        for _ in range(200):  # (to machine precision: the bracket halves each time)
            middle = 0.5 * (low + high)
            low, high = (middle, high) if excess(middle) > 0 else (low, middle)
            if high - low <= 1e-15 * high:
                break
        return max(math.sqrt(high), floor), None
    return floor, ("the displacement noise given accounts for more than the residuals show "
                   "(the load noise estimated is nil): it may be smaller than given")


def typical_noise(deviations) -> ChannelNoise:
    """The white noise of the residuals' mean variance, from their effective deviations
    `deviations` `(n,)` (load units): the verdict's smooth-misfit test is judged against it."""
    sd = float(np.sqrt(np.mean(np.asarray(deviations, dtype=float) ** 2)))
    return ChannelNoise(0, (), sd, sd)
