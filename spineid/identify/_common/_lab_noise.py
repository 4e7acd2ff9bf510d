"""Noise as labs record it, for simulated data: stationary autoregressive noise (a tester's load
cell) and white noise through a zero-phase Butterworth low-pass (filtered motion capture)."""

from __future__ import annotations

import math

import numpy as np
from scipy import signal

from ._noise_kinds import checked_coefficients
from ._noise_model import _first_samples


def correlated_noise(shape, sd, *, phi=None, low_pass: float | None = None,
                     rate: float | None = None, filter_order: int = 4,
                     rng=None) -> np.ndarray:
    """Stationary correlated noise `shape` `(samples,)` or `(samples, channels...)`, samples
    along axis 0 (equally spaced), channels independent, of marginal standard deviation `sd`
    (the data's units; a number, or one per channel: broadcast against `shape[1:]`). One kind:

    - `phi`: the autoregression `e_t = sum_k phi_k e_(t-k) + a_t` (`phi_1..phi_p`, stationary;
      Box and Jenkins, eq. 3.2.1), started in its stationary distribution (the first `p`
      samples drawn with the process's own covariance, so the first sample is as noisy as the
      rest), the innovations scaled to give `sd`;
    - `low_pass`: white noise through a Butterworth low-pass of order `filter_order` run
      forwards then backwards (zero phase, as `scipy.signal.filtfilt` and motion-capture
      pipelines filter markers; the magnitude response squared, `|H|^4` in power), its cut-off
      `low_pass` a fraction of the Nyquist rate, or in Hz with the sampling `rate` in Hz;
      stationary throughout (the filters run in over padding that is cropped), scaled by the
      process's own variance (`sum g_k^2`, `g` the forward-backward impulse response), so a
      record's sample deviation scatters about `sd` as a lab's does.

    `rng`: a `numpy.random.Generator`, a seed, or `None`. Returns a float64 numpy array; the
    autocovariance of `phi` noise is `spineid.AR`'s model of it (`noise_model=AR(coefficients=
    phi)` weights a fit exactly), that of filtered noise is matched by the default `"auto"` or
    `AR.from_autocorrelation` of its first lags. `ValueError` naming the argument on bad input.
    """
    shape = _checked_shape(shape)
    if (phi is None) == (low_pass is None):
        raise ValueError("correlated_noise: give phi=... (an autoregression) or low_pass=... "
                         "(a Butterworth cut-off), one of them")
    try:
        deviation = np.broadcast_to(np.asarray(sd, dtype=float), shape[1:])
    except (TypeError, ValueError):
        raise ValueError(f"correlated_noise(sd={sd!r}): expected a standard deviation >= 0, "
                         f"or one per channel of shape {shape[1:]}") from None
    if not np.all(np.isfinite(deviation)) or np.any(deviation < 0):
        raise ValueError(f"correlated_noise(sd={sd!r}): expected finite values >= 0")
    generator = np.random.default_rng(rng)
    if phi is not None:
        unit = _autoregressive(generator, shape, np.asarray(
            checked_coefficients(phi, "correlated_noise(phi)")))
    else:
        unit = _filtered(generator, shape, _cutoff(low_pass, rate), filter_order)
    return deviation * unit


def _checked_shape(shape) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        dims = (None,)
    if not dims or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                           and d >= 1 for d in dims):
        raise ValueError(f"correlated_noise(shape={shape!r}): expected a number of samples >= 1, "
                         "or (samples, channels...) of whole numbers >= 1")
    return tuple(int(d) for d in dims)


def _autoregressive(generator, shape, phi: np.ndarray) -> np.ndarray:
    # Unit marginal variance: the first p samples from the stationary covariance (Cholesky
    # factor of the autocorrelations), the rest by the recursion with innovations of variance
    # 1 / gamma_0 (gamma_0 the marginal variance unit innovations give).
    if not phi.any():
        return generator.standard_normal(shape)
    p, n = phi.size, shape[0]
    factor, gamma_0 = _first_samples(phi)
    start = np.tensordot(factor, generator.standard_normal((p,) + shape[1:]), axes=1)
    if n <= p:
        return start[:n]
    # The direct form's state after the start (`scipy.signal.lfiltic`, for every channel): no
    # past input, the past outputs `start` (oldest first).
    state = np.stack([sum(phi[i - 1] * start[p + m - i] for i in range(m + 1, p + 1))
                      for m in range(p)])
    innovations = generator.standard_normal((n - p,) + shape[1:]) / math.sqrt(gamma_0)
    rest, _ = signal.lfilter([1.0], np.r_[1.0, -phi], innovations, axis=0, zi=state)
    return np.concatenate([start, rest])


def _cutoff(low_pass, rate) -> float:
    # The cut-off as a fraction of the Nyquist rate (scipy.signal.butter's `Wn`).
    try:
        nyquist = 1.0 if rate is None else float(rate) / 2.0
    except (TypeError, ValueError):
        nyquist = math.nan
    try:
        cut = float(low_pass)
    except (TypeError, ValueError):
        cut = math.nan
    if (rate is not None and not nyquist > 0) or not math.isfinite(nyquist):
        raise ValueError(f"correlated_noise(rate={rate!r}): expected a sampling rate > 0 in Hz")
    if not 0.0 < cut / nyquist < 1.0:
        where = "of the Nyquist rate" if rate is None else f"Hz (the Nyquist rate {nyquist:g} Hz)"
        raise ValueError(f"correlated_noise(low_pass={low_pass!r}): expected a cut-off between "
                         f"0 and 1 {where}")
    return cut / nyquist


def _filtered(generator, shape, cutoff: float, order) -> np.ndarray:
    # Unit marginal variance: forward and backward through the Butterworth sections, over
    # `pad` samples of white noise each side (longer than the impulse response), cropped.
    if (isinstance(order, bool) or not isinstance(order, (int, np.integer))
            or not 1 <= order <= 12):
        raise ValueError(f"correlated_noise(filter_order={order!r}): expected a whole number "
                         "from 1 to 12")
    sections = signal.butter(int(order), cutoff, output="sos")
    pad = 64
    while True:  # (the impulse response's length: its energy within 1e-14 of the whole)
        pad *= 2
        response = signal.sosfilt(sections, np.r_[1.0, np.zeros(pad - 1)])
        energy = np.cumsum(response ** 2)
        if energy[-1] - energy[pad // 2] <= 1e-14 * energy[-1]:
            break
    kernel = signal.fftconvolve(response, response[::-1])  # (forwards-backwards response)
    n = shape[0]
    white = generator.standard_normal((n + 2 * pad,) + shape[1:])
    forward = signal.sosfilt(sections, white, axis=0)
    both = signal.sosfilt(sections, forward[::-1], axis=0)[::-1]
    return both[pad:pad + n] / math.sqrt(float(kernel @ kernel))
