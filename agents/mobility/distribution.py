"""Distribution-aware mobility on a grid.

DAM and DCM (Reza et al., "Distribution-Aware Mobility-Assisted Decentralized Federated Learning",
§III-IV).

Clients live on a ``G x G`` grid of locations ``(p, q)``. Cells are numbered row-major:
``cell = row * G + col`` with ``row, col in [0, G)`` (the paper counts from 1; distances are the
same). Every ``grid`` argument also accepts ``(rows, cols)`` for a rectangular grid (MobiDFL's
``mobidfl.maps.grid.Grid`` over a map is ``rows x cols``); then ``cell = row * cols + col``, the
same numbering as ``Grid``. All radii (``R_c``, ``R_m``) are in cell units and distances are
Euclidean between cell centres, as in the paper (``||L - L'||_2``, eqs. 3-9 and Alg. 1; e.g.
``R_c = 3`` on an 18 x 18 grid). A caller with metres converts with ``radius_m / cell_size_m``.
``metric="chebyshev"`` is offered as a non-paper alternative (square neighbourhoods).

A mobile client (DAM/DCM) draws a destination with probability proportional to the distance
between the label distribution seen there and the one seen where it stands (eqs. 4-6 / 9),
keeps it until reached (eq. 8), and moves toward it at most ``R_m`` per round (eq. 7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from mobidfl.errors import ConfigError, bad_argument

__all__ = [
    "area_label_lists",
    "disjoint_area_labels",
    "overlapping_area_labels",
    "GridMetric",
    "GridShape",
    "DistributionDistance",
    "cell_coordinates",
    "cell_index",
    "cell_row_col",
    "cells_within",
    "coverage_matrix",
    "dam_probabilities",
    "dcm_centres",
    "dcm_probabilities",
    "distribution_distance",
    "label_distribution_at_cells",
    "next_destination",
    "random_grid_destination",
    "step_toward",
]

GridMetric = Literal["euclidean", "chebyshev"]
GridShape = int | tuple[int, int]
"""``G`` for the paper's ``G x G`` grid, or ``(rows, cols)``."""
DistributionDistance = Literal["l2", "tv"]

_ZERO_DISTANCE = 1e-12  # distances below this are rounding noise between equal distributions


# --------------------------------------------------------------------------------------------
# grid helpers
# --------------------------------------------------------------------------------------------
def _shape(grid: GridShape) -> tuple[int, int]:
    """``(rows, cols)`` of a grid given as ``G`` (square) or ``(rows, cols)``."""
    dims = grid if isinstance(grid, tuple | list) else (grid, grid)
    if len(dims) != 2 or any(
        isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1 for d in dims
    ):
        raise bad_argument("grid", grid, "an integer >= 1 (cells per side) or (rows, cols)")
    return int(dims[0]), int(dims[1])


def _check_grid(grid: GridShape) -> tuple[int, int]:
    return _shape(grid)


def _check_radius(name: str, value: float) -> None:
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise bad_argument(name, value, "a number >= 0 in cell units (math.inf allowed)")
    if np.isnan(value) or value < 0:
        raise bad_argument(name, value, "a number >= 0 in cell units (math.inf allowed)")


def _check_metric(metric: str) -> None:
    if metric not in ("euclidean", "chebyshev"):
        raise bad_argument("metric", metric, "'euclidean' (paper) or 'chebyshev'")


def _as_cells(cells: ArrayLike, *, n_cells: int, name: str) -> np.ndarray:
    arr = np.asarray(cells)
    if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0
                     or arr.max() >= n_cells):
        raise bad_argument(name, arr.tolist(), f"integer cell indices in [0, {n_cells})")
    return arr.astype(np.int64, copy=False)


def cell_index(row: int, col: int, *, grid: GridShape) -> int:
    """Row-major cell index of grid location ``(row, col)`` (0-based)."""
    rows, cols = _check_grid(grid)
    if not (0 <= row < rows and 0 <= col < cols):
        raise bad_argument("(row, col)", (row, col), f"row in [0, {rows}), col in [0, {cols})")
    return int(row) * cols + int(col)


def cell_row_col(cell: int, *, grid: GridShape) -> tuple[int, int]:
    """Inverse of :func:`cell_index`."""
    rows, cols = _check_grid(grid)
    if not 0 <= cell < rows * cols:
        raise bad_argument("cell", cell, f"an index in [0, {rows * cols})")
    return int(cell) // cols, int(cell) % cols


