"""Seed 002 experiment at CI size: only the directions of the paper's Table 2."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.experiments import mofel_002


@pytest.fixture(scope="module")
def result() -> pd.DataFrame:
    return mofel_002.run(scale="ci", seeds=(0,)).set_index(["speed", "policy"])


def _at(df: pd.DataFrame, speed: float, policy: str, column: str) -> float:
    return float(df.loc[(speed, policy), column])


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
    # Execute
    nfc = {(s, p): _at(result, s, p, "nfc") for s in (low, high) for p in mofel_002.POLICIES}
    # Assert: paper Table 2 text - MoFeL and A2 keep NFC at 0; A1's grows with speed
    for speed in (low, high):
        assert nfc[(speed, "mofel")] == 0
        assert nfc[(speed, "mofel_a2")] == 0
    assert 0 < nfc[(low, "mofel_a1")] < nfc[(high, "mofel_a1")]


def test_baselines_complete_fewer_cycles_at_higher_speed(result):
    # Prepare
    low, high = mofel_002.SCALES["ci"].speeds
    # Execute / Assert: paper - A1's and A2's NTC decrease from 5 to 30 m/min
    for policy in ("mofel_a1", "mofel_a2"):
        assert _at(result, high, policy, "ntc") < _at(result, low, policy, "ntc")


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL disagrees: MoFeL's station waits (up to one training time) for more "
    "clients per cycle, A2 starts at every interval with whoever can finish, so A2 "
    "completes more cycles (see the module docstring of mofel_002 and the report)",
)
def test_mofel_completes_at_least_as_many_cycles_as_a2_at_high_speed(result):
    # Prepare
    high = mofel_002.SCALES["ci"].speeds[-1]
    # Execute / Assert: paper - MoFeL performs more training cycles than A2 at 30 m/min
    assert _at(result, high, "mofel", "ntc") >= _at(result, high, "mofel_a2", "ntc")
