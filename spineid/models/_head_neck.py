"""The head-neck chain of Fritzkowski and Walczak (section 3.2): a planar open chain of `n` rigid
bodies (C7 = 1, ..., C1 = n - 1, head = n) on a base (T1) that translates with a prescribed
motion, joined at pivots by nonlinear rotational spring-dampers and, between adjacent bodies, by
anterior and posterior Kelvin-Voigt ligaments.

Coordinates and frames (seed 001 eqs 22-25). Generalized coordinates are the absolute angles
`phi_i` (rad). A point with body-local offsets `(dx, dy)` from the pivot `O_i` lies at
`O_i + R(phi_i) (dx, dy)` with `R(phi) = [[cos, sin], [-sin, cos]]` (eq 24), so positive `phi`
turns a body clockwise: with `x` anterior and `y` superior, positive `phi` is flexion. The
pivots follow each other by the body-fixed links `O_(i+1) = O_i + R(phi_i) (dx_i, dy_i)` (eq 23);
`O_1` is the base point, moving as `(x_O1(t), y_O1(t))`. All geometry is given in the reference
configuration `phi = 0` (the radiograph's posture), from which the motion starts at rest.

Energies (derived by automatic differentiation, not transcribed from eqs 43-46): kinetic energy
eq 26; gravity eq 29; ligament `i` joins `A''_(i-1)` (on body `i - 1`, or the base for `i = 1`)
to `A'_i` (likewise `B`) with energy `1/2 k (xi - xi_0)^2` and dissipation `1/2 c xi'^2`, where
`xi_0` is the reference length (eq 30 prints `1/2 k xi^2`, a zero rest length; the paper's own
ligament forces, `k (xi(t) - xi(0)) + c xi'`, use the reference length, and only that leaves the
reference posture free of ligament load). Joint `i` at `O_i` carries `M = k_O tan(theta/2) /
cos(theta/2)` (eq 35, energy `2 k_O (1/cos(theta/2) - 1)`) and dissipation `1/2 c_O theta'^2` on
`theta_i = phi_i - phi_(i-1)` (`theta_1 = phi_1`, eq 36).
"""

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._arrays import floats
from .._reported_checks import checks_reported_as_nan
from ..elements._load_laws import TanCosLaw
from ..elements._parameters import ParameterField
from ._mechanics import (AbstractLagrangianSystem, active_forces, lagrangian_vector_field,
                         reported_vector_field)


STANDARD_GRAVITY = 9.81  # m/s^2, the value of seed 001


