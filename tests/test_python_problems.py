"""Problems built in Python: a model assembled from spineid's classes (no file) is fitted like one
read from a model file, with the parameters its elements declare; the file readers name the same
parameters, with the same units and bounds."""

import dataclasses
import pathlib
import re
import tomllib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid
from helpers import AXIAL_SPRINGS, LOADS, MODEL_KINDS, TORSION, document
from spineid.elements._parameters import select_parameters

# The fits share compiled solves with the identification tests (same shapes and solver).
pytestmark = pytest.mark.xdist_group("identify")

TS = np.linspace(0.0, 0.2, 101)
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}
STIFFNESS = [spring["stiffness"] for spring in AXIAL_SPRINGS]
FACTORS = np.array([1.3, 0.7, 1.2])


def python_pair(stiffness) -> spineid.PlanarPair:
    """The planar pair of `helpers.document(springs=AXIAL_SPRINGS, torsion=TORSION,
    loads=LOADS)`, assembled from the classes."""
    lower = spineid.PlanarBody.fixed_at([0.0, 0.0, 0.0])
    upper = spineid.PlanarBody(mass=0.5, inertia=1.2e-3, reference_pose=[0.0, 0.03, 0.0])
    springs = spineid.AxialSprings.from_reference(
        [s["lower_point"] for s in AXIAL_SPRINGS], [s["upper_point"] for s in AXIAL_SPRINGS],
        stiffness, [s["damping"] for s in AXIAL_SPRINGS], lower.reference_pose,
        upper.reference_pose)
    torsion = spineid.TorsionSpring(stiffness=TORSION[0]["stiffness"],
                                    damping=TORSION[0]["damping"])
    loads = spineid.SinusoidalLoad.from_terms(
        [(load["component"], load["amplitude"], load["frequency"], load["phase"])
         for load in LOADS])
    return spineid.PlanarPair(lower=lower, upper=upper, elements=(springs, torsion),
                              loads=(loads,), gravity=[0.0, 0.0],
                              initial_pose=upper.reference_pose)


def file_pair(stiffness) -> spineid.ModelFile:
    springs = [dict(spring, stiffness=float(k)) for spring, k in zip(AXIAL_SPRINGS, stiffness)]
    return spineid.ModelFile.from_document(document(springs=springs, torsion=TORSION,
                                                    loads=LOADS))


def observed(model) -> np.ndarray:
    simulation = spineid.simulate(model, jnp.asarray(TS))
    return np.asarray(jax.vmap(model.observe)(simulation.q))


@pytest.fixture(scope="module")
def measurement():
    data = observed(file_pair(STIFFNESS).model)
    sigma = np.array([NOISE[c] for c in ("x", "y", "theta")])
    data = data + np.random.default_rng(7).normal(size=data.shape) * sigma
    return spineid.Measurement(TS, data, ("x", "y", "theta"))


def test_python_model_is_the_file_model():
    # The same motion to roundoff: the classes and the reader build the same model.
    np.testing.assert_allclose(observed(python_pair(STIFFNESS)),
                               observed(file_pair(STIFFNESS).model), rtol=0, atol=1e-13)


def test_python_model_fits_as_the_file_model(measurement):
    start = np.array(STIFFNESS) * FACTORS
    from_python = spineid.fit(spineid.FitProblem(python_pair(start), measurement,
                                                 free=["stiffness"], noise=NOISE))
    from_file = spineid.fit(spineid.FitProblem(file_pair(start), measurement, ["stiffness"],
                                               NOISE))
    # One name everywhere: the element names its parameters as the file does.
    assert from_python.names == from_file.names == [f"springs[{k}].stiffness" for k in range(3)]
    assert from_python.units == ["N/m"] * 3
    assert from_python.converged and from_python.explains_data
    np.testing.assert_allclose(from_python.values, from_file.values, rtol=1e-8)
    np.testing.assert_allclose(from_python.stderr, from_file.stderr, rtol=1e-6)
    # Recovered within a few standard errors of the truth, from 30% off.
    assert np.all(np.abs(from_python.values - STIFFNESS) < 4 * from_python.stderr)


