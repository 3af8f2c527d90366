"""A street map as flat arrays: the common form every map source is turned into.

An :class:`EdgeTable` is a directed multigraph in projected metres: one row per direction
a street can be travelled (a two-way street is two rows), each with its polyline geometry
oriented from ``u`` to ``v``. Every operation here works on whole arrays at once, so a
borough of ~18k intersections and ~55k street segments is handled in well under a second
(no per-edge Python: the reason v0.1 needed over a minute for such a map).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from pyproj import CRS, Transformer
from pyproj.exceptions import CRSError

_NOT_METRIC = (3857, 900913)  # web Mercator: projected, but metres grow with latitude


class MapDataError(ValueError):
    """A map file's content is not a usable street map (bad coordinates or projection).

    Readers turn it into a one-line :class:`mobidfl.errors.ConfigError` naming the file.
    """


ROUND_TRIP_M = 1.0
"""A projected coordinate must come back within this many metres from WGS84: beyond its CRS's
domain a projection's inverse returns finite but meaningless numbers."""


def parse_crs(text: object) -> CRS:
    """The CRS named by ``text`` (EPSG code, WKT, PROJ string), or :class:`MapDataError`."""
    try:
        return CRS.from_user_input(text)
    except (CRSError, TypeError, ValueError) as exc:
        shown = str(text) if len(str(text)) <= 80 else str(text)[:77] + "..."
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MapDataError(f"a projection pyproj understands, not {shown!r} ({reason})") \
            from None


def check_coordinates(xy: np.ndarray, crs: object) -> None:
    """Refuse coordinates that are not finite or not on Earth in ``crs`` (whole array at once).

    Geographic CRSs need longitudes in [-180, 180] and latitudes in [-90, 90]; a projected
    CRS needs every point to map to such a longitude/latitude and back within
    :data:`ROUND_TRIP_M` (outside its domain a projection is not a place on the map).

    Raises
    ------
    MapDataError
        the first bad point and what is wrong with it.
    """
    xy = np.asarray(xy, float).reshape(-1, 2)
    parsed = parse_crs(crs)
    bad = ~np.isfinite(xy).all(axis=1)
    if bad.any():
        raise MapDataError(f"finite coordinates (point {_first(bad, xy)} is not)")
    if not len(xy):
        return
    if parsed.is_geographic:
        lon, lat = _lon_lat(parsed, xy)
    else:
        to_geo = Transformer.from_crs(parsed, "EPSG:4326", always_xy=True)
        with np.errstate(all="ignore"):
            lon, lat = (np.asarray(a, float) for a in to_geo.transform(xy[:, 0], xy[:, 1]))
            back = np.column_stack(
                Transformer.from_crs("EPSG:4326", parsed, always_xy=True).transform(lon, lat)
            )
            off = ~(np.hypot(*(back - xy).T) <= ROUND_TRIP_M)
        if off.any():
            raise MapDataError(
                f"coordinates inside the domain of its CRS (point {_first(off, xy)} is not a "
                "place on Earth there)"
            )
    outside = ~((np.abs(lon) <= 180.0) & (np.abs(lat) <= 90.0))
    if outside.any():
        raise MapDataError(
            "coordinates within longitude [-180, 180] and latitude [-90, 90] "
            f"(point {_first(outside, xy)} is not)"
        )


_TEXT = re.compile(rb">[^<]*?[^\s<]")


def check_well_formed(raw: bytes) -> None:
    """Refuse XML that does not parse to its end tag (expat, in C: no per-element Python).

    WHY: a download cut in half still matches a fast reader's patterns up to the cut and
    would load as a smaller city. Raises :class:`MapDataError` naming where the parser stopped.
    """
    import xml.parsers.expat

    parser = xml.parsers.expat.ParserCreate()
    try:
        parser.Parse(raw, True)
    except xml.parsers.expat.ExpatError as exc:
        raise MapDataError(f"well-formed XML to its end ({exc}); is the file cut short?") \
            from None
    except LookupError as exc:  # an XML declaration naming an unknown encoding
        raise MapDataError(f"an XML encoding Python knows ({exc})") from None


def check_no_stray_text(raw: bytes, text_elements: tuple[str, ...] = ()) -> None:
    """Refuse XML with text outside the elements that hold text (whole file, in C regexes).

    WHY: a damaged ``<`` turns ``<nd ref="7"/>`` into text; the XML stays well-formed and
    the way silently loses a node. Only ``text_elements`` (GraphML's ``<data>``) hold text.
    """
    found = len(_TEXT.findall(raw))
    allowed = 0
    if text_elements:
        names = b"|".join(re.escape(n.encode()) for n in text_elements)
        allowed = len(re.findall(rb"<(?:" + names + rb")\b[^>]*(?<!/)>[^<]*?[^\s<]", raw))
    if found != allowed:
        raise MapDataError(f"no text between its elements ({found - allowed} stray pieces of "
                           "text, e.g. a damaged '<')")


