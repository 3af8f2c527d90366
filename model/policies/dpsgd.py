"""``dpsgd``: plain D-PSGD neighbourhood averaging over this step's contacts.

de Heredia 2024, Sec. 5.3 and Alg. 1 line 6: ``W_ij = 1/|M_i|`` over ``M_i`` = the neighbours of i
(contacts during the step) and i itself.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from model.maths.mixing import dpsgd_weights
from model.policies.base import Exchange, ExchangeContext, ExchangePolicy, register_policy


def member_degree_mean(ctx: ExchangeContext) -> float:
    """Mean number of member neighbours of a member this step (how much mixing happened)."""
    if ctx.members.size == 0:
        return 0.0
    sub = ctx.adjacency[ctx.members][:, ctx.members]
    return float(np.asarray(sub.sum(axis=1)).mean())


@register_policy
class DPSGDPolicy(ExchangePolicy):
    """Equal-weight averaging with the members met during the step."""

    name = "dpsgd"
    metric_names: ClassVar[tuple[str, ...]] = ("degree_mean",)

    def exchange(self, ctx: ExchangeContext) -> Exchange:
        rows = dpsgd_weights(ctx.adjacency, ctx.members)
        return Exchange(rows=rows, metrics={"degree_mean": member_degree_mean(ctx)})
