"""The identification pipeline's shared pieces: one solver interface (every fit kind accepts the
solvers it can use and refuses the others with one sentence), one result family whose shared
fields are declared once and which is not changed after it is built, and one failed-solve rule."""

import ast
import dataclasses
import pathlib
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import spineid
from spineid.identify._common._abstract_objective import AbstractObjective
from spineid.identify._common._failure import FAILED_RESIDUAL, failed, failed_cost, guarded
from spineid.identify._common._noise import (
    check_noise,
    grouped_noise,
    NOISE_ROUNDS,
    NOISE_SETTLED,
    settle_noise,
    unsettled_note,
)
from spineid.identify._kinds._segment_fit import _SegmentObjective
from spineid.identify._kinds._spine_fit import _SpineObjective
from spineid.identify._kinds._table_fit import _LawResiduals
from spineid.identify._trajectory._fit import TRAJECTORY_SOLVERS
from spineid.identify._trajectory._objective import _Objective
from spineid.identify._trajectory._shooting import _ShootingObjective

from helpers import SOLVERS

PACKAGE = pathlib.Path(spineid.__file__).parent

# Each fit kind, which solvers it accepts, and a call that reaches its solver check before any
# other input is used (so a refusal costs nothing).
def _multistart_of_lm(solver):
    return (isinstance(solver, spineid.MultiStart)
            and isinstance(solver.inner, spineid.LevenbergMarquardt) and solver.executor is None)


FIT_KINDS = {
    "fit": (lambda solver: isinstance(solver, TRAJECTORY_SOLVERS),
            lambda solver: spineid.fit(None, solver)),
    "fit_load_law": (lambda solver: isinstance(solver, (spineid.LevenbergMarquardt,
                                                        spineid.VariableProjection))
                     or _multistart_of_lm(solver),
                     lambda solver: spineid.fit_load_law(None, solver=solver)),
    "fit_segment": (lambda solver: isinstance(solver, spineid.LevenbergMarquardt)
                    or _multistart_of_lm(solver),
                    lambda solver: spineid.fit_segment(None, None, [], solver=solver)),
    "fit_spine_levels": (lambda solver: isinstance(solver, spineid.LevenbergMarquardt),
                         lambda solver: spineid.fit_spine_levels(None, "T1", [], [],
                                                                 solver=solver)),
    "fit_many": (lambda solver: isinstance(solver, (spineid.OptimistixLevenbergMarquardt,
                                                    spineid.JaxoptLevenbergMarquardt)),
                 lambda solver: spineid.fit_many(None, [], solver=solver)),
}


@pytest.mark.parametrize("name", SOLVERS)
def test_every_solver_speaks_the_interface(name):
    solver = SOLVERS[name]
    assert isinstance(solver, spineid.AbstractSolver)
    assert isinstance(solver.name, str) and solver.name
    local = solver.local()
    assert isinstance(local, spineid.AbstractLocalSolver)
    if isinstance(solver, spineid.AbstractWrappedSolver):
        assert local is solver.inner.local()
        assert not isinstance(solver, spineid.AbstractLocalSolver)
    else:
        assert local is solver
    # The command line's names stand for these objects.
    if name in spineid.identify._solvers.SOLVER_NAMES:
        assert spineid.identify._solvers.as_solver(name) == type(solver)()


# (The accepted pairs are fitted by the tests of each kind.)
REFUSED = [(kind, name) for kind, (accepts, _) in FIT_KINDS.items()
           for name, solver in SOLVERS.items() if not accepts(solver)]


@pytest.mark.parametrize("kind, name", REFUSED)
def test_a_fit_kind_refuses_a_solver_it_cannot_use_in_one_sentence(kind, name):
    call = FIT_KINDS[kind][1]
    solver = SOLVERS[name]
    with pytest.raises(ValueError) as refusal:
        call(solver)
    message = str(refusal.value)
    assert message.startswith(f"{kind}(solver={solver!r}): this fit takes ")
    assert "\n" not in message


def test_the_accepting_fit_kinds_cover_every_solver():
    # No solver is refused by every fit kind: each serves some fit.
    for name, solver in SOLVERS.items():
        assert any(accepts(solver) for accepts, _ in FIT_KINDS.values()), name


RESULTS = [spineid.FitResult, spineid.LawFit, spineid.StiffnessFit, spineid.SegmentFit,
           spineid.SpineFit, spineid.MeasureResult]
