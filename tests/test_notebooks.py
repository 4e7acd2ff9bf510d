"""Every teaching notebook (jupytext percent scripts in notebooks/) runs top to bottom, executed
as the documentation site executes it (mkdocs-jupyter's converter, a Jupyter kernel), and shows
its figures."""

import os
import pathlib
import subprocess
import sys

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("*.py"))

EXECUTE = """
import sys
from mkdocs_jupyter.convert import nb2html

page = nb2html(sys.argv[1], execute=True, allow_errors=False)
print("figures:", page.count('src="data:image/png'))
"""


def test_notebooks_exist():
    assert NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(notebook, tmp_path):
    # Quick mode: the notebooks' long loops (repetitions, posterior draws) shortened, every
    # step still run. A cell that raises fails the page (allow_errors=False), as in the build.
    # (No MPLBACKEND: under Agg the kernel's inline backend would show no figure.)
    environment = dict(os.environ, SPINEID_NOTEBOOK_QUICK="1")
    environment.pop("MPLBACKEND", None)
    done = subprocess.run([sys.executable, "-c", EXECUTE, str(notebook)], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = notebook.read_text().count("plt.show()")
    assert "figures: " in done.stdout and int(done.stdout.split("figures:")[1]) >= shown, \
        done.stdout[-500:]
