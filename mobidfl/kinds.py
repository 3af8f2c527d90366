"""The agent kinds, defined once.

Ground floor: imports nothing of ours, so the settings (:mod:`model.config`), the link
models, the mobility models and the Mesa model all read the kinds from here. Each kind is
one :class:`AgentKind` row of :data:`AGENT_KINDS`; :data:`KINDS`, :data:`COUNT_SETTING` and
:data:`KIND_POLICY` are derived from it. What else adding a kind touches (its settings
fields, its agent class) is listed in docs/reference/layout.md and checked by
``tests/test_kinds.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AGENT_KINDS", "COUNT_SETTING", "KINDS", "KIND_POLICY", "AgentKind", "auto_policies"]


@dataclass(frozen=True, kw_only=True)
class AgentKind:
    """One agent kind: its names in the settings and what a run gives it by default."""

    name: str
    """The kind (``vehicle``): its per-kind settings are ``<name>.<field>``."""
    count_setting: str
    """The setting that says how many agents of this kind a run has (``vehicles``)."""
    count: int
    """Default number of agents."""
    count_help: str
    """Help text of the count setting (the settings reference)."""
    mobility: str
    """Default mobility model (``<name>.mobility``)."""
    speed: float
    """Default speed in m/s (``<name>.speed``)."""
    policy: str
    """What ``policy = "auto"`` gives this kind: the seed system built for it."""


AGENT_KINDS: tuple[AgentKind, ...] = (
    # Cached-DFL (Wang et al., AAAI 2025): 100 cars at 13.89 m/s carry model caches
    AgentKind(name="vehicle", count_setting="vehicles", count=100,
              count_help="number of vehicles (Cached-DFL: 100 cars)",
              mobility="manhattan", speed=13.89, policy="cached_lru"),
    # de Heredia (2024), Alg. 1: walkers average with who they meet
    AgentKind(name="pedestrian", count_setting="pedestrians", count=40,
              count_help="number of pedestrians",
              mobility="manhattan", speed=1.4, policy="dpsgd"),
    # Reza et al. (DAM/DCM), eq. 2: static clients ...
    AgentKind(name="sensor", count_setting="sensors", count=30,
              count_help="number of static sensors (one per grid cell)",
              mobility="static", speed=0.0, policy="fedavg_weighted"),
    # ... and the mobile clients that visit them share one policy
    AgentKind(name="uav", count_setting="uavs", count=6,
              count_help="number of UAVs (move between grid cells)",
              mobility="random_grid", speed=10.0, policy="fedavg_weighted"),
)
"""Every agent kind, in the order agents are built and settings are listed."""

KINDS: tuple[str, ...] = tuple(k.name for k in AGENT_KINDS)
COUNT_SETTING: dict[str, str] = {k.name: k.count_setting for k in AGENT_KINDS}
KIND_POLICY: dict[str, str] = {k.name: k.policy for k in AGENT_KINDS}
"""What ``policy = "auto"`` (the default) gives each kind: the seed system built for it."""


def auto_policies() -> str:
    """``vehicle cached_lru, pedestrian dpsgd, sensor and uav fedavg_weighted``: each kind's
    own policy, kinds sharing one named together (the help of ``policy``)."""
    by_policy: dict[str, list[str]] = {}
    for kind in AGENT_KINDS:
        by_policy.setdefault(kind.policy, []).append(kind.name)
    return ", ".join(f"{' and '.join(kinds)} {policy}" for policy, kinds in by_policy.items())
