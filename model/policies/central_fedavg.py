"""``central_fedavg``: a central server averages all members every step (upper baseline).

The "CFL" baseline of Cached-DFL (FedAvg, McMahan et al. 2017): every member trains, then all
members receive ``sum_i n_i x_i / sum_i n_i`` regardless of contacts. Done with one
weighted average (``engine.average``) and explicit assignment, not with an M x M dense
mixing block (M^2 non-zeros would make the sparse matmul quadratic in M).
"""

from __future__ import annotations

from typing import ClassVar

from model.policies.base import Exchange, ExchangeContext, ExchangePolicy, register_policy


@register_policy
class CentralFedAvgPolicy(ExchangePolicy):
    """Global FedAvg over the members, weights proportional to their data sizes."""

    name = "central_fedavg"
    metric_names: ClassVar[tuple[str, ...]] = ("participants",)

    def exchange(self, ctx: ExchangeContext) -> Exchange:
        if ctx.members.size == 0:
            return Exchange()
        weights = ctx.agents.data_size[ctx.members]
        avg = ctx.engine.average(agents=ctx.members, weights=weights)
        return Exchange(
            assign={int(i): avg for i in ctx.members},
            metrics={"participants": float(ctx.members.size)},
        )
