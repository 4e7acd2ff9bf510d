"""Every teaching notebook (jupytext percent scripts in notebooks/) runs top to bottom."""

import os
import pathlib
import subprocess
import sys

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("*.py"))


def test_notebooks_exist():
    assert NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(notebook, tmp_path):
    # Quick mode: the notebooks' long loops (repetitions, posterior draws) shortened, every
    # step still run.
    environment = dict(os.environ, MPLBACKEND="Agg", SPINEID_NOTEBOOK_QUICK="1")
    done = subprocess.run([sys.executable, str(notebook)], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
