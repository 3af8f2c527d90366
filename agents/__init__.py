"""Agent kinds and their mobility models.

``from mobidfl.agents import Vehicle`` works as before; the names are resolved on first use (PEP
562), so loading the mobility models (``mobidfl.agents.mobility``, what building a
:class:`mobidfl.model.config.Config` does through the plug-in registry) does not import Mesa and
mesa-geo for the agent classes.
"""

from __future__ import annotations

from typing import Any

from mobidfl.exports import resolve

_EXPORTS = dict.fromkeys(
    ("AGENT_CLASSES", "UAV", "DeviceAgent", "Pedestrian", "Sensor", "Vehicle"),
    "mobidfl.agents.kinds",
)

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return resolve(globals(), _EXPORTS, name)
