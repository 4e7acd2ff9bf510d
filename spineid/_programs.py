"""Traced programs kept on disk (`jax.export`), so that a later process skips tracing.

JAX's persistent compilation cache (`spineid/_cache.py`) saves a process the compilation of a
program it has met before, but not the tracing that comes first: the cache is keyed by the
traced program, so every process traces the fit again to find its entry. For a trajectory fit
that tracing is most of a warm process's fit (measured on the 4-axial-spring pair, 501 samples:
the first fit of a process 2.7 s with every compiled program in the cache, of which the
Levenberg-Marquardt solve's tracing about 1.8 s; each further fit 0.07 s). `stored_call` runs a
jitted function from its exported program (StableHLO, serialized by `jax.export`) where one was
written before, and exports and writes it otherwise; the program's compilation is then found in
the persistent cache as before.

The key of a program is everything its tracing depends on, so that a program is reused only
where tracing would have produced the same one: the function's qualified name; the versions of
spineid, its source files' contents, jax, jaxlib, equinox, diffrax, optimistix and lineax; the
backend and the JAX settings that change what is traced (`jax_enable_x64`, ...); the non-array part of the arguments (the tree structure, the
static fields of every `equinox.Module` in it, the non-array leaves), written out by `repr`;
and the shape and dtype of every array argument. A program is not stored where that text could
name two different programs alike: where the arguments hold a type or a function defined
outside spineid and the libraries it is built on (a model class of the user's own: its code is
not in the key), a function defined inside another (`<locals>`: its closure is not in the key),
or any other object whose `repr` is its address; and while any of spineid's functions has been
replaced at run time (monkeypatched: tracing follows the replacement, which no key sees; once
one is seen, the process stores and loads no programs). Those calls are traced as usual.

Programs are written (atomically) to `spineid-programs/` inside JAX's compilation cache
directory, and only while that cache is on (`SPINEID_CACHE=off` turns both off;
`SPINEID_PROGRAMS=off` only the programs). A program that
cannot be exported (one that calls back into Python, such as a solve that prints each step) is
traced as usual, as is one whose file does not load. Deleting the folder is always safe.

Outputs: the function must return a tuple of arrays (the structure a serialized program keeps);
wrap a function that returns other pytrees, as `spineid/identify/_solvers.py` does.
"""

import collections
import dataclasses
import functools
import hashlib
import importlib.metadata
import os
import pathlib
import sys
import tempfile
import types

import equinox as eqx
import jax
import numpy as np


PROGRAMS_VARIABLE = "SPINEID_PROGRAMS"
"""The environment variable that turns the program store off alone (`off`, `0`, `no`, `false`),
the compilation cache staying on."""

FOLDER = "spineid-programs"
"""The folder, inside JAX's compilation cache directory, that holds the programs."""

_TRUSTED = ("spineid", "jax", "jaxlib", "equinox", "diffrax", "optimistix", "lineax",
            "jaxtyping", "numpy", "builtins", "functools", "collections", "typing", "enum")
_UNTRACED = ("cli", "plots", "io", "_programs", "_cache")  # (code no program traces)
_SETTINGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_dtype_promotion",
             "jax_numpy_rank_promotion", "jax_default_prng_impl")
_LIBRARIES = ("jax", "jaxlib", "equinox", "diffrax", "optimistix", "lineax")


@dataclasses.dataclass
class StoreCounts:
    """What `stored_call` did in this process: programs `loaded` from disk, `exported` (and
    written), `traced` as usual (the store off, or the call not storable: `reasons`)."""

    loaded: int = 0
    exported: int = 0
    traced: int = 0
    reasons: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=20))


counts = StoreCounts()
_in_memory: dict = {}  # key -> the jitted exported call (or None: not exportable)
_tainted = ""  # why this process stores no programs (a replacement was seen: `patched`)


@functools.cache
def _environment() -> str:
    # Versions and spineid's own sources: a program written by other code is never reused.
    package = pathlib.Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    versions = []
    for name in _LIBRARIES:
        try:
            versions.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name}=?")
    return f"{';'.join(versions)};sources={digest.hexdigest()}"


def _trusted(owner) -> bool:
    module = getattr(owner, "__module__", None) or ""
    return module.split(".")[0] in _TRUSTED


