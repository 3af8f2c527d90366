"""A fast reader for osmnx-style GraphML street maps, straight into an :class:`EdgeTable`.

``osmnx.load_graphml`` converts every attribute of every edge through Python and builds
networkx dicts (slow for a borough of many thousand nodes); a street network needs only node
positions, edge ends, geometries and one-way flags. This reader streams the XML once,
keeps those columns as strings and converts them in bulk (WKT through shapely's
vectorised parser), an order of magnitude faster (docs/performance/measurements.md).
"""

from __future__ import annotations

import html
import io
import re
import xml.etree.ElementTree as ET
import xml.parsers.expat
from collections import Counter
from pathlib import Path
from typing import BinaryIO

import numpy as np
import shapely

from mobidfl.maps.edges import EdgeTable, check_no_stray_text
from mobidfl.maps.network import _with_geometries

_NS = "{http://graphml.graphdrawing.org/xmlns}"
_TRUE = ("true", "1", "yes", "-1")


def read_graphml(path: str | Path, *, raw: bytes | None = None) -> EdgeTable:
    """Read an osmnx GraphML file (directed, or undirected as momepy writes it).

    Undirected files become two directed edges per street unless the edge carries
    ``oneway`` plus ``from``/``to`` (momepy keeps OSM's one-way direction that way).
    ``raw``: the file's bytes when the caller already has them (e.g. inflated from a
    ``.graphml.gz``); the file is then not read again.

    Raises
    ------
    ValueError
        not a GraphML street graph (no x/y node data, malformed XML, a file cut
        short, an element or data key GraphML does not declare).
    """
    raw = Path(path).read_bytes() if raw is None else raw
    tags = check_whole(raw)
    parsed = _scan(raw) if b"<graphml" in raw[:4096] else None
    if parsed is None:
        parsed = _parse_tree(io.BytesIO(raw))
    node_ids, node_x, node_y, edge_cols, directed, crs = parsed
    if not node_ids:
        raise ValueError("no nodes")
    for name, found in (("node", len(node_ids)), ("edge", len(edge_cols["u"]))):
        if tags[name] != found:
            raise ValueError(f"{tags[name]} <{name}> elements but {found} readable ones")
    ids = np.array(node_ids)
    try:
        node_xy = np.column_stack([np.array(node_x, float), np.array(node_y, float)])
    except ValueError:
        raise ValueError("nodes without numeric x/y") from None
    if not np.isfinite(node_xy).all():
        raise ValueError("nodes without numeric x/y")
    order = np.argsort(ids)
    ends = np.array(edge_cols["u"] + edge_cols["v"], dtype=ids.dtype)
    found = np.searchsorted(ids[order], ends)
    if len(ends) and (found.max() >= len(ids) or (ids[order][found] != ends).any()):
        raise ValueError("an edge names a node that does not exist")
    lookup = order[found]
    n_edges = len(edge_cols["u"])
    edge_u, edge_v = lookup[:n_edges], lookup[n_edges:]
    oneway = np.array([str(v).lower() in _TRUE for v in edge_cols["oneway"]], bool)
    if not directed and n_edges and all(v is not None for v in edge_cols["from"]):
        named = np.array(edge_cols["from"], dtype=ids.dtype)
        at = np.minimum(np.searchsorted(ids[order], named), len(ids) - 1)
        start = order[at]
        if (ids[start] != named).any() or ((start != edge_u) & (start != edge_v)).any():
            raise ValueError("an edge whose 'from' is neither of its ends")
        flip = start != edge_u
        edge_u, edge_v = np.where(flip, edge_v, edge_u), np.where(flip, edge_u, edge_v)
    wkt = np.array(edge_cols["geometry"], dtype=object)
    geoms = np.full(n_edges, None, dtype=object)
    present = np.array([w is not None for w in wkt], bool) if n_edges else np.zeros(0, bool)
    if present.any():
        geoms[present] = shapely.from_wkt(wkt[present].astype(str))
    table = _with_geometries(
        _as_ids(ids), node_xy, edge_u, edge_v, geoms, crs or "EPSG:4326"
    ).oriented()
    if not directed:
        table = table.with_reverse(np.flatnonzero(~oneway))
    return table


