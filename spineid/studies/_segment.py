"""Quasi-static load cases of a motion segment: the nine tests of Kecskemethy, Lange and
Grabner (section 4) as equilibria of a spatial pair (`spineid.equilibrium`), vmapped.

The nine cases of the paper, in spineid's axes (e1 anterior, e2 superior, e3 right; so the
paper's x, y, z translations are our x, z, y):

| case | load | | case | load |
|---|---|---|---|---|
| AS  anterior shear   | +Fx |   | LB  lateral bending | +Mx (to the right) |
| PS  posterior shear  | -Fx |   | FLX flexion         | -Mz (forward bending) |
| LS  lateral shear    | +Fz |   | EXT extension       | +Mz |
| TNS tension          | +Fy |   | AR  axial rotation  | +My |
| CMP compression      | -Fy |   |                     | |

with `F = 20 N` and `M = 1.8 N m` by default. The displacements of a case are the change of the
upper body's pose from its reference (`spineid.pose_change`): the columns
`dx, dy, dz, b1, b2, b3` of a quasi-static test file.
"""

import dataclasses
import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..elements._ligaments_facets import FacetContacts, SpatialLigaments
from ..models._spatial_pair import SpatialPair
from ..simulation._equilibrium import equilibrium, equilibrium_change


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
        solved = equilibrium(pair, load)  # (a case without equilibrium is reported missing)
        return (solved, equilibrium_change(pair, solved)) + _element_outputs(pair, solved.pose)

    return jax.vmap(one)(loads)


@dataclasses.dataclass
class SegmentStudy:
    """The nine load cases of a segment (`segment_study`).

    Fields: `cases` (names), `loads` (`(k, 6)`, N and N m), `poses` (`(k, 6)`, the upper
    body's equilibrium poses), `displacements` (`(k, 6)`, m and rad; `pose_change`),
    `converged` (`(k,)`), `facet_forces` (`(k, n_facets)`, N),
    `ligament_tensions` (`(k, n_ligaments)`, N), `facet_names`, `ligament_names`, `timing`
    (s: `first_with_compilation`, the first solve, and `warm_best_of_5`, the best of five
    compiled ones; empty when not measured).
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
    timing: dict = dataclasses.field(default_factory=dict)

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
        tensions; the rotational stiffnesses against `MORONEY_STIFFNESS`; warnings. A number
        that does not exist (a case without equilibrium has no pose) is `None` (JSON null)."""

        def numbers(values):
            return [float(v) if np.isfinite(v) else None for v in np.asarray(values).ravel()]

        def number(value):
            return float(value) if np.isfinite(value) else None

        rows = []
        for k, case in enumerate(self.cases):
            d = self.displacements[k]
            rows.append({
                "case": case, "converged": bool(self.converged[k]),
                "load": self.loads[k].tolist(),
                "translation_mm": numbers(1e3 * d[:3]),
                "rotation_deg": numbers(np.degrees(d[3:])),
                "facet_force_N": dict(zip(self.facet_names, numbers(self.facet_forces[k]))),
                "ligament_tension_N": dict(zip(self.ligament_names,
                                               numbers(self.ligament_tensions[k]))),
            })
        stiffness = self.rotational_stiffness()
        comparison = {case: {"model": number(stiffness[case]), "moroney_anybody": reference,
                             "ratio": number(stiffness[case] / reference)}
                      for case, reference in MORONEY_STIFFNESS.items() if case in stiffness}
        summary = {"cases": rows, "rotational_stiffness_N_m_per_deg": comparison,
                   "warnings": self.warnings()}
        if self.timing:
            summary["timing_s"] = dict(self.timing)
        return summary


def segment_study(pair: SpatialPair, force: float = 20.0, moment: float = 1.8,
                  facet_names=(), ligament_names=(), *, timed: bool = False) -> SegmentStudy:
    """Solve the nine load cases (`LOAD_CASES`, `load_cases(force, moment)`) of `pair`, vmapped,
    and collect them in a `SegmentStudy`; with `timed`, also measure the first solve (with its
    compilation) and the best of five compiled ones (`SegmentStudy.timing`, s)."""
    loads = load_cases(force, moment)
    start = time.perf_counter()
    solved, displacements, facet_forces, tensions = jax.block_until_ready(
        solve_load_cases(pair, loads))
    timing = {}
    if timed:
        timing["first_with_compilation"] = time.perf_counter() - start
        warm = []
        for _ in range(5):
            start = time.perf_counter()
            jax.block_until_ready(solve_load_cases(pair, loads))
            warm.append(time.perf_counter() - start)
        timing["warm_best_of_5"] = min(warm)
    return SegmentStudy(LOAD_CASES, np.asarray(loads), np.asarray(solved.pose),
                        np.asarray(displacements),
                        np.asarray(solved.converged), np.asarray(facet_forces),
                        np.asarray(tensions), tuple(facet_names), tuple(ligament_names), timing)