def cell_coordinates(*, grid: GridShape) -> np.ndarray:
    """``(rows*cols, 2)`` int array of ``(row, col)`` for every cell, row-major (``G_L``)."""
    rows, cols = _check_grid(grid)
    r, c = np.divmod(np.arange(rows * cols, dtype=np.int64), cols)
    return np.stack([r, c], axis=1)


def _pairwise_within(
    a: np.ndarray, b: np.ndarray, radius: float, *, cols: int, metric: GridMetric
) -> np.ndarray:
    """Boolean ``(len(a), len(b))``: cell ``a[i]`` lies within ``radius`` of cell ``b[j]``.

    Euclidean compares exact integer squared distances with ``radius**2`` (no sqrt rounding).
    """
    ra, ca = np.divmod(a, cols)
    rb, cb = np.divmod(b, cols)
    dr = np.abs(ra[:, None] - rb[None, :])
    dc = np.abs(ca[:, None] - cb[None, :])
    if np.isinf(radius):
        return np.ones(dr.shape, dtype=bool)
    if metric == "euclidean":
        return (dr * dr + dc * dc) <= radius * radius
    return np.maximum(dr, dc) <= radius


def cells_within(
    centre: int, *, radius: float, grid: GridShape, metric: GridMetric = "euclidean"
) -> np.ndarray:
    """Cells ``L`` of the grid with ``||L - centre|| <= radius`` (sorted indices).

    This is the set in eq. 3 and the set ``Gamma`` of eq. 7 (Reza et al.). Only the bounding box
    of the disc is scanned, so the cost does not grow with the grid for a finite radius.
    """
    rows, cols = _check_grid(grid)
    _check_radius("radius", radius)
    _check_metric(metric)
    c = int(_as_cells(np.array([centre]), n_cells=rows * cols, name="centre")[0])
    if np.isinf(radius):
        return np.arange(rows * cols)
    r0, c0 = divmod(c, cols)
    reach = int(np.floor(radius))
    rr = np.arange(max(0, r0 - reach), min(rows, r0 + reach + 1))
    cc = np.arange(max(0, c0 - reach), min(cols, c0 + reach + 1))
    box = (rr[:, None] * cols + cc[None, :]).ravel()  # row-major, hence sorted
    mask = _pairwise_within(box, np.array([c]), radius, cols=cols, metric=metric)[:, 0]
    return box[mask]


def coverage_matrix(
    static_cells: ArrayLike, *, grid: GridShape, rc: float, metric: GridMetric = "euclidean"
) -> np.ndarray:
    """``(rows*cols, S)`` bool: a client standing at cell ``L`` can talk to static client ``j``.

    Reza et al. §III: ``j`` is a neighbour when ``||L - L_j^(0)||_2 <= R_c``; used by eq. 4
    (``zeta_{i_m, L}``) and Alg. 1 (lines 6, 8, 11).
    """
    rows, cols = _check_grid(grid)
    _check_radius("rc", rc)
    _check_metric(metric)
    s = _as_cells(np.atleast_1d(static_cells), n_cells=rows * cols, name="static_cells")
    return _pairwise_within(np.arange(rows * cols), s, rc, cols=cols, metric=metric)


# --------------------------------------------------------------------------------------------
# eqs. 4-6, 9: distributions, distances, destination probabilities
# --------------------------------------------------------------------------------------------
def label_distribution_at_cells(
    static_cells: ArrayLike,
    static_counts: ArrayLike,
    mobile_counts: ArrayLike | None,
    *,
    grid: GridShape,
    rc: float,
    metric: GridMetric = "euclidean",
) -> np.ndarray:
    """Label distribution a mobile client would see from every cell (Reza et al., eq. 4).

    ``D^L_l = sum_{c in zeta_L} |{samples of c with label l}| / sum_{c in zeta_L} |D_c|`` where
    ``zeta_L`` = static clients within ``R_c`` of ``L`` plus the mobile client itself. Counts are
    pooled (a client with more samples weighs more), not averaged per client.

    Parameters
    ----------
    static_cells
        ``(S,)`` cell index of each static client (its initial location).
    static_counts
        ``(S, Y)`` per-client label counts.
    mobile_counts
        ``(Y,)`` label counts of the mobile client; None for a client holding no
        data (e.g. a pure relay).
    grid
        cells per side ``G``, or ``(rows, cols)``.
    rc
        communication radius ``R_c`` in cells.
    metric
        grid distance (paper: euclidean).

    Returns
    -------
    np.ndarray
        ``(rows*cols, Y)`` float array; each row sums to 1, or is all zero where nobody with data is
        in reach (eq. 4 is 0/0 there).
    """
    counts = np.asarray(static_counts, dtype=np.float64)
    if counts.ndim != 2:
        raise bad_argument("static_counts", counts.shape, "a 2-D array (clients, labels)")
    if np.any(counts < 0):
        raise bad_argument("static_counts", "negative entries", "label counts >= 0")
    cells = np.atleast_1d(np.asarray(static_cells))
    if cells.shape != (counts.shape[0],):
        raise bad_argument(
            "static_cells", cells.shape, f"shape ({counts.shape[0]},) matching static_counts"
        )
    n_labels = counts.shape[1]
    own = np.zeros(n_labels) if mobile_counts is None else np.asarray(mobile_counts, float)
    if own.shape != (n_labels,) or np.any(own < 0):
        raise bad_argument("mobile_counts", own.tolist(), f"{n_labels} label counts >= 0")
    cover = coverage_matrix(cells, grid=grid, rc=rc, metric=metric)
    pooled = cover.astype(np.float64) @ counts + own[None, :]
    totals = pooled.sum(axis=1, keepdims=True)
    out = np.zeros_like(pooled)
    np.divide(pooled, totals, out=out, where=totals > 0)
    return out


