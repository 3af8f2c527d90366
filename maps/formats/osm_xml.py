"""OpenStreetMap XML extracts (``.osm``, ``.xml``, bzip2-compressed ``.osm.bz2``), read by osmnx.

Map data © OpenStreetMap contributors, available under the Open Database License (ODbL).
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import override

import numpy as np

from mobidfl.errors import ConfigError
from mobidfl.inflate import codec_of
from mobidfl.maps.edges import (
    EdgeTable,
    MapDataError,
    check_coordinates,
    check_no_stray_text,
    check_well_formed,
)
from mobidfl.maps.formats.base import MapFormat, inflated_bytes, register_map_format
from mobidfl.maps.network import table_from_graph

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


@register_map_format
class OsmXmlFormat(MapFormat):
    """OSM XML: checked whole, then read by osmnx.

    The bytes are checked by :func:`check_osm_bytes`; osmnx's graph is simplified, its largest
    weakly connected part kept and projected to UTM. A ``.osm.bz2`` is inflated once (capped) and
    osmnx reads the inflated copy.
    """

    name = "osm_xml"
    suffixes = (".osm", ".osm.bz2", ".xml")

    @override
    def check(self, path: Path, *, max_inflated: int | None = None) -> None:
        check_osm_xml(path, max_inflated=max_inflated)

    @override
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        import osmnx as ox  # here, not at the top: osmnx imports matplotlib's pyplot

        try:
            raw = inflated_bytes(path, max_inflated=max_inflated)
            check_osm_bytes(raw)
            graph = _graph_from_xml(path, raw)
            if not ox.projection.is_projected(graph.graph.get("crs", "EPSG:4326")):
                graph = ox.project_graph(graph)
            return table_from_graph(graph)
        # As osm_pbf.py: each format's read() turns a library's error into the one-line refusal.
        except (ConfigError, MapDataError):
            raise
        except Exception as exc:
            reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise ConfigError("map", str(path), f"a readable OSM street map ({reason})") \
                from None


def _graph_from_xml(path: Path, raw: bytes):
    """The osmnx graph of the file.

    A compressed file's already inflated ``raw`` is handed to osmnx as a plain temporary file, so
    nothing is inflated a second time.
    """
    import osmnx as ox

    if codec_of(path) is None:
        return ox.graph_from_xml(path, simplify=True, retain_all=False)
    with tempfile.TemporaryDirectory(prefix="mobidfl-osm-") as folder:
        plain = Path(folder) / "map.osm"
        plain.write_bytes(raw)
        return ox.graph_from_xml(plain, simplify=True, retain_all=False)


def check_osm_xml(path: Path, *, max_inflated: int | None = None) -> None:
    """Refuse an OSM XML file that is not whole: well-formed to ``</osm>``, every way's node there.

    WHY: osmnx silently drops ways whose nodes are missing, so an extract cut short loads
    as a smaller city. ``.osm.bz2`` is inflated to its end first (once, capped).

    Raises
    ------
    MapDataError
        what is missing (a cut file, a bad compressed stream, a missing node).
    """
    try:
        raw = inflated_bytes(path, max_inflated=max_inflated)
    except (OSError, EOFError) as exc:
        raise MapDataError(f"a readable file ({exc})") from None
    check_osm_bytes(raw)


def check_osm_bytes(raw: bytes) -> None:
    """:func:`check_osm_xml` on the file's (inflated) bytes."""
    check_well_formed(raw)
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
