"""Agents that do not move: sensors on grid cells (Reza et al.'s static clients, PSFL's sensors)."""

from __future__ import annotations

from typing import Any, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.errors import ConfigError
from mobidfl.settings import kinds_where

GRID_KINDS = tuple(sorted(kinds_where(on_grid=True)))


def distinct_cells(
    *, grid_cells: int, count: int, kind: str, rng: np.random.Generator
) -> np.ndarray:
    """Pick ``count`` distinct cells: sensors and UAVs occupy cells exclusively."""
    if count > grid_cells:
        raise ConfigError(
            f"{kind}s",
            count,
            f"at most {grid_cells} (one per grid cell; raise it by lowering cell_m)",
        )
    return rng.choice(grid_cells, size=count, replace=False)


@register_mobility
class Static(MobilityModel):
    """Never moves. Grid kinds sit at the centre of a cell of their own; others on a street."""

    name = "static"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        rng = kwargs["rng"]
        if self.kind in GRID_KINDS:
            self.cell = distinct_cells(
                grid_cells=self.world.grid.n_cells, count=self.count, kind=self.kind, rng=rng
            )
            self.position = self.world.grid.centres(self.cell)
        else:
            net = self.street_network()
            self.position = net.xy(*net.random_edges(self.count, rng))

    # A standing fleet's speeds/advance, as contact_trace.py's: two models whose agents stand still.
    @override
    def speeds(self) -> np.ndarray:
        return np.zeros(self.count)

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        return np.broadcast_to(self.position, (len(ctx.fractions), self.count, 2)).copy()