def distribution_distance(
    p: ArrayLike, q: ArrayLike, *, metric: DistributionDistance = "l2"
) -> np.ndarray:
    """Distance between label distributions along the last axis (broadcasting).

    Reza et al., eq. 5 uses the Euclidean (L2) distance ``sqrt(sum_l (D^L_l - D^cur_l)^2)``
    (``metric="l2"``). ``metric="tv"`` (total variation, ``0.5 * sum_l |p_l - q_l|``) is a
    non-paper alternative.
    """
    diff = np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64)
    if metric == "l2":
        return np.sqrt(np.sum(diff * diff, axis=-1))
    if metric == "tv":
        return 0.5 * np.sum(np.abs(diff), axis=-1)
    raise bad_argument("distance metric", metric, "'l2' (paper, eq. 5) or 'tv'")


def _proportional(d: np.ndarray) -> np.ndarray:
    """Normalise non-negative scores; uniform when all are (numerically) zero.

    Eqs. 6 and 9 are 0/0 when every candidate sees the current distribution; the paper does not
    say what to do. Uniform is the limit of eq. 6 when the same small epsilon is added to all
    distances, and it keeps the client exploring like the Random Movement baseline instead of
    freezing it.
    """
    d = np.where(d < _ZERO_DISTANCE, 0.0, d)
    total = d.sum()
    if total <= 0:
        return np.full(d.shape, 1.0 / d.size)
    return d / total


def dam_probabilities(
    distributions: ArrayLike,
    current_cell: int,
    *,
    distance: DistributionDistance = "l2",
) -> np.ndarray:
    """DAM destination probabilities over all cells (Reza et al., eq. 6).

    ``p(L | L_cur) = d^L_{L_cur} / sum_{L in G_L} d^L_{L_cur}`` with ``d`` from eq. 5: cells whose
    data look most unlike what the client sees now are the likeliest destinations; the current
    cell (distance 0) is never drawn unless all distances are 0 (then uniform, see
    ``_proportional``).

    Parameters
    ----------
    distributions
        ``(cells, Y)`` from :func:`label_distribution_at_cells`.
    current_cell
        the client's cell ``L^(t-1)``.
    distance
        ``"l2"`` (eq. 5) or ``"tv"``.

    Returns
    -------
    np.ndarray
        ``(cells,)`` probabilities summing to 1.
    """
    dist = np.asarray(distributions, dtype=np.float64)
    if dist.ndim != 2 or not 0 <= current_cell < dist.shape[0]:
        raise bad_argument("current_cell", current_cell, f"a row index of a (cells, labels) array "
                          f"with {dist.shape[0] if dist.ndim == 2 else 0} rows")
    d = distribution_distance(dist, dist[current_cell], metric=distance)
    return _proportional(d)


def dcm_probabilities(
    distributions: ArrayLike,
    current_cell: int,
    centres: Sequence[int] | np.ndarray,
    *,
    distance: DistributionDistance = "l2",
) -> np.ndarray:
    """DCM destination probabilities over the cluster centres (Reza et al., eq. 9).

    Same as eq. 6 restricted to the centres ``L^c`` of Alg. 1 (:func:`dcm_centres`).

    Returns
    -------
    np.ndarray
        ``(len(centres),)`` probabilities summing to 1, aligned with ``centres``.
    """
    dist = np.asarray(distributions, dtype=np.float64)
    idx = np.asarray(centres, dtype=np.int64)
    if idx.size == 0 or dist.ndim != 2 or idx.min() < 0 or idx.max() >= dist.shape[0]:
        raise bad_argument("centres", idx.tolist(), "a non-empty list of cell indices")
    if not 0 <= current_cell < dist.shape[0]:
        raise bad_argument("current_cell", current_cell, f"a cell index in [0, {dist.shape[0]})")
    d = distribution_distance(dist[idx], dist[current_cell], metric=distance)
    return _proportional(d)


