"""`mobidfl sweep`: grid x seeds through mesa.batch_run, one file per finished run, resume, Ray."""

from __future__ import annotations

import multiprocessing
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis.cli import main
from mobidfl.analysis.report import make_report
from mobidfl.analysis.sweep import Sweep, load_runs, read_manifest, run_path, run_sweep
from mobidfl.errors import ConfigError
from mobidfl.maps.sources import _package_file
from mobidfl.model.config import Config
from mobidfl.model.world import MobiDFLModel

BASE = """
[base]
map = "nyc_uws"
vehicles = 6
pedestrians = 0
sensors = 0
uavs = 0
policy = "dpsgd"
steps = 3
local_steps = 1
test_size = 100
[base.vehicle]
mobility = "random_walk"
"""
SWEEP = (
    "replicates = 2\n"
    + BASE
    + """
[grid]
map = ["nyc_uws", "{broken}"]
hm_fraction = [0.0, 0.5]
"""
)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """8 runs on 2 worker processes: 4 succeed, 4 raise (their map file is cut short: it
    exists and can be read, so the sweep starts; a missing one is refused up front)."""
    folder = tmp_path_factory.mktemp("sweep")
    whole = Path(_package_file("momepy", "datasets/nyc_graph.graphml")).read_bytes()
    (folder / "broken.graphml").write_bytes(whole[: len(whole) // 2])
    (folder / "sweep.toml").write_text(SWEEP.replace("{broken}", str(folder / "broken.graphml")))
    out = folder / "out"
    code = main(["sweep", str(folder / "sweep.toml"), "--out", str(out), "--processes", "2",
                 "--quiet"])
    return code, out


def test_runs_are_grid_times_seeds_with_distinct_ids():
    # Execute
    sweep = Sweep.from_dict({"replicates": 3, "base": {"seed": 7, "steps": 4},
                             "grid": {"vehicles": [4, 8], "policy": ["dpsgd", "local"]}})
    runs = sweep.runs()
    # Assert
    assert sweep.seeds == (7, 8, 9)
    assert len(runs) == 12 and len({r.run_id for r in runs}) == 12
    assert [r.params for r in runs[:4]] == [
        {"vehicles": 4, "policy": "dpsgd"}, {"vehicles": 4, "policy": "local"},
        {"vehicles": 8, "policy": "dpsgd"}, {"vehicles": 8, "policy": "local"},
    ]
    assert [r.seed for r in runs[::4]] == [7, 8, 9]
    assert all(r.steps == 4 and "seed" not in r.settings for r in runs)


def test_plugin_settings_sweep_by_namespace_or_old_name_once_each():
    # Execute
    sweep = Sweep.from_dict({"base": {"steps": 2, "psfl": {"loss": "mean"}},
                             "grid": {"random_walk.hm_fraction": [0.0, 0.5],
                                      "mobility_alpha": [0.0, 0.4]}})
    runs = sweep.runs()
    config = Config.from_settings(runs[-1].settings, seed=runs[-1].seed)
    with pytest.raises(ConfigError, match="one entry for setting random_walk.hm_fraction"):
        Sweep.from_dict({"grid": {"hm_fraction": [0.1, 0.2],
                                  "random_walk.hm_fraction": [0.3, 0.4]}})
    # Assert: names kept as written (manifest columns), values reach the plug-ins' settings
    assert sweep.base == {"steps": 2, "psfl.loss": "mean"}
    assert runs[-1].params == {"random_walk.hm_fraction": 0.5, "mobility_alpha": 0.4}
    assert (config.random_walk.hm_fraction, config.mobility_aware.alpha) == (0.5, 0.4)
    assert config.psfl.loss == "mean" and len(runs) == 4


def test_every_run_is_recorded_and_a_failing_run_does_not_stop_the_others(local_sweep):
    # Prepare
    code, out = local_sweep
    # Execute
    manifest = read_manifest(out)
    # Assert
    assert code == 1  # not every run succeeded
    assert len(manifest) == 8
    assert set(manifest.columns) >= {"run_id", "seed", "map", "hm_fraction", "status", "wall_s",
                                     "error"}
    ok = manifest[manifest["status"] == "ok"]
    failed = manifest[manifest["status"] == "error"]
    assert sorted(ok["map"].unique()) == ["nyc_uws"] and len(ok) == 4
    assert failed["map"].str.endswith("broken.graphml").all() and len(failed) == 4
    assert failed["error"].str.contains("broken.graphml' is not allowed").all()
    assert failed["error"].str.contains("cut short").all()
    assert (ok["wall_s"] > 0).all() and (ok["error"] == "").all()
    assert all(run_path(out, i).exists() for i in ok["run_id"])
    assert not any(run_path(out, i).exists() for i in failed["run_id"])
    assert (ok["backend"] == "local").all()
    assert (out / "runs" / f"{failed['run_id'].iloc[0]}.error.txt").read_text().startswith(
        "Traceback"
    )


def test_report_of_the_sweep_lists_its_failed_runs(local_sweep, tmp_path):
    # Prepare
    _, out = local_sweep
    # Execute
    written = make_report(out, out=tmp_path / "report")
    # Assert
    text = (tmp_path / "report" / "report.md").read_text()
    failed = read_manifest(out).query("status == 'error'")["run_id"]
    assert "4 ok, 4 error" in text and "## Failed runs" in text
    assert all(run_id in text for run_id in failed)
    assert {p.name for p in written} >= {"accuracy.png", "final_accuracy_vs_p.png", "report.md"}


def test_each_run_equals_the_model_run_directly_with_its_seed(local_sweep):
    # Prepare
    _, out = local_sweep
    runs = load_runs(out)
    settings = dict(map="nyc_uws", vehicles=6, pedestrians=0, sensors=0, uavs=0,
                    policy="dpsgd", steps=3, local_steps=1, test_size=100,
                    **{"vehicle.mobility": "random_walk"})
    finals = {}
    for (seed, p), table in runs.groupby(["seed", "hm_fraction"]):
        # Execute
        direct = MobiDFLModel(seed=seed, hm_fraction=p, **settings).run().model_table()
        # Assert
        assert list(table["step"]) == [0, 1, 2, 3]
        pd.testing.assert_frame_equal(table[direct.columns].reset_index(drop=True), direct)
        finals[seed, p] = table["acc_mean"].iloc[-1]
    assert finals[0, 0.0] != finals[1, 0.0]  # replicates differ
    assert {"hm_lm_gap", "acc_hm"} <= set(runs.columns)  # p = 0.5 has both classes


def test_resume_reruns_only_unfinished_runs(local_sweep, tmp_path, capfd):
    # Prepare: copy the finished sweep and pretend it was killed: one run never finished,
    # one finished its Parquet file but not its manifest row.
    _, finished = local_sweep
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    manifest = read_manifest(out)
    ok_ids = list(manifest.loc[manifest["status"] == "ok", "run_id"])
    lost, unrecorded = ok_ids[0], ok_ids[1]
    before = pd.read_parquet(run_path(out, lost))
    run_path(out, lost).unlink()
    manifest.loc[manifest["run_id"].isin([lost, unrecorded]), "status"] = "pending"
    manifest.to_csv(out / "manifest.csv", index=False)
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.parquet")}
    # Execute
    code = main(["sweep", "--resume", "--out", str(out), "--processes", "1"])
    # Assert
    after = read_manifest(out)
    assert code == 1
    assert list(after["status"]) == list(read_manifest(finished)["status"])
    pd.testing.assert_frame_equal(pd.read_parquet(run_path(out, lost)), before)
    for name, stamp in stamps.items():  # finished runs are not run again
        assert (out / "runs" / name).stat().st_mtime_ns == stamp
    unchanged = after["run_id"] != lost
    assert list(after.loc[unchanged, "finished_at"]) == list(
        read_manifest(finished).loc[unchanged, "finished_at"]
    )
    err = capfd.readouterr().err
    assert "7/8" in err and "8/8" in err  # progress bar over runs, 7 already done
    # Execute: runs that raised are skipped by --resume, re-run with --retry-errors
    after.loc[after["status"] == "error", "error"] = "stale"
    after.to_csv(out / "manifest.csv", index=False)
    method = multiprocessing.get_start_method(allow_none=True)
    assert main(["sweep", "--resume", "--out", str(out), "--processes", "0", "--quiet"]) == 1
    assert (read_manifest(out).query("status == 'error'")["error"] == "stale").all()
    assert main(["sweep", "--resume", "--retry-errors", "--out", str(out), "--processes", "0",
                 "--quiet"]) == 1
    errors = read_manifest(out).query("status == 'error'")["error"]
    assert len(errors) == 4 and errors.str.contains("broken.graphml").all()
    assert multiprocessing.get_start_method(allow_none=True) == method  # Mesa forces spawn


@pytest.mark.ray
def test_ray_backend_gives_the_same_tables_as_local_processes(local_sweep, tmp_path):
    ray = pytest.importorskip("ray")
    # Prepare
    _, local_out = local_sweep
    path = tmp_path / "ray.toml"
    path.write_text("replicates = 2\n" + BASE + "[grid]\nhm_fraction = [0.0, 0.5]\n")
    sweep = Sweep.from_toml(path)
    from mobidfl.model.ray_local import init_ray

    init_ray(ray, address=None, num_cpus=2, log_to_driver=False)  # on 127.0.0.1 only
    try:
        # Execute
        # 2 CPUs per run: one run at a time, so one worker imports torch (keeps the test short)
        manifest = run_sweep(sweep, tmp_path / "ray", backend="ray", cpus_per_run=2,
                             progress=False)
    finally:
        ray.shutdown()
    # Assert
    assert list(manifest["status"]) == ["ok"] * 4
    assert (manifest["backend"] == "ray").all()
    by_ray = load_runs(tmp_path / "ray")
    by_local = load_runs(local_out)
    metrics = [c for c in by_local.columns if c not in ("run_id", "point", "map")]
    key = ["seed", "hm_fraction", "step"]
    pd.testing.assert_frame_equal(
        by_ray[metrics].sort_values(key).reset_index(drop=True),
        by_local[metrics].sort_values(key).reset_index(drop=True),
    )


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[grid]\nwarp_speed = [1, 2]", "setting 'warp_speed'"),
        ("[base]\nvehicle.colour = 'red'", "setting 'vehicle.colour'"),
        ("[grid]\nhm_fraction = []", "setting 'grid.hm_fraction' = []"),
        ("[grid]\nhm_fraction = [0.1, 1.5]", "setting 'hm_fraction' = 1.5"),
        ("[grid]\nvehicles = [4, 'many']", "setting 'vehicles' = 'many'"),
        ("[grid]\nturn_straight = [0.5, 0.9]", "setting 'turn_straight+turn_left+turn_right'"),
        ("[grid]\nseed = [1, 2]", "setting 'grid.seed'"),
        ("replicate = 3", "setting 'replicate'"),
        ("replicates = 0", "setting 'replicates' = 0"),
        ("[base]\nvehicles = -3", "setting 'vehicles' = -3"),
    ],
)
def test_bad_sweep_file_is_rejected_before_any_run(tmp_path, capsys, text, fragment):
    # Prepare
    path = tmp_path / "bad.toml"
    path.write_text(textwrap.dedent(text) + "\n")
    out = tmp_path / "never"
    # Execute
    code = main(["sweep", str(path), "--out", str(out), "--processes", "0", "--quiet"])
    # Assert
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fragment in err and len(err.splitlines()) == 1
    assert not out.exists()
