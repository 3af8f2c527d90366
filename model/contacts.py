"""Who was in radio range of whom during a step, with a spatial index (never N x N).

Two rules (setting ``contact``):

* ``end``: pairs within R at the end of the step (one ``cKDTree.query_pairs``).
* ``during``: pairs within R at *any moment* of the step (de Heredia 2024, §5.1, M_i(t_k)).
  Motion is sampled at F sub-times, F chosen so that no agent moves more than R/2
  between samples (F = ceil(2 * max step distance / R)). Between two samples each agent
  is taken to move on the straight chord, and the pair's exact closest approach on
  those chords is tested, so a crossing between samples is not missed. The chords
  differ from the true street path only where an agent turns a corner inside a
  sub-interval of at most R/2 metres.

How ``during`` is searched (benchmarks/city_scale.py prints it beside the code it replaced,
kept verbatim as tests/contacts_oracle.py, which the tests compare against):
candidate pairs of a sub-interval come from a uniform grid over the chord midpoints
(:func:`_grid_candidates`: ranges of cell-sorted agents, no search tree; a cKDTree only for
few agents on a large map), are streamed in blocks of :data:`CHUNK` through the exact
closest-approach test (:func:`_exact_within`, the same floating-point operations as before,
so the same pairs pass, ties at exactly R included), and each pair is collected once per
stay in range (when it comes into range, ``entering``), as one int64 key; one sort
de-duplicates the keys, and the symmetric CSR is the sorted upper triangle plus its
transpose.
"""

from __future__ import annotations

import math
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from mobidfl.contact_table import ContactTable

DENSE_DEDUP_LIMIT = 20_000
"""Up to this many agents (a 400 MB bitmap) crowded steps de-duplicate with a dense bitmap."""
PAIR_BUDGET = 4_000_000
"""Candidate pairs the cKDTree fallback holds at once: above it a sub-interval is searched
block by block (the grid search streams blocks of :data:`CHUNK` anyway), so memory stays
bounded on crowded maps (benchmarks/city_scale.py --dense: nyc_uws with 10k agents)."""


SKIP_KNOWN = False
"""Crowded (bitmap) steps may skip the exact test for pairs already found this step (the same
contacts). Off: the bitmap look-up (random access to an N x N array) costs more than the
chunked exact test it saves (docs/performance/measurements.md)."""
CONTACT_THREADS = 1
"""Threads over sub-intervals for steps of at least :data:`THREADED_FROM` agents. Off by
default: no win on 2 shared cores (docs/performance/measurements.md)."""
THREADED_FROM = 20_000


