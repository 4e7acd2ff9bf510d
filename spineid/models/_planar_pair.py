"""Two vertebrae in the sagittal plane joined by springs, dampers and a torsion element."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._arrays import floats
from ..elements._base import AbstractPlanarJointElement
from ._loads import AbstractLoad
from ._pair import AbstractVertebralPair


class PlanarBody(eqx.Module):
    """A rigid body in the plane whose frame origin is its centre of mass.

    Fields: `mass` (kg), `inertia` (kg m^2, about the centre of mass, out-of-plane axis),
    `reference_pose` (`[x, y, theta]`, m, m, rad) and `fixed` (static: a fixed body never moves,
    and its mass and inertia are ignored). Numbers and lists are accepted for the arrays.
    """

    mass: Float[Array, ""] = eqx.field(converter=floats)
    inertia: Float[Array, ""] = eqx.field(converter=floats)
    reference_pose: Float[Array, "3"] = eqx.field(converter=floats)
    fixed: bool = eqx.field(static=True, default=False)

    @classmethod
    def fixed_at(cls, pose) -> "PlanarBody":
        """A fixed body (the ground, or a lower vertebra held by the rig) at `pose`
        (`[x, y, theta]`, m, m, rad)."""
        return cls(mass=1.0, inertia=1.0, reference_pose=pose, fixed=True)


class PlanarPair(AbstractVertebralPair):
    """A lower and an upper vertebra in the plane (x anterior, y superior), Liu (2001) ch. 2.

    Generalized coordinates: the upper pose `[x, y, theta]` when the lower body is fixed
    (3 DOF), else `[lower pose, upper pose]` (6 DOF), each the centre-of-mass position (m) and
    frame angle (rad). Kinetic energy `sum 1/2 m |v|^2 + 1/2 J omega^2` (Liu 2001, eq 2-5);
    potential energy from the joint elements and gravity; loads act on the upper body as
    `[Fx, Fy, Mz]` through its centre of mass (global axes).

    Fields: `lower`, `upper` (`PlanarBody`), `elements` (tuple of joint elements from lower to
    upper), `loads` (tuple of `AbstractLoad` with 3 components), `gravity` (m/s^2, shape `(2,)`),
    `initial_pose` (start pose of the upper body; the lower starts at its reference pose).
    The motion starts at rest. Numbers and lists are accepted for `gravity` and `initial_pose`;
    a model built here is fitted like one read from a file (`FitProblem(pair, ...)`).
    """

    lower: PlanarBody
    upper: PlanarBody
    elements: tuple[AbstractPlanarJointElement, ...]
    loads: tuple[AbstractLoad, ...]
    gravity: Float[Array, "2"] = eqx.field(converter=floats)
    initial_pose: Float[Array, "3"] = eqx.field(converter=floats)

    @property
    def n_dof(self) -> int:
        """Number of generalized coordinates (3 or 6)."""
        return 3 if self.lower.fixed else 6

    def body_poses(self, q: Float[Array, " n"]) -> tuple[Float[Array, "3"], Float[Array, "3"]]:
        """`(lower pose, upper pose)` from the generalized coordinates."""
        if self.lower.fixed:
            return self.lower.reference_pose, q
        return q[:3], q[3:]

    def body_velocities(self, qdot: Float[Array, " n"]) -> tuple[Float[Array, "3"], Float[Array, "3"]]:
        """`(lower velocity, upper velocity)`, each `[vx, vy, omega]`."""
        if self.lower.fixed:
            return jnp.zeros(3, dtype=qdot.dtype), qdot
        return qdot[:3], qdot[3:]

    def _free_bodies(self):
        return (self.upper,) if self.lower.fixed else (self.lower, self.upper)

    def kinetic_energy(self, t, q, qdot):
        velocities = (qdot,) if self.lower.fixed else (qdot[:3], qdot[3:])
        return sum(
            0.5 * body.mass * jnp.sum(v[:2] ** 2) + 0.5 * body.inertia * v[2] ** 2
            for body, v in zip(self._free_bodies(), velocities)
        )

    def potential_energy(self, t, q):
        pose_lower, pose_upper = self.body_poses(q)
        elastic = sum(element.energy(pose_lower, pose_upper) for element in self.elements)
        poses = (pose_upper,) if self.lower.fixed else (pose_lower, pose_upper)
        gravitational = sum(
            -body.mass * jnp.dot(self.gravity, pose[:2])
            for body, pose in zip(self._free_bodies(), poses)
        )
        return elastic + gravitational

    def dissipation_function(self, t, q, qdot):
        pose_lower, pose_upper = self.body_poses(q)
        velocity_lower, velocity_upper = self.body_velocities(qdot)
        return sum(
            element.dissipation(pose_lower, pose_upper, velocity_lower, velocity_upper)
            for element in self.elements
        ) + jnp.zeros((), dtype=q.dtype)

    def applied_load(self, t) -> Float[Array, "3"]:
        """`[Fx, Fy, Mz]` on the upper body at time `t` (N, N, N m)."""
        return sum((load.value(t) for load in self.loads), jnp.zeros(3))

    def generalized_forces(self, t, q, qdot):
        load = self.applied_load(t)
        if self.lower.fixed:
            return load
        return jnp.concatenate([jnp.zeros(3, dtype=load.dtype), load])

    def initial_state(self):
        q0 = (
            self.initial_pose
            if self.lower.fixed
            else jnp.concatenate([self.lower.reference_pose, self.initial_pose])
        )
        return q0, jnp.zeros_like(q0)

    def observe(self, q: Float[Array, " n"]) -> Float[Array, "3"]:
        """The measured channels `x, y, theta` (the upper body's pose) at coordinates `q`."""
        return self.body_poses(q)[1]

    @property
    def observable_names(self) -> tuple[str, ...]:
        """Names of the measured channels, as in the trajectory CSV header."""
        return ("x", "y", "theta")

    @property
    def observable_units(self) -> tuple[str, ...]:
        """Units of the measured channels."""
        return ("m", "m", "rad")
