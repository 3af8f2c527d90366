"""Typed, read-only views of the running world for plug-ins (policies, mobility models).

A policy or a mobility model never receives the Mesa model: it receives a
:class:`WorldView` that offers exactly what the plug-ins that look beyond their own
members read, and nothing else (Flower's ``Strategy`` sees parameters and results, never
the server). Today's readers:

* MoFeL (Macedo et al., Sensors 2023, Sec. 4): the groups and their disclosed routes
  (:class:`RouteView`), the map's areas (server territories) and road nodes;
* PSFL: the moving sensors of a group (:class:`WalkerView`) and the area each stands in;
* DAM/DCM (Reza et al., Sec. IV-B): the static clients' positions and every agent's
  label histogram.

The Mesa model implements :class:`WorldView` with a thin adapter
(:class:`mobidfl.model.world_view.ModelWorldView`); tests can implement it with anything that
has these members. Arrays handed out are read-only views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from mobidfl.maps.network import StreetNetwork

__all__ = ["GroupView", "RouteView", "WalkerView", "WorldView", "read_only"]


class RouteView(Protocol):
    """What a route-following group discloses (MoFeL, Sec. 4: the station knows routes).

    Indices are positions inside the group (0 .. count-1); times are simulated seconds.
    """

    @property
    def network(self) -> StreetNetwork:
        """The street network the routes run on."""
        ...

    @property
    def edge(self) -> np.ndarray:
        """Current edge of every member."""
        ...

    @property
    def entered(self) -> np.ndarray:
        """Time each member entered its current edge."""
        ...

    @property
    def last_transitions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(member, time, new_edge)`` of every edge change during the last step."""
        ...

    def ensure_horizon(self, until: float) -> None:
        """Commit planned trips so that predictions cover ``until`` seconds."""
        ...

    def predicted_edges(self, i: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Member ``i``'s planned edges, their entry times and the end of the plan."""
        ...


class WalkerView(Protocol):
    """A group with PSFL's moving sensors: which members walk and where they stand."""

    @property
    def walkers(self) -> np.ndarray:
        """Positions inside the group of the moving members."""
        ...

    def current_areas(self) -> np.ndarray:
        """Area every member of the group stands in now."""
        ...


@dataclass(frozen=True)
class GroupView:
    """One mobility group: all agents of one kind, moved by one mobility model.

    Attributes
    ----------
    kind
        The agent kind of the group.
    members
        Global agent ids of the group (contiguous).
    mobility
        Registry name of the group's mobility model.
    static
        Its agents never move.
    route
        Routes of a route-following group (MoFeL), else ``None``.
    walker
        PSFL's moving sensors, else ``None``.
    """

    kind: str
    members: slice
    """Global agent ids of the group (contiguous)."""
    mobility: str
    """Registry name of the group's mobility model (for messages)."""
    static: bool = False
    """Its agents never move (Reza et al.'s static clients C_s)."""
    route: RouteView | None = None
    walker: WalkerView | None = None


class WorldView(Protocol):
    """What a plug-in may read of the running world beyond its own context."""

    @property
    def n_agents(self) -> int:
        """Number of agents (global ids are 0 .. n_agents-1)."""
        ...

    @property
    def groups(self) -> tuple[GroupView, ...]:
        """The mobility groups, in global id order."""
        ...

    @property
    def position(self) -> np.ndarray:
        """``[N, 2]`` positions in metres at the start of the current step (read-only)."""
        ...

    @property
    def label_hist(self) -> np.ndarray | None:
        """``[N, C]`` label counts of every agent's data (``None`` without learning)."""
        ...

    @property
    def n_areas(self) -> int:
        """Number of areas of the map."""
        ...

    def area_of(self, xy: np.ndarray) -> np.ndarray:
        """Area of every point ``[M, 2]`` (metres)."""
        ...

    @property
    def road_node_xy(self) -> np.ndarray:
        """``[V, 2]`` nodes of the walk network (territories are split over them)."""
        ...

    def members_of(self, kind: str) -> np.ndarray:
        """Global ids of the agents of ``kind`` (empty when none)."""
        ...


def read_only(array: np.ndarray) -> np.ndarray:
    """A view of ``array`` that refuses writes (the caller's array stays writable)."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view
