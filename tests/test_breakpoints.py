"""Breakpoints of piecewise-linear laws at the least-squares optimum (variable projection):
checked against a brute-force search over a dense grid of breakpoints, each a separate
least-squares solve by numpy, and against the local solver from a start in the wrong basin."""

import numpy as np
import pytest

import spineid
from spineid.identify._kinds._breakpoints import best_breakpoint, best_breakpoints

N = 1500


def three_phase(seed, quantum=0.0):
    """A test with three stiffness phases (10, 50, 90 N/mm; knees at 0.6 and 2.4 mm) over 0-3 mm:
    a two-phase law fitted to it has two basins of its breakpoint (near 0.8 mm and 2.2 mm).
    `quantum`: displacements rounded to a resolution (m), as a tester records them."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 3e-3, N))
    if quantum:
        x = np.round(x / quantum) * quantum
    y = 1e4 * x + 4e4 * np.maximum(x - 0.6e-3, 0) + 4e4 * np.maximum(x - 2.4e-3, 0)
    return x, y + 0.5 * rng.standard_normal(N)


def toe(seed):
    """A toe region (exponential) running into a linear phase: no exact breakpoint."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-1e-3, 2e-3, N))
    knee = 0.3e-3
    y = np.where(x < knee, 50 * (np.exp(x / 0.4e-3) - 1),
                 50 * (np.exp(knee / 0.4e-3) - 1) + 125e3 * np.exp(knee / 0.4e-3) * (x - knee))
    return x, y + 2.0 * rng.standard_normal(N)


def brute_force(x, y, breakpoints_grid, extra=None):
    """(cost, breakpoint) of the best of separate least-squares solves, one per grid value."""
    best = (np.inf, np.nan)
    for b in breakpoints_grid:
        columns = [np.ones_like(x), x, np.maximum(x - b, 0.0)]
        if extra is not None:
            columns.append(extra)
        design = np.stack(columns, axis=1)
        residual = design @ np.linalg.lstsq(design, y, rcond=None)[0] - y
        best = min(best, (float(residual @ residual), float(b)))
    return best


CASES = {
    "three phases": lambda: three_phase(0),
    "three phases, 10 um resolution": lambda: three_phase(1, quantum=1e-5),
    "toe region": lambda: toe(2),
}


@pytest.mark.parametrize("case", CASES)
def test_one_breakpoint_is_the_brute_force_optimum(case):
    x, y = CASES[case]()
    breakpoint, cost = best_breakpoint(x, y, x.min(), x.max())
    grid_cost, grid_breakpoint = brute_force(x, y, np.linspace(x.min(), x.max(), 6001)[1:-1])
    # Never worse than any grid value, and where the grid is fine enough, as good.
    assert cost <= grid_cost * (1 + 1e-12)
    assert cost >= grid_cost * (1 - 1e-3)
    assert abs(breakpoint - grid_breakpoint) < 2e-5
    # The breakpoint's own cost is what was reported (not a cancellation artefact).
    assert brute_force(x, y, [breakpoint])[0] == pytest.approx(cost, rel=1e-10)


def test_one_breakpoint_with_a_damper_column():
    x, y = three_phase(3)
    rate = np.random.default_rng(4).standard_normal(N)
    y = y + 30.0 * rate
    _, cost = best_breakpoint(x, y, x.min(), x.max(), rate[:, None])
    grid_cost, _ = brute_force(x, y, np.linspace(x.min(), x.max(), 3001)[1:-1], rate)
    assert grid_cost * (1 - 1e-3) <= cost <= grid_cost * (1 + 1e-12)


def test_two_breakpoints_at_least_as_good_as_a_grid_of_pairs():
    x, y = three_phase(5)
    knots, cost = best_breakpoints(x, y, x.min(), x.max(), 2)
    np.testing.assert_allclose(knots, [0.6e-3, 2.4e-3], atol=2e-5)
    grid = np.linspace(x.min(), x.max(), 61)[1:-1]
    pair_costs = []
    for i, a in enumerate(grid):
        for b in grid[i + 1:]:
            design = np.stack([np.ones_like(x), x, np.maximum(x - a, 0), np.maximum(x - b, 0)],
                              axis=1)
            residual = design @ np.linalg.lstsq(design, y, rcond=None)[0] - y
            pair_costs.append(residual @ residual)
    assert cost <= min(pair_costs) * (1 + 1e-12)


