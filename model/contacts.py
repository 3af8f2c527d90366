"""Who was in radio range of whom during a step, with a spatial index (never N x N).

Two rules (setting ``contact``):

* ``end``: pairs within R at the end of the step (one ``cKDTree.query_pairs``).
* ``during``: pairs within R at *any moment* of the step (seed 000, §5.1, M_i(t_k)).
  Motion is sampled at F sub-times, F chosen so that no agent moves more than R/2
  between samples (F = ceil(2 * max step distance / R)). Between two samples each agent
  is taken to move on the straight chord, and the pair's exact closest approach on
  those chords is tested, so a crossing between samples is not missed. The chords
  differ from the true street path only where an agent turns a corner inside a
  sub-interval of at most R/2 metres.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

DENSE_DEDUP_LIMIT = 20_000
"""Up to this many agents (a 400 MB bitmap) crowded steps de-duplicate with a dense bitmap."""


def sub_samples(*, max_step_distance: float, radius_m: float) -> int:
    """Number of sub-intervals F so that nobody moves more than R/2 within one."""
    return max(1, math.ceil(2.0 * max_step_distance / radius_m))


def pairs_within(xy: np.ndarray, radius: float) -> np.ndarray:
    """Unique pairs (i < j) closer than ``radius``: cKDTree, ``[P, 2]`` int array."""
    if len(xy) < 2:
        return np.empty((0, 2), int)
    return cKDTree(xy).query_pairs(r=radius, output_type="ndarray")


def chord_pairs(start: np.ndarray, end: np.ndarray, radius: float) -> np.ndarray:
    """Pairs whose straight-line motions from ``start`` to ``end`` come within ``radius``.

    Candidates come from a cKDTree over chord midpoints with radius R + 2 * max half
    chord; the exact closest approach of the relative linear motion decides.
    """
    if len(start) < 2:
        return np.empty((0, 2), int)
    half = np.hypot(*(end - start).T) / 2.0
    reach = radius + 2.0 * float(half.max())
    candidates = pairs_within((start + end) / 2.0, reach)
    if not len(candidates):
        return candidates
    i, j = candidates[:, 0], candidates[:, 1]
    rel0 = start[i] - start[j]
    relv = (end[i] - end[j]) - rel0
    denom = np.einsum("ij,ij->i", relv, relv)
    t = np.where(denom > 0, -np.einsum("ij,ij->i", rel0, relv) / np.maximum(denom, 1e-300), 0.0)
    t = np.clip(t, 0.0, 1.0)[:, None]
    closest = np.hypot(*(rel0 + t * relv).T)
    return candidates[closest <= radius]


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
    found = (
        chord_pairs(trajectory[f], trajectory[f + 1], radius_m)
        for f in range(trajectory.shape[0] - 1)
    )
    # Sub-intervals find the same pair again and again. Few pairs: a sparse matrix sums the
    # repeats cheaply. Many (a crowded map): a dense bitmap removes them in O(pairs), where
    # the sparse path would sort ~1e9 entries (benchmarks/mobility.py: 120 s -> 40 s a step).
    collected: list[np.ndarray] = []
    total, seen = 0, None
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
    if seen is not None:
        return symmetric_adjacency(np.argwhere(seen), n)
    return symmetric_adjacency(np.concatenate(collected) if collected else np.empty((0, 2), int), n)


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
