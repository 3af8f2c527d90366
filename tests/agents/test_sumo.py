"""SUMO-driven vehicles (issue 14): on the map's streets, same seed same run, fixed ids,
exact resume, trace replay with the same contacts, one-line errors."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.cli import main
from mobidfl.errors import ConfigError
from mobidfl.maps import sumo_net
from mobidfl.model.checkpoint import load, save_atomic
from mobidfl.model.world import MobiDFLModel


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("map_cache"))


def _settings(cache: str, **extra) -> dict:
    return {
        "map": "nyc_uws",
        "map_cache": cache,
        "vehicles": 16,
        "pedestrians": 0,
        "sensors": 0,
        "uavs": 0,
        "steps": 4,
        "step_s": 120.0,
        "radius_m": 100.0,
        "contact": "during",
        "vehicle.mobility": "sumo",
        "vehicle.speed": 13.89,
        "sumo_step_length": 1.0,
        "sumo_warmup_s": 60.0,
        "sumo_fringe_factor": 1.0,
        "learning": False,
        "record_every": 1,
        "seed": 5,
        **extra,
    }


def test_sumo_cars_stay_on_streets_keep_ids_and_repeat_with_the_seed(cache):
    # Prepare / Execute: two runs with the same seed, one with another seed
    first = MobiDFLModel(**_settings(cache)).run()
    table = first.agent_table()
    mobility = first.groups[0][2]
    again = MobiDFLModel(**_settings(cache)).run().agent_table()
    other = MobiDFLModel(**_settings(cache, seed=6)).run().agent_table()
    # Assert: every position within 5 m of a drive street of the map (junction interiors)
    xy = table[["x_m", "y_m"]].to_numpy()
    assert first.world_map.drive.distance_to_network(xy).max() < 5.0
    # Assert: 16 agents every step (cars that arrived were re-inserted, not replaced)
    assert (table.groupby("step").agent_id.nunique() == 16).all()
    assert mobility.reinserted > 0
    assert set(mobility.trip_of.tolist()) <= set(range(len(mobility.destination)))
    # Assert: they move (median displacement per 120 s step well above 0)
    moved = table.sort_values(["agent_id", "step"]).groupby("agent_id")[["x_m", "y_m"]].diff()
    assert np.nanmedian(np.hypot(moved.x_m, moved.y_m)) > 50.0
    # Assert: same seed -> identical agents table; another seed -> other positions
    pd.testing.assert_frame_equal(table, again)
    assert not np.allclose(xy, other[["x_m", "y_m"]].to_numpy())


def test_any_map_converts_grid_and_network_is_cached(cache):
    # Execute
    model = MobiDFLModel(**_settings(cache, map="grid:4x5", vehicles=6, steps=2)).run()
    net = model.groups[0][2].net_file
    # Assert: cached by content under map_cache/sumo, positions on the grid's streets
    assert net.parent.name == "sumo" and str(net).startswith(cache)
    assert len(sumo_net.network_edges(net)) == model.world_map.drive.n_edges
    xy = model.agent_table()[["x_m", "y_m"]].to_numpy()
    assert model.world_map.drive.distance_to_network(xy).max() < 5.0


def test_resumed_sumo_run_gives_the_same_outputs(cache, tmp_path):
    # Prepare: learning on, Cached-DFL, trace kept
    settings = _settings(
        cache, vehicles=8, steps=4, learning=True, dataset="digits", policy="cached_lru",
        local_steps=1, test_size=50, sumo_fcd=True,
    )
    straight = MobiDFLModel(**settings).run()
    # Execute: 2 steps, checkpoint, a new model loads it and finishes
    first = MobiDFLModel(**settings)
    first.run(steps=2)
    save_atomic(first.state_dict(), tmp_path / "state.pt")
    resumed = MobiDFLModel(**settings)
    resumed.load_state_dict(load(tmp_path / "state.pt"))
    resumed.run()
    # Assert
    pd.testing.assert_frame_equal(resumed.model_table(), straight.model_table())
    pd.testing.assert_frame_equal(resumed.agent_table(), straight.agent_table())
    pd.testing.assert_frame_equal(
        resumed.groups[0][2].trace_table(), straight.groups[0][2].trace_table()
    )


def test_trace_written_by_a_run_replays_with_the_same_contacts(cache, tmp_path):
    # Prepare: a SUMO-driven CLI run that writes its trace into --out
    common = ["map=nyc_uws", f"map_cache={cache}", "vehicles=14", "pedestrians=0", "sensors=0",
              "uavs=0", "vehicle.speed=13.89", "steps=4", "seed=2", "learning=false",
              "contact=during", "radius_m=100", "step_s=120", "record_every=1"]
    args = [p for item in common for p in ("--set", item)]
    sumo_out, replay_out = tmp_path / "sumo", tmp_path / "replay"
    assert main(["run", "--out", str(sumo_out), "--quiet", *args,
                 "--set", "vehicle.mobility=sumo", "--set", "sumo_fcd=true"]) == 0
    trace = sumo_out / "trace.csv"
    assert trace.exists()
    # Execute: replay it
    assert main(["run", "--out", str(replay_out), "--quiet", *args,
                 "--set", "vehicle.mobility=trace", "--set", f"trace.file={trace}"]) == 0
    # Assert: same contacts per step (and same positions)
    a, b = pd.read_csv(sumo_out / "model.csv"), pd.read_csv(replay_out / "model.csv")
    assert a.contacts.sum() > 0
    assert a.contacts.tolist() == b.contacts.tolist()
    assert a.distinct_neighbours_mean.tolist() == b.distinct_neighbours_mean.tolist()
    pa, pb = pd.read_parquet(sumo_out / "agents.parquet"), pd.read_parquet(
        replay_out / "agents.parquet"
    )
    np.testing.assert_array_equal(pa[["x_m", "y_m"]].to_numpy(), pb[["x_m", "y_m"]].to_numpy())


def test_libsumo_singleton_newer_model_takes_over(cache):
    # Prepare
    older = MobiDFLModel(**_settings(cache, vehicles=4, steps=2))
    newer = MobiDFLModel(**_settings(cache, vehicles=4, steps=2))
    # Execute / Assert: the newer one runs, the older one refuses with a clear error
    newer.run()
    with pytest.raises(RuntimeError, match="one SUMO simulation per process"):
        older.step()


def test_sumo_errors_are_one_line(cache, tmp_path, monkeypatch, nyc):
    # pedestrians are not driven by SUMO here
    with pytest.raises(ConfigError, match="pedestrian.mobility"):
        MobiDFLModel(**_settings(cache, vehicles=0, pedestrians=3, **{
            "pedestrian.mobility": "sumo", "vehicle.mobility": "manhattan"}))
    # a SUMO installation without netconvert
    with pytest.raises(ConfigError, match="netconvert"):
        sumo_net.SumoTools(home=tmp_path, version="0").binary("netconvert")
    # SUMO not installed at all
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(ConfigError, match="eclipse-sumo") as err:
        sumo_net.sumo_tools()
    assert "\n" not in str(err.value)
    monkeypatch.undo()
    # a network netconvert cannot convert (coordinates that are not numbers)
    broken = nyc.drive
    broken = type(broken)(**{**broken.__dict__, "node_xy": broken.node_xy * np.nan})
    with pytest.raises(ConfigError, match="netconvert can convert") as err:
        sumo_net.build_network(broken, speed_mps=13.89, cache_dir=tmp_path, map_name="bad")
    assert "\n" not in str(err.value)


def _grid_osm(rows: int = 4, cols: int = 4) -> str:
    """A small OSM XML extract: a street grid, every other avenue one-way."""
    nodes, ways = [], []
    for r in range(rows):
        for c in range(cols):
            lat, lon = 40.78 + r * 0.0009, -73.97 + c * 0.0012
            nodes.append(f'<node id="{1 + r * cols + c}" lat="{lat:.7f}" lon="{lon:.7f}"/>')
    for r in range(rows):
        refs = "".join(f'<nd ref="{1 + r * cols + c}"/>' for c in range(cols))
        ways.append(f'<way id="{100 + r}">{refs}<tag k="highway" v="residential"/></way>')
    for c in range(cols):
        refs = "".join(f'<nd ref="{1 + r * cols + c}"/>' for r in range(rows))
        oneway = "yes" if c % 2 else "no"
        ways.append(
            f'<way id="{200 + c}">{refs}<tag k="highway" v="residential"/>'
            f'<tag k="oneway" v="{oneway}"/></way>'
        )
    body = "\n".join(nodes + ways)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6">\n{body}\n</osm>\n'


def test_cli_runs_sumo_on_an_osm_file(cache, tmp_path):
    # Prepare
    osm = tmp_path / "extract.osm"
    osm.write_text(_grid_osm())
    out = tmp_path / "out"
    settings = [f"map={osm}", f"map_cache={cache}", "vehicle.mobility=sumo", "vehicles=6",
                "pedestrians=0", "sensors=0", "uavs=0", "vehicle.speed=13.89", "steps=2",
                "learning=false", "seed=1"]
    # Execute
    code = main(["run", "--out", str(out), "--quiet", *[p for s in settings for p in ("--set", s)]])
    # Assert: the run is written and the cars are on the extract's streets
    assert code == 0
    agents = pd.read_parquet(out / "agents.parquet")
    world = MobiDFLModel(
        map=str(osm), map_cache=cache, vehicles=1, pedestrians=0, sensors=0, uavs=0,
        learning=False, **{"vehicle.mobility": "manhattan"},
    ).world_map
    assert world.drive.distance_to_network(agents[["x_m", "y_m"]].to_numpy()).max() < 5.0
    assert agents.lat.between(40.779, 40.784).all()
