"""``mobility_aware``: D-PSGD whose neighbour weights lean towards faster neighbours.

de Heredia 2024, Sec. 5.4: for client ``i`` and ``j`` in ``M_i`` (the clients met
during the step, plus ``i``), ``W_ij = 1/N + alpha (X_ij - 1/N)`` with
``X_ij = s_j / sum_{x in M_i} s_x`` and ``N = |M_i|``. High-mobility clients meet more
clients over time, so their models are "more complete"; weighing them up is meant to close
the accuracy gap between high- and low-mobility clients (Table 3). ``alpha = 0`` is plain
D-PSGD (Sec. 5.3, policy ``dpsgd``), ``alpha = 1`` is the naive ``W_ij = X_ij`` (Table 4).
``alpha`` comes from the setting ``mobility_aware.alpha`` (old name ``mobility_alpha``;
limited to [0, 1], so every weight stays non-negative; the thesis' released code defaults
to 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mobidfl.model.maths.mixing import mobility_aware_weights
from mobidfl.model.policies.base import Exchange, ExchangeContext, ExchangePolicy, register_policy
from mobidfl.model.policies.dpsgd import member_degree_mean, received_graph, swap_messages
from mobidfl.settings import PluginSettings, setting, unit_interval


# A PluginSettings class has this shape (namespace, setting(...)) everywhere: the declared contract.
@dataclass(frozen=True, kw_only=True)
class MobilityAwareSettings(PluginSettings):
    """The mixing weight's lean towards faster neighbours."""

    namespace: ClassVar[str] = "mobility_aware"
    alpha: float = setting(
        0.0, "mobility_aware: alpha in W_ij = 1/N + alpha (X_ij - 1/N)", unit_interval,
        alias="mobility_alpha",
    )


@register_policy
class MobilityAwarePolicy(ExchangePolicy):
    """de Heredia 2024 Alg. 1 line 6 with the mobility-aware weights of Sec. 5.4."""

    name = "mobility_aware"
    settings_class = MobilityAwareSettings
    options: MobilityAwareSettings
    honours_link = True
    metric_names: ClassVar[tuple[str, ...]] = ("degree_mean",)

    def exchange(self, ctx: ExchangeContext) -> Exchange:
        """One row per member from this step's contacts and the agents' current speeds.

        The contacts are the models received over the link, when one is set.
        """
        graph, directed = received_graph(ctx)
        rows = mobility_aware_weights(
            graph,
            ctx.agents.speed,
            self.options.alpha,
            ctx.members,
            directed=directed,
        )
        return Exchange(rows=rows, metrics={"degree_mean": member_degree_mean(ctx)},
                        messages=swap_messages(ctx))
