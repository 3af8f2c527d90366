"""Grid cells over the map (sensors, UAVs) and the split of the map into k areas."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.cluster.vq import kmeans2
from scipy.spatial import cKDTree


@dataclass(frozen=True)
class Grid:
    """Square cells of ``cell_m`` metres laid over ``bounds`` (Reza et al.'s G x G grid).

    Cells are numbered row-major from the south-west corner: ``cell = row * cols + col``.
    """

    x0: float
    y0: float
    cell_m: float
    rows: int
    cols: int

    @classmethod
    def over(cls, bounds: tuple[float, float, float, float], *, cell_m: float) -> Grid:
        """The grid of ``cell_m`` cells covering ``bounds`` (west, south, east, north)."""
        west, south, east, north = bounds
        cols = max(1, math.ceil((east - west) / cell_m))
        rows = max(1, math.ceil((north - south) / cell_m))
        return cls(x0=west, y0=south, cell_m=cell_m, rows=rows, cols=cols)

    @property
    def n_cells(self) -> int:
        """Number of cells, ``rows * cols``."""
        return self.rows * self.cols

    def rc(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` of each cell index."""
        cells = np.asarray(cells)
        return cells // self.cols, cells % self.cols

    def centres(self, cells: np.ndarray | None = None) -> np.ndarray:
        """``[n, 2]`` centre of each cell in ``cells`` (default: every cell, in index order)."""
        cells = np.arange(self.n_cells) if cells is None else np.asarray(cells)
        rows, cols = self.rc(cells)
        return np.stack(
            [self.x0 + (cols + 0.5) * self.cell_m, self.y0 + (rows + 0.5) * self.cell_m], axis=-1
        )

    def cell_of(self, xy: np.ndarray) -> np.ndarray:
        """Cell index of each point of ``xy`` (points outside take the nearest edge cell)."""
        col = np.clip(((xy[:, 0] - self.x0) // self.cell_m).astype(int), 0, self.cols - 1)
        row = np.clip(((xy[:, 1] - self.y0) // self.cell_m).astype(int), 0, self.rows - 1)
        return row * self.cols + col


def split_areas(points: np.ndarray, *, k: int, seed: int) -> np.ndarray:
    """Cluster road nodes into ``k`` areas with k-means, deterministic from ``seed``.

    Cached-DFL's group experiment divides Manhattan into areas; its code clusters road
    nodes with KMeans. Labels are renumbered so area 0 is the southernmost centre.
    """
    if k == 1 or len(points) <= k:
        return np.zeros(len(points), int) if k == 1 else np.arange(len(points)) % k
    rng = np.random.default_rng(seed)
    centroids, labels = kmeans2(points.astype(float), k, minit="++", seed=rng)
    counts = np.bincount(labels, minlength=k)
    if (counts == 0).any():  # rare empty cluster: fall back to quantiles along y
        order = np.argsort(points[:, 1], kind="stable")
        labels = np.empty(len(points), int)
        labels[order] = np.arange(len(points)) * k // len(points)
        centroids = np.array([points[labels == a].mean(0) for a in range(k)])
    rank = np.argsort(np.argsort(centroids[:, 1] + 1e-9 * centroids[:, 0]))
    return rank[labels]


def area_of_points(xy: np.ndarray, node_xy: np.ndarray, node_area: np.ndarray) -> np.ndarray:
    """The area of any point is the area of its nearest road node."""
    _, idx = cKDTree(node_xy).query(xy)
    return node_area[idx]
