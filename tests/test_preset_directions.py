"""CI direction checks of the paper presets (issue 12): small, >= 2 seeds each.

The full comparisons are `mobidfl reproduce` (docs/reproduction/); these check, through the
presets, the mechanisms the headline claims rest on, on every seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from model.world import MobiDFLModel

SEEDS = (0, 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_mobility_000_hm_clients_meet_more_distinct_neighbours(seed):
    # Prepare: de Heredia's world from the preset, mobility only (Table 2's mechanism, App. B)
    model = MobiDFLModel(preset="mobility_000", learning=False, steps=30, seed=seed)
    # Execute
    model.run()
    # Assert: ceil(0.2 * 48) = 10 HM clients, each met more distinct clients than LM ones
    last = model.model_table().iloc[-1]
    assert int(model.hm.sum()) == 10
    assert last.distinct_neighbours_hm > last.distinct_neighbours_lm


def test_cached_dfl_003_cache_fills_and_ages_with_tau_max():
    # Prepare: the preset's cars, speed, range and epochs on a smaller grid; 1 local step
    common = dict(preset="cached_dfl_003", vehicles=20, map="grid:8x8:150", model="mlp",
                  steps=6, local_steps=1, test_size=20, eval_every=1000, cache_size=20,
                  early_stop_patience=0, lr_plateau_patience=0)
    counts, ages = {}, {}
    for seed in SEEDS:
        for tau in (1, 5):
            # Execute
            table = MobiDFLModel(**common, tau_max=tau, seed=seed).run().model_table()
            late = table[table.step > 3]
            counts[seed, tau] = float(late.cache_size_mean.mean())
            ages[seed, tau] = float(late.cache_age_mean.mean())
    # Assert: Table 2's direction on every seed
    for seed in SEEDS:
        assert counts[seed, 5] > counts[seed, 1]
        assert ages[seed, 5] > ages[seed, 1]
    assert np.isfinite(list(counts.values())).all()
