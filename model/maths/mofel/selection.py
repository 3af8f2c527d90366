"""MoFeL (Macedo et al., Sensors 2023): the central station's selection (eqs. 1-8, 10).

See :mod:`mobidfl.model.maths.mofel` for how each equation is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mobidfl.model.maths.mofel.visits import Visits

__all__ = [
    "METHODS",
    "Cycle",
    "Selection",
    "select",
    "select_exact",
    "select_greedy",
    "selection_key",
]

METHODS = ("auto", "milp", "greedy")


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
        raise ValueError(f"{name} = {arr.tolist()[:8]}: expected client counts >= 0")
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
        raise ValueError("train_time: expected finite tau_n > 0 for every client")
    if not (np.isfinite(horizon) and horizon >= 0):
        raise ValueError(f"horizon = {horizon!r}: expected a finite Delta >= 0")
    if len(visits) and visits.client.max() >= n:
        raise ValueError(
            f"train_time has {n} values: expected more than the largest client id "
            f"{visits.client.max()}"
        )
    if max_trainings_per_client < 1:
        raise ValueError(
            f"max_trainings_per_client = {max_trainings_per_client!r}: expected an int >= 1"
        )
    req = np.asarray(servers, dtype=np.int64).ravel()
    if np.unique(req).size != req.size:
        raise ValueError(f"servers {req.tolist()[:8]}: expected distinct requesting server ids")
    mins = _per_server(min_clients, req.size, 1, "min_clients")
    maxs = _per_server(max_clients, req.size, n, "max_clients")
    if (mins < 1).any() or (maxs < mins).any():
        raise ValueError(
            f"min_clients {mins.tolist()[:8]}, max_clients {maxs.tolist()[:8]}: "
            "expected 1 <= min <= max"
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
    from scipy.optimize import Bounds, LinearConstraint, milp  # HiGHS: only MoFeL's runs

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

    MoFeL, eq. 1 subject to eqs. 2-8 (and eq. 10 via ``max_trainings_per_client``). The
    paper minimises sum_s E_s and predicts E_s from the number of contributing clients; we
    read that as: first serve as many requesting servers as possible (each with at least
    ``min_clients``), then select as many clients as possible (at most ``max_clients`` per
    server), then start as early as possible (:func:`selection_key`). Variables: a binary
    per candidate slot (server, start, duration) and per eligible (client, server) pair;
    a client joins s only inside s's chosen slot, where it is connected over
    [start, start + duration) and tau_n <= duration (eq. 8: the slowest client sets the end).

    Parameters
    ----------
    visits
        predicted connection intervals (eq. 6).
    train_time
        tau_n per client id.
    servers
        servers that requested retraining in the window (alert state, Sec. 4).
    t0
        start of the evaluation interval (servers enter the alert state).
    horizon
        Delta; starts lie in [t0, t0 + Delta].
    min_clients, max_clients
        per-server bounds (scalar or one per requesting server).
    max_trainings_per_client
        eq. 10's threshold (1: each client serves one server).
    finish_within_horizon
        also end every cycle by t0 + Delta (y_nst is defined only
        inside the interval, eqs. 2-4).
    node_limit
        branch-and-bound nodes for HiGHS (deterministic, unlike a time
        limit); when reached the best found is returned with method
        ``"milp_node_limit"``.

    Raises
    ------
    RuntimeError
        HiGHS found no solution (only possible with a node limit).
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


# Signature and problem build as select_exact: two public solvers of one problem, each called alone.
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
    """Fast feasible selection for large cases (MoFeL, Sec. 6 suggests approximations).

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

    Why a switch: the exact problem grows fast (MoFeL, Sec. 6 says so too; solve times in
    docs/performance/measurements.md). Above ``exact_max_variables`` (binary variables: slots +
    eligible client-server pairs), or if HiGHS hits ``node_limit`` with a worse answer than
    the greedy one, the greedy selection is returned. ``Selection.method`` says which was
    used (``"milp"``, ``"milp_node_limit"`` or ``"greedy"``); ``notes["variables"]`` gives the
    MILP size. The limit counts branch-and-bound nodes, not seconds, so the same input gives
    the same selection on a loaded machine. Other arguments: see :func:`select_exact`.
    """
    if method not in METHODS:
        raise ValueError(f"method = {method!r}: expected one of {METHODS}")
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
