"""Model caches of Cached-DFL.

Wang et al., "Decentralized Federated Learning with Model Caching on Mobile Agents".

Every agent keeps, besides its own model, a small cache of models of other agents it met
(directly or through another agent's cache). A cache here is a mapping ``origin -> CacheEntry``;
all functions are pure: they return new dicts and never mutate their inputs. Payloads (the
parameter snapshots) are opaque, shared and never copied, so a cache update costs only a few
dict operations whatever the model size.

Time is counted in global epochs (the paper's ``t``); an entry's ``timestamp`` is the epoch in
which its origin produced the model (the paper: "the epoch time when the model was received from
the original vehicle, rather than received from the cache").

Notes for the simulation loop (Alg. 1): call :func:`evict_stale` on every cache once per epoch
before aggregating (Alg. 1 line 17 runs CACHEUPDATE even without an encounter), call
:func:`exchange_pair` once per encounter, and aggregate with :func:`aggregation_weights`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "Cache",
    "CacheEntry",
    "aggregation_weights",
    "cache_stats",
    "evict_stale",
    "exchange_pair",
    "group_lru_update",
    "lru_update",
]


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One cached model: who trained it, when, on how many samples, and its area group.

    Attributes
    ----------
    origin
        id of the agent that trained the model (the paper's ``k`` in ``x_k(tau)``).
    timestamp
        epoch in which the origin produced it (the paper's ``tau``).
    size
        the origin's sample count ``n_k``, used by the aggregation weights.
    group
        the origin's distribution/area group (group-based LRU); 0 when unused.
    payload
        opaque reference to an immutable parameter snapshot; never copied or compared.
    """

    origin: int
    timestamp: int
    size: int
    group: int = 0
    payload: Any = field(default=None, compare=False, repr=False)


Cache = Mapping[int, CacheEntry]
"""A cache: origin id -> entry (the owner's own model is never in it)."""

GroupVariant = Literal["partition", "most_over"]


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------
def _check_tau_max(tau_max: int) -> None:
    if isinstance(tau_max, bool) or not isinstance(tau_max, (int, np.integer)):
        raise TypeError(f"tau_max = {tau_max!r}: expected an integer")
    if tau_max < 1:
        raise ValueError(f"tau_max = {tau_max!r}: expected >= 1 (epochs of staleness tolerated)")


def _check_cache_size(cache_size: int | None) -> None:
    if cache_size is None:
        return
    if isinstance(cache_size, bool) or not isinstance(cache_size, (int, np.integer)):
        raise TypeError(f"cache_size = {cache_size!r}: expected an integer, or None for unlimited")
    if cache_size < 0:
        raise ValueError(f"cache_size = {cache_size!r}: expected >= 0, or None for unlimited")


def _check_group_limits(group_limits: Sequence[int]) -> None:
    if len(group_limits) == 0 or any(
        isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0 for g in group_limits
    ):
        raise ValueError(
            f"group_limits = {list(group_limits)[:8]}: expected a non-empty sequence of "
            "integers >= 0"
        )


def _recency_key(entry: CacheEntry) -> int:
    """Sort key: newest first (Alg. 2 line 17); Python's stable sort keeps ties in arrival order.

    Ties are common: in a dense network most cached models carry the current epoch. Breaking
    them by origin id would always keep the lowest ids (measured: agents 11-29 of 30 were
    cached by nobody); arrival order is what the authors' code does and has no id bias.
    Arrival order is deterministic: the cache's insertion order, then the peer's model, then
    the peer's cache.
    """
    return -int(entry.timestamp)


