"""When do the stiffness matrices of a joint differ? The Hessian `H` (S.32), the Cartesian
`K^c` (S.31 with the pre-stress term D of S.33), the dual-basis `K^D` (S.39) and the
experimental `K^E` a displacement-controlled rig measures (S.34-S.36), for the lumbar
stiffness K_F^E of Christophy et al. 2013 eq 24 used as a quadratic joint potential, at
postures with and without rotation and pre-stress, and for a stiffening potential at several
step sizes of the rig.

Prints, per posture, the largest difference from `H` of each matrix (block-scaled: divided by
the largest entry of `H` in the same block) and writes stiffness_matrices.png, the scaled
difference matrices as pictures.

Run: python experiments/stiffness_matrices.py [--out DIR]

K^E is S.34 as written (moment changes along the Euler basis); the column "K^E cart." is the
same rig with the load cell's Cartesian moments (`moments="cartesian"`), which is not S.34.

Measured (CPU, 2026-11-25): at the unloaded neutral posture K^c = K^D = H to rounding and K^E
(0.1 mm, 1 deg steps) differs by 0.6%, first order in the rotation step; pre-stressed by a 5
degree flexion preload at the neutral posture, K^c, K^D and K^E all differ from H by 6% (the D
term, K^c asymmetric by the same amount); rotated 20 degrees about e1 and e3 without load,
K^D = H exactly and K^E differs by the step's 0.6% only, while K^c differs by 34% and the
Cartesian variant by 35% (E~T is not I); rotated and loaded, K^D and K^E differ by 25% (the pre-stress
term), K^c and the Cartesian variant by 34%. For the stiffening potential at the neutral
posture K^E differs by 0.6%, 3.1% and 7.2% at steps of (0.1 mm, 1 deg), (0.5 mm, 5 deg) and
(1 mm, 10 deg). So K^E ~ H (S.36) holds for small steps wherever the joint is unloaded,
rotated or not; it fails under pre-stress. (Before S.34 was implemented as written, K^E was the
Cartesian variant and this experiment concluded "about an unloaded neutral posture only".)
"""

import argparse
import pathlib

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from spineid import (  # noqa: E402
    block_scale, cartesian_stiffness, compare_stiffnesses, dual_basis_stiffness,
    experimental_stiffness, K_F_E, potential_hessian,
)

STIFFNESS = jnp.asarray(K_F_E)
TWENTY = np.radians(20.0)
AXES = ("x", "y", "z", "a1", "a2", "a3")


def quadratic(rest):
    """SpineBushing-like potential `1/2 (y - rest)^T K (y - rest)` (J)."""
    return lambda y: 0.5 * (y - rest) @ STIFFNESS @ (y - rest)


def stiffening(y):
    """Quadratic plus quartic terms: stiffness grows with displacement and rotation (J)."""
    return 0.5 * y @ STIFFNESS @ y + 5e9 * jnp.sum(y[:3] ** 4) + 5e2 * jnp.sum(y[3:] ** 4)


def steps(millimetres, degrees):
    return jnp.array([millimetres * 1e-3] * 3 + [np.radians(degrees)] * 3)


CASES = {
    "neutral, unloaded": (quadratic(jnp.zeros(6)), jnp.zeros(6)),
    "neutral, 5 deg flexion preload": (
        quadratic(jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, -np.radians(5.0)])), jnp.zeros(6)),
    "rotated 20 deg, unloaded": (
        quadratic(jnp.array([0.0, 0.0, 0.0, TWENTY, 0.0, TWENTY])),
        jnp.array([0.0, 0.0, 0.0, TWENTY, 0.0, TWENTY])),
    "rotated 20 deg, loaded": (quadratic(jnp.zeros(6)),
                               jnp.array([0.0, 0.0, 0.0, TWENTY, 0.0, TWENTY])),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="stiffness_matrices_out")
    out = pathlib.Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    lab = steps(0.1, 1.0)
    print("largest block-scaled difference from H (rig steps 0.1 mm, 1 deg)")
    print(f"{'posture':32s} {'K^c':>8s} {'K^D':>8s} {'K^E':>8s} {'K^E cart.':>9s} "
          f"{'K^c asym':>9s}")
    figure, axes = plt.subplots(len(CASES), 3, figsize=(9, 2.6 * len(CASES)))
    for row, (name, (potential, y)) in enumerate(CASES.items()):
        table = compare_stiffnesses(potential, y, lab)
        hessian = np.asarray(potential_hessian(potential, y))
        scale = np.asarray(block_scale(hessian))
        cartesian = np.asarray(experimental_stiffness(potential, y, lab, moments="cartesian"))
        print(f"{name:32s} {table['K^c']:8.4f} {table['K^D']:8.4f} {table['K^E']:8.4f} "
              f"{np.abs((cartesian - hessian) / scale).max():9.4f} "
              f"{table['asymmetry of K^c']:9.4f}")
        matrices = (cartesian_stiffness(potential, y), dual_basis_stiffness(potential, y),
                    experimental_stiffness(potential, y, lab))
        for column, (label, matrix) in enumerate(zip(("K^c", "K^D", "K^E"), matrices)):
            axis = axes[row, column]
            image = axis.imshow((np.asarray(matrix) - hessian) / scale, cmap="RdBu_r",
                                vmin=-0.4, vmax=0.4)
            axis.set(xticks=range(6), yticks=range(6), xticklabels=AXES, yticklabels=AXES)
            if row == 0:
                axis.set_title(f"{label} - H")
            if column == 0:
                axis.set_ylabel(name, fontsize=8)
    figure.colorbar(image, ax=axes, shrink=0.6, label="difference / largest entry of H's block")
    figure.savefig(out / "stiffness_matrices.png", dpi=120)
    print("\nstiffening potential at the neutral posture: K^E against the rig's step")
    for millimetres, degrees in ((0.1, 1.0), (0.5, 5.0), (1.0, 10.0)):
        table = compare_stiffnesses(stiffening, jnp.zeros(6), steps(millimetres, degrees))
        print(f"  steps {millimetres:4.1f} mm, {degrees:4.1f} deg: K^E differs by "
              f"{100 * table['K^E']:.1f}%")
    print(f"\nwrote {out / 'stiffness_matrices.png'}")


if __name__ == "__main__":
    main()