def test_table_fit_escapes_the_wrong_basin_of_the_breakpoint():
    x, y = three_phase(0)
    data = spineid.LoadDisplacementData(x, y)
    start = [x.min(), 0.6e-3, x.max()]
    # (ordinary least squares: the optimum the brute force finds; the default noise model
    # would weight the smooth residuals of this wrong law by an autoregression)
    local = spineid.fit_load_law(data,
                                 spineid.LawForm("piecewise_linear", start,
                                                 free_breakpoints=True), solver="lm", noise="white")
    default = spineid.fit_load_law(data, spineid.LawForm("piecewise_linear", start,
                                                         free_breakpoints=True), noise="white")
    grid_cost, grid_breakpoint = brute_force(x, y, np.linspace(x.min(), x.max(), 6001)[1:-1])

    def sum_of_squares(fit):
        return float(np.sum(fit.residuals ** 2))

    # The local solver stays in the basin of its start (near 0.8 mm) ...
    assert abs(local.derived["node_displacement"][1][0] - 0.83e-3) < 0.05e-3
    assert sum_of_squares(local) > 1.01 * grid_cost
    # ... the default finds the global optimum, exactly.
    assert default.converged and default.method.startswith("exact")
    assert sum_of_squares(default) <= grid_cost * (1 + 1e-12)
    assert abs(default.derived["node_displacement"][1][0] - grid_breakpoint) < 2e-5
    # Both are flagged: a two-phase law does not explain three phases.
    assert default.explains_data is False and local.explains_data is False
    assert default.accepted is False and local.accepted is False
    # ... and so under the default noise model, whose autoregression takes up the misfit's
    # correlation but not its size.
    form = spineid.LawForm("piecewise_linear", start, free_breakpoints=True)
    assert spineid.fit_load_law(data, form).accepted is False
    # The default is the variable projection, named or given as an object.
    for solver in ("varpro", spineid.VariableProjection()):
        again = spineid.fit_load_law(data,
                                     spineid.LawForm("piecewise_linear", start,
                                                     free_breakpoints=True), solver=solver,
                                     noise="white")
        np.testing.assert_allclose(again.values, default.values, rtol=1e-12)


@pytest.mark.parametrize("form, options, error, message", [
    (dict(kind="polynomial"), dict(solver="varpro"), ValueError, "has none"),
    (dict(n_nodes=3), dict(solver=spineid.VariableProjection()), ValueError,
     "free_breakpoints=False"),
    (dict(n_nodes=3), dict(solver="scipy"), ValueError, "VariableProjection"),
    (dict(n_nodes=3), dict(solver=spineid.Adam()), ValueError, "LevenbergMarquardt"),
    (dict(kind="polynomial", degree=0), {}, ValueError, "degree 0"),
    (dict(kind="polynomial", degree=-2), {}, ValueError, "degree -2"),
    (dict(kind="polynomial", n_nodes=3), {}, ValueError,
     "n_nodes applies to piecewise_linear and monotone_cubic only"),
    (dict(kind="tan_cos", smoothing=0.1, free_breakpoints=True), {}, ValueError,
     "free_breakpoints applies to .* only; smoothing applies to piecewise_linear only"),
    (dict(kind="monotone_cubic", degree=2), {}, ValueError, "degree applies to polynomial"),
    (dict(kind="polynomial", monotone=False), {}, ValueError, "monotone applies to"),
    (dict(nodes=[0.0, 1e-3], n_nodes=3), {}, ValueError, "not both"),
    (dict(free_breakpoints="yes"), {}, ValueError, "expected True or False"),
    (dict(kind="spline"), {}, ValueError, "expected one of"),
    (dict(nodes=[0.0, 0.0, 1e-3]), {}, ValueError, "increasing"),
    (dict(smoothing=-1.0), {}, ValueError, "smoothing -1"),
    (dict(n_nodes=3), dict(free_breakpoints=True), ValueError, "option of spineid.LawForm"),
    (dict(n_nodes=3), dict(rate_window=3), ValueError, "option of spineid.LawDynamics"),
    (dict(n_nodes=3), dict(nodez=3), TypeError, "nodez"),
    (dict(n_nodes=3), dict(dynamics=dict(damping=True)), ValueError, "LawDynamics"),
])
def test_law_fit_refusals_name_the_argument(form, options, error, message):
    x = np.linspace(0.0, 1e-3, 50)
    data = spineid.LoadDisplacementData(x, 1e4 * x)
    with pytest.raises(error, match=message):
        spineid.fit_load_law(data, spineid.LawForm(**form), **options)


@pytest.mark.parametrize("dynamics, message", [
    (dict(rate_window=4), "odd"), (dict(rate_window=0), "rate_window 0"),
    (dict(inertia=-1.0), "inertia -1"), (dict(inertia=float("nan")), "inertia nan"),
    (dict(damping=2), "expected True or False"),
    (dict(rate_window=9), "neither"),
])
def test_bad_dynamics_are_refused(dynamics, message):
    with pytest.raises(ValueError, match=message):
        spineid.LawDynamics(**dynamics)


