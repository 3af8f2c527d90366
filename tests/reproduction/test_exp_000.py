"""de Heredia 2024 (``mobidfl reproduce mobility_000 --scale ci``): the thesis' directions."""

from __future__ import annotations

import pytest

from tests.reproduce_ci import effects, run_ci

PAPER = "mobility_000"


@pytest.fixture(scope="module")
def per_run(tmp_path_factory):
    return run_ci(PAPER, seeds=(0,), folder=tmp_path_factory.mktemp(PAPER))


def test_more_high_mobility_clients_raise_accuracy(per_run):
    # Table 1: final accuracy at p = 0.8 above p = 0 (plain D-PSGD)
    assert (effects(PAPER, per_run, "gain of p = 80 %") > 0).all()


def test_high_mobility_clients_lead_and_meet_more(per_run):
    # Table 2 / App. B: HM ahead of LM at p = 0.05; HM met more distinct clients
    assert (effects(PAPER, per_run, "HM clients more accurate than LM") > 0).all()
    assert (effects(PAPER, per_run, "meet more distinct clients") > 0).all()


def test_naive_mobility_aware_weights_cost_accuracy(per_run):
    # Table 7: alpha = 1 ends below plain averaging at p = 0.2
    assert (effects(PAPER, per_run, "naive mobility-aware weights") < 0).all()
