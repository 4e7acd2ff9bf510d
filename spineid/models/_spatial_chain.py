"""A chain of vertebrae in 3-D on a fixed base, each level joined by a bushing (Christophy et
al. 2013, section 5: L1-L5 on a fixed sacrum), with the loads of each bushing at the centres of
mass, and the lumbar Models 1-4 of their Table 1.
"""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..elements._base import AbstractBushing, unlabelled
from ..elements._bushings import Bushing
from ..kinematics._rotations import E_W, e_W, euler123_angles, skew
from ._loads import AbstractLoad
from ._mechanics import AbstractLagrangianSystem
from ._spatial_pair import SpatialBody


class ChainLink(eqx.Module):
    """A bushing joining any two bodies of a `SpatialChain` besides its joints: a segment of an
    implant rod between the screws of two vertebrae, or a tissue spanning levels.

    Fields: `lower` and `upper` (static: indices into the chain's `body_names`, 0 for the base,
    `k + 1` for free body `k`; `lower < upper`), `element` (an `AbstractBushing` whose frame 1
    is on body `lower`, frame 2 on body `upper`), `name` (static, for reports).
    """

    lower: int = eqx.field(static=True)
    upper: int = eqx.field(static=True)
    element: AbstractBushing
    name: str = eqx.field(static=True, default="")


def _stacked(elements):
    # The elements as one batched element when they share a layout (one traced energy,
    # vmapped: a far smaller program for long chains), else None. (Their names in parameter
    # names, static labels, are not part of the layout.)
    elements = [unlabelled(element) for element in elements]
    first = jax.tree.structure(elements[0])
    shapes = [jnp.shape(leaf) for leaf in jax.tree.leaves(elements[0])]
    for element in elements[1:]:
        if (jax.tree.structure(element) != first
                or [jnp.shape(leaf) for leaf in jax.tree.leaves(element)] != shapes):
            return None
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *elements)


