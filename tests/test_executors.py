"""Batches on executors (`spineid.run_batch`, `spineid.fit_batch`, `fit_many(executor=...)`,
`MultiStart(executor=...)`): this process, two host devices (a thread each) or a two-worker
Dask LocalCluster give the same numbers, failures are records and the batch goes on, a worker
that dies has its chunk retried and then reported, threads of this process share the chunks, an interrupted batch resumes from its
folder without running finished chunks again, and a folder of another batch is refused.

Oracles: the same fits run one by one with `spineid.fit` in this process (the executors must
give exactly their numbers), and counting what ran (a file per call, written by the items'
function wherever it runs).
"""

import dataclasses
import json
import os
import pathlib
import threading
import time

import jax
import numpy as np
import pytest

import spineid
from spineid.executors import _executors, _pinning

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
    with pytest.raises(ValueError, match="pin='yes'"):
        spineid.Dask(pin="yes")


def cores_of_threads() -> list[tuple[int, ...]]:
    """The distinct sets of cores the threads of this process may run on (Linux)."""
    return sorted({tuple(sorted(os.sched_getaffinity(int(thread.name))))
                   for thread in pathlib.Path("/proc/self/task").iterdir()})


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_local_workers_are_pinned_only_where_they_fill_the_machine(monkeypatch):
    # Pinned when the workers take every usable core or all but one, never more workers than
    # cores, never with pin=False; a remote cluster is not this process's to arrange.
    for cores, pinned, unpinned in [(2, (1, 2), (3,)), (4, (3, 4), (1, 2, 5)),
                                    (64, (63, 64), (1, 2, 8, 65))]:
        monkeypatch.setattr(_pinning, "usable_cores", lambda n=cores: list(range(n)))
        assert all(_pinning.pins(w) for w in pinned)
        assert not any(_pinning.pins(w) for w in unpinned)
        assert not any(_pinning.pins(w, pin=False) for w in pinned)
        assert "a core each" in spineid.Dask(workers=pinned[0]).describe()
        assert "a core each" not in spineid.Dask(workers=pinned[0], pin=False).describe()
    assert "a core each" not in spineid.Dask(scheduler="tcp://127.0.0.1:9").describe()


def far(problem, factors=(3.0, 0.3, 2.5, 0.4)):
    """`problem` from a start far from its truth (factors on each stiffness)."""
    return spineid.FitProblem(problem.model_file, problem.measurements, ["stiffness"],
                              NOISE, models=[problem.fitted_model(problem.start
                                                                  * np.array(factors))])


# Every start run, one after the other in this process, as the executor runs them.
ALL_STARTS = dict(n=4, stop_when_explained=False, agreement=99)


def test_a_multistart_on_an_executor_makes_the_fits_of_this_process(monte_carlo):
    problem, draws = monte_carlo
    problem = far(problem.with_measurements(spineid.Measurement(TS, draws[0],
                                                                ("x", "y", "theta"))))
    here = spineid.fit(problem, spineid.MultiStart(**ALL_STARTS))
    batch = spineid.fit(problem, spineid.MultiStart(**ALL_STARTS, executor=spineid.Local(),
                                                    chunk=3))
    np.testing.assert_allclose(batch.values, here.values, rtol=1e-10)
    # (Here the standard errors come from the solver's last Jacobian, of coarser integration
    # tolerances; there from a Jacobian at the optimum.)
    np.testing.assert_allclose(batch.stderr, here.stderr, rtol=1e-3)
    np.testing.assert_allclose(sorted(batch.start_costs), sorted(here.start_costs), rtol=1e-10)
    assert "4 start(s) run, on local (this process)" in batch.solver and batch.explains_data
    with pytest.raises(ValueError, match="MultiStart.executor='dask'.: expected None"):
        spineid.MultiStart(executor="dask")
    with pytest.raises(ValueError, match="chunk=0"):
        spineid.MultiStart(chunk=0)


def where_it_ran(item):
    """The device an item's computation ran on (a little work each, so that every device's
    thread takes chunks)."""
    time.sleep(0.05)
    if item == 13:
        raise ValueError("thirteen is refused")
    return str(next(iter(jax.numpy.zeros(1).devices())))


def which_thread(item):
    """The thread an item ran on (a little work each, so that every thread takes chunks)."""
    time.sleep(0.02)
    if item == 13:
        raise ValueError("thirteen is refused")
    return threading.current_thread().name


