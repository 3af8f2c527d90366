"""Policies of de Heredia 2024 (mobility_aware) and Cached-DFL (cached_lru, cached_group_lru,
defedavg)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from mobidfl.errors import ConfigError
from mobidfl.model.checkpoint import load, save_atomic
from mobidfl.model.learning.data import load_dataset
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import partition_shards
from mobidfl.model.maths.mixing import check_row_stochastic, dpsgd_weights
from mobidfl.model.policies import AgentTable, ExchangeContext, make_policy
from mobidfl.model.policies.cached import even_group_limits, parse_group_limits
from mobidfl.model.policies.defedavg import pairwise_rows
from mobidfl.model.world import MobiDFLModel
from tests.worlds import NO_AGENTS

U = 2.0**-24
"""float32's unit roundoff."""


def gamma(n: int) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``: an n-term float32 sum (or dot product) is within
    ``gamma_n * sum |terms|`` of the exact one, in any order (*Accuracy and Stability of
    Numerical Algorithms*, eq. 3.5); two orders are within twice that of each other."""
    return n * U / (1 - n * U)

TINY = dict(local_steps=1, batch_size=8, test_size=60, eval_every=1)
WALKERS = {**NO_AGENTS, "map": "nyc_uws", "pedestrians": 10,
           "pedestrian.mobility": "random_walk"}


def path_graph(n: int) -> sp.csr_matrix:
    a = np.zeros((n, n), dtype=bool)
    for i in range(n - 1):
        a[i, i + 1] = a[i + 1, i] = True
    return sp.csr_matrix(a)


def context(adjacency, *, speed=None, sizes=None, members=None, engine=None) -> ExchangeContext:
    n = adjacency.shape[0]
    return ExchangeContext(
        step=1,
        members=np.arange(n) if members is None else np.asarray(members),
        adjacency=sp.csr_matrix(adjacency),
        engine=engine,
        agents=AgentTable(
            kind=np.array(["pedestrian"] * n),
            speed=np.ones(n) if speed is None else np.asarray(speed, float),
            data_size=np.full(n, 10) if sizes is None else np.asarray(sizes),
            area=np.zeros(n, dtype=int),
            label_hist=np.zeros((n, 10)),
            hm=np.zeros(n, dtype=bool),
            pos=np.zeros((n, 2)),
        ),
        rng=np.random.default_rng(0),
    )


# --- de Heredia 2024: mobility-aware weights -----------------------------------------------------
def test_mobility_aware_rows_equal_hand_computed_case():
    # Prepare: path 0-1-2 with speeds 1, 2, 3 and alpha = 0.5 (de Heredia 2024, Sec. 5.4)
    ctx = context(path_graph(3), speed=[1.0, 2.0, 3.0])
    policy = make_policy("mobility_aware", settings=SimpleNamespace(mobility_alpha=0.5))
    # W_ij = 1/N + alpha (s_j / sum_{M_i} s - 1/N), M_i = neighbours + i
    third = 1 / 3
    expected = np.array(
        [
            [0.5 + 0.5 * (1 / 3 - 0.5), 0.5 + 0.5 * (2 / 3 - 0.5), 0.0],
            [third + 0.5 * (x / 6 - third) for x in (1, 2, 3)],
            [0.0, 0.5 + 0.5 * (2 / 5 - 0.5), 0.5 + 0.5 * (3 / 5 - 0.5)],
        ]
    )
    # Execute
    w = policy.exchange(ctx).rows.toarray()
    # Assert
    # float64 entries <= 1, each <= 6 roundings in the policy and <= 4 in the literal above:
    # 10 u = 1.1e-15 (u = 2**-53); a row's sum adds 3 x 6 u + gamma_2: 2.2e-15. Both: 1e-14
    # (was 1e-12)
    np.testing.assert_allclose(w, expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-14)  # 2.2e-15 (above)
    assert w[1, 2] > w[1, 1] > w[1, 0]  # faster neighbours weigh more


def test_mobility_aware_alpha_zero_rows_are_dpsgd_exactly():
    # Prepare: a random contact graph and random speeds
    rng = np.random.default_rng(4)
    upper = np.triu(rng.random((12, 12)) < 0.3, 1)
    adj = sp.csr_matrix(upper | upper.T)
    ctx = context(adj, speed=rng.uniform(0, 5, 12), members=np.arange(10))
    # Execute
    ma = make_policy("mobility_aware", settings=SimpleNamespace(mobility_alpha=0.0))
    rows = ma.exchange(ctx).rows
    # Assert: bit-identical to D-PSGD (de Heredia 2024: alpha = 0 devolves into plain averaging)
    plain = dpsgd_weights(adj, np.arange(10))
    assert (rows != plain).nnz == 0
    check_row_stochastic(rows, adj)


def test_mobility_aware_alpha_zero_run_equals_dpsgd_run_and_alpha_one_differs():
    # Prepare: the same seed, random-walk pedestrians with random speeds
    common = dict(WALKERS, hm_fraction=0.3, steps=3, seed=2, **TINY)
    # Execute
    plain = MobiDFLModel(policy="dpsgd", **common).run()
    zero = MobiDFLModel(policy="mobility_aware", mobility_alpha=0.0, **common).run()
    one = MobiDFLModel(policy="mobility_aware", mobility_alpha=1.0, **common).run()
    # Assert
    assert plain.adjacency.nnz > 0
    for a, b in zip(plain.learner.engine.params, zero.learner.engine.params, strict=True):
        assert torch.equal(a, b)
    assert not all(
        torch.equal(a, b)
        for a, b in zip(plain.learner.engine.params, one.learner.engine.params, strict=True)
    )


def test_hm_lm_columns_exist_and_match_agent_arrays():
    # Prepare: half of the walkers are high-mobility (de Heredia 2024, p = 0.5)
    model = MobiDFLModel(policy="dpsgd", hm_fraction=0.5, steps=2, seed=1, **WALKERS, **TINY)
    # Execute
    model.run()
    last = model.model_table().iloc[-1]
    # Assert
    hm = model.hm
    assert hm.sum() == 5
    assert model.speed[hm].min() > model.speed[~hm].max()  # HM faster than every LM
    assert last["acc_hm"] == pytest.approx(float(np.mean(model.accuracy[hm])))
    assert last["acc_lm"] == pytest.approx(float(np.mean(model.accuracy[~hm])))
    assert last["hm_lm_gap"] == pytest.approx(last["acc_hm"] - last["acc_lm"])
    assert last["distinct_neighbours_hm"] == pytest.approx(model.distinct_neighbours[hm].mean())
    assert last["distinct_neighbours_lm"] == pytest.approx(model.distinct_neighbours[~hm].mean())
    # without both classes there is no gap column
    only_lm = MobiDFLModel(policy="dpsgd", hm_fraction=0.0, steps=1, **WALKERS, **TINY).run()
    assert "hm_lm_gap" not in only_lm.model_table()


# --- Cached-DFL: DeFedAvg baseline ------------------------------------------------------------
def test_defedavg_averages_with_one_met_peer_weighted_by_data_size():
    # Prepare: star 0-{1,2,3}, agent 4 isolated, agent 5 met 3 but is not a member
    a = np.zeros((6, 6), dtype=bool)
    for j in (1, 2, 3):
        a[0, j] = a[j, 0] = True
    a[3, 5] = a[5, 3] = True
    sizes = np.array([10, 30, 20, 40, 5, 7])
    members = np.arange(5)
    # Execute
    w, peer = pairwise_rows(sp.csr_matrix(a), sizes, members, rng=np.random.default_rng(1))
    dense = w.toarray()
    # Assert
    assert peer[0] in (1, 2, 3) and peer[1] == 0 and peer[2] == 0 and peer[3] == 0
    assert peer[4] == -1 and peer[5] == -1  # isolated; non-member
    for i in range(4):
        j = peer[i]
        assert dense[i, i] == pytest.approx(sizes[i] / (sizes[i] + sizes[j]))
        assert dense[i, j] == pytest.approx(sizes[j] / (sizes[i] + sizes[j]))
        assert np.count_nonzero(dense[i]) == 2  # one peer only, unlike dpsgd/fedavg_weighted
    np.testing.assert_array_equal(dense[4:], np.eye(6)[4:])
    check_row_stochastic(w, sp.csr_matrix(a))
    # every neighbour of the hub can be drawn
    drawn = {
        int(pairwise_rows(sp.csr_matrix(a), sizes, members, rng=np.random.default_rng(s))[1][0])
        for s in range(40)
    }
    assert drawn == {1, 2, 3}


# --- Cached-DFL: cached policies in real runs ------------------------------------------------
def cached_run(policy: str, **settings) -> MobiDFLModel:
    base = dict(vehicles=12, steps=6, seed=3, policy=policy, cache_size=3, tau_max=2, **TINY)
    base.update(settings)
    return MobiDFLModel(**base)


def record_snapshots(model: MobiDFLModel) -> dict[tuple[int, int], tuple]:
    """Wrap engine.snapshot to remember every tuple it hands out, by (agent, step)."""
    engine = model.learner.engine
    original = engine.snapshot
    made: dict[tuple[int, int], tuple] = {}

    def snapshot(i: int):
        snap = original(i)
        made[(int(i), int(model.steps))] = snap
        return snap

    engine.snapshot = snapshot
    return made


@pytest.mark.parametrize(
    ("step_s", "cache_size"),
    [(120.0, 3), (10.0, 11)],  # dense contacts overfill C_max; sparse ones leave stale models
)
def test_cached_lru_bounds_and_shares_snapshots_in_a_real_run(step_s, cache_size):
    # Prepare: 12 cars on the bundled map, tau_max = 2
    model = cached_run("cached_lru", step_s=step_s, cache_size=cache_size)
    made = record_snapshots(model)
    policy = model.learner.policies["cached_lru"][0]
    sizes = model.learner.engine.data_sizes
    largest, oldest = 0, 0
    for _ in range(6):
        # Execute
        model.step()
        t = model.steps
        # Assert: Alg. 2 bounds (C_max, staleness < tau_max = 2) hold after every step
        for owner, cache in policy.caches.items():
            largest = max(largest, len(cache))
            assert len(cache) <= cache_size
            for origin, entry in cache.items():
                assert origin != owner and entry.origin == origin
                assert 0 <= t - entry.timestamp < 2
                oldest = max(oldest, t - entry.timestamp)
                assert entry.size == sizes[origin]
                assert entry.payload is made[(origin, entry.timestamp)]  # no copy
    if cache_size == 3:
        assert largest == 3  # the size limit was reached
    else:
        assert oldest == 1  # the staleness limit was reached
    # Alg. 1 line 11: agent's model = data-size weighted mean of own + cached models
    owner, cache = max(policy.caches.items(), key=lambda kv: len(kv[1]))
    entries = list(cache.values())
    snaps = [made[(owner, t)], *(e.payload for e in entries)]
    weights = np.array([sizes[owner], *(e.size for e in entries)], float)
    weights /= weights.sum()
    for layer, p in enumerate(model.learner.engine.params):
        expected = sum(float(w) * s[layer] for w, s in zip(weights, snaps, strict=True))
        # two orders of a K-term float32 weighted sum, +1 for the weights' rounding (Higham;
        # was rtol=1e-5, atol=1e-6 whatever the magnitudes)
        magnitude = sum(float(w) * s[layer].abs() for w, s in zip(weights, snaps, strict=True))
        bound = 2 * gamma(len(snaps) + 1) * magnitude
        assert bool(((p[owner] - expected).abs() <= bound).all())
    table = model.model_table()
    assert {"cache_size_mean", "cache_age_mean"} <= set(table.columns)
    assert table.cache_size_mean.iloc[-1] == pytest.approx(
        np.mean([len(c) for c in policy.caches.values()])
    )


def test_cached_group_lru_keeps_each_area_within_its_limit():
    # Prepare: area-restricted cars (2 free), sub-caches 2/1/1 for the three home areas
    model = cached_run(
        "cached_group_lru",
        **{"vehicle.mobility": "area_restricted"},
        area_free=2,
        areas=3,
        cache_groups="2,1,1",
        tau_max=3,
    )
    policy = model.learner.policies["cached_group_lru"][0]
    made = record_snapshots(model)
    seen_groups = set()
    for _ in range(4):
        # Execute
        model.step()
        # Assert
        for cache in policy.caches.values():
            counts = np.bincount([e.group for e in cache.values()], minlength=3)
            assert (counts <= np.array([2, 1, 1])).all()
            for origin, entry in cache.items():
                assert entry.group == model.area[origin]
                assert model.steps - entry.timestamp < 3
                assert entry.payload is made[(origin, entry.timestamp)]
                seen_groups.add(entry.group)
    assert seen_groups == {0, 1, 2}


def test_group_limits_even_split_and_errors():
    assert even_group_limits(10, 3) == [4, 3, 3]
    assert parse_group_limits("", cache_size=7, groups=2) == [4, 3]
    assert parse_group_limits("5,0,1", cache_size=10, groups=3) == [5, 0, 1]
    with pytest.raises(ConfigError, match="cache_groups.*3 non-negative"):
        parse_group_limits("4,3", cache_size=10, groups=3)
    with pytest.raises(ConfigError, match="cache_groups"):
        parse_group_limits("a,b,c", cache_size=10, groups=3)


# --- checkpoints -----------------------------------------------------------------------------
def test_cached_state_round_trip_restores_caches_and_sharing(tmp_path):
    # Prepare: a cache state after a few real steps
    model = cached_run("cached_lru", steps=3).run()
    policy = model.learner.policies["cached_lru"][0]
    path = save_atomic(policy.state_dict(), tmp_path / "cache.pt")
    # Execute
    fresh = make_policy("cached_lru", settings=model.config)
    fresh.load_state_dict(load(path))
    # Assert: same entries, equal tensors, and shared payloads shared again
    assert set(fresh.caches) == set(policy.caches)
    payloads = {}
    for owner, cache in policy.caches.items():
        restored = fresh.caches[owner]
        assert [(e.origin, e.timestamp, e.size) for e in cache.values()] == [
            (e.origin, e.timestamp, e.size) for e in restored.values()
        ]
        for e, r in zip(cache.values(), restored.values(), strict=True):
            assert all(torch.equal(a, b) for a, b in zip(e.payload, r.payload, strict=True))
            key = (e.origin, e.timestamp)
            assert payloads.setdefault(key, r.payload) is r.payload
    assert sum(len(c) for c in policy.caches.values()) > len(payloads)  # sharing existed
    raw = torch.load(path, weights_only=True)
    assert raw["format"] == 1


@pytest.mark.parametrize("policy", ["cached_lru", "defedavg"])
def test_resumed_run_equals_uninterrupted_run(tmp_path, policy):
    # Prepare
    straight = cached_run(policy).run()
    first = cached_run(policy)
    first.run(steps=3)
    path = save_atomic(first.state_dict(), tmp_path / "state.pt")
    # Execute
    resumed = cached_run(policy)
    resumed.load_state_dict(load(path))
    resumed.run()
    # Assert
    pd.testing.assert_frame_equal(resumed.model_table(), straight.model_table())
    for a, b in zip(resumed.learner.engine.params, straight.learner.engine.params, strict=True):
        assert torch.equal(a, b)


def test_policies_leave_mobility_untouched():
    # Prepare / Execute: the same seed under three policies
    runs = [cached_run(p, steps=3).run() for p in ("cached_lru", "defedavg", "dpsgd")]
    # Assert: identical trajectories and contacts (paired comparisons)
    for other in runs[1:]:
        np.testing.assert_array_equal(other.position, runs[0].position)
        assert (other.met != runs[0].met).nnz == 0


def test_cached_policy_engine_level_aggregation_weights():
    # Prepare: an engine with 3 agents, agent 0 met 1 and 2 (cache size 1 keeps the newest)
    ds = load_dataset("mnist5k", root=None, test_size=50, seed=0)
    parts = partition_shards(ds.train_labels, 3, rng=np.random.default_rng(0))
    engine = make_engine(
        "loop",
        TrainingSettings(net="mlp", lr=0.05, batch_size=8, local_steps=1, seed=0, same_init=False),
        dataset=ds,
        parts=parts,
    )
    settings = SimpleNamespace(cache_size=1, tau_max=3, seed=0)
    policy = make_policy("cached_lru", settings=settings)
    a = np.zeros((3, 3), dtype=bool)
    a[0, 1] = a[1, 0] = a[0, 2] = a[2, 0] = True
    ctx = context(a, sizes=engine.data_sizes, engine=engine)
    policy.setup(members=ctx.members, engine=engine, agents=ctx.agents, rng=ctx.rng)
    before = [engine.snapshot(i) for i in range(3)]
    # Execute
    ex = policy.exchange(ctx)
    # Assert: each cache holds one model; 0 averages with exactly the one it kept
    assert all(len(c) == 1 for c in policy.caches.values())
    kept = next(iter(policy.caches[0].values())).origin
    n = engine.data_sizes
    w0 = n[0] / (n[0] + n[kept])
    for layer in range(len(before[0])):
        expected = w0 * before[0][layer] + (1 - w0) * before[kept][layer]
        # two orders of a 2-term weighted sum, +1 for the weights' rounding (Higham; was
        # rtol=1e-5, atol=1e-6 whatever the magnitudes)
        magnitude = w0 * before[0][layer].abs() + (1 - w0) * before[kept][layer].abs()
        bound = 2 * gamma(3) * magnitude
        assert bool(((ex.assign[0][layer] - expected).abs() <= bound).all())
    assert ex.metrics["cache_size_mean"] == 1.0 and ex.metrics["cache_age_mean"] == 0.0
