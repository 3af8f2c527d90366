"""MoFeL's edge servers and their training cycles: the machinery all three selections share.

MoFeL (Macedo et al., *Mobility-Aware Federated Learning Considering Multiple
Networks*, Sensors 2023). :class:`MofelBase` keeps the servers' territories and models,
tracks which client is where, runs the selected cycles (start, frustration, FedAvg at the
end), counts NTC/NFC and offers the selections their view of the clients
(:meth:`MofelBase.predicted_visits`, :meth:`MofelBase.current_visits`). The selections
themselves live in :mod:`mobidfl.model.policies.mofel` (the station) and
:mod:`mobidfl.model.policies.mofel_baselines` (A1, A2).

How MobiDFL maps the paper onto its world (choices, not in the paper):

* **Territories** are areas of the map: with ``servers == areas`` the world map's areas,
  otherwise the road nodes are split into ``servers`` areas by the same k-means
  (:func:`mobidfl.maps.grid.split_areas`, seeded by ``seed``). A road segment belongs to the
  territory of its midpoint, so membership changes only at intersections and follows from
  the route exactly (the paper's territorial reach d_s is the path length inside s).
* **Clients** are the policy's members; their mobility must be ``route``
  (:mod:`mobidfl.agents.mobility.routes`), which discloses the planned route.
* **Time.** Step k covers ``((k-1) step_s, k step_s]``. Cycles start at step ends (the
  station rounds predicted entries up and exits down to step ends, so a prediction can
  only be pessimistic). A client starting at time t must stay in the territory until
  ``t + train_time_s``; departures are time-stamped inside the step by the mobility. It
  trains (``train_mask``) in each step that overlaps its training interval (K local SGD
  steps per step, so ``ceil(train_time_s / step_s) * local_steps`` steps per cycle), and
  the server aggregates at the end of the step in which the cycle ends.
* **Requests**: a server is in the alert state when it runs no cycle and its accuracy on
  the shared test sample is below ``required_accuracy``; requests are gathered over one
  step (the station solves at the end of every step with requests), the prediction
  horizon is ``horizon_factor * train_time_s``, each cycle takes at most
  ``clients_per_cycle`` clients and a client serves one server per selection (eq. 10).
* Idle clients hold the model of the server they are connected to (Fig. 4, step 2:
  a client fetches the current global model when it connects), so ``acc_mean`` over
  agents is meaningful too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, override

import numpy as np

from mobidfl.errors import ConfigError
from mobidfl.maps.grid import area_of_points, split_areas
from mobidfl.model.maths.link import stay_seconds
from mobidfl.model.maths.mofel import Cycle, Visits
from mobidfl.model.policies.base import (
    SERVER,
    AgentTable,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
)
from mobidfl.settings import (
    PluginSettings,
    at_least_one,
    non_negative,
    positive,
    setting,
    unit_interval,
)

if TYPE_CHECKING:
    import torch

    from mobidfl.agents.views import RouteView, WorldView
    from mobidfl.maps.network import StreetNetwork
    from mobidfl.model.learning.engine import Engine
    from mobidfl.model.links import LinkPlan

__all__ = ["TIME_TOL", "MofelBase", "client_train_times", "server_accuracy"]

TIME_TOL = 1e-6
"""Seconds of float slack between predicted and simulated edge-entry times."""


def server_accuracy(engine: Engine, params: tuple[torch.Tensor, ...]) -> float:
    """Accuracy of one server model on the engine's shared test sample.

    Servers are not agents: :meth:`Engine.evaluate_params` evaluates a parameter tuple.
    """
    return engine.evaluate_params(params)[0]


def client_train_times(count: int, *, longest: float, min_fraction: float, seed: int) -> np.ndarray:
    """tau_n per client, U(min_fraction * longest, longest) (MoFeL Sec. 5.3: U(1, 20) min).

    "The client's speed and the time required for training are inherent characteristics of
    the client" (Sec. 4): drawn once, from a generator of ``seed`` only, so every policy of
    a comparison sees the same clients.
    """
    low = float(min_fraction) * float(longest)
    if low >= longest:
        return np.full(count, float(longest))
    rng = np.random.default_rng([int(seed), 0x7A0])
    return rng.uniform(low, float(longest), size=count)


@dataclass
class _Run:
    """A selected cycle: ``pending`` until its start, then ``running`` until its end."""

    server: int
    start: float
    duration: float
    clients: np.ndarray  # client ids (positions in ``members``)
    method: str
    running: bool = False
    started: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    frustrated: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "start": self.start,
            "duration": self.duration,
            "clients": self.clients.copy(),
            "method": self.method,
            "running": self.running,
            "started": self.started.copy(),
            "frustrated": self.frustrated.copy(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> _Run:
        return cls(
            server=int(d["server"]),
            start=float(d["start"]),
            duration=float(d["duration"]),
            clients=np.asarray(d["clients"], np.int64).copy(),
            method=str(d["method"]),
            running=bool(d["running"]),
            started=np.asarray(d["started"], bool).copy(),
            frustrated=np.asarray(d["frustrated"], bool).copy(),
        )


def _half_open_unit(value: float) -> str | None:
    return None if 0.0 < value <= 1.0 else "a number in (0, 1]"


@dataclass(frozen=True, kw_only=True)
class MofelSettings(PluginSettings):
    """Servers, training times and selection limits of the MoFeL policies.

    Shared by ``mofel``, ``mofel_a1`` and ``mofel_a2``.
    """

    namespace: ClassVar[str] = "mofel"
    servers: int = setting(
        3,
        "mofel/mofel_a1/mofel_a2: number of edge servers (one territory each)",
        at_least_one,
        alias="servers",
    )
    train_time_s: float = setting(
        60.0,
        "mofel/mofel_a1/mofel_a2: longest local training time tau_max of a client in seconds",
        positive,
        alias="train_time_s",
    )
    required_accuracy: float = setting(
        0.9,
        "mofel/mofel_a1/mofel_a2: a server requests training while below this accuracy",
        unit_interval,
        alias="required_accuracy",
    )
    train_time_min_fraction: float = setting(
        0.05,
        "mofel/mofel_a1/mofel_a2: client training times drawn U(f train_time_s, train_time_s) "
        "per client "
        "(paper Sec. 5.3: U(1, 20) min, f = 0.05; 1 = one time for all)",
        _half_open_unit,
        alias="train_time_min_fraction",
    )
    max_clients: int = setting(
        0,
        "at most this many clients per cycle (0 = no cap: eq. 1 has none)",
        non_negative,
        alias="mofel_max_clients", readers=("mofel", "mofel_a2"),
    )
    horizon: float = setting(
        2.0,
        "the station's prediction interval Delta in units of the largest training "
        "time (the paper has Delta but gives no value)",
        positive,
        alias="mofel_horizon", readers=("mofel",),
    )
    node_limit: int = setting(
        20_000,
        "branch-and-bound node limit of the exact selection (deterministic; no clock)",
        at_least_one,
        alias="mofel_node_limit", readers=("mofel",),
    )


class MofelBase(ExchangePolicy):
    """Edge servers with territories, training cycles, FedAvg, NTC/NFC (MoFeL).

    Subclasses implement :meth:`choose` (which cycles to start for the servers in alert).

    Attributes
    ----------
    cycle_log
        one dict per finished cycle (server, start, duration, clients, started,
        frustrated, completed, method, end = when aggregated), times in seconds.
    server_params
        the servers' models (tuples of tensors, never modified in place).
    server_acc
        accuracy of each server model on the shared test sample.
    """

    requires: ClassVar[dict[str, Any]] = {"{kind}.mobility": "route"}
    """MoFeL §4: the central station plans with the clients' disclosed routes."""
    honours_link: ClassVar[bool] = True
    """With a link model, models move over the server link (``link.server_up_bps`` /
    ``link.server_down_bps``) and count only when whole within the client's stay in the
    server's territory: the download before a client starts (Fig. 4 step 2), the upload
    after it trained (a cycle waits for them), the hand-out to idle clients."""
    settings_class = MofelSettings
    options: MofelSettings
    metric_names: ClassVar[tuple[str, ...]] = (
        "ntc",
        "ntc_partial",
        "nfc",
        "server_acc_mean",
        "server_acc_std",
        "participants",
    )
    clients_per_cycle: ClassVar[int] = 10
    """A1's clients per cycle: the paper says only "randomly defines clients' participation"."""

    # --- set-up ---------------------------------------------------------------------
    # The signature of ExchangePolicy.setup: an override repeats it.
    @override
    def setup(
        self,
        *,
        members: np.ndarray,
        engine: Engine,
        agents: AgentTable,
        rng: np.random.Generator,
        world: WorldView | None = None,
    ) -> None:
        if world is None:
            raise ConfigError("policy", self.name, "a run with a Mesa model (servers need a map)")
        cfg, own = self.settings, self.options
        self.step_s = float(cfg.step_s)
        self.n_servers = own.servers
        self.required = float(own.required_accuracy)
        self.members = np.asarray(members, np.int64)
        n_clients = self.members.size
        self.engine = engine
        self.data_size = np.asarray(agents.data_size, float)[self.members]
        self.train_time = client_train_times(
            n_clients,
            longest=float(own.train_time_s),
            min_fraction=float(own.train_time_min_fraction),
            seed=int(cfg.seed),
        )
        self.horizon = float(own.horizon) * float(self.train_time.max(initial=0.0))
        cap = own.max_clients
        self.max_clients: int | None = cap if cap > 0 else None
        self.node_limit = own.node_limit
        client_of = np.full(world.n_agents, -1, np.int64)
        client_of[self.members] = np.arange(n_clients)
        # (route, client id per group member (-1: not ours), edge -> territory)
        self.movers: list[tuple[RouteView, np.ndarray, np.ndarray]] = []
        covered = np.zeros(n_clients, bool)
        where = np.full((n_clients, 2), -1, np.int64)  # (mover index, local index)
        for group in world.groups:
            local = client_of[group.members]
            if not (local >= 0).any():
                continue
            if group.route is None:
                raise ConfigError(
                    f"{group.kind}.mobility", group.mobility, f"route ({self.name} needs routes)"
                )
            ours = np.flatnonzero(local >= 0)
            where[local[ours], 0] = len(self.movers)
            where[local[ours], 1] = ours
            covered[local[ours]] = True
            self.movers.append(
                (group.route, local, self._edge_territory(world, group.route.network))
            )
        if not covered.all():
            raise ConfigError("policy", self.name, "members that are moving agents")
        self.where = where
        self.terr = np.empty(n_clients, np.int64)
        self.terr_since = np.empty(n_clients)
        for c in range(n_clients):
            mobility, _, edge_terr = self.movers[where[c, 0]]
            self.terr[c] = edge_terr[mobility.edge[where[c, 1]]]
            self.terr_since[c] = mobility.entered[where[c, 1]]
        self.cycle_of = np.full(n_clients, -1, np.int64)  # index into self.active, -1 free
        self.active: list[_Run] = []
        self.cycle_log: list[dict[str, Any]] = []
        start = engine.average(agents=self.members) if n_clients else None
        self.server_params: list[tuple[torch.Tensor, ...]] = [start] * self.n_servers
        self.server_version = np.zeros(self.n_servers, np.int64)
        acc0 = server_accuracy(engine, start) if start is not None else float("nan")
        self.server_acc = np.full(self.n_servers, acc0)
        self.held = np.full((n_clients, 2), -1, np.int64)  # (server, version) of held model
        self.counts = {"ntc": 0, "ntc_partial": 0, "nfc": 0, "participants": 0}
        self.synced = 0
        self.now = 0.0
        # the server link (used only when a link model is set)
        self.up_bytes = np.zeros(n_clients)  # bytes of this cycle's upload sent so far
        self.uploaded = np.zeros(n_clients, bool)  # this cycle's trained model is at the server
        self.down_bytes = np.zeros(n_clients)  # bytes of a server model received so far
        self.down_key = np.full((n_clients, 2), -1, np.int64)  # (server, version) downloading
        self.busy_s = np.zeros(n_clients)  # seconds of this step spent on server transfers
        self._moved: dict[str, list[np.ndarray]] = {"up": [], "down": []}
        """This step's uploads and downloads (agent ids), counted at the ideal link."""
        self.stays = tuple(np.zeros(0, t) for t in (np.int64, np.int64, float, float))

    def _edge_territory(self, world: WorldView, network: StreetNetwork) -> np.ndarray:
        """Territory of every road segment: the area of its midpoint."""
        mid = network.xy(np.arange(network.n_edges), network.edge_len / 2)
        if self.n_servers == world.n_areas:
            return world.area_of(mid)
        nodes = world.road_node_xy
        labels = split_areas(nodes, k=self.n_servers, seed=int(self.settings.seed))
        return area_of_points(mid, nodes, labels)

    # --- time -----------------------------------------------------------------------
    def _sync(self, ctx: ExchangeContext) -> None:
        """Read this step's edge changes once: territory changes, frustrated clients."""
        if ctx.step <= self.synced:
            return
        self.synced = ctx.step
        begin = (ctx.step - 1) * self.step_s
        closed: list[tuple[int, int, float, float]] = []  # stays that ended in this step
        for mobility, local, edge_terr in self.movers:
            moved, times, edges = mobility.last_transitions
            clients = local[moved]
            keep = clients >= 0
            for c, t, e in zip(
                clients[keep].tolist(), times[keep].tolist(), edges[keep].tolist(), strict=True
            ):
                s = int(edge_terr[e])
                if s != self.terr[c]:
                    self._left(c, t)
                    closed.append((c, int(self.terr[c]), max(self.terr_since[c], begin), t))
                    self.terr[c], self.terr_since[c] = s, t
        self.now = ctx.step * self.step_s
        clients = np.arange(self.members.size)
        rows = np.array(closed, float).reshape(-1, 4)
        self.stays = (  # every client's stays in a territory during this step
            np.concatenate([rows[:, 0].astype(np.int64), clients]),
            np.concatenate([rows[:, 1].astype(np.int64), self.terr]),
            np.concatenate([rows[:, 2], np.maximum(self.terr_since, begin)]),
            np.concatenate([rows[:, 3], np.full(clients.size, self.now)]),
        )
        self.busy_s = np.zeros(clients.size)

    def _left(self, c: int, t: float) -> None:
        """Client c leaves its territory at t: frustrated if its training was not over."""
        k = int(self.cycle_of[c])
        if k < 0 or not self.active[k].running:
            return
        run = self.active[k]
        pos = int(np.flatnonzero(run.clients == c)[0])
        if (
            run.started[pos]
            and not run.frustrated[pos]
            and t < run.start + self.train_time[c] - TIME_TOL
        ):
            run.frustrated[pos] = True
            self.counts["nfc"] += 1
            self.cycle_of[c] = -1  # abandoned: free for other cycles, its work is lost

    def before_training(self, ctx: ExchangeContext) -> None:
        """Read this step's departures (frustrated clients, territory changes)."""
        self._sync(ctx)

    def train_mask(self, ctx: ExchangeContext) -> np.ndarray:
        """Clients whose (unfrustrated) training interval overlaps this step (pure query)."""
        mask = np.zeros(self.members.size, bool)
        t_prev = self.now - self.step_s
        for run in self.active:
            if not run.running:
                continue
            busy = run.clients[run.started & ~run.frustrated]
            ends = run.start + self.train_time[busy]
            mask[busy[(ends > t_prev + TIME_TOL) & (run.start < self.now - TIME_TOL)]] = True
        return mask

    # --- one exchange ---------------------------------------------------------------
    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        self._sync(ctx)
        assign: dict[int, tuple[torch.Tensor, ...]] = {}
        link = ctx.link
        self._moved = {"up": [], "down": []}
        if link is not None:
            self._uploads(link)
        else:
            self._ideal_uploads()
        self._finish_cycles(waiting=link is not None)
        busy_servers = {run.server for run in self.active}
        alert = [
            s
            for s in range(self.n_servers)
            if s not in busy_servers and self.server_acc[s] < self.required
        ]
        if alert and self.members.size:
            for cyc in self.choose(ctx, alert):
                self._schedule(cyc)
        self._start_cycles(assign, link)
        self._hand_out(assign, link)
        return Exchange(assign=assign, metrics=self.metrics(),
                        messages=None if link is not None else self._messages(ctx))

    def _messages(self, ctx: ExchangeContext) -> Messages:
        """At the ideal link, the models this step moved to and from the servers.

        As the server link would: an upload per client whose training ended, a download per client
        given a model it did not hold; a server is not an agent, so only the client's end counts.
        """
        n = ctx.adjacency.shape[0]
        up, down = (np.concatenate([np.empty(0, np.int64), *self._moved[k]])
                    for k in ("up", "down"))
        return Messages.between(n, up, np.full(up.size, SERVER)) + Messages.between(
            n, np.full(down.size, SERVER), down)

    # --- the server link (a link model is set) ----------------------------------------
    def _window(self, clients: np.ndarray, servers: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Seconds of this step each client is in its server's range after ``after``.

        Its territory; less what its earlier transfers of the step took.
        """
        seconds = stay_seconds(clients, servers, after, stays=self.stays)
        return np.maximum(0.0, seconds - self.busy_s[clients])

    def _uploads(self, link: LinkPlan) -> None:
        """Clients that finished training send their model to the cycle's server.

        While they are in its territory; one that leaves first is frustrated (MoFeL Sec. 1: a client
        "does not finish the local training tasks or send its results").
        """
        for run in self.active:
            if not run.running:
                continue
            ends, pending = self._pending_uploads(run)
            if not pending.any():
                continue
            clients = run.clients[pending]
            server = np.full(clients.size, run.server)
            after = np.maximum(ends[pending], self.now - self.step_s)
            window = self._window(clients, server, after)
            moved, seconds, whole = link.server_link(
                self.members[clients], need=link.message_bytes - self.up_bytes[clients],
                window_s=window, up=True,
            )
            self.up_bytes[clients] += moved
            self.busy_s[clients] += seconds
            self.uploaded[clients] |= whole
            gone = ~whole & (self.terr[clients] != run.server)
            if gone.any():
                link.abort(self.members[clients[gone]])
                run.frustrated[np.flatnonzero(pending)[gone]] = True
                self.counts["nfc"] += int(gone.sum())
                self.cycle_of[clients[gone]] = -1

    def _pending_uploads(self, run: _Run) -> tuple[np.ndarray, np.ndarray]:
        """A running cycle's training end per client, and who has ended and not yet uploaded."""
        ends = run.start + self.train_time[run.clients]
        pending = run.started & ~run.frustrated & (ends <= self.now + TIME_TOL)
        return ends, pending & ~self.uploaded[run.clients]

    def _ideal_uploads(self) -> None:
        """At the ideal link, count the uploads :meth:`_uploads` would send.

        Each client whose training ended sends its model once, whole at once (nothing else changes).
        """
        for run in self.active:
            if not run.running:
                continue
            _, pending = self._pending_uploads(run)
            self.uploaded[run.clients[pending]] = True
            self._moved["up"].append(self.members[run.clients[pending]])

    def _downloads(
        self, clients: np.ndarray, servers: np.ndarray, link: LinkPlan
    ) -> np.ndarray:
        """``clients`` fetch their server's current model within this step's stay.

        Returns which arrived whole. Progress is kept while the same model is being fetched; a
        download given up for another model counts as aborted.
        """
        version = self.server_version[servers]
        other = (self.down_key[clients, 0] != servers) | (self.down_key[clients, 1] != version)
        dropped = other & (self.down_bytes[clients] > 0)
        if dropped.any():
            link.abort(self.members[clients[dropped]])
        self.down_bytes[clients[other]] = 0.0
        self.down_key[clients] = np.stack([servers, version], axis=1)
        window = self._window(clients, servers, np.full(clients.size, self.now - self.step_s))
        moved, seconds, whole = link.server_link(
            self.members[clients], need=link.message_bytes - self.down_bytes[clients],
            window_s=window, up=False,
        )
        self.down_bytes[clients] += moved
        self.busy_s[clients] += seconds
        self.down_bytes[clients[whole]] = 0.0
        self.down_key[clients[whole]] = -1
        return whole

    def _finish_cycles(self, *, waiting: bool = False) -> None:
        """Aggregate the cycles that ended.

        With ``waiting`` (a server link) a cycle also waits for the uploads of its clients still in
        the territory.
        """
        keep: list[_Run] = []
        for run in self.active:
            if not run.running or run.start + run.duration > self.now + TIME_TOL:
                keep.append(run)
                continue
            if waiting and not self.uploaded[run.clients[run.started & ~run.frustrated]].all():
                keep.append(run)
                continue
            done = run.started & ~run.frustrated
            if done.any():
                clients = run.clients[done]
                s = run.server
                self.server_params[s] = self.engine.average(
                    agents=self.members[clients], weights=self.data_size[clients]
                )  # FedAvg: weights = sample counts
                self.server_version[s] += 1
                self.server_acc[s] = server_accuracy(self.engine, self.server_params[s])
                # NTC (Sec. 5.2) counts cycles performed; MoFeL "requires the aggregation of
                # results of all local training" (Sec. 4), so a cycle counts only when every
                # client that started it finished; one with a frustrated client is partial
                complete = bool(done[run.started].all())
                self.counts["ntc" if complete else "ntc_partial"] += 1
            self._log(run, completed=done)
        self._reindex(keep)

    def _reindex(self, keep: list[_Run]) -> None:
        self.active = keep
        self.cycle_of[:] = -1
        for k, run in enumerate(keep):
            # a running cycle holds its unfrustrated participants until it is aggregated
            # (one that finished and then left must keep its trained model until then)
            alive = run.started & ~run.frustrated if run.running else slice(None)
            self.cycle_of[run.clients[alive]] = k

    def _log(self, run: _Run, *, completed: np.ndarray) -> None:
        self.cycle_log.append(
            {
                "server": run.server,
                "start": run.start,
                "duration": run.duration,
                "clients": run.clients.tolist(),
                "started": run.started.tolist(),
                "frustrated": run.frustrated.tolist(),
                "completed": completed.tolist(),
                "method": run.method,
                "end": self.now,  # when the server aggregated (or gave up on) the cycle
            }
        )

    def _schedule(self, cyc: Cycle, method: str | None = None) -> None:
        clients = np.asarray(cyc.clients, np.int64)
        if clients.size == 0:
            return
        run = _Run(
            server=int(cyc.server),
            start=float(cyc.start),
            duration=float(cyc.duration),
            clients=clients,
            method=method or self.last_method,
        )
        self.active.append(run)
        self.cycle_of[clients] = len(self.active) - 1

    def _start_cycles(
        self, assign: dict[int, tuple[torch.Tensor, ...]], link: LinkPlan | None = None
    ) -> None:
        keep: list[_Run] = []
        for run in self.active:
            if run.running or run.start > self.now + TIME_TOL:
                keep.append(run)
                continue
            run.started = self.terr[run.clients] == run.server  # connected at the start
            # a client holding the server's current model needs no download (Fig. 4 step 2)
            held = (self.held[run.clients, 0] == run.server) & (
                self.held[run.clients, 1] == self.server_version[run.server]
            )
            if link is not None and run.started.any():
                # the others start only if the model arrives within the step
                fetch = np.flatnonzero(run.started & ~held)
                got = self._downloads(
                    run.clients[fetch], np.full(fetch.size, run.server), link
                )
                run.started[fetch[~got]] = False
                self.up_bytes[run.clients] = 0.0
            self.uploaded[run.clients] = False  # this cycle's uploads are still to come
            run.frustrated = np.zeros(run.clients.size, bool)
            run.running = True
            if not run.started.any():
                self._log(run, completed=np.zeros(run.clients.size, bool))
                continue
            model = self.server_params[run.server]
            self._moved["down"].append(self.members[run.clients[run.started & ~held]])
            for c in run.clients[run.started].tolist():
                assign[int(self.members[c])] = model
                self.held[c] = (run.server, self.server_version[run.server])
            self.counts["participants"] += int(run.started.sum())
            keep.append(run)
        self._reindex(keep)

    def _hand_out(
        self, assign: dict[int, tuple[torch.Tensor, ...]], link: LinkPlan | None = None
    ) -> None:
        """Idle clients fetch their current server's model when it is new to them.

        Over the server link when one is set: only those whose download arrives.
        """
        idle = np.ones(self.members.size, bool)
        for run in self.active:
            if run.running:
                idle[run.clients[run.started & ~run.frustrated]] = False
        version = self.server_version[self.terr]
        stale = idle & ((self.held[:, 0] != self.terr) | (self.held[:, 1] != version))
        if link is not None and stale.any():
            fetch = np.flatnonzero(stale)
            stale[fetch[~self._downloads(fetch, self.terr[fetch], link)]] = False
        self._moved["down"].append(self.members[np.flatnonzero(stale)])
        for c in np.flatnonzero(stale).tolist():
            s = int(self.terr[c])
            assign[int(self.members[c])] = self.server_params[s]
            self.held[c] = (s, self.server_version[s])

    def metrics(self) -> dict[str, float]:
        """The policy's metrics: cycle and client counts, and the servers' accuracy.

        Totals since the start: ``ntc`` complete training cycles, ``ntc_partial`` cycles a
        frustrated client left partial, ``nfc`` frustrated clients, ``participants`` clients that
        started a cycle; the servers' accuracy as mean and standard deviation.
        """
        acc = self.server_acc
        return {
            "ntc": float(self.counts["ntc"]),
            "ntc_partial": float(self.counts["ntc_partial"]),
            "nfc": float(self.counts["nfc"]),
            "server_acc_mean": float(np.mean(acc)),
            "server_acc_std": float(np.std(acc)),
            "participants": float(self.counts["participants"]),
        }

    # --- what the selections see ------------------------------------------------------
    def free_clients(self) -> np.ndarray:
        """Clients in no pending or running cycle."""
        return np.flatnonzero(self.cycle_of < 0)

    def predicted_visits(self, clients: np.ndarray, until: float) -> Visits:
        """Predicted territory intervals of ``clients`` from their routes (eq. 6).

        The current interval starts at ``now`` (the client is there); later entries are
        rounded up and every exit down to step ends, so a selection made on them can only
        be pessimistic. Intervals shorter than the client's training time are dropped.
        """
        for mobility, _, _ in self.movers:
            mobility.ensure_horizon(until)
        rows: list[tuple[int, int, float, float]] = []
        step = self.step_s
        for c in np.asarray(clients, np.int64).tolist():
            mobility, _, edge_terr = self.movers[self.where[c, 0]]
            edges, entry, end = mobility.predicted_edges(int(self.where[c, 1]))
            terr = edge_terr[edges]
            change = np.flatnonzero(terr[1:] != terr[:-1]) + 1
            firsts = np.concatenate([[0], change])
            enters = entry[firsts]
            exits = np.concatenate([entry[change], [end]])
            for j, k in enumerate(firsts.tolist()):
                if j == 0:
                    enter = self.now
                else:
                    enter = math.ceil((enters[j] + TIME_TOL) / step) * step
                    if enter > until:
                        break
                exit_ = (
                    math.floor((exits[j] - TIME_TOL) / step) * step
                    if math.isfinite(exits[j])
                    else math.inf
                )
                if exit_ - enter >= self.train_time[c] and exit_ > self.now:
                    rows.append((c, int(terr[k]), enter, exit_))
        if not rows:
            z = np.zeros(0)
            return Visits(client=z.astype(np.int64), server=z.astype(np.int64), enter=z, exit=z)
        a = np.array(rows, dtype=object)
        return Visits(
            client=a[:, 0].astype(np.int64),
            server=a[:, 1].astype(np.int64),
            enter=a[:, 2].astype(float),
            exit=a[:, 3].astype(float),
        )

    def current_visits(self, clients: np.ndarray) -> Visits:
        """Only the current connection of ``clients``, open-ended (no route knowledge)."""
        clients = np.asarray(clients, np.int64)
        return Visits(
            client=clients,
            server=self.terr[clients],
            enter=np.full(clients.size, self.now),
            exit=np.full(clients.size, np.inf),
        )

    last_method: str = ""

    def interval_steps(self) -> int:
        """Fixed cycle interval of the baselines: one training time, in whole steps."""
        return max(1, math.ceil(float(self.train_time.max(initial=0.0)) / self.step_s - 1e-9))

    def choose(self, ctx: ExchangeContext, alert: list[int]) -> tuple[Cycle, ...]:
        """Cycles (times in seconds, clients as positions in ``members``) for ``alert``."""
        raise NotImplementedError

    # --- checkpoints ------------------------------------------------------------------
    @override
    def state_dict(self) -> dict:
        return {
            "server_params": [list(p) for p in self.server_params],
            "server_version": self.server_version.copy(),
            "server_acc": self.server_acc.copy(),
            "terr": self.terr.copy(),
            "terr_since": self.terr_since.copy(),
            "held": self.held.copy(),
            "active": [run.to_dict() for run in self.active],
            "cycle_log": [dict(entry) for entry in self.cycle_log],
            "counts": dict(self.counts),
            "synced": self.synced,
            "now": getattr(self, "now", 0.0),
            "server_link": {
                "up_bytes": self.up_bytes.copy(), "uploaded": self.uploaded.copy(),
                "down_bytes": self.down_bytes.copy(), "down_key": self.down_key.copy(),
            },
            "extra": self.extra_state(),
        }

    @override
    def load_state_dict(self, state: dict) -> None:
        self.server_params = [tuple(p) for p in state["server_params"]]
        self.server_version = np.asarray(state["server_version"], np.int64).copy()
        self.server_acc = np.asarray(state["server_acc"], float).copy()
        self.terr = np.asarray(state["terr"], np.int64).copy()
        self.terr_since = np.asarray(state["terr_since"], float).copy()
        self.held = np.asarray(state["held"], np.int64).copy()
        self.counts = {"ntc_partial": 0} | {k: int(v) for k, v in state["counts"].items()}
        self.cycle_log = [dict(entry) for entry in state["cycle_log"]]
        self.synced = int(state["synced"])
        self.now = float(state["now"])
        if "server_link" in state:
            link = state["server_link"]
            self.up_bytes = np.asarray(link["up_bytes"], float).copy()
            self.uploaded = np.asarray(link["uploaded"], bool).copy()
            self.down_bytes = np.asarray(link["down_bytes"], float).copy()
            self.down_key = np.asarray(link["down_key"], np.int64).copy()
        self._reindex([_Run.from_dict(d) for d in state["active"]])
        self.load_extra_state(state["extra"])

    def extra_state(self) -> dict:
        """A subclass's own state for a checkpoint (none here).

        :meth:`load_extra_state` restores it.
        """
        return {}

    def load_extra_state(self, state: dict) -> None:
        """Restore :meth:`extra_state`."""
