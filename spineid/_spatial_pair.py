"""Two vertebrae in 3-D joined by bushings (Christophy et al. 2013; supplement sections 2-4)."""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._bushing import (
    bushing_deflection, bushing_deflection_rate, bushing_force, bushing_wrenches,
)
from ._load_laws import AbstractLoadLaw
from ._loads import AbstractLoad
from ._mechanics import AbstractLagrangianSystem, active_forces, solve_mass_matrix
from ._rotations import E_W, e_W, euler123_rotation

SPATIAL_LOAD_COMPONENTS = ("Fx", "Fy", "Fz", "Mx", "My", "Mz")
UPPER = np.triu_indices(6)
"""Row-major upper-triangle indices of a 6x6 matrix: how bushings pack symmetric matrices."""


def pack_symmetric(matrix) -> Float[Array, "21"]:
    """The 21 upper-triangle entries (row-major) of a symmetric 6x6 matrix."""
    return jnp.asarray(matrix, dtype=float)[UPPER]


def unpack_symmetric(packed: Float[Array, "21"]) -> Float[Array, "6 6"]:
    """The symmetric 6x6 matrix of 21 packed upper-triangle entries (`pack_symmetric`)."""
    upper = jnp.zeros((6, 6), dtype=packed.dtype).at[UPPER].set(packed)
    return upper + upper.T - jnp.diag(jnp.diag(upper))


class SpatialBody(eqx.Module):
    """A rigid body in 3-D whose frame origin is its centre of mass.

    Fields: `mass` (kg), `inertia` (kg m^2, `(3, 3)`, about the centre of mass in body axes),
    `reference_pose` (`[x, y, z, a1, a2, a3]`: m and 1-2-3 Euler angles in rad) and `fixed`
    (static: a fixed body never moves, its mass and inertia are ignored).
    """

    mass: Float[Array, ""]
    inertia: Float[Array, "3 3"]
    reference_pose: Float[Array, "6"]
    fixed: bool = eqx.field(static=True, default=False)


def frame_in_ground(pose, position, orientation):
    """Orientation `(3, 3)` and origin `(3,)` in ground of a frame fixed in a body at `pose`
    (`[x, y, z, a1, a2, a3]`), given its `position` (m) and 1-2-3 Euler `orientation` (rad) in
    body coordinates."""
    body = euler123_rotation(pose[3:])
    return body @ euler123_rotation(orientation), pose[:3] + body @ position


class AbstractSpatialElement(eqx.Module):
    """A joint element between the lower and the upper body of a spatial pair, defined by its
    stored energy and its Rayleigh dissipation function; the mechanics core derives its forces.
    Poses are `[x, y, z, a1, a2, a3]` (m, 1-2-3 Euler angles in rad), velocities their rates.
    """

    @abc.abstractmethod
    def energy(self, lower_pose, upper_pose) -> Float[Array, ""]:
        """Stored energy (J) at the body poses `(6,)`."""

    @abc.abstractmethod
    def dissipation(self, lower_pose, upper_pose, lower_velocity, upper_velocity
                    ) -> Float[Array, ""]:
        """Rayleigh dissipation function (W); velocities are pose rates `(6,)`."""


