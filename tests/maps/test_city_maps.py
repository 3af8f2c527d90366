"""City-scale maps: vectorised street arrays, new map formats, the array cache, density."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from mobidfl.maps.network import StreetNetwork
from mobidfl.maps.sources import grid_table, load_edges, load_graph, manhattan_grid
from mobidfl.maps.world import WorldMap, street_networks

PROBS = (0.5, 0.25, 0.25)


def _edges(net) -> list[tuple[str, str, float]]:
    ids = net.node_ids
    return sorted(
        (str(ids[u]), str(ids[v]), round(float(length), 6))
        for u, v, length in zip(net.edge_u, net.edge_v, net.edge_len, strict=True)
    )


def _turns(net, table) -> list[tuple]:
    ids = net.node_ids
    rows = []
    for e in range(net.n_edges):
        for k in range(table.ptr[e], table.ptr[e + 1]):
            f = table.nxt[k]
            rows.append((str(ids[net.edge_u[e]]), str(ids[net.edge_v[e]]),
                         round(float(net.edge_len[e]), 4), str(ids[net.edge_v[f]]),
                         round(float(net.edge_len[f]), 4), round(float(table.prob[k]), 9),
                         int(table.turn[k])))
    return sorted(rows)


@pytest.mark.parametrize("spec", ["nyc_uws", "helsinki_drive"])
@pytest.mark.parametrize("directed", [True, False])
def test_vectorised_network_equals_the_v01_per_edge_build(spec, directed):
    from tests.legacy_network import StreetNetwork as Legacy  # v0.1's per-edge code, the oracle

    # Prepare
    graph = load_graph(spec)
    allowed_fraction = 0.5
    # Execute
    old = Legacy.from_graph(graph, directed=directed)
    new = StreetNetwork.from_graph(graph, directed=directed)
    inside = set(map(str, new.node_ids[: int(len(new.node_ids) * allowed_fraction)]))
    new_allowed = np.array([str(i) in inside for i in new.node_ids])
    old_allowed = np.array([str(i) in inside for i in old.node_ids])
    # Assert: same edges, lengths, and Manhattan turn distributions (also area-restricted)
    assert _edges(new) == _edges(old)
    assert _turns(new, new.turn_table(PROBS)) == _turns(old, old.turn_table(PROBS))
    assert _turns(new, new.turn_table(PROBS, allowed_nodes=new_allowed)) == _turns(
        old, old.turn_table(PROBS, allowed_nodes=old_allowed)
    )


def _segments_csv(path: Path, rows: list[str], header: str = "StartLat,StartLong,EndLat,EndLong"):
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def _csv_grid(path: Path) -> Path:
    """A 3 x 3 lattice of two-way segments in Manhattan, as in Cached-DFL's public data."""
    lat = [40.7800, 40.7809, 40.7818]  # ~100 m apart
    lon = [-73.9700, -73.9688, -73.9676]  # ~100 m apart
    rows = []
    for i in range(3):
        for j in range(2):
            rows.append(f"{lat[i]},{lon[j]},{lat[i]},{lon[j + 1]}")
            rows.append(f"{lat[j]},{lon[i]},{lat[j + 1]},{lon[i]}")
    return _segments_csv(path, rows)


def test_segment_csv_in_cached_dfl_format_becomes_a_projected_map(tmp_path):
    # Prepare
    path = _csv_grid(tmp_path / "segments.csv")
    # Execute
    drive, walk = street_networks(str(path), cache_dir=tmp_path / "cache")
    # Assert: 9 intersections joined at shared ends, 12 two-way segments of ~100 m in UTM 18N
    assert len(drive.node_xy) == 9
    assert drive.n_edges == 24
    assert "32618" in drive.crs
    assert np.all((drive.edge_len > 95) & (drive.edge_len < 105))


def test_segment_csv_runs_a_model(tmp_path):
    from mobidfl.model.world import MobiDFLModel

    # Prepare
    path = _csv_grid(tmp_path / "segments.csv")
    # Execute
    model = MobiDFLModel(map=str(path), map_cache=str(tmp_path / "cache"), vehicles=6,
                         pedestrians=0, sensors=0, uavs=0, learning=False, steps=2).run()
    # Assert: cars stay on the streets of the CSV
    assert model.steps == 2
    assert model.world_map.drive.distance_to_network(model.position).max() < 1e-6


