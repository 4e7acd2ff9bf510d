"""JAX's persistent compilation cache (spineid/_cache.py): on by default, moved by
SPINEID_CACHE_DIR, off with SPINEID_CACHE=off, a program's own choice kept, and a second
process loading what the first compiled, and compiled programs dropped before the kernel's limit
of memory mappings. Each cache case runs a fresh Python process: the cache is
configured at import."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spineid

from helpers import noisy_pair_script


def _python(code: str, tmp_path, **environment) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPINEID_CACHE")}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME="", **environment)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


WHERE = "import spineid, jax; print(jax.config.jax_compilation_cache_dir)"


def test_the_cache_is_on_by_default_in_the_users_cache_directory(tmp_path):
    expected = tmp_path / "home" / ".cache" / "spineid" / "jax"
    if sys.platform == "darwin":
        expected = tmp_path / "home" / "Library" / "Caches" / "spineid" / "jax"
    assert _python(WHERE, tmp_path) == str(expected)
    assert expected.is_dir()


@pytest.mark.parametrize("value", ["off", "0", "No", "false"])
def test_the_cache_can_be_turned_off(tmp_path, value):
    assert _python(WHERE, tmp_path, SPINEID_CACHE=value) == "None"
    assert not (tmp_path / "home" / ".cache").exists()


def test_a_programs_own_cache_directory_is_kept(tmp_path):
    code = ("import jax; jax.config.update('jax_compilation_cache_dir', 'mine'); "
            "import spineid; print(jax.config.jax_compilation_cache_dir)")
    assert _python(code, tmp_path, SPINEID_CACHE_DIR=str(tmp_path / "other")) == "mine"


def test_an_unwritable_directory_leaves_the_cache_off_without_failing(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert _python(WHERE, tmp_path, SPINEID_CACHE_DIR=str(blocked / "jax")) == "None"
    assert spineid.use_compilation_cache(blocked / "jax") is None


def test_a_second_process_loads_the_table_fit_the_first_compiled(tmp_path):
    # The first process writes the compiled law fit; the second finds it (JAX's debug log
    # says "cache hit") and compiles nothing of it itself.
    cache = tmp_path / "cache"
    code = """
import logging, sys
import numpy as np
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(message)s")
logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)
import spineid
x = np.linspace(0.0, 3e-3, 500)
y = 1e4 * x + 3e4 * np.maximum(x - 1e-3, 0) + np.sin(7919.0 * x)
spineid.fit_load_law(spineid.LoadDisplacementData(x, y),
                     spineid.LawForm(n_nodes=3, free_breakpoints=True), solver="lm")
"""
    # (The law fit runs spineid's Levenberg-Marquardt solver object, as a trajectory fit does:
    # the same compiled solve, `_levenberg_marquardt_arrays`.)
    first = _python(code, tmp_path, SPINEID_CACHE_DIR=str(cache))
    assert "PERSISTENT COMPILATION CACHE MISS for 'jit_levenberg_marquardt_arrays'" in first
    assert any(path.name.startswith("jit_levenberg_marquardt_arrays")
               for path in cache.iterdir())
    second = _python(code, tmp_path, SPINEID_CACHE_DIR=str(cache))
    assert "Persistent compilation cache hit for 'jit_levenberg_marquardt_arrays'" in second
    assert "PERSISTENT COMPILATION CACHE MISS for 'jit_levenberg_marquardt_arrays'" not in second


def test_no_home_directory_leaves_the_cache_off_without_failing(monkeypatch):
    # A container user without a home (no HOME, no passwd entry): pathlib says RuntimeError.
    def no_home(cls=None):
        raise RuntimeError("Could not determine home directory.")

    for variable in ("SPINEID_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(pathlib.Path, "home", classmethod(no_home))
    assert spineid.use_compilation_cache() is None


def test_a_second_process_loads_the_trajectory_fit_the_first_compiled(tmp_path):
    # A trajectory fit solves the ODE inside its Levenberg-Marquardt loop. The solve's
    # checks report NaN there instead of calling back into Python (simulate(throw=False)),
    # so the compiled loop is written and a second process loads it.
    cache = tmp_path / "cache"
    code = """
import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(message)s")
logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)
""" + noisy_pair_script(["springs[0].stiffness"]) + """
print("converged", spineid.fit(problem, "lm").converged)
"""
    first = _python(code, tmp_path, SPINEID_CACHE_DIR=str(cache))
    assert "converged True" in first
    assert "PERSISTENT COMPILATION CACHE MISS for 'jit_levenberg_marquardt_arrays'" in first
    assert "Not writing persistent cache entry for 'jit_levenberg_marquardt_arrays'" not in first
    second = _python(code, tmp_path, SPINEID_CACHE_DIR=str(cache))
    assert "converged True" in second
    assert "Persistent compilation cache hit for 'jit_levenberg_marquardt_arrays'" in second
    assert "PERSISTENT COMPILATION CACHE MISS for 'jit_levenberg_marquardt_arrays'" not in second


def test_compiled_programs_are_dropped_before_the_kernels_limit_of_memory_maps():
    # (Linux: /proc says how many mappings a process holds and allows.)
    from spineid._cache import memory_maps, release_compiled_programs
    if memory_maps() is None:
        pytest.skip("the system does not report memory mappings")
    functions = [jax.jit(lambda x, k=k: jnp.sin(x * k) + jnp.cumsum(x) ** k) for k in range(60)]
    for f in functions:
        f(jnp.ones(50)).block_until_ready()
    before = memory_maps()[0]
    assert not release_compiled_programs(fraction=1.0)
    assert release_compiled_programs(fraction=1e-9)
    assert memory_maps()[0] < before
    assert float(functions[3](jnp.ones(50))[0]) == pytest.approx(np.sin(3.0) + 1.0)
