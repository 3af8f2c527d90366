"""The ``model.csv`` columns: one named Mesa DataCollector reporter per column.

Each reporter is a small function of the running :class:`mobidfl.model.world.MobiDFLModel`;
:func:`model_reporters` picks the ones a run has (per kind, per policy, high/low mobility,
policy metrics, link costs).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from mobidfl.model.links import LinkPlan

World = Any
"""The running :class:`mobidfl.model.world.MobiDFLModel` (not imported: that module imports this
one)."""


def simulated_time_s(model: World) -> float:
    """Simulated seconds so far (steps times ``step_s``)."""
    return model.steps * model.config.step_s


def contact_pairs(model: World) -> int:
    """Number of agent pairs in contact this step."""
    return int(model.adjacency.nnz // 2)


def mean_neighbours(model: World) -> float:
    """Mean neighbours per agent this step."""
    return float(model.neighbours_now.mean())


def mean_distinct_neighbours(model: World) -> float:
    """Mean distinct agents met so far, per agent."""
    return float(model.distinct_neighbours.mean())


def fleet_share_in_contact(model: World) -> float:
    """Mean neighbours this step as a share of the rest of the fleet (contact density)."""
    return float(model.neighbours_now.mean()) / max(model.n_agents - 1, 1)


def kind_share_in_contact(model: World, kind: str) -> float:
    """Mean same-kind neighbours of ``kind`` as a share of the rest of that kind.

    Policies mix among their own members (usually one kind), so a kind can be saturated
    even when the whole fleet is not (e.g. fast cars among slow pedestrians).
    """
    members = model.kind_of == kind
    count = int(members.sum())
    if count < 2:
        return float("nan")
    same = model.adjacency[members][:, members]
    return float(same.nnz) / count / (count - 1)


def fleet_share_met(model: World) -> float:
    """Share of the rest of the fleet an agent has met so far (Cached-DFL's mixing reach)."""
    return float(model.distinct_neighbours.mean()) / max(model.n_agents - 1, 1)


def _nanmean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def accuracy_mean(model: World) -> float:
    """Mean accuracy at the latest evaluation (NaN entries skipped)."""
    return _nanmean(model.evaluation.accuracy)


def accuracy_std(model: World) -> float:
    """Standard deviation of the accuracies at the latest evaluation (NaN skipped)."""
    accuracy = model.evaluation.accuracy
    return float(np.nanstd(accuracy)) if np.isfinite(accuracy).any() else float("nan")


def accuracy_min(model: World) -> float:
    """Lowest accuracy at the latest evaluation (NaN skipped)."""
    accuracy = model.evaluation.accuracy
    return float(np.nanmin(accuracy)) if np.isfinite(accuracy).any() else float("nan")


def accuracy_p10(model: World) -> float:
    """The accuracy that 90 % of the agents reach or beat (who is left behind)."""
    accuracy = model.evaluation.accuracy
    finite = accuracy[np.isfinite(accuracy)]
    return float(np.percentile(finite, 10.0)) if finite.size else float("nan")


def loss_mean(model: World) -> float:
    """Mean test loss at the latest evaluation (NaN skipped)."""
    return _nanmean(model.evaluation.loss)


def accuracy_of_kind(model: World, kind: str) -> float:
    """Mean accuracy of the agents of ``kind``."""
    return _nanmean(model.evaluation.accuracy[model.kind_of == kind])


def accuracy_of_policy(model: World, policy: str) -> float:
    """Mean accuracy of the agents that run ``policy``."""
    return _nanmean(model.evaluation.accuracy[model.policy_of_agent == policy])


def accuracy_high_mobility(model: World) -> float:
    """Mean accuracy of the high-mobility agents (NaN when there are none)."""
    return _nanmean(model.evaluation.accuracy[model.hm]) if model.hm.any() else float("nan")


def accuracy_low_mobility(model: World) -> float:
    """Mean accuracy of the low-mobility agents (NaN when there are none)."""
    return _nanmean(model.evaluation.accuracy[~model.hm]) if (~model.hm).any() else float("nan")


def hm_lm_gap(model: World) -> float:
    """Table 2 of de Heredia 2024: accuracy of high- minus low-mobility clients."""
    return accuracy_high_mobility(model) - accuracy_low_mobility(model)


def distinct_neighbours_of_class(model: World, high: bool) -> float:
    """App. B of de Heredia 2024: cumulative distinct neighbours per mobility class."""
    mask = model.hm if high else ~model.hm
    return float(model.distinct_neighbours[mask].mean()) if mask.any() else float("nan")


def consensus_distance(model: World) -> float:
    """Consensus distance of the agents' models at the latest evaluation."""
    return model.evaluation.consensus


def policy_metric(model: World, name: str) -> float:
    """The policy metric ``name`` of this step (NaN when the policy gave none)."""
    return float(model.policy_metrics.get(name, float("nan")))


LINK_COLUMNS = (
    *LinkPlan.COLUMNS, "energy_j", "energy_radio_j", "energy_compute_j", "energy_flight_j"
)
"""Per-step (``model.csv``: sum over agents) and per-agent (``agents.parquet``: running
total since step 0) link columns, present when ``link.model`` is not ``ideal``."""

IDEAL_LINK_COLUMNS = ("bytes_sent", "bytes_received")
"""The link columns of a learning run at ``link = "ideal"``: the bytes of every model
message the policies sent, counted, not limited (no rate, so no airtime or radio energy)."""


def link_total(model: World, column: str) -> float:
    """The step's ``column`` summed over agents (0 before step 1)."""
    step = model.last_step
    if step is None or step.link is None:
        return 0.0
    return float(np.sum(step.link[column]))


def model_reporters(model: World) -> dict[str, Callable[[World], Any]]:
    """The named ``model.csv`` columns of ``model``.

    Contacts always; learning, per-kind, per-policy, mobility-class and link columns only when the
    run has them.
    """
    reporters: dict[str, Callable[[World], Any]] = {
        "time_s": simulated_time_s,
        "contacts": contact_pairs,
        "neighbours_mean": mean_neighbours,
        "distinct_neighbours_mean": mean_distinct_neighbours,
        "neighbours_share": fleet_share_in_contact,
        "met_share": fleet_share_met,
    }
    kinds = list(dict.fromkeys(model.kind_of))
    if len(kinds) > 1:
        for kind in kinds:
            reporters[f"neighbours_share_{kind}"] = partial(kind_share_in_contact, kind=kind)
    if model.hm.any():
        reporters["distinct_neighbours_hm"] = partial(distinct_neighbours_of_class, high=True)
        reporters["distinct_neighbours_lm"] = partial(distinct_neighbours_of_class, high=False)
    if model.learner is None:
        return reporters
    reporters |= {
        "acc_mean": accuracy_mean,
        "acc_std": accuracy_std,
        "acc_min": accuracy_min,
        "acc_p10": accuracy_p10,
        "loss_mean": loss_mean,
        "consensus": consensus_distance,
    }
    for kind in dict.fromkeys(model.kind_of):
        reporters[f"acc_{kind}"] = partial(accuracy_of_kind, kind=kind)
    policies = list(dict.fromkeys(model.policy_of_agent))
    if len(policies) > 1:
        for policy in policies:
            reporters[f"acc_policy_{policy}"] = partial(accuracy_of_policy, policy=policy)
    if model.hm.any() and not model.hm.all():
        reporters |= {
            "acc_hm": accuracy_high_mobility,
            "acc_lm": accuracy_low_mobility,
            "hm_lm_gap": hm_lm_gap,
        }
    for name in model.learner.metric_names:
        reporters[name] = partial(policy_metric, name=name)
    if model.link_totals is not None:
        for column in model.link_totals:
            reporters[column] = partial(link_total, column=column)
    return reporters
