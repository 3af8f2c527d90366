"""``dpsgd``: plain D-PSGD neighbourhood averaging over this step's contacts.

de Heredia 2024, Sec. 5.3 and Alg. 1 line 6: ``W_ij = 1/|M_i|`` over ``M_i`` = the neighbours of i
(contacts during the step) and i itself.
"""

from __future__ import annotations

from typing import ClassVar, override

import numpy as np
import scipy.sparse as sp

from mobidfl.model.maths.mixing import dpsgd_weights, member_pairs
from mobidfl.model.policies.base import (
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
    register_policy,
)


def member_degree_mean(ctx: ExchangeContext) -> float:
    """Mean number of member neighbours of a member this step (how much mixing happened)."""
    if ctx.members.size == 0:
        return 0.0
    sub = ctx.adjacency[ctx.members][:, ctx.members]
    return float(np.asarray(sub.sum(axis=1)).mean())


def received_graph(ctx: ExchangeContext) -> tuple[sp.csr_matrix, bool]:
    """The graph to average over and whether it is directed.

    ``link = "ideal"``: this step's contacts (symmetric). Otherwise every member-member
    contact sends one model each way over ``ctx.link`` and row ``i`` holds the models ``i``
    received whole before the contact ended: an agent averages only the models it received.
    """
    if ctx.link is None:
        return ctx.adjacency, False
    n = ctx.adjacency.shape[0]
    pairs = member_pairs(ctx.adjacency, ctx.members)
    got = ctx.link.swap_models(pairs)
    graph = sp.csr_matrix((np.ones(len(got), bool), (got[:, 0], got[:, 1])), shape=(n, n))
    return graph, True


def swap_messages(ctx: ExchangeContext) -> Messages | None:
    """At the ideal link, the models this step's member contacts swap.

    One each way per pair, as :meth:`mobidfl.model.links.LinkPlan.swap_models` sends them over a
    link (``None`` with a link model, whose plan counts what it carried).
    """
    if ctx.link is not None:
        return None
    return Messages.swapped(ctx.adjacency.shape[0], member_pairs(ctx.adjacency, ctx.members))


@register_policy
class DPSGDPolicy(ExchangePolicy):
    """Equal-weight averaging with the members met during the step."""

    name = "dpsgd"
    honours_link = True
    metric_names: ClassVar[tuple[str, ...]] = ("degree_mean",)

    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        graph, directed = received_graph(ctx)
        rows = dpsgd_weights(graph, ctx.members, directed=directed)
        return Exchange(rows=rows, metrics={"degree_mean": member_degree_mean(ctx)},
                        messages=swap_messages(ctx))
