"""Fits of tester files of 10^6 rows: the time of spineid's whole fit (reading, the fit under
the default noise model, errors, identifiability, verdict) against the bare least squares a
lab's own script would run on the same file (numpy's `loadtxt` and `lstsq`: values only).

Two files, written into a scratch folder: a quasi-static test of 10^6 rows moving all six
degrees of freedom (the diagonal matrix 9e4, 2.2e5, 7.5e4 N/m, 55, 38, 70 N m/rad, load-cell
noise 2 N and 0.05 N m), fitted as a full matrix (21 entries) by `spineid stiffness`; and a
two-phase shear ramp of 10^6 points (0-3 mm, a knee at 1.2 mm, 40 and 160 N/mm, 2 N noise)
fitted with a free breakpoint by `spineid table`. The peer of the law fit is the same
least squares at each of 2,000 breakpoints on a grid (numpy, values only).

Run: `python experiments/large_files.py [--rows 1000000]`; it prints the times and ratios.
The numbers are in docs/performance.md.
"""

import argparse
import pathlib
import tempfile
import time

import numpy as np

import spineid
from spineid.cli import main as spineid_main


def timed(function):
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10 ** 6)
    arguments = parser.parse_args()
    n, rng = arguments.rows, np.random.default_rng(0)
    folder = pathlib.Path(tempfile.mkdtemp())
    stiffness = np.diag([9e4, 2.2e5, 7.5e4, 55.0, 38.0, 70.0])
    deflections = rng.uniform(-1, 1, (n, 6)) * np.array([3e-4] * 3 + [0.03] * 3)
    loads = deflections @ stiffness + rng.normal(size=(n, 6)) * [2, 2, 2, 0.05, 0.05, 0.05]
    spineid.write_quasi_static(folder / "test.csv", spineid.QuasiStaticTest(loads, deflections))
    x = np.linspace(0.0, 3.0, n)
    force = np.where(x < 1.2, 40 * x, 48 + 160 * (x - 1.2)) + rng.normal(0, 2, n)
    np.savetxt(folder / "ramp.csv", np.c_[np.linspace(0, 100, n), x, force], delimiter=",",
               header="Time_s,Disp_mm,Force_N", comments="", fmt="%.6f")

    ours = timed(lambda: spineid_main(["stiffness", str(folder / "test.csv"), "--out",
                                       str(folder / "matrix"), "--no-plots"]))

    def bare_matrix():
        table = np.loadtxt(folder / "test.csv", delimiter=",", skiprows=1)
        np.linalg.lstsq(table[:, 6:], table[:, :6], rcond=None)  # K^T, values only

    peer = timed(bare_matrix)
    print(f"stiffness, {n} rows, full matrix: spineid {ours:.1f} s, numpy loadtxt + lstsq "
          f"{peer:.1f} s (ratio {ours / peer:.2f})", flush=True)

    ours = timed(lambda: spineid_main(["table", str(folder / "ramp.csv"), "--displacement",
                                       "Disp_mm", "--load", "Force_N", "--n-nodes", "3",
                                       "--free-breakpoints", "--out", str(folder / "law"),
                                       "--no-plots"]))

    def bare_law():
        table = np.loadtxt(folder / "ramp.csv", delimiter=",", skiprows=1)
        displacement, load = table[:, 1], table[:, 2]
        best = np.inf
        for knee in np.linspace(0.1, 2.9, 2000):
            basis = np.c_[np.ones(n), displacement, np.maximum(displacement - knee, 0.0)]
            residual = np.linalg.lstsq(basis, load, rcond=None)[1]
            best = min(best, float(residual[0]))

    peer = timed(bare_law)
    print(f"table, {n} points, free breakpoint: spineid {ours:.1f} s, numpy loadtxt + grid of "
          f"2000 breakpoints {peer:.1f} s (ratio {ours / peer:.2f})")


if __name__ == "__main__":
    main()
