"""Traced programs kept on disk (spineid/_programs.py): a second process runs the fit from the
program the first exported, with the same numbers as a traced fit; what cannot be keyed
faithfully (code defined outside spineid and its libraries, closures, arrays held as static
data) is traced as usual; a damaged file is exported again."""

import json
import os
import subprocess
import sys

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from spineid import _programs
from spineid._arrays import floats
from spineid.identify._common._goodness import chi_square_sf
from spineid.simulation._modes import _state_jacobian

from helpers import noisy_pair_script


@pytest.fixture(autouse=True)
def _untainted(monkeypatch):
    # Another test of this worker may have monkeypatched spineid (which stops the store for the
    # rest of its process: `_programs.patched`); these tests start from a clean state.
    monkeypatch.setattr(_programs, "_tainted", "")


FIT = noisy_pair_script(["springs[0].stiffness", "springs[2].stiffness"]) + """
import spineid._programs as programs
result = spineid.fit(problem, "lm")
print("values", [float(v).hex() for v in result.values])
print("stderr", [float(v).hex() for v in result.stderr])
print("cost", float(result.cost).hex(), "steps", result.n_steps)
c = programs.counts
print("counts", c.loaded, c.exported, c.traced)
"""


def _run(code, tmp_path, **environment):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPINEID_")}
    env.update(SPINEID_CACHE_DIR=str(tmp_path / "cache"), **environment)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.strip().splitlines())
    return lines


def test_a_second_process_runs_the_stored_fit_with_the_numbers_of_a_traced_one(tmp_path):
    first = _run(FIT, tmp_path)
    loaded, exported, traced = map(int, first["counts"].split())
    assert loaded == 0 and exported >= 1 and traced == 0  # (the LM solve and its helpers)
    stored = list((tmp_path / "cache" / _programs.FOLDER).glob("*.program"))
    assert len(stored) == exported
    second = _run(FIT, tmp_path)
    assert second["counts"] == f"{exported} 0 0"  # loaded, nothing traced
    traced = _run(FIT, tmp_path, SPINEID_PROGRAMS="off")  # the store off: traced as before
    loaded, exported, traced_calls = map(int, traced["counts"].split())
    assert loaded == exported == 0 and traced_calls >= len(stored)
    for key in ("values", "stderr", "cost"):
        assert first[key] == second[key] == traced[key]  # bit for bit


STEPWISE = noisy_pair_script(["springs[0].stiffness", "springs[2].stiffness"]) + """
import contextlib, io
import jax.numpy as jnp
import spineid._programs as programs
from spineid.identify._common._least_squares import stepwise_levenberg_marquardt
from spineid.identify._trajectory._objective import forward_objective
objective = forward_objective(problem, np.array([5e-6, 5e-6, 1.7e-4]))
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    solution = stepwise_levenberg_marquardt(
        objective, problem.transform().to_unconstrained(jnp.asarray(problem.start)),
        progress=True)
print("value", [float(v).hex() for v in solution.value])
print("steps", int(solution.steps), len(printed.getvalue().splitlines()))
c = programs.counts
print("counts", c.loaded, c.exported, c.traced)
"""


def test_the_stepwise_loop_runs_its_linearisation_from_the_stored_program(tmp_path):
    # The loop that spine-level and segment fits run (each of its evaluations a compiled
    # residual-and-Jacobian program, `stored_call`): a second process loads that program and
    # traces nothing of it, with the iterations of a process that traces it (the store off)
    # bit for bit; the progress lines printed from Python, one per update (a program that
    # printed could not be stored).
    first = _run(STEPWISE, tmp_path)
    loaded, exported, traced = map(int, first["counts"].split())
    assert loaded == 0 and exported >= 1 and traced == 0
    second = _run(STEPWISE, tmp_path)
    assert second["counts"] == f"{exported} 0 0"
    off = _run(STEPWISE, tmp_path, SPINEID_PROGRAMS="off")
    assert off["counts"].startswith("0 0 ")
    for key in ("value", "steps"):
        assert first[key] == second[key] == off[key]
    steps, lines = map(int, first["steps"].split())
    assert steps >= 1 and lines == steps + 1  # (the start's update prints too)


