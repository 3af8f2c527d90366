"""Map layers: the running model as GeoJSON (agents, contacts, streets, areas, cells).

Pure functions of a :class:`mobidfl.model.world.MobiDFLModel`, testable without a browser. Why our
own layers instead of mesa-geo's ``make_geospace_component``: mesa-geo 0.9.3 (a) draws
GeoDataFrame layers with ``ipyleaflet.GeoJSON(element=...)``, which renders nothing; (b)
creates one new ipyleaflet marker *widget* per agent on every render (200 widget creations
and removals per step, slow and leaky); (c) reads positions from the GeoAgents' geometries,
which means rebuilding mesa-geo's r-tree each step (``sync_geometries``; mesa-geo's
tracker: https://github.com/projectmesa/mesa-geo/issues/23 and .../issues/104); (d) has no
hover/click callback to show an agent's details; and (e) always adds a web tile layer,
which breaks the offline default. Here every layer is one ``ipyleaflet.GeoJSON`` widget
(:class:`MapLayer`) whose ``data`` is replaced per step, built straight from the model's
position arrays.

Map data © OpenStreetMap contributors (ODbL).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import ipyleaflet
import numpy as np
import pandas as pd
import scipy.sparse as sp
import shapely
import shapely.geometry
import traitlets
from pyproj import Transformer

from mobidfl.analysis.app.look import (
    ABORTED_DASH,
    AGENT_OUTLINE,
    AREA_COLOURS,
    CONTACT_COLOUR,
    KIND_COLOURS,
    MAX_CONTACT_LINES,
    NOTHING_SENT,
    NOTHING_SENT_COLOUR,
    PROGRESS_COLOURS,
    PROGRESS_EDGES,
    PROGRESS_WEIGHTS,
    UNIT_SHAPES,
    accuracy_colour,
    progress_labels,
)
from mobidfl.model.maths.mixing import member_pairs
from mobidfl.model.world import MobiDFLModel
from mobidfl.settings import kinds_where


@functools.lru_cache(maxsize=16)
def _to_wgs84(crs: str) -> Transformer:
    """One transformer per map CRS (creating one costs milliseconds; we need it per step)."""
    return Transformer.from_crs(crs, "EPSG:4326", always_xy=True)


def lonlat(model: MobiDFLModel, xy: np.ndarray) -> np.ndarray:
    """Metres in the map CRS (... x 2) to WGS84 (lon, lat), same shape."""
    flat = np.asarray(xy, float).reshape(-1, 2)
    lon, lat = _to_wgs84(model.world_map.crs).transform(flat[:, 0], flat[:, 1])
    return np.stack([lon, lat], axis=-1).reshape(np.shape(xy))


def shape_size_m(model: MobiDFLModel) -> float:
    """Agent symbol radius in metres: about 1/70 of the map's larger side, 4..400 m.

    About 4 px at the zoom that fits the map; a fixed size of tens of metres would leave
    2-pixel dots on a city-scale map (``manhattan_grid`` is 15 km tall).
    """
    west, south, east, north = model.world_map.bounds
    return float(np.clip(max(east - west, north - south) / 70.0, 4.0, 400.0))


def agents_geojson(model: MobiDFLModel) -> dict[str, Any]:
    """One polygon per agent: shape by kind, fill by test accuracy (kind colour if none).

    Properties carry ``index`` (row in the model's arrays) so hover/click can find the agent.
    """
    size = shape_size_m(model)
    features: list[dict[str, Any]] = []
    for kind in dict.fromkeys(model.kind_of):
        members = np.flatnonzero(model.kind_of == kind)
        unit = UNIT_SHAPES[kind]
        rings = lonlat(model, model.position[members, None, :] + size * unit[None, :, :])
        rings = np.concatenate([rings, rings[:, :1]], axis=1).round(7)
        for row, index in enumerate(members):
            accuracy = float(model.accuracy[index])
            fill = accuracy_colour(accuracy) or KIND_COLOURS[kind]
            features.append(
                {
                    "type": "Feature",
                    "id": int(index),
                    "geometry": {"type": "Polygon", "coordinates": [rings[row].tolist()]},
                    "properties": {
                        "index": int(index),
                        "kind": kind,
                        "accuracy": round(accuracy, 4) if math.isfinite(accuracy) else None,
                        "style": {
                            "color": AGENT_OUTLINE,
                            "weight": 0.6,
                            "opacity": 0.9,
                            "fillColor": fill,
                            "fillOpacity": 0.95,
                        },
                    },
                }
            )
    features.sort(key=lambda f: f["id"])
    return {"type": "FeatureCollection", "features": features}


def contact_pairs(adjacency: sp.spmatrix) -> np.ndarray:
    """Pairs (i < j) that exchanged this step, shape (P, 2), from the symmetric adjacency."""
    return member_pairs(adjacency)


def link_progress(model: MobiDFLModel, pairs: np.ndarray) -> dict[str, np.ndarray] | None:
    """Each pair's transfers of the latest step, both directions summed.

    From the model's :attr:`mobidfl.model.learning.results.StepResult.transfers`; ``None`` when the
    step carried no link accounting (``link = "ideal"``, learning off, before step 1).

    Returns arrays aligned with ``pairs`` (P x 2): ``bytes_sent``, ``bytes_received``,
    ``aborted`` (messages cut at the contact's end or lost), ``fraction`` (received / sent,
    NaN where nothing was sent) and ``progress``, its class: :data:`NOTHING_SENT`, or k for
    the k-th bin of :data:`mobidfl.analysis.app.look.PROGRESS_EDGES` (the last: all arrived).
    Vectorised: one ``np.unique`` over the transfers and one ``searchsorted`` for the pairs.
    """
    step = getattr(model, "last_step", None)
    transfers = None if step is None else step.transfers
    if transfers is None:
        return None
    n = np.int64(model.n_agents)
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    sender, receiver = transfers["sender"], transfers["receiver"]
    keys = np.minimum(sender, receiver) * n + np.maximum(sender, receiver)
    unique, inverse = np.unique(keys, return_inverse=True)
    wanted = pairs.min(axis=1) * n + pairs.max(axis=1)
    at = np.minimum(np.searchsorted(unique, wanted), max(len(unique) - 1, 0))
    found = unique[at] == wanted if len(unique) else np.zeros(len(pairs), bool)
    out: dict[str, np.ndarray] = {}
    for column in ("bytes_sent", "bytes_received", "aborted"):
        sums = np.bincount(inverse, weights=transfers[column], minlength=len(unique))
        out[column] = np.where(found, sums[at] if len(unique) else 0.0, 0.0)
    sent, received = out["bytes_sent"], out["bytes_received"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["fraction"] = np.where(sent > 0, received / np.where(sent > 0, sent, 1.0), np.nan)
    bins = np.digitize(np.nan_to_num(out["fraction"]), PROGRESS_EDGES[:-1])
    out["progress"] = np.where(
        sent <= 0, NOTHING_SENT, np.where(received >= sent, len(PROGRESS_EDGES), bins)
    )
    return out


def contacts_geojson(model: MobiDFLModel, *, max_lines: int = MAX_CONTACT_LINES) -> dict:
    """The step's exchanges as lines between the agents' current positions.

    Without link accounting, one MultiLineString. With a link model, one
    MultiLineString per progress class of :func:`link_progress` and per aborted or not:
    colour and width by the share of the bytes sent that arrived (red to green, thicker
    when more arrived), dashed when a transfer was aborted or lost, grey when nothing was
    sent; each feature says its class (``progress``, ``label``, ``aborted``), its
    ``lines`` and the bytes sent and received over them. Above ``max_lines`` pairs an
    evenly spaced subset is drawn (the picture is saturated by then); every feature's
    ``drawn`` and ``total`` say how many were drawn of how many.
    """
    if max_lines < 0:
        msg = f"max_lines={max_lines} is invalid; allowed: an integer >= 0"
        raise ValueError(msg)
    pairs = contact_pairs(model.adjacency)
    total = len(pairs)
    if total > max_lines:
        pairs = pairs[np.linspace(0, total - 1, max_lines).astype(int)]
    ends = lonlat(model, model.position)[pairs].round(7) if len(pairs) else np.empty((0, 2, 2))
    counts = {"drawn": len(pairs), "total": total}
    progress = link_progress(model, pairs)
    if progress is None:
        feature = {
            "type": "Feature",
            "geometry": {"type": "MultiLineString", "coordinates": ends.tolist()},
            "properties": {
                **counts,
                "style": {"color": CONTACT_COLOUR, "weight": 1, "opacity": 0.35},
            },
        }
        return {"type": "FeatureCollection", "features": [feature] if len(pairs) else []}
    labels = progress_labels()
    features = []
    for code, label in labels.items():
        for aborted in (False, True):
            chosen = (progress["progress"] == code) & ((progress["aborted"] > 0) == aborted)
            if not chosen.any():
                continue
            style = {
                "color": NOTHING_SENT_COLOUR if code == NOTHING_SENT else PROGRESS_COLOURS[code],
                "weight": 1.0 if code == NOTHING_SENT else PROGRESS_WEIGHTS[code],
                "opacity": 0.5 if code == NOTHING_SENT else 0.85,
            }
            if aborted:
                style["dashArray"] = ABORTED_DASH
            features.append(
                {
                    "type": "Feature",
                    "geometry": {"type": "MultiLineString",
                                 "coordinates": ends[chosen].tolist()},
                    "properties": {
                        **counts,
                        "progress": code,
                        "label": label,
                        "aborted": aborted,
                        "lines": int(chosen.sum()),
                        "bytes_sent": float(progress["bytes_sent"][chosen].sum()),
                        "bytes_received": float(progress["bytes_received"][chosen].sum()),
                        "style": style,
                    },
                }
            )
    return {"type": "FeatureCollection", "features": features}


STREET_DETAIL_EDGES = 2000
"""Above this many streets the lines are drawn thinner (at a city's zoom thick lines merge)."""


def streets_geojson(model: MobiDFLModel) -> dict[str, Any]:
    """The street graph from its own geometry (works offline): drivable darker than walk-only.

    WHY this shape: a city-scale map (``manhattan_grid``: 9,176 walk edges) drawn as one
    feature per street class is two SVG paths in the browser, each street once (the two
    directions of a street share a line); the points go through one CRS transform and the
    per-street lists are slices of one list (no per-edge geometry objects, unlike a
    GeoDataFrame built street by street).
    """
    world = model.world_map
    walk, drive = world.walk, world.drive
    lo, hi = np.minimum(walk.edge_u, walk.edge_v), np.maximum(walk.edge_u, walk.edge_v)
    _, first = np.unique(lo.astype(np.int64) * len(walk.node_ids) + hi, return_index=True)
    edges = np.sort(first)
    walk_ends = pd.MultiIndex.from_arrays(
        [walk.node_ids[walk.edge_u[edges]], walk.node_ids[walk.edge_v[edges]]])
    drive_u, drive_v = drive.node_ids[drive.edge_u], drive.node_ids[drive.edge_v]
    drive_ends = pd.MultiIndex.from_arrays([np.r_[drive_u, drive_v], np.r_[drive_v, drive_u]])
    drivable = walk_ends.isin(drive_ends)
    points = lonlat(model, walk.pts_xy).round(6).tolist()
    starts, stops = walk.edge_pt0[edges], walk.edge_pt1[edges]
    thin = len(edges) > STREET_DETAIL_EDGES
    features = []
    for flag in (True, False):
        chosen = np.flatnonzero(drivable == flag)
        if not chosen.size:
            continue
        lines = [points[a:b] for a, b in zip(starts[chosen], stops[chosen], strict=True)]
        features.append(
            {
                "type": "Feature",
                "geometry": {"type": "MultiLineString", "coordinates": lines},
                "properties": {
                    "drivable": flag,
                    "streets": int(chosen.size),
                    "style": {
                        "color": "#555555" if flag else "#999999",
                        "weight": (1.0 if flag else 0.6) if thin else (2.5 if flag else 1.2),
                        "opacity": 0.7 if thin else 0.8,
                    },
                },
            }
        )
    return {"type": "FeatureCollection", "features": features}


def areas_geojson(model: MobiDFLModel) -> dict[str, Any]:
    """Map areas (k-means clusters of road nodes) as faint polygons: grid cells merged by area.

    Cells are made as one array of boxes and merged per area with
    ``shapely.coverage_union_all``, which merges edge-sharing boxes without the general
    overlay a GeoDataFrame ``dissolve`` runs (far slower: docs/performance/measurements.md).
    """
    world = model.world_map
    grid = world.grid
    cells = np.arange(grid.n_cells)
    rows, cols = grid.rc(cells)
    x0 = grid.x0 + cols * grid.cell_m
    y0 = grid.y0 + rows * grid.cell_m
    boxes = shapely.box(x0, y0, x0 + grid.cell_m, y0 + grid.cell_m)
    area_of_cell = np.asarray(world.area_of(grid.centres(cells)))
    features = []
    for area in np.unique(area_of_cell):
        merged = shapely.coverage_union_all(boxes[area_of_cell == area])
        merged = shapely.transform(merged, lambda xy: lonlat(model, xy))
        colour = AREA_COLOURS[int(area) % len(AREA_COLOURS)]
        features.append(
            {
                "type": "Feature",
                "geometry": shapely.geometry.mapping(shapely.set_precision(merged, 1e-7)),
                "properties": {
                    "area": int(area),
                    "style": {
                        "color": colour,
                        "weight": 1,
                        "opacity": 0.6,
                        "fillColor": colour,
                        "fillOpacity": 0.12,
                    },
                },
            }
        )
    return {"type": "FeatureCollection", "features": features}


def occupied_cells_geojson(model: MobiDFLModel) -> dict[str, Any]:
    """Grid cells where sensors or UAVs sit now (outlined), empty when there are none."""
    grid = model.world_map.grid
    mask = np.isin(model.kind_of, sorted(kinds_where(on_grid=True)))
    if not mask.any():
        return {"type": "FeatureCollection", "features": []}
    cells = np.unique(grid.cell_of(model.position[mask]))
    rows, cols = grid.rc(cells)
    x0 = grid.x0 + cols * grid.cell_m
    y0 = grid.y0 + rows * grid.cell_m
    corners = np.stack(
        [
            np.stack([x0, y0], -1),
            np.stack([x0 + grid.cell_m, y0], -1),
            np.stack([x0 + grid.cell_m, y0 + grid.cell_m], -1),
            np.stack([x0, y0 + grid.cell_m], -1),
            np.stack([x0, y0], -1),
        ],
        axis=1,
    )
    rings = lonlat(model, corners).round(7)
    polygons = [[ring.tolist()] for ring in rings]
    feature = {
        "type": "Feature",
        "geometry": {"type": "MultiPolygon", "coordinates": polygons},
        "properties": {
            "cells": int(len(cells)),
            "style": {
                "color": "#6a51a3",
                "weight": 1,
                "opacity": 0.7,
                "dashArray": "3 3",
                "fillColor": "#6a51a3",
                "fillOpacity": 0.08,
            },
        },
    }
    return {"type": "FeatureCollection", "features": [feature]}


def selection_geojson(model: MobiDFLModel, index: int | None) -> dict[str, Any]:
    """A halo under the selected agent and its contacts of this step."""
    if index is None or not 0 <= index < model.n_agents:
        return {"type": "FeatureCollection", "features": []}
    size = shape_size_m(model)
    ring = lonlat(model, model.position[index] + 2.2 * size * UNIT_SHAPES["vehicle"])
    ring = np.concatenate([ring, ring[:1]]).round(7).tolist()
    adjacency = sp.csr_matrix(model.adjacency)
    neighbours = adjacency.indices[adjacency.indptr[index] : adjacency.indptr[index + 1]]
    points = lonlat(model, model.position).round(7)
    lines = [[points[index].tolist(), points[j].tolist()] for j in neighbours]
    features = [
        {
            "type": "Feature",
            "geometry": {"type": "Polygon", "coordinates": [ring]},
            "properties": {
                "style": {"color": "#000000", "weight": 2, "fillColor": "#ffff00",
                          "fillOpacity": 0.6}
            },
        }
    ]
    if lines:
        features.append(
            {
                "type": "Feature",
                "geometry": {"type": "MultiLineString", "coordinates": lines},
                "properties": {"style": {"color": "#000000", "weight": 2, "opacity": 0.8}},
            }
        )
    return {"type": "FeatureCollection", "features": features}


def world_bounds(model: MobiDFLModel) -> tuple[float, float, float, float]:
    """(west, south, east, north) in the model's metres of its streets and every agent.

    WHY: agents can stand outside the street network's box (sensors on grid cells, UAVs over
    the area), and the map fits this box on load, so nothing the model holds is off screen.
    """
    west, south, east, north = model.world_map.bounds
    if model.n_agents:
        low, high = model.position.min(axis=0), model.position.max(axis=0)
        west, south = min(west, float(low[0])), min(south, float(low[1]))
        east, north = max(east, float(high[0])), max(north, float(high[1]))
    return west, south, east, north


def map_view(
    model: MobiDFLModel, *, width_px: float, height_px: float, padding_px: float = 0.0
) -> tuple[list[float], float]:
    """Centre (lat, lon) and the largest zoom that shows :func:`world_bounds` whole.

    Zoom in quarter steps, in a ``width_px`` x ``height_px`` map, ``padding_px`` kept free on every
    side.

    Web Mercator at zoom z draws 156,543.03 x cos(lat) / 2^z ground metres per pixel
    (256-pixel tiles), so the zoom that fits a span of s metres in p pixels is
    log2(156,543.03 cos(lat) p / s), rounded down to Leaflet's quarter steps.
    """
    west, south, east, north = world_bounds(model)
    (lon, lat) = lonlat(model, np.array([(west + east) / 2, (south + north) / 2]))
    width = max(width_px - 2 * padding_px, 1.0)
    height = max(height_px - 2 * padding_px, 1.0)
    metres_per_px = max((east - west) / width, (north - south) / height, 1e-3)
    zoom = math.log2(156543.03392 * math.cos(math.radians(lat)) / metres_per_px)
    return [float(lat), float(lon)], math.floor(zoom * 4) / 4


class MapLayer(ipyleaflet.GeoJSON):
    """An ``ipyleaflet.GeoJSON`` whose features go into a map pane and carry a CSS class.

    WHY: ipyleaflet passes a layer's ``o=True`` traits to Leaflet as options, and Leaflet's
    GeoJSON hands its options to every feature path it creates. With ``pane`` each layer gets
    its own SVG in its own pane, so a layer whose data changes is redrawn *in place* instead of
    on top of the others (Leaflet appends re-added paths at the end of a shared SVG); with
    ``class_name`` agents are findable in the page; ``interactive=False`` lets the mouse pass
    through lines to the agents below.
    """

    pane = traitlets.Unicode("overlayPane").tag(sync=True, o=True)
    class_name = traitlets.Unicode("").tag(sync=True, o=True)
    interactive = traitlets.Bool(True).tag(sync=True, o=True)


PANES: dict[str, dict[str, str]] = {
    "mobidfl_areas": {"zIndex": "402"},
    "mobidfl_streets": {"zIndex": "404"},
    "mobidfl_cells": {"zIndex": "406"},
    "mobidfl_contacts": {"zIndex": "408", "pointerEvents": "none"},
    "mobidfl_selection": {"zIndex": "410", "pointerEvents": "none"},
    "mobidfl_agents": {"zIndex": "412"},
}
OSM_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
