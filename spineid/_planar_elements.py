"""Joint elements between two bodies in the plane, defined by their energy and dissipation.

Each element stores its parameters as arrays, so a whole discrete measure of springs
`sum_l K_l delta_{s_l}` is one element, and its forces follow from the mechanics core by
differentiating `energy` and `dissipation` (no hand-written force laws).
"""

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._planar_kinematics import body_point_position, body_point_velocity, to_body_coordinates


class AbstractPlanarJointElement(eqx.Module):
    """An element acting between a body `a` (the lower) and a body `b` (the upper).

    Poses are `[x, y, theta]` (m, m, rad) and velocities `[vx, vy, omega]` of the body frames
    in the global frame.
    """

    @abc.abstractmethod
    def energy(self, pose_a: Float[Array, "3"], pose_b: Float[Array, "3"]) -> Float[Array, ""]:
        """Stored energy (J)."""

    @abc.abstractmethod
    def dissipation(
        self,
        pose_a: Float[Array, "3"],
        pose_b: Float[Array, "3"],
        velocity_a: Float[Array, "3"],
        velocity_b: Float[Array, "3"],
    ) -> Float[Array, ""]:
        """Rayleigh dissipation function (W): damping generalized forces are its negative
        gradient with respect to the velocities."""


def _span(pose_a, pose_b, points_a, points_b) -> Float[Array, "n 2"]:
    # Vectors from the attachment points on body a to those on body b (global frame, m).
    return body_point_position(pose_b, points_b) - body_point_position(pose_a, points_a)


def _span_rate(pose_a, pose_b, velocity_a, velocity_b, points_a, points_b) -> Float[Array, "n 2"]:
    # Time derivative of `_span` (m/s).
    return body_point_velocity(pose_b, velocity_b, points_b) - body_point_velocity(
        pose_a, velocity_a, points_a
    )


class VectorSprings(AbstractPlanarJointElement):
    """Liu's relaxed pin: a discrete measure of zero-rest-length springs `sum_l K_l delta_{s_l}`.

    Each material point `s_l` belongs to both bodies in the reference pose; the spring pulls its
    two copies together. Energy `1/2 sum_l K_l |Phi(s_l)|^2` with the separation
    `Phi(s_l) = (X_b + R_b g_b(s_l)) - (X_a + R_a g_a(s_l))` (Liu 2001, eqs 2-12 to 2-15, 2-18);
    dissipation `1/2 sum_l c_l |dPhi(s_l)/dt|^2`.

    Fields: `points_a`, `points_b` (m, shape `(n, 2)`), the points in the body coordinates of `a`
    and `b`; `stiffness` (N/m) and `damping` (N s/m), shape `(n,)`.
    """

    points_a: Float[Array, "n 2"]
    points_b: Float[Array, "n 2"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]

    @classmethod
    def from_reference(
        cls,
        points: Float[ArrayLike, "n 2"],
        stiffness: Float[ArrayLike, " n"],
        damping: Float[ArrayLike, " n"],
        reference_pose_a: Float[ArrayLike, "3"],
        reference_pose_b: Float[ArrayLike, "3"],
    ) -> "VectorSprings":
        """Springs at global points `points` (m, shape `(n, 2)`) of the reference configuration."""
        points = jnp.asarray(points, dtype=float)
        return cls(
            points_a=to_body_coordinates(reference_pose_a, points),
            points_b=to_body_coordinates(reference_pose_b, points),
            stiffness=jnp.asarray(stiffness, dtype=float),
            damping=jnp.asarray(damping, dtype=float),
        )

    def separation(self, pose_a, pose_b) -> Float[Array, "n 2"]:
        """`Phi(s_l)`, the separation of the two copies of each point (m), shape `(n, 2)`."""
        return _span(pose_a, pose_b, self.points_a, self.points_b)

    def energy(self, pose_a, pose_b):
        phi = self.separation(pose_a, pose_b)
        return 0.5 * jnp.sum(self.stiffness * jnp.sum(phi**2, axis=-1))

    def dissipation(self, pose_a, pose_b, velocity_a, velocity_b):
        rate = _span_rate(pose_a, pose_b, velocity_a, velocity_b, self.points_a, self.points_b)
        return 0.5 * jnp.sum(self.damping * jnp.sum(rate**2, axis=-1))


