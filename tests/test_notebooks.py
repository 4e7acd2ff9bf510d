"""Every teaching notebook (jupytext percent scripts in notebooks/) runs top to bottom and shows
its figures; one of them is also executed as the documentation site executes them all
(mkdocs-jupyter's converter, a Jupyter kernel), so that the build's own path stays tested."""

import os
import pathlib
import subprocess
import sys

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("*.py"))

# A notebook run as a script under Agg, each `plt.show()` counted when it has a figure to show
# (in a kernel the inline backend shows and closes the cell's figures; here they are closed).
AS_SCRIPT = """
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

shown = []

def show(*args, **kwargs):
    shown.append(bool(plt.get_fignums()))
    plt.close("all")

plt.show = show
runpy.run_path(sys.argv[1], run_name="__main__")
print("figures:", sum(shown))
"""

# The build's path (mkdocs.yml executes every notebook through this converter): the page's
# embedded images counted.
THROUGH_KERNEL = """
import sys
from mkdocs_jupyter.convert import nb2html

page = nb2html(sys.argv[1], execute=True, allow_errors=False)
print("figures:", page.count('src="data:image/png'))
"""

# (The cheapest notebook, about 30 s; through a kernel each costs about twice its script time.)
BUILT = "04_stiffness_matrices"


def _figures_shown(program, notebook, tmp_path, environment):
    # Quick mode: the notebooks' long loops (repetitions, posterior draws) shortened, every
    # step still run.
    environment = dict(environment, SPINEID_NOTEBOOK_QUICK="1")
    done = subprocess.run([sys.executable, "-c", program, str(notebook)], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "figures: " in done.stdout, done.stdout[-500:]
    return int(done.stdout.split("figures:")[1])


def test_notebooks_exist():
    assert NOTEBOOKS and BUILT in [p.stem for p in NOTEBOOKS]


# (The built notebook runs through a kernel below, which checks the same figures: it is not run
# twice.)
@pytest.mark.parametrize("notebook", [p for p in NOTEBOOKS if p.stem != BUILT],
                         ids=lambda p: p.stem)
def test_notebook_runs(notebook, tmp_path):
    shown = _figures_shown(AS_SCRIPT, notebook, tmp_path, dict(os.environ, MPLBACKEND="Agg"))
    assert shown >= notebook.read_text().count("plt.show()")


def test_a_notebook_executes_as_the_docs_build_executes_it(tmp_path):
    # A cell that raises fails the page (allow_errors=False), as in the build. (No MPLBACKEND:
    # under Agg the kernel's inline backend would show no figure.)
    notebook = next(p for p in NOTEBOOKS if p.stem == BUILT)
    environment = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    shown = _figures_shown(THROUGH_KERNEL, notebook, tmp_path, environment)
    assert shown >= notebook.read_text().count("plt.show()")
