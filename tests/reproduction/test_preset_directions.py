"""CI direction checks of the paper presets (issue 12): small, >= 2 seeds each.

The full comparisons are `mobidfl reproduce` (docs/reproduction/); these check, through the
presets, the mechanisms the headline claims rest on, on every seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.model.world import MobiDFLModel

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


@pytest.mark.parametrize("seed", SEEDS)
def test_psfl_004_sensors_settle_into_one_federation_per_area(seed):
    # Prepare: the preset's world and learning (3 areas, sigma 40, eq. 3 over 4.5 batches,
    # disjoint labels), 10 rounds, accuracy only at the end
    model = MobiDFLModel(preset="psfl_004", steps=10, test_size=200, eval_every=1000, seed=seed)
    # Execute
    table = model.run().model_table()
    last = table.iloc[-1]
    # Assert (Fig. 5): |F| = 3, nobody in another area's federation (eq. 6), and the
    # reason: cross-border ds above sigma, within-area ds far below it
    assert last.federations == 3
    assert last.federation_errors == 0
    assert last.unassigned == 0
    assert last.ds_inter_mean > 40.0 > 10 * last.ds_intra_mean


@pytest.mark.parametrize("seed", SEEDS)
def test_dam_001_moving_clients_meet_more_static_clients_than_staying_put(seed):
    # Prepare: the preset's world (18 x 18 cells, 15 static + 5 mobile, R_c = 3, R_m = 5),
    # 30 rounds of the MLP, accuracy never evaluated (only the contacts matter here)
    common = dict(preset="dam_001", steps=30, model="mlp", test_size=100, eval_every=1000,
                  seed=seed)
    met = {}
    for pattern in ("static", "random_grid", "dam", "dcm"):
        # Execute
        model = MobiDFLModel(**common, **{"uav.mobility": pattern}).run()
        mobile, static = model.kind_of == "uav", model.kind_of == "sensor"
        met[pattern] = float(np.asarray(model.met[mobile][:, static].sum(axis=1)).mean())
    # Assert (Fig. 2's mechanism, Sec. IV): every moving pattern brings the mobile clients
    # to more distinct static clients than staying at their initial cells
    for pattern in ("random_grid", "dam", "dcm"):
        assert met[pattern] > met["static"], met