# --------------------------------------------------------------------------------------------
# Alg. 1: DCM cluster centres
# --------------------------------------------------------------------------------------------
def dcm_centres(
    static_cells: ArrayLike,
    *,
    grid: GridShape,
    rc: float,
    rng: np.random.Generator,
    metric: GridMetric = "euclidean",
) -> list[int]:
    """Greedy cluster centres of the static clients (Reza et al., Alg. 1).

    Line 3: all static clients uncovered. Line 6: the cells covering the most *uncovered* static
    clients within ``R_c``. Lines 7-8: from the second centre on (``n > 1``), if several cells
    tie, keep those covering the most static clients overall. Line 10: draw one of the remaining
    ties uniformly with ``rng``. Line 11: mark the clients it covers as covered. Repeat until all
    are covered (terminates: an uncovered client always covers its own cell).

    Returns
    -------
    list[int]
        Cell indices of the centres, in the order chosen (empty when there are no static
        clients).
    """
    cover = coverage_matrix(static_cells, grid=grid, rc=rc, metric=metric)
    total_cover = cover.sum(axis=1)
    remaining = np.ones(cover.shape[1], dtype=bool)
    centres: list[int] = []
    n = 1
    while remaining.any():
        counts = cover[:, remaining].sum(axis=1)  # line 6
        cand = np.flatnonzero(counts == counts.max())
        if cand.size > 1 and n > 1:  # lines 7-8
            overall = total_cover[cand]
            cand = cand[overall == overall.max()]
        chosen = int(cand[0]) if cand.size == 1 else int(cand[rng.integers(cand.size)])  # l. 10
        remaining &= ~cover[chosen]  # line 11
        centres.append(chosen)  # line 12
        n += 1
    return centres


# --------------------------------------------------------------------------------------------
# eqs. 3, 7, 8: movement
# --------------------------------------------------------------------------------------------
def random_grid_destination(
    current: int,
    *,
    rm_cells: float,
    grid: GridShape,
    rng: np.random.Generator,
    metric: GridMetric = "euclidean",
) -> int:
    """Random Movement baseline: a cell drawn uniformly within ``R_m`` (Reza et al., eq. 3).

    ``L^(t) ~ Uniform({L in G_L : ||L - L^(t-1)||_2 <= R_m})``; the current cell is part of the
    set (a client may stay). ``rm_cells = math.inf`` draws uniformly over the whole grid.
    """
    choices = cells_within(current, radius=rm_cells, grid=grid, metric=metric)
    return int(choices[rng.integers(choices.size)])


def step_toward(
    current_cell: int,
    destination_cell: int,
    *,
    rm_cells: float,
    grid: GridShape,
    metric: GridMetric = "euclidean",
) -> int:
    """Where a mobile client ends the round when heading for a destination (Reza et al., eq. 7).

    The destination itself if ``||L_des - L^(t-1)||_2 <= R_m``; otherwise
    ``argmin_{L in Gamma} ||L - L_des||_2`` with ``Gamma`` the cells within ``R_m`` of the
    current cell. The paper leaves ties open; we take the smallest cell index. With
    ``rm_cells >= 1`` every step strictly reduces the distance to the destination; with
    ``rm_cells < 1`` the client cannot move.
    """
    rows, cols = _check_grid(grid)
    _check_radius("rm_cells", rm_cells)
    _check_metric(metric)
    cur, des = _as_cells(np.array([current_cell, destination_cell]), n_cells=rows * cols,
                         name="current_cell/destination_cell")
    if _pairwise_within(np.array([des]), np.array([cur]), rm_cells, cols=cols,
                        metric=metric)[0, 0]:
        return int(des)
    gamma = cells_within(int(cur), radius=rm_cells, grid=grid, metric=metric)
    g_rows, g_cols = np.divmod(gamma, cols)
    dr, dc = g_rows - des // cols, g_cols - des % cols
    # eq. 7 measures closeness to the destination with ||.||_2 whatever the radius metric.
    return int(gamma[np.argmin(dr * dr + dc * dc)])  # argmin returns the first (smallest index)


