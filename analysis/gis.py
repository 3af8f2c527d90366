"""GIS export of a run: trajectories, streets and cells that QGIS, GDAL and movingpandas open.

Layers (all WGS84, EPSG:4326):

* ``points``: one Point per agent per recorded step (agent_id, kind, step, time, ...);
  ``movingpandas.TrajectoryCollection(points, traj_id_col="agent_id", t="time")`` works.
* ``tracks``: one LineString per agent; with a link model also its totals at
  the last recorded step (bytes sent and received, aborted transfers, airtime, energy and
  its radio / compute / flight parts; the points carry the running totals per step).
* ``streets``: the street graph's edges.
* ``cells``: the grid cells (sensors, UAVs) with their area.

Map data © OpenStreetMap contributors, ODbL (stored in each layer's ``attribution``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
from pyproj import Transformer
from shapely.geometry import LineString, Point
from shapely.ops import transform

from maps.sources import ATTRIBUTION
from mobidfl.atomic import atomic_path
from model.world import LINK_COLUMNS, MobiDFLModel

START_TIME = pd.Timestamp("2026-01-01T08:00:00")
LAYERS = ("points", "tracks", "streets", "cells")


def points_layer(model: MobiDFLModel, *, start: pd.Timestamp = START_TIME) -> gpd.GeoDataFrame:
    table = model.agent_table()
    table["time"] = start + pd.to_timedelta(table["step"] * model.config.step_s, unit="s")
    geometry = gpd.points_from_xy(table["lon"], table["lat"])
    return gpd.GeoDataFrame(table, geometry=geometry, crs="EPSG:4326")


def tracks_layer(points: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    rows = []
    totals = [c for c in LINK_COLUMNS if c in points.columns]
    for (agent_id, kind), group in points.sort_values("step").groupby(["agent_id", "kind"]):
        coords = list(zip(group["lon"], group["lat"], strict=True))
        geometry = LineString(coords) if len(coords) >= 2 else Point(coords[0])
        rows.append(
            {
                "agent_id": int(agent_id),
                "kind": kind,
                "steps": int(len(group)),
                "start": group["time"].iloc[0],
                "end": group["time"].iloc[-1],
                **{c: float(group[c].iloc[-1]) for c in totals},
                "geometry": geometry,
            }
        )
    return gpd.GeoDataFrame(rows, geometry="geometry", crs="EPSG:4326")


def streets_layer(model: MobiDFLModel) -> gpd.GeoDataFrame:
    net = model.world_map.walk
    to_wgs = Transformer.from_crs(model.world_map.crs, "EPSG:4326", always_xy=True).transform
    drive_pairs = set(
        zip(model.world_map.drive.node_ids[model.world_map.drive.edge_u],
            model.world_map.drive.node_ids[model.world_map.drive.edge_v], strict=True)
    )
    rows = []
    for e in range(net.n_edges):
        coords = net.pts_xy[net.edge_pt0[e] : net.edge_pt1[e]]
        u, v = net.node_ids[net.edge_u[e]], net.node_ids[net.edge_v[e]]
        rows.append(
            {
                "u": str(u),
                "v": str(v),
                "length_m": float(net.edge_len[e]),
                "drivable": (u, v) in drive_pairs,
                "area": int(model.world_map.node_area[net.edge_u[e]]),
                "geometry": transform(to_wgs, LineString(coords)),
            }
        )
    return gpd.GeoDataFrame(rows, geometry="geometry", crs="EPSG:4326")


def cells_layer(model: MobiDFLModel) -> gpd.GeoDataFrame:
    grid = model.world_map.grid
    to_wgs = Transformer.from_crs(model.world_map.crs, "EPSG:4326", always_xy=True).transform
    cells = np.arange(grid.n_cells)
    rows, cols = grid.rc(cells)
    return gpd.GeoDataFrame(
        {
            "cell": cells,
            "row": rows,
            "col": cols,
            "area": model.world_map.area_of(grid.centres(cells)),
            "geometry": [transform(to_wgs, grid.polygon(c)) for c in cells],
        },
        geometry="geometry",
        crs="EPSG:4326",
    )


def export_layers(model: MobiDFLModel) -> dict[str, gpd.GeoDataFrame]:
    points = points_layer(model)
    layers = {
        "points": points,
        "tracks": tracks_layer(points),
        "streets": streets_layer(model),
        "cells": cells_layer(model),
    }
    for frame in layers.values():
        frame.attrs["attribution"] = ATTRIBUTION
    return layers


def write_gis(model: MobiDFLModel, out_dir: str | Path, *, geojson: bool = False) -> list[Path]:
    """Write ``trajectories.gpkg`` (and ``<layer>.geojson`` files) into ``out_dir``."""
    out_dir = Path(out_dir)
    written = []
    gpkg = out_dir / "trajectories.gpkg"
    layers = export_layers(model)
    with atomic_path(gpkg) as partial:  # every layer, or the previous file
        for name, frame in layers.items():
            frame = frame.copy()
            frame["attribution"] = ATTRIBUTION
            _to_file(frame, partial, gpkg, layer=name, driver="GPKG")
            if geojson:
                path = out_dir / f"{name}.geojson"
                with atomic_path(path) as one:
                    _to_file(frame, one, path, driver="GeoJSON")
                written.append(path)
    written.insert(0, gpkg)
    return written


def _to_file(frame: gpd.GeoDataFrame, partial: Path, final: Path, **options: str) -> None:
    """``frame.to_file``, a failed GDAL write raised as the ``OSError`` it is underneath.

    GDAL reports a full disk or a read-only folder as its own error types; the CLI turns an
    ``OSError`` naming the file into its one line, so the cause is recovered from the folder.
    """
    try:
        frame.to_file(partial, **options)
    except OSError:
        raise
    except Exception as exc:  # pyogrio's DataSourceError, DataLayerError, FeatureError
        folder = final.parent
        stat = os.statvfs(folder)
        if stat.f_flag & os.ST_RDONLY or not os.access(folder, os.W_OK):
            code = errno.EROFS
        elif stat.f_bavail * stat.f_frsize < 1 << 20:
            code = errno.ENOSPC
        else:
            code = errno.EIO
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        why = os.strerror(code) if code != errno.EIO else f"GDAL: {first[:200]}"
        raise OSError(code, why, str(final)) from None