class SpatialChain(AbstractLagrangianSystem):
    """Free vertebrae stacked on a fixed base pose, bushing `k` joining body `k - 1` (the base
    for `k = 0`) to body `k`.

    Generalized coordinates: the poses of the `n` bodies concatenated, `q = [pose_0, ...,
    pose_(n-1)]`, each `[x, y, z, a1, a2, a3]` (centre of mass in m, 1-2-3 Euler angles in rad).
    Energies as in `SpatialPair`, summed over bodies and bushings. External `loads` have `6 n`
    components, `[Fx, Fy, Fz, Mx, My, Mz]` of each body in turn (ground axes, the force at the
    body's centre of mass; `load_components`), whose generalized forces are `F` and
    `EW(a)^T M` (supplement S.18), as for `SpatialPair`.

    Fields: `base_pose` (`(6,)`), `bodies` (tuple of `SpatialBody`), `elements` (tuple of
    `Bushing` or `TableBushing`, one per body), `loads`, `gravity` (m/s^2, `(3,)`), `names`
    (static: the base's name, then each body's, e.g. `("S1", "L5", ..., "T1")`; default
    `base, 0, 1, ...`).
    """

    base_pose: Float[Array, "6"]
    bodies: tuple[SpatialBody, ...]
    elements: tuple[AbstractBushing, ...]
    loads: tuple[AbstractLoad, ...]
    gravity: Float[Array, "3"]
    names: tuple[str, ...] = eqx.field(static=True, default=())
    collection_names: ClassVar[dict[str, str]] = {"bushings": "joints"}
    links: tuple[ChainLink, ...] = ()

    def __check_init__(self):
        for link in self.links:
            if not 0 <= link.lower < link.upper <= len(self.bodies):
                raise ValueError(f"SpatialChain: link {link.name or ''} joins bodies "
                                 f"{link.lower} and {link.upper}; expected 0 <= lower < upper <= "
                                 f"{len(self.bodies)} (indices of body_names, 0 the base)")
        if len(self.elements) != len(self.bodies):
            raise ValueError(f"SpatialChain: {len(self.bodies)} bodies need as many joints, "
                             f"got {len(self.elements)}")
        if self.names and len(self.names) != len(self.bodies) + 1:
            raise ValueError(f"SpatialChain: names must name the base and the {len(self.bodies)}"
                             f" bodies ({len(self.bodies) + 1} names), got {len(self.names)}")

    @property
    def body_names(self) -> tuple[str, ...]:
        """The base's name, then each body's, bottom up (`names`, or `base, 0, 1, ...`)."""
        return self.names or ("base",) + tuple(str(k) for k in range(len(self.bodies)))

    def body_index(self, name: str, key: str = "body") -> int:
        """Index `k` (0 for the first free body) of the free body called `name`; the base or an
        unknown name raises `ValueError` naming `key`."""
        names = self.body_names
        if name == names[0]:
            raise ValueError(f"{key} = {name!r} is the chain's fixed base; expected one of the "
                             f"free bodies {list(names[1:])}")
        if name not in names[1:]:
            raise ValueError(f"{key} = {name!r}: no such body; expected one of {list(names[1:])}")
        return names.index(name) - 1

    @property
    def load_components(self) -> tuple[str, ...]:
        """Names of the `6 n` load components: `Fx_<body>, ..., Mz_<body>` body by body."""
        return tuple(f"{c}_{name}" for name in self.body_names[1:]
                     for c in ("Fx", "Fy", "Fz", "Mx", "My", "Mz"))

    @property
    def n_dof(self) -> int:
        """Number of generalized coordinates, `6 n`."""
        return 6 * len(self.bodies)

    def poses(self, q) -> list:
        """`[base pose, pose_0, ..., pose_(n-1)]`."""
        return [self.base_pose] + [q[6 * k:6 * k + 6] for k in range(len(self.bodies))]

    def kinetic_energy(self, t, q, qdot):
        total = jnp.zeros((), dtype=q.dtype)
        for k, body in enumerate(self.bodies):
            pose, rate = q[6 * k:6 * k + 6], qdot[6 * k:6 * k + 6]
            spin = e_W(pose[3:]) @ rate[3:]
            total = total + 0.5 * body.mass * rate[:3] @ rate[:3] + 0.5 * spin @ body.inertia @ spin
        return total

    def _stacked_elements(self):
        # The joints as one batched element when they share a layout, else None.
        return _stacked(self.elements)

    def _link_sum(self, poses, rates, function):
        # Sum of `function(element, lower pose, upper pose, lower rate, upper rate)` over the
        # links, vmapped when they share a layout.
        if not self.links:
            return 0.0
        lower = jnp.stack([poses[link.lower] for link in self.links])
        upper = jnp.stack([poses[link.upper] for link in self.links])
        lower_rate = jnp.stack([rates[link.lower] for link in self.links])
        upper_rate = jnp.stack([rates[link.upper] for link in self.links])
        stacked = _stacked([link.element for link in self.links])
        if stacked is not None:
            return jnp.sum(jax.vmap(function)(stacked, lower, upper, lower_rate, upper_rate))
        return sum(function(link.element, lower[i], upper[i], lower_rate[i], upper_rate[i])
                   for i, link in enumerate(self.links))

    def _pose_pairs(self, q):
        poses = jnp.concatenate([self.base_pose[None], q.reshape(-1, 6)])
        return poses[:-1], poses[1:]

    def potential_energy(self, t, q):
        poses = self.poses(q)
        stacked = self._stacked_elements() if len(self.elements) > 1 else None
        if stacked is not None:
            lower, upper = self._pose_pairs(q)
            elastic = jnp.sum(jax.vmap(lambda e, a, b: e.energy(a, b))(stacked, lower, upper))
        else:
            elastic = sum(element.energy(poses[k], poses[k + 1])
                          for k, element in enumerate(self.elements))
        gravity = sum(-body.mass * self.gravity @ poses[k + 1][:3]
                      for k, body in enumerate(self.bodies))
        links = self._link_sum(poses, poses, lambda e, a, b, u, v: e.energy(a, b))
        return elastic + gravity + links

    def _rates(self, qdot) -> list:
        # Pose rates `[base (zero), body_0, ...]`, matching `poses`.
        return [jnp.zeros(6, dtype=qdot.dtype)] + [qdot[6 * k:6 * k + 6]
                                                   for k in range(len(self.bodies))]

    def dissipation_function(self, t, q, qdot):
        stacked = self._stacked_elements() if len(self.elements) > 1 else None
        if stacked is not None:
            lower, upper = self._pose_pairs(q)
            rates = jnp.concatenate([jnp.zeros((1, 6), qdot.dtype), qdot.reshape(-1, 6)])
            joints = jnp.sum(jax.vmap(lambda e, a, b, u, v: e.dissipation(a, b, u, v))(
                stacked, lower, upper, rates[:-1], rates[1:]))
        else:
            poses, rates = self.poses(q), self._rates(qdot)
            joints = sum(element.dissipation(poses[k], poses[k + 1], rates[k], rates[k + 1])
                         for k, element in enumerate(self.elements))
        links = self._link_sum(self.poses(q), self._rates(qdot),
                               lambda e, a, b, u, v: e.dissipation(a, b, u, v))
        return joints + links + jnp.zeros((), dtype=q.dtype)

    def generalized_forces(self, t, q, qdot):
        load = sum((load.value(t) for load in self.loads), jnp.zeros(self.n_dof, dtype=q.dtype))
        return chain_generalized_loads(q, load)

    def initial_state(self):
        q0 = jnp.concatenate([body.reference_pose for body in self.bodies])
        return q0, jnp.zeros_like(q0)

    def observe(self, q: Float[Array, " n"]) -> Float[Array, " n"]:
        """Every body's pose `[x, y, z, a1, a2, a3]` (m, rad), bottom up, concatenated."""
        return q

    @property
    def observable_names(self) -> tuple[str, ...]:
        """`x_<body>, y_<body>, z_<body>, a1_<body>, a2_<body>, a3_<body>` body by body, bottom
        up (`x_0, ...` for unnamed bodies)."""
        return tuple(f"{channel}_{name}" for name in self.body_names[1:]
                     for channel in ("x", "y", "z", "a1", "a2", "a3"))

    @property
    def observable_units(self) -> tuple[str, ...]:
        """Units of the measured channels."""
        return ("m", "m", "m", "rad", "rad", "rad") * len(self.bodies)

    def joint_loads(self, q, qdot) -> Float[Array, "n 6"]:
        """Force and moment (ground axes, N and N m) that bushing `k` exerts on body `k`, the
        moment about that body's centre of mass: the "joint forces and moments at the centre of
        mass of the upper vertebra" of Christophy et al. 2013, Figs 9 and 11."""
        poses, rates = self.poses(q), self._rates(qdot)
        rows = []
        for k, element in enumerate(self.elements):
            _, (moment, force) = element.wrenches(poses[k], poses[k + 1], rates[k], rates[k + 1])
            arm = element.frames(poses[k], poses[k + 1])[3] - poses[k + 1][:3]
            rows.append(jnp.concatenate([force, moment + jnp.cross(arm, force)]))
        return jnp.stack(rows)

    def link_loads(self, q, qdot=None) -> Float[Array, "m 2 6"]:
        """`(links, 2, 6)`: the force and moment (ground axes, N and N m) that each link exerts
        on its lower body (row 0, moment about frame 1's origin) and on its upper body (row 1,
        about frame 2's origin), at the poses `q` and rates `qdot` (default at rest)."""
        qdot = jnp.zeros_like(q) if qdot is None else qdot
        poses, rates = self.poses(q), self._rates(qdot)
        rows = []
        for link in self.links:
            a, b = poses[link.lower], poses[link.upper]
            (m1, f1), (m2, f2) = link.element.wrenches(a, b, rates[link.lower],
                                                       rates[link.upper])
            rows.append(jnp.stack([jnp.concatenate([f1, m1]), jnp.concatenate([f2, m2])]))
        return jnp.stack(rows) if rows else jnp.zeros((0, 2, 6), dtype=q.dtype)


