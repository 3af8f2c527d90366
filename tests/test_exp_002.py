"""MoFeL (Macedo et al., Sensors 2023) experiment at CI size: the directions of Table 2.

The preset ``mofel_002`` (1-min steps, tau_n ~ U(1, 20) min, speeds the paper's times 20/3),
100 clients, 160 steps, at the paper's 5 and 30 m/min; NTC = cycles all of whose started
clients finished; two seeds (measured: 39 s of CPU, 2.9 min wall at load ~4).
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


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL's NTC counts a cycle only when every client that started it finished; "
    "A1 draws 10 random connected clients and at least one always leaves, so A1's NTC is 0 "
    "at both speeds (ci seeds 0-1; small seeds 0-2: 0.7 and 0.0). Its aggregated cycles "
    "(complete + partial) do fall: test_a1_aggregates_fewer_cycles_at_higher_speed",
)
def test_a1_completes_fewer_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    # Execute / Assert: paper - A1's NTC decreases from 5 to 30 m/min, every seed
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel_a1", "ntc") < _at(
            result, seed, low, "mofel_a1", "ntc"
        )


def test_a1_aggregates_fewer_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds

    def aggregated(seed: int, speed: float) -> float:
        return _at(result, seed, speed, "mofel_a1", "ntc") + _at(
            result, seed, speed, "mofel_a1", "ntc_partial"
        )

    # Execute / Assert: fewer of A1's cycles keep any client to the end at 30 m/min
    for seed in SEEDS:
        assert aggregated(seed, high) < aggregated(seed, low)


def test_a2_completes_fewer_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    # Execute / Assert: paper - A2's NTC decreases from 5 to 30 m/min, every seed
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel_a2", "ntc") < _at(
            result, seed, low, "mofel_a2", "ntc"
        )


def test_mofel_completes_at_least_as_many_cycles_as_a2_at_high_speed(result):
    # Prepare
    high = mofel_002.SCALES["ci"].speeds[-1]
    # Execute / Assert: paper - MoFeL performs more training cycles than A2 at 30 m/min
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel", "ntc") >= _at(result, seed, high, "mofel_a2", "ntc")


def test_mofel_completes_more_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    # Execute / Assert: paper - "an increase in NTC in MoFeL between 5 and 30 m/min": at
    # 30 m/min fewer clients stay long, and the station picks shorter cycles of them
    for seed in SEEDS:
        assert _at(result, seed, high, "mofel", "ntc") > _at(result, seed, low, "mofel", "ntc")
