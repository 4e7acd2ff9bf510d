"""Quasi-static load cases of a motion segment: the nine tests of Kecskemethy, Lange and
Grabner (section 4) as equilibria of a spatial pair, solved by Newton's method and vmapped.

The upper vertebra of a `SpatialPair` carries a constant load `[F, M]` (N, N m; lower-body =
ground axes, force at its centre of mass, which is also its frame origin and the landmark of
the displacements). Its equilibrium pose `q` solves

    dU/dq (q) = [F, EW(a)^T M],

the balance of the elastic generalized forces of every element (disc bushing, ligaments, facet
contacts) and gravity with the generalized load (Christophy et al. supplement S.18 for the
moment's generalized force). The nine cases of the paper, in spineid's axes (e1 anterior,
e2 superior, e3 right; so the paper's x, y, z translations are our x, z, y):

| case | load | | case | load |
|---|---|---|---|---|
| AS  anterior shear   | +Fx |   | LB  lateral bending | +Mx (to the right) |
| PS  posterior shear  | -Fx |   | FLX flexion         | -Mz (forward bending) |
| LS  lateral shear    | +Fz |   | EXT extension       | +Mz |
| TNS tension          | +Fy |   | AR  axial rotation  | +My |
| CMP compression      | -Fy |   |                     | |

with `F = 20 N` and `M = 1.8 N m` by default. The displacements of a case are the change of the
upper body's pose from its reference: the offset of its centre (m, lower-body axes) and the
1-2-3 Euler angles of its rotation from the reference orientation (rad) - the columns
`dx, dy, dz, b1, b2, b3` of a quasi-static test file (`spineid._stiffness_fit`).
"""

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

from ._rotations import E_W, euler123_angles, euler123_rotation
from ._spatial_elements import FacetContacts, SpatialLigaments
from ._spatial_pair import SpatialPair

LOAD_CASES = ("AS", "PS", "LS", "TNS", "CMP", "LB", "FLX", "EXT", "AR")
_CASE_LOADS = {  # (load component index into [Fx, Fy, Fz, Mx, My, Mz], sign)
    "AS": (0, 1.0), "PS": (0, -1.0), "LS": (2, 1.0), "TNS": (1, 1.0), "CMP": (1, -1.0),
    "LB": (3, 1.0), "FLX": (5, -1.0), "EXT": (5, 1.0), "AR": (4, 1.0),
}
MAIN_COMPONENT = {case: index for case, (index, _) in _CASE_LOADS.items()}
"""The displacement component each case mainly moves (its load's own direction)."""

MORONEY_STIFFNESS = {"FLX": 0.43, "EXT": 0.73, "LB": 0.68, "AR": 1.16}
"""Rotational stiffness (N m/deg) of intact lower cervical segments that the AnyBody cervical
model derives from Moroney et al. 1988 (J Biomech 21:769), for comparison."""


def load_cases(force: float = 20.0, moment: float = 1.8) -> Float[Array, "9 6"]:
    """The generalized loads `[Fx, Fy, Fz, Mx, My, Mz]` (N, N m) of the nine cases
    (`LOAD_CASES` order; module docstring), for a shear/axial `force` and a `moment`."""
    if not (force > 0 and moment > 0 and math.isfinite(force) and math.isfinite(moment)):
        raise ValueError(f"load cases: force {force!r} N and moment {moment!r} N m must be "
                         "positive numbers")
    loads = np.zeros((len(LOAD_CASES), 6))
    for row, case in enumerate(LOAD_CASES):
        index, sign = _CASE_LOADS[case]
        loads[row, index] = sign * (force if index < 3 else moment)
    return jnp.asarray(loads)


def equilibrium_residual(pair: SpatialPair, q: Float[Array, "6"], load: Float[Array, "6"]
                         ) -> Float[Array, "6"]:
    """`dU/dq - [F, EW(a)^T M]` (N, N m): zero at an equilibrium of `pair` under `load`."""
    elastic = jax.grad(pair.potential_energy, argnums=1)(jnp.zeros((), q.dtype), q)
    return elastic - jnp.concatenate([load[:3], E_W(q[3:]).T @ load[3:]])