@pytest.mark.parametrize(
    "rows, header, fragment",
    [
        (["40.78,-73.97,40.79"], "StartLat,StartLong,EndLat", "missing: EndLong"),
        (["40.78,abc,40.79,-73.97"], None, "numeric coordinates in every row (line 2)"),
        (["40.78,-73.97,40.79,-73.96", "95.0,-73.97,40.79,-73.96"], None,
         "latitudes in [-90, 90]"),
        ([], None, "at least one road segment"),
    ],
)
def test_bad_segment_csv_fails_with_one_line_naming_the_file(tmp_path, rows, header, fragment):
    # Prepare
    path = _segments_csv(tmp_path / "bad.csv", rows, header or "StartLat,StartLong,EndLat,EndLong")
    # Execute
    with pytest.raises(ConfigError) as info:
        street_networks(str(path), cache_dir=tmp_path / "cache")
    # Assert
    message = str(info.value)
    assert str(path) in message and fragment in message and "\n" not in message


def test_map_with_no_connected_part_fails_with_one_line(tmp_path):
    # Prepare: one one-way segment: no strongly connected part with two intersections
    path = _segments_csv(tmp_path / "oneway.csv", ["40.78,-73.97,40.79,-73.97,true"],
                         "StartLat,StartLong,EndLat,EndLong,oneway")
    # Execute
    with pytest.raises(ConfigError) as info:
        WorldMap.build(str(path), cell_m=100.0, areas=1, seed=0, cache_dir=tmp_path / "c")
    # Assert
    assert "connected streets" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("suffix", [".gpkg", ".geojson"])
def test_linestring_files_join_at_shared_end_points(tmp_path, suffix):
    import geopandas as gpd
    from shapely.geometry import LineString, MultiLineString

    # Prepare: a square of streets (one as a MultiLineString) in WGS84, plus a curved street
    a, b, c, d = (24.94, 60.170), (24.942, 60.170), (24.942, 60.171), (24.94, 60.171)
    frame = gpd.GeoDataFrame(
        {"name": ["s", "e", "n", "w"]},
        geometry=[LineString([a, b]), MultiLineString([[b, (24.942, 60.1705)],
                                                       [(24.942, 60.1705), c]]),
                  LineString([c, (24.941, 60.1712), d]), LineString([d, a])],
        crs="EPSG:4326",
    )
    path = tmp_path / f"streets{suffix}"
    frame.to_file(path)
    # Execute
    drive, walk = street_networks(str(path), cache_dir=tmp_path / "cache")
    # Assert: 5 intersections (the split east street adds one), all streets two-way
    assert len(walk.node_xy) == 5
    assert walk.n_edges == 10
    assert "32635" in walk.crs
    west, south, east, north = walk.bounds
    assert 100 < east - west < 120 and 100 < north - south < 140


def test_warm_load_reads_the_cache_and_a_changed_file_is_rebuilt(tmp_path, monkeypatch):
    import mobidfl.maps.world as world_module

    # Prepare
    path = _csv_grid(tmp_path / "segments.csv")
    cache = tmp_path / "cache"
    first, _ = street_networks(str(path), cache_dir=cache)
    files = list(cache.glob("net-*.npz"))

    def no_source(*args, **kwargs):
        raise AssertionError("the source was read although the cache is warm")

    # Execute: warm load without the source loader
    monkeypatch.setattr(world_module, "load_edges", no_source)
    warm, _ = street_networks(str(path), cache_dir=cache)
    monkeypatch.undo()
    # a changed file (one segment removed) must not come from the old cache entry
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    changed, _ = street_networks(str(path), cache_dir=cache)
    # Assert
    assert len(files) == 1
    assert np.array_equal(warm.pts_xy, first.pts_xy) and warm.crs == first.crs
    assert changed.n_edges == first.n_edges - 2
    assert len(list(cache.glob("net-*.npz"))) == 2


