"""``local``: no exchange at all; each agent only trains on its own data (lower baseline)."""

from __future__ import annotations

from typing import override

from mobidfl.model.policies.base import Exchange, ExchangeContext, ExchangePolicy, register_policy


@register_policy
class LocalPolicy(ExchangePolicy):
    """Local training only: the mixing rows stay the identity (``rows=None``)."""

    name = "local"
    honours_link = True  # sends nothing, so every link carries all it sends

    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        return Exchange()
