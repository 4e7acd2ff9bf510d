"""The least-squares breakpoints of a continuous piecewise-linear law, by variable projection.

A continuous piecewise-linear law with interior breakpoints `b_1 < ... < b_m` is, between its
end nodes and beyond them (the end phases continue), the linear combination
`M(x) = a + s x + sum_j d_j ramp(x - b_j)` (`PiecewiseLinearLaw` with no smoothing; `ramp(u) =
max(0, u)`). For given breakpoints the loads enter linearly, so the best loads are a linear least
squares solution and the cost is a function of the breakpoints alone (variable projection,
Golub and Pereyra 1973). With one breakpoint that function is searched exactly: between two
consecutive data displacements the data split the same way, and the best continuous law with its
breakpoint in that interval is either the two separately fitted lines, where they meet inside the
interval, or the law with its breakpoint at a data point (Hudson 1966, "Fitting segmented curves
whose join points have to be estimated", J. Am. Stat. Assoc. 61: 1097-1129). Every interval is
checked at once from running sums of the data, O(n log n) for n points. With more breakpoints,
each is placed exactly with the others held (the same search with the others' ramps as extra
columns), in turn, from the given start and (for two) a grid start, until no move lowers the
cost: the exact optimum for one breakpoint, a coordinate-wise one for more.

Extra linear columns (a damper's rate, `c x'`) take part in every least-squares solve.
"""

import numpy as np


