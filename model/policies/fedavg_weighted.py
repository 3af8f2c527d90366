"""``fedavg_weighted``: neighbourhood averaging weighted by sample counts.

Reza et al., eq. (2): ``w_ij = |D_j| / (|D_i| + sum_{k in N_i} |D_k|)`` for ``j`` in
``N_i + {i}``, i.e. FedAvg weights over the agent's current neighbourhood.
"""

from __future__ import annotations

from typing import ClassVar, override

from mobidfl.model.maths.mixing import fedavg_weights
from mobidfl.model.policies.base import Exchange, ExchangeContext, ExchangePolicy, register_policy
from mobidfl.model.policies.dpsgd import member_degree_mean, received_graph, swap_messages


# Same class shape as DPSGDPolicy (registration, metrics): a policy is one small class by design.
@register_policy
class FedAvgWeightedPolicy(ExchangePolicy):
    """Data-size-weighted averaging with the members met during the step."""

    name = "fedavg_weighted"
    honours_link = True
    metric_names: ClassVar[tuple[str, ...]] = ("degree_mean",)

    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        graph, directed = received_graph(ctx)
        rows = fedavg_weights(graph, ctx.agents.data_size, ctx.members, directed=directed)
        return Exchange(rows=rows, metrics={"degree_mean": member_degree_mean(ctx)},
                        messages=swap_messages(ctx))