class AbstractBushing(AbstractSpatialElement):
    """A bushing between a frame on the lower body (frame 1) and one on the upper (frame 2).

    Its load depends on the relative motion `y = [p, beta]` of frame 2 in frame 1 (m, rad;
    `spineid._bushing`, Christophy et al. 2013 eq 17) through the change `y - y_0` from a
    reference, and on its rate `y'`. Subclasses give the energy, the dissipation function and
    the generalized force `f(y, y')` (`(6,)`, N and N m along the dual Euler basis).
    """

    frame1: eqx.AbstractVar[tuple[Float[Array, "3"], Float[Array, "3"]]]
    frame2: eqx.AbstractVar[tuple[Float[Array, "3"], Float[Array, "3"]]]
    reference: eqx.AbstractVar[Float[Array, "6"]]

    @abc.abstractmethod
    def generalized_force(self, deflection, rate) -> Float[Array, "6"]:
        """`f` (`(6,)`, N and N m) at the relative motion `y` and its rate `y'`."""

    def frames(self, lower_pose, upper_pose):
        """`(R_1, x_F, R_2, x_M)`: both frames in ground at the given body poses."""
        r1, x1 = frame_in_ground(lower_pose, *self.frame1)
        r2, x2 = frame_in_ground(upper_pose, *self.frame2)
        return r1, x1, r2, x2

    def deflection(self, lower_pose, upper_pose) -> Float[Array, "6"]:
        """The relative motion `y` (m, rad) of frame 2 in frame 1 (eq 17)."""
        return bushing_deflection(*self.frames(lower_pose, upper_pose))

    def deflection_rate(self, lower_pose, upper_pose, lower_velocity, upper_velocity
                        ) -> Float[Array, "6"]:
        """The rate `y'` (m/s, rad/s) of the relative motion; velocities are pose rates
        `(6,)` of the two bodies (`bushing_deflection_rate`)."""
        r1, x1, r2, x2 = self.frames(lower_pose, upper_pose)
        spin1 = E_W(lower_pose[3:]) @ lower_velocity[3:]
        spin2 = E_W(upper_pose[3:]) @ upper_velocity[3:]
        v1 = lower_velocity[:3] + jnp.cross(spin1, x1 - lower_pose[:3])
        v2 = upper_velocity[:3] + jnp.cross(spin2, x2 - upper_pose[:3])
        return bushing_deflection_rate(r1, x1, r2, x2, spin1, v1, spin2, v2)

    def wrenches(self, lower_pose, upper_pose, lower_velocity, upper_velocity):
        """`(wrench1, wrench2)`: the loads `[moment, force]` (ground axes, N m and N) on the
        lower body at frame 1's origin and on the upper body at frame 2's origin, of the
        generalized force `f` (eqs 18, 22-23; `bushing_wrenches`)."""
        rate = self.deflection_rate(lower_pose, upper_pose, lower_velocity, upper_velocity)
        f = self.generalized_force(self.deflection(lower_pose, upper_pose), rate)
        return bushing_wrenches(*self.frames(lower_pose, upper_pose), f)


def _frame_arrays(frame):
    return tuple(jnp.asarray(a, dtype=float) for a in frame)


class Bushing(AbstractBushing):
    """A linear bushing: `f = -K (y - y_0) - D y'` (Christophy et al. 2013 eqs 17-18 for
    `kind = "classic"` with `y_0 = 0`, eqs 22-23 for `kind = "spine"` with `y_0` the relative
    motion in the reference pose). As an element of the mechanics core it contributes the energy
    `1/2 (y - y_0)^T K (y - y_0)` and the dissipation function `1/2 y'^T D y'`.

    Fields: `kind` (static), `frame1` and `frame2` (each `(position (3,), orientation (3,))` in
    its body's coordinates, m and rad), `stiffness` and `damping` (the 21 packed upper-triangle
    entries of symmetric 6x6 matrices ordered `[tx, ty, tz, rx, ry, rz]`: N/m, N/rad = N m/m,
    N m/rad; N s/m, N m s/rad), `reference` (`y_0`, `(6,)`).
    """

    kind: str = eqx.field(static=True)
    frame1: tuple[Float[Array, "3"], Float[Array, "3"]]
    frame2: tuple[Float[Array, "3"], Float[Array, "3"]]
    stiffness: Float[Array, "21"]
    damping: Float[Array, "21"]
    reference: Float[Array, "6"]

    @classmethod
    def create(cls, kind, frame1, frame2, stiffness, damping, lower_pose, upper_pose):
        """A bushing of `kind` `"classic"` or `"spine"` with full 6x6 `stiffness` and `damping`
        (symmetric); for `"spine"` the reference deflection is taken at the bodies' reference
        poses `lower_pose`, `upper_pose`."""
        if kind not in ("classic", "spine"):
            raise ValueError(f"bushing kind {kind!r}: expected 'classic' or 'spine'")
        bushing = cls(kind, _frame_arrays(frame1), _frame_arrays(frame2),
                      pack_symmetric(stiffness), pack_symmetric(damping), jnp.zeros(6))
        if kind == "spine":
            bushing = eqx.tree_at(lambda b: b.reference, bushing,
                                  bushing.deflection(jnp.asarray(lower_pose, dtype=float),
                                                     jnp.asarray(upper_pose, dtype=float)))
        return bushing

    @property
    def stiffness_matrix(self) -> Float[Array, "6 6"]:
        """`K` (6x6)."""
        return unpack_symmetric(self.stiffness)

    @property
    def damping_matrix(self) -> Float[Array, "6 6"]:
        """`D` (6x6)."""
        return unpack_symmetric(self.damping)

    def energy(self, lower_pose, upper_pose) -> Float[Array, ""]:
        """Stored energy `1/2 (y - y_0)^T K (y - y_0)` (J)."""
        change = self.deflection(lower_pose, upper_pose) - self.reference
        return 0.5 * change @ self.stiffness_matrix @ change

    def dissipation(self, lower_pose, upper_pose, lower_velocity, upper_velocity):
        """Rayleigh function `1/2 y'^T D y'` (W); velocities are pose rates `(6,)`."""
        rate = self.deflection_rate(lower_pose, upper_pose, lower_velocity, upper_velocity)
        return 0.5 * rate @ self.damping_matrix @ rate

    def generalized_force(self, deflection, rate):
        """`f = -K (y - y_0) - D y'` (N, N m)."""
        return bushing_force(self.stiffness_matrix, self.damping_matrix, deflection, rate,
                             self.reference)


