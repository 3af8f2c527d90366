"""Trips on shortest paths to random destinations, with a disclosed (predictable) route.

MoFeL (Sec. 3-4) assumes a central station that knows every client's route and
speed, so it can predict when the client enters and leaves each edge server's territory.
This model gives MobiDFL such routes on the real street graph: a member drives the
shortest path (by length) from where it is to a random destination node, then draws the
next destination, and so on. Each member draws its destinations from its own generator,
so the sequence of trips is fixed by the seed whatever asks for predictions, and when:
extending the known plan (:meth:`Route.ensure_horizon`) commits destinations that the
member then really drives. Predictions are therefore exact while the plan lasts
(:meth:`Route.predicted_edges`: the edge sequence with entry times).

Vehicles use the directed drive network (one-way streets respected), other kinds the walk
network. Each member keeps one speed, drawn once per member U(``route.speed_min``, the
kind's ``speed``) (MoFeL Sec. 4: "the client's speed is an inherent characteristic of the
client"; Sec. 5.3: v_n ~ U(v_min = 1 m/min, v_max)); set ``route.speed_min`` equal to the
kind's speed for one speed for all. Speeds come from their own generator (seeded by
``seed`` and the kind), so they do not shift any other random stream. Edge
changes are time-stamped inside the step (:attr:`Route.last_transitions`), so departures
are known to the second, not only at step ends.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar, override

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.maps.network import StreetNetwork
from mobidfl.settings import PluginSettings, kinds_where, non_negative, setting

_CACHE_SOURCES = 4096  # predecessor rows kept per network (one Dijkstra per source node)


class ShortestPaths:
    """Shortest paths by length between nodes of a :class:`StreetNetwork`, as edge lists.

    Parallel edges: the shortest one of each ``(u, v)`` pair is used. Dijkstra runs once
    per source node and its predecessor row is cached (bounded), so large maps need no
    all-pairs table.
    """

    def __init__(self, network: StreetNetwork) -> None:
        n = len(network.node_xy)
        order = np.lexsort((network.edge_len, network.edge_v, network.edge_u))
        u, v = network.edge_u[order], network.edge_v[order]
        first = np.ones(order.size, bool)
        first[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1])
        best = order[first]  # shortest edge of each (u, v) pair
        self.n_nodes = n
        self.graph = sp.csr_matrix(
            (network.edge_len[best], (network.edge_u[best], network.edge_v[best])), shape=(n, n)
        )
        self.edge_of = {
            int(a) * n + int(b): int(e)
            for a, b, e in zip(network.edge_u[best], network.edge_v[best], best, strict=True)
        }
        self._pred: dict[int, np.ndarray] = {}

    def edges(self, source: int, target: int) -> list[int]:
        """Edge ids of the shortest path ``source -> target`` (empty when equal)."""
        if source == target:
            return []
        pred = self._pred.get(source)
        if pred is None:
            if len(self._pred) >= _CACHE_SOURCES:
                self._pred.clear()
            _, pred = dijkstra(self.graph, indices=source, return_predecessors=True)
            self._pred[source] = pred
        nodes = [target]
        while nodes[-1] != source:
            prev = int(pred[nodes[-1]])
            if prev < 0:
                raise RuntimeError(f"node {target} unreachable from {source}")
            nodes.append(prev)
        nodes.reverse()
        n = self.n_nodes
        return [self.edge_of[a * n + b] for a, b in zip(nodes[:-1], nodes[1:], strict=True)]


def member_speeds(count: int, *, low: float, high: float, seed: int, kind: str) -> np.ndarray:
    """Per-member speeds U(min(low, high), high) from a generator of (seed, kind) only."""
    low = min(float(low), float(high))
    if low >= high:
        return np.full(count, float(high))
    rng = np.random.default_rng([int(seed), 0x5BEED, zlib.crc32(kind.encode())])
    return rng.uniform(low, high, size=count)


_PATHS: dict[int, tuple[StreetNetwork, ShortestPaths]] = {}


def shortest_paths(network: StreetNetwork) -> ShortestPaths:
    """One :class:`ShortestPaths` per network object (shared by groups and runs)."""
    hit = _PATHS.get(id(network))
    if hit is None or hit[0] is not network:
        hit = (network, ShortestPaths(network))
        _PATHS[id(network)] = hit
    return hit[1]


@dataclass(frozen=True, kw_only=True)
class RouteSettings(PluginSettings):
    """The slowest client's speed (MoFeL Sec. 5.3: v_n ~ U(v_min, v_max))."""

    namespace: ClassVar[str] = "route"
    speed_min: float = setting(
        1.0 / 60.0,
        "route: client speeds drawn U(route.speed_min, <kind>.speed) m/s per client "
        "(MoFeL Sec. 5.3: v_min = 1 m/min)",
        non_negative,
        alias="route_speed_min",
    )


