"""Equations of motion from energies: the mechanics core every spineid model stands on.

A model supplies its kinetic energy `T(t, q, qdot)`, potential energy `U(t, q)`, Rayleigh
dissipation function `R(t, q, qdot)` and external generalized forces `Q(t, q, qdot)`; the
generalized accelerations follow from Lagrange's equations by automatic differentiation,

    M(t, q) qddot = Q - dU/dq - dR/dqdot + dT/dq - (d2T/dqdot dq) qdot - d2T/dqdot dt,

with `M = d2T/dqdot2` (Liu 2001, eq 2-9, extended by the dissipation and the explicit time
dependence of a rheonomic model such as a chain on a moving base).
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._reported_checks import checks_reported_as_nan, reporting_checks


class AbstractLagrangianSystem(eqx.Module):
    """A mechanical system described by its energies, generalized forces and start state.

    Subclasses are final equinox Modules (pytrees): their array fields are the parameters, so a
    system can be passed through `jax.jit`, `jax.vmap` and `jax.grad` like any array.
    Shapes: `q` and `qdot` have shape `(n_dof,)`; `t` is a scalar (s).
    """

    @abc.abstractmethod
    def kinetic_energy(self, t, q, qdot) -> Float[Array, ""]:
        """Kinetic energy `T(t, q, qdot)` (J)."""

    @abc.abstractmethod
    def potential_energy(self, t, q) -> Float[Array, ""]:
        """Potential energy `U(t, q)` of springs and gravity (J)."""

    @abc.abstractmethod
    def dissipation_function(self, t, q, qdot) -> Float[Array, ""]:
        """Rayleigh dissipation function `R(t, q, qdot)` (W); damping forces are `-dR/dqdot`."""

    @abc.abstractmethod
    def generalized_forces(self, t, q, qdot) -> Float[Array, " n"]:
        """External generalized forces `Q(t, q, qdot)` conjugate to `q` (N or N m)."""

    @abc.abstractmethod
    def initial_state(self) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
        """Start state `(q0, qdot0)` of a simulation."""

    def observe(self, q) -> Float[Array, " c"]:
        """What is measured of the motion at coordinates `q` `(n_dof,)`: the channels of a
        trajectory file, in SI units, shape `(len(observable_names),)`. Fits compare these
        with data; `spineid simulate` writes them. Default: the coordinates themselves."""
        return q

    @property
    def observable_names(self) -> tuple[str, ...]:
        """Names of the channels `observe` returns: the columns of a trajectory file after
        `t` (docs/formats/data-files.md). Default: `q0, q1, ...` for the coordinates."""
        return tuple(f"q{i}" for i in range(self.initial_state()[0].shape[0]))

    @property
    def observable_units(self) -> tuple[str, ...]:
        """SI unit of each channel of `observe` (`"m"`, `"rad"`, ...); `""` where unknown
        (the default). Fits use them for plausible noise levels, plots for display."""
        return ("",) * len(self.observable_names)

    def storage_columns(self, q, qdot) -> dict:
        """The columns of an OpenSim storage file (`.sto`) of a motion: label -> values `(k,)`
        for coordinates `q` and velocities `qdot` `(k, n_dof)`. Default: the channels of
        `observe` by their `observable_names`; a model read from OpenSim gives its states'
        own labels (`/jointset/J/C/value`, `/jointset/J/C/speed`)."""
        values = jax.vmap(self.observe)(q)
        return {name: values[:, i] for i, name in enumerate(self.observable_names)}

    def parameter_fields(self) -> tuple:
        """Fields of the model itself (not of its elements) that hold parameters
        (`spineid.ParameterField`s); none by default."""
        return ()

    def is_excited(self) -> bool:
        """Whether anything drives the motion away from its start: a load that is not zero,
        gravity, or a start away from rest in the reference configuration. A fit refuses a
        model that is not excited (its data could determine nothing). Default `True`, for
        models driven otherwise (the head-neck chain by its base pulse)."""
        return True

    def export_formats(self) -> tuple[str, ...]:
        """Names of the file formats of other programs this model can be written to (e.g.
        `("opensim",)`; `spineid.export_model` writes them). Default: none."""
        return ()

    def preferred_solver(self):
        """The diffrax solver `simulate` uses for this model unless told otherwise; `None`
        (the default) means spineid's `default_solver()`. Stiff models return an implicit one."""
        return None

    def jump_times(self):
        """Times (s) at which the equations of motion are not smooth (kinks of a prescribed
        input), given to the step-size controller so steps end there; `None` for none."""
        return None

    def accelerations(self, t, q, qdot) -> Float[Array, " n"]:
        """Generalized accelerations `qddot` `(n_dof,)` at `(t, q, qdot)`: Lagrange's equations
        by automatic differentiation (`generalized_accelerations`). A model may override this
        with an equivalent, cheaper form of the same equations; simulations call this."""
        return generalized_accelerations(self, t, q, qdot)

    def equations_of_motion(self, t, q, qdot) -> tuple[Float[Array, "n n"], Float[Array, " n"]]:
        """Lagrange's equations in their implicit form `M(t, q) qddot = f(t, q, qdot)`: the mass
        matrix `M` `(n_dof, n_dof)` (kg, kg m, kg m^2 by coordinate) and `f` `(n_dof,)` (N,
        N m), never solved here (Liu 2001 eq 2-9; `lagrange_equations`). A model may override
        this with an equivalent form, as its `accelerations`; `spineid.MEBDF` integrates it
        without inverting `M` (`spineid.lagrangian_implicit_term`)."""
        return lagrange_equations(self, t, q, qdot)


