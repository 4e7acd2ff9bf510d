"""The parts a `MultibodyTree` holds besides its joints' frames: the axes of their spatial
transforms, coordinate couplers, bushings, expression bushings, coordinate limits, markers and
prescribed loads (OpenSim's `TransformAxis`, `CoordinateCouplerConstraint`, `BushingForce`,
`ExpressionBasedBushingForce`, `CoordinateLimitForce`, `Marker` and `PrescribedForce`; module
docstring of `spineid.models._multibody`)."""

import math
import re
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..elements._parameters import ParameterField
from ..kinematics._functions import AbstractCoordinateFunction, MultivariatePolynomial
from ..kinematics._rotations import euler123_rotation

GROUND = -1
"""The body index of ground (a joint's parent, a bushing's or marker's body)."""


class TransformAxis(eqx.Module):
    """One axis of a joint's spatial transform: a rotation about, or a translation along, the
    unit vector `axis` (`(3,)`, in the joint's parent frame `F`, rotations body-fixed) by
    `function(c[coordinate])` (rad or m); `coordinate` (static) is an index into the model's
    coordinates, `-1` for an axis driven by no coordinate (its function's value at 0), or a
    tuple of them, OpenSim's several `<coordinates>`, for a `MultivariatePolynomial` `function`
    of their values `(d,)` in that order."""

    kind: str = eqx.field(static=True)
    axis: Float[Array, "3"]
    function: AbstractCoordinateFunction | MultivariatePolynomial
    coordinate: int | tuple[int, ...] = eqx.field(static=True, default=-1)

    def __check_init__(self):
        if self.kind not in ("rotation", "translation"):
            raise ValueError(f"TransformAxis: kind {self.kind!r}; expected 'rotation' or "
                             "'translation'")
        if isinstance(self.coordinate, tuple) != isinstance(self.function,
                                                            MultivariatePolynomial):
            raise ValueError(f"TransformAxis: coordinate {self.coordinate!r} with a "
                             f"{type(self.function).__name__}; a tuple of coordinates takes a "
                             "MultivariatePolynomial of their values, one coordinate (or -1) "
                             "any other function")

    def value(self, coordinates: Float[Array, " m"]) -> Float[Array, ""]:
        """The angle (rad) or distance (m) along this axis at the model's coordinates `(m,)`
        (`axis_amount`, which places the model's joints)."""
        return axis_amount(self.function, jnp.asarray(self.coordinate),
                           jnp.asarray(coordinates))


def axis_amount(function, index, coordinates) -> Float[Array, ""]:
    """A transform axis's angle (rad) or distance (m): `function` of the coordinates
    `(m,)` at `index`, an integer array (traced under `vmap`, so that joints of one layout are
    placed together): of shape `()`, one coordinate or `-1` for none (the function at 0), or
    `(d,)`, several for a `MultivariatePolynomial` (OpenSim's `TransformAxis`)."""
    if index.ndim:
        return function(coordinates[index])
    if not coordinates.shape[0]:  # (a model of no coordinates: every axis is driven by none)
        return function(jnp.zeros((), coordinates.dtype))
    return function(jnp.where(index >= 0, coordinates[jnp.maximum(index, 0)], 0.0))


class CoordinateCoupler(eqx.Module):
    """`c[dependent] = scale * function(c[independent])` (OpenSim's
    `CoordinateCouplerConstraint`, reduced); indices static, `name` for messages. Several
    independent coordinates (a tuple of indices) take a `MultivariatePolynomial` of their values
    `(d,)`, in the tuple's order."""

    name: str = eqx.field(static=True)
    dependent: int = eqx.field(static=True)
    independent: int | tuple[int, ...] = eqx.field(static=True)
    function: AbstractCoordinateFunction | MultivariatePolynomial
    scale: Float[Array, ""]


class _TwoFrameBushing(eqx.Module):
    # What OpenSim's two bushings share: the component's name (`label`, static), the frame on
    # body `body1` and the one on `body2` (static indices, `GROUND` for ground; each
    # `(translation (3,) m, rotation (3, 3))` in its body), and the damper `-D y'`, `D =
    # diag(translational, rotational)` in the deflection `y = [p, beta]`'s order (its two
    # fields, `rotational_damping` and `translational_damping`, each class's last, so that
    # the fields keep their places in both: positional construction as before).

    label: str = eqx.field(static=True)
    body1: int = eqx.field(static=True)
    body2: int = eqx.field(static=True)
    frame1: tuple[Float[Array, "3"], Float[Array, "3 3"]]
    frame2: tuple[Float[Array, "3"], Float[Array, "3 3"]]
    collection: ClassVar[str] = "bushings"

    @property
    def damping_diagonal(self) -> Float[Array, "6"]:
        """`[translational, rotational]` damping, the diagonal of `D`."""
        return jnp.concatenate([self.translational_damping, self.rotational_damping])


