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
# # 6. Whiplash: the head-neck chain, the energy-work check, and what head motion says
#
# Fritzkowski and Walczak model the head and the seven cervical vertebrae as a planar chain
# of eight rigid bodies on T1. A rear-end impact pushes T1 forward with a triangular pulse of
# 8.5 g; the neck answers through ligaments (Kelvin-Voigt spring-dampers, anterior and
# posterior at every level) and nonlinear rotational springs at the pivots. This notebook
# 1. builds the chain and looks at the pulse (and at a misprint in the paper's eq 48);
# 2. simulates the impact and checks the integration by the 'kinetic energy - work' balance;
# 3. looks at the neck: the S-shape, then the C-shape, the head's motion, the ligaments;
# 4. asks what the head's trajectory, measured with 0.5 mm noise, tells us about the ligament
#    and joint stiffness;
# 5. asks how strongly the peak ligament force depends on each parameter.

# %%

import diffrax
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import spineid

model_file = spineid.load_model_file(spineid.dataset_path("head_neck.toml"))
chain = model_file.model
print(f"{chain.n_dof} bodies, masses {np.round(np.asarray(chain.masses), 3)} kg")
for parameter in model_file.parameters:
    print(f"  {parameter.name:32s} {float(parameter.get(chain)):9.1f} {parameter.unit}")

# %% [markdown]
# ## 1. The pulse
#
# The paper gives the base displacement (its eq 48). Differentiate it twice and you find that
# its second branch does not continue the first: the velocity flips sign at the peak, and the
# base returns to where it started. spineid derives the motion from the acceleration instead,
# which leaves T1 moving on at `peak t_end / 2 = 4.4 m/s` after the pulse.

# %%
ts = jnp.linspace(0.0, 0.2, 401)
pulse = chain.pulse
figure, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].plot(ts * 1e3, jax.vmap(pulse.acceleration)(ts) / 9.81)
axes[0].set(xlabel="t [ms]", ylabel="a [g]", title="base acceleration")
for label, function in (("from the acceleration", pulse.displacement),
                        ("eq 48 as printed", pulse.printed_eq_48)):
    axes[1].plot(ts * 1e3, jax.vmap(jax.grad(function))(ts), label=label)
    axes[2].plot(ts * 1e3, jax.vmap(function)(ts) * 1e3, label=label)
axes[1].set(xlabel="t [ms]", ylabel="v [m/s]", title="base velocity")
axes[2].set(xlabel="t [ms]", ylabel="x [mm]", title="base displacement")
axes[2].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 2. Simulating the impact, and checking the integrator
#
# The equations of motion come from the chain's kinetic energy, potential energy and
# dissipation function by automatic differentiation (the mass matrix is tested against the
# paper's eq 44). How do we know the integration is right? In the frame of the moving T1, the
# kinetic energy `T_2` must equal the work `W` of every generalized force, the 'transport'
# inertia forces of the accelerating base included (eqs 49-54). spineid integrates `W` as one
# more state of the same ODE, so `e_R = |T_2 - W| / max T_2` measures only the integrator.
#
# The chain is *stiff*: C1 is light (inertia about 3e-5 kg m^2) and sits between two damped
# joints, so some motions decay at rates near 7e4 1/s. An explicit solver must keep its
# steps below the stability limit whatever the accuracy asked for; an implicit one need not.

# %%
ts_study = jnp.linspace(0.0, 0.3, 301)  # the impact and the rebound; Tsit5 pays per step
explicit = spineid.energy_work_check(chain, ts_study, diffrax.Tsit5(), 1e-6, 1e-8)
# `whiplash_study` runs the same check with Kvaerno4 (rtol 1e-5) and collects what the neck
# does; 0.3 s here, five seconds in `spineid whiplash`.
study = spineid.whiplash_study(chain, t_end=0.3)
# The paper's own method: Cash's modified extended BDF (`spineid.MEBDF`, a multistep method
# that keeps its Newton matrix across steps), its chord iteration a hundred times tighter than
# the step controller, as `spineid whiplash --integrator mebdf` runs it.
controller_rtol = 1e-5  # the step controller's (whiplash_study's default)
cash = spineid.whiplash_study(chain, t_end=0.3, rtol=controller_rtol,
                              solver=spineid.MEBDF(rtol=controller_rtol / 100,
                                                   atol=controller_rtol / 1e4))