class _Scaled(eqx.Module):  # (a model class of this test module: its code is in no key)
    k: jax.Array

    def __call__(self, x):
        return self.k * x


def _pair():
    return spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml")).model


def _key(model, t=0.0):
    """The key of the modes' Jacobian of `model` at time `t` (a spineid function)."""
    arguments = (model, jnp.asarray(t, dtype=float), model.initial_state())
    return _programs.program_key(_state_jacobian, arguments, {})[:2]


def test_the_key_names_the_structure_and_shapes_not_the_values():
    pair = _pair()
    key, flat = _key(pair)
    assert key is not None and all(isinstance(x, jax.Array) for x in flat)
    stiffer = eqx.tree_at(lambda m: m.elements[0].stiffness, pair,
                          2.0 * pair.elements[0].stiffness)
    assert _key(stiffer)[0] == key  # other values: the same program
    assert _key(pair, t=0.5)[0] == key
    weak = (pair, jnp.asarray(0.0), pair.initial_state())  # (a Python number made an array)
    assert _programs.program_key(_state_jacobian, weak, {})[0] not in (None, key)
    three = eqx.tree_at(lambda m: (m.elements[0].points_a, m.elements[0].points_b,
                                   m.elements[0].rest_length, m.elements[0].stiffness,
                                   m.elements[0].damping),
                        pair, tuple(x[:3] for x in (pair.elements[0].points_a,
                                                    pair.elements[0].points_b,
                                                    pair.elements[0].rest_length,
                                                    pair.elements[0].stiffness,
                                                    pair.elements[0].damping)))
    assert _key(three)[0] not in (None, key)  # other shapes
    free = eqx.tree_at(lambda m: m.lower, pair, pair.upper)  # a static field: fixed=False
    assert _key(free)[0] not in (None, key)
    float32 = (pair, jnp.asarray(0.0, dtype=jnp.float32), pair.initial_state())
    assert _programs.program_key(_state_jacobian, float32, {})[0] not in (None, key)


def test_what_cannot_be_keyed_faithfully_is_refused_with_its_reason():
    arguments = (jnp.asarray(0.0, dtype=float), _pair().initial_state())
    key, reason, _ = _programs.program_key(_state_jacobian, (_Scaled(jnp.asarray(2.0)),
                                                             *arguments), {})
    assert key is None and "_Scaled" in reason
    key, reason, _ = _programs.program_key(_state_jacobian, (lambda t, y: y, *arguments), {})
    assert key is None and "<lambda>" in reason
    assert "array" in _programs._name_functions((1.0, np.ones(3)), {}, [])
    # A module's repr abbreviates its arrays (f64[2]): walked, and refused like any array.
    controller = diffrax.PIDController(rtol=1e-6, atol=1e-8, jump_ts=np.array([0.1, 0.2]))
    assert "array" in _programs._name_functions(diffrax.BacksolveAdjoint(
        stepsize_controller=controller), {}, [])
    # A transformation of a spineid function keeps its name: not the function's program.
    key, reason, _ = _programs.program_key(jax.grad(_state_jacobian), arguments, {})
    assert key is None


    @eqx.filter_jit
    def local(x):
        return (x,)

    key, reason, _ = _programs.program_key(local, (jnp.ones(2),), {})
    assert key is None and "local" in reason


def test_a_refused_or_unexportable_call_is_traced_with_the_same_result(tmp_path, monkeypatch):
    before = _programs.counts.traced
    scaled = _Scaled(jnp.asarray(2.0))
    state = (jnp.zeros(1), jnp.zeros(1))
    with pytest.raises(Exception):  # (_Scaled is no Lagrangian system: traced, and it fails)
        _programs.stored_call(_state_jacobian, scaled, jnp.asarray(0.0, dtype=float), state)
    assert _programs.counts.traced == before + 1

    attempts = []

    def refuse(*args, **kwargs):  # (as export refuses a program with host callbacks)
        attempts.append(1)
        raise NotImplementedError("serialization of host_callbacks is not yet implemented")

    monkeypatch.setattr(jax.export, "export", refuse)
    monkeypatch.setattr(_programs, "program_folder", lambda: tmp_path / _programs.FOLDER)
    pair = eqx.tree_at(lambda m: m.gravity, _pair(), jnp.asarray([0.0, -9.80665 * 1.5]))
    arguments = (pair, jnp.asarray(0.0, dtype=float), pair.initial_state())
    _programs.forget()
    stored = _programs.stored_call(_state_jacobian, *arguments)[0]
    assert _programs.counts.reasons[-1].startswith("not exportable: NotImplementedError")
    expected = _state_jacobian(*arguments)[0]
    assert np.array_equal(stored, expected)
    # Noted beside the program's path: a later process does not try (and trace) again.
    assert len(list((tmp_path / _programs.FOLDER).glob("*.traced"))) == 1
    _programs.forget()
    assert np.array_equal(_programs.stored_call(_state_jacobian, *arguments)[0], expected)
    assert len(attempts) == 1
    assert _programs.counts.reasons[-1] == "not exportable (noted by an earlier process)"


