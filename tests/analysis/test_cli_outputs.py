"""`mobidfl run` writes the documented outputs; GIS layers open in geopandas, GDAL, movingpandas."""

from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest

from mobidfl.analysis.cli import main

SMALL = [
    "--set", "map=nyc_uws", "--set", "policy=dpsgd",
    "--set", "vehicles=12", "--set", "pedestrians=4", "--set", "sensors=3", "--set", "uavs=2",
    "--set", "steps=3", "--set", "local_steps=2", "--set", "test_size=200", "--quiet",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(["run", "--out", str(out), "--geojson", *SMALL]) == 0
    return out


def test_run_writes_every_documented_file(run_dir):
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.toml", "model.csv", "agents.parquet", "summary.png",
            "trajectories.gpkg", "points.geojson", "tracks.geojson"} <= names
    model_csv = pd.read_csv(run_dir / "model.csv")
    assert list(model_csv["step"]) == [0, 1, 2, 3]
    for column in ("acc_mean", "acc_std", "acc_min", "acc_vehicle", "acc_uav", "loss_mean",
                   "consensus", "contacts"):
        assert column in model_csv
    agents = pd.read_parquet(run_dir / "agents.parquet")
    for column in ("step", "agent_id", "kind", "x_m", "y_m", "lon", "lat", "neighbours"):
        assert column in agents
    assert len(agents) == 4 * 21
    assert agents["lat"].between(40.78, 40.80).all()  # Upper West Side
    assert agents["lon"].between(-73.98, -73.96).all()


def test_geopackage_layers_open_in_geopandas_and_movingpandas(run_dir):
    import geopandas as gpd
    import movingpandas as mpd

    # Execute
    layers = {name: gpd.read_file(run_dir / "trajectories.gpkg", layer=name)
              for name in ("points", "tracks", "streets", "cells")}
    collection = mpd.TrajectoryCollection(layers["points"], traj_id_col="agent_id", t="time")
    # Assert
    assert all(frame.crs.to_epsg() == 4326 for frame in layers.values())
    assert len(layers["tracks"]) == 21
    assert len(layers["streets"]) > 100
    assert len(collection.trajectories) == 21
    durations = {t.get_duration().total_seconds() for t in collection.trajectories}
    assert durations == {3 * 120.0}


def test_geopackage_opens_in_gdal_ogrinfo(run_dir):
    ogrinfo = shutil.which("ogrinfo")
    assert ogrinfo, "ogrinfo missing: `make test` installs Debian gdal-bin (.ci/browser_deps.sh)"
    listing = subprocess.run(
        [ogrinfo, "-ro", "-so", str(run_dir / "trajectories.gpkg")],
        capture_output=True, text=True, check=True,
    ).stdout
    for layer in ("points (Point)", "tracks (Line String)", "streets (Line String)",
                  "cells (Polygon)"):
        assert layer in listing
    summary = subprocess.run(
        [ogrinfo, "-ro", "-so", str(run_dir / "trajectories.gpkg"), "points"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "Feature Count: 84" in summary


def test_same_seed_same_agents_different_seed_different(tmp_path):
    outs = {}
    for label, seed in (("a", 5), ("b", 5), ("c", 6)):
        out = tmp_path / label
        args = ["run", "--out", str(out), "--set", f"seed={seed}", "--set", "learning=false",
                "--set", "vehicles=15", "--set", "steps=4", "--quiet"]
        assert main(args) == 0
        outs[label] = pd.read_parquet(out / "agents.parquet")
    pd.testing.assert_frame_equal(outs["a"], outs["b"])
    assert not outs["a"][["x_m", "y_m"]].equals(outs["c"][["x_m", "y_m"]])


@pytest.mark.parametrize(
    "assignment, fragment",
    [
        ("vehicles=-1", "setting 'vehicles' = -1"),
        ("map=atlantis", "setting 'map' = 'atlantis'"),
        ("sensors=500", "setting 'sensors' = 500"),
        ("turn_right=0.3", "sum to 1"),
    ],
)
def test_bad_input_fails_before_anything_is_written(tmp_path, capsys, assignment, fragment):
    out = tmp_path / "never"
    code = main(["run", "--out", str(out), "--set", "map=nyc_uws", "--set", assignment,
                 "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fragment in err and len(err.splitlines()) == 1
    assert not out.exists()
    assert not list(tmp_path.glob(".mobidfl-*"))


def test_run_says_before_step_1_what_runs_and_what_is_not_the_presets(tmp_path, capsys):
    # Prepare: de Heredia's preset (CIFAR-10 is not offline) with three settings changed
    argv = ["run", "--out", str(tmp_path / "out"), "--preset", "mobility_000",
            "--set", "steps=1", "--set", "model=mlp", "--set", "test_size=20"]
    # Execute
    code = main(argv)
    first = capsys.readouterr().err.splitlines()[0]
    # Assert: one line naming the preset, the world, the stand-in dataset and the changes
    assert code == 0
    assert first.startswith("mobidfl: preset mobility_000 (de Heredia")
    assert "48 pedestrians" in first and "1 step of" in first
    assert "mlp on mnist5k (in place of cifar10: not found under data_root)" in first
    assert first.endswith("not the preset's: steps=1, model=mlp, test_size=20")
