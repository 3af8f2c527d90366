"""Vehicles driven by Eclipse SUMO (car following, junction rules, traffic lights).

The run's map becomes a SUMO network (:mod:`mobidfl.maps.sumo_net`: the drive network written as
plain XML in the map's CRS, converted by ``netconvert``, cached), so SUMO's x/y are the
map's metres and every position lies on a MobiDFL street. Demand comes from SUMO's
``randomTrips.py`` with the run's seed (``sumo.fringe_factor``). SUMO runs in-process
(``libsumo``), ``sumo.step_length`` seconds per SUMO step.

Fixed agent count and identity: agent ``i`` is SUMO vehicle ``v<i>`` for the whole run. It
starts at a random point of its first trip's origin edge (drawn with the model's
generator); when it arrives, it is re-inserted at once where it arrived, with the same id
and the next destination of the randomTrips pool, so nobody is replaced. Routes are the
shortest over SUMO's lane connections (:class:`mobidfl.maps.sumo_net.EdgeRouter`; every street has
the same limit, so also the fastest in free flow).
While a vehicle is not on the network (waiting for insertion space, or in the SUMO step
between arrival and re-insertion) it is *parked where it is*: its last position is held.
Teleports are off (``--time-to-teleport -1``): a jammed car waits, positions stay physical
and the speed bound below holds.

Positions at the contact rule's sub-times (``ctx.fractions``) are interpolated linearly
between the two SUMO steps around each sub-time. The bound on the distance per step is
``1.2 x speed limit x step_s``: every car's speed factor is drawn from
``normc(1, 0.1, 0.8, 1.2)`` (SUMO's default deviation, capped at 1.2); the speed limit of
every street is the vehicle kind's ``speed`` setting (Cached-DFL: 13.89 m/s), since maps
carry no reliable limits.

libsumo is a process-wide singleton: one SUMO simulation per process. A newer SUMO-driven
model in the same process takes SUMO over; the older one then refuses to step with a
one-line error (sequential runs, sweeps on processes and the app's Reset all work; two
SUMO-driven models stepped alternately in one process do not).

Checkpoints: SUMO is deterministic from its seed and this model's decisions depend only on
counters kept in :meth:`state_dict`, so :meth:`load_state_dict` restarts SUMO and replays
it to the checkpoint's time (fast: no positions are read while replaying), then checks that
the replay made the same re-insertions.

With ``sumo.fcd = true`` every sampled position is kept and written as ``trace.csv``
(``id,time,x,y``, map CRS) into the run's output folder, where the ``trace`` mobility model
replays it exactly (same sub-times, same contacts).
"""

from __future__ import annotations

import contextlib
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.atomic import write_csv
from mobidfl.errors import ConfigError
from mobidfl.maps.sumo_net import (
    EdgeRouter,
    build_network,
    connections,
    import_libsumo,
    random_trips,
    sumo_tools,
)
from mobidfl.settings import PluginSettings, non_negative, positive, setting

SPEED_FACTOR = "normc(1,0.1,0.8,1.2)"
SPEED_FACTOR_MAX = 1.2
_EPS = 1e-9

_OWNER: dict[str, Any] = {"token": None}


def _close_if_owner(token: object) -> None:
    if _OWNER["token"] is token:
        _OWNER["token"] = None
        libsumo = import_libsumo()
        with contextlib.suppress(Exception):  # already closed
            libsumo.close()


def point_along(shape: np.ndarray, pos: float) -> np.ndarray:
    """The point ``pos`` metres along the polyline ``shape`` (clamped to its ends)."""
    seg = np.hypot(*np.diff(shape, axis=0).T)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    pos = float(np.clip(pos, 0.0, cum[-1]))
    k = int(np.clip(np.searchsorted(cum, pos, side="right") - 1, 0, len(seg) - 1))
    t = (pos - cum[k]) / seg[k] if seg[k] > 0 else 0.0
    return shape[k] + t * (shape[k + 1] - shape[k])


