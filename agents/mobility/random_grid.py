"""Mobile clients hopping between grid cells (seed 001, eq. 3: Random Movement)."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from agents.mobility.static import distinct_cells


class GridMobility(MobilityModel):
    """Base for cell-to-cell movers: the member is at a cell centre at every step end.

    Between step ends it flies the straight line from the old to the new centre at
    constant speed, so "within R at any moment" contacts see the path (seed 000's M_i).
    Subclasses choose the next cell with :meth:`next_cells`.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        grid = self.world.grid
        self.cell = distinct_cells(
            grid_cells=grid.n_cells, count=self.count, kind=self.kind, rng=kwargs["rng"]
        )
        self.position = grid.centres(self.cell)
        self.last_speed = np.zeros(self.count)

    def speeds(self) -> np.ndarray:
        return self.last_speed

    def max_step_distance(self, step_s: float) -> float:
        rm = self.settings.rm_cells
        grid = self.world.grid
        diagonal = float(np.hypot(grid.rows, grid.cols))
        return min(rm, diagonal) * grid.cell_m

    def next_cells(self, ctx: MobilityContext) -> np.ndarray:
        raise NotImplementedError

    def advance(self, ctx: MobilityContext) -> np.ndarray:
        start = self.position
        self.cell = self.next_cells(ctx)
        end = self.world.grid.centres(self.cell)
        self.last_speed = np.hypot(*(end - start).T) / ctx.step_s
        out = start[None] + ctx.fractions[:, None, None] * (end - start)[None]
        self.position = end
        return out

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "cell": self.cell.copy(), "speed": self.last_speed.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.cell = np.asarray(state["cell"], int).copy()
        self.last_speed = np.asarray(state["speed"], float).copy()


def cells_within_rm(grid_rows: int, grid_cols: int, cell: int, rm_cells: float) -> np.ndarray:
    """Cells whose centre is within ``rm_cells`` cell widths of ``cell`` (itself included)."""
    row, col = divmod(int(cell), grid_cols)
    rows, cols = np.divmod(np.arange(grid_rows * grid_cols), grid_cols)
    return np.flatnonzero(np.hypot(rows - row, cols - col) <= rm_cells + 1e-9)


@register_mobility
class RandomGrid(GridMobility):
    """Seed 001, eq. 3: the next cell is uniform among the cells within R_m.

    ``rm_cells = inf`` makes every cell reachable (the paper's unconstrained case).
    """

    name = "random_grid"

    def next_cells(self, ctx: MobilityContext) -> np.ndarray:
        grid = self.world.grid
        return np.array(
            [
                ctx.rng.choice(cells_within_rm(grid.rows, grid.cols, c, self.settings.rm_cells))
                for c in self.cell
            ]
        )
