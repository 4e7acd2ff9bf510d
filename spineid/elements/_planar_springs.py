"""Joint elements between two bodies in the plane: measures of vector springs (Liu's relaxed
pin), axial spring-dampers and torsion springs, defined by their energy and dissipation.

Each element stores its parameters as arrays, so a whole discrete measure of springs
`sum_l K_l delta_{s_l}` is one element, and its forces follow from the mechanics core by
differentiating `energy` and `dissipation` (no hand-written force laws).
"""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._arrays import floats, traced
from ..kinematics._planar import body_point_position, body_point_velocity, to_body_coordinates
from ._base import AbstractPlanarJointElement
from ._load_laws import AbstractLoadLaw
from ._parameters import ParameterField


def _reference_body_coordinates(pose, points) -> Float[Array, "n 2"]:
    # `to_body_coordinates` of reference geometry; computed by numpy where the values are on the
    # host (a model read from its file: no small compiled program per operation).
    if traced(pose, points):
        return to_body_coordinates(pose, jnp.asarray(points, dtype=float))
    pose, points = np.asarray(pose, dtype=float), np.asarray(points, dtype=float)
    c, s = np.cos(pose[2]), np.sin(pose[2])
    return floats((points - pose[:2]) @ np.array([[c, -s], [s, c]]))


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

    collection: ClassVar[str] = "springs"

    points_a: Float[Array, "n 2"]
    points_b: Float[Array, "n 2"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]

    def parameter_fields(self):
        """`stiffness` (N/m, group `stiffness`) and `damping` (N s/m, group `damping`) of each
        spring, >= 0; each spring a member of the model's `springs`."""
        return (ParameterField("stiffness", "stiffness", "N/m", rows="members"),
                ParameterField("damping", "damping", "N s/m", rows="members"))

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
        return cls(
            points_a=_reference_body_coordinates(reference_pose_a, points),
            points_b=_reference_body_coordinates(reference_pose_b, points),
            stiffness=floats(stiffness),
            damping=floats(damping),
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

    def attachment_points(self, pose_a, pose_b):
        """The springs' points on body `a` and on body `b` (m, global, `(n, 2)` each)."""
        return (body_point_position(pose_a, self.points_a),
                body_point_position(pose_b, self.points_b))


class AxialSprings(AbstractPlanarJointElement):
    """Ligament-like spring-dampers acting along the line between two attachment points.

    Energy `1/2 sum_l k_l (L_l - L0_l)^2`, dissipation `1/2 sum_l c_l (dL_l/dt)^2`, so the force
    on `b` is `-(k (L - L0) + c dL/dt)` along the unit vector from the `a` to the `b` attachment.

    Fields: `points_a`, `points_b` (m, `(n, 2)`, body coordinates), `rest_length` (m, `(n,)`),
    `stiffness` (N/m, `(n,)`), `damping` (N s/m, `(n,)`).
    """

    collection: ClassVar[str] = "springs"

    points_a: Float[Array, "n 2"]
    points_b: Float[Array, "n 2"]
    rest_length: Float[Array, " n"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]

    def parameter_fields(self):
        """`stiffness` (N/m, group `stiffness`) and `damping` (N s/m, group `damping`) of each
        spring, >= 0; each spring a member of the model's `springs`."""
        return (ParameterField("stiffness", "stiffness", "N/m", rows="members"),
                ParameterField("damping", "damping", "N s/m", rows="members"))

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
        if traced(points_a, points_b):
            rest_length = jnp.linalg.norm(jnp.asarray(points_b) - jnp.asarray(points_a), axis=-1)
        else:
            rest_length = floats(np.linalg.norm(np.asarray(points_b, dtype=float)
                                                - np.asarray(points_a, dtype=float), axis=-1))
        return cls(
            points_a=_reference_body_coordinates(reference_pose_a, points_a),
            points_b=_reference_body_coordinates(reference_pose_b, points_b),
            rest_length=rest_length,
            stiffness=floats(stiffness),
            damping=floats(damping),
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

    def attachment_points(self, pose_a, pose_b):
        """The springs' points on body `a` and on body `b` (m, global, `(n, 2)` each)."""
        return (body_point_position(pose_a, self.points_a),
                body_point_position(pose_b, self.points_b))


class TorsionSpring(AbstractPlanarJointElement):
    """Rotational spring-damper on the relative angle `theta_b - theta_a`.

    Energy `1/2 k (theta_b - theta_a - rest_angle)^2`, dissipation `1/2 c (omega_b - omega_a)^2`.
    Fields: `stiffness` (N m/rad), `damping` (N m s/rad), `rest_angle` (rad, the relative angle of
    the reference configuration; default 0). Numbers are accepted.
    """

    collection: ClassVar[str] = "torsion"

    stiffness: Float[Array, ""] = eqx.field(converter=floats)
    damping: Float[Array, ""] = eqx.field(converter=floats, default=0.0)
    rest_angle: Float[Array, ""] = eqx.field(converter=floats, default=0.0)

    def parameter_fields(self):
        """`stiffness` (N m/rad) and `damping` (N m s/rad), both in group `torsion`, >= 0."""
        return (ParameterField("stiffness", "torsion", "N m/rad"),
                ParameterField("damping", "torsion", "N m s/rad"))

    def energy(self, pose_a, pose_b):
        return 0.5 * self.stiffness * (pose_b[2] - pose_a[2] - self.rest_angle) ** 2

    def dissipation(self, pose_a, pose_b, velocity_a, velocity_b):
        return 0.5 * self.damping * (velocity_b[2] - velocity_a[2]) ** 2


class NonlinearTorsion(AbstractPlanarJointElement):
    """Rotational spring-damper with a nonlinear law on the relative angle
    `x = theta_b - theta_a - rest_angle`: moment `-M(x) - c x'` on `b`.

    Energy `E(x)` of the law (`spineid.elements`: stiffness phases as in Liu 2001 section 4.3,
    tabulated curves, the tan/cos law of Fritzkowski and Walczak eq 35, polynomials),
    dissipation `1/2 c (omega_b - omega_a)^2`. Fields: `law` (`AbstractLoadLaw`, rad to N m),
    `damping` (`c`, N m s/rad), `rest_angle` (rad).
    """

    collection: ClassVar[str] = "torsion"

    law: AbstractLoadLaw
    damping: Float[Array, ""]
    rest_angle: Float[Array, ""]

    def parameter_fields(self):
        """The law's parameters (rad to N m) and `damping` (N m s/rad), group `torsion`."""
        return (*self.law.parameter_fields("rad", "N m", "torsion", "law."),
                ParameterField("damping", "torsion", "N m s/rad"))

    def energy(self, pose_a, pose_b):
        return self.law.energy(pose_b[2] - pose_a[2] - self.rest_angle)

    def dissipation(self, pose_a, pose_b, velocity_a, velocity_b):
        return 0.5 * self.damping * (velocity_b[2] - velocity_a[2]) ** 2


def _rotation(angle) -> Float[Array, "2 2"]:
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.array([[c, -s], [s, c]])


class SpringMeasure(AbstractPlanarJointElement):
    """A measure of zero-rest-length vector springs `sum_l K_l delta_{s_l}`, through its moments.

    Summing Liu's energy `1/2 sum_l K_l |Phi(s_l)|^2` (Liu 2001, eqs 2-12 to 2-18) over the
    springs: the separation is affine in the point, `Phi(s) = Phi(o) + D (s - o)` with
    `D = R(theta_b - theta_b0) - R(theta_a - theta_a0)`, and `D^T D = 2 (1 - cos Delta) I` in the
    plane (`Delta` the relative rotation from the reference), so the energy is exactly

        E = 1/2 m0 |Phi(o)|^2 + Phi(o) . D m1 + (1 - cos Delta) m2,

    with the moments of the stiffness measure about a point `o` of the reference configuration:
    `m0 = sum K_l` (N/m), `m1 = sum K_l (s_l - o)` (N), `m2 = sum K_l |s_l - o|^2` (N m). About
    the centroid (`m1 = 0`) the measure is one spring of stiffness `m0` at the centroid plus a
    rotational spring `(1 - cos Delta) m2`. The dissipation of a damping measure follows the
    same way with `|dD/dt d|^2 = |d|^2 (w_a^2 + w_b^2 - 2 w_a w_b cos Delta)`. The cost of the
    element does not depend on the number of springs, and the motion depends on a measure only
    through these 4 numbers (3 when the springs lie on a line through `o`).

    Fields: `origin_a`, `origin_b` (m, `(2,)`): `o` in the body coordinates of `a` and `b`;
    `reference_angles` (rad, `(2,)`): the frame angles of `a` and `b` in the reference pose;
    `stiffness_moments`, `damping_moments` (`(4,)`: `[m0, m1x, m1y, m2]`, global reference axes;
    units N/m, N, N, N m for stiffness and N s/m, N s, N s, N m s for damping).
    """

    collection: ClassVar[str] = "measure"

    origin_a: Float[Array, "2"]
    origin_b: Float[Array, "2"]
    reference_angles: Float[Array, "2"]
    stiffness_moments: Float[Array, "4"]
    damping_moments: Float[Array, "4"]

    @classmethod
    def from_moments(
        cls,
        origin: Float[ArrayLike, "2"],
        stiffness_moments: Float[ArrayLike, "4"],
        damping_moments: Float[ArrayLike, "4"],
        reference_pose_a: Float[ArrayLike, "3"],
        reference_pose_b: Float[ArrayLike, "3"],
    ) -> "SpringMeasure":
        """The measure with moments about the global reference point `origin` (m, `(2,)`)."""
        origin = jnp.asarray(origin, dtype=float)
        pose_a = jnp.asarray(reference_pose_a, dtype=float)
        pose_b = jnp.asarray(reference_pose_b, dtype=float)
        return cls(
            origin_a=to_body_coordinates(pose_a, origin),
            origin_b=to_body_coordinates(pose_b, origin),
            reference_angles=jnp.stack([pose_a[2], pose_b[2]]),
            stiffness_moments=jnp.asarray(stiffness_moments, dtype=float),
            damping_moments=jnp.asarray(damping_moments, dtype=float),
        )

    @classmethod
    def from_springs(
        cls,
        points: Float[ArrayLike, "n 2"],
        stiffness: Float[ArrayLike, " n"],
        damping: Float[ArrayLike, " n"],
        reference_pose_a: Float[ArrayLike, "3"],
        reference_pose_b: Float[ArrayLike, "3"],
        origin: Float[ArrayLike, "2"],
    ) -> "SpringMeasure":
        """The moments about `origin` of springs at global reference `points` (m, `(n, 2)`)
        with `stiffness` (N/m) and `damping` (N s/m), each `(n,)`. Differentiable in all."""
        points = jnp.asarray(points, dtype=float)
        return cls.from_moments(
            origin,
            spring_moments(points, stiffness, origin),
            spring_moments(points, damping, origin),
            reference_pose_a,
            reference_pose_b,
        )

    def _relative_rotation(self, pose_a, pose_b):
        turn_a = pose_a[2] - self.reference_angles[0]
        turn_b = pose_b[2] - self.reference_angles[1]
        return turn_a, turn_b

    def energy(self, pose_a, pose_b):
        turn_a, turn_b = self._relative_rotation(pose_a, pose_b)
        m0, m1, m2 = self.stiffness_moments[0], self.stiffness_moments[1:3], self.stiffness_moments[3]
        phi = _span(pose_a, pose_b, self.origin_a[None], self.origin_b[None])[0]
        d = _rotation(turn_b) - _rotation(turn_a)
        return 0.5 * m0 * jnp.sum(phi**2) + phi @ d @ m1 + (1.0 - jnp.cos(turn_b - turn_a)) * m2

    def dissipation(self, pose_a, pose_b, velocity_a, velocity_b):
        turn_a, turn_b = self._relative_rotation(pose_a, pose_b)
        c0, c1, c2 = self.damping_moments[0], self.damping_moments[1:3], self.damping_moments[3]
        rate = _span_rate(
            pose_a, pose_b, velocity_a, velocity_b, self.origin_a[None], self.origin_b[None]
        )[0]
        w_a, w_b = velocity_a[2], velocity_b[2]
        perpendicular = jnp.array([[0.0, -1.0], [1.0, 0.0]])
        d_rate = w_b * perpendicular @ _rotation(turn_b) - w_a * perpendicular @ _rotation(turn_a)
        spin = w_a**2 + w_b**2 - 2.0 * w_a * w_b * jnp.cos(turn_b - turn_a)
        return 0.5 * c0 * jnp.sum(rate**2) + rate @ d_rate @ c1 + 0.5 * spin * c2


def spring_moments(
    points: Float[ArrayLike, "n 2"], weights: Float[ArrayLike, " n"], origin: Float[ArrayLike, "2"]
) -> Float[Array, "4"]:
    """Moments `[sum w, sum w (s - o), sum w |s - o|^2]` (`(4,)`) of weights `w` (`(n,)`) at
    points `s` (m, `(n, 2)`) about `o` (m, `(2,)`): the only numbers of a vector-spring measure
    the motion depends on (see `SpringMeasure`)."""
    offset = jnp.asarray(points, dtype=float) - jnp.asarray(origin, dtype=float)
    weights = jnp.asarray(weights, dtype=float)
    return jnp.concatenate([
        jnp.sum(weights)[None], weights @ offset, jnp.sum(weights * jnp.sum(offset**2, -1))[None]
    ])
