"""The command line, run as a user would (in-process for speed)."""

import numpy as np
import pytest

import spineid
from spineid._cli import main


def test_simulate_writes_trajectory(tmp_path, capsys):
    out = tmp_path / "traj.csv"
    assert main(["simulate", str(spineid.dataset_path("liu_8_springs.toml")), "--out", str(out)]) == 0
    ts, poses = spineid.read_trajectory(out)
    assert len(ts) == 501 and ts[-1] == pytest.approx(0.5)
    assert np.ptp(poses[:, 2]) > 1e-3
    assert "simulated" in capsys.readouterr().out


def test_simulate_bad_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('kind = "planar_pair"\n[lower]\npose=[0,0,0]\nfixed=true\n'
                    '[upper]\nmass=-1\ninertia=1\npose=[0,0,0]\n')
    assert main(["simulate", str(path)]) == 2
    assert "upper.mass" in capsys.readouterr().err


def test_demo_writes_trajectories_and_plots(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    for name in ("liu_8_springs.csv", "liu_16_springs.csv", "trajectories.png",
                 "liu_8_springs_model.png"):
        assert (tmp_path / name).stat().st_size > 0
    printed = capsys.readouterr().out
    assert "liu_16_springs" in printed and "warm" in printed


def test_console_entry_point_runs_outside_the_source_tree(tmp_path):
    # From another folder, `python -m spineid` imports the installed package: with a wheel
    # install (as the README's commands do) this checks that the bundled data ship inside it.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "spineid", "simulate",
         str(spineid.dataset_path("liu_16_springs.toml")), "--out", "traj.csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "traj.csv").stat().st_size > 0
    listed = subprocess.run(
        [sys.executable, "-c", "import spineid; print(spineid.dataset_path('liu_8_springs.toml'))"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert listed.returncode == 0 and listed.stdout.strip().endswith("liu_8_springs.toml")
