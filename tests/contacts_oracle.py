"""The contact detection of model/contacts.py before the issue-15 item-3 rewrite, verbatim.

Kept as the reference oracle: tests/model/test_contacts.py checks that the new code finds exactly
the same contact set on random trajectories and edge cases, and benchmarks/city_scale.py
times it side by side with the new code (``--old``). Not used by the simulator.
"""

from __future__ import annotations

import math
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

DENSE_DEDUP_LIMIT = 20_000
"""Up to this many agents (a 400 MB bitmap) crowded steps de-duplicate with a dense bitmap."""
PAIR_BUDGET = 4_000_000
"""Candidate pairs held at once (~0.3 GB of temporaries): above it a sub-interval is searched
block by block and the sparse path compacts its repeats, so memory stays bounded on crowded
maps (benchmarks/city_scale.py: nyc_uws with 10k agents)."""


SKIP_KNOWN = True
"""Crowded (bitmap) steps skip the exact test for pairs already found this step: the same
contacts, less work on dense maps (benchmarks/city_scale.py --dense prints both)."""
CONTACT_THREADS = 1
"""Threads over sub-intervals for steps of at least :data:`THREADED_FROM` agents. Off by
default: at 100k agents 2 threads measured 0.80x at load 5 (benchmarks/city_scale.py
--threads), 1.5-1.7x on a synthetic 100k step at load 14: no consistent win on 2 cores."""
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


def _closest_within(
    candidates: np.ndarray, start: np.ndarray, move: np.ndarray, radius: float
) -> np.ndarray:
    """The candidate pairs whose straight-line motions come within ``radius`` (exact).

    ``start`` and ``move`` (= end - start) are ``[2, N]`` (x row, y row): 1-D gathers per
    coordinate and squared distances instead of row gathers + ``einsum`` + ``hypot``
    (2.2-2.6x in a one-off side-by-side profile at 2M candidates, same pairs).
    """
    i = np.ascontiguousarray(candidates[:, 0])
    j = np.ascontiguousarray(candidates[:, 1])
    px = start[0].take(i) - start[0].take(j)  # relative position at the start
    py = start[1].take(i) - start[1].take(j)
    vx = move[0].take(i) - move[0].take(j)  # relative motion over the sub-interval
    vy = move[1].take(i) - move[1].take(j)
    vv = vx * vx + vy * vy
    t = px * vx
    t += py * vy
    np.negative(t, out=t)
    np.divide(t, vv, out=t, where=vv > 0)
    t[vv <= 0] = 0.0
    np.clip(t, 0.0, 1.0, out=t)
    vx *= t
    vx += px
    vy *= t
    vy += py
    vx *= vx
    vy *= vy
    vx += vy
    return candidates[vx <= radius * radius]


def _candidate_blocks(mid: np.ndarray, reach: float, budget: int):
    """Pairs (i < j) of ``mid`` within ``reach``, in blocks of about ``budget`` pairs.

    One ``query_pairs`` when the estimated count fits the budget (sampled neighbour counts),
    else blocks of agents against the whole tree (``sparse_distance_matrix``), so a crowded
    map never holds all candidates at once.
    """
    tree = cKDTree(mid)
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


def chord_pairs(
    start: np.ndarray,
    end: np.ndarray,
    radius: float,
    *,
    budget: int | None = None,
    known: np.ndarray | None = None,
) -> np.ndarray:
    """Pairs whose straight-line motions from ``start`` to ``end`` come within ``radius``.

    Candidates come from a cKDTree over chord midpoints with radius R + 2 * max half
    chord; the exact closest approach of the relative linear motion decides. At most
    ``budget`` (default :data:`PAIR_BUDGET`) candidates are tested at a time. ``known``:
    an N x N bitmap of pairs already found this step; they are not tested (nor returned).
    """
    if len(start) < 2:
        return np.empty((0, 2), int)
    budget = PAIR_BUDGET if budget is None else int(budget)
    move = end - start
    half = np.hypot(*move.T) / 2.0
    reach = radius + 2.0 * float(half.max())
    start_t, move_t = np.ascontiguousarray(start.T), np.ascontiguousarray(move.T)
    found = []
    for candidates in _candidate_blocks((start + end) / 2.0, reach, budget):
        for c in range(0, len(candidates), budget):
            block = candidates[c : c + budget]
            if known is not None:
                block = block[~known[block[:, 0], block[:, 1]]]
            found.append(_closest_within(block, start_t, move_t, radius))
    if not found:
        return np.empty((0, 2), int)
    return found[0] if len(found) == 1 else np.concatenate(found)


