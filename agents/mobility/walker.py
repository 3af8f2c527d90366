"""PSFL's sensor field: static sensors in rectangular areas, plus the moving ★ node.

PSFL (Domini et al., ACSOS 2024, Sec. IV-A) places sensors on a 7 x 8 grid and splits space
into k areas, each with its own label subset. Its code (Alchemist ``PhenomenaDistribution``,
``computeSubAreas``) cuts the bounding box into ``floor(sqrt(k))`` rows x ``ceil(k / rows)``
columns of equal rectangles, numbered row-major; rectangles beyond k belong to area k - 1
(5 areas: a 2 x 3 layout whose last two rectangles form area 4). This model reproduces that
layout for the grid cells (it overrides the map's k-means areas through ``home_area``),
because the paper's areas are compact blocks of similar size, while k-means on a street grid
gives 9 areas of 2 to 11 sensors.

With ``psfl.walker = true`` the group's last member is the ★ node of the movement
experiment (Sec. IV-A, last paragraph; Fig. 7): it visits every area in turn and stays
``psfl.walker_stay`` steps in each (paper: 5 steps, 140 in all). Its code
(``MoveInAreas``) heads for the centre of each area in the boustrophedon order
0, 1, 2, 5, 4, 3, 6, 7, 8, moving ``speed`` units per event in a straight line toward it,
and once within reach waits ``waitFor`` events before heading for the next. Here the ★
node travels the straight line to the cell nearest each area's centroid at
``psfl.walker_speed`` grid cells per step (default 0.2 cells per step, the speed recorded
for the authors' code when this model was written; ``inf`` = the earlier one-step jump),
entering the areas on its way as it crosses their borders (the PSFL policy then senses
the new area's data). The step it arrives counts as the first of its ``psfl.walker_stay``
steps at the stop. At 0.2 cells per step, 9 areas on the 7 x 8 field take about 140
steps, the paper's run length. The other members sit on distinct cells, as ``static``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.agents.mobility.static import GRID_KINDS, distinct_cells
from mobidfl.errors import ConfigError, bad_argument
from mobidfl.settings import PluginSettings, at_least_one, one_of, positive, setting

__all__ = ["PsflSettings", "PsflWalker", "area_layout", "rectangle_areas", "snake_order"]


@dataclass(frozen=True, kw_only=True)
class PsflSettings(PluginSettings):
    """PSFL's settings, shared by the ``psfl`` policy and this ``psfl_walker`` mobility.

    They live here, below the policy, so the policy imports them and not the other way round.
    """

    namespace: ClassVar[str] = "psfl"
    sigma: float = setting(
        40.0,
        "federation bound sigma on accumulated dissimilarity (paper: 20/40/80 at "
        "psfl.loss = batch_sum)",
        positive,
        alias="psfl_sigma", readers=("psfl",),
    )
    walker: bool = setting(
        False, "one sensor visits every area in turn (PSFL)", alias="psfl_walker",
        readers=("psfl",),
    )
    walker_stay: int = setting(
        5, "steps the walker stays in each area", at_least_one, alias="psfl_walker_stay",
        readers=("psfl",),
    )
    loss: str = setting(
        "batch_sum",
        "scale of L(D_i, nn_j) in eq. 3: batch_sum (authors' code, the scale of the "
        "paper's sigma 20/40/80) or mean (eq. 3 as printed)",
        one_of("batch_sum", "mean"),
        alias="psfl_loss", readers=("psfl",),
    )
    loss_batch: int = setting(
        64, "evaluation batch of psfl.loss = batch_sum (authors' code: 64)", at_least_one,
        alias="psfl_loss_batch", readers=("psfl",),
    )
    loss_batches: float = setting(
        0.0,
        "psfl.loss = batch_sum summed over this many batches (per-sample mean x this; "
        "0 = ceil(|D_i| / psfl.loss_batch) of the node's own data; authors' logs at 3 areas: "
        "4-5 batches)",
        lambda v: None if math.isfinite(v) and v >= 0 else "a finite number >= 0",
        alias="psfl_loss_batches", readers=("psfl",),
    )
    loss_samples: int = setting(
        0,
        "samples of D_i per loss term of eq. 3, the first of the node's fixed random order "
        "(0 = all, as eq. 3 and the authors' code); with psfl.loss_batches > 0, 288 = 4.5 x 64 "
        "estimates the same per-sample mean on the authors' node size",
        lambda v: None if v >= 0 else "an integer >= 0",
        readers=("psfl",),
    )
    walker_speed: float = setting(
        0.2,
        "speed of the moving node between area centres in grid cells per step "
        "(authors' code 0.2; inf = jump in one step)",
        positive,
        alias="psfl_walker_speed",
        inf=True, readers=("psfl",),
    )


def area_layout(k: int) -> tuple[int, int]:
    """(rows, cols) of PSFL's area rectangles: rows = floor(sqrt(k)), cols = ceil(k/rows)."""
    if k < 1:
        raise ConfigError("areas", k, "an integer >= 1")
    rows = math.isqrt(k)
    return rows, -(-k // rows)


def rectangle_areas(
    xy: np.ndarray, *, bounds: tuple[float, float, float, float], k: int
) -> np.ndarray:
    """Area id of each point under PSFL's rectangle layout (see module docstring).

    Parameters
    ----------
    xy
        ``[n, 2]`` positions in metres.
    bounds
        (west, south, east, north) of the field.
    k
        number of areas.

    Returns
    -------
    np.ndarray
        Int array ``[n]`` in ``[0, k)``; points outside the bounds take the nearest rectangle.
    """
    rows, cols = area_layout(k)
    west, south, east, north = bounds
    if not (east > west and north > south):
        raise bad_argument("bounds", bounds, "west < east and south < north")
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    col = np.clip(((xy[:, 0] - west) / (east - west) * cols).astype(int), 0, cols - 1)
    row = np.clip(((xy[:, 1] - south) / (north - south) * rows).astype(int), 0, rows - 1)
    return np.minimum(row * cols + col, k - 1)


def snake_order(k: int) -> list[int]:
    """Areas in boustrophedon order over the layout (PSFL code: 0,1,2,5,4,3,6,7,8 for 9).

    Consecutive areas are adjacent rectangles, so each move of the ★ node crosses one border.
    """
    rows, cols = area_layout(k)
    order: list[int] = []
    for r in range(rows):
        line = [min(r * cols + c, k - 1) for c in range(cols)]
        for a in line if r % 2 == 0 else reversed(line):
            if a not in order:
                order.append(a)
    return order


@register_mobility
class PsflWalker(MobilityModel):
    """Static sensors in PSFL's rectangular areas; optionally the last one walks (★).

    Attributes
    ----------
    home_area
        area of every member at the start (read by the Mesa model as ``area``,
        hence by the ``area`` data partition).
    walkers
        local indices of the moving members (empty, or the last member).
    tour
        areas the ★ node visits, in order; ``stops``: the cell it stands on in each.
    """

    name = "psfl_walker"
    # Kinds it fits: PSFL: sensors in areas, one of them walks.
    kinds = frozenset({"sensor"})
    settings_class = PsflSettings
    options: PsflSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.kind not in GRID_KINDS:
            raise ConfigError(
                f"{self.kind}.mobility", self.name, f"only for grid kinds ({', '.join(GRID_KINDS)})"
            )
        settings = self.settings
        grid = self.world.grid
        self.k = int(settings.areas)
        self.stay = self.options.walker_stay
        n_walk = 1 if self.options.walker and self.count > 0 else 0
        self.walkers = np.arange(self.count - n_walk, self.count, dtype=np.int64)
        n_static = self.count - n_walk
        cells = distinct_cells(
            grid_cells=grid.n_cells, count=n_static, kind=self.kind, rng=kwargs["rng"]
        )
        self.bounds = (
            grid.x0,
            grid.y0,
            grid.x0 + grid.cols * grid.cell_m,
            grid.y0 + grid.rows * grid.cell_m,
        )
        centres = grid.centres()
        cell_area = self.area_of(centres)
        if np.bincount(cell_area, minlength=self.k).min() == 0:
            raise ConfigError(
                "areas", self.k, f"at most {grid.n_cells} areas (every area needs a grid cell)"
            )
        self.tour = snake_order(self.k)
        self.stops = np.array(
            [self._centre_cell(centres, cell_area, a) for a in self.tour], dtype=np.int64
        )
        self.speed_m = float(self.options.walker_speed) * grid.cell_m
        self.t = 0
        self.leg = 0  # index in ``tour`` of the stop the ★ node heads for / stands on
        self.dwell = 1  # steps counted at the current stop (the start counts as one)
        position = np.zeros((self.count, 2))
        position[:n_static] = grid.centres(cells)
        if n_walk:
            position[self.walkers] = centres[self.stops[0]]
        self.position = position
        self.home_area = self.area_of(self.position)
        self.last_speed = np.zeros(self.count)

    @staticmethod
    def _centre_cell(centres: np.ndarray, cell_area: np.ndarray, area: int) -> int:
        """The cell of ``area`` nearest the centroid of its cells (``MoveInAreas`` target)."""
        cells = np.flatnonzero(cell_area == area)
        centroid = centres[cells].mean(axis=0)
        return int(cells[np.argmin(np.hypot(*(centres[cells] - centroid).T))])

    def area_of(self, xy: np.ndarray) -> np.ndarray:
        """Area of any position under the rectangle layout."""
        return rectangle_areas(xy, bounds=self.bounds, k=self.k)

    def current_areas(self) -> np.ndarray:
        """Area each member stands in now (differs from ``home_area`` only for the ★ node)."""
        return self.area_of(self.position)

    @override
    def speeds(self) -> np.ndarray:
        return self.last_speed

    @override
    def max_step_distance(self, step_s: float) -> float:
        if not self.walkers.size:
            return 0.0
        west, south, east, north = self.bounds
        return float(min(np.hypot(east - west, north - south), self.speed_m))

    def _walker_end(self, here: np.ndarray) -> np.ndarray:
        """One step of the ★ node's tour from ``here`` (stay, or travel toward the stop)."""
        stop = self.world.grid.centres(self.stops[self.leg])
        standing = float(np.hypot(*(stop - here))) < 1e-6  # metres (UTM-sized coordinates)
        if standing and (self.dwell < self.stay or self.leg == len(self.tour) - 1):
            self.dwell += 1
            return here
        if standing:
            self.leg, self.dwell = self.leg + 1, 0
        target = self.world.grid.centres(self.stops[self.leg])
        gap = float(np.hypot(*(target - here)))
        if gap <= self.speed_m:
            self.dwell = 1  # arrived: this step is the first of the stay
            return target
        return here + (target - here) * (self.speed_m / gap)

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        start = self.position
        self.t += 1
        end = start.copy()
        for w in self.walkers.tolist():
            end[w] = self._walker_end(start[w])
        self.last_speed = np.hypot(*(end - start).T) / ctx.step_s
        self.position = end
        return start[None] + ctx.fractions[:, None, None] * (end - start)[None]

    @override
    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "t": self.t,
            "leg": self.leg,
            "dwell": self.dwell,
            "speed": self.last_speed.copy(),
        }

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.t = int(state["t"])
        self.leg = int(state["leg"])
        self.dwell = int(state["dwell"])
        self.last_speed = np.asarray(state["speed"], float).copy()
