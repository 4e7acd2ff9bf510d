"""Scale-out: many independent computations (fits of a population, Monte-Carlo repetitions,
bootstrap resamples) in chunks on an executor (`Local`: this process, `Local(threads=N)` on N
of its threads; `Devices`: its JAX devices, a thread each; `Dask`: the workers of a Dask
cluster), streamed to an output folder and resumable (`run_batch`)."""

from ._batch import (
    batch_key as batch_key,
    BatchResult as BatchResult,
    run_batch as run_batch,
)
from ._chunks import Chunk as Chunk, DEFAULT_CHUNK as DEFAULT_CHUNK, run_chunk as run_chunk
from ._executors import (
    AbstractExecutor as AbstractExecutor,
    Dask as Dask,
    Devices as Devices,
    Local as Local,
)
