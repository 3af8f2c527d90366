"""The app's look: colours and shapes per kind, the accuracy colour scale, map size.

Shared by the map layers, the legend and the figures, so a kind looks the same everywhere.
"""

from __future__ import annotations

import math

import matplotlib
import matplotlib.colors
import numpy as np

from mobidfl.settings import AGENT_KINDS

KIND_COLOURS: dict[str, str] = {k.name: k.colour for k in AGENT_KINDS}
"""Kind colours: plot lines per kind and agent fill when learning is off."""

KIND_SHAPES: dict[str, str] = {k.name: k.shape for k in AGENT_KINDS}
"""Kind markers on the map (each kind's row of :data:`mobidfl.settings.AGENT_KINDS`)."""
AREA_COLOURS = ("#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5")
CONTACT_COLOUR = "#e6550d"
AGENT_OUTLINE = "#303030"
AGENT_CLASS = "mobidfl-agent"
"""CSS class of every agent shape on the map (browser tests and user styling find them)."""
PROGRESS_EDGES = (0.25, 0.5, 0.75, 1.0)
"""Bins of a contact's transfer progress (share of the bytes sent that arrived): [0, 0.25),
[0.25, 0.5), [0.5, 0.75), [0.75, 1) and 1 (everything sent arrived)."""
PROGRESS_COLOURS = ("#d7191c", "#f07c2a", "#d9a400", "#7cb82f", "#1a9641")
"""Line colour per progress bin, red (little arrived) to green (all arrived); darker than
ColorBrewer's RdYlGn in the middle so that every bin shows on the light street map."""
PROGRESS_WEIGHTS = (1.2, 1.6, 2.0, 2.4, 2.8)
"""Line width per progress bin: the more arrived, the thicker."""
NOTHING_SENT_COLOUR = "#9e9e9e"
"""A contact over which nothing was sent this step (e.g. agents of two policies)."""
ABORTED_DASH = "5 4"
"""Dash pattern of a contact with an aborted (or lost) transfer this step."""
MAX_CONTACT_LINES = 2000
"""More contact lines than this are thinned for drawing (all are still counted)."""
MAP_HEIGHT_CSS = "max(360px, calc(100vh - 240px))"
"""The map fills the main area below the app bar and the City / Compare tabs (48 px), leaving
room for its status line and legend (the plots sit below it, one scroll away)."""
MAP_PADDING_PX = 12
"""Margin kept free around the world when the map fits it (edge agents are not cut)."""
ACCURACY_LUT = [
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


UNIT_SHAPES = {kind: _unit_shape(shape) for kind, shape in KIND_SHAPES.items()}


def accuracy_colour(accuracy: float) -> str | None:
    """Viridis colour of an accuracy in [0, 1]; ``None`` for NaN (not evaluated)."""
    if not math.isfinite(accuracy):
        return None
    return ACCURACY_LUT[int(round(min(max(accuracy, 0.0), 1.0) * 100))]


NOTHING_SENT = -1
"""Progress class of a contact over which nothing was sent this step."""


def progress_labels() -> dict[int, str]:
    """Legend text of every progress class.

    The ``progress`` classes of :func:`mobidfl.analysis.app.layers.link_progress`.
    """
    edges = (0.0, *PROGRESS_EDGES)
    labels = {
        k: f"{edges[k]:.0%}-{edges[k + 1]:.0%} arrived" for k in range(len(PROGRESS_EDGES))
    }
    return {NOTHING_SENT: "nothing sent", **labels, len(PROGRESS_EDGES): "all arrived"}