PARAMETER_FITS = [spineid.FitResult, spineid.LawFit, spineid.SegmentFit, spineid.SpineFit]


@pytest.mark.parametrize("result_class", RESULTS, ids=lambda c: c.__name__)
def test_shared_result_fields_are_declared_once(result_class):
    assert issubclass(result_class, spineid.AbstractResult)
    assert (result_class in PARAMETER_FITS) == issubclass(result_class,
                                                          spineid.AbstractParameterFit)
    base = spineid.AbstractParameterFit if result_class in PARAMETER_FITS \
        else spineid.AbstractResult
    shared = {field.name for field in dataclasses.fields(base)}
    for cls in result_class.__mro__:
        if cls in (base, spineid.AbstractResult, spineid.AbstractParameterFit) \
                or not issubclass(cls, spineid.AbstractResult):
            continue
        declared = set(cls.__dict__.get("__annotations__", {}))
        assert not declared & shared, (cls.__name__, declared & shared)
    # Every member states why it is not a parameter fit, or is one.
    if result_class not in PARAMETER_FITS:
        assert "AbstractParameterFit" in result_class.__doc__
    # Built once: a result cannot be changed after it is made.
    assert result_class.__dataclass_params__.frozen


def test_a_law_fit_is_one_result_and_cannot_be_changed():
    x = np.linspace(0.0, 1e-3, 60)
    data = spineid.LoadDisplacementData(
        x, 2e4 * x + np.random.default_rng(3).normal(0.0, 0.05, x.size))
    fit = spineid.fit_load_law(data, spineid.LawForm("polynomial", degree=1))
    report = fit.report()
    for key in ("converged", "cost", "n_data", "seconds", "warnings", "goodness_of_fit"):
        assert key in report
    entry = report["parameters"][0]
    assert set(entry) == {"name", "value", "stderr", "unit", "start", "at_bound",
                          "identifiable", "stderr_robust"}
    # The linear fit's standard error is the textbook one: sigma / sqrt(sum x^2).
    assert entry["stderr"] == pytest.approx(fit.noise / np.sqrt(np.sum(x**2)), rel=1e-6)
    assert "parameter" in fit.summary() and "identifiability: rank 1 of 1" in fit.summary()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.cost = 0.0


def test_one_failed_solve_rule():
    residuals = np.array([1.0, np.inf, np.nan, -3.0])
    guarded_values = np.asarray(guarded(residuals, np.array([True, True, True, False])))
    np.testing.assert_array_equal(guarded_values, [1.0] + [FAILED_RESIDUAL] * 3)
    np.testing.assert_array_equal(failed(guarded_values), [False, True, True, True])
    assert failed_cost(0.5 * FAILED_RESIDUAL**2) and failed_cost(np.inf)
    assert not failed_cost(0.49 * FAILED_RESIDUAL**2)
    # No objective writes a failure constant of its own: a large literal as the fallback of a
    # `where` is the sign of one.
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "where":
                for argument in node.args[1:]:
                    if isinstance(argument, ast.Constant) and isinstance(argument.value, float):
                        assert abs(argument.value) < 1e5, (path.name, node.lineno)


class _Line(AbstractObjective):
    """`(a + b t - y) / sigma` of a straight line: linear least squares, solved exactly by
    numpy."""

    t: np.ndarray
    y: np.ndarray
    sigma: float

    def __call__(self, u, args=None):
        return (u[0] + u[1] * self.t - self.y) / self.sigma


class _StepwiseLine(_Line):
    stepwise: ClassVar[bool] = True


@pytest.mark.parametrize("objective_class", [_Line, _StepwiseLine])
def test_one_solver_object_solves_any_objective_to_the_linear_least_squares_optimum(
        objective_class):
    rng = np.random.default_rng(5)
    t = np.linspace(0.0, 1.0, 40)
    y = 0.3 - 1.7 * t + rng.normal(0.0, 0.01, t.size)
    objective = objective_class(jnp.asarray(t), jnp.asarray(y), 0.01)
    design = np.stack([np.ones_like(t), t], axis=1)
    exact = np.linalg.lstsq(design, y, rcond=None)[0]
    stderr = 0.01 * np.sqrt(np.diag(np.linalg.inv(design.T @ design)))
    # The statistical stop: within about 0.014 standard errors of the optimum (its docstring).
    solution = spineid.LevenbergMarquardt().solve(objective, jnp.zeros(2))
    assert solution.converged
    assert np.all(np.abs(np.asarray(solution.value) - exact) < 0.02 * stderr)
    np.testing.assert_allclose(solution.jacobian, design / 0.01, rtol=1e-12)
    # Without it, the classical stops: the optimum itself.
    classical = spineid.LevenbergMarquardt(decrement_tol=0.0, rtol=1e-14, atol=1e-14).solve(
        objective, jnp.zeros(2))
    np.testing.assert_allclose(classical.value, exact, rtol=1e-9, atol=1e-12)
    assert classical.cost == pytest.approx(0.5 * np.sum(((design @ exact - y) / 0.01) ** 2),
                                           rel=1e-9)


