"""The narrow interface every mobility model implements, and the registry by name.

A mobility model moves one group of agents (all agents of one kind). It keeps its own
state in arrays and, each step, returns the group's positions at the requested fractions
of the step so that contact detection can test "within R at any moment" (de Heredia 2024,
M_i(t_k)). Adding a model = one file with a subclass + one import line in
``agents/mobility/__init__.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mobidfl.agents.views import WorldView
from mobidfl.maps.world import WorldMap
from mobidfl.plugins import MOBILITY_MODELS
from mobidfl.settings import KINDS, PluginSettings, kinds_where


@dataclass
class MobilityContext:
    """What a mobility model may read while advancing one step.

    Attributes
    ----------
    world
        A read-only view of the running world (:class:`mobidfl.agents.views.WorldView`);
        destination-seeking models (Reza et al.'s DAM/DCM) read static agents' positions
        and label histograms from it. ``None`` outside a model (tests).
    step_s
        Seconds in this step.
    fractions
        Increasing fractions of the step in (0, 1], the last one 1.0.
    rng
        The model's generator.
    """

    world: WorldView | None
    step_s: float
    fractions: np.ndarray
    rng: np.random.Generator


class MobilityModel(ABC):
    """Moves a group of agents; positions in metres of the map CRS.

    Parameters
    ----------
    world
        The map the group moves on (street network, grid, areas).
    kind
        The group's agent kind (``vehicle``, ``pedestrian``, ``sensor``, ``uav``).
    count
        Number of agents in the group.
    settings
        The run's config; ``self.kind_settings`` is the kind's own part, ``self.options``
        this model's typed settings (``None`` without a ``settings_class``).
    rng
        The model's generator (the only source of randomness).
    """

    name: ClassVar[str]
    kinds: ClassVar[frozenset[str]] = frozenset(KINDS)
    """The agent kinds this model fits; ``Config`` refuses ``<kind>.mobility`` for others."""
    requires: ClassVar[dict[str, Any]] = {}
    """Settings this model cannot run without (``{kind}`` = its agent kind), see
    :func:`mobidfl.model.config.declared_settings`; namespaced or old flat names)."""
    defaults: ClassVar[dict[str, Any]] = {}
    """Settings applied with this model where the user said nothing."""
    settings_class: ClassVar[type[PluginSettings] | None] = None
    """This model's own settings (a frozen dataclass under a namespace, e.g. ``manhattan``);
    :class:`mobidfl.model.config.Config` composes, documents and validates them."""
    gives_contacts: ClassVar[bool] = False
    """True when the model supplies the step's contacts itself (a contact trace) instead of
    positions the world's neighbour search reads; the world then takes every group's
    contacts from it, and refuses a run that mixes such groups with moving ones."""

    home_area: np.ndarray | None = None
    """Each member's area for area-based policies (PSFL's ``A_i``), set by models that place
    members in areas (-1: the map's area at the start position); ``None``: the map's areas."""
    walkers: np.ndarray | None = None
    """Members that walk between areas (PSFL's walking nodes, Sec. V), as indices into the
    group; ``None`` for models without walkers. The world's group views expose them."""

    def __init__(
        self,
        *,
        world: WorldMap,
        kind: str,
        count: int,
        settings: Any,
        rng: np.random.Generator,
    ) -> None:
        self.world = world
        self.kind = kind
        self.count = count
        self.settings = settings
        self.kind_settings = settings.kind(kind)
        own = type(self).settings_class
        self.options: Any = None if own is None else own.of(settings)
        """This model's own typed settings (``None`` for a model without any)."""
        self.hm = np.zeros(count, bool)
        self.position = np.zeros((count, 2))

    def street_network(self) -> Any:
        """The street network this group's kind moves on.

        The directed ``drive`` network for a kind whose row says ``network = "drive"`` (cars keep
        one-way streets), else the ``walk`` network (both directions).
        """
        return self.world.drive if self.kind in kinds_where(network="drive") else self.world.walk

    def speeds(self) -> np.ndarray:
        """Current speed of every member in m/s."""
        return np.full(self.count, float(self.kind_settings.speed))

    def max_step_distance(self, step_s: float) -> float:
        """Upper bound on how far a member can move in one step (sets contact sub-samples)."""
        return float(self.speeds().max(initial=0.0)) * step_s

    @abstractmethod
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        """Move one step; return positions at ``ctx.fractions``, shape ``[F, count, 2]``."""

    def write_outputs(self, folder: Path) -> list[Path]:
        """Write this model's own output files into a run's folder (default: none)."""
        return []

    def state_dict(self) -> dict[str, Any]:
        """The group's state for a checkpoint: copies of its positions and high-mobility flags.

        Subclasses add what their next step depends on; :meth:`load_state_dict` takes it back.
        """
        return {"position": self.position.copy(), "hm": self.hm.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the group from a dict :meth:`state_dict` returned (copies, not views)."""
        self.position = np.asarray(state["position"], float).copy()
        self.hm = np.asarray(state["hm"], bool).copy()


def register_mobility(cls: type[MobilityModel]) -> type[MobilityModel]:
    """Class decorator: register ``cls`` in :data:`mobidfl.plugins.MOBILITY_MODELS`.

    Parameters
    ----------
    cls
        The mobility model class; its ``name`` is the value of ``<kind>.mobility``.

    Returns
    -------
    type[MobilityModel]
        ``cls`` itself, so the decorator leaves the class as it was.

    Raises
    ------
    ValueError
        The name is not a Python identifier, or another class already holds it.
    TypeError
        ``cls`` has no string ``name`` attribute.
    """
    return MOBILITY_MODELS.register(cls)


def make_mobility(name: str, **kwargs: Any) -> MobilityModel:
    """Instantiate the mobility model registered as ``name`` for ``kwargs["kind"]``."""
    kind = kwargs.get("kind", "?")
    return MOBILITY_MODELS.lookup(name, setting=f"{kind}.mobility")(**kwargs)
