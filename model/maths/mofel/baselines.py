"""MoFeL's baselines A1 and A2 (Macedo et al., Sensors 2023, Sec. 5.2)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mobidfl.model.maths.mofel.selection import Cycle, Selection
from mobidfl.model.maths.mofel.visits import Visits, connected_until

__all__ = ["select_a1", "select_a2"]


def select_a1(
    visits: Visits,
    train_time: np.ndarray,
    servers: Sequence[int],
    now: float,
    *,
    clients_per_server: int,
    rng: np.random.Generator,
) -> Selection:
    """Baseline A1: FedAvg-like random selection, blind to mobility and compute (Sec. 5.2).

    Each listed server starts a cycle at ``now`` with up to ``clients_per_server`` clients
    drawn uniformly among those connected to it at ``now``. The caller invokes it at fixed
    intervals ("a cycle starts considering fixed time intervals").
    """
    if clients_per_server < 1:
        raise ValueError(f"clients_per_server = {clients_per_server!r}: expected an int >= 1")
    tau = np.asarray(train_time, dtype=float).ravel()
    current, _ = connected_until(visits, now, n_clients=tau.size)
    cycles = []
    for s in np.asarray(servers, dtype=np.int64).ravel().tolist():
        pool = np.flatnonzero(current == s)
        if pool.size == 0:
            continue
        pick = np.sort(rng.choice(pool, size=min(clients_per_server, pool.size), replace=False))
        cycles.append(
            Cycle(
                server=s,
                start=float(now),
                duration=float(tau[pick].max()),
                clients=pick.astype(np.int64),
            )
        )
    return Selection(cycles=tuple(cycles), method="a1")


def select_a2(
    visits: Visits,
    train_time: np.ndarray,
    servers: Sequence[int],
    now: float,
    *,
    max_clients: int | None = None,
    min_clients: int = 1,
    rng: np.random.Generator | None = None,
) -> Selection:
    """Baseline A2: each server takes its connected clients that can finish before leaving.

    Only currently connected clients that can finish their own training before leaving (Sec. 5.2; no
    view of future arrivals).

    Eligible: connected to s at ``now`` with remaining time >= tau_n. Up to ``max_clients``
    are kept, drawn with ``rng`` if given, else those with the lowest ids; a server with fewer
    than ``min_clients`` eligible starts no cycle.
    """
    tau = np.asarray(train_time, dtype=float).ravel()
    current, remaining = connected_until(visits, now, n_clients=tau.size)
    cycles = []
    for s in np.asarray(servers, dtype=np.int64).ravel().tolist():
        pool = np.flatnonzero((current == s) & (remaining >= tau))
        if pool.size < max(min_clients, 1):
            continue
        if max_clients is not None and pool.size > max_clients:
            pool = (
                np.sort(rng.choice(pool, size=max_clients, replace=False))
                if rng is not None
                else pool[:max_clients]
            )
        # Builds its Cycle as select_a1 does: the paper's two baselines (A1, A2), side by side.
        cycles.append(
            Cycle(
                server=s,
                start=float(now),
                duration=float(tau[pool].max()),
                clients=pool.astype(np.int64),
            )
        )
    return Selection(cycles=tuple(cycles), method="a2")
