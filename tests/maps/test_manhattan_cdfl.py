"""The authors' Manhattan (Cached-DFL) bundled as ``manhattan_cdfl``; duplicate segments join."""

from __future__ import annotations

import time
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from mobidfl.maps.edges import from_segments
from mobidfl.maps.network import StreetNetwork
from mobidfl.maps.sources import BUNDLED, load_edges, read_segments_csv

DATA = Path(__file__).resolve().parents[2] / "maps" / "data"


def _authors_graph(lonlat: np.ndarray, seg: np.ndarray) -> nx.DiGraph:
    """``road_sim.generate_roadNet_pair_area_list``'s graph: every row added both ways to a
    DiGraph keyed on exact (lat, lon), then its largest strongly connected component."""
    g = nx.DiGraph()
    a = [tuple(p) for p in lonlat[seg[:, 0]][:, ::-1]]
    b = [tuple(p) for p in lonlat[seg[:, 1]][:, ::-1]]
    g.add_edges_from(zip(a, b, strict=True))
    g.add_edges_from(zip(b, a, strict=True))
    return g.subgraph(max(nx.strongly_connected_components(g), key=len)).copy()


def test_bundled_map_is_the_authors_graph_with_licence_and_provenance():
    # Prepare: the bundled arrays (every CSV row as an index pair into exact coordinates)
    with np.load(DATA / "manhattan_cdfl.npz") as z:
        lonlat, seg = z["lonlat"], z["segments"]
    authors = _authors_graph(lonlat, seg)
    # Execute: MobiDFL's reading, as any model run does
    net = StreetNetwork.from_table(load_edges("manhattan_cdfl"))
    # Assert: 35,457 rows; the authors' 18,014 intersections and 55,469 directed edges, and
    # MobiDFL's street network has exactly those (duplicates joined, not parallel streets)
    assert len(seg) == 35_457
    assert (authors.number_of_nodes(), authors.number_of_edges()) == (18_014, 55_469)
    assert (len(net.node_xy), len(net.edge_u)) == (18_014, 55_469)
    assert 1_830 < net.edge_len.sum() / 2 / 1000 < 1_860  # km of street, one way
    assert "MIT License" in (DATA / "manhattan_cdfl.LICENSE").read_text()
    prov = (DATA / "manhattan_cdfl.PROVENANCE.md").read_text()
    assert "b116fea0268aa155a1f65b1f9e3cb6d534a1829a" in prov and "NY_Data/NewYork.csv" in prov
    assert "manhattan_cdfl" in BUNDLED


def test_bundled_map_loads_in_under_two_seconds_warm():
    load_edges("manhattan_cdfl")
    t = time.perf_counter()
    load_edges("manhattan_cdfl")
    assert time.perf_counter() - t < 2.0


def test_duplicate_segments_join_into_one_street_in_either_direction(tmp_path):
    # Prepare: a 3-segment street with its middle segment repeated, once reversed, and a
    # one-way segment drawn once each way (a two-way street), plus a loop
    csv = tmp_path / "roads.csv"
    rows = [
        "StartLat,StartLong,EndLat,EndLong,oneway",
        "40.700,-74.000,40.701,-74.000,false",
        "40.701,-74.000,40.702,-74.000,false",
        "40.701,-74.000,40.702,-74.000,false",
        "40.702,-74.000,40.701,-74.000,false",
        "40.702,-74.000,40.703,-74.000,false",
        "40.703,-74.000,40.703,-74.001,true",
        "40.703,-74.001,40.703,-74.000,true",
    ]
    csv.write_text("\n".join(rows) + "\n")
    # Execute
    table = read_segments_csv(csv)
    # Assert: 4 streets, each two-way: 8 directed edges, no parallel duplicates
    pairs = set(zip(table.edge_u.tolist(), table.edge_v.tolist(), strict=True))
    assert table.n_edges == 8 and len(pairs) == 8
    assert all((v, u) in pairs for u, v in pairs)


def test_one_way_duplicates_stay_one_way_and_loops_are_single():
    # Prepare: a one-way segment repeated in the same direction, and a two-way loop
    start = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0]])
    end = np.array([[100.0, 0.0], [100.0, 0.0], [5.0, 5.0]])
    # Execute
    table = from_segments(start, end, crs="EPSG:32618", two_way=np.array([False, False, True]))
    # Assert: one u -> v edge and one loop edge
    assert table.n_edges == 2
    u, v = table.edge_u.tolist(), table.edge_v.tolist()
    assert (u[0], v[0]) != (v[0], u[0]) and u[1] == v[1]


@pytest.mark.parametrize("shift_m", [0.0, 30.0])
def test_polylines_join_only_when_their_shape_matches(shift_m):
    # Prepare: two 3-point streets between the same ends; the second's middle point moved
    start = np.array([[0.0, 0.0], [0.0, 0.0]])
    end = np.array([[100.0, 0.0], [100.0, 0.0]])
    coords = np.array([[0, 0], [50, 10], [100, 0], [0, 0], [50, 10 + shift_m], [100, 0]], float)
    # Execute
    table = from_segments(start, end, crs="EPSG:32618", geometry=(coords, np.array([0, 3, 6])))
    # Assert: identical shapes are one street (2 directed edges); different ones stay two
    assert table.n_edges == (2 if shift_m == 0 else 4)