def test_every_fit_kinds_residuals_are_an_objective():
    for objective in (_Objective, _ShootingObjective, _LawResiduals):
        assert issubclass(objective, AbstractObjective) and not objective.stepwise
    for objective in (_SegmentObjective, _SpineObjective):  # (equilibria: compile-bound)
        assert issubclass(objective, AbstractObjective) and objective.stepwise


def test_the_noise_estimate_settles_the_same_way_for_every_fit_kind():
    # A fit whose residuals show the noise halfway between its weights and the truth (the
    # weights' ratios matter): the estimate approaches the truth geometrically.
    # By hand: weights 10, 3.16, 1.78, 1.33, 1.15, 1.075, 1.037 times the truth; the estimate
    # after the last, 1.018, is within 2% of its weights.
    truth = np.array([2.0, 0.01])
    fits, sigma, change = settle_noise(lambda sigma, previous: sigma,
                                       lambda fitted: np.sqrt(fitted * truth), truth * 10.0)
    assert len(fits) == 7 and change <= NOISE_SETTLED
    np.testing.assert_allclose(sigma, fits[-1])
    np.testing.assert_allclose(sigma / truth, 10.0 ** (0.5 ** 6), rtol=1e-12)
    # One that never settles stops after NOISE_ROUNDS refits and says so.
    fits, sigma, change = settle_noise(lambda sigma, previous: sigma,
                                       lambda fitted: fitted * 1.5, np.ones(1))
    assert len(fits) == NOISE_ROUNDS and change == pytest.approx(0.5)
    assert f"within {NOISE_ROUNDS} refits" in unsettled_note(change)


def test_one_noise_convention_per_channel_by_name_with_groups_as_shorthand():
    channels = ("x", "y", "a1")
    groups = {"position": ("x", "y")}
    # A group stands for its channels; a channel named on its own keeps its own value.
    assert check_noise(channels, grouped_noise({"position": 1e-4, "y": 2e-4, "a1": 0.01},
                                               groups)) == {"x": 1e-4, "y": 2e-4, "a1": 0.01}
    with pytest.raises(ValueError, match=r"missing \['a1'\], unknown \['angle'\]"):
        check_noise(channels, grouped_noise({"position": 1e-4, "angle": 0.01}, groups))
    with pytest.raises(ValueError, match="x=-1"):
        check_noise(channels, {"x": -1.0, "y": 1.0, "a1": 1.0})


@pytest.mark.parametrize("solver", [spineid.LevenbergMarquardt(), spineid.MultiStart(n=4)],
                         ids=["lm", "multistart"])
def test_a_load_law_is_recovered_by_every_solver_it_takes(solver):
    # A cubic load law with load noise: the fit equals scipy's linear least squares on the
    # powers of the displacement (the coefficients enter linearly), whatever the solver.
    rng = np.random.default_rng(11)
    x = np.linspace(-2e-3, 2e-3, 200)
    load = 3e4 * x + 2e9 * x**3 + rng.normal(0.0, 0.5, x.size)
    fit = spineid.fit_load_law(spineid.LoadDisplacementData(x, load),
                               spineid.LawForm("polynomial", degree=3), noise=0.5, solver=solver)
    powers = np.stack([x, x**2, x**3], axis=1)
    exact = scipy.linalg.lstsq(powers, load)[0]
    np.testing.assert_allclose(fit.values, exact, rtol=1e-7, atol=1e-9 * np.abs(exact).max())
    stderr = 0.5 * np.sqrt(np.diag(np.linalg.inv(powers.T @ powers)))
    np.testing.assert_allclose(fit.stderr, stderr, rtol=1e-6)
    assert fit.explains_data
    if isinstance(solver, spineid.MultiStart):
        assert fit.method.startswith("multistart(lm) (")
