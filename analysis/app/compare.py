"""The Compare view's parts that need no browser.

Runs of one world under several policies, stepped together, their plots, and where the world sits on
the regime map.

WHY: the bench answers "which policy wins where" in a table; here a user sees it happen. Every
run is a :class:`mobidfl.model.world.MobiDFLModel` built from the same
:class:`mobidfl.model.config.Config` (so the same world and seed) with only the exchange policy of
every kind replaced. A policy never changes the world, so the agents' positions must be equal in
every run at every step:
:meth:`Comparison.step` checks that and stops with an error when they are not.

The regime point is measured from the runs as ``mobidfl bench --describe`` measures a world
(:mod:`mobidfl.analysis.describe`): contacts per agent per step averaged over the steps run so far
(``neighbours_mean`` of the model table, steps 1..t) and the label-skew index of the data
split. The published rule of the controlled study (:func:`mobidfl.analysis.regime_map.load_rule`)
then names the policy it predicts for this world.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from mobidfl.analysis.app.figures import finish_axes
from mobidfl.analysis.describe import label_skew_index
from mobidfl.analysis.measures import descriptor_named
from mobidfl.analysis.regime_map import Rule, X, Y, load_rule
from mobidfl.errors import ConfigError
from mobidfl.model.config import KINDS, Config
from mobidfl.model.world import MobiDFLModel

__all__ = [
    "RULE_STUDY",
    "Comparison",
    "RegimePoint",
    "compare_accuracy_figure",
    "compare_bytes_figure",
    "cumulative_bytes",
    "policy_settings",
    "regime_point",
    "regime_point_figure",
    "regime_text",
    "study_worlds",
]

RULE_STUDY = "mobility_skew"
"""The study whose published rule places the world (``analysis/scenarios/studies``)."""
STUDY_DESCRIPTORS = (Path(__file__).resolve().parents[2] / "published" / "benchmark"
                     / RULE_STUDY / "descriptors.csv")
"""The study's measured worlds, drawn as grey dots behind the current one (when present)."""
MB = 1e6
REGIME_SHADES = ("#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb", "#fcbba1")
"""Background of each predicted policy's regime (light, so the points stay readable)."""


def policy_settings(policy: str) -> dict[str, str]:
    """The settings that make every kind use ``policy``.

    A kind's own policy setting wins over the global ``policy``, so each is set.
    """
    return {f"{kind}.policy": policy for kind in KINDS}


class Comparison:
    """One run per policy on the world of ``base`` (same settings, same seed), stepped together.

    The runs are built on the first :meth:`step` (seconds on a large world).

    Parameters
    ----------
    base
        the world's settings (e.g. the running City model's ``config``).
    policies
        two or more policy names (repeats dropped).
    world
        the already loaded map of ``base``, shared by the runs (read only).

    ``running`` is false when there is nothing to compare (fewer than two policies, learning
    off, or fewer than two runs the world accepts); ``note`` then says why. Mesa's
    controller reads ``running`` and ``steps`` as on a model.
    """

    def __init__(self, base: Config, policies: Sequence[str], *, world: Any = None) -> None:
        self.base = base
        self.world = world
        self.policies = list(dict.fromkeys(policies))
        self.models: dict[str, MobiDFLModel] = {}
        self.refused: dict[str, str] = {}
        self.built = False
        self.same_world: bool | None = None
        self.last_step_s = float("nan")
        self.completed_steps = 0
        self.note = self._why_not()
        self.running = not self.note

    def _why_not(self) -> str:
        if len(self.policies) < 2:
            return "choose at least two policies to compare"
        if not self.base.learning:
            return "learning is off in this world: turn Learning on and press Reset"
        return ""

    @property
    def steps(self) -> int:
        """Steps every run has completed (0 before the first)."""
        return self.completed_steps

    def build(self) -> None:
        """Build one run per policy.

        A policy the world refuses is kept in ``refused`` with its one-line reason and left out.
        """
        if self.built:
            return
        models, refused = {}, {}
        for policy in self.policies:
            try:
                models[policy] = MobiDFLModel(config=self.base, world=self.world,
                                              **policy_settings(policy))
            except (ConfigError, ValueError, RuntimeError) as exc:
                refused[policy] = f"{type(exc).__name__}: {exc}"
        # whole dicts at once: a redraw from another thread never sees one half-filled
        self.models, self.refused = models, refused
        self.built = True
        if len(self.models) < 2:
            self.note = "fewer than two of the chosen policies run on this world"
            self.running = False

    def step(self) -> None:
        """One step of every run, then the check that they still share one world."""
        started = time.perf_counter()
        self.build()
        if not self.running:
            return
        runs = list(self.models.values())
        for model in runs:
            model.step()
        first = runs[0]
        self.same_world = all(np.array_equal(first.position, m.position) for m in runs[1:])
        self.last_step_s = time.perf_counter() - started
        self.running = all(m.running for m in runs)
        self.completed_steps = first.steps  # last: a redraw keyed on it sees whole steps
        if not self.same_world:
            self.running = False
            msg = (f"the runs' agent positions differ at step {first.steps}: a policy changed "
                   "the world, so this comparison is not a comparison")
            raise RuntimeError(msg)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Each run's model table (``model.csv`` columns, one row per step)."""
        return {policy: model.model_table() for policy, model in self.models.items()}

    def status_text(self) -> str:
        """One line: the world, the step, each run's latest mean accuracy."""
        base = self.base
        head = (f"{base.n_agents} agents on {base.map}, seed {base.seed}, "
                f"step {self.steps}")
        if not self.built:
            return head + (f" · {self.note}" if self.note else
                           " · the runs are built on the first step")
        if self.steps == 0:  # built, first step under way (or nothing to run): no table yet
            return head + " · " + (self.note or "runs: " + ", ".join(self.models))
        parts = [head]
        for policy, table in self.tables().items():
            acc = table["acc_mean"].dropna() if "acc_mean" in table else pd.Series(dtype=float)
            parts.append(f"{policy} {acc.iloc[-1]:.3f}" if len(acc) else f"{policy} -")
        if self.same_world:
            parts.append("same world in every run")
        if math.isfinite(self.last_step_s):
            parts.append(f"step took {self.last_step_s:.2f} s")
        return " · ".join(parts)


