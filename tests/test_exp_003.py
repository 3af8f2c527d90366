"""Cached-DFL (Wang et al., AAAI 2025) experiment at scale ``ci``: the direction of the
paper's effects only, over two seeds, with encounters applied in time order."""

from __future__ import annotations

import pytest
import torch

from analysis.experiments import caching_003

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def rows():
    torch.set_num_threads(1)
    return caching_003.run(scale="ci", seeds=SEEDS)


def test_cached_dfl_beats_dfl_without_cache(rows):
    # Fig. 2: Cached-DFL (LRU) reaches a higher accuracy than pairwise DFL on shards
    for seed in SEEDS:
        fig2 = rows[(rows.part == "fig2") & (rows.seed == seed)].set_index("policy")
        assert fig2.loc["cached_lru", "final_acc"] > fig2.loc["defedavg", "final_acc"]
        assert fig2.loc["cached_lru", "half_acc"] > fig2.loc["defedavg", "half_acc"]
        assert fig2.loc["cached_lru", "cache_count"] <= caching_003.SCALES["ci"].cache_size


def test_cache_count_and_age_grow_with_tau_max(rows):
    # Table 2: more staleness tolerated -> more and older cached models
    for seed in SEEDS:
        t2 = rows[(rows.part == "table2") & (rows.seed == seed)].set_index("tau_max")
        assert t2.loc[5, "cache_count"] > t2.loc[1, "cache_count"]
        assert t2.loc[5, "cache_age"] > t2.loc[1, "cache_age"]
        assert t2.loc[1, "cache_age"] == 0.0  # tau_max = 1 keeps only this epoch's models
    tables = caching_003.tables(rows)
    assert any(title.startswith("Table 2") for title in tables)
