"""Chains of a posterior one after another or vmapped together (`spineid.posterior(...,
vectorize_chains=...)`), on the three-spring planar pair of tests/test_posterior.py.

Prints the warm time (every program compiled by a first call of the same shapes) of one chain,
of 4 chains one after another (the default) and of 4 chains vmapped, and their ratios to the
one chain, with the bulk effective draws per second of each. The default follows this
measurement: on a CPU the vmapped No-U-Turn trees and adaptive ODE steps run in lockstep, each
step as long as the longest chain's.

    python experiments/benchmark_chains.py [--samples 400] [--warmup 100]
"""

import argparse
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import spineid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from helpers import AXIAL_SPRINGS, LOADS, document  # noqa: E402

TS = np.linspace(0.0, 0.2, 101)
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=100)
    arguments = parser.parse_args()
    model_file = spineid.ModelFile.from_document(document(springs=AXIAL_SPRINGS, loads=LOADS))
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(TS)).q))
    noisy = clean + np.random.default_rng(3).normal(size=clean.shape) * np.array(
        list(NOISE.values()))
    problem = spineid.FitProblem(model_file, spineid.Measurement(TS, noisy, tuple(NOISE)),
                                 ["stiffness"], NOISE)
    fitted = spineid.fit(problem, spineid.LevenbergMarquardt())
    rows = []
    for label, chains, together in (("1 chain", 1, False), ("4 chains, one after another", 4,
                                                            False),
                                    ("4 chains, vmapped", 4, True)):
        arguments_ = dict(samples=arguments.samples, warmup=arguments.warmup, chains=chains,
                          vectorize_chains=together, start=fitted.values)
        spineid.posterior(problem, seed=0, **arguments_)  # compiles
        clock = time.perf_counter()
        sampled = spineid.posterior(problem, seed=1, **arguments_)
        seconds = time.perf_counter() - clock
        rows.append((label, seconds, float(np.min(sampled.effective_samples))))
    base = rows[0][1]
    print(f"{arguments.samples} draws and {arguments.warmup} warm-up steps per chain, warm, "
          f"{jax.devices()[0].platform}")
    for label, seconds, ess in rows:
        print(f"  {label:30s} {seconds:7.1f} s  ({seconds / base:4.2f} x one chain), smallest "
              f"bulk ESS {ess:6.0f}, {ess / seconds:6.1f} per s")


if __name__ == "__main__":
    main()
