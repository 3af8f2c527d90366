"""Vehicles and pedestrians on the real street graph (Manhattan mobility model)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, override

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.maps.network import TURN_RULES, StreetNetwork
from mobidfl.settings import (
    PluginSettings,
    kinds_where,
    non_negative,
    one_of,
    setting,
    unit_interval,
)


@dataclass(frozen=True, kw_only=True)
class ManhattanSettings(PluginSettings):
    """Turn probabilities (``manhattan``, ``area_restricted``) and free cars."""

    namespace: ClassVar[str] = "manhattan"
    turn_straight: float = setting(
        0.5, "Manhattan model: P(straight)", unit_interval, alias="turn_straight"
    )
    turn_left: float = setting(0.25, "Manhattan model: P(left)", unit_interval, alias="turn_left")
    turn_right: float = setting(
        0.25, "Manhattan model: P(right)", unit_interval, alias="turn_right"
    )
    turn_rule: str = setting(
        "classes",
        "Manhattan model: classes (turn_* per straight/left/right class by angle, renormalised "
        "over the classes present) or straightest (Cached-DFL's code and its 'e.g. 0.5 to "
        "continue straight and 0.1667 per road among three options': the road closest to "
        "straight gets turn_straight, the other roads share the rest equally)",
        one_of(*TURN_RULES),
    )
    area_free: int = setting(
        0, "members free to leave their home area (Cached-DFL)", non_negative,
        alias="area_free", readers=("area_restricted",),
    )

    @property
    def turn_probabilities(self) -> tuple[float, float, float]:
        """``(straight, left, right)`` turn probabilities, as set."""
        return (self.turn_straight, self.turn_left, self.turn_right)

    @override
    def joint_check(self) -> tuple[tuple[str, ...], Any, str] | None:
        turns = sum(self.turn_probabilities)
        if math.isclose(turns, 1.0, abs_tol=1e-9):
            return None
        names = ("turn_straight", "turn_left", "turn_right")
        return names, round(turns, 6), "probabilities that sum to 1"


@register_mobility
class Manhattan(MobilityModel):
    """Cached-DFL's Manhattan mobility model on an OSM street graph.

    Agents move at constant speed along edge geometries; at an intersection the next edge
    is drawn by turn class (straight / left / right, ``manhattan.turn_*`` settings) or, with
    ``manhattan.turn_rule = "straightest"``, as Cached-DFL's code draws it (the straightest
    road ``turn_straight``, the others an equal share of the rest); U-turns only at dead
    ends (:meth:`mobidfl.maps.network.StreetNetwork.turn_table`). Distance left at the end of
    an edge is carried into the next. Vehicles use the directed drive network (one-way
    streets respected); pedestrians the walk network (both directions).
    """

    name = "manhattan"
    # Kinds it fits: streets: the drive network for vehicles, the walk network for pedestrians.
    kinds = kinds_where(network=True)
    settings_class = ManhattanSettings
    options: ManhattanSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.network: StreetNetwork = (
            self.street_network()
        )
        self.tables = [self.network.turn_table(
            self.options.turn_probabilities, rule=self.options.turn_rule
        )]
        self.table_of = np.zeros(self.count, int)
        self.edge, self.offset = self.network.random_edges(self.count, kwargs["rng"])
        self.position = self.network.xy(self.edge, self.offset)
        self.decisions: list[np.ndarray] | None = None

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        step_distance = self.speeds() * ctx.step_s
        out = np.empty((len(ctx.fractions), self.count, 2))
        previous = 0.0
        for f, fraction in enumerate(ctx.fractions):
            self.edge, self.offset = self.network.advance(
                self.edge,
                self.offset,
                step_distance * (fraction - previous),
                self.tables,
                self.table_of,
                ctx.rng,
                decisions=self.decisions,
            )
            out[f] = self.network.xy(self.edge, self.offset)
            previous = fraction
        self.position = out[-1]
        return out

    @override
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "edge": self.edge.copy(), "offset": self.offset.copy()}

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.edge = np.asarray(state["edge"], int).copy()
        self.offset = np.asarray(state["offset"], float).copy()


@register_mobility
class AreaRestricted(Manhattan):
    """Manhattan mobility that never leaves the agent's home area (Cached-DFL, Fig. 6).

    Home areas are assigned round-robin; the first ``manhattan.area_free`` members are free
    vehicles that may drive anywhere (the paper's 3-4 free cars).
    """

    name = "area_restricted"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        rng = kwargs["rng"]
        n_areas = self.world.n_areas
        free = min(self.options.area_free, self.count)
        self.home_area = np.arange(self.count) % n_areas
        self.home_area[:free] = -1
        self.table_of = np.zeros(self.count, int)
        for area in range(n_areas):
            allowed = self._strongly_connected_part(self.world.nodes_in_area(self.network, area))
            self.tables.append(
                self.network.turn_table(
                    self.options.turn_probabilities, allowed_nodes=allowed,
                    rule=self.options.turn_rule,
                )
            )
            members = np.flatnonzero(self.home_area == area)
            self.table_of[members] = area + 1
            e, o = self.network.random_edges(len(members), rng, allowed_nodes=allowed)
            self.edge[members], self.offset[members] = e, o
        self.position = self.network.xy(self.edge, self.offset)

    def _strongly_connected_part(self, in_area: np.ndarray) -> np.ndarray:
        """Largest strongly connected part of the area's streets.

        One-way streets can make an area's sub-network a trap or a one-way exit; keeping
        cars on its largest strongly connected component means they can always go on
        without leaving the area (a U-turn is still allowed at dead ends).
        """
        net = self.network
        inside = in_area[net.edge_u] & in_area[net.edge_v]
        n = len(net.node_xy)
        graph = sp.csr_matrix(
            (np.ones(inside.sum()), (net.edge_u[inside], net.edge_v[inside])), shape=(n, n)
        )
        _, labels = connected_components(graph, directed=True, connection="strong")
        sizes = np.bincount(labels[in_area], minlength=labels.max() + 1)
        if sizes.max(initial=0) < 2:
            return in_area
        return labels == np.argmax(sizes)
