"""Many independent computations (fits of a population, Monte-Carlo repetitions, bootstrap
resamples, multi-start sweeps) in chunks on an executor, streamed to an output folder and
resumable.

`run_batch(function, items, executor=..., chunk=..., out=..., resume=...)` cuts `items` into
chunks of `chunk` consecutive items, runs `function(item)` for every item of a chunk in one task
(`run_chunk`: one compiled program serves the whole chunk), and keeps each chunk's records as
its task completes. With `out`, each completed chunk is written at once, atomically, to
`out/chunks/NNNNN.json`, beside `out/batch.json` (what the batch is: its key, the number of
items and the chunk size). An interrupted batch (Ctrl-C, a lost machine) run again with
`resume=True` reads the chunks already written and runs only the others: at most the chunks
in flight are lost. A folder written for another batch (another key, item count or chunk
size) is refused, never mixed in.

A record is `{"index", "ok": True, "result", "seconds"}` or `{"index", "ok": False, "error"}`:
an item whose function raised is a failure record with its error, and the batch goes on; a
chunk whose task failed as a whole (its worker died, after the executor's retries) gives a
failure record for each of its items. Results must be JSON values (numbers, lists, dicts,
strings; NaN and infinities are kept), so that they can be written and read back exactly.
"""

import dataclasses
import hashlib
import json
import pathlib
import pickle
import time
from collections.abc import Callable, Sequence

from ..io._atomic import write_text_atomically
from ._chunks import Chunk
from ._executors import AbstractExecutor, Local


@dataclasses.dataclass
class BatchResult:
    """The records of a batch, in item order (`records[i]` for `items[i]`), with `executor`
    (where it ran), `resumed` (chunks read back from the output folder), `ran` (chunks run
    now), `seconds` and `out` (the folder, or `None`)."""

    records: list[dict]
    executor: str
    resumed: int
    ran: int
    seconds: float
    out: pathlib.Path | None

    @property
    def failures(self) -> list[dict]:
        """The failure records (`index`, `error`)."""
        return [r for r in self.records if not r["ok"]]

    @property
    def results(self) -> list:
        """Each item's result, `None` where it failed."""
        return [r["result"] if r["ok"] else None for r in self.records]

    def summary(self) -> str:
        """One line: how many items, failures, chunks run and resumed, time, where."""
        failed = len(self.failures)
        return (f"{len(self.records)} item(s), {failed} failed; {self.ran} chunk(s) run, "
                f"{self.resumed} read back from {self.out}; {self.seconds:.1f} s on "
                f"{self.executor}" if self.resumed else
                f"{len(self.records)} item(s), {failed} failed; {self.ran} chunk(s) in "
                f"{self.seconds:.1f} s on {self.executor}")


def batch_key(function: Callable, items: Sequence) -> str:
    """A fingerprint of the batch (the function's module and name, the items pickled): a
    resumed folder must carry the same one. Items that cannot be pickled need a `key`
    given to `run_batch`."""
    digest = hashlib.sha256()
    name = getattr(function, "__qualname__", repr(function))
    digest.update(f"{getattr(function, '__module__', '')}.{name}".encode())
    for item in items:
        digest.update(pickle.dumps(item, protocol=4))
    return digest.hexdigest()


def _chunks(items: Sequence, size: int) -> list[Chunk]:
    return [Chunk(number, tuple(range(start, min(start + size, len(items)))),
                  tuple(items[start:start + size]))
            for number, start in enumerate(range(0, len(items), size))]


