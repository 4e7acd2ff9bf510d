"""The head-neck chain of Fritzkowski and Walczak: the autodiff mass matrix against eqs 43-44
as printed (and the chain's projected equations against the generic Lagrangian path), the
pulse against eq 48 and its own integral, the 'kinetic energy - work' check (eqs 49-55) with
the transport inertia forces, the model file and its tied parameters, the whiplash command,
and bad input."""

import json
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spineid import _programs
from spineid import (
    apply_values, dataset_path, energy_work_check, fritzkowski_parameters,
    generalized_accelerations, head_neck_chain, mass_matrix, ModelFile, read_trajectory,
    TriangularPulse,
)
from spineid.cli import main
from spineid.io._kinds._head_neck import head_neck_arguments
from spineid.io import read_toml


def eq_44_mass_matrix(chain, q):
    # a_ij of eq 44 as printed, with the sums m_bar_i = sum_(j > i) m_j and the constants
    # A_ij, B_ij, A_Sij, B_Sij, A_SSii of the links (dx_i, dy_i) and centres (dx_Si, dy_Si).
    m = np.asarray(chain.masses)
    inertia = np.asarray(chain.inertias)
    dx, dy = np.asarray(chain.links).T
    sx, sy = np.asarray(chain.centres).T
    n = m.size
    m_bar = np.array([m[i + 1:].sum() for i in range(n)])
    a = np.zeros((n, n))
    for i in range(n):
        a[i, i] = m_bar[i] * (dx[i] ** 2 + dy[i] ** 2) + m[i] * (sx[i] ** 2 + sy[i] ** 2) \
            + inertia[i]
        for j in range(i):
            theta = q[i] - q[j]
            big_a, big_b = dx[i] * dx[j] + dy[i] * dy[j], dx[i] * dy[j] - dy[i] * dx[j]
            a_s, b_s = sx[i] * dx[j] + sy[i] * dy[j], sx[i] * dy[j] - sy[i] * dx[j]
            a[i, j] = a[j, i] = (m_bar[i] * (big_a * np.cos(theta) - big_b * np.sin(theta))
                                 + m[i] * (a_s * np.cos(theta) - b_s * np.sin(theta)))
    return a


def test_mass_matrix_by_autodiff_equals_eqs_43_44():
    chain = head_neck_chain()
    # Compiled once: op-by-op dispatch of these autodiff expressions costs seconds per call.
    autodiff_mass = jax.jit(lambda q: mass_matrix(chain, 0.0, q, jnp.zeros(chain.n_dof)))
    kane = jax.jit(lambda t, q, qdot: chain.accelerations(t, q, qdot))
    generic = jax.jit(lambda t, q, qdot: generalized_accelerations(chain, t, q, qdot))
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = rng.uniform(-0.6, 0.6, chain.n_dof)
        ours = np.asarray(autodiff_mass(jnp.asarray(q)))
        np.testing.assert_allclose(ours, eq_44_mass_matrix(chain, q), rtol=1e-12,
                                   atol=1e-12 * np.abs(ours).max())
        # The chain's projected (Kane-form) accelerations against the generic Lagrangian path.
        t, qdot = rng.uniform(0.0, 0.12), jnp.asarray(rng.normal(0.0, 5.0, chain.n_dof))
        np.testing.assert_allclose(kane(t, jnp.asarray(q), qdot),
                                   generic(t, jnp.asarray(q), qdot), rtol=1e-10, atol=1e-8)


def test_pulse_is_the_double_integral_of_the_triangle_and_eq_48_is_not():
    pulse = TriangularPulse()
    ts = jnp.linspace(0.0, 0.2, 2001)
    velocity = jax.vmap(jax.grad(pulse.displacement))(ts)
    acceleration = jax.vmap(jax.grad(jax.grad(pulse.displacement)))(ts)
    np.testing.assert_allclose(acceleration, jax.vmap(pulse.acceleration)(ts), atol=1e-9)
    assert float(jnp.max(pulse.acceleration(ts))) == pytest.approx(8.5 * 9.81)
    # Continuous velocity, ending at peak * t_end / 2.
    assert np.max(np.abs(np.diff(np.asarray(velocity)))) < 0.01
    assert float(velocity[-1]) == pytest.approx(8.5 * 9.81 * 0.105 / 2, rel=1e-12)
    # Eq 48 as printed: the velocity flips sign at t_peak and the base returns to 0.
    printed = jax.grad(pulse.printed_eq_48)
    assert float(printed(0.0525 - 1e-9)) == pytest.approx(-float(printed(0.0525 + 1e-9)),
                                                          rel=1e-6)
    assert float(pulse.printed_eq_48(0.15)) == 0.0
    with pytest.raises(ValueError, match="t_peak"):
        TriangularPulse(t_peak=0.2, t_end=0.1)


