"""Measure recovery: the moment form of a spring measure, its first variation against explicit
springs, the constrained subproblems against brute force, recovery of an exact pin on and off
the grid, the `recover` command, and bad input."""

import copy
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from spineid.cli import main
from spineid import (
    first_variation, MeasureCurve, Measurement, recover, recover_grid, RecoveryProblem,
    spring_moments, SpringMeasure, VectorSprings,
)
from spineid.io import dumps_toml
from spineid.identify._recovery._recovery_solver import _nnls, _project

# One worker runs this module: the recover command reuses the solves that the off-grid test
# compiled (the same pin problem and shapes), which another process would compile again.
pytestmark = pytest.mark.xdist_group("measure")

TRACKING = {"x": 5e-6, "y": 5e-6, "theta": np.radians(0.01)}
PIN = np.array([0.0037, 0.012])


def pin_model_file(t_end=0.5, n_samples=501, **changes):
    document = copy.deepcopy(
        spineid.load_model_file(spineid.dataset_path("pinned_pair.toml")).document
    )
    document["simulation"] = {"t_end": t_end, "n_samples": n_samples}
    document.update(changes)
    return spineid.ModelFile.from_document(document, "pin.toml")


def pin_data(model_file):
    ts = model_file.simulation_times()
    q = spineid.simulate(model_file.model, jnp.asarray(ts), rtol=1e-11, atol=1e-13).q
    return ts, np.asarray(jax.vmap(model_file.model.observe)(q))


# Session scope: xdist interleaves modules on a worker and pytest rebuilds a module-scoped
# fixture at every switch, compiling its solves again.
@pytest.fixture(scope="session")
def pin_problem():
    model_file = pin_model_file()
    ts, data = pin_data(model_file)
    return RecoveryProblem(model_file, Measurement(ts, data, ("x", "y", "theta")), TRACKING,
                           )


def test_moment_form_equals_the_sum_over_springs():
    rng = np.random.default_rng(3)
    for _ in range(5):
        pose_a0 = rng.normal(size=3) * [0.01, 0.01, 0.2]
        pose_b0 = rng.normal(size=3) * [0.01, 0.01, 0.2] + [0.0, 0.03, 0.0]
        points = rng.normal(size=(9, 2)) * 0.02
        stiffness, damping = rng.uniform(0, 1e4, 9), rng.uniform(0, 5, 9)
        springs = VectorSprings.from_reference(points, stiffness, damping, pose_a0, pose_b0)
        measure = SpringMeasure.from_springs(points, stiffness, damping, pose_a0, pose_b0,
                                             origin=rng.normal(size=2) * 0.01)
        pose_a = pose_a0 + rng.normal(size=3) * [0.002, 0.002, 0.5]
        pose_b = pose_b0 + rng.normal(size=3) * [0.002, 0.002, 0.5]
        v_a, v_b = rng.normal(size=3), rng.normal(size=3)
        np.testing.assert_allclose(measure.energy(pose_a, pose_b), springs.energy(pose_a, pose_b),
                                   rtol=1e-12)
        np.testing.assert_allclose(measure.dissipation(pose_a, pose_b, v_a, v_b),
                                   springs.dissipation(pose_a, pose_b, v_a, v_b), rtol=1e-12)
        force = jax.grad(springs.energy, argnums=1)(pose_a, pose_b)
        np.testing.assert_allclose(jax.grad(measure.energy, argnums=1)(pose_a, pose_b), force,
                                   rtol=1e-10, atol=1e-10 * np.abs(force).max())


