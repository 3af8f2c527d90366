"""Everything static about the place: street networks, grid, areas and the CRS."""

from __future__ import annotations

import contextlib
import functools
import zipfile
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
from pyproj import Transformer

from mobidfl.atomic import write_npz
from mobidfl.errors import ConfigError
from mobidfl.maps.grid import Grid, area_of_points, split_areas
from mobidfl.maps.network import StreetNetwork
from mobidfl.maps.sources import graph_from_table, load_edges, source_digest

NETWORK_FORMAT = 2
"""Bumped whenever the street arrays change meaning, so old cache files are rebuilt."""


@dataclass
class WorldMap:
    """The map a run happens on; positions are metres in ``crs``."""

    name: str
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
        """Load the map ``spec`` (cached) and lay the grid and the ``areas`` areas over it."""
        drive, walk = street_networks(spec, cache_dir=cache_dir)
        grid = Grid.over(walk.bounds, cell_m=cell_m)
        node_area = split_areas(walk.node_xy, k=areas, seed=seed)
        return cls(spec, drive, walk, grid, node_area, areas, walk.crs)

    @functools.cached_property
    def graph(self) -> nx.MultiDiGraph:
        """The drive network as an osmnx-style networkx graph (for tools that need one)."""
        from mobidfl.maps.edges import EdgeTable

        net = self.drive
        table = EdgeTable(
            net.node_ids, net.node_xy, net.edge_u, net.edge_v, net.pts_xy,
            np.append(net.edge_pt0, net.edge_pt1[-1]), net.crs,
        )
        return graph_from_table(table)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """``(west, south, east, north)`` of the walk network, in map metres."""
        return self.walk.bounds

    def area_of(self, xy: np.ndarray) -> np.ndarray:
        """The area of each point of ``xy`` (that of its nearest walk-network node)."""
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
    """The transformer from ``crs`` to WGS84, cached: building one costs milliseconds."""
    return Transformer.from_crs(crs, "EPSG:4326", always_xy=True)


def street_networks(
    spec: str, *, cache_dir: str | Path = "~/.cache/mobidfl/maps"
) -> tuple[StreetNetwork, StreetNetwork]:
    """The drive and walk networks of ``spec``, from ``cache_dir`` when built before.

    Building is vectorised (an 18k-intersection borough takes about a second); the
    built arrays are cached as ``net-<sha256>.npz`` keyed by the source's content and
    :data:`NETWORK_FORMAT`, so a changed file is rebuilt and a warm load only reads
    arrays. A cache folder that cannot be written is skipped, a damaged cache file rebuilt.
    """
    folder = Path(cache_dir).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError("map_cache", str(cache_dir), "a folder (it is a file)")
    digest = source_digest(spec)
    cached = folder / f"net-{digest[:24]}-v{NETWORK_FORMAT}.npz" if digest else None
    if cached is not None and cached.is_file():
        try:
            with np.load(cached, allow_pickle=False) as arrays:
                return (StreetNetwork.from_arrays(arrays, "drive_"),
                        StreetNetwork.from_arrays(arrays, "walk_"))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            pass  # damaged or foreign: rebuild below and overwrite
    table = load_edges(spec, cache_dir=folder)
    try:
        drive = StreetNetwork.from_table(table, directed=True)
        walk = StreetNetwork.from_table(table, directed=False)
    except ValueError as exc:
        raise ConfigError("map", spec, f"a map with connected streets ({exc})") from None
    if cached is not None:
        _save_atomically(cached, {**drive.to_arrays("drive_"), **walk.to_arrays("walk_")})
    return drive, walk


def _save_atomically(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with contextlib.suppress(OSError):  # a read-only or full cache only costs a rebuild
        write_npz(path, **arrays)
