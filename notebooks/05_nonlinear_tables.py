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
# # 5. Nonlinear tables: the neutral zone, and fitting stiffness phases to a loop
#
# A spinal joint is not a linear spring. Under a small moment it turns almost freely (the
# *neutral zone*), then stiffens. Liu (2001, section 4.3) tabulates the L5-S1 joint in
# flexion-extension as five phases of constant stiffness. This notebook
# 1. looks at that table as a load law, its stiffness and its stored energy;
# 2. drives a vertebra through it and watches the load-displacement loop open up (Fig 4-24);
# 3. recovers the phases from the loop, and shows what goes wrong if the damper is ignored.

# %%
import pathlib
import tempfile

import diffrax
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import spineid

phases = spineid.liu_l5_s1_phases()  # a DataTable: labelled SI columns with units and source
for low, high, k in zip(phases["lower"], phases["upper"], phases["stiffness"]):
    print(f"  {np.degrees(low):6.2f} to {np.degrees(high):5.2f} deg: "
          f"{k * np.pi / 180:6.3f} N m/deg")

# %% [markdown]
# ## 1. A table as a law
#
# spineid stores every law as an energy `E(x)`; the load `M(x) = E'(x)` and the stiffness
# `E''(x)` come from automatic differentiation. A sharp table has a stiffness that jumps at each
# breakpoint, which an adaptive integrator must resolve and a gradient-based fit dislikes.
# `smoothing` rounds each breakpoint over a small width; outside those windows the law *is* the
# table.

# %%
angles = jnp.radians(jnp.linspace(-7.0, 10.0, 1201))
figure, axes = plt.subplots(1, 3, figsize=(14, 3.8))
for width in (0.0, 0.11, 0.5):
    law = spineid.l5_s1_law(smoothing=np.radians(width))
    label = f"smoothing {width} deg"
    axes[0].plot(np.degrees(angles), law.load(angles), label=label)
    axes[1].plot(np.degrees(angles), law.stiffness(angles) * np.pi / 180, label=label)
    axes[2].plot(np.degrees(angles), jax.vmap(law.energy)(angles), label=label)
axes[0].set(ylabel="moment [N m]", title="the L5-S1 law (Liu 2001 section 4.3)")
axes[1].set(ylabel="stiffness [N m/deg]", title="its stiffness: zero in the neutral zone")
axes[2].set(ylabel="stored energy [J]", title="its energy (what spineid stores)")
for axis in axes:
    axis.set_xlabel("flexion-extension angle [deg]")
    axis.axvspan(-1.7, 1.7, color="gray", alpha=0.1)
    axis.grid(alpha=0.3)
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Other shapes of law share the same interface: a monotone cubic through the same nodes
# (PCHIP: smooth, never overshoots), or the tan/cos law `M = k tan(x/2)/cos(x/2)` of the
# head-neck model of Fritzkowski and Walczak.

# %%
law = spineid.l5_s1_law()
cubic = spineid.MonotoneCubicLaw(law.displacement, law.load_values)
tan_cos = spineid.TanCosLaw(jnp.asarray(40.0))
for name, each in (("phases", law), ("monotone cubic", cubic), ("tan/cos, k = 40", tan_cos)):
    plt.plot(np.degrees(angles), each.load(angles), label=name)
plt.plot(np.degrees(law.displacement), law.load_values, "ko", label="table nodes")
plt.xlabel("angle [deg]")
plt.ylabel("moment [N m]")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## 2. Driving a vertebra through the table
#
# `datasets/l5_s1_pair.toml`: L5 turns about a pin on the fixed sacrum, held by a torsion
# element with this law and a damper `c = 10 N m s/rad`, driven by a moment of 10 N m at
# 0.05 Hz. We simulate one period. In the neutral zone only the damper resists, so the motion
# there is fast and the problem stiff (time constant `J / c` of about 0.1 ms): an implicit
# solver (Kvaerno5) takes large steps where an explicit one would crawl.

# %%
model = spineid.load_model(spineid.dataset_path("l5_s1_pair.toml"))
ts = jnp.linspace(0.0, 20.0, 2001)
solution = spineid.simulate(model, ts, solver=diffrax.Kvaerno5())
angle = np.asarray(solution.q)[:, 0]
moment = np.asarray(jax.vmap(model.applied_load)(ts))[:, 2]

