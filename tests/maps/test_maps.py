"""Real street maps load offline, as projected graphs with oriented geometries."""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from mobidfl.maps import StreetNetwork, load_graph, split_areas, street_grid


def test_bundled_manhattan_is_the_real_upper_west_side():
    # Execute
    graph = load_graph("nyc_uws")
    drive = StreetNetwork.from_graph(graph, directed=True)
    walk = StreetNetwork.from_graph(graph, directed=False)
    # Assert: 46 intersections in the OSM extract; one-way avenues shrink the drive SCC
    assert graph.number_of_nodes() == 46
    assert len(walk.node_xy) == 46
    assert 30 <= len(drive.node_xy) < 46
    assert "utm" in drive.crs.lower() and "18" in drive.crs
    west, south, east, north = walk.bounds
    assert 600 < east - west < 1200 and 600 < north - south < 1200


def test_edge_geometries_start_at_u_and_end_at_v(nyc):
    net = nyc.drive
    # Execute
    starts = net.pts_xy[net.edge_pt0]
    ends = net.pts_xy[net.edge_pt1 - 1]
    # Assert
    assert np.allclose(starts, net.node_xy[net.edge_u])
    assert np.allclose(ends, net.node_xy[net.edge_v])


def test_helsinki_extract_loads_drive_and_walk():
    drive = StreetNetwork.from_graph(load_graph("helsinki_drive"))
    walk = StreetNetwork.from_graph(load_graph("helsinki_walk"), directed=False)
    assert drive.n_edges > 100
    assert walk.n_edges > drive.n_edges


def test_graphml_file_round_trip(tmp_path):
    import osmnx as ox

    # Prepare
    path = tmp_path / "grid.graphml"
    ox.save_graphml(street_grid(rows=3, cols=4, spacing_m=50), path)
    # Execute
    net = StreetNetwork.from_graph(load_graph(str(path)))
    # Assert: 3x4 grid has 2*(3*3 + 2*4) = 34 directed edges of 50 m
    assert net.n_edges == 34
    assert np.allclose(net.edge_len, 50.0)


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("atlantis", "setting 'map' = 'atlantis'"),
        ("/no/such/file.graphml", "an existing, readable map file"),
        ("grid:1x5", "at least 2x2"),
    ],
)
def test_bad_map_fails_with_one_line_naming_the_setting(spec, fragment):
    with pytest.raises(ConfigError) as info:
        load_graph(spec)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_map_with_no_edges_is_rejected(tmp_path):
    import networkx as nx
    import osmnx as ox

    # Prepare
    graph = nx.MultiDiGraph(crs="EPSG:32618")
    graph.add_node(1, x=0.0, y=0.0)
    path = tmp_path / "empty.graphml"
    ox.save_graphml(graph, path)
    # Execute / Assert
    with pytest.raises(ConfigError, match="at least one edge"):
        load_graph(str(path))


def test_areas_are_deterministic_from_the_seed_and_cover_k_areas(nyc):
    points = nyc.walk.node_xy
    a = split_areas(points, k=3, seed=7)
    b = split_areas(points, k=3, seed=7)
    assert np.array_equal(a, b)
    assert set(a) == {0, 1, 2}
    # area 0 is the southernmost
    centres_y = [points[a == k, 1].mean() for k in range(3)]
    assert centres_y == sorted(centres_y)


def test_grid_cells_cover_the_map(nyc):
    grid = nyc.grid
    west, south, east, north = nyc.bounds
    assert grid.x0 + grid.cols * grid.cell_m >= east
    assert grid.y0 + grid.rows * grid.cell_m >= north
    centres = grid.centres()
    assert np.array_equal(grid.cell_of(centres), np.arange(grid.n_cells))
