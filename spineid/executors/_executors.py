"""Where the chunks of a batch run: in this process (`Local`), on this process's JAX devices
(`Devices`: a thread per device), or on the workers of a Dask cluster (`Dask`: a
`LocalCluster` of worker processes by default, or an existing scheduler).

An executor is a small object carrying its options (as diffrax's solvers do); `run_batch`
hands it chunks of work and takes back each chunk's records as it completes. Both run the same
chunk function (`run_chunk`), so their results are the same numbers: one compiled program on
the same kind of CPU gives the same bits whichever process runs it.
"""

import contextlib
import dataclasses
import functools
import math
import queue
import threading
from collections.abc import Callable, Iterator, Sequence

from ._chunks import Chunk, DEFAULT_CHUNK, run_chunk
from ._pinning import pins, PRELOAD

WORKER_START_WAIT = 120.0
"""Seconds `Dask.started()` waits (at least) for every worker of its local cluster to arrive."""

LOST_WORKER_TIMEOUT = 600.0
"""Seconds a local cluster waits for a dead worker's nanny to bring it back before it closes
the nanny (Dask's `distributed.deploy.lost-worker-timeout`)."""


class AbstractExecutor:
    """Runs chunks of a batch: `session()` is a context manager giving a `submit(chunks)`
    function that yields `(chunk, records)` as chunks complete (records as `run_chunk` makes
    them; a chunk whose task failed as a whole is reported by `task_failed`)."""

    name: str = "abstract"

    @contextlib.contextmanager
    def session(self) -> Iterator[Callable]:
        raise NotImplementedError

    def describe(self) -> str:
        """One line: where the work runs."""
        return self.name

    def default_chunk(self, items: int) -> int:
        """Items per chunk for a batch of `items` when none is given: `DEFAULT_CHUNK`."""
        return DEFAULT_CHUNK


@dataclasses.dataclass(frozen=True)
class Local(AbstractExecutor):
    """Every chunk in this process, compiled once (the chunks reuse the process's compiled
    programs): one after the other (`threads=1`, the default), or on `threads` threads, each
    taking the next chunk when it finishes one.

    The compiled programs run without the Python interpreter's lock, so with threads the fits'
    integrations run on several cores at once while the Python around each fit (its verdict
    and standard errors) takes turns: measured on a 2-core machine, 40 fits of the
    4-axial-spring pair in 2.85-3.12 s as a whole process with `fit_batch` on two threads
    against 3.84-3.99 s for `spineid.fit` in a loop (experiments/benchmark_cold_start.py). The
    numbers are those of one thread (the same programs). The function must be safe to run on
    several threads at once (`spineid.fit` is; the command line routes what each file's run
    prints to that file's log, and draws one figure at a time).
    """

    threads: int = 1
    name = "local"

    def __post_init__(self):
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) \
                or self.threads < 1:
            raise ValueError(f"Local(threads={self.threads!r}): expected a whole number >= 1")

    def default_chunk(self, items: int) -> int:
        return _balanced_chunk(items, self.threads)

    @contextlib.contextmanager
    def session(self):
        def submit(function: Callable, chunks: Sequence[Chunk]):
            if self.threads == 1:
                for chunk in chunks:
                    yield chunk, run_chunk(function, chunk)
            else:
                yield from _on_threads(function, chunks,
                                       [contextlib.nullcontext] * self.threads,
                                       [f"spineid-local-{k}" for k in range(self.threads)])

        yield submit

    def describe(self) -> str:
        return ("local (this process)" if self.threads == 1 else
                f"local (this process, {self.threads} threads)")


def _balanced_chunk(items: int, at_once: int) -> int:
    # Where several chunks run at once, chunks small enough that each runs several (no thread
    # left with the last big chunk alone); one at a time, `DEFAULT_CHUNK`.
    if at_once <= 1:
        return DEFAULT_CHUNK
    return max(1, min(DEFAULT_CHUNK, math.ceil(items / (4 * at_once))))


