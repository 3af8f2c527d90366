"""Pieces of the interactive app (``solara run app.py``): map layers, plots, panels.

The app is Mesa's ``SolaraViz`` layout (parameter inputs, draggable grid) around the
components below, with our own Step/Play/Reset (:func:`QueuedController`: a click during a
step is queued, never lost). The pure functions turn a running
:class:`model.world.MobiDFLModel` into GeoJSON and figures, so they are testable without a
browser; the ``@solara.component`` functions only arrange them.

Why our own map component instead of mesa-geo's ``make_geospace_component``: mesa-geo
0.9.3 (a) draws GeoDataFrame layers with ``ipyleaflet.GeoJSON(element=...)``, which renders
nothing; (b) creates one new ipyleaflet marker *widget* per agent on every render (200
widget creations and removals per step, slow and leaky); (c) reads positions from the
GeoAgents' geometries, which means rebuilding mesa-geo's r-tree each step
(``sync_geometries``, mesa-geo issues #23, #104); (d) has no hover/click callback to show an
agent's details; and (e) always adds a web tile layer, which breaks the offline default.
Here every layer is one ``ipyleaflet.GeoJSON`` widget whose ``data`` is replaced per step
(passed as ``data=``), built straight from the model's position arrays.

Why our own plots instead of ``mesa.visualization.make_plot_component``: its column list is
fixed when the page is built, but the accuracy columns (``acc_<kind>``,
``acc_policy_<policy>``) depend on the kinds and policies chosen, which change on Reset.

Map data © OpenStreetMap contributors (ODbL).
"""

from __future__ import annotations

import functools
import html
import math
import shlex
import threading
import time
from collections.abc import Mapping
from typing import Any

import ipyleaflet
import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
import scipy.sparse as sp
import shapely
import shapely.geometry
import solara
import solara.lab
import traitlets
from matplotlib.figure import Figure
from mesa.visualization.solara_viz import (
    ComponentsView,
    ModelCreator,
    ShowSteps,
    _build_model_init_kwargs,
)
from mesa.visualization.utils import force_update, update_counter
from pyproj import Transformer
from solara.server import kernel_context

from maps.sources import ATTRIBUTION, BUNDLED
from model.config import COUNT_SETTING, KINDS, Config, mobility_fit, parse_value
from model.world import MobiDFLModel

# --- look ------------------------------------------------------------------------------
KIND_COLOURS: dict[str, str] = {
    "vehicle": "#1f77b4",
    "pedestrian": "#ff7f0e",
    "sensor": "#2ca02c",
    "uav": "#d62728",
}
"""Kind colours: plot lines per kind and agent fill when learning is off."""

KIND_SHAPES: dict[str, str] = {
    "vehicle": "circle",
    "pedestrian": "triangle",
    "sensor": "square",
    "uav": "diamond",
}
AREA_COLOURS = ("#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5")
CONTACT_COLOUR = "#e6550d"
AGENT_OUTLINE = "#303030"
AGENT_CLASS = "mobidfl-agent"
"""CSS class of every agent shape on the map (browser tests and user styling find them)."""
MAX_CONTACT_LINES = 2000
"""More contact lines than this are thinned for drawing (all are still counted)."""
MAP_HEIGHT_PX = 285
_MAP_WIDTH_GUESS_PX = 460  # half the grid at 1280 px; only used to pick the initial zoom
_ACCURACY_LUT = [
    matplotlib.colors.to_hex(c) for c in matplotlib.colormaps["viridis"](np.linspace(0, 1, 101))
]


def _unit_shape(shape: str) -> np.ndarray:
    """Vertices (k x 2) of a shape of radius 1 around the origin, closed ring not repeated."""
    if shape == "circle":
        angles = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    elif shape == "triangle":
        angles = np.pi / 2 + np.array([0, 2, 4]) * np.pi / 3
    elif shape == "square":
        angles = np.pi / 4 + np.arange(4) * np.pi / 2
    elif shape == "diamond":
        angles = np.arange(4) * np.pi / 2
    else:
        msg = f"shape={shape!r} is not known; allowed: circle, triangle, square, diamond"
        raise ValueError(msg)
    scale = 1.25 if shape in ("triangle", "diamond") else 1.0  # same visual weight
    return scale * np.stack([np.cos(angles), np.sin(angles)], axis=-1)


_UNIT_SHAPES = {kind: _unit_shape(shape) for kind, shape in KIND_SHAPES.items()}


