"""Text panels of the app: the status line, the legend and an agent's details (HTML)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mobidfl.analysis.app.look import (
    ACCURACY_LUT,
    AGENT_OUTLINE,
    CONTACT_COLOUR,
    KIND_COLOURS,
    KIND_SHAPES,
    NOTHING_SENT,
    NOTHING_SENT_COLOUR,
    PROGRESS_COLOURS,
    progress_labels,
)
from mobidfl.maps.sources import ATTRIBUTION
from mobidfl.model.world import MobiDFLModel


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
    link = link_text(model)
    if link:
        parts.append(link)
    seconds = getattr(model, "last_step_s", float("nan"))
    if math.isfinite(seconds):
        parts.append(f"step took {seconds:.2f} s")
    return " · ".join(parts)


def link_text(model: MobiDFLModel) -> str:
    """The link model and this step's totals (``""`` under ``link = "ideal"``)."""
    if model.link.ideal:
        return ""
    name = model.link.label()
    step = getattr(model, "last_step", None)
    costs = None if step is None else step.link
    if costs is None:
        return f"link {name}"
    sent, got = float(np.sum(costs["bytes_sent"])), float(np.sum(costs["bytes_received"]))
    aborted = int(np.sum(costs["transfers_aborted"]))
    return (f"link {name}: {sent / 1e6:.2f} MB sent, {got / 1e6:.2f} MB arrived, "
            f"{aborted} aborted")


def _line_key(colour: str, weight: float, text: str, *, dash: bool = False) -> str:
    style = "dashed" if dash else "solid"
    return (
        f'<span style="margin-right:6px"><span style="display:inline-block;width:18px;'
        f'border-top:{weight:.0f}px {style} {colour};vertical-align:middle"></span> '
        f"{html.escape(text)}</span>"
    )


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
        gradient = ",".join(ACCURACY_LUT[::10])
        parts.append(
            '<span style="margin-right:8px">accuracy 0 <span style="display:inline-block;'
            f'width:70px;height:9px;background:linear-gradient(90deg,{gradient})"></span> 1</span>'
        )
    drawn, total = contacts.get("drawn", 0), contacts.get("total", 0)
    thinned = f" ({drawn} of {total} drawn)" if drawn < total else ""
    step = getattr(model, "last_step", None)
    if step is None or step.transfers is None:
        parts.append(_line_key(CONTACT_COLOUR, 2, f"exchange this step{thinned}"))
    else:  # a link model: the contact's transfer progress (layers.contacts_geojson)
        keys = [
            _line_key(NOTHING_SENT_COLOUR if code == NOTHING_SENT else PROGRESS_COLOURS[code],
                      2, label)
            for code, label in progress_labels().items()
        ]
        keys.append(_line_key("#555555", 2, "aborted or lost", dash=True))
        parts.append(
            f'<span style="margin-right:8px">contacts this step{thinned}, share of the bytes '
            f"sent that arrived: {''.join(keys)}</span>"
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
        top = max(*labels, 1)
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
