"""Batches on executors (`spineid.run_batch`, `spineid.fit_batch`, `fit_many(executor=...)`):
this process or a two-worker Dask LocalCluster give the same numbers, failures are records and
the batch goes on, a worker that dies has its chunk retried and then reported, an interrupted
batch resumes from its folder without running finished chunks again, and a folder of another
batch is refused.

Oracles: the same fits run one by one with `spineid.fit` in this process (the executors must
give exactly their numbers), and counting what ran (a file per call, written by the items'
function wherever it runs).
"""

import json
import os
import pathlib
import time

import jax
import numpy as np
import pytest

import spineid

pytestmark = pytest.mark.xdist_group("executors")

TS = np.linspace(0.0, 0.2, 101)
NOISE = {"x": 5e-6, "y": 5e-6, "theta": 1.7e-4}


def square(item):
    """An item's result, with a file per call when the item asks for one (counts calls)."""
    value, folder = item
    if folder is not None:
        pathlib.Path(folder, f"{value}-{time.monotonic_ns()}").touch()
    if value == 13:
        raise ValueError("thirteen is refused")
    if value == -1:
        os._exit(3)  # a worker that dies mid-task
    if value == -2:
        raise KeyboardInterrupt  # an interruption of the batch
    return {"square": value * value}


def calls(folder: pathlib.Path) -> list[int]:
    return sorted(int(p.name.rsplit("-", 1)[0]) for p in folder.iterdir())


@pytest.fixture(scope="module")
def monte_carlo():
    model_file = spineid.load_model_file(spineid.dataset_path("axial_4_springs.toml"))
    clean = np.asarray(jax.vmap(model_file.model.observe)(
        spineid.simulate(model_file.model, TS).q))
    problem = spineid.FitProblem(model_file, spineid.Measurement(TS, clean, ("x", "y", "theta")),
                                 ["stiffness"], NOISE)
    draws = clean + np.random.default_rng(0).normal(size=(6,) + clean.shape) * np.array(
        list(NOISE.values()))
    return problem, draws


def test_a_local_batch_keeps_order_and_records_failures_and_goes_on(tmp_path):
    items = [(v, None) for v in range(20)]
    result = spineid.run_batch(square, items, chunk=6, out=tmp_path / "out")
    assert [r["index"] for r in result.records] == list(range(20))
    assert result.results[12] == {"square": 144} and result.results[13] is None
    (failure,) = result.failures
    assert failure["index"] == 13 and "ValueError: thirteen is refused" in failure["error"]
    # Streamed: every chunk in its own file, the batch described beside them.
    assert sorted(p.name for p in (tmp_path / "out" / "chunks").iterdir()) == [
        "00000.json", "00001.json", "00002.json", "00003.json"]
    header = json.loads((tmp_path / "out" / "batch.json").read_text())
    assert header["items"] == 20 and header["chunk"] == 6
    assert "20 item(s), 1 failed; 4 chunk(s)" in result.summary()


def test_an_interrupted_batch_resumes_without_running_finished_chunks(tmp_path):
    counter = tmp_path / "calls"
    counter.mkdir()
    out = tmp_path / "out"
    items = [(v, str(counter)) for v in range(12)]
    interrupted = items[:7] + [(-2, str(counter))] + items[8:]
    with pytest.raises(KeyboardInterrupt):
        spineid.run_batch(square, interrupted, chunk=3, out=out, key="one study")
    assert calls(counter) == [-2, 0, 1, 2, 3, 4, 5, 6]  # chunks 0 and 1 finished, 2 lost
    for path in counter.iterdir():
        path.unlink()
    resumed = spineid.run_batch(square, items, chunk=3, out=out, key="one study",
                                resume=True)
    # The interrupted chunk (items 6-8) and the rest ran; chunks 0 and 1 were read back.
    assert calls(counter) == [6, 7, 8, 9, 10, 11]
    assert (resumed.resumed, resumed.ran) == (2, 2)
    assert [r["square"] for r in resumed.results] == [v * v for v in range(12)]
    with pytest.raises(ValueError, match="written by a different batch .*key differs"):
        spineid.run_batch(square, items, chunk=3, out=out, key="another study", resume=True)
    with pytest.raises(ValueError, match="written by a different batch .*chunk"):
        spineid.run_batch(square, items, chunk=4, out=out, key="one study", resume=True)
    with pytest.raises(ValueError, match="exists with other content"):
        spineid.run_batch(square, items, chunk=3, out=out)


@pytest.mark.parametrize("arguments, match", [
    (dict(chunk=0), "chunk 0"),
    (dict(executor="dask"), "expected spineid.Local"),
    (dict(resume=True), "needs the folder"),
])
def test_bad_batches_say_what_is_wrong(arguments, match):
    with pytest.raises(ValueError, match=match):
        spineid.run_batch(square, [(1, None)], **arguments)


def test_bad_executors_say_what_is_wrong():
    with pytest.raises(ValueError, match="workers=0"):
        spineid.Dask(workers=0)
    with pytest.raises(ValueError, match="retries=-1"):
        spineid.Dask(retries=-1)


def test_an_unreachable_scheduler_is_said_within_its_timeout():
    clock = time.perf_counter()
    with pytest.raises(ConnectionError, match="not reachable within 2 s"):
        spineid.run_batch(square, [(1, None)],
                          executor=spineid.Dask(scheduler="tcp://127.0.0.1:9", timeout=2))
    assert time.perf_counter() - clock < 30


def test_two_dask_workers_give_this_process_numbers_and_report_a_dead_worker(monte_carlo,
                                                                              tmp_path):
    problem, draws = monte_carlo
    executor = spineid.Dask(workers=2)
    remote = spineid.fit_many(problem, [draws], executor=executor, chunk=2,
                              out=tmp_path / "fits")
    one_by_one = [spineid.fit(problem.with_measurements(
        spineid.Measurement(TS, d, ("x", "y", "theta")))) for d in draws]
    np.testing.assert_allclose(remote["values"], [f.values for f in one_by_one], rtol=1e-10)
    np.testing.assert_allclose(remote["stderr"], [f.stderr for f in one_by_one], rtol=1e-10)
    assert remote["converged"].all() and remote["explains_data"].all()
    assert not remote["errors"]
    local = spineid.fit_many(problem, [draws], executor=spineid.Local(), chunk=2)
    np.testing.assert_allclose(local["values"], remote["values"], rtol=1e-10)
    # A worker that dies: its chunk is run once more, then reported; the others finish.
    counter = tmp_path / "calls"
    counter.mkdir()
    items = [(v, str(counter)) for v in (1, 2, -1, 4, 5, 6)]
    result = spineid.run_batch(square, items, chunk=2, executor=executor)
    assert [r["index"] for r in result.failures] == [2, 3]
    assert "failed after 2 tries" in result.failures[0]["error"]
    assert result.results[4] == {"square": 25}
    assert calls(counter).count(-1) == 2  # tried, then retried once
