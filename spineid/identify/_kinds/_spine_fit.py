"""Per-level stiffness of a spine model identified from whole-spine motion: the poses of some or
all vertebrae observed (as motion capture or imaging gives them) under pure moments on one
vertebra, fitted through the chain's quasi-static equilibria (`spineid.moment_sweep`).

Each joint's rotational laws are scaled, `M_kd(x) = s_kd M0_kd(x)` for joint `k` and direction
`d` (lateral bending, axial rotation, flexion-extension), and the scales `s_kd > 0` are the
parameters (solved for as `log s`): a scale of 1 is the model as given, so a literature model is
the natural start. Residuals are `(pose(s) - measured) / sigma` for every observed body, load
step and direction; spineid's Levenberg-Marquardt minimises them with the Jacobian through every
equilibrium (implicit function theorem), and the Fisher matrix at the optimum says which scales
the observed bodies and loads determine (the identifiability report). A joint between two
unobserved vertebrae shares its motion with its neighbours: the data see the sum of their
rotations, the scales are told apart only through the laws' nonlinearity, and the cost has
local optima; the fit then tries starts with scales traded between neighbours and says so in
its warnings (measured: such a fit of 17 levels from 4 observed vertebrae stopped at a local
optimum whose misfit the goodness-of-fit test did not reject, see the experiment). With every
vertebra observed, the start read off the data (`data_start`) lies within about 6% of the
truth and the fit reaches the optimum.
"""

import dataclasses
import math
import time
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._reported_checks import checks_reported_as_nan
from ...elements._bushings import TableBushing
from ...kinematics._rotations import euler123_rotation
from ...models._spatial_chain import SpatialChain
from ...simulation._flexibility import (
    check_sweepable, DIRECTIONS, joint_axes, joint_names, moment_sweep,
)
from .._common._abstract_objective import AbstractObjective
from .._common._analysis import analyse_parameters, linearised_at, not_converged_note
from .._common._failure import compiled_check_message, failed, failed_cost, guarded
from .._common._goodness import assess_fit
from .._common._noise import check_noise, grouped_noise
from .._common._result_family import AbstractParameterFit
from .._common._uncertainty import correlation_matrix
from .._solvers import check_solver, LevenbergMarquardt

_CHANNELS = ("x", "y", "z", "a1", "a2", "a3")
POSE_GROUPS = {"position": ("x", "y", "z"), "angle": ("a1", "a2", "a3")}
"""Names that stand for several pose channels in `noise` (as a `--free` group does)."""
DEFAULT_POSE_NOISE = dict.fromkeys(POSE_GROUPS["position"], 1e-4) | dict.fromkeys(
    POSE_GROUPS["angle"], math.radians(0.1))
"""0.1 mm and 0.1 degree: the noise of a spine-level fit unless given."""


def scaled_laws(chain: SpatialChain, scales: Float[Array, "n 3"]) -> SpatialChain:
    """`chain` with the rotational laws of joint `k` (rx, ry, rz: lateral bending, axial
    rotation, flexion-extension) multiplied by `scales[k]` (table bushings' load values)."""
    elements = tuple(
        eqx.tree_at(lambda e: tuple(e.laws[3 + d].load_values for d in range(3)), element,
                    tuple(element.laws[3 + d].load_values * scales[k, d] for d in range(3)))
        for k, element in enumerate(chain.elements))
    return SpatialChain(base_pose=chain.base_pose, bodies=chain.bodies, elements=elements,
                        loads=chain.loads, gravity=chain.gravity, names=chain.names)


class _SpineObjective(AbstractObjective):
    """Noise-weighted pose residuals `(pose(s) - measured) / sigma` of every observed body, load
    step and direction, `(m k b 6,)`, as a function of `u = log s` (`(n 3,)`); a load step
    without equilibrium gets `FAILED_RESIDUAL`."""

    chain: SpatialChain
    moments: Float[Array, " k"]
    axes: Float[Array, "m 3"]
    data: Float[Array, "m k b 6"]
    sigma: Float[Array, "6"]
    loaded: int = eqx.field(static=True)
    observed: tuple[int, ...] = eqx.field(static=True)
    stepwise: ClassVar[bool] = True  # (compiling the equilibria dominates a fit)

    def predict(self, u):
        """Observed poses `(m, k, b, 6)` and equilibrium flags `(m, k)` at `log s = u`."""
        chain = scaled_laws(self.chain, jnp.exp(u).reshape(-1, 3))
        poses, ok = jax.vmap(lambda axis: moment_sweep(chain, self.loaded, self.moments,
                                                       axis))(self.axes)
        poses = poses.reshape(poses.shape[:2] + (-1, 6))[:, :, list(self.observed)]
        return poses, ok

    def __call__(self, u, args=None):
        # (Its solves' equinox checks traced as NaN, a step without equilibrium, as every fit's:
        # the fit backs off from it, and its compiled programs, free of host callbacks, are
        # loaded from JAX's cache by a later process instead of compiled again.)
        with checks_reported_as_nan():
            poses, ok = self.predict(u)
        misfit = (poses - self.data) / self.sigma
        return guarded(misfit, ok[:, :, None, None]).ravel()