def next_destination(
    current_cell: int,
    previous_destination: int | None,
    *,
    candidates: Sequence[int] | np.ndarray,
    probabilities: ArrayLike,
    rng: np.random.Generator,
) -> int:
    """Keep the destination until it is reached, then draw a new one (Reza et al., eq. 8).

    Parameters
    ----------
    current_cell
        ``L^(t-1)``.
    previous_destination
        ``L^(des, t-1)``; None before the first draw.
    candidates
        cells to draw from (all cells for DAM, the centres for DCM).
    probabilities
        eq. 6 or eq. 9, aligned with ``candidates``.
    rng
        random generator.

    Returns
    -------
    int
        ``L^(des, t)``.
    """
    if previous_destination is not None and previous_destination != current_cell:
        return int(previous_destination)
    cand = np.asarray(candidates, dtype=np.int64)
    prob = np.asarray(probabilities, dtype=np.float64)
    if cand.shape != prob.shape or cand.size == 0 or not np.isclose(prob.sum(), 1.0):
        raise bad_argument("probabilities", prob.tolist(), "one per candidate, summing to 1")
    return int(cand[rng.choice(cand.size, p=prob)])


MIN_AREA_LABELS = 3
"""Fewest labels an area holds by default: PSFL's EMNIST-letters split (Domini et al., ACSOS
2024; its code's ``np.array_split(arange(27), k)``) gives 3 labels per area at its largest k
(9 areas), 5-6 at k = 5 and 9 at k = 3."""


def disjoint_area_labels(num_classes: int, areas: int) -> list[list[int]]:
    """PSFL's code split: the classes cut into ``areas`` contiguous disjoint blocks.

    ``np.array_split(arange(C), k)`` (``FLutils.dataset_to_nodes_partitioning``). With 10
    classes and 9 areas eight areas hold a single label.
    """
    if not 1 <= areas <= num_classes:
        raise ConfigError("areas", areas, f"1 to {num_classes} areas (one label each at least)")
    return [block.tolist() for block in np.array_split(np.arange(num_classes), areas)]


def overlapping_area_labels(
    num_classes: int, areas: int, *, min_labels: int = MIN_AREA_LABELS
) -> list[list[int]]:
    """Default area label sets: overlapping circular windows, so no area holds one label.

    Area ``a`` gets the ``w`` consecutive labels (mod C) starting at ``floor(a C / k)``, with
    ``w = max(ceil(C / k), min_labels)`` (capped at C). Neighbouring windows share labels
    whenever ``w > C / k``, as in Cached-DFL's group split {9,0,1,2}, {3,4,5,6}, {6,7,8,9}
    (Wang et al., AAAI 2025), and no area holds fewer labels than PSFL's EMNIST split gives
    at 9 areas (3). For C = 10: k = 3 -> {0..3}, {3..6}, {6..9}; k = 9 -> {0,1,2},
    {1,2,3}, ..., {8,9,0}.
    """
    if num_classes < 1 or areas < 1:
        raise ConfigError("areas", areas, "at least one area and one class")
    width = min(num_classes, max(math.ceil(num_classes / areas), int(min_labels)))
    return [
        [(a * num_classes // areas + t) % num_classes for t in range(width)]
        for a in range(areas)
    ]


def area_label_lists(spec: str, *, areas: int, num_classes: int) -> list[list[int]]:
    """Labels of each area from the ``area_labels`` setting ``spec``.

    Empty (default): overlapping circular windows of at least 3 labels
    (:func:`overlapping_area_labels`: no area holds a single label; 3 areas of 10 classes:
    {0..3}, {3..6}, {6..9}, cf. Cached-DFL's {9,0,1,2}, {3,4,5,6}, {6,7,8,9}). ``disjoint``:
    PSFL's code split into contiguous disjoint blocks. Otherwise explicit ';'-separated
    lists. Here, not on the config, because it needs the dataset's class count.
    """
    if not spec.strip():
        return overlapping_area_labels(num_classes, areas)
    if spec.strip() == "disjoint":
        return disjoint_area_labels(num_classes, areas)
    try:
        lists = [[int(v) for v in part.split(",")] for part in spec.split(";")]
    except ValueError:
        raise ConfigError("area_labels", spec, "lists like 0,1,2;3,4,5") from None
    if len(lists) != areas or any(not 0 <= v < num_classes for part in lists for v in part):
        raise ConfigError(
            "area_labels",
            spec,
            f"{areas} ';'-separated lists of labels in [0, {num_classes})",
        )
    return lists