plt.plot(np.degrees(angle), moment, label="simulated loop (applied moment)")
plt.plot(np.degrees(angles), law.load(angles), "k--", lw=1, label="database law")
plt.xlim(-7, 10)
plt.xlabel("angle [deg]")
plt.ylabel("moment [N m]")
plt.title("load-displacement loop (cf. Liu 2001 Fig 4-24)")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# The loop straddles the table: on loading the applied moment also pushes the damper (`c x'`
# above the law), on unloading the damper pushes back. The width of the loop is the damper, not
# a different stiffness.
#
# ## 3. Recovering the phases from the loop
#
# The measured data: angle and applied moment with small noise (0.01 deg, 0.01 N m). The model
# to fit: `M_applied = M(x) + c x' + J x''`, with the law `M` a piecewise-linear table whose
# interior breakpoints are free, the damper `c` free and the inertia `J` about the pin known.
# The rates come from the angle record by local quadratic fits (9 samples), which averages the
# noise instead of amplifying it. The start is 0.3-0.5 deg off on every breakpoint.

# %%
arm = np.asarray(model.upper.reference_pose[:2] - model.pin)
inertia = float(model.upper.inertia + model.upper.mass * arm @ arm)
rng = np.random.default_rng(1)
noisy_angle = angle + np.radians(0.01) * rng.standard_normal(angle.size)
noisy_moment = moment + 0.01 * rng.standard_normal(moment.size)
data = spineid.LoadDisplacementData(noisy_angle, noisy_moment, np.asarray(ts), "loop")

truth = np.degrees(np.asarray(law.displacement))
start = np.radians(truth + np.array([0.0, 0.4, -0.3, 0.5, -0.4, 0.0]))
start[0], start[-1] = noisy_angle.min(), noisy_angle.max()
# What is fitted (the law's form, and the test's dynamics) is kept apart from the data:
form = spineid.LawForm("piecewise_linear", start, free_breakpoints=True,
                       smoothing=float(law.smoothing))
fit = spineid.fit_load_law(data, form, dynamics=spineid.LawDynamics(damping=True,
                                                                     inertia=inertia,
                                                                     rate_window=9))
nodes = fit.derived["node_displacement"]
print("breakpoint  database [deg]  recovered [deg]")
for k in range(1, len(truth) - 1):
    value, error = nodes[k]
    print(f"  {k}        {truth[k]:6.2f}        {np.degrees(value):7.3f} +- "
          f"{np.degrees(error):.3f}")
print(f"damper: {fit.damping:.3f} N m s/rad (model 10)")
slopes = fit.derived["slopes"]
print("phase stiffness [N m/deg]: database",
      np.round(np.asarray(law.slopes) * np.pi / 180, 3),
      " recovered", np.round([v * np.pi / 180 for v, _ in slopes], 3))

# %% [markdown]
# The standard errors tell which breakpoints the loop pins down: the ones bounding the neutral
# zone are the least determined, because inside the zone the law is flat and only the damper
# carries the load. Look at the fit and at the residuals, in units of the noise level the fit
# estimated from them. That level (about 0.05 N m) exceeds the 0.01 N m added to the moment:
# the 0.01 deg angle noise enters through the stiffness too (6 N m/deg x 0.01 deg in the
# stiffest phase).

# %%
figure, axes = plt.subplots(1, 2, figsize=(12, 3.8))
axes[0].plot(np.degrees(noisy_angle), noisy_moment, ".", ms=1.5, color="gray", label="data")
axes[0].plot(np.degrees(angles), law.load(angles), "k--", lw=1, label="database law")
axes[0].plot(np.degrees(angles), fit.law.load(angles), "C3", label="recovered law")
axes[0].set(xlim=(-7, 10), xlabel="angle [deg]", ylabel="moment [N m]")
axes[0].legend()
axes[1].plot(np.asarray(ts), fit.residuals / fit.noise, ".", ms=1.5)
axes[1].set(xlabel="t [s]", ylabel="residual / noise", title="residuals: no structure left")
for axis in axes:
    axis.grid(alpha=0.3)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. A wrong model fits, and lies
#
# Suppose we forget the damper and fit the same table to the same loop. The fit still
# converges, but a single-valued law cannot pass through both branches of a loop: it runs
# between them where the loop is open (the neutral zone, which it no longer finds), and the
# residuals show, in time, the structure the model misses. A good fit leaves residuals that
# look like noise; this is the first thing to look at.

# %%
no_damper = spineid.fit_load_law(data, form, dynamics=spineid.LawDynamics(inertia=inertia,
                                                                           rate_window=9))