class TriangularPulse(eqx.Module):
    """A triangular base acceleration along the unit `direction` (2,): rising linearly from 0
    to `peak` (m/s^2) at `t_peak`, back to 0 at `t_end` (s), zero afterwards (seed 001 Fig 5a;
    defaults 8.5 g, 52.5 ms, 105 ms).

    The base motion is the exact double integral of this acceleration from rest at the origin:
    piecewise cubic, with continuous velocity, and after `t_end` a constant velocity
    `peak t_end / 2` (4.38 m/s for the defaults). Eq 48 as printed differs: its second branch
    `-peak (t - t_end)^3 / (6 (t_end - t_peak))` reverses the velocity at `t_peak` (a jump from
    `+peak t_peak / 2` to `-peak t_peak / 2`) and returns the base to 0 at and after `t_end`,
    which no acceleration pulse of this shape produces.
    """

    peak: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=8.5 * STANDARD_GRAVITY)
    t_peak: float = eqx.field(static=True, default=0.0525)
    t_end: float = eqx.field(static=True, default=0.105)
    direction: tuple = eqx.field(static=True, default=(1.0, 0.0))

    def __check_init__(self):
        if not 0.0 < self.t_peak < self.t_end:
            raise ValueError(f"triangular pulse: need 0 < t_peak < t_end, got t_peak = "
                             f"{self.t_peak} s, t_end = {self.t_end} s")

    def acceleration(self, t) -> Float[Array, ""]:
        """Magnitude of the base acceleration at `t` (m/s^2)."""
        rising = self.peak * t / self.t_peak
        falling = self.peak * (self.t_end - t) / (self.t_end - self.t_peak)
        return jnp.where(t <= 0, 0.0, jnp.where(t <= self.t_peak, rising,
                                                 jnp.where(t <= self.t_end, falling, 0.0)))

    def displacement(self, t) -> Float[Array, ""]:
        """Base displacement along `direction` at `t` (m): the double integral of `acceleration`."""
        a, t1, t2 = self.peak, self.t_peak, self.t_end
        t = jnp.asarray(t, dtype=float)
        first = a * t**3 / (6 * t1)
        # After the peak: x(t1) + v(t1) s + a s^2 / 2 - a s^3 / (6 (t2 - t1)), s = t - t1.
        s = t - t1
        second = a * t1**2 / 6 + a * t1 / 2 * s + a * s**2 / 2 - a * s**3 / (6 * (t2 - t1))
        at_end = a * t1**2 / 6 + a * t1 / 2 * (t2 - t1) + a * (t2 - t1) ** 2 / 3
        after = at_end + a * t2 / 2 * (t - t2)
        return jnp.where(t <= 0, 0.0, jnp.where(t <= t1, first,
                                                 jnp.where(t <= t2, second, after)))

    def position(self, t) -> Float[Array, "2"]:
        """Base point offset `(x_O1, y_O1)(t)` from its reference position (m)."""
        return self.displacement(t) * jnp.asarray(self.direction)

    def printed_eq_48(self, t) -> Float[Array, ""]:
        """Eq 48 exactly as printed (m), for comparison only."""
        a, t1, t2 = self.peak, self.t_peak, self.t_end
        return jnp.where(t <= t1, a * t**3 / (6 * t1),
                         jnp.where(t <= t2, -a * (t - t2) ** 3 / (6 * (t2 - t1)), 0.0))


# The ligaments' lengths in the reference configuration, as one compiled program (run
# eagerly, each operation would be a program of its own: spineid/_arrays.py).
_reference_lengths = eqx.filter_jit(
    lambda chain: chain.ligament_lengths(0.0, jnp.zeros(chain.n_dof)))


def _turn(phi, offsets):
    """`R(phi) (dx, dy)` of eq 24 for offsets `(..., 2)` and angles broadcast against them."""
    c, s = jnp.cos(phi), jnp.sin(phi)
    return jnp.stack([c * offsets[..., 0] + s * offsets[..., 1],
                      -s * offsets[..., 0] + c * offsets[..., 1]], axis=-1)


