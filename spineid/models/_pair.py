"""What every vertebral pair shares: a lower and an upper vertebra, the upper one moved by loads,
by gravity or by a start away from its reference pose."""

import equinox as eqx
import numpy as np
from jaxtyping import Array, Float

from ._loads import AbstractLoad
from ._mechanics import AbstractLagrangianSystem


class AbstractVertebralPair(AbstractLagrangianSystem):
    """A lower and an upper vertebra with loads on the upper one (`PlanarPair`, `PinnedPair`,
    `SpatialPair`). Fields every pair has: `lower`, `upper` (bodies with a `reference_pose`),
    `loads` (tuple of `AbstractLoad`), `gravity` (m/s^2); `observe` gives the upper body's pose.
    """

    lower: eqx.AbstractVar[eqx.Module]
    upper: eqx.AbstractVar[eqx.Module]
    loads: eqx.AbstractVar[tuple[AbstractLoad, ...]]
    gravity: eqx.AbstractVar[Float[Array, " d"]]

    def is_excited(self) -> bool:
        """False when every load is zero, there is no gravity and the upper body starts at rest
        in its reference pose: then it never moves. Concrete values only."""
        if np.any(np.asarray(self.gravity)) or not all(load.is_zero() for load in self.loads):
            return True
        start = np.asarray(self.observe(self.initial_state()[0]))
        return not np.allclose(start, np.asarray(self.upper.reference_pose))
