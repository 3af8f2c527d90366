"""``central_fedavg``: a central server averages all members every step (upper baseline).

The "CFL" baseline of Cached-DFL (FedAvg, McMahan et al. 2017): every member trains, then all
members receive ``sum_i n_i x_i / sum_i n_i`` regardless of contacts. Done with one
weighted average (``engine.average``) and explicit assignment, not with an M x M dense
mixing block (M^2 non-zeros would make the sparse matmul quadratic in M).
"""

from __future__ import annotations

from typing import ClassVar, override

import numpy as np

from mobidfl.model.policies.base import (
    SERVER,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
    register_policy,
)


@register_policy
class CentralFedAvgPolicy(ExchangePolicy):
    """Global FedAvg over the members, weights proportional to their data sizes."""

    name = "central_fedavg"
    metric_names: ClassVar[tuple[str, ...]] = ("participants", "area_acc_mean")

    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        if ctx.members.size == 0:
            return Exchange()
        weights = ctx.agents.data_size[ctx.members]
        avg = ctx.engine.average(agents=ctx.members, weights=weights)
        assign = {int(i): avg for i in ctx.members}
        metrics = {"participants": float(ctx.members.size), "area_acc_mean": float("nan")}
        if self._own_label_step(ctx):
            metrics["area_acc_mean"] = self._own_label_accuracy(ctx, avg)
        # every member uploads its model and downloads the average (McMahan et al. 2017,
        # Alg. 1 with every client selected): one message each way, the server not an agent
        n, server = ctx.adjacency.shape[0], np.full(ctx.members.size, SERVER)
        messages = Messages.between(n, ctx.members, server) + Messages.between(
            n, server, ctx.members)
        return Exchange(assign=assign, metrics=metrics, messages=messages)

    def _own_label_step(self, ctx: ExchangeContext) -> bool:
        """Score on own labels under area label skew, at the evaluation steps."""
        if getattr(self.settings, "partition", None) != "area":
            return False
        every = int(getattr(self.settings, "eval_every", 1) or 1)
        return ctx.step % every == 0 or ctx.step == getattr(self.settings, "steps", None)

    @staticmethod
    def _own_label_accuracy(ctx: ExchangeContext, avg: tuple) -> float:
        """Mean over members of the global model's accuracy on each member's own labels.

        PSFL (Domini et al., ACSOS 2024) scores every node on the test data of its area
        (Fig. 6: "we average the accuracy of all nodes" for centralised FL), which under area
        label skew is the test samples of the labels the node holds: the same scoring as
        ``psfl``'s ``area_acc_mean`` (:func:`mobidfl.model.policies.psfl.area_accuracy`), so the two
        compare on the same test samples. One evaluation per distinct label set.
        """
        engine = ctx.engine
        held = engine.label_hist[ctx.members] > 0
        sets, inverse = np.unique(held, axis=0, return_inverse=True)
        acc = np.array(
            [engine.evaluate_params(avg, labels=np.flatnonzero(row).tolist())[0] for row in sets]
        )
        per_member = acc[np.asarray(inverse).reshape(-1)]
        return float(np.nanmean(per_member)) if np.isfinite(per_member).any() else float("nan")
