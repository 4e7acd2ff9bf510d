"""Chunks of a batch and the function every executor runs on one: each item's result or its
error as a record, so that one failing item never loses the others."""

import dataclasses
import pathlib
import time
import traceback
from collections.abc import Callable

from .._cache import release_compiled_programs

DEFAULT_CHUNK = 25
"""Items per task: big enough that a task's overhead (sending the items, a worker's first
compilation) is small beside its fits, small enough that an interruption loses little."""


@dataclasses.dataclass(frozen=True)
class Chunk:
    """`number` (0, 1, ...), `indices` (the items' positions in the batch) and `items`."""

    number: int
    indices: tuple[int, ...]
    items: tuple


def run_chunk(function: Callable, chunk: Chunk) -> list[dict]:
    """`function(item)` for each item of `chunk`: a record `{"index", "ok": True, "result",
    "seconds"}`, or `{"index", "ok": False, "error"}` with the exception's type, message and
    the last line of its traceback where `function` raised (an `Exception`; an interruption
    or a dying process ends the chunk)."""
    records = []
    for index, item in zip(chunk.indices, chunk.items):
        clock = time.perf_counter()
        try:
            result = function(item)
        except Exception as error:
            where = traceback.extract_tb(error.__traceback__)[-1]
            records.append({"index": index, "ok": False,
                            "error": f"{type(error).__name__}: {error} (at {where.name}, "
                                     f"line {where.lineno} of {pathlib.Path(where.filename).name})"})
            continue
        records.append({"index": index, "ok": True, "result": result,
                        "seconds": time.perf_counter() - clock})
    # (A worker that fits many different models never reaches the kernel's limit of memory
    # mappings: spineid/_cache.py.)
    release_compiled_programs()
    return records
