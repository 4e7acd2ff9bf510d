"""Trajectories against MuJoCo, an independent simulator (test-time dependency only).

MuJoCo models the upper body with slide-x, slide-y and hinge-z joints; axial springs are
spatial tendons with stiffness, damping and rest length; the torsion spring is the hinge's
stiffness and damping; loads are applied as external wrenches at the centre of mass.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, TORSION, document

mujoco = pytest.importorskip("mujoco", reason="MuJoCo oracle needs `pip install mujoco`")


def mujoco_trajectory(doc, pair, ts, dt=2e-5):
    upper = doc["upper"]
    x0, y0, _ = upper["pose"]
    sites_world, sites_body, tendons = [], [], []
    for i, spring in enumerate(doc["springs"]):
        lx, ly = spring["lower_point"]
        ux, uy = spring["upper_point"]
        sites_world.append(f'<site name="a{i}" pos="{lx} {ly} 0"/>')
        sites_body.append(f'<site name="b{i}" pos="{ux - x0} {uy - y0} 0"/>')
        tendons.append(
            f'<spatial stiffness="{spring["stiffness"]}" damping="{spring["damping"]}">'
            f'<site site="a{i}"/><site site="b{i}"/></spatial>'
        )
    torsion = doc["torsion"][0]
    gx, gy = doc.get("gravity", [0.0, 0.0])
    xml = f"""
    <mujoco>
      <option timestep="{dt}" integrator="RK4" gravity="{gx} {gy} 0">
        <flag contact="disable"/>
      </option>
      <worldbody>
        {''.join(sites_world)}
        <body name="upper" pos="{x0} {y0} 0">
          <joint name="x" type="slide" axis="1 0 0"/>
          <joint name="y" type="slide" axis="0 1 0"/>
          <joint name="theta" type="hinge" axis="0 0 1" stiffness="{torsion['stiffness']}"
                 damping="{torsion['damping']}"/>
          <inertial pos="0 0 0" mass="{upper['mass']}" diaginertia="1e-3 1e-3 {upper['inertia']}"/>
          {''.join(sites_body)}
        </body>
      </worldbody>
      <tendon>{''.join(tendons)}</tendon>
    </mujoco>"""
    mj_model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(mj_model)
    body = mj_model.body("upper").id
    every = int(round((ts[1] - ts[0]) / dt))
    out = [data.qpos.copy()]
    for _ in range(len(ts) - 1):
        for _ in range(every):
            # The wrench is held over a step: evaluate it at mid-step for second-order accuracy.
            fx, fy, mz = np.asarray(pair.applied_load(data.time + dt / 2))
            data.xfrc_applied[body] = [fx, fy, 0.0, 0.0, 0.0, mz]
            mujoco.mj_step(mj_model, data)
        out.append(data.qpos.copy())
    return np.asarray(out) + np.array([x0, y0, 0.0])


def test_axial_springs_torsion_loads_gravity_match_mujoco():
    doc = document(springs=AXIAL_SPRINGS, torsion=TORSION, loads=LOADS, gravity=[0.0, -9.81])
    pair = spineid.model_from_document(doc)
    ts = np.linspace(0.0, 0.25, 126)
    ours = np.asarray(jax.vmap(pair.observe)(spineid.simulate(pair, jnp.asarray(ts), rtol=1e-10, atol=1e-13).q))
    theirs = mujoco_trajectory(doc, pair, ts)
    motion = np.ptp(ours, axis=0)
    assert np.all(motion > [1e-5, 1e-5, 1e-3])
    error = np.max(np.abs(ours - theirs), axis=0) / motion
    assert np.all(error < 1e-6), error
