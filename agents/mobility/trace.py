"""Replay of a recorded trace (SUMO FCD or CSV): ``trace.file``, read by :mod:`mobidfl.maps.traces`.

Each kind whose mobility is ``trace`` takes the next block of trace ids (kinds in the order
vehicle, pedestrian, sensor, uav), so two kinds never share an id. Agents before their
first / after their last record are parked where they entered / left the trace
(:mod:`mobidfl.maps.traces` says why not far off the map). Trace time 0 (its first record) is
MobiDFL time 0; after the trace ends everybody stays parked.

Sub-times: the step is sampled at least as finely as the trace itself (one sub-time per
recorded interval) and at least as the contact rule needs for the fastest recorded motion,
so no recorded point is skipped. A trace written by a SUMO-driven run (``sumo.fcd``) has
records exactly at that run's sub-times, so its replay samples the same times, gets the
same positions and the same contacts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.errors import ConfigError
from mobidfl.maps.traces import (
    OUTSIDE_MARGIN_M,
    clipped_to,
    outside_map,
    positions_at,
    read_trace,
    resolution,
)
from mobidfl.settings import KINDS, PluginSettings, one_of, setting

MAX_RECORDS_PER_STEP = 1000
"""Cap on the sub-times forced by a very fine trace (a 0.1 s trace with 120 s steps)."""


def _trace_file(value: str) -> str | None:
    """An empty name (no trace) or an existing ``.xml``/``.csv`` file (SUMO FCD or CSV)."""
    if not value:
        return None
    path = Path(value).expanduser()
    if path.suffix.lower() not in (".xml", ".csv"):
        return "a SUMO FCD .xml or a .csv trace file"
    return None if path.is_file() else "an existing SUMO FCD .xml or .csv trace file"


@dataclass(frozen=True, kw_only=True)
class TraceSettings(PluginSettings):
    """Which recorded trace to replay, and the CRS of its x, y."""

    namespace: ClassVar[str] = "trace"
    file: str = setting(
        "", "trace: SUMO FCD .xml or CSV (id,time,lon,lat or id,time,x,y)", _trace_file,
        alias="trace_file",
    )
    crs: str = setting(
        "", "trace: CRS of x,y in trace.file (empty = the map's CRS; EPSG:4326 for geo FCD)",
        alias="trace_crs",
    )
    outside: str = setting(
        "refuse",
        f"trace: points more than {OUTSIDE_MARGIN_M:g} m outside the map: refuse the trace, or "
        "clip them onto the map's bounding box",
        one_of("refuse", "clip"),
    )


# A registered MobilityModel has this shape (name, settings, hooks): cf. sumo.py.
@register_mobility
class TraceReplay(MobilityModel):
    """Positions interpolated from a recorded trace."""

    name = "trace"
    settings_class = TraceSettings
    options: TraceSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        cfg, own = self.settings, self.options
        if not own.file:
            raise ConfigError("trace.file", "", f"a trace file for {self.kind}.mobility = trace")
        trace = read_trace(own.file, map_crs=self.world.crs, crs=own.crs)
        start = sum(
            cfg.count(k) for k in KINDS[: KINDS.index(self.kind)] if cfg.kind(k).mobility == "trace"
        )
        if trace.n_agents < start + self.count:
            raise ConfigError(
                "trace.file",
                own.file,
                f"a trace with at least {start + self.count} ids for the trace-driven agents "
                f"(it has {trace.n_agents})",
            )
        trace = trace.subset(start, self.count)
        bounds = self.world.bounds
        off = outside_map(trace.xy, bounds)
        if off.any() and own.outside == "refuse":
            x, y = trace.xy[int(np.flatnonzero(off)[0])]
            raise ConfigError(
                "trace.file",
                own.file,
                f"a trace on the map: {int(off.sum())} of its {len(off)} points lie more than "
                f"{OUTSIDE_MARGIN_M:g} m outside it, e.g. ({x:.6g}, {y:.6g}) vs the map's "
                f"x {bounds[0]:.6g}..{bounds[2]:.6g}, y {bounds[1]:.6g}..{bounds[3]:.6g} (check "
                "trace.crs, or set trace.outside = clip)",
            )
        self.trace = clipped_to(trace, bounds) if off.any() else trace
        self.min_dt, self.max_speed = resolution(self.trace)
        self.time = 0.0
        self.position = positions_at(self.trace, 0.0)
        self._speed = np.zeros(self.count)

    @override
    def speeds(self) -> np.ndarray:
        return self._speed.copy()

    def max_step_distance(self, step_s: float) -> float:
        """Distance that makes the contact rule sample every recorded interval (see module)."""
        moving = self.max_speed * step_s
        if not math.isfinite(self.min_dt):
            return moving
        per_step = min(round(step_s / self.min_dt), MAX_RECORDS_PER_STEP)
        return max(moving, (per_step - 0.5) * float(self.settings.radius_m) / 2.0)

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        out = np.empty((len(ctx.fractions), self.count, 2))
        previous, before = 0.0, self.position
        for f, fraction in enumerate(ctx.fractions):
            out[f] = positions_at(self.trace, self.time + float(fraction) * ctx.step_s)
            dt = (float(fraction) - previous) * ctx.step_s
            if dt > 0:
                self._speed = np.hypot(*(out[f] - before).T) / dt
            previous, before = float(fraction), out[f]
        self.time += ctx.step_s
        self.position = out[-1]
        return out

    @override
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "time": float(self.time), "speed": self._speed.copy()}

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.time = float(state["time"])
        self._speed = np.asarray(state["speed"], float).copy()