def _is_stale(entry: CacheEntry, now: int, tau_max: int) -> bool:
    """Cached-DFL, Alg. 2 line 2: a model is stale when ``t - tau >= tau_max``."""
    return now - entry.timestamp >= tau_max


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def evict_stale(cache: Cache, *, now: int, tau_max: int) -> dict[int, CacheEntry]:
    """Drop entries whose staleness ``now - timestamp`` is ``>= tau_max``.

    Cached-DFL, Alg. 2 lines 1-5 (and Remark 3: the kick-out threshold bounds staleness, which the
    convergence bound of Theorem 1 needs: ``tau < tau_max``).

    Parameters
    ----------
    cache
        origin -> entry.
    now
        current epoch ``t``.
    tau_max
        staleness tolerance in epochs (>= 1).

    Returns
    -------
    dict[int, CacheEntry]
        A new dict with only the fresh entries.
    """
    _check_tau_max(tau_max)
    return {o: e for o, e in cache.items() if not _is_stale(e, now, tau_max)}


def _merge(
    own_cache: Cache,
    *,
    owner: int,
    peer_entry: CacheEntry,
    peer_cache: Cache,
    now: int,
    tau_max: int,
) -> dict[int, CacheEntry]:
    """Cached-DFL, Alg. 2 lines 1-16: evict stale, add the peer's model, merge the peer's cache.

    The owner's own model is never stored (it enters aggregation separately); a copy of it held
    in the peer's cache is skipped.
    """
    if peer_entry.origin == owner:
        raise ValueError(
            f"peer_entry.origin = {peer_entry.origin}: expected an agent other than the owner "
            f"{owner}"
        )
    # Lines 1-5: remove stale models from both caches (our copies; inputs stay untouched).
    merged = evict_stale(own_cache, now=now, tau_max=tau_max)
    merged.pop(owner, None)
    peer_fresh = evict_stale(peer_cache, now=now, tau_max=tau_max)
    # Line 6: add or replace x_j(t). In the paper the peer's own model is its newest version, so
    # "replace" and "keep the newer" coincide; we keep the newer so that a caller passing an old
    # snapshot can never downgrade the cache, and apply the line-2 staleness test to it too.
    if not _is_stale(peer_entry, now, tau_max):
        current = merged.get(peer_entry.origin)
        if current is None or peer_entry.timestamp >= current.timestamp:
            merged[peer_entry.origin] = peer_entry
    # Lines 7-16: for each x_k(tau) in C_j: add if absent, else replace iff tau > tau'.
    for origin, entry in peer_fresh.items():
        if origin == owner:
            continue
        current = merged.get(origin)
        if current is None or entry.timestamp > current.timestamp:
            merged[origin] = entry
    return merged


def _keep_newest(entries: Iterable[CacheEntry], limit: int | None) -> list[CacheEntry]:
    """Cached-DFL, Alg. 2 lines 17-18: sort by timestamp descending, keep the first ``limit``."""
    ordered = sorted(entries, key=_recency_key)
    return ordered if limit is None else ordered[:limit]


# Keywords as _merge (which it calls with them): the public entry names every bound it reads.
def lru_update(
    own_cache: Cache,
    *,
    owner: int,
    peer_entry: CacheEntry,
    peer_cache: Cache,
    now: int,
    tau_max: int,
    cache_size: int | None,
) -> dict[int, CacheEntry]:
    """LRU cache update of agent ``owner`` after meeting the agent that sent ``peer_entry``.

    Cached-DFL, Alg. 2, line by line: lines 1-5 evict models with ``t - tau >= tau_max`` from both
    caches; line 6 adds or replaces the peer's own model; lines 7-16 merge the peer's cache,
    keeping the copy with the larger timestamp per origin; lines 17-18 sort by timestamp
    (descending) and keep the first ``cache_size``. Ties in line 17 keep arrival order (own cache
    first, then the peer's model, then the peer's cache). The owner's own model is never cached.

    Parameters
    ----------
    own_cache
        the owner's cache before the encounter.
    owner
        id of the agent whose cache is updated.
    peer_entry
        the peer's own current model ``x_j(t)``.
    peer_cache
        the peer's cache ``C_j(t)`` as it was when they met.
    now
        current epoch ``t``.
    tau_max
        staleness tolerance (>= 1).
    cache_size
        ``C_max`` (>= 0), or None for an unlimited cache (Table 2).

    Returns
    -------
    dict[int, CacheEntry]
        The new cache ``C_i(t+1)``, ordered newest first.
    """
    _check_tau_max(tau_max)
    _check_cache_size(cache_size)
    merged = _merge(
        own_cache, owner=owner, peer_entry=peer_entry, peer_cache=peer_cache, now=now,
        tau_max=tau_max,
    )
    return {e.origin: e for e in _keep_newest(merged.values(), cache_size)}


