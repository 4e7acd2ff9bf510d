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
backend, the JAX settings that change what is traced (`jax_enable_x64`, ...) and equinox's
environment variables (`EQX_ON_ERROR`); the non-array part of the arguments (the tree
structure, the static fields of every `equinox.Module` in it, the non-array leaves) written
out by `repr`, with the qualified names of their types; and the shape, dtype and device of
every array argument. A program is not stored where that text could name two different
programs alike: where the arguments hold a type or a function defined outside spineid and the
libraries it is built on (a model class of the user's own: its code is not in the key), a
function defined inside another (`<locals>`: its closure is not in the key), an array held as
static data (its `repr` rounds and abbreviates), or any other object whose `repr` is its
address; where the function is not the one its module defines under its
name (`jax.grad(f)` keeps `f`'s name); and once any name of spineid's traced modules has been
rebound at run time (monkeypatched: tracing follows the replacement, which no key sees; from
then on the process stores and loads no programs, `patched`). Those calls are traced as usual.

Programs are written (atomically, behind a checksum) to `spineid-programs/` inside JAX's
compilation cache directory, and only while that cache is on (`SPINEID_CACHE=off` turns both
off; `SPINEID_PROGRAMS=off` only the programs). A program that cannot be exported (one that
calls back into Python: a solve that prints each step, or one whose diffrax runtime checks
throw) is traced as usual, once (the trace the export attempt made is run),
and a note beside it (`<key>.traced`) keeps later processes from trying again; one whose file
is unreadable or damaged is exported again; one that reads but fails at its first call is
deleted.
Deleting the folder is always safe.

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
import jax.extend
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
             "jax_numpy_rank_promotion", "jax_default_prng_impl", "jax_default_device")
# Environment variables read while tracing: equinox's (`EQX_ON_ERROR` turns its checks into
# NaN or breakpoints in the traced program).
_VARIABLE_PREFIXES = ("EQX_",)
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
_bound: dict = {}  # module -> {owner: {name: object}}: `remember_bindings`
_checked: set = set()  # keys whose program has run once in this process
_traced: set = set()  # keys whose function cannot be exported: run traced, under jit


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


def _qualified(kind) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _name_functions(value, names: dict, kinds: list, depth: int = 0) -> str | None:
    """Walk `value` (static data or a leaf): collect `{repr(f): qualified name}` of the
    functions in it and the qualified names of the types met (`kinds`); return why it cannot be
    keyed by its `repr`, or `None`. Modules and dataclasses are walked field by field (a
    module's `repr` abbreviates arrays, so an array inside one is refused like any other)."""
    if depth > 40:
        return "nested too deep"
    if isinstance(value, (tuple, list, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, functools.partial):
        items = [value.func, *value.args, *value.keywords.values()]
    elif isinstance(value, types.MethodType):
        items = [value.__func__, value.__self__]
    elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        qualname = getattr(value, "__qualname__", "")
        if not _trusted(value) or "<" in qualname or _home_of(value) is not value:
            return f"function {qualname or value!r} of module {value.__module__}"
        names[repr(value)] = f"<function {value.__module__}.{qualname}>"
        return None
    elif isinstance(value, type):
        if not _trusted(value):
            return f"type {_qualified(value)}"
        kinds.append(_qualified(value))
        return None
    elif isinstance(value, (np.ndarray, jax.Array)):  # (its repr rounds and abbreviates)
        return f"an array of shape {np.shape(value)} held as static data"
    elif not _trusted(type(value)):
        return f"object of type {_qualified(type(value))}"
    elif isinstance(value, eqx.Module):
        leaves, tree = jax.tree.flatten(value)
        reason = _node_types(tree, names, kinds, depth + 1)
        if reason is not None:
            return reason
        items = leaves
    elif dataclasses.is_dataclass(value):
        kinds.append(_qualified(type(value)))
        items = [getattr(value, field.name) for field in dataclasses.fields(value)]
    else:
        kinds.append(_qualified(type(value)))
        return None
    for item in items:
        reason = _name_functions(item, names, kinds, depth + 1)
        if reason is not None:
            return reason
    return None


def _node_types(treedef, names: dict, kinds: list, depth: int = 0) -> str | None:
    """Why the tree structure `treedef` cannot be keyed by its `repr` (a node type or static
    field of untrusted code), or `None`; the node types' qualified names go to `kinds` (the
    `repr` shows only their names)."""
    stack = [treedef]
    while stack:
        node = stack.pop()
        data = node.node_data()
        if data is not None:
            kind, aux = data
            if not _trusted(kind):
                return f"type {_qualified(kind)}"
            kinds.append(_qualified(kind))
            reason = _name_functions(aux, names, kinds, depth + 1)
            if reason is not None:
                return reason
        stack.extend(node.children())
    return None


def _device(x) -> str:
    # Where an array lives (a committed array runs the program there).
    try:
        return ",".join(sorted(d.platform for d in x.devices()))
    except AttributeError:  # (a numpy array)
        return "host"


def program_key(function, args: tuple, kwargs: dict):
    """`(key, flat arrays, rebuild)` for `function(*args, **kwargs)`: the hex digest that names
    its program (module docstring), the array leaves of the arguments and a function of those
    leaves that calls `function`; or `(None, reason, None)` where the call cannot be keyed."""
    qualname = getattr(function, "__qualname__", "<unnamed>")
    if not _trusted(function) or "<" in qualname or _home_of(function) is not function:
        # (also a transformation of a spineid function, jax.grad(f): it keeps f's name)
        return None, f"function {qualname} of module {function.__module__}", None
    dynamic, static = eqx.partition((args, kwargs), eqx.is_array)
    flat, dynamic_tree = jax.tree.flatten(dynamic)
    leaves, static_tree = jax.tree.flatten(static)
    names: dict = {}
    kinds: list = []
    reason = _node_types(static_tree, names, kinds)
    for leaf in leaves:
        reason = reason or _name_functions(leaf, names, kinds)
    if reason is not None:
        return None, reason, None
    text = (repr(static_tree) + "|" + "|".join(f"{type(v).__name__}:{v!r}" for v in leaves)
            + "|" + ",".join(kinds))
    for address, name in names.items():
        text = text.replace(address, name)
    if " at 0x" in text or "object at" in text:
        return None, "an argument whose repr is its address", None
    arrays = "|".join(f"{jax.numpy.shape(x)}:{jax.numpy.result_type(x)}:{_device(x)}:"
                      f"{getattr(x, 'weak_type', False)}" for x in flat)
    settings = ",".join(f"{name}={getattr(jax.config, name, None)}" for name in _SETTINGS)
    variables = ",".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                         if k.startswith(_VARIABLE_PREFIXES))
    head = (f"spineid-program-2|{function.__module__}.{qualname}|{_environment()}|"
            f"{jax.default_backend()}|{settings}|{variables}")
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


def _traced_modules():
    # spineid's modules whose code programs trace (not the command line, plots, file readers).
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith("spineid.") \
                and name.split(".")[1] not in _UNTRACED:
            yield name, module


def _bindings(name: str, module) -> list:
    # `(owner, prefix, namespace)` of a module and of each class it defines.
    return [(name, "", vars(module))] + [
        (f"{name}.{k}", f"{v.__qualname__}.", vars(v)) for k, v in list(vars(module).items())
        if isinstance(v, type) and v.__module__ == name]


def remember_bindings() -> None:
    """Note what every name of spineid's traced modules (and of their classes) is bound to now,
    for `patched` to compare with: `import spineid` calls it once its modules are loaded;
    modules imported later are noted when first seen."""
    for name, module in _traced_modules():
        if name not in _bound:
            _bound[name] = {owner: dict(namespace)
                            for owner, _, namespace in _bindings(name, module)}


def patched() -> str | None:
    """The first name of spineid's traced modules (module globals and class attributes; not
    the command line, plots or file readers) that has been rebound at run time, or `None`:
    bound to another object than when `remember_bindings` noted it (a function, a constant, a
    mock), or, for what was bound before that, to code outside spineid, its libraries and
    Python's own (a test's or a script's monkeypatch), to a lambda, to a spineid function that
    is not the one its own module defines, or to one of a module's own functions under another
    of its names. Tracing follows such a replacement, which no key can see, and JAX reuses the
    traces made with it after it is undone: once one is found, the process neither writes nor
    loads programs. Not seen: objects changed in place, and replacements inside JAX or the
    other libraries (their versions are in the key, not their state)."""
    remember_bindings()
    for name, module in _traced_modules():
        noted = _bound[name]
        for owner, prefix, values in _bindings(name, module):
            before = noted.get(owner, {})
            for attribute, value in list(values.items()):
                if attribute in before and before[attribute] is not value:
                    return f"{owner}.{attribute}"
            for attribute in before:
                if attribute not in values:
                    return f"{owner}.{attribute}"
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


_MAGIC = b"spineid-program\n"


def _write(path: pathlib.Path, data: bytes) -> None:
    # Atomically (a temporary file in the same folder renamed into place), behind a header with
    # the program's checksum, readable by the other users of a shared cache.
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(_MAGIC + hashlib.sha256(data).hexdigest().encode() + b"\n" + data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise


def _load(path: pathlib.Path):
    # The program in `path`, or None (missing, unreadable, damaged, another format).
    try:
        content = path.read_bytes()
        checksum, data = content[len(_MAGIC):len(_MAGIC) + 64], content[len(_MAGIC) + 65:]
        if not content.startswith(_MAGIC) \
                or hashlib.sha256(data).hexdigest().encode() != checksum:
            return None
        return jax.export.deserialize(bytearray(data))
    except Exception:
        return None


def forget() -> None:
    """Drop the programs this process holds in memory (`release_compiled_programs` does, with
    JAX's compiled programs); later calls load them from disk again."""
    _in_memory.clear()
    _checked.clear()
    _traced.clear()


def _named_call(exported, function):
    # The exported program under jit, named as the function (JAX's logs and caches say
    # `jit_<name>`).
    def program(*arrays):
        return exported.call(*arrays)

    program.__name__ = program.__qualname__ = function.__name__.lstrip("_")
    return jax.jit(program)


def _strong(outputs) -> tuple:
    # The outputs strongly typed, however they were computed (a program read from disk does not
    # keep an output's weak type; a traced call does).
    return tuple(jax.numpy.asarray(x, dtype=jax.numpy.result_type(x)) for x in outputs)


def stored_call(function, *args, **kwargs):
    """`function(*args, **kwargs)` for a jitted `function` (`equinox.filter_jit`), run from its
    stored program where one exists and written for later processes where not (module
    docstring); `function` returns a tuple of arrays, and so does this (strongly typed,
    whichever way it ran).

    The numbers are those of `function` itself: the stored program is the one its tracing
    produces (tested bit for bit against a traced call, in a second process). A program that
    fails at its first call in a process (a file that reads but does not compile) is deleted,
    and the call traced."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))):
        # (called inside another trace: there the call is part of that program)
        counts.traced += 1
        return _strong(function(*args, **kwargs))
    # (placed first, whichever way the call runs: its signature, and its key, do not depend on
    # where the caller's arrays came from)
    dynamic, static = eqx.partition((args, kwargs), eqx.is_array)
    leaves, tree = jax.tree.flatten(dynamic)
    args, kwargs = eqx.combine(jax.tree.unflatten(tree, _placed(leaves)), static)
    folder = program_folder()
    if folder is None:  # (off)
        counts.traced += 1
        return _strong(function(*args, **kwargs))
    key, flat, rebuild = program_key(function, args, kwargs)
    if key is None:
        counts.traced += 1
        counts.reasons.append(flat)
        return _strong(function(*args, **kwargs))
    path = folder / f"{key}.program"
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
            return _strong(function(*args, **kwargs))
        call = _prepared(function, key, flat, rebuild, path)
        _in_memory[key] = call
    if key in _traced:
        counts.traced += 1
    if key in _checked:
        return _strong(call(*flat))
    try:
        outputs = _strong(call(*flat))
    except Exception as error:
        if key in _traced:  # (the function's own failure, traced as usual)
            raise
        # Its first call here: the stored program itself is at fault.
        counts.reasons.append(f"stored program failed: {type(error).__name__}")
        _in_memory.pop(key, None)
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass
        counts.traced += 1
        return _strong(function(*args, **kwargs))
    _checked.add(key)
    return outputs


def placement_device(leaves) -> jax.Device:
    """Where a call on `leaves` (any pytree leaves) runs: the device this thread computes on
    (`jax.default_device`, which executors set per chunk; where stored programs put their
    results), unless the leaves hold arrays committed to single devices and that one is not
    among them: then the first of those (as `jit` runs where its committed arguments are)."""
    device = jax.extend.backend.get_default_device()
    committed = [next(iter(x.sharding.device_set)) for x in leaves
                 if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
                 and x.committed and len(x.sharding.device_set) == 1]
    return device if not committed or device in committed else committed[0]


def _placed(flat: list) -> list:
    """The array arguments `flat` of a stored call (numpy or JAX arrays, no tracers) committed
    to one device (`placement_device`). A jitted call compiles once per placement
    of its arguments as well as per shape (a committed array's device is part of its
    signature): a fit started from host values (uncommitted) and its refit from a stored
    program's output (committed) compiled the same Levenberg-Marquardt program twice (an
    OpenSim neck's marker fit: three compilations of 10-13 s for one program, measured)."""
    device = placement_device(flat)
    flat = list(flat)
    moved = [k for k, x in enumerate(flat) if not (isinstance(x, jax.Array) and x.committed
                                                    and x.sharding.device_set == {device})]
    if moved:  # (one transfer call for all of them; none where all are in place)
        for k, x in zip(moved, jax.device_put([flat[k] for k in moved], device)):
            flat[k] = x
    return flat


def _prepared(function, key: str, flat, rebuild, path: pathlib.Path):
    """The callable of `key`'s arrays: the stored program, loaded or exported now; or, where it
    cannot be exported, `rebuild` under `jit` (traced as usual, once: the trace the failed
    export made is reused), with a note beside the program's path so that later processes do
    not try again (`<key>.traced`, its reason inside)."""
    rebuild.__name__ = rebuild.__qualname__ = function.__name__.lstrip("_")
    jitted = jax.jit(rebuild)
    marker = path.with_suffix(".traced")
    try:
        noted = marker.is_file()
    except OSError:
        noted = False
    if noted:
        _traced.add(key)
        counts.reasons.append("not exportable (noted by an earlier process)")
        return jitted
    exported = _load(path)
    if exported is not None:
        counts.loaded += 1
        return _named_call(exported, function)
    try:
        specs = [jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x),
                                      weak_type=getattr(x, "weak_type", False)) for x in flat]
        exported = jax.export.export(jitted)(*specs)
        data = exported.serialize()
    except Exception as error:  # (host callbacks, custom calls export refuses): traced
        reason = f"not exportable: {type(error).__name__}: {str(error)[:200]}"
        counts.reasons.append(reason)
        _traced.add(key)
        if not isinstance(error, (ImportError, OSError)):  # (the program's, not the setup's)
            try:
                _write(marker, reason.encode())
            except OSError:
                pass
        return jitted
    counts.exported += 1
    try:
        _write(path, bytes(data))
    except OSError:  # (a read-only cache: this process still uses the program)
        pass
    return _named_call(exported, function)