_DAMPING_FIELDS = (ParameterField("rotational_damping", "bushings.rotational_damping",
                                  "N m s/rad"),
                   ParameterField("translational_damping", "bushings.translational_damping",
                                  "N s/m"))


class TreeBushing(_TwoFrameBushing):
    """OpenSim's `BushingForce` between a frame on body `body1` and one on body `body2`
    (static indices, `GROUND` for ground; frames `(translation (3,) m, rotation (3, 3))` in
    those bodies): the load `f = -K y - D y'` with `y = [p, beta]` the relative motion of
    frame 2 in frame 1 (Christophy et al. 2013 eq 17: spineid's classic bushing) and diagonal
    `K = diag(translational_stiffness, rotational_stiffness)`, `D` likewise; as an element of
    the mechanics core, the energy `1/2 y^T K y` and dissipation `1/2 y'^T D y'`.

    Fields (`(3,)` each, about or along frame 1's x, y, z): `rotational_stiffness` (N m/rad),
    `translational_stiffness` (N/m), `rotational_damping` (N m s/rad), `translational_damping`
    (N s/m); `label` (static) is the component's name in parameter names:
    `bushing_1.rotational_stiffness[2]`, groups `bushings.rotational_stiffness`, ...
    """

    rotational_stiffness: Float[Array, "3"]
    translational_stiffness: Float[Array, "3"]
    rotational_damping: Float[Array, "3"]
    translational_damping: Float[Array, "3"]

    def parameter_fields(self):
        """The four vectors, named and grouped after OpenSim's properties (lower bound 0)."""
        return (ParameterField("rotational_stiffness", "bushings.rotational_stiffness",
                               "N m/rad"),
                ParameterField("translational_stiffness", "bushings.translational_stiffness",
                               "N/m"), *_DAMPING_FIELDS)

    @property
    def stiffness_diagonal(self) -> Float[Array, "6"]:
        """`[translational, rotational]` stiffness, the diagonal of `K` in `y`'s order."""
        return jnp.concatenate([self.translational_stiffness, self.rotational_stiffness])

    conservative: ClassVar[bool] = True
    """Its spring has an energy (`energy`); the model puts it in `potential_energy`."""

    def spring_load(self, y: Float[Array, "6"]) -> Float[Array, "6"]:
        """The spring's load `K y` `(6,)` (N, N m; `y`'s order) at deflection `y`."""
        return self.stiffness_diagonal * y

    def energy(self, y: Float[Array, "6"]) -> Float[Array, ""]:
        """The spring's energy `1/2 y^T K y` (J) at deflection `y` `(6,)`."""
        return 0.5 * jnp.sum(self.stiffness_diagonal * y ** 2)


DEFLECTIONS = ("theta_x", "theta_y", "theta_z", "delta_x", "delta_y", "delta_z")
"""The variables of an `ExpressionBushing`'s expressions, in OpenSim's order of `dq`."""
LOADS = ("Mx", "My", "Mz", "Fx", "Fy", "Fz")
"""Its six expressions' loads, in the same order: moments about frame 1's axes, forces."""
_LOAD_UNITS = ("N m",) * 3 + ("N",) * 3
_DEFLECTION_UNITS = ("rad",) * 3 + ("m",) * 3


def monomial(exponents: tuple[int, ...]) -> str:
    """The product of `DEFLECTIONS` to the powers `exponents` (6,) as OpenSim writes it,
    `theta_x^3*delta_y`; `""` for none."""
    return "*".join(name if power == 1 else f"{name}^{power}"
                    for name, power in zip(DEFLECTIONS, exponents) if power)


