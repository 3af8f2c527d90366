"""Road segments as CSV rows ``StartLat,StartLong,EndLat,EndLong`` (Cached-DFL's Manhattan data)."""

from __future__ import annotations

from pathlib import Path
from typing import override

import numpy as np

from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, from_segments
from mobidfl.maps.formats.base import MapFormat, register_map_format

SEGMENT_COLUMNS = ("StartLat", "StartLong", "EndLat", "EndLong")


# A registered MapFormat has this shape (name, suffixes, read): cf. osm_pbf.py.
@register_map_format
class SegmentsCsvFormat(MapFormat):
    """Straight road segments, one per CSV row (:func:`read_segments_csv`)."""

    name = "segments_csv"
    suffixes = (".csv",)

    @override
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        return read_segments_csv(path)


def read_segments_csv(path: Path) -> EdgeTable:
    """Road segments as rows ``StartLat,StartLong,EndLat,EndLong`` (WGS84), joined at ends.

    This is the column format of Cached-DFL's public Manhattan data (Wang et al., AAAI
    2025, authors' code). Every segment is a straight two-way street unless a ``oneway``
    column says otherwise (true = drivable from start to end only). Optional length
    columns are not needed: lengths come from the projected geometry. Repeated segments
    (same ends, either direction) are one street, as in the authors' ``networkx.DiGraph``
    (:func:`mobidfl.maps.edges.from_segments`).
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
