"""The `spineid` command's entry point: a verb run with its output folder, its warnings, its
stops (time limit, SIGTERM, Ctrl-C) and its exit status; the arguments are `_parser`'s. The
command line is the only part of spineid that parses arguments (docs/cli.md describes every
verb)."""

import _thread
import gc
import math
import os
import re
import signal
import sys
import threading
import time
import warnings

import equinox as eqx
import numpy as np

from ..plots import use_file_backend
from . import _commands as verbs
from . import _drawing
from ._arguments import check_batch_options, in_option_terms
from ._batch import data_files, is_batch, run_batch, uses_dask
from ._outputs import figures, OutputFolder
from ._parser import BATCH_VERBS, build_parser

def console() -> int:
    """Entry point of the `spineid` console script and of `python -m spineid`: `main` in a
    process of its own; returns the exit status.

    What is imported before the verb runs, and what the verb leaves at its end, is taken out of
    the reach of Python's cyclic garbage collector (`gc.freeze`): the collector then does not
    walk JAX's, equinox's and matplotlib's import-time objects again, in each full collection
    during the verb nor in the one at the interpreter's exit (together about a third of a
    second of a process that imports spineid, measured against one that ends by `os._exit`;
    the whole process is timed by experiments/benchmark_cold_start.py). Only
    a process that ends after the verb may do this (objects frozen are never collected), so
    `main`, called from Python, does not. For the same reason only this entry lets `fit` draw
    its figures in worker processes forked before the verb runs (`spineid.cli._drawing`). A
    run stopped (status 124, 130, 143) ends the process at once (`os._exit`, after flushing
    its output), skipping the interpreter's teardown.
    """
    gc.freeze()
    try:
        status = main(figure_processes=2)
    finally:
        _drawing.stop()
    gc.freeze()
    if status in (124, 130, 143):
        # A run stopped (its files whole, its folder marked): the process ends here, not through
        # the interpreter's teardown, where native threads of a computation the stop cut short
        # may still run beside the destruction of their objects (an abort, "pure virtual
        # method called", was seen once in 20 signals).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


_SIGNED = re.compile(r"-\.?\d")


def _signed_values(argv: list[str]) -> list[str]:
    # An option's value that starts with a minus sign (`--nodes -6,-2,2,6`, `--max-misfit
    # -2%`) joined to it (`--nodes=-6,-2,2,6`): argparse takes `-6,-2,2,6` for an option.
    joined, tokens = [], list(argv)
    while tokens:
        token = tokens.pop(0)
        if token == "--":  # (positional arguments only after it)
            return joined + [token] + tokens
        if (token.startswith("--") and "=" not in token and tokens
                and _SIGNED.match(tokens[0])):
            token = f"{token}={tokens.pop(0)}"
        joined.append(token)
    return joined


def main(argv: list[str] | None = None, *, figure_processes: int = 0) -> int:
    """Entry point of the `spineid` console script; returns the exit status (0 done, 1 a fit
    that did not converge, 2 bad input with a one-line error, 124 stopped at `--time-limit`,
    130 and 143 interrupted and terminated).

    `figure_processes`: `fit` with its plots draws its figures in this many worker processes,
    forked before the verb runs (`spineid.cli._drawing`); only for a process in which nothing
    has run in JAX yet (`console`), since a fork after JAX's threads started is unsafe. The
    caller ends them (`_drawing.stop`)."""
    arguments = build_parser().parse_args(_signed_values(sys.argv[1:] if argv is None else argv))
    if (figure_processes and arguments.command == "fit" and not arguments.no_plots
            and not uses_dask(arguments)):  # (a Dask batch's workers draw their own figures)
        _drawing.start(figure_processes)
    _last_raised[0] = -math.inf  # (an earlier call in this process does not quiet this one)
    figures.forget_deferred()
    use_file_backend()  # files only: no display is needed
    in_main_thread = threading.current_thread() is threading.main_thread()
    limit = getattr(arguments, "time_limit", None)
    timed = in_main_thread and limit is not None
    if in_main_thread:  # (signals reach only the main thread)
        previous = signal.signal(signal.SIGTERM, _terminated)
        # (Ctrl-C as SIGTERM, where it is Python's default: a job started in the background
        # of a shell, which ignores it, keeps ignoring it)
        previous_interrupt = (signal.signal(signal.SIGINT, _interrupted)
                              if signal.getsignal(signal.SIGINT) is signal.default_int_handler
                              else None)
    if timed:
        previous_alarm = signal.signal(signal.SIGALRM, _timed_out)
        signal.setitimer(signal.ITIMER_REAL, limit)
    _RUN_NUMBER[0] += 1
    _RUNNING.set()
    previous_unraisable = sys.unraisablehook
    sys.unraisablehook = _answering_dropped_stops(previous_unraisable)
    try:
        try:
            return _run(arguments)
        except (KeyboardInterrupt, _Terminated, _TimedOut) as stop:
            # (Python handles signals between bytecodes: during a long compiled computation
            # the answer comes when it returns.)
            _ANSWERING.set()
            how, status = (("interrupted", 130) if isinstance(stop, KeyboardInterrupt)
                           else ("terminated", 143) if isinstance(stop, _Terminated)
                           else (f"stopped at the time limit of {limit:g} s", 124))
            print(f"spineid: {how}; every file already written is whole (files are written "
                  "atomically), the rest were not written, and an output folder begun says it "
                  "is incomplete (spineid-outputs.json)", file=sys.stderr)
            return status
    except (KeyboardInterrupt, _Terminated, _TimedOut) as stop:  # a second one while answering
        return 143 if isinstance(stop, _Terminated) else 124 if isinstance(stop, _TimedOut) \
            else 130
    finally:
        _ANSWERING.set()  # the run is over: a signal during the clean-up is not answered
        output = getattr(arguments, "output", None)
        if hasattr(output, "release"):  # (a run that did not finish lets its folder go)
            output.release()
        with _SENDING:
            _RUNNING.clear()
        sys.unraisablehook = previous_unraisable
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM,
                          signal.SIG_DFL if previous_alarm is None else previous_alarm)
        if in_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            if previous_interrupt is not None:
                signal.signal(signal.SIGINT, previous_interrupt)
        _ANSWERING.clear()


