"""MoFeL: mobility-aware client selection across several central servers (pure maths).

Seed 002 (Macedo et al., *Mobility-Aware Federated Learning Considering Multiple Networks*,
Sensors 23(14):6286, 2023). Each central server s (an edge server) covers a territory of path
length d_s; client n moves at speed v_n and needs tau_n time units of local training, so it
stays d_s / v_n in s's territory (Sec. 4). A central station knows every client's predicted
route and, for the servers that requested retraining within a window, selects *when* each
server starts a training cycle and *which* clients join it, so that every selected client
stays connected for the whole cycle (eqs. 1-8; eq. 10 limits trainings per client).

The stored copy of the paper lost its formulas; this module follows the prose that describes
each equation (Sec. 4) and says where it had to choose (see each docstring):

* eq. 2: x_ns = 1 => client n takes part at least once in the interval [t0, t0 + Delta];
* eqs. 3-4: y_nst marks n training for s at t; with eq. 2, sum_t y_nst = tau_n x_ns;
* eqs. 5-6: y_nst <= c_nst, the connection indicator built from route, speed and d_s;
* eq. 7: training is continuous (one uninterrupted block);
* eq. 8: every client of s stays available until the slowest one finishes (max tau_n);
* eq. 1: minimise sum_s E_s, with E_s predicted from the number of contributing clients
  (the paper's own choice); here: lexicographically maximise (servers served, clients
  selected, earliness of the starts) - see :func:`select_exact`.

Times are continuous; a connection interval is half-open [enter, exit), and training on
[start, start + tau) fits iff enter <= start and start + tau <= exit (the discrete-step
reading of eqs. 5-7: steps start .. start + tau - 1 all connected).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from model.errors import ConfigError

__all__ = [
    "Cycle",
    "CycleOutcome",
    "Selection",
    "Visits",
    "can_ever_train",
    "connected_until",
    "connection_indicator",
    "evaluate_cycles",
    "feasible",
    "nfc",
    "ntc",
    "route_visits",
    "select",
    "select_a1",
    "select_a2",
    "select_exact",
    "select_greedy",
    "selection_key",
]

METHODS = ("auto", "milp", "greedy")


# --------------------------------------------------------------------------------------------
# Mobility inputs: predicted connection intervals (eq. 6)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Visits:
    """Connection intervals: client ``client[k]`` is in server ``server[k]``'s territory on
    [enter[k], exit[k]).

    Seed 002, Sec. 3: a client belongs to one server's domain at any time, so the intervals of
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
            raise ConfigError("visits", f"lengths {sorted(sizes)}", "four arrays of one length")
        if client.size and (client.min() < 0 or server.min() < 0):
            raise ConfigError("visits", "negative id", "client and server ids >= 0")
        if np.isnan(enter).any() or np.isnan(exit_).any() or (exit_ < enter).any():
            raise ConfigError("visits", "exit < enter or NaN", "enter <= exit for every row")
        order = np.lexsort((enter, client))
        c, e, x = client[order], enter[order], exit_[order]
        same = c[1:] == c[:-1]
        if (same & (e[1:] < x[:-1])).any():
            raise ConfigError("visits", "overlapping intervals", "one server at a time per client")
        object.__setattr__(self, "client", c)
        object.__setattr__(self, "server", server[order])
        object.__setattr__(self, "enter", e)
        object.__setattr__(self, "exit", x)

    def __len__(self) -> int:
        return int(self.client.shape[0])

    @classmethod
    def from_routes(
        cls,
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
        return cls(
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
    """Predicted (server, enter, exit) along one client's route (seed 002, Sec. 4 and eq. 6).

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
    """d_s / v_n >= tau_n: client n can ever finish a training inside s (seed 002, Sec. 4).

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


def connected_until(visits: Visits, now: float, *, n_clients: int) -> tuple[np.ndarray, np.ndarray]:
    """Current server and remaining connection time of every client at ``now``.

    Seed 002, Sec. 4: a client connected to s loses the connection at the end of its
    d_s / v_n stay; the remaining time is what a server can use for training.

    Returns:
        (server, remaining): server id per client (-1 when in no territory) and exit - now
        (0 when not connected).
    """
    server = np.full(n_clients, -1, dtype=np.int64)
    remaining = np.zeros(n_clients)
    rows = np.flatnonzero((visits.enter <= now) & (now < visits.exit))
    if rows.size and visits.client[rows].max() >= n_clients:
        raise ConfigError("n_clients", n_clients, f"> largest client id {visits.client.max()}")
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

    Seed 002, eqs. 5-7: training happens only while connected (y_nst <= c_nst, eqs. 5-6) and
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
        raise ConfigError("train_time", float(tau.min()), "tau >= 0")
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


# --------------------------------------------------------------------------------------------
# Selections
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cycle:
    """One training cycle: ``server`` starts at ``start`` with ``clients``.

    ``duration`` is max tau_n over its clients (eq. 8: the cycle ends with the slowest).
    """

    server: int
    start: float
    duration: float
    clients: np.ndarray


@dataclass(frozen=True)
class Selection:
    """Which clients train for which server, when; ``method`` says how it was obtained."""

    cycles: tuple[Cycle, ...]
    method: str
    notes: dict[str, float] = field(default_factory=dict)

    def clients_of(self, server: int) -> np.ndarray:
        """Client ids selected for ``server`` (empty when it got no cycle)."""
        for cyc in self.cycles:
            if cyc.server == server:
                return cyc.clients
        return np.zeros(0, dtype=np.int64)

    @property
    def n_selected(self) -> int:
        """Number of (client, server) participations."""
        return int(sum(c.clients.size for c in self.cycles))


def selection_key(selection: Selection, *, t0: float) -> tuple[int, int, float]:
    """The lexicographic objective maximised by :func:`select_exact` (eq. 1 as read here).

    (servers served, clients selected, -(sum of start delays)). Earlier starts come last:
    they only break ties, "the optimal moment to initiate the training" (Sec. 4).
    """
    delays = sum(c.start - t0 for c in selection.cycles)
    return (len(selection.cycles), selection.n_selected, -float(delays))


@dataclass(frozen=True)
class _Problem:
    """Candidate slots (server, start, duration) and who is eligible for each."""

    servers: np.ndarray  # requesting servers
    slot_server: np.ndarray  # position in ``servers``
    slot_start: np.ndarray
    slot_duration: np.ndarray
    eligible: list[np.ndarray]  # clients eligible for each slot
    min_clients: np.ndarray  # per requesting server
    max_clients: np.ndarray
    budget: int
    n_clients: int


def _per_server(
    value: int | Sequence[int] | None, count: int, default: int, name: str
) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(default if value is None else value, dtype=np.int64), (count,))
    if (arr < 0).any():
        raise ConfigError(name, arr.tolist(), "non-negative client counts")
    return arr.copy()


def _undominated(
    slot_server: list[int], slot_start: list[float], eligible: list[np.ndarray], n: int
) -> list[int]:
    """Drop slot A when a slot B of the same server starts no later and E_A is a subset of E_B.

    Exact: any selection inside A is also feasible inside B with no later start, so the
    optimum of :func:`select_exact` is unchanged; it only shrinks the MILP.
    """
    keep: list[int] = []
    server_arr = np.asarray(slot_server, dtype=np.int64)
    for pos in np.unique(server_arr).tolist():
        idx = np.flatnonzero(server_arr == pos)
        member = np.zeros((idx.size, n), dtype=np.float32)
        for row, k in enumerate(idx.tolist()):
            member[row, eligible[k]] = 1.0
        outside = member @ (1.0 - member).T  # [a, b] = |E_a minus E_b|
        starts = np.asarray(slot_start)[idx]
        sizes = member.sum(axis=1)
        for a in range(idx.size):
            covers = (outside[a] == 0) & (starts <= starts[a])
            covers[a] = False
            # break exact ties (same set cannot happen: sets are distinct) by larger set
            if not (covers & ((sizes > sizes[a]) | (starts < starts[a]))).any():
                keep.append(int(idx[a]))
    return sorted(keep)


def _build_problem(
    visits: Visits,
    train_time: np.ndarray,
    servers: Sequence[int],
    t0: float,
    horizon: float,
    *,
    min_clients: int | Sequence[int],
    max_clients: int | Sequence[int] | None,
    max_trainings_per_client: int,
    finish_within_horizon: bool,
) -> _Problem:
    """Enumerate start/duration slots; keep distinct eligible sets, earliest start first.

    A selection for s with start t is feasible iff every chosen client is connected over
    [t, t + max tau] (eqs. 5-8). Shifting t back to the latest entry of the chosen clients
    keeps it feasible, so candidate starts are t0 and every entry in (t0, t0 + Delta]; the
    duration is one of the clients' tau values. This enumeration is exact.
    """
    tau = np.asarray(train_time, dtype=float).ravel()
    n = tau.shape[0]
    if not np.isfinite(tau).all() or (tau <= 0).any():
        raise ConfigError("train_time", "non-positive or non-finite", "tau_n > 0 for all")
    if not (np.isfinite(horizon) and horizon >= 0):
        raise ConfigError("horizon", horizon, "a finite Delta >= 0")
    if len(visits) and visits.client.max() >= n:
        raise ConfigError("train_time.size", n, f"> largest client id {visits.client.max()}")
    if max_trainings_per_client < 1:
        raise ConfigError("max_trainings_per_client", max_trainings_per_client, "an int >= 1")
    req = np.asarray(servers, dtype=np.int64).ravel()
    if np.unique(req).size != req.size:
        raise ConfigError("servers", req.tolist(), "distinct requesting server ids")
    mins = _per_server(min_clients, req.size, 1, "min_clients")
    maxs = _per_server(max_clients, req.size, n, "max_clients")
    if (mins < 1).any() or (maxs < mins).any():
        raise ConfigError(
            "min_clients/max_clients", (mins.tolist(), maxs.tolist()), "1 <= min <= max"
        )
    end = t0 + horizon
    slot_server, slot_start, slot_dur, eligible = [], [], [], []
    for pos, s in enumerate(req.tolist()):
        rows = np.flatnonzero((visits.server == s) & (visits.exit > t0) & (visits.enter <= end))
        if rows.size == 0:
            continue
        starts = np.unique(np.concatenate([[t0], visits.enter[rows][visits.enter[rows] > t0]]))
        starts = starts[starts <= end]
        durations = np.unique(tau[visits.client[rows]])
        r_enter, r_exit = visits.enter[rows], visits.exit[rows]
        r_client, r_tau = visits.client[rows], tau[visits.client[rows]]
        seen: set[bytes] = set()
        for t in starts.tolist():  # ascending: the first slot with a given set starts earliest
            dur = durations if not finish_within_horizon else durations[t + durations <= end]
            # (durations x rows): a client has at most one interval containing t, so each
            # row of ``ok`` selects each eligible client of slot (t, d) exactly once.
            ok = (r_enter <= t)[None, :] & (t + dur[:, None] <= r_exit[None, :])
            ok &= r_tau[None, :] <= dur[:, None]
            counts = ok.sum(axis=1)
            for i in np.flatnonzero(counts >= mins[pos]).tolist():
                who = np.sort(r_client[ok[i]])
                sig = who.tobytes()  # a client may qualify through different visits
                if sig in seen:
                    continue
                seen.add(sig)
                slot_server.append(pos)
                slot_start.append(t)
                slot_dur.append(float(dur[i]))
                eligible.append(who)
    keep = _undominated(slot_server, slot_start, eligible, n)
    slot_server = [slot_server[k] for k in keep]
    slot_start = [slot_start[k] for k in keep]
    slot_dur = [slot_dur[k] for k in keep]
    eligible = [eligible[k] for k in keep]
    return _Problem(
        servers=req,
        slot_server=np.asarray(slot_server, dtype=np.int64),
        slot_start=np.asarray(slot_start, dtype=float),
        slot_duration=np.asarray(slot_dur, dtype=float),
        eligible=eligible,
        min_clients=mins,
        max_clients=maxs,
        budget=int(max_trainings_per_client),
        n_clients=n,
    )


def _finish(
    problem: _Problem,
    chosen: dict[int, tuple[int, np.ndarray]],
    tau: np.ndarray,
    method: str,
    notes: dict[str, float],
) -> Selection:
    cycles = []
    for pos in sorted(chosen):
        slot, clients = chosen[pos]
        clients = np.sort(np.asarray(clients, dtype=np.int64))
        cycles.append(
            Cycle(
                server=int(problem.servers[pos]),
                start=float(problem.slot_start[slot]),
                duration=float(tau[clients].max()),
                clients=clients,
            )
        )
    return Selection(cycles=tuple(cycles), method=method, notes=notes)


def _milp_size(problem: _Problem) -> int:
    pairs = {
        (int(c), int(problem.slot_server[k])) for k, e in enumerate(problem.eligible) for c in e
    }
    return len(problem.eligible) + len(pairs)


def _solve_milp(
    problem: _Problem, tau: np.ndarray, t0: float, horizon: float, node_limit: int | None
) -> Selection | None:
    n_slots = len(problem.eligible)
    n_srv = problem.servers.size
    if n_slots == 0:
        return Selection(cycles=(), method="milp", notes={"variables": 0.0})
    # x variables: one per (client, server position) eligible in at least one slot.
    pair_index: dict[tuple[int, int], int] = {}
    for k, who in enumerate(problem.eligible):
        for c in who.tolist():
            pair_index.setdefault((c, int(problem.slot_server[k])), n_slots + len(pair_index))
    n_var = n_slots + len(pair_index)
    big = problem.n_clients * problem.budget + 1.0  # one more server beats any client count
    eps = 1.0 / (n_srv + 1.0)  # all start penalties together stay below one client
    scale = horizon if horizon > 0 else 1.0
    cost = np.zeros(n_var)
    cost[:n_slots] = -big + eps * (problem.slot_start - t0) / scale
    cost[n_slots:] = -1.0

    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lb: list[float] = []
    ub: list[float] = []

    def add(entries: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lb)
        for col, val in entries:
            rows.append(r)
            cols.append(col)
            vals.append(val)
        lb.append(low)
        ub.append(high)

    slots_of = [np.flatnonzero(problem.slot_server == p) for p in range(n_srv)]
    pairs_of_server: list[list[int]] = [[] for _ in range(n_srv)]
    pairs_of_client: dict[int, list[int]] = {}
    for (c, p), j in pair_index.items():
        pairs_of_server[p].append(j)
        pairs_of_client.setdefault(c, []).append(j)
    for p in range(n_srv):
        w = [(int(k), 1.0) for k in slots_of[p]]
        if not w:
            continue
        add(w, 0.0, 1.0)  # at most one cycle (start, duration) per server in the window
        xs = [(j, 1.0) for j in pairs_of_server[p]]
        add(xs + [(k, -float(problem.min_clients[p])) for k, _ in w], 0.0, np.inf)
        add(xs + [(k, -float(problem.max_clients[p])) for k, _ in w], -np.inf, 0.0)
    slot_members: dict[tuple[int, int], list[int]] = {}
    for k, who in enumerate(problem.eligible):
        for c in who.tolist():
            slot_members.setdefault((c, int(problem.slot_server[k])), []).append(k)
    for key, j in pair_index.items():
        # x_ns only inside a chosen slot where n is connected for the whole cycle (eqs. 2-8)
        add([(j, 1.0)] + [(k, -1.0) for k in slot_members[key]], -np.inf, 0.0)
    for js in pairs_of_client.values():
        if len(js) > problem.budget:
            add([(j, 1.0) for j in js], 0.0, float(problem.budget))  # eq. 10
    a = sp.csr_array((vals, (rows, cols)), shape=(len(lb), n_var))
    options: dict[str, float] = {"mip_rel_gap": 0.0}  # exact, so tie-breaks are honoured
    if node_limit is not None:  # a work limit, never a clock: same input, same answer
        options["node_limit"] = int(node_limit)
    res = milp(
        cost,
        constraints=LinearConstraint(a, np.asarray(lb), np.asarray(ub)),
        integrality=np.ones(n_var),
        bounds=Bounds(0.0, 1.0),
        options=options,
    )
    if res.x is None:
        return None
    x = np.asarray(res.x) > 0.5
    chosen: dict[int, tuple[int, np.ndarray]] = {}
    for p in range(n_srv):
        on = [int(k) for k in slots_of[p] if x[k]]
        if not on:
            continue
        members = [c for (c, q), j in pair_index.items() if q == p and x[j]]
        chosen[p] = (on[0], np.asarray(members, dtype=np.int64))
    method = "milp" if res.status == 0 else "milp_node_limit"
    return _finish(problem, chosen, tau, method, {"variables": float(n_var)})


def select_exact(
    visits: Visits,
    train_time: np.ndarray,
    servers: Sequence[int],
    t0: float,
    horizon: float,
    *,
    min_clients: int | Sequence[int] = 1,
    max_clients: int | Sequence[int] | None = None,
    max_trainings_per_client: int = 1,
    finish_within_horizon: bool = True,
    node_limit: int | None = None,
) -> Selection:
    """The central station's selection, solved exactly with ``scipy.optimize.milp`` (HiGHS).

    Seed 002, eq. 1 subject to eqs. 2-8 (and eq. 10 via ``max_trainings_per_client``). The
    paper minimises sum_s E_s and predicts E_s from the number of contributing clients; we
    read that as: first serve as many requesting servers as possible (each with at least
    ``min_clients``), then select as many clients as possible (at most ``max_clients`` per
    server), then start as early as possible (:func:`selection_key`). Variables: a binary
    per candidate slot (server, start, duration) and per eligible (client, server) pair;
    a client joins s only inside s's chosen slot, where it is connected over
    [start, start + duration) and tau_n <= duration (eq. 8: the slowest client sets the end).

    Args:
        visits: predicted connection intervals (eq. 6).
        train_time: tau_n per client id.
        servers: servers that requested retraining in the window (alert state, Sec. 4).
        t0: start of the evaluation interval (servers enter the alert state).
        horizon: Delta; starts lie in [t0, t0 + Delta].
        min_clients, max_clients: per-server bounds (scalar or one per requesting server).
        max_trainings_per_client: eq. 10's threshold (1: each client serves one server).
        finish_within_horizon: also end every cycle by t0 + Delta (y_nst is defined only
            inside the interval, eqs. 2-4).
        node_limit: branch-and-bound nodes for HiGHS (deterministic, unlike a time
            limit); when reached the best found is returned with method
            ``"milp_node_limit"``.

    Raises:
        RuntimeError: HiGHS found no solution (only possible with a node limit).
    """
    tau = np.asarray(train_time, dtype=float).ravel()
    problem = _build_problem(
        visits,
        tau,
        servers,
        t0,
        horizon,
        min_clients=min_clients,
        max_clients=max_clients,
        max_trainings_per_client=max_trainings_per_client,
        finish_within_horizon=finish_within_horizon,
    )
    result = _solve_milp(problem, tau, t0, horizon, node_limit)
    if result is None:
        raise RuntimeError("milp returned no solution for the MoFeL selection (node limit?)")
    return result


def _greedy(problem: _Problem, tau: np.ndarray) -> Selection:
    budget = np.full(problem.n_clients, problem.budget, dtype=np.int64)
    n_srv = problem.servers.size
    # Options per client: in how many requesting servers' slots it is eligible.
    options = np.zeros(problem.n_clients, dtype=np.int64)
    per_server_clients = [
        np.unique(
            np.concatenate(
                [problem.eligible[k] for k in np.flatnonzero(problem.slot_server == p)]
                or [np.zeros(0, dtype=np.int64)]
            )
        )
        for p in range(n_srv)
    ]
    for who in per_server_clients:
        options[who] += 1
    order = sorted(range(n_srv), key=lambda p: (per_server_clients[p].size, p))  # scarcest first
    chosen: dict[int, tuple[int, np.ndarray]] = {}
    for p in order:
        best_key: tuple[int, float] | None = None
        best_slot, best_members = -1, np.zeros(0, dtype=np.int64)
        for k in np.flatnonzero(problem.slot_server == p).tolist():
            free = problem.eligible[k][budget[problem.eligible[k]] > 0]
            if free.size < problem.min_clients[p]:
                continue
            # fewest alternatives first, then shortest training, then id
            free = free[np.lexsort((free, tau[free], options[free]))][: problem.max_clients[p]]
            key = (int(free.size), -float(problem.slot_start[k]))
            if best_key is None or key > best_key:  # strict: ties keep the earlier slot
                best_key, best_slot, best_members = key, k, free
        if best_key is None:
            continue
        chosen[p] = (best_slot, best_members)
        budget[best_members] -= 1
    return _finish(problem, chosen, tau, "greedy", {})


def select_greedy(
    visits: Visits,
    train_time: np.ndarray,
    servers: Sequence[int],
    t0: float,
    horizon: float,
    *,
    min_clients: int | Sequence[int] = 1,
    max_clients: int | Sequence[int] | None = None,
    max_trainings_per_client: int = 1,
    finish_within_horizon: bool = True,
) -> Selection:
    """Fast feasible selection for large cases (seed 002, Sec. 6 suggests approximations).

    Same slots and constraints as :func:`select_exact` (so never infeasible), solved greedily:
    servers with the fewest eligible clients first; each takes the slot with most free
    eligible clients (ties: earliest start), preferring clients with fewer alternatives.
    """
    tau = np.asarray(train_time, dtype=float).ravel()
    problem = _build_problem(
        visits,
        tau,
        servers,
        t0,
        horizon,
        min_clients=min_clients,
        max_clients=max_clients,
        max_trainings_per_client=max_trainings_per_client,
        finish_within_horizon=finish_within_horizon,
    )
    return _greedy(problem, tau)


def select(
    visits: Visits,
    train_time: np.ndarray,
    servers: Sequence[int],
    t0: float,
    horizon: float,
    *,
    method: str = "auto",
    exact_max_variables: int = 1_000,
    min_clients: int | Sequence[int] = 1,
    max_clients: int | Sequence[int] | None = None,
    max_trainings_per_client: int = 1,
    finish_within_horizon: bool = True,
    node_limit: int | None = 20_000,
) -> Selection:
    """MoFeL selection; ``method='auto'`` solves exactly when the MILP is small enough.

    Why a switch: the exact problem grows fast (seed 002, Sec. 6 says so too). Measured here
    (2 shared cores, 100 clients, 4 servers, max 10 per server): ~200 variables 0.3 s, ~500
    about 1-3 s, ~900 about 3-8 s. Above ``exact_max_variables`` (binary variables: slots +
    eligible client-server pairs), or if HiGHS hits ``node_limit`` with a worse answer than
    the greedy one, the greedy selection is returned. ``Selection.method`` says which was
    used (``"milp"``, ``"milp_node_limit"`` or ``"greedy"``); ``notes["variables"]`` gives the
    MILP size. The limit counts branch-and-bound nodes, not seconds, so the same input gives
    the same selection on a loaded machine. Other arguments: see :func:`select_exact`.
    """
    if method not in METHODS:
        raise ConfigError("method", method, f"one of {METHODS}")
    tau = np.asarray(train_time, dtype=float).ravel()
    problem = _build_problem(
        visits,
        tau,
        servers,
        t0,
        horizon,
        min_clients=min_clients,
        max_clients=max_clients,
        max_trainings_per_client=max_trainings_per_client,
        finish_within_horizon=finish_within_horizon,
    )
    size = _milp_size(problem)
    exact: Selection | None = None
    if method == "milp" or (method == "auto" and size <= exact_max_variables):
        exact = _solve_milp(problem, tau, t0, horizon, node_limit)
        if exact is not None and exact.method == "milp":
            return exact
    greedy = _greedy(problem, tau)
    greedy = Selection(greedy.cycles, greedy.method, {"variables": float(size)})
    if exact is not None and selection_key(exact, t0=t0) >= selection_key(greedy, t0=t0):
        return exact
    return greedy


# --------------------------------------------------------------------------------------------
# Baselines (Sec. 5.2)
# --------------------------------------------------------------------------------------------


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
        raise ConfigError("clients_per_server", clients_per_server, "an int >= 1")
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
    """Baseline A2: each server takes only its currently connected clients that can finish
    their own training before leaving (Sec. 5.2; no view of future arrivals).

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
        cycles.append(
            Cycle(
                server=s,
                start=float(now),
                duration=float(tau[pool].max()),
                clients=pool.astype(np.int64),
            )
        )
    return Selection(cycles=tuple(cycles), method="a2")


# --------------------------------------------------------------------------------------------
# Metrics (Sec. 5.2): NTC and NFC
# --------------------------------------------------------------------------------------------


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
    """Replay a selection against the actual connection intervals (seed 002, Sec. 5.2)."""
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
    """NTC: training cycles completed (seed 002, Sec. 5.2).

    A cycle counts when at least ``min_completed`` of its clients deliver (None: all of
    them, the strict reading of "MoFeL requires the aggregation of all local training").
    """
    out = evaluate_cycles(selection, actual, train_time)
    total = 0
    for i, c in enumerate(selection.cycles):
        done = int(out.completed[out.cycle == i].sum())
        need = c.clients.size if min_completed is None else min_completed
        total += int(done >= max(need, 1))
    return total


def nfc(selection: Selection, actual: Visits, train_time: np.ndarray) -> int:
    """NFC: clients that initiated training but failed to complete it (seed 002, Sec. 5.2)."""
    return int(evaluate_cycles(selection, actual, train_time).frustrated.sum())