def accuracy_colour(accuracy: float) -> str | None:
    """Viridis colour of an accuracy in [0, 1]; ``None`` for NaN (not evaluated)."""
    if not math.isfinite(accuracy):
        return None
    return _ACCURACY_LUT[int(round(min(max(accuracy, 0.0), 1.0) * 100))]


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

    About 4 px at the zoom that fits the map; the old 60 m cap left 2-pixel dots on a
    city-scale map (``manhattan_grid`` is 15 km tall).
    """
    west, south, east, north = model.world_map.bounds
    return float(np.clip(max(east - west, north - south) / 70.0, 4.0, 400.0))


# --- GeoJSON layers --------------------------------------------------------------------
def agents_geojson(model: MobiDFLModel) -> dict[str, Any]:
    """One polygon per agent: shape by kind, fill by test accuracy (kind colour if none).

    Properties carry ``index`` (row in the model's arrays) so hover/click can find the agent.
    """
    size = shape_size_m(model)
    features: list[dict[str, Any]] = []
    for kind in dict.fromkeys(model.kind_of):
        members = np.flatnonzero(model.kind_of == kind)
        unit = _UNIT_SHAPES[kind]
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
    upper = sp.triu(sp.csr_matrix(adjacency), k=1).tocoo()
    return np.stack([upper.row, upper.col], axis=-1).astype(int)


def contacts_geojson(model: MobiDFLModel, *, max_lines: int = MAX_CONTACT_LINES) -> dict:
    """This step's exchanges as one MultiLineString between the agents' current positions.

    Above ``max_lines`` pairs an evenly spaced subset is drawn (the picture is saturated by
    then); the properties say how many were drawn of how many.
    """
    if max_lines < 0:
        msg = f"max_lines={max_lines} is invalid; allowed: an integer >= 0"
        raise ValueError(msg)
    pairs = contact_pairs(model.adjacency)
    total = len(pairs)
    if total > max_lines:
        pairs = pairs[np.linspace(0, total - 1, max_lines).astype(int)]
    ends = lonlat(model, model.position)[pairs].round(7) if len(pairs) else np.empty((0, 2, 2))
    feature = {
        "type": "Feature",
        "geometry": {"type": "MultiLineString", "coordinates": ends.tolist()},
        "properties": {
            "drawn": len(pairs),
            "total": total,
            "style": {"color": CONTACT_COLOUR, "weight": 1, "opacity": 0.35},
        },
    }
    return {"type": "FeatureCollection", "features": [feature] if len(pairs) else []}


STREET_DETAIL_EDGES = 2000
"""Above this many streets the lines are drawn thinner (at a city's zoom thick lines merge)."""


def streets_geojson(model: MobiDFLModel) -> dict[str, Any]:
    """The street graph from its own geometry (works offline): drivable darker than walk-only.

    WHY this shape: a city-scale map (``manhattan_grid``: 9,176 walk edges) drawn as one
    feature per street class is two SVG paths in the browser, each street once (the two
    directions of a street share a line); the points go through one CRS transform and the
    per-street lists are slices of one list (no per-edge geometry objects): about 10x faster
    than a GeoDataFrame built street by street.
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
    ``shapely.coverage_union_all`` (0.03 s on ``manhattan_grid``, where a GeoDataFrame
    ``dissolve`` took 1.8 s).
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
    mask = np.isin(model.kind_of, ("sensor", "uav"))
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
    ring = lonlat(model, model.position[index] + 2.2 * size * _UNIT_SHAPES["vehicle"])
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


def map_view(model: MobiDFLModel, *, width_px: int, height_px: int) -> tuple[list[float], float]:
    """Centre (lat, lon) and a zoom (quarter steps) that fits the map's bounds in the view."""
    west, south, east, north = model.world_map.bounds
    (lon, lat) = lonlat(model, np.array([(west + east) / 2, (south + north) / 2]))
    metres_per_px = max((east - west) / width_px, (north - south) / height_px, 1e-3)
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


# --- status and details ------------------------------------------------------------------
def clock(seconds: float) -> str:
    """Simulated time as H:MM:SS."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def mean_accuracy(model: MobiDFLModel) -> float:
    """Mean test accuracy over evaluated agents (NaN when learning is off)."""
    values = model.accuracy[np.isfinite(model.accuracy)]
    return float(values.mean()) if values.size else float("nan")


def status_text(model: MobiDFLModel) -> str:
    """The one-line summary: step, simulated time, mean accuracy, contacts, step duration."""
    accuracy = mean_accuracy(model)
    parts = [
        f"Step {model.steps}",
        f"simulated time {clock(model.steps * model.config.step_s)}",
        f"mean accuracy {accuracy:.3f}" if math.isfinite(accuracy)
        else "learning off" if model.learner is None
        else "accuracy from step 1",  # step 0 is not evaluated unless eval_initial
        f"{int(model.adjacency.nnz // 2)} contacts",
    ]
    seconds = getattr(model, "last_step_s", float("nan"))
    if math.isfinite(seconds):
        parts.append(f"step took {seconds:.2f} s")
    return " · ".join(parts)


def legend_html(model: MobiDFLModel, contacts: Mapping[str, Any]) -> str:
    """Kinds (shape, count), accuracy colour bar, contact line key and the OSM credit."""
    icons = {
        "circle": '<circle cx="7" cy="7" r="5.5"/>',
        "triangle": '<polygon points="7,1 13,12.5 1,12.5"/>',
        "square": '<rect x="2" y="2" width="10" height="10"/>',
        "diamond": '<polygon points="7,0.5 13.5,7 7,13.5 0.5,7"/>',
    }
    parts = []
    for kind in dict.fromkeys(model.kind_of):
        count = int((model.kind_of == kind).sum())
        fill = KIND_COLOURS[kind] if model.learner is None else "#bbbbbb"
        parts.append(
            f'<span style="margin-right:8px"><svg width="14" height="14" '
            f'style="vertical-align:middle" fill="{fill}" stroke="{AGENT_OUTLINE}">'
            f"{icons[KIND_SHAPES[kind]]}</svg> {kind} {count}</span>"
        )
    if model.learner is not None:
        gradient = ",".join(_ACCURACY_LUT[::10])
        parts.append(
            '<span style="margin-right:8px">accuracy 0 <span style="display:inline-block;'
            f'width:70px;height:9px;background:linear-gradient(90deg,{gradient})"></span> 1</span>'
        )
    drawn, total = contacts.get("drawn", 0), contacts.get("total", 0)
    thinned = f" ({drawn} of {total} drawn)" if drawn < total else ""
    parts.append(
        f'<span style="margin-right:8px"><span style="display:inline-block;width:18px;'
        f'border-top:2px solid {CONTACT_COLOUR};vertical-align:middle"></span> '
        f"exchange this step{thinned}</span>"
    )
    parts.append(f'<span style="color:#777">Map data {html.escape(ATTRIBUTION)}</span>')
    return '<div style="font-size:11px;line-height:1.5">' + "".join(parts) + "</div>"


def agent_details(model: MobiDFLModel, index: int | None) -> dict[str, Any] | None:
    """``agent.describe()`` of agent ``index`` (row in the arrays), or ``None``."""
    if index is None or not 0 <= index < model.n_agents:
        return None
    return model.device_agents[index].describe()


def details_html(details: Mapping[str, Any]) -> str:
    """A small table of an agent's details with its label histogram as bars."""
    rows = []
    for key, value in details.items():
        if key == "labels":
            continue
        rows.append(
            f'<tr><td style="color:#666;padding-right:10px">{html.escape(str(key))}</td>'
            f"<td>{html.escape(str(value))}</td></tr>"
        )
    labels = list(details.get("labels") or [])
    bars = ""
    if labels:
        top = max(max(labels), 1)
        cells = "".join(
            '<div style="display:inline-block;width:18px;margin-right:2px;text-align:center">'
            f'<div style="height:60px;display:flex;align-items:flex-end">'
            f'<div style="width:100%;height:{60 * n / top:.0f}px;background:#4c72b0"></div></div>'
            f'<div style="font-size:10px">{label}</div></div>'
            for label, n in enumerate(labels)
        )
        bars = (
            '<div style="margin-top:6px;font-size:12px;color:#666">training labels '
            f"(samples per class, {sum(labels)} in all)</div><div>{cells}</div>"
        )
    return (
        '<table class="mobidfl-agent-details" style="font-size:13px">'
        + "".join(rows)
        + "</table>"
        + bars
    )


# --- figures -----------------------------------------------------------------------------
def _figure() -> tuple[Figure, Any]:
    """A small figure with fixed margins (a layout engine costs ~2x the drawing time here)."""
    figure = Figure(figsize=(4.6, 3.3), dpi=72)
    figure.subplots_adjust(left=0.17, right=0.97, bottom=0.14, top=0.9)
    return figure, figure.subplots()


def _series(model: MobiDFLModel, column: str) -> np.ndarray:
    return np.asarray(model.datacollector.model_vars.get(column, []), float)


def _finish(ax: Any, model: MobiDFLModel, *, title: str, ylabel: str) -> None:
    """Shared axes look: integer steps from 0, grid, title."""
    ax.set_xlim(-0.2, max(model.steps, 1) + 0.2)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)


def accuracy_figure(model: MobiDFLModel) -> Figure:
    """Mean test accuracy per kind (solid), per policy when kinds differ (dashed), overall.

    Each line has an SVG id ``acc-<name>`` with one marker per step (browser tests count them).
    """
    figure, ax = _figure()
    columns = model.datacollector.model_vars
    if "acc_mean" not in columns:
        ax.text(0.5, 0.5, "learning off", ha="center", va="center", transform=ax.transAxes)
    else:
        steps = np.arange(len(columns["acc_mean"]))
        kinds = [c.removeprefix("acc_") for c in columns if c.removeprefix("acc_") in KINDS]
        for kind in kinds:
            (line,) = ax.plot(steps, _series(model, f"acc_{kind}"), "-o", ms=3,
                              color=KIND_COLOURS[kind], label=kind)
            line.set_gid(f"acc-{kind}")
        for column in [c for c in columns if c.startswith("acc_policy_")]:
            policy = column.removeprefix("acc_policy_")
            (line,) = ax.plot(
                steps, _series(model, column), "--s", ms=3, label=f"{policy} (policy)"
            )
            line.set_gid(f"acc-policy-{policy}")
        if len(kinds) > 1:
            (line,) = ax.plot(steps, _series(model, "acc_mean"), "-o", ms=3, color="black",
                              lw=2, label="all")
            line.set_gid("acc-mean")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8, loc="best")
    _finish(ax, model, title="Mean accuracy per kind / policy", ylabel="test accuracy")
    return figure


