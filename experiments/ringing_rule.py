"""Calibration of `spineid.Auto`'s ringing rule: which fits need multiple shooting first.

A least-squares fit through the simulation (single shooting) of a lightly damped model has a
cost valley for every whole cycle the simulated oscillation slips against the measured one. The
rule measures, at the user's start, how much phase the linearised model's modes run through
within the record (`LinearModes.ringing_phase`: `max_j min(omega_j T, 1 / zeta_j)`, rad) and
runs multiple shooting first where it exceeds `Auto.ringing_limit`.

For the trajectory problems of benchmark_robustness.py (`axial`, `axial-light`, `spatial`,
`vector16`, `head-neck`), from the same log-uniform 0.2x-5x starts: the ringing phase at each
start, and whether single-shooting Levenberg-Marquardt and multiple shooting (then single
shooting) each reach the optimum (a cost within 0.1% of the lowest found from any start), with
their warm times. A good limit puts the starts where LM fails above it and those where it
succeeds (and is faster) below.

Run: python experiments/ringing_rule.py [--starts 10] [--problems axial,axial-light,spatial]
"""

import argparse
import pathlib
import sys
import time

import spineid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import benchmark_robustness

SAME = 1e-3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--problems", default="axial,axial-light,spatial")
    arguments = parser.parse_args()
    for name in arguments.problems.split(","):
        truth, problem, _ = benchmark_robustness.trajectory_problem(name)
        starts = benchmark_robustness.draw_starts(arguments.starts, truth.size)
        duration = max(float(m.ts[-1] - m.ts[0]) for m in problem(starts[0]).measurements)
        methods = {"lm": spineid.LevenbergMarquardt(), "shooting": spineid.MultipleShooting()}
        for solver in methods.values():  # compile once, not counted
            spineid.fit(problem(starts[0]), solver)
        rows = []
        for factors in starts:
            fitted = problem(factors)
            phase = spineid.linear_modes(fitted.models[0]).ringing_phase(duration)
            row = {"phase": phase}
            for method, solver in methods.items():
                tic = time.perf_counter()
                result = spineid.fit(fitted, solver)
                row[method] = (float(result.cost), time.perf_counter() - tic)
            rows.append(row)
            print(f"  {name}: ringing phase {phase:6.1f} rad; lm cost {row['lm'][0]:.6g} "
                  f"({row['lm'][1]:.2f} s), shooting cost {row['shooting'][0]:.6g} "
                  f"({row['shooting'][1]:.2f} s)", flush=True)
        best = min(min(row["lm"][0], row["shooting"][0]) for row in rows)
        print(f"{name} (record {duration:g} s): phase, lm at optimum, shooting at optimum")
        for row in sorted(rows, key=lambda r: r["phase"]):
            marks = ["yes" if row[m][0] <= best * (1 + SAME) else "no" for m in methods]
            print(f"  {row['phase']:6.1f}  lm {marks[0]:3s} {row['lm'][1]:6.2f} s   "
                  f"shooting {marks[1]:3s} {row['shooting'][1]:6.2f} s")


if __name__ == "__main__":
    main()
