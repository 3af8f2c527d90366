"""OpenStreetMap PBF extracts (``.osm.pbf``), read by pyrosm (drive network).

Map data © OpenStreetMap contributors, available under the Open Database License (ODbL).
"""

from __future__ import annotations

from pathlib import Path
from typing import override

import networkx as nx

from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, MapDataError
from mobidfl.maps.formats.base import MapFormat, register_map_format
from mobidfl.maps.network import table_from_graph


@register_map_format
class OsmPbfFormat(MapFormat):
    """An OSM PBF extract's drivable streets (pyrosm ``network_type="driving"``), projected."""

    name = "osm_pbf"
    suffixes = (".osm.pbf",)

    @override
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        try:
            return table_from_graph(pyrosm_graph(path, "driving"))
        except (ConfigError, MapDataError):
            raise
        except Exception as exc:
            reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise ConfigError("map", str(path), f"a readable OSM street map ({reason})") \
                from None


def pyrosm_graph(path: Path, network_type: str) -> nx.MultiDiGraph:
    """The ``network_type`` network (read by pyrosm) of the extract as a projected osmnx graph."""
    import osmnx as ox  # here, not at the top: osmnx imports matplotlib's pyplot
    from pyrosm import OSM

    try:
        nodes, edges = OSM(str(path)).get_network(network_type=network_type, nodes=True)
    except Exception as exc:  # pyrosm raises bare exceptions on bad files
        raise ConfigError("map", str(path), f"a readable .osm.pbf file ({exc})") from None
    if edges is None or len(edges) == 0:
        raise ConfigError("map", str(path), "an OSM extract with streets")
    graph = OSM(str(path)).to_graph(nodes, edges, graph_type="networkx", osmnx_compatible=True)
    return ox.project_graph(graph)
