"""JAX's persistent compilation cache, on by default.

XLA compiles every program the first time a process meets its shapes. With the persistent cache
the compiled programs are written to a directory, and a later process running the same
computation loads them instead of compiling again.

What it holds and what it cannot: JAX stores no program that calls back into Python. Every
diffrax solve carries equinox's runtime checks (`saveat.ts must be increasing`, ...), which
raise through such callbacks; the solves that report their failures instead of raising
(`simulate(..., throw=False)`, as every fit calls it) trace those checks as NaN-producing
(`spineid/_reported_checks.py`), so the trajectory fits are stored: a second process
loads the 4-axial-spring fit's Levenberg-Marquardt loop instead of compiling it (2.6 s of XLA).
Not stored: simulations that raise (`simulate` with `throw=True`, its default) and fits that
print every solver step (`fit(..., progress="steps")`, `spineid fit --steps`), nor
`energy_work_check` with its default `throw=True`. What is stored besides: the whiplash
study's windows (`spineid whiplash`), the load-law fits of `spineid table`, Jacobians and
sensitivities outside an ODE solve, and the many small programs of operations run outside
`jit` (about 60 in a trajectory fit's process, 10-30 ms each to compile). What remains of a
second process's cost is tracing (the cache is keyed by the traced program, so it is traced
again) and what is not JAX. Numbers in docs/performance.md.

`import spineid` turns the cache on, in the user's cache directory (`~/.cache/spineid/jax` on
Linux, `$XDG_CACHE_HOME` if set; `~/Library/Caches/spineid/jax` on macOS; `%LOCALAPPDATA%` on
Windows), unless

- `SPINEID_CACHE_DIR` names another directory (e.g. one shared by the workers of a cluster);
- `SPINEID_CACHE=off` (or `0`, `no`, `false`) opts out;
- the program has already chosen a cache directory for JAX (`jax_compilation_cache_dir`):
  spineid keeps it.

Entries are keyed by the computation and the JAX version; an entry compiled on another kind of
CPU is not loaded (a directory shared by a cluster helps machines of one kind). The cache grows
with every new shape and version; deleting the directory is always safe.

In memory, every program a process has compiled holds a few memory mappings (its code,
constants and data) for as long as JAX keeps it, and JAX keeps the programs of every jitted
function it has met. A process that compiles thousands of programs (a test suite; a worker
that fits many different models) reaches the kernel's limit (`vm.max_map_count`, 65,530 by
default on Linux), and XLA then aborts the process in its next compilation.
`release_compiled_programs` drops them before that; every chunk of a batch calls it.
"""

import gc
import os
import pathlib
import sys

import jax

from ._programs import forget


CACHE_DIR_VARIABLE = "SPINEID_CACHE_DIR"
"""The environment variable that moves the cache."""

CACHE_VARIABLE = "SPINEID_CACHE"
"""The environment variable that turns the cache off (`off`, `0`, `no`, `false`)."""

MIN_COMPILE_SECONDS = 0.0
"""Programs that compile faster than this are not written. JAX's default is 1 s; spineid writes
every program: a law fit compiles in 0.3-0.7 s, the small programs of operations outside `jit`
in 10-30 ms each, and reading one back takes about a millisecond."""


def default_cache_directory() -> pathlib.Path:
    """The directory the cache uses: `SPINEID_CACHE_DIR` if set, else `spineid/jax` in the
    platform's user cache directory (module docstring)."""
    chosen = os.environ.get(CACHE_DIR_VARIABLE, "").strip()
    if chosen:  # (resolved now: a relative path would follow the working directory)
        return pathlib.Path(chosen).expanduser().resolve()
    if sys.platform not in ("win32", "darwin") and os.environ.get("XDG_CACHE_HOME"):
        return pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "spineid" / "jax"
    home = pathlib.Path.home()  # (RuntimeError where no home can be found)
    if sys.platform == "win32":
        base = pathlib.Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Caches"
    else:
        base = home / ".cache"
    return base / "spineid" / "jax"


def use_compilation_cache(directory: str | pathlib.Path | None = None) -> pathlib.Path | None:
    """Turn JAX's persistent compilation cache on in `directory` (default:
    `default_cache_directory()`). Call it before the first computation: JAX sets its cache up
    at the first compilation and ignores a directory chosen later. Returns the directory, or
    `None` where it cannot be found, created or written (the cache is then not moved there: a
    read-only or missing home costs compile time, never a failure)."""
    try:
        path = (pathlib.Path(directory).expanduser().resolve() if directory
                else default_cache_directory())
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK):
            return None
    except (OSError, RuntimeError, KeyError):  # (no home directory: RuntimeError)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return path


def cache_on_import() -> pathlib.Path | None:
    """What `import spineid` does (module docstring): the cache on unless opted out or already
    chosen by the program. Returns the directory in use, or `None`."""
    if os.environ.get(CACHE_VARIABLE, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    chosen = jax.config.jax_compilation_cache_dir
    if chosen:
        return pathlib.Path(chosen)
    return use_compilation_cache()


def memory_maps() -> tuple[int, int] | None:
    """`(mappings this process holds, the kernel's limit)`, or `None` where the system does
    not say (not Linux)."""
    try:
        limit = int(pathlib.Path("/proc/sys/vm/max_map_count").read_text())
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps), limit
    except (OSError, ValueError):
        return None


def release_compiled_programs(fraction: float = 1 / 3) -> bool:
    """Drop JAX's compiled programs (`jax.clear_caches()`) when this process holds more memory
    mappings than `fraction` of the kernel's limit (module docstring); later calls compile
    again, or load from the persistent cache. Returns whether they were dropped."""
    found = memory_maps()
    if found is None or found[0] <= fraction * found[1]:
        return False
    jax.clear_caches()
    forget()
    gc.collect()
    return True
