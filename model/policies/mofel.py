"""MoFeL and its baselines A1/A2: edge servers, a central station, mobile clients.

MoFeL (Macedo et al., *Mobility-Aware Federated Learning Considering Multiple
Networks*, Sensors 2023). Every edge server (central server) owns a territory and a global
model of its own; a client belongs to the server whose territory it is in. A server whose
model is below the required accuracy asks for a training cycle (alert state, Fig. 5); the
selected clients train from the server's model and the server FedAvg-aggregates the
clients that finish (Sec. 4, "similar to FedAvg"). A client that leaves the territory
before its training ends is *frustrated* and contributes nothing (Sec. 5.2).

Three selections share this machinery (:class:`MofelBase`):

* ``mofel`` (Sec. 4): a central station gathers the requests and selects, from every
  client's disclosed route, when each requesting server starts and which clients join,
  so that every selected client stays in the territory for its whole training time
  (:func:`mobidfl.model.maths.mofel.select`, method ``auto``: exact MILP when small, else greedy);
* ``mofel_a1`` (Sec. 5.2, A1): FedAvg-like, random connected clients at fixed intervals
  (every training time);
* ``mofel_a2`` (Sec. 5.2, A2): at the same fixed instants, each server alone takes its
  connected clients that can finish before leaving (no view of clients that will arrive).

The shared machinery (territories, cycles, FedAvg, NTC/NFC, and how MobiDFL maps the paper
onto its world) is :mod:`mobidfl.model.policies.mofel_servers`; the baselines are
:mod:`mobidfl.model.policies.mofel_baselines`. Every name is re-exported here.
"""

from __future__ import annotations

from typing import Any, ClassVar, override

from mobidfl.model.maths.mofel import Cycle, select
from mobidfl.model.policies.base import ExchangeContext, register_policy
from mobidfl.model.policies.mofel_servers import MofelBase, client_train_times, server_accuracy

__all__ = [
    "MofelA1Policy",
    "MofelA2Policy",
    "MofelBase",
    "MofelPolicy",
    "client_train_times",
    "server_accuracy",
]


@register_policy
class MofelPolicy(MofelBase):
    """MoFeL (Sec. 4, eqs. 1-8 and 10): the central station's selection.

    At the end of every step with requests, the station predicts every free client's
    territory intervals over ``[now, now + Delta]`` from its route and solves
    :func:`mobidfl.model.maths.mofel.select` (``method='auto'``). A server may be given a later
    start, when enough clients will have arrived (the paper's "optimal moment").
    ``solver_milp`` / ``solver_greedy`` count which solver produced each selection.
    """

    name = "mofel"
    metric_names: ClassVar[tuple[str, ...]] = (
        *MofelBase.metric_names,
        "solver_milp",
        "solver_greedy",
    )

    @override
    def setup(self, **kwargs: Any) -> None:
        super().setup(**kwargs)
        self.solver_counts = {"milp": 0, "greedy": 0}
        self.solve_seconds = 0.0

    @override
    def choose(self, ctx: ExchangeContext, alert: list[int]) -> tuple[Cycle, ...]:
        import time

        visits = self.predicted_visits(self.free_clients(), self.now + self.horizon)
        if len(visits) == 0:
            return ()
        started = time.perf_counter()
        sel = select(
            visits,
            self.train_time,
            alert,
            self.now,
            self.horizon,
            method="auto",
            min_clients=1,
            max_clients=self.max_clients,
            max_trainings_per_client=1,
            finish_within_horizon=True,
            node_limit=self.node_limit,
        )
        self.solve_seconds += time.perf_counter() - started  # reported only, never decides
        if sel.cycles:
            key = "milp" if sel.method.startswith("milp") else "greedy"
            self.solver_counts[key] += 1
        self.last_method = sel.method
        return sel.cycles

    @override
    def metrics(self) -> dict[str, float]:
        return {
            **super().metrics(),
            "solver_milp": float(self.solver_counts["milp"]),
            "solver_greedy": float(self.solver_counts["greedy"]),
        }

    @override
    def extra_state(self) -> dict:
        return {"solver_counts": dict(self.solver_counts), "solve_seconds": self.solve_seconds}

    @override
    def load_extra_state(self, state: dict) -> None:
        self.solver_counts = {k: int(v) for k, v in state["solver_counts"].items()}
        self.solve_seconds = float(state["solve_seconds"])


# After MofelPolicy, so the registry lists mofel, mofel_a1, mofel_a2 in their old order.
from mobidfl.model.policies.mofel_baselines import MofelA1Policy, MofelA2Policy  # noqa: E402 - after MofelPolicy: the registry lists mofel first