for name, check, rtol in (("Tsit5 (explicit)", explicit, 1e-6),
                          ("Kvaerno4 (implicit)", study.check, 1e-5),
                          ("MEBDF (the paper's)", cash.check, 1e-5)):
    print(f"{name:20s} rtol {rtol:.0e}: {int(check.n_steps):6d} steps, "
          f"peak e_R {float(check.relative_error.max()):.1e}")
head_gap = float(jnp.max(jnp.abs(jnp.asarray(cash.head) - jnp.asarray(study.head))))
print(f"head position, MEBDF against Kvaerno4: at most {1e3 * head_gap:.1e} mm apart")

# %% [markdown]
# The paper's solver (MEBDFV) reached a peak `e_R` of 0.0103; every run here is orders of
# magnitude below it, and the implicit ones take a small fraction of the explicit one's steps.
# The two implicit methods trace the same head motion; docs/performance.md times them over the
# whole five seconds (MEBDF 1.35-2.3 times as fast there, by run and options). The study holds
# what the neck does:

# %%
summary = study.summary()
print(f"{summary['n_steps']} steps in {study.seconds:.2f} s, peak e_R "
      f"{summary['peak_relative_error_e_R']:.1e}")
print("S-shape between", summary["s_shape_s"], "s; C-shape between", summary["c_shape_s"], "s")
spineid.plot_chain_snapshots(study, (0.0, 0.06, 0.1, 0.14, 0.2, 0.3))
plt.show()

# %% [markdown]
# ## 3. What the neck does
#
# T1 is pushed forward; the head, by its inertia, stays behind. First the lower neck extends
# while the upper joints flex: the **S-shape**, with the head retracted relative to T1. Then
# the whole neck extends: the **C-shape**. The panels below show the head relative to T1, the
# ligament tensions per level (the anterior ligaments carry the extension, the posterior ones
# the rebound into flexion), the energies and `e_R(t)`.

# %%
spineid.plot_whiplash(study)
plt.show()
strongest = max(summary["peak_ligament_force"].items(), key=lambda item: item[1]["force_N"])
print(f"strongest ligament: {strongest[0]}, {strongest[1]['force_N']:.0f} N at "
      f"{strongest[1]['t_s'] * 1e3:.0f} ms (the paper: about 45 N, with its own geometry)")

# %% [markdown]
# ## 4. What head motion says about the neck's parameters
#
# Suppose a motion-capture system tracks the head's centre relative to T1 with 0.5 mm noise,
# 500 times a second, during the first 0.3 s. Which of the six parameters (two ligament
# stiffnesses and dampings, the joint stiffness and damping) do such data determine? Before
# fitting anything, differentiate the predicted track with respect to the logarithms of the
# parameters (forward mode through the whole simulation) and divide by the noise: the
# Cramer-Rao bound then gives the smallest relative error any unbiased fit can reach. The same
# pass differentiates the peak ligament tension, the quantity an injury criterion looks at.

# %%
names = [p.name for p in model_file.parameters]
truth = dict(zip(names, (float(p.get(chain)) for p in model_file.parameters)))
ts_data = np.linspace(0.0, 0.3, 151)
noise = 5e-4  # m


def track_and_peak(log_values):
    model = spineid.apply_values(chain, model_file.parameters, jnp.exp(log_values))
    solution = spineid.simulate(model, ts_data, adjoint=diffrax.ForwardMode(), rtol=1e-6,
                                atol=1e-8)
    forces = jax.vmap(model.ligament_forces)(solution.ts, solution.q, solution.qdot)
    values = (jax.vmap(model.observe)(solution.q).ravel() / noise, jnp.max(forces))
    return values, values  # differentiated, and passed through as the auxiliary output


