"""A vertebra on an exact pin joint: the classical joint that Liu's relaxed formulation relaxes."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..elements._base import AbstractPlanarJointElement
from ..kinematics._planar import rotation_matrix
from ._loads import AbstractLoad
from ._pair import AbstractVertebralPair
from ._planar_pair import PlanarBody


class PinnedPair(AbstractVertebralPair):
    """The upper body of a planar pair turning about a pin fixed in the (fixed) lower body.

    One generalized coordinate, the upper body's frame angle `theta` (rad). Its centre of mass
    moves on a circle about the pin: `X(theta) = pin + R(theta - theta_ref) (X_ref - pin)`.
    Kinetic energy `1/2 m |dX/dt|^2 + 1/2 J theta_dot^2`; potential energy of the torsion springs
    (on `theta - theta_lower`) and gravity; loads `[Fx, Fy, Mz]` at the centre of mass enter as the
    generalized force `F . dX/dtheta + Mz` (Liu 2001, section 3.3: the pin-joint reference case).

    Fields: `lower` (fixed `PlanarBody`), `upper` (`PlanarBody`), `pin` (m, global coordinates of
    the pin in the reference pose), `elements` (torsion springs on the relative angle:
    `TorsionSpring`, `NonlinearTorsion`), `loads`, `gravity` (m/s^2), `initial_angle` (rad,
    start angle; the motion starts at rest).
    """

    lower: PlanarBody
    upper: PlanarBody
    pin: Float[Array, "2"]
    elements: tuple[AbstractPlanarJointElement, ...]
    loads: tuple[AbstractLoad, ...]
    gravity: Float[Array, "2"]
    initial_angle: Float[Array, ""]

    def centre_of_mass(self, theta) -> Float[Array, "2"]:
        """Global position of the upper body's centre of mass at angle `theta` (m)."""
        arm = self.upper.reference_pose[:2] - self.pin
        return self.pin + rotation_matrix(theta - self.upper.reference_pose[2]) @ arm

    def upper_pose(self, q) -> Float[Array, "3"]:
        """`[x, y, theta]` of the upper body at coordinates `q = [theta]`."""
        return jnp.concatenate([self.centre_of_mass(q[0]), q])

    def kinetic_energy(self, t, q, qdot):
        velocity = jax.jvp(self.centre_of_mass, (q[0],), (qdot[0],))[1]
        return 0.5 * self.upper.mass * jnp.sum(velocity**2) + 0.5 * self.upper.inertia * (
            qdot[0] ** 2
        )

    def potential_energy(self, t, q):
        pose = self.upper_pose(q)
        elastic = sum(
            (spring.energy(self.lower.reference_pose, pose) for spring in self.elements),
            jnp.zeros((), dtype=q.dtype),
        )
        return elastic - self.upper.mass * jnp.dot(self.gravity, pose[:2])

    def dissipation_function(self, t, q, qdot):
        zero = jnp.zeros(3, dtype=q.dtype)
        velocity = jnp.concatenate([jnp.zeros(2, dtype=q.dtype), qdot])
        return sum(
            (spring.dissipation(self.lower.reference_pose, self.upper_pose(q), zero, velocity)
             for spring in self.elements),
            jnp.zeros((), dtype=q.dtype),
        )

    def applied_load(self, t) -> Float[Array, "3"]:
        """`[Fx, Fy, Mz]` on the upper body at time `t` (N, N, N m)."""
        return sum((load.value(t) for load in self.loads), jnp.zeros(3))

    def generalized_forces(self, t, q, qdot):
        load = self.applied_load(t)
        lever = jax.jacfwd(self.centre_of_mass)(q[0])
        return jnp.atleast_1d(jnp.dot(load[:2], lever) + load[2])

    def initial_state(self):
        return jnp.atleast_1d(self.initial_angle), jnp.zeros(1)

    def observe(self, q) -> Float[Array, "3"]:
        """The measured channels `x, y, theta` of the upper body."""
        return self.upper_pose(q)

    @property
    def observable_names(self) -> tuple[str, ...]:
        """Names of the measured channels, as in the trajectory CSV header."""
        return ("x", "y", "theta")

    @property
    def observable_units(self) -> tuple[str, ...]:
        """Units of the measured channels."""
        return ("m", "m", "rad")