class HeadNeckChain(AbstractLagrangianSystem):
    """The planar head-neck chain on a moving base (module docstring; seed 001 section 3.2).

    Fields (`n` bodies, index 0 = C7, n - 1 = head; lengths in m, body-local offsets from the
    body's own pivot in the reference configuration):
    - `links` `(n, 2)`: `O_(i+1) - O_i` (the head's row is unused);
    - `centres` `(n, 2)`: mass centres `S_i`;
    - `anterior_lower`, `anterior_upper`, `posterior_lower`, `posterior_upper` `(n, 2)`: the
      lower and upper attachment points of the anterior and the posterior ligaments (the
      paper's `B'_i`, `B''_i` and `A'_i`, `A''_i`; the head's upper points are unused);
    - `base_anterior`, `base_posterior` `(2,)`: `B''_0`, `A''_0` on the base, offsets from `O_1`;
    - `masses` `(n,)` (kg), `inertias` `(n,)` (kg m^2, about the mass centre);
    - `k_anterior`, `k_posterior` `(n,)` (N/m), `c_anterior`, `c_posterior` `(n,)` (N s/m): the
      ligaments below each body; `k_joint` `(n,)` (N m/rad, eq 35), `c_joint` `(n,)`
      (N m s/rad): the joints at each pivot;
    - `gravity` `(2,)` (m/s^2, global axes; seed 001: 9.81 along -y), `pulse`
      (`TriangularPulse`, the base motion);
    - `rest_anterior`, `rest_posterior` `(n,)`: reference ligament lengths (set by `create`).
    """

    links: Float[Array, "n 2"]
    centres: Float[Array, "n 2"]
    anterior_lower: Float[Array, "n 2"]
    anterior_upper: Float[Array, "n 2"]
    posterior_lower: Float[Array, "n 2"]
    posterior_upper: Float[Array, "n 2"]
    base_anterior: Float[Array, "2"]
    base_posterior: Float[Array, "2"]
    masses: Float[Array, " n"]
    inertias: Float[Array, " n"]
    k_anterior: Float[Array, " n"]
    k_posterior: Float[Array, " n"]
    c_anterior: Float[Array, " n"]
    c_posterior: Float[Array, " n"]
    k_joint: Float[Array, " n"]
    c_joint: Float[Array, " n"]
    gravity: Float[Array, "2"]
    pulse: TriangularPulse
    rest_anterior: Float[Array, " n"]
    rest_posterior: Float[Array, " n"]

    def parameter_fields(self) -> tuple[ParameterField, ...]:
        """The ligament and joint stiffnesses and dampings, each one value for every level
        (tied), >= 0: groups `ligaments.stiffness` (`k_anterior`, `k_posterior`, N/m),
        `ligaments.damping` (N s/m), `joints.stiffness` (`k_joint`, N m/rad), `joints.damping`
        (N m s/rad)."""
        return tuple(ParameterField(field, group, unit, tied=True, name=name)
                     for field, group, unit, name in (
            ("k_anterior", "ligaments.stiffness", "N/m", "ligaments.anterior_stiffness"),
            ("k_posterior", "ligaments.stiffness", "N/m", "ligaments.posterior_stiffness"),
            ("c_anterior", "ligaments.damping", "N s/m", "ligaments.anterior_damping"),
            ("c_posterior", "ligaments.damping", "N s/m", "ligaments.posterior_damping"),
            ("k_joint", "joints.stiffness", "N m/rad", "joints.stiffness"),
            ("c_joint", "joints.damping", "N m s/rad", "joints.damping")))

    @classmethod
    def create(cls, *, links, centres, anterior_lower, anterior_upper, posterior_lower,
               posterior_upper, base_anterior, base_posterior, masses, inertias, k_anterior,
               k_posterior, c_anterior, c_posterior, k_joint, c_joint,
               gravity=(0.0, -STANDARD_GRAVITY), pulse=None) -> "HeadNeckChain":
        """Check the inputs and build the chain; the ligaments' rest lengths are their lengths
        in the reference configuration. Per-level parameters may be scalars (the same at every
        level, as in Table 1). Raises `ValueError` naming the entry on bad input."""
        geometry = {name: np.asarray(value, dtype=float) for name, value in dict(
            links=links, centres=centres, anterior_lower=anterior_lower,
            anterior_upper=anterior_upper, posterior_lower=posterior_lower,
            posterior_upper=posterior_upper).items()}
        n = geometry["links"].shape[0] if geometry["links"].ndim == 2 else 0
        for name, value in geometry.items():
            if value.shape != (n, 2) or n < 1:
                raise ValueError(f"{name}: expected shape (n, 2) with n >= 1 bodies like links, "
                                 f"got {value.shape}")
        per_level = {}
        for name, value in dict(masses=masses, inertias=inertias, k_anterior=k_anterior,
                                k_posterior=k_posterior, c_anterior=c_anterior,
                                c_posterior=c_posterior, k_joint=k_joint,
                                c_joint=c_joint).items():
            array = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
            positive = name in ("masses", "inertias")
            bad = ~np.isfinite(array) | ((array <= 0) if positive else (array < 0))
            if np.any(bad):
                level = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{name}[{level}]: expected a number "
                                 f"{'> 0' if positive else '>= 0'}, got {array[level]}")
            per_level[name] = array
        base = {"base_anterior": np.asarray(base_anterior, dtype=float),
                "base_posterior": np.asarray(base_posterior, dtype=float)}
        for name, value in base.items():
            if value.shape != (2,):
                raise ValueError(f"{name}: expected 2 coordinates, got shape {value.shape}")
        chain = cls(
            **{k: floats(v) for k, v in {**geometry, **per_level, **base}.items()},
            gravity=floats(np.asarray(gravity, dtype=float).reshape(2)),
            pulse=TriangularPulse() if pulse is None else pulse,
            rest_anterior=floats(np.zeros(n)), rest_posterior=floats(np.zeros(n)))
        lengths = _reference_lengths(chain)
        for name, value in zip(("anterior", "posterior"), lengths):
            value = np.asarray(value)
            if np.any(value < 1e-6):
                level = int(np.argmin(value))
                raise ValueError(
                    f"{name} ligament {level} (below body {level}): its attachment points "
                    f"coincide in the reference configuration (length {value[level]:.2e} m); a "
                    "ligament needs two distinct points")
        return dataclasses.replace(chain, rest_anterior=lengths[0], rest_posterior=lengths[1])

    @property
    def n_dof(self) -> int:
        """Number of bodies and generalized coordinates."""
        return self.masses.shape[0]

    def pivots(self, t, q) -> Float[Array, "n 2"]:
        """Global pivot positions `O_i` (eq 23), `(n, 2)` (m), the base point's reference
        position at the origin."""
        steps = _turn(q[:-1], self.links[:-1])
        start = self.pulse.position(t)
        return jnp.concatenate([start[None], start + jnp.cumsum(steps, axis=0)])

    def points(self, t, q, offsets) -> Float[Array, "n 2"]:
        """Global positions of one body-local point per body (eq 24), `offsets` `(n, 2)`."""
        return self.pivots(t, q) + _turn(q, offsets)

    def ligament_lengths(self, t, q):
        """Lengths `(anterior, posterior)`, each `(n,)` (m), of the ligaments below each body
        (eqs 31, 33; the paper's `xi_B` and `xi_A`, see `head_neck_chain`)."""
        pivots = self.pivots(t, q)
        lengths = []
        for lower, upper, base in ((self.anterior_lower, self.anterior_upper,
                                    self.base_anterior),
                                   (self.posterior_lower, self.posterior_upper,
                                    self.base_posterior)):
            top = pivots + _turn(q, lower)  # A'_i on body i
            below = pivots[:-1] + _turn(q[:-1], upper[:-1])  # A''_(i-1) on body i - 1
            below = jnp.concatenate([(pivots[0] + base)[None], below])
            lengths.append(jnp.linalg.norm(top - below, axis=-1))
        return tuple(lengths)

    def joint_angles(self, q) -> Float[Array, " n"]:
        """Relative angles `theta_i` (eq 36)."""
        return q - jnp.concatenate([jnp.zeros(1, dtype=q.dtype), q[:-1]])

    def _centre_velocities(self, t, q, qdot, base_moving: bool) -> Float[Array, "n 2"]:
        # Velocities of the mass centres: absolute, or relative to the translating base.
        rate = jnp.ones_like(t) if base_moving else jnp.zeros_like(t)
        return jax.jvp(lambda time, angles: self.points(time, angles, self.centres), (t, q),
                       (rate, qdot))[1]

    def _kinetic(self, velocity, qdot) -> Float[Array, ""]:
        return 0.5 * jnp.sum(self.masses * jnp.sum(velocity**2, axis=-1)) \
            + 0.5 * jnp.sum(self.inertias * qdot**2)

    def kinetic_energy(self, t, q, qdot):
        t = jnp.asarray(t, dtype=q.dtype)
        return self._kinetic(self._centre_velocities(t, q, qdot, True), qdot)

    def relative_kinetic_energy(self, t, q, qdot) -> Float[Array, ""]:
        """`T_2` (eq 49): the kinetic energy relative to the translating base frame (J)."""
        t = jnp.asarray(t, dtype=q.dtype)
        return self._kinetic(self._centre_velocities(t, q, qdot, False), qdot)

    def potential_energy(self, t, q):
        along_gravity = self.points(t, q, self.centres) @ self.gravity
        xi_a, xi_b = self.ligament_lengths(t, q)
        theta = self.joint_angles(q)
        return (-jnp.sum(self.masses * along_gravity)
                + 0.5 * jnp.sum(self.k_anterior * (xi_a - self.rest_anterior) ** 2)
                + 0.5 * jnp.sum(self.k_posterior * (xi_b - self.rest_posterior) ** 2)
                + jnp.sum(TanCosLaw(self.k_joint).energy(theta)))

    def ligament_rates(self, t, q, qdot):
        """Lengths and rates of the ligaments in one pass: `((anterior, posterior),
        (anterior rate, posterior rate))`, each `(n,)` (m, m/s)."""
        t = jnp.asarray(t, dtype=q.dtype)
        return jax.jvp(lambda time, angles: self.ligament_lengths(time, angles), (t, q),
                       (jnp.ones_like(t), qdot))

    def dissipation_function(self, t, q, qdot):
        _, (rate_a, rate_b) = self.ligament_rates(t, q, qdot)
        theta_rate = self.joint_angles(qdot)
        return 0.5 * (jnp.sum(self.c_anterior * rate_a**2) + jnp.sum(self.c_posterior * rate_b**2)
                      + jnp.sum(self.c_joint * theta_rate**2))

    def generalized_forces(self, t, q, qdot):
        return jnp.zeros_like(q)

    def preferred_solver(self):
        """`diffrax.Kvaerno4()`: the chain is stiff (C1's small inertia between damped joints:
        decay rates near 7e4 1/s), so explicit solvers are bound by stability; over the 5 s
        whiplash Kvaerno4 needs 60 times fewer steps than Tsit5 (experiments/whiplash.py)."""
        return diffrax.Kvaerno4()

    def jump_times(self):
        """The pulse's kinks `(t_peak, t_end)` (s), where the base acceleration is not smooth."""
        return jnp.array([self.pulse.t_peak, self.pulse.t_end])

    def accelerations(self, t, q, qdot) -> Float[Array, " n"]:
        """Generalized accelerations `(n,)` (rad/s^2): `equations_of_motion` solved."""
        return jnp.linalg.solve(*self.equations_of_motion(t, q, qdot))

    def equations_of_motion(self, t, q, qdot):
        """The mass matrix `(n, n)` (kg m^2) and forces `(n,)` (N m) of `M qddot = f` from the
        same energies as `lagrange_equations`, projected like Kane's equations: with the
        mass-centre Jacobians `J_i = dS_i/dq` `(2, n)` and the centre accelerations at
        `qddot = 0`,
        `a0_i = d2/ds2 S_i(t + s, q + s qdot)` (base acceleration and centripetal terms),
        `(sum_i m_i J_i^T J_i + diag(I)) qddot = -dU/dq - dR/dqdot - sum_i m_i J_i^T a0_i`
        (eqs 37-46; the mass matrix is eq 43-44's `a_ij`). The same equations as the Hessian
        of `T` gives (tested against it), cheaper to differentiate: implicit solvers take its
        Jacobian (Kvaerno4 over the 5 s whiplash: 0.80 s instead of 1.23 s)."""
        t = jnp.asarray(t, dtype=q.dtype)

        def centres(time, angles):
            return self.points(time, angles, self.centres)

        jacobian = jax.jacfwd(centres, argnums=1)(t, q)  # (n, 2, n)
        bias = jax.jvp(lambda time, angles: self._centre_velocities(time, angles, qdot, True),
                       (t, q), (jnp.ones_like(t), qdot))[1]  # (n, 2)
        mass = jnp.einsum("i,iak,ial->kl", self.masses, jacobian, jacobian) \
            + jnp.diag(self.inertias)
        rhs = (active_forces(self, t, q, qdot)
               - jnp.einsum("i,iak,ia->k", self.masses, jacobian, bias))
        return mass, rhs

    def initial_state(self):
        return jnp.zeros(self.n_dof), jnp.zeros(self.n_dof)

    def ligament_forces(self, t, q, qdot):
        """Tensions `k (xi - xi_0) + c xi'` (N) of the anterior and posterior ligaments below
        each body, `(2, n)`: seed 001's ligament forces (Fig 9), positive in tension."""
        (xi_a, xi_b), (rate_a, rate_b) = self.ligament_rates(t, q, qdot)
        return jnp.stack([self.k_anterior * (xi_a - self.rest_anterior) + self.c_anterior * rate_a,
                          self.k_posterior * (xi_b - self.rest_posterior)
                          + self.c_posterior * rate_b])

    def transport_force(self, t, q) -> Float[Array, " n"]:
        """`Q* = -gamma` (eq 50): the generalized 'transport inertia force' of the base
        acceleration `a_b(t)`, `-sum_i m_i (dS_i/dq)^T a_b` (N m)."""
        base_acceleration = self.pulse.acceleration(t) * jnp.asarray(self.pulse.direction)
        jacobian = jax.jacfwd(lambda angles: self.points(t, angles, self.centres))(q)
        return -jnp.einsum("i,ijk,j->k", self.masses, jacobian, base_acceleration)

    def relative_power(self, t, q, qdot) -> Float[Array, ""]:
        """`sum_i (Q^p_i + Q^np_i + Q*_i) phi_i'` (W): the power whose integral is the work `W`
        of eq 54; with `T_2` it gives the 'kinetic energy - work' check (eq 53)."""
        potential = -jax.grad(self.potential_energy, argnums=1)(t, q)
        dissipative = -jax.grad(self.dissipation_function, argnums=2)(t, q, qdot)
        # Q* . qdot = -a_b . sum_i m_i (dS_i/dq qdot): one jvp instead of transport_force's
        # Jacobian, since this runs at every step of the integration.
        base_acceleration = self.pulse.acceleration(t) * jnp.asarray(self.pulse.direction)
        relative = self._centre_velocities(t, q, qdot, False)
        transport = -base_acceleration @ jnp.sum(self.masses[:, None] * relative, axis=0)
        return qdot @ (potential + dissipative + self.generalized_forces(t, q, qdot)) + transport

    def observe(self, q) -> Float[Array, "2"]:
        """The head's mass centre relative to the base point `(x, y)` (m)."""
        return self.points(0.0, q, self.centres)[-1] - self.pivots(0.0, q)[0]

    @property
    def observable_names(self) -> tuple[str, ...]:
        """Names of the observed channels: the head centre relative to T1."""
        return ("head_x", "head_y")

    @property
    def observable_units(self) -> tuple[str, ...]:
        """Units of the observed channels."""
        return ("m", "m")


