# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Stiffness matrices: Euler angles, the dual Euler basis, and two kinds of bushing
#
# Laboratories publish the stiffness of an intervertebral joint as a 6x6 matrix, e.g. the
# lumbar `K_F^E` of Christophy et al. (2013, eq 24). Using it in a multibody model raises three
# questions this notebook answers with numbers:
#
# 1. Rotations: which angles, and along which directions do the moments act?
# 2. Which matrix is "the" stiffness: the Hessian `H` of an energy, the Cartesian `K^c`, the
#    dual-basis `K^D`, or the experimental `K^E` a rig measures?
# 3. Where should a bushing apply its load? The classic bushing either invents a moment or
#    loads the neutral posture; the SpineBushing does neither.
#
# Finally we fit a 6x6 matrix to a simulated load test and ask which entries the test determines.

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import spineid

K = np.asarray(spineid.K_F_E)  # N/m, N/rad, N m/rad; order [tx, ty, tz, rx, ry, rz]
AXES = ("tx", "ty", "tz", "rx", "ry", "rz")
print(np.array2string(K, precision=0, suppress_small=True, max_line_width=100))

# %% [markdown]
# ## 1. The 1-2-3 Euler angles and their two bases
#
# A rotation `R = R_1(a1) R_2(a2) R_3(a3)` (body-fixed X, then Y, then Z). With the axes of
# Christophy et al. (e1 anterior, e2 superior, e3 right) `a1` is lateral bending, `a2` axial
# rotation and `a3` flexion-extension. Angles and rotation tensor go back and forth exactly,
# except at `a2 = +-90 deg`, where the set is singular and spineid refuses to guess:

# %%
angles = np.radians([20.0, 35.0, -15.0])
rotation = spineid.euler123_rotation(angles)
print("R^T R = I:", np.allclose(rotation.T @ rotation, np.eye(3)))
print("angles back (deg):", np.degrees(np.asarray(spineid.euler123_angles(rotation))))
try:
    spineid.euler123_angles(spineid.euler123_rotation(np.radians([10.0, 90.0, 5.0])))
except RuntimeError as error:  # raised from inside compiled code (equinox.error_if)
    print("at a2 = 90 deg:", next(line for line in str(error).splitlines()
                                  if "singularity" in line))

# %% [markdown]
# The angular velocity is `omega = a1' g_1 + a2' g_2 + a3' g_3` along the **Euler basis**
# `g_i`: the axes about which each angle turns. These are not orthogonal. Their **dual basis**
# `g^i` (`g^i . g_j = delta_ij`) is where moments live: a joint energy `U(a)` exerts the
# moment `M = - sum_i dU/da_i g^i`, so that `M . g_j = -dU/da_j` is exactly the generalized
# force of angle `j`. A bushing that multiplies `K` by the Euler angles therefore applies its
# moments along the dual basis (OpenSim's BushingForce does this too).

# %%
g = np.asarray(spineid.euler_basis(angles))
g_dual = np.asarray(spineid.dual_euler_basis(angles))
print("g^i . g_j =\n", np.round(g_dual @ g.T, 12))

figure = plt.figure(figsize=(6, 5))
axis = figure.add_subplot(projection="3d")
for i, colour in enumerate(("C0", "C1", "C2")):
    axis.quiver(0, 0, 0, *g[i], color=colour, lw=2, label=f"g_{i + 1} (Euler)")
    axis.quiver(0, 0, 0, *g_dual[i], color=colour, lw=1, ls="--", label=f"g^{i + 1} (dual)")
axis.set(xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), zlim=(-1.2, 1.2), xlabel="E1", ylabel="E2",
         zlabel="E3", title="Euler basis and dual basis at a = (20, 35, -15) deg")
axis.legend(fontsize=7, loc="upper left")
plt.show()

# %% [markdown]
# ## 2. Four stiffness matrices
#
# Take the SpineBushing energy `U = 1/2 (y - y0)^T K (y - y0)` with `y = [x, a]`. Its Hessian
# is `H = K` everywhere. But the matrix that maps a small Cartesian motion of the upper body to
# the change of its Cartesian load is `K^c` (supplement S.31): it carries the Jacobian of the
# Euler angles and a pre-stress term `D` that appears whenever the joint is loaded
# (`dU/da != 0`). `K^D` (S.39) uses the Euler basis for the moments, and `K^E` is what a rig
# measures with small uniaxial steps and a load cell. `compare_stiffnesses` gives the largest
# difference from `H`, scaled by the largest entry of `H` in the same block.

# %%
def quadratic(rest):
    return lambda y: 0.5 * (y - rest) @ jnp.asarray(K) @ (y - rest)


