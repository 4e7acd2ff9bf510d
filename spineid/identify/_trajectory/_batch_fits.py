"""Many fits of one kind: on an executor (`fit_batch`; `fit_many` with `executor=`), or all at
once in one vmapped solve (`fit_many` without an executor).

On an executor: a population of specimens, a Monte-Carlo study of the estimator,
bootstrap resamples. Each fit is a whole `spineid.fit` (its verdict and standard errors
included) run in a loop inside its chunk's task: measured, a loop of warm fits is about four
times faster than the same fits vmapped (`fit_many` without an executor), because a vmapped
solve runs every fit of the batch for as many steps as the slowest needs.
"""

import dataclasses
import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...executors._batch import BatchResult, run_batch
from ...executors._executors import AbstractExecutor
from .._solvers import (
    as_solver,
    BATCH_SOLVER,
    check_solver,
    JaxoptLevenbergMarquardt,
    OptimistixLevenbergMarquardt,
)
from .._solvers._routines import _solve_jaxopt_lm, _solve_lm
from ._fit import _noise_array, fit
from ._objective import _evaluate, forward_objective
from ._problem import FitProblem


def _number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def fit_record(job: tuple) -> dict:
    """The JSON record of `spineid.fit(problem, solver)` for `job = (problem, solver)`: names,
    values, stderr (SI; `None` where not identifiable), cost, converged, explains_data,
    noise, steps, solver, warnings, the verdict's `level` and the `noise_model` (channel ->
    its entry of `GoodnessOfFit.noise_model`; `{}` for white noise)."""
    problem, solver = job
    result = fit(problem, solver)
    verdict = result.goodness_of_fit
    return {"names": list(result.names), "values": [float(v) for v in result.values],
            "stderr": [_number(e) for e in result.stderr], "cost": _number(result.cost),
            "converged": bool(result.converged),
            "explains_data": bool(verdict.explains_data), "level": verdict.level,
            "noise_model": {c: dict(entry) for c, entry in verdict.noise_model.items()},
            "noise": {c: float(v) for c, v in result.noise.items()},
            "steps": int(result.n_steps), "solver": result.solver,
            "warnings": list(result.warnings)}


@dataclasses.dataclass
class BatchFits:
    """The fits of `fit_batch`, in the order of the problems: `names`, `values` and `stderr`
    (`(n, p)`, SI; NaN for a failed fit and for a parameter not identifiable), `cost`,
    `converged`, `explains_data` (`(n,)`; False for a failed fit), `errors` (`{index: error}`
    of the fits that raised or whose task failed), `records` (each fit's JSON record) and
    `batch` (the `BatchResult`: executor, chunks run and resumed, time).

    Not a `spineid.AbstractResult`: a table of many fits' numbers, each fit's result being a
    `FitResult` (its record written by `fit_record`).
    """

    names: list[str]
    values: np.ndarray
    stderr: np.ndarray
    cost: np.ndarray
    converged: np.ndarray
    explains_data: np.ndarray
    errors: dict
    records: list
    batch: BatchResult

    def summary(self) -> str:
        """How many fits converged and explain their data, the failures, where they ran."""
        n = len(self.cost)
        lines = [f"{n} fit(s): {int(self.converged.sum())} converged, "
                 f"{int(self.explains_data.sum())} explain their data, {len(self.errors)} "
                 f"failed; {self.batch.summary()}"]
        lines += [f"fit {index}: {error}" for index, error in sorted(self.errors.items())[:5]]
        if len(self.errors) > 5:
            lines.append(f"... and {len(self.errors) - 5} more failures")
        return "\n".join(lines)