class Equilibrium(eqx.Module):
    """An equilibrium solve: `pose` (`(6,)`, the upper body's `[x, y, z, a1, a2, a3]`),
    `residual` (`(6,)`, N and N m, the imbalance left), `converged` (bool) and `steps`."""

    pose: Float[Array, "6"]
    residual: Float[Array, "6"]
    converged: Array
    steps: Array


def equilibrium(pair: SpatialPair, load: Float[Array, "6"], *, start=None, atol: float = 1e-9,
                max_steps: int = 100) -> Equilibrium:
    """The equilibrium pose of the upper body of `pair` under the constant `load` (`(6,)`,
    `[Fx, Fy, Fz, Mx, My, Mz]` in N and N m, ground axes): Newton's method (optimistix) on
    `equilibrium_residual` from `start` (default the reference pose).

    Differentiable with respect to the model's parameters and the load by the implicit function
    theorem: the pose is returned as one more Newton step `q* - J(q*)^-1 r(q*)` from the
    converged `q*`, whose derivative is `-J^-1 dr/dtheta` (forward and reverse mode). Where
    Newton fails the pose is not finite and `converged` is false, without raising, so that an
    optimiser can step back. `vmap`-able over loads and models. `converged` is false when
    Newton did not bring every residual below `atol` (N, N m) in `max_steps`: a load the segment
    cannot carry (a moment past the range of its elements) or an unstable model.
    """
    start = pair.upper.reference_pose if start is None else start
    fixed_pair, fixed_load = jax.lax.stop_gradient((pair, load))

    def residual(q, args):
        return equilibrium_residual(fixed_pair, q, fixed_load)

    solver = optx.Newton(rtol=1e-12, atol=atol)
    solution = optx.root_find(residual, solver, jax.lax.stop_gradient(start),
                              max_steps=max_steps, throw=False)
    root = solution.value
    jacobian = jax.jacfwd(residual)(root, None)
    step = jnp.linalg.solve(jacobian, equilibrium_residual(pair, root, load))
    pose = root - step
    left = residual(root, None)
    converged = ((solution.result == optx.RESULTS.successful)
                 & jnp.all(jnp.abs(left) <= 10 * atol) & jnp.all(jnp.isfinite(pose)))
    return Equilibrium(pose, left, converged, solution.stats["num_steps"])


def pose_change(pair: SpatialPair, q: Float[Array, "6"]) -> Float[Array, "6"]:
    """Displacement of the upper body from its reference pose: the offset of its centre (m) in
    lower-body axes and the 1-2-3 Euler angles (rad) of its rotation from the reference
    orientation, in the reference body axes (module docstring)."""
    lower = euler123_rotation(pair.lower.reference_pose[3:])
    reference = pair.upper.reference_pose
    offset = lower.T @ (q[:3] - reference[:3])
    turn = euler123_rotation(reference[3:]).T @ euler123_rotation(q[3:])
    return jnp.concatenate([offset, euler123_angles(turn)])


def _element_outputs(pair: SpatialPair, q):
    lower = pair.lower.reference_pose
    facets = [e.contact_forces(lower, q) for e in pair.elements if isinstance(e, FacetContacts)]
    ligaments = [e.tensions(lower, q) for e in pair.elements if isinstance(e, SpatialLigaments)]
    empty = jnp.zeros(0, dtype=q.dtype)
    return (jnp.concatenate(facets) if facets else empty,
            jnp.concatenate(ligaments) if ligaments else empty)


@eqx.filter_jit
def solve_load_cases(pair: SpatialPair, loads: Float[Array, "k 6"]):
    """Equilibria of `pair` under every row of `loads` (`(k, 6)`), vmapped.

    **Returns:** `(equilibria, displacements, facet_forces, ligament_tensions)`: an
    `Equilibrium` with a leading axis `k`, the pose changes `(k, 6)` (`pose_change`), the
    elastic contact forces `(k, n_facets)` (N) and ligament tensions `(k, n_ligaments)` (N).
    """
    def one(load):
        solved = equilibrium(pair, load)
        return (solved, pose_change(pair, solved.pose)) + _element_outputs(pair, solved.pose)

    return jax.vmap(one)(loads)


