"""Eclipse SUMO networks (``.net.xml``, gzipped ``.net.xml.gz``): their drivable streets."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zlib
from pathlib import Path
from typing import override

import numpy as np

from mobidfl.errors import ConfigError
from mobidfl.inflate import codec_of, inflated_reader
from mobidfl.maps.edges import EdgeTable, MapDataError, from_segments, parse_crs
from mobidfl.maps.formats.base import MapFormat, max_inflated_bytes, register_map_format

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


@register_map_format
class SumoNetFormat(MapFormat):
    """A SUMO network's drivable edges, one-way each (:func:`read_sumo_net`)."""

    name = "sumo_net"
    suffixes = SUMO_SUFFIXES

    @override
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        return read_sumo_net(path, max_inflated=max_inflated)


def read_sumo_net(path: Path, *, max_inflated: int | None = None) -> EdgeTable:
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
    A gzipped network is inflated while it is parsed, once, and refused as soon as it passes
    ``max_inflated`` bytes (default :data:`mobidfl.inflate.MAX_INFLATED_BYTES`).
    """
    codec = codec_of(path)
    cap = max_inflated_bytes(max_inflated)
    junctions: dict[str, tuple[float, float]] = {}
    edges: list[tuple[str, str, str]] = []
    offset = (0.0, 0.0)
    crs = LOCAL_PLANE_CRS
    drivable, lane_shape = False, ""
    try:
        with Path(path).open("rb") as raw:
            fh = raw if codec is None else inflated_reader(raw, codec=codec, cap=cap)
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