@dataclasses.dataclass(frozen=True)
class SpineFit(AbstractParameterFit):
    """The outcome of `fit_spine_levels`: the fields of every parameter fit
    (`spineid.AbstractParameterFit`: `names` are `"<joint> <direction>"`, the values the scales
    `s_kd`, dimensionless, with Cramer-Rao standard errors, NaN where not individually
    identifiable; `start` is that of the reported optimum's run; `noise` is per channel, `x`, `y`,
    `z` in m and `a1`, `a2`, `a3` in rad), and `n_steps`, `predicted` and `measured` (`(m, k, b, 6)`), `observed`
    (body names)."""

    n_steps: int
    predicted: np.ndarray
    measured: np.ndarray
    observed: tuple[str, ...]

    def report(self) -> dict:
        """JSON-ready report."""
        return self.common_report() | {
            "n_steps": int(self.n_steps), "noise": dict(self.noise),
            "observed": list(self.observed), "parameters": self.parameter_entries(),
            "identifiability": self.identifiability.to_dict()}

    def summary(self) -> str:
        """A table of the scales with their standard errors, the identifiability and the
        goodness of fit."""
        lines = [f"spine fit: {'converged' if self.converged else 'NOT converged'} after "
                 f"{self.n_steps} steps in {self.seconds:.1f} s; cost {self.cost:.6g} "
                 f"({self.n_data} data values, bodies observed: {', '.join(self.observed)})",
                 *self.parameter_table("joint and direction", "scale")]
        return "\n".join(lines + self.verdict_lines())


