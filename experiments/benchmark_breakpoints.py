"""Benchmark: two-phase laws with a free breakpoint fitted to shear-test-like records.

Issue target: the exact least-squares optimum of a two-phase law on every test, <= 0.2 s warm for
1500 points. Thirteen synthetic records of 1500 load-displacement points each (a toe region
running into a stiffer phase, or a third phase the two-phase law cannot follow, with noise and
a displacement resolution of 1 um), fitted three ways from the same evenly spaced start nodes:

- spineid's default (`spineid table --n-nodes 3 --free-breakpoints --noise-model white`:
  variable projection, then
  a local refinement only where the projected optimum is not already the answer);
- spineid's Levenberg-Marquardt alone from the start (`solver="lm"`, `spineid table --solver
  lm`);
- the peer, numpy brute force: one least-squares solve (`numpy.linalg.lstsq`) per breakpoint on a
  grid of 3000, then a golden-section refinement between the neighbours of the best grid point.

Printed per test: the sum of squared residuals of each, whether it is the best found by any
(within 1e-9 relative), and the warm time. Run: `python experiments/benchmark_breakpoints.py`.
Measured numbers are in docs/performance.md.
"""

import time

import numpy as np

N = 1500
RESOLUTION = 1e-6


def record(seed: int) -> "spineid.LoadDisplacementData":
    import spineid

    rng = np.random.default_rng(seed)
    x = np.round(np.sort(rng.uniform(0.0, 3e-3, N)) / RESOLUTION) * RESOLUTION
    if seed % 2:
        # Toe region (exponential) into a linear phase.
        knee = rng.uniform(0.8e-3, 1.6e-3)
        scale = rng.uniform(0.3e-3, 0.6e-3)
        toe = 20.0 * (np.exp(np.minimum(x, knee) / scale) - 1)
        y = toe + 20.0 / scale * np.exp(knee / scale) * np.maximum(x - knee, 0)
    else:
        # Three phases: a two-phase law has a breakpoint basin near each knee.
        knees = np.sort(rng.uniform(0.4e-3, 2.6e-3, 2))
        slopes = np.sort(rng.uniform(5e3, 100e3, 3))
        y = slopes[0] * x + (slopes[1] - slopes[0]) * np.maximum(x - knees[0], 0) \
            + (slopes[2] - slopes[1]) * np.maximum(x - knees[1], 0)
    noise = 0.005 * np.ptp(y)
    return spineid.LoadDisplacementData(x, y + noise * rng.standard_normal(N))


def projected(x, y, b):
    design = np.stack([np.ones_like(x), x, np.maximum(x - b, 0.0)], axis=1)
    residual = design @ np.linalg.lstsq(design, y, rcond=None)[0] - y
    return float(residual @ residual)


def brute_force(data):
    x, y = data.displacement, data.load
    grid = np.linspace(x.min(), x.max(), 3002)[1:-1]
    costs = [projected(x, y, b) for b in grid]
    k = int(np.argmin(costs))
    low, high = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if projected(x, y, a) < projected(x, y, b):
            high = b
        else:
            low = a
    best = 0.5 * (low + high)
    return min(projected(x, y, best), costs[k])


def timed(function, repeats=3):
    function()  # compile
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = function()
        best = min(best, time.perf_counter() - start)
    return out, best


def main():
    import spineid  # (here: the brute force, imported by other benchmarks, runs without it)

    print(f"{'test':>4} {'default SS':>14} {'LM-only SS':>14} {'brute SS':>14} "
          f"{'default s':>9} {'LM s':>7} {'brute s':>8}  best: default LM brute")
    hits = {"default": 0, "lm": 0, "brute": 0}
    times = {"default": [], "lm": [], "brute": []}
    for seed in range(13):
        data = record(seed)

        def sum_of_squares(fit):
            return float(np.sum(fit.residuals ** 2))

        # (white noise: the least-squares optimum the brute force finds; the default noise
        # model would fit by generalized least squares, another cost, wherever the residuals
        # of a law that cannot follow the data are correlated)
        form = spineid.LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True)
        default, t_default = timed(lambda: spineid.fit_load_law(data, form, noise="white"))
        local, t_local = timed(lambda: spineid.fit_load_law(data, form, solver="lm",
                                                            noise="white"), repeats=1)
        brute, t_brute = timed(lambda: brute_force(data), repeats=1)
        found = {"default": sum_of_squares(default), "lm": sum_of_squares(local),
                 "brute": brute}
        best = min(found.values())
        marks = []
        for key, value in found.items():
            hit = value <= best * (1 + 1e-9)
            hits[key] += hit
            marks.append("yes" if hit else "NO")
        for key, t in (("default", t_default), ("lm", t_local), ("brute", t_brute)):
            times[key].append(t)
        print(f"{seed:4d} {found['default']:14.8g} {found['lm']:14.8g} {found['brute']:14.8g} "
              f"{t_default:9.3f} {t_local:7.2f} {t_brute:8.2f}  {' '.join(marks)}")
    print(f"\nreached the best optimum: default {hits['default']}/13, LM alone {hits['lm']}/13, "
          f"brute force {hits['brute']}/13")
    print(f"median warm time: default {np.median(times['default']):.3f} s (target <= 0.2 s), "
          f"LM alone {np.median(times['lm']):.2f} s, numpy brute force "
          f"{np.median(times['brute']):.2f} s ({np.median(times['brute']) / np.median(times['default']):.0f}x the default)")


if __name__ == "__main__":
    main()