def test_threads_of_this_process_give_its_numbers_and_share_the_chunks(monte_carlo, tmp_path):
    problem, draws = monte_carlo
    threaded = spineid.fit_many(problem, [draws], executor=spineid.Local(threads=2), chunk=1)
    alone = spineid.fit_many(problem, [draws], executor=spineid.Local(), chunk=1)
    for field in ("values", "stderr", "cost", "converged", "explains_data"):
        np.testing.assert_array_equal(threaded[field], alone[field])
    assert not threaded["errors"] and threaded["converged"].all()
    # Both threads took chunks; a failing item is a record, and the batch goes on.
    executor = spineid.Local(threads=2)
    assert executor.describe() == "local (this process, 2 threads)"
    batch = spineid.run_batch(which_thread, list(range(20)), chunk=1, executor=executor)
    assert set(r for r in batch.results if r) == {"spineid-local-0", "spineid-local-1"}
    assert [r["index"] for r in batch.failures] == [13]
    # By default, chunks small enough that each thread runs several (one thread: 25 items).
    items = [(v, None) for v in range(40)]
    assert spineid.run_batch(square, items, executor=executor).ran == 8
    assert spineid.run_batch(square, items).ran == 2
    # An interruption ends the batch; resumed on one thread, it keeps the chunks it was cut in.
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        spineid.run_batch(square, items[:30] + [(-2, None)] + items[31:], executor=executor,
                          out=out, key="threads")
    resumed = spineid.run_batch(square, items, out=out, key="threads", resume=True)
    assert json.loads((out / "batch.json").read_text())["chunk"] == 5
    assert resumed.resumed >= 1 and [r and r["square"] for r in resumed.results] == [
        None if v == 13 else v * v for v in range(40)]  # (13: a failure record)
    with pytest.raises(ValueError, match="threads=0"):
        spineid.Local(threads=0)


