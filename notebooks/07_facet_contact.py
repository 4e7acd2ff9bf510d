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
# # 7. Facet contact: two cylinder faces, a disc settling flat, and the C5-C6 segment
#
# The facet joints of the cervical spine are almost flat cartilage surfaces. Kecskemethy, Lange
# and Grabner model each as the end faces of two cylinders touching. This notebook
# 1. draws the contact situations: edge on face, edge on edge, and the flat case;
# 2. shows why the flat case needs a *virtual* contact point and the blending function
#    `r = r0 (1 - exp(-C sin alpha))`, and lets a disc settle on a plane (their Figs 8-9);
# 3. runs the nine load cases of the C5-C6 segment and asks which ones can tell us the facet
#    stiffness.

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import spineid

# %% [markdown]
# ## 1. The contact situations
#
# Each face is a disc: centre `C`, outward normal `n` (pointing out of its cylinder, towards
# the partner) and radius `r`. Tilt the upper disc over the lower one and move it sideways:
# depending on where its deepest rim point lies, the contact is the edge of disc 1 on the face
# of disc 2, the edge of disc 2 on the face of disc 1, or edge on edge. The side view below
# draws both discs and the contact point found by `spineid.skew_contact`.


# %%
def disc_outline(centre, normal, radius):
    # Side view (x, y) of a disc's rim.
    first = np.cross(normal, [0.0, 0.0, 1.0])
    first = first / np.linalg.norm(first)
    angle = np.linspace(0, 2 * np.pi, 200)
    rim = centre + radius * (np.cos(angle)[:, None] * first + np.sin(angle)[:, None] * [0, 0, 1])
    return rim[:, 0], rim[:, 1]


lower = (np.zeros(3), np.array([0.0, 1.0, 0.0]), 1.0)
tilt = np.radians(20)
upper_normal = np.array([np.sin(tilt), -np.cos(tilt), 0.0])
figure, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharey=True)
for axis, (shift, radius) in zip(axes, [(0.0, 1.0), (1.3, 0.6), (1.8, 1.0)]):
    centre = np.array([shift, 0.25, 0.0])
    contact = spineid.skew_contact(centre, upper_normal, radius, *lower)
    for disc, colour in (((centre, upper_normal, radius), "C0"), (lower, "C1")):
        axis.plot(*disc_outline(*disc), color=colour)
    axis.plot(*np.asarray(contact.point)[:2], "k*", ms=12)
    axis.set_title(f"{spineid.CONTACT_CASES[int(contact.case)]}\n"
                   f"penetration {float(contact.penetration):.3f}")
    axis.set_aspect("equal")
figure.suptitle("upper disc (blue) tilted 20 deg over the lower disc (orange); star: contact")
plt.show()

# %% [markdown]
# The depths are the paper's eqs 1-2 evaluated at the points they define (the printed depths
# swap radii and normals between the two cases; `tests/test_contact_geometry.py` checks every
# case against rims sampled at 20 000 points for about 2000 random poses).
#
# ## 2. Flat contact and the blending function
#
# When the faces are almost parallel the line where their planes meet runs off to infinity and
# the skew formulas break down. Projected onto the lower face, the two discs overlap in a lens;
# the upper face lies deepest at one corner `P` of that lens, and for exactly parallel faces the
# paper puts the contact at the middle `M` of the overlap. The virtual contact point slides
# from `M` to `P` as the tilt grows: `P' = M + (1 - exp(-C sin alpha)) (P - M)`.

# %%
sharpness = 50.0
tilts = np.radians(np.linspace(-6, 6, 241))


def blended(angle):
    normal = jnp.array([jnp.sin(angle), -jnp.cos(angle), 0.0])
    return spineid.blended_contact(jnp.array([0.3, 0.0, 0.0]), normal, 1.0, jnp.zeros(3),
                                   jnp.array([0.0, 1.0, 0.0]), 1.0, sharpness)


contacts = jax.vmap(blended)(jnp.asarray(tilts))
figure, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].plot(np.degrees(tilts), np.asarray(contacts.point[:, 0]))
axes[0].set_xlabel("tilt [deg]")
axes[0].set_ylabel("x of the virtual contact point")
axes[0].set_title("M = 0.15 (middle of the overlap) at zero tilt")
axes[1].plot(np.degrees(tilts), np.asarray(contacts.penetration))
axes[1].set_xlabel("tilt [deg]")
axes[1].set_ylabel("penetration at P'")
axes[1].set_title("depth grows smoothly on both sides")
plt.show()

