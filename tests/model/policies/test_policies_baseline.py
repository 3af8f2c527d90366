"""Baseline exchange policies (local, dpsgd, fedavg_weighted, central_fedavg) and the
policy interface helpers (registry, combine_rows, apply_assignments)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from mobidfl.errors import ConfigError
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import partition_shards
from mobidfl.model.maths.mixing import dpsgd_weights, fedavg_weights
from mobidfl.model.policies import (
    POLICIES,
    AgentTable,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    apply_assignments,
    combine_rows,
    make_policy,
    register_policy,
)

U = 2.0**-24
"""float32's unit roundoff."""


def gamma(n: int) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``: an n-term float32 sum (or dot product) is within
    ``gamma_n * sum |terms|`` of the exact one, in any order (*Accuracy and Stability of
    Numerical Algorithms*, eq. 3.5); two orders are within twice that of each other."""
    return n * U / (1 - n * U)


SETTINGS = SimpleNamespace(mobility_alpha=0.0)


def table(engine) -> AgentTable:
    n = engine.n_agents
    return AgentTable(
        kind=np.array(["vehicle"] * n),
        speed=np.ones(n),
        data_size=engine.data_sizes,
        area=np.zeros(n, dtype=int),
        label_hist=engine.label_hist,
        hm=np.zeros(n, dtype=bool),
        pos=np.zeros((n, 2)),
    )


def context(engine, adjacency, members=None, step=1) -> ExchangeContext:
    members = np.arange(engine.n_agents) if members is None else np.asarray(members)
    return ExchangeContext(
        step=step,
        members=members,
        adjacency=sp.csr_matrix(adjacency),
        engine=engine,
        agents=table(engine),
        rng=np.random.default_rng(0),
    )


def make(ds, n=6, **kw):
    opts = dict(net="mlp", lr=0.05, batch_size=16, local_steps=2, seed=3, same_init=False)
    opts.update(kw)
    parts = partition_shards(ds.train_labels, n, rng=np.random.default_rng(0))
    return make_engine("loop", TrainingSettings(**opts), dataset=ds, parts=parts)


def complete(n: int) -> np.ndarray:
    return ~np.eye(n, dtype=bool)


def step(engine, policy, adjacency) -> Exchange:
    """One model step as the Mesa model runs it: train, exchange, mix, assign."""
    ctx = context(engine, adjacency)
    engine.train(mask=None)
    ex = policy.exchange(ctx)
    engine.mix(combine_rows([(ctx.members, ex)], engine.n_agents))
    apply_assignments(engine, [ex])
    return ex


def test_registry_lists_baselines_and_rejects_unknown_names():
    assert {"local", "dpsgd", "fedavg_weighted", "central_fedavg"} <= set(POLICIES)
    assert make_policy("dpsgd", settings=SETTINGS).settings is SETTINGS
    with pytest.raises(ConfigError, match="policy.*one of .*central_fedavg"):
        make_policy("gossip", settings=SETTINGS)
    with pytest.raises(ValueError, match="registered twice"):

        @register_policy
        class Other(ExchangePolicy):
            name = "dpsgd"

            def exchange(self, ctx):
                return Exchange()


def test_local_keeps_identity(ds300):
    e = make(ds300)
    ex = make_policy("local", settings=SETTINGS).exchange(context(e, complete(6)))
    assert ex.rows is None and not ex.assign
    assert (combine_rows([(np.arange(6), ex)], 6) != sp.identity(6)).nnz == 0


def test_dpsgd_and_fedavg_rows_match_mixing_maths(ds300):
    # Prepare: members 0..3 only, a path 0-1-2-3-4-5
    e = make(ds300)
    adj = np.zeros((6, 6), dtype=bool)
    for i in range(5):
        adj[i, i + 1] = adj[i + 1, i] = True
    ctx = context(e, adj, members=np.arange(4))
    # Execute
    d = make_policy("dpsgd", settings=SETTINGS).exchange(ctx)
    f = make_policy("fedavg_weighted", settings=SETTINGS).exchange(ctx)
    # Assert
    a = sp.csr_matrix(adj)
    assert abs(d.rows - dpsgd_weights(a, np.arange(4))).max() == 0
    assert abs(f.rows - fedavg_weights(a, e.data_sizes, np.arange(4))).max() == 0
    assert d.metrics["degree_mean"] == pytest.approx(1.5)  # 1, 2, 2, 1 member neighbours


def test_central_fedavg_makes_members_identical_and_spares_others(ds300):
    # Prepare: members 0..4; agent 5 is not
    e = make(ds300)
    ctx = context(e, np.zeros((6, 6), dtype=bool), members=np.arange(5))
    keep = e.snapshot(5)
    w = e.data_sizes[:5] / e.data_sizes[:5].sum()
    expected = sum(float(w[i]) * e.params[0][i] for i in range(5))
    # two orders of a 5-term float32 weighted sum, +1 term for the weights' rounding
    bound = 2 * gamma(6) * sum(float(w[i]) * e.params[0][i].abs() for i in range(5))
    # Execute
    ex = make_policy("central_fedavg", settings=SETTINGS).exchange(ctx)
    e.mix(combine_rows([(ctx.members, ex)], 6))
    apply_assignments(e, [ex])
    # Assert: all members hold the data-size weighted average, agent 5 untouched
    for p in e.params:
        for i in range(1, 5):
            assert torch.equal(p[i], p[0])
    # element-wise Higham bound (was rtol=1e-5, atol=1e-6 whatever the magnitudes)
    assert bool(((e.params[0][0] - expected).abs() <= bound).all())
    assert all(torch.equal(a, b) for a, b in zip(keep, e.snapshot(5), strict=True))


def test_combine_rows_stacks_groups_and_rejects_overlap():
    # Prepare: group A = {0, 1} averages, group B = {2} local, agent 3 in no group
    rows_a = sp.csr_matrix(
        np.array([[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1, 0], [0.25, 0.25, 0.25, 0.25]])
    )
    groups = [(np.array([0, 1]), Exchange(rows=rows_a)), (np.array([2]), Exchange())]
    # Execute
    w = combine_rows(groups, 4).toarray()
    # Assert: only members' rows are taken; others are the identity
    np.testing.assert_allclose(w, [[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    with pytest.raises(ValueError, match="argument .members. = 1 .*exactly one policy group"):
        combine_rows([(np.array([0, 1]), Exchange()), (np.array([1]), Exchange())], 4)


def test_dpsgd_full_mixing_beats_local_training_on_shards(ds300):
    # Prepare: 10 agents on Cached-DFL shards (1-4 shards each, mostly 1-2 labels)
    engines = {
        name: make(ds300, n=10, local_steps=10, batch_size=16, lr=0.05, same_init=True)
        for name in ("local", "dpsgd")
    }
    # Execute: 6 rounds, everybody meets everybody (complete contact graph)
    for name, e in engines.items():
        policy = make_policy(name, settings=SETTINGS)
        for _ in range(6):
            step(e, policy, complete(10))
    # Assert
    acc_local = engines["local"].evaluate()[0].mean()
    acc_dpsgd = engines["dpsgd"].evaluate()[0].mean()
    assert acc_local < 0.45
    assert acc_dpsgd > acc_local + 0.25
