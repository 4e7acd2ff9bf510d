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
# # 9. Designing the experiment, and posteriors for what stays weak
#
# A fit tells you what your data determine. This notebook asks the question before the data
# exist: which experiment should the rig run so that the data determine what you want? Then it
# looks at a parameter the best experiment still leaves weakly determined, through its
# posterior rather than its linearised interval.
#
# The specimen is the bundled pair of four axial springs with dampers
# (`datasets/axial_4_springs.toml`), and the rig can apply a force or a moment at one
# frequency at a time (`datasets/designs/axial_4_springs.toml` lists the candidates).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import spineid

# The test suite runs every notebook with SPINEID_NOTEBOOK_QUICK=1: the same steps, with fewer
# repetitions and posterior draws (their numbers then mean little).
QUICK = os.environ.get("SPINEID_NOTEBOOK_QUICK") == "1"

design_file = spineid.io.read_design_file(
    spineid.dataset_path("designs/axial_4_springs.toml"))
# (each entry: name, model, sample times, measured channels)
candidates = [spineid.Candidate(*entry) for entry in design_file.candidates]
noise = {"x": 2e-5, "y": 2e-5, "theta": float(np.radians(0.05))}  # 20 um, 0.05 degree
free = ["stiffness", "damping"]
print([c.name for c in candidates])

# %% [markdown]
# ## 1. Today's protocol: a lateral force at 3 Hz
#
# Simulate the specimen under today's protocol, add noise and fit. The chi-square says the
# model explains the data, yet Levenberg-Marquardt stops at its step limit (NOT converged):
# one damper runs towards its bound of zero, along a direction on which the cost barely
# changes. Read the identifiability report for why.

# %%
rng = np.random.default_rng(0)
today = next(c for c in candidates if c.name == "Fy 3 Hz")
design_today = spineid.design([today], free, noise)
problem = design_today.problem()
sigma = np.array([noise[c] for c in problem.channels])


def noisy(problem):
    """The problem with fresh noise on its (noise-free) records."""
    records = [spineid.Measurement(m.ts, m.values + rng.normal(size=m.values.shape) * sigma,
                                   m.channels) for m in problem.measurements]
    return spineid.FitProblem(problem.model_file, records, problem.names, noise,
                              models=problem.models)


fitted = spineid.fit(noisy(problem), spineid.LevenbergMarquardt())
print(fitted.summary())

# %% [markdown]
# Several dampers and one spring come with standard errors of the size of the values
# themselves: the lateral force at 3 Hz barely excites them.
#
# ## 2. The D-optimal pair of experiments
#
# `spineid.design` computes each candidate's Fisher information from the exact sensitivities
# through the ODE and chooses the two that together maximise its determinant (in relative
# units), beside today's protocol.

# %%
found = spineid.design(candidates, free, noise, criterion="D", budget=2,
                       baseline=["Fy 3 Hz"])
print(found.summary())
spineid.plot_design(found)
plt.show()

# %% [markdown]
# Two faster experiments (a force and a moment at 12 Hz) cut every error by a factor of 7 to
# 30. A prediction is only as good as the linearisation behind it. A first, cheap check:
# recompute the predicted errors two of them away from the nominal values, along the
# directions the design determines worst. If they hardly change, the linearisation holds over
# the spread the estimates will have.

# %%
print(found.check_linearity().summary())

# %% [markdown]
# (Where it does not hold, the spread of real fits can differ from the prediction: a full 6x6
# bushing matrix designed from three force cases is such a case,
# `experiments/design_and_posterior.py`.) The thorough check: run the designed experiments
# on simulated noisy data many times and compare the spread of the estimates with the
# predicted standard errors.

# %%
validation = spineid.validate_design(found, 4 if QUICK else 20, seed=1)
print(validation.summary())
spineid.plot_design(found, validation=validation)
plt.show()

# %% [markdown]
# Twenty repetitions estimate a standard deviation to about 16%: the ratios scatter about 1.
# (`experiments/design_and_posterior.py` runs 50; on the command line, `spineid design
# DESIGN.toml --validate 50`.)
#
# ## 3. The posterior of what stays weak
#
# Even with the design, the third damper is known to about a quarter of its value. Its
# Cramer-Rao interval is symmetric by construction, the linearisation of the model at the
# optimum; the posterior (NUTS, with a weakly informative log-normal prior on every parameter)
# is the whole picture: its interval need not be symmetric, and it respects that a damper is
# positive. Four chains run from dispersed starts; the summary gives each parameter's R-hat
# (above 1.01 the chains disagree) and its bulk and tail effective draws (a few hundred draws
# give about a hundred effective ones for the weakest parameters: draw more before reading
# tails). `posterior.to_inference_data()` hands the draws to ArviZ (`az.plot_trace`).

# %%
designed = found.problem()
measured = noisy(designed)
fitted = spineid.fit(measured, spineid.LevenbergMarquardt())
posterior = spineid.posterior(measured, samples=20 if QUICK else 150,
                             warmup=20 if QUICK else 100, chains=2 if QUICK else 4,
                             start=fitted.values)
print(posterior.summary())
weak = found.names.index("springs[2].damping")
low, high = posterior.interval()[weak]
print(f"springs[2].damping: posterior 95% [{low:.2f}, {high:.2f}] N s/m; Cramer-Rao "
      f"{fitted.values[weak]:.2f} +- {1.96 * fitted.stderr[weak]:.2f}")
plt.hist(posterior.draws[:, weak], bins=30, density=True, alpha=0.6, label="posterior")
grid = np.linspace(*plt.xlim(), 200)
plt.plot(grid, np.exp(-0.5 * ((grid - fitted.values[weak]) / fitted.stderr[weak]) ** 2)
         / (fitted.stderr[weak] * np.sqrt(2 * np.pi)), label="Cramer-Rao normal")
plt.xlabel("springs[2].damping [N s/m]")
plt.legend()
plt.show()

# %% [markdown]
# Where the two agree, the linearised interval was fine; where they part, trust the posterior
# (and the profile likelihood, `result.profile(name)`), not the Cramer-Rao error.
# `spineid.plot_posterior(posterior, reference=fitted)` draws every pair. What no experiment
# among the candidates can determine at all, `spineid.design` lists as `never`: a spring
# measure beyond its moments is the classic case (notebook 2), and there the posterior is only
# the prior, stretched along the directions the data cannot see.