def contacts_figure(model: MobiDFLModel) -> Figure:
    """Contact pairs per step."""
    figure, ax = _figure()
    contacts = _series(model, "contacts")
    (line,) = ax.plot(np.arange(len(contacts)), contacts, "-o", ms=3, color=CONTACT_COLOUR)
    line.set_gid("contacts")
    ax.set_ylim(bottom=0)
    _finish(ax, model, title="Contacts per step", ylabel="contact pairs")
    return figure


def neighbours_figure(model: MobiDFLModel) -> Figure:
    """Cumulative distinct neighbours per mobility class (HM/LM, de Heredia 2024 App. B) and
    per kind."""
    figure, ax = _figure()
    history: dict[str, list[float]] = getattr(model, "distinct_history", {})
    for label, values in history.items():
        kind = label.split(" ")[0]
        ax.plot(np.arange(len(values)), values, "-", color=KIND_COLOURS.get(kind), label=label)
    for column, label, style in (
        ("distinct_neighbours_hm", "HM (high mobility)", "k-o"),
        ("distinct_neighbours_lm", "LM (low mobility)", "k--o"),
    ):
        values = _series(model, column)
        if values.size:
            ax.plot(np.arange(len(values)), values, style, ms=3, label=label)
    _finish(ax, model, title="Cumulative distinct neighbours", ylabel="distinct neighbours (mean)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left")
    return figure


