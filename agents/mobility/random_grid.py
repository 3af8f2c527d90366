"""Mobile clients hopping between grid cells (Reza et al., eq. 3: Random Movement)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.agents.mobility.distribution import random_grid_destination
from mobidfl.agents.mobility.static import distinct_cells
from mobidfl.settings import PluginSettings, one_of, positive, setting


@dataclass(frozen=True, kw_only=True)
class DamSettings(PluginSettings):
    """Reza et al.'s cell movers (``random_grid``, ``dam``, ``dcm``).

    The move radius R_m and, for DAM/DCM, the eq. 5 distribution distance.
    """

    namespace: ClassVar[str] = "dam"
    rm_cells: float = setting(
        1.0, "random_grid/dam/dcm: max move per step in cells (inf allowed)", positive,
        alias="rm_cells", inf=True,
    )
    distance: str = setting(
        "l2", "distribution distance (Reza et al. eq. 5: l2)", one_of("l2", "tv"),
        alias="dam_distance", readers=("dam", "dcm"),
    )


class GridMobility(MobilityModel):
    """Base for cell-to-cell movers: the member is at a cell centre at every step end.

    Between step ends it flies the straight line from the old to the new centre at
    constant speed, so "within R at any moment" contacts see the path (de Heredia's M_i).
    Subclasses choose the next cell with :meth:`next_cells`.
    """

    settings_class = DamSettings
    options: DamSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        grid = self.world.grid
        self.cell = distinct_cells(
            grid_cells=grid.n_cells, count=self.count, kind=self.kind, rng=kwargs["rng"]
        )
        self.position = grid.centres(self.cell)
        self.last_speed = np.zeros(self.count)

    @property
    def grid_shape(self) -> tuple[int, int]:
        """``(rows, cols)`` of the map's grid, the ``grid`` argument of the pure maths."""
        return (self.world.grid.rows, self.world.grid.cols)

    @override
    def speeds(self) -> np.ndarray:
        return self.last_speed

    # The MobilityModel hooks; each model fills them its own way (cf. manhattan.py).
    @override
    def max_step_distance(self, step_s: float) -> float:
        rm = self.options.rm_cells
        grid = self.world.grid
        diagonal = float(np.hypot(grid.rows, grid.cols))
        return min(rm, diagonal) * grid.cell_m

    def next_cells(self, ctx: MobilityContext) -> np.ndarray:
        """Each member's cell at the end of this step, ``(count,)`` cell indices."""
        raise NotImplementedError

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        start = self.position
        self.cell = self.next_cells(ctx)
        end = self.world.grid.centres(self.cell)
        self.last_speed = np.hypot(*(end - start).T) / ctx.step_s
        out = start[None] + ctx.fractions[:, None, None] * (end - start)[None]
        self.position = end
        return out

    @override
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "cell": self.cell.copy(), "speed": self.last_speed.copy()}

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.cell = np.asarray(state["cell"], int).copy()
        self.last_speed = np.asarray(state["speed"], float).copy()


@register_mobility
class RandomGrid(GridMobility):
    """Reza et al., eq. 3: the next cell is uniform among the cells within R_m.

    ``dam.rm_cells = inf`` makes every cell reachable (the paper's unconstrained case). The draw
    is :func:`mobidfl.agents.mobility.distribution.random_grid_destination` (Euclidean cell
    distance, staying put allowed), the one implementation of eq. 3.
    """

    name = "random_grid"
    # Kinds it fits: Reza et al.: mobile clients (UAVs) fly between grid cells.
    kinds = frozenset({"uav"})

    @override
    def next_cells(self, ctx: MobilityContext) -> np.ndarray:
        shape = self.grid_shape
        rm = float(self.options.rm_cells)
        return np.array(
            [random_grid_destination(int(c), rm_cells=rm, grid=shape, rng=ctx.rng)
             for c in self.cell],
            dtype=np.int64,
        )
