"""Tests for mobidfl.model.maths.cache (Cached-DFL: Alg. 1 and Alg. 2 LRU, group-based LRU)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mobidfl.model.maths.cache import (
    CacheEntry,
    aggregation_weights,
    cache_stats,
    evict_stale,
    exchange_pair,
    group_lru_update,
    lru_update,
)


def _e(origin: int, ts: int, *, group: int = 0, size: int = 10) -> CacheEntry:
    return CacheEntry(origin=origin, timestamp=ts, size=size, group=group, payload=object())


def _cache(*entries: CacheEntry) -> dict[int, CacheEntry]:
    return {e.origin: e for e in entries}


def _ts(cache: Mapping[int, CacheEntry]) -> dict[int, int]:
    return {o: e.timestamp for o, e in cache.items()}


# ------------------------------------------------------------------------------------------
# hand cases
# ------------------------------------------------------------------------------------------
def test_evict_stale_drops_entries_at_exactly_tau_max() -> None:
    # Prepare: now = 8, tau_max = 3 -> staleness 8-5 = 3 is evicted (Alg. 2 line 2 uses >=).
    cache = _cache(_e(1, 5), _e(2, 7), _e(3, 6))
    # Execute
    fresh = evict_stale(cache, now=8, tau_max=3)
    # Assert
    assert _ts(fresh) == {2: 7, 3: 6}
    assert _ts(cache) == {1: 5, 2: 7, 3: 6}  # input untouched


def test_lru_update_follows_alg2_line_by_line() -> None:
    # Prepare: owner 0, now = 10, tau_max = 3.
    own = _cache(_e(1, 9), _e(2, 7), _e(3, 8))  # 2 is stale (10-7 = 3)
    peer_cache = _cache(_e(1, 8), _e(3, 9), _e(5, 8), _e(0, 9), _e(6, 7))  # 6 stale, 0 = owner
    peer = _e(4, 10)
    own_before, peer_before = dict(own), dict(peer_cache)
    # Execute
    unlimited = lru_update(own, owner=0, peer_entry=peer, peer_cache=peer_cache, now=10,
                           tau_max=3, cache_size=None)
    three = lru_update(own, owner=0, peer_entry=peer, peer_cache=peer_cache, now=10,
                       tau_max=3, cache_size=3)
    two = lru_update(own, owner=0, peer_entry=peer, peer_cache=peer_cache, now=10,
                     tau_max=3, cache_size=2)
    # Assert:
    #  lines 1-5 drop 2 (own) and 6 (peer); line 6 adds 4@10; lines 7-16: 1 keeps own @9 (8 < 9),
    #  3 is replaced by the peer's @9 (9 > 8), 5@8 is added, the owner's own model is skipped.
    assert _ts(unlimited) == {4: 10, 1: 9, 3: 9, 5: 8}
    assert unlimited[3] is peer_cache[3] and unlimited[1] is own[1]  # same objects, no copies
    #  lines 17-18: newest first; the 1@9 / 3@9 tie keeps arrival order (1 held, 3 just arrived).
    assert list(three) == [4, 1, 3]
    assert list(two) == [4, 1]
    assert own == own_before and peer_cache == peer_before


def test_lru_update_peer_model_refreshes_older_copy() -> None:
    # Prepare: the owner holds 4@6, the peer (agent 4) now sends its model @9.
    own = _cache(_e(4, 6))
    # Execute
    new = lru_update(own, owner=0, peer_entry=_e(4, 9), peer_cache={}, now=9, tau_max=5,
                     cache_size=3)
    # Assert
    assert _ts(new) == {4: 9}


def test_group_lru_partition_keeps_each_group_within_its_limit() -> None:
    # Prepare: groups limits [1, 2]; owner 0, now 5, tau_max 10.
    own = _cache(_e(1, 4, group=0), _e(2, 3, group=0), _e(3, 2, group=1))
    peer_cache = _cache(_e(5, 5, group=0), _e(6, 4, group=1))
    peer = _e(4, 5, group=1)
    # Execute
    grouped = group_lru_update(own, owner=0, peer_entry=peer, peer_cache=peer_cache, now=5,
                               tau_max=10, group_limits=[1, 2])
    plain = lru_update(own, owner=0, peer_entry=peer, peer_cache=peer_cache, now=5,
                       tau_max=10, cache_size=3)
    # Assert: merged = g0 {5@5, 1@4, 2@3}, g1 {4@5, 6@4, 3@2}
    #   group 0 keeps its newest 1 -> 5; group 1 keeps its newest 2 -> 4, 6.
    assert set(grouped) == {5, 4, 6}
    #   plain LRU of size 3 would keep 4@5, 5@5, 1@4 (1 held before 6 arrived; ties keep
    #   arrival order): two of group 0.
    assert set(plain) == {4, 5, 1}


def test_group_lru_variants_differ_when_a_group_is_under_its_limit() -> None:
    # Prepare: limits [1, 2]; merged = g0 {5@5, 1@4, 2@3}, g1 {4@5} -> group 1 has free room.
    own = _cache(_e(1, 4, group=0), _e(2, 3, group=0))
    peer_cache = _cache(_e(5, 5, group=0))
    peer = _e(4, 5, group=1)
    kwargs = dict(owner=0, peer_entry=peer, peer_cache=peer_cache, now=5, tau_max=10,
                  group_limits=[1, 2])
    # Execute
    partition = group_lru_update(own, **kwargs)
    most_over = group_lru_update(own, variant="most_over", **kwargs)
    # Assert: paper text (partition): group 0 keeps exactly 1 model.
    assert set(partition) == {5, 4}
    # code reading: 4 models > capacity 3 -> evict the oldest of group 0 (over by 2): 2@3; now
    # 3 models = capacity, so group 0 keeps 2 models, borrowing group 1's free slot.
    assert set(most_over) == {5, 1, 4}


def test_group_lru_most_over_picks_group_most_over_its_limit() -> None:
    # Prepare: limits [1, 2]; merged = g0 {5@5, 1@4, 2@3}, g1 {4@5, 6@4, 3@2}; capacity 3.
    own = _cache(_e(1, 4, group=0), _e(2, 3, group=0), _e(3, 2, group=1))
    peer_cache = _cache(_e(5, 5, group=0), _e(6, 4, group=1))
    # Execute
    new = group_lru_update(own, owner=0, peer_entry=_e(4, 5, group=1), peer_cache=peer_cache,
                           now=5, tau_max=10, group_limits=[1, 2], variant="most_over")
    # Assert: over = [2, 1] -> drop 2@3; [1, 1] tie -> group 0 -> drop 1@4; [0, 1] -> drop 3@2.
    assert set(new) == {5, 4, 6}


def test_exchange_pair_uses_pre_exchange_caches() -> None:
    # Prepare: limits [1, 1]; agent 0 (group 0) caches 2@5 (group 1); agent 1 (group 1) has none.
    ci = _cache(_e(2, 5, group=1))
    cj: dict[int, CacheEntry] = {}
    ei, ej = _e(0, 6, group=0), _e(1, 6, group=1)
    # Execute
    new_i, new_j = exchange_pair(ci, cj, ei, ej, now=6, tau_max=10, group_limits=[1, 1])
    swapped_j, swapped_i = exchange_pair(cj, ci, ej, ei, now=6, tau_max=10, group_limits=[1, 1])
    # Assert: i's group-1 slot goes to the fresher 1@6, evicting 2@5 ...
    assert _ts(new_i) == {1: 6}
    # ... yet j still receives 2@5 from i's cache as it was when they met. Processing i first
    # and letting j read i's updated cache would have given j only {0: 6}.
    assert _ts(new_j) == {0: 6, 2: 5}
    assert _ts(swapped_i) == _ts(new_i) and _ts(swapped_j) == _ts(new_j)
    assert _ts(ci) == {2: 5} and cj == {}


def test_exchange_pair_plain_lru_hand_case() -> None:
    # Prepare: now = 6, tau_max = 3 (ages 0-2 survive), cache_size = 2.
    ci = _cache(_e(2, 4), _e(3, 5), _e(5, 3))  # 5@3 is stale (6-3 = 3)
    cj = _cache(_e(3, 3), _e(4, 5), _e(0, 4))
    ei, ej = _e(0, 6), _e(1, 6)
    # Execute
    new_i, new_j = exchange_pair(ci, cj, ei, ej, now=6, tau_max=3, cache_size=2)
    # Assert: i sees {1@6, 3@5, 4@5, 2@4} (0@4 is itself) -> newest two: 1@6, then 3@5 (the
    # 3@5 / 4@5 tie keeps arrival order: i already held 3@5, 4@5 arrives from j).
    assert _ts(new_i) == {1: 6, 3: 5}
    # j sees {0@6 (replaces its 0@4), 3@5 (newer than its 3@3), 4@5, 2@4} -> 0@6, then the
    # 4@5 it already held beats the 3@5 that arrives now (ties keep arrival order, no id bias).
    assert _ts(new_j) == {0: 6, 4: 5}
    assert new_j[0] is ei and new_j[4] is cj[4]


def test_aggregation_weights_are_sample_count_shares() -> None:
    # Prepare: own 100 samples, cached models with 300 and 600 samples.
    entries = [_e(1, 0, size=300), _e(2, 0, size=600)]
    # Execute
    w = aggregation_weights(100, entries)
    # Assert: 100/1000, 300/1000, 600/1000
    # exact integer sum, then one correctly rounded division each: the same float as the
    # literals 0.1, 0.3, 0.6 (each the correctly rounded 100/1000 ...) -> bit-exact
    np.testing.assert_array_equal(w, [0.1, 0.3, 0.6])
    np.testing.assert_allclose(aggregation_weights(7, []), [1.0])
    with pytest.raises(ValueError, match="sample counts"):
        aggregation_weights(0, [_e(1, 0, size=0)])
    with pytest.raises(ValueError, match="sample counts"):
        aggregation_weights(5, [_e(1, 0, size=-1)])


def test_cache_stats_table2_metrics() -> None:
    # Prepare: now = 9; caches of 2, 0 and 1 models with ages 1, 3 and 0.
    caches = [_cache(_e(1, 8), _e(2, 6)), {}, _cache(_e(3, 9))]
    # Execute
    count, age = cache_stats(caches, now=9)
    # Assert: mean count (2+0+1)/3 = 1.0; pooled mean age (1+3+0)/3 = 4/3.
    assert count == pytest.approx(1.0)
    assert age == pytest.approx(4 / 3)
    empty_count, empty_age = cache_stats([{}, {}], now=3)
    assert empty_count == 0.0 and math.isnan(empty_age)


def test_bad_arguments_raise_value_error() -> None:
    with pytest.raises(ValueError, match="tau_max"):
        evict_stale({}, now=1, tau_max=0)
    with pytest.raises(ValueError, match="cache_size"):
        lru_update({}, owner=0, peer_entry=_e(1, 1), peer_cache={}, now=1, tau_max=2,
                   cache_size=-1)
    with pytest.raises(ValueError, match="peer_entry.origin"):
        lru_update({}, owner=1, peer_entry=_e(1, 1), peer_cache={}, now=1, tau_max=2,
                   cache_size=2)
    with pytest.raises(ValueError, match="group"):
        group_lru_update({}, owner=0, peer_entry=_e(1, 1, group=2), peer_cache={}, now=1,
                         tau_max=2, group_limits=[1, 1])
    with pytest.raises(ValueError, match="cache_size"):
        exchange_pair({}, {}, _e(0, 1), _e(1, 1), now=1, tau_max=2, cache_size=3,
                      group_limits=[1, 1])


# ------------------------------------------------------------------------------------------
# property tests over random encounter sequences
# ------------------------------------------------------------------------------------------
@st.composite
def _scenarios(draw):
    n_agents = draw(st.integers(2, 6))
    n_epochs = draw(st.integers(1, 8))
    pair = st.tuples(st.integers(0, n_agents - 1), st.integers(0, n_agents - 1)).filter(
        lambda p: p[0] != p[1]
    )
    encounters = draw(st.lists(st.lists(pair, max_size=6), min_size=n_epochs,
                               max_size=n_epochs))
    # Some agents skip training in some epochs: their own model keeps an older timestamp.
    trains = draw(st.lists(st.lists(st.booleans(), min_size=n_agents, max_size=n_agents),
                           min_size=n_epochs, max_size=n_epochs))
    tau_max = draw(st.integers(1, 5))
    return n_agents, encounters, trains, tau_max


def _check_update(
    new: Mapping[int, CacheEntry],
    *,
    owner: int,
    inputs: list[CacheEntry],
    now: int,
    tau_max: int,
    limit: int | None,
) -> None:
    """Invariants of one LRU update, given everything the owner held or received."""
    seen = [e for e in inputs if e.origin != owner and now - e.timestamp < tau_max]
    newest: dict[int, int] = {}
    for e in seen:
        newest[e.origin] = max(newest.get(e.origin, -1), e.timestamp)
    # never more than cache_size entries
    if limit is not None:
        assert len(new) <= limit
    for origin, entry in new.items():
        assert origin == entry.origin
        # own model never cached
        assert origin != owner
        # no entry with staleness >= tau_max
        assert now - entry.timestamp < tau_max
        # the newest copy per origin seen, and the very object received (payload not copied)
        assert entry.timestamp == newest[origin]
        assert any(entry is e for e in seen)
    # LRU: an origin is dropped only if the cache is full of models at least as new.
    for origin, ts in newest.items():
        if origin not in new:
            assert limit is not None and len(new) == limit
            assert all(e.timestamp >= ts for e in new.values())


@settings(max_examples=150, deadline=None)
@given(scenario=_scenarios(), cache_size=st.one_of(st.none(), st.integers(0, 4)))
def test_lru_invariants_over_random_encounters(scenario, cache_size) -> None:
    # Prepare
    n_agents, encounters, trains, tau_max = scenario
    caches: list[dict[int, CacheEntry]] = [{} for _ in range(n_agents)]
    own = [_e(a, 0, size=10 + a) for a in range(n_agents)]
    for t, (pairs, trained) in enumerate(zip(encounters, trains, strict=True), start=1):
        own = [_e(a, t, size=10 + a) if trained[a] else own[a] for a in range(n_agents)]
        # Alg. 1 line 17: stale models leave every cache each epoch, met or not.
        caches = [evict_stale(c, now=t, tau_max=tau_max) for c in caches]
        for c in caches:
            assert all(t - e.timestamp < tau_max for e in c.values())
        for i, j in pairs:
            before_i, before_j = dict(caches[i]), dict(caches[j])
            # Execute
            new_i, new_j = exchange_pair(caches[i], caches[j], own[i], own[j], now=t,
                                         tau_max=tau_max, cache_size=cache_size)
            # Assert
            _check_update(new_i, owner=i, inputs=[*before_i.values(), *before_j.values(),
                                                  own[j]], now=t, tau_max=tau_max,
                          limit=cache_size)
            _check_update(new_j, owner=j, inputs=[*before_j.values(), *before_i.values(),
                                                  own[i]], now=t, tau_max=tau_max,
                          limit=cache_size)
            assert caches[i] == before_i and caches[j] == before_j  # inputs not mutated
            caches[i], caches[j] = new_i, new_j


@settings(max_examples=100, deadline=None)
@given(
    scenario=_scenarios(),
    limits=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    variant=st.sampled_from(["partition", "most_over"]),
)
def test_group_lru_invariants_over_random_encounters(scenario, limits, variant) -> None:
    # Prepare: agent a belongs to group a % m.
    n_agents, encounters, trains, tau_max = scenario
    m = len(limits)
    caches: list[dict[int, CacheEntry]] = [{} for _ in range(n_agents)]
    own = [_e(a, 0, group=a % m) for a in range(n_agents)]
    for t, (pairs, trained) in enumerate(zip(encounters, trains, strict=True), start=1):
        own = [_e(a, t, group=a % m) if trained[a] else own[a] for a in range(n_agents)]
        caches = [evict_stale(c, now=t, tau_max=tau_max) for c in caches]
        for i, j in pairs:
            # Execute
            new_i, new_j = exchange_pair(caches[i], caches[j], own[i], own[j], now=t,
                                         tau_max=tau_max, group_limits=limits, variant=variant)
            # Assert
            for owner, new in ((i, new_i), (j, new_j)):
                assert owner not in new
                assert all(t - e.timestamp < tau_max for e in new.values())
                assert len(new) <= sum(limits)
                per_group = np.bincount([e.group for e in new.values()], minlength=m)
                if variant == "partition":
                    assert all(per_group[g] <= limits[g] for g in range(m))
            merged_i = lru_update(caches[i], owner=i, peer_entry=own[j], peer_cache=caches[j],
                                  now=t, tau_max=tau_max, cache_size=None)
            for g in range(m):
                in_group = sorted((e for e in merged_i.values() if e.group == g),
                                  key=lambda e: -e.timestamp)  # stable: ties in arrival order
                kept = [e.origin for e in in_group if e.origin in new_i]
                if variant == "partition":
                    # exactly the newest min(limit, available) of that group survive
                    assert kept == [e.origin for e in in_group[: limits[g]]]
                else:
                    # survivors of a group are always its newest ones (oldest evicted first)
                    assert kept == [e.origin for e in in_group[: len(kept)]]
            caches[i], caches[j] = new_i, new_j
