"""The architecture holds: layers that import only downwards (import-linter), no import hidden
inside a function, no module over about 600 lines, `import spineid` without matplotlib, and a
model kind added from outside the package that every command then handles."""

import ast
import inspect
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from importlinter.cli import lint_imports

import spineid
from spineid.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "spineid"
MODULES = sorted(PACKAGE.rglob("*.py"))


def test_import_contracts_of_pyproject_hold():
    # Layers cli -> plots -> studies -> identify -> executors -> spines -> io -> simulation ->
    # models -> elements -> kinematics; only plots import matplotlib; only cli parses arguments.
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True,
                        no_logo=True) == 0


def test_import_spineid_does_not_import_matplotlib():
    # Nor does the command line, until it draws: pyplot loads with the first plot function.
    done = subprocess.run(
        [sys.executable, "-c", "import spineid, sys; assert 'matplotlib' not in sys.modules; "
                               "import spineid.cli; assert 'matplotlib.pyplot' not in "
                               "sys.modules; from spineid.plots import plot_fit; "
                               "assert plot_fit is spineid.plot_fit; "
                               "assert 'matplotlib.pyplot' in sys.modules"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _function_imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and (node.level > 0 or (
                        node.module or "").startswith("spineid")):
                    yield function.name, node.lineno
                elif isinstance(node, ast.Import) and any(
                        alias.name.startswith("spineid") for alias in node.names):
                    yield function.name, node.lineno


def test_no_import_of_spineid_inside_a_function():
    # The two allowed: the packages' __getattr__ (PEP 562) load the plots lazily.
    found = [(str(path.relative_to(ROOT)), name) for path in MODULES
             for name, line in _function_imports(path)]
    assert sorted(set(found)) == [("spineid/__init__.py", "__getattr__"),
                                  ("spineid/plots/__init__.py", "__getattr__")], found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    assert len(path.read_text().splitlines()) <= 620


# ------------------------------------------------------------------ a model kind from outside


OSCILLATOR = """kind = "oscillator"

[oscillator]
mass = 0.5
stiffness = {stiffness}
damping = 0.8
start = 0.002

[simulation]
t_end = 0.5
n_samples = 201
"""


@pytest.fixture
def oscillator_kind():
    # The model kind docs/architecture.md adds ("Adding a model kind"), its code run as
    # printed (it registers itself); its reader.
    page = (ROOT / "docs" / "architecture.md").read_text()
    block = page.split("## Adding a model kind", 1)[1].split("```python\n", 1)[1]
    namespace = {"__name__": "documented_oscillator"}
    exec(compile(block.split("```", 1)[0], "docs/architecture.md", "exec"), namespace)
    yield namespace["read_oscillator"]
    spineid.unregister_model_kind("oscillator")


def test_a_model_kind_registered_from_outside_works_in_every_command(oscillator_kind, tmp_path,
                                                                      capsys):
    (tmp_path / "truth.toml").write_text(OSCILLATOR.format(stiffness=400.0))
    (tmp_path / "start.toml").write_text(OSCILLATOR.format(stiffness=330.0))
    data = tmp_path / "data.csv"
    assert main(["simulate", str(tmp_path / "truth.toml"), "--out", str(data)]) == 0
    ts, x = spineid.read_trajectory(data, ("x",))
    # Oracle: the damped oscillator's closed form.
    omega0, zeta = np.sqrt(400.0 / 0.5), 0.8 / (2 * np.sqrt(400.0 * 0.5))
    omega = omega0 * np.sqrt(1 - zeta**2)
    exact = 0.002 * np.exp(-zeta * omega0 * ts) * (
        np.cos(omega * ts) + zeta * omega0 / omega * np.sin(omega * ts))
    np.testing.assert_allclose(x[:, 0], exact, atol=1e-9)

    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "start.toml"), str(data), "--free", "stiffness",
                 "--noise", "x=1e-6", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["parameters"][0]["name"] == "oscillator.stiffness"
    assert report["parameters"][0]["value"] == pytest.approx(400.0, rel=1e-6)
    fitted = spineid.load_model_file(out / "fitted.toml")
    assert float(fitted.model.stiffness) == pytest.approx(400.0, rel=1e-6)
    assert sorted(p.name for p in out.iterdir()) == [
        "fit.png", "fitted.toml", "identifiability.png", "report.json", "residuals.png",
        "spineid-outputs.json"]
    assert "oscillator" in spineid.model_kinds()
    assert report["goodness_of_fit"]["explains_data"] is True

    # From a start at 0.375x the truth, Levenberg-Marquardt alone stops at a wrong local
    # optimum (the simulated oscillation falls out of phase with the data). It must say so:
    # exit status 1 and a verdict that the model, there, does not explain the data.
    (tmp_path / "far.toml").write_text(OSCILLATOR.format(stiffness=150.0))
    assert main(["fit", str(tmp_path / "far.toml"), str(data), "--free", "stiffness",
                 "--noise", "x=1e-6", "--solver", "lm", "--out", str(tmp_path / "far")]) == 1
    far = json.loads((tmp_path / "far" / "report.json").read_text())
    if far["converged"]:
        assert abs(far["parameters"][0]["value"] - 400.0) > 1.0  # a wrong optimum indeed
    assert far["goodness_of_fit"]["explains_data"] is False
    # Its fitted.toml says first that it is not to be used as it is; the right fit's does not.
    assert (tmp_path / "far" / "fitted.toml").read_text().startswith("# CAUTION: this fit ")
    assert "CAUTION" not in (out / "fitted.toml").read_text()
    assert "does NOT explain the data" in capsys.readouterr().out
    # The default solver sees the same verdict and turns to multiple shooting (which works on
    # a model kind it has never seen: segments start from states read off the data through the
    # kind's own `observe`), which finds it.
    assert main(["fit", str(tmp_path / "far.toml"), str(data), "--free", "stiffness",
                 "--noise", "x=1e-6", "--out", str(tmp_path / "auto")]) == 0
    auto = json.loads((tmp_path / "auto" / "report.json").read_text())
    assert auto["parameters"][0]["value"] == pytest.approx(400.0, rel=1e-6)
    assert auto["goodness_of_fit"]["explains_data"] is True
    assert auto["solver"].startswith("auto: lm from the start, then multiple-shooting(")
    assert "multistart" not in auto["solver"]


def test_model_kinds_are_refused_clearly(oscillator_kind, tmp_path):
    with pytest.raises(ValueError, match="already registered"):
        spineid.register_model_kind("oscillator", oscillator_kind)
    with pytest.raises(ValueError, match="expected a name"):
        spineid.register_model_kind("two words", oscillator_kind)
    with pytest.raises(ValueError, match="not registered"):
        spineid.unregister_model_kind("pendulum")
    with pytest.raises(ValueError, match=r"kind: expected one of .*'oscillator'.*got 'pendulum'"):
        spineid.model_from_document({"kind": "pendulum"}, source="p.toml")


@pytest.mark.parametrize("result_class", [spineid.FitResult, spineid.LawFit,
                                          spineid.StiffnessFit, spineid.SegmentFit,
                                          spineid.SpineFit, spineid.MeasureResult],
                         ids=lambda c: c.__name__)
def test_every_fit_returns_one_result_family(result_class):
    # One family: the verdict in one place, summary() and report() on every member.
    assert issubclass(result_class, spineid.AbstractResult)
    assert result_class.explains_data is spineid.AbstractResult.explains_data
    for method in ("summary", "report"):
        assert getattr(result_class, method) is not getattr(spineid.AbstractResult, method)
    assert not inspect.isabstract(result_class)
