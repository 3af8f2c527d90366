"""Contacts from a trace, not from positions ``contact_trace``.

For published contact data (CRAWDAD's Haggle iMote traces, The ONE's connection events,
MobiDFL's own ``contacts.csv``) there are no positions to move: who meets whom, and when,
is the data. Every kind whose mobility is ``contact_trace`` stands still (parked on a
circle around the map's centre, only so that the GIS export draws them apart) and the world
takes each step's contacts from :class:`mobidfl.maps.contact_trace.ContactTrace` instead of the
continuous-time range test (:meth:`contact_trace`). Trace ids are the run's agent ids
(less ``contact_trace.id_base``), so every kind with agents must use this model; the map is
only a canvas (a small ``grid:`` map is enough).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.maps.contact_trace import FORMATS, ContactTrace, read_contacts
from mobidfl.settings import KINDS, PluginSettings, non_negative, one_of, setting


def _existing_file(value: str) -> str | None:
    if not value:
        return None  # checked when the model is built: a trace run needs one
    try:
        found = Path(value).expanduser().is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long
        found = False
    return None if found else "an existing contact trace file"


@dataclass(frozen=True, kw_only=True)
class ContactTraceSettings(PluginSettings):
    """Which contact trace drives the exchanges, and how its ids and times map to the run."""

    namespace: ClassVar[str] = "contact_trace"
    file: str = setting(
        "", "contact trace: MobiDFL contacts .csv/.parquet, The ONE CONN events, or a "
        "CRAWDAD a b t_start t_end table (.gz allowed)", _existing_file,
    )
    format: str = setting(
        "auto", "contact trace format: auto (from the file), mobidfl, one, crawdad",
        one_of(*FORMATS),
    )
    id_base: int = setting(
        0, "the trace's first agent id (1 for a trace that numbers devices from 1)", non_negative
    )
    start_s: float = setting(
        0.0, "trace time (s) that is the run's time 0 (earlier contacts are cut)", non_negative
    )
    distance_m: float = setting(
        0.0, "distance assumed where the trace gives none, for distance_rate links "
        "(0 = unknown: distance_rate refused)", non_negative,
    )


_CACHE: dict[tuple, ContactTrace] = {}


@register_mobility
class ContactTraceMobility(MobilityModel):
    """Agents that never move; their contacts come from ``contact_trace.file``."""

    name = "contact_trace"
    settings_class = ContactTraceSettings
    gives_contacts: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        west, south, east, north = self.world.bounds
        centre = np.array([(west + east) / 2, (south + north) / 2])
        radius = max(min(east - west, north - south) / 3, 1.0)
        angle = 2 * np.pi * (np.arange(self.count) + self._first_index()) / max(
            self.settings.n_agents, 1
        )
        self.position = centre + radius * np.stack([np.cos(angle), np.sin(angle)], axis=1)

    def _first_index(self) -> int:
        """The first global agent id of this kind (kinds in the order vehicle, pedestrian, ...)."""
        return sum(self.settings.count(k) for k in KINDS[: KINDS.index(self.kind)])

    @override
    def speeds(self) -> np.ndarray:
        return np.zeros(self.count)

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        return np.broadcast_to(self.position, (len(ctx.fractions), self.count, 2)).copy()

    def contact_trace(self) -> ContactTrace:
        """The run's trace, read and checked once per file and mapping."""
        from mobidfl.errors import ConfigError

        o, s = self.options, self.settings
        if not o.file:
            raise ConfigError(
                "contact_trace.file", "", f"a contact trace file ({self.kind}.mobility = "
                "contact_trace takes its contacts from one)",
            )
        path = Path(o.file).expanduser()
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, o.format, o.id_base,
               o.start_s, o.distance_m, float(s.step_s), int(s.n_agents), int(s.steps))
        if key not in _CACHE:
            _CACHE.clear()  # one trace at a time: a sweep over traces does not pile them up
            _CACHE[key] = ContactTrace(
                read_contacts(path, fmt=o.format), step_s=float(s.step_s),
                n_agents=int(s.n_agents), id_base=o.id_base, start_s=o.start_s,
                distance_m=o.distance_m, steps=int(s.steps), path=str(path),
            )
        return _CACHE[key]
