"""Padding data to a few shared lengths, so that fits of records of different lengths share one
compilation.

JAX compiles a function once per shape of its arguments. A lab's batch of tests has as many
lengths as files, so each file would compile the fit again (seconds each, where the fit itself
takes milliseconds). Records are padded to the next of a coarse ladder of lengths (four per
doubling: 1024, 1280, 1536, 1792, 2048, ...) with samples of weight zero, which leave every sum
of squares, gradient and Fisher matrix unchanged; results are sliced back to the real samples.
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