@dataclasses.dataclass
class SegmentStudy:
    """The nine load cases of a segment (`segment_study`).

    Fields: `cases` (names), `loads` (`(k, 6)`, N and N m), `poses` (`(k, 6)`, the upper
    body's equilibrium poses), `displacements` (`(k, 6)`, m and rad; `pose_change`),
    `converged` (`(k,)`), `facet_forces` (`(k, n_facets)`, N),
    `ligament_tensions` (`(k, n_ligaments)`, N), `facet_names`, `ligament_names`.
    """

    cases: tuple[str, ...]
    loads: np.ndarray
    poses: np.ndarray
    displacements: np.ndarray
    converged: np.ndarray
    facet_forces: np.ndarray
    ligament_tensions: np.ndarray
    facet_names: tuple[str, ...] = ()
    ligament_names: tuple[str, ...] = ()

    def main_displacements(self) -> np.ndarray:
        """Each case's displacement along its own load (m or rad), `(k,)`, signed so that
        positive means "moved the way it was pushed"."""
        return np.array([np.sign(self.loads[k, MAIN_COMPONENT[case]])
                         * self.displacements[k, MAIN_COMPONENT[case]]
                         for k, case in enumerate(self.cases)])

    def rotational_stiffness(self) -> dict[str, float]:
        """Secant stiffness `|M| / main rotation` (N m/deg) of the moment cases."""
        main = self.main_displacements()
        return {case: float(abs(self.loads[k, MAIN_COMPONENT[case]]) / math.degrees(main[k]))
                for k, case in enumerate(self.cases) if MAIN_COMPONENT[case] >= 3}

    def warnings(self) -> list[str]:
        """Plain-language statements about cases that need care."""
        messages = []
        for k, case in enumerate(self.cases):
            if not self.converged[k]:
                messages.append(f"{case}: no equilibrium found (Newton did not converge); its "
                                "displacements are not a result")
        if self.facet_forces.size:
            for k, case in enumerate(self.cases):
                if self.converged[k] and np.all(self.facet_forces[k] == 0):
                    messages.append(f"{case}: the facets are apart (no contact): this case says "
                                    "nothing about the facet contact stiffness")
        return messages

    def summary(self) -> dict:
        """JSON-ready summary: per case the loads, displacements (mm, deg), contact forces and
        tensions; the rotational stiffnesses against `MORONEY_STIFFNESS`; warnings."""
        rows = []
        for k, case in enumerate(self.cases):
            d = self.displacements[k]
            rows.append({
                "case": case, "converged": bool(self.converged[k]),
                "load": self.loads[k].tolist(),
                "translation_mm": (1e3 * d[:3]).tolist(),
                "rotation_deg": np.degrees(d[3:]).tolist(),
                "facet_force_N": dict(zip(self.facet_names, self.facet_forces[k].tolist())),
                "ligament_tension_N": dict(zip(self.ligament_names,
                                               self.ligament_tensions[k].tolist())),
            })
        stiffness = self.rotational_stiffness()
        comparison = {case: {"model": stiffness[case], "moroney_anybody": reference,
                             "ratio": stiffness[case] / reference}
                      for case, reference in MORONEY_STIFFNESS.items() if case in stiffness}
        return {"cases": rows, "rotational_stiffness_N_m_per_deg": comparison,
                "warnings": self.warnings()}


def segment_study(pair: SpatialPair, force: float = 20.0, moment: float = 1.8,
                  facet_names=(), ligament_names=()) -> SegmentStudy:
    """Solve the nine load cases (`LOAD_CASES`, `load_cases(force, moment)`) of `pair`, vmapped,
    and collect them in a `SegmentStudy`."""
    loads = load_cases(force, moment)
    solved, displacements, facet_forces, tensions = solve_load_cases(pair, loads)
    return SegmentStudy(LOAD_CASES, np.asarray(loads), np.asarray(solved.pose),
                        np.asarray(displacements),
                        np.asarray(solved.converged), np.asarray(facet_forces),
                        np.asarray(tensions), tuple(facet_names), tuple(ligament_names))
