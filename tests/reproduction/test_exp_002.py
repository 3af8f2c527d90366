"""MoFeL (Macedo et al., Sensors 2023) at ``mobidfl reproduce mofel_002 --scale ci``: the
directions of Table 2.

The preset ``mofel_002`` (1-min steps, tau_n ~ U(1, 20) min, speeds the paper's times 20/3),
100 clients, 160 steps, at the paper's 5 and 30 m/min; NTC = cycles all of whose started
clients finished; two seeds.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.reproduce_ci import effects, run_ci, value

PAPER = "mofel_002"
SEEDS = (0, 1)
SPEEDS = (5, 30)  # the paper's v_max in m/min (variant names)


@pytest.fixture(scope="module")
def per_run(tmp_path_factory) -> pd.DataFrame:
    return run_ci(PAPER, seeds=SEEDS, folder=tmp_path_factory.mktemp(PAPER))


def test_mofel_and_a2_frustrate_no_client_a1_more_at_higher_speed(per_run):
    # Assert: paper Table 2 text - MoFeL and A2 keep NFC at 0; A1's grows with speed
    assert (effects(PAPER, per_run, "MoFeL frustrates no client at 5") == 0).all()
    assert (effects(PAPER, per_run, "MoFeL frustrates no client at 30") == 0).all()
    assert (effects(PAPER, per_run, "A1's NFC grows with speed") > 0).all()
    for seed in SEEDS:
        for speed in SPEEDS:
            assert value(per_run, f"A2 {speed}", seed, "nfc") == 0
        assert value(per_run, "A1 5", seed, "nfc") > 0


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL's NTC counts a cycle only when every client that started it finished; "
    "A1 draws 10 random connected clients and at least one always leaves, so A1's NTC is 0 "
    "at both speeds (ci seeds 0-1; small seeds 0-2: 0.7 and 0.0). Its aggregated cycles "
    "(complete + partial) do fall: test_a1_aggregates_fewer_cycles_at_higher_speed",
)
def test_a1_completes_fewer_cycles_at_higher_speed(per_run):
    # Execute / Assert: paper - A1's NTC decreases from 5 to 30 m/min, every seed
    for seed in SEEDS:
        assert value(per_run, "A1 30", seed, "ntc") < value(per_run, "A1 5", seed, "ntc")


def test_a1_aggregates_fewer_cycles_at_higher_speed(per_run):
    def aggregated(seed: int, speed: int) -> float:
        return value(per_run, f"A1 {speed}", seed, "ntc") + value(
            per_run, f"A1 {speed}", seed, "ntc_partial"
        )

    # Execute / Assert: fewer of A1's cycles keep any client to the end at 30 m/min
    for seed in SEEDS:
        assert aggregated(seed, 30) < aggregated(seed, 5)


def test_a2_completes_fewer_cycles_at_higher_speed(per_run):
    # Execute / Assert: paper - A2's NTC decreases from 5 to 30 m/min, every seed
    for seed in SEEDS:
        assert value(per_run, "A2 30", seed, "ntc") < value(per_run, "A2 5", seed, "ntc")


def test_mofel_completes_more_cycles_than_a1_and_a2(per_run):
    # Execute / Assert: paper - MoFeL performs more training cycles than A1 and A2 at
    # 30 m/min, and than A2 at 5 m/min
    for claim in ("than A2 at 30", "than A1 at 30", "than A2 at 5"):
        assert (effects(PAPER, per_run, claim) > 0).all(), claim


def test_mofel_completes_more_cycles_at_higher_speed(per_run):
    # Execute / Assert: paper - "an increase in NTC in MoFeL between 5 and 30 m/min": at
    # 30 m/min fewer clients stay long, and the station picks shorter cycles of them
    assert (effects(PAPER, per_run, "MoFeL's NTC grows with speed") > 0).all()