GRAPHML_ELEMENTS = frozenset({
    "graphml", "key", "default", "graph", "node", "edge", "data", "desc", "port", "hyperedge",
    "endpoint", "locator",
})
"""The elements the GraphML schema defines (others must carry a namespace prefix)."""
_TAG = re.compile(rb"<([A-Za-z_][\w.:-]*)")
_USED_KEY = re.compile(rb"<data\s[^>]*?key=\"([^\"]*)\"")
_DECLARED_KEY = re.compile(rb"<key\s[^>]*?id=\"([^\"]*)\"")


def check_whole(raw: bytes) -> Counter:
    """Refuse a GraphML file that is not whole; return how many elements of each name it has.

    WHY: a download cut in half still matches the fast reader's patterns up to the cut and
    would load as a smaller city. The whole file must parse as XML to its end tag (expat,
    in C, no per-element Python), use only GraphML's own elements (or prefixed foreign
    ones: a flipped byte in ``<edge`` is not silently skipped) and declare every data key.

    Raises
    ------
    ValueError
        what is wrong, with the line and column where the XML parser stopped.
    """
    # As edges.check_well_formed, but a ValueError with GraphML's message (its callers word it).
    parser = xml.parsers.expat.ParserCreate()
    try:
        parser.Parse(raw, True)
    except xml.parsers.expat.ExpatError as exc:
        raise ValueError(f"not well-formed XML to its end ({exc}); is the file cut short?") \
            from None
    except LookupError as exc:  # an XML declaration naming an unknown encoding
        raise ValueError(f"an XML encoding Python knows ({exc})") from None
    check_no_stray_text(raw, ("data", "default", "desc"))
    tags = Counter({name.decode("utf-8", "replace"): n  # counted in C, names decoded once
                    for name, n in Counter(_TAG.findall(raw)).items()})
    unknown = sorted(t for t in tags if t not in GRAPHML_ELEMENTS and ":" not in t)
    if unknown:
        raise ValueError(f"an element GraphML does not define: <{unknown[0][:40]}>")
    undeclared = set(_USED_KEY.findall(raw)) - set(_DECLARED_KEY.findall(raw))
    if undeclared:
        key = sorted(undeclared)[0].decode("utf-8", "replace")[:40]
        raise ValueError(f"data with key {key!r} that no <key> declares")
    return tags


_KEY = re.compile(rb"<key\s([^>]*)>")
_ATTR = re.compile(rb'([\w.]+)="([^"]*)"')
_NODE = re.compile(rb"<node\s[^>]*?id=\"([^\"]*)\"[^>]*?(?:/>|>(.*?)</node>)", re.S)
_EDGE = re.compile(rb"<edge\s([^>]*?)(?:/>|>(.*?)</edge>)", re.S)
_DATA = re.compile(rb'<data key="([^"]+)">([^<]*)</data>')
_GRAPH = re.compile(rb"<graph\s([^>]*)>")
_EDGE_DEFAULT = re.compile(rb'\bedgedefault="([^"]*)"')
_EDGE_COLUMNS = ("geometry", "oneway", "from", "to")


