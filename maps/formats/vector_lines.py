"""Streets as LineStrings in a GeoPackage or GeoJSON file (e.g. exported from QGIS)."""

from __future__ import annotations

from pathlib import Path
from typing import override

import numpy as np
import shapely

from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, from_segments
from mobidfl.maps.formats.base import MapFormat, register_map_format


@register_map_format
class VectorLinesFormat(MapFormat):
    """The first line layer of a vector file (:func:`read_line_file`)."""

    name = "vector_lines"
    suffixes = (".gpkg", ".geojson", ".json")

    @override
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        return read_line_file(path)


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