log_truth = jnp.log(jnp.asarray(list(truth.values())))
# One forward-mode pass gives the derivatives and (has_aux) the values themselves.
derivatives, (track, peak) = jax.jacfwd(track_and_peak, has_aux=True)(log_truth)
sensitivity, peak_gradient = (np.asarray(a) for a in derivatives)
cramer_rao = np.sqrt(np.diag(np.linalg.inv(sensitivity.T @ sensitivity))) * 100  # percent
elasticity = peak_gradient / float(peak)
figure, (left, right) = plt.subplots(1, 2, figsize=(13, 3.8))
left.barh(names, cramer_rao)
left.set_xscale("log")
left.axvline(2.0, color="tab:red", ls=":", label="2 %")
left.set(xlabel="Cramer-Rao relative standard error [%]", title="What 0.3 s of head data see")
left.legend()
right.barh(names, elasticity)
right.axvline(0.0, color="k", lw=0.8)
right.set(xlabel="elasticity: % change of the peak per % change of the parameter",
          title=f"Peak ligament tension ({float(peak):.0f} N)")
plt.tight_layout()
plt.show()
for name, error, sensitivity_of_peak in zip(names, cramer_rao, elasticity):
    print(f"  {name:32s} Cramer-Rao {error:9.2f} %   peak-force elasticity "
          f"{sensitivity_of_peak:+.3f}")

# %% [markdown]
# With all six free, 0.3 s of head data determine the joint stiffness (a few percent) and the
# posterior ligament's stiffness (about ten percent), the joint damping roughly, and the
# anterior ligament and both ligament dampings not at all. Why? In this model the ligaments
# act only through the rotations of the vertebrae. The anterior ligament sits about 8 mm in
# front of each pivot, so it adds a rotational stiffness of about
# `k d^2 = 3e4 * 0.008^2 = 2 N m/rad` beside the joint spring's `k_O / 2 = 300 N m/rad` (the
# slope of `k tan(theta/2)/cos(theta/2)` at 0): halving it moves the head by less than the
# noise. The posterior ligament, 30 mm behind the pivot, adds `1e4 * 0.03^2 = 9 N m/rad`, just
# visible. No fitting algorithm can change this; a longer record
# (`experiments/whiplash_identification.py`), or measuring the vertebrae themselves, can.
#
# The peak tension is another matter. The strongest ligament here is a posterior one, and the
# peak follows its stiffness almost in proportion, while stiffer (or more damped) joints take
# load off the ligaments. The anterior ligament would matter for an anterior peak; what the
# head data cannot see is exactly what an injury criterion may need.
#
# Now fit what the data can determine: the posterior ligament stiffness and the joint
# stiffness and damping, from noisy data and a start 25-30% off. On the command line:
# `spineid fit head_neck.toml head.csv --free ligaments.posterior_stiffness
# --free joints.stiffness --free joints.damping --noise head_x=5e-4,head_y=5e-4 --out fitted`.

# %%
rng = np.random.default_rng(7)
data = np.asarray(track).reshape(-1, 2) * noise + rng.normal(0.0, noise, (ts_data.size, 2))
free = ["ligaments.posterior_stiffness", "joints.stiffness", "joints.damping"]
chosen = [p for p in model_file.parameters if p.name in free]
start = spineid.apply_values(chain, chosen, jnp.asarray([1.3e4, 450.0, 0.75]))
problem = spineid.FitProblem(
    model_file, spineid.Measurement(ts_data, data, chain.observable_names), free=free,
    noise={"head_x": noise, "head_y": noise}, models=[start], simulation_rtol=1e-6,
    simulation_atol=1e-8)
result = spineid.fit(problem, spineid.LevenbergMarquardt(rtol=1e-6, atol=1e-6))
print(result.summary())
for name, value, stderr in zip(result.names, result.values, result.stderr):
    print(f"  {name:32s} {value:9.2f} +- {stderr:7.2f}  (truth {truth[name]:g}, "
          f"{(value / truth[name] - 1) * 100:+.2f} %)")
    # The honest check: every estimate lies within three of its own standard errors.
    assert abs(value - truth[name]) < 3 * stderr, name

# %% [markdown]
# Try it: make the joints softer (`chain = spineid.head_neck_chain(k_joint=60.0)`) and rerun
# section 4: the ligaments come into view. Or change the pulse
# (`spineid.head_neck_chain(pulse=spineid.TriangularPulse(peak=50.0))`).