def _scan(raw: bytes):
    """Regex scan of networkx's own GraphML layout (double-quoted, no nested markup).

    Returns None when the file does not look like that, so the XML parser takes over.
    """
    keys = {}
    for attrs in _KEY.findall(raw):
        fields = dict(_ATTR.findall(attrs))
        keys[fields.get(b"id", b"")] = (fields.get(b"for", b""), fields.get(b"attr.name", b""))
    name_of = {k: v[1].decode() for k, v in keys.items()}
    x_key = next((k for k, v in keys.items() if v == (b"node", b"x")), None)
    y_key = next((k for k, v in keys.items() if v == (b"node", b"y")), None)
    if x_key is None or y_key is None or b"<![CDATA[" in raw:
        return None
    graph_head = _GRAPH.search(raw)
    default = _EDGE_DEFAULT.search(graph_head.group(1)) if graph_head else None
    if default is None or default.group(1) not in (b"directed", b"undirected"):
        raise ValueError('a <graph> with edgedefault="directed" or "undirected"')
    directed = default.group(1) == b"directed"
    crs_key = next((k for k, v in keys.items() if v == (b"graph", b"crs")), None)
    crs_data = re.search(b'<data key="' + re.escape(crs_key) + b'">([^<]*)</data>', raw) \
        if crs_key is not None else None  # graph-level key ids are used by the graph only
    crs = html.unescape(crs_data.group(1).decode()) if crs_data else None
    node_ids, node_x, node_y = [], [], []
    for node_id, body in _NODE.findall(raw):
        data = dict(_DATA.findall(body))
        node_ids.append(html.unescape(node_id.decode()))
        node_x.append(data.get(x_key, b"nan"))
        node_y.append(data.get(y_key, b"nan"))
    wanted = {k: name_of[k] for k, v in keys.items() if v[0] == b"edge"
              and name_of[k] in _EDGE_COLUMNS}
    columns: dict[str, list] = {name: [] for name in ("u", "v", *_EDGE_COLUMNS)}
    for attrs, body in _EDGE.findall(raw):
        fields = dict(_ATTR.findall(attrs))
        if b"source" not in fields or b"target" not in fields:
            raise ValueError("an <edge> without source and target")
        columns["u"].append(html.unescape(fields[b"source"].decode()))
        columns["v"].append(html.unescape(fields[b"target"].decode()))
        data = {wanted[k]: v for k, v in _DATA.findall(body) if k in wanted}
        for name in _EDGE_COLUMNS:
            value = data.get(name)
            columns[name].append(None if value is None else html.unescape(value.decode()))
    return node_ids, [float(v) for v in node_x], [float(v) for v in node_y], columns, \
        directed, crs


def _parse_tree(source: BinaryIO):
    """The general (slower) path: a streaming XML parse of any GraphML layout."""
    keys: dict[str, str] = {}
    graph_data: dict[str, str] = {}
    node_ids: list[str] = []
    node_x: list[str] = []
    node_y: list[str] = []
    edge_cols: dict[str, list[str | None]] = {name: [] for name in ("u", "v", *_EDGE_COLUMNS)}
    directed = True
    for _, elem in ET.iterparse(source, events=("end",)):
        tag = elem.tag.removeprefix(_NS)
        if tag == "key":
            keys[elem.get("id", "")] = elem.get("attr.name", "")
        elif tag == "node":
            data = {keys.get(d.get("key", ""), ""): d.text for d in elem.iter(_NS + "data")}
            node_ids.append(elem.get("id", ""))
            node_x.append(data.get("x") or "nan")
            node_y.append(data.get("y") or "nan")
            elem.clear()
        elif tag == "edge":
            data = {keys.get(d.get("key", ""), ""): d.text for d in elem.iter(_NS + "data")}
            if elem.get("source") is None or elem.get("target") is None:
                raise ValueError("an <edge> without source and target")
            edge_cols["u"].append(elem.get("source"))
            edge_cols["v"].append(elem.get("target"))
            for name in _EDGE_COLUMNS:
                edge_cols[name].append(data.get(name))
            elem.clear()
        elif tag == "graph":
            default = elem.get("edgedefault")
            if default not in ("directed", "undirected"):
                raise ValueError('a <graph> with edgedefault="directed" or "undirected"')
            directed = default == "directed"
            graph_data = {
                keys.get(d.get("key", ""), ""): d.text or "" for d in elem.findall(_NS + "data")
            }
    return node_ids, node_x, node_y, edge_cols, directed, graph_data.get("crs")


def _as_ids(ids: np.ndarray) -> np.ndarray:
    """OSM ids as integers when they all are, else kept as strings."""
    try:
        return ids.astype(np.int64)
    except ValueError:
        return ids