class ExpressionBushing(_TwoFrameBushing):
    """OpenSim's `ExpressionBasedBushingForce` with polynomial expressions: frames and
    deflection `y = [p, beta]` as `TreeBushing`'s; the spring's load is OpenSim's six
    expressions `[Mx, My, Mz, Fx, Fy, Fz](dq)` of `dq = [beta, p]` (`theta_x .. delta_z`),
    each a sum of terms `c_t prod_v dq_v^e_tv`, applied as `-f` through the deflection's
    Jacobian, and the damper `-D y'` as `TreeBushing`'s. The spring need not derive from an
    energy (a cross term), so the model applies it as a generalized force
    (`conservative = False`).

    Fields: `label`, `body1`, `body2`, `frame1`, `frame2` (as `TreeBushing`); `outputs` and
    `exponents` (static: each term's expression, 0-5 for Mx..Fz, and its six powers),
    `coefficients` (`(t,)`, SI: the expression's unit over its powers' units, e.g.
    `N m/rad^3`), `rotational_damping`, `translational_damping` (`(3,)`). Parameters:
    `<label>.coefficients[k]` (group `bushings.coefficients`, no bounds; `terms` says which
    term each is) and the dampings as `TreeBushing`'s.
    """

    outputs: tuple[int, ...] = eqx.field(static=True)
    exponents: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    coefficients: Float[Array, " t"]
    rotational_damping: Float[Array, "3"]
    translational_damping: Float[Array, "3"]
    conservative: ClassVar[bool] = False

    @property
    def terms(self) -> tuple[str, ...]:
        """Each coefficient's term in words, `Mx: theta_x^3` (the order of `coefficients`)."""
        return tuple(f"{LOADS[o]}: {monomial(e) or '1'}"
                     for o, e in zip(self.outputs, self.exponents))

    def parameter_fields(self):
        """The coefficients (each in its term's unit, unbounded) and the two dampings."""
        units = tuple(_term_unit(o, e) for o, e in zip(self.outputs, self.exponents))
        return (ParameterField("coefficients", "bushings.coefficients", units or "",
                               lower=-math.inf), *_DAMPING_FIELDS)

    def spring_load(self, y: Float[Array, "6"]) -> Float[Array, "6"]:
        """The expressions' load `(6,)` in `y`'s order (`[Fx, Fy, Fz, Mx, My, Mz]`, N, N m)
        at deflection `y` `(6,)` (m, rad)."""
        dq = jnp.concatenate([y[3:], y[:3]])
        loads = jnp.zeros(6)
        for k, (output, exponents) in enumerate(zip(self.outputs, self.exponents)):
            term = self.coefficients[k]
            for v, power in enumerate(exponents):
                if power:
                    term = term * dq[v] ** power
            loads = loads.at[output].add(term)
        return jnp.concatenate([loads[3:], loads[:3]])

    def energy(self, y: Float[Array, "6"]) -> Float[Array, ""]:
        """Zero: the spring is applied as a generalized force (`conservative = False`)."""
        return jnp.zeros(())


def _term_unit(output: int, exponents: tuple[int, ...]) -> str:
    # A coefficient's SI unit: its expression's load unit over its powers' units.
    below = " ".join(unit if power == 1 else f"{unit}^{power}"
                     for unit, power in zip(_DEFLECTION_UNITS, exponents) if power)
    return _LOAD_UNITS[output] + (f"/({below})" if " " in below else f"/{below}" if below
                                  else "")


class CoordinateLimit(eqx.Module):
    """OpenSim's `CoordinateLimitForce` on coordinate `coordinate` (static index): beyond
    `upper` (or below `lower`) a spring whose stiffness rises from 0 to `upper_stiffness` (or
    `lower_stiffness`) over `transition` by SimTK's smooth step `10 s^3 - 15 s^4 + 6 s^5`, and a
    damper scaled by the same step: `f = -K_u(c) (c - upper) + K_l(c) (lower - c) - damping
    (K_u(c)/K_u + K_l(c)/K_l) c'` on the coordinate: the springs through their energy
    (`energy`, in the model's potential energy), the damper a generalized force. Fields in SI (the
    file's degrees converted for rotational coordinates): limits and `transition` in rad or m,
    stiffness in N m/rad or N/m, `damping` in N m s/rad or N s/m; `name` static."""

    name: str = eqx.field(static=True)
    coordinate: int = eqx.field(static=True)
    upper_stiffness: Float[Array, ""]
    upper: Float[Array, ""]
    lower_stiffness: Float[Array, ""]
    lower: Float[Array, ""]
    transition: Float[Array, ""]
    damping: Float[Array, ""]

    def _steps(self, value):
        # SimTK's smooth step (0 at x <= 0, 1 at x >= 1) beyond the upper and the lower limit.
        def step(x):
            x = jnp.clip(x, 0.0, 1.0)
            return x ** 3 * (10.0 - 15.0 * x + 6.0 * x ** 2)

        return (step((value - self.upper) / self.transition),
                step((self.lower - value) / self.transition))

    def force(self, value, rate) -> Float[Array, ""]:
        """The force (N m or N) on the coordinate at its `value` and `rate`: the springs'
        (`-d energy / d value`) and the damper's (`damping_force`)."""
        up, low = self._steps(value)
        return (-self.upper_stiffness * up * (value - self.upper)
                + self.lower_stiffness * low * (self.lower - value)
                + self.damping_force(value, rate))

    def damping_force(self, value, rate) -> Float[Array, ""]:
        """The damper's force `-damping (K_u(c)/K_u + K_l(c)/K_l) c'` (N m or N)."""
        up, low = self._steps(value)
        return -self.damping * (up + low) * rate

    def energy(self, value) -> Float[Array, ""]:
        """The springs' potential energy (J) at `value`: the integral of their force from
        the limit, `K T^2 (2 s^5 - 5/2 s^6 + 6/7 s^7)` at `s = d / T <= 1` (`d` the distance
        beyond the limit, `T` the transition) and `K (5/14 T^2 + (d^2 - T^2) / 2)` beyond."""
        def beyond(stiffness, distance):
            t = self.transition
            s = jnp.clip(distance / t, 0.0, 1.0)
            ramp = t ** 2 * s ** 5 * (2.0 - 2.5 * s + 6.0 / 7.0 * s ** 2)
            far = jnp.where(distance > t, distance, t)
            return stiffness * (ramp + 0.5 * (far ** 2 - t ** 2))

        return (beyond(self.upper_stiffness, value - self.upper)
                + beyond(self.lower_stiffness, self.lower - value))


