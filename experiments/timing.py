"""Timing helper shared by the benchmark scripts."""

import time

import numpy as np


def best_time(function, repeats: int = 7) -> float:
    """Best wall-clock time (s) of `repeats` calls of `function` (call it once before to compile)."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best