# --- the model as the app builds it --------------------------------------------------------
class AppModel(MobiDFLModel):
    """``MobiDFLModel`` with the app's inputs: a map chooser and a bad-input fallback.

    WHY: SolaraViz re-creates the model as ``type(model)(**inputs)`` on Reset and shows a raw
    traceback when that raises. Here a setting the model rejects (a mistyped map path, a
    dataset whose files are missing, too many sensors for the grid) leaves a one-line message
    in ``app_error`` and builds ``fallback`` settings instead, so the page stays usable.

    Args:
        map: a bundled map name (the Select input).
        map_file: free text (a file path or any ``map`` spec); overrides ``map`` when set.
        fallback: settings to use when these are rejected (``None``: raise instead).
        **settings: public settings of :class:`model.config.Config`.
    """

    def __init__(
        self,
        *,
        map: str = "nyc_uws",  # noqa: A002 - the public setting's name
        map_file: str = "",
        fallback: Mapping[str, Any] | None = None,
        scenario: Any = None,
        **settings: Any,
    ) -> None:
        # Mesa's Reset passes its default (empty) ``scenario``; all our inputs are settings.
        del scenario
        self.app_error: str | None = None
        try:
            super().__init__(**self.model_settings(map=map, map_file=map_file, **settings))
        except (ValueError, OSError, RuntimeError, KeyError) as exc:
            if fallback is None:
                raise
            self.app_error = f"{type(exc).__name__}: {exc} (showing the default scenario)"
            super().__init__(**self.model_settings(**fallback))
        self.last_step_s = float("nan")
        self.distinct_history: dict[str, list[float]] = {}
        self._record_distinct()
        self.completed_steps = self.steps

    @staticmethod
    def model_settings(
        *, map: str = "nyc_uws", map_file: str = "", **settings: Any  # noqa: A002
    ) -> dict[str, Any]:
        """The app's inputs as :class:`MobiDFLModel` settings (``map_file`` wins over ``map``).

        SolaraViz passes every input, but an input left at its start value is not a choice:
        with a preset selected, such inputs are dropped so the preset fills them; without
        one, untouched mobility and radius inputs are dropped so that a chosen policy can
        bring its own (``requires`` / ``defaults``, model.config).
        """
        start = initial_settings(model_params())
        out = {"map": map_file.strip() or map, **settings}
        preset = bool(out.get("preset"))
        for name in list(out):
            if name == "preset" or name not in start or out[name] != start[name]:
                continue
            if preset or name.endswith("_mobility") or name == "radius_m":
                del out[name]
        if preset and not map_file.strip() and map == start.get("map"):
            out.pop("map", None)
        return out

    def step(self) -> None:
        started = time.perf_counter()
        super().step()
        self.last_step_s = time.perf_counter() - started
        self._record_distinct()
        self.completed_steps = self.steps  # last: a redraw keyed on it never sees half a step

    def _record_distinct(self) -> None:
        """Mean cumulative distinct neighbours per kind (= per mobility model) this step."""
        for kind in dict.fromkeys(self.kind_of):
            label = f"{kind} ({self.config.kind(kind).mobility})"
            mask = self.kind_of == kind
            value = float(self.distinct_neighbours[mask].mean())
            self.distinct_history.setdefault(label, []).append(value)


