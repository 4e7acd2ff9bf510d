"""Regenerate the bundled measured data.

- datasets/liu_16_springs_measured.csv: the 16-spring Liu-style pair
  (datasets/liu_16_springs.toml) simulated over 0.5 s at 501 samples with a tight tolerance,
  plus Gaussian optical-tracking noise (5 um on x and y, 0.01 deg on theta) drawn with seed 2001.
- datasets/lab_shear_tests/: eight synthetic shear tests as a materials tester writes them
  (`Time_s,Disp_mm,Force_N`, its own names and units), two-phase load-displacement curves of
  four anterior and four posterior specimens (`lab_shear_tests`; the truths are printed and
  listed in datasets/README.md).

Run: python experiments/make_bundled_data.py
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np

import spineid

NOISE = np.array([5e-6, 5e-6, np.radians(0.01)])


def lab_shear_tests(folder: pathlib.Path) -> list[tuple[str, float, float, float]]:
    """The bundled lab folder: per specimen a displacement ramp 0-3 mm at 0.01 mm/s sampled at
    1 Hz ... 1.3 Hz (300-390 samples, 1 um resolution), a compliant phase of stiffness `soft`
    (N/mm) into a stiffer `stiff` at the knee (mm), 1% noise of the load range. Anterior
    specimens ("Ant") are stiffer in their second phase. Returns (name, knee, soft, stiff)."""
    folder.mkdir(exist_ok=True)
    truths = []
    rng = np.random.default_rng(2026)
    for k in range(8):
        group = "Ant" if k % 2 else "Pos"
        n = int(rng.integers(300, 391))
        time = np.arange(n) * (300.0 / n)
        disp = np.round(time * 0.01, 3)
        knee, soft = rng.uniform(0.9, 1.8), rng.uniform(8.0, 16.0)
        stiff = rng.uniform(60.0, 80.0) * (1.4 if group == "Ant" else 1.0)
        force = soft * disp + (stiff - soft) * np.maximum(disp - knee, 0.0)
        force = force + 0.01 * np.ptp(force) * rng.standard_normal(n)
        name = f"S{k + 1:02d}_{group}"
        np.savetxt(folder / f"{name}.csv", np.column_stack([time, disp, force]), delimiter=",",
                   header="Time_s,Disp_mm,Force_N", comments="", fmt="%.6g")
        truths.append((name, knee, soft, stiff))
    return truths


def main():
    model_file = spineid.load_model_file(spineid.dataset_path("liu_16_springs.toml"))
    ts = model_file.simulation_times()
    poses = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(ts), rtol=1e-12, atol=1e-14).q))
    noisy = poses + np.random.default_rng(2001).normal(size=poses.shape) * NOISE
    out = pathlib.Path(__file__).resolve().parent.parent / "datasets" / "liu_16_springs_measured.csv"
    spineid.write_trajectory(out, ts, noisy)
    print(f"wrote {out}")
    lab = out.parent / "lab_shear_tests"
    for name, knee, soft, stiff in lab_shear_tests(lab):
        print(f"{lab / name}.csv: knee {knee:.3f} mm, {soft:.2f} then {stiff:.2f} N/mm")


if __name__ == "__main__":
    main()