def _name_functions(value, names: dict, depth: int = 0) -> str | None:
    """Walk `value` (aux data or a leaf): collect `{repr(f): qualified name}` of the functions
    in it; return why it cannot be keyed by its `repr`, or `None`."""
    if depth > 20:
        return "nested too deep"
    if isinstance(value, (tuple, list, set, frozenset)):
        items = value
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, functools.partial):
        items = [value.func, *value.args, *value.keywords.values()]
    elif isinstance(value, types.MethodType):
        items = [value.__func__, value.__self__]
    elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        qualname = getattr(value, "__qualname__", "")
        if not _trusted(value) or "<" in qualname:
            return f"function {qualname or value!r} of module {value.__module__}"
        names[repr(value)] = f"<function {value.__module__}.{qualname}>"
        return None
    elif isinstance(value, type):
        return None if _trusted(value) else f"type {value.__module__}.{value.__qualname__}"
    elif isinstance(value, (np.ndarray, jax.Array)):  # (its repr rounds and abbreviates)
        return f"an array of shape {np.shape(value)} held as static data"
    else:
        if not _trusted(type(value)):
            return f"object of type {type(value).__module__}.{type(value).__qualname__}"
        return None
    for item in items:
        reason = _name_functions(item, names, depth + 1)
        if reason is not None:
            return reason
    return None


def _node_types(treedef, names: dict) -> str | None:
    """Why the tree structure `treedef` cannot be keyed by its `repr` (a node type or static
    field of untrusted code), or `None`."""
    stack = [treedef]
    while stack:
        node = stack.pop()
        data = node.node_data()
        if data is not None:
            kind, aux = data
            if not _trusted(kind):
                return f"type {kind.__module__}.{kind.__qualname__}"
            reason = _name_functions(aux, names)
            if reason is not None:
                return reason
        stack.extend(node.children())
    return None


def program_key(function, args: tuple, kwargs: dict):
    """`(key, flat arrays, rebuild)` for `function(*args, **kwargs)`: the hex digest that names
    its program (module docstring), the array leaves of the arguments and a function of those
    leaves that calls `function`; or `(None, reason, None)` where the call cannot be keyed."""
    if not _trusted(function) or "<" in function.__qualname__:
        return None, f"function {function.__qualname__} of module {function.__module__}", None
    dynamic, static = eqx.partition((args, kwargs), eqx.is_array)
    flat, dynamic_tree = jax.tree.flatten(dynamic)
    leaves, static_tree = jax.tree.flatten(static)
    names: dict = {}
    reason = _node_types(static_tree, names)
    for leaf in leaves:
        reason = reason or _name_functions(leaf, names)
    if reason is not None:
        return None, reason, None
    text = repr(static_tree) + "|" + "|".join(f"{type(v).__name__}:{v!r}" for v in leaves)
    for address, name in names.items():
        text = text.replace(address, name)
    if " at 0x" in text or "object at" in text:
        return None, "an argument whose repr is its address", None
    arrays = "|".join(f"{jax.numpy.shape(x)}:{jax.numpy.result_type(x)}:"
                      f"{getattr(x, 'weak_type', False)}" for x in flat)
    settings = ",".join(f"{name}={getattr(jax.config, name, None)}" for name in _SETTINGS)
    head = (f"spineid-program-1|{function.__module__}.{function.__qualname__}|"
            f"{_environment()}|{jax.default_backend()}|{settings}")
    key = hashlib.sha256("\n".join((head, text, arrays)).encode()).hexdigest()

    def rebuild(*arrays):
        call_args, call_kwargs = eqx.combine(jax.tree.unflatten(dynamic_tree, arrays), static)
        outputs = function(*call_args, **call_kwargs)
        if not isinstance(outputs, tuple):
            raise TypeError(f"{function.__qualname__} returned {type(outputs).__name__}, "
                            "not a tuple of arrays")
        return outputs

    return key, flat, rebuild


def _home_of(value):
    # What the qualified name of `value` resolves to in its own module (None if it does not).
    owner = sys.modules.get(getattr(value, "__module__", None) or "")
    for part in getattr(value, "__qualname__", "<").split("."):
        if owner is None or part.startswith("<"):
            return None
        owner = vars(owner).get(part) if isinstance(owner, type) else getattr(owner, part, None)
        if isinstance(owner, (staticmethod, classmethod)):
            owner = owner.__func__
    return owner