def fit_batch(problems, solver="auto", *, executor: AbstractExecutor | None = None,
              chunk: int | None = None, out=None, resume: bool = False,
              overwrite: bool = False, progress: bool = False) -> BatchFits:
    """`spineid.fit` of each of `problems` (a sequence of `FitProblem`s with the same free
    parameters: specimens, or one problem's noise draws), in chunks of `chunk` fits on
    `executor` (`spineid.Local()`, the default; `spineid.Local(threads=2)`, two fits at once
    on a 2-core machine; or `spineid.Dask(...)`), each chunk's
    records streamed to `out` (a folder) as it completes; `resume=True` continues an
    interrupted batch from that folder (refused for another batch); `solver` as for `fit`.

    A fit that raises is a failure (its error in `errors`), and the batch goes on. The numbers
    do not depend on the executor (the same compiled programs run them).

    **Returns:** `BatchFits`. Raises `ValueError` for problems that are not `FitProblem`s or
    free different parameters.
    """
    problems = list(problems)
    if not problems:
        raise ValueError("fit_batch: no problems")
    bad = [i for i, p in enumerate(problems) if not isinstance(p, FitProblem)]
    if bad:
        raise ValueError(f"fit_batch: problems {bad[:5]} are not FitProblems")
    names = problems[0].names
    other = [i for i, p in enumerate(problems) if p.names != names]
    if other:
        raise ValueError(f"fit_batch: problems {other[:5]} free {problems[other[0]].names}, "
                         f"the first frees {names}; one batch fits the same parameters")
    solver = as_solver(solver)
    batch = run_batch(fit_record, [(problem, solver) for problem in problems],
                      executor=executor, chunk=chunk, out=out, resume=resume,
                      overwrite=overwrite, progress=progress)
    n, p = len(problems), len(names)
    values, stderr = np.full((n, p), np.nan), np.full((n, p), np.nan)
    cost = np.full(n, np.nan)
    converged, explains = np.zeros(n, bool), np.zeros(n, bool)
    errors = {}
    for record in batch.records:
        i = record["index"]
        if not record["ok"]:
            errors[i] = record["error"]
            continue
        result = record["result"]
        values[i] = result["values"]
        stderr[i] = [np.nan if e is None else e for e in result["stderr"]]
        cost[i] = np.nan if result["cost"] is None else result["cost"]
        converged[i], explains[i] = result["converged"], result["explains_data"]
    return BatchFits(names=list(names), values=values, stderr=stderr, cost=cost,
                     converged=converged, explains_data=explains, errors=errors,
                     records=[r.get("result") for r in batch.records], batch=batch)


@eqx.filter_jit
def _solve_batch(objective, batch, solver: str, rtol: float, atol: float, max_steps: int):
    # vmapped Levenberg-Marquardt over data sets; at module level so that a second call with
    # the same problem and shapes reuses the compilation.
    def one(case_data):
        single = eqx.tree_at(lambda o: o.data, objective, case_data)
        u0 = jnp.zeros_like(single.transform.start)
        if solver == "optimistix-lm":
            u, converged, _ = _solve_lm(single, u0, rtol, atol, max_steps, False)
        else:
            u, converged, _ = _solve_jaxopt_lm(single, u0, rtol, atol, max_steps)
        theta = single.transform.to_physical(u)
        jacobian, residuals, _ = _evaluate(single, theta)
        return theta, jacobian, converged, 0.5 * jnp.sum(residuals**2)

    return jax.vmap(one)(batch)


