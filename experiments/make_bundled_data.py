"""Regenerate the bundled measured trajectory datasets/liu_16_springs_measured.csv.

The 16-spring Liu-style pair (datasets/liu_16_springs.toml) simulated over 0.5 s at 501 samples
with a tight tolerance, plus Gaussian optical-tracking noise (5 um on x and y, 0.01 deg on theta)
drawn with seed 2001. Run: python experiments/make_bundled_data.py
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np

import spineid

NOISE = np.array([5e-6, 5e-6, np.radians(0.01)])


def main():
    model_file = spineid.load_model_file(spineid.dataset_path("liu_16_springs.toml"))
    ts = model_file.simulation_times()
    poses = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(ts), rtol=1e-12, atol=1e-14).q))
    noisy = poses + np.random.default_rng(2001).normal(size=poses.shape) * NOISE
    out = pathlib.Path(__file__).resolve().parent.parent / "datasets" / "liu_16_springs_measured.csv"
    spineid.write_trajectory(out, ts, noisy)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