def patched() -> str | None:
    """The first function or class of spineid's traced layers (module globals and class
    attributes; not the command line, plots or file readers) that has been replaced at run
    time, or `None`: one from code outside spineid, its libraries and Python's own (a test's or
    a script's monkeypatch), a lambda, a spineid function that is not the one its own module
    defines, or one of a module's own functions under another of its names. Tracing follows
    such a replacement, which no key can see, and JAX reuses the traces made with it after it
    is undone: once one is found, the process neither writes nor loads programs."""
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("spineid.") \
                or name.split(".")[1] in _UNTRACED:
            continue
        owners = [(name, "", vars(module))] + [
            (f"{name}.{k}", f"{v.__qualname__}.", vars(v)) for k, v in list(vars(module).items())
            if isinstance(v, type) and v.__module__ == name]
        for owner, prefix, values in owners:
            for attribute, value in list(values.items()):
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if not isinstance(value, (types.FunctionType, type)):
                    continue
                top = (value.__module__ or "").split(".")[0]
                if (top not in _TRUSTED and top not in sys.stdlib_module_names) \
                        or "<lambda>" in value.__qualname__ \
                        or (top == "spineid" and "<locals>" not in value.__qualname__
                            and _home_of(value) is not value) \
                        or (value.__module__ == name
                            and value.__qualname__ != prefix + attribute):
                    return f"{owner}.{attribute}"
    return None


def program_folder() -> pathlib.Path | None:
    """Where programs are kept: `spineid-programs/` in JAX's compilation cache directory, or
    `None` while that cache is off."""
    for variable in ("SPINEID_CACHE", PROGRAMS_VARIABLE):
        if os.environ.get(variable, "").strip().lower() in ("off", "0", "no", "false"):
            return None
    directory = jax.config.jax_compilation_cache_dir
    return pathlib.Path(directory) / FOLDER if directory else None


def _write(path: pathlib.Path, data: bytes) -> None:
    # Atomically: a temporary file in the same folder renamed into place.
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise


def _load(path: pathlib.Path):
    try:
        return jax.export.deserialize(bytearray(path.read_bytes()))
    except Exception:  # (missing, truncated by another program, another format): export anew
        return None


def forget() -> None:
    """Drop the programs this process holds in memory (`release_compiled_programs` does, with
    JAX's compiled programs); later calls load them from disk again."""
    _in_memory.clear()


def _named_call(exported, function):
    # The exported program under jit, named as the function (JAX's logs and caches say
    # `jit_<name>`).
    def program(*arrays):
        return exported.call(*arrays)

    program.__name__ = program.__qualname__ = function.__name__.lstrip("_")
    return jax.jit(program)


def stored_call(function, *args, **kwargs):
    """`function(*args, **kwargs)` for a jitted `function` (`equinox.filter_jit`), run from its
    stored program where one exists and written for later processes where not (module
    docstring); `function` returns a tuple of arrays, and so does this.

    The numbers are those of `function` itself: the stored program is the one its tracing
    produces (tested bit for bit against a traced call, in a second process)."""
    folder = program_folder()
    if folder is None:
        counts.traced += 1
        return function(*args, **kwargs)
    key, flat, rebuild = program_key(function, args, kwargs)
    if key is None:
        counts.traced += 1
        counts.reasons.append(flat)
        return function(*args, **kwargs)
    call = _in_memory.get(key, False)
    if call is False:
        replaced = patched()
        if replaced is not None:
            # For the rest of the process: JAX keeps the traces it made while the replacement
            # was in place and reuses them inside later traces, after the patch is undone.
            global _tainted
            _tainted = f"{replaced} replaced at run time"
        if _tainted:
            counts.traced += 1
            counts.reasons.append(_tainted)
            return function(*args, **kwargs)
        path = folder / f"{key}.program"
        exported = _load(path) if path.exists() else None
        if exported is not None:
            counts.loaded += 1
        else:
            try:
                specs = [jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x),
                                              weak_type=getattr(x, "weak_type", False))
                         for x in flat]
                exported = jax.export.export(jax.jit(rebuild))(*specs)
                data = exported.serialize()
            except Exception as error:  # (callbacks, custom calls export refuses): traced
                counts.reasons.append(f"not exportable: {type(error).__name__}")
                exported = None
            else:
                counts.exported += 1
                try:
                    _write(path, bytes(data))
                except OSError:  # (a read-only cache: this process still uses the program)
                    pass
        call = None if exported is None else _named_call(exported, function)
        _in_memory[key] = call
    if call is None:
        counts.traced += 1
        return function(*args, **kwargs)
    return tuple(call(*flat))
