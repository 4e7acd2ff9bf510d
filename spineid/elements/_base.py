"""The abstract joint elements: what every element between two bodies provides.

An element is defined by its stored energy and its Rayleigh dissipation function; the
mechanics core (`spineid.AbstractLagrangianSystem`) derives its forces by differentiating them,
so no element writes a force law by hand. Concrete elements are final equinox Modules whose
array fields are their parameters.
"""

import abc
import dataclasses
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics._frames import (
    bushing_deflection, bushing_deflection_rate, bushing_wrenches, frame_in_ground,
)
from ..kinematics._rotations import E_W


def unlabelled(element):
    """`element` without its `label`: the label is a static field, part of the element's tree
    structure, so elements that differ only in their labels (the joints of a chain read from a
    file) must drop them to share one structure, to be stacked and vmapped together."""
    if getattr(element, "label", None) is None:
        return element
    return dataclasses.replace(element, label=None)


class AbstractPlanarJointElement(eqx.Module):
    """An element acting between a body `a` (the lower) and a body `b` (the upper).

    Poses are `[x, y, theta]` (m, m, rad) and velocities `[vx, vy, omega]` of the body frames
    in the global frame.
    """

    label: str | tuple[str, ...] | None = eqx.field(static=True, default=None, kw_only=True)
    """The element's name in parameter names (`torsion[0]`), or one name per row for an
    element whose rows are members of its collection (`("springs[0]", "springs[2]")`); `None`
    (the default): counted in the model (`spineid.element_labels`). Model readers set it to
    the file's own numbering."""
    collection: ClassVar[str] = "elements"

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

    def parameter_fields(self) -> tuple:
        """The fields holding this element's parameters (`ParameterField`s); none by default."""
        return ()

    def attachment_points(self, pose_a: Float[Array, "3"], pose_b: Float[Array, "3"]
                          ) -> tuple[Float[Array, "n 2"], Float[Array, "n 2"]] | None:
        """Global points (m, `(n, 2)` each) where the element's `n` springs attach to body
        `a` and to body `b` at the given poses, for drawings; `None` (the default) for an
        element without attachment points, such as a torsion spring. A vector spring
        attaches both ends at the same material point: in the reference pose the two
        coincide."""
        return None


class AbstractSpatialElement(eqx.Module):
    """A joint element between the lower and the upper body of a spatial pair, defined by its
    stored energy and its Rayleigh dissipation function; the mechanics core derives its forces.
    Poses are `[x, y, z, a1, a2, a3]` (m, 1-2-3 Euler angles in rad), velocities their rates.
    """

    label: str | tuple[str, ...] | None = eqx.field(static=True, default=None, kw_only=True)
    """The element's name in parameter names (`torsion[0]`), or one name per row for an
    element whose rows are members of its collection (`("springs[0]", "springs[2]")`); `None`
    (the default): counted in the model (`spineid.element_labels`). Model readers set it to
    the file's own numbering."""
    collection: ClassVar[str] = "elements"

    @abc.abstractmethod
    def energy(self, lower_pose, upper_pose) -> Float[Array, ""]:
        """Stored energy (J) at the body poses `(6,)`."""

    @abc.abstractmethod
    def dissipation(self, lower_pose, upper_pose, lower_velocity, upper_velocity
                    ) -> Float[Array, ""]:
        """Rayleigh dissipation function (W); velocities are pose rates `(6,)`."""

    def parameter_fields(self) -> tuple:
        """The fields holding this element's parameters (`ParameterField`s); none by default."""
        return ()


class AbstractBushing(AbstractSpatialElement):
    """A bushing between a frame on the lower body (frame 1) and one on the upper (frame 2).

    Its load depends on the relative motion `y = [p, beta]` of frame 2 in frame 1 (m, rad;
    `spineid.bushing_deflection`, Christophy et al. 2013 eq 17) through the change `y - y_0` from a
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