# --- plots ------------------------------------------------------------------------------------
def _figure() -> tuple[Figure, Any]:
    figure = Figure(figsize=(4.6, 3.3), dpi=72)
    figure.subplots_adjust(left=0.17, right=0.97, bottom=0.14, top=0.9)
    return figure, figure.subplots()


def compare_accuracy_figure(comparison: Comparison) -> Figure:
    """Mean test accuracy per policy over steps.

    SVG id ``compare-acc-<policy>``, one marker per evaluated step.
    """
    figure, ax = _figure()
    for policy, table in comparison.tables().items():
        if "acc_mean" not in table:
            continue
        (line,) = ax.plot(table["step"], table["acc_mean"], "-o", ms=3, label=policy)
        line.set_gid(f"compare-acc-{policy}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no step run yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(0, 1)
    finish_axes(ax, comparison.steps, title="Mean accuracy per policy", ylabel="test accuracy")
    return figure


def cumulative_bytes(table: pd.DataFrame) -> np.ndarray | None:
    """Bytes the agents sent since step 0 (the ``bytes_sent`` column summed).

    ``None`` when the model does not count bytes at this link.
    """
    if "bytes_sent" not in table:
        return None
    return np.cumsum(table["bytes_sent"].fillna(0.0).to_numpy(float))


def compare_bytes_figure(comparison: Comparison) -> Figure:
    """Cumulative MB sent per policy over steps, or a note that this link does not count bytes.

    SVG id ``compare-bytes-<policy>``.
    """
    figure, ax = _figure()
    uncounted = []
    for policy, table in comparison.tables().items():
        sent = cumulative_bytes(table)
        if sent is None:
            uncounted.append(policy)
            continue
        (line,) = ax.plot(table["step"], sent / MB, "-o", ms=3, label=policy)
        line.set_gid(f"compare-bytes-{policy}")
    if uncounted:
        link = comparison.base.link.model
        ax.text(0.5, 0.5, f"bytes not counted at this link ({link})", ha="center",
                va="center", transform=ax.transAxes)
    elif ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left")
    ax.set_ylim(bottom=0)
    finish_axes(ax, comparison.steps, title="Bytes sent (cumulative)", ylabel="MB, all agents")
    return figure


# --- the regime map ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RegimePoint:
    """Where a world sits on the regime map, measured over ``steps`` steps."""

    neighbours_per_step: float
    label_skew: float
    steps: int


def regime_point(model: MobiDFLModel) -> RegimePoint | None:
    """Contacts per agent per step and the label-skew index of the data split.

    Contacts are the mean of ``neighbours_mean`` over steps 1..t; both as
    :func:`mobidfl.analysis.describe.describe_world` measures them; ``None`` before the first step
    or without learning (no data split).
    """
    table = model.model_table()
    moving = table[table["step"] > 0]
    if moving.empty or model.learner is None:
        return None
    skew = label_skew_index(model.learner.engine.label_hist)
    return RegimePoint(float(moving["neighbours_mean"].mean()), skew, int(len(moving)))


@functools.cache
def study_worlds(path: Path = STUDY_DESCRIPTORS) -> pd.DataFrame:
    """The published study's worlds (contacts per step, label skew); empty when absent."""
    if not path.is_file():
        return pd.DataFrame(columns=[X, Y])
    return pd.read_csv(path)[[X, Y]]


@functools.cache
def rule() -> Rule:
    """The rule published with :data:`RULE_STUDY`."""
    return load_rule(RULE_STUDY)


def regime_point_figure(point: RegimePoint | None, *, drawn: Rule | None = None,
                        worlds: pd.DataFrame | None = None) -> Figure:
    """The rule's four regimes shaded by the policy each predicts, with the worlds on top.

    The study's worlds as grey dots, and this world as a star (SVG id ``compare-world``).
    """
    drawn = drawn or rule()
    worlds = study_worlds() if worlds is None else worlds
    figure = Figure(figsize=(4.6, 3.9), dpi=72)
    figure.subplots_adjust(left=0.15, right=0.97, bottom=0.3, top=0.92)
    ax = figure.subplots()
    xs = [*worlds[X].tolist(), drawn.x_cut]
    if point is not None:
        xs.append(point.neighbours_per_step)
    xs = [max(x, 1e-2) for x in xs if math.isfinite(x)]
    x_lo, x_hi = min(xs) / 2, max(xs) * 2
    colours = {p: REGIME_SHADES[i % len(REGIME_SHADES)]
               for i, p in enumerate(sorted(set(drawn.predict.values())))}
    for key, policy in drawn.predict.items():
        cx, cy = key.split(",")
        left, right = (x_lo, drawn.x_cut) if cx == "lo" else (drawn.x_cut, x_hi)
        low, high = (0.0, drawn.y_cut) if cy == "lo" else (drawn.y_cut, 1.0)
        ax.fill_between([left, right], low, high, color=colours[policy], lw=0)
    for policy, colour in colours.items():
        ax.fill_between([], [], color=colour, label=f"rule: {policy}")
    ax.axvline(drawn.x_cut, ls="--", c="grey", lw=1)
    ax.axhline(drawn.y_cut, ls="--", c="grey", lw=1)
    if len(worlds):
        ax.scatter(np.maximum(worlds[X], 1e-2), worlds[Y],
                   s=12, c="#636363", label=f"{RULE_STUDY} worlds", zorder=3)
    if point is not None and math.isfinite(point.label_skew):
        marker = ax.scatter([max(point.neighbours_per_step, 1e-2)], [point.label_skew],
                            marker="*", s=260, c="#d62728", edgecolors="black", zorder=4,
                            label="this world")
        marker.set_gid("compare-world")
    else:
        ax.text(0.5, 0.93, "step once to place this world", ha="center", va="center",
                transform=ax.transAxes, fontsize=9)
    ax.set_xscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(0, 1)
    ax.set_xlabel(descriptor_named(X).words)
    ax.set_ylabel("label-skew index")
    ax.set_title("Where this world sits on the regime map", fontsize=11)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
              frameon=False)
    return figure


