"""The app's plots as matplotlib figures: accuracy, contacts, distinct neighbours.

Why our own plots instead of ``mesa.visualization.make_plot_component``: its column list is
fixed when the page is built, but the accuracy columns (``acc_<kind>``,
``acc_policy_<policy>``) depend on the kinds and policies chosen, which change on Reset.
"""

from __future__ import annotations

from typing import Any

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure

from analysis.app.look import (
    CONTACT_COLOUR,
    KIND_COLOURS,
)
from model.config import KINDS
from model.world import MobiDFLModel


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