def test_first_variation_equals_the_derivative_through_explicit_springs(pin_problem):
    # Oracle: zero-stiffness vector springs at a few curve points in the full model, and the
    # derivative of the cost with respect to their stiffness by forward mode through the ODE.
    from spineid.identify._recovery._recovery_problem import _moment_jacobian, _objective
    from spineid.identify._recovery._recovery_result import _sigma

    problem = pin_problem
    base = problem.model
    atoms = np.array([[0.001, 0.012], [0.006, 0.012]])
    weights = np.array([2e4, 1e4])
    origin = jnp.asarray(weights @ atoms / weights.sum())
    objective = _objective(problem, _sigma(problem), 50_000)
    moments = spring_moments(atoms, weights, origin)
    moment_jacobian, residuals, _ = _moment_jacobian(objective, moments, origin)
    t = jnp.array([0.1, 0.45, 0.8])
    candidates = problem.curve.at(t)
    fast = np.asarray(first_variation(problem.curve, moment_jacobian.T @ residuals, origin, t))

    def cost(extra):
        springs = VectorSprings.from_reference(
            jnp.concatenate([jnp.asarray(atoms), candidates]),
            jnp.concatenate([jnp.asarray(weights), extra]), jnp.zeros(5),
            base.lower.reference_pose, base.upper.reference_pose)
        import equinox as eqx

        model = eqx.tree_at(lambda m: m.elements, base, base.elements + (springs,))
        measurement = problem.measurements[0]
        sim = spineid.simulate(model, jnp.asarray(measurement.ts),
                               adjoint=__import__("diffrax").ForwardMode(), max_steps=50_000)
        predicted = jax.vmap(model.observe)(sim.q)
        sigma = jnp.array([TRACKING[c] for c in ("x", "y", "theta")])
        return 0.5 * jnp.sum(((predicted - measurement.values) / sigma) ** 2)

    brute = np.asarray(jax.jacfwd(cost)(jnp.zeros(3)))
    np.testing.assert_allclose(fast, brute, rtol=1e-6)


def test_constrained_subproblem_solvers_against_brute_force():
    from scipy.optimize import nnls

    rng = np.random.default_rng(0)
    for _ in range(5):
        matrix = rng.normal(size=(40, 30)) @ np.diag(rng.uniform(0.1, 10, 30))
        matrix[:, 10:] = matrix[:, :3] @ rng.normal(size=(3, 20))  # rank deficient
        target = rng.normal(size=40)
        ours = _nnls(matrix, target, 1e-12)
        reference = nnls(matrix, target)[0]
        assert np.all(ours >= 0)
        np.testing.assert_allclose(np.linalg.norm(matrix @ ours - target),
                                   np.linalg.norm(matrix @ reference - target), rtol=1e-9)
    # Projection onto {l <= x <= u, a.x <= b}: optimality against random feasible points.
    for _ in range(5):
        x = jnp.asarray(rng.normal(size=12))
        lower, upper = -jnp.ones(12) * 0.5, jnp.ones(12)
        a = jnp.asarray(np.where(rng.uniform(size=12) > 0.3, rng.uniform(0.5, 2, 12), 0.0))
        bounds = (lower, upper, a, jnp.asarray(0.7))
        projected = np.asarray(_project(x, bounds))
        assert np.all(projected >= -0.5 - 1e-12) and np.all(projected <= 1 + 1e-12)
        assert np.asarray(a) @ projected <= 0.7 + 1e-9
        for _ in range(200):
            other = rng.uniform(-0.5, 1.0, 12)
            if np.asarray(a) @ other <= 0.7:
                assert np.linalg.norm(other - x) >= np.linalg.norm(projected - x) - 1e-9


def test_off_grid_recovery_finds_the_pin_and_certifies_it(pin_problem):
    result = recover(pin_problem, spineid.SlidingFrankWolfe(max_atoms=3))
    assert result.certified and result.converged
    assert abs(result.pin[0] - PIN[0]) < 0.05e-3  # the noise-free target
    assert result.pin_stderr[0] < 0.05e-3
    assert result.atoms_supported == 1
    assert result.moments["total_stiffness"]["at_ceiling"]
    assert np.all(result.stiffness > 0) and result.stiffness.sum() <= pin_problem.max_stiffness * (1 + 1e-9)
    # The certificate: moving the whole ceiling from the pin to the best point of the curve
    # lowers the linearised loss by less than the tolerance (1e-3 n_data, in half chi-square),
    # or, where the loss is too curved for that bound, the best such step (line search) does.
    positions, variation = result.certificate
    heaviest = np.argmax(result.stiffness)
    at_atom = np.interp(result.positions[heaviest], positions, variation)
    if result.line_search_gain is None:
        assert result.max_stiffness * (at_atom - variation.min()) <= 1e-3 * result.n_data
    else:
        assert result.line_search_gain <= 1e-3 * result.n_data
        assert "line search" in result.summary()
    report = result.report()
    assert report["atoms"] and report["pin"]["stderr"][0] is not None
    assert "ceiling" in " ".join(result.warnings)


