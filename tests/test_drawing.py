"""The command's figure workers (spineid/cli/_drawing.py): a `spineid fit` process draws its
figures in worker processes it forks at its start. Checked in real processes, as a user runs
the command: the figures the workers draw are those the command draws by itself, a worker
that dies or a figure that fails is answered as in one process, and no worker outlives a
command that was killed."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from matplotlib.image import imread

import spineid
from spineid.cli import main

pytestmark = pytest.mark.skipif(sys.platform != "linux" or (os.cpu_count() or 1) < 2,
                                reason="figure workers: Linux machines of two cores or more")

FIGURES = ("fit.png", "residuals.png", "identifiability.png")
NOISE = "x=5e-6,y=5e-6,theta=1.7e-4"

# The command's process entry (`console`), with the workers' drawing function wrapped so that
# the test can see which process draws each figure, and make a worker die, fail or hang.
COMMAND = '''
import os, sys, time
from spineid.cli import _drawing, _main

log, mode = sys.argv.pop(1), sys.argv.pop(1)
original = _drawing._drawn


def drawn(name, args):
    with open(log, "a") as file:
        file.write(f"{name} {os.getpid()} {os.getppid()}\\n")
    if mode == "die":
        os._exit(3)
    if mode == "fail" and name == "plot_residuals":
        raise ValueError("the residual figure broke")
    if mode == "hang":
        time.sleep(60)
    return original(name, args)


_drawing._drawn = drawn
if __name__ == "__main__":
    sys.exit(_main.console())
'''


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A start model 20% off the 4-axial-spring pair and its simulated record."""
    folder = tmp_path_factory.mktemp("drawing")
    model = spineid.dataset_path("axial_4_springs.toml")
    data = folder / "data.csv"
    assert main(["simulate", str(model), "--out", str(data)]) == 0
    start = folder / "start.toml"
    start.write_text(model.read_text().replace("stiffness = 27000.0", "stiffness = 32000.0"))
    (folder / "command.py").write_text(COMMAND)
    return folder


def command(inputs, out, log, mode):
    """The command run in a process of its own (its messages in `log` + ".err"; files, not
    pipes, which a worker left behind would hold open); `mode` as in `COMMAND`."""
    arguments = [sys.executable, str(inputs / "command.py"), str(log), mode, "fit",
                 str(inputs / "start.toml"), str(inputs / "data.csv"), "--free", "stiffness",
                 "--noise", NOISE, "--out", str(out)]
    with open(f"{log}.err", "w") as errors:
        return subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=errors)


def ended(process, log) -> tuple[int, str]:
    """The exit status and messages of a `command` process."""
    status = process.wait(timeout=600)
    return status, pathlib.Path(f"{log}.err").read_text()


def drawn_by(log) -> list[tuple[str, int, int]]:
    if not log.exists():
        return []
    return [(name, int(pid), int(parent)) for name, pid, parent
            in (line.split() for line in log.read_text().splitlines())]


def test_the_workers_draw_the_figures_the_command_draws_itself(inputs, tmp_path):
    log = tmp_path / "log"
    process = command(inputs, tmp_path / "workers", log, "draw")
    status, errors = ended(process, log)
    assert status == 0, errors
    drawn = drawn_by(log)
    assert sorted(name for name, _, _ in drawn) == ["plot_fit", "plot_identifiability",
                                                    "plot_residuals"]
    # Each in a worker: another process, a child of the command.
    assert all(pid != process.pid and parent == process.pid for _, pid, parent in drawn)
    # The same fit drawn in this process (no workers: `main` called from Python).
    assert main(["fit", str(inputs / "start.toml"), str(inputs / "data.csv"), "--free",
                 "stiffness", "--noise", NOISE, "--out", str(tmp_path / "here")]) == 0
    for name in FIGURES:
        ours, theirs = imread(tmp_path / "here" / name), imread(tmp_path / "workers" / name)
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs), name


def test_figures_of_a_worker_that_died_are_drawn_by_the_command(inputs, tmp_path):
    log, out = tmp_path / "log", tmp_path / "out"
    process = command(inputs, out, log, "die")
    status, errors = ended(process, log)
    assert status == 0, errors
    assert drawn_by(log) and all(pid != process.pid for _, pid, _ in drawn_by(log))
    for name in FIGURES:
        assert imread(out / name).shape[0] > 100, name
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_a_figure_that_fails_in_a_worker_is_the_commands_error(inputs, tmp_path):
    log, out = tmp_path / "log", tmp_path / "out"
    process = command(inputs, out, log, "fail")
    status, errors = ended(process, log)
    assert status == 2, errors
    assert "spineid: error: the residual figure broke" in errors
    assert "Traceback" not in errors
    # The other figures were drawn whole; nothing half-written is left.
    assert (out / "fit.png").stat().st_size > 0 and not (out / "residuals.png").exists()
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_no_worker_outlives_a_command_that_was_killed(inputs, tmp_path):
    log = tmp_path / "log"
    process = command(inputs, tmp_path / "out", log, "hang")
    deadline = time.monotonic() + 300
    while not drawn_by(log) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    workers = {pid for _, pid, _ in drawn_by(log)}
    process.kill()
    assert workers, ended(process, log)[1]
    process.wait(timeout=60)
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:  # (they ignore SIGTERM)
        os.kill(pid, signal.SIGKILL)
    assert not left


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
