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
# # 2. Identifiability: why 16 springs cannot be recovered one by one, and what can
#
# Liu (2001) replaced the intervertebral joint by a distribution of springs, a discrete measure
# `sum_l K_l delta_{s_l}`, and fitted the 16 stiffnesses to a trajectory. How many of those 16
# numbers does a trajectory actually determine? The singular value decomposition of the
# noise-weighted sensitivity matrix answers it, before any fit.

# %%
import copy
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import spineid

# The test suite runs every notebook with SPINEID_NOTEBOOK_QUICK=1: the same steps, with fewer
# Monte-Carlo fits (their spread then means little).
FITS = 6 if os.environ.get("SPINEID_NOTEBOOK_QUICK") == "1" else 24
noise = {"x": 5e-6, "y": 5e-6, "theta": np.radians(0.01)}
pair = spineid.load_model_file(spineid.dataset_path("liu_16_springs.toml"))
ts = pair.simulation_times()


def motion(model_file):
    simulation = spineid.simulate(model_file.model, jnp.asarray(ts))
    return np.asarray(jax.vmap(model_file.model.observe)(simulation.q))


measurement = spineid.Measurement(ts, motion(pair), ("x", "y", "theta"))
problem = spineid.FitProblem(pair, measurement, free=["stiffness"], noise=noise)
covariance, identifiability = spineid.analyse(problem)

plt.semilogy(np.arange(1, 17), identifiability.singular_values, "o-")
plt.axhline(identifiability.singular_values[0] * 1e-7, color="gray", ls="--", label="rank cut")
plt.xlabel("direction k")
plt.ylabel("singular value")
plt.title(f"16 vector springs on a line: rank {identifiability.rank}")
plt.legend()
plt.show()

# %% [markdown]
# Three singular values stand out; thirteen are at round-off level. The motion depends on the
# measure only through three numbers. Why: each spring's separation `Phi(s) = A(q) s + b(q)`
# is affine in the attachment point `s`, and `A^T A = 2 (1 - cos theta) I` is isotropic, so the
# energy `1/2 sum K_l |Phi(s_l)|^2` involves only
# `sum K_l`, `sum K_l s_l` and `sum K_l |s_l|^2`: 4 numbers, 3 when the points lie on a line.
#
# A striking consequence: a completely different measure with the same three moments moves
# the vertebra *identically*. Put all the stiffness on three springs instead of sixteen:

# %%
points = np.array([s["point"][0] for s in pair.document["springs"]])
stiffness = np.array([s["stiffness"] for s in pair.document["springs"]])
moments = [np.sum(stiffness * points**n) for n in range(3)]
chosen = [0, 7, 15]
vandermonde = np.array([[points[j] ** n for j in chosen] for n in range(3)])
weights = np.linalg.solve(vandermonde, moments)
other = copy.deepcopy(pair.document)
for i, spring in enumerate(other["springs"]):
    spring["stiffness"] = float(weights[chosen.index(i)]) if i in chosen else 0.0
print("three-spring stiffnesses [N/m]:", np.round(weights, 1))
difference = motion(spineid.ModelFile.from_document(other)) - motion(pair)
print(f"largest difference in motion: {np.max(np.abs(difference[:, :2])) * 1e6:.2e} um, "
      f"{np.degrees(np.max(np.abs(difference[:, 2]))):.2e} deg")

figure, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].stem(points * 1e3, stiffness, label="16 springs")
axes[0].stem(points[chosen] * 1e3, weights, linefmt="C1-", markerfmt="C1s", label="3 springs")
axes[0].set_xlabel("x [mm]")
axes[0].set_ylabel("stiffness [N/m]")
axes[0].legend()
axes[1].plot(ts, difference[:, 2], label="theta difference [rad]")
axes[1].set_xlabel("t [s]")
axes[1].set_title("same moments, same motion")
axes[1].legend()
plt.show()

# %% [markdown]
# (The damping springs are kept as they were; only the stiffnesses moved.) No trajectory can
# tell these two joints apart, so no fit can. What the data *do* determine are the moments, and
# spineid reports them with standard errors:

# %%
result = spineid.fit(problem)
for name, entry in result.moments.items():
    print(f"{name:20s} {entry['value']} +- {entry['stderr']} {entry['unit']}")
for warning in result.warnings[:1]:
    print("WARNING:", warning)

# %% [markdown]
# ## The geometry decides the rank
# On a line or a circle the second moment is a function of the first two: rank 3. On a
# curve that is neither, all four moments count: rank 4. Still far from 16.

# %%
def rank_on(curve_points):
    document = copy.deepcopy(pair.document)
    for spring, point in zip(document["springs"], curve_points):
        spring["point"] = [float(point[0]), float(point[1])]
    model_file = spineid.ModelFile.from_document(document)
    data = spineid.Measurement(ts, motion(model_file), ("x", "y", "theta"))
    problem = spineid.FitProblem(model_file, data, ["stiffness"], noise)
    return spineid.analyse(problem)[1].rank


s = np.linspace(-1, 1, 16)
print("line:    ", rank_on(np.stack([0.02 * s, 0.012 + 0 * s], axis=1)))
print("parabola:", rank_on(np.stack([0.02 * s, 0.010 + 0.006 * s**2], axis=1)))

# %% [markdown]
# ## Axial springs are different
# A ligament acts along its own line, with its own rest length, so each one leaves its own
# fingerprint in the motion: four axial springs give rank 4 of 4, each stiffness has a standard
# error, and a Monte Carlo experiment confirms that those errors are honest.

# %%
axial = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
axial_ts = axial.simulation_times()
clean = np.asarray(jax.vmap(axial.model.observe)(
    spineid.simulate(axial.model, jnp.asarray(axial_ts)).q))