LIMIT_PROPERTIES = {"upper_stiffness": ("upper_stiffness", "stiffness", 0.0),
                    "upper_limit": ("upper", "place", -math.inf),
                    "lower_stiffness": ("lower_stiffness", "stiffness", 0.0),
                    "lower_limit": ("lower", "place", -math.inf),
                    "transition": ("transition", "place", 0.0),
                    "damping": ("damping", "damping", 0.0)}
"""A `CoordinateLimitForce`'s properties as parameters: OpenSim's property name -> (the field
of `CoordinateLimit`, its kind of unit, its lower bound)."""

_LIMIT_UNITS = {"rad": {"stiffness": "N m/rad", "place": "rad", "damping": "N m s/rad"},
                "m": {"stiffness": "N/m", "place": "m", "damping": "N s/m"},
                "": {"stiffness": "", "place": "", "damping": ""}}  # (a coupled coordinate's)


def component_label(name: str) -> str:
    """An OpenSim component's name as it stands in parameter names and TOML keys: unchanged
    where it is a name (letters, digits, `_`), other characters replaced by `_` (OpenSim
    allows `-`)."""
    return name if name.isidentifier() else re.sub(r"\W", "_", name)


def body_parameter_fields(body_names) -> tuple[ParameterField, ...]:
    """The parameters of a model's bodies (`body_names`, the model's, in order): each body's
    mass (`<body>.mass`, kg, > 0, group `bodies.mass`), centre of mass (`<body>.mass_center[i]`,
    m, body axes, group `bodies.mass_center`) and inertia about it (`<body>.inertia[i]`, kg
    m^2, `Ixx Iyy Izz Ixy Ixz Iyz` as OpenSim lists them, the moments >= 0, group
    `bodies.inertia`), held by the model as `masses`, `mass_centers` and `inertia_entries`."""
    bodies = tuple(component_label(body) for body in body_names)
    return (ParameterField("masses", "bodies.mass", "kg", name="mass", labels=bodies),
            ParameterField("mass_centers", "bodies.mass_center", "m", lower=-math.inf,
                           name="mass_center", labels=bodies),
            ParameterField("inertia_entries", "bodies.inertia", "kg m^2",
                           lower=(0.0,) * 3 + (-math.inf,) * 3, name="inertia",
                           labels=bodies))


def lab_frame_fields(markers) -> tuple[ParameterField, ...]:
    """The parameters of the frame a model's marker data are in (`lab_positions`), for a
    model with markers (none without): `lab_frame.translation[i]` (m) and
    `lab_frame.rotation[i]` (rad, 1-2-3 Euler angles), group `lab_frame`, held by the model as
    `lab_translation` and `lab_rotation`."""
    if not markers:
        return ()
    return tuple(ParameterField(f"lab_{part}", "lab_frame", unit, lower=-math.inf,
                                name=f"lab_frame.{part}")
                 for part, unit in (("translation", "m"), ("rotation", "rad")))


def lab_positions(translation, rotation, points) -> Float[Array, "k 3"]:
    """Points `x` `(k, 3)` (m, ground axes) in a motion-capture lab's frame: `x_lab =
    translation + R x` (m), with `R = euler123_rotation(rotation)` (`R_x R_y R_z` of the 1-2-3
    Euler angles `rotation`, rad, `(3,)`) taking ground components to the lab's and
    `translation` (m, `(3,)`) ground's origin in the lab. Zeros: the lab is ground."""
    return translation + points @ euler123_rotation(rotation).T