def test_group_names_and_fitted_model(measurement):
    pair = python_pair(STIFFNESS)
    problem = spineid.FitProblem(pair, measurement, ["stiffness", "torsion"], NOISE)
    assert problem.names == ["springs[0].stiffness", "springs[1].stiffness",
                             "springs[2].stiffness", "torsion[0].stiffness",
                             "torsion[0].damping"]
    assert problem.model_file is None and "PlanarPair" in problem.source
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    fitted = problem.fitted_model(values)
    np.testing.assert_array_equal(fitted.elements[0].stiffness, values[:3])
    assert float(fitted.elements[1].stiffness) == 4.0
    assert float(fitted.elements[1].damping) == 5.0
    # The problem's model itself is left as it was.
    np.testing.assert_array_equal(pair.elements[0].stiffness, STIFFNESS)
    # Springs (N/m), a torsion spring (N m/rad) and its damper (N m s/rad): the combinations
    # the summary prints are on relative changes, each parameter over its scale, so that no
    # unit hides a parameter (in SI the damper's coefficient dwarfed the springs').
    result = spineid.fit(problem, "lm")
    lines = [line for line in result.summary().splitlines() if "combination" in line]
    assert len(lines) == 5
    for line, combination in zip(lines, result.identifiability.combinations):
        relative = combination["relative"]["coefficients"]
        assert max(map(abs, relative.values())) == pytest.approx(1.0)
        assert "*springs[0].stiffness/" in line or "springs[0].stiffness" not in relative
    leaders = {max(c["relative"]["coefficients"].items(), key=lambda item: abs(item[1]))[0]
               for c in result.identifiability.combinations}
    assert len(leaders) >= 3


@pytest.mark.parametrize("free, match", [
    (["springs[3].stiffness"], "no such parameter"),
    (["springs[0].stiff"], "no such parameter"),
    (["elements[0].stiffness"], "no such parameter"),
])
def test_unknown_names_are_refused(measurement, free, match):
    with pytest.raises(ValueError, match=match):
        spineid.FitProblem(python_pair(STIFFNESS), measurement, free, NOISE)


def test_not_a_model_is_refused(measurement):
    with pytest.raises(ValueError, match="expected a model"):
        spineid.FitProblem({"kind": "planar_pair"}, measurement, ["stiffness"], NOISE)
    problem = spineid.FitProblem(python_pair(STIFFNESS), measurement, ["stiffness"], NOISE)
    with pytest.raises(ValueError, match="2 values for 3 free"):
        problem.fitted_model([1.0, 2.0])


def test_a_problem_built_in_python_takes_noise_with_units_and_refuses_bare_arrays(
        measurement):
    # Noise typed with units, as FitProblem.from_files and --noise take it: the same problem
    # as the SI numbers, said how it was read. Arrays for records, or a list of numbers for a
    # noise: one sentence each.
    typed = spineid.FitProblem(python_pair(STIFFNESS), measurement, ["stiffness"],
                               {"x": "5 um", "y": "0.005 mm", "theta": "1.7e-4"})
    assert typed.noise == pytest.approx(NOISE, rel=1e-12)
    assert typed.noise_read["x"] == "5 um"
    with pytest.raises(ValueError, match="must be spineid.Measurement"):
        spineid.FitProblem(python_pair(STIFFNESS), [measurement.values], ["stiffness"], NOISE)
    with pytest.raises(ValueError, match=r"noise: x=\[5e-06\]: expected a positive number"):
        spineid.FitProblem(python_pair(STIFFNESS), measurement, ["stiffness"],
                           dict(NOISE, x=[5e-6]))
    for bare in (5e-6, [5e-6, 5e-6, 1.7e-4]):  # (a number or a list: by name, said so)
        with pytest.raises(ValueError, match=r"noise: give one standard deviation per channel "
                                             r"by name, e\.g\. \{'x': 1e-05"):
            spineid.FitProblem(python_pair(STIFFNESS), measurement, ["stiffness"], bare)
    with pytest.raises(ValueError, match="N is a force, expected a length"):
        spineid.FitProblem(python_pair(STIFFNESS), measurement, ["stiffness"],
                           dict(NOISE, x="5 N"))


def test_load_terms_are_checked():
    with pytest.raises(ValueError, match="component"):
        spineid.SinusoidalLoad.from_terms([("Fz", 1.0, 2.0)])
    with pytest.raises(ValueError, match="frequency"):
        spineid.SinusoidalLoad.from_terms([("Fx", 1.0, -2.0)])


BUNDLED = ["axial_4_springs", "liu_8_springs", "pinned_pair", "spatial_pair", "l5_s1_pair",
           "thoracolumbar_spine",
           "c5_c6", "head_neck"]


def _document_value(document: dict, name: str) -> float:
    # The number a parameter name points at in a parsed model file, walked by hand: a table
    # array without an index (`facets.stiffness`, tied) gives its first table's entry, and a
    # matrix written as its 6 diagonal numbers answers `[i][i]` with its entry `[i]`.
    node = document
    for part in name.split("."):
        key, *indices = re.findall(r"[A-Za-z_]\w*|\d+", part)
        node = node[key]
        if not indices and isinstance(node, list) and isinstance(node[0], dict):
            node = node[0]
        elif len(indices) == 1:
            node = node[int(indices[0])]
        elif len(indices) == 2:
            i, j = map(int, indices)
            node = node[i][j] if isinstance(node[i], list) else node[i] if i == j else None
    return float(node)