figure, axes = plt.subplots(1, 2, figsize=(12, 3.8))
axes[0].plot(np.asarray(ts), fit.residuals / fit.noise, ".", ms=1.5, label="with damper")
axes[0].plot(np.asarray(ts), no_damper.residuals / fit.noise, ".", ms=1.5,
             label="without damper")
axes[0].set(xlabel="t [s]", ylabel="residual / noise of the good fit")
axes[0].legend()
axes[1].plot(np.degrees(angles), fit.law.load(angles), "C3", label="with damper")
axes[1].plot(np.degrees(angles), no_damper.law.load(angles), "C0", label="without damper")
axes[1].plot(np.degrees(angles), law.load(angles), "k--", lw=1, label="database")
axes[1].set(xlim=(-7, 10), xlabel="angle [deg]", ylabel="moment [N m]")
axes[1].legend()
for axis in axes:
    axis.grid(alpha=0.3)
plt.tight_layout()
plt.show()
rms = [float(np.sqrt(np.mean(f.residuals**2))) for f in (fit, no_damper)]
print(f"RMS residual: with damper {rms[0]:.3f} N m, without {rms[1]:.3f} N m; recovered "
      f"breakpoints without damper [deg]: "
      f"{np.round(np.degrees(np.asarray(no_damper.law.displacement))[1:-1], 2)}")

# %% [markdown]
# ## 5. Tester noise is not white: a noise model, honest errors, a verdict in three levels
#
# A materials tester filters its load cell, so the load noise of neighbouring samples is
# correlated. Below, a quasi-static shear ramp (1500 points, 0-3 mm, a knee at 1.2 mm) with
# load noise of AR(1) form, rho 0.6. Fitted as if the noise were white, the law is right but
# the residuals are not white, and the standard errors are half what they should be. The
# default noise model (`noise="auto"`) finds the autoregression, fits by generalized least
# squares, and its errors hold. A third phase the law lacks (a yield) leaves a smooth misfit
# larger than the tolerance (2% of the load range): *does not describe*.
# ([docs/goodness-of-fit.md](../docs/goodness-of-fit.md) measures the coverage of these errors.)

# %%
rng = np.random.default_rng(3)
x_mm = np.linspace(0.0, 3.0, 1500)


def tester_noise(rho=0.6, sd=2.0):
    shocks = rng.normal(scale=sd * np.sqrt(1 - rho**2), size=x_mm.size + 200)
    noise = np.zeros_like(shocks)
    for k in range(1, shocks.size):
        noise[k] = rho * noise[k - 1] + shocks[k]
    return noise[200:]


def two_phase(x):  # N, of x in mm: 40 N/mm, then 160 N/mm from 1.2 mm
    return np.where(x < 1.2, 40.0 * x, 48.0 + 160.0 * (x - 1.2))


ramp = spineid.LoadDisplacementData(x_mm * 1e-3, two_phase(x_mm) + tester_noise())
knee_law = spineid.LawForm("piecewise_linear", n_nodes=3, free_breakpoints=True)
for noise_model in ("white", "auto"):
    tester_fit = spineid.fit_load_law(ramp, knee_law, noise=noise_model)
    knee, error = tester_fit.derived["node_displacement"][1]
    print(f"{noise_model:6s} knee {knee * 1e3:.4f} +- {error * 1e3:.4f} mm (truth 1.2); "
          f"level: {tester_fit.goodness_of_fit.level}")
print(tester_fit.goodness_of_fit.summary())
yielded = spineid.LoadDisplacementData(
    x_mm * 1e-3, np.where(x_mm < 2.4, two_phase(x_mm), two_phase(2.4) + 40.0 * (x_mm - 2.4))
    + tester_noise())
wrong = spineid.fit_load_law(yielded, knee_law)
print(wrong.goodness_of_fit.summary())
# The command line's figure of this fit (`law_fit.png`), written to a scratch folder and shown:
figure_path = spineid.plot_law_fit(wrong, yielded, pathlib.Path(tempfile.mkdtemp())
                                   / "wrong_law.png", unit="mm")
plt.figure(figsize=(8, 6))
plt.imshow(plt.imread(figure_path))
plt.axis("off")
plt.show()

# %% [markdown]
# The same fit runs from the command line on a CSV with columns `t,displacement,load`:
# `spineid table loop.csv --out DIR --nodes=... --free-breakpoints --damping --inertia J`; it
# writes `report.json`, the law as a `law` table ready for a model file (`law.toml`), and a
# plot. `experiments/l5_s1_loop.py` runs the full-size version of this notebook.
