"""MoFeL (Macedo et al., Sensors 2023): connection intervals and what they allow (eqs. 5-7).

Times are continuous; a connection interval is half-open [enter, exit), and training on
[start, start + tau) fits iff enter <= start and start + tau <= exit (the discrete-step
reading of eqs. 5-7: steps start .. start + tau - 1 all connected).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Visits", "connected_until", "feasible"]


@dataclass(frozen=True)
class Visits:
    """Connection intervals of clients with servers.

    Client ``client[k]`` is in server ``server[k]``'s territory on [enter[k], exit[k]).

    MoFeL, Sec. 3: a client belongs to one server's domain at any time, so the intervals of
    one client must not overlap (checked). Used both for the central station's predictions
    and for what actually happened (for NTC/NFC).
    """

    client: np.ndarray
    server: np.ndarray
    enter: np.ndarray
    exit: np.ndarray

    def __post_init__(self) -> None:
        client = np.asarray(self.client, dtype=np.int64).ravel()
        server = np.asarray(self.server, dtype=np.int64).ravel()
        enter = np.asarray(self.enter, dtype=float).ravel()
        exit_ = np.asarray(self.exit, dtype=float).ravel()
        sizes = {client.size, server.size, enter.size, exit_.size}
        if len(sizes) != 1:
            raise ValueError(
                f"visits of lengths {sorted(sizes)}: expected four arrays of one length"
            )
        if client.size and (client.min() < 0 or server.min() < 0):
            raise ValueError("visits has a negative id: expected client and server ids >= 0")
        if np.isnan(enter).any() or np.isnan(exit_).any() or (exit_ < enter).any():
            raise ValueError("visits has exit < enter or NaN: expected enter <= exit for every row")
        order = np.lexsort((enter, client))
        c, e, x = client[order], enter[order], exit_[order]
        same = c[1:] == c[:-1]
        if (same & (e[1:] < x[:-1])).any():
            raise ValueError(
                "visits has overlapping intervals: expected one server at a time per client"
            )
        object.__setattr__(self, "client", c)
        object.__setattr__(self, "server", server[order])
        object.__setattr__(self, "enter", e)
        object.__setattr__(self, "exit", x)

    def __len__(self) -> int:
        return int(self.client.shape[0])


def connected_until(visits: Visits, now: float, *, n_clients: int) -> tuple[np.ndarray, np.ndarray]:
    """Current server and remaining connection time of every client at ``now``.

    MoFeL, Sec. 4: a client connected to s loses the connection at the end of its
    d_s / v_n stay; the remaining time is what a server can use for training.

    Returns
    -------
    tuple[np.ndarray, np.ndarray]
        (server, remaining): server id per client (-1 when in no territory) and exit - now
        (0 when not connected).
    """
    server = np.full(n_clients, -1, dtype=np.int64)
    remaining = np.zeros(n_clients)
    rows = np.flatnonzero((visits.enter <= now) & (now < visits.exit))
    if rows.size and visits.client[rows].max() >= n_clients:
        raise ValueError(
            f"n_clients = {n_clients!r}: expected more than the largest client id "
            f"{visits.client.max()}"
        )
    server[visits.client[rows]] = visits.server[rows]
    remaining[visits.client[rows]] = visits.exit[rows] - now
    return server, remaining


def feasible(
    visits: Visits,
    client: int | np.ndarray,
    server: int | np.ndarray,
    start: float | np.ndarray,
    train_time: float | np.ndarray,
) -> np.ndarray:
    """True where client n stays in server s's territory for the whole [start, start + tau).

    MoFeL, eqs. 5-7: training happens only while connected (y_nst <= c_nst, eqs. 5-6) and
    without interruption (eq. 7), so one predicted interval must contain the whole block.
    Arguments broadcast against each other.
    """
    c, s, t, tau = np.broadcast_arrays(
        np.asarray(client, dtype=np.int64),
        np.asarray(server, dtype=np.int64),
        np.asarray(start, dtype=float),
        np.asarray(train_time, dtype=float),
    )
    if (tau < 0).any():
        raise ValueError(f"train_time has {float(tau.min())!r}: expected tau >= 0")
    lo = np.searchsorted(visits.client, c, side="left")
    hi = np.searchsorted(visits.client, c, side="right")
    out = np.zeros(c.shape, dtype=bool)
    for idx in np.ndindex(c.shape):
        rows = slice(int(lo[idx]), int(hi[idx]))
        ok = (
            (visits.server[rows] == s[idx])
            & (visits.enter[rows] <= t[idx])
            & (t[idx] + tau[idx] <= visits.exit[rows])
        )
        out[idx] = bool(ok.any())
    return out
