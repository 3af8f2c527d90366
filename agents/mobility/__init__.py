"""Mobility models, one file each, registered by name (one import line per model)."""

from mobidfl.agents.mobility import (  # noqa: F401 - imported to register each built-in model
    contact_trace,
    dam,
    manhattan,
    random_grid,
    random_walk,
    routes,
    static,
    sumo,
    trace,
    walker,
)
from mobidfl.agents.mobility.base import (
    MOBILITY_MODELS,
    MobilityContext,
    MobilityModel,
    make_mobility,
    register_mobility,
)

__all__ = [
    "MOBILITY_MODELS",
    "MobilityContext",
    "MobilityModel",
    "make_mobility",
    "register_mobility",
]