def check_edge_ends(table: EdgeTable, *, tolerance: float = 1.0) -> None:
    """Refuse edges whose geometry does not run from their ``u`` node to their ``v`` node.

    osmnx writes every edge's geometry between its two nodes; a geometry that starts or ends
    elsewhere (a damaged number, ``0x1F`` parsed as 31) would draw a street the graph does not
    have. ``tolerance`` is in the table's units (metres once projected).
    """
    if not table.n_edges:
        return
    first = table.coords[table.ptr[:-1]]
    last = table.coords[table.ptr[1:] - 1]
    with np.errstate(all="ignore"):
        off = np.maximum(np.hypot(*(first - table.node_xy[table.edge_u]).T),
                         np.hypot(*(last - table.node_xy[table.edge_v]).T))
    bad = ~(off <= tolerance)
    if bad.any():
        edge = int(np.flatnonzero(bad)[0])
        raise MapDataError(
            f"edge geometries from their source to their target node (edge {edge} ends "
            f"{off[edge]:.3g} m away)"
        )


def _lon_lat(crs: CRS, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lon, lat) of geographic ``xy``, whatever the CRS's axis order (``always_xy``)."""
    if crs.to_epsg() == 4326:
        return xy[:, 0], xy[:, 1]
    to_geo = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    with np.errstate(all="ignore"):
        return tuple(np.asarray(a, float) for a in to_geo.transform(xy[:, 0], xy[:, 1]))


def _first(mask: np.ndarray, xy: np.ndarray) -> str:
    """The first flagged point, short (a huge value echoed in a few characters)."""
    x, y = xy[int(np.flatnonzero(mask)[0])]
    return f"({x:.6g}, {y:.6g})"


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + n)`` for every (s, n), without a Python loop."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(np.asarray(starts, np.int64), lengths) + np.arange(total) - offsets


@dataclass
class EdgeTable:
    """Directed street edges with their geometries (metres in ``crs``).

    Attributes
    ----------
    node_ids
        original node identifiers (OSM ids or generated), one per node.
    node_xy
        ``[n, 2]`` node positions.
    edge_u, edge_v
        node indices of each directed edge.
    coords
        ``[P, 2]`` geometry points of all edges, edge ``e`` owning
        ``coords[ptr[e]:ptr[e + 1]]`` (at least two points, oriented u -> v).
    ptr
        ``[E + 1]`` offsets into ``coords``.
    crs
        the projected CRS of all coordinates.
    """

    node_ids: np.ndarray
    node_xy: np.ndarray
    edge_u: np.ndarray
    edge_v: np.ndarray
    coords: np.ndarray
    ptr: np.ndarray
    crs: str

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.node_xy)

    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return len(self.edge_u)

    @property
    def point_counts(self) -> np.ndarray:
        """Number of polyline points of each edge."""
        return np.diff(self.ptr)

    def subset(self, edges: np.ndarray) -> EdgeTable:
        """The table restricted to ``edges`` (indices or a boolean mask); nodes kept."""
        edges = np.flatnonzero(edges) if np.asarray(edges).dtype == bool else np.asarray(edges)
        counts = self.point_counts[edges]
        coords = self.coords[ranges(self.ptr[edges], counts)]
        ptr = np.concatenate([[0], np.cumsum(counts)])
        return EdgeTable(
            self.node_ids, self.node_xy, self.edge_u[edges], self.edge_v[edges], coords, ptr,
            self.crs,
        )

    def with_reverse(self, edges: np.ndarray) -> EdgeTable:
        """Append the opposite direction of ``edges`` (indices or mask), geometry reversed."""
        edges = np.flatnonzero(edges) if np.asarray(edges).dtype == bool else np.asarray(edges)
        if not len(edges):
            return self
        counts = self.point_counts[edges]
        starts = self.ptr[edges]
        local = ranges(np.zeros(len(edges), np.int64), counts)
        reverse = np.repeat(starts + counts - 1, counts) - local
        ptr = np.concatenate([self.ptr, self.ptr[-1] + np.cumsum(counts)])
        return EdgeTable(
            self.node_ids,
            self.node_xy,
            np.concatenate([self.edge_u, self.edge_v[edges]]),
            np.concatenate([self.edge_v, self.edge_u[edges]]),
            np.concatenate([self.coords, self.coords[reverse]]),
            ptr,
            self.crs,
        )

    def oriented(self) -> EdgeTable:
        """Geometries reversed where they start nearer ``v`` than ``u`` (osmnx omits order)."""
        first = self.coords[self.ptr[:-1]]
        last = self.coords[self.ptr[1:] - 1]
        at_u = self.node_xy[self.edge_u]
        with np.errstate(over="ignore", invalid="ignore"):  # bad files are refused later
            flip = ((first - at_u) ** 2).sum(1) > ((last - at_u) ** 2).sum(1)
        if not flip.any():
            return self
        counts = self.point_counts
        local = ranges(np.zeros(self.n_edges, np.int64), counts)
        start = np.repeat(self.ptr[:-1], counts)
        index = np.where(
            np.repeat(flip, counts), start + np.repeat(counts - 1, counts) - local, start + local
        )
        return EdgeTable(
            self.node_ids, self.node_xy, self.edge_u, self.edge_v, self.coords[index], self.ptr,
            self.crs,
        )

    def projected(self) -> EdgeTable:
        """Coordinates in metres: a geographic table is moved to its UTM zone (as osmnx).

        Every reader passes through here, so the coordinates are checked here, whole
        (:func:`check_coordinates`): a bad file is refused, never drawn off the Earth.
        """
        crs = parse_crs(self.crs)
        check_coordinates(self.node_xy, crs)
        check_coordinates(self.coords, crs)
        if crs.is_projected and crs.to_epsg() not in _NOT_METRIC:
            return self
        centre = self.node_xy.mean(axis=0)
        lon, lat = Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(*centre)
        zone = int(np.floor((lon + 180.0) / 6.0)) % 60 + 1
        target = f"EPSG:{32600 + zone if lat >= 0 else 32700 + zone}"
        move = Transformer.from_crs(crs, target, always_xy=True).transform
        node_xy = np.column_stack(move(self.node_xy[:, 0], self.node_xy[:, 1]))
        coords = np.column_stack(move(self.coords[:, 0], self.coords[:, 1]))
        return EdgeTable(
            self.node_ids, node_xy, self.edge_u, self.edge_v, coords, self.ptr, target
        )


