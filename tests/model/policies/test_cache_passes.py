"""``cached.passes``: a step's encounters replayed, as the authors' Table 2 function does."""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from mobidfl.model.config import Config
from mobidfl.model.maths.cache import CacheEntry
from mobidfl.model.policies.cached import replay_encounters


def _own(n: int, now: int) -> dict[int, CacheEntry]:
    return {i: CacheEntry(origin=i, timestamp=now, size=10 + i) for i in range(n)}


def test_one_pass_relays_only_in_meeting_order_and_more_passes_follow_the_chain_back():
    # Prepare: 4 cars; this step C-D meet, then B-C, then A-B (a chain in reverse order)
    edges = np.array([[2, 3], [1, 2], [0, 1]])
    empty = {i: {} for i in range(4)}
    # Execute: 1, 2 and 3 passes (the authors' Decentralized_Cache_test uses local_ep = 10)
    got = {p: replay_encounters(empty, _own(4, 7), edges, now=7, tau_max=1, passes=p,
                                cache_size=None) for p in (1, 2, 3)}
    # Assert: one pass - A holds B, C and D (relayed forwards), D holds only C;
    # each further pass carries models one more hop backwards along the chain
    assert sorted(got[1][0]) == [1, 2, 3] and sorted(got[1][3]) == [2]
    assert sorted(got[2][3]) == [1, 2] and sorted(got[3][3]) == [0, 1, 2]
    assert all(e.timestamp == 7 for c in got[3].values() for e in c.values())
    assert empty == {i: {} for i in range(4)}  # inputs untouched


def test_further_passes_push_an_older_model_out_of_a_full_cache():
    # Prepare: car 1 holds an epoch-5 model of car 3; at epoch 6 car 0 meets car 1, then 1 meets 2
    old = {0: {}, 1: {3: CacheEntry(origin=3, timestamp=5, size=9)}, 2: {}, 3: {}}
    edges = np.array([[0, 1], [1, 2]])
    # Execute: C_max = 2, one pass and four
    one = replay_encounters(old, _own(4, 6), edges, now=6, tau_max=3, passes=1, cache_size=2)
    four = replay_encounters(old, _own(4, 6), edges, now=6, tau_max=3, passes=4, cache_size=2)
    # Assert: after one pass car 0 still holds the old model of 3; replaying brings car 2's
    # fresh model back to car 0, and LRU (Alg. 2 lines 17-18) evicts the older one
    assert set(one[0]) == {1, 3} and one[0][3].timestamp == 5
    assert set(four[0]) == {1, 2} and set(four[2]) == {0, 1} and set(four[1]) == {0, 2}
    assert all(len(c) <= 2 for c in four.values())


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_passes_fail_with_one_line(bad):
    with pytest.raises(ConfigError, match="passes"):
        replay_encounters({0: {}, 1: {}}, _own(2, 0), np.array([[0, 1]]), now=0, tau_max=1,
                          passes=bad)
    with pytest.raises(ConfigError, match="passes"):
        Config.from_settings(**{"cached.passes": bad}).validated()


def test_preset_uses_one_pass_and_the_table2_variants_ten():
    from mobidfl.analysis.reproduce import CACHED

    # Assert: the reading of record, written before any accuracy result (validation/README.md)
    assert Config.from_settings(preset="cached_dfl_003").cached.passes == 1
    assert CACHED.variants["cache_tau1"]["cached.passes"] == 10
    assert CACHED.variants["cache_tau10"]["cached.passes"] == 10
