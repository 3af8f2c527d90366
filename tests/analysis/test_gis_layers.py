"""The GIS layers are built whole-array (one PROJ call per layer, no per-geometry Python);
each geometry equals the one built vertex by vertex from the world's own arrays."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from pyproj import Transformer
from shapely.geometry import LineString, Point, box
from shapely.ops import transform

from mobidfl.analysis.gis import export_layers
from mobidfl.model.world import MobiDFLModel


@pytest.fixture(scope="module", params=["nyc_uws", "grid:5x5:120"])
def world(request) -> MobiDFLModel:
    model = MobiDFLModel(map=request.param, vehicles=6, pedestrians=4, sensors=3, uavs=1,
                         steps=3, learning=False, link="distance_rate", seed=4)
    for _ in range(3):
        model.step()
    return model


def _to_wgs(model: MobiDFLModel):
    return Transformer.from_crs(model.world_map.crs, "EPSG:4326", always_xy=True).transform


def test_streets_are_each_edge_s_points_in_wgs84(world):
    # Prepare: the oracle, edge by edge
    net, to_wgs = world.world_map.walk, _to_wgs(world)
    drive = world.world_map.drive
    drive_pairs = set(zip(drive.node_ids[drive.edge_u], drive.node_ids[drive.edge_v],
                          strict=True))
    # Execute
    streets = export_layers(world)["streets"]
    # Assert
    assert len(streets) == net.n_edges
    for e in range(net.n_edges):
        want = transform(to_wgs, LineString(net.pts_xy[net.edge_pt0[e]:net.edge_pt1[e]]))
        assert shapely.equals_exact(streets.geometry.iloc[e], want, tolerance=0)
        u, v = net.node_ids[net.edge_u[e]], net.node_ids[net.edge_v[e]]
        assert (streets["u"].iloc[e], streets["v"].iloc[e]) == (str(u), str(v))
        assert bool(streets["drivable"].iloc[e]) == ((u, v) in drive_pairs)
        assert streets["area"].iloc[e] == int(world.world_map.node_area[net.edge_u[e]])


def test_cells_are_the_grid_s_squares_in_wgs84(world):
    grid, to_wgs = world.world_map.grid, _to_wgs(world)
    cells = export_layers(world)["cells"]
    assert cells["cell"].tolist() == list(range(grid.n_cells))
    for c in range(grid.n_cells):
        row, col = divmod(c, grid.cols)
        x, y = grid.x0 + col * grid.cell_m, grid.y0 + row * grid.cell_m
        want = transform(to_wgs, box(x, y, x + grid.cell_m, y + grid.cell_m))
        assert shapely.equals_exact(cells.geometry.iloc[c], want, tolerance=0)


def test_tracks_join_each_agent_s_points_in_step_order_with_its_last_totals(world):
    layers = export_layers(world)
    points, tracks = layers["points"], layers["tracks"]
    assert len(tracks) == points["agent_id"].nunique()
    for _, track in tracks.iterrows():
        mine = points[points["agent_id"] == track["agent_id"]].sort_values("step")
        coords = list(zip(mine["lon"], mine["lat"], strict=True))
        want = LineString(coords) if len(coords) >= 2 else Point(coords[0])
        assert shapely.equals_exact(track.geometry, want, tolerance=0)
        assert track["kind"] == mine["kind"].iloc[0] and track["steps"] == len(mine)
        assert track["start"] == mine["time"].iloc[0] and track["end"] == mine["time"].iloc[-1]
        assert track["bytes_sent"] == mine["bytes_sent"].iloc[-1]
    assert np.isin(["bytes_sent", "energy_j"], tracks.columns).all()