_SPEED_UNITS = {"rad": "rad/s", "m": "m/s", "": "1/s"}


def start_parameter_fields(names, units, free, spinning) -> tuple[ParameterField, ...]:
    """The start of a model's motion as parameters, keyed as model files key it: each free
    coordinate's value at t = 0 (`initial.<coordinate>`, rad or m, group `initial`) and speed
    (`initial_speeds.<coordinate>`, rad/s or m/s, group `initial_speeds`); none for the
    rotations of ball and free joints (`spinning`), whose OpenSim speeds are an angular
    velocity: a model file's speed of them stands for other rates once their values change),
    held by the model as `default_values` and `default_speeds`
    (`names`, `units`: the model's coordinates'; `free`: the indices of its free ones; a
    coordinate whose name is no identifier has none, as no parameter path could name it). One
    start serves every record of a fit; freed in a fit of several records, each record has its
    own (`select_parameters(records=...)`: `initial.<coordinate>@<k>`)."""
    free = tuple(i for i in free if names[i].isidentifier() and i not in spinning)
    return (ParameterField("default_values", "initial", tuple(units), lower=-math.inf,
                           name="initial", labels=tuple(names), keyed=True, entries=free),
            ParameterField("default_speeds", "initial_speeds",
                           tuple(_SPEED_UNITS[u] for u in units), lower=-math.inf,
                           name="initial_speeds", labels=tuple(names), keyed=True,
                           entries=free))


def limit_parameter_fields(limits, coordinate_units) -> tuple[ParameterField, ...]:
    """The parameters of a model's coordinate limits (`limits`, a tuple of `CoordinateLimit`
    held by the model as `limits`; `coordinate_units` the model's, `"rad"` or `"m"` per
    coordinate): each limit's six properties (`LIMIT_PROPERTIES`), named after the file's
    force and OpenSim's properties (`C4_limit.upper_stiffness`), grouped per property over the
    limits (`coordinate_limits.upper_stiffness`), in SI: N m/rad, rad and N m s/rad for a
    rotational coordinate, N/m, m and N s/m for a translational one, no unit for a coordinate
    of OpenSim's "coupled" motion type (held as the file gives it)."""
    fields = []
    for k, limit in enumerate(limits):
        units = _LIMIT_UNITS[coordinate_units[limit.coordinate]]
        for prop, (field, kind, lower) in LIMIT_PROPERTIES.items():
            fields.append(ParameterField(
                f"limits.{k}.{field}", f"coordinate_limits.{prop}", units[kind], lower=lower,
                name=f"{component_label(limit.name)}.{prop}"))
    return tuple(fields)


class TreeMarker(eqx.Module):
    """A marker of OpenSim's `MarkerSet`: point `location` (m, `(3,)`, body axes; its
    frame's offsets composed in) fixed on body `body` (static index, `GROUND` for ground);
    `name` static, the file's."""

    name: str = eqx.field(static=True)
    body: int = eqx.field(static=True)
    location: Float[Array, "3"]


MARKER_AXES = ("x", "y", "z")
"""The suffixes of a marker's three channels, `<marker>_x` ... (ground axes)."""


class PrescribedLoad(eqx.Module):
    """OpenSim's `PrescribedForce`: a force and a torque given as functions of time, on a
    frame fixed in body `body` (static index; `offset` `(translation (3,) m, rotation (3, 3))`
    of the frame in the body). `force`, `point`, `torque`: three functions of time each (s ->
    N, m, N m), or `()` where the file gives none (no force; the frame's origin; no torque).
    With `force_global` (static) the force and torque are in ground axes, else in the frame's;
    with `point_global` the point is a place in ground, else a point of the frame (OpenSim's
    `forceIsGlobal`, default true, and `pointIsGlobal`, default false). `name` static."""

    name: str = eqx.field(static=True)
    body: int = eqx.field(static=True)
    offset: tuple[Float[Array, "3"], Float[Array, "3 3"]]
    force: tuple[AbstractCoordinateFunction, ...]
    point: tuple[AbstractCoordinateFunction, ...]
    torque: tuple[AbstractCoordinateFunction, ...]
    force_global: bool = eqx.field(static=True, default=True)
    point_global: bool = eqx.field(static=True, default=False)

    def values(self, t) -> tuple:
        """`(force, point, torque)` `(3,)` each at time `t` (s): zeros where not given."""
        def at(functions):
            return jnp.stack([f(t) for f in functions]) if functions else jnp.zeros(3)

        return at(self.force), at(self.point), at(self.torque)