def test_kinetic_energy_equals_work_along_the_whiplash():
    # T_2(t) - W(t) = 0 (eq 53) with W the work of all generalized forces including the
    # transport inertia forces -gamma (eq 50): e_R far below the paper's 0.0103.
    chain = head_neck_chain()
    check = energy_work_check(chain, jnp.linspace(0.0, 0.2, 201), rtol=1e-8, atol=1e-10)
    assert float(jnp.max(check.relative_kinetic_energy)) > 1.0  # J: the neck really moves
    assert float(jnp.max(check.relative_error)) < 1e-8
    # Without the transport forces the balance fails: they do most of the work.
    power = jax.vmap(chain.transport_force)(check.ts, check.q)
    assert float(jnp.max(jnp.abs(jnp.sum(power * check.qdot, axis=1)))) > 10.0


@pytest.mark.xdist_group("whiplash")
def test_whiplash_command_bends_the_neck_and_writes_the_study(tmp_path, capsys):
    out = tmp_path / "whiplash"
    traced, checked = _programs.counts.traced, set(_programs._checked)
    # (0.3 s, as notebook 06 and the long run below: the three share one stored program)
    assert main(["whiplash", "--t-end", "0.3", "--out", str(out)]) == 0
    # Its windows' solve ran from a stored program (exported here, loaded by a later process:
    # its tracing took most of a second process's 12 s), none traced as usual; where the
    # store is on (`SPINEID_CACHE` or `SPINEID_PROGRAMS` off turn it off) and no other test of
    # this worker has monkeypatched spineid, which stops it for the rest of the process
    # (`_programs.patched`: traces made under a patch could otherwise be stored).
    if _programs.program_folder() is not None and not _programs._tainted:
        assert _programs.counts.traced == traced and len(_programs._checked - checked) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["peak_relative_error_e_R"] < 1e-5  # Kvaerno4 at rtol 1e-5; paper 0.0103
    assert summary["head_extension_deg"]["value"] < -20.0  # the head extends behind the torso
    assert summary["head_rearward_mm"]["value"] < -20.0
    s_shape, c_shape = summary["s_shape_s"], summary["c_shape_s"]
    assert s_shape[0] < 0.01 and s_shape[1] < c_shape[0] < 0.1  # S-shape first, then C-shape
    forces = [entry["force_N"] for entry in summary["peak_ligament_force"].values()]
    assert 10.0 < max(forces) < 500.0  # N; the paper's peak is about 45 N
    ts, head = read_trajectory(out / "head.csv", ("head_x", "head_y"))
    assert ts[-1] == pytest.approx(0.3) and head.shape == (301, 2)
    for name in ("whiplash.png", "snapshots.png"):
        assert (out / name).stat().st_size > 10_000
    capsys.readouterr()
    # The seed paper's integrator: the same motion (to the tolerance) and its energy balance.
    # (0.3 s, as notebook 06 runs MEBDF: one stored program)
    assert main(["whiplash", "--t-end", "0.3", "--integrator", "mebdf", "--out",
                 str(tmp_path / "mebdf")]) == 0
    assert "(MEBDF, rtol 1e-05)" in capsys.readouterr().out
    _, by_mebdf = read_trajectory(tmp_path / "mebdf" / "head.csv", ("head_x", "head_y"))
    assert np.max(np.abs(by_mebdf - head)) < 2e-5  # m
    assert json.loads((tmp_path / "mebdf" / "summary.json").read_text())[
        "peak_relative_error_e_R"] < 1e-3
    # Refused before anything is written: the earlier outputs stay whole.
    assert main(["whiplash", "--t-end", "0.08", "--out", str(out), "--overwrite"]) == 2
    assert "before the pulse does" in capsys.readouterr().err
    assert json.loads((out / "spineid-outputs.json").read_text())["complete"]
    assert json.loads((out / "summary.json").read_text()) == summary


