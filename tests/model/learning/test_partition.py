"""Data partitions (model/learning/partition.py): Cached-DFL Experiments, Reza et al., PSFL."""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from mobidfl.model.learning.partition import (
    label_histograms,
    make_partition,
    partition_area,
    partition_dirichlet,
    partition_iid,
    partition_shards,
    shard_counts,
)

LABELS = np.repeat(np.arange(10), 400)  # 4,000 samples, 400 per class (like mnist5k train)


def assert_disjoint(parts, n_total=None):
    allidx = np.concatenate(parts)
    assert np.unique(allidx).size == allidx.size, "a sample is given to two agents"
    if n_total is not None:
        assert allidx.size == n_total


def test_iid_sizes_and_near_uniform_labels():
    # Prepare / Execute
    parts = partition_iid(LABELS, 20, rng=np.random.default_rng(0))
    # Assert: everything dealt once, sizes equal, every agent sees every class ~ 20 times
    assert_disjoint(parts, LABELS.size)
    assert {p.size for p in parts} == {200}
    hist = label_histograms(LABELS, parts, 10)
    assert hist.min() >= 8 and hist.max() <= 35


def test_shard_counts_match_cached_dfl_mix_and_sum_to_2n():
    # 10% x 4, 20% x 3, 30% x 2, 40% x 1 when N divides by 10
    counts = shard_counts(100)
    assert [(counts == k).sum() for k in (4, 3, 2, 1)] == [10, 20, 30, 40]
    for n in range(1, 203):
        c = shard_counts(n)
        assert c.size == n and c.sum() == 2 * n and c.min() >= 1 and c.max() <= 4


def test_shards_give_4_3_2_1_shards_of_one_or_two_labels():
    # Prepare: N = 20 -> 40 shards of 100 samples
    parts = partition_shards(LABELS, 20, rng=np.random.default_rng(1))
    # Assert
    assert_disjoint(parts, LABELS.size)
    shards = np.array([p.size // 100 for p in parts])
    assert all(p.size % 100 == 0 for p in parts)
    assert [(shards == k).sum() for k in (4, 3, 2, 1)] == [2, 4, 6, 8]
    hist = label_histograms(LABELS, parts, 10)
    n_labels = (hist > 0).sum(1)
    assert (n_labels <= shards * 2).all()
    assert (n_labels[shards == 1] == 1).all()  # 400 per class / 100 per shard: pure shards


def test_shards_rejects_more_shards_than_samples():
    # named as the count settings a user changes (the config's name for the fleet)
    with pytest.raises(ConfigError, match=r"'vehicles\+pedestrians\+sensors\+uavs' = 6"):
        partition_shards(np.arange(10) % 2, 6, rng=np.random.default_rng(0))


def test_dirichlet_small_alpha_skews_large_alpha_does_not():
    # Prepare
    rng = np.random.default_rng(2)
    # Execute
    skewed = partition_dirichlet(LABELS, 10, alpha=0.05, rng=rng, min_size=10)
    flat = partition_dirichlet(LABELS, 10, alpha=1000.0, rng=rng, min_size=10)

    def dominant_share(parts):
        h = label_histograms(LABELS, parts, 10)
        return float((h.max(1) / h.sum(1)).mean())

    # Assert
    assert_disjoint(skewed, LABELS.size)
    assert min(p.size for p in skewed) >= 10
    assert dominant_share(skewed) > 0.6
    assert dominant_share(flat) < 0.2


def test_dirichlet_rejects_non_positive_alpha():
    with pytest.raises(ConfigError, match="dirichlet_alpha"):
        partition_dirichlet(LABELS, 5, alpha=0.0, rng=np.random.default_rng(0))


def test_dirichlet_that_cannot_give_every_agent_a_batch_says_what_to_change():
    # Prepare: 50 agents, alpha 0.05 on 4,000 samples (the paper's Fig. 4 size on mnist5k)
    rng = np.random.default_rng(0)
    # Execute
    with pytest.raises(ConfigError) as info:
        partition_dirichlet(LABELS, 50, alpha=0.05, rng=rng, max_tries=20)
    # Assert: one line naming alpha, the three ways out and the sizes that made it fail
    message = str(info.value)
    assert info.value.setting == "dirichlet_alpha" and "\n" not in message
    assert "a larger alpha, fewer agents or a larger dataset" in message
    assert "50 agents and 4,000 training samples" in message


def test_area_uses_only_area_labels_and_splits_shared_labels():
    # Prepare: Cached-DFL group split, 3 areas, label 9 and 6 shared by two areas each
    area_labels = [[9, 0, 1, 2], [3, 4, 5, 6], [6, 7, 8, 9]]
    agent_area = np.array([0] * 4 + [1] * 4 + [2] * 4)
    # Execute
    parts = partition_area(LABELS, agent_area, area_labels, rng=np.random.default_rng(3))
    # Assert: labels stay in the area; no sample twice; shared labels fully used once
    assert_disjoint(parts)
    hist = label_histograms(LABELS, parts, 10)
    for i, a in enumerate(agent_area):
        assert set(np.flatnonzero(hist[i])) <= set(area_labels[a])
    assert hist[:, 9].sum() == 400 and hist[:, 6].sum() == 400
    assert hist[agent_area == 0, 9].sum() == 200  # equal agent counts -> half each


def test_area_per_agent_cap_and_shards_within():
    # Prepare
    agent_area = np.array([0, 0, 1, 1, 1])
    # Execute
    parts = partition_area(
        LABELS, agent_area, [[0, 1], [2, 3]], rng=np.random.default_rng(4), per_agent=50
    )
    sharded = partition_area(
        LABELS, agent_area, [[0, 1], [2, 3]], rng=np.random.default_rng(4), within="shards"
    )
    # Assert
    assert [p.size for p in parts] == [50] * 5
    assert_disjoint(sharded, 1600)
    with pytest.raises(ValueError, match="per_agent"):
        partition_area(LABELS, agent_area, [[0], [1]], rng=np.random.default_rng(0), per_agent=300)


def test_make_partition_dispatch_and_errors():
    rng = np.random.default_rng(0)
    assert len(make_partition("iid", LABELS, 7, rng=rng)) == 7
    assert len(make_partition("dirichlet", LABELS, 7, rng=rng, alpha=0.5)) == 7
    with pytest.raises(ConfigError, match="one of iid, shards, dirichlet, area"):
        make_partition("random", LABELS, 7, rng=rng)
    with pytest.raises(ConfigError, match="area needs"):
        make_partition("area", LABELS, 7, rng=rng)
    with pytest.raises(ValueError, match="n_agents"):
        make_partition("iid", LABELS, 0, rng=rng)


def test_same_rng_seed_same_partition():
    a = partition_shards(LABELS, 10, rng=np.random.default_rng(9))
    b = partition_shards(LABELS, 10, rng=np.random.default_rng(9))
    c = partition_shards(LABELS, 10, rng=np.random.default_rng(10))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
