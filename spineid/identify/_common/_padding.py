"""Padding data to a few shared lengths, so that fits of records of different lengths share one
compilation.

JAX compiles a function once per shape of its arguments. A lab's batch of tests has as many
lengths as files, so each file would compile the fit again (seconds each, where the fit itself
takes milliseconds). Records are padded to the next of a coarse ladder of lengths (four per
doubling: 1024, 1280, 1536, 1792, 2048, ...) with samples of weight zero, which leave every sum
of squares, gradient and Fisher matrix unchanged; results are sliced back to the real samples
(`data_rows`, `trimmed`). Trajectory fits, measure recoveries and load-law fits pad; multiple
shooting lays its segments out on the real samples.
Above `SMALLEST` samples at most a quarter of the padded record is padding.
"""

import numpy as np


SMALLEST = 64
"""Records up to this length are padded to it."""


def padded_length(n: int) -> int:
    """The padded length of a record of `n` samples: the smallest `m >= n` of the form
    `2^k (4 + j) / 4` (`j = 0..3`), at least `SMALLEST`. E.g. 1400 -> 1536, 1600 -> 1792."""
    if n <= SMALLEST:
        return SMALLEST
    step = 1 << max(int(n - 1).bit_length() - 3, 0)  # a quarter of the power of two below
    return -(-n // step) * step


def pad(values, length: int, fill: str | float = "edge") -> np.ndarray:
    """`values` (`(n, ...)`) extended along its first axis to `length` rows: with its last row
    (`fill="edge"`, keeps padded displacements and times inside the data) or a constant."""
    values = np.asarray(values, dtype=float)
    extra = length - values.shape[0]
    if extra < 0:
        raise ValueError(f"cannot pad {values.shape[0]} rows to {length}")
    widths = [(0, extra)] + [(0, 0)] * (values.ndim - 1)
    if fill == "edge":
        return np.pad(values, widths, mode="edge")
    return np.pad(values, widths, constant_values=float(fill))


def weights(n: int, length: int) -> np.ndarray:
    """`(length,)`: one for the `n` real samples, zero for the padding."""
    return (np.arange(length) < n).astype(float)


def padded_records(measurements) -> tuple[tuple, tuple, tuple]:
    """The `(ts, data, weights)` of a fit's objective from its `Measurement`s: each record's
    times `(m,)`, values `(m, c)` and weights `(m,)` padded to `padded_length` of its samples
    (the last time and sample repeated, weight zero), as numpy arrays."""
    lengths = [padded_length(len(m.ts)) for m in measurements]
    return (tuple(pad(m.ts, n) for m, n in zip(measurements, lengths)),
            tuple(pad(m.values, n) for m, n in zip(measurements, lengths)),
            tuple(weights(len(m.ts), n) for m, n in zip(measurements, lengths)))


def record_lengths(record_weights) -> list[int]:
    """Samples of data per record, from the records' weights (concrete arrays)."""
    return [int(np.sum(np.asarray(w))) for w in record_weights]


def data_rows(record_weights, channels: int) -> np.ndarray:
    """`(n_padded,)` bool: which of the flat residuals (records one after another, `channels`
    per sample) are data."""
    return np.concatenate([np.repeat(np.asarray(w) > 0, channels) for w in record_weights])


def trimmed(predictions, record_weights) -> list[np.ndarray]:
    """Per-record model outputs `(m, c)` cut to the data's samples `(k, c)`."""
    return [np.asarray(p)[:k] for p, k in zip(predictions, record_lengths(record_weights))]
