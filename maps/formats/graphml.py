"""GraphML street maps (osmnx's own format, momepy's bundled map), optionally gzipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import override

import shapely

from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, MapDataError, check_edge_ends
from mobidfl.maps.formats.base import MapFormat, inflated_bytes, register_map_format
from mobidfl.maps.graphml import check_whole, read_graphml


@register_map_format
class GraphmlFormat(MapFormat):
    """osmnx-style GraphML (directed, or undirected as momepy writes it).

    See :func:`mobidfl.maps.graphml.read_graphml`.
    """

    name = "graphml"
    suffixes = (".graphml", ".graphml.gz")

    @override
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        return read_graphml_map(path, max_inflated=max_inflated)

    @override
    def check(self, path: Path, *, max_inflated: int | None = None) -> None:
        raw = inflated_bytes(path, max_inflated=max_inflated)
        try:
            check_whole(raw)
        except ValueError as exc:
            raise MapDataError(str(exc)) from None


def read_graphml_map(path: Path, *, max_inflated: int | None = None) -> EdgeTable:
    """A GraphML street map, projected, every edge's geometry between its two nodes."""
    raw = None
    try:
        if path.name.lower().endswith(".gz"):  # inflated once, capped; then parsed from memory
            raw = inflated_bytes(path, max_inflated=max_inflated)
    except OSError as exc:
        raise ConfigError("map", str(path), f"a readable GraphML street map ({exc})") from None
    try:
        table = read_graphml(path, raw=raw).projected()
        check_edge_ends(table)
        return table
    except (ET.ParseError, ValueError, shapely.errors.GEOSException, OSError) as exc:
        raise ConfigError("map", str(path), f"a readable GraphML street map ({exc})") from None
