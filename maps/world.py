"""Everything static about the place: street networks, grid, areas and the CRS."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
from pyproj import Transformer

from maps.grid import Grid, area_of_points, split_areas
from maps.network import StreetNetwork
from maps.sources import load_graph


@dataclass
class WorldMap:
    """The map a run happens on; positions are metres in ``crs``."""

    name: str
    graph: nx.MultiDiGraph
    drive: StreetNetwork
    walk: StreetNetwork
    grid: Grid
    node_area: np.ndarray
    n_areas: int
    crs: str

    @classmethod
    def build(
        cls,
        spec: str,
        *,
        cell_m: float,
        areas: int,
        seed: int,
        cache_dir: str | Path = "~/.cache/mobidfl/maps",
    ) -> WorldMap:
        graph = load_graph(spec, cache_dir=cache_dir)
        drive = StreetNetwork.from_graph(graph, directed=True)
        walk = StreetNetwork.from_graph(graph, directed=False)
        grid = Grid.over(walk.bounds, cell_m=cell_m)
        node_area = split_areas(walk.node_xy, k=areas, seed=seed)
        return cls(spec, graph, drive, walk, grid, node_area, areas, walk.crs)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        return self.walk.bounds

    def area_of(self, xy: np.ndarray) -> np.ndarray:
        return area_of_points(xy, self.walk.node_xy, self.node_area)

    def nodes_in_area(self, network: StreetNetwork, area: int) -> np.ndarray:
        """Boolean mask over ``network``'s nodes that lie in ``area``."""
        return self.area_of(network.node_xy) == area

    def to_wgs84(self, xy: np.ndarray) -> np.ndarray:
        """Metres in the map CRS to (lon, lat)."""
        lon, lat = _to_wgs84(self.crs).transform(xy[:, 0], xy[:, 1])
        return np.stack([lon, lat], axis=-1)


@functools.lru_cache(maxsize=16)
def _to_wgs84(crs: str) -> Transformer:
    """Building a pyproj Transformer costs milliseconds; every step's export reuses one."""
    return Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
