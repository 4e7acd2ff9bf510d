"""A fit's figures drawn by worker processes, side by side, while the command goes on.

The three figures of a trajectory fit cost about half a second of matplotlib (measured on the
4-axial-spring pair of experiments/benchmark_cold_start.py, 2 cores: 0.12, 0.18 and 0.19 s
warm), and pyplot's import 0.2-0.3 s more: a third of a whole `spineid fit` process. The
command's process entry (`console`) may start a few worker processes (`start`) as soon as its
arguments are read, before any work: they import pyplot while the data are read and the fit
runs, and then draw the figures of a fit at the same time as each other (`draw`).

The workers are forks of the command's process, so that they begin with everything it has
imported. A fork is safe only before JAX's runtime starts its threads (a lock held by one of
them at the fork would stay held in the worker), which is why only the process entry starts
them, before the verb runs; `main` called from Python never does, and draws in its own
process. A worker receives plain numbers (`FitFigureData`: arrays, the channel noise, the
identifiability analysis), never a model or a JAX array, and never starts JAX itself.

A worker that dies is not replaced: its figures, and every later one, are drawn in the
command's own process. A figure that fails in a worker raises its error in the command, as it
would have there. The workers ignore SIGINT and SIGTERM (a figure being written is finished:
files are written atomically, and one cut off would leave its temporary file) and end with
the command: at its end (`stop`) or, if it was killed, within half a second.
"""

import concurrent.futures
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time

import numpy as np

from .. import plots


@dataclasses.dataclass
class FitFigureData:
    """What the figures of a trajectory fit show, as plain numbers (what a worker process
    receives instead of the `FitResult`, whose model holds JAX arrays).

    Fields: `measurements` (`Measurement`s: `ts` s `(k,)`, `values` SI `(k, c)`),
    `predictions` (per load case, `(k, c)` SI), `noise` (per channel, SI), `cost`, `solver`
    (the text the fit figure's title shows), `names` (free parameters), `identifiability`
    (an `Identifiability`, or `None` for a result without one) and `goodness_of_fit` (the
    `GoodnessOfFit` whose verdict the residual figure states, or `None`); `residuals()` as the
    result's.
    """

    measurements: list
    predictions: list
    noise: dict
    cost: float
    solver: str
    names: list
    identifiability: object = None
    goodness_of_fit: object = None

    @classmethod
    def of(cls, result) -> "FitFigureData":
        """The numbers of a `FitResult` that its figures show."""
        return cls([dataclasses.replace(m, ts=np.asarray(m.ts), values=np.asarray(m.values))
                    for m in result.measurements],
                   [np.asarray(p) for p in result.predictions], dict(result.noise),
                   float(result.cost), str(result.solver), list(getattr(result, "names", ())),
                   getattr(result, "identifiability", None),
                   getattr(result, "goodness_of_fit", None))

    def residuals(self) -> list[np.ndarray]:
        """Data minus fit, per load case (`(k, c)`, SI)."""
        return [m.values - p for m, p in zip(self.measurements, self.predictions)]


_pool: list = [None]  # the running workers (a ProcessPoolExecutor), or None


def start(workers: int = 2) -> bool:
    """Start `workers` worker processes that draw figures (module docstring); whether they
    started. Only where processes can be forked cheaply and safely (Linux) and the machine has
    more than one core; call it before anything has run in JAX (the process entry does)."""
    if _pool[0] is not None:
        return True
    if sys.platform != "linux" or (os.cpu_count() or 1) < 2 or workers < 1:
        return False
    try:
        _pool[0] = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork"), initializer=_prepared,
            initargs=(os.getpid(),))
        # (A first task starts every worker at once: with fork, the pool starts them all
        # before its own manager thread exists.)
        _pool[0].submit(int)
    except OSError:  # no processes to be had (a limit on them): draw here
        _pool[0] = None
        return False
    return True


def stop() -> None:
    """End the workers: figures not yet begun are dropped, one being drawn is finished."""
    pool, _pool[0] = _pool[0], None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def _prepared(parent: int) -> None:
    # A worker's start: signals left to the command, an end with it, pyplot loaded.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # At a lower priority: loading pyplot then takes the cores only while the command does
    # not (with the same priority the command's fit, on 2 cores, came 0.2-0.3 s later).
    os.nice(10)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)  # the command is gone (killed): nobody waits for a figure

    threading.Thread(target=watch, daemon=True).start()
    plots.use_file_backend()
    plots.plot_fit  # noqa: B018 (loads the plot modules, and pyplot with them)


def _drawn(name: str, args: tuple):
    return getattr(plots, name)(*args)


def draw(jobs, here) -> list:
    """Draw `jobs` (`(plot function name, arguments)` each, arguments without JAX arrays) in
    the workers, all at once, or where none run, one after another with `here(name, args)`;
    returns what each plot function returned, in order. Raises the first job's error after
    every job has ended (no worker is then still writing into the output folder)."""
    pool = _pool[0]
    if pool is None:
        return [here(name, args) for name, args in jobs]
    try:
        futures = [pool.submit(_drawn, name, args) for name, args in jobs]
    except concurrent.futures.process.BrokenProcessPool:  # (the workers are gone)
        _abandon(pool)
        return draw(jobs, here)
    outcomes, error = [], None
    for (name, args), future in zip(jobs, futures):
        try:
            outcomes.append(future.result())
        except concurrent.futures.process.BrokenProcessPool:
            _abandon(pool)  # a worker died: this figure, and every later one, drawn here
            outcomes.append(here(name, args))
        except Exception as raised:  # (raised once every figure has ended)
            error = error or raised
            outcomes.append(None)
    if error is not None:
        raise error
    return outcomes


def _abandon(pool) -> None:
    # Workers that died are not replaced: the figures are drawn in the command's process.
    if _pool[0] is pool:
        _pool[0] = None
        pool.shutdown(wait=False, cancel_futures=True)
