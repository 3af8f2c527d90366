"""Cached-DFL under its own mobility and under SUMO traffic
(``mobidfl reproduce cached_dfl_003_sumo --scale ci``, 2 seeds)."""

from __future__ import annotations

from tests.reproduce_ci import effects, run_ci, value

PAPER = "cached_dfl_003_sumo"
SEEDS = (0, 1)


def test_cached_dfl_beats_dfl_under_both_mobilities(tmp_path):
    # Prepare / Execute: 2 seeds x {manhattan, sumo} x {LRU, DFL} on nyc_uws
    per_run = run_ci(PAPER, seeds=SEEDS, folder=tmp_path)
    assert len(per_run) == 8
    # Assert: Cached-DFL's Fig. 2 direction holds under SUMO traffic too, for every seed
    # (more than 5 points)
    assert (effects(PAPER, per_run, "Manhattan mobility") > 5).all()
    assert (effects(PAPER, per_run, "SUMO traffic") > 5).all()
    # Assert: the two mobilities are really different traffic (contacts differ)
    for seed in SEEDS:
        sumo = value(per_run, "LRU sumo", seed, "neighbours")
        manhattan = value(per_run, "LRU manhattan", seed, "neighbours")
        assert sumo > 0 and manhattan > 0
        assert abs(sumo - manhattan) > 1e-3 * manhattan
