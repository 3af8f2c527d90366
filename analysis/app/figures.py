"""The app's plots as matplotlib figures.

Accuracy, contacts, distinct neighbours, and with a link model energy and bytes/aborted transfers.

Why our own plots instead of ``mesa.visualization.make_plot_component``: its column list is
fixed when the page is built, but the accuracy columns (``acc_<kind>``,
``acc_policy_<policy>``) depend on the kinds and policies chosen, which change on Reset.
"""

from __future__ import annotations

import re
from typing import Any

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure

from mobidfl.analysis.app.look import (
    CONTACT_COLOUR,
    KIND_COLOURS,
)
from mobidfl.model.config import KINDS
from mobidfl.model.world import MobiDFLModel


def _figure() -> tuple[Figure, Any]:
    """A small figure with fixed margins (a layout engine would cost more than the drawing)."""
    figure = Figure(figsize=(4.6, 3.3), dpi=72)
    figure.subplots_adjust(left=0.17, right=0.97, bottom=0.14, top=0.9)
    return figure, figure.subplots()


def _series(model: MobiDFLModel, column: str) -> np.ndarray:
    return np.asarray(model.datacollector.model_vars.get(column, []), float)


def finish_axes(ax: Any, steps: int, *, title: str, ylabel: str) -> None:
    """Shared axes look of the app's step plots (a run's and Compare's): integer steps, grid."""
    ax.set_xlim(-0.2, max(steps, 1) + 0.2)
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
    finish_axes(ax, model.steps, title="Mean accuracy per kind / policy", ylabel="test accuracy")
    return figure


def contacts_figure(model: MobiDFLModel) -> Figure:
    """Contact pairs per step."""
    figure, ax = _figure()
    contacts = _series(model, "contacts")
    (line,) = ax.plot(np.arange(len(contacts)), contacts, "-o", ms=3, color=CONTACT_COLOUR)
    line.set_gid("contacts")
    ax.set_ylim(bottom=0)
    finish_axes(ax, model.steps, title="Contacts per step", ylabel="contact pairs")
    return figure


def neighbours_figure(model: MobiDFLModel) -> Figure:
    """Cumulative distinct neighbours per mobility class and per kind.

    Mobility classes HM/LM as in de Heredia 2024, App. B.
    """
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
    finish_axes(ax, model.steps, title="Cumulative distinct neighbours",
                ylabel="distinct neighbours (mean)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left")
    return figure



ENERGY_SPLIT = re.compile(r"energy_(\w+)_j")
"""Columns that split ``energy_j`` (e.g. ``energy_radio_j``, ``energy_compute_j``,
``energy_flight_j``): drawn when the model reports them."""
MB = 1e6


def link_on(model: MobiDFLModel) -> bool:
    """Whether the model reports a link model's columns.

    A link model other than ``ideal``, which counts bytes only: no aborted transfers, airtime or
    energy to draw.
    """
    return "transfers_aborted" in model.datacollector.model_vars


def energy_split_columns(model: MobiDFLModel) -> list[str]:
    """The ``energy_<part>_j`` columns of ``model.csv``, in the model's order."""
    return [c for c in model.datacollector.model_vars if ENERGY_SPLIT.fullmatch(c)]


