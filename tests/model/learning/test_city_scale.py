"""A city that learns: the shared partition, the memory estimate and block-wise mixing."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from mobidfl.errors import ConfigError
from mobidfl.model.learning.params import mix_columns, mix_stacks, mixing_operator
from mobidfl.model.learning.partition import (
    MIN_SHARD_SIZE,
    label_histograms,
    make_partition,
    partition_shards,
    partition_shards_resampled,
    shard_counts,
)


def _labels(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 10, n)


@pytest.mark.parametrize("seed", [0, 1])
def test_shards_resampled_gives_a_fleet_larger_than_the_data_the_shard_skew(seed):
    labels = _labels(4000, seed)  # mnist5k's 4,000 training images, 10,000 cars
    parts = partition_shards_resampled(labels, 10_000, rng=np.random.default_rng(seed))
    sizes = np.array([p.size for p in parts])
    # 4/3/2/1 shards of MIN_SHARD_SIZE samples: 10 % / 20 % / 30 % / 40 % of the cars
    assert sorted(np.unique(sizes // MIN_SHARD_SIZE, return_counts=True)[1]) == [
        1000, 2000, 3000, 4000]
    assert sizes.sum() == 2 * 10_000 * MIN_SHARD_SIZE
    hist = label_histograms(labels, parts, 10)
    # each shard holds one label: a car has at most as many labels as shards
    assert ((hist > 0).sum(1) <= sizes // MIN_SHARD_SIZE).all()
    # the labels' shares are the data set's (virtual shards cut the sorted labels)
    share = hist.sum(0) / hist.sum()
    assert np.abs(share - np.bincount(labels, minlength=10) / labels.size).max() < 0.002
    flat = np.concatenate(parts)
    assert flat.min() >= 0 and flat.max() < labels.size
    assert np.unique(flat).size > 0.95 * labels.size  # with replacement: nearly all used
    again = partition_shards_resampled(labels, 10_000, rng=np.random.default_rng(seed))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_shards_resampled_keeps_the_shard_size_of_shards_when_the_data_suffice():
    labels = _labels(60_000, 3)
    parts = partition_shards_resampled(labels, 100, rng=np.random.default_rng(0))
    plain = partition_shards(labels, 100, rng=np.random.default_rng(0))
    assert sorted(p.size for p in parts) == sorted(p.size for p in plain)  # 300 a shard
    assert {p.size // 300 for p in parts} == set(shard_counts(100).tolist())


def test_a_fleet_larger_than_the_data_is_refused_naming_the_shared_partition():
    labels = _labels(4000, 0)
    for name in ("iid", "shards", "dirichlet"):
        with pytest.raises(ConfigError, match="partition = shards_resampled"):
            make_partition(name, labels, 10_000, rng=np.random.default_rng(0))
    assert len(make_partition("shards_resampled", labels, 10_000,
                              rng=np.random.default_rng(0))) == 10_000  # fmt: skip


def test_memory_estimate_counts_one_stack_and_shared_snapshots_once():
    import mobidfl.model.world  # noqa: F401 - registers the policies
    from mobidfl.model.bounds import AGENT_BASE_BYTES, RECORD_BYTES, estimate_memory_bytes
    from mobidfl.model.config import Config

    base = Config().updated({
        "map": "manhattan_cdfl", "vehicles": 10_000, "pedestrians": 0, "sensors": 0,
        "uavs": 0, "model": "mlp", "dataset": "fashion_mnist", "test_size": 1000,
        "partition": "shards_resampled", "steps": 20, "record_every": 10,
    })  # fmt: skip
    n, p = 10_000, 101_770  # the MLP's parameters
    fixed = n * (AGENT_BASE_BYTES + RECORD_BYTES * 4) + 4 * 784 * 61_000
    dpsgd = estimate_memory_bytes(base.updated(policy="dpsgd"))
    assert dpsgd == fixed + 4 * p * n  # one stack, no mixing copy, no optimiser state
    assert dpsgd < 4.5e9  # the 10k-car MLP fleet: 4.3 GB, under the 8 GB goal
    momentum = estimate_memory_bytes(base.updated(policy="dpsgd", momentum=0.9))
    assert momentum - dpsgd == 4 * p * n
    cached = estimate_memory_bytes(base.updated(policy="cached_lru"))
    # own + cached snapshots of tau_max - 1 = 4 epochs (C_max = 10 is no bound); the
    # aggregated models are written one at a time
    assert cached - dpsgd == 4 * p * n * (1 + 4)
    short = estimate_memory_bytes(base.updated(policy="cached_lru", tau_max=2))
    assert short - dpsgd == 4 * p * n * (1 + 1)
    small = estimate_memory_bytes(base.updated(policy="cached_lru", cache_size=2))
    assert small - dpsgd == 4 * p * n * (1 + 2)


def _snapshot_bytes(policy) -> tuple[int, int]:
    """Distinct snapshots the caches hold and their bytes (each storage counted once)."""
    payloads = {id(e.payload): e.payload for c in policy.caches.values() for e in c.values()}
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for snap in payloads.values() for t in snap}  # fmt: skip
    return len(payloads), sum(storages.values())


@pytest.mark.parametrize("tau_max", [2, 3])
def test_cached_dfl_snapshot_bound_is_reached_and_never_exceeded(tau_max):
    """Cars that meet a new peer every epoch (a perfect matching, i XOR m) cache a distinct
    snapshot of each of the last tau_max epochs: the estimate is what is really held."""
    from types import SimpleNamespace

    import mobidfl.model.world  # noqa: F401 - registers the policies
    from mobidfl.model.learning.data import load_dataset
    from mobidfl.model.learning.engine import TrainingSettings, make_engine
    from mobidfl.model.learning.partition import partition_iid
    from mobidfl.model.policies import AgentTable, ExchangeContext, apply_assignments, make_policy
    from mobidfl.plugins import POLICIES

    n = 16
    ds = load_dataset("digits", root=None, test_size=20, seed=0)
    parts = partition_iid(ds.train_labels[: 20 * n], n, rng=np.random.default_rng(0))
    training = TrainingSettings(net="mlp", lr=0.05, batch_size=8, local_steps=1, seed=0,
                                same_init=False)
    engine = make_engine("loop", training, dataset=ds, parts=parts)
    agents = AgentTable(kind=np.array(["vehicle"] * n), speed=np.ones(n),
                        data_size=engine.data_sizes, area=np.zeros(n, int),
                        label_hist=engine.label_hist, hm=np.zeros(n, bool),
                        pos=np.zeros((n, 2)))  # fmt: skip
    settings = SimpleNamespace(cache_size=10, tau_max=tau_max, seed=0)
    policy = make_policy("cached_lru", settings=settings)
    policy.setup(members=np.arange(n), engine=engine, agents=agents, rng=np.random.default_rng(0))
    estimate = 4 * engine.num_params * n * POLICIES["cached_lru"].held_models(settings)
    stack = {p.untyped_storage().data_ptr() for p in engine.params}
    held = []
    for t in range(1, 8):
        i = np.arange(n)
        pairs = np.stack([i, i ^ t], axis=1)
        pairs = pairs[pairs[:, 0] < pairs[:, 1]]
        ctx = ExchangeContext(step=t, members=i, adjacency=sp.csr_matrix((n, n)), engine=engine,
                              agents=agents, rng=np.random.default_rng(0),
                              encounters=(pairs, np.zeros(len(pairs))))  # fmt: skip
        apply_assignments(engine, [policy.exchange(ctx)])
        count, nbytes = _snapshot_bytes(policy)
        assert nbytes == count * 4 * engine.num_params  # whole copies, none sharing a stack
        assert not stack & {t.untyped_storage().data_ptr()
                            for c in policy.caches.values() for e in c.values()
                            for t in e.payload}  # fmt: skip
        assert nbytes <= estimate
        held.append(nbytes)
    assert held[tau_max:] == [estimate] * (7 - tau_max)  # reached: the bound is exact


def test_cached_dfl_holds_no_more_distinct_snapshots_than_estimated():
    from mobidfl.model.world import MobiDFLModel
    from mobidfl.plugins import POLICIES

    model = MobiDFLModel(map="manhattan_cdfl", vehicles=150, pedestrians=0, sensors=0, uavs=0,
                         model="mlp", dataset="digits", partition="shards_resampled",
                         policy="cached_lru", test_size=50, eval_every=100, steps=10,
                         record_every=100, workers=1, seed=0)  # fmt: skip
    policy = model.learner.policies["cached_lru"][0]
    # after an exchange the caches hold tau_max epochs, the fresh one included (own)
    bound = POLICIES["cached_lru"].held_models(model.config)
    size = 4 * model.learner.engine.num_params
    held = []
    for _ in range(4):
        model.step()
        count, nbytes = _snapshot_bytes(policy)
        entries = sum(len(c) for c in policy.caches.values())
        held.append(count / 150)
        assert nbytes == count * size <= 150 * bound * size
        assert entries > 1.5 * count  # entries share snapshots: counted once
    assert max(held) > 0.5  # the caches do fill


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_mixing_by_column_blocks_is_bit_identical_to_one_matmul(parts):
    n = 300
    rng = np.random.default_rng(parts)
    adj = sp.random(n, n, density=0.01, random_state=1, format="csr")
    adj = ((adj + adj.T) > 0).astype(np.float32) + sp.eye(n, dtype=np.float32)
    w = sp.csr_matrix(sp.diags(1 / np.asarray(adj.sum(1)).ravel()) @ adj, dtype=np.float32)
    width = mix_columns(n)
    stacks = [torch.from_numpy(rng.standard_normal((n, 3 * width + 5)).astype(np.float32)),
              torch.from_numpy(rng.standard_normal((n, 7)).astype(np.float32))]  # fmt: skip
    wt = mixing_operator(w)
    expected = [wt @ s for s in stacks]
    for part in range(parts):
        mix_stacks(stacks, w, device=torch.device("cpu"), part=part, parts=parts)
    for got, want in zip(stacks, expected, strict=True):
        assert torch.equal(got, want)