def written_chunk(out) -> int | None:
    """The chunk size (items per chunk) the batch written to folder `out` was cut into, as its
    `batch.json` says; None where `out` is None or holds no readable batch."""
    if out is None:
        return None
    try:
        found = json.loads((pathlib.Path(out) / "batch.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None
    chunk = found.get("chunk") if isinstance(found, dict) else None
    return chunk if isinstance(chunk, int) and not isinstance(chunk, bool) and chunk >= 1 \
        else None


def _check_folder(out: pathlib.Path, header: dict, resume: bool, overwrite: bool) -> dict:
    # The chunks already written (resume), or an empty folder to write into.
    description = out / "batch.json"
    if out.exists() and not out.is_dir():
        raise ValueError(f"out {out}: exists and is not a folder")
    if description.is_file() and resume:
        try:
            found = json.loads(description.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"out {out}: batch.json does not read ({error}); not a batch "
                             "folder to resume") from None
        different = [k for k in ("key", "items", "chunk") if found.get(k) != header[k]]
        if different:
            raise ValueError(f"{out}: written by a different batch (its "
                             f"{', '.join(different)} "
                             f"{'differs' if len(different) == 1 else 'differ'}: other work, "
                             "other items or another chunk size); resume only the batch that "
                             "wrote it, or choose another folder")
        done = {}
        for path in sorted((out / "chunks").glob("*.json")):
            try:
                records = json.loads(path.read_text(encoding="utf-8"))
                done[int(path.stem)] = records
            except (OSError, ValueError):
                continue  # (atomic writes leave no half file; anything else is run again)
        return done
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ValueError(f"out {out}: exists with other content; resume=True continues the "
                         "batch that wrote it, overwrite=True replaces its chunks")
    (out / "chunks").mkdir(parents=True, exist_ok=True)
    for stale in (out / "chunks").glob("*.json"):
        stale.unlink()
    write_text_atomically(description, json.dumps(header, indent=1))
    return {}


def run_batch(function: Callable, items: Sequence, *, executor: AbstractExecutor | None = None,
              chunk: int | None = None, out: str | pathlib.Path | None = None,
              resume: bool = False, overwrite: bool = False, key: str | None = None,
              progress: bool = False, on_chunk: Callable | None = None) -> BatchResult:
    """Run `function(item)` for every item (module docstring).

    **Arguments:**
    - `function`: a module-level function (workers import it by name) of one item, returning a
      JSON value;
    - `items`: the work, a sequence of picklable items;
    - `executor`: `spineid.Local()` (default) or `spineid.Dask(...)`;
    - `chunk`: items per task (default the executor's `default_chunk`: `DEFAULT_CHUNK`, or
      smaller where several chunks run at once in this process, so that each thread runs
      several);
    - `out`: a folder to stream the chunks' records to; `resume` continues the batch that
      wrote it (refused for another batch), `overwrite` replaces an earlier batch's chunks;
    - `key`: the batch's fingerprint for `resume` (default `batch_key(function, items)`);
    - `progress`: a progress bar over the items (tqdm);
    - `on_chunk`: called with each chunk's records as they arrive (those read back from `out`
      first, then each chunk as it completes), e.g. to rewrite a summary.

    **Returns:** a `BatchResult`. Raises `ValueError` for bad arguments or a folder that is not
    this batch's; `ConnectionError` where a Dask scheduler cannot be reached.
    """
    executor = Local() if executor is None else executor
    if not isinstance(executor, AbstractExecutor):
        raise ValueError(f"executor {executor!r}: expected spineid.Local(), spineid.Devices() "
                         "or spineid.Dask(...)")
    items = list(items)
    if not items:
        raise ValueError("run_batch: no items")
    if chunk is None:  # (a batch resumed keeps the chunks it was cut into)
        chunk = written_chunk(out) if resume else None
        chunk = executor.default_chunk(len(items)) if chunk is None else chunk
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk {chunk!r}: expected a whole number of items >= 1")
    if not callable(function):
        raise ValueError(f"function {function!r}: expected a function of one item")
    started = time.perf_counter()
    chunks = _chunks(items, chunk)
    done: dict[int, list] = {}
    folder = None
    if out is not None:
        folder = pathlib.Path(out)
        header = {"key": key if key is not None else batch_key(function, items),
                  "items": len(items), "chunk": chunk, "format": 1}
        done = _check_folder(folder, header, resume, overwrite)
    elif resume:
        raise ValueError("resume=True needs the folder of the batch to resume (out=...)")
    todo = [c for c in chunks if c.number not in done]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), initial=sum(len(r) for r in done.values()),
                   unit="item", desc=f"batch on {executor.name}")
    records = {number: list(r) for number, r in done.items()}
    try:
        if on_chunk is not None:
            for number in sorted(done):
                on_chunk(done[number])
        if todo:
            with executor.session() as submit:
                for finished, chunk_records in submit(function, todo):
                    records[finished.number] = chunk_records
                    if folder is not None:
                        write_text_atomically(folder / "chunks" / f"{finished.number:05d}.json",
                                              json.dumps(chunk_records, allow_nan=True))
                    if on_chunk is not None:
                        on_chunk(chunk_records)
                    if bar is not None:
                        bar.update(len(chunk_records))
    finally:
        if bar is not None:
            bar.close()
    ordered = [record for number in range(len(chunks)) for record in records[number]]
    return BatchResult(records=ordered, executor=executor.describe(), resumed=len(done),
                       ran=len(todo), seconds=time.perf_counter() - started, out=folder)
