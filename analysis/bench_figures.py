"""The bench's figures: the score heat-map, accuracy over time and over bytes per world."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.comm import (
    PER_AGENT,
    accuracy_over_bytes,
)
from mobidfl.analysis.runner import (
    safe_name,
)
from mobidfl.atomic import write_figure


def heatmap(plan: dict[str, Any], board: pd.DataFrame, path: Path) -> Path:
    """Policy x world score heat-map; refused or missing cells grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(plan["policies"])
    cols = plan["columns"]
    values = np.full((len(policies), len(cols)), np.nan)
    for i, policy in enumerate(policies):
        for j, column in enumerate(cols):
            hit = board[(board["column"] == column["key"]) & (board["policy"] == policy)]
            if not hit.empty and "score" in hit and hit.iloc[0]["status"] in ("ok", "partial"):
                values[i, j] = float(hit.iloc[0]["score"])
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(cols), 1.2 + 0.42 * len(policies)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#d9d9d9")
    finite = values[np.isfinite(values)]
    low = min(0.0, float(finite.min())) if finite.size else 0.0
    high = max(1.0, float(finite.max())) if finite.size else 1.0
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=low, vmax=high,
                      aspect="auto")
    for i in range(len(policies)):
        for j in range(len(cols)):
            text = "n/a" if not np.isfinite(values[i, j]) else f"{values[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if not np.isfinite(values[i, j]) or values[i, j] > 0.5
                    else "white")
    ax.set_xticks(range(len(cols)), [c["label"] for c in cols], rotation=60, ha="right",
                  fontsize=7)
    ax.set_yticks(range(len(policies)), policies, fontsize=8)
    fig.colorbar(image, ax=ax, label="score (0 = local, 1 = central FedAvg)")
    ax.set_title(f"MobiDFL benchmark ({plan['scale']}, {len(plan['seeds'])} seeds)")
    tight(fig)
    write_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def _figure_worlds(plan: dict[str, Any], plt: Any) -> tuple[
        dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The plan's columns grouped by world and one colour per policy.

    A world is a scenario and its variant (one figure each, a panel per link); the colours
    are the same in every figure of a bench.
    """
    worlds: dict[str, list[dict[str, Any]]] = {}
    for column in plan["columns"]:
        name = column["scenario"] + (f"-{column['variant']}" if column["variant"] else "")
        worlds.setdefault(name, []).append(column)
    colours = {p: plt.get_cmap("tab20")(i % 20) for i, p in enumerate(plan["policies"])}
    return worlds, colours


def accuracy_plots(plan: dict[str, Any], curves: pd.DataFrame, out: Path) -> list[Path]:
    """One figure per world (scenario and axis value).

    Mean accuracy over simulated hours, one line per policy, one panel per link.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    worlds, colours = _figure_worlds(plan, plt)
    paths = []
    for name, cols in worlds.items():
        fig, axes = plt.subplots(1, len(cols), figsize=(5.0 * len(cols), 3.6), sharey=True,
                                 squeeze=False)
        for ax, column in zip(axes[0], cols, strict=True):
            mine = curves[curves["column"] == column["key"]] if not curves.empty else curves
            for policy in plan["policies"]:
                lines = mine[mine["policy"] == policy] if not mine.empty else mine
                if lines.empty:
                    continue
                mean = lines.groupby("time_s")["acc_mean"].mean()
                ax.plot(mean.index / 3600.0, mean.to_numpy(), label=policy,
                        color=colours[policy], lw=1.2)
            ax.set_title(column["label"], fontsize=9)
            ax.set_xlabel("simulated time (h)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("mean accuracy (mean over seeds)")
        _one_legend(fig, axes[0], right=0.85)
        path = out / f"accuracy_{safe_name(name)}.png"
        write_figure(fig, path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def comm_plots(plan: dict[str, Any], board: pd.DataFrame, curves: pd.DataFrame,
               out: Path) -> list[Path]:
    """One figure per world whose runs counted bytes.

    Per column (link), mean accuracy over the MB per agent sent so far (top), and each policy's mean
    final accuracy against its mean MB per agent with the Pareto front
    (:func:`mobidfl.analysis.comm.pareto_front`) joined and ringed (bottom).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean = accuracy_over_bytes(curves)
    worlds, colours = _figure_worlds(plan, plt)
    done = board[board["status"].isin(["ok", "partial"])] if "status" in board else board
    paths = []
    for name, cols in worlds.items():
        cells = done[done["column"].isin([c["key"] for c in cols])] if not done.empty else done
        if cells.empty or not np.isfinite(cells["bytes_per_agent"].astype(float)).any():
            continue  # no bytes counted (runs made before the ideal link counted them)
        fig, axes = plt.subplots(2, len(cols), figsize=(5.0 * len(cols), 7.0), squeeze=False)
        for k, column in enumerate(cols):
            top, bottom = axes[0][k], axes[1][k]
            lines = mean[mean["column"] == column["key"]]
            for policy, curve in lines.groupby("policy", sort=False):
                top.plot(curve[PER_AGENT] / 1e6, curve["acc_mean"], label=policy,
                         color=colours.get(policy), lw=1.2)
            mine = cells[cells["column"] == column["key"]]
            mine = mine[np.isfinite(mine["bytes_per_agent"].astype(float))
                        & np.isfinite(mine["final_acc"].astype(float))]
            for _, row in mine.iterrows():
                bottom.scatter(row["bytes_per_agent"] / 1e6, row["final_acc"], s=30,
                               color=colours.get(row["policy"]), label=row["policy"], zorder=3)
            front = mine[mine["pareto"] == True].sort_values("bytes_per_agent")  # noqa: E712 - an element-wise pandas mask
            if not front.empty:
                bottom.step(front["bytes_per_agent"] / 1e6, front["final_acc"], where="post",
                            color="black", lw=0.8, zorder=2, label="Pareto front")
                bottom.scatter(front["bytes_per_agent"] / 1e6, front["final_acc"], s=110,
                               facecolors="none", edgecolors="black", zorder=4)
            for ax in (top, bottom):
                ax.set_xscale("symlog", linthresh=0.1)  # local sends 0 B; others span decades
                ax.set_xlabel("MB sent per agent (symlog below 0.1)")
                ax.grid(alpha=0.3)
            top.set_title(column["label"], fontsize=9)
            top.set_ylabel("mean accuracy (mean over seeds)")
            bottom.set_ylabel("final mean accuracy (mean over seeds)")
        _one_legend(fig, [*axes[1], *axes[0]], right=0.82)
        path = out / f"comm_{safe_name(name)}.png"
        write_figure(fig, path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _one_legend(fig: Any, axes: Sequence[Any], *, right: float) -> None:
    """One legend at the figure's right for all ``axes``, the plots laid out left of ``right``.

    Each label once, first seen first.
    """
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="center right", fontsize=7)
    tight(fig, rect=(0, 0, right, 1))


def tight(fig: Any, **options: Any) -> None:
    """``fig.tight_layout(**options)`` without matplotlib's warning when it cannot apply it.

    WHY: a figure with many worlds or policies may have labels too long to fit; matplotlib
    then keeps the layout as it is and warns, a library line the bench must not print (the
    figure is written all the same).
    """
    with warnings.catch_warnings():
        # only matplotlib runs here; its warning names this line, not matplotlib's module
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(**options)
