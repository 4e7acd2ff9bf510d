"""Sums over sliding windows in O(n log n) or O(n): the moving averages and window
autocovariances of the smooth-misfit test (`_goodness.smooth_misfit`), whose window is a 25th
of the record. Done directly, each costs the record's length times the window: for a tester's
record of 10^6 rows (a window of 40,000) some ten seconds per channel (a six-channel fit 62
s); done here, a fraction of a second."""

import numpy as np


def moving_average(x: np.ndarray, width: int) -> np.ndarray:
    """The centred moving average of `x` `(n,)` over `width` samples, full windows only:
    `(n - width + 1,)`, as `numpy.convolve(x, ones(width) / width, "valid")` (by a running
    sum, in the residuals' own scale: a record's mean does not enter the rounding)."""
    x = np.asarray(x, dtype=float)
    running = np.concatenate([[0.0], np.cumsum(x - x.mean())])
    return (running[width:] - running[:-width]) / width + x.mean()


def sliding_dot(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """`out[i] = sum_j x[i + j] kernel[j]` for `i = 0 .. n - k` (`x` `(n,)`, `kernel` `(k,)`,
    `k <= n`): `numpy.correlate(x, kernel, "valid")`, by the FFT."""
    x, kernel = np.asarray(x, dtype=float), np.asarray(kernel, dtype=float)
    size = 1 << (x.size + kernel.size - 2).bit_length()
    full = np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(kernel[::-1], size), size)
    return full[kernel.size - 1: x.size]


def autocorrelation_sums(f: np.ndarray) -> np.ndarray:
    """`gamma[l] = sum_j f[j] f[j + l]` for `l = 0 .. len(f) - 1` (`f` `(w,)`), by the FFT."""
    f = np.asarray(f, dtype=float)
    size = 1 << (2 * f.size - 1).bit_length()
    spectrum = np.fft.rfft(f, size)
    return np.fft.irfft(spectrum * np.conj(spectrum), size)[:f.size]