def _on_threads(function: Callable, chunks: Sequence[Chunk], contexts: Sequence[Callable],
                names: Sequence[str]):
    # `(chunk, records)` as chunks complete on one thread per entry of `contexts` (each thread
    # runs its chunks inside `contexts[k]()`), each thread taking the next chunk when it
    # finishes one; an interruption of a chunk is raised here once the running chunks end.
    waiting, finished = queue.SimpleQueue(), queue.SimpleQueue()
    for chunk in chunks:
        waiting.put(chunk)

    def work(context):
        with context():
            while True:
                try:
                    chunk = waiting.get_nowait()
                except queue.Empty:
                    return
                try:
                    finished.put((chunk, run_chunk(function, chunk)))
                except BaseException as error:  # (an interruption ends the chunk)
                    finished.put((chunk, error))
                    return

    threads = [threading.Thread(target=work, args=(context,), daemon=True, name=name)
               for context, name in zip(contexts, names)]
    for thread in threads:
        thread.start()
    try:
        for _ in chunks:
            chunk, records = finished.get()
            if isinstance(records, BaseException):
                raise records
            yield chunk, records
    finally:
        while True:  # (the chunks not started are not started)
            try:
                waiting.get_nowait()
            except queue.Empty:
                break
        for thread in threads:
            thread.join()


def _dask_modules():
    """`dask` and `distributed`, or an error that names the extra to install."""
    try:
        import dask
        import distributed
    except ImportError:
        raise ImportError("the Dask executor needs dask.distributed: "
                          "pip install 'spineid[dask]'") from None
    return dask, distributed