class EnergyWorkCheck(eqx.Module):
    """A simulation with its 'kinetic energy - work' record (seed 001 eqs 49-55): `ts` `(k,)`,
    `q`, `qdot` `(k, n)`, `relative_kinetic_energy` `T_2(t)` and `work` `W(t)` `(k,)` (J),
    `relative_error` `e_R(t) = |T_2 - W| / max T_2` `(k,)`, `n_steps`, `result` (diffrax's
    `RESULTS` of the solve: with `throw=False` a failed run is reported here)."""

    ts: Float[Array, " k"]
    q: Float[Array, "k n"]
    qdot: Float[Array, "k n"]
    relative_kinetic_energy: Float[Array, " k"]
    work: Float[Array, " k"]
    relative_error: Float[Array, " k"]
    n_steps: Float[Array, ""]
    result: diffrax.RESULTS


def energy_work_vector_field(t, state, chain: HeadNeckChain):
    """The motion with its work, diffrax signature `(t, y, args)`: `state = (q, qdot, W)` and
    `args` the chain; returns `(qdot, qddot, relative_power)` (eqs 53-54: `W' = P`)."""
    q, qdot, _ = state
    dq, dqdot = lagrangian_vector_field(t, (q, qdot), chain)
    return dq, dqdot, chain.relative_power(t, q, qdot)