def _ordered(pool: ThreadPoolExecutor, fn, items: range, *, ahead: int):
    """``map(fn, items)`` on ``pool`` in order, with at most ``ahead`` results pending."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def sub_samples(*, max_step_distance: float, radius_m: float) -> int:
    """Number of sub-intervals F so that nobody moves more than R/2 within one."""
    return max(1, math.ceil(2.0 * max_step_distance / radius_m))


def pairs_within(xy: np.ndarray, radius: float) -> np.ndarray:
    """Unique pairs (i < j) closer than ``radius``: cKDTree, ``[P, 2]`` int array."""
    if len(xy) < 2:
        return np.empty((0, 2), int)
    return cKDTree(xy).query_pairs(r=radius, output_type="ndarray")


CHUNK = 32_768
"""Candidate pairs tested at once: the exact test's ~10 temporaries stay in the L2 cache
(benchmarks/city_scale.py prints old vs new)."""
KEY_BUDGET = 32_000_000
"""Pair keys (8 bytes each, 256 MB) held before the repeats are compacted (sort + unique)."""
_TINY = np.finfo(float).tiny


def _exact_within(
    i: np.ndarray,
    j: np.ndarray,
    sx: np.ndarray,
    sy: np.ndarray,
    mx: np.ndarray,
    my: np.ndarray,
    radius2: float,
    inside2: float | None = None,
) -> np.ndarray:
    """Mask of the pairs ``(i, j)`` whose straight-line motions come within ``radius``.

    ``sx, sy`` are start coordinates, ``mx, my`` the motion (end - start), 1-D per agent.
    The same floating-point operations, in the same order, as the reference (the old
    ``_closest_within``, tests/contacts_oracle.py), so the same pairs pass: ``vv == 0``
    (no relative motion) divides by the smallest normal float instead of being masked,
    which gives ``t = 0`` as before. In place on a few temporaries: callers pass at most
    :data:`CHUNK` pairs, so they stay in cache. ``inside2``: also drop the pairs whose
    squared distance at the start is at most this (see :func:`_chord_hits`).
    """
    px = sx.take(i)
    px -= sx.take(j)  # relative position at the start
    py = sy.take(i)
    py -= sy.take(j)
    vx = mx.take(i)
    vx -= mx.take(j)  # relative motion over the sub-interval
    vy = my.take(i)
    vy -= my.take(j)
    vv = vx * vx
    vv += vy * vy
    np.maximum(vv, _TINY, out=vv)
    t = px * vx
    t += py * vy
    np.negative(t, out=t)
    t /= vv
    np.clip(t, 0.0, 1.0, out=t)
    vx *= t
    vx += px
    vy *= t
    vy += py
    vx *= vx
    vy *= vy
    vx += vy
    hit = vx <= radius2
    if inside2 is not None:
        px *= px
        py *= py
        px += py
        hit &= px > inside2
    return hit


def _candidate_blocks(mid: np.ndarray, reach: float, budget: int):
    """Pairs (i < j) of ``mid`` within ``reach``, in blocks of about ``budget`` pairs.

    One ``query_pairs`` when the estimated count fits the budget (sampled neighbour counts),
    else blocks of agents against the whole tree (``sparse_distance_matrix``), so a crowded
    map never holds all candidates at once.
    """
    tree = cKDTree(mid, leafsize=LEAF_SIZE, balanced_tree=False)
    n = len(mid)
    sample = mid[:: max(1, n // 512)]
    per_agent = float(np.mean(tree.query_ball_point(sample, reach, return_length=True)))
    if n * per_agent / 2 <= budget:
        yield tree.query_pairs(r=reach, output_type="ndarray")
        return
    block = max(1, int(budget / max(per_agent, 1.0)))
    for s in range(0, n, block):
        sub = cKDTree(mid[s : s + block])
        found = sub.sparse_distance_matrix(tree, reach, output_type="ndarray")
        i = found["i"].astype(np.int64) + s
        j = found["j"].astype(np.int64)
        keep = i < j
        yield np.stack([i[keep], j[keep]], axis=1)


LEAF_SIZE = 16
"""cKDTree leaf size for the candidate search (the fallback of :func:`_grid_candidates`)."""
GRIDS: tuple[tuple[int, int], ...] = ((3, 12), (3, 3), (1, 1))
"""Grid columns and rows per candidate reach (:func:`_grid_candidates`), finest first: the
first whose cell table fits :data:`CELLS_PER_AGENT` is used, else the cKDTree (empty: always
the cKDTree)."""
CELLS_PER_AGENT = 16
"""A grid may have up to this many cells per agent (fewer agents: a coarser grid, then the
cKDTree), and never more than :data:`CELL_LIMIT` (the sizes were chosen by measurement:
docs/performance/measurements.md)."""
CELL_LIMIT = 8_000_000
"""Largest candidate grid (64 MB of cell starts); sparser maps use the cKDTree."""


def _grid_candidates(mid: np.ndarray, reach: float, columns: int, rows: int, max_cells: int):
    """Every pair (i < j) of ``mid`` within ``reach`` and some farther ones, from a uniform grid.

    None when the grid would exceed ``max_cells`` cells.

    Cells ``reach / columns`` wide and ``reach / rows`` high; agents sorted by cell
    (column-major), so a run of cells in a column is one contiguous range of the sorted
    agents. Each agent pairs with the agents after it in its own column up to ``rows``
    cells up, and with a run of ``2 w + 1`` cells in each of the next ``columns`` columns,
    ``w`` keeping the cells whose nearest points are closer than ``reach``: ``columns + 1``
    ranges per agent and no search tree. (A point put one cell off by rounding lies within
    ~1e-13 cells of the border; callers widen ``reach`` by 1e-9, so no pair within the
    unwidened reach is lost.)

    Returns ``order`` (sorted position -> row of ``mid``) and a generator of ``(i, j)``
    blocks of about :data:`CHUNK` pairs in sorted positions.
    """
    n = len(mid)
    origin = mid.min(axis=0)
    extent = (mid.max(axis=0) - origin) * (columns / reach, rows / reach) if reach > 0 else None
    if extent is None or not np.isfinite(extent).all() or np.prod(extent + 3 * rows) > max_cells:
        return None  # no reach, or more cells than allowed (checked before any int cast)
    cx = (mid[:, 0] - origin[0]) * (columns / reach)  # >= 0: truncation is floor
    cy = (mid[:, 1] - origin[1]) * (rows / reach)
    cx, cy = cx.astype(np.int64), cy.astype(np.int64)
    nx, ny = int(cx.max()) + 1, int(cy.max()) + 1 + 2 * rows
    cells = (nx + columns) * ny
    if cells > max_cells:
        return None
    key = cx * ny
    key += cy
    key += rows  # empty cells below and above every column: a run never wraps
    order = np.argsort(key)
    key = key.take(order)
    first = np.zeros(cells + 1, np.int64)  # first[c]: sorted position of cell c's first agent
    np.cumsum(np.bincount(key, minlength=cells), out=first[1:])
    lo = np.empty((columns + 1, n), np.int64)  # ranges: column offset-major
    count = np.empty((columns + 1, n), np.int64)
    lo[0] = np.arange(1, n + 1)  # own column: the agents after this one ...
    first.take(key + (rows + 1), out=count[0])  # ... up to `rows` cells up
    for dx in range(1, columns + 1):
        # keep cell rows dy with gap_x^2 + gap_y^2 < reach^2, gaps in whole cells
        w = 0
        while w < rows and ((dx - 1) * rows) ** 2 + (w * columns) ** 2 < (rows * columns) ** 2:
            w += 1
        column = key + (dx * ny - w)
        first.take(column, out=lo[dx])
        column += 2 * w + 1
        first.take(column, out=count[dx])
    lo, count = lo.reshape(-1), count.reshape(-1)
    count -= lo
    np.maximum(count, 0, out=count)
    owner = np.arange(len(count))
    owner %= n
    ends = np.zeros(len(count) + 1, np.int64)
    np.cumsum(count, out=ends[1:])
    total = int(ends[-1])
    cuts = np.searchsorted(ends, np.arange(0, total, CHUNK), side="right") - 1
    cuts = np.unique(np.append(cuts, len(count)))

    def blocks():
        for r0, r1 in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
            c = count[r0:r1]
            i = np.repeat(owner[r0:r1], c)
            j = np.repeat(lo[r0:r1] - ends[r0:r1], c)
            j += np.arange(ends[r0], ends[r1])
            yield i, j

    return order, blocks()


def _chord_hits(
    start: np.ndarray,
    end: np.ndarray,
    radius: float,
    budget: int,
    skip=None,
    *,
    entering: bool = False,
):
    """Pairs whose straight-line motions from ``start`` to ``end`` come within ``radius``.

    They come as ``(i, j)`` blocks (rows of ``start``; i < j not guaranteed) of about :data:`CHUNK`.

    Candidates: pairs whose chord midpoints are within R + 2 * max half chord (a pair whose
    chords come within R has midpoints within R + h_i + h_j), widened by 1e-9 so rounding
    never drops one, from :func:`_grid_candidates` (or a cKDTree when the grid is too
    large); the exact closest approach decides. ``skip(i, j)``, if given, masks candidates
    not to test (pairs already found).

    ``entering``: leave out pairs already within R at ``start`` (squared distance at most
    R^2 less a margin), which the previous sub-interval, ending there, found: its chord's
    end point is the same pair distance to ~1e-10 m (rounding of the coordinates), far
    inside the margin of R^2 * 1e-9 + R * max|coordinate| * 1e-12. A pair in range over
    several sub-intervals is then collected once, when it comes into range (12.8M keys
    instead of 36.4M in a 100k-agent step), so the de-duplication sorts a third.
    """
    move = end - start
    longest = float(np.sqrt(np.max(np.einsum("ij,ij->i", move, move), initial=0.0)))
    reach = (radius + longest) * (1.0 + 1e-9)  # R + 2 * max half chord
    mid = (start + end) / 2.0
    radius2 = radius * radius
    inside2 = None
    if entering:
        scale = float(np.abs(start).max(initial=0.0))
        inside2 = radius2 - radius2 * 1e-9 - radius * scale * 1e-12
    grid, cap = None, min(CELL_LIMIT, CELLS_PER_AGENT * len(mid))
    for columns, rows in GRIDS:
        grid = _grid_candidates(mid, reach, columns, rows, cap)
        if grid is not None:
            break
    if grid is None:  # a cKDTree over the midpoints, candidates in blocks
        order, sx, sy = None, start[:, 0].copy(), start[:, 1].copy()
        mx, my = move[:, 0].copy(), move[:, 1].copy()
        blocks = (
            (np.ascontiguousarray(part[:, 0]), np.ascontiguousarray(part[:, 1]))
            for candidates in _candidate_blocks(mid, reach, budget)
            for part in (candidates[c : c + CHUNK] for c in range(0, len(candidates), CHUNK))
        )
    else:
        order, blocks = grid
        sx, sy = start[:, 0].take(order), start[:, 1].take(order)
        mx, my = move[:, 0].take(order), move[:, 1].take(order)
    for i, j in blocks:
        if order is not None:
            if skip is not None:
                new = np.flatnonzero(~skip(order.take(i), order.take(j)))
                i, j = i.take(new), j.take(new)
            keep = np.flatnonzero(_exact_within(i, j, sx, sy, mx, my, radius2, inside2))
            yield order.take(i.take(keep)), order.take(j.take(keep))
        else:
            if skip is not None:
                new = np.flatnonzero(~skip(i, j))
                i, j = i.take(new), j.take(new)
            keep = np.flatnonzero(_exact_within(i, j, sx, sy, mx, my, radius2, inside2))
            yield i.take(keep), j.take(keep)


def chord_pairs(
    start: np.ndarray, end: np.ndarray, radius: float, *, budget: int | None = None
) -> np.ndarray:
    """Pairs (i < j) whose straight-line motions come within ``radius``, ``[P, 2]``.

    The motions run from ``start`` to ``end``; the closest approach is exact, the candidates come
    from :func:`_chord_hits`. At most ``budget`` (default :data:`PAIR_BUDGET`) candidates are held
    at a time.
    """
    if len(start) < 2:
        return np.empty((0, 2), np.int64)
    budget = PAIR_BUDGET if budget is None else int(budget)
    found = [
        np.stack([np.minimum(i, j), np.maximum(i, j)], axis=1)
        for i, j in _chord_hits(start, end, radius, budget)
    ]
    return np.concatenate(found) if found else np.empty((0, 2), np.int64)


def contact_matrix(trajectory: np.ndarray, *, radius_m: float, mode: str) -> sp.csr_matrix:
    """Symmetric boolean N x N contacts of one step, no self loops.

    Parameters
    ----------
    trajectory
        ``[F + 1, N, 2]`` positions at the step start and at F sub-times.
    radius_m
        radio range R.
    mode
        ``"end"`` or ``"during"`` (module docstring).
    """
    n = trajectory.shape[1]
    if mode == "end":
        return symmetric_adjacency(pairs_within(trajectory[-1], radius_m), n)
    if mode != "during":
        raise ValueError(f"setting 'contact' = {mode!r} is not allowed: one of during, end")
    if n < 2:
        return symmetric_adjacency(np.empty((0, 2), np.int64), n)
    # Pairs are keyed lo << shift | hi: keys sort by (lo, hi) and decode with a shift and a
    # mask.
    shift = max(1, int(n - 1).bit_length())
    threaded = n >= THREADED_FROM and CONTACT_THREADS > 1 and trajectory.shape[0] > 2
    known: list[np.ndarray | None] = [None]  # the bitmap, once crowded (single-threaded)

    def skip(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return known[0][np.minimum(i, j), np.maximum(i, j)]

    def interval(f: int):
        check = skip if known[0] is not None else None
        pairs = _chord_hits(
            trajectory[f], trajectory[f + 1], radius_m, PAIR_BUDGET, check, entering=f > 0
        )
        for i, j in pairs:
            lo = np.minimum(i, j)
            lo <<= shift
            lo |= np.maximum(i, j)
            yield lo

    intervals = range(trajectory.shape[0] - 1)
    if threaded:
        # cKDTree traversals and numpy gathers release the GIL: sub-intervals in parallel,
        # consumed in order (same result); at most 2 * CONTACT_THREADS held at once.
        def whole(f: int) -> list[np.ndarray]:
            return list(interval(f))

        pool = ThreadPoolExecutor(CONTACT_THREADS)
        ahead = 2 * CONTACT_THREADS
        found = (keys for block in _ordered(pool, whole, intervals, ahead=ahead) for keys in block)
    else:
        pool, found = None, (keys for f in intervals for keys in interval(f))
    # Sub-intervals find the same pair again and again. Few pairs: the keys are collected
    # and de-duplicated by one sort at the end (compacted whenever more than KEY_BUDGET are
    # held, which bounds memory by the distinct pairs). Many (a crowded map, at most
    # DENSE_DEDUP_LIMIT agents): a dense bitmap removes them in O(pairs), where the sort
    # would take ~1e9 entries (benchmarks/mobility.py times both).
    mask = (1 << shift) - 1
    collected: list[np.ndarray] = []
    total, seen, limit = 0, None, KEY_BUDGET
    for keys in found:
        if seen is not None:
            seen[keys >> shift, keys & mask] = True
            continue
        collected.append(keys)
        total += len(keys)
        if n <= DENSE_DEDUP_LIMIT and total > n * n // 16:
            seen = np.zeros((n, n), bool)
            for earlier in collected:
                seen[earlier >> shift, earlier & mask] = True
            collected = []
            if SKIP_KNOWN and pool is None:  # later sub-intervals test only new candidates
                known[0] = seen
        elif total > limit and len(collected) > 1:
            collected = [_unique_keys(np.concatenate(collected))]
            total = len(collected[0])
            limit = max(KEY_BUDGET, 2 * total)  # amortised: each compaction halves
    if pool is not None:
        pool.shutdown()
    if seen is not None:
        return _symmetric_from_bitmap(seen)
    keys = np.concatenate(collected) if collected else np.empty(0, np.int64)
    collected.clear()  # memory: only one copy of the keys from here
    keys = _unique_keys(keys)
    index = np.int32 if max(n, 2 * len(keys)) < 2**31 else np.int64
    lo = (keys >> shift).astype(index)
    keys &= mask
    hi = keys.astype(index)
    del keys
    return _symmetric_from_sorted(lo, hi, n)


def _symmetric_from_bitmap(seen: np.ndarray) -> sp.csr_matrix:
    """CSR of ``seen | seen.T`` built block by block of rows.

    Never a list of all pairs (30M pairs on nyc_uws with 10k agents would take ~2 GB as int64 COO).
    """
    n = len(seen)
    full = seen | seen.T
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(full.sum(1), out=indptr[1:])
    indices = np.empty(int(indptr[-1]), np.int32 if indptr[-1] < 2**31 else np.int64)
    rows = max(1, 2**22 // max(n, 1))  # ~4M cells per block
    for s in range(0, n, rows):
        e = min(s + rows, n)
        indices[indptr[s] : indptr[e]] = np.flatnonzero(full[s:e]) % n  # row-major: sorted
    return sp.csr_matrix((np.ones(len(indices), bool), indices, indptr), shape=(n, n))


def _symmetric_from_sorted(i: np.ndarray, j: np.ndarray, n: int) -> sp.csr_matrix:
    """Like :func:`symmetric_adjacency` for distinct pairs (i < j) sorted by (i, j).

    The pairs are already the upper triangle in CSR order (row ``i``, sorted columns
    ``j``); scipy's O(nnz) transpose gives the lower one, sorted too, and the sum of the
    two canonical halves is canonical: no index sort.
    """
    index = np.int32 if max(n, 2 * len(i)) < 2**31 else np.int64
    indptr = np.zeros(n + 1, index)
    np.cumsum(np.bincount(i, minlength=n), out=indptr[1:])
    upper = sp.csr_matrix(
        (np.ones(len(j), bool), j.astype(index, copy=False), indptr), shape=(n, n)
    )  # fmt: skip
    return (upper + upper.T.tocsr()).tocsr()


def _unique_keys(keys: np.ndarray) -> np.ndarray:
    """Distinct int64 keys, sorted (in place on ``keys``).

    Sort + neighbour compare: ``np.unique`` (hash-based in numpy 2.5) was most of a
    100k-agent step, the sort a small part of it (docs/performance/measurements.md).
    """
    keys.sort()
    keep = np.empty(len(keys), bool)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def symmetric_adjacency(pairs: np.ndarray, n: int) -> sp.csr_matrix:
    """Symmetric ``[n, n]`` bool CSR adjacency of ``pairs`` (both directions, duplicates merged)."""
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    adj = sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = True
    return adj


def brute_force_contacts(xy: np.ndarray, radius_m: float) -> sp.csr_matrix:
    """The N x N reference (tests and benchmarks only)."""
    d = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
    mask = (d <= radius_m) & ~np.eye(len(xy), dtype=bool)
    return sp.csr_matrix(mask)


def _relative_chords(
    start: np.ndarray, end: np.ndarray, pairs: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each pair's relative motion over the chord and the coefficients of its range test.

    The motion is ``rel(t) = rel0 + t relv``; the coefficients are those of ``|rel(t)|^2 - R^2 = a
    t^2 + 2 b t + c``.
    """
    i, j = pairs[:, 0], pairs[:, 1]
    rel0 = start[i] - start[j]
    relv = (end[i] - end[j]) - rel0
    a = np.einsum("ij,ij->i", relv, relv)
    b = np.einsum("ij,ij->i", rel0, relv)
    c = np.einsum("ij,ij->i", rel0, rel0) - radius * radius
    return rel0, relv, a, b, c


