"""Properties every model kind must have, checked on a small instance of each
(`helpers.MODEL_KINDS`): it jits and vmaps, its forward-mode derivative through the ODE equals
finite differences, it conserves energy without damping and loads, its model file survives a
round trip, and a fit recovers one of its stiffnesses from its own motion.

The tests of one kind run on one worker and share one compiled simulation (with its
forward-mode tangent): compiling is most of their cost. The simulations use spineid's default
explicit solver for every kind, since the properties are the model's: the head-neck chain's
own implicit solver compiles four times slower and is exercised by the fit below (and by
tests/test_planar_chain.py)."""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import MODEL_KINDS

KINDS = [pytest.param(kind, marks=pytest.mark.xdist_group(f"kind-{kind}"))
         for kind in sorted(MODEL_KINDS)]
# Tight tolerances, so that integration error stays far below the differences checked.
TIGHT = dict(rtol=1e-10, atol=1e-12)


def model_file(kind: str) -> spineid.ModelFile:
    return spineid.ModelFile.from_document(MODEL_KINDS[kind].document, source=f"<{kind}>")


def stiffness_parameter(file: spineid.ModelFile) -> spineid.Parameter:
    name = MODEL_KINDS[file.kind].stiffness
    return next(p for p in file.parameters if p.name == name)


@functools.cache
def compiled_motion(kind: str):
    """`(file, parameter, ts, run)`: `run(model, stiffness, ts)` simulates `model` (this kind's
    structure) with `parameter` set to `stiffness`, saved at `ts` (this shape), and returns
    `(primal, tangent)`, each `(observed (k, c), q, qdot)`, the tangent with respect to the
    stiffness by forward mode."""
    file = model_file(kind)
    parameter = stiffness_parameter(file)
    ts = jnp.asarray(file.simulation_times())

    @eqx.filter_jit
    def run(model, stiffness, ts):
        def motion(value):
            changed = spineid.apply_values(model, [parameter], jnp.atleast_1d(value))
            simulation = spineid.simulate(changed, ts, solver=diffrax.Tsit5(),
                                          adjoint=diffrax.ForwardMode(), **TIGHT)
            return jax.vmap(changed.observe)(simulation.q), simulation.q, simulation.qdot

        return jax.jvp(motion, (stiffness,), (jnp.ones_like(stiffness),))

    return file, parameter, ts, run


def test_every_registered_kind_has_a_small_instance():
    assert set(MODEL_KINDS) == set(spineid.model_kinds())


@pytest.mark.parametrize("kind", KINDS)
def test_jit_vmap_and_forward_mode_against_finite_differences(kind):
    file, parameter, ts, run = compiled_motion(kind)
    value = jnp.asarray(float(parameter.get(file.model)))
    (observed, _, _), (tangent, _, _) = run(file.model, value, ts)
    assert observed.shape == (len(ts), len(file.model.observable_names))
    assert np.ptp(np.asarray(observed), axis=0).max() > 0  # the model moves

    # vmap over the stiffness equals one simulation at a time.
    values = jnp.stack([value, 1.3 * value])
    (batch, _, _), (batch_tangent, _, _) = eqx.filter_vmap(run, in_axes=(None, 0, None))(
        file.model, values, ts)
    np.testing.assert_allclose(batch[0], observed, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(batch_tangent[0], tangent, rtol=1e-9, atol=1e-13)
    assert not np.allclose(batch[1], batch[0])  # the stiffness matters

    # The forward-mode tangent equals central differences of the simulation. (A step of 1e-3:
    # with adaptive steps a difference of two runs carries about rtol of noise, here 1e-10,
    # which a smaller step would magnify past the tolerance; the truncation error of 1e-6 is
    # far inside it.)
    step = 1e-3 * value
    (above, _, _), _ = run(file.model, value + step, ts)
    (below, _, _), _ = run(file.model, value - step, ts)
    scale = np.max(np.abs(np.asarray(tangent)))
    assert scale > 0
    np.testing.assert_allclose(tangent, (above - below) / (2 * step), atol=2e-5 * scale)


@pytest.mark.parametrize("kind", KINDS)
def test_energy_is_conserved_without_damping_and_loads(kind):
    file, parameter, ts, run = compiled_motion(kind)
    case = MODEL_KINDS[kind]
    model = spineid.model_from_document(case.conservative(case.document))
    # A quarter of the span (same shape: the same compiled run): undamped, the head-neck
    # chain's fastest modes make the implicit solver take about 24 times more steps.
    ts = ts / 4
    (_, q, qdot), _ = run(model, jnp.asarray(float(parameter.get(model))), ts)
    energy = jax.vmap(lambda t, x, v: spineid.mechanical_energy(model, t, x, v))(ts, q, qdot)
    kinetic = jax.vmap(model.kinetic_energy)(ts, q, qdot)
    assert float(jnp.max(kinetic)) > 0  # gravity moved it
    drift = np.max(np.abs(np.asarray(energy - energy[0])))
    assert drift <= 1e-7 * float(jnp.max(kinetic))


@pytest.mark.parametrize("kind", KINDS)
def test_model_file_round_trip(kind, tmp_path):
    file = model_file(kind)
    parameter = stiffness_parameter(file)
    written = spineid.write_model_file(tmp_path / "model.toml", file, {})
    again = spineid.load_model_file(written)
    assert [p.name for p in again.parameters] == [p.name for p in file.parameters]
    leaves, again_leaves = (jax.tree_util.tree_leaves(m) for m in (file.model, again.model))
    assert len(leaves) == len(again_leaves)
    for leaf, again_leaf in zip(leaves, again_leaves):
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(again_leaf))
    # A changed value is written where the parameter's name says and read back.
    value = 1.25 * float(parameter.get(file.model))
    changed = spineid.load_model_file(
        spineid.write_model_file(tmp_path / "changed.toml", file, {parameter.name: value}))
    assert float(parameter.get(changed.model)) == value


@pytest.mark.parametrize("kind", KINDS)
def test_fit_recovers_one_stiffness(kind):
    truth, parameter, ts, run = compiled_motion(kind)
    value = float(parameter.get(truth.model))
    (observed, _, _), _ = run(truth.model, jnp.asarray(value), ts)
    channels = truth.model.observable_names
    measurement = spineid.Measurement(np.asarray(ts), np.asarray(observed), channels, "<truth>")
    start = truth.with_values({parameter.name: 1.3 * value})
    noise = dict(zip(channels, 1e-6 * np.maximum(np.ptp(np.asarray(observed), axis=0), 1e-12)))
    result = spineid.fit(spineid.FitProblem(start, measurement, [parameter.name], noise))
    assert result.converged
    assert result.values[0] == pytest.approx(value, rel=1e-5)
