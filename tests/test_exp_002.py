"""MoFeL (Macedo et al., Sensors 2023) experiment at CI size: the directions of Table 2.

Per-client speeds v_n ~ U(1 m/min, v_max) and training times tau_n ~ U(tau/20, tau)
(Sec. 5.3), NTC = cycles all of whose started clients finished; two seeds.
"""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.experiments import mofel_002

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def result() -> pd.DataFrame:
    return mofel_002.run(scale="ci", seeds=SEEDS).set_index(["seed", "speed", "policy"])


def _at(df: pd.DataFrame, seed: int, speed: float, policy: str, column: str) -> float:
    return float(df.loc[(seed, speed, policy), column])


def test_table_layout(result):
    # Execute
    table = mofel_002.table(result.reset_index())
    # Assert: one row per (speed, algorithm), mean ± std strings
    assert len(table) == 6
    assert set(table["algorithm"]) == {"MoFeL", "A1", "A2"}
    assert table["NFC"].str.contains("±").all()


def test_mofel_and_a2_frustrate_no_client_a1_more_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    for seed in SEEDS:
        # Execute
        nfc = {
            (s, p): _at(result, seed, s, p, "nfc") for s in (low, high) for p in mofel_002.POLICIES
        }
        # Assert: paper Table 2 text - MoFeL and A2 keep NFC at 0; A1's grows with speed
        for speed in (low, high):
            assert nfc[(speed, "mofel")] == 0
            assert nfc[(speed, "mofel_a2")] == 0
        assert 0 < nfc[(low, "mofel_a1")] < nfc[(high, "mofel_a1")]


def test_a1_completes_fewer_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    # Execute / Assert: paper - A1's NTC decreases from 5 to 30 m/min, every seed
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel_a1", "ntc") < _at(
            result, seed, low, "mofel_a1", "ntc"
        )


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL disagrees: with per-client speeds U(1 m/min, v_max) some clients are "
    "always slow enough to finish, and A2 takes all of them at every fixed interval, so "
    "its NTC does not fall with v_max (ci, seeds 0-1: 35.5 at 2 and at 10 m/s; small, "
    "seeds 0-2: 116.0 and 115.7)",
)
def test_a2_completes_fewer_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    # Execute / Assert: paper - A2's NTC decreases from 5 to 30 m/min, every seed
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel_a2", "ntc") < _at(
            result, seed, low, "mofel_a2", "ntc"
        )


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL disagrees: A2 starts a cycle at every interval with every client that "
    "can finish (with per-client speeds some always can), MoFeL's station waits within "
    "Delta for more clients per cycle (eq. 1 read as most servers, then most clients, "
    "then earliest start); small, seeds 0-2, 10 m/s: MoFeL 102.0 +- 4.1 vs A2 115.7 "
    "+- 0.5, fewer in every seed; ci seeds 0-1: not in every seed",
)
def test_mofel_completes_at_least_as_many_cycles_as_a2_at_high_speed(result):
    # Prepare
    high = mofel_002.SCALES["ci"].speeds[-1]
    # Execute / Assert: paper - MoFeL performs more training cycles than A2 at 30 m/min
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel", "ntc") >= _at(result, seed, high, "mofel_a2", "ntc")