def from_segments(
    start_xy: np.ndarray,
    end_xy: np.ndarray,
    *,
    crs: str,
    two_way: np.ndarray | bool = True,
    geometry: tuple[np.ndarray, np.ndarray] | None = None,
    snap_m: float = 0.5,
) -> EdgeTable:
    """Join street segments into a graph: segments whose ends coincide share a node.

    Ends are matched after rounding to ``snap_m`` (in the units of ``crs``; geographic
    tables are projected first so the tolerance is in metres).

    Parameters
    ----------
    start_xy, end_xy
        ``[E, 2]`` segment ends.
    crs
        CRS of the coordinates.
    two_way
        per segment (or for all), whether it can be travelled end -> start too.
    geometry
        optional ``(coords, ptr)`` polylines per segment (start to end).
    snap_m
        distance under which two ends are the same intersection.
    """
    start_xy = np.asarray(start_xy, float)
    end_xy = np.asarray(end_xy, float)
    n = len(start_xy)
    if geometry is None:
        coords = np.stack([start_xy, end_xy], axis=1).reshape(-1, 2)
        ptr = np.arange(0, 2 * n + 1, 2)
    else:
        coords, ptr = geometry
    ends = np.concatenate([start_xy, end_xy])
    table = EdgeTable(
        np.arange(0), ends, np.arange(n), np.arange(n) + n, np.asarray(coords, float),
        np.asarray(ptr), crs,
    ).projected()
    keys = np.round(table.node_xy / snap_m).astype(np.int64)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    node_xy = np.zeros((len(unique), 2))
    np.add.at(node_xy, inverse, table.node_xy)
    node_xy /= np.bincount(inverse, minlength=len(unique))[:, None]
    joined = EdgeTable(
        np.arange(len(unique), dtype=np.int64),
        node_xy,
        inverse[:n],
        inverse[n:],
        table.coords,
        table.ptr,
        table.crs,
    )
    both = np.broadcast_to(np.asarray(two_way, bool), (n,))
    return _join_duplicates(joined, both, snap_m=snap_m)


def _join_duplicates(table: EdgeTable, two_way: np.ndarray, *, snap_m: float) -> EdgeTable:
    """One street per set of duplicate segments, then the reverse of two-way streets.

    Duplicates are segments between the same two intersections (either direction) with the
    same shape (point count and, to ``snap_m``, the same mean point). Road files repeat
    segments (Cached-DFL's ``NewYork.csv``: 35,457 rows, 27,844 distinct segments); the
    authors' ``road_sim.generate_roadNet_pair_area_list`` adds each row to a
    ``networkx.DiGraph``, where a repeated edge is the same edge, so a repeated street is one
    street, not parallel streets that would weigh more in turn choices and placement. A
    street may be driven u -> v when any of its segments allows it (a one-way segment
    drawn each way is a two-way street).
    """
    u, v = table.edge_u, table.edge_v
    counts = table.point_counts
    mean = np.add.reduceat(table.coords, table.ptr[:-1], axis=0) / counts[:, None]
    keys = np.column_stack(
        [np.minimum(u, v), np.maximum(u, v), counts, np.round(mean / snap_m).astype(np.int64)]
    )
    _, first, group = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    group = group.ravel()
    along = u == u[first][group]  # drawn in the direction of the group's first segment
    forward = np.zeros(len(first), bool)
    backward = np.zeros(len(first), bool)
    np.logical_or.at(forward, group, along | two_way)
    np.logical_or.at(backward, group, ~along | two_way)
    backward &= u[first] != v[first]  # a loop's reverse is itself
    order = np.argsort(first)  # keep the file's order of first appearance
    streets = table.subset(first[order])
    forward, backward = forward[order], backward[order]
    out = streets.with_reverse(np.flatnonzero(backward))
    keep = np.concatenate([forward, np.ones(int(backward.sum()), bool)])
    return out if keep.all() else out.subset(keep)