def regime_text(point: RegimePoint | None, *, drawn: Rule | None = None,
                leader: str | None = None) -> str:
    """What the map says, in words.

    The world's numbers, the policy the rule predicts, how often the rule was right where it was
    drawn, and which run leads here now.
    """
    drawn = drawn or rule()
    where = (f"The rule, drawn from the controlled study `{RULE_STUDY}` (one base world, "
             f"one factor changed at a time), names the winner of {drawn.train_hits} of the "
             f"{drawn.train_n} worlds it was drawn on; elsewhere it is an extrapolation. "
             "How far to trust it (in many worlds several policies are level): "
             "docs/benchmark/study.md.")
    if point is None:
        return "Step once to measure this world's contacts. " + where
    said = drawn(point.neighbours_per_step, point.label_skew) or "no policy"
    text = (f"This world, over {point.steps} step{'s' if point.steps != 1 else ''}: "
            f"{point.neighbours_per_step:.2f} {descriptor_named(X).words}, "
            f"{descriptor_named(Y).words} {point.label_skew:.2f}. "
            f"The rule predicts **{said}** here. ")
    if leader:
        text += f"Leading in these runs now: **{leader}**. "
    return text + where


def leader(comparison: Comparison) -> str | None:
    """The policy whose run has the best latest mean accuracy (``None`` before any)."""
    best, best_acc = None, -math.inf
    for policy, table in comparison.tables().items():
        acc = table["acc_mean"].dropna() if "acc_mean" in table else pd.Series(dtype=float)
        if len(acc) and acc.iloc[-1] > best_acc:
            best, best_acc = policy, float(acc.iloc[-1])
    return best