# --- inputs ---------------------------------------------------------------------------------
def _choices(registry: str) -> list[str]:
    try:
        if registry == "mobility":
            from agents.mobility import MOBILITY_MODELS as names
        elif registry == "policy":
            from model.policies import POLICIES as names
        elif registry == "dataset":
            from model.learning.data import DATASETS as names
        elif registry == "partition":
            from model.learning.partition import PARTITIONS as names
        else:
            from model.learning.nets import NETS as names
    except ImportError:
        return []
    return list(names)


def _preset_names() -> list[str]:
    from model.presets import preset_names

    return preset_names()


def model_params(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """SolaraViz inputs (issue #6 controls), defaults from :class:`Config` and ``overrides``.

    Settings in ``overrides`` that have no input become fixed parameters, so e.g.
    ``test_size`` or ``batch_size`` can be set from the environment (see :func:`env_settings`).
    """
    defaults = Config()
    overrides = dict(overrides or {})
    params: dict[str, Any] = {
        "preset": {"type": "Select", "value": "", "values": ["", *_preset_names()],
                   "label": "Paper preset (fills untouched inputs)"},
        "map": {"type": "Select", "value": defaults.map, "values": list(BUNDLED), "label": "Map"},
        "map_file": {"type": "InputText", "value": "", "label": "Map file / spec (overrides Map)"},
    }
    for kind in KINDS:  # the app starts on the default world (README, "The default world")
        name = COUNT_SETTING[kind]
        params[name] = {"type": "SliderInt", "value": defaults.count(kind), "label": name.title(),
                        "min": 0, "max": 200, "step": 1}
    mobility = _choices("mobility")
    policies = _choices("policy")
    for kind in KINDS:
        fits = [name for name in mobility if mobility_fit(kind, name) is None]  # per kind
        params[f"{kind}_mobility"] = {"type": "Select", "value": defaults.kind(kind).mobility,
                                      "values": fits, "label": f"{kind} mobility"}
        if policies:
            params[f"{kind}_policy"] = {"type": "Select", "value": defaults.policy_of(kind),
                                        "values": policies, "label": f"{kind} exchange policy"}
    params |= {
        "radius_m": {"type": "SliderFloat", "value": defaults.radius_m, "label": "Radius (m)",
                     "min": 10.0, "max": 500.0, "step": 10.0},
        "contact": {"type": "Select", "value": defaults.contact, "values": ["during", "end"],
                    "label": "Contact mode"},
        "learning": {"type": "Checkbox", "value": bool(policies), "label": "Learning"},
        "dataset": {"type": "Select", "value": defaults.dataset, "values": _choices("dataset"),
                    "label": "Dataset"},
        "partition": {"type": "Select", "value": defaults.partition,
                      "values": _choices("partition"), "label": "Partition"},
        "model": {"type": "Select", "value": defaults.model, "values": _choices("net"),
                  "label": "Model"},
        "local_steps": {"type": "SliderInt", "value": defaults.local_steps,
                        "label": "Local steps K", "min": 1, "max": 20, "step": 1},
        "lr": {"type": "SliderFloat", "value": defaults.lr, "label": "Learning rate",
               "min": 0.005, "max": 0.5, "step": 0.005},
        "seed": {"type": "SliderInt", "value": defaults.seed, "label": "Seed",
                 "min": 0, "max": 99, "step": 1},
    }
    for name, value in overrides.items():
        if name == "map" and value not in BUNDLED:
            name = "map_file"
        if name in params:
            entry = params[name]
            entry["value"] = value
            if "max" in entry and value > entry["max"]:
                entry["max"] = value
            if "values" in entry and value not in entry["values"]:
                entry["values"] = [*entry["values"], value]
        else:
            params[name] = value  # fixed: passed to the model, no input shown
    return params


def initial_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments SolaraViz passes on Reset, for building the first model."""
    return {
        name: entry["value"] if isinstance(entry, Mapping) and "type" in entry else entry
        for name, entry in params.items()
    }


def env_settings(text: str) -> dict[str, Any]:
    """Parse ``name=value`` words (shell quoting allowed) into typed settings.

    The app reads them from ``MOBIDFL_APP_SETTINGS`` (e.g. ``"vehicles=200 model=mlp"``);
    names are the public setting names (``mobidfl settings``) plus ``map_file``.
    """
    settings: dict[str, Any] = {}
    for word in shlex.split(text):
        name, sep, raw = word.partition("=")
        if not sep or not name:
            msg = f"MOBIDFL_APP_SETTINGS word {word!r} is invalid; allowed: name=value"
            raise ValueError(msg)
        settings[name] = raw if name in ("map", "map_file") else parse_value(name, raw)
    checked = {k: v for k, v in settings.items() if k not in ("map", "map_file")}
    Config().updated(checked)  # fail at start with the setting's own message
    return settings


# --- components -----------------------------------------------------------------------------
SELECTED = solara.reactive(None)
"""(id(model), agent index) last hovered or clicked; per browser session (kernel)."""
SHOW_TILES = solara.reactive(False)
"""OSM web tiles under the streets: off by default, the app works offline."""


def _selected_index(model: MobiDFLModel) -> int | None:
    value = SELECTED.value
    if value is None or value[0] != id(model):
        return None
    return value[1]


@solara.component
def StatusLine(model: MobiDFLModel) -> None:
    """Step, simulated time and mean accuracy (plus a rejected-input message if any)."""
    update_counter.get()
    with solara.Column(gap="2px"):
        solara.Text(status_text(model), classes=["mobidfl-status"],
                    style={"font-weight": "bold", "font-size": "14px"})
        error = getattr(model, "app_error", None)
        if error:  # one small line: the grid cell has a fixed height
            solara.Text(error, classes=["mobidfl-error"],
                        style={"color": "#c62828", "font-size": "11px", "line-height": "1.2"})


@solara.component
def MapView(model: MobiDFLModel) -> None:
    """Streets, areas, sensor/UAV cells, agents (shape = kind, fill = accuracy), exchanges."""
    update_counter.get()
    steps = getattr(model, "completed_steps", model.steps)  # see _plot: never half a step
    streets = solara.use_memo(lambda: streets_geojson(model), [model])
    areas = solara.use_memo(lambda: areas_geojson(model), [model])
    centre, zoom = solara.use_memo(
        lambda: map_view(model, width_px=_MAP_WIDTH_GUESS_PX, height_px=MAP_HEIGHT_PX), [model]
    )
    agents = solara.use_memo(lambda: agents_geojson(model), [model, steps])
    contacts = solara.use_memo(lambda: contacts_geojson(model), [model, steps])
    cells = solara.use_memo(lambda: occupied_cells_geojson(model), [model, steps])
    selected = _selected_index(model)
    halo = solara.use_memo(lambda: selection_geojson(model, selected), [model, steps, selected])

    layers = [
        MapLayer.element(data=areas, pane="mobidfl_areas", interactive=False, name="areas"),
        MapLayer.element(data=streets, pane="mobidfl_streets", interactive=False,
                         name="streets"),
        MapLayer.element(data=cells, pane="mobidfl_cells", interactive=False,
                         name="sensor/UAV cells"),
        MapLayer.element(data=contacts, pane="mobidfl_contacts", interactive=False,
                         name="exchanges"),
        MapLayer.element(data=halo, pane="mobidfl_selection", interactive=False,
                         name="selection"),
    ]
    agent_layer = MapLayer.element(
        data=agents, pane="mobidfl_agents", class_name=AGENT_CLASS, name="agents",
        hover_style={"weight": 3, "color": "#000000"},
    )
    layers.append(agent_layer)
    if SHOW_TILES.value:
        layers.append(ipyleaflet.TileLayer.element(
            url=OSM_TILES, max_zoom=19, attribution=f"Tiles {ATTRIBUTION}", name="OSM tiles"))

    def connect_events():
        widget = solara.get_widget(agent_layer)
        model_id = id(model)

        def pick(**event: Any) -> None:
            index = (event.get("properties") or {}).get("index")
            if index is not None:
                SELECTED.set((model_id, int(index)))

        widget.on_hover(pick)
        widget.on_click(pick)

        def disconnect() -> None:
            widget.on_hover(pick, remove=True)
            widget.on_click(pick, remove=True)

        return disconnect

    solara.use_effect(connect_events, [model])

    with solara.Column(gap="4px", style={"width": "100%"}):
        StatusLine(model)
        ipyleaflet.Map.element(
            center=centre,
            zoom=zoom,
            zoom_snap=0.25,
            scroll_wheel_zoom=True,
            panes=PANES,
            layers=layers,
            layout={"height": f"{MAP_HEIGHT_PX}px", "width": "100%"},
        )
        drawn = contacts["features"][0]["properties"] if contacts["features"] else {}
        solara.HTML(tag="div", unsafe_innerHTML=legend_html(model, drawn))
        solara.Checkbox(label="OSM web tiles (needs internet)", value=SHOW_TILES,
                        style="margin: 0; padding: 0; height: 24px")


@solara.component
def AgentInfo(model: MobiDFLModel) -> None:
    """What ``agent.describe()`` says about the agent last hovered or clicked on the map."""
    update_counter.get()
    details = agent_details(model, _selected_index(model))
    with solara.Column(classes=["mobidfl-agent-info"]):
        solara.Markdown("**Agent** (hover or click one on the map)")
        if details is not None:
            solara.HTML(tag="div", unsafe_innerHTML=details_html(details))


def _plot(make, css_class: str):
    @solara.component
    def Plot(model: MobiDFLModel) -> None:
        update_counter.get()
        # Keyed on the last *completed* step: Mesa counts a step as soon as it starts, and a
        # redraw that lands while the worker thread is mid-step (another click, a hover) would
        # otherwise memoise a figure without that step's data under the new step number.
        done = getattr(model, "completed_steps", model.steps)
        figure = solara.use_memo(lambda: make(model), [model, done])
        with solara.Div(classes=[css_class], style={"width": "100%"}):
            with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text: ~2x smaller
                solara.FigureMatplotlib(figure, dependencies=[model, done], format="svg")

    Plot.__name__ = make.__name__.replace("_figure", "_plot")
    return Plot


AccuracyPlot = _plot(accuracy_figure, "mobidfl-accuracy-plot")
ContactsPlot = _plot(contacts_figure, "mobidfl-contacts-plot")
NeighboursPlot = _plot(neighbours_figure, "mobidfl-neighbours-plot")


# --- controls: every Step click is one step, run in click order ---------------------------------
class StepQueue:
    """Steps asked for and not yet run, and whether a worker thread is running them.

    WHY (issue 13 item 9): Mesa's ``ModelController`` runs the whole step inside the click
    handler, so the browser session's kernel is busy for seconds and a click that arrives then
    was lost on a loaded machine (three clicks gave step 2). Here a click only adds one to
    ``pending`` and returns at once; one worker thread per page runs the steps one after another
    and redraws after each, so N clicks are N steps and the page can say how many wait.
    All fields are read and written under ``lock``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending = 0
        self.playing = False
        self.running_step: int | None = None  # the step number being computed, if any
        self.worker: threading.Thread | None = None

    def text(self) -> str:
        """What the controls show: the step being computed and how many clicks wait."""
        with self.lock:
            if self.running_step is None:
                return "Idle: Step runs one step per click; clicks during a step are queued."
            waiting = f" · {self.pending} more queued" if self.pending else ""
            playing = " (playing)" if self.playing else ""
            return f"Running step {self.running_step}{playing}{waiting}"


@solara.component
def QueuedController(
    model: solara.Reactive[MobiDFLModel],
    model_parameters: solara.Reactive[dict],
    play_interval_s: float = 0.1,
) -> None:
    """Step / Play / Reset whose clicks are never lost while a step runs (see :class:`StepQueue`).

    The worker thread enters this page's kernel context so it can redraw the page (reactive
    state is per browser session); rendering happens in the worker between two steps, never
    while the model is half-way through one.
    """
    queue = solara.use_memo(StepQueue, [])
    shown = solara.use_reactive(queue.text())
    error = solara.use_reactive(None)
    context = kernel_context.get_current_context()

    def publish() -> None:
        shown.set(queue.text())

    def work() -> None:
        with context:
            while True:
                with queue.lock:
                    current = model.value
                    if not current.running or not (queue.pending or queue.playing):
                        queue.pending, queue.playing = 0, False
                        queue.running_step, queue.worker = None, None
                        break
                    if queue.pending:
                        queue.pending -= 1
                    queue.running_step = current.steps + 1
                publish()
                try:
                    current.step()
                except Exception as exc:  # noqa: BLE001 - shown on the page, queue cleared
                    error.set(f"error in step: {type(exc).__name__}: {exc}")
                    with queue.lock:
                        queue.pending, queue.playing = 0, False
                force_update()
                if queue.playing:
                    time.sleep(play_interval_s)
            publish()
            force_update()

    def start_worker_locked() -> None:
        if queue.worker is None:
            queue.worker = threading.Thread(target=work, name="mobidfl-steps", daemon=True)
            queue.worker.start()

    def do_step() -> None:
        with queue.lock:
            queue.pending += 1
            start_worker_locked()
        publish()

    def do_play_pause() -> None:
        with queue.lock:
            queue.playing = not queue.playing
            if queue.playing:
                start_worker_locked()
        publish()

    def do_reset() -> None:
        with queue.lock:  # the step under way finishes on the old model; nothing more runs
            queue.pending, queue.playing = 0, False
        error.set(None)
        kwargs = _build_model_init_kwargs(model.value, model_parameters.value,
                                          add_scenario_when_empty=True,
                                          require_model_accepts_scenario=True)
        model.value = type(model.value)(**kwargs)
        publish()

    playing = queue.playing
    with solara.Row(justify="space-between"):
        solara.Button(label="Reset", color="primary", on_click=do_reset)
        solara.Button(label="❚❚" if playing else "▶", color="primary", on_click=do_play_pause,
                      disabled=not model.value.running)
        solara.Button(label="Step", color="primary", on_click=do_step,
                      disabled=playing or not model.value.running)
    solara.Text(shown.value, classes=["mobidfl-queue"], style={"font-size": "12px"})
    if error.value:
        solara.Error(label=error.value)


@solara.component
def AppPage(
    model: MobiDFLModel,
    components: list[Any],
    model_params: dict[str, Any],
    name: str,
) -> None:
    """SolaraViz's layout (app bar, sidebar with controls and inputs, component grid) with
    :func:`QueuedController` in place of Mesa's ``ModelController``.

    WHY: ``SolaraViz`` hard-wires its controller; its other pieces (``ModelCreator``,
    ``ComponentsView``, ``ShowSteps``) are reused as they are.
    """
    reactive_model = solara.use_reactive(model)
    reactive_parameters = solara.use_reactive({})
    with solara.AppBar():
        solara.AppBarTitle(name)
        solara.lab.ThemeToggle()
    with solara.Sidebar(), solara.Column():
        with solara.Card("Controls"):
            QueuedController(reactive_model, reactive_parameters)
        with solara.Card("Model Parameters"):
            ModelCreator(reactive_model, model_params, model_parameters=reactive_parameters)
        with solara.Card("Information"):
            ShowSteps(reactive_model.value)
    ComponentsView(list(components), reactive_model.value)