def chain_generalized_loads(q: Float[Array, " n"], load: Float[Array, " n"]) -> Float[Array, " n"]:
    """Generalized forces `[F_k, EW(a_k)^T M_k]` of body loads `[F_k, M_k]` (ground axes, N and
    N m; `(6 n,)`) at the chain pose `q` (`(6 n,)`; supplement S.18 body by body)."""
    poses, loads = q.reshape(-1, 6), load.reshape(-1, 6)
    moments = jnp.einsum("kji,kj->ki", jax.vmap(E_W)(poses[:, 3:]), loads[:, 3:])
    return jnp.concatenate([loads[:, :3], moments], axis=1).ravel()


def lumbar_models(centres, masses, inertias, stiffness_full, damping=None,
                  base_centre=None) -> dict[int, SpatialChain]:
    """The four lumbar models of Christophy et al. 2013, Table 1, for L5 ... L1 (bottom up).

    **Arguments:** `centres` `(5, 3)` (m, ground axes e1 anterior, e2 superior, e3 right):
    vertebral centres = centres of mass, L5 first; `masses` `(5,)` (kg); `inertias` `(5, 3, 3)`
    (kg m^2, body axes); `stiffness_full` K_F^E (eq 24, `(6, 6)`), of which Models 1-3 use the
    diagonal (K_D^E, eq 25); `damping` `(6, 6)` (default zero); `base_centre` (the sacrum's
    centre, `(3,)`; default: one inter-centre spacing below L5, along L4 to L5).

    **Returns:** `{1: ..., 4: ...}`:
    - Model 1: classic bushings with both frames at the joint point (midway between the two
      centres), coincident in the neutral posture: no neutral load, but the load acts at the
      joint, away from the centres of mass (the spurious moment of eq 21, Fig 9);
    - Model 2: classic bushings with frames at the centres of mass: neutral-posture load
      `-K^B y_B,O` (eq 19);
    - Models 3 and 4: SpineBushings at the centres of mass with K_D^E and K_F^E (eqs 22-23).
    """
    centres = np.asarray(centres, dtype=float)
    base = (2 * centres[0] - centres[1]) if base_centre is None else np.asarray(base_centre)
    below = np.vstack([base, centres[:-1]])
    stiffness_full = np.asarray(stiffness_full, dtype=float)
    diagonal = np.diag(np.diag(stiffness_full))
    damping = np.zeros((6, 6)) if damping is None else np.asarray(damping, dtype=float)
    zero = np.zeros(3)
    base_pose = np.concatenate([base, zero])
    bodies = tuple(
        SpatialBody(mass=jnp.asarray(m), inertia=jnp.asarray(i),
                    reference_pose=jnp.asarray(np.concatenate([c, zero])))
        for c, m, i in zip(centres, masses, inertias))
    models = {}
    for number in (1, 2, 3, 4):
        elements = []
        for lower, upper in zip(below, centres):
            if number == 1:
                joint = 0.5 * (lower + upper)
                frame1, frame2 = (joint - lower, zero), (joint - upper, zero)
            else:
                frame1, frame2 = (zero, zero), (zero, zero)
            elements.append(Bushing.create(
                "classic" if number <= 2 else "spine", frame1, frame2,
                stiffness_full if number == 4 else diagonal, damping,
                np.concatenate([lower, zero]), np.concatenate([upper, zero])))
        models[number] = SpatialChain(
            base_pose=jnp.asarray(base_pose), bodies=bodies, elements=tuple(elements),
            loads=(), gravity=jnp.zeros(3))
    return models