class TableBushing(AbstractBushing):
    """A bushing with a nonlinear law per degree of freedom: `f_k = -M_k(y_k - y_0k) - d_k y'_k`.

    Each component `k` of the change `y - y_0` of the relative motion (`[tx, ty, tz, rx, ry, rz]`,
    m and rad, the same deflection as the SpineBushing, Christophy et al. 2013 eqs 22-23) has its
    own load law `M_k` (`spineid._load_laws`: stiffness phases, tabulated curves, tan/cos or
    polynomial laws), uncoupled; energy `sum_k E_k(y_k - y_0k)`, dissipation
    `1/2 sum_k d_k y'_k^2`.

    Fields: `frame1`, `frame2` (as in `Bushing`), `laws` (6 `AbstractLoadLaw`, N or N m),
    `damping` (`(6,)`, N s/m and N m s/rad), `reference` (`y_0`, `(6,)`).
    """

    frame1: tuple[Float[Array, "3"], Float[Array, "3"]]
    frame2: tuple[Float[Array, "3"], Float[Array, "3"]]
    laws: tuple[AbstractLoadLaw, ...]
    damping: Float[Array, "6"]
    reference: Float[Array, "6"]

    @classmethod
    def create(cls, frame1, frame2, laws, damping, lower_pose, upper_pose):
        """A table bushing whose reference `y_0` is the relative motion at the reference
        poses `lower_pose`, `upper_pose` (`(6,)` each); `laws`: 6 load laws."""
        laws = tuple(laws)
        if len(laws) != 6 or not all(isinstance(law, AbstractLoadLaw) for law in laws):
            raise ValueError(f"table bushing: expected 6 load laws (tx, ty, tz, rx, ry, rz), "
                             f"got {len(laws)}")
        damping = jnp.asarray(damping, dtype=float)
        if damping.shape != (6,):
            raise ValueError(f"table bushing: damping must have 6 entries, got {damping.shape}")
        bushing = cls(_frame_arrays(frame1), _frame_arrays(frame2), laws, damping, jnp.zeros(6))
        reference = bushing.deflection(jnp.asarray(lower_pose, dtype=float),
                                       jnp.asarray(upper_pose, dtype=float))
        return eqx.tree_at(lambda b: b.reference, bushing, reference)

    def energy(self, lower_pose, upper_pose) -> Float[Array, ""]:
        """Stored energy `sum_k E_k(y_k - y_0k)` (J)."""
        change = self.deflection(lower_pose, upper_pose) - self.reference
        return sum(law.energy(change[k]) for k, law in enumerate(self.laws))

    def dissipation(self, lower_pose, upper_pose, lower_velocity, upper_velocity):
        """Rayleigh function `1/2 sum_k d_k y'_k^2` (W)."""
        rate = self.deflection_rate(lower_pose, upper_pose, lower_velocity, upper_velocity)
        return 0.5 * jnp.sum(self.damping * rate**2)

    def generalized_force(self, deflection, rate):
        """`f_k = -M_k(y_k - y_0k) - d_k y'_k` (N, N m)."""
        change = deflection - self.reference
        elastic = jnp.stack([law.load(change[k]) for k, law in enumerate(self.laws)])
        return -elastic - self.damping * rate