def _energy_work_reporting(t, state, chain: HeadNeckChain):
    # `energy_work_vector_field` for the solves that do not throw (`whiplash_study`'s
    # windows, `energy_work_check(..., throw=False)`): a vector field of its own, so that
    # such a solve, traced with its checks reported as NaN, never shares a trace with a
    # raising one (as `simulate` does, `spineid._reported_checks`); its program then holds
    # no callback and JAX's persistent cache keeps it for the next process (not where a
    # derivative adds solves of its own that raise: lineax's tangent solves under forward
    # mode, `peak_force_sensitivity`).
    q, qdot, _ = state
    dq, dqdot = reported_vector_field(t, (q, qdot), chain)
    return dq, dqdot, chain.relative_power(t, q, qdot)


def check_covers_pulse(chain: HeadNeckChain, t_end: float) -> None:
    """Raise `ValueError` if a simulation ending at `t_end` (s) stops before the pulse does."""
    if t_end < chain.pulse.t_end:
        raise ValueError(
            f"the simulation ends at {t_end:g} s, before the pulse does ({chain.pulse.t_end:g} "
            "s): the base would stop being driven mid-impact; simulate at least to the "
            "pulse's end")


def energy_work_check(chain: HeadNeckChain, ts, solver=None, rtol: float = 1e-8,
                      atol: float = 1e-10, max_steps: int = 200_000,
                      adjoint=None, throw: bool = True) -> EnergyWorkCheck:
    """Simulate `chain` from rest and integrate the work `W` of all generalized forces,
    transport inertia forces included, alongside the motion (one ODE: `W' = relative_power`),
    so that `T_2(t) - W(t) = 0` (eq 53) checks the integration; `e_R` is eq 55.

    `ts` `(k,)` (s) starting at 0; `solver` a diffrax solver (default `Tsit5`, the reference:
    explicit, but slow because the chain is stiff; `chain.preferred_solver()` is faster); the
    step-size controller is told the kinks of the pulse (`t_peak`, `t_end`) so steps do not
    straddle them; `adjoint` a diffrax adjoint (`ForwardMode()` for `jax.jacfwd` through the
    run). Raises `ValueError` if `ts` (when concrete) ends before the pulse does; with
    `throw=False` a failed integration is not raised but reported in the result's `result`,
    and a failed runtime check inside the solve (times not increasing, a model's own check)
    as non-finite states (`whiplash_study` names both in its error).
    `spineid.whiplash_study` runs it in windows, for progress and interruption.
    """
    ts = jnp.asarray(ts, dtype=float)
    if not isinstance(ts, jax.core.Tracer):
        check_covers_pulse(chain, float(ts[-1]))
    return _energy_work_check(chain, ts, solver, rtol, atol, max_steps,
                              diffrax.RecursiveCheckpointAdjoint() if adjoint is None
                              else adjoint, throw)