# %% [markdown]
# A penalty contact stores `1/2 k d^2` at the penetration `d` of `P'`. Because `P'` moves
# towards the side that dips, tilting costs energy: the contact holds a disc flat with a
# restoring moment, and a disc dropped at a slant rocks down onto its face instead of balancing
# on its rim. Here a disc (radius 10 mm, 50 g; `spineid.disc_on_plane`) falls tilted 25 degrees
# onto a plane under gravity, with contact damping.

# %%
tilt0 = np.radians(25.0)
falling = spineid.disc_on_plane(radius=0.01, mass=0.05, tilt=tilt0, sharpness=sharpness)
ts = jnp.linspace(0.0, 0.6, 601)
motion = spineid.simulate(falling, ts, rtol=1e-7, atol=1e-10)
sin_tilt, relative = (np.asarray(x) for x in spineid.flat_transition(falling, motion.q))
spineid.plot_flat_transition(np.asarray(ts), sin_tilt, relative)
plt.show()
print(f"tilt after 0.6 s: {np.degrees(np.arcsin(sin_tilt[-1])):.4f} deg; r/r0 {relative[-1]:.4f}; "
      f"{int(motion.n_steps)} solver steps")
assert sin_tilt[-1] < 0.02 * np.sin(tilt0) and relative[-1] < 0.1

# %% [markdown]
# As in the paper's Fig 9, `sin alpha` and `r / r0` fall together and the virtual contact point
# approaches the centre of the disc: the disc ends lying flat. A small rocking (a few hundredths
# of a degree) outlives the fall: the contact damping acts on the rate of penetration at `P'`,
# and `P'` moves to the centre as the tilt vanishes, so the rocking's damping vanishes faster
# than its restoring moment. (`r` is measured on the plane,
# where the radius appears as `r0 cos alpha`; then `r / r0` is the blending function itself.)
#
# ## 3. The C5-C6 segment: nine load cases, and what they say about the facets
#
# `datasets/c5_c6.toml` holds C5 over a fixed C6: the disc as a bushing, six ligaments and the
# two facet joints (radii and a 43 degree inclination from published measurements; the rest is
# stated in `datasets/README.md`). `spineid.segment_study` solves the nine quasi-static load
# cases of the paper (20 N forces, 1.8 N m moments) with Newton's method, vmapped.

# %%
segment = spineid.load_model_file(spineid.dataset_path("c5_c6.toml"))
study = spineid.segment_study(segment.model, facet_names=("left", "right"))
spineid.plot_segment_study(study)
plt.show()
for case, force in zip(study.cases, study.facet_forces):
    print(f"  {case:4s} facet forces {force.round(1)} N")

# %% [markdown]
# Flexion, posterior shear and tension open the facets: those cases carry no information on
# the facet stiffness, whatever their precision. How much does each case constrain it? The
# derivative of the displacements with respect to the facet stiffness comes from the implicit
# function theorem through the equilibrium solve.

# %%
facet_stiffness = next(p for p in segment.parameters if p.name == "facets.stiffness")


def displacements(k):
    model = spineid.apply_values(segment.model, [facet_stiffness], jnp.array([k]))
    _, changes, _, _ = spineid.solve_load_cases(model, jnp.asarray(study.loads))
    return changes


sensitivity = jax.jacfwd(displacements)(2.0e5)  # (9, 6): per N/m
# Displacement change for a 10 % change of k, in units of 5 um / 0.01 deg of tracking noise.
noise = np.array([5e-6] * 3 + [np.radians(0.01)] * 3)
signal = np.abs(np.asarray(sensitivity) * 2.0e4) / noise
for case, row in zip(study.cases, signal):
    print(f"  {case:4s} largest effect of +10 % facet stiffness: {row.max():7.2f} noise units")
assert signal[list(study.cases).index("FLX")].max() < 1e-6

# %% [markdown]
# Extension, anterior shear, lateral bending and axial rotation load the facets and see their
# stiffness; flexion does not at all. `spineid.fit_segment` (and `spineid segment --fit`) fits
# the facet and disc stiffnesses through the same solve, with standard errors and an
# identifiability report: see `tests/test_segment.py` for a recover-the-truth fit.