def _run(arguments) -> int:
    # The verb, with refused input and unusable files turned into one line (status 2).
    try:
        # Many data files: a batch (one run per file), else the one file as the verb takes it.
        files = None
        if arguments.command in BATCH_VERBS:
            if is_batch(arguments.data):  # (marker files are trajectories: fit only)
                files = data_files(arguments.data, (".csv", ".sto", ".mot"))
            else:
                arguments.data = arguments.data[0]
        elif getattr(arguments, "each", False):
            files = data_files(arguments.data)
        if files is None:
            for option, given in (("--group", getattr(arguments, "group", None)),
                                  ("--executor dask", getattr(arguments, "executor",
                                                              "local") != "local"),
                                  ("--workers", getattr(arguments, "workers", None)),
                                  ("--threads", getattr(arguments, "threads", None)),
                                  ("--scheduler", getattr(arguments, "scheduler", None)),
                                  ("--resume", getattr(arguments, "resume", False))):
                if given:
                    raise ValueError(f"{option}: only for a batch (several data files, a "
                                     "folder or a pattern; fit: --each)")
        if files is not None:
            check_batch_options(arguments)
        if getattr(arguments, "resume", False) and arguments.overwrite:
            raise ValueError("--resume and --overwrite: choose one (continue the batch in "
                             "--out, or replace it)")
        # The output folder is checked before any work (simulate checks its file itself).
        if arguments.run is not verbs.command_simulate:
            arguments.output = OutputFolder(arguments.out, arguments.command,
                                            arguments.overwrite,
                                            resume=getattr(arguments, "resume", False))
        # Overflowing numbers are caught where they matter (a result holding one is never
        # written); numpy's warnings about them would only clutter the one-line answer.
        # spineid's own warnings are one line each, without Python's source location.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"), \
                warnings.catch_warnings():
            warnings.showwarning = _show_warning
            if files is not None:
                return run_batch(arguments, arguments.run, files)
            return arguments.run(arguments)
    except ValueError as error:
        print(f"spineid: error: {in_option_terms(str(error))}", file=sys.stderr)
        return 2
    except eqx.EquinoxRuntimeError as error:
        # A check inside compiled code that is not turned into a result code: its own message
        # (the line spineid wrote), without equinox's stack.
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        ours = [line[line.index("spineid."):] for line in lines if "spineid." in line
                and not line.startswith("File ")]
        print(f"spineid: error: {(ours or lines[-1:] or ['a check in compiled code failed'])[0]}",
              file=sys.stderr)
        return 2
    except ImportError as error:
        if "pip install" not in str(error):  # (only the optional extras' own hints)
            raise
        print(f"spineid: error: {error}", file=sys.stderr)
        return 2
    except MemoryError:
        print("spineid: error: out of memory: the run needs more memory than is available "
              "(fewer samples, a shorter span or fewer data)", file=sys.stderr)
        return 2
    except OSError as error:  # a file that cannot be read or written: one line, no traceback
        where = f"{error.filename}: " if error.filename else ""
        print(f"spineid: error: {where}{error.strerror or error}", file=sys.stderr)
        return 2


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print("spineid: warning: " + in_option_terms(" ".join(str(message).split())),
          file=sys.stderr, flush=True)