@dataclasses.dataclass(frozen=True)
class Dask(AbstractExecutor):
    """The chunks as tasks of a Dask cluster (`dask.distributed`, the extra `spineid[dask]`).

    Options:
    - `scheduler`: the address of a running scheduler (`tcp://host:8786`; a Slurm or Kubernetes
      cluster started with dask-jobqueue or dask-kubernetes, see docs/scale-out.md); default
      `None`: a `LocalCluster` of `workers` processes on this machine, closed at the end.
    - `workers`: worker processes of the local cluster (default 2), one thread each (a fit is
      single-threaded XLA work; threads would share one Python interpreter).
    - `pin`: give each worker process of the local cluster a core of its own where the
      workers fill the machine (default `True`; Linux, when they take all of this process's
      usable cores or all but one; `spineid/executors/_pinning.py` says why: measured on a
      2-core machine, two pinned workers 1.71-1.79 times one, unpinned 1.45-1.63). `False`
      leaves them to the operating system, e.g. when other work shares those cores. A running
      cluster (`scheduler`) keeps its own arrangement.
    - `timeout`: seconds to wait for the scheduler before giving up with an error.
    - `retries`: how often a task whose worker died, or that raised, is run again (default
      once) before its chunk is reported failed (for a worker's death a remote scheduler
      follows its own `distributed.scheduler.allowed-failures` setting). A local cluster's
      scheduler sends each worker thread one task at a time, so a worker's death is counted
      against the chunk it ran, not against the one queued behind it. A running scheduler
      whose `worker-saturation` is above 1 (Dask's default) may blame both: there a chunk
      whose workers died is run once more alone, after the others, before it is reported
      failed (docs/scale-out.md).

    Worker processes are started by spawn (fork and JAX's threads do not mix); each compiles
    the batch's programs once and keeps them for its later chunks. They share the persistent
    compilation cache when `SPINEID_CACHE_DIR` names a folder they all see (the local
    cluster's workers inherit this process's environment).
    """

    scheduler: str | None = None
    workers: int = 2
    timeout: float = 30.0
    retries: int = 1
    pin: bool = True
    name = "dask"

    def __post_init__(self):
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) \
                or self.workers < 1:
            raise ValueError(f"Dask(workers={self.workers!r}): expected a whole number >= 1")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) \
                or self.retries < 0:
            raise ValueError(f"Dask(retries={self.retries!r}): expected a whole number >= 0")
        if not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ValueError(f"Dask(timeout={self.timeout!r}): expected seconds > 0")
        if not isinstance(self.pin, bool):
            raise ValueError(f"Dask(pin={self.pin!r}): expected True or False")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise ValueError(f"Dask(scheduler={self.scheduler!r}): expected an address such "
                             "as 'tcp://host:8786'")

    def describe(self) -> str:
        if self.scheduler is not None:
            return f"dask scheduler {self.scheduler}"
        return (f"dask local cluster of {self.workers} worker process(es)"
                + (", a core each" if pins(self.workers, self.pin) else ""))

    def _settings(self) -> dict:
        """Dask's settings for this executor's clusters and clients."""
        return {"distributed.worker.multiprocessing-method": "spawn",
                "distributed.comm.timeouts.connect": f"{self.timeout}s",
                # A task whose worker died is given to another `retries` times, then failed
                # (read by the scheduler: a local cluster's runs here; a remote one keeps its
                # own setting).
                "distributed.scheduler.allowed-failures": self.retries,
                # One task per worker thread at a time: a worker's death then counts against
                # the chunk it was running only. With Dask's default (1.1: a second task
                # queued on a one-thread worker) the chunk queued behind a chunk that kills
                # its worker was blamed with it and reported failed (measured: 1 worker,
                # chunks [dies, fine]: both failed; with 1.0 only the first).
                "distributed.scheduler.worker-saturation": 1.0,
                # A local cluster closes a worker's nanny for good when no worker of its
                # name is back `lost-worker-timeout` after a death (Dask's default 15 s).
                # After deaths in a row the timer of the first death could fire while the
                # nanny was restarting the worker a second time: the cluster then had one
                # worker less for the rest of its life (seen on a loaded 2-core machine,
                # where a restart takes 5-10 s). The nanny restarts its worker itself; the
                # cluster gives it well beyond the time a worker takes to start
                # (`WORKER_START_WAIT`).
                "distributed.deploy.lost-worker-timeout": f"{LOST_WORKER_TIMEOUT:g}s"}

    @contextlib.contextmanager
    def _local_cluster(self):
        """A `LocalCluster` of `workers` spawned processes, one thread each (each pinned to a
        core of its own, `pin`); closed at the end."""
        dask, distributed = _dask_modules()
        preload = [PRELOAD] if pins(self.workers, self.pin) else []
        with dask.config.set(self._settings()), distributed.LocalCluster(
                n_workers=self.workers, threads_per_worker=1, processes=True,
                dashboard_address=None, silence_logs=40, preload=preload) as cluster:
            yield cluster

    @contextlib.contextmanager
    def started(self) -> Iterator["Dask"]:
        """A local cluster kept running for many batches: a context manager that starts a
        `LocalCluster` of `workers` processes (as `session` would), waits until every worker
        is up and gives a `Dask(scheduler=its address)` executor; the cluster closes at the
        end.

            with spineid.Dask(workers=2).started() as executor:
                for problems in batches:
                    spineid.fit_batch(problems, executor=executor)

        Each batch then reuses the running workers and their compiled programs instead of
        starting processes (about 9 s per batch on a 2-core machine). Raises `ValueError` for
        an executor that already names a scheduler."""
        if self.scheduler is not None:
            raise ValueError(f"Dask(scheduler={self.scheduler!r}).started(): the executor "
                             "already names a running cluster; started() is for a local one")
        _, distributed = _dask_modules()
        with self._local_cluster() as cluster:
            with distributed.Client(cluster, timeout=self.timeout) as client:
                client.wait_for_workers(self.workers,
                                        timeout=max(self.timeout, WORKER_START_WAIT))
            yield dataclasses.replace(self, scheduler=cluster.scheduler_address)

    @contextlib.contextmanager
    def session(self):
        dask, distributed = _dask_modules()
        with contextlib.ExitStack() as stack:
            stack.enter_context(dask.config.set(self._settings()))
            if self.scheduler is None:
                cluster = stack.enter_context(self._local_cluster())
                client = stack.enter_context(distributed.Client(cluster, timeout=self.timeout))
            else:
                try:
                    client = stack.enter_context(distributed.Client(self.scheduler,
                                                                    timeout=self.timeout))
                except (OSError, TimeoutError) as error:
                    raise ConnectionError(
                        f"Dask scheduler {self.scheduler}: not reachable within "
                        f"{self.timeout:g} s ({type(error).__name__}: {error}); check the "
                        "address and that the scheduler runs") from None

            def submit(function: Callable, chunks: Sequence[Chunk]):
                futures = {client.submit(run_chunk, function, chunk, retries=self.retries,
                                         pure=False): chunk for chunk in chunks}
                suspects = []
                for future in distributed.as_completed(futures):
                    chunk = futures[future]
                    try:
                        yield chunk, future.result()
                    except Exception as error:  # the task itself failed (a worker died)
                        if isinstance(error, distributed.KilledWorker) and blames_queued:
                            suspects.append(chunk)
                        else:
                            yield chunk, task_failed(chunk, error, self.retries)
                # A scheduler that queues tasks on workers may have blamed a chunk queued
                # behind the one that killed the worker: each such chunk runs once more alone,
                # after every other, so that only the chunk that kills its worker is reported
                # failed (its tries then counted twice).
                for chunk in suspects:
                    future = client.submit(run_chunk, function, chunk, pure=False)
                    try:
                        yield chunk, future.result()
                    except Exception as error:
                        yield chunk, task_failed(chunk, error, 2 * self.retries + 1)

            blames_queued = self.scheduler is not None and _queues_on_workers(client)

            yield submit


