"""Export to OpenSim: the written .osim loads in OpenSim 4.x, its frames sit where spineid puts
them and its bushings (BushingForce or ExpressionBasedBushingForce) apply spineid's loads."""

import copy

import equinox as eqx
import numpy as np
import pytest

import spineid
from spineid import (
    bushing_deflection_rate, bushing_force, bushing_wrenches, ModelFile, opensim_model_xml,
    write_opensim_model,
)
from spineid.io import read_toml
from spineid.elements._bushings import pack_symmetric
from helpers import K_F_E as EQ_24  # Christophy et al. 2013 eq 24

K_F_E = np.array(EQ_24) / 10


def models():
    classic = read_toml(spineid.dataset_path("spatial_pair.toml"))
    spine = copy.deepcopy(classic)
    spine["lower"]["pose"] = [0.001, -0.002, 0.0, 0.05, 0.0, -0.1]
    spine["bushings"][0].update(kind="spine", stiffness=K_F_E.tolist())
    spine["bushings"][0]["frame1"]["orientation"] = [0.1, -0.2, 0.05]
    spine["bushings"][0]["frame2"]["orientation"] = [0.0, 0.3, -0.1]
    return {"classic": ModelFile.from_document(classic).model,
            "spine": ModelFile.from_document(spine).model}


def test_element_choice_and_coupled_damping_refused():
    text = {name: opensim_model_xml(model) for name, model in models().items()}
    assert "<BushingForce" in text["classic"] and "Expression" not in text["classic"]
    assert "<ExpressionBasedBushingForce" in text["spine"]
    model = models()["classic"]
    coupled = np.asarray(model.elements[0].damping_matrix).copy()
    coupled[0, 5] = coupled[5, 0] = 1.0
    bad = eqx.tree_at(lambda m: m.elements[0].damping, model, pack_symmetric(coupled))
    with pytest.raises(ValueError, match="diagonal damping"):
        opensim_model_xml(bad)


@pytest.mark.xdist_group("opensim")  # one process at a time runs OpenSim
@pytest.mark.parametrize("kind", ["classic", "spine"])
def test_exported_model_loads_in_opensim_and_applies_the_same_loads(kind, tmp_path):
    osim = pytest.importorskip(
        "opensim", reason="the opensim package (PyPI `opensim`) is not installed here")
    model = models()[kind]
    path = write_opensim_model(model, tmp_path / f"{kind}.osim")
    loaded = osim.Model(str(path))
    state = loaded.initSystem()
    coordinates = [loaded.getCoordinateSet().get(k) for k in range(6)]
    force = loaded.getForceSet().get(0)
    frames = [loaded.getComponent("/ground/bushing0_frame1"),
              loaded.getComponent("/bodyset/upper/bushing0_frame2")]
    body = loaded.getBodySet().get(0)
    bushing = model.elements[0]
    lower = np.asarray(model.lower.reference_pose)
    rng = np.random.default_rng(3)

    def vec(v):
        return np.array([v.get(i) for i in range(3)])

    # Default coordinates: the reference pose.
    np.testing.assert_allclose([c.getDefaultValue() for c in coordinates],
                               np.concatenate([model.upper.reference_pose[3:],
                                               model.upper.reference_pose[:3]]))
    for _ in range(5):
        q = np.asarray(model.upper.reference_pose) + np.concatenate(
            [rng.uniform(-2e-3, 2e-3, 3), rng.uniform(-0.3, 0.3, 3)])
        for k, value in enumerate(np.concatenate([q[3:], q[:3]])):
            coordinates[k].setValue(state, float(value), False)
            coordinates[k].setSpeedValue(state, float(rng.uniform(-0.5, 0.5)))
        loaded.realizeDynamics(state)
        ours = [np.asarray(a) for a in bushing.frames(lower, q)]
        poses = []
        for frame in frames:
            transform = frame.getTransformInGround(state)
            poses.append((np.array([[transform.R().get(i, j) for j in range(3)]
                                    for i in range(3)]), vec(transform.p())))
        np.testing.assert_allclose(poses[0][0], ours[0], atol=1e-12)
        np.testing.assert_allclose(poses[0][1], ours[1], atol=1e-12)
        np.testing.assert_allclose(poses[1][0], ours[2], atol=1e-12)
        np.testing.assert_allclose(poses[1][1], ours[3], atol=1e-12)
        velocities = [frame.getVelocityInGround(state) for frame in frames]
        (w1, v1), (w2, v2) = [(vec(v.get(0)), vec(v.get(1))) for v in velocities]
        r1, x1, r2, x2 = ours
        rate = bushing_deflection_rate(r1, x1, r2, x2, w1, v1, w2, v2)
        f = bushing_force(bushing.stiffness_matrix, bushing.damping_matrix,
                          bushing.deflection(lower, q), rate, bushing.reference)
        wrench1, wrench2 = bushing_wrenches(r1, x1, r2, x2, f)
        values = force.getRecordValues(state)
        theirs = np.array([values.get(i) for i in range(values.size())]).reshape(4, 3)
        # BushingForce records torques about the bodies' origins (ground's, the upper body's
        # centre), ExpressionBasedBushingForce about the frames' origins.
        origin1, origin2 = np.zeros(3), vec(body.getTransformInGround(state).p())
        if kind == "spine":
            origin1, origin2 = x1, x2
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(np.asarray(wrench1[1]), theirs[0], atol=1e-8 * scale)
        np.testing.assert_allclose(
            np.asarray(wrench1[0]) + np.cross(x1 - origin1, np.asarray(wrench1[1])),
            theirs[1], atol=1e-8 * scale)
        np.testing.assert_allclose(np.asarray(wrench2[1]), theirs[2], atol=1e-8 * scale)
        np.testing.assert_allclose(
            np.asarray(wrench2[0]) + np.cross(x2 - origin2, np.asarray(wrench2[1])),
            theirs[3], atol=1e-8 * scale)
