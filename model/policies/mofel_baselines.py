"""MoFeL's baselines A1 and A2 (MoFeL, Sec. 5.2): selections without the station.

Both start cycles at fixed instants (every training time) and see only the clients
connected to a server now; they share all server bookkeeping with MoFeL
(:class:`mobidfl.model.policies.mofel_servers.MofelBase`).
"""

from __future__ import annotations

from typing import override

import numpy as np

from mobidfl.model.maths.mofel import Cycle, Visits, select_a1, select_a2
from mobidfl.model.policies.base import ExchangeContext, register_policy
from mobidfl.model.policies.mofel_servers import TIME_TOL, MofelBase

__all__ = ["MofelA1Policy", "MofelA2Policy"]


@register_policy
class MofelA1Policy(MofelBase):
    """Baseline A1 (MoFeL, Sec. 5.2): random connected clients at fixed intervals.

    Every ``ceil(train_time_s / step_s)`` steps (one training time), each server in alert
    starts a cycle with ``clients_per_cycle`` clients drawn uniformly among its connected
    free clients, blind to their routes (:func:`mobidfl.model.maths.mofel.select_a1`).
    """

    name = "mofel_a1"

    @override
    def choose(self, ctx: ExchangeContext, alert: list[int]) -> tuple[Cycle, ...]:
        if ctx.step % self.interval_steps():
            return ()
        free = self.free_clients()
        sel = select_a1(
            self.current_visits(free),
            self.train_time,
            alert,
            self.now,
            clients_per_server=self.clients_per_cycle,
            rng=ctx.rng,
        )
        self.last_method = sel.method
        return sel.cycles


@register_policy
class MofelA2Policy(MofelBase):
    """Baseline A2 (MoFeL, Sec. 5.2): each server alone, connected clients only.

    Cycles begin at the same fixed instants as A1 (every training time: the paper credits
    only MoFeL with choosing when a cycle starts, Sec. 1 and 5.2); at each, a server in
    alert takes up to ``clients_per_cycle`` of its connected free clients whose predicted
    stay covers their training time (:func:`mobidfl.model.maths.mofel.select_a2`), and none if no
    client qualifies. It never considers clients about to arrive.
    """

    # choose() opens as A1's (cycle interval, free clients): the two baselines differ after it.
    name = "mofel_a2"

    @override
    def choose(self, ctx: ExchangeContext, alert: list[int]) -> tuple[Cycle, ...]:
        if ctx.step % self.interval_steps():
            return ()
        free = self.free_clients()
        here = free[np.isin(self.terr[free], alert)]
        visits = self.predicted_visits(here, self.now + float(self.train_time.max()))
        current = visits.enter <= self.now + TIME_TOL  # only the connection they are in now
        visits = Visits(
            client=visits.client[current],
            server=visits.server[current],
            enter=visits.enter[current],
            exit=visits.exit[current],
        )
        sel = select_a2(
            visits,
            self.train_time,
            alert,
            self.now,
            max_clients=self.max_clients,
            min_clients=1,
            rng=ctx.rng,
        )
        self.last_method = sel.method
        return sel.cycles
