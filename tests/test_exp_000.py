"""de Heredia 2024 experiment at scale ``ci``: the direction of the thesis' effects only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analysis.experiments import mobility_000


@pytest.fixture(scope="module")
def rows():
    torch.set_num_threads(1)
    return mobility_000.run(scale="ci", seeds=(0,))


def cell(rows, p, alpha, column):
    return float(rows[(rows.p == p) & (rows.alpha == alpha)][column].mean())


def test_more_high_mobility_clients_raise_accuracy(rows):
    # Table 1: final accuracy at p = 0.8 above p = 0 (plain D-PSGD)
    assert cell(rows, 0.8, 0.0, "final_acc") > cell(rows, 0.0, 0.0, "final_acc")


def test_high_mobility_clients_lead_and_meet_more(rows):
    # Table 2 / App. B: HM ahead of LM at p = 0.05; HM met more distinct clients
    assert cell(rows, 0.05, 0.0, "gap_throughout") > 0
    assert cell(rows, 0.05, 0.0, "distinct_hm") > cell(rows, 0.05, 0.0, "distinct_lm")


def test_naive_mobility_aware_weights_cost_accuracy(rows):
    # Table 4: alpha = 1 ends below plain averaging (mean over the proportions run)
    diffs = [
        cell(rows, p, 1.0, "final_acc") - cell(rows, p, 0.0, "final_acc")
        for p in mobility_000.SCALES["ci"].proportions
    ]
    assert np.mean(diffs) < 0
    assert mobility_000.tables(rows)  # the tables render from the rows