@pytest.mark.xdist_group("whiplash")  # one process compiles the chain's integration once
def test_a_whiplash_run_that_fails_says_why_in_one_line_and_writes_nothing(tmp_path, capsys):
    # A model the implicit solver cannot finish (gravity of 1e19 m/s^2 took 110k steps, minutes)
    # printed a 37-line equinox traceback; a step limit makes the same failure at once.
    out = tmp_path / "whiplash"
    assert main(["whiplash", "--t-end", "0.2", "--max-steps", "50", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert "the whiplash simulation failed" in error and "maximum number of solver steps" in error
    assert "requested 0 to 0.2 s" in error and "steps taken" in error
    assert "spineid whiplash --max-steps" in error
    assert not out.exists()


@pytest.mark.xdist_group("whiplash")
def test_a_long_whiplash_run_shows_progress_and_can_be_stopped_between_windows(caplog):
    # The run is integrated in windows so that Python gets control between them: progress is
    # heard after each, and an interruption raised there (as a signal handler raises it) ends
    # the run at once instead of after the whole compiled integration. The windows' solve
    # calls nothing back in Python, so it runs from a stored program (`stored_call`) whose
    # compilation JAX's persistent cache keeps for the next process (logged here: the
    # programs of this process dropped first).
    from spineid.studies import whiplash_study

    heard = []

    class Stop(Exception):
        pass

    def progress(t, n_steps):
        heard.append((t, n_steps))
        if len(heard) == 3:
            raise Stop

    jax.clear_caches()
    with caplog.at_level(logging.DEBUG, logger="jax._src.compiler"), pytest.raises(Stop):
        whiplash_study(head_neck_chain(), t_end=0.3, progress=progress)
    (t1, n1), (t2, n2), (t3, n3) = heard
    assert (t1, t2, t3) == pytest.approx((0.03, 0.06, 0.09))  # 10 windows of 0.3 s
    assert 0 < n1 < n2 < n3
    logged = [r.getMessage() for r in caplog.records if "whiplash_window" in r.getMessage()]
    assert any("persistent compilation cache" in m.lower() for m in logged), logged
    assert not any(m.startswith("Not writing") for m in logged), logged


def test_model_file_parameters_set_every_level():
    document = read_toml(dataset_path("head_neck.toml"))
    model_file = ModelFile.from_document(document, "head_neck.toml")
    chain = model_file.model
    # The bundled values are Table 1 (fritzkowski_table1.csv): B anterior, A posterior.
    paper = dict(zip(fritzkowski_parameters()["symbol"], fritzkowski_parameters()["value"]))
    table_1 = {"ligaments.anterior_stiffness": paper["k_B"],
               "ligaments.posterior_stiffness": paper["k_A"],
               "ligaments.anterior_damping": paper["c_B"],
               "ligaments.posterior_damping": paper["c_A"],
               "joints.stiffness": paper["k_O"], "joints.damping": paper["c_O"]}
    assert {p.name: float(p.get(chain)) for p in model_file.parameters} == table_1
    changed = apply_values(chain, model_file.parameters, jnp.arange(1.0, 7.0))
    np.testing.assert_array_equal(changed.k_anterior, np.full(8, 1.0))
    np.testing.assert_array_equal(changed.c_joint, np.full(8, 6.0))
    assert changed.pulse.t_end == 0.105 and float(changed.pulse.peak) == pytest.approx(83.385)


def test_bad_input_is_named():
    document = read_toml(dataset_path("head_neck.toml"))
    arguments = head_neck_arguments(document)
    bad_mass = dict(masses=np.r_[arguments["masses"][:-1], -1.0])
    with pytest.raises(ValueError, match=r"masses\[7\]"):
        head_neck_chain(document, **bad_mass)
    # Put B'_3 on B''_2: a ligament of zero length.
    coincident = arguments["anterior_lower"].copy()
    coincident[3] = arguments["anterior_upper"][2] - arguments["links"][2]
    with pytest.raises(ValueError, match="anterior ligament 3.*coincide"):
        head_neck_chain(document, anterior_lower=coincident)
    with pytest.raises(ValueError, match="k_joint"):
        head_neck_chain(document, k_joint=-1.0)
    short = dict(document, simulation={"t_end": 0.05, "n_samples": 51})
    with pytest.raises(ValueError, match="simulation.t_end.*pulse"):
        ModelFile.from_document(short, "short.toml")
    negative = dict(document, geometry=dict(document["geometry"], body_height=[-0.01] * 7))
    with pytest.raises(ValueError, match="geometry.body_height"):
        ModelFile.from_document(negative, "negative.toml")
