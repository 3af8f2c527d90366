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
import shapely

from mobidfl.atomic import atomic_path
from mobidfl.maps.sources import ATTRIBUTION
from mobidfl.model.world import LINK_COLUMNS, MobiDFLModel

START_TIME = pd.Timestamp("2026-01-01T08:00:00")
LAYERS = ("points", "tracks", "streets", "cells")


def points_layer(model: MobiDFLModel, *, start: pd.Timestamp = START_TIME) -> gpd.GeoDataFrame:
    """One point per agent and recorded step, timed from ``start`` (WGS84)."""
    table = model.agent_table()
    table["time"] = start + pd.to_timedelta(table["step"] * model.config.step_s, unit="s")
    geometry = gpd.points_from_xy(table["lon"], table["lat"])
    return gpd.GeoDataFrame(table, geometry=geometry, crs="EPSG:4326")


def tracks_layer(points: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """One LineString per agent (a Point for an agent recorded once), built in one call."""
    totals = [c for c in LINK_COLUMNS if c in points.columns]
    ordered = points.sort_values(["agent_id", "kind", "step"], kind="stable")
    agent = ordered["agent_id"].to_numpy()
    kind = ordered["kind"].to_numpy()
    new = np.ones(len(ordered), bool)
    new[1:] = (agent[1:] != agent[:-1]) | (kind[1:] != kind[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(ordered)) - 1
    steps = last - first + 1
    group = np.cumsum(new) - 1
    xy = ordered[["lon", "lat"]].to_numpy(float)
    geometry = np.empty(len(first), object)
    lines = steps >= 2
    if lines.any():
        rows = lines[group]
        _, idx = np.unique(group[rows], return_inverse=True)
        geometry[lines] = shapely.linestrings(xy[rows], indices=idx)
    if (~lines).any():
        geometry[~lines] = shapely.points(xy[first[~lines]])
    times = ordered["time"]
    table = {
        "agent_id": agent[first].astype(int),
        "kind": kind[first],
        "steps": steps.astype(int),
        "start": times.iloc[first].to_numpy(),
        "end": times.iloc[last].to_numpy(),
        **{c: ordered[c].to_numpy(float)[last] for c in totals},
    }
    return gpd.GeoDataFrame(table, geometry=geometry, crs="EPSG:4326")


def _wgs84(model: MobiDFLModel, geometries: np.ndarray) -> np.ndarray:
    """Every vertex of ``geometries`` from the map's metric CRS to WGS84 in one PROJ call."""
    return shapely.transform(geometries, model.world_map.to_wgs84)


def streets_layer(model: MobiDFLModel) -> gpd.GeoDataFrame:
    """The walking network's edges (the drive network's are flagged ``drivable``)."""
    net, drive = model.world_map.walk, model.world_map.drive
    ids = np.asarray(net.node_ids)
    u, v = ids[net.edge_u], ids[net.edge_v]
    drive_ids = np.asarray(drive.node_ids)
    drive_pairs = pd.MultiIndex.from_arrays([drive_ids[drive.edge_u], drive_ids[drive.edge_v]])
    counts = (net.edge_pt1 - net.edge_pt0).astype(np.int64)
    vertex = np.repeat(net.edge_pt0 - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    edge = np.repeat(np.arange(net.n_edges), counts)
    lines = shapely.linestrings(net.pts_xy[vertex], indices=edge)
    return gpd.GeoDataFrame(
        {
            "u": u.astype(str),
            "v": v.astype(str),
            "length_m": np.asarray(net.edge_len, float),
            "drivable": pd.MultiIndex.from_arrays([u, v]).isin(drive_pairs),
            "area": np.asarray(model.world_map.node_area)[net.edge_u].astype(int),
        },
        geometry=_wgs84(model, lines),
        crs="EPSG:4326",
    )


def cells_layer(model: MobiDFLModel) -> gpd.GeoDataFrame:
    """The grid cells (sensors, UAVs) with the area each belongs to."""
    grid = model.world_map.grid
    cells = np.arange(grid.n_cells)
    rows, cols = grid.rc(cells)
    x, y = grid.x0 + cols * grid.cell_m, grid.y0 + rows * grid.cell_m
    boxes = shapely.box(x, y, x + grid.cell_m, y + grid.cell_m)
    return gpd.GeoDataFrame(
        {
            "cell": cells,
            "row": rows,
            "col": cols,
            "area": model.world_map.area_of(grid.centres(cells)),
        },
        geometry=_wgs84(model, boxes),
        crs="EPSG:4326",
    )


def export_layers(model: MobiDFLModel) -> dict[str, gpd.GeoDataFrame]:
    """The layers of a GIS export (points, tracks, streets, cells), with the map's attribution."""
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