def group_lru_update(
    own_cache: Cache,
    *,
    owner: int,
    peer_entry: CacheEntry,
    peer_cache: Cache,
    now: int,
    tau_max: int,
    group_limits: Sequence[int],
    variant: GroupVariant = "partition",
) -> dict[int, CacheEntry]:
    """Group-based (GB) LRU update: balanced presence of models from the ``m`` groups.

    Cached-DFL, "Grouped Mobility Patterns and Data Distributions": "partition the cache into m
    sub-caches, one for each group. Each sub-cache is updated by local models from its associated
    group, using the LRU policy" and "we evenly divide the cache for the three areas".

    Two readings are offered; the default follows the paper text:

    * ``"partition"`` (paper text, default): lines 1-16 of Alg. 2 as in :func:`lru_update`, then
      lines 17-18 inside each group ``g`` with its own ``C_max = group_limits[g]``. A group never
      holds more than its limit, even when other sub-caches have free room.
    * ``"most_over"`` (the authors' code as summarised in notes/stack.md): after the same merge,
      while the cache holds more than ``sum(group_limits)`` models, evict the oldest model of the
      group most over its limit (largest ``count - limit``; ties: smaller group id; oldest ties:
      latest arrival). A group may then borrow room another group leaves unused.

    Parameters
    ----------
    own_cache, owner, peer_entry, peer_cache, now, tau_max
        as in :func:`lru_update`.
    group_limits
        per-group cache sizes; an entry's ``group`` indexes it.
    variant
        ``"partition"`` or ``"most_over"``.

    Returns
    -------
    dict[int, CacheEntry]
        The new cache, ordered newest first.
    """
    _check_tau_max(tau_max)
    _check_group_limits(group_limits)
    if variant not in ("partition", "most_over"):
        raise ValueError(f"variant = {variant!r}: expected 'partition' or 'most_over'")
    merged = _merge(
        own_cache, owner=owner, peer_entry=peer_entry, peer_cache=peer_cache, now=now,
        tau_max=tau_max,
    )
    m = len(group_limits)
    by_group: list[list[CacheEntry]] = [[] for _ in range(m)]
    for entry in merged.values():
        if not 0 <= entry.group < m:
            raise ValueError(
                f"CacheEntry.group = {entry.group}: expected a group id in [0, {m}) "
                "(len(group_limits))"
            )
        by_group[entry.group].append(entry)
    if variant == "partition":
        kept = [e for g in range(m) for e in _keep_newest(by_group[g], int(group_limits[g]))]
    else:
        groups = [_keep_newest(members, None) for members in by_group]  # newest first
        total, capacity = sum(len(x) for x in groups), int(sum(group_limits))
        while total > capacity:
            over = [len(groups[g]) - int(group_limits[g]) for g in range(m)]
            worst = int(np.argmax(over))  # first maximum = smallest group id
            groups[worst].pop()  # the oldest (the latest arrival among equal timestamps)
            total -= 1
        kept = [e for members in groups for e in members]
    return {e.origin: e for e in _keep_newest(kept, None)}


