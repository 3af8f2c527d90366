"""Agent kinds and their mobility models.

``from agents import Vehicle`` works as before; the names are resolved on first use (PEP
562), so loading the mobility models (``agents.mobility``, what building a
:class:`model.config.Config` does through the plug-in registry) does not import Mesa and
mesa-geo for the agent classes.
"""

from __future__ import annotations

import importlib
from typing import Any

import mobidfl.deferred  # noqa: F401  (before mesa-geo: libpysal on first use)

_EXPORTS = dict.fromkeys(
    ("AGENT_CLASSES", "UAV", "DeviceAgent", "Pedestrian", "Sensor", "Vehicle"), "agents.kinds"
)

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agents' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