def test_vertex_batches_have_one_size_and_hold_every_row_once():
    from spineid.identify._recovery._recover import even_batches

    rows = np.arange(40.0).reshape(20, 2)
    for batch, sizes in ((8, [7, 7, 7]), (10, [10, 10]), (256, [20]), (1, [1] * 20)):
        batches = even_batches(rows, batch)
        assert [len(b) for b in batches] == sizes
        joined = np.concatenate(batches)
        np.testing.assert_array_equal(joined[:20], rows)
        np.testing.assert_array_equal(joined[20:], np.repeat(rows[-1:], len(joined) - 20, 0))


def test_grid_recovery_is_nonnegative_and_localises_the_pin(pin_problem, capsys):
    # (Its 20 single-spring starts in three batches of 7, the last padded with a copy, so that
    # one program runs them all: a large grid's search shows a bar with an estimate of the
    # time left.)
    result = recover_grid(pin_problem, spineid.GridFrankWolfe(5, max_iterations=40,
                                                              vertex_batch=8), progress=True)
    assert "grid N=5: each spring alone at 4 fractions of the ceiling" in capsys.readouterr().err
    np.testing.assert_allclose(result.positions, np.linspace(0.0, 0.04, 5))
    assert np.all(result.stiffness >= 0) and result.stiffness.sum() <= pin_problem.max_stiffness * (1 + 1e-9)
    np.testing.assert_allclose(result.probability().sum(), 1.0)
    # The grid cannot place a spring at 3.7 mm (its points are 10 mm apart), but its
    # stiffness centroid lies between the two springs around the pin.
    assert -0.01 + 1e-9 < result.pin[0] < 0.01
    assert result.cost > 0


def test_recover_command_writes_atoms_report_and_plots(tmp_path, capsys):
    model_file = pin_model_file()
    model_path = tmp_path / "pin.toml"
    model_path.write_text(dumps_toml(model_file.document))
    ts, data = pin_data(model_file)
    spineid.write_trajectory(tmp_path / "data.csv", ts, data, ("x", "y", "theta"))
    out = tmp_path / "out"
    status = main([
        "recover", str(model_path), str(tmp_path / "data.csv"), "--out", str(out),
        "--noise", "x=5e-6,y=5e-6,theta=1.7e-4", "--max-atoms", "3",  # as the off-grid test
    ])
    assert status == 0, capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    assert report["converged"] and report["certificate"]["certified"]
    assert abs(report["pin"]["value"][0] - PIN[0]) < 0.05e-3
    for key in ("cost", "n_data", "parameters", "identifiability", "atoms", "atoms_supported"):
        assert key in report
    for name in ("density.png", "cumulative.png", "fit.png", "residuals.png"):
        assert (out / name).stat().st_size > 10_000
    fitted = spineid.load_model_file(out / "fitted.toml")
    springs = [e for e in fitted.model.elements if isinstance(e, VectorSprings)]
    assert fitted.document["kind"] == "planar_pair" and len(springs) == 1
    np.testing.assert_allclose(np.sum(springs[0].stiffness), report["moments"][
        "total_stiffness"]["value"], rtol=1e-9)


def test_a_recovery_with_the_noise_estimated_refits_in_rounds_of_its_own():
    # The bundled pin, white noise, the noise estimated: the search under the provisional
    # weights can spend all its rounds, and the refit under the estimated noise then had none
    # left (the rounds were counted over both): uncertified, an 11 N/m atom 20 mm away left
    # over, and "the data call for 2 atoms". Now certified, one atom, the pin to its error.
    model_file = spineid.load_model_file(spineid.dataset_path("pinned_pair.toml"))
    ts = model_file.simulation_times()
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, jnp.asarray(ts)).q))
    sigma = np.array([5e-6, 5e-6, np.radians(0.01)])
    data = clean + np.random.default_rng(3).normal(size=clean.shape) * sigma
    result = spineid.recover(RecoveryProblem(model_file, Measurement(ts, data, ("x", "y",
                                                                                 "theta"))))
    assert result.certified and result.atoms_supported == 1, result.summary()
    assert abs(result.pin[0] - 3.7e-3) < 3 * result.pin_stderr[0]