def _read(name: str):
    if name.startswith("kind:"):
        spec = MODEL_KINDS[name[5:]].document
        return spineid.ModelFile.from_document(spec), spec
    path = spineid.dataset_path(f"{name}.toml")
    return spineid.load_model_file(path), tomllib.loads(path.read_text())


@pytest.mark.parametrize("name", BUNDLED + [f"kind:{kind}" for kind in MODEL_KINDS])
def test_parameter_names_are_paths_into_the_file_and_the_same_in_python(name):
    # Every parameter a model file names is one its elements declare (units, bounds, groups
    # are the elements'); its name is the path of its number in the file (walked by hand
    # here), and the model with the file's labels taken away (as built in Python) names
    # the same parameters the same way.
    model_file, document_ = _read(name)
    assert model_file.parameters
    if model_file.kind == "opensim":
        # The numbers live in the .osim, named after its components: the completed document
        # holds them (each bushing's table, read back from the file's own text here), and a
        # model built in Python has no component names to share.
        document_ = model_file.document
        text = pathlib.Path(document_["file"]).read_text()
        for label in (key for key, value in document_.items() if isinstance(value, dict)
                      and "rotational_stiffness" in value):
            block = re.search(rf'<BushingForce name="{label}">(.*?)</BushingForce>', text,
                              re.S).group(1)
            for prop, values in document_[label].items():
                written = re.search(rf"<{prop}>([^<]*)</{prop}>", block).group(1).split()
                assert [float(v) for v in written] == values, (label, prop)
    for parameter in model_file.parameters:
        assert parameter.value(model_file.model) == pytest.approx(
            _document_value(document_, parameter.name), rel=1e-12, abs=1e-300), parameter.name
    if model_file.kind == "opensim":
        return
    model = model_file.model
    unlabelled = eqx.tree_at(lambda m: m.elements, model, tuple(
        dataclasses.replace(e, label=None) for e in model.elements)) \
        if getattr(model, "elements", ()) else model
    python = {p.name: (p.element, p.field, p.row)
              for p in spineid.declared_parameters(unlabelled)}
    for parameter in model_file.parameters:
        assert python[parameter.name] == (parameter.element, parameter.field, parameter.row)


def test_springs_the_file_interleaves_keep_their_file_names():
    # Vector and axial springs alternating in the file: each keeps its index there.
    vector = {"kind": "vector", "point": [0.01, 0.0], "stiffness": 9000.0}
    springs = [vector, AXIAL_SPRINGS[0], dict(vector, stiffness=8000.0)]
    model_file = spineid.ModelFile.from_document(document(springs=springs, loads=LOADS))
    by_name = {p.name: p.value(model_file.model) for p in model_file.parameters}
    assert by_name["springs[0].stiffness"] == 9000.0
    assert by_name["springs[1].stiffness"] == AXIAL_SPRINGS[0]["stiffness"]
    assert by_name["springs[2].stiffness"] == 8000.0


def test_a_diagonal_entry_is_named_by_row_and_column_and_by_its_index_alone():
    model_file, _ = _read("spatial_pair")
    assert "bushings[0].stiffness[3][3]" in [p.name for p in model_file.parameters]
    chosen = select_parameters(model_file.parameters, ["bushings[0].stiffness[3]"])
    assert [p.name for p in chosen] == ["bushings[0].stiffness[3][3]"]
    every = select_parameters(model_file.parameters, ["bushings[0].stiffness"])
    assert len(every) == 6
    # The bushing as built in Python has all 21 entries: `[3]` is still the diagonal only.
    full = spineid.declared_parameters(model_file.model)
    assert [p.name for p in select_parameters(full, ["bushings[0].stiffness[3]"])] == [
        "bushings[0].stiffness[3][3]"]
    assert len(select_parameters(full, ["bushings[0].stiffness"])) == 21


def test_a_chain_read_from_a_file_stacks_its_joints_despite_their_labels():
    # Labels are static (part of an element's structure): the joints of a chain read from its
    # file, each labelled `joints[k]`, must still be one batched element and one batch of pairs.
    from spineid.simulation._flexibility import segment_pair

    chain = spineid.load_model_file(spineid.dataset_path("thoracolumbar_spine.toml")).model
    assert chain.elements[3].label == "joints[3]"
    assert chain._stacked_elements() is not None
    pairs = [segment_pair(chain, k) for k in range(3)]
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *pairs)
    assert stacked.elements[0].reference.shape == (3, 6)


def test_a_label_that_does_not_fit_its_element_is_refused():
    pair = python_pair(STIFFNESS)
    wrong = eqx.tree_at(lambda m: m.elements, pair, (
        dataclasses.replace(pair.elements[0], label=("springs[0]",)), pair.elements[1]))
    with pytest.raises(ValueError, match="one name per member, 3"):
        spineid.declared_parameters(wrong)
