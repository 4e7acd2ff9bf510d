"""Runtime checks inside a solve reported as NaN instead of raised, while one solve is traced.

Equinox's runtime checks (`equinox.error_if`; diffrax checks `saveat.ts` with two of them in
every `diffeqsolve`) raise through a host callback by default. JAX's persistent compilation
cache and `jax.export` store no program with a host callback, so every trajectory fit would be
compiled again in every process. A solve that is told not to throw (`simulate(...,
throw=False)`, as every fit calls it) reports its failures in its result instead; for such a
solve the checks traced inside it may as well do the same: equinox's `"nan"` mode turns a
failed check into NaN states, which `classify` reports as a non-finite state. The program then
has no callback and is written to the cache (measured: a second process of the 4-axial-spring
fit loads its Levenberg-Marquardt loop instead of compiling it for 2.6 s).

How: while the `with` block traces, equinox's jitted check (`branched_error_if_impl_jit`,
whose trace cache is keyed by shapes and messages, not by the mode) is replaced by its unjitted
body with `on_error="nan"`, inlined into the solve being traced. Nothing is cached in the NaN
mode, so a check traced afterwards outside the block raises as before. A check that asks for
a mode of its own keeps it. `diffrax.diffeqsolve` keeps traces of its own (a `filter_jit`),
keyed by its arguments: `simulate` gives its non-throwing solves a vector field of their own
(`_vector_field_reporting`), so the two modes never share a solve's trace either; the
energies' derivatives that spineid jits itself (`spineid.models._mechanics`) take the mode
(`reporting_checks`) as a static argument, for the same reason. JAX's control flow
(`lax.scan`, `cond`, `while_loop`) also keeps the traces of its bodies, keyed by the body
function: a body traced inside the block must be a function made for that trace (a closure, as
the equilibria's and sweeps' are), never one defined once at module level that holds a check,
or its NaN-mode trace would serve a later raising trace.

The mode is per thread: equinox's jitted check is replaced once, for good, by a dispatcher
that gives the NaN-mode body only in a thread inside the block and equinox's own jitted check
everywhere else, so a check traced at the same moment in another thread (`spineid.Devices`
runs fits in a thread per device) keeps raising. The data a fit passes (increasing times
inside the span) never trigger diffrax's checks; the fit's inputs are checked before tracing.
Where a future equinox no longer has these two functions, the block changes nothing (the fit
is then compiled in every process, as before).
"""

import contextlib
import threading

import equinox as eqx

_INSIDE = threading.local()  # `depth`: how many blocks this thread is inside
_ORIGINAL: list = []  # equinox's own jitted check, once the dispatcher replaces it
_INSTALL = threading.Lock()


def _reported(x, pred, index, msgs, *, on_error):
    # Equinox's check, inlined, with its default mode reported as NaN instead of raised.
    return eqx._errors.branched_error_if_impl(
        x, pred, index, msgs, on_error="nan" if on_error == "default" else on_error)


def _dispatch(x, pred, index, msgs, *, on_error):
    # NaN mode in a thread inside the block; equinox's jitted check everywhere else.
    if getattr(_INSIDE, "depth", 0):
        return _reported(x, pred, index, msgs, on_error=on_error)
    return _ORIGINAL[0](x, pred, index, msgs, on_error=on_error)


def reporting_checks() -> bool:
    """Whether this thread is tracing inside a `checks_reported_as_nan` block: functions that
    keep traces of their own (`jit`) pass it as a static argument, so that a trace made in one
    mode is never reused in the other (`spineid.models._mechanics`)."""
    return getattr(_INSIDE, "depth", 0) > 0


@contextlib.contextmanager
def checks_reported_as_nan(active: bool = True):
    """While the block traces a solve in this thread, equinox checks inside it give NaN
    instead of raising (module docstring); `active=False` changes nothing."""
    module = getattr(eqx, "_errors", None)
    if not active or not all(hasattr(module, name) for name in
                             ("branched_error_if_impl", "branched_error_if_impl_jit")):
        yield
        return
    with _INSTALL:
        if not _ORIGINAL:
            _ORIGINAL.append(module.branched_error_if_impl_jit)
            module.branched_error_if_impl_jit = _dispatch
    _INSIDE.depth = getattr(_INSIDE, "depth", 0) + 1
    try:
        yield
    finally:
        _INSIDE.depth -= 1
