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
# # 1. Forward and inverse: simulate a vertebral pair, add noise, fit, read the residuals
#
# A *forward* problem computes the motion from the model; an *inverse* problem recovers the
# model from the motion. Here the model is a planar pair of vertebrae: a fixed lower body and an
# upper body held by four ligament-like springs (`axial` springs), shaken by sinusoidal loads.
# We simulate it, pretend the simulation is a measurement by adding optical-tracking noise,
# forget the stiffnesses, and recover them by least squares through the ODE solve.
#
# Open this file in Jupyter with jupytext, or run it as a script.

# %%
import copy

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import spineid

# %% [markdown]
# ## The forward problem
# `load_model_file` reads a model file (TOML) and validates it; `simulate` integrates
# Lagrange's equations (derived by automatic differentiation of the energies) with diffrax.

# %%
truth = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
ts = truth.simulation_times()
simulation = spineid.simulate(truth.model, jnp.asarray(ts))
poses = np.asarray(jax.vmap(truth.model.observe)(simulation.q))  # x, y, theta of the upper body
print("true stiffnesses [N/m]:", [s["stiffness"] for s in truth.document["springs"]])

figure, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
for axis, column, label, scale in zip(axes, poses.T, ["x [mm]", "y [mm]", "theta [deg]"],
                                      [1e3, 1e3, np.degrees(1)]):
    axis.plot(ts, (column - column[0]) * scale)
    axis.set_ylabel(label)
axes[-1].set_xlabel("t [s]")
figure.suptitle("The forward problem: motion of the upper vertebra")
plt.show()

# %% [markdown]
# ## A synthetic measurement
# Optical tracking resolves about 5 micrometres and 0.01 degree. We add that noise.

# %%
noise = {"x": 5e-6, "y": 5e-6, "theta": np.radians(0.01)}
sigma = np.array(list(noise.values()))
rng = np.random.default_rng(0)
measured = poses + rng.normal(size=poses.shape) * sigma
measurement = spineid.Measurement(ts, measured, ("x", "y", "theta"))

# %% [markdown]
# ## The inverse problem
# Start from a wrong guess (all springs 15000 N/m) and let Levenberg-Marquardt find the
# stiffnesses that make the simulated motion match the measurement. The Jacobian of the
# residuals comes from forward-mode differentiation through the ODE solver.

# %%
guess = copy.deepcopy(truth.document)
for spring in guess["springs"]:
    spring["stiffness"] = 15000.0
problem = spineid.FitProblem(spineid.ModelFile.from_document(guess), measurement,
                             free=["stiffness"], noise=noise)
result = spineid.fit(problem)
print(result.summary())

# %% [markdown]
# Each stiffness is recovered to within a few standard errors, and the standard errors
# (Cramer-Rao bounds from the Fisher information) are a fraction of a per cent: four
# ligaments with distinct lines of action are individually identifiable from this motion.

# %%
true_values = np.array([s["stiffness"] for s in truth.document["springs"]])
print("error in standard errors:", np.round((result.values - true_values) / result.stderr, 2))

# %% [markdown]
# ## Reading the residuals
# If the model is right and the noise level is right, the residuals divided by the noise look
# like independent standard normal draws: no structure in time, a bell curve of width one.
# Twice the cost is then close to the number of data minus the number of parameters.

# %%
residual = (measured - result.predictions[0]) / sigma
figure, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for c, name in enumerate(("x", "y", "theta")):
    axes[0].plot(ts, residual[:, c], ".", ms=2, label=name)
axes[0].set_xlabel("t [s]")
axes[0].set_ylabel("residual / sigma")
axes[0].legend()
grid = np.linspace(-4, 4, 100)
axes[1].hist(residual.ravel(), bins=40, density=True, alpha=0.6)
axes[1].plot(grid, np.exp(-grid**2 / 2) / np.sqrt(2 * np.pi), "k")
axes[1].set_title("histogram against N(0, 1)")
plt.show()
print(f"2 x cost = {2 * result.cost:.0f}, n_data - n_parameters = {result.n_data - 4}")

# %% [markdown]
# ## What a wrong model does to the residuals
# Fit again, but pretend the third ligament does not exist (its stiffness fixed at a tenth of
# the truth). The fit still converges, but the residuals now carry structure: the model cannot
# reproduce the motion, and no amount of fitting hides that.

# %%
wrong = copy.deepcopy(guess)
wrong["springs"][2]["stiffness"] = true_values[2] / 10
names = [f"springs[{i}].stiffness" for i in (0, 1, 3)]
wrong_problem = spineid.FitProblem(spineid.ModelFile.from_document(wrong), measurement,
                                   free=names, noise=noise)
wrong_result = spineid.fit(wrong_problem)
wrong_residual = (measured - wrong_result.predictions[0]) / sigma
plt.figure(figsize=(8, 3))
plt.plot(ts, wrong_residual[:, 2], ".", ms=2)
plt.xlabel("t [s]")
plt.ylabel("theta residual / sigma")
plt.title(f"a model missing a ligament: 2 x cost = {2 * wrong_result.cost:.3g}")
plt.show()
assert wrong_result.cost > 10 * result.cost
print("does the wrong model explain the data?", wrong_result.explains_data)
print(wrong_result.goodness_of_fit.summary())

