"""The regime map (analysis/regime_map.py): winners, margins and contenders per column from a
leaderboard; the two-threshold rule drawn on training columns, worked by hand; held-out
columns scored without drawing it; the files written."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.regime_map import (
    Rule,
    X,
    Y,
    column_outcomes,
    fit_rule,
    score_rule,
    write_regime_map,
)


def _board(rows):
    return pd.DataFrame([
        {"column": c, "variant": v, "policy": p, "final_acc": a, "contender": k,
         "status": "ok"} for c, v, p, a, k in rows])


BOARD = _board([
    # column,  variant,           policy,           acc,  contender
    ("A", "skew=iid", "dpsgd", 0.80, True), ("A", "skew=iid", "cached_lru", 0.78, True),
    ("A", "skew=iid", "central_fedavg", 0.90, False),
    ("B", "skew=shards", "dpsgd", 0.40, False), ("B", "skew=shards", "cached_lru", 0.55, True),
    ("C", "mobility=static", "dpsgd", 0.30, True), ("C", "mobility=static", "cached_lru", 0.29,
                                                   True),
    ("D", "heldout:x", "dpsgd", 0.35, False), ("D", "heldout:x", "cached_lru", 0.60, True),
])
DESCRIPTORS = pd.DataFrame({
    "column": ["A", "B", "C", "D"],
    "neighbours_per_step": [2.0, 2.0, 0.1, 3.0],
    "label_skew": [0.05, 0.8, 0.8, 0.7],
})


def test_outcomes_name_the_winner_without_the_oracle_and_its_margin():
    got = column_outcomes(BOARD, DESCRIPTORS).set_index("column")
    # A: central FedAvg (0.90) is the oracle, left out: dpsgd 0.80 over cached_lru 0.78
    assert got.loc["A", "winner"] == "dpsgd"
    assert got.loc["A", "margin_pp"] == pytest.approx(2.0)
    assert got.loc["B", "contenders"] == "cached_lru"
    assert bool(got.loc["D", "heldout"]) and not bool(got.loc["A", "heldout"])


def test_the_rule_is_drawn_on_training_columns_and_worked_by_hand():
    # Prepare: training columns A (2.0, 0.05: dpsgd), B (2.0, 0.8: cached_lru),
    # C (0.1, 0.8: dpsgd). Candidate cuts: x 1.05; y 0.425. Regimes: A hi,lo -> dpsgd;
    # B hi,hi -> cached_lru; C lo,hi -> dpsgd: 3 of 3 exact
    outcomes = column_outcomes(BOARD, DESCRIPTORS)
    train = outcomes[~outcomes["heldout"]]
    # Execute
    rule = fit_rule(train)
    # Assert
    assert (rule.x_cut, rule.y_cut) == (pytest.approx(1.05), pytest.approx(0.425))
    assert rule.predict == {"hi,lo": "dpsgd", "hi,hi": "cached_lru", "lo,hi": "dpsgd"}
    assert (rule.train_hits, rule.train_n) == (3, 3)
    assert "**cached_lru** where contacts per agent per step above 1.05" in rule.text()
    # D (3.0, 0.7) is held out: hi,hi -> cached_lru, its winner
    scores = score_rule(rule, outcomes[outcomes["heldout"]])
    assert scores == {"n": 1, "unmeasured": 0, "exact": 1, "contender": 1, "exact_rate": 1.0,
                      "contender_rate": 1.0}


def test_a_world_without_descriptors_gets_no_prediction_and_is_not_scored():
    # Prepare: a rule, and three worlds of which one has no measured contact rate (a
    # mobility that follows the learning cannot be described without training)
    rule = Rule(x_cut=1.0, y_cut=0.5, predict={"lo,lo": "a", "lo,hi": "b", "hi,lo": "a",
                                                 "hi,hi": "a"}, train_hits=0, train_n=0)
    test = pd.DataFrame({X: [0.5, 2.0, np.nan], Y: [0.9, 0.1, 0.9],
                         "winner": ["b", "a", "b"], "contenders": ["b", "a;b", "b"]})
    # Execute
    scores = score_rule(rule, test)
    # Assert: NaN is no regime (a NaN compared with a cut would read as "lo" or "hi")
    assert rule(np.nan, 0.9) == "" and rule(0.5, np.nan) == ""
    assert (scores["n"], scores["unmeasured"], scores["exact"]) == (2, 1, 2)


def test_a_regime_without_training_columns_predicts_nothing():
    rule = Rule(x_cut=1.0, y_cut=0.5, predict={"hi,hi": "cached_lru"}, train_hits=1,
                train_n=1)
    assert rule(0.1, 0.1) == "" and rule(2.0, 0.9) == "cached_lru"


def test_the_map_files_are_written(tmp_path):
    # Prepare: a bench folder's two tables
    BOARD.to_csv(tmp_path / "leaderboard.csv", index=False)
    DESCRIPTORS.to_csv(tmp_path / "descriptors.csv", index=False)
    # Execute
    result = write_regime_map(tmp_path)
    # Assert
    saved = json.loads((tmp_path / "regime_rule.json").read_text())
    assert saved["heldout"]["exact"] == 1 and saved["text"] == result["text"]
    assert (tmp_path / "regime_map.png").stat().st_size > 1000
    table = pd.read_csv(tmp_path / "regime_map.csv")
    assert list(table["predicted"]) == ["dpsgd", "cached_lru", "dpsgd", "cached_lru"]