def mass_matrix(system: AbstractLagrangianSystem, t, q, qdot) -> Float[Array, "n n"]:
    """Generalized mass matrix `M = d2T/dqdot2` at `(t, q, qdot)`, shape `(n_dof, n_dof)`."""
    t = jnp.asarray(t, dtype=q.dtype)
    return jax.hessian(system.kinetic_energy, argnums=2)(t, q, qdot)


def active_forces(system: AbstractLagrangianSystem, t, q: Float[Array, " n"],
                  qdot: Float[Array, " n"]) -> Float[Array, " n"]:
    """Every generalized force but the inertial ones, `Q - dU/dq - dR/dqdot` (N or N m,
    `(n_dof,)`): external loads, elastic forces and damping at `(t, q, qdot)`."""
    t = jnp.asarray(t, dtype=q.dtype)
    return (system.generalized_forces(t, q, qdot)
            - jax.grad(system.potential_energy, argnums=1)(t, q)
            - jax.grad(system.dissipation_function, argnums=2)(t, q, qdot))


def generalized_accelerations(
    system: AbstractLagrangianSystem, t, q: Float[Array, " n"], qdot: Float[Array, " n"]
) -> Float[Array, " n"]:
    """Solve Lagrange's equations (module docstring; Liu 2001 eq 2-9) for `qddot`.

    **Arguments:** a system, time `t` (s), coordinates `q` and velocities `qdot`, shape `(n_dof,)`.

    **Returns:** `qddot`, shape `(n_dof,)`.
    """
    return solve_mass_matrix(*lagrange_equations(system, t, q, qdot))


def lagrange_equations(
    system: AbstractLagrangianSystem, t, q: Float[Array, " n"], qdot: Float[Array, " n"]
) -> tuple[Float[Array, "n n"], Float[Array, " n"]]:
    """Lagrange's equations (module docstring; Liu 2001 eq 2-9) as `M qddot = f`: the mass
    matrix `M = d2T/dqdot2` `(n_dof, n_dof)` and `f = Q - dU/dq - dR/dqdot + dT/dq - (dp/dq)
    qdot - dp/dt` `(n_dof,)` (`p = dT/dqdot`), from the system's energies at time `t` (s),
    coordinates `q` and velocities `qdot` `(n_dof,)`."""
    t = jnp.asarray(t, dtype=q.dtype)
    momentum = jax.grad(system.kinetic_energy, argnums=2)

    mass = jax.jacfwd(momentum, argnums=2)(t, q, qdot)
    # One jvp gives (dp/dq) qdot + dp/dt, the convective and rheonomic parts of d/dt dT/dqdot.
    _, momentum_rate = jax.jvp(
        lambda tau, x: momentum(tau, x, qdot), (t, q), (jnp.ones_like(t), qdot)
    )
    rhs = (active_forces(system, t, q, qdot)
           + jax.grad(system.kinetic_energy, argnums=1)(t, q, qdot)
           - momentum_rate)
    return mass, rhs


_UNROLLED_SOLVE_MAX_DOF = 6


def solve_mass_matrix(mass: Float[Array, "n n"], rhs: Float[Array, " n"]) -> Float[Array, " n"]:
    """`M^-1 rhs` for a symmetric positive definite `M` `(n, n)` and `rhs` `(n,)`."""
    # The mass matrix is symmetric positive definite. For a few DOF an unrolled Cholesky solve
    # in plain array ops is ten times faster on CPU than a LAPACK call (0.09 us against 0.9 us
    # for 3x3, measured), which is most of the cost of a right-hand side; above 6 DOF the two
    # cost the same and LAPACK is kept for its pivoting.
    n = rhs.shape[0]
    if n > _UNROLLED_SOLVE_MAX_DOF:
        return jnp.linalg.solve(mass, rhs)
    factor = [[None] * n for _ in range(n)]
    for j in range(n):
        factor[j][j] = jnp.sqrt(mass[j, j] - sum(factor[j][k] ** 2 for k in range(j)))
        for i in range(j + 1, n):
            partial = sum(factor[i][k] * factor[j][k] for k in range(j))
            factor[i][j] = (mass[i, j] - partial) / factor[j][j]
    forward = []
    for i in range(n):
        partial = sum(factor[i][k] * forward[k] for k in range(i))
        forward.append((rhs[i] - partial) / factor[i][i])
    solution = [None] * n
    for i in reversed(range(n)):
        partial = sum(factor[k][i] * solution[k] for k in range(i + 1, n))
        solution[i] = (forward[i] - partial) / factor[i][i]
    return jnp.stack(solution)


