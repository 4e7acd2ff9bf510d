"""Profile-likelihood intervals: the Cramer-Rao interval on a linear problem, the threshold met at
the interval's ends when checked by an independent refit, asymmetry where the problem is not
linear, and clear refusals."""

import json

import numpy as np
import pytest

import spineid
from spineid.cli import main
from test_python_problems import NOISE, STIFFNESS, TS, observed, python_pair

# The trajectory fits share compiled solves with the identification tests.
pytestmark = pytest.mark.xdist_group("identify")


def two_phase(n=400, seed=8):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 2e-3, n))
    y = 5e3 * x + 45e3 * np.maximum(x - 0.7e-3, 0) + 0.2 * rng.standard_normal(n)
    return spineid.LoadDisplacementData(x, y)


def test_profile_is_the_cramer_rao_interval_on_a_linear_problem():
    # A table at fixed nodes, not forced monotone: the loads enter linearly.
    fit = spineid.fit_load_law(two_phase(),
                               spineid.LawForm("piecewise_linear", [0.0, 0.7e-3, 2e-3],
                                               monotone=False), noise=0.2)
    for name in fit.names:
        profile = fit.profile(name)
        assert profile.threshold == pytest.approx(3.8415, abs=1e-4)
        width = profile.crlb_interval[1] - profile.crlb_interval[0]
        # (1e-7 of the width: the solver accepts a step only if the cost falls, and a cost
        # near 750 resolves an optimum to about 1e-7 standard errors in double precision.)
        np.testing.assert_allclose(profile.interval, profile.crlb_interval, rtol=0,
                                   atol=1e-7 * width)
        # The walk's points lie on the parabola ((v - value) / stderr)^2.
        np.testing.assert_allclose(
            profile.delta, ((profile.points - profile.value) / profile.stderr) ** 2,
            rtol=1e-6, atol=1e-9)
    assert profile.explains_data is True and "WARNING" not in profile.summary()
    # A narrower level gives a narrower interval, at z = 1 exactly one standard error.
    one_sigma = fit.profile("rise[1]", level=0.6826894921370859)
    i = fit.names.index("rise[1]")
    np.testing.assert_allclose(np.diff(one_sigma.interval), 2 * fit.stderr[i], rtol=1e-6)


def test_profile_of_a_fit_that_does_not_explain_the_data_says_it_means_nothing():
    # One straight line through two-phase data: the interval would be computed as usual, but
    # the likelihood it comes from assumes a model that explains the data.
    fit = spineid.fit_load_law(two_phase(),
                               spineid.LawForm("piecewise_linear", [0.0, 2e-3], monotone=False),
                               noise=0.2)
    assert fit.explains_data is False
    profile = fit.profile(fit.names[-1])
    assert profile.explains_data is False
    assert "does not explain the data" in profile.summary()
    assert profile.to_dict()["explains_data"] is False


@pytest.fixture(scope="module")
def trajectory_fits():
    data = observed(python_pair(STIFFNESS))
    sigma = np.array([NOISE[c] for c in ("x", "y", "theta")])
    fits = {}
    for scale in (1.0, 30.0):
        noisy = data + np.random.default_rng(7).normal(size=data.shape) * sigma * scale
        noise = {c: s * scale for c, s in NOISE.items()}
        problem = spineid.FitProblem(python_pair(np.array(STIFFNESS) * 1.2),
                                     spineid.Measurement(TS, noisy, ("x", "y", "theta")),
                                     ["stiffness"], noise)
        fits[scale] = (problem, spineid.fit(problem, spineid.LevenbergMarquardt()))
    return fits


def test_profile_ends_meet_the_threshold_by_an_independent_refit(trajectory_fits):
    problem, result = trajectory_fits[30.0]
    name = "springs[2].stiffness"
    profile = result.profile(name)
    assert profile.lower_cost is None and profile.fits >= 4
    i = result.names.index(name)
    for end in profile.interval:
        # Hold the parameter at the end in a new problem and fit the others from the start.
        values = result.values.copy()
        values[i] = end
        held = problem.fitted_model(values)
        others = [n for n in result.names if n != name]
        refit = spineid.fit(spineid.FitProblem(held, problem.measurements, others,
                                               problem.noise), spineid.LevenbergMarquardt())
        assert 2 * (refit.cost - result.cost) == pytest.approx(profile.threshold, rel=0.02)


