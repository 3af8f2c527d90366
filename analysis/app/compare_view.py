"""The Compare view (a tab of the page).

The City tab's world under two or more policies, stepped side by side, with their accuracy and
bytes, and the world on the regime map.

Only arranges what :mod:`mobidfl.analysis.app.compare` computes; the Step / Play / Rebuild buttons
are the page's own queued controller (:func:`mobidfl.analysis.app.controller.QueuedController`), so
clicks during a step are queued here too.
"""

from __future__ import annotations

from typing import Any

import matplotlib
import solara
from mesa.visualization.utils import update_counter

from mobidfl.analysis.app.compare import (
    Comparison,
    compare_accuracy_figure,
    compare_bytes_figure,
    leader,
    regime_point,
    regime_point_figure,
    regime_text,
    rule,
)
from mobidfl.analysis.app.controller import QueuedController
from mobidfl.model.world import MobiDFLModel


def _policy_names() -> list[str]:
    from mobidfl.model.policies import POLICIES

    return list(POLICIES)


def default_policies() -> list[str]:
    """The policies the published rule predicts somewhere (the map's two answers)."""
    return sorted(set(rule().predict.values()))


def _svg(figure: Any, dependencies: list[Any], css_class: str) -> None:
    with (
        solara.Div(classes=[css_class], style={"flex": "1 1 300px", "min-width": "280px"}),
        matplotlib.rc_context({"svg.fonttype": "none"}),  # text as text: a smaller SVG
    ):
        solara.FigureMatplotlib(figure, dependencies=dependencies, format="svg")


@solara.component
def CompareView(model: MobiDFLModel) -> None:
    """Runs of ``model``'s world (its settings and seed) under the chosen policies.

    The runs follow the City tab: after a Reset there they are rebuilt on the new world. They
    are built on the first Step here, so an unvisited tab costs nothing.
    """
    update_counter.get()
    chosen = solara.use_reactive(default_policies())
    # made once: use_reactive takes a changed argument as a new value on the next render
    first = solara.use_memo(lambda: Comparison(model.config, chosen.value,
                                               world=model.world_map), [])
    comparison = solara.use_reactive(first)
    parameters = solara.use_reactive({})

    def follow_city() -> None:
        if comparison.value.base is not model.config:
            comparison.value = Comparison(model.config, chosen.value, world=model.world_map)

    solara.use_effect(follow_city, [model])

    def choose(policies: list[str]) -> None:
        chosen.value = list(policies)
        comparison.value = Comparison(model.config, chosen.value, world=model.world_map)

    def rebuild(old: Comparison) -> Comparison:
        return Comparison(old.base, old.policies, world=old.world)

    current = comparison.value
    done = current.completed_steps
    point = solara.use_memo(
        lambda: regime_point(next(iter(current.models.values()))) if current.models else None,
        [current, done])
    status = solara.use_memo(current.status_text,
                             [current, done, current.built, current.running])
    with solara.Column(classes=["mobidfl-compare-view"],
                       style={"width": "100%", "padding": "4px 8px"}):
        with solara.Row(gap="12px", style={"align-items": "center", "flex-wrap": "wrap"}):
            solara.SelectMultiple("Policies to compare (same world, same seed)", chosen.value,
                                  _policy_names(), on_value=choose,
                                  classes=["mobidfl-compare-policies"],
                                  style={"min-width": "320px"})
            with solara.Column(gap="2px"):
                QueuedController(comparison, parameters, rebuild=rebuild,
                                 step_label="Step all", reset_label="Rebuild",
                                 queue_class="mobidfl-compare-queue")
        solara.Text(status, classes=["mobidfl-compare-status"],
                    style={"font-weight": "bold", "font-size": "14px"})
        for policy, why in current.refused.items():
            solara.Text(f"{policy} left out: {why}", classes=["mobidfl-compare-refused"],
                        style={"color": "#c62828", "font-size": "12px"})
        if current.note:
            solara.Text(current.note, classes=["mobidfl-compare-note"],
                        style={"color": "#c62828", "font-size": "12px"})
        with solara.Row(gap="8px", style={"width": "100%", "align-items": "flex-start",
                                          "flex-wrap": "wrap"}):
            accuracy = solara.use_memo(lambda: compare_accuracy_figure(current), [current, done])
            _svg(accuracy, [current, done], "mobidfl-compare-accuracy-plot")
            sent = solara.use_memo(lambda: compare_bytes_figure(current), [current, done])
            _svg(sent, [current, done], "mobidfl-compare-bytes-plot")
            regime = solara.use_memo(lambda: regime_point_figure(point), [point])
            _svg(regime, [point], "mobidfl-compare-regime-plot")
        words = solara.use_memo(lambda: regime_text(point, leader=leader(current)),
                                [point, current, done])
        solara.Markdown(words, style={"font-size": "13px", "max-width": "1100px"})