class SpatialPair(AbstractLagrangianSystem):
    """A fixed lower and a free upper vertebra in 3-D joined by bushings, ligaments and facet
    contacts.

    Generalized coordinates: the upper pose `q = [x, y, z, a1, a2, a3]`, centre of mass (m) and
    1-2-3 Euler angles (rad) of the body frame (formats.md). Kinetic energy
    `1/2 m |x'|^2 + 1/2 w^T I w` with the body-axis angular velocity `w = eW(a) a'`
    (supplement S.16); potential energy of the bushings and gravity; loads `[Fx, Fy, Fz]` at the
    centre of mass and `[Mx, My, Mz]` (global axes), whose generalized forces are `F` and
    `EW(a)^T M` (S.18). The motion starts at rest.

    Fields: `lower`, `upper` (`SpatialBody`), `elements` (tuple of `AbstractSpatialElement`:
    `Bushing`, `TableBushing`, `SpatialLigaments`, `FacetContacts`), `loads` (tuple of `AbstractLoad` with the 6 components above), `gravity`
    (m/s^2, `(3,)`), `initial_pose`.
    """

    lower: SpatialBody
    upper: SpatialBody
    elements: tuple[AbstractSpatialElement, ...]
    loads: tuple[AbstractLoad, ...]
    gravity: Float[Array, "3"]
    initial_pose: Float[Array, "6"]

    @property
    def n_dof(self) -> int:
        """Number of generalized coordinates (6)."""
        return 6

    def kinetic_energy(self, t, q, qdot):
        spin = e_W(q[3:]) @ qdot[3:]
        return 0.5 * self.upper.mass * qdot[:3] @ qdot[:3] + 0.5 * spin @ self.upper.inertia @ spin

    def potential_energy(self, t, q):
        lower = self.lower.reference_pose
        elastic = sum(element.energy(lower, q) for element in self.elements)
        return elastic - self.upper.mass * self.gravity @ q[:3]

    def dissipation_function(self, t, q, qdot):
        lower, still = self.lower.reference_pose, jnp.zeros(6, dtype=q.dtype)
        return sum(element.dissipation(lower, q, still, qdot) for element in self.elements) \
            + jnp.zeros((), dtype=q.dtype)

    def accelerations(self, t, q, qdot) -> Float[Array, "6"]:
        """Generalized accelerations `(6,)` (m/s^2, rad/s^2) of the same Lagrange equations as
        `generalized_accelerations`, with the inertial terms written out (Euler's equations
        projected on the Euler-angle rates): with `w = eW(a) a'` and `I` the body inertia,

            m x'' = Q_x,   eW^T I eW a'' = Q_a - eW^T (I eW' a' + w x I w),

        where `Q = Q_applied - dU/dq - dR/dqdot` (`active_forces`). Tested equal to the
        autodiff path; half its cost per evaluation, which is most of a simulation's."""
        rate = qdot[3:]
        forces = active_forces(self, t, q, qdot)
        inertia = self.upper.inertia
        spin_map, spin_map_rate = jax.jvp(e_W, (q[3:],), (rate,))
        spin = spin_map @ rate
        mass = spin_map.T @ inertia @ spin_map
        rhs = forces[3:] - spin_map.T @ (inertia @ (spin_map_rate @ rate)
                                         + jnp.cross(spin, inertia @ spin))
        return jnp.concatenate([forces[:3] / self.upper.mass, solve_mass_matrix(mass, rhs)])

    def applied_load(self, t) -> Float[Array, "6"]:
        """`[Fx, Fy, Fz, Mx, My, Mz]` on the upper body at time `t` (N, N m; global axes)."""
        return sum((load.value(t) for load in self.loads), jnp.zeros(6))

    def generalized_forces(self, t, q, qdot):
        load = self.applied_load(t)
        return jnp.concatenate([load[:3], E_W(q[3:]).T @ load[3:]])

    def initial_state(self):
        return self.initial_pose, jnp.zeros_like(self.initial_pose)

    def observe(self, q: Float[Array, " n"]) -> Float[Array, "6"]:
        """The measured channels `x, y, z, a1, a2, a3` (the upper body's pose)."""
        return q

    @property
    def observable_names(self) -> tuple[str, ...]:
        """Names of the measured channels, as in the trajectory CSV header."""
        return ("x", "y", "z", "a1", "a2", "a3")