rig_steps = jnp.array([1e-4] * 3 + [np.radians(1.0)] * 3)  # 0.1 mm and 1 deg
twenty = np.radians(20.0)
rotated = jnp.array([0.0, 0.0, 0.0, twenty, 0.0, twenty])
postures = {
    "neutral, unloaded": (quadratic(jnp.zeros(6)), jnp.zeros(6)),
    "neutral, 5 deg preload": (quadratic(jnp.zeros(6).at[5].set(-np.radians(5.0))),
                               jnp.zeros(6)),
    "rotated 20 deg, unloaded": (quadratic(rotated), rotated),
    "rotated 20 deg, loaded": (quadratic(jnp.zeros(6)), rotated),
}
print(f"{'posture':28s} {'K^c':>7s} {'K^D':>7s} {'K^E':>7s}")
for name, (potential, y) in postures.items():
    table = spineid.compare_stiffnesses(potential, y, rig_steps)
    print(f"{name:28s} {table['K^c']:7.3f} {table['K^D']:7.3f} {table['K^E']:7.3f}")

# %% [markdown]
# Read the table row by row:
# - unloaded at the neutral posture, all agree with `H` (the rig's finite 1 degree steps cost
#   0.6%): this is the condition (S.36) under which labs treat `K^E` as `H`;
# - a preload makes `D` non-zero: every matrix differs from `H`, and `K^c` is not symmetric;
# - a large rotation without load leaves `K^D = H` but `K^c` differs by a third, because
#   small rotations about the fixed axes are not small changes of the Euler angles; `K^E`
#   (S.34: the rig steps the Euler angles and reads the moment along the Euler basis) tends to
#   `K^D`, so it still differs only by the rig's step. Read with the load cell's Cartesian
#   moments instead (`moments="cartesian"`), it would differ by a third too.
#
# Where the differences sit:

# %%
potential, y = postures["rotated 20 deg, unloaded"]
hessian = np.asarray(spineid.potential_hessian(potential, y))
scale = np.asarray(spineid.block_scale(hessian))
figure, axes = plt.subplots(1, 3, figsize=(11, 3.4))
matrices = {"K^c": spineid.cartesian_stiffness(potential, y),
            "K^D": spineid.dual_basis_stiffness(potential, y),
            "K^E": spineid.experimental_stiffness(potential, y, rig_steps)}
for axis, (name, matrix) in zip(axes, matrices.items()):
    image = axis.imshow((np.asarray(matrix) - hessian) / scale, cmap="RdBu_r", vmin=-0.4,
                        vmax=0.4)
    axis.set(xticks=range(6), yticks=range(6), xticklabels=AXES, yticklabels=AXES,
             title=f"({name} - H) / block scale")
figure.colorbar(image, ax=axes, shrink=0.8)
figure.suptitle("rotated 20 deg about e1 and e3, unloaded")
plt.show()

# %% [markdown]
# ## 3. Where the bushing applies its load
#
# One lumbar level: the upper vertebra's centre 35 mm above the lower one's. Three ways to
# join them with the diagonal of `K` (eq 25), as in Models 1-3 of Christophy et al.:
# - **Model 1**, classic bushing with both frames at the joint (midway between the centres):
#   no load in the neutral posture, but the force acts at the joint, so it has a moment arm
#   about the vertebra's centre of mass (eq 21);
# - **Model 2**, classic bushing with frames at the centres of mass: the bushing measures the
#   35 mm offset as a deflection and pushes back in the neutral posture (eq 19);
# - **Model 3**, SpineBushing at the centres: loads from the *change* of relative motion.
#
# `lumbar_models` builds all three for a chain; here the chain has one vertebra. We translate
# it anteriorly (no rotation) and read the load on it at its centre of mass.

# %%
centre, base = np.array([[0.0, 0.035, 0.0]]), np.zeros(3)
inertia = np.diag([8e-3, 1.2e-2, 9e-3])[None]
models = spineid.lumbar_models(centre, np.array([1.7]), inertia, K, base_centre=base)
shifts = np.linspace(-0.6e-3, 0.6e-3, 41)  # anterior translation, m


def load_on_vertebra(chain, shift):
    q = chain.bodies[0].reference_pose.at[0].add(shift)
    return chain.joint_loads(q, jnp.zeros(6))[0]  # [F1, F2, F3, M1, M2, M3] at the centre


loads = {n: np.asarray(jax.vmap(lambda s, c=models[n]: load_on_vertebra(c, s))(shifts))
         for n in (1, 2, 3)}
figure, axes = plt.subplots(1, 3, figsize=(13, 3.6))
for n in (1, 3):
    axes[0].plot(shifts * 1e3, loads[n][:, 0], label=f"Model {n}")
    axes[1].plot(shifts * 1e3, loads[n][:, 5], label=f"Model {n}")
