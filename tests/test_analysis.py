"""The tail every fit kind shares (`identify/_common/_analysis.py`), against statsmodels'
weighted least squares with the noise known, and against the fits that use it."""

import numpy as np
import pytest
import statsmodels.api as sm

from spineid.elements._parameters import Parameter
from spineid.identify._common._analysis import (
    analyse_parameters,
    physical_jacobian,
    RelativeBound,
    StandardErrorBound,
    ZERO_SENSITIVITY_NOTE,
)
from spineid.identify._common._transform import Transform

BOUNDS = [RelativeBound(), StandardErrorBound()]


def _linear_problem(seed=0, n=60):
    # y = X b + e, e ~ N(0, sigma_i^2) with the deviations known (weighted least squares).
    rng = np.random.default_rng(seed)
    design = np.column_stack([np.ones(n), np.linspace(0, 1, n), np.sin(np.linspace(0, 6, n))])
    sigma = 0.05 * (1 + np.linspace(0, 1, n))
    truth = np.array([2.0, 3.0, 0.7])
    data = design @ truth + sigma * rng.standard_normal(n)
    return design, sigma, data


def _transform(values, lower=0.0):
    parameters = [Parameter(f"p[{k}]", "p", "N", None, "p", None, lower)
                  for k in range(len(values))]
    return Transform.around(parameters, np.asarray(values) * 1.5)


@pytest.mark.parametrize("bound", BOUNDS, ids=type)
def test_standard_errors_are_those_of_weighted_least_squares_with_the_noise_known(bound):
    design, sigma, data = _linear_problem()
    wls = sm.WLS(data, design, weights=1 / sigma**2).fit(cov_type="fixed scale",
                                                         cov_kwds={"scale": 1.0})
    names = ["a", "b", "c"]
    analysis = analyse_parameters(design / sigma[:, None], wls.params, names, ["N"] * 3,
                                  _transform(wls.params), bound)
    np.testing.assert_allclose(analysis.stderr, wls.bse, rtol=1e-9)
    np.testing.assert_allclose(analysis.covariance, wls.cov_params(), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(np.diag(analysis.correlation), 1.0)
    assert not analysis.at_bound.any() and analysis.identifiability.rank == 3
    assert not any("bound" in w for w in analysis.warnings)


@pytest.mark.parametrize("bound", BOUNDS, ids=type)
def test_a_value_on_its_bound_is_known_and_the_others_are_those_of_the_reduced_fit(bound):
    # The last coefficient fitted as zero against its lower bound of zero: the rest are the
    # weighted least squares of the other columns.
    design, sigma, data = _linear_problem(seed=1)
    kept = sm.WLS(data, design[:, :2], weights=1 / sigma**2).fit(cov_type="fixed scale",
                                                                 cov_kwds={"scale": 1.0})
    values = np.append(kept.params, 0.0)
    analysis = analyse_parameters(design / sigma[:, None], values, ["a", "b", "c"],
                                  ["N", "N", "N m"], _transform([2.0, 3.0, 0.7]), bound)
    assert analysis.at_bound.tolist() == [False, False, True]
    np.testing.assert_allclose(analysis.stderr[:2], kept.bse, rtol=1e-9)
    assert np.isnan(analysis.stderr[2]) and np.all(np.isnan(analysis.correlation[2]))
    assert analysis.identifiability.n_parameters == 2
    said = [w for w in analysis.warnings if "ended on its bound" in w]
    assert said == ["c ended on its bound (0 N m); it is reported without a standard error."]


def test_the_two_bound_rules_differ_where_their_stops_differ():
    # A value 5e-4 above its bound (about 5e-4 of its starting distance, a fortieth of its
    # standard error of 0.02): the statistical stop's rule calls it on its bound, the
    # classical stop's rule does not.
    design, sigma, data = _linear_problem(seed=2)
    values = np.array([2.0, 3.0, 5e-4])
    transform = _transform([2.0, 3.0, 0.7])
    jacobian = design / sigma[:, None]
    relative = analyse_parameters(jacobian, values, list("abc"), ["N"] * 3, transform)
    statistical = analyse_parameters(jacobian, values, list("abc"), ["N"] * 3, transform,
                                     StandardErrorBound())
    assert not relative.at_bound[2] and statistical.at_bound[2]


def test_without_bounds_the_scales_are_given_and_nothing_is_on_a_bound():
    design, sigma, data = _linear_problem(seed=3)
    values = np.array([2.0, 3.0, 0.7])
    analysis = analyse_parameters(design / sigma[:, None], values, list("abc"), ["1"] * 3,
                                  scales=values)
    assert not analysis.at_bound.any() and np.all(np.isfinite(analysis.stderr))


def test_no_sensitivity_is_said_and_no_error_given():
    values = np.array([1.0, 2.0])
    analysis = analyse_parameters(np.zeros((10, 2)), values, ["a", "b"], ["N", "N"],
                                  _transform(values))
    assert ZERO_SENSITIVITY_NOTE in analysis.warnings
    assert analysis.identifiability.rank == 0 and np.all(np.isnan(analysis.stderr))


def test_the_chain_rule_from_the_solvers_coordinates_matches_central_differences():
    # r(theta(u)) = X theta(u): dr/dtheta from dr/du must be X, whatever the bounds.
    design = np.random.default_rng(4).standard_normal((8, 3))
    parameters = [Parameter("a", "p", "N", None, "p", None, 0.0),
                  Parameter("b", "p", "N", None, "p", None, -1.0, 5.0),
                  Parameter("c", "p", "N", None, "p", None, -np.inf)]
    transform = Transform.around(parameters, np.array([0.5, 2.0, -3.0]))
    u = np.array([0.3, -0.4, 0.2])
    step = 1e-6
    jacobian_u = np.column_stack([
        (design @ np.asarray(transform.to_physical(u + step * e))
         - design @ np.asarray(transform.to_physical(u - step * e))) / (2 * step)
        for e in np.eye(3)])
    theta, jacobian = physical_jacobian(jacobian_u, u, transform)
    np.testing.assert_allclose(theta, np.asarray(transform.to_physical(u)))
    np.testing.assert_allclose(jacobian, design, rtol=1e-6, atol=1e-8)
