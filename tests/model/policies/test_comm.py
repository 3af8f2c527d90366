"""Communication counted everywhere: the maths of accuracy over bytes, bytes to target and
the accuracy-bytes Pareto front (analysis/comm.py), on numbers computed by hand, and the
messages the policies count at the ideal link (model/policies/base.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mobidfl.analysis.comm import (
    PER_AGENT,
    accuracy_over_bytes,
    bytes_to_target,
    cumulative_per_agent,
    pareto_front,
)
from mobidfl.model.policies.base import SERVER, Exchange, Messages, exchange_messages


# --- analysis/comm.py ------------------------------------------------------------------------
def test_cumulative_per_agent_is_the_running_sum_over_the_agents():
    table = pd.DataFrame({"bytes_sent": [0.0, 400.0, 200.0, 600.0]})
    # 0, 400, 600, 1200 bytes in all, over 4 agents
    np.testing.assert_array_equal(cumulative_per_agent(table, agents=4), [0, 100, 150, 300])
    assert np.isnan(cumulative_per_agent(table.drop(columns="bytes_sent"), agents=4)).all()
    unknown = pd.DataFrame({"bytes_sent": [0.0, 400.0, np.nan, 600.0]})
    got = cumulative_per_agent(unknown, agents=4)
    assert got[1] == 100 and np.isnan(got[2:]).all()  # unknown stays unknown


def _curve(acc, sent):
    return pd.DataFrame({"time_s": np.arange(len(acc)) * 60.0, "acc_mean": acc,
                         PER_AGENT: sent})


def test_bytes_to_target_counts_the_seeds_that_never_reach_it():
    curves = {
        1: _curve([0.2, 0.5, 0.7, 0.8], [0.0, 1e6, 2e6, 3e6]),  # 0.7 first at 2 MB
        2: _curve([0.3, 0.75, 0.8, 0.9], [0.0, 4e6, 8e6, 12e6]),  # at 4 MB
        3: _curve([0.1, 0.2, 0.3, 0.4], [0.0, 1e6, 2e6, 3e6]),  # never
    }
    targets = pd.Series({1: 0.7, 2: 0.7, 3: 0.7})
    got = bytes_to_target(curves, targets)
    # median of (2 MB, 4 MB, +inf) = 4 MB; 2 of 3 reached it
    assert (got.median, got.reached, got.n) == (4e6, 2, 3)
    assert (got.fastest, got.slowest) == (2e6, 4e6)
    # two of three never: the median is never
    assert bytes_to_target(curves, pd.Series({1: 0.95, 2: 0.7, 3: 0.7})).median == math.inf


def test_bytes_to_target_leaves_out_unknown_bytes_and_seeds_without_a_target():
    curves = {
        1: _curve([0.5, 0.8], [0.0, 2e6]),
        2: _curve([0.5, 0.8], [0.0, np.nan]),  # bytes unknown: not "never"
        3: _curve([0.5, 0.8], [0.0, 6e6]),
        4: pd.DataFrame({"time_s": [0.0], "acc_mean": [0.9]}),  # a run made before bytes
    }
    got = bytes_to_target(curves, pd.Series({1: 0.8, 2: 0.8, 3: 0.8, 4: 0.8}))
    assert (got.n, got.reached, got.median) == (2, 2, 4e6)  # median of 2 MB and 6 MB
    none = bytes_to_target(curves, pd.Series({1: math.nan}))
    assert none.n == 0 and math.isnan(none.median)


def test_pareto_front_keeps_what_no_other_point_beats_on_both():
    #               local  dpsgd  cached  psfl  worse  twin-of-dpsgd
    cost = np.array([0.0, 10.0, 40.0, 30.0, 50.0, 10.0])
    value = np.array([0.2, 0.6, 0.8, 0.7, 0.75, 0.6])
    # psfl (30, 0.7) is not beaten: cached costs more; worse (50, 0.75) is beaten by cached
    # (40, 0.8); equal points (dpsgd and its twin) do not dominate each other
    np.testing.assert_array_equal(pareto_front(cost, value),
                                  [True, True, True, True, False, True])


def test_pareto_front_ignores_unknown_points_and_checks_shapes():
    cost = np.array([np.nan, 5.0, 8.0])
    value = np.array([0.99, 0.5, 0.4])
    # the unknown point neither sits on the front nor dominates; (8, 0.4) is beaten by (5, 0.5)
    np.testing.assert_array_equal(pareto_front(cost, value), [False, True, False])
    with pytest.raises(ValueError, match="one of each"):
        pareto_front([1.0, 2.0], [0.5])


def test_accuracy_over_bytes_is_the_mean_over_seeds_at_each_evaluation():
    curves = pd.DataFrame({
        "column": ["w"] * 4, "policy": ["dpsgd"] * 4, "seed": [0, 0, 1, 1],
        "time_s": [60.0, 120.0, 60.0, 120.0], "acc_mean": [0.4, 0.6, 0.5, 0.8],
        PER_AGENT: [1e6, 2e6, 3e6, np.nan],
    })
    got = accuracy_over_bytes(curves)
    # at 60 s: bytes (1 + 3) / 2 MB, accuracy (0.4 + 0.5) / 2; at 120 s only seed 0 is known
    assert got[PER_AGENT].tolist() == [2e6, 2e6]
    assert got["acc_mean"].tolist() == pytest.approx([0.45, 0.6])


# --- messages at the ideal link --------------------------------------------------------------
def test_messages_between_count_each_side_and_not_the_server():
    got = Messages.between(4, [0, 1, SERVER], [2, SERVER, 3])
    np.testing.assert_array_equal(got.sent, [1, 1, 0, 0])  # the server sent the third
    np.testing.assert_array_equal(got.received, [0, 0, 1, 1])  # and got the second
    swap = Messages.swapped(3, np.array([[0, 1], [1, 2]]), count=[1.0, 3.0])
    np.testing.assert_array_equal(swap.sent, [1, 4, 3])
    np.testing.assert_array_equal(swap.received, [1, 4, 3])


def test_exchange_messages_read_rows_when_a_policy_does_not_count():
    n = 4
    # members 0-2 mix: 0 averages with 1, 1 with 0 and 2; agent 3 is another group's
    rows = sp.csr_matrix(np.array([[0.5, 0.5, 0, 0], [0.3, 0.4, 0.3, 0], [0, 0, 1, 0],
                                   [0, 0, 0, 1]]))
    counted = Exchange(messages=Messages.between(n, [SERVER], [3]))
    got = exchange_messages([(np.array([0, 1, 2]), Exchange(rows=rows)),
                             (np.array([3]), counted)], n)
    # rows: 1 -> 0, 0 -> 1, 2 -> 1; counted: one download to 3
    np.testing.assert_array_equal(got.sent, [1, 1, 1, 0])
    np.testing.assert_array_equal(got.received, [1, 2, 0, 1])
    silent = exchange_messages([(np.array([0, 1]), Exchange(assign={0: ()})),
                                (np.array([2, 3]), Exchange())], n)
    assert np.isnan(silent.sent[:2]).all() and (silent.sent[2:] == 0).all()  # never a silent 0


def _ctx(adjacency: np.ndarray, speed: np.ndarray | None = None):
    from mobidfl.model.policies import AgentTable, ExchangeContext

    n = adjacency.shape[0]
    agents = AgentTable(kind=np.array(["pedestrian"] * n), data_size=np.full(n, 10),
                        speed=np.zeros(n) if speed is None else speed,
                        area=np.zeros(n, int), label_hist=np.ones((n, 2)),
                        hm=np.zeros(n, bool), pos=np.zeros((n, 2)))
    return ExchangeContext(step=1, members=np.arange(n), adjacency=sp.csr_matrix(adjacency),
                           engine=None, agents=agents, rng=np.random.default_rng(0))


PATH = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], bool)  # 0 - 1 - 2


def test_mobility_aware_counts_the_models_swapped_even_at_weight_zero():
    from types import SimpleNamespace

    from mobidfl.model.policies.mobility_aware import MobilityAwarePolicy

    # alpha = 1 and standing neighbours: the weight of a neighbour's model is 0, yet it was sent
    policy = MobilityAwarePolicy(settings=SimpleNamespace(**{"mobility_aware.alpha": 1.0}))
    ex = policy.exchange(_ctx(PATH, speed=np.array([0.0, 1.0, 0.0])))
    assert ex.rows[1, 0] == 0 and ex.rows[1, 2] == 0  # row 1 would say nothing arrived
    np.testing.assert_array_equal(ex.messages.sent, [1, 2, 1])  # 2 pairs, one model each way
    np.testing.assert_array_equal(ex.messages.received, [1, 2, 1])


def test_defedavg_counts_one_model_per_agent_that_met_somebody():
    from types import SimpleNamespace

    from mobidfl.model.policies.defedavg import DeFedAvgPolicy

    ex = DeFedAvgPolicy(settings=SimpleNamespace(seed=0)).exchange(_ctx(PATH))
    # each of the three gets its one peer's model; 1 is the only peer of 0 and of 2
    np.testing.assert_array_equal(ex.messages.received, [1, 1, 1])
    assert ex.messages.sent[1] >= 2 and ex.messages.sent.sum() == 3
