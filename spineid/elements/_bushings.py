"""Bushings between two vertebrae in 3-D (Christophy et al. 2013): the linear bushing in its
classic (OpenSim BushingForce) and SpineBushing forms, and the table bushing with a nonlinear
load law per degree of freedom.

A bushing joins frame 1 on the lower body to frame 2 on the upper; its load depends on the
relative motion `y = [p, beta]` of frame 2 in frame 1 (`spineid.bushing_deflection`).
"""

import math
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._arrays import floats, traced
from ._base import AbstractBushing
from ._load_laws import AbstractLoadLaw
from ._parameters import ParameterField


UPPER = np.triu_indices(6)
"""Row-major upper-triangle indices of a 6x6 matrix: how bushings pack symmetric matrices."""


def bushing_unit(field: str, i: int, j: int) -> str:
    """SI unit of entry `(i, j)` of a bushing's `field` (`"stiffness"` or `"damping"`): it maps
    the deflection component `j` (m or rad) to the load component `i` (N or N m)."""
    load = "N" if i < 3 else "N m"
    per = "m" if j < 3 else "rad"
    unit = f"{load}/{per}" if field == "stiffness" else f"{load} s/{per}"
    return unit.replace("N m/m", "N").replace("N m s/m", "N s")


def pack_symmetric(matrix) -> Float[Array, "21"]:
    """The 21 upper-triangle entries (row-major) of a symmetric 6x6 matrix (a host value
    packed with numpy: no compiled program, spineid/_arrays.py)."""
    if traced(matrix):
        return jnp.asarray(matrix, dtype=float)[UPPER]
    return floats(np.asarray(matrix, dtype=float)[UPPER])


def unpack_symmetric(packed: Float[Array, "21"]) -> Float[Array, "6 6"]:
    """The symmetric 6x6 matrix of 21 packed upper-triangle entries (`pack_symmetric`)."""
    upper = jnp.zeros((6, 6), dtype=packed.dtype).at[UPPER].set(packed)
    return upper + upper.T - jnp.diag(jnp.diag(upper))


def bushing_force(stiffness: Float[ArrayLike, "6 6"], damping: Float[ArrayLike, "6 6"],
                  deflection: Float[ArrayLike, "6"], rate: Float[ArrayLike, "6"],
                  reference: Float[ArrayLike, "6"] | None = None) -> Float[Array, "6"]:
    """The generalized force on body 2: `f = -K (y - y_0) - D y'` (eqs 18, 22), with
    `y_0 = reference` (zero for the classic bushing). Stiffness in N/m, N m/rad and the coupling
    units between (N/rad, N m/m), ordered `[translations, rotations]` like `y` (eq 24)."""
    y = jnp.asarray(deflection, dtype=float)
    if reference is not None:
        y = y - jnp.asarray(reference, dtype=float)
    return -jnp.asarray(stiffness) @ y - jnp.asarray(damping) @ jnp.asarray(rate)


# A bushing's relative motion at the reference poses, as one compiled program (run eagerly,
# each operation would be a program of its own: spineid/_arrays.py).
_reference_deflection = eqx.filter_jit(
    lambda bushing, lower_pose, upper_pose: bushing.deflection(lower_pose, upper_pose))


def _frame_arrays(frame):
    return tuple(floats(a) for a in frame)


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

    collection: ClassVar[str] = "bushings"

    kind: str = eqx.field(static=True)
    frame1: tuple[Float[Array, "3"], Float[Array, "3"]]
    frame2: tuple[Float[Array, "3"], Float[Array, "3"]]
    stiffness: Float[Array, "21"]
    damping: Float[Array, "21"]
    reference: Float[Array, "6"]

    def parameter_fields(self):
        """The 21 packed entries of `stiffness` and of `damping` (groups `bushing.stiffness`,
        `bushing.damping`; units by entry; diagonal entries >= 0, couplings unbounded), named
        by row and column (`bushings[0].stiffness[1][4]`)."""
        rows, columns = UPPER
        return tuple(
            ParameterField(field, f"bushing.{field}",
                           tuple(bushing_unit(field, i, j) for i, j in zip(rows, columns)),
                           tuple(0.0 if i == j else -math.inf for i, j in zip(rows, columns)),
                           rows="matrix")
            for field in ("stiffness", "damping"))

    @classmethod
    def create(cls, kind, frame1, frame2, stiffness, damping, lower_pose, upper_pose):
        """A bushing of `kind` `"classic"` or `"spine"` with full 6x6 `stiffness` and `damping`
        (symmetric); for `"spine"` the reference deflection is taken at the bodies' reference
        poses `lower_pose`, `upper_pose`."""
        if kind not in ("classic", "spine"):
            raise ValueError(f"bushing kind {kind!r}: expected 'classic' or 'spine'")
        bushing = cls(kind, _frame_arrays(frame1), _frame_arrays(frame2),
                      pack_symmetric(stiffness), pack_symmetric(damping), floats(np.zeros(6)))
        if kind == "spine":
            bushing = eqx.tree_at(lambda b: b.reference, bushing, _reference_deflection(
                bushing, floats(lower_pose), floats(upper_pose)))
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
    own load law `M_k` (`spineid.elements`: stiffness phases, tabulated curves, tan/cos or
    polynomial laws), uncoupled; energy `sum_k E_k(y_k - y_0k)`, dissipation
    `1/2 sum_k d_k y'_k^2`.

    Fields: `frame1`, `frame2` (as in `Bushing`), `laws` (6 `AbstractLoadLaw`, N or N m),
    `damping` (`(6,)`, N s/m and N m s/rad), `reference` (`y_0`, `(6,)`).
    """

    collection: ClassVar[str] = "bushings"

    frame1: tuple[Float[Array, "3"], Float[Array, "3"]]
    frame2: tuple[Float[Array, "3"], Float[Array, "3"]]
    laws: tuple[AbstractLoadLaw, ...]
    damping: Float[Array, "6"]
    reference: Float[Array, "6"]

    def parameter_fields(self):
        """Each degree of freedom's law (group `bushing.laws`; m to N for `tx, ty, tz`, rad to
        N m for `rx, ry, rz`) and the 6 `damping` values (group `bushing.damping`, >= 0)."""
        laws = tuple(field for k, law in enumerate(self.laws)
                     for field in law.parameter_fields("m" if k < 3 else "rad",
                                                       "N" if k < 3 else "N m",
                                                       "bushing.laws", f"laws.{k}."))
        damping = ParameterField("damping", "bushing.damping",
                                 tuple(bushing_unit("damping", k, k) for k in range(6)))
        return (*laws, damping)

    @classmethod
    def create(cls, frame1, frame2, laws, damping, lower_pose, upper_pose):
        """A table bushing whose reference `y_0` is the relative motion at the reference
        poses `lower_pose`, `upper_pose` (`(6,)` each); `laws`: 6 load laws."""
        laws = tuple(laws)
        if len(laws) != 6 or not all(isinstance(law, AbstractLoadLaw) for law in laws):
            raise ValueError(f"table bushing: expected 6 load laws (tx, ty, tz, rx, ry, rz), "
                             f"got {len(laws)}")
        damping = floats(damping)
        if damping.shape != (6,):
            raise ValueError(f"table bushing: damping must have 6 entries, got {damping.shape}")
        bushing = cls(_frame_arrays(frame1), _frame_arrays(frame2), laws, damping,
                      floats(np.zeros(6)))
        reference = _reference_deflection(bushing, floats(lower_pose), floats(upper_pose))
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