def _rotation_vectors(rotations: np.ndarray) -> np.ndarray:
    # Axis times angle (rad) of rotation matrices (..., 3, 3).
    cos = np.clip((np.trace(rotations, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0)
    angle = np.arccos(cos)
    skew = np.stack([rotations[..., 2, 1] - rotations[..., 1, 2],
                     rotations[..., 0, 2] - rotations[..., 2, 0],
                     rotations[..., 1, 0] - rotations[..., 0, 1]], axis=-1)
    factor = np.where(angle > 1e-12, angle / (2 * np.sin(np.maximum(angle, 1e-12))), 0.5)
    return skew * factor[..., None]


def _inverse_laws(chain: SpatialChain, direction: int):
    # Per joint, the law's angle as a function of moment (tabulated, interpolated): laws are
    # increasing, so one table inverts each.
    grid = np.linspace(-0.6, 0.6, 24001)
    tables = [np.asarray(_law_table(element.laws[3 + direction], jnp.asarray(grid)))
              for element in chain.elements]
    return lambda k, moment: np.interp(moment, tables[k], grid)


@eqx.filter_jit
def _law_table(law, grid):
    # A law's loads `(g,)` at the angles `grid` (rad). (Jitted: one trace per kind of law and
    # table size, where an eager vmap traced each of a spine's 51 laws again, about 3 s.)
    return jax.vmap(law.load)(grid)


_rotations = jax.jit(jax.vmap(euler123_rotation))  # (eager, each call dispatched op by op)


def data_start(chain: SpatialChain, loaded: int, moments: np.ndarray, axes: np.ndarray,
               poses: np.ndarray, observed: tuple[int, ...], directions) -> np.ndarray:
    """Scales `(n, 3)` to start a `fit_spine_levels` from, read off the data: between each
    pair of consecutive observed bodies (the base counts as observed) the joints in between
    share one scale per direction, the one whose laws' angles at the transmitted moment add up
    to the measured relative rotation (its component about the span's first joint axis; the
    median over load steps). Joints above the highest observed body at or below the loaded
    one (their motion is not seen), and directions not tested, keep 1."""
    scales = np.ones((len(chain.bodies), 3))
    frames = [joint_axes(chain, k) for k in range(len(chain.elements))]
    reference = np.stack([np.asarray(b.reference_pose) for b in chain.bodies])
    # (Every rotation by one compiled call: eagerly, 15 ms each, 1.5 s of a spine's start.)
    reference_rotations = np.asarray(_rotations(jnp.asarray(reference[:, 3:])))
    base_rotation = np.asarray(_rotations(jnp.asarray(chain.base_pose[3:])[None]))[0]
    seen = [-1] + sorted(i for i in observed if i <= loaded)
    for m, name in enumerate(directions):
        d = DIRECTIONS.index(name)
        inverse = _inverse_laws(chain, d)
        for below, above in zip(seen[:-1], seen[1:]):
            span = range(below + 1, above + 1)
            column = observed.index(above)
            turned = np.asarray(_rotations(jnp.asarray(poses[m, :, column, 3:])))
            if below >= 0:
                base = np.asarray(_rotations(jnp.asarray(poses[m, :, observed.index(below), 3:])))
                base_reference = reference_rotations[below]
            else:
                base = np.repeat(base_rotation[None], moments.size, axis=0)
                base_reference = base_rotation
            change = (np.swapaxes(base, 1, 2) @ turned) @ (
                reference_rotations[above].T @ base_reference)
            # The relative rotation's change, in the first joint's frame-1 axes.
            axis_frame = base_reference.T @ frames[span[0]]
            measured = _rotation_vectors(change) @ axis_frame[:, d]
            applied = moments * (axes[m] @ frames[span[0]][:, d])
            kept = (np.abs(measured) >= 1e-6) & (np.abs(applied) >= 1e-9)
            if not np.any(kept):
                continue
            moment, angle = applied[kept], np.abs(measured[kept])
            # Bisection in log s, every load step at once: the span's angle falls as the common
            # scale grows.
            low, high = np.full(angle.shape, np.log(0.05)), np.full(angle.shape, np.log(20.0))
            for _ in range(60):
                middle = 0.5 * (low + high)
                larger = np.abs(sum(inverse(k, moment / np.exp(middle)) for k in span)) > angle
                low, high = np.where(larger, middle, low), np.where(larger, high, middle)
            scales[list(span), d] = np.exp(np.median(0.5 * (low + high)))
    return scales


def spans(chain: SpatialChain, loaded: int, observed: tuple[int, ...]) -> list[list[int]]:
    """The joints between consecutive observed bodies (the base counts as observed), up to the
    loaded body: the runs of joints whose motions the data see only together."""
    seen = [-1] + sorted(i for i in observed if i <= loaded)
    if seen[-1] != loaded:
        seen.append(loaded)
    return [list(range(below + 1, above + 1)) for below, above in zip(seen[:-1], seen[1:])]


def _check_moments(moments: np.ndarray) -> None:
    middle = moments.size // 2
    if (moments.ndim != 1 or moments.size % 2 == 0 or moments[middle] != 0
            or np.any(np.diff(moments) <= 0)):
        raise ValueError("moments: expected increasing load steps with zero in the middle, as "
                         "spineid.load_steps(moment, steps) gives them")


def fit_spine_levels(chain: SpatialChain, loaded: str, moments, poses, *, observed=None,
                     directions=DIRECTIONS, noise=None, start="data",
                     solver: LevenbergMarquardt | None = None,
                     progress: bool = False) -> SpineFit:
    """Fit each joint's rotational stiffness scales (module docstring) to measured poses.

    **Arguments:** `chain` (the model whose laws are scaled: table bushings of one layout,
    no gravity),
    `loaded` (the body carrying the moment, e.g. `"T1"`), `moments` (N m, `(k,)`, as
    `spineid.load_steps` gives them), `poses` (`(m, k, b, 6)`: for each of the `m` `directions`
    (names of `DIRECTIONS`, about the axes of the loaded body's joint frame), each moment and
    each of the `b` `observed` bodies (names, default all), the measured pose `[x, y, z, a1,
    a2, a3]` in m and rad), `noise` (per channel, SI: `x`, `y`, `z` in m, `a1`, `a2`, `a3` in rad,
    or `position` and `angle` for three channels each; default 0.1 mm and 0.1 degree), `start` (`(n, 3)` scales; default `"data"`: `data_start`, read off the measured
    relative rotations; `"model"`: all 1; from a start given either way the data's start is
    tried too, and the better optimum reported with a warning), `solver` (a
    `LevenbergMarquardt`),
    `progress` (print each iteration; the first waits for the compilation).

    **Returns:** a `SpineFit`. Bad shapes, unknown bodies or directions raise `ValueError`.
    """
    started = time.perf_counter()
    solver = LevenbergMarquardt() if solver is None else solver
    check_solver("fit_spine_levels", solver, (LevenbergMarquardt,),
                 "a spineid.LevenbergMarquardt (its options drive the stepwise solve through "
                 "the equilibria)")
    k = chain.body_index(loaded, "loaded")
    check_sweepable(chain, "fit_spine_levels")
    if not all(isinstance(element, TableBushing) for element in chain.elements):
        raise ValueError("fit_spine_levels: every joint must be a table bushing (its laws are "
                         "scaled)")
    names = chain.body_names[1:]
    observed = tuple(names if observed is None else observed)
    if not observed or len(set(observed)) != len(observed):
        raise ValueError(f"observed {list(observed)}: expected distinct body names, at least "
                         "one")
    indices = tuple(chain.body_index(name, "observed") for name in observed)
    moments = np.asarray(moments, dtype=float)
    _check_moments(moments)
    unknown = [d for d in directions if d not in DIRECTIONS]
    if unknown or not directions:
        raise ValueError(f"directions {list(directions)}: expected names of {list(DIRECTIONS)}")
    poses = np.asarray(poses, dtype=float)
    expected = (len(directions), moments.size, len(observed), 6)
    if poses.shape != expected:
        raise ValueError(f"poses of shape {poses.shape}: expected {expected} (directions, "
                         "moments, observed bodies, pose)")
    noise = check_noise(_CHANNELS, DEFAULT_POSE_NOISE | grouped_noise(noise or {}, POSE_GROUPS))
    sigma = np.array([noise[c] for c in _CHANNELS])
    n = len(chain.bodies)
    frame = joint_axes(chain, k)
    axes = np.stack([frame[:, DIRECTIONS.index(d)] for d in directions])
    from_data = data_start(chain, k, moments, axes, poses, indices, directions)
    given = not (isinstance(start, str) and start == "data")
    if isinstance(start, str) and start not in ("data", "model"):
        raise ValueError(f"start {start!r}: expected 'data', 'model' or ({n}, 3) scales")
    if isinstance(start, str):
        start = from_data if start == "data" else np.ones((n, 3))
    start = np.asarray(start, dtype=float)
    if start.shape != (n, 3) or np.any(~(start > 0)):
        raise ValueError(f"start: expected 'data', 'model' or ({n}, 3) positive scales, got "
                         f"shape {start.shape}")
    objective = _SpineObjective(chain, jnp.asarray(moments), jnp.asarray(axes),
                                jnp.asarray(poses), jnp.asarray(sigma), k, indices)

    skipped = []  # starts whose solve ended without equilibrium in some load step (its checks
    # traced as NaN: a pose at the Euler-angle singularity, measured from 5x the truth), or
    # that a check raising inside it stopped: skipped with a warning, as every fit does

    def minimise(objective, u0, what):
        try:
            solution = solver.solve(objective, u0, progress)
        except eqx.EquinoxRuntimeError as error:
            skipped.append(f"{what} was skipped: a check inside its solve stopped it "
                           f"({compiled_check_message(error)})")
            return None
        if failed_cost(float(solution.cost), 0.5):
            skipped.append(f"{what} was skipped: its solve ended where load steps find no "
                           "equilibrium (a pose at the singularity of the Euler angles, or "
                           "moments the joints cannot carry there)")
            return None
        return solution

    solution = minimise(objective, jnp.log(jnp.asarray(start).ravel()),
                        "the given start" if given else "the start")
    messages = []
    if given:
        # A start the user gives may lie in another basin (measured: from 5x the truth the
        # 4-level fit stopped at an optimum the goodness test accepted, 8 standard errors off);
        # the start read off the data is always tried too, and the better optimum kept.
        read_off = minimise(objective, jnp.log(jnp.asarray(from_data).ravel()),
                            "the start read off the data")
        if read_off is not None and (solution is None or float(read_off.cost) < float(
                solution.cost) - 1e-6 * max(1.0, float(solution.cost))):
            if solution is not None:
                messages.append(
                    f"the given start stopped at a local optimum (cost "
                    f"{float(solution.cost):.6g}); the start read off the data reached a lower "
                    f"one ({float(read_off.cost):.6g}), which is reported")
            solution, start = read_off, from_data
    if solution is None:
        raise ValueError("fit_spine_levels: every start was stopped by a check inside its "
                         f"solve or ended without equilibrium: {'; '.join(skipped)}; give a "
                         "start nearer the truth "
                         "(start=(n, 3) scales)")
    # Joints between unobserved vertebrae are seen only through their sum: the data may be
    # explained as well by scales traded between them (one softer, its neighbour stiffer),
    # a different optimum the local Cramer-Rao errors know nothing of. Starts with the trade
    # made both ways look for one.
    runs = [run for run in spans(chain, k, indices) if len(run) > 1]
    others = []
    for sign in ((1.0, -1.0) if runs else ()):
        pattern = np.zeros((n, 3))
        for run in runs:
            pattern[run] = sign * 0.4 * np.where(np.arange(len(run)) % 2 == 0, 1.0, -1.0)[:, None]
        others.append(minimise(objective, jnp.asarray(np.log(start).ravel() + pattern.ravel()),
                               "a start with scales traded between neighbours"))
    every = [solution] + [other for other in others if other is not None]
    solution = min(every, key=lambda one: float(one.cost))
    others = [one for one in every if one is not solution]
    u = np.asarray(solution.value)
    values = np.exp(u)
    joints = joint_names(chain)
    labels = [f"{joint} {direction}" for joint in joints for direction in DIRECTIONS]
    # (no bounds: the scales are exp(u), so d scale / du is the scale itself, taken where the
    # Jacobian was: `linearised_at`)
    taken = linearised_at(solution)
    slope = values if taken is None else np.exp(np.asarray(taken))
    analysis = analyse_parameters(np.asarray(solution.jacobian) / slope[None, :], values,
                                  labels, ["1"] * len(labels), scales=values)
    covariance, identifiability = analysis.covariance, analysis.identifiability
    stderr = analysis.stderr.copy()  # (NaN below for scales another optimum moves)
    residuals = np.asarray(solution.residuals).reshape(poses.shape)
    predicted = poses + residuals * sigma
    messages = list(analysis.warnings) + messages + skipped
    # An optimum within the 95% profile threshold of the best (2 delta cost < 3.84) whose
    # value of a scale lies beyond 2 standard errors: that scale is not determined.
    undetermined = np.zeros(values.size, bool)
    for other in others:
        if 2.0 * (float(other.cost) - float(solution.cost)) < 3.84:
            apart = np.abs(np.exp(np.asarray(other.value)) - values) > 2 * np.nan_to_num(
                stderr, nan=np.inf)
            undetermined |= apart & np.isfinite(stderr)
    if np.any(undetermined):
        stderr[undetermined] = np.nan
        identifiability.identifiable[undetermined] = False
        names = [labels[i] for i in np.flatnonzero(undetermined)]
        messages.append(
            f"{len(names)} scales are not determined: optima as good as the best (within the "
            f"95% profile threshold) have them more than 2 standard errors away, so their "
            f"Cramer-Rao errors do not hold: {', '.join(names[:8])}"
            f"{' ...' if len(names) > 8 else ''}")
    if runs:
        hidden = sum(len(run) for run in runs)
        messages.append(
            f"{hidden} joints are seen only through runs between observed vertebrae; their "
            "scales are told apart only by the laws' nonlinearity, and the fit can stop at a "
            "local optimum that the goodness-of-fit test does not reject, with standard errors "
            "that do not hold: try other starts (start=...) or observe the vertebrae in "
            "between")
    correlation = correlation_matrix(covariance, stderr)
    if not bool(solution.converged):
        messages.append(not_converged_note(solver.max_steps, per_pass=False))
    if np.any(failed(residuals)):
        messages.append("some load steps found no equilibrium at the fitted scales")
    rows = [residuals[:, :, b].reshape(-1, 6) for b in range(len(observed))]
    goodness = assess_fit(rows, _CHANNELS, identifiability.rank, noise_given=True,
                          sigma=dict(zip(_CHANNELS, map(float, sigma))),
                          units=dict(zip(_CHANNELS, ("m",) * 3 + ("rad",) * 3)), ordered=False)
    return SpineFit(names=labels, units=["1"] * len(labels), start=start.ravel(),
                    values=values, stderr=stderr, at_bound=np.zeros(values.size, bool),
                    correlation=correlation, cost=0.5 * float(np.sum(residuals**2)),
                    n_data=int(poses.size), converged=bool(solution.converged),
                    n_steps=int(solution.steps), noise=noise, noise_estimated=False,
                    identifiability=identifiability,
                    predicted=predicted, measured=poses, observed=observed, warnings=messages,
                    seconds=time.perf_counter() - started, goodness_of_fit=goodness)