def interpolate(
    t: float, t0: float, xy0: np.ndarray, t1: float, xy1: np.ndarray
) -> np.ndarray:
    """Linear interpolation of positions between two sampled times (``t0 <= t <= t1``)."""
    if t1 - t0 <= _EPS:
        return xy1.copy()
    w = (t - t0) / (t1 - t0)
    return xy0 + w * (xy1 - xy0)


@dataclass(frozen=True, kw_only=True)
class SumoSettings(PluginSettings):
    """How SUMO is driven: its step, warm-up, trip generation and trace output."""

    namespace: ClassVar[str] = "sumo"
    step_length: float = setting(
        1.0, "sumo: seconds per SUMO step (--step-length)", positive, alias="sumo_step_length"
    )
    warmup_s: float = setting(
        60.0, "sumo: seconds of SUMO traffic before step 0 (at least one SUMO step)",
        non_negative, alias="sumo_warmup_s",
    )
    fringe_factor: float = setting(
        1.0, "sumo: randomTrips.py --fringe-factor (trips from/to the map's border)", positive,
        alias="sumo_fringe_factor",
    )
    fcd: bool = setting(
        False, "sumo: write the sampled positions as trace.csv into --out (for `trace`)",
        alias="sumo_fcd",
    )


@register_mobility
class Sumo(MobilityModel):
    """SUMO traffic on the run's map; ``count`` vehicles that keep their identity."""

    name = "sumo"
    settings_class = SumoSettings
    options: SumoSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.kind != "vehicle":
            raise ConfigError(f"{self.kind}.mobility", "sumo", "only vehicle.mobility = sumo")
        speed = float(self.kind_settings.speed)
        if speed <= 0:
            raise ConfigError("vehicle.speed", speed, "a speed limit > 0 for sumo")
        cfg, own = self.settings, self.options
        self.step_length = float(own.step_length)
        self.speed_limit = speed
        tools = sumo_tools()
        self.net_file = build_network(
            self.world.drive, speed_mps=speed, cache_dir=cfg.map_cache, map_name=cfg.map,
            tools=tools,
        )
        pool = self.count + max(200, self.count)
        self.origin, self.destination = random_trips(
            self.net_file,
            trips=pool,
            seed=int(cfg.seed),
            fringe_factor=float(own.fringe_factor),
            cache_dir=cfg.map_cache,
            tools=tools,
        )
        self.router = EdgeRouter(*connections(self.net_file), self.world.drive.edge_len)
        rng: np.random.Generator = kwargs["rng"]
        self.depart_u = rng.random(self.count)  # where on its origin edge each car starts
        self.sumo_seed = int(rng.integers(2**31 - 1))
        self.warmup_steps = max(1, int(np.ceil(float(own.warmup_s) / self.step_length)))
        self.record_trace = bool(own.fcd)
        self._folder = tempfile.TemporaryDirectory(prefix="mobidfl-sumo-")
        self.ids = [f"v{i}" for i in range(self.count)]
        self.index_of = {vid: i for i, vid in enumerate(self.ids)}
        self.libsumo = import_libsumo()
        self._start()
        self.time = 0.0  # MobiDFL seconds since step 0 (SUMO time minus the warm-up)
        self.trace_t: list[float] = [0.0]
        self.trace_xy: list[np.ndarray] = [self.position.copy()] if self.record_trace else []

    # --- SUMO process ---------------------------------------------------------------------
    def _start(self, *, replay_until: int | None = None) -> None:
        """Start SUMO, add every vehicle, warm up (or replay ``replay_until`` SUMO steps)."""
        token = object()
        _close_if_owner(_OWNER["token"])
        libsumo = self.libsumo
        vtypes = Path(self._folder.name) / "vtypes.add.xml"
        vtypes.write_text(
            '<additional>\n  <vType id="car" vClass="passenger" '
            f'speedFactor="{SPEED_FACTOR}"/>\n</additional>\n'
        )
        libsumo.start(
            [
                "sumo",
                "-n", str(self.net_file),
                "-a", str(vtypes),
                "--seed", str(self.sumo_seed),
                "--step-length", repr(self.step_length),
                "--time-to-teleport", "-1",
                "--ignore-junction-blocker", "15",
                "--no-step-log", "true",
                "--no-warnings", "true",
                "--duration-log.disable", "true",
            ]
        )
        _OWNER["token"] = token
        self._token = token
        weakref.finalize(self, _close_if_owner, token)
        self.step_index = 0  # SUMO steps done
        self.next_trip = self.count
        self.trip_of = np.arange(self.count)  # pool index of each car's current trip
        self.reinserted = 0
        xy = np.empty((self.count, 2))
        # libsumo has no bulk insertion: one call per car, once per run (C calls, ~µs each).
        for i, vid in enumerate(self.ids):
            origin, target = str(self.origin[i]), str(self.destination[i])
            lane = f"{origin}_0"
            length = libsumo.lane.getLength(lane)
            pos = float(self.depart_u[i]) * max(length - 1.0, 0.0)
            xy[i] = point_along(np.asarray(libsumo.lane.getShape(lane)), pos)
            libsumo.route.add(f"r{i}", self._route(origin, target))
            libsumo.vehicle.add(
                vid, f"r{i}", typeID="car", depart="0", departPos=repr(pos),
                departLane="best", departSpeed="0",
            )
        self.held = xy  # positions of every car, held while off the network
        until = self.warmup_steps if replay_until is None else replay_until
        while self.step_index < until - 1:
            self._sumo_step()
        self._sumo_step()
        self._read()
        self.prev_t, self.prev_xy = self.cur_t, self.cur_xy.copy()
        if replay_until is None:
            self.position = self.cur_xy.copy()

    def _route(self, origin: str, target: str) -> list[str]:
        """The shortest route over SUMO's connections (both ends are ``e<k>`` edges).

        The network is strongly connected, but netconvert drops U-turns except at dead
        ends; if no route is left, SUMO routes the two-edge trip itself.
        """
        edges = self.router.route(int(origin[1:]), int(target[1:]))
        return [origin, target] if edges is None else [f"e{k}" for k in edges]

    def _check_owner(self) -> None:
        if _OWNER["token"] is not self._token:
            raise RuntimeError(
                "another SUMO-driven model started in this process and took libsumo over "
                "(one SUMO simulation per process): run SUMO-driven models one after another "
                "or in separate processes (mobidfl sweep does)"
            )

    @property
    def sumo_time(self) -> float:
        """Simulated SUMO time in seconds (steps taken times the step length)."""
        return self.step_index * self.step_length

    def _sumo_step(self) -> None:
        """One SUMO step; arrived cars are re-inserted where they arrived (same id)."""
        libsumo = self.libsumo
        libsumo.simulationStep()
        self.step_index += 1
        for vid in libsumo.simulation.getArrivedIDList():
            i = self.index_of.get(vid)
            if i is not None:
                self._reinsert(i)

    def _reinsert(self, i: int) -> None:
        libsumo = self.libsumo
        here = str(self.destination[self.trip_of[i]])
        trip = self.next_trip
        while str(self.destination[trip % len(self.destination)]) == here:
            trip += 1
        self.next_trip = trip + 1
        self.trip_of[i] = trip % len(self.destination)
        target = str(self.destination[self.trip_of[i]])
        self.reinserted += 1
        route = f"r{i}_{self.reinserted}"
        libsumo.route.add(route, self._route(here, target))
        pos = max(libsumo.lane.getLength(f"{here}_0") - 0.1, 0.0)
        libsumo.vehicle.add(
            self.ids[i], route, typeID="car", depart="now", departPos=repr(pos),
            departLane="best", departSpeed="0",
        )

    def _read(self) -> None:
        """Positions of every car now (held for cars off the network)."""
        vehicle = self.libsumo.vehicle
        on = vehicle.getIDList()  # libsumo has no array API: one C call per car and read
        if on:
            idx = np.fromiter((self.index_of[v] for v in on), np.int64, len(on))
            self.held[idx] = np.array([vehicle.getPosition(v) for v in on])
        self.cur_t = self.sumo_time
        self.cur_xy = self.held.copy()

    # --- interface ------------------------------------------------------------------------
    def speeds(self) -> np.ndarray:
        """Speed over the last SUMO step (from positions; 0 before the first step)."""
        dt = self.cur_t - self.prev_t
        if dt <= _EPS:
            return np.zeros(self.count)
        return np.hypot(*(self.cur_xy - self.prev_xy).T) / dt

    @override
    def max_step_distance(self, step_s: float) -> float:
        return SPEED_FACTOR_MAX * self.speed_limit * step_s

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        self._check_owner()
        start = self.warmup_steps * self.step_length + self.time
        out = np.empty((len(ctx.fractions), self.count, 2))
        for f, fraction in enumerate(ctx.fractions):
            target = start + float(fraction) * ctx.step_s
            while self.cur_t < target - _EPS:
                if self.sumo_time + self.step_length >= target - _EPS:
                    if self.cur_t != self.sumo_time:
                        self._read()
                    self.prev_t, self.prev_xy = self.cur_t, self.cur_xy
                    self._sumo_step()
                    self._read()
                else:
                    self._sumo_step()
                    self.cur_t = -np.inf  # positions not read at this SUMO step
            out[f] = interpolate(target, self.prev_t, self.prev_xy, self.cur_t, self.cur_xy)
            if self.record_trace:
                self.trace_t.append(self.time + float(fraction) * ctx.step_s)
                self.trace_xy.append(out[f].copy())
        self.time += ctx.step_s
        self.position = out[-1]
        return out

    # --- outputs --------------------------------------------------------------------------
    def trace_table(self):
        """Every sampled position: ``id, time, x, y`` (map CRS), for ``trace`` replay."""
        import pandas as pd

        if not self.record_trace:
            raise RuntimeError("set sumo.fcd = true to keep the trace")
        xy = np.stack(self.trace_xy)
        times = np.repeat(np.asarray(self.trace_t), self.count)
        return pd.DataFrame(
            {
                "id": np.tile(np.arange(self.count), len(self.trace_t)),
                "time": times,
                "x": xy[:, :, 0].ravel(),
                "y": xy[:, :, 1].ravel(),
            }
        )

    @override
    def write_outputs(self, folder: Path) -> list[Path]:
        if not self.record_trace:
            return []
        path = Path(folder) / "trace.csv"
        write_csv(self.trace_table(), path, index=False, float_format="%.17g")
        return [path]

    # --- checkpoints ----------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        state = {
            **super().state_dict(),
            "time": float(self.time),
            "step_index": int(self.step_index),
            "next_trip": int(self.next_trip),
            "reinserted": int(self.reinserted),
            "trip_of": self.trip_of.copy(),
            "held": self.held.copy(),
            "cur_t": float(self.cur_t),
            "cur_xy": self.cur_xy.copy(),
            "prev_t": float(self.prev_t),
            "prev_xy": self.prev_xy.copy(),
        }
        if self.record_trace:
            state["trace_t"] = np.asarray(self.trace_t)
            state["trace_xy"] = np.stack(self.trace_xy)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restart SUMO and replay it to the checkpoint's SUMO step (deterministic)."""
        super().load_state_dict(state)
        steps = int(state["step_index"])
        self._start(replay_until=steps)
        if self.next_trip != int(state["next_trip"]) or self.reinserted != int(
            state["reinserted"]
        ):
            raise RuntimeError(
                "replaying SUMO to the checkpoint made different re-insertions "
                f"({self.reinserted} vs {int(state['reinserted'])}): SUMO is not deterministic "
                "here, the checkpoint cannot be resumed exactly"
            )
        self.time = float(state["time"])
        self.trip_of = np.asarray(state["trip_of"], np.int64).copy()
        self.held = np.asarray(state["held"], float).copy()
        self.cur_t = float(state["cur_t"])
        self.cur_xy = np.asarray(state["cur_xy"], float).copy()
        self.prev_t = float(state["prev_t"])
        self.prev_xy = np.asarray(state["prev_xy"], float).copy()
        if self.record_trace:
            self.trace_t = [float(t) for t in np.asarray(state["trace_t"])]
            self.trace_xy = list(np.asarray(state["trace_xy"], float))