def test_a_damaged_program_file_is_exported_again(tmp_path, monkeypatch):
    monkeypatch.setattr(_programs, "program_folder", lambda: tmp_path / _programs.FOLDER)
    pair = _pair()
    arguments = (pair, jnp.asarray(0.0, dtype=float), pair.initial_state())
    key = _programs.program_key(_state_jacobian, arguments, {})[0]
    path = tmp_path / _programs.FOLDER / f"{key}.program"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a program")
    _programs.forget()
    exported = _programs.counts.exported
    result = _programs.stored_call(_state_jacobian, *arguments)[0]
    assert _programs.counts.exported == exported + 1 and path.read_bytes() != b"not a program"
    assert np.array_equal(result, _state_jacobian(*arguments)[0])
    _programs.forget()  # (and the program written is loaded by the next call)
    loaded = _programs.counts.loaded
    assert np.array_equal(_programs.stored_call(_state_jacobian, *arguments)[0], result)
    assert _programs.counts.loaded == loaded + 1


def _springs(pair, n):
    """`pair` with only its first `n` axial springs (a structure no other test compiles)."""
    springs = pair.elements[0]
    return eqx.tree_at(lambda m: m.elements[0], pair, eqx.tree_at(
        lambda s: (s.points_a, s.points_b, s.rest_length, s.stiffness, s.damping), springs,
        tuple(x[:n] for x in (springs.points_a, springs.points_b, springs.rest_length,
                              springs.stiffness, springs.damping))))


def test_once_a_traced_function_is_monkeypatched_no_program_is_written_or_loaded(
        tmp_path, monkeypatch):
    from spineid.simulation import _modes

    monkeypatch.setattr(_programs, "program_folder", lambda: tmp_path / _programs.FOLDER)
    pair = _springs(_pair(), 2)
    arguments = (pair, jnp.asarray(0.0, dtype=float), pair.initial_state())
    original = _modes.lagrangian_vector_field

    def doubled(t, state, system):  # (a test's replacement: tracing follows it)
        return tuple(2.0 * x for x in original(t, state, system))

    with monkeypatch.context() as patch:
        patch.setattr(_modes, "lagrangian_vector_field", doubled)
        assert _programs.patched() == "spineid.simulation._modes.lagrangian_vector_field"
        _programs.forget()
        result = _programs.stored_call(_state_jacobian, *arguments)[0]
        reason = "spineid.simulation._modes.lagrangian_vector_field replaced at run time"
        assert _programs.counts.reasons[-1] == reason
    assert _programs.patched() is None
    # Undone, but JAX still holds the trace made with it (nested in the next one): the
    # process stores nothing more.
    _programs.forget()
    again = _programs.stored_call(_state_jacobian, *arguments)[0]
    assert _programs.counts.reasons[-1] == reason
    assert not (tmp_path / _programs.FOLDER).exists()
    unpatched = _state_jacobian.__wrapped__(*arguments)[0]  # (traced afresh, outside jit)
    np.testing.assert_allclose(result, 2.0 * unpatched, rtol=1e-12)  # the patch was traced
    assert np.array_equal(again, result)