@pytest.mark.own_process(env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
def test_two_host_devices_give_this_process_numbers(monte_carlo):
    assert len(jax.devices()) == 2
    problem, draws = monte_carlo
    devices = spineid.Devices()
    assert devices.describe() == "2 device(s) of this process (cpu)"
    spread = spineid.fit_many(problem, [draws], executor=devices, chunk=2)
    local = spineid.fit_many(problem, [draws], executor=spineid.Local(), chunk=2)
    np.testing.assert_array_equal(spread["values"], local["values"])
    np.testing.assert_array_equal(spread["stderr"], local["stderr"])
    assert spread["converged"].all() and not spread["errors"]
    # Every device took chunks; a failing item is a record, and the batch goes on.
    batch = spineid.run_batch(where_it_ran, list(range(20)), chunk=2, executor=devices)
    assert set(r for r in batch.results if r) == {str(d) for d in jax.devices()}
    assert [r["index"] for r in batch.failures] == [13]
    one = spineid.run_batch(where_it_ran, list(range(4)), executor=spineid.Devices(
        devices=(jax.devices()[1],)))
    assert set(one.results) == {str(jax.devices()[1])}
    # An interruption ends the batch (it is not a failure record).
    with pytest.raises(KeyboardInterrupt):
        spineid.run_batch(square, [(v, None) for v in (1, 2, -2, 4, 5, 6)], chunk=1,
                          executor=devices)
    with pytest.raises(ValueError, match="non-empty tuple of JAX devices"):
        spineid.Devices(devices=())


@pytest.mark.own_process
def test_an_unreachable_scheduler_is_said_within_its_timeout():
    clock = time.perf_counter()
    with pytest.raises(ConnectionError, match="not reachable within 2 s"):
        spineid.run_batch(square, [(1, None)],
                          executor=spineid.Dask(scheduler="tcp://127.0.0.1:9", timeout=2))
    assert time.perf_counter() - clock < 30


def assert_both_workers_are_up_each_on_a_core_of_its_own(executor):
    # Both workers registered (raises if one is missing after the wait); every thread of each
    # worker process allowed on one core, a different core per worker (read in the workers
    # from /proc; two workers are pinned on a machine of two or three usable cores).
    import distributed

    with distributed.Client(executor.scheduler) as client:
        client.wait_for_workers(2, timeout=_executors.WORKER_START_WAIT)
        if not _pinning.pins(2):
            return
        per_worker = list(client.run(cores_of_threads).values())
    assert len(per_worker) == 2 and all(len(c) == 1 and len(c[0]) == 1 for c in per_worker)
    assert per_worker[0] != per_worker[1]


@pytest.mark.own_process
def test_a_started_cluster_serves_many_batches_and_keeps_the_executor_settings(tmp_path):
    import dask
    import distributed  # noqa: F401 (its settings registered before the `dask.config.set`
    # below, whose exit would otherwise remove every `distributed.*` setting it saw created)

    # Dask closes a local cluster's nanny for good when its worker is not back within
    # `lost-worker-timeout` of a death; a restart takes seconds, so a timeout of 1 s here (as
    # Dask's default 15 s was after deaths in a row on a loaded machine) would close the
    # nannies of the workers that die below, unless the executor's own setting holds.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1s"}), \
            spineid.Dask(workers=2, retries=2).started() as executor:
        assert executor.scheduler.startswith("tcp://") and executor.retries == 2
        # (Checked first: with the 1-s timeout in force the deaths below would close both
        # nannies, and the batch would wait for workers forever.)
        assert dask.utils.parse_timedelta(dask.config.get(
            "distributed.deploy.lost-worker-timeout")) >= _executors.WORKER_START_WAIT
        assert_both_workers_are_up_each_on_a_core_of_its_own(executor)
        first = spineid.run_batch(square, [(v, None) for v in range(4)], chunk=1,
                                  executor=executor)
        assert [r["square"] for r in first.results] == [0, 1, 4, 9]
        # The retries reached the cluster's scheduler: a dying worker's chunk is tried three
        # times before it is reported.
        counter = tmp_path / "calls"
        counter.mkdir()
        second = spineid.run_batch(square, [(v, str(counter)) for v in (1, -1, 3)], chunk=1,
                                   executor=executor)
        assert [r["index"] for r in second.failures] == [1]
        assert calls(counter).count(-1) == 3
        assert second.results[2] == {"square": 9}
        # Both workers are back after the deaths (a restart takes longer than the 1-s
        # timeout), and those started again have their cores too.
        assert_both_workers_are_up_each_on_a_core_of_its_own(executor)
    # Closed at the end of the block: its address no longer answers.
    with pytest.raises(ConnectionError, match="not reachable"):
        spineid.run_batch(square, [(1, None)],
                          executor=dataclasses.replace(executor, timeout=2))
    with pytest.raises(ValueError, match="already names a running cluster"):
        with spineid.Dask(scheduler="tcp://127.0.0.1:9").started():
            pass


@pytest.mark.own_process
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
    # A multi-start's starts on the workers: the fits of this process.
    problem_far = far(problem.with_measurements(spineid.Measurement(TS, draws[1],
                                                                    ("x", "y", "theta"))))
    starts_there = spineid.fit(problem_far, spineid.MultiStart(**ALL_STARTS, executor=executor))
    starts_here = spineid.fit(problem_far, spineid.MultiStart(**ALL_STARTS,
                                                              executor=spineid.Local()))
    np.testing.assert_allclose(starts_there.values, starts_here.values, rtol=1e-10)
    np.testing.assert_allclose(starts_there.start_costs, starts_here.start_costs, rtol=1e-10)
    # A worker that dies: its chunk is run once more, then reported; the others finish.
    counter = tmp_path / "calls"
    counter.mkdir()
    items = [(v, str(counter)) for v in (1, 2, -1, 4, 5, 6)]
    result = spineid.run_batch(square, items, chunk=2, executor=executor)
    assert [r["index"] for r in result.failures] == [2, 3]
    assert "failed after 2 tries" in result.failures[0]["error"]
    assert result.results[4] == {"square": 25}
    assert calls(counter).count(-1) == 2  # tried, then retried once


def test_a_chunk_queued_behind_one_that_kills_its_worker_is_not_blamed(tmp_path):
    # One worker, the chunk that kills it first: the chunks behind it finish (with Dask's
    # default saturation the second chunk was queued on the dying worker and failed with it).
    counter = tmp_path / "calls"
    counter.mkdir()
    items = [(v, str(counter)) for v in (-1, 4, 5, 6)]
    result = spineid.run_batch(square, items, chunk=1, executor=spineid.Dask(workers=1))
    assert [r["index"] for r in result.failures] == [0]
    assert result.results[1:] == [{"square": 16}, {"square": 25}, {"square": 36}]
    assert calls(counter).count(-1) == 2  # tried, retried once, then reported


def test_a_remote_scheduler_that_blames_a_queued_chunk_has_it_run_again_alone(tmp_path):
    # A running cluster with Dask's default saturation (a second task queued on the one-thread
    # worker): the queued chunk dies with the first, then runs alone and finishes.
    import dask
    import distributed

    counter = tmp_path / "calls"
    counter.mkdir()
    items = [(v, str(counter)) for v in (-1, 4, 5)]
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.1,
                          "distributed.scheduler.allowed-failures": 1,
                          "distributed.worker.multiprocessing-method": "spawn"}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None, silence_logs=40) as cluster:
        result = spineid.run_batch(square, items, chunk=1,
                                   executor=spineid.Dask(scheduler=cluster.scheduler_address))
    assert [r["index"] for r in result.failures] == [0]
    assert "failed after 4 tries" in result.failures[0]["error"]  # (2, then 2 alone)
    assert result.results[1:] == [{"square": 16}, {"square": 25}]