def test_profile_bends_where_the_problem_is_nonlinear(trajectory_fits):
    name = "springs[2].stiffness"
    near = trajectory_fits[1.0][1].profile(name)
    far = trajectory_fits[30.0][1].profile(name)
    # Low noise: the linearisation holds; high noise: the interval is visibly asymmetric.
    np.testing.assert_allclose(near.interval, near.crlb_interval,
                               rtol=0, atol=0.01 * np.ptp(near.crlb_interval))
    assert abs(near.asymmetry - 1) < 0.005
    assert abs(far.asymmetry - 1) > 0.01
    report = far.to_dict()
    assert report["interval"] == [pytest.approx(v) for v in far.interval]


def test_profile_refuses_a_parameter_that_is_not_free(trajectory_fits):
    _, result = trajectory_fits[1.0]
    with pytest.raises(ValueError, match="not a free parameter"):
        result.profile("torsion[0].stiffness")
    with pytest.raises(ValueError, match="level"):
        result.profile(result.names[0], level=1.5)


def test_a_bound_ends_the_interval_where_the_data_do_not():
    # A second phase almost flat (a neutral zone): its rise (>= 0 for a monotone table) is
    # about one standard error above zero, so the 95% profile reaches the bound first.
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0.0, 2e-3, 200))
    y = 5e3 * x - 4.95e3 * np.maximum(x - 1.0e-3, 0) + 0.2 * rng.standard_normal(200)
    fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, y),
                               spineid.LawForm("piecewise_linear", [0.0, 1.0e-3, 2e-3]), noise=0.2)
    i = fit.names.index("rise[2]")
    assert 0 < fit.values[i] < 2 * fit.stderr[i]
    profile = fit.profile("rise[2]")
    assert profile.interval[0] == 0.0
    assert profile.value < profile.interval[1] < profile.crlb_interval[1] * 1.01
    # Below the threshold all the way down: the bound, not the data, ends it.
    assert np.all(profile.delta[profile.points < profile.value] < profile.threshold)


def test_table_command_profiles_a_breakpoint(tmp_path):
    data = two_phase(n=200)
    csv = tmp_path / "shear.csv"
    np.savetxt(csv, np.column_stack([data.displacement, data.load]), delimiter=",",
               header="displacement,load", comments="")
    out = tmp_path / "out"
    status = main(["table", str(csv), "--n-nodes", "3", "--free-breakpoints", "--noise", "0.2",
                   "--profile", "gap[1]", "--unit", "mm", "--out", str(out)])
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    (profile,) = report["profiles"]
    assert profile["name"] == "gap[1]"
    low, high = profile["interval"]
    assert low < report["parameters"][0]["value"] < high
    assert (out / "profile_gap_1.png").stat().st_size > 1000
    assert report["method"].startswith("exact")


def test_fit_command_refuses_an_unknown_profile_before_fitting(tmp_path, capsys):
    model = tmp_path / "pair.toml"
    model.write_text((spineid.dataset_path("axial_4_springs.toml")).read_text())
    data = tmp_path / "data.csv"
    data.write_text("t,x,y,theta\n0,0,0.03,0\n0.01,0,0.03,0\n0.02,0,0.03,0\n0.03,0,0.03,0\n")
    status = main(["fit", str(model), str(data), "--free", "stiffness", "--profile",
                   "springs[9].stiffness", "--out", str(tmp_path / "out")])
    assert status != 0
    assert "--profile springs[9].stiffness: not a free parameter" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_walk_survives_failed_refits_and_a_missing_standard_error():
    from spineid.identify._common._profile import walk_profile

    # A quadratic profile of half-width 1.96 (stderr 1) whose refits fail beyond v = 1.5: the
    # upper end is where failure starts (an infinite cost counts as beyond the threshold),
    # found by bisection to 1/256 of the bracket.
    def failing(v):
        return 0.5 * v**2 if v < 1.5 else np.inf

    _, _, interval, _, _ = walk_profile(failing, 0.0, 1.0, (-np.inf, np.inf), 0.0)
    assert interval[0] == pytest.approx(-1.96, rel=0.01)
    assert 1.5 - 0.5 / 2**7 <= interval[1] <= 1.5
    # A parameter on its bound (no standard error, value ~ 0): the walk still finds the end,
    # with steps growing from the typical scale.
    _, _, interval, _, fits = walk_profile(lambda v: 0.5 * (v / 0.1) ** 2, 1e-9, np.nan,
                                           (0.0, np.inf), 0.0, scale=0.05)
    assert interval[0] == 0.0
    assert interval[1] == pytest.approx(0.196, rel=0.01)
    assert fits < 25
