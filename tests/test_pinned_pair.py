"""The exact pin joint: analytic limits, MuJoCo's hinge, file errors, and fitting it."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid

TS = np.linspace(0.0, 0.3, 151)


def pinned_document(**changes):
    document = copy.deepcopy(
        spineid.load_model_file(spineid.dataset_path("pinned_pair.toml")).document
    )
    document.update(changes)
    return document


def poses(document, ts=TS, **kwargs):
    model = spineid.ModelFile.from_document(document).model
    return np.asarray(jax.vmap(model.observe)(spineid.simulate(model, jnp.asarray(ts), **kwargs).q))


def test_small_oscillation_frequency_follows_the_parallel_axis_theorem():
    import equinox as eqx

    document = pinned_document(loads=[])
    document["torsion"][0]["damping"] = 0.0
    model = spineid.ModelFile.from_document(document).model
    amplitude = 1e-6
    model = eqx.tree_at(lambda m: m.initial_angle, model, jnp.asarray(amplitude))
    sim = spineid.simulate(model, jnp.asarray(TS), rtol=1e-12, atol=1e-16)
    arm = np.asarray(model.upper.reference_pose[:2] - model.pin)
    inertia_about_pin = 1.2e-3 + 0.5 * arm @ arm
    omega = np.sqrt(6.0 / inertia_about_pin)
    np.testing.assert_allclose(sim.q[:, 0], amplitude * np.cos(omega * TS), atol=1e-5 * amplitude)


mujoco = pytest.importorskip("mujoco", reason="MuJoCo oracle needs `pip install mujoco`")


def test_pinned_pair_matches_a_mujoco_hinge():
    document = pinned_document(gravity=[0.0, -9.81])
    model = spineid.ModelFile.from_document(document).model
    x0, y0, _ = document["upper"]["pose"]
    px, py = document["pin"]["point"]
    torsion = document["torsion"][0]
    dt = 2e-5
    xml = f"""
    <mujoco>
      <option timestep="{dt}" integrator="RK4" gravity="0 -9.81 0"><flag contact="disable"/></option>
      <worldbody>
        <body name="upper" pos="{x0} {y0} 0">
          <joint name="pin" type="hinge" axis="0 0 1" pos="{px - x0} {py - y0} 0"
                 stiffness="{torsion['stiffness']}" damping="{torsion['damping']}"/>
          <inertial pos="0 0 0" mass="0.5" diaginertia="1e-3 1e-3 1.2e-3"/>
        </body>
      </worldbody>
    </mujoco>"""
    mj_model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(mj_model)
    body = mj_model.body("upper").id
    every = int(round((TS[1] - TS[0]) / dt))
    mujoco.mj_forward(mj_model, data)
    theirs = [np.concatenate([data.xipos[body][:2], data.qpos])]
    for _ in range(len(TS) - 1):
        for _ in range(every):
            fx, fy, mz = np.asarray(model.applied_load(data.time + dt / 2))
            data.xfrc_applied[body] = [fx, fy, 0.0, 0.0, 0.0, mz]
            mujoco.mj_step(mj_model, data)
        mujoco.mj_forward(mj_model, data)
        theirs.append(np.concatenate([data.xipos[body][:2], data.qpos]))
    theirs = np.asarray(theirs)
    ours = poses(document, rtol=1e-11, atol=1e-14)
    motion = np.ptp(ours, axis=0)
    assert motion[2] > 1e-2
    np.testing.assert_allclose(ours, theirs, atol=1e-6 * motion.max() + 1e-9)


BAD = {
    "free lower body": (lambda d: d["lower"].update(fixed=False, mass=1.0, inertia=1e-3),
                        "lower.fixed"),
    "missing pin": (lambda d: d.pop("pin"), "pin"),
    "pin with unknown key": (lambda d: d["pin"].update(radius=1.0), "pin.radius"),
    "start off the circle": (lambda d: d["upper"].update(initial_pose=[0.01, 0.03, 0.1]),
                             "upper.initial_pose"),
    "springs on a pin": (lambda d: d.update(springs=[]), "springs"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_pinned_pair_files_fail_clearly(case):
    mutate, pattern = BAD[case]
    document = pinned_document()
    mutate(document)
    with pytest.raises(ValueError, match=pattern):
        spineid.ModelFile.from_document(document, source="pin.toml")


def test_torsion_of_the_pin_is_recovered_by_the_fit_engine():
    truth = pinned_document()
    data = poses(truth)
    start = copy.deepcopy(truth)
    start["torsion"][0]["stiffness"] = 4.0
    start["torsion"][0]["damping"] = 0.01
    noise = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}
    problem = spineid.FitProblem(spineid.ModelFile.from_document(start),
                                 spineid.Measurement(TS, data, ("x", "y", "theta")),
                                 ["torsion"], noise)
    result = spineid.fit(problem)
    assert result.converged and result.identifiability.rank == 2
    assert np.all(np.abs(result.values - [6.0, 0.004]) <= 0.02 * result.stderr)