def _lstsq_cost(design: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
    return float(np.sum((design @ coefficients - y) ** 2)), coefficients


def design_matrix(x: np.ndarray, breakpoints, extra: np.ndarray | None = None) -> np.ndarray:
    """Columns `[1, x, ramp(x - b_1), ..., ramp(x - b_m), extra...]`, `(n, 2 + m + e)`."""
    columns = [np.ones_like(x), x] + [np.maximum(x - b, 0.0) for b in breakpoints]
    if extra is not None:
        columns += list(np.atleast_2d(extra.T))
    return np.stack(columns, axis=1)


def projected_cost(x, y, breakpoints, extra=None) -> float:
    """The least-squares cost `min_loads sum (M(x_i) - y_i)^2` for given breakpoints."""
    return _lstsq_cost(design_matrix(x, breakpoints, extra), y)[0]


def _batched_costs(gram: np.ndarray, rhs: np.ndarray, yy: float) -> tuple[np.ndarray, np.ndarray]:
    # Costs yy - rhs . coef of many normal-equation systems `(k, p, p)`, solved by pseudo-inverse
    # (a split with too few distinct points on a side is singular, not an error).
    coefficients = np.einsum("kij,kj->ki", np.linalg.pinv(gram, hermitian=True), rhs)
    return yy - np.einsum("ki,ki->k", rhs, coefficients), coefficients


def best_breakpoint(x, y, low: float, high: float, extra=None) -> tuple[float, float]:
    """The breakpoint in `(low, high)` of least cost, exactly (module docstring); `extra`:
    `(n, e)` further linear columns. Returns `(breakpoint, cost)`; `(nan, inf)` when fewer than
    two distinct displacements lie on each side of every candidate."""
    order = np.argsort(x, kind="stable")
    x, y = np.asarray(x, float)[order], np.asarray(y, float)[order]
    # Costs come from running sums, yy - rhs . coef: take out the best straight line first (it
    # lies in every candidate's span, so no cost changes) to keep that difference accurate.
    line = np.stack([np.ones_like(x), x - x.mean()], axis=1)
    y = y - line @ np.linalg.lstsq(line, y, rcond=None)[0]
    base = np.ones((x.size, 1)) if extra is None else np.column_stack(
        [np.ones(x.size), np.asarray(extra, float).reshape(x.size, -1)[order]])
    # Scaled displacements keep the normal equations well conditioned.
    centre, scale = 0.5 * (x[0] + x[-1]), max(0.5 * (x[-1] - x[0]), 1e-300)
    u = (x - centre) / scale
    base = np.column_stack([base[:, :1], u, base[:, 1:]])  # [1, u, extra]
    n, p = base.shape

    def suffix(values):
        # sums over the points from index k to the end, for every k: (n + 1, ...)
        out = np.cumsum(values[::-1], axis=0)[::-1]
        return np.concatenate([out, np.zeros((1,) + values.shape[1:])])

    bb, by, yy = base.T @ base, base.T @ y, float(y @ y)
    s_b = suffix(base)                          # sum b_i
    s_bu = suffix(base * u[:, None])            # sum b_i u
    s_u2 = suffix(u**2)
    s_y, s_uy = suffix(y), suffix(u * y)

    # (1) Knots at data displacements: columns [base, ramp(u - u_k)], k from 1 to n - 2.
    knots = np.arange(1, n - 1)
    t = u[knots]
    cross = s_bu[knots] - t[:, None] * s_b[knots]                 # base . ramp
    ramp2 = s_u2[knots] - 2 * t * s_b[knots, 1] + t**2 * s_b[knots, 0]
    gram = np.zeros((knots.size, p + 1, p + 1))
    gram[:, :p, :p] = bb
    gram[:, :p, p] = gram[:, p, :p] = cross
    gram[:, p, p] = ramp2
    rhs = np.column_stack([np.broadcast_to(by, (knots.size, p)), s_uy[knots] - t * s_y[knots]])
    knot_costs, _ = _batched_costs(gram, rhs, yy)

    # (2) Two separate lines split after index k: columns [base, I, u I]; their meeting point.
    splits = np.arange(1, n - 2)
    right = splits + 1
    gram = np.zeros((splits.size, p + 2, p + 2))
    gram[:, :p, :p] = bb
    gram[:, :p, p] = gram[:, p, :p] = s_b[right]
    gram[:, :p, p + 1] = gram[:, p + 1, :p] = s_bu[right]
    gram[:, p, p] = s_b[right, 0]
    gram[:, p, p + 1] = gram[:, p + 1, p] = s_b[right, 1]
    gram[:, p + 1, p + 1] = s_u2[right]
    rhs = np.column_stack([np.broadcast_to(by, (splits.size, p)), s_y[right], s_uy[right]])
    split_costs, coefficients = _batched_costs(gram, rhs, yy)
    with np.errstate(divide="ignore", invalid="ignore"):
        meet = -coefficients[:, p] / coefficients[:, p + 1]
    inside = (meet >= u[splits]) & (meet <= u[right]) & np.isfinite(meet)

    candidates = np.concatenate([t, meet[inside]]) * scale + centre
    costs = np.concatenate([knot_costs, split_costs[inside]])
    # A window end inside the data cuts an interval: its best point may be the end itself.
    held = None if extra is None else np.asarray(extra, float).reshape(x.size, -1)[order]
    for end, inward in ((low, 1.0), (high, -1.0)):
        if x[0] < end < x[-1]:
            nudged = end + inward * 1e-9 * (x[-1] - x[0])
            candidates = np.append(candidates, nudged)
            costs = np.append(costs, projected_cost(x, y, [nudged], held))
    allowed = (candidates > low) & (candidates < high)
    if not np.any(allowed):
        return float("nan"), np.inf
    candidates, costs = candidates[allowed], costs[allowed]
    # The running sums choose; a direct solve confirms the few best (cancellation-free costs).
    best_few = np.argsort(costs)[:8]
    confirmed = [(projected_cost(x, y, [candidates[k]], held), candidates[k])
                 for k in best_few]
    cost, breakpoint = min(confirmed)
    return float(breakpoint), float(cost)


def best_breakpoints(x, y, low: float, high: float, count: int, extra=None, start=None,
                     max_sweeps: int = 50) -> tuple[np.ndarray, float]:
    """`count` ordered breakpoints in `(low, high)` of least cost (module docstring): exact for
    one; for more, each placed exactly with the others held, in turn, until a sweep lowers the
    cost by less than 1e-12 relative, from `start` (`(count,)`, e.g. the user's nodes) and, for
    two, from the best pair of a grid over data quantiles; the better end wins. Returns
    `(breakpoints (count,), cost)`."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    extra = None if extra is None else np.asarray(extra, float).reshape(x.size, -1)
    if count == 1:
        b, cost = best_breakpoint(x, y, low, high, extra)
        return np.array([b]), cost
    starts = [np.asarray(start, float) if start is not None
              else low + (high - low) * np.arange(1, count + 1) / (count + 1)]
    inside = np.unique(x[(x > low) & (x < high)])
    if count == 2 and inside.size >= 4:
        grid = np.quantile(inside, np.linspace(0.02, 0.98, 30))
        pairs = [(a, b) for i, a in enumerate(grid) for b in grid[i + 1:] if b > a]
        costs = [projected_cost(x, y, pair, extra) for pair in pairs]
        starts.append(np.array(pairs[int(np.argmin(costs))]))
    ends = [_coordinate_descent(x, y, low, high, knots, extra, max_sweeps) for knots in starts]
    knots, cost = min(ends, key=lambda end: end[1])
    return knots, cost


def _coordinate_descent(x, y, low, high, knots, extra, max_sweeps):
    # Each breakpoint placed exactly (best_breakpoint) between its neighbours, the others held.
    knots = np.array(knots, dtype=float)
    cost = projected_cost(x, y, knots, extra)
    for _ in range(max_sweeps):
        before = cost
        for j in range(knots.size):
            columns = design_matrix(x, np.delete(knots, j))[:, 2:]
            held = columns if extra is None else np.column_stack([columns, extra])
            left = knots[j - 1] if j > 0 else low
            right = knots[j + 1] if j + 1 < knots.size else high
            b, trial = best_breakpoint(x, y, left, right, held)
            if np.isfinite(trial) and trial < cost:
                knots[j], cost = b, trial
        if before - cost <= 1e-12 * max(before, 1e-300):
            break
    return knots, float(cost)


def start_loads(data, nodes) -> np.ndarray:
    """A table law's node loads `(m,)` at `nodes` from the `data` (a `LoadDisplacementData`)
    binned around each node: a monotone running start."""
    order = np.argsort(data.displacement)
    x, y = data.displacement[order], data.load[order]
    return np.interp(nodes, x, np.convolve(y, np.ones(5) / 5, mode="same"))


def projected_start(data, nodes, velocity, known_load, smoothing):
    """`(nodes, loads, damping, method)`: a table law's interior `nodes` moved to the
    breakpoints of the least-squares optimum (variable projection, `best_breakpoints`: exact
    for one, coordinate-wise for more), node loads and damper (on `velocity`, or `None`) from
    the linear solve of `data`'s load less `known_load` at them, and the method in words; the
    given nodes where no search result fits (a phase left narrower than `smoothing`)."""
    extra = None if velocity is None else velocity[:, None]
    target = data.load - known_load
    count = nodes.size - 2
    knots, _ = best_breakpoints(data.displacement, target, nodes[0], nodes[-1], count, extra,
                                start=nodes[1:-1])
    moved = np.concatenate([nodes[:1], knots, nodes[-1:]])
    if not np.all(np.isfinite(knots)) or np.min(np.diff(moved)) <= smoothing:
        return nodes, start_loads(data, nodes), 0.0, "Levenberg-Marquardt"
    design = design_matrix(data.displacement, knots, extra)
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    nodes = np.concatenate([nodes[:1], knots, nodes[-1:]])
    loads = design_matrix(nodes, knots)[:, :count + 2] @ coefficients[:count + 2]
    how = ("exact" if count == 1 else "coordinate-wise") + " least-squares breakpoint"
    return (nodes, loads, float(coefficients[-1]) if velocity is not None else 0.0,
            f"{how}{'s' if count > 1 else ''} by variable projection, then Levenberg-Marquardt")