def test_damaged_cache_file_is_rebuilt(tmp_path):
    # Prepare
    path = _csv_grid(tmp_path / "segments.csv")
    cache = tmp_path / "cache"
    street_networks(str(path), cache_dir=cache)
    (entry,) = cache.glob("net-*.npz")
    entry.write_bytes(b"not a zip file")
    # Execute
    drive, _ = street_networks(str(path), cache_dir=cache)
    # Assert
    assert drive.n_edges == 24
    with np.load(entry) as arrays:
        assert "drive_pts_xy" in arrays


def test_map_cache_that_is_a_file_is_refused(tmp_path):
    # Prepare
    path = _csv_grid(tmp_path / "segments.csv")
    blocker = tmp_path / "cache"
    blocker.write_text("")
    # Execute / Assert
    with pytest.raises(ConfigError, match="setting 'map_cache'"):
        street_networks(str(path), cache_dir=blocker)


def test_manhattan_grid_has_manhattan_dimensions_and_one_way_streets():
    # Execute
    table = manhattan_grid()
    drive = StreetNetwork.from_table(table, directed=True)
    # Assert: 12 x 200 intersections, all reachable by car; ~2.97 km x 15.9 km
    assert table.n_nodes == 2400 and len(drive.node_xy) == 2400
    segments = 200 * 11 + 12 * 199
    assert segments < drive.n_edges < 2 * segments  # most streets one-way
    street_km = 200 * 11 * 0.270 + 12 * 199 * 0.080  # 785 km of street segments
    assert street_km < drive.edge_len.sum() / 1000 < 1.2 * street_km
    c, s = np.cos(np.radians(29.0)), np.sin(np.radians(29.0))
    unrotated = drive.node_xy @ np.array([[c, s], [-s, c]])  # undo the 29° clockwise turn
    extent = np.ptp(unrotated, axis=0)
    # the grid is laid out at exactly 11 x 270 m and 199 x 80 m; the float64 rotation (and
    # any projection round trip) adds 9.3e-10 m, 2.4e-13 relative (measured): rtol 1e-9
    # (16 um of 15.9 km; was 1e-3, 16 m), atol=0 so rtol alone decides
    assert np.allclose(extent, [2970.0, 15920.0], rtol=1e-9, atol=0)


@pytest.mark.parametrize("spec, fragment", [
    ("grid:3x3:0", "spacing > 0"),
    ("grid:100000x100000", "at most 4,000,000 intersections"),
    ("grid:axb", "grid:RxC"),
    ("bbox:-73.9,40.8,-74.0,40.7", "WEST<EAST"),
])
def test_bad_generated_or_online_maps_fail_fast(spec, fragment, tmp_path):
    with pytest.raises(ConfigError) as info:
        load_edges(spec, cache_dir=tmp_path)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_density_is_recorded_and_saturation_is_flagged():
    from mobidfl.model.world import MobiDFLModel

    # Prepare / Execute: 20 cars on the 0.6 km² Upper West Side vs 20 on manhattan_grid
    dense = MobiDFLModel(map="nyc_uws", vehicles=20, pedestrians=0, sensors=0, uavs=0,
                         learning=False, steps=3, seed=1).run()
    sparse = MobiDFLModel(map="manhattan_grid", vehicles=20, pedestrians=0, sensors=0, uavs=0,
                          learning=False, steps=3, seed=1).run()
    dense_text, dense_saturated = dense.density_summary()
    sparse_text, sparse_saturated = sparse.density_summary()
    table = dense.model_table()
    # Assert
    assert {"neighbours_share", "met_share"} <= set(table.columns)
    assert np.isclose(table["neighbours_share"].iloc[-1], table["neighbours_mean"].iloc[-1] / 19)
    assert dense_saturated and not sparse_saturated
    assert "of the fleet" in dense_text and "met by step 3" in sparse_text
    assert (dense.contact_regime(), sparse.contact_regime()) == ("saturated", "mixing")


def test_world_where_nobody_meets_is_flagged_isolated_by_the_cli(tmp_path, capsys):
    from mobidfl.analysis.cli import main

    # Prepare: 3 sensors with a 1 m radius on a 2 km grid never come within range
    args = ["run", "--out", str(tmp_path / "out"), "--quiet", "--set", "map=grid:20x20:100",
            "--set", "vehicles=0", "--set", "pedestrians=0", "--set", "uavs=0",
            "--set", "sensors=3", "--set", "radius_m=1", "--set", "learning=false",
            "--set", "steps=2", "--set", "seed=4"]
    # Execute
    code = main(args)
    err = capsys.readouterr().err
    # Assert: the run completes and says, in one line, that no exchange ever ran
    assert code == 0
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert "isolated contact regime" in warning and "radius_m" in warning