def exchange_pair(
    cache_i: Cache,
    cache_j: Cache,
    entry_i: CacheEntry,
    entry_j: CacheEntry,
    *,
    now: int,
    tau_max: int,
    cache_size: int | None = None,
    group_limits: Sequence[int] | None = None,
    variant: GroupVariant = "partition",
) -> tuple[dict[int, CacheEntry], dict[int, CacheEntry]]:
    """Symmetric encounter of agents ``entry_i.origin`` and ``entry_j.origin``.

    Cached-DFL: "When two agents meet, they not only exchange their own local models, but also
    share their cached models with each other". Both new caches are computed from the
    PRE-exchange caches: the D2D exchange is simultaneous, each side sends what it held when they
    met. Updating one side first and letting the other read the already-updated cache would make
    the result depend on who is processed first (with group limits, or models older than the
    peers' own, the first side's eviction can drop a model the second side would have kept).

    Uses :func:`group_lru_update` when ``group_limits`` is given, else :func:`lru_update` with
    ``cache_size`` (None = unlimited).

    Returns
    -------
    tuple[dict[int, CacheEntry], dict[int, CacheEntry]]
        ``(new cache of i, new cache of j)``.
    """
    if entry_i.origin == entry_j.origin:
        raise ValueError(
            f"entry_j.origin = {entry_j.origin}: expected an agent other than entry_i.origin"
        )
    if group_limits is not None:
        if cache_size is not None:
            raise ValueError(
                f"cache_size = {cache_size!r}: expected None when group_limits is given "
                "(size = their sum)"
            )
        new_i = group_lru_update(
            cache_i, owner=entry_i.origin, peer_entry=entry_j, peer_cache=cache_j, now=now,
            tau_max=tau_max, group_limits=group_limits, variant=variant,
        )
        new_j = group_lru_update(
            cache_j, owner=entry_j.origin, peer_entry=entry_i, peer_cache=cache_i, now=now,
            tau_max=tau_max, group_limits=group_limits, variant=variant,
        )
        return new_i, new_j
    new_i = lru_update(
        cache_i, owner=entry_i.origin, peer_entry=entry_j, peer_cache=cache_j, now=now,
        tau_max=tau_max, cache_size=cache_size,
    )
    new_j = lru_update(
        cache_j, owner=entry_j.origin, peer_entry=entry_i, peer_cache=cache_i, now=now,
        tau_max=tau_max, cache_size=cache_size,
    )
    return new_i, new_j


def aggregation_weights(own_size: int, entries: Iterable[CacheEntry]) -> np.ndarray:
    """FedAvg-style weights over the own model and the cached models.

    Cached-DFL, Alg. 1 line 11 with "alpha_j = n_j / sum_{j in C_i(t)} n_j, where n_j is the number
    of samples on agent j"; the own model takes part with its own ``n_i`` (the authors' code:
    own model + cached models weighted by sample count).

    Parameters
    ----------
    own_size
        the owner's sample count ``n_i``.
    entries
        cached entries, in the order their payloads will be combined.

    Returns
    -------
    np.ndarray
        float64 array ``[alpha_own, alpha_e1, alpha_e2, ...]`` summing to 1.
    """
    sizes = np.array([own_size, *(e.size for e in entries)], dtype=np.float64)
    if np.any(sizes < 0) or not np.all(np.isfinite(sizes)):
        raise ValueError(f"sample counts {sizes.tolist()[:8]}: expected finite numbers >= 0")
    total = sizes.sum()
    if total <= 0:
        raise ValueError(f"sample counts {sizes.tolist()[:8]}: expected at least one count > 0")
    return sizes / total


def cache_stats(caches: Iterable[Cache], *, now: int) -> tuple[float, float]:
    """Average number and average age of cached models (Cached-DFL, Table 2).

    The mean count is taken over agents (caches); the mean age ``now - timestamp`` is pooled over
    all cached models of all agents (Table 2 does not say which average; pooling weights each
    cached model equally). The age is ``nan`` when no agent caches anything.

    Parameters
    ----------
    caches
        one cache per agent.
    now
        current epoch.

    Returns
    -------
    tuple[float, float]
        ``(mean number of cached models per agent, mean age in epochs)``.
    """
    counts: list[int] = []
    ages: list[int] = []
    for cache in caches:
        counts.append(len(cache))
        ages.extend(now - e.timestamp for e in cache.values())
    if not counts:
        raise ValueError("caches is empty: expected at least one agent's cache")
    mean_age = float(np.mean(ages)) if ages else float("nan")
    return float(np.mean(counts)), mean_age