def _solve_energy_work(chain, ts, state, solver, rtol, atol, max_steps, adjoint, throw):
    # The motion with its work from `state = (q, qdot, W)` at ts[0], saved at `ts`. Not
    # throwing, the checks traced inside report NaN states (`classify` then names them), and
    # the program is stored for the next process (measured: 24.6-33 s of XLA for Kvaerno4 on
    # a loaded 2-core machine, loaded in 1.7 s).
    with checks_reported_as_nan(active=not throw):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(energy_work_vector_field if throw else _energy_work_reporting),
            diffrax.Tsit5() if solver is None else solver,
            t0=ts[0], t1=ts[-1], dt0=None, y0=state, args=chain,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol,
                                                      jump_ts=chain.jump_times()),
            max_steps=max_steps, adjoint=adjoint, throw=throw)
    return solution.ys, solution.result, solution.stats["num_accepted_steps"]


def _energy_work_record(chain, ts, q, qdot, work, n_steps, result) -> EnergyWorkCheck:
    relative = jax.vmap(chain.relative_kinetic_energy)(ts, q, qdot)
    error = jnp.abs(relative - work) / jnp.max(relative)
    return EnergyWorkCheck(ts=ts, q=q, qdot=qdot, relative_kinetic_energy=relative, work=work,
                           relative_error=error, n_steps=n_steps, result=result)


