"""Multiple shooting: its block Jacobian against forward mode over the whole residual vector,
agreement with single shooting where both converge, escape from the local optima of a lightly
damped oscillation (where single shooting is shown to fail from the same starts), the default
solver's use of it (first where the start rings, after a failed verdict otherwise), and refusal
of unusable options."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import AXIAL_SPRINGS, LOADS, TORSION, document

import spineid
from spineid.identify._trajectory._run import ringing_phase
from spineid.identify._trajectory._run import _Run
from spineid.identify._trajectory._shooting import shooting_objective, shooting_start

pytestmark = pytest.mark.xdist_group("shooting")

NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}
FREE = ["springs[0].stiffness", "springs[1].stiffness", "springs[2].stiffness"]


def planar_problem(factors, *, damping=1.0, t_end=0.2, n=101, noise=NOISE, seed=0,
                   data_noise=NOISE):
    """The 3-axial-spring pair (damping scaled by `damping`), data of `n` samples over
    `t_end` s with tracking noise `data_noise` (`noise`: the problem's, `None` to estimate it),
    stiffnesses started at `factors` times the truth."""
    truth = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS)
    for element in truth["springs"] + truth["torsion"]:
        element["damping"] *= damping
    ts = np.linspace(0.0, t_end, n)
    model = spineid.model_from_document(truth)
    clean = np.asarray(jax.vmap(model.observe)(spineid.simulate(model, jnp.asarray(ts)).q))
    sigma = np.array([data_noise[c] for c in ("x", "y", "theta")])
    data = clean + np.random.default_rng(seed).normal(size=clean.shape) * sigma
    values = np.array([s["stiffness"] for s in truth["springs"]])
    start = [dict(s, stiffness=float(v * f)) for s, v, f in
             zip(truth["springs"], values, factors)]
    model_file = spineid.ModelFile.from_document(dict(truth, springs=start))
    problem = spineid.FitProblem(model_file, spineid.Measurement(ts, data, ("x", "y", "theta")),
                                 FREE, noise)
    return values, problem


def test_block_jacobian_equals_forward_mode_over_all_residuals():
    _, problem = planar_problem((1.4, 0.8, 1.2), n=41)
    run = _Run(problem, spineid.LevenbergMarquardt(), False)
    objective = shooting_objective(run.objective, 4, 1.0)
    z = shooting_start(objective, jnp.array([0.1, -0.2, 0.05]))
    z = z + 0.01 * jnp.asarray(np.random.default_rng(3).normal(size=z.shape))
    residuals, jacobian = eqx.filter_jit(lambda o, z: o.linearise(z))(objective, z)
    dense = eqx.filter_jit(lambda o, z: jax.jacfwd(o)(z))(objective, z)
    assert jacobian.shape == dense.shape == (residuals.size, z.size)
    np.testing.assert_allclose(residuals, objective(z), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jacobian, dense, rtol=1e-6, atol=1e-8 * np.max(np.abs(dense)))
    # The continuity residuals vanish where the segment states are those of one simulation.
    assert np.all(np.isfinite(np.asarray(residuals)))


def _with_gaps(problem):
    """`problem` with gaps: 12 samples of every channel, and theta at every fifth sample."""
    values = problem.measurements[0].values.copy()
    values[30:42] = np.nan
    values[::5, 2] = np.nan
    return problem.with_measurements([problem.measurements[0].__class__(
        problem.measurements[0].ts, values, problem.measurements[0].channels)])


def test_block_jacobian_with_values_not_measured_equals_forward_mode():
    _, problem = planar_problem((1.4, 0.8, 1.2), n=61)
    run = _Run(_with_gaps(problem), spineid.LevenbergMarquardt(), False)
    objective = shooting_objective(run.objective, 4, 1.0)
    z = shooting_start(objective, jnp.array([0.1, -0.2, 0.05]))
    z = z + 0.01 * jnp.asarray(np.random.default_rng(3).normal(size=z.shape))
    residuals, jacobian = eqx.filter_jit(lambda o, z: o.linearise(z))(objective, z)
    dense = eqx.filter_jit(lambda o, z: jax.jacfwd(o)(z))(objective, z)
    np.testing.assert_allclose(residuals, objective(z), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jacobian, dense, rtol=1e-6, atol=1e-8 * np.max(np.abs(dense)))
    assert np.all(np.isfinite(np.asarray(residuals)))
    # The data residuals (segment by segment, sample by sample, channel by channel) are zero,
    # with zero sensitivities, exactly where a value was not measured.
    layout = objective.cases[0]
    present = np.asarray(run.objective.present[0])[np.asarray(layout.index)] > 0
    counted = np.broadcast_to(np.asarray(layout.counted)[:, :, None], present.shape)
    data = np.asarray(residuals)[:present.size].reshape(present.shape)
    rows = np.asarray(jacobian)[:present.size].reshape(present.shape + (-1,))
    assert np.all(data[counted & ~present] == 0) and np.all(rows[counted & ~present] == 0)
    assert np.all(data[counted & present] != 0)


def test_multiple_and_single_shooting_agree_where_both_converge():
    _, problem = planar_problem((1.3, 0.7, 1.2))
    single = spineid.fit(problem, spineid.LevenbergMarquardt())
    multiple = spineid.fit(problem, spineid.MultipleShooting(segments=5))
    assert single.converged and multiple.converged and single.explains_data
    assert "multiple-shooting(5 segments)" in multiple.solver
    # Each stops within about 0.014 standard errors of the optimum (the statistical stop).
    assert np.all(np.abs(multiple.values - single.values) <= 0.03 * single.stderr)
    assert multiple.cost == pytest.approx(single.cost, rel=1e-6)
    np.testing.assert_allclose(multiple.stderr, single.stderr, rtol=1e-3)
    # Well damped over a short record: the default runs Levenberg-Marquardt alone.
    assert ringing_phase(problem) < spineid.Auto().ringing_limit
    default = spineid.fit(problem)
    assert default.solver == "auto: lm from the start"
    assert default.cost == pytest.approx(single.cost, rel=1e-9)


# Starts (factors on the three stiffnesses) from which single shooting stops in a wrong valley
# of the lightly damped pair's cost (checked below, not assumed).
FAR_STARTS = [(2.87, 0.75, 1.17), (0.49, 0.95, 4.7)]


@pytest.mark.parametrize("factors", FAR_STARTS, ids=str)
def test_escapes_the_local_optima_single_shooting_stops_in(factors):
    truth, problem = planar_problem(factors, damping=0.1, t_end=0.4, n=201)
    single = spineid.fit(problem, spineid.LevenbergMarquardt())
    assert np.max(np.abs(single.values / truth - 1)) > 0.1  # a wrong optimum ...
    assert single.explains_data is False  # ... and its verdict says so
    multiple = spineid.fit(problem, spineid.MultipleShooting())
    assert multiple.converged and multiple.explains_data
    assert np.all(np.abs(multiple.values - truth) <= 4 * multiple.stderr)
    assert multiple.cost < 1e-3 * single.cost
    # The default solver gets there too: the start rings (a tenth of the damping, 0.4 s), so
    # it runs multiple shooting first, and says so.
    assert ringing_phase(problem) > spineid.Auto().ringing_limit
    default = spineid.fit(problem)
    assert default.solver.startswith("auto: multiple-shooting(") and default.explains_data
    assert "ringing phase" in default.solver and "multistart" not in default.solver
    assert default.cost == pytest.approx(multiple.cost, rel=1e-6)


def test_escapes_a_local_optimum_with_values_not_measured():
    # The lightly damped pair from a far start, its record with gaps: multiple shooting starts
    # its segments from the channels measured and reaches the optimum a fit from the truth
    # finds; the default runs it first (the start rings).
    truth, problem = planar_problem(FAR_STARTS[0], damping=0.1, t_end=0.4, n=201)
    gappy = _with_gaps(problem)
    assert not gappy.complete
    single = spineid.fit(gappy, spineid.LevenbergMarquardt())
    assert single.explains_data is False
    from_truth = spineid.fit(spineid.FitProblem(
        spineid.ModelFile.from_document(dict(problem.model_file.document, springs=[
            dict(s, stiffness=float(v)) for s, v in zip(problem.model_file.document["springs"],
                                                       truth)])),
        gappy.measurements, FREE, NOISE), spineid.LevenbergMarquardt())
    default = spineid.fit(gappy)
    assert default.solver.startswith("auto: multiple-shooting(") and default.explains_data
    assert np.all(np.abs(default.values - from_truth.values) <= 0.05 * from_truth.stderr)
    assert default.n_data == gappy.n_data < problem.n_data


def test_auto_judges_a_first_fit_under_provisional_weights_after_refining_them(capsys):
    # Noise 3e-7 m and 3e-9 rad, estimated: the provisional weights (a thousandth of each
    # channel's range) are far above it and in other ratios (theta weighted about 200x too
    # lightly against x). The first fit is right, but its theta residuals still trace the
    # motion under those weights; judged after refits with the noise its residuals show, it
    # explains the data, so the default stops there (before: multiple shooting and 3 more
    # starts). One refit left theta's noise estimated at 2.9e-8 rad: the estimate and the fit
    # are repeated until the estimate settles.
    tiny = {"x": 3e-7, "y": 3e-7, "theta": 3e-9}
    truth, problem = planar_problem((1.3, 0.7, 1.2), noise=None, data_noise=tiny)
    capsys.readouterr()
    result = spineid.fit(problem, progress=True)
    assert result.solver == "auto: lm from the start"
    # The refits the verdict needed are shown as they run (they were silent).
    printed = capsys.readouterr().out
    assert printed.count("refining the fit with these weights") >= 2, printed
    assert result.explains_data and result.noise_estimated
    assert np.all(np.abs(result.values - truth) <= 4 * result.stderr)
    for channel, sigma in tiny.items():
        assert result.noise[channel] == pytest.approx(sigma, rel=0.25)


def test_multiple_shooting_with_the_noise_estimated():
    truth, problem = planar_problem(FAR_STARTS[0], damping=0.1, t_end=0.4, n=201)
    estimated = spineid.FitProblem(problem.model_file, problem.measurements, FREE, None)
    result = spineid.fit(estimated, spineid.MultipleShooting())
    assert result.explains_data and result.noise_estimated
    assert np.all(np.abs(result.values - truth) <= 4 * result.stderr)
    assert result.noise["x"] == pytest.approx(NOISE["x"], rel=0.2)


@pytest.mark.parametrize("options, message", [
    (dict(segments=1), "MultipleShooting(segments=1)"),
    (dict(segments=2.5), "MultipleShooting(segments=2.5)"),
    (dict(inner=spineid.Adam()), "MultipleShooting(inner=Adam("),
    (dict(continuity_weight=0.0), "MultipleShooting(continuity_weight=0.0)"),
    (dict(segment_samples=1), "MultipleShooting(segment_samples=1)"),
], ids=lambda x: str(x))
def test_unusable_options_are_refused_naming_them(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        spineid.MultipleShooting(**options)


@pytest.mark.parametrize("options, message", [
    (dict(inner=spineid.MultipleShooting()), "Auto(inner=MultipleShooting("),
    (dict(inner=spineid.Adam(), segments=1), "MultipleShooting(segments=1)"),
    (dict(shooting_enabled="no"), "Auto(shooting_enabled='no')"),
], ids=["shooting inside auto", "segments with another inner", "not a bool"])
def test_auto_refuses_options_it_cannot_honour(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        spineid.Auto(**options)


def test_segments_shorter_than_the_state_are_refused():
    _, problem = planar_problem((1.3, 0.7, 1.2), n=41)
    # 41 samples in 20 segments: 3 samples each, fewer than the 6 states (q, qdot).
    with pytest.raises(ValueError, match=re.escape("MultipleShooting(segments=20)") + ".*"
                       + "fewer than the 6 states"):
        spineid.fit(problem, spineid.MultipleShooting(segments=20))
    with pytest.raises(ValueError, match=re.escape("Auto(segments=20)")):
        spineid.fit(problem, spineid.Auto(segments=20))
    assert spineid.MultipleShooting().segments_for(41, 6) == 3
    assert isinstance(spineid.identify._solvers.as_solver("shooting"),
                      spineid.MultipleShooting)


def test_a_multistart_of_multiple_shooting():
    truth, problem = planar_problem(FAR_STARTS[1], damping=0.1, t_end=0.4, n=201)
    result = spineid.fit(problem, spineid.MultiStart(spineid.MultipleShooting(), n=3))
    assert result.solver.startswith("multistart(multiple-shooting(auto))")
    assert result.explains_data and result.starts["run"] == 1  # the first start explained it
    assert np.all(np.abs(result.values - truth) <= 4 * result.stderr)


@pytest.mark.parametrize("make, message", [
    (lambda: spineid.LevenbergMarquardt(learning_rate=0.1),
     "LevenbergMarquardt(learning_rate=...): LevenbergMarquardt has no option 'learning_rate'; "
     "it is an option of Adam"),
    (lambda: spineid.MultiStart(segments=4),
     "MultiStart has no option 'segments'; it is an option of MultipleShooting, Auto"),
    (lambda: spineid.Adam(segmets=4), "Adam has no option 'segmets'. Its options: "),
], ids=["lm given adam's", "multistart given shooting's", "a misspelling"])
def test_a_solver_given_options_of_another_names_them(make, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        make()


def raise_a_compiled_check(*args, **kwargs):
    """What optimistix's implicit-function derivative raises through an implicit integrator
    whose trial stage went non-finite (the head-neck chain): a real `EquinoxRuntimeError` from
    a check inside compiled code, with equinox's own formatting."""
    check = eqx.filter_jit(lambda x: eqx.error_if(
        x, x > 0, "A linear solver received non-finite (NaN or inf) input and cannot "
        "determine a\nsolution.\n\nThis means that you have a bug upstream of Lineax"))
    check(jnp.asarray(1.0))
    raise AssertionError("the check did not raise")


def test_a_compiled_check_in_multiple_shooting_falls_back_to_single_shooting(monkeypatch):
    truth, problem = planar_problem((1.3, 0.7, 1.2))
    monkeypatch.setattr(spineid.identify._trajectory._run, "solve_shooting", raise_a_compiled_check)
    with pytest.warns(RuntimeWarning, match="multiple shooting stopped by a check"):
        result = spineid.fit(problem, spineid.MultipleShooting(segments=5))
    assert result.converged and result.explains_data  # single shooting from the start
    assert np.all(np.abs(result.values - truth) <= 4 * result.stderr)
    note = [w for w in result.warnings if "multiple shooting stopped" in w]
    assert note == ["multiple shooting stopped by a check inside its compiled solve (A linear "
                    "solver received non-finite (NaN or inf) input and cannot determine a "
                    "solution.); single shooting from the start instead"]


def test_a_compiled_check_in_one_start_skips_that_start(monkeypatch):
    truth, problem = planar_problem((1.3, 0.7, 1.2))
    solve = spineid.LevenbergMarquardt.solve
    calls = []

    def second_start_raises(self, *args, **kwargs):
        calls.append(None)
        if len(calls) == 2:
            raise_a_compiled_check()
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(spineid.LevenbergMarquardt, "solve", second_start_raises)
    solver = spineid.MultiStart(spineid.LevenbergMarquardt(), n=4, stop_when_explained=False,
                                agreement=10)
    with pytest.warns(RuntimeWarning, match="that start was given up"):
        result = spineid.fit(problem, solver)
    assert result.starts == {"run": 4, "skipped": 1}
    assert sum(np.isinf(result.start_costs)) == 1
    assert result.converged and result.explains_data
    assert np.all(np.abs(result.values - truth) <= 4 * result.stderr)