@dataclasses.dataclass(frozen=True)
class Devices(AbstractExecutor):
    """The chunks on this process's JAX devices, a thread per device, each taking the next
    chunk when it finishes one (`jax.default_device`: a chunk's programs run on its thread's
    device). Several GPUs of one machine, or CPU devices split off with
    `XLA_FLAGS=--xla_force_host_platform_device_count=N` (set before JAX is imported).

    Options: `devices`, the devices to use (default every device of JAX's default backend).

    Each device compiles the batch's programs for itself once; the compiled programs run
    without the Python interpreter's lock, so the devices work at the same time while the
    Python around each fit (its verdict and standard errors) takes turns. The numbers are those
    of `Local` (the same programs on the same kind of device)."""

    devices: tuple | None = None
    name = "devices"

    def __post_init__(self):
        if self.devices is not None and not (isinstance(self.devices, (tuple, list))
                                             and len(self.devices) > 0):
            raise ValueError(f"Devices(devices={self.devices!r}): expected a non-empty tuple "
                             "of JAX devices (jax.devices()), or None for all of them")

    def chosen(self) -> list:
        """The devices the chunks run on."""
        import jax

        return list(self.devices) if self.devices is not None else jax.devices()

    def default_chunk(self, items: int) -> int:
        return _balanced_chunk(items, len(self.chosen()))

    def describe(self) -> str:
        devices = self.chosen()
        return f"{len(devices)} device(s) of this process ({devices[0].platform})"

    @contextlib.contextmanager
    def session(self):
        import jax

        devices = self.chosen()

        def submit(function: Callable, chunks: Sequence[Chunk]):
            return _on_threads(function, chunks,
                               [functools.partial(jax.default_device, d) for d in devices],
                               [f"spineid-{device}" for device in devices])

        yield submit


def _queues_on_workers(client) -> bool:
    """Whether a running scheduler may hold more than one task per worker thread (its
    `distributed.scheduler.worker-saturation` above 1, Dask's default 1.1; `True` where it
    does not say), so that a worker's death also blames a chunk queued behind."""
    try:
        saturation = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.WORKER_SATURATION)
    except Exception:  # (a scheduler that refuses to run functions, or an older one)
        return True
    return not float(saturation) <= 1.0


def task_failed(chunk: Chunk, error: BaseException, retries: int) -> list[dict]:
    """Failure records for every item of a chunk whose task failed as a whole (its worker
    died, after `retries` more tries)."""
    text = (f"the task of chunk {chunk.number} failed after {retries + 1} tries "
            f"({type(error).__name__}: {error})")
    return [{"index": index, "ok": False, "error": text} for index in chunk.indices]