@eqx.filter_jit
def _energy_work_check(chain, ts, solver, rtol, atol, max_steps, adjoint,
                       throw) -> EnergyWorkCheck:
    q0, qdot0 = chain.initial_state()
    (q, qdot, work), result, n_steps = _solve_energy_work(
        chain, ts, (q0, qdot0, jnp.zeros(())), solver, rtol, atol, max_steps, adjoint, throw)
    return _energy_work_record(chain, ts, q, qdot, work, n_steps, result)


solve_energy_work = eqx.filter_jit(_solve_energy_work)
"""`(chain, ts, state, solver, rtol, atol, max_steps, adjoint, throw) -> ((q, qdot, W), result,
n_steps)`: the motion with its work (eqs 49-55) from `state = (q, qdot, W)` at `ts[0]` (s),
saved at `ts` `(k,)`; compiled (one window of a run in windows)."""
energy_work_record = eqx.filter_jit(_energy_work_record)
"""`(chain, ts, q, qdot, W, n_steps, result) -> EnergyWorkCheck`: `T_2`, `e_R` (eq 55) of a
run's samples; compiled."""


def head_neck_geometry(table: dict) -> dict:
    """Body-local geometry of the chain (the arrays `HeadNeckChain.create` takes, plus masses
    and inertias) from a `head_neck.toml`-like table (datasets/README.md): vertebrae placed
    bottom-up along their tilted axes, the 8 characteristic points of each (Fig 6 layout),
    offsets from each pivot in the global axes of that posture (where every `phi_i = 0`).

    Per vertebra with pivot `P2` (centre of the inferior endplate), unit axis `u` (tilted
    anteriorly by `tilt`) and anterior normal `n`: superior endplate centre `P5 = P2 + h u`,
    next pivot `P5 + disc u` (the link, rigid with the lower body), mass centre midway between
    the body corners `P1 = P2 + d/2 n` and `P6 = P5 - d/2 n`; anterior ligament points
    `B' = P1`, `B'' = P5 + d/2 n` (body corners); posterior ligament points on the spinous
    process `A' = P2 - r n`, `A'' = A' + 0.6 h u`. The head: pivot at the occipital condyles,
    centre and attachments from `head_*` (anterior, superior offsets).
    Inertias of vertebrae: `m (L^2 + h^2) / 12` with `L = d/2 + r` (a plate from the front of
    the body to the spinous process); the head's from the table.
    """
    def unit(tilt):
        angle = np.radians(tilt)
        return np.array([np.sin(angle), np.cos(angle)]), np.array([np.cos(angle), -np.sin(angle)])

    depth, height = np.asarray(table["body_depth"]), np.asarray(table["body_height"])
    reach, disc = np.asarray(table["spinous_reach"]), np.asarray(table["disc_height"])
    masses, tilt = np.asarray(table["masses"], float), np.asarray(table["tilt_deg"], float)
    n = masses.size
    if not (depth.size == height.size == reach.size == disc.size == n - 1 == tilt.size - 1):
        raise ValueError(f"head-neck table: {n} bodies need {n - 1} vertebra rows "
                         "(body_depth, body_height, spinous_reach, disc_height) and "
                         f"{n} tilts")
    up0, forward0 = unit(table["base_tilt_deg"])
    endplate0 = -table["base_disc_height"] * up0
    base_anterior = endplate0 + table["base_depth"] / 2 * forward0
    base_posterior = endplate0 - table["base_spinous_reach"] * forward0 - 0.005 * up0
    pivot = np.zeros(2)
    rows = {key: np.zeros((n, 2)) for key in ("links", "centres", "anterior_lower",
                                              "anterior_upper", "posterior_lower",
                                              "posterior_upper")}
    inertias = np.zeros(n)
    for i in range(n - 1):
        up, forward = unit(tilt[i])
        top = pivot + height[i] * up
        points = {"centres": pivot + height[i] / 2 * up,
                  "anterior_lower": pivot + depth[i] / 2 * forward,
                  "anterior_upper": top + depth[i] / 2 * forward,
                  "posterior_lower": pivot - reach[i] * forward,
                  "posterior_upper": pivot - reach[i] * forward + 0.6 * height[i] * up}
        following = top + disc[i] * up
        points["links"] = following
        for key, point in points.items():
            rows[key][i] = point - pivot
        inertias[i] = masses[i] * ((depth[i] / 2 + reach[i]) ** 2 + height[i] ** 2) / 12
        pivot = following
    up, forward = unit(tilt[-1])
    head = {"centres": table["head_centre"], "anterior_lower": table["head_anterior"],
            "posterior_lower": table["head_posterior"]}
    for key, (ahead, above) in head.items():
        rows[key][-1] = ahead * forward + above * up
    inertias[-1] = table["head_inertia"]
    return dict(rows, base_anterior=base_anterior, base_posterior=base_posterior,
                masses=masses, inertias=inertias)
