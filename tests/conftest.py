import os
import pathlib
import subprocess
import sys

import jax
import pytest

# The suite's compiled programs go to a cache of its own (spineid/_cache.py), shared by the
# test workers of one run and by later runs, never to the user's cache directory.
os.environ.setdefault("SPINEID_CACHE_DIR",
                      str(pathlib.Path(__file__).parent.parent / ".pytest_cache" / "jax"))

jax.config.update("jax_enable_x64", True)

# Tests marked `own_process` run in a Python process of their own (pytest on that one test):
# those that start Dask clusters, whose scheduler, event-loop thread and spawned worker
# processes must not share a test worker with the rest of the suite, and those that need JAX
# started otherwise (`@pytest.mark.own_process(env={"XLA_FLAGS": ...})`).
CHILD = "SPINEID_TEST_OWN_PROCESS"


def pytest_configure(config):
    config.addinivalue_line("markers", "own_process: run this test in a Python process of its "
                                       "own (it starts clusters or threads that outlive it)")


def pytest_pyfunc_call(pyfuncitem):
    marker = pyfuncitem.get_closest_marker("own_process")
    if marker is None or os.environ.get(CHILD):
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(marker.kwargs.get("env", {}))  # (e.g. XLA_FLAGS, read when JAX starts)
    env[CHILD] = "1"
    # (The test's own id: under --dist loadgroup xdist appends "@group" to the node id.)
    test = f"{pyfuncitem.path.relative_to(pyfuncitem.config.rootpath)}::{pyfuncitem.name}"
    command = [sys.executable, "-m", "pytest", "-n0", "-q", "-p", "no:cacheprovider", test]
    run = subprocess.run(command, cwd=pyfuncitem.config.rootpath, env=env, text=True,
                         capture_output=True, timeout=1200)
    if run.returncode != 0:
        pytest.fail(f"{test} failed in its own process (exit status "
                    f"{run.returncode}):\n{run.stdout[-8000:]}\n{run.stderr[-4000:]}",
                    pytrace=False)
    return True


# Every compiled XLA program of a process holds a few memory mappings, and a test worker runs
# hundreds of tests, each compiling its own: measured, 33 tests of the simulation and mechanics
# left 10,795 mappings (601 after `jax.clear_caches()`), and a worker of the whole suite passed
# 38,000. At the kernel's limit (65,530 by default) XLA aborted the worker ("Fatal Python
# error: Aborted" inside `backend_compile_and_load`, in a different test each run). So the
# compiled programs are dropped whenever a worker holds more than a third of the limit
# (spineid/_cache.py); later tests compile again or load from the persistent cache.
def pytest_runtest_teardown(item, nextitem):
    from spineid._cache import release_compiled_programs  # (after the cache's folder is set)

    release_compiled_programs()