def test_default_world_has_all_four_kinds_and_is_not_saturated():
    from mobidfl.model.config import KINDS, Config
    from mobidfl.model.world import MobiDFLModel

    # Prepare
    config = Config()
    # Execute
    model = MobiDFLModel(learning=False, steps=3, seed=2).run()
    _, saturated = model.density_summary()
    # Assert: every kind present, each with its own paper's policy
    assert all(config.count(kind) > 0 for kind in KINDS)
    assert {config.policy_of(kind) for kind in KINDS} >= {"cached_lru", "dpsgd"}
    assert set(model.kind_of) == set(KINDS)
    assert not saturated


def test_manhattan_grid_twoway_has_every_segment_both_ways():
    # Prepare: Cached-DFL's code adds each road segment in both directions (road_sim.py)
    one_way = StreetNetwork.from_table(manhattan_grid(), directed=True)
    # Execute
    table = load_edges("manhattan_grid_twoway")
    drive = StreetNetwork.from_table(table, directed=True)
    # Assert: same intersections and streets, each segment now a directed edge both ways
    segments = 200 * 11 + 12 * 199
    assert drive.n_edges == 2 * segments > one_way.n_edges
    assert np.allclose(drive.node_xy, one_way.node_xy)


SUMO_NET = """<?xml version="1.0" encoding="UTF-8"?>
<net version="1.20">
    <location netOffset="-500000.00,-4000000.00" convBoundary="0,0,200,100"
        origBoundary="8.9,36.1,9.1,36.2"
        projParameter="+proj=utm +zone=32 +ellps=WGS84 +datum=WGS84 +units=m +no_defs"/>
    <edge id=":B_0" function="internal">
        <lane id=":B_0_0" index="0" speed="13.89" length="3.00" shape="100,2 100,-2"/>
    </edge>
    <edge id="ab" from="A" to="B" priority="1">
        <lane id="ab_0" index="0" allow="pedestrian" speed="2" length="100" shape="0,-3 100,-3"/>
        <lane id="ab_1" index="1" speed="13.89" length="100" shape="0,-1 50,-1 100,-1"/>
    </edge>
    <edge id="ba" from="B" to="A" priority="1">
        <lane id="ba_0" index="0" speed="13.89" length="100" shape="100,1 0,1"/>
    </edge>
    <edge id="bc" from="B" to="C" priority="1" shape="100,0 150,40 200,100">
        <lane id="bc_0" index="0" disallow="pedestrian" speed="13.89" length="130"
            shape="101,0 151,39 201,99"/>
    </edge>
    <edge id="cb" from="C" to="B" priority="1">
        <lane id="cb_0" index="0" speed="13.89" length="130" shape="199,101 100,1"/>
    </edge>
    <edge id="path" from="A" to="C" priority="1">
        <lane id="path_0" index="0" allow="pedestrian bicycle" speed="5" length="220"
            shape="0,0 200,100"/>
    </edge>
    <edge id="tram" from="C" to="A" priority="1">
        <lane id="tram_0" index="0" allow="tram" speed="15" length="220" shape="200,100 0,0"/>
    </edge>
    <edge id="service" from="A" to="B" priority="1" type="highway.service">
        <lane id="service_0" index="0" disallow="passenger pedestrian" speed="5" length="100"
            shape="0,5 100,5"/>
    </edge>
    <junction id="A" type="dead_end" x="0.00" y="0.00" incLanes="" intLanes="" shape=""/>
    <junction id="B" type="priority" x="100.00" y="0.00" incLanes="" intLanes="" shape=""/>
    <junction id="C" type="dead_end" x="200.00" y="100.00" incLanes="" intLanes="" shape=""/>
    <connection from="ab" to="bc" fromLane="1" toLane="0" via=":B_0_0" dir="l" state="M"/>
</net>
"""