# %% [markdown]
# The fit says so itself: `explains_data` is `False` for the model missing a ligament, and its
# standard errors then mean nothing. Every fit carries this verdict (a chi-square test with the
# noise given, a whiteness test of the residuals with it estimated); `summary()` prints it.
#
# ## Data as a motion-capture lab has them: filtered noise and three levels
# Real marker trajectories are low-pass filtered (here a 4th-order Butterworth at 40 Hz, zero
# phase, as motion-capture pipelines filter), so neighbouring samples share most of their
# error. With the noise estimated and weighted as if it were white, the fit finds the right
# optimum but its standard errors are several times too small, and its residuals are not white.
# The verdict then has three levels (`goodness_of_fit.level`): *explains* (the residuals,
# whitened by the noise model, are white), *describes* (a smooth misfit remains within a
# tolerance of 2% of each channel's range: the values are usable) and *does not describe* (a
# larger misfit: a wrong model or a local optimum).

# %%
# (`spineid.correlated_noise` draws noise as labs record it: white noise through a zero-phase
# Butterworth low-pass, here at 40 Hz of 1 kHz sampling, or an autoregression: phi=...)
filtered = spineid.correlated_noise(poses.shape, sigma, low_pass=40.0, rate=1000.0, rng=1)
lab = spineid.Measurement(ts, poses + filtered, ("x", "y", "theta"))
as_white = spineid.fit(spineid.FitProblem(spineid.ModelFile.from_document(guess), lab,
                                          free=["stiffness"], noise_model="white"))
print("weighted as white noise:", as_white.goodness_of_fit.level,
      "| errors in standard errors:", np.round((as_white.values - true_values)
                                              / as_white.stderr, 1))
lab_result = spineid.fit(spineid.FitProblem(spineid.ModelFile.from_document(guess), lab,
                                            free=["stiffness"]))  # noise_model="auto"
print("under the default noise model:", lab_result.goodness_of_fit.level,
      "| errors in standard errors:", np.round((lab_result.values - true_values)
                                              / lab_result.stderr, 1))
print(lab_result.goodness_of_fit.summary())

# %% [markdown]
# The default noise model (`"auto"`) fits an autoregression to each channel's residuals (the
# order AIC prefers, none where BIC finds them white), refits by generalized least squares and
# takes the errors under it: here about four times those of the white weighting, and the
# estimates lie much closer to the truth in their terms. A Butterworth spectrum is not a
# low-order autoregression, though: the whitened residuals are still not white, and over many
# such records these errors are still 1.1-1.2 times too small (docs/goodness-of-fit.md,
# measured by experiments/coverage_correlated.py); for noise correlated as an autoregression
# they hold.
# The smooth part of the residuals that the verdict measures is drawn in red. The model missing
# a ligament is still flagged on the same data:

# %%
spineid.plot_residuals(lab_result, ("x", "y", "theta"), None)
plt.show()
wrong_lab = spineid.fit(spineid.FitProblem(spineid.ModelFile.from_document(wrong), lab,
                                           free=names))
print("the model missing a ligament:", wrong_lab.goodness_of_fit.level)
assert wrong_lab.goodness_of_fit.level == "does_not_describe" and lab_result.accepted

# %% [markdown]
# ## The same problem without a file
# A model file is one way to make a model; the classes are the other. Here is the same pair
# built in Python: two bodies, four axial springs (attachment points in the reference
# configuration), the torsion-free joint and the three sinusoidal loads. Each element declares
# its parameters (name, unit, bounds) and names them as the model file does: `springs[0].stiffness`
# to `springs[3].stiffness`, the group `stiffness` all four.

# %%
springs = truth.document["springs"]
lower = spineid.PlanarBody.fixed_at([0.0, 0.0, 0.0])
upper = spineid.PlanarBody(mass=0.5, inertia=1.2e-3, reference_pose=[0.0, 0.03, 0.0])
ligaments = spineid.AxialSprings.from_reference(
    [s["lower_point"] for s in springs], [s["upper_point"] for s in springs],
    stiffness=[15000.0] * 4, damping=[s["damping"] for s in springs],
    reference_pose_a=lower.reference_pose, reference_pose_b=upper.reference_pose)
loads = spineid.SinusoidalLoad.from_terms(
    [("Fx", 6.0, 4.0, 0.3), ("Fy", 4.0, 7.0), ("Mz", 0.08, 5.0, 1.0)])
pair = spineid.PlanarPair(lower=lower, upper=upper, elements=(ligaments,), loads=(loads,),
                          gravity=[0.0, 0.0], initial_pose=upper.reference_pose)
print([p.name for p in spineid.declared_parameters(pair)])

python_result = spineid.fit(spineid.FitProblem(pair, measurement,
                                               free=["stiffness"], noise=noise))
print(python_result.summary())
print("largest difference from the file-built fit [N/m]:",
      np.max(np.abs(python_result.values - result.values)))
assert np.allclose(python_result.values, result.values, rtol=1e-8)
