"""The identification pipeline's shared pieces: one solver interface (every fit kind accepts the
solvers it can use and refuses the others with one sentence), one result family whose shared
fields are declared once and which is not changed after it is built, and one failed-solve rule."""

import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import spineid
from spineid.identify._failure import FAILED_RESIDUAL, failed, failed_cost, guarded
from spineid.identify._fit import TRAJECTORY_SOLVERS

from helpers import SOLVERS

PACKAGE = pathlib.Path(spineid.__file__).parent

# Each fit kind, what it accepts, and a call that reaches its solver check before any other
# input is used (so a refusal costs nothing).
FIT_KINDS = {
    "fit": (TRAJECTORY_SOLVERS, lambda solver: spineid.fit(None, solver)),
    "fit_load_law": ((spineid.LevenbergMarquardt, spineid.VariableProjection),
                     lambda solver: spineid.fit_load_law(None, solver=solver)),
    "fit_segment": ((spineid.LevenbergMarquardt,),
                    lambda solver: spineid.fit_segment(None, None, [], solver=solver)),
    "fit_spine_levels": ((spineid.LevenbergMarquardt,),
                         lambda solver: spineid.fit_spine_levels(None, "T1", [], [],
                                                                 solver=solver)),
    "fit_many": ((spineid.OptimistixLevenbergMarquardt, spineid.JaxoptLevenbergMarquardt),
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
REFUSED = [(kind, name) for kind, (accepted, _) in FIT_KINDS.items()
           for name, solver in SOLVERS.items() if not isinstance(solver, accepted)]


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
        assert any(isinstance(solver, accepted) for accepted, _ in FIT_KINDS.values()), name


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
    fit = spineid.fit_load_law(data, "polynomial", degree=1)
    report = fit.report()
    for key in ("converged", "cost", "n_data", "seconds", "warnings", "goodness_of_fit"):
        assert key in report
    entry = report["parameters"][0]
    assert set(entry) == {"name", "value", "stderr", "unit", "start", "at_bound",
                          "identifiable"}
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
