"""Cached-DFL (``mobidfl reproduce cached_dfl_003 --scale ci``): the direction of the
paper's effects only, over two seeds, with encounters applied in time order."""

from __future__ import annotations

import pytest

from mobidfl.analysis.reproduce import CACHED, variant_settings
from mobidfl.model.config import Config
from tests.reproduce_ci import effects, run_ci, value

PAPER = "cached_dfl_003"
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def per_run(tmp_path_factory):
    return run_ci(PAPER, seeds=SEEDS, folder=tmp_path_factory.mktemp(PAPER))


def test_cached_dfl_beats_dfl_without_cache(per_run):
    # Fig. 2: Cached-DFL (LRU) reaches a higher accuracy than pairwise DFL on shards
    assert (effects(PAPER, per_run, "LRU caching ends more accurate") > 0).all()
    cache_size = Config.from_settings(variant_settings(CACHED, "LRU", scale="ci")).cache_size
    for seed in SEEDS:
        assert value(per_run, "LRU", seed, "half_acc") > value(per_run, "DFL", seed, "half_acc")
        assert value(per_run, "LRU", seed, "cache_count") <= cache_size


def test_cache_count_and_age_grow_with_tau_max(per_run):
    # Table 2: more staleness tolerated -> more and older cached models
    assert (effects(PAPER, per_run, "cached models grow with tau_max") > 0).all()
    assert (effects(PAPER, per_run, "cached models age with tau_max") > 0).all()
    for seed in SEEDS:  # tau_max = 1 keeps only this epoch's models
        assert value(per_run, "cache_tau1", seed, "cache_age") == 0.0


def test_group_lru_beats_lru_and_dfl_with_area_restricted_cars(tmp_path):
    # Execute: Fig. 6 at ci size (15 cars, 12 kept in 3 areas with area labels, 3 free)
    paper = "cached_dfl_003_areas"
    areas = run_ci(paper, seeds=(0,), folder=tmp_path)
    # Assert (Fig. 6): one sub-cache per area ends above plain LRU and above DFL
    assert (effects(paper, areas, "group-based LRU ends above plain LRU") > 0).all()
    assert (effects(paper, areas, "group-based LRU ends above DFL") > 0).all()