@register_mobility
class Route(MobilityModel):
    """Shortest-path trips to random destination nodes; the planned route is disclosed.

    Attributes
    ----------
    edge, offset
        current edge and metres along it, per member.
    time
        simulated seconds since the start (advanced by ``step_s`` per step).
    entered
        time at which each member entered its current edge.
    plan
        per member, the planned edges after the current one (committed trips).
    last_transitions
        ``(member, time, new_edge)`` of every edge change during the
        last :meth:`advance`, in time order per member.
    """

    name = "route"
    # Kinds it fits: MoFeL: vehicles on routes over the drive network.
    kinds = kinds_where(network="drive")
    settings_class = RouteSettings
    options: RouteSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        rng: np.random.Generator = kwargs["rng"]
        self.network: StreetNetwork = (
            self.street_network()
        )
        self.paths = shortest_paths(self.network)
        self.edge, self.offset = self.network.random_edges(self.count, rng)
        self.position = self.network.xy(self.edge, self.offset)
        seeds = np.random.SeedSequence(int(rng.integers(2**63))).spawn(self.count)
        self.trip_rngs = [np.random.default_rng(s) for s in seeds]
        self.time = 0.0
        self.speed_of = member_speeds(
            self.count,
            low=float(self.options.speed_min),
            high=float(self.kind_settings.speed),
            seed=int(getattr(self.settings, "seed", 0)),
            kind=self.kind,
        )
        speed = self.speeds()
        with np.errstate(divide="ignore", invalid="ignore"):
            back = np.where(speed > 0, self.offset / np.where(speed > 0, speed, 1.0), 0.0)
        self.entered = -back  # as if it had driven the current edge from its start
        self.plan: list[deque[int]] = [deque() for _ in range(self.count)]
        self.plan_length = np.zeros(self.count)  # metres of ``plan`` (after the current edge)
        for i in range(self.count):
            self._add_trip(i)
        empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
        self.last_transitions: tuple[np.ndarray, np.ndarray, np.ndarray] = (
            empty_i,
            empty_f,
            empty_i,
        )

    def speeds(self) -> np.ndarray:
        """Each member's own constant speed (m/s)."""
        return self.speed_of

    # --- planning -----------------------------------------------------------------------
    def _add_trip(self, i: int) -> None:
        """Append the shortest path to a new random destination (never the current node)."""
        last = self.plan[i][-1] if self.plan[i] else int(self.edge[i])
        here = int(self.network.edge_v[last])
        n = self.paths.n_nodes
        draw = int(self.trip_rngs[i].integers(n - 1))
        target = draw + (draw >= here)  # uniform over the other nodes
        edges = self.paths.edges(here, target)
        self.plan[i].extend(edges)
        self.plan_length[i] += float(self.network.edge_len[edges].sum())

    def arrival_times(self) -> np.ndarray:
        """Time at which each member reaches the end of its known plan (inf if it stands)."""
        speed = self.speeds()
        left = self.network.edge_len[self.edge] - self.offset + self.plan_length
        with np.errstate(divide="ignore"):
            return np.where(speed > 0, self.time + left / np.where(speed > 0, speed, 1.0), np.inf)

    def ensure_horizon(self, until: float) -> None:
        """Commit trips until every moving member's known plan lasts at least to ``until``.

        MoFeL, Sec. 4: the central station predicts over ``[t0, t0 + Delta]``; it needs the
        routes that far ahead.
        """
        speed = self.speeds()
        for i in np.flatnonzero((self.arrival_times() < until) & (speed > 0)).tolist():
            left = self.network.edge_len[self.edge[i]] - self.offset[i] + self.plan_length[i]
            while self.time + left / speed[i] < until:
                self._add_trip(i)
                left = self.network.edge_len[self.edge[i]] - self.offset[i] + self.plan_length[i]

    def predicted_edges(self, i: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Member ``i``'s known future: (edges, entry times, end of plan time).

        ``edges[0]`` is the current edge, entered at ``entry[0] <= time``; the member is on
        ``edges[k]`` during ``[entry[k], entry[k + 1])`` and on the last one until the end
        of the plan. A standing member (speed 0) stays on its edge forever (end = inf).
        """
        speed = float(self.speeds()[i])
        edges = np.asarray([int(self.edge[i]), *self.plan[i]], dtype=np.int64)
        if speed <= 0:
            return edges[:1], np.array([self.entered[i]]), float("inf")
        lengths = self.network.edge_len[edges]
        first_left = lengths[0] - self.offset[i]
        ends = self.time + (first_left + np.concatenate([[0.0], np.cumsum(lengths[1:])])) / speed
        entry = np.concatenate([[self.entered[i]], ends[:-1]])
        return edges, entry, float(ends[-1])

    # --- moving -------------------------------------------------------------------------
    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        speed = self.speeds()
        lengths = self.network.edge_len
        out = np.empty((len(ctx.fractions), self.count, 2))
        who: list[np.ndarray] = []
        when: list[np.ndarray] = []
        where: list[np.ndarray] = []
        previous = 0.0
        for f, fraction in enumerate(ctx.fractions):
            t_from = self.time + previous * ctx.step_s
            distance = speed * ctx.step_s * (fraction - previous)
            remaining = distance.copy()
            active = np.flatnonzero(remaining > 0)
            while active.size:
                room = lengths[self.edge[active]] - self.offset[active]
                ends = remaining[active] > room
                stay = active[~ends]
                self.offset[stay] += remaining[stay]
                remaining[stay] = 0.0
                active = active[ends]
                if not active.size:
                    break
                remaining[active] -= room[ends]
                at = t_from + (distance[active] - remaining[active]) / speed[active]
                new = np.empty(active.size, np.int64)
                for k, i in enumerate(active.tolist()):
                    if not self.plan[i]:
                        self._add_trip(i)
                    new[k] = self.plan[i].popleft()
                    self.plan_length[i] -= lengths[new[k]]
                self.edge[active] = new
                self.offset[active] = 0.0
                self.entered[active] = at
                who.append(active.copy())
                when.append(at)
                where.append(new)
            out[f] = self.network.xy(self.edge, self.offset)
            previous = fraction
        self.time += ctx.step_s
        self.plan_length = np.maximum(self.plan_length, 0.0)  # float drift of the running sum
        self.position = out[-1]
        if who:
            m, t, e = np.concatenate(who), np.concatenate(when), np.concatenate(where)
            order = np.lexsort((t, m))
            self.last_transitions = (m[order], t[order], e[order])
        else:
            self.last_transitions = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
        return out

    # --- checkpoints --------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        sizes = np.array([len(p) for p in self.plan], dtype=np.int64)
        flat = np.fromiter((e for p in self.plan for e in p), dtype=np.int64, count=sizes.sum())
        return {
            **super().state_dict(),
            "edge": self.edge.copy(),
            "offset": self.offset.copy(),
            "time": float(self.time),
            "entered": self.entered.copy(),
            "plan_sizes": sizes,
            "plan_edges": flat,
            "plan_length": self.plan_length.copy(),
            "trip_rngs": [r.bit_generator.state for r in self.trip_rngs],
            "transitions": [a.copy() for a in self.last_transitions],
        }

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.edge = np.asarray(state["edge"], np.int64).copy()
        self.offset = np.asarray(state["offset"], float).copy()
        self.time = float(state["time"])
        self.entered = np.asarray(state["entered"], float).copy()
        bounds = np.concatenate([[0], np.cumsum(np.asarray(state["plan_sizes"], np.int64))])
        flat = np.asarray(state["plan_edges"], np.int64)
        self.plan = [
            deque(flat[a:b].tolist()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        self.plan_length = np.asarray(state["plan_length"], float).copy()
        for r, s in zip(self.trip_rngs, state["trip_rngs"], strict=True):
            r.bit_generator.state = s
        m, t, e = state["transitions"]
        self.last_transitions = (
            np.asarray(m, np.int64).copy(),
            np.asarray(t, float).copy(),
            np.asarray(e, np.int64).copy(),
        )
