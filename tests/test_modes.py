"""The linearised modes of a model (`spineid.linear_modes`) against the closed form of decoupled
mass-spring-damper modes, the ringing phase against its definition, and which models `Auto`
keeps from multiple shooting (those integrated implicitly). `Auto`'s use of the ringing phase
is tested with the multiple shooting (tests/test_shooting.py)."""

import copy

import numpy as np
import pytest

import spineid
from spineid.identify._trajectory._run import integrated_implicitly


def centred_bushing_pair():
    # The bundled spatial pair with its bushing's frames at the upper body's mass centre and
    # no loads: each of the six directions is an independent mass-spring-damper.
    document = copy.deepcopy(spineid.load_model_file(
        spineid.dataset_path("spatial_pair.toml")).document)
    bushing = document["bushings"][0]
    bushing["frame1"]["position"] = list(document["upper"]["pose"][:3])
    bushing["frame2"]["position"] = [0.0, 0.0, 0.0]
    document["loads"] = []
    return document, spineid.model_from_document(document)


def test_modes_of_a_bushing_at_the_mass_centre_are_the_closed_form():
    document, model = centred_bushing_pair()
    bushing = document["bushings"][0]
    mass = document["upper"]["mass"]
    inertia = np.array(document["upper"]["inertia"])
    k, c = np.array(bushing["stiffness"]), np.array(bushing["damping"])
    m = np.r_[np.full(3, mass), inertia]
    omega = np.sqrt(k / m)
    zeta = c / (2 * np.sqrt(k * m))
    order = np.argsort(omega)
    modes = spineid.linear_modes(model)
    np.testing.assert_allclose(modes.omega, omega[order], rtol=1e-9)
    np.testing.assert_allclose(modes.zeta, zeta[order], rtol=1e-9)
    # The ringing phase: the most phase a mode runs through while it lasts in the record.
    duration = 0.6
    assert modes.ringing_phase(duration) == pytest.approx(
        np.max(np.minimum(omega * duration, 1 / zeta)), rel=1e-9)


def test_ringing_phase_by_definition_and_without_oscillating_modes():
    modes = spineid.LinearModes(np.array([10.0, 100.0]), np.array([0.5, 0.01]))
    assert modes.ringing_phase(1.0) == pytest.approx(100.0)  # min(100, 1/0.01)
    assert modes.ringing_phase(0.1) == pytest.approx(10.0)  # min(1, 2), min(10, 100)
    assert spineid.LinearModes(np.zeros(0), np.zeros(0)).ringing_phase(1.0) == 0.0
    # Overdamped in every direction: no complex eigenvalues, nothing rings.
    document, _ = centred_bushing_pair()
    document["bushings"][0]["damping"] = [1e5, 1e5, 1e5, 10.0, 10.0, 10.0]
    assert spineid.linear_modes(spineid.model_from_document(document)).omega.size == 0


def test_auto_refuses_a_negative_ringing_limit():
    with pytest.raises(ValueError, match=r"Auto\(ringing_limit=-1\)"):
        spineid.Auto(ringing_limit=-1)


def test_auto_leaves_multiple_shooting_to_explicitly_integrated_models():
    # The head-neck chain is stiff (Kvaerno4): multiple shooting there was measured to fail or
    # run for over 15 minutes, so Auto turns to more starts instead.
    _, pair = centred_bushing_pair()
    chain = spineid.load_model_file(spineid.dataset_path("head_neck.toml")).model
    assert not integrated_implicitly([pair]) and integrated_implicitly([pair, chain])
