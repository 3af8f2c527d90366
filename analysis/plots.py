"""Figures of a single run (importable from notebooks).

Built on matplotlib's :class:`~matplotlib.figure.Figure` directly, not pyplot: every
``mobidfl run`` writes this figure, and pyplot's import (its backend set-up) would be most
of that figure's cost in a fresh process; a figure with no pyplot window has none to close.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from mobidfl.atomic import write_figure


def summary_figure(model_csv: pd.DataFrame, *, title: str = "MobiDFL run") -> Figure:
    """Accuracy per kind and policy, contacts per step, distinct neighbours per class."""
    acc_cols = [
        c for c in model_csv.columns if c.startswith("acc_") and c not in ("acc_std", "acc_min")
    ]
    fig = Figure(figsize=(15, 4.2))
    axes = fig.subplots(1, 3)
    ax = axes[0]
    if acc_cols:
        for col in acc_cols:
            style = "-" if col in ("acc_mean",) else "--"
            ax.plot(model_csv["step"], model_csv[col], style, label=col.removeprefix("acc_"))
        if "acc_std" in model_csv:
            ax.fill_between(
                model_csv["step"],
                model_csv["acc_mean"] - model_csv["acc_std"],
                model_csv["acc_mean"] + model_csv["acc_std"],
                alpha=0.15,
            )
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "learning off", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("step")
    ax.set_title("accuracy per kind / policy")
    axes[1].plot(model_csv["step"], model_csv["contacts"], color="tab:orange")
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("contact pairs")
    axes[1].set_title("contacts per step")
    ax = axes[2]
    for col in ("distinct_neighbours_mean", "distinct_neighbours_hm", "distinct_neighbours_lm"):
        if col in model_csv:
            ax.plot(
                model_csv["step"], model_csv[col], label=col.removeprefix("distinct_neighbours_")
            )
    ax.set_xlabel("step")
    ax.set_ylabel("cumulative distinct neighbours")
    ax.set_title("who met whom")
    ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def save_summary(model_csv: pd.DataFrame, path: str | Path, *, title: str = "MobiDFL run") -> Path:
    """Write :func:`summary_figure` of ``model_csv`` to ``path`` and return the path."""
    write_figure(summary_figure(model_csv, title=title), path, dpi=110)
    return Path(path)