def prescribed_motion(chain: SpatialChain, t, amplitudes, frequency: float = 1.0):
    """Poses, rates and accelerations `(q, qdot, qddot)` (`(6 n,)` each) at time `t` (s) of a
    sinusoidal motion (Christophy et al. 2013, Table 3): at joint `k` the upper body moves
    relative to the lower one by `amplitudes[k] sin(2 pi f t)` (`(n, 6)`: translations in m
    along the lower body's axes, then a rotation vector in rad about the joint point midway
    between the two neutral centres), composed up the chain from the fixed base.

    With `D_k: p -> R_k p + d_k` the displacement of body `k` from its neutral pose and
    `H_k: p -> T_k (p - j_k) + j_k + s_k` the joint motion, `D_k = D_(k-1) o H_k`.
    """
    amplitudes = jnp.asarray(amplitudes, dtype=float)

    def poses(time):
        phase = jnp.sin(2 * jnp.pi * frequency * time)
        rotation, shift = jnp.eye(3), jnp.zeros(3)
        previous = chain.base_pose[:3]
        out = []
        for k, body in enumerate(chain.bodies):
            centre = body.reference_pose[:3]
            joint = 0.5 * (previous + centre)
            step = amplitudes[k] * phase
            turn = jax.scipy.linalg.expm(skew(step[3:]))
            moved = rotation @ (turn @ (centre - joint) + joint + step[:3]) + shift
            shift = rotation @ (joint - turn @ joint + step[:3]) + shift
            rotation = rotation @ turn
            out.append(jnp.concatenate([moved, euler123_angles(rotation)]))
            previous = centre
        return jnp.concatenate(out)

    t = jnp.asarray(t, dtype=float)
    rate = jax.jacfwd(poses)
    return poses(t), rate(t), jax.jacfwd(rate)(t)