class AxialSprings(AbstractPlanarJointElement):
    """Ligament-like spring-dampers acting along the line between two attachment points.

    Energy `1/2 sum_l k_l (L_l - L0_l)^2`, dissipation `1/2 sum_l c_l (dL_l/dt)^2`, so the force
    on `b` is `-(k (L - L0) + c dL/dt)` along the unit vector from the `a` to the `b` attachment.

    Fields: `points_a`, `points_b` (m, `(n, 2)`, body coordinates), `rest_length` (m, `(n,)`),
    `stiffness` (N/m, `(n,)`), `damping` (N s/m, `(n,)`).
    """

    points_a: Float[Array, "n 2"]
    points_b: Float[Array, "n 2"]
    rest_length: Float[Array, " n"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]

    @classmethod
    def from_reference(
        cls,
        points_a: Float[ArrayLike, "n 2"],
        points_b: Float[ArrayLike, "n 2"],
        stiffness: Float[ArrayLike, " n"],
        damping: Float[ArrayLike, " n"],
        reference_pose_a: Float[ArrayLike, "3"],
        reference_pose_b: Float[ArrayLike, "3"],
    ) -> "AxialSprings":
        """Springs between global attachment points of the reference configuration (m, `(n, 2)`);
        the rest lengths are their reference distances."""
        points_a = jnp.asarray(points_a, dtype=float)
        points_b = jnp.asarray(points_b, dtype=float)
        return cls(
            points_a=to_body_coordinates(reference_pose_a, points_a),
            points_b=to_body_coordinates(reference_pose_b, points_b),
            rest_length=jnp.linalg.norm(points_b - points_a, axis=-1),
            stiffness=jnp.asarray(stiffness, dtype=float),
            damping=jnp.asarray(damping, dtype=float),
        )

    def length(self, pose_a, pose_b) -> Float[Array, " n"]:
        """Current lengths `L_l` (m), shape `(n,)`."""
        return jnp.linalg.norm(_span(pose_a, pose_b, self.points_a, self.points_b), axis=-1)

    def energy(self, pose_a, pose_b):
        stretch = self.length(pose_a, pose_b) - self.rest_length
        return 0.5 * jnp.sum(self.stiffness * stretch**2)

    def dissipation(self, pose_a, pose_b, velocity_a, velocity_b):
        span = _span(pose_a, pose_b, self.points_a, self.points_b)
        span_rate = _span_rate(
            pose_a, pose_b, velocity_a, velocity_b, self.points_a, self.points_b
        )
        length_rate = jnp.sum(span * span_rate, axis=-1) / jnp.linalg.norm(span, axis=-1)
        return 0.5 * jnp.sum(self.damping * length_rate**2)


class TorsionSpring(AbstractPlanarJointElement):
    """Rotational spring-damper on the relative angle `theta_b - theta_a`.

    Energy `1/2 k (theta_b - theta_a - rest_angle)^2`, dissipation `1/2 c (omega_b - omega_a)^2`.
    Fields: `stiffness` (N m/rad), `damping` (N m s/rad), `rest_angle` (rad, the relative angle of
    the reference configuration).
    """

    stiffness: Float[Array, ""]
    damping: Float[Array, ""]
    rest_angle: Float[Array, ""]

    def energy(self, pose_a, pose_b):
        return 0.5 * self.stiffness * (pose_b[2] - pose_a[2] - self.rest_angle) ** 2

    def dissipation(self, pose_a, pose_b, velocity_a, velocity_b):
        return 0.5 * self.damping * (velocity_b[2] - velocity_a[2]) ** 2