def test_one_law_form_fits_every_record_of_a_batch_to_its_own_optimum():
    # One form for a batch of records with different knees: each fit's knee is its record's
    # brute-force least-squares breakpoint; a kind's name alone is its defaults (a cubic: the
    # linear least squares of the powers).
    rng = np.random.default_rng(5)
    x = np.linspace(0.0, 2e-3, 80)
    form = spineid.LawForm(n_nodes=3, free_breakpoints=True)
    for knee in (0.6e-3, 1.3e-3):
        y = 5e3 * x + 40e3 * np.maximum(x - knee, 0) + 0.2 * rng.standard_normal(x.size)
        fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, y), form, noise="white")
        _, best = brute_force(x, y, np.linspace(x[1], x[-2], 4001))
        assert fit.law.displacement[1] == pytest.approx(best, abs=1e-6)
    cubic = spineid.fit_load_law(spineid.LoadDisplacementData(x, y), "polynomial", noise=0.2)
    powers = np.stack([x, x**2, x**3], axis=1)
    np.testing.assert_allclose(cubic.values, np.linalg.lstsq(powers, y, rcond=None)[0],
                               rtol=1e-6)


def test_variable_projection_takes_only_a_levenberg_marquardt():
    with pytest.raises(ValueError, match=r"VariableProjection\(inner="):
        spineid.VariableProjection(inner=spineid.Adam())
    with pytest.raises(TypeError, match="segments"):
        spineid.VariableProjection(segments=4)


def test_table_fit_of_a_two_phase_test_is_exact_and_explains_it():
    rng = np.random.default_rng(8)
    x = np.sort(rng.uniform(0.0, 2e-3, N))
    y = 5e3 * x + 45e3 * np.maximum(x - 0.7e-3, 0) + 0.2 * rng.standard_normal(N)
    fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, y), spineid.LawForm(
        "piecewise_linear", n_nodes=3, free_breakpoints=True), noise=0.2)
    assert fit.method.startswith("exact") and fit.explains_data
    (breakpoint, error), = fit.derived["node_displacement"][1:2]
    assert abs(breakpoint - 0.7e-3) < 4 * error
    slopes = [v for v, _ in fit.derived["slopes"]]
    np.testing.assert_allclose(slopes, [5e3, 50e3], rtol=0.02)
    assert "method" in fit.report() and "exact" in fit.summary()


def test_window_inside_the_data_and_a_large_offset():
    # End nodes inside the data range: the best breakpoint may sit at the window's end; and a
    # load offset far larger than the load's span must not change the answer.
    x, y = three_phase(6)
    low, high = 0.3e-3, 2.0e-3
    breakpoint, cost = best_breakpoint(x, y, low, high)
    grid_cost, grid_breakpoint = brute_force(x, y, np.linspace(low, high, 4001)[1:-1])
    assert cost <= grid_cost * (1 + 1e-12)
    assert abs(breakpoint - grid_breakpoint) < 2e-6
    shifted, shifted_cost = best_breakpoint(x, y + 1e6, low, high)
    assert shifted == pytest.approx(breakpoint, abs=1e-9)
    assert shifted_cost == pytest.approx(cost, rel=1e-6)
    # A window left of which the cost keeps falling (the basin near 0.83 mm lies outside it):
    # its best point is its own end.
    end, end_cost = best_breakpoint(x, y, 0.95e-3, 1.5e-3)
    grid_cost, _ = brute_force(x, y, np.linspace(0.95e-3, 1.5e-3, 1001)[1:-1])
    assert end_cost <= grid_cost * (1 + 1e-12)
    assert end == pytest.approx(0.95e-3, abs=1e-8)


def test_two_sharp_breakpoints_at_a_kink_of_the_cost_converge():
    # A flexion test of three phases (600, 100, 600 N mm/deg, knees at -2 and 2 deg) on an
    # even grid of rotations: the coordinate-wise search puts each breakpoint where a data
    # point meets it, a kink of the cost from which no Levenberg-Marquardt step descends. The
    # fit is converged (it was "NOT converged", exit 1 for a batch), at a cost no pair of a
    # brute-force grid around the knees beats.
    rng = np.random.default_rng(5)  # (one of the 12 seeds 0-11 that ended so)
    x = np.radians(np.linspace(-6.0, 6.0, 200))  # rad
    knee = np.radians(2.0)
    y = 100.0 * np.degrees(x) + 500.0 * np.degrees(np.maximum(x - knee, 0.0)
                                                   + np.minimum(x + knee, 0.0))  # N mm
    y = 1e-3 * (y + 20.0 * rng.standard_normal(x.size))  # N m
    fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, y), spineid.LawForm(
        "piecewise_linear", nodes=np.radians([-6.0, -2.0, 2.0, 6.0]), free_breakpoints=True))
    assert fit.converged and fit.explains_data
    grid = np.radians(np.linspace(-2.3, -1.7, 61)), np.radians(np.linspace(1.7, 2.3, 61))
    best = np.inf
    for a in grid[0]:
        for b in grid[1]:
            design = np.stack([np.ones_like(x), x, np.maximum(x - a, 0), np.maximum(x - b, 0)],
                              axis=1)
            residual = design @ np.linalg.lstsq(design, y, rcond=None)[0] - y
            best = min(best, float(residual @ residual))
    assert float(fit.residuals @ fit.residuals) <= best * (1 + 1e-9)
    knees = [v for v, _ in fit.derived["node_displacement"][1:3]]
    np.testing.assert_allclose(knees, [-knee, knee], atol=np.radians(0.1))
