"""One core for each worker process of a local Dask cluster that fills the machine (Linux).

A spineid fit is single-threaded XLA work, but a JAX process runs it on more than one thread
(its Python thread dispatching, XLA's threads executing), and the operating system moves
those threads between cores. Measured on a 2-core machine (400 warm fits of the planar pair in
one process, experiments/benchmark_scale_out.py's problem): a process alone took 9.3-10.3 s
using 1.2 cores; two such processes side by side 11.0-12.4 s each, so two unpinned workers
could be about 1.65 times one at best; each pinned to a core of its own (`taskset`), 8.0-8.8 s
alone and 8.6-8.8 s side by side. With the workers pinned, two were 1.71-1.79 times one
counting the cluster's start and 2.03-2.09 times on running clusters (docs/performance.md; 1.45 unpinned
in the same run).

`Dask(pin=True)` (the default) starts its local cluster's workers with this module as Dask
preload when they take all of this process's usable cores, or all but one (`pins`): worker
`k` (a `LocalCluster` names its workers 0, 1, ...) pins every thread of its process to the
`k`-th usable core, and the threads started later inherit it. A worker restarted after a crash
keeps its name, so its core. On a machine with cores to spare the workers are left to the
operating system: there is room for every thread, and two users' clusters pinned to the same
first cores would share them while the rest stay idle.
"""

import os

PRELOAD = __name__
"""This module's name: what `LocalCluster(preload=[...])` imports in every worker."""


def usable_cores() -> list[int]:
    """The cores this process may run on (sorted); empty where the operating system does not
    say (`os.sched_getaffinity` is Linux only)."""
    getter = getattr(os, "sched_getaffinity", None)
    return [] if getter is None else sorted(getter(0))


def pins(workers: int, pin: bool = True) -> bool:
    """Whether a local cluster of `workers` processes pins them: asked for (`pin`), the
    operating system can (Linux), and the workers take all of this process's usable cores or
    all but one (the one left to the scheduler and this process); never more workers than
    cores."""
    cores = len(usable_cores())
    return bool(pin) and hasattr(os, "sched_setaffinity") and 0 < workers <= cores \
        and workers >= cores - 1


def pin_process(core: int) -> None:
    """Pin every thread of this process to `core` (a CPU number as `os.sched_getaffinity`
    lists them): each thread listed in `/proc/self/task`, so the threads already started (the
    worker's event loop, XLA's) as well as the calling one; threads started later inherit the
    mask of the thread that starts them."""
    try:
        threads = [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]  # (0: the calling thread)
    for thread in threads:
        try:
            os.sched_setaffinity(thread, {core})
        except OSError:
            pass  # a thread that ended meanwhile


def dask_setup(worker) -> None:
    """Dask's preload hook, run in each worker process as it starts: the worker named `k`
    pins its process to the `k`-th usable core (cycling; a worker with a name that is not a
    number is left to the operating system)."""
    cores = usable_cores()
    try:
        index = int(worker.name)
    except (TypeError, ValueError):
        return
    if cores:
        pin_process(cores[index % len(cores)])
