"""`mobidfl run --checkpoint-every N` survives SIGKILL: `--resume` gives the same outputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from mobidfl.analysis.cli import main

SETTINGS = ["vehicles=8", "pedestrians=2", "steps=20", "local_steps=1", "test_size=100",
            "momentum=0.5", "seed=3"]
ARGS = [part for item in SETTINGS for part in ("--set", item)]
ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "mobidfl.analysis.cli", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_killed_run_resumes_to_the_same_model_csv(tmp_path):
    # Prepare: a real run in a subprocess, killed with SIGKILL once a checkpoint exists
    killed = tmp_path / "killed"
    state = killed / "checkpoint" / "state.pt"
    proc = subprocess.Popen(
        _cli("run", "--out", str(killed), "--checkpoint-every", "3", "--quiet", *ARGS),
        cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 150  # the import alone takes 5-30 s on a busy machine
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    assert state.exists(), "no checkpoint within the deadline"
    saved_at = torch.load(state, weights_only=True)["steps"]
    assert 3 <= saved_at < 20 and saved_at % 3 == 0
    assert not (killed / "model.csv").exists()  # it really died mid-way
    assert (killed / "checkpoint" / "config.toml").exists()
    # Execute: resume (the CLI in this process), and an uninterrupted run with the same seed
    resumed = main(["run", "--resume", str(killed), "--quiet"])
    straight = tmp_path / "straight"
    assert main(["run", "--out", str(straight), "--quiet", *ARGS]) == 0
    # Assert
    assert resumed == 0
    assert (killed / "model.csv").read_bytes() == (straight / "model.csv").read_bytes()
    assert (killed / "config.toml").read_text() == (straight / "config.toml").read_text()
    pd.testing.assert_frame_equal(
        pd.read_parquet(killed / "agents.parquet"), pd.read_parquet(straight / "agents.parquet")
    )
    assert torch.load(state, weights_only=True)["steps"] == 20  # final state saved too


def test_checkpoint_folder_holds_resolved_config_and_weights_only_state(tmp_path):
    # Execute
    out = tmp_path / "run"
    code = main(["run", "--out", str(out), "--checkpoint-every", "2", "--quiet",
                 "--set", "steps=3", "--set", "learning=false", "--set", "vehicles=5"])
    # Assert
    assert code == 0
    folder = out / "checkpoint"
    assert (folder / "config.toml").read_text() == (out / "config.toml").read_text()
    raw = torch.load(folder / "state.pt", weights_only=True)
    assert raw["steps"] == 3
    assert not list(folder.glob(".ckpt-*")) and not list(folder.glob(".config.toml-*"))


def test_resume_of_a_finished_run_rewrites_identical_outputs(tmp_path):
    # Prepare
    out = tmp_path / "run"
    args = ["--set", "steps=2", "--set", "learning=false", "--set", "vehicles=5", "--quiet"]
    assert main(["run", "--out", str(out), "--checkpoint-every", "1", *args]) == 0
    before = (out / "model.csv").read_bytes()
    (out / "model.csv").unlink()
    # Execute
    code = main(["run", "--resume", str(out), "--quiet"])
    # Assert
    assert code == 0
    assert (out / "model.csv").read_bytes() == before


def test_bad_resume_and_checkpoint_arguments_fail_with_one_line(tmp_path, capsys):
    # Prepare
    plain = tmp_path / "plain"
    plain.mkdir()
    cases = [
        (["run", "--resume", str(plain)], "setting '--resume'"),
        (["run", "--out", str(tmp_path / "x"), "--checkpoint-every", "0"],
         "setting '--checkpoint-every' = 0"),
        (["run", "--quiet"], "setting '--out'"),
    ]
    for argv, fragment in cases:
        # Execute
        code = main(argv)
        # Assert
        err = capsys.readouterr().err.strip()
        assert code == 2 and fragment in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_resume_refuses_new_settings(tmp_path, capsys):
    # Prepare
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--checkpoint-every", "1", "--quiet",
                 "--set", "steps=1", "--set", "learning=false", "--set", "vehicles=4"]) == 0
    capsys.readouterr()
    # Execute
    code = main(["run", "--resume", str(out), "--set", "vehicles=9"])
    # Assert
    assert code == 2
    assert "continues with checkpoint/config.toml" in capsys.readouterr().err


def test_sweep_workers_exit_when_their_driver_is_killed():
    # Prepare: a stand-in driver process and a worker watching it (as the executors' pool)
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    worker = subprocess.Popen(
        [sys.executable, "-c",
         "from mobidfl.analysis.executors import _exit_with; "
         f"_exit_with({driver.pid}, every_s=0.05)"],
        cwd=ROOT, env=_env(),
    )
    time.sleep(0.5)
    assert worker.poll() is None  # keeps running while the driver lives
    # Execute
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=10)
    # Assert
    assert worker.wait(timeout=30) == 1


def test_early_stopped_run_saves_its_last_step_and_resume_stays_stopped(tmp_path):
    # Prepare: lr so small that accuracy cannot rise, so patience 1 stops the run early
    out = tmp_path / "run"
    args = ["--quiet", "--set", "steps=12", "--set", "vehicles=6", "--set", "pedestrians=0",
            "--set", "sensors=0", "--set", "uavs=0", "--set", "test_size=50",
            "--set", "local_steps=1", "--set", "lr=1e-9", "--set", "early_stop_patience=1"]
    assert main(["run", "--out", str(out), "--checkpoint-every", "5", *args]) == 0
    stopped_at = int(pd.read_csv(out / "model.csv")["step"].max())
    before = (out / "model.csv").read_bytes()
    (out / "model.csv").unlink()
    # Execute
    code = main(["run", "--resume", str(out), "--quiet"])
    # Assert: the checkpoint holds the stopping step (not the last multiple of 5), and the
    # resumed run does not train past the early stop
    assert stopped_at < 12
    assert torch.load(out / "checkpoint" / "state.pt", weights_only=True)["steps"] == stopped_at
    assert code == 0
    assert (out / "model.csv").read_bytes() == before
