"""The pinned pair in maximal coordinates: the upper body's free pose held by a pin constraint,
a semi-explicit DAE of index 1 for `spineid.MEBDF`, the seed paper's integrator (a mass matrix
never inverted in its steps, the constraint force an unknown of the equations).

The state is `y = (q, v, lambda)` `(8,)`: the upper body's pose `q = (x, y, theta)` (m, m,
rad; centre of mass and frame angle in the global frame), its velocity `v = q'`, and the pin's
force on it `lambda` (N, global x and y). The pin constraint `c(q) = (x, y) - X(theta) = 0`
(`PinnedPair.centre_of_mass`: the centre of mass on its circle about the pin) with `G =
dc/dq` `(2, 3)` gives Lagrange's equations of the first kind,

    q' = v,    M v' = F(t, q, v) + G^T lambda,    0 = G M^-1 (F + G^T lambda) + (dG/dt) v,

with `M = diag(m, m, J)`, `F = -dV/dq - dD/dv + load` (the joint elements' energy `V(q)`
with gravity, their dissipation `D(q, v)`, the applied `[Fx, Fy, Mz]` at the centre of mass),
and the constraint differentiated twice (`c'' = 0`) so that `lambda` is an algebraic variable
of an index-1 DAE (Hairer and Wanner, Solving ODEs II, 1996, section VII.1, the constrained
mechanical system `M u' = f - G^T lambda`: their multiplier is minus this one). `G^T lambda` is the
force `lambda` at the pin with its moment about the centre of mass: `lambda` is the joint's
reaction, which the one-coordinate `PinnedPair` never computes. The algebraic equation divides
by the diagonal `M` (the body's mass and inertia); the differential ones keep `M` as the mass
matrix. As for every index reduction, `c` itself drifts at the integration's tolerance.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..models._pinned_pair import PinnedPair
from ._mebdf import ImplicitTerm


def _constraint(model: PinnedPair, q):
    # c(q) `(2,)` (m): the centre of mass's displacement from its place on the pin's circle.
    return q[:2] - model.centre_of_mass(q[2])


def _forces(model: PinnedPair, t, q, v):
    # F(t, q, v) `(3,)` (N, N, N m) on the free upper body: springs, dampers, gravity, loads.
    # (The dampers see the body's whole velocity; `PinnedPair` hands them the rotation only,
    # the same for the torsion elements its files hold, which act on the relative angle.)
    lower = model.lower.reference_pose
    zero = jnp.zeros(3, dtype=q.dtype)

    def potential(q):
        elastic = sum((spring.energy(lower, q) for spring in model.elements),
                      jnp.zeros((), q.dtype))
        return elastic - model.upper.mass * jnp.dot(model.gravity, q[:2])

    def dissipation(v):
        return sum((spring.dissipation(lower, q, zero, v) for spring in model.elements),
                   jnp.zeros((), q.dtype))

    return -jax.grad(potential)(q) - jax.grad(dissipation)(v) + model.applied_load(t)


def _body_mass(model: PinnedPair, dtype):
    # diag(M) `(3,)`: mass, mass, inertia about the centre of mass (kg, kg, kg m^2).
    return jnp.array([model.upper.mass, model.upper.mass, model.upper.inertia], dtype)


def _algebraic(model, t, q, v, force_lambda):
    # c'' = G M^-1 (F + G^T lambda) + (dG/dt) v `(2,)` (m/s^2), F + G^T lambda, and G `(2, 3)`
    # (G and its rate dG/dt = dG[v] from one forward-mode pass).
    jacobian, rate = jax.jvp(jax.jacfwd(lambda p: _constraint(model, p)), (q,), (v,))
    total = _forces(model, t, q, v) + jacobian.T @ force_lambda
    return jacobian @ (total / _body_mass(model, q.dtype)) + rate @ v, total, jacobian


def _mass(t, y, model):
    body = _body_mass(model, y.dtype)
    return jnp.diag(jnp.concatenate([jnp.ones(3, y.dtype), body, jnp.zeros(2, y.dtype)]))


def _field(t, y, model):
    q, v, force_lambda = y[:3], y[3:6], y[6:]
    acceleration, total, _ = _algebraic(model, t, q, v, force_lambda)
    return jnp.concatenate([v, total, acceleration])


def pinned_pair_maximal_term() -> ImplicitTerm:
    """The `PinnedPair`'s equations of motion in maximal coordinates (module docstring): the
    `ImplicitTerm` `blockdiag(I_3, M, 0_2) y' = (v, F + G^T lambda, c'')` of the state `y = (x,
    y, theta, x', y', theta', lambda_x, lambda_y)` `(8,)` (m, rad, m/s, rad/s, N; global
    frame), an index-1 DAE (Lagrange's equations of the first kind, the pin constraint
    differentiated twice: module docstring; Hairer and Wanner II, section VII.1, with the
    multiplier's sign reversed). Only `spineid.MEBDF` integrates it (to other solvers an
    `ImplicitTerm` is `M^-1 f`, NaN for this singular `M`). The model is the solve's `args`:
    `diffrax.diffeqsolve(spineid.pinned_pair_maximal_term(), spineid.MEBDF(), t0, t1, dt0,
    spineid.pinned_pair_maximal_start(model), args=model, ...)`; `theta` follows the
    one-coordinate model's, `lambda` is the pin's force on the upper body."""
    return ImplicitTerm(_mass, _field)


@eqx.filter_jit
def pinned_pair_maximal_start(model: PinnedPair, t0: float = 0.0) -> Float[Array, "8"]:
    """Consistent initial values `(8,)` of `pinned_pair_maximal_term` at `t0` (s): the pose at
    the model's `initial_angle` on the pin's circle, at rest (as `model.initial_state()`), and
    the pin force that keeps the centre of mass on the circle, from `c'' = 0` (module
    docstring) solved for `lambda`: `lambda = -(G M^-1 G^T)^-1 (G M^-1 F + (dG/dt) v)` (N).
    Jit-compiled (one program per model structure)."""
    theta = jnp.asarray(model.initial_angle)
    q = jnp.concatenate([model.centre_of_mass(theta), theta[None]])
    v = jnp.zeros(3, q.dtype)
    free, _, jacobian = _algebraic(model, t0, q, v, jnp.zeros(2, q.dtype))
    response = jacobian @ (jacobian.T / _body_mass(model, q.dtype)[:, None])
    return jnp.concatenate([q, v, -jnp.linalg.solve(response, free)])