axes[2].plot(shifts * 1e3, loads[2][:, 1] / 1e3, color="C2", label="Model 2")
axes[2].plot(shifts * 1e3, loads[3][:, 1] / 1e3, color="C1", label="Model 3")
axes[0].set(ylabel="F1 on the vertebra [N]", title="same force")
axes[1].set(ylabel="M3 at the centre of mass [N m]", title="spurious moment (cf. Fig 9)")
axes[2].set(ylabel="F2 [kN]", title="neutral-posture load (eq 19, cf. Fig 11)")
for axis in axes:
    axis.set_xlabel("anterior translation [mm]")
    axis.legend()
    axis.grid(alpha=0.3)
plt.tight_layout()
plt.show()
print(f"Model 2 at the neutral posture: F2 = {loads[2][20, 1]:.0f} N; "
      f"eq 19 predicts -K_22 * 0.035 m = {-K[1, 1] * 0.035:.0f} N")

# %% [markdown]
# Model 1's moment grows with the translation even though the joint has no coupling terms: it
# is the force times its arm to the centre of mass. Model 2 needs tens of kilonewtons to hold
# a spine that should be at rest. The SpineBushing (Model 3) gives the same force as Model 1
# with no spurious moment and no neutral load. `experiments/lumbar_models.py` runs the four
# models of the paper on L1-L5 under the motions of its Table 3.
#
# ## 4. Fitting a 6x6 matrix to a load test
#
# A quasi-static test: 60 poses with small random translations (up to 1 mm) and rotations (up to
# 8 deg) of the upper vertebra; the rig records the load that holds each pose, with load-cell
# noise. The moment that holds a pose acts along the dual Euler basis, so the fit maps the
# measured moments onto the Euler basis before solving the (linear) least squares.

# %%
rng = np.random.default_rng(0)
load_noise = np.array([2.0, 2.0, 2.0, 0.05, 0.05, 0.05])  # N, N m


def load_test(moving_axes, n=60):
    deflections = np.zeros((n, 6))
    for axis in moving_axes:
        deflections[:, axis] = rng.uniform(-1, 1, n) * (1e-3 if axis < 3 else np.radians(8))
    held = deflections @ K.T
    loads = held.copy()
    for row, beta in enumerate(deflections[:, 3:]):
        loads[row, 3:] = np.asarray(spineid.dual_euler_basis(beta)).T @ held[row, 3:]
    return spineid.QuasiStaticTest(loads + rng.normal(size=loads.shape) * load_noise,
                                   deflections)


fit = spineid.fit_stiffness_matrix(load_test(range(6)), "full", noise=load_noise)
entries = fit.entries
truth = np.array([K[i, j] for i, j in entries])
value = np.array([fit.matrix[i, j] for i, j in entries])
error = np.array([fit.stderr[i, j] for i, j in entries])
z = (value - truth) / error
plt.figure(figsize=(10, 3.5))
plt.axhspan(-1, 1, color="C0", alpha=0.15, label="1 standard error")
plt.axhspan(-2, 2, color="C0", alpha=0.08, label="2 standard errors")
plt.plot(range(len(entries)), z, "o", color="C0")
plt.xticks(range(len(entries)), [f"K[{AXES[i]},{AXES[j]}]" for i, j in entries], rotation=90)
plt.ylabel("(fit - truth) / stderr")
plt.title("21 entries of a full symmetric K from a six-axis test")
plt.legend(loc="upper right")
plt.tight_layout()
plt.show()
print(f"within one standard error: {np.mean(np.abs(z) < 1):.0%} of the entries; "
      f"largest relative error of a non-zero entry: "
      f"{np.max(np.abs(value - truth)[truth != 0] / np.abs(truth[truth != 0])):.1%}")

# %% [markdown]
# About two entries in three land within one standard error, as they should: for a linear
# model with Gaussian load noise the standard errors are exact (the tests check that over many
# repetitions).
#
# Now a protocol that only moves the sagittal degrees of freedom (tx, ty and flexion rz), a
# common simplification. The fit still runs, but the identifiability report says which entries
# the test cannot determine: those coupling only tz, rx and ry, which never moved.

# %%
import warnings  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    planar = spineid.fit_stiffness_matrix(load_test((0, 1, 5)), "full", noise=load_noise)
determined = np.zeros((6, 6))
for (i, j), ok in zip(planar.entries, planar.identifiability.identifiable):
    determined[i, j] = determined[j, i] = 1.0 if ok else 0.0
plt.imshow(determined, cmap="Greens", vmin=0, vmax=1.3)
plt.xticks(range(6), AXES)
plt.yticks(range(6), AXES)
plt.title(f"entries determined by a sagittal test: rank {planar.identifiability.rank} of 21")
plt.show()
for w in planar.warnings:
    if "does not determine" in w:
        print("WARNING:", w)

# %% [markdown]
# The same report comes from the command line: `spineid stiffness TEST.csv --out DIR` writes
# `report.json`, the matrix as a `[[bushings]]` fragment for a model file, and a plot of the
# loads. To identify a bushing from a *dynamic* test instead, fit it through the ODE:
# `spineid fit MODEL.toml DATA.csv --free bushing.stiffness` (see the README).