sigma = np.array(list(noise.values()))
axial_problem = spineid.FitProblem(
    axial, spineid.Measurement(axial_ts, clean, ("x", "y", "theta")), ["stiffness"], noise)
covariance, axial_identifiability = spineid.analyse(axial_problem)
predicted = np.sqrt(np.diag(covariance))
print("rank", axial_identifiability.rank, "of 4; Cramer-Rao standard errors [N/m]:",
      np.round(predicted, 1))

draws = clean + np.random.default_rng(1).normal(size=(FITS,) + clean.shape) * sigma
batch = spineid.fit_many(axial_problem, [draws])
true_values = np.array([s["stiffness"] for s in axial.document["springs"]])
observed = batch["values"].std(axis=0)
print("Monte Carlo spread of the estimates [N/m]:", np.round(observed, 1))
inside = np.abs(batch["values"] - true_values) <= 1.96 * batch["stderr"]
print(f"95% intervals containing the truth: {inside.mean():.0%} of {inside.size}")

plt.bar(np.arange(4) - 0.2, predicted, width=0.4, label="Cramer-Rao (one fit)")
plt.bar(np.arange(4) + 0.2, observed, width=0.4, label=f"Monte Carlo ({FITS} fits)")
plt.xticks(range(4), [f"spring {i}" for i in range(4)])
plt.ylabel("standard error [N/m]")
plt.legend()
plt.show()

# %% [markdown]
# ## A local minimum, its verdict, and the way out
# Identifiable is not the same as found. Take the same pair with a tenth of its damping, so
# that it rings, and start the fit with the first two springs 2.3 times too stiff and the
# last at half its stiffness: the simulated oscillation runs ahead of the data, slips a whole
# period, and single shooting settles in the valley of that slip. Its standard errors are small and would look trustworthy, but the
# verdict on the residuals says the model does not explain the data.

# %%
ringing = copy.deepcopy(axial.document)
for spring in ringing["springs"]:
    spring["damping"] *= 0.1
ringing_truth = spineid.ModelFile.from_document(ringing)
ringing_ts = np.linspace(0.0, 0.4, 201)
ringing_data = np.asarray(jax.vmap(ringing_truth.model.observe)(
    spineid.simulate(ringing_truth.model, jnp.asarray(ringing_ts)).q))
ringing_data = ringing_data + np.random.default_rng(2).normal(size=ringing_data.shape) * sigma
for spring, factor in zip(ringing["springs"], (2.33, 2.35, 1.04, 0.55)):
    spring["stiffness"] *= factor
ringing_problem = spineid.FitProblem(
    spineid.ModelFile.from_document(ringing),
    spineid.Measurement(ringing_ts, ringing_data, ("x", "y", "theta")), ["stiffness"], noise)

single = spineid.fit(ringing_problem, spineid.LevenbergMarquardt())
print("single shooting from the start:", np.round(single.values), "+-",
      np.round(single.stderr, 1))
print("  explains the data:", single.explains_data)
print("  " + "\n  ".join(single.goodness_of_fit.reasons))

# %% [markdown]
# The default solver (`spineid.Auto()`) does not wait for that verdict: before any fit it
# finds that the start rings (its linearised modes run through tens of radians of phase over
# the record, `spineid.linear_modes`) and fits by multiple shooting first: the record is cut
# into short segments whose start states become unknowns, read off the data, so no segment is
# long enough for the phase to slip; continuity residuals tie the segments together, and a
# last single-shooting fit polishes the result. (Where a start does not ring, `Auto` fits by
# single shooting and turns to multiple shooting only on a failed verdict.)

# %%
default = spineid.fit(ringing_problem)
print(default.solver)
print("estimate:", np.round(default.values), "truth:", true_values)
print("explains the data:", default.explains_data,
      f"(cost {default.cost:.0f} against {single.cost:.3g} at the local minimum)")

plt.plot(ringing_ts, ringing_data[:, 2], ".", markersize=3, label="data")
plt.plot(ringing_ts, single.predictions[0][:, 2], label="single shooting (local minimum)")
plt.plot(ringing_ts, default.predictions[0][:, 2], label="default (multiple shooting)")
plt.xlabel("t [s]")
plt.ylabel("theta [rad]")
plt.legend()
plt.show()

# %% [markdown]
# Without the noise given, the verdict cannot compare the residuals with a known noise level;
# it has three levels instead (`goodness_of_fit.level`): the model *explains* the data (the
# residuals, whitened by the noise model, are white), *describes* them (a smooth misfit within
# 2% of each channel's range remains: correlated noise or a slightly imperfect model, the
# values usable), or *does not describe* them. The right model with the noise estimated
# explains these data; the same data fitted by a model without its dampers leave a smooth
# misfit far beyond the tolerance (the oscillation's decay is missing), and are flagged.

# %%
undamped = copy.deepcopy(ringing)
for spring in undamped["springs"]:
    spring["damping"] = 0.0
right = spineid.fit(spineid.FitProblem(ringing_problem.model_file,
                                       ringing_problem.measurements, ["stiffness"]),
                    spineid.LevenbergMarquardt())  # the noise estimated, noise_model="auto"
missing = spineid.fit(spineid.FitProblem(spineid.ModelFile.from_document(undamped),
                                         ringing_problem.measurements, ["stiffness"]),
                      spineid.LevenbergMarquardt())
for name, fitted in (("right model", right), ("without dampers", missing)):
    largest = max(e["fraction_of_range"] for e in fitted.goodness_of_fit.misfit.values())
    print(f"{name}: {fitted.goodness_of_fit.level}, smooth misfit up to "
          f"{100 * largest:.2g}% of a channel's range")
assert missing.goodness_of_fit.level == "does_not_describe" and right.accepted