@pytest.mark.parametrize("suffix", [".net.xml", ".net.xml.gz"])
def test_sumo_network_file_reads_its_drivable_edges_in_the_map_crs(tmp_path, suffix):
    import gzip

    # Prepare: three junctions, two two-way streets (one with a curved edge shape), an
    # internal edge, a footpath, a tram line and a delivery-only service road
    path = tmp_path / f"city{suffix}"
    data = SUMO_NET.encode()
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    # Execute
    table = load_edges(str(path))
    # Assert: the four car edges only, each one-way, between the three junctions
    assert (table.n_nodes, table.n_edges) == (3, 4)
    assert "utm" in table.crs and "+zone=32" in table.crs
    # coordinates are SUMO's minus netOffset: the UTM metres of the source
    assert np.allclose(np.sort(table.node_xy[:, 0]), [500000.0, 500100.0, 500200.0])
    assert np.allclose(np.sort(table.node_xy[:, 1]), [4000000.0, 4000000.0, 4000100.0])
    # the curved edge keeps its edge shape's middle point; a lane-shaped one its lane's
    lengths = sorted(
        float(np.hypot(*np.diff(table.coords[table.ptr[e]:table.ptr[e + 1]], axis=0).T).sum())
        for e in range(table.n_edges)
    )
    curved = np.hypot(50, 40) + np.hypot(50, 60)
    assert np.allclose(lengths, [100.0, 2 * np.hypot(50, 1), np.hypot(100, 100), curved])


def test_sumo_network_written_by_netconvert_reads_back_as_the_same_streets(tmp_path):
    from mobidfl.maps import sumo_net

    # Prepare: a 3 x 4 grid with one one-way row, converted by SUMO's netconvert
    table = grid_table(rows=3, cols=4, spacing_m=100.0, oneway_rows=np.array([0, 1, 0]))
    network = StreetNetwork.from_table(table, directed=True)
    net_file = sumo_net.build_network(network, speed_mps=13.89, cache_dir=tmp_path,
                                      map_name="grid")
    # Execute
    drive, _ = street_networks(str(net_file), cache_dir=tmp_path / "cache")
    # Assert: the same intersections (in metres) and the same directed streets
    assert drive.n_edges == network.n_edges == table.n_edges
    assert np.allclose(np.sort(drive.node_xy, axis=0), np.sort(network.node_xy, axis=0))
    assert np.isclose(drive.edge_len.sum(), network.edge_len.sum())


def test_unreadable_sumo_network_fails_with_one_line(tmp_path):
    # Prepare
    path = tmp_path / "broken.net.xml"
    path.write_text("<net><edge id='a' from='A'")
    # Execute
    with pytest.raises(ConfigError) as info:
        load_edges(str(path))
    # Assert
    assert "readable SUMO network" in str(info.value) and "\n" not in str(info.value)


def test_static_agents_out_of_range_of_each_other_are_counted_and_warned(tmp_path, capsys):
    from mobidfl.analysis.cli import main
    from mobidfl.model.world import MobiDFLModel

    # Prepare: PSFL's 56 sensors on its own 8 x 9 grid and over central Helsinki's cells
    settings = {"preset": "psfl_004", "learning": False, "steps": 1, "seed": 20}
    # Execute
    grid = MobiDFLModel(**settings).run().static_groups()
    city = MobiDFLModel(**settings, map="helsinki_walk").run().static_groups()
    bridged = MobiDFLModel(preset="dam_001", learning=False, steps=1, seed=20,
                           **{"uav.mobility": "random_grid"}).run().static_groups()
    code = main(["run", "--out", str(tmp_path / "out"), "--quiet", "--preset", "psfl_004",
                 "--set", "map=helsinki_walk", "--set", "learning=false", "--set", "steps=1",
                 "--set", "seed=20"])
    err = capsys.readouterr().err
    # Assert: one group on the paper's grid; several on the city, and the CLI says so once
    assert grid == {"sensor": 1}
    assert bridged == {}  # DAM's static clients: its mobile UAVs (same policy) carry models
    assert city["sensor"] > 1 and code == 0
    (warning,) = [line for line in err.splitlines() if "groups out of range" in line]
    assert f"the static sensors form {city['sensor']} groups" in warning