def chord_entry_times(
    start: np.ndarray, end: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of :func:`chord_pairs` and the fraction of the chord where they come within range.

    ``t`` in [0, 1] is where they first come within ``radius`` (0 when already in range at
    ``start``).

    The entry time is the smaller root of ``|rel0 + t relv|^2 = R^2`` on the pair's relative
    straight-line motion; where rounding leaves no root, the closest approach is used.
    """
    pairs = chord_pairs(start, end, radius)
    if not len(pairs):
        return pairs, np.empty(0)
    rel0, relv, a, b, c = _relative_chords(start, end, pairs, radius)
    safe_a = np.maximum(a, 1e-300)
    closest = np.where(a > 0, -b / safe_a, 0.0)
    disc = b * b - a * c
    root = np.where(disc >= 0, (-b - np.sqrt(np.maximum(disc, 0.0))) / safe_a, closest)
    t = np.where(c <= 0, 0.0, np.where(a > 0, root, 0.0))
    return pairs, np.clip(t, 0.0, 1.0)


def contact_times(
    trajectory: np.ndarray, *, radius_m: float, mode: str = "during"
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs in contact this step and the time of their first contact inside the step.

    Cached-DFL (Wang et al., AAAI 2025): the authors' code advances cars in 1 s sub-steps
    and exchanges caches as pairs meet, once per pair and epoch, so relay chains and cache
    ages depend on the order of encounters. This gives that order.

    Parameters
    ----------
    trajectory
        ``[F + 1, N, 2]`` positions at the step start and at F sub-times (as
        for :func:`contact_matrix`, whose pairs these are).
    radius_m
        radio range R.
    mode
        ``"during"``: first moment within R, from the chords of
        :func:`chord_entry_times`; ``"end"``: every pair at 1.0 (no time is known).

    Returns
    -------
    tuple[np.ndarray, np.ndarray]
        ``pairs`` ``[P, 2]`` (i < j, sorted by (i, j)) and ``times`` ``[P]``: fraction of
        the step in [0, 1] at which each pair first came within R.
    """
    n = trajectory.shape[1]
    if mode == "end":
        pairs = pairs_within(trajectory[-1], radius_m)
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))] if len(pairs) else pairs
        return pairs.reshape(-1, 2).astype(np.int64), np.ones(len(pairs))
    if mode != "during":
        raise ValueError(f"setting 'contact' = {mode!r} is not allowed: one of during, end")
    count = trajectory.shape[0] - 1
    keys: list[np.ndarray] = []
    times: list[np.ndarray] = []
    for f in range(count):
        pairs, t = chord_entry_times(trajectory[f], trajectory[f + 1], radius_m)
        if len(pairs):
            lo, hi = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
            keys.append(lo.astype(np.int64) * n + hi)
            times.append((f + t) / count)
    if not keys:
        return np.empty((0, 2), np.int64), np.empty(0)
    key, time = np.concatenate(keys), np.concatenate(times)
    order = np.lexsort((time, key))  # by pair, earliest first
    key, time = key[order], time[order]
    first = np.ones(key.size, bool)
    first[1:] = key[1:] != key[:-1]
    key, time = key[first], time[first]
    return np.stack([key // n, key % n], axis=1), time


# --- contact intervals (contacts carry bytes) ----------------------------------------
def chord_intervals(
    start: np.ndarray, end: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of :func:`chord_pairs` and the part of the chord they spend within ``radius``.

    On a pair's relative straight-line motion ``rel(t) = rel0 + t relv`` (t in [0, 1]) the
    squared distance is a parabola, so the pair is in range between the two roots of
    ``|rel(t)|^2 = R^2`` (clipped to [0, 1]): one interval per chord. Where rounding leaves
    no root (a graze at exactly R) the interval is the closest approach alone.

    Returns
    -------
    tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
        ``pairs`` ``[P, 2]`` (i < j), ``t_in``, ``t_out`` (fractions of the chord),
        ``d2_min`` (squared closest distance on the chord), ``rel0`` ``[P, 2]`` and ``relv``
        ``[P, 2]`` (relative position at the chord's start and motion over it, metres).
    """
    pairs = chord_pairs(start, end, radius)
    rel0, relv, a, b, c = _relative_chords(start, end, pairs, radius)
    moving = a > 0
    safe_a = np.where(moving, a, 1.0)
    closest = np.clip(np.where(moving, -b / safe_a, 0.0), 0.0, 1.0)
    disc = b * b - a * c
    root = np.sqrt(np.maximum(disc, 0.0))
    real = moving & (disc >= 0)
    t_in = np.where(c <= 0, 0.0, np.where(real, (-b - root) / safe_a, closest))
    t_out = np.where(real, (-b + root) / safe_a, np.where(moving, closest, 1.0))
    t_in, t_out = np.clip(t_in, 0.0, 1.0), np.clip(t_out, 0.0, 1.0)
    t_out = np.maximum(t_out, t_in)
    near = rel0 + closest[:, None] * relv
    d2_min = np.einsum("ij,ij->i", near, near)
    return pairs, t_in, t_out, d2_min, rel0, relv


def contact_intervals(
    trajectory: np.ndarray, *, radius_m: float, step_s: float
) -> ContactTable:
    """The contact table of one step: when each pair enters and leaves range.

    The same continuous-time test as ``contact = "during"`` (:func:`contact_matrix`: exact
    closest approach on the straight chords between the F + 1 sampled positions), now
    solved for the crossing times of R on every chord (:func:`chord_intervals`). Pieces of
    consecutive chords that touch (a pair still in range at a sample time) are merged into
    one stay; a pair that leaves and comes back gives two rows. Vectorised: one sort and
    ``reduceat`` over all pieces, no per-pair Python.

    Parameters
    ----------
    trajectory
        ``[F + 1, N, 2]`` positions (as for :func:`contact_matrix`).
    radius_m
        radio range R.
    step_s
        the step's length in seconds (times are returned in seconds).
    """
    n = trajectory.shape[1]
    count = trajectory.shape[0] - 1
    parts: list[tuple[np.ndarray, ...]] = []
    for f in range(count):
        pairs, t0, t1, d2, rel0, relv = chord_intervals(
            trajectory[f], trajectory[f + 1], radius_m
        )
        if len(pairs):
            key = pairs[:, 0].astype(np.int64) * n + pairs[:, 1]
            parts.append((key, (f + t0) / count * step_s, (f + t1) / count * step_s,
                          t0, t1, d2, rel0, relv))
    if not parts:
        empty, e2 = np.empty(0), np.empty((0, 2))
        ints = np.empty(0, np.int64)
        return ContactTable(
            a=ints, b=ints, t_start=empty, t_end=empty, d_min=empty, piece_row=ints,
            piece_start=empty, piece_end=empty, piece_t0=empty, piece_t1=empty,
            piece_rel0=e2, piece_relv=e2,
        )
    key, start, end, t0, t1, d2, rel0, relv = (
        np.concatenate([p[k] for p in parts]) for k in range(8)
    )
    order = np.lexsort((start, key))
    key, start, end, t0, t1, d2 = (v[order] for v in (key, start, end, t0, t1, d2))
    rel0, relv = rel0[order], relv[order]
    # A new stay where the pair changes or the piece starts after the previous one ended
    # (pieces of one pair never overlap; touching pieces share a sample time exactly).
    gap = 1e-9 * max(step_s, 1.0)
    new = np.ones(len(key), bool)
    new[1:] = (key[1:] != key[:-1]) | (start[1:] > end[:-1] + gap)
    first = np.flatnonzero(new)
    row = np.cumsum(new) - 1
    pair = key[first]
    return ContactTable(
        a=pair // n, b=pair % n,
        t_start=start[first], t_end=np.maximum.reduceat(end, first),
        d_min=np.sqrt(np.minimum.reduceat(d2, first)),
        piece_row=row, piece_start=start, piece_end=end, piece_t0=t0, piece_t1=t1,
        piece_rel0=rel0, piece_relv=relv,
    )


def one_connection_events(frame, *, step_s: float):
    """The contact table as The ONE's connection events (``StandardEventsReader``), one row each.

    ``TIME CONN A B up`` and ``TIME CONN A B down``, times in seconds since the run's start (step
    ``s`` starts at ``(s - 1) * step_s``), sorted by time; one pair's events alternate up, down, up,
    ... even at equal times (a zero-length stay, a stay that ends as the next begins at a step
    boundary), so The ONE replays them in order. ``frame`` has the columns of
    :data:`CONTACT_COLUMNS`; write the result with ``to_csv(sep=" ", header=False, index=False)``.
    """
    import pandas as pd

    step = frame["step"].to_numpy(np.int64)
    offset = (step - 1) * float(step_s)
    a, b = frame["a"].to_numpy(np.int64), frame["b"].to_numpy(np.int64)
    start = frame["t_start"].to_numpy(float)
    times = np.concatenate([offset + start, offset + frame["t_end"].to_numpy(float)])
    # each pair's stays in time order: stay k's up is event 2k, its down 2k + 1
    by_pair = np.lexsort((start, step, b, a))
    rank = np.empty(len(a), np.int64)
    pair_start = np.ones(len(a), bool)
    pair_start[1:] = (a[by_pair][1:] != a[by_pair][:-1]) | (b[by_pair][1:] != b[by_pair][:-1])
    first = np.maximum.accumulate(np.where(pair_start, np.arange(len(a)), 0))
    rank[by_pair] = np.arange(len(a)) - first
    sequence = np.concatenate([2 * rank, 2 * rank + 1])
    up = np.concatenate([np.ones(len(a), bool), np.zeros(len(a), bool)])
    aa, bb = np.concatenate([a, a]), np.concatenate([b, b])
    order = np.lexsort((sequence, bb, aa, times))
    return pd.DataFrame(
        {
            "time": times[order], "event": "CONN", "a": aa[order], "b": bb[order],
            "state": np.where(up[order], "up", "down"),
        }
    )



def contact_outputs(value: str, *, link_ideal: bool) -> tuple[str, ...]:
    """The contact files a run writes for ``contacts_out = value``.

    ``auto`` = csv and one when a link model is set (what link runs always wrote), none under
    ``ideal``; ``none``; or a comma list of :data:`mobidfl.model.config.CONTACT_OUTPUTS` (csv,
    parquet, one).
    """
    value = value.strip()
    if value == "auto":
        return () if link_ideal else ("csv", "one")
    if value == "none":
        return ()
    return tuple(dict.fromkeys(v.strip() for v in value.split(",")))
