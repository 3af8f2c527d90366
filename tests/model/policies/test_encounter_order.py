"""Cached-DFL (Wang et al., AAAI 2025): encounters inside an epoch are applied in time order."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from mobidfl.model.contacts import contact_matrix, contact_times
from mobidfl.model.learning.data import load_dataset
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import partition_iid
from mobidfl.model.policies import AgentTable, ExchangeContext, make_policy
from mobidfl.model.policies.cached import encounter_order
from mobidfl.model.world import MobiDFLModel


# --- contact_times ----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_contact_times_pairs_equal_contact_matrix_pairs(seed):
    # Prepare: 60 agents moving on random straight-ish paths, 6 sub-intervals
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.normal(0.0, 40.0, (7, 60, 2)), axis=0)
    trajectory = rng.uniform(0, 1000, (1, 60, 2)) + steps
    # Execute
    pairs, times = contact_times(trajectory, radius_m=100.0, mode="during")
    adjacency = contact_matrix(trajectory, radius_m=100.0, mode="during")
    # Assert: same pairs as the adjacency, one time each in [0, 1]
    upper = sp.triu(adjacency, k=1).tocoo()
    expected = sorted(zip(upper.row.tolist(), upper.col.tolist(), strict=True))
    assert sorted(map(tuple, pairs.tolist())) == expected
    assert len(expected) > 10
    assert ((times >= 0) & (times <= 1)).all()


def test_contact_time_is_the_moment_the_pair_enters_range():
    # Prepare: two agents approach head-on along x at 10 m/s each over one sub-interval:
    # gap 500 m at t = 0, 300 m at t = 1 -> never in range; a second interval to 100 m;
    # third pair starts in range.
    trajectory = np.array(
        [
            [[0.0, 0.0], [500.0, 0.0], [0.0, 900.0], [50.0, 900.0]],
            [[100.0, 0.0], [400.0, 0.0], [0.0, 900.0], [50.0, 900.0]],
            [[200.0, 0.0], [300.0, 0.0], [0.0, 900.0], [50.0, 900.0]],
        ]
    )
    # Execute
    pairs, times = contact_times(trajectory, radius_m=150.0, mode="during")
    # Assert: gap 300 -> 100 over the 2nd half: 150 m reached 3/4 of the way -> 0.5 + 0.375
    got = dict(zip(map(tuple, pairs.tolist()), times.tolist(), strict=True))
    assert got[(0, 1)] == pytest.approx(0.5 + 0.75 * 0.5)
    assert got[(2, 3)] == 0.0
    assert set(got) == {(0, 1), (2, 3)}


def test_encounter_order_sorts_by_time_and_keeps_members_only():
    # Prepare
    pairs = np.array([[0, 1], [1, 2], [2, 3], [0, 3]])
    times = np.array([0.9, 0.1, 0.5, 0.2])
    # Execute
    order = encounter_order(pairs, times, np.array([0, 1, 2]), np.random.default_rng(0))
    # Assert: agent 3 is not a member; the rest earliest first
    assert order.tolist() == [[1, 2], [0, 1]]


# --- a relay chain inside one epoch --------------------------------------------------------------
@pytest.fixture(scope="module")
def engine():
    ds = load_dataset("mnist5k", root=None, test_size=50, seed=0)
    parts = partition_iid(ds.train_labels[:300], 3, rng=np.random.default_rng(0))
    return make_engine(
        "loop",
        TrainingSettings(net="mlp", lr=0.05, batch_size=8, local_steps=1, seed=0, same_init=False),
        dataset=ds,
        parts=parts,
    )


def _relay(engine, times: list[float]):
    """A=0 meets B=1 at times[0], B meets C=2 at times[1]; returns C's cache origins."""
    n = 3
    adjacency = np.zeros((n, n), bool)
    adjacency[0, 1] = adjacency[1, 0] = adjacency[1, 2] = adjacency[2, 1] = True
    ctx = ExchangeContext(
        step=1,
        members=np.arange(n),
        adjacency=sp.csr_matrix(adjacency),
        engine=engine,
        agents=AgentTable(
            kind=np.array(["vehicle"] * n),
            speed=np.ones(n),
            data_size=engine.data_sizes,
            area=np.zeros(n, int),
            label_hist=engine.label_hist,
            hm=np.zeros(n, bool),
            pos=np.zeros((n, 2)),
        ),
        rng=np.random.default_rng(0),
        encounters=(np.array([[0, 1], [1, 2]]), np.array(times)),
    )
    policy = make_policy("cached_lru", settings=SimpleNamespace(cache_size=5, tau_max=3, seed=0))
    policy.setup(members=ctx.members, engine=engine, agents=ctx.agents, rng=ctx.rng)
    ex = policy.exchange(ctx)
    return set(policy.caches[2]), ex


@pytest.mark.parametrize("seed_times", [(0.2, 0.7), (0.0, 0.01)])
def test_relay_a_b_then_b_c_carries_a_model_to_c(engine, seed_times):
    # Prepare / Execute: A meets B first, then B meets C
    origins, ex = _relay(engine, list(seed_times))
    # Assert: C caches B's model and, through B's cache, A's model
    assert origins == {0, 1}
    own = engine.snapshot(2)
    assert not all(torch.equal(a, b) for a, b in zip(ex.assign[2], own, strict=True))


def test_relay_in_the_reverse_order_does_not_reach_c(engine):
    # Prepare / Execute: B meets C first, then A meets B
    origins, _ = _relay(engine, [0.7, 0.2])
    # Assert: C only has B's model
    assert origins == {1}


def test_model_passes_time_ordered_encounters_to_the_cache_policy():
    # Prepare: a real run on the street grid, contacts during the step
    model = MobiDFLModel(
        map="grid:4x4:100",
        vehicles=10,
        pedestrians=0,
        sensors=0,
        uavs=0,
        steps=1,
        policy="cached_lru",
        contact="during",
        step_s=60.0,
        radius_m=60.0,
        local_steps=1,
        batch_size=8,
        test_size=50,
        partition="iid",
        seed=2,
    )
    # Execute
    model.step()
    # Assert: the encounters are exactly this step's contacts, with times
    pairs, times = model.encounters
    upper = sp.triu(model.adjacency, k=1).tocoo()
    assert sorted(map(tuple, pairs.tolist())) == sorted(
        zip(upper.row.tolist(), upper.col.tolist(), strict=True)
    )
    assert len(pairs) > 0 and ((times >= 0) & (times <= 1)).all()
