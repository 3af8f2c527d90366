"""The four agent kinds, as mesa-geo ``GeoAgent``s.

The physics runs on the model's arrays (positions in metres, parameters stacked per
layer); an agent is a thin, named view onto its row, so moving ten thousand agents
costs no per-agent Python. ``geometry`` (WGS84) is refreshed only when something is
displayed or exported (:meth:`mobidfl.model.world.MobiDFLModel.sync_geometries`), because
mesa-geo rebuilds its r-tree on every move
(https://github.com/projectmesa/mesa-geo/issues/23, .../issues/104).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import mesa
import numpy as np
from mesa_geo import GeoAgent
from shapely.geometry import Point

from mobidfl.settings import AGENT_KINDS, AgentKind


class AgentArrays(Protocol):
    """What an agent reads from its model: the per-agent arrays it is a view onto.

    :class:`mobidfl.model.world.MobiDFLModel` provides them; a protocol here, because that module
    imports this one (agents sit a floor below the Mesa model) and never the reverse.
    """

    config: Any
    position: np.ndarray
    speed: np.ndarray
    neighbours_now: np.ndarray
    distinct_neighbours: np.ndarray
    accuracy: np.ndarray
    loss: np.ndarray
    hm: np.ndarray
    label_hist: np.ndarray


class DeviceAgent(GeoAgent):
    """A device that moves (or not), trains its own model and exchanges with neighbours."""

    kind: ClassVar[str] = "device"
    model: AgentArrays  # type: ignore[assignment]  # a mesa.Model with these arrays

    def __init__(self, model: mesa.Model, *, index: int, lon: float, lat: float) -> None:
        super().__init__(model, Point(lon, lat), "epsg:4326")
        self.index = int(index)

    # Read-only views of the model's columns, one property each (as Mesa agents' attributes).
    @property
    def position_m(self) -> np.ndarray:
        """Position in map metres (the model's array row; a view, not a copy)."""
        return self.model.position[self.index]

    @property
    def speed(self) -> float:
        """Current speed in m/s."""
        return float(self.model.speed[self.index])

    @property
    def neighbours(self) -> int:
        """Number of neighbours in range this step."""
        return int(self.model.neighbours_now[self.index])

    @property
    def distinct_neighbours(self) -> int:
        """Number of distinct agents met so far."""
        return int(self.model.distinct_neighbours[self.index])

    @property
    def accuracy(self) -> float:
        """Test accuracy at the latest evaluation (NaN before the first)."""
        return float(self.model.accuracy[self.index])

    @property
    def loss(self) -> float:
        """Test loss at the latest evaluation."""
        return float(self.model.loss[self.index])

    @property
    def high_mobility(self) -> bool:
        """Whether the agent is in the high-mobility class."""
        return bool(self.model.hm[self.index])

    @property
    def policy(self) -> str:
        """Name of the policy this agent's kind runs."""
        return self.model.config.policy_of(self.kind)

    @property
    def label_histogram(self) -> list[int]:
        """Training samples per label (empty when the run does not learn)."""
        hist = self.model.label_hist
        return [] if hist is None else [int(v) for v in hist[self.index]]

    def describe(self) -> dict[str, object]:
        """What the app shows when the agent is hovered."""
        return {
            "id": self.unique_id,
            "kind": self.kind,
            "policy": self.policy,
            "accuracy": round(self.accuracy, 4),
            "neighbours": self.neighbours,
            "distinct neighbours": self.distinct_neighbours,
            "mobility class": "HM" if self.high_mobility else "LM",
            "labels": self.label_histogram,
        }


class Vehicle(DeviceAgent):
    """Drives the directed street network (default 13.89 m/s, Cached-DFL)."""

    kind = "vehicle"


class Pedestrian(DeviceAgent):
    """Walks streets in both directions (default 1.4 m/s)."""

    kind = "pedestrian"


class Sensor(DeviceAgent):
    """Sits still on a grid cell (Reza et al.'s static clients, PSFL's sensors)."""

    kind = "sensor"


class UAV(DeviceAgent):
    """Flies between grid cells (Reza et al.'s mobile clients)."""

    kind = "uav"


def _agent_class(row: AgentKind) -> type[DeviceAgent]:
    """The agent class of a kind without one written here (a plug-in kind).

    A :class:`DeviceAgent` named after it, its row's ``doc`` as the docstring.
    """
    name = "".join(part.title() for part in row.name.split("_"))
    return type(name, (DeviceAgent,), {"kind": row.name, "__doc__": row.doc or None,
                                       "__module__": __name__})  # fmt: skip


_WRITTEN = {cls.kind: cls for cls in (Vehicle, Pedestrian, Sensor, UAV)}
AGENT_CLASSES: dict[str, type[DeviceAgent]] = {
    row.name: _WRITTEN.get(row.name) or _agent_class(row) for row in AGENT_KINDS
}