def test_bad_input_gives_clear_errors(pin_problem):
    model_file = pin_model_file()
    ts, data = pin_data(model_file)
    no_measure = copy.deepcopy(model_file.document)
    del no_measure["measure"]
    with pytest.raises(ValueError, match=r"no \[measure\] table"):
        RecoveryProblem(spineid.ModelFile.from_document(no_measure, "m.toml"),
                        Measurement(ts, data, ("x", "y", "theta")))
    still = data.copy()
    still[:, 2] = still[0, 2]
    with pytest.raises(ValueError, match="no rotation.*not identifiable"):
        RecoveryProblem(model_file, Measurement(ts, still, ("x", "y", "theta")), TRACKING)
    with pytest.raises(ValueError, match="max_stiffness"):
        RecoveryProblem(model_file, Measurement(ts, data, ("x", "y", "theta")), TRACKING,
                        max_stiffness=-1.0)
    with pytest.raises(ValueError, match="noise"):
        RecoveryProblem(model_file, Measurement(ts, data, ("x", "y", "theta")), {"x": 1.0})
    short = copy.deepcopy(model_file.document)
    short["measure"]["curve"] = [[0.0, 0.012]]
    with pytest.raises(ValueError, match="measure.curve"):
        spineid.ModelFile.from_document(short, "m.toml")


def test_curve_positions_follow_arc_length():
    curve = MeasureCurve(np.array([[0.0, 0.0], [0.03, 0.0], [0.03, 0.01]]))
    assert curve.length == pytest.approx(0.04) and not curve.straight
    np.testing.assert_allclose(curve.at(jnp.array([0.0, 0.5, 0.75, 1.0])),
                               [[0, 0], [0.02, 0], [0.03, 0.0], [0.03, 0.01]], atol=1e-15)
    assert MeasureCurve(np.array([[0.0, 0.0], [0.01, 0.01], [0.02, 0.02]])).straight


def test_recovery_options_live_on_its_solvers_and_others_are_refused(pin_problem):
    with pytest.raises(ValueError, match=r"recover\(solver=LevenbergMarquardt.*this fit takes "
                                         r"a spineid.SlidingFrankWolfe"):
        spineid.recover(pin_problem, spineid.LevenbergMarquardt())
    with pytest.raises(TypeError, match="SlidingFrankWolfe has no option 'n_springs'; it is "
                                        "an option of GridFrankWolfe"):
        spineid.SlidingFrankWolfe(n_springs=5)
    for bad in (lambda: spineid.SlidingFrankWolfe(max_atoms=0),
                lambda: spineid.SlidingFrankWolfe(fine_grid=1),
                lambda: spineid.GridFrankWolfe(5, gap_tolerance=-1.0),
                lambda: spineid.GridFrankWolfe(2.5)):
        with pytest.raises(ValueError, match="expected"):
            bad()


def test_padding_changes_no_recovery(pin_problem, monkeypatch):
    # The recovery's records are padded like a trajectory fit's (zero-weight samples, so that
    # files of different lengths share one compilation): the grid recovery is the same with
    # the padding turned off, and what it reports has the data's shape.
    # (The solver object through `recover` is `recover_grid`.)
    padded = spineid.recover(pin_problem, spineid.GridFrankWolfe(5, max_iterations=40))
    monkeypatch.setattr("spineid.identify._common._padding.padded_length", lambda n: n)
    plain = recover_grid(pin_problem, spineid.GridFrankWolfe(5, max_iterations=40))
    assert [p.shape for p in padded.predictions] == [(501, 3)]
    np.testing.assert_allclose(padded.stiffness, plain.stiffness, rtol=1e-6,
                               atol=1e-9 * pin_problem.max_stiffness)
    assert padded.cost == pytest.approx(plain.cost, rel=1e-6)
    np.testing.assert_allclose(padded.predictions[0], plain.predictions[0], atol=1e-12)
    assert padded.goodness_of_fit.summary() == plain.goodness_of_fit.summary()