class _Terminated(BaseException):
    """SIGTERM, raised where the program is, so that it ends like Ctrl-C: the file being
    written is removed, nothing half-written is left."""


# Set while an interruption is being answered: a SIGTERM then is ignored.
_ANSWERING = threading.Event()
# The number of the verb running (a signal sent again later is sent only to the run it
# interrupted) and whether one runs.
_RUN_NUMBER = [0]
_RUNNING = threading.Event()
# A signal is raised once, and again only after this many seconds: the first unwinds the stack
# (removing a temporary file), a second one at once would cut that short.
_SIGNAL_QUIET_S = 2.0
_last_raised = [-math.inf]
# A stop raised where Python drops what is raised ("Exception ignored in ...": a garbage-
# collection callback such as JAX's `_xla_gc_callback`, a weak reference's callback, a
# finaliser) reaches `sys.unraisablehook`; its signal is then sent again after this many
# seconds, when the program has left that callback.
_SIGNAL_AGAIN_S = 0.05


# Held while a signal is sent again, and while a run ends: no signal is sent once the run has
# begun to put back the handlers it found (a default action would end the process).
_SENDING = _thread.allocate_lock()


# A stop raised is sent again every this many seconds until the run answers it: a raise can be
# lost where neither Python nor `sys.unraisablehook` reports it (a signal the kernel gave to
# another thread, while the main thread sleeps in a system call that then is not interrupted;
# an exception swallowed by C code, or raised inside an unraisable hook).
_SIGNAL_PERSIST_S = _SIGNAL_QUIET_S + 0.5
_persisting = set()


def _resend(signum: int, delay: float, repeat: bool = False) -> None:
    # `signum` to the run's main thread again after `delay` s (to the main thread itself, so
    # that a wait there is interrupted), and with `repeat` every `delay` s after until the run
    # answers it, ends or another starts (one such sender per run and signal); from a bare
    # `_thread` thread, which takes none of `threading`'s locks that a garbage-collection
    # callback may have interrupted.
    number, main_thread = _RUN_NUMBER[0], threading.main_thread().ident
    if repeat:
        if (number, signum) in _persisting:
            return
        _persisting.add((number, signum))

    def send():
        while True:
            time.sleep(delay)
            with _SENDING:
                if (_RUN_NUMBER[0] != number or not _RUNNING.is_set()
                        or _ANSWERING.is_set()):
                    return
                signal.pthread_kill(main_thread, signum)
            if not repeat:
                return

    _thread.start_new_thread(send, ())


def _answering_dropped_stops(hook):
    # A `sys.unraisablehook` that sends a dropped stop's signal again; other unraisable
    # exceptions go to `hook`.
    def unraisable(report):
        signum = _STOP_SIGNALS.get(report.exc_type)
        if signum is None or not _RUNNING.is_set():
            return hook(report)
        _last_raised[0] = -math.inf  # (the stop was lost: the next one is raised)
        _resend(signum, _SIGNAL_AGAIN_S)

    return unraisable


def _raise_once(stop) -> None:
    now = time.monotonic()
    if _ANSWERING.is_set() or now - _last_raised[0] < _SIGNAL_QUIET_S:
        return
    if isinstance(sys.exc_info()[1], tuple(_STOP_SIGNALS)):
        return  # (a stop is unwinding: its clean-up, a batch waiting for its running chunks, is
        # not cut short; `_resend` repeats only a stop that was lost)
    _last_raised[0] = now
    if stop in (_Terminated, KeyboardInterrupt) and figures.defer(stop):
        return  # (raised when the figure being drawn is done)
    _resend(_STOP_SIGNALS[stop], _SIGNAL_PERSIST_S, repeat=True)
    raise stop


class _TimedOut(BaseException):
    """The `--time-limit` has passed (SIGALRM), raised where the program is."""


def _timed_out(signum, frame):
    _raise_once(_TimedOut)


def _terminated(signum, frame):
    _raise_once(_Terminated)


def _interrupted(signum, frame):
    _raise_once(KeyboardInterrupt)


_STOP_SIGNALS = {_TimedOut: signal.SIGALRM, _Terminated: signal.SIGTERM,
                 KeyboardInterrupt: signal.SIGINT}