def lagrangian_vector_field(t, y: PyTree, system: AbstractLagrangianSystem) -> PyTree:
    """First-order form `d/dt (q, qdot) = (qdot, qddot)` with the diffrax signature `(t, y, args)`.

    `y` is the tuple `(q, qdot)`; `args` is the system.
    """
    q, qdot = y
    return qdot, _accelerations(system, jnp.asarray(t), q, qdot, reporting_checks())


def reported_vector_field(t, y: PyTree, system: AbstractLagrangianSystem) -> PyTree:
    """`lagrangian_vector_field` for the solves that do not throw (`simulate(...,
    throw=False)`, every fit's): equinox's checks inside the accelerations give NaN states
    instead of raising whenever they are traced, also where a derivative traces them again
    after the solve's own trace (a Jacobian-vector product through an implicit stage, a
    checkpointed adjoint)."""
    q, qdot = y
    return qdot, _accelerations(system, jnp.asarray(t), q, qdot, True)


# The energies' derivatives as jitted calls: a solver traces its vector field or residual many
# times (each stage, its Newton Jacobian, the step-size controller's first step), and each
# trace of those derivatives is large; under `jit` the first trace is cached and the others
# are one call of it (XLA inlines the call, so the compiled program is the same). Measured:
# tracing and lowering the head-neck chain's Kvaerno4 solve 29 s -> 17 s; four of the suite's
# slowest tests (a head-neck fit, its MEBDF solve, a segment fit, spine levels) 170 s -> 156 s
# from an empty compilation cache, where XLA's compilation is most of what remains. The last
# argument, static, is whether equinox's checks inside are traced to raise or to give NaN
# (`spineid._reported_checks`), and the body is traced in that mode: a trace of one mode is
# never reused in the other.
@eqx.filter_jit
def _accelerations(system, t, q, qdot, reporting: bool):
    with checks_reported_as_nan(reporting):
        return system.accelerations(t, q, qdot)


@eqx.filter_jit
def _equations_of_motion(system, t, q, qdot, reporting: bool):
    with checks_reported_as_nan(reporting):
        return system.equations_of_motion(t, q, qdot)


@eqx.filter_jit
def _potential_gradient(system, q, reporting: bool):
    with checks_reported_as_nan(reporting):
        return jax.grad(system.potential_energy, argnums=1)(jnp.zeros((), q.dtype), q)


def equations_of_motion(system, t, q: Float[Array, " n"], qdot: Float[Array, " n"]):
    """`system.equations_of_motion(t, q, qdot)` (`(M, f)`: the mass matrix `(n, n)` and the
    forces `(n,)` of `M qddot = f`, Liu 2001 eq 2-9), jitted: traced once per system structure
    however often a solver calls it."""
    return _equations_of_motion(system, jnp.asarray(t), q, qdot, reporting_checks())


def potential_gradient(system, q: Float[Array, " n"]) -> Float[Array, " n"]:
    """`dU/dq` `(n_dof,)` (N, N m) of `system`'s potential energy at `t = 0` and coordinates
    `q` `(n_dof,)`: the elastic forces an equilibrium balances, jitted as
    `equations_of_motion`."""
    return _potential_gradient(system, q, reporting_checks())


def mechanical_energy(system: AbstractLagrangianSystem, t, q, qdot) -> Float[Array, ""]:
    """Total mechanical energy `T + U` (J) at one state."""
    t = jnp.asarray(t, dtype=q.dtype)
    return system.kinetic_energy(t, q, qdot) + system.potential_energy(t, q)


def inverse_dynamics(system: AbstractLagrangianSystem, t, q: Float[Array, " n"],
                     qdot: Float[Array, " n"], qddot: Float[Array, " n"]) -> Float[Array, " n"]:
    """Generalized forces that must act, besides the system's own elements and loads, for the
    motion to have accelerations `qddot` at `(t, q, qdot)` (inverse dynamics):

        Q_needed = d/dt dT/dqdot - dT/dq + dU/dq + dR/dqdot - Q,

    the left side of the module's Lagrange equations minus the system's forces; zero along a
    motion the system performs by itself. Shapes `(n_dof,)`, units those of `q` (N, N m).
    """
    t = jnp.asarray(t, dtype=q.dtype)
    momentum = jax.grad(system.kinetic_energy, argnums=2)
    _, momentum_rate = jax.jvp(momentum, (t, q, qdot), (jnp.ones_like(t), qdot, qddot))
    return (momentum_rate
            - jax.grad(system.kinetic_energy, argnums=1)(t, q, qdot)
            - active_forces(system, t, q, qdot))