def fit_many(problem: FitProblem, data: Sequence[np.ndarray],
             solver=BATCH_SOLVER, *, executor=None, chunk: int | None = None, out=None,
             resume: bool = False) -> dict[str, np.ndarray]:
    """Fit the same problem to a batch of data sets (e.g. noise draws for a Monte Carlo study).

    **Arguments:** `data`, one array per load case of shape `(batch, k, c)`, `NaN` where the
    problem's data are (values not measured); the problem's noise must be given.
    - Without `executor`: all at once, `vmap` over LM solves; `solver` a vmappable
      Levenberg-Marquardt that carries its options: `spineid.OptimistixLevenbergMarquardt(...)`
      (the default, `"optimistix-lm"`) or `spineid.JaxoptLevenbergMarquardt(...)`
      (`"jaxopt-lm"`), each with `max_steps`, `rtol`, `atol`.
    - With `executor` (`spineid.Local()` or `spineid.Dask(...)`): each data set a whole
      `spineid.fit` with `solver` (any; the vmappable default becomes `"lm"`), in chunks
      (`chunk`, default the executor's `default_chunk`) on the executor, streamed to the
      folder `out` and resumable from it (`resume`): `fit_batch`. Measured, a loop of fits is
      about four times faster than the vmap on a CPU.

    **Returns:** `values` `(batch, p)`, Cramer-Rao `stderr` `(batch, p)` (full-rank problems;
    NaN where the Fisher information is singular), `converged` `(batch,)`, `cost` `(batch,)`;
    with an executor also `explains_data` `(batch,)` and `errors` (`{index: error}` of fits
    that failed: their rows are NaN). Raises `ValueError` for another solver (without an
    executor) or a data array per load case missing.
    """
    if executor is not None:
        if solver is BATCH_SOLVER:
            solver = "lm"
        sigma = _noise_array(problem, None)
        del sigma  # (checked: the noise must be given)
        sizes = {np.shape(d)[0] if np.ndim(d) == 3 else None for d in data}
        if len(data) != len(problem.measurements) or None in sizes or len(sizes) != 1:
            raise ValueError(f"data: one (batch, k, c) array per load case ("
                             f"{len(problem.measurements)}), with the same batch size")
        problems = []
        for b in range(sizes.pop()):
            measurements = []
            for case, (d, measurement) in enumerate(zip(data, problem.measurements)):
                d = np.asarray(d[b], dtype=float)
                if d.shape != measurement.values.shape:
                    raise ValueError(f"data of load case {case}: shape {np.shape(data[case])}, "
                                     f"expected (batch, "
                                     f"{', '.join(map(str, measurement.values.shape))})")
                measurements.append(dataclasses.replace(measurement, values=d))
            problems.append(problem.with_measurements(measurements))
        fits = fit_batch(problems, solver, executor=executor, out=out, resume=resume,
                         **({} if chunk is None else {"chunk": chunk}))
        return {"values": fits.values, "stderr": fits.stderr, "converged": fits.converged,
                "cost": fits.cost, "explains_data": fits.explains_data,
                "errors": fits.errors}
    if isinstance(solver, str) and solver in ("optimistix-lm", "jaxopt-lm"):
        solver = as_solver(solver)
    check_solver("fit_many", solver, (OptimistixLevenbergMarquardt, JaxoptLevenbergMarquardt),
                 "spineid.OptimistixLevenbergMarquardt(...) ('optimistix-lm') or "
                 "spineid.JaxoptLevenbergMarquardt(...) ('jaxopt-lm'), the solvers that run "
                 "vmapped over a batch, or an executor (then any solver, fit by fit)")
    sigma = _noise_array(problem, None)
    objective = forward_objective(problem, sigma)
    if len(data) != len(problem.measurements):
        raise ValueError(f"{len(data)} data arrays for {len(problem.measurements)} load cases")
    batch = []
    for case, (d, measurement) in enumerate(zip(data, problem.measurements)):
        d = np.asarray(d, dtype=float)
        if d.ndim != 3 or d.shape[1:] != measurement.values.shape:
            raise ValueError(f"data of load case {case}: shape {d.shape}, expected (batch, "
                             f"{', '.join(map(str, measurement.values.shape))})")
        if np.any(np.isnan(d) != np.isnan(measurement.values)[None]):
            raise ValueError(f"data of load case {case}: values missing (NaN) where the "
                             "problem's data hold a value, or the other way round; a vmapped "
                             "batch shares the problem's missing values")
        # Padded as the objective's records are (repeated last sample, weight zero); a value
        # not measured held as 0, as the objective's data hold it.
        length = objective.data[case].shape[0]
        batch.append(jnp.asarray(np.pad(np.nan_to_num(d, nan=0.0),
                                        ((0, 0), (0, length - d.shape[1]), (0, 0)),
                                        mode="edge")))
    batch = tuple(batch)

    theta, jacobian, converged, cost = _solve_batch(objective, batch, solver.name,
                                                    solver.rtol, solver.atol, solver.max_steps)
    fisher = np.einsum("bni,bnj->bij", np.asarray(jacobian), np.asarray(jacobian))
    stderr = np.full(np.shape(theta), np.nan)
    for b, information in enumerate(fisher):
        if np.linalg.cond(information) < 1e12:
            stderr[b] = np.sqrt(np.diag(np.linalg.inv(information)))
    return {"values": np.asarray(theta), "stderr": stderr, "converged": np.asarray(converged),
            "cost": np.asarray(cost)}
