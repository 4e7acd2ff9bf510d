"""The linearised free motion of a model: natural frequencies and damping ratios of its modes."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._arrays import floats
from .._programs import stored_call
from ..models._mechanics import AbstractLagrangianSystem, lagrangian_vector_field


@dataclasses.dataclass(frozen=True)
class LinearModes:
    """The oscillating modes of a model linearised about a state (numpy arrays, one entry per
    complex-conjugate pair of eigenvalues `lambda = -zeta omega +- i omega sqrt(1 - zeta^2)`).

    Fields: `omega` (undamped natural frequencies, rad/s, ascending), `zeta` (damping ratios,
    dimensionless; 1 and above do not oscillate and are left out).
    """

    omega: np.ndarray
    zeta: np.ndarray

    def ringing_phase(self, duration: float) -> float:
        """The most phase (rad) any mode runs through while it lasts within a record of
        `duration` (s): `max_j min(omega_j * duration, 1 / zeta_j)`, the free oscillation
        lasting about `1 / (zeta omega)` s (its amplitude falls by `e`). A relative error
        `epsilon` of a natural frequency shifts the simulated motion by about `epsilon` times
        this phase (`epsilon / 2` times it for a relative error `epsilon` of the stiffness,
        `omega ~ sqrt(k)`): beyond a few radians the simulated and measured oscillations slip
        whole cycles against each other, and a least-squares cost through the simulation
        (single shooting) has a valley for every slip. 0 for a model without oscillating
        modes."""
        if self.omega.size == 0:
            return 0.0
        lasting = np.where(self.zeta > 0, 1.0 / np.maximum(self.zeta, 1e-300), np.inf)
        return float(np.max(np.minimum(self.omega * duration, lasting)))


@eqx.filter_jit
def _state_jacobian(system, t, state):
    # d(q, qdot)/dt differentiated with respect to (q, qdot): ((2n, 2n),), the tuple of a
    # stored program (`spineid/_programs.py`); `state` None: the system's initial state.
    q, qdot = system.initial_state() if state is None else state
    n = q.size

    def rate(y):
        dq, dqdot = lagrangian_vector_field(t, (y[:n], y[n:]), system)
        return jnp.concatenate([dq, dqdot])

    return (jax.jacfwd(rate)(jnp.concatenate([q, qdot])),)


def linear_modes(system: AbstractLagrangianSystem, t: float = 0.0,
                 state: tuple | None = None) -> LinearModes:
    """The modes of `system` linearised about `state = (q, qdot)` (`(n_dof,)` each; default its
    `initial_state()`) at time `t` (s): the eigenvalues of the Jacobian of the first-order
    equations of motion `d(q, qdot)/dt` (Lagrange's equations, Liu 2001 eq 2-9; loads,
    stiffness and damping as the model has them at `t`) by forward-mode differentiation.
    Complex pairs give the natural frequency `omega = |lambda|` (rad/s) and damping ratio
    `zeta = -Re(lambda) / |lambda|`. Outside `jit` (the eigenvalues are numpy's)."""
    jacobian = np.asarray(stored_call(_state_jacobian, system, floats(t), state)[0])
    if not np.all(np.isfinite(jacobian)):
        return LinearModes(np.zeros(0), np.zeros(0))
    eigenvalues = np.linalg.eigvals(jacobian)
    scale = max(float(np.max(np.abs(eigenvalues))), 1e-300)
    pairs = eigenvalues[eigenvalues.imag > 1e-9 * scale]  # one of each conjugate pair
    omega = np.abs(pairs)
    order = np.argsort(omega)
    return LinearModes(omega[order], (-pairs.real / omega)[order])