def energy_per_kind(model: MobiDFLModel) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind, (steps, mean cumulative ``energy_j`` per agent of that kind).

    From the agents' records (``agents.parquet``: the running total since step 0, every
    ``record_every`` steps). One ``bincount`` over every recorded row, none per agent.
    """
    blocks = model.records.blocks()  # one block: every recorded row as columns
    if not blocks or "energy_j" not in blocks[0]:
        return {}
    rows = blocks[0]
    kinds, code = np.unique(model.kind_of, return_inverse=True)
    counts = np.maximum(np.bincount(code, minlength=len(kinds)), 1)
    steps, at_step = np.unique(rows["step"], return_inverse=True)
    cell = at_step * len(kinds) + code[rows["agent_id"]]
    sums = np.bincount(cell, weights=rows["energy_j"], minlength=len(steps) * len(kinds))
    means = sums.reshape(len(steps), len(kinds)) / counts
    order = dict.fromkeys(model.kind_of)  # the model's kind order, as in the other plots
    at = {kind: k for k, kind in enumerate(kinds)}
    return {str(kind): (steps, means[:, at[kind]]) for kind in order}


def _no_link(ax: Any, model: MobiDFLModel) -> None:
    why = 'link = "ideal"' if model.link.ideal else "learning off"
    ax.text(0.5, 0.5, f"{why}: no link accounting", ha="center", va="center",
            transform=ax.transAxes)


def energy_figure(model: MobiDFLModel) -> Figure:
    """Energy per step and the cumulative energy per agent, mean per kind.

    Per step ``energy_j`` and any ``energy_<part>_j`` split, e.g. radio/compute; energy is radio
    tx/rx power x airtime plus training FLOPs x J/FLOP (docs/concepts/links.md).

    SVG ids: ``energy-total``, ``energy-<part>``, ``energy-kind-<kind>``.
    """
    figure = Figure(figsize=(4.6, 4.6), dpi=72)
    figure.subplots_adjust(left=0.17, right=0.97, bottom=0.1, top=0.93, hspace=0.45)
    top, bottom = figure.subplots(2, 1)
    if not link_on(model):
        _no_link(top, model)
    else:
        total = _series(model, "energy_j")
        (line,) = top.plot(np.arange(len(total)), total, "-o", ms=3, color="black", lw=2,
                           label="total")
        line.set_gid("energy-total")
        for column in energy_split_columns(model):
            part = ENERGY_SPLIT.fullmatch(column).group(1)
            values = _series(model, column)
            (line,) = top.plot(np.arange(len(values)), values, "-", label=part)
            line.set_gid(f"energy-{part}")
        top.set_ylim(bottom=0)
        top.legend(fontsize=8, loc="upper left")
        for kind, (steps, values) in energy_per_kind(model).items():
            (line,) = bottom.plot(steps, values, "-o", ms=3, color=KIND_COLOURS.get(kind),
                                  label=kind)
            line.set_gid(f"energy-kind-{kind}")
        bottom.set_ylim(bottom=0)
        if bottom.get_legend_handles_labels()[0]:
            bottom.legend(fontsize=8, loc="upper left")
    finish_axes(top, model.steps, title="Energy per step (all agents)", ylabel="J")
    finish_axes(bottom, model.steps, title="Cumulative energy per agent",
                ylabel="J (mean per kind)")
    return figure


def link_figure(model: MobiDFLModel) -> Figure:
    """Bytes sent and received per step, and transfers aborted per step: what contacts carried.

    Bytes in MB on the left axis, aborted transfers as bars on the right axis.

    SVG ids: ``link-sent``, ``link-received``, one bar ``link-aborted-<step>`` per step.
    """
    figure, ax = _figure()
    figure.subplots_adjust(right=0.85)
    if not link_on(model):
        _no_link(ax, model)
        finish_axes(ax, model.steps, title="Bytes and aborted transfers", ylabel="MB per step")
        return figure
    sent, received = _series(model, "bytes_sent") / MB, _series(model, "bytes_received") / MB
    aborted = _series(model, "transfers_aborted")
    steps = np.arange(len(sent))
    right = ax.twinx()
    bars = right.bar(steps, aborted, width=0.5, color="#d7191c", alpha=0.35,
                     label="aborted / lost")
    for step, patch in zip(steps, bars.patches, strict=True):
        patch.set_gid(f"link-aborted-{step}")
    right.set_ylabel("transfers aborted")
    right.set_ylim(bottom=0, top=max(1.0, float(aborted.max(initial=0.0)) * 1.15))
    right.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_zorder(right.get_zorder() + 1)  # lines over the bars
    ax.patch.set_visible(False)
    (line,) = ax.plot(steps, sent, "-o", ms=3, color=CONTACT_COLOUR, label="sent")
    line.set_gid("link-sent")
    (line,) = ax.plot(steps, received, "-s", ms=3, color="#1a9641", label="received")
    line.set_gid("link-received")
    ax.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + [bars]
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    finish_axes(ax, model.steps, title="Bytes and aborted transfers", ylabel="MB per step")
    return figure
