"""A tree of rigid bodies in joint coordinates, as OpenSim describes a model: bodies on joints
whose spatial transforms are functions of named coordinates, some locked, some coupled to
others, with bushings between frames fixed in bodies and gravity (OpenSim 4.x semantics;
`spineid.read_osim` builds one from a `.osim` file).

Kinematics. Joint `j` places its child body `C` in its parent body `P` (or ground) through a
frame `F` fixed in `P` and a frame `M` fixed in `C`,

    X_G_C = X_G_P  X_P_F  X_F_M(c)  X_M_C,    X_F_M = (R_1 R_2 R_3,  sum_k f_k(c) t_k),

where `R_i` is the rotation by `f_i(c)` about the unit axis `r_i` (a body-fixed sequence: axis
`r_2` turns with the first rotation) and the translations `t_k` are along axes of `F` (the
`SpatialTransform` of OpenSim's `CustomJoint`; pin, slider, universal, gimbal, ball, free and
planar joints are fixed spatial transforms of the same form). Offsets are `(translation (m),
body-fixed X-Y-Z rotations (rad))`, OpenSim's `PhysicalOffsetFrame`.

Coordinates. The model's coordinates `c` are OpenSim's (rad or m); the generalized coordinates
`q` are those neither locked (held at their default value) nor the dependent coordinate of a
`CoordinateCouplerConstraint` (`c_dep = f(c_indep)`: the constraint is reduced, not enforced
by a force, so the motion is that of the ideal constraint).

Energies (the mechanics core derives the equations of motion, Liu 2001 eq 2-9):
`T = sum_b 1/2 m_b |v_b|^2 + 1/2 w_b^T I_b w_b` (centre-of-mass velocity, body-axis angular
velocity `w = axial(R^T R')`, inertia about the centre of mass in body axes);
`U = -sum_b m_b g . x_b + sum_bushings 1/2 y^T K y` (and the coordinate limits' springs) and
`R = sum 1/2 y'^T D y'`, with `y` the relative motion of a bushing's frame 2 in its frame 1
(Christophy et al. 2013 eq 17, OpenSim's `BushingForce`) and `y'` its rate along the motion.
Generalized forces: the coordinate limits' dampers, the springs of polynomial expression
bushings (which need not have an energy) and prescribed loads of time.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..kinematics._frames import bushing_deflection
from ..kinematics._functions import AbstractCoordinateFunction
from ..kinematics._rotations import E_T, E_W, axial, axis_rotation
from ._mechanics import AbstractLagrangianSystem, solve_mass_matrix
from ._tree_parts import (
    CoordinateCoupler,
    CoordinateLimit,
    ExpressionBushing,
    GROUND,
    PrescribedLoad,
    MARKER_AXES,
    TransformAxis,
    TreeBushing,
    TreeMarker,
    axis_amount,
    body_parameter_fields,
    lab_frame_fields,
    lab_positions,
    limit_parameter_fields,
    start_parameter_fields,
)


class TreeJoint(eqx.Module):
    """A joint placing body `child` in body `parent` (`GROUND` = -1 for ground); both static.

    Fields: `name` and `kind` (static: the OpenSim component's name and class), `parent`,
    `child`, `parent_offset` and `child_offset` (each `(translation (3,) m, rotation (3, 3))`:
    frames `F` in the parent and `M` in the child, the rotation's columns the frame's axes),
    `axes` (tuple of `TransformAxis`, applied in order: rotations compose body-fixed,
    translations add in `F`).
    """

    name: str = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    parent: int = eqx.field(static=True)
    child: int = eqx.field(static=True)
    parent_offset: tuple[Float[Array, "3"], Float[Array, "3 3"]]
    child_offset: tuple[Float[Array, "3"], Float[Array, "3 3"]]
    axes: tuple[TransformAxis, ...]
    spin_speeds: bool = eqx.field(static=True, default=False)
    """Whether OpenSim's speeds of the joint's first three (rotation) coordinates are the
    angular velocity of `M` in `F` (`F` components), as for `BallJoint` and `FreeJoint`,
    instead of the rates of the coordinates."""

    @property
    def spin_coordinates(self) -> tuple[int, ...]:
        """The model's indices of the joint's three rotation coordinates whose OpenSim
        speeds are an angular velocity (`spin_speeds`); `()` for other joints."""
        return tuple(axis.coordinate for axis in self.axes[:3]) if self.spin_speeds else ()

    def transform(self, coordinates) -> tuple[Float[Array, "3 3"], Float[Array, "3"]]:
        """`(R_FM (3, 3), p_FM (3,) m)`: orientation and origin of `M` in `F` at the model's
        coordinates `(m,)` (rad, m)."""
        return _dynamic(self).transform(coordinates)


def coordinate_rates(joints, values, speeds) -> Float[Array, " m"]:
    """The rates `(m,)` (rad/s, m/s) of coordinates at `values` `(m,)` whose OpenSim speeds
    are `speeds` `(m,)`: the speeds themselves, but `ET(c) w` for the rotations of the ball and
    free joints among `joints` (`w` their angular velocity in `F`)."""
    return _spins_mapped(joints, values, speeds, E_T)


def coordinate_speeds(joints, values, rates) -> Float[Array, " m"]:
    """OpenSim's speeds `(m,)` of coordinates at `values` `(m,)` moving at `rates` `(m,)`:
    the inverse of `coordinate_rates` (`EW(c) c'` for ball and free joints' rotations)."""
    return _spins_mapped(joints, values, rates, E_W)


def _spins_mapped(joints, values, vector, matrix):
    # `vector` with each spinning joint's three rotation entries multiplied by `matrix(c)`.
    mapped = jnp.asarray(vector, dtype=float)
    for joint in joints:
        if joint.spin_coordinates:
            index = jnp.asarray(joint.spin_coordinates)
            mapped = mapped.at[index].set(matrix(values[index]) @ mapped[index])
    return mapped


class _DynamicJoint(eqx.Module):
    # A joint with its indices as arrays (parent, child, each axis's coordinate), so that
    # joints of one layout stack into one pytree a vmap runs over (`body_transforms`).
    parent: Array
    child: Array
    parent_offset: tuple
    child_offset: tuple
    kinds: tuple[str, ...] = eqx.field(static=True)
    vectors: tuple
    functions: tuple
    coordinates: tuple

    def transform(self, values):
        rotation, position = jnp.eye(3), jnp.zeros(3)
        for kind, vector, function, index in zip(self.kinds, self.vectors, self.functions,
                                                 self.coordinates):
            unit = vector / jnp.linalg.norm(vector)
            amount = axis_amount(function, index, values)
            if kind == "rotation":
                rotation = rotation @ axis_rotation(unit, amount)
            else:
                position = position + amount * unit
        return rotation, position


def _dynamic(joint: TreeJoint) -> _DynamicJoint:
    return _DynamicJoint(
        jnp.asarray(joint.parent), jnp.asarray(joint.child), joint.parent_offset,
        joint.child_offset, tuple(axis.kind for axis in joint.axes),
        tuple(axis.axis for axis in joint.axes), tuple(axis.function for axis in joint.axes),
        tuple(jnp.asarray(axis.coordinate) for axis in joint.axes))


def _layout(joint: TreeJoint):
    # What joints must share to be stacked: the tree structure and shapes of their dynamic
    # form (axis kinds, function types and sizes).
    dynamic = _dynamic(joint)
    return (jax.tree.structure(dynamic),
            tuple(jnp.shape(leaf) for leaf in jax.tree.leaves(dynamic)))


def _groups(joints) -> list[list]:
    # The joints by layout (in the model's order within each), so that each group's local
    # transforms are one vmapped evaluation.
    groups: dict = {}
    for joint in joints:
        groups.setdefault(_layout(joint), []).append(joint)
    return list(groups.values())


def _local(joint, values):
    # The child body's orientation and origin in its parent body (or ground): `X_P_F X_F_M(c)
    # X_M_C`, with `X_M_C` the inverse of the child's offset frame.
    x_pf, r_pf = joint.parent_offset  # (offsets: translation, rotation)
    r_fm, x_fm = joint.transform(values)
    x_cm, r_cm = joint.child_offset
    rotation = r_pf @ r_fm @ r_cm.T
    return rotation, x_pf + r_pf @ x_fm - rotation @ x_cm


def _compose(rotations, origins, joints):
    # Each body's placement in ground from its placement in its parent (`rotations`,
    # `origins` indexed by body), from ground out: the joints' order puts each parent before
    # its children. (One product per body: measured faster, for the sensitivities a fit
    # computes, than composing in log2(depth) rounds of batched products.)
    placed_r, placed_x = [None] * len(joints), [None] * len(joints)
    for joint in joints:
        k, parent = joint.child, joint.parent
        if parent == GROUND:
            placed_r[k], placed_x[k] = rotations[k], origins[k]
        else:
            placed_r[k] = placed_r[parent] @ rotations[k]
            placed_x[k] = placed_x[parent] + placed_r[parent] @ origins[k]
    return jnp.stack(placed_r), jnp.stack(placed_x)


def _with_ground(rotations, origins):
    # The bodies' placements with ground's last, so that body index -1 (GROUND) picks it.
    return (jnp.concatenate([rotations, jnp.eye(3)[None]]),
            jnp.concatenate([origins, jnp.zeros((1, 3))]))


class MultibodyTree(AbstractLagrangianSystem):
    """Rigid bodies on joints in joint coordinates (module docstring), with bushings and
    gravity, prescribed loads. Generalized coordinates `q`: the free coordinates
    (`coordinate_names[i]` for `i` in `free`), rad or m; the motion starts from the
    coordinates' default values and speeds.

    Fields: `name` (static), `body_names` (static), `masses` (kg, `(n,)`), `mass_centers`
    (m, `(n, 3)`, body frames), `inertia_entries` (kg m^2, `(n, 6)`: each body's inertia about
    its centre of mass in body axes as OpenSim's `<inertia>` lists it, `Ixx Iyy Izz Ixy Ixz
    Iyz`; `inertias` gives the `(n, 3, 3)` matrices), `joints` (tuple of `TreeJoint`, each
    parent before its children), `coordinate_names` and `coordinate_units` (static, `"rad"`
    or `"m"`), `default_values` and `default_speeds` (`(m,)`), `free` (static indices of the
    generalized coordinates), `couplers` (tuple of `CoordinateCoupler`), `elements` (tuple of
    `TreeBushing` and `ExpressionBushing`), `gravity` (m/s^2, `(3,)`, ground axes), `limits`
    (tuple of `CoordinateLimit`, OpenSim's `CoordinateLimitForce`s), `coordinate_paths`
    (static: each coordinate's component path, `/jointset/J/C`, for OpenSim's state labels),
    `source` (static: the `.osim` file it was read from, where `spineid.export_model` writes
    fitted values back; `""` if none), `markers` (tuple of `TreeMarker`, the `MarkerSet`),
    `observed` (static: `"coordinates"` or `"markers"`, what `observe` gives),
    `prescribed` (tuple of `PrescribedLoad`, OpenSim's `PrescribedForce`s), `lab_translation`
    (m, `(3,)`) and `lab_rotation` (rad, `(3,)`, 1-2-3 Euler angles): the frame marker data
    are in, `lab_positions`; zero where the data are in ground.
    """

    name: str = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    masses: Float[Array, " n"]
    mass_centers: Float[Array, "n 3"]
    inertia_entries: Float[Array, "n 6"]
    joints: tuple[TreeJoint, ...]
    coordinate_names: tuple[str, ...] = eqx.field(static=True)
    coordinate_units: tuple[str, ...] = eqx.field(static=True)
    default_values: Float[Array, " m"]
    default_speeds: Float[Array, " m"]
    free: tuple[int, ...] = eqx.field(static=True)
    couplers: tuple[CoordinateCoupler, ...]
    elements: tuple[TreeBushing | ExpressionBushing, ...]
    gravity: Float[Array, "3"]
    coordinate_paths: tuple[str, ...] = eqx.field(static=True, default=())
    limits: tuple[CoordinateLimit, ...] = ()
    source: str = eqx.field(static=True, default="")
    markers: tuple[TreeMarker, ...] = ()
    observed: str = eqx.field(static=True, default="coordinates")
    prescribed: tuple[PrescribedLoad, ...] = ()
    lab_translation: Float[Array, "3"] = eqx.field(default_factory=lambda: jnp.zeros(3))
    lab_rotation: Float[Array, "3"] = eqx.field(default_factory=lambda: jnp.zeros(3))

    def __check_init__(self):
        if self.observed not in ("coordinates", "markers"):
            raise ValueError(f"MultibodyTree: observed {self.observed!r}; expected "
                             "'coordinates' or 'markers'")
        if self.observed == "markers" and not self.markers:
            raise ValueError(f"MultibodyTree {self.name!r}: observed 'markers', but the model "
                             "has no markers (an OpenSim <MarkerSet>)")
        placed = {GROUND}
        for joint in self.joints:
            if joint.parent not in placed:
                raise ValueError(f"MultibodyTree: joint {joint.name!r} comes before the joint "
                                 "of its parent body; joints must be ordered from ground out")
            if joint.child in placed:
                raise ValueError(f"MultibodyTree: body {self.body_names[joint.child]!r} is "
                                 f"the child of two joints (a closed loop, at {joint.name!r})")
            placed.add(joint.child)
        missing = set(range(len(self.body_names))) - placed
        if missing:
            raise ValueError(f"MultibodyTree: bodies {sorted(self.body_names[i] for i in missing)}"
                             " are joined to nothing")

    def parameter_fields(self) -> tuple:
        """The bodies' masses, centres of mass and inertias (`body_parameter_fields`:
        `<body>.mass`, `<body>.mass_center[i]`, `<body>.inertia[i]`), the marker data's frame
        (`lab_frame_fields`: `lab_frame.translation[i]`, `lab_frame.rotation[i]`), the start
        (`start_parameter_fields`: `initial.<coordinate>`, `initial_speeds.<coordinate>`) and
        the coordinate limits' properties (`limit_parameter_fields`: `<limit>.upper_stiffness`
        ..., groups `coordinate_limits.<property>`), SI; the bushings' are their own."""
        spinning = {i for joint in self.joints for i in joint.spin_coordinates}
        return (body_parameter_fields(self.body_names) + lab_frame_fields(self.markers)
                + start_parameter_fields(self.coordinate_names, self.coordinate_units,
                                         self.free, spinning)
                + limit_parameter_fields(self.limits, self.coordinate_units))

    @property
    def inertias(self) -> Float[Array, "n 3 3"]:
        """Each body's inertia matrix `(n, 3, 3)` (kg m^2, about its centre of mass, body
        axes), from `inertia_entries` (`Ixx Iyy Izz Ixy Ixz Iyz`)."""
        return self.inertia_entries[:, np.array([(0, 3, 4), (3, 1, 5), (4, 5, 2)])]

    @property
    def n_dof(self) -> int:
        """Number of generalized coordinates (the free coordinates)."""
        return len(self.free)

    def coordinates(self, q: Float[Array, " d"]) -> Float[Array, " m"]:
        """All the model's coordinates `(m,)` at the generalized coordinates `q` `(n_dof,)`:
        locked ones at their defaults, dependent ones from their couplers (in order)."""
        values = self.default_values.at[jnp.asarray(self.free, dtype=int)].set(q)
        for coupler in self.couplers:
            values = values.at[coupler.dependent].set(
                coupler.scale * coupler.function(values[np.asarray(coupler.independent)]))
        return values

    def opensim_speeds(self, q, qdot) -> Float[Array, " m"]:
        """Every coordinate's speed as OpenSim defines it `(m,)` at `(q, qdot)`: the rate of
        the coordinate, except for the rotations of ball and free joints, whose speeds are the
        angular velocity of the joint's frame `M` in `F` (`F` components, `EW(c) c'`)."""
        values, rates = jax.jvp(self.coordinates, (q,), (qdot,))
        return coordinate_speeds(self.joints, values, rates)

    def body_transforms(self, q) -> tuple[Float[Array, "n 3 3"], Float[Array, "n 3"]]:
        """`(R, x)`: each body's orientation `(n, 3, 3)` (columns = body axes in ground) and
        origin `(n, 3)` (m, ground) at the generalized coordinates `q` `(n_dof,)`.

        The joints' transforms in their parents are evaluated together, one vmapped
        evaluation per layout of joint (all the alike custom joints of a spine at once), then
        composed from ground out. For the 8-body neck of experiments/benchmark_opensim.py a
        simulation took 0.25 s against 0.33-0.37 s placing each body in a scan step
        (docs/performance.md)."""
        if not self.joints:
            return jnp.zeros((0, 3, 3)), jnp.zeros((0, 3))
        values = self.coordinates(q)
        local_r, local_x, children = [], [], []
        for group in _groups(self.joints):
            stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves),
                                   *[_dynamic(joint) for joint in group])
            rotation, origin = jax.vmap(lambda joint: _local(joint, values))(stacked)
            local_r.append(rotation)
            local_x.append(origin)
            children += [joint.child for joint in group]
        order = np.argsort(children)  # (every body is the child of one joint)
        return _compose(jnp.concatenate(local_r)[order], jnp.concatenate(local_x)[order],
                        self.joints)

    def _mass_center_positions(self, rotations, origins):
        return origins + jnp.einsum("nij,nj->ni", rotations, self.mass_centers)

    def body_velocities(self, q, qdot) -> tuple[Float[Array, "n 3"], Float[Array, "n 3"]]:
        """`(v, w)`: each body's centre-of-mass velocity (m/s, ground axes) and angular
        velocity (rad/s, body axes), `(n, 3)` each, at `(q, qdot)`."""
        (rotations, _), (rotation_rates, origin_rates) = jax.jvp(
            self.body_transforms, (q,), (qdot,))
        velocities = origin_rates + jnp.einsum("nij,nj->ni", rotation_rates, self.mass_centers)
        spins = jax.vmap(lambda r, dr: axial(r.T @ dr))(rotations, rotation_rates)
        return velocities, spins

    def kinetic_energy(self, t, q, qdot):
        """`T = sum 1/2 m |v|^2 + 1/2 w^T I w` (J; module docstring)."""
        velocities, spins = self.body_velocities(q, qdot)
        return 0.5 * (jnp.sum(self.masses * jnp.sum(velocities ** 2, axis=1))
                      + jnp.einsum("ni,nij,nj->", spins, self.inertias, spins))

    def _prepared(self) -> "MultibodyTree":
        # This model with its functions prepared (a spline's coefficients solved once).
        is_function = lambda node: isinstance(node, AbstractCoordinateFunction)  # noqa: E731
        return jax.tree.map(lambda node: node.prepared() if is_function(node) else node, self,
                            is_leaf=is_function)

    def _kinematics(self, q):
        # What the forces and the inertia need of a configuration: the bodies' orientations
        # (n, 3, 3), their centres of mass (n, 3) and the bushings' deflections (b, 6).
        rotations, origins = self.body_transforms(q)
        return (rotations, self._mass_center_positions(rotations, origins),
                self._deflections(rotations, origins))

    def accelerations(self, t, q, qdot):
        """`qddot` `(n_dof,)` from the bodies' Newton-Euler equations projected on the
        coordinates, the same equations as Lagrange's (tests check the two) in a cheaper,
        forward-mode form: `M qddot = Q - sum_b [m J_c^T (a_b - g) + J_w^T (I alpha_b + w x
        I w)] - sum_bushings J_y^T (K y + D y')`, with `M = sum_b m J_c^T J_c + J_w^T I J_w`;
        `J_c`, `J_w`, `J_y` the Jacobians of the centres of mass, body-axis angular velocities
        and bushing deflections in `q`, and `a_b`, `alpha_b` the bodies' accelerations at
        `qddot = 0` (one second-order directional derivative along `qdot`)."""
        prepared = self._prepared()
        jacobian_r, jacobian_c, jacobian_y = jax.jacfwd(prepared._kinematics)(q)

        def rates(x):
            return jax.jvp(prepared._kinematics, (x,), (qdot,))

        ((rotations, _, deflections), (rotation_rates, _, deflection_rates)), \
            (_, (rotation_bias, centre_bias, _)) = jax.jvp(rates, (q,), (qdot,))
        spin = jax.vmap(lambda r, dr: axial(r.T @ dr))
        spins = spin(rotations, rotation_rates)
        spin_bias = spin(rotations, rotation_bias)
        jacobian_w = jax.vmap(lambda r, jr: jax.vmap(lambda c: axial(r.T @ c), in_axes=2,
                                                     out_axes=1)(jr))(rotations, jacobian_r)
        mass = (jnp.einsum("n,nia,nib->ab", self.masses, jacobian_c, jacobian_c)
                + jnp.einsum("nia,nij,njb->ab", jacobian_w, self.inertias, jacobian_w))
        momentum = jnp.einsum("nij,nj->ni", self.inertias, spins)
        inertial = (jnp.einsum("n,nia,ni->a", self.masses, jacobian_c,
                               centre_bias - self.gravity)
                    + jnp.einsum("nia,ni->a", jacobian_w,
                                 jnp.einsum("nij,nj->ni", self.inertias, spin_bias)
                                 + jnp.cross(spins, momentum)))
        forces = (prepared._applied_forces(t, q, qdot, springs=False) - inertial
                  - (jax.grad(prepared._limit_energy)(q) if self.limits else 0.0))
        for k, bushing in enumerate(prepared.elements):  # (every spring, through J_y)
            load = (bushing.spring_load(deflections[k])
                    + bushing.damping_diagonal * deflection_rates[k])
            forces = forces - jacobian_y[k].T @ load
        return solve_mass_matrix(mass, forces)

    def bushing_deflections(self, q) -> Float[Array, "b 6"]:
        """The relative motion `y` `(6,)` (m, rad) of each bushing's frame 2 in its frame 1
        at `q` (Christophy et al. 2013 eq 17), shape `(len(elements), 6)`."""
        return self._deflections(*self.body_transforms(q))

    def _deflections(self, rotations, origins):
        # The bushings' deflections at the bodies' placements, all bushings in one vmapped
        # evaluation (their body indices as arrays; -1, ground, at the identity).
        if not self.elements:
            return jnp.zeros((0, 6))
        placed_r, placed_x = _with_ground(rotations, origins)

        def deflection(body1, frame1, body2, frame2):
            ends = []
            for body, (offset_x, offset_r) in ((body1, frame1), (body2, frame2)):
                r, x = placed_r[body], placed_x[body]
                ends += [r @ offset_r, x + r @ offset_x]
            return bushing_deflection(*ends)

        stack = lambda *leaves: jnp.stack(leaves)  # noqa: E731
        return jax.vmap(deflection)(
            jnp.asarray([b.body1 for b in self.elements]),
            jax.tree.map(stack, *[b.frame1 for b in self.elements]),
            jnp.asarray([b.body2 for b in self.elements]),
            jax.tree.map(stack, *[b.frame2 for b in self.elements]))

    def potential_energy(self, t, q):
        """Gravity's `-sum m g . x`, the bushings' `1/2 y^T K y` and the coordinate limits'
        springs' (`CoordinateLimit.energy`) (J)."""
        rotations, origins = self.body_transforms(q)
        centres = self._mass_center_positions(rotations, origins)
        energy = -jnp.sum(self.masses * (centres @ self.gravity))
        for bushing, y in zip(self.elements, self.bushing_deflections(q)):
            energy = energy + bushing.energy(y)
        return energy + self._limit_energy(q)

    def _limit_energy(self, q):
        # The coordinate limits' springs' energy (J).
        if not self.limits:
            return jnp.zeros(())
        values = self.coordinates(q)
        return sum(limit.energy(values[limit.coordinate]) for limit in self.limits)

    def dissipation_function(self, t, q, qdot):
        """`sum 1/2 y'^T D y'` over the bushings (W), `y'` the rate of `y` along `qdot`."""
        if not self.elements:
            return jnp.zeros(())
        _, rates = jax.jvp(self.bushing_deflections, (q,), (qdot,))
        return 0.5 * sum(jnp.sum(bushing.damping_diagonal * rate ** 2)
                         for bushing, rate in zip(self.elements, rates))

    def generalized_forces(self, t, q, qdot):
        """The coordinate limits' dampers' forces on the generalized coordinates `(n_dof,)`
        (through the couplers where they act on a dependent coordinate; their springs are in
        `potential_energy`) and the springs of bushings that are not conservative
        (`ExpressionBushing`: `-J_y^T f(y)`) and the prescribed loads (`PrescribedLoad`, at
        time `t`: `J_p^T F + J_w^T T` with `p` the point they act at and `w` the frame's
        angular velocity)."""
        return self._applied_forces(t, q, qdot, springs=True)

    def _applied_forces(self, t, q, qdot, springs: bool):
        # `generalized_forces`, with (`springs`) or without the springs of bushings that are
        # not conservative (`accelerations` applies every spring through its J_y).
        total = sum((self._prescribed_force(load, t, q) for load in self.prescribed),
                    jnp.zeros_like(q))
        if springs and any(not bushing.conservative for bushing in self.elements):
            deflections, pull = jax.vjp(self.bushing_deflections, q)
            loads = jnp.stack([jnp.zeros(6) if bushing.conservative else bushing.spring_load(y)
                               for bushing, y in zip(self.elements, deflections)])
            total = total - pull(loads)[0]
        if not self.limits:
            return total
        values, rates = jax.jvp(self.coordinates, (q,), (qdot,))
        forces = jnp.zeros_like(values)
        for limit in self.limits:
            forces = forces.at[limit.coordinate].add(
                limit.damping_force(values[limit.coordinate], rates[limit.coordinate]))
        # (the forces pull back along the coordinates' Jacobian, not the rates')
        return total + jax.vjp(self.coordinates, q)[1](forces)[0]

    def _prescribed_force(self, load: PrescribedLoad, t, q):
        # The generalized force `(n_dof,)` of one prescribed load at `(t, q)`.
        def frame(x):
            rotations, origins = self.body_transforms(x)
            translation, rotation = load.offset
            if load.body == GROUND:
                return rotation, translation
            return (rotations[load.body] @ rotation,
                    origins[load.body] + rotations[load.body] @ translation)

        def placed(x):
            placement = frame(x)
            return placement, placement

        # (the frame's placement and its Jacobian, (3, 3, n) and (3, n), in one pass)
        (turns, moves), (r_f, x_f) = jax.jacfwd(placed, has_aux=True)(q)
        force, point, torque = load.values(t)
        if not load.force_global:
            force, torque = r_f @ force, r_f @ torque
        if load.point_global and load.point:  # (the frame's point that is there now)
            point = r_f.T @ (point - x_f)
        # The velocity of the frame's point `point` is `J_p qdot`, its angular velocity
        # `J_w qdot`: the load's virtual power gives `J_p^T F + J_w^T T`.
        jacobian_p = moves + jnp.einsum("ijn,j->in", turns, point)
        jacobian_w = jax.vmap(lambda d: axial(d @ r_f.T), in_axes=2, out_axes=1)(turns)
        return jacobian_p.T @ force + jacobian_w.T @ torque

    def starting_at(self, values, speeds) -> "MultibodyTree":
        """This model started from every coordinate's `values` `(m,)` (rad, m) and OpenSim
        `speeds` `(m,)` (an angular velocity for ball and free joints' rotations): its
        default values and speeds replaced (dependent coordinates follow their couplers)."""
        values = jnp.asarray(values, dtype=float)
        return dataclasses.replace(self, default_values=values, default_speeds=coordinate_rates(
            self.joints, values, jnp.asarray(speeds, dtype=float)))

    def initial_state(self):
        """The free coordinates' default values and speeds."""
        free = jnp.asarray(self.free, dtype=int)
        return self.default_values[free], self.default_speeds[free]

    def observe(self, q) -> Float[Array, " c"]:
        """What a fit compares with data at `q` `(n_dof,)`: the free coordinates themselves
        (rad, m), or with `observed = "markers"` every marker's position in the data's frame
        (m, `(3 k,)`, `x, y, z` of each marker in turn: `lab_positions` of `marker_positions`)."""
        if self.observed == "markers":
            return lab_positions(self.lab_translation, self.lab_rotation,
                                 self.marker_positions(q)).ravel()
        return q

    def marker_positions(self, q) -> Float[Array, "k 3"]:
        """Each marker's position (m, ground axes) at `q` `(n_dof,)`, shape `(k, 3)`."""
        if not self.markers:
            return jnp.zeros((0, 3))
        rotations, origins = self.body_transforms(q)
        placed_r, placed_x = _with_ground(rotations, origins)
        bodies = jnp.asarray([marker.body for marker in self.markers])
        locations = jnp.stack([marker.location for marker in self.markers])
        return placed_x[bodies] + jnp.einsum("kij,kj->ki", placed_r[bodies], locations)

    def observing_markers(self, names=None) -> "MultibodyTree":
        """This model with its markers (or those named `names`, in the model's order) as what
        is observed (fits to marker trajectories, `.trc`): channels `<marker>_x`, `_y`, `_z`
        in m. Raises `ValueError` for a model without markers or a name not among them."""
        markers = self.markers
        if names is not None:
            unknown = sorted(set(names) - {marker.name for marker in markers})
            if unknown:
                raise ValueError(f"markers {unknown} are not markers of the model; its "
                                 f"markers: {[marker.name for marker in markers]}")
            markers = tuple(marker for marker in markers if marker.name in set(names))
        return dataclasses.replace(self, markers=markers, observed="markers")

    @property
    def observable_names(self) -> tuple[str, ...]:
        """The free coordinates' names (OpenSim's), or the markers' channels
        `<marker>_x`, `_y`, `_z` (`observed = "markers"`)."""
        if self.observed == "markers":
            return tuple(f"{marker.name}_{axis}" for marker in self.markers
                         for axis in MARKER_AXES)
        return tuple(self.coordinate_names[i] for i in self.free)

    @property
    def observable_units(self) -> tuple[str, ...]:
        """`"rad"` or `"m"` for each free coordinate; `"m"` for each marker channel."""
        if self.observed == "markers":
            return ("m",) * (3 * len(self.markers))
        return tuple(self.coordinate_units[i] for i in self.free)

    def storage_columns(self, q, qdot) -> dict:
        """OpenSim's states columns of a motion `(k, n_dof)`: `<path>/value` and
        `<path>/speed` of every coordinate (locked and coupled ones too; OpenSim's speeds,
        `opensim_speeds`), rad and m, labels from `coordinate_paths`."""
        values = jax.vmap(self.coordinates)(q)
        speeds = jax.vmap(self.opensim_speeds)(q, qdot)
        paths = self.coordinate_paths or tuple(f"/{name}" for name in self.coordinate_names)
        columns = {f"{path}/value": values[:, i] for i, path in enumerate(paths)}
        columns.update({f"{path}/speed": speeds[:, i] for i, path in enumerate(paths)})
        return columns

    def export_formats(self) -> tuple[str, ...]:
        """`("opensim",)` for a model read from an OpenSim file (its file, with the bushings'
        values of this model: `spineid.io.write_osim_values`), else none."""
        return ("opensim",) if self.source else ()

    def is_excited(self) -> bool:
        """Gravity, a start speed, a bushing deflected, a coordinate beyond its limit at the
        start or a prescribed load (a concrete model, not under `jit`)."""
        q0, qdot0 = self.initial_state()
        deflected = bool(jnp.any(self.bushing_deflections(q0) != 0.0))
        limited = bool(self.limits) and bool(jnp.any(jax.grad(self._limit_energy)(q0) != 0.0))
        # (a bushing's preload, an expression's constant term, or a load at the start)
        forced = bool(jnp.any(self.generalized_forces(0.0, q0, qdot0) != 0.0))
        return bool(jnp.any(self.gravity != 0.0) or jnp.any(qdot0 != 0.0) or deflected
                    or limited or forced or self.prescribed)
