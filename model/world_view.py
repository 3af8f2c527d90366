"""The Mesa model seen through :class:`mobidfl.agents.views.WorldView` (a thin, read-only adapter).

Policies and mobility models get this object instead of the model, so they can read
only what :mod:`mobidfl.agents.views` declares (groups, routes, walkers, areas, positions, label
histograms) and can write nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from mobidfl.agents.mobility.base import MobilityModel
from mobidfl.agents.mobility.routes import Route
from mobidfl.agents.mobility.static import Static
from mobidfl.agents.views import GroupView, WalkerView, read_only

if TYPE_CHECKING:
    from mobidfl.maps.world import WorldMap

__all__ = ["ModelWorldView", "group_views"]


class _World(Protocol):
    """The members of the Mesa model the adapter reads (tests may pass a namespace)."""

    groups: Sequence[tuple[str, slice, MobilityModel]]
    position: np.ndarray
    label_hist: np.ndarray | None


def group_views(groups: Sequence[tuple[str, slice, MobilityModel]]) -> tuple[GroupView, ...]:
    """One :class:`GroupView` per ``(kind, members, mobility)`` group."""
    views = []
    for kind, members, mobility in groups:
        walker: WalkerView | None = (
            mobility if mobility.walkers is not None else None  # type: ignore[assignment]
        )
        views.append(
            GroupView(
                kind=kind,
                members=members,
                mobility=mobility.name,
                static=isinstance(mobility, Static),
                route=mobility if isinstance(mobility, Route) else None,
                walker=walker,
            )
        )
    return tuple(views)


class ModelWorldView:
    """:class:`mobidfl.agents.views.WorldView` over a running model (reads are live, never copies).

    Parameters
    ----------
    model
        the Mesa model (or anything with ``groups``, ``position``, ``label_hist``).
    world_map
        the map whose areas and road nodes are offered (``None``: no map).
    """

    def __init__(self, model: _World, *, world_map: WorldMap | None = None) -> None:
        self._model = model
        self._map = world_map
        self._groups = group_views(model.groups)

    @property
    def n_agents(self) -> int:
        """Number of agents (global ids are 0 .. n_agents-1)."""
        return max((g.members.stop for g in self._groups), default=0)

    @property
    def groups(self) -> tuple[GroupView, ...]:
        """The mobility groups, in global id order."""
        return self._groups

    @property
    def position(self) -> np.ndarray:
        """``[N, 2]`` positions in metres at the start of the current step (read-only)."""
        return read_only(self._model.position)

    @property
    def label_hist(self) -> np.ndarray | None:
        """``[N, C]`` label counts of every agent's data (``None`` without learning)."""
        hist = self._model.label_hist
        return None if hist is None else read_only(hist)

    def _world_map(self) -> WorldMap:
        if self._map is None:
            raise ValueError("this world view has no map (pass world_map=...)")
        return self._map

    @property
    def n_areas(self) -> int:
        """Number of areas of the map."""
        return int(self._world_map().n_areas)

    def area_of(self, xy: np.ndarray) -> np.ndarray:
        """Area of every point ``[M, 2]`` (metres)."""
        return self._world_map().area_of(xy)

    @property
    def road_node_xy(self) -> np.ndarray:
        """``[V, 2]`` nodes of the walk network (territories are split over them)."""
        return read_only(self._world_map().walk.node_xy)

    def members_of(self, kind: str) -> np.ndarray:
        """Global ids of the agents of ``kind`` (empty when none)."""
        spans = [np.arange(g.members.start, g.members.stop) for g in self._groups if g.kind == kind]
        return np.concatenate(spans) if spans else np.empty(0, dtype=np.int64)
