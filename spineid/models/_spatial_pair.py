"""Two vertebrae in 3-D joined by bushings (Christophy et al. 2013; supplement sections 2-4)."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..elements._base import AbstractSpatialElement
from ..elements._bushings import Bushing
from ..kinematics._rotations import E_W, e_W
from ._loads import AbstractLoad
from ._pair import AbstractVertebralPair
from ._mechanics import active_forces, solve_mass_matrix


SPATIAL_LOAD_COMPONENTS = ("Fx", "Fy", "Fz", "Mx", "My", "Mz")


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


class SpatialPair(AbstractVertebralPair):
    """A fixed lower and a free upper vertebra in 3-D joined by bushings, ligaments and facet
    contacts.

    Generalized coordinates: the upper pose `q = [x, y, z, a1, a2, a3]`, centre of mass (m) and
    1-2-3 Euler angles (rad) of the body frame (docs/formats/model-files.md). Kinetic energy
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

    @property
    def observable_units(self) -> tuple[str, ...]:
        """Units of the measured channels."""
        return ("m", "m", "m", "rad", "rad", "rad")

    def export_formats(self) -> tuple[str, ...]:
        """`("opensim",)` when every element is a linear `Bushing` (OpenSim has no element for
        a load law per degree of freedom, ligaments or facet contacts), else `()`."""
        return ("opensim",) if all(isinstance(e, Bushing) for e in self.elements) else ()