def contact_matrix(trajectory: np.ndarray, *, radius_m: float, mode: str) -> sp.csr_matrix:
    """Symmetric boolean N x N contacts of one step, no self loops.

    Args:
        trajectory: ``[F + 1, N, 2]`` positions at the step start and at F sub-times.
        radius_m: radio range R.
        mode: ``"end"`` or ``"during"`` (module docstring).
    """
    n = trajectory.shape[1]
    if mode == "end":
        return symmetric_adjacency(pairs_within(trajectory[-1], radius_m), n)
    if mode != "during":
        raise ValueError(f"setting 'contact' = {mode!r} is not allowed: one of during, end")
    intervals = range(trajectory.shape[0] - 1)

    known: list[np.ndarray | None] = [None]  # the bitmap, once crowded (single-threaded)

    def interval(f: int) -> np.ndarray:
        return chord_pairs(trajectory[f], trajectory[f + 1], radius_m, known=known[0])

    if n >= THREADED_FROM and CONTACT_THREADS > 1 and len(intervals) > 1:
        # cKDTree traversals and numpy gathers release the GIL: sub-intervals in parallel,
        # consumed in order (same result); at most 2 * CONTACT_THREADS held at once.
        pool = ThreadPoolExecutor(CONTACT_THREADS)
        found = _ordered(pool, interval, intervals, ahead=2 * CONTACT_THREADS)
    else:
        pool, found = None, map(interval, intervals)
    # Sub-intervals find the same pair again and again. Few pairs: a sparse matrix sums the
    # repeats cheaply. Many (a crowded map): a dense bitmap removes them in O(pairs), where
    # the sparse path would sort ~1e9 entries (benchmarks/mobility.py: 120 s -> 40 s a step).
    # Above DENSE_DEDUP_LIMIT agents the repeats are compacted (unique pair keys) whenever
    # more than PAIR_BUDGET are held, which bounds memory by the distinct pairs.
    collected: list[np.ndarray] = []
    total, seen, limit = 0, None, PAIR_BUDGET
    for pairs in found:
        if seen is not None:
            seen[pairs[:, 0], pairs[:, 1]] = True
            continue
        collected.append(pairs)
        total += len(pairs)
        if n <= DENSE_DEDUP_LIMIT and total > n * n // 16:
            seen = np.zeros((n, n), bool)
            for earlier in collected:
                seen[earlier[:, 0], earlier[:, 1]] = True
            collected = []
            if SKIP_KNOWN and pool is None:  # later sub-intervals test only new candidates
                known[0] = seen
        elif total > limit and len(collected) > 1:
            collected = [_unique_pairs(np.concatenate(collected), n)]
            total = len(collected[0])
            limit = max(PAIR_BUDGET, 2 * total)  # amortised: each compaction halves
    if pool is not None:
        pool.shutdown()
    if seen is not None:
        return _symmetric_from_bitmap(seen)
    if not collected:
        return symmetric_adjacency(np.empty((0, 2), int), n)
    return _symmetric_from_sorted(_unique_pairs(np.concatenate(collected), n), n)


def _symmetric_from_bitmap(seen: np.ndarray) -> sp.csr_matrix:
    """CSR of ``seen | seen.T`` built block by block of rows: never a list of all pairs
    (30M pairs on nyc_uws with 10k agents would take ~2 GB as int64 COO)."""
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


def _symmetric_from_sorted(pairs: np.ndarray, n: int) -> sp.csr_matrix:
    """Like :func:`symmetric_adjacency` for distinct (i < j) pairs sorted by (i, j).

    The transposed entries go first, so every CSR row comes out with sorted, distinct
    columns (canonical): scipy's O(nnz) COO -> CSR then skips its index sort
    (2 s of a 100k-agent step)."""
    rows = np.concatenate([pairs[:, 1], pairs[:, 0]])
    cols = np.concatenate([pairs[:, 0], pairs[:, 1]])
    adj = sp.coo_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(n, n)).tocsr()
    adj.sum_duplicates()  # a no-op check when canonical
    return adj


def _unique_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    """Distinct (i, j) rows, via one sorted int64 key per pair.

    Sort + neighbour compare: in a profile of a synthetic 100k-agent step ``np.unique``
    (hash-based in numpy 2.5) took 25 s of 46, the sort-based version 1.4 s.
    """
    keys = pairs[:, 0].astype(np.int64) * n + pairs[:, 1]
    keys.sort()
    keep = np.empty(len(keys), bool)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    keys = keys[keep]
    return np.stack([keys // n, keys % n], axis=1)


def symmetric_adjacency(pairs: np.ndarray, n: int) -> sp.csr_matrix:
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


def chord_entry_times(
    start: np.ndarray, end: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of :func:`chord_pairs` and the fraction ``t`` in [0, 1] of the chord where they
    first come within ``radius`` (0 when already in range at ``start``).

    The entry time is the smaller root of ``|rel0 + t relv|^2 = R^2`` on the pair's relative
    straight-line motion; where rounding leaves no root, the closest approach is used.
    """
    pairs = chord_pairs(start, end, radius)
    if not len(pairs):
        return pairs, np.empty(0)
    i, j = pairs[:, 0], pairs[:, 1]
    rel0 = start[i] - start[j]
    relv = (end[i] - end[j]) - rel0
    a = np.einsum("ij,ij->i", relv, relv)
    b = np.einsum("ij,ij->i", rel0, relv)
    c = np.einsum("ij,ij->i", rel0, rel0) - radius * radius
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

    Args:
        trajectory: ``[F + 1, N, 2]`` positions at the step start and at F sub-times (as
            for :func:`contact_matrix`, whose pairs these are).
        radius_m: radio range R.
        mode: ``"during"``: first moment within R, from the chords of
            :func:`chord_entry_times`; ``"end"``: every pair at 1.0 (no time is known).

    Returns:
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
