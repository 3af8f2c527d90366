"""Reference helpers for the MoFeL tests (Macedo et al., Sensors 2023): routes to intervals
(Sec. 4, eq. 6), the c_nst table, and NTC/NFC replayed against actual connections.

Not used by the simulator (moved out of ``model/maths/mofel``): the policy counts NTC/NFC
itself while it runs; these recount them independently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mobidfl.errors import ConfigError
from mobidfl.model.maths.mofel import Selection, Visits, feasible


def visits_from_routes(
    routes: Sequence[Sequence[int]],
    reach: np.ndarray,
    speeds: np.ndarray,
    *,
    start: float | np.ndarray = 0.0,
    progress: float | np.ndarray = 0.0,
) -> Visits:
    """Intervals for many clients from their routes (see :func:`route_visits`)."""
    speeds = np.asarray(speeds, dtype=float).ravel()
    starts = np.broadcast_to(np.asarray(start, dtype=float), (len(routes),))
    progs = np.broadcast_to(np.asarray(progress, dtype=float), (len(routes),))
    if speeds.shape[0] != len(routes):
        raise ConfigError("speeds.size", speeds.shape[0], f"{len(routes)} (one per client)")
    parts = [
        route_visits(r, reach, float(v), start=float(t), progress=float(p))
        for r, v, t, p in zip(routes, speeds, starts, progs, strict=True)
    ]
    clients = [np.full(len(p[0]), i, dtype=np.int64) for i, p in enumerate(parts)]
    empty_f, empty_i = np.zeros(0), np.zeros(0, dtype=np.int64)
    return Visits(
        client=np.concatenate(clients) if clients else empty_i,
        server=np.concatenate([p[0] for p in parts]) if parts else empty_i,
        enter=np.concatenate([p[1] for p in parts]) if parts else empty_f,
        exit=np.concatenate([p[2] for p in parts]) if parts else empty_f,
    )


def route_visits(
    route: Sequence[int],
    reach: np.ndarray,
    speed: float,
    *,
    start: float = 0.0,
    progress: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predicted (server, enter, exit) along one client's route (MoFeL, Sec. 4 and eq. 6).

    A client crossing server s's territory stays d_s / v_n time units there. ``progress`` is
    the path length already covered in the first territory at ``start``.

    Args:
        route: server ids in the order the client crosses their territories.
        reach: territorial reach d_s per server id (path length, > 0).
        speed: the client's speed v_n (> 0).
        start: time at which the client is at ``progress`` inside ``route[0]``.
        progress: path length already travelled inside ``route[0]`` (0 <= progress < d).
    """
    reach = np.asarray(reach, dtype=float).ravel()
    servers = np.asarray(route, dtype=np.int64).ravel()
    if not (np.isfinite(speed) and speed > 0):
        raise ConfigError("speed", speed, "a finite speed > 0")
    if servers.size and (servers.min() < 0 or servers.max() >= reach.size):
        raise ConfigError("route", servers.tolist(), f"server ids in [0, {reach.size})")
    lengths = reach[servers].copy()
    if (lengths <= 0).any():
        raise ConfigError("reach", lengths.tolist(), "territorial reach d_s > 0")
    if servers.size:
        if not 0 <= progress < lengths[0]:
            raise ConfigError("progress", progress, f"0 <= progress < d = {lengths[0]}")
        lengths[0] -= progress
    dwell = lengths / speed
    exit_ = start + np.cumsum(dwell)
    enter = exit_ - dwell
    if servers.size:
        enter[1:] = exit_[:-1]  # exact contiguity despite float rounding
    return servers, enter, exit_


def can_ever_train(reach: np.ndarray, speed: np.ndarray, train_time: np.ndarray) -> np.ndarray:
    """d_s / v_n >= tau_n: client n can ever finish a training inside s (MoFeL, Sec. 4).

    Broadcasts: pass reach[None, :] and speed[:, None] for the (clients, servers) table.
    """
    return np.asarray(reach, dtype=float) / np.asarray(speed, dtype=float) >= np.asarray(
        train_time, dtype=float
    )


def connection_indicator(
    visits: Visits, times: np.ndarray, *, n_clients: int, n_servers: int
) -> np.ndarray:
    """c_nst of eq. 6: True where client n is connected to server s at time t.

    Returns:
        Bool array (n_clients, n_servers, len(times)).
    """
    times = np.asarray(times, dtype=float).ravel()
    out = np.zeros((n_clients, n_servers, times.size), dtype=bool)
    if len(visits) and (visits.client.max() >= n_clients or visits.server.max() >= n_servers):
        raise ConfigError("visits", "id out of range", f"< n_clients={n_clients}, n_servers")
    inside = (visits.enter[:, None] <= times[None, :]) & (times[None, :] < visits.exit[:, None])
    for k in np.flatnonzero(inside.any(axis=1)):
        out[visits.client[k], visits.server[k]] |= inside[k]
    return out


@dataclass(frozen=True)
class CycleOutcome:
    """Per (cycle, client) result against the actual connections.

    Attributes:
        cycle: index of the cycle in ``selection.cycles``.
        client: client id.
        started: connected to the cycle's server at its start (it received the model).
        completed: started and still connected at start + tau_n (could deliver).
    """

    cycle: np.ndarray
    client: np.ndarray
    started: np.ndarray
    completed: np.ndarray

    @property
    def frustrated(self) -> np.ndarray:
        """Initiated the training but could not finish it (the paper's frustrated client)."""
        return self.started & ~self.completed


def evaluate_cycles(selection: Selection, actual: Visits, train_time: np.ndarray) -> CycleOutcome:
    """Replay a selection against the actual connection intervals (MoFeL, Sec. 5.2)."""
    tau = np.asarray(train_time, dtype=float).ravel()
    cyc, cli, srv, start = [], [], [], []
    for i, c in enumerate(selection.cycles):
        cyc.extend([i] * c.clients.size)
        cli.extend(c.clients.tolist())
        srv.extend([c.server] * c.clients.size)
        start.extend([c.start] * c.clients.size)
    cli_a = np.asarray(cli, dtype=np.int64)
    srv_a = np.asarray(srv, dtype=np.int64)
    start_a = np.asarray(start, dtype=float)
    if cli_a.size == 0:
        empty = np.zeros(0, dtype=bool)
        return CycleOutcome(np.zeros(0, dtype=np.int64), cli_a, empty, empty)
    started = feasible(actual, cli_a, srv_a, start_a, 0.0)
    completed = feasible(actual, cli_a, srv_a, start_a, tau[cli_a])
    return CycleOutcome(np.asarray(cyc, dtype=np.int64), cli_a, started, completed)


def ntc(
    selection: Selection,
    actual: Visits,
    train_time: np.ndarray,
    *,
    min_completed: int | None = 1,
) -> int:
    """NTC: training cycles completed (MoFeL, Sec. 5.2).

    A cycle counts when at least ``min_completed`` of its clients deliver (None: all of
    them, the reading of "MoFeL requires the aggregation of all local training" that the
    policies' ``ntc`` metric uses; 1 is the lenient reading the metric used before).
    """
    out = evaluate_cycles(selection, actual, train_time)
    total = 0
    for i, c in enumerate(selection.cycles):
        done = int(out.completed[out.cycle == i].sum())
        need = c.clients.size if min_completed is None else min_completed
        total += int(done >= max(need, 1))
    return total


def nfc(selection: Selection, actual: Visits, train_time: np.ndarray) -> int:
    """NFC: clients that initiated training but failed to complete it (MoFeL, Sec. 5.2)."""
    return int(evaluate_cycles(selection, actual, train_time).frustrated.sum())