def test_a_rebound_constant_and_equinox_settings_are_seen(monkeypatch):
    from spineid.identify._common import _least_squares

    assert _programs.patched() is None
    with monkeypatch.context() as patch:  # a module constant read while tracing
        patch.setattr(_least_squares, "_TAU", 1e3)
        assert _programs.patched() == "spineid.identify._common._least_squares._TAU"
    assert _programs.patched() is None
    pair = _pair()
    arguments = (pair, jnp.asarray(0.0, dtype=float), pair.initial_state())
    key = _programs.program_key(_state_jacobian, arguments, {})[0]
    monkeypatch.setenv("EQX_ON_ERROR", "nan")  # (equinox's checks traced as NaN)
    assert _programs.program_key(_state_jacobian, arguments, {})[0] not in (None, key)


def test_a_program_that_reads_but_fails_is_deleted_and_the_call_traced(tmp_path, monkeypatch):
    monkeypatch.setattr(_programs, "program_folder", lambda: tmp_path / _programs.FOLDER)
    pair = _springs(_pair(), 3)
    arguments = (pair, jnp.asarray(0.0, dtype=float), pair.initial_state())
    key = _programs.program_key(_state_jacobian, arguments, {})[0]
    path = tmp_path / _programs.FOLDER / f"{key}.program"
    _programs.forget()
    expected = _programs.stored_call(_state_jacobian, *arguments)[0]
    assert path.exists()
    content = bytearray(path.read_bytes())
    content[len(content) // 2] ^= 0xFF  # one byte flipped: the checksum tells
    path.write_bytes(bytes(content))
    _programs.forget()
    exported = _programs.counts.exported
    assert np.array_equal(_programs.stored_call(_state_jacobian, *arguments)[0], expected)
    assert _programs.counts.exported == exported + 1  # exported again, not loaded

    def broken(exported, function):  # (a program that loads but fails when called)
        def call(*arrays):
            raise RuntimeError("Failed to deserialize StableHLO")
        return call

    monkeypatch.setattr(_programs, "_named_call", broken)
    _programs.forget()
    assert np.array_equal(_programs.stored_call(_state_jacobian, *arguments)[0], expected)
    assert _programs.counts.reasons[-1] == "stored program failed: RuntimeError"
    assert not path.exists()  # deleted: the next process exports it again


def test_inside_another_trace_the_call_is_part_of_that_program():
    pair = _pair()
    state = pair.initial_state()
    t = jnp.asarray(0.0, dtype=float)
    inside = jax.jit(lambda t: _programs.stored_call(_state_jacobian, pair, t, state)[0])(t)
    assert np.array_equal(inside, _state_jacobian(pair, t, state)[0])


def test_building_a_problem_runs_no_compiled_program():
    # Host values reach the device without a program (spineid/_arrays.py): reading a model
    # file, a problem on data of a length not seen before, its transform's bounds and the
    # chi-square tail lower nothing. (The detector works: jnp.asarray of a new shape does.)
    lowered = []

    def listener(name, seconds, **kwargs):
        if name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(seconds)

    ts = np.linspace(0.0, 0.2, 173)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
        problem = spineid.FitProblem(model_file, spineid.Measurement(
            ts, np.zeros((173, 3)), ("x", "y", "theta")), ["stiffness"],
            {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4})
        transform = problem.transform()
        transform.at_bound(problem.start * 1.5)
        chi_square_sf(180.0, 169)
        value = floats([[1.0, 2.0, 3.0]] * 7)
        assert lowered == []
        jnp.asarray(np.zeros((193, 5)))
        assert len(lowered) == 1
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert value.dtype == jnp.float64 and not value.weak_type and value.shape == (7, 3)
    # Traced values pass through.
    assert jax.jit(lambda x: floats(x) * 2)(3).dtype == jnp.float64


READERS_SCRIPT = """
import json, sys
import jax, spineid
lowered = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, seconds, **kwargs: lowered.append(name)
    if name == "/jax/core/compile/jaxpr_to_mlir_module_duration" else None)
counts = {}
for name in sys.argv[1:]:
    before = len(lowered)
    spineid.load_model_file(spineid.dataset_path(name))
    counts[name] = len(lowered) - before
print(json.dumps(counts))
"""


def test_reading_model_files_of_every_kind_runs_few_compiled_programs():
    # Each reader builds its arrays on the host and computes what it checks (a bushing's
    # reference deflection, the facets' penetrations, the ligaments' reference lengths, where
    # a pinned body lies) as one compiled program each, not operation by operation: read
    # eagerly, c5_c6.toml ran 111 programs (1.3 s in a new process), head_neck.toml 52. In a
    # new process, so that nothing is lowered already; files in an order where no two share
    # what they lower.
    files = {"c5_c6.toml": 4, "pinned_pair.toml": 1, "head_neck.toml": 2,
             "axial_4_springs.toml": 0}
    done = subprocess.run([sys.executable, "-c", READERS_SCRIPT, *files], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(counts[name] <= most for name, most in files.items()), counts


SPINE = """
import numpy as np
import spineid
from spineid import _programs as programs
from spineid.io import read_toml
document = read_toml(spineid.dataset_path("thoracolumbar_spine.toml"))
document["bodies"], document["joints"] = document["bodies"][:4], document["joints"][:4]
document.pop("loads", None)
chain = spineid.ModelFile.from_document(document).model
segments = spineid.segment_flexibility(chain, 10.0, 4)
whole = spineid.spine_flexibility(chain, chain.body_names[-1], 10.0, 4)
print("segments", repr(segments.rotations.tobytes().hex()))
print("whole", repr(whole.rotations.tobytes().hex()), repr(whole.stable.tobytes().hex()))
c = programs.counts
print("counts", c.loaded, c.exported, c.traced)
"""


def test_a_second_process_loads_the_spine_tests_programs_with_the_same_numbers(tmp_path):
    # The spine verbs' first call in a new process: the segment tests, the whole-spine sweep
    # and its stability check run from stored programs (for Liu's 17 vertebrae about 1.4 and
    # 2.2 s against 12 and 20 s traced and stored: docs/performance.md), bit for bit as a
    # process computes them without the store. (Their solves' equinox checks are traced as
    # NaN, a step without equilibrium, so that no host callback keeps them from being stored.)
    first = _run(SPINE, tmp_path)
    assert first["counts"] == "0 3 0", first["counts"]
    second = _run(SPINE, tmp_path)
    assert second["counts"] == "3 0 0", second["counts"]
    traced = _run(SPINE, tmp_path, SPINEID_PROGRAMS="off")
    assert traced["counts"] == "0 0 3", traced["counts"]
    for key in ("segments", "whole"):
        assert first[key] == second[key] == traced[key]


def test_a_stored_program_runs_compiled_once_for_host_and_device_arguments(
        tmp_path, monkeypatch, caplog):
    # A committed array's device is part of a jitted call's signature, so a stored program
    # called with host values (uncommitted) and then with a stored program's outputs
    # (committed) compiled twice: an OpenSim neck's marker fit compiled its Levenberg-Marquardt
    # loop again, 10-16 s, for a refit started where a fit ended. The arguments are placed alike
    # (`_programs._placed`), numpy ones too and with the store off: after the first call of
    # each, nothing compiles, and the numbers are the same.
    import logging

    from spineid.identify._common._transform import _physical_and_slope, Transform

    n = 13
    transform = Transform(floats(np.zeros(n)), floats(np.full(n, np.inf)),
                          floats(np.linspace(1.0, 2.0, n)), floats(np.ones(n)))
    host = floats(np.linspace(-1.0, 1.0, n))
    device = jax.device_put(host, jax.devices()[0])
    assert not host.committed and device.committed
    for folder in (tmp_path / _programs.FOLDER, None):  # (stored; the store off: traced)
        monkeypatch.setattr(_programs, "program_folder", lambda: folder)
        first = _programs.stored_call(_physical_and_slope, transform, host)
        caplog.clear()
        with jax.log_compiles(), caplog.at_level(logging.DEBUG, logger="jax"):
            second = _programs.stored_call(_physical_and_slope, transform, device)
            third = _programs.stored_call(_physical_and_slope, transform, first[0])
            fourth = _programs.stored_call(_physical_and_slope, transform, np.asarray(host))
        compiled = [r.getMessage() for r in caplog.records
                    if "Finished XLA compilation of jit(" in r.getMessage()
                    and "physical_and_slope" in r.getMessage()]
        assert compiled == [], (folder, compiled)
        for a, b, c in zip(first, second, fourth):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)
        assert third[0].shape == (n,)
