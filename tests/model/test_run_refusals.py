"""Issue 44, item 5: bad inputs found by a held-out run on main, each refused in one line.

1. a checkpoint of an older MobiDFL (commit 0ca62c9: other model.csv columns) is refused
   before any step and kept, not run to the end, overwritten and then crashed on;
2. a plug-in policy whose ``exchange()`` raises: one line naming it, nothing half-written;
3. an installed entry point that fails to import: one warning naming it, other runs go on,
   a run naming its plug-in is refused in one line naming it;
4. core settings that do nothing in this world are warned, once per command;
5. ``reproduce`` refusals name the setting as typed and leave no ``--out`` behind;
6. the CIFAR-10 refusal says where the files go (MobiDFL never downloads).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from mobidfl import Exchange, ExchangeContext, ExchangePolicy, register_policy
from mobidfl.analysis.cli import main
from mobidfl.errors import DatasetUnavailable
from mobidfl.model.checkpoint import load, save_atomic
from mobidfl.model.config import Config, InertSettingWarning
from mobidfl.model.world import MobiDFLModel
from mobidfl.plugins import POLICIES

ROOT = Path(__file__).resolve().parents[2]
TINY = ["vehicles=4", "pedestrians=0", "sensors=0", "uavs=0", "local_steps=1",
        "test_size=50", "dataset=mnist5k"]
TINY_ARGS = [part for item in TINY for part in ("--set", item)]
BARE_ARGS = ["--set", "learning=false", "--set", "steps=1", "--set", "vehicles=2",
             "--set", "pedestrians=0", "--set", "sensors=0", "--set", "uavs=0"]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- 1. an older checkpoint ----------------------------------------------------------------------
def test_a_checkpoint_of_an_older_version_is_refused_before_any_step_and_kept(
    tmp_path, monkeypatch, capsys
):
    # Prepare: a run stopped after its step-1 checkpoint (of 3), then its state put in the
    # form commit 0ca62c9 wrote (reproduced with that commit: model.csv had no acc_p10 and a
    # `degree_mean` column in place of the per-policy ones)
    out = tmp_path / "run"
    step = MobiDFLModel.step

    def stop_after_one(self):
        if self.steps >= 2:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(MobiDFLModel, "step", stop_after_one)
    assert main(["run", "--out", str(out), "--checkpoint-every", "1", "--quiet",
                 "--set", "steps=3", *TINY_ARGS]) == 130
    state_path = out / "checkpoint" / "state.pt"
    state = load(state_path)
    assert state["steps"] == 1 and "acc_p10" in state["model_vars"]
    rows = len(state["model_vars"]["acc_mean"])
    del state["model_vars"]["acc_p10"]
    state["model_vars"]["degree_mean"] = [0.0] * rows
    save_atomic(state, state_path)
    before = state_path.read_bytes()
    ran = []

    def counted(self):
        ran.append(self.steps)
        return step(self)

    monkeypatch.setattr(MobiDFLModel, "step", counted)
    capsys.readouterr()

    # Execute
    code = main(["run", "--resume", str(out), "--quiet"])

    # Assert: refused in one line naming the file and the columns, before any step; the
    # checkpoint is as it was, nothing else written
    line = _one_line(capsys.readouterr().err)
    assert code == 2
    assert str(state_path) in line and "acc_p10" in line and "degree_mean" in line
    assert ran == []
    assert state_path.read_bytes() == before
    assert not (out / "model.csv").exists()


OLD_CHECKPOINT = Path(__file__).parents[1] / "fixtures" / "checkpoint_0ca62c9"
"""A real checkpoint of commit 0ca62c9 (``mobidfl run --checkpoint-every 1`` of a world without
learning: vehicles=4 pedestrians=2 sensors=0 uavs=0 steps=4, stopped after step 1)."""


def test_a_checkpoint_of_an_older_version_with_the_same_tables_resumes_to_them(tmp_path):
    # Prepare: the old run's folder, and the same run made in one go by this version
    out = tmp_path / "old"
    shutil.copytree(OLD_CHECKPOINT, out)
    straight = tmp_path / "straight"
    world = ["--set", "vehicles=4", "--set", "pedestrians=2", "--set", "sensors=0",
             "--set", "uavs=0", "--set", "steps=4", "--set", "learning=false"]
    assert main(["run", "--out", str(straight), "--quiet", *world]) == 0

    # Execute
    code = main(["run", "--resume", str(out), "--quiet"])

    # Assert: the tables of the uninterrupted run
    assert code == 0
    assert (out / "model.csv").read_bytes() == (straight / "model.csv").read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "agents.parquet"),
                                  pd.read_parquet(straight / "agents.parquet"))


# --- 2. a plug-in policy that raises -------------------------------------------------------------
@pytest.fixture
def boom_policy():
    @register_policy
    class Boom(ExchangePolicy):
        name = "boom_policy"

        def exchange(self, ctx: ExchangeContext) -> Exchange:
            raise RuntimeError("no exchange today")

    yield Boom
    POLICIES.unregister("boom_policy")


@pytest.mark.parametrize("existing", [False, True])
def test_a_plugin_policy_that_raises_is_named_in_one_line_and_nothing_is_half_written(
    boom_policy, tmp_path, capsys, existing
):
    # Prepare: a new --out, or an empty one the user made
    out = tmp_path / "run"
    if existing:
        out.mkdir()

    # Execute
    code = main(["run", "--out", str(out), "--checkpoint-every", "1", "--quiet",
                 "--set", "policy=boom_policy", "--set", "steps=2", *TINY_ARGS])

    # Assert: one line naming the policy, its class's module and the exception; no
    # checkpoint/ without a state, no model.csv, the user's folder kept as it was
    line = _one_line(capsys.readouterr().err)
    assert code == 1
    assert "policy 'boom_policy'" in line and f"({boom_policy.__module__}." in line
    assert f"{boom_policy.__qualname__})" in line
    assert "RuntimeError: no exchange today" in line and "nothing was written" in line
    assert out.is_dir() == existing
    assert not existing or list(out.iterdir()) == []


# --- 3. an installed plug-in that fails to import ------------------------------------------------
def _broken_distribution(site: Path) -> None:
    info = site / "mobidfl_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mobidfl-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[mobidfl.plugins]\nbroken = mobidfl_broken_plugin\n")
    (site / "mobidfl_broken_plugin.py").write_text('raise RuntimeError("boom at import")\n')


def _cli(tmp_path: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(ROOT),
                                                     env.get("PYTHONPATH")]))
    env.pop("MOBIDFL_COMMAND_PID", None)
    return subprocess.run([sys.executable, "-m", "mobidfl.analysis.cli", *args], check=False,
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_broken_entry_point_is_warned_once_and_refused_only_where_named(tmp_path):
    # Prepare: a distribution on the path whose mobidfl.plugins entry point raises on import
    site = tmp_path / "site"
    _broken_distribution(site)

    # Execute: a run that does not use it, and one naming a policy it would have registered
    fine = _cli(tmp_path, site, "run", "--out", str(tmp_path / "a"), "--quiet", *BARE_ARGS)
    named = _cli(tmp_path, site, "run", "--out", str(tmp_path / "b"), "--quiet", *BARE_ARGS,
                 "--set", "policy=lazy_dpsgd")

    # Assert: the first runs, with one warning naming the entry point
    assert fine.returncode == 0, fine.stderr
    assert (tmp_path / "a" / "model.csv").exists()
    warned = [line for line in fine.stderr.splitlines() if "entry point" in line]
    assert len(warned) == 1 and "Traceback" not in fine.stderr
    assert "broken = mobidfl_broken_plugin" in warned[0] and "mobidfl-broken" in warned[0]
    assert "RuntimeError: boom at import" in warned[0]
    # Assert: the second is refused in one line naming the entry point
    assert named.returncode == 2, named.stderr
    assert "Traceback" not in named.stderr
    error = [line for line in named.stderr.splitlines() if line.startswith("mobidfl: error:")]
    assert len(error) == 1 and "setting 'policy' = 'lazy_dpsgd'" in error[0]
    assert "entry point broken = mobidfl_broken_plugin" in error[0]
    assert not (tmp_path / "b").exists()


# --- 4. core settings that do nothing ------------------------------------------------------------
def _inert(settings: dict) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_settings({"learning": True, "dataset": "mnist5k", **settings})
    return [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]


@pytest.mark.parametrize(("settings", "name", "read"), [
    ({"dirichlet_alpha": 0.3, "partition": "shards"}, "dirichlet_alpha",
     {"partition": "dirichlet"}),
    ({"lr_plateau_factor": 0.5, "lr_plateau_patience": 0}, "lr_plateau_factor",
     {"lr_plateau_patience": 3}),
    ({"ray_address": "auto", "worker_backend": "processes"}, "ray_address",
     {"worker_backend": "ray"}),
    ({"area_within": "shards", "partition": "iid"}, "area_within", {"partition": "area"}),
])
def test_a_core_setting_that_does_nothing_here_is_warned_in_one_line(settings, name, read):
    # Execute
    shown = _inert(settings)
    where_read = _inert({**settings, **read})
    # Assert: one line naming it and what would read it; nothing where it is read
    assert len(shown) == 1 and "\n" not in shown[0], shown
    assert shown[0].startswith(f"{name}=") and "has no effect" in shown[0]
    assert where_read == []


def test_core_settings_at_their_defaults_or_without_learning_reasoned():
    # a full config.toml names every setting at its value: nothing to warn
    assert _inert({"dirichlet_alpha": 0.5, "lr_plateau_factor": 0.1}) == []
    # a world that does not learn reads no partition
    shown = _inert({"learning": False, "partition": "dirichlet", "dirichlet_alpha": 0.3})
    assert len(shown) == 1 and "learning = true" in shown[0]


def test_a_run_warns_an_inert_setting_once(tmp_path):
    # Execute
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["run", "--out", str(tmp_path / "run"), "--quiet", *BARE_ARGS,
                     "--set", "dirichlet_alpha=0.3", "--set", "psfl.sigma=3"])
    shown = [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]
    # Assert: each line once (it was twice per run)
    assert code == 0
    assert sorted(m.partition("=")[0] for m in shown) == ["dirichlet_alpha", "psfl.sigma"]


def test_one_command_warns_each_line_once_and_its_workers_none():
    from mobidfl.model.config import one_report

    # Execute: one command resolving the same config many times (a reproduction: per
    # variant, per run), and a worker of it (it sees the command's process id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with one_report():
            for _ in range(5):
                Config.from_settings({"dirichlet_alpha": 0.3, "learning": False})
            worker = subprocess.run(
                [sys.executable, "-c", "from mobidfl.model.config import Config; "
                 "Config.from_settings({'dirichlet_alpha': 0.3, 'learning': False})"],
                check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                capture_output=True, text=True, timeout=300,
            )
        after = _inert({"dirichlet_alpha": 0.3, "learning": False})
    shown = [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]
    # Assert: once in the command, not in its worker; outside a command as before
    assert len(shown) == 1 and len(after) == 1
    assert worker.returncode == 0, worker.stderr
    assert "InertSettingWarning" not in worker.stderr
    assert "MOBIDFL_COMMAND_PID" not in os.environ


# --- 5. reproduce refusals -----------------------------------------------------------------------
@pytest.mark.parametrize(("args", "named"), [
    (["mobility_000", "--set", "seed=5"], "setting 'seed' = 5"),
    (["dam_001", "--readings", "--set", "optimizer_state=reset"], "'--set' = 'optimizer_state'"),
])
def test_a_reproduce_refusal_names_the_setting_as_typed_and_makes_no_out(
    tmp_path, capsys, args, named
):
    # Execute
    out = tmp_path / "repro"
    code = main(["reproduce", *args, "--scale", "ci", "--seeds", "1", "--out", str(out),
                 "--quiet"])
    # Assert
    line = _one_line(capsys.readouterr().err)
    assert code == 2
    assert named in line and "base." not in line
    assert not out.exists()


# --- 6. CIFAR-10 ---------------------------------------------------------------------------------
def test_the_cifar10_refusal_says_where_the_files_go_not_to_download(tmp_path, capsys):
    # Prepare: the folder is there, its batches are not (then one of them is not CIFAR-10)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()

    # Execute
    code = main(["run", "--out", str(tmp_path / "run"), "--quiet", "--set", "dataset=cifar10",
                 "--set", f"data_root={tmp_path}", *BARE_ARGS[2:]])
    line = _one_line(capsys.readouterr().err)
    for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                 "data_batch_5", "test_batch", "batches.meta"):
        (folder / name).write_bytes(b"not a batch")
    from mobidfl.model.learning.data import load_dataset

    with pytest.raises(DatasetUnavailable) as damaged:
        load_dataset("cifar10", root=tmp_path, test_size=10, seed=0)

    # Assert: exit 2, the files and where they go; never torchvision's download advice
    assert code == 2
    assert "download=True" not in line and "does not download" in line
    assert "data_batch_1" in line and f"{folder}/" in line
    message = str(damaged.value)
    assert "download=True" not in message and "md5" in message and str(folder) in message
