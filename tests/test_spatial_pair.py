"""The spatial pair: Lagrange's equations by autodiff against hand-written Newton-Euler with
the explicit bushing wrenches, energy conservation, the neutral-posture load of the classic
bushing, and model-file errors."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from spineid import (
    apply_values, bushing_deflection_rate, bushing_force, bushing_wrenches, E_W,
    generalized_accelerations, mechanical_energy, ModelFile,
)
from spineid.io import read_toml
from helpers import (  # K_F_E: Christophy et al. eq 24
    K_F_E, newton_euler_accelerations, random_spatial_states,
)


def document():
    return read_toml(spineid.dataset_path("spatial_pair.toml"))


def with_changes(**tables):
    doc = document()
    doc.update(copy.deepcopy(tables))
    return doc


def coupled_document(kind):
    doc = document()
    bushing = doc["bushings"][0]
    bushing["kind"] = kind
    bushing["stiffness"] = [[v / 10 for v in row] for row in K_F_E]
    bushing["damping"] = np.diag([60.0, 120.0, 50.0, 0.05, 0.04, 0.06]).tolist()
    bushing["frame2"]["orientation"] = [0.1, -0.05, 0.2]
    doc["gravity"] = [0.0, -9.81, 0.0]
    return doc


def explicit_bushing_load(bushing, lower, q, qdot):
    # The bushing's load on the upper body from the printed formulas: the deflection rate with
    # the lower body at rest, f = -K (y - y0) - D y', and its wrench on frame 2.
    r1, x1, r2, x2 = bushing.frames(lower, q)
    spin = E_W(q[3:]) @ qdot[3:]
    rate = bushing_deflection_rate(r1, x1, r2, x2, jnp.zeros(3), jnp.zeros(3), spin,
                                   qdot[:3] + jnp.cross(spin, x2 - q[:3]))
    f = bushing_force(bushing.stiffness_matrix, bushing.damping_matrix,
                      bushing.deflection(lower, q), rate, bushing.reference)
    return bushing_wrenches(r1, x1, r2, x2, f)[1]


@pytest.mark.parametrize("kind", ["classic", "spine"])
def test_lagrange_by_autodiff_equals_newton_euler(kind):
    model = ModelFile.from_document(coupled_document(kind)).model
    rng = np.random.default_rng(1)
    for q, qdot in random_spatial_states(model.upper.reference_pose, rng, 5, 0.3):
        t = jnp.asarray(rng.uniform(0, 0.5))
        theirs = newton_euler_accelerations(model, q, qdot, t, explicit_bushing_load)
        # Both the autodiff path and the written-out form simulations use.
        for ours in (generalized_accelerations(model, t, q, qdot), model.accelerations(t, q, qdot)):
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-8,
                                       atol=1e-8 * float(jnp.abs(theirs).max()))


def test_undamped_unloaded_motion_conserves_energy():
    doc = coupled_document("spine")
    doc["bushings"][0]["damping"] = np.zeros((6, 6)).tolist()
    doc.pop("loads")
    doc["upper"]["initial_pose"] = [0.0005, 0.0352, -0.0003, 0.05, -0.08, 0.1]
    model = ModelFile.from_document(doc).model
    ts = jnp.linspace(0.0, 0.3, 301)
    solution = spineid.simulate(model, ts, rtol=1e-10, atol=1e-12)
    energy = jax.vmap(lambda q, v: mechanical_energy(model, 0.0, q, v))(solution.q,
                                                                         solution.qdot)
    assert float(jnp.ptp(energy)) < 1e-7 * float(energy[0])
    assert float(jnp.ptp(solution.q[:, 3])) > 0.05  # it did move


def test_classic_bushing_between_vertebral_centres_loads_the_neutral_posture():
    # Frames at the two centres of mass (35 mm apart): the classic bushing pushes at rest
    # (eq 19), the SpineBushing does not (eqs 22-23).
    loads = {}
    for kind in ("classic", "spine"):
        doc = coupled_document(kind)
        doc["gravity"] = [0.0, 0.0, 0.0]
        doc.pop("loads")
        bushing = doc["bushings"][0]
        bushing["frame1"] = {"body": "lower", "position": [0.0, 0.0, 0.0]}
        bushing["frame2"] = {"body": "upper", "position": [0.0, 0.0, 0.0]}
        bushing["stiffness"] = K_F_E
        model = ModelFile.from_document(doc).model
        q0, v0 = model.initial_state()
        loads[kind] = model.upper.mass * np.asarray(
            generalized_accelerations(model, 0.0, q0, v0))[:3]
    assert np.linalg.norm(loads["classic"]) > 1e3  # N: the "exceeds 1 kN" of section 5
    np.testing.assert_allclose(loads["spine"], 0.0, atol=1e-9)


def test_models_jit_and_vmap_over_stiffness():
    model_file = spineid.load_model_file(spineid.dataset_path("spatial_pair.toml"))
    ts = jnp.asarray(model_file.simulation_times()[:101])
    scales = jnp.array([0.8, 1.0, 1.25])

    def run(scale):
        stiffness = model_file.parameters[:6]
        start = jnp.array([p.get(model_file.model) for p in stiffness])
        model = apply_values(model_file.model, stiffness, scale * start)
        return spineid.simulate(model, ts).q

    batched = jax.jit(jax.vmap(run))(scales)
    assert batched.shape == (3, 101, 6)
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(run(1.0)), atol=1e-12)


@pytest.mark.parametrize("change, message", [
    ({"bushings": [{"kind": "classic", "frame1": {"body": "sacrum"}, "frame2": {"body": "upper"},
                    "stiffness": [1.0] * 6}]}, "frame1.body"),
    ({"bushings": [{"kind": "classic", "frame1": {"body": "upper"}, "frame2": {"body": "lower"},
                    "stiffness": [1.0] * 6}]}, "frame1.body"),
    ({"bushings": [{"kind": "spine", "frame1": {"body": "lower"}, "frame2": {"body": "upper"},
                    "stiffness": [[1.0 if i == j else (0.5 if (i, j) == (0, 4) else 0.0)
                                   for j in range(6)] for i in range(6)]}]}, "symmetric"),
    ({"upper": {"mass": 1.0, "inertia": [1e-3, 1e-3, 5e-3], "pose": [0, 0.03, 0, 0, 0, 0]}},
     "triangle inequality"),
    ({"upper": {"mass": 1.0, "inertia": [1e-3, -1e-3, 1e-3], "pose": [0, 0.03, 0, 0, 0, 0]}},
     "positive definite"),
    ({"upper": {"mass": 1.0, "inertia": [1e-3, 1e-3, 1e-3],
                "pose": [0, 0.03, 0, 0, np.pi / 2, 0]}}, "singularity"),
    ({"upper": {"mass": -1.0, "inertia": [1e-3, 1e-3, 1e-3], "pose": [0, 0.03, 0, 0, 0, 0]}},
     "upper.mass"),
])
def test_bad_model_files_name_the_entry(change, message):
    with pytest.raises(ValueError, match=message):
        ModelFile.from_document(with_changes(**change), source="bad.toml")


def test_non_positive_definite_stiffness_warns():
    doc = document()
    stiffness = np.eye(6)
    stiffness[0, 5] = stiffness[5, 0] = 2.0  # eigenvalue -1 in the tx-rz plane
    doc["bushings"][0]["stiffness"] = stiffness.tolist()
    with pytest.warns(UserWarning, match="unstable"):
        ModelFile.from_document(doc)


@pytest.mark.xdist_group("opensim")  # one process at a time runs OpenSim
def test_fit_command_recovers_bushing_stiffness_within_one_percent_and_exports(tmp_path):
    # The target: diagonal bushing stiffness from a 6-DOF trajectory with 5 um /
    # 0.01 deg noise, every entry within 1%. Half the bundled record (0.3 s) keeps the test
    # short; its standard errors are 0.03-0.2%, so 1% is more than four of them.
    import json

    from spineid.cli import main
    from spineid.io import dumps_toml

    truth = document()
    truth["simulation"] = {"t_end": 0.3, "n_samples": 301}
    model = ModelFile.from_document(truth).model
    ts = np.linspace(0.0, 0.3, 301)
    poses = np.asarray(spineid.simulate(model, jnp.asarray(ts), rtol=1e-12, atol=1e-14).q)
    noise = np.array([5e-6] * 3 + [np.radians(0.01)] * 3)
    poses = poses + np.random.default_rng(8).normal(size=poses.shape) * noise
    spineid.write_trajectory(tmp_path / "data.csv", ts, poses, model.observable_names)
    start = copy.deepcopy(truth)
    start["bushings"][0]["stiffness"] = [
        factor * k for factor, k in zip([1.3, 0.75, 1.2, 0.8, 1.25, 0.7],
                                        truth["bushings"][0]["stiffness"])]
    (tmp_path / "start.toml").write_text(dumps_toml(start))
    noise_flag = ",".join(f"{c}={s}" for c, s in zip(model.observable_names, noise))
    out = tmp_path / "out"
    assert main(["fit", str(tmp_path / "start.toml"), str(tmp_path / "data.csv"),
                 "--free", "bushing.stiffness", "--noise", noise_flag, "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    for entry, true_value in zip(report["parameters"], truth["bushings"][0]["stiffness"]):
        assert abs(entry["value"] - true_value) < 5 * entry["stderr"], entry
        assert abs(entry["value"] / true_value - 1) < 0.01, entry
        assert entry["stderr"] / true_value < 0.0025, entry
    assert "<BushingForce" in (out / "fitted.osim").read_text()
