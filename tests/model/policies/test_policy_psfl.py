"""The ``psfl`` policy (PSFL, Alg. 1) and the ★ walker, in real runs and by hand."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from mobidfl.agents.mobility import MobilityContext, make_mobility
from mobidfl.agents.mobility.distribution import area_label_lists
from mobidfl.agents.mobility.walker import area_layout, rectangle_areas, snake_order
from mobidfl.errors import ConfigError
from mobidfl.maps.world import WorldMap
from mobidfl.model.checkpoint import load, save_atomic
from mobidfl.model.config import Config
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import partition_area
from mobidfl.model.maths.psfl import gradient_field
from mobidfl.model.policies import AgentTable, ExchangeContext, apply_assignments, make_policy
from mobidfl.model.world import MobiDFLModel

TINY = {
    "map": "grid:4x5:100",  # 400 m x 300 m: 4 x 3 = 12 cells of 100 m
    "cell_m": 100.0,
    "vehicles": 0,
    "pedestrians": 0,
    "uavs": 0,
    "sensors": 12,
    "sensor.mobility": "psfl_walker",
    "areas": 3,
    "radius_m": 150.0,
    "contact": "end",
    "policy": "psfl",
    "partition": "area",
    "local_steps": 2,
    "batch_size": 16,
    "test_size": 200,
    "seed": 1,
    "psfl_loss": "mean",  # these tests were written on eq. 3's mean scale
    "area_labels": "0,1,2;3,4,5,6;7,8,9",
}


def _path_error(graph, ds, parent, node) -> tuple[float, int]:
    """Sum of ds(i, parent(i)) along the parent chain from ``node``; returns (sum, root)."""
    total, hops = 0.0, 0
    while parent[node] >= 0:
        nxt = int(parent[node])
        span = slice(graph.indptr[node], graph.indptr[node + 1])
        k = graph.indptr[node] + int(np.flatnonzero(graph.indices[span] == nxt)[0])
        total += float(ds[k])
        node, hops = nxt, hops + 1
        assert hops <= graph.n, "parent pointers form a cycle"
    return total, node


def test_no_member_follows_a_leader_beyond_sigma_in_a_real_run():
    # Prepare: a sigma small enough that some candidacies exceed it early on
    sigma = 2.0
    model = MobiDFLModel(**TINY, psfl_sigma=sigma, steps=5)
    policy = model.learner.policies["psfl"][0]
    bound_mattered = False
    for _ in range(5):
        # Execute
        model.step()
        graph, ds, field = policy.last_graph, policy.last_ds, policy.last_field
        # Assert: every assigned member's path error to its leader, re-summed edge by edge
        # along the parent pointers, is <= sigma and ends at the leader it follows
        for node in np.flatnonzero(field.leader_of >= 0):
            total, root = _path_error(graph, ds, field.parent, int(node))
            assert root == field.leader_of[node]
            assert total == pytest.approx(field.G[node], abs=1e-9)
            assert total <= sigma + 1e-9
        unbounded = gradient_field(graph, ds, policy.state.is_leader, sigma=None)
        bound_mattered |= bool((unbounded.G[np.isfinite(unbounded.G)] > sigma).any())
        assert model.policy_metrics["unassigned"] == float((field.leader_of < 0).sum())
    assert bound_mattered, "sigma never excluded a candidacy: the test would be vacuous"


def test_metrics_reach_model_csv_and_match_the_policy_state():
    # Prepare / Execute
    model = MobiDFLModel(**TINY, psfl_sigma=5.0, steps=3).run()
    table = model.model_table()
    policy = model.learner.policies["psfl"][0]
    # Assert: declared metrics are columns; the last row equals the final policy state
    for name in policy.metric_names:
        assert name in table.columns
    leaders = policy.leader_of
    last = table.iloc[-1]
    assert last["federations"] == len(set(leaders[leaders >= 0].tolist()))
    wrong = sum(
        int(model.area[i] != model.area[leaders[i]]) for i in range(12) if leaders[i] >= 0
    )
    assert last["federation_errors"] == wrong
    assert 0.0 <= last["area_acc_mean"] <= 1.0
    assert np.isnan(last["leader_changes"])  # no moving node in this run


# --- a clean hand-made setting --------------------------------------------------------------
def _grid_adjacency(rows: int, cols: int) -> sp.csr_matrix:
    """8-neighbour contacts on a rows x cols lattice, node = r * cols + c."""
    n = rows * cols
    r, c = np.divmod(np.arange(n), cols)
    close = (np.abs(r[:, None] - r[None]) <= 1) & (np.abs(c[:, None] - c[None]) <= 1)
    np.fill_diagonal(close, False)
    return sp.csr_matrix(close)


@pytest.fixture(scope="module")
def specialised(ds300):
    """18 agents on a 3 x 6 lattice, 3 column-pair areas, one identical model per area."""
    rows, cols = 3, 6
    area = (np.arange(rows * cols) % cols) // 2
    parts = partition_area(
        ds300.train_labels, area, [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]],
        rng=np.random.default_rng(0),
    )
    engine = make_engine(
        "loop",
        TrainingSettings(net="mlp", lr=0.05, batch_size=16, local_steps=5, seed=0),
        dataset=ds300,
        parts=parts,
    )
    for _ in range(20):
        engine.train()
    for a in range(3):
        members = np.flatnonzero(area == a)
        average = engine.average(agents=members, weights=engine.data_sizes[members])
        for i in members:
            engine.set_agent(int(i), average)
    return engine, area, _grid_adjacency(rows, cols)


def _context(engine, area, adjacency, step) -> ExchangeContext:
    n = engine.n_agents
    table = AgentTable(
        kind=np.array(["sensor"] * n), speed=np.zeros(n), data_size=engine.data_sizes,
        area=area, label_hist=engine.label_hist, hm=np.zeros(n, bool), pos=np.zeros((n, 2)),
    )
    return ExchangeContext(
        step=step, members=np.arange(n), adjacency=adjacency, engine=engine, agents=table,
        rng=np.random.default_rng(0),
    )


def _elect(
    engine, area, adjacency, sigma: float, rounds: int = 8, scale: str = "mean",
    batches: float = 0.0,
):
    settings = SimpleNamespace(
        psfl_sigma=sigma, seed=0, psfl_loss=scale, psfl_loss_batch=64, psfl_loss_batches=batches
    )
    policy = make_policy("psfl", settings=settings)
    saved = engine.state_dict()
    try:
        for step in range(1, rounds + 1):
            ex = policy.exchange(_context(engine, area, adjacency, step))
            apply_assignments(engine, [ex])
        return policy, ex
    finally:
        engine.load_state_dict(saved)


def test_federations_match_areas_when_models_are_identical_within_areas(specialised):
    # Prepare: within an area ds = 2 L(own model, own data) is small, across areas large
    engine, area, adjacency = specialised
    # Execute
    policy, ex = _elect(engine, area, adjacency, sigma=4.0)
    # Assert
    assert ex.metrics["ds_intra_mean"] < 1.0
    assert ex.metrics["ds_inter_mean"] > 4.0  # sigma
    assert ex.metrics["federations"] == 3
    assert ex.metrics["federation_errors"] == 0
    assert ex.metrics["unassigned"] == 0
    leaders = policy.leader_of
    assert sorted(area[np.unique(leaders)].tolist()) == [0, 1, 2]
    assert (area[leaders] == area).all()


def test_eq3_dissimilarity_is_the_sum_of_both_cross_losses(specialised):
    # Prepare
    engine, area, adjacency = specialised
    # Execute: after the election models are unchanged (each federation already identical)
    policy, _ = _elect(engine, area, adjacency, sigma=4.0, rounds=1)
    graph, ds = policy.last_graph, policy.last_ds
    # Assert: ds(i, j) = L(D_i, nn_j) + L(D_j, nn_i) for a same-area and a cross-area edge
    for i, j in ((0, 1), (1, 2)):
        row = graph.indices[graph.indptr[i] : graph.indptr[i + 1]]
        k = graph.indptr[i] + int(np.flatnonzero(row == j)[0])
        everything = 10**6  # eq. 3 averages over all of D_i
        expected = engine.loss_of(j, on_agent=i, max_samples=everything) + engine.loss_of(
            i, on_agent=j, max_samples=everything
        )
        # the same losses through eq. 3's sum and through loss_of, each a float32 mean of the
        # same per-sample CEs in its own order: gamma_n = 1.5e-5 worst case at n = |D_i| ~ 260,
        # sqrt(n) u ~ 1e-6 typical; measured <= 4.4e-8 relative over make test-cpu-matrix's
        # 8 dispatches (MKL on AVX2; 3.6e-8 on the others)
        assert ds[k] == pytest.approx(expected, rel=1e-5)


def _batch_sum_oracle(engine, model: int, on_agent: int, batch: int = 64) -> float:
    """Sum of batch-mean losses, rebuilt from prefix means of ``engine.loss_of``."""
    n = int(engine.data_sizes[on_agent])
    cuts = [*range(0, n, batch), n]
    prefix = [0.0] + [
        m * engine.loss_of(model, on_agent=on_agent, max_samples=m) for m in cuts[1:]
    ]
    return sum((prefix[b + 1] - prefix[b]) / (cuts[b + 1] - cuts[b]) for b in range(len(cuts) - 1))


def test_eq3_at_the_authors_code_scale_sums_batch_means(specialised):
    # Prepare
    engine, area, adjacency = specialised
    assert (engine.data_sizes > 64).all()  # several batches per node, so the scales differ
    # Execute
    policy, _ = _elect(engine, area, adjacency, sigma=4.0, rounds=1, scale="batch_sum")
    mean_policy, _ = _elect(engine, area, adjacency, sigma=4.0, rounds=1, scale="mean")
    graph, ds = policy.last_graph, policy.last_ds
    # Assert: ds = batch-summed L_ij + L_ji (FLutils.evaluate with batch 64), several times
    # the mean-scale ds of the same edge
    for i, j in ((0, 1), (1, 2)):
        row = graph.indices[graph.indptr[i] : graph.indptr[i + 1]]
        k = graph.indptr[i] + int(np.flatnonzero(row == j)[0])
        expected = _batch_sum_oracle(engine, j, i) + _batch_sum_oracle(engine, i, j)
        # the oracle's prefix differences m_b L_b - m_a L_a cancel: float32 means of up to n
        # terms (gamma_n) times n / 64 of a batch (worst case ~1e-4 at n ~ 260); measured
        # <= 1.7e-7 relative over make test-cpu-matrix's 8 dispatches (MKL on AVX2; 3.2e-8
        # on the others)
        assert ds[k] == pytest.approx(expected, rel=1e-4)
        assert ds[k] > 2.5 * mean_policy.last_ds[k]


def test_eq3_over_a_fixed_batch_count_scales_every_edge_s_mean(specialised):
    # Prepare
    engine, area, adjacency = specialised
    # Execute: the paper's 4.5 batches vs eq. 3's mean, one round on the same models
    fixed, _ = _elect(engine, area, adjacency, sigma=4.0, rounds=1, scale="batch_sum",
                      batches=4.5)
    mean_policy, _ = _elect(engine, area, adjacency, sigma=4.0, rounds=1, scale="mean")
    # Assert: ds(i, j) = 4.5 (mean L_ij + mean L_ji) on every edge
    # the same float64 per-sample means on both sides (same models, same code path), scaled
    # by 4.5 before or after the sum L_ij + L_ji of non-negative terms: <= 4 roundings, 4 u
    # = 4.4e-16 relative (u = 2**-53; measured 2.2e-16): rtol 1e-15 (was 1e-6)
    np.testing.assert_allclose(fixed.last_ds, 4.5 * mean_policy.last_ds, rtol=1e-15)


def test_central_fedavg_scores_each_member_on_its_own_labels_like_psfl(specialised):
    # Prepare: the same engine scored by central FedAvg's own-label metric and by PSFL's
    engine, area, adjacency = specialised
    from mobidfl.model.policies.psfl import area_accuracy

    settings = SimpleNamespace(seed=0, partition="area", eval_every=1, steps=5)
    policy = make_policy("central_fedavg", settings=settings)
    saved = engine.state_dict()
    try:
        ctx = _context(engine, area, adjacency, 1)
        # Execute
        ex = policy.exchange(ctx)
        avg = next(iter(ex.assign.values()))
        expected = area_accuracy(engine, models={i: avg for i in range(engine.n_agents)})
    finally:
        engine.load_state_dict(saved)
    # Assert: the mean over members of the global model on each member's own labels
    assert ex.metrics["area_acc_mean"] == pytest.approx(float(np.nanmean(expected)))
    off = make_policy("central_fedavg", settings=SimpleNamespace(seed=0, partition="iid"))
    assert math.isnan(off.exchange(_context(engine, area, adjacency, 1)).metrics["area_acc_mean"])


def test_a_loose_sigma_merges_the_areas(specialised):
    # Prepare
    engine, area, adjacency = specialised
    # Execute: sigma far above every cross-area ds
    _, ex = _elect(engine, area, adjacency, sigma=1000.0)
    # Assert: one federation spanning all areas, 12 nodes misplaced w.r.t. its leader
    assert ex.metrics["federations"] == 1
    assert ex.metrics["federation_errors"] == 12


def test_bad_sigma_is_rejected():
    with pytest.raises(ConfigError, match="psfl_sigma"):
        make_policy("psfl", settings=SimpleNamespace(psfl_sigma=float("inf"), seed=0))


# --- the ★ walker ---------------------------------------------------------------------------
def test_area_layout_follows_the_paper_code():
    # Assert: floor(sqrt k) rows x ceil(k / rows) columns, surplus rectangles -> last area
    assert [area_layout(k) for k in (3, 5, 9)] == [(1, 3), (2, 3), (3, 3)]
    assert snake_order(9) == [0, 1, 2, 5, 4, 3, 6, 7, 8]
    assert snake_order(5) == [0, 1, 2, 4, 3]
    xy = np.array([[0.5, 0.5], [2.5, 0.5], [0.5, 1.5], [2.5, 1.5]])
    assert rectangle_areas(xy, bounds=(0, 0, 3, 2), k=5).tolist() == [0, 2, 3, 4]


def test_walker_visits_every_area_in_turn_and_stays_the_set_time():
    # Prepare: the paper's 7 x 8 field with 9 areas, 56 static sensors + the ★ node
    world = WorldMap.build("grid:8x9:100", cell_m=100.0, areas=9, seed=0)
    settings = Config(areas=9, psfl_walker=True, psfl_walker_stay=5, psfl_walker_speed=math.inf)
    rng = np.random.default_rng(0)
    mover = make_mobility(
        "psfl_walker", world=world, kind="sensor", count=57, settings=settings, rng=rng
    )
    start = mover.position.copy()
    ctx = MobilityContext(world=None, step_s=120.0, fractions=np.array([1.0]), rng=rng)
    # Execute
    visited = [int(mover.current_areas()[-1])]
    for _ in range(9 * 5 + 3):
        path = mover.advance(ctx)
        assert path.shape == (1, 57, 2)
        visited.append(int(mover.current_areas()[-1]))
    # Assert: static sensors fill 56 distinct cells and never move
    assert np.array_equal(mover.position[:56], start[:56])
    assert len({tuple(p) for p in start[:56].round(3)}) == 56
    # the ★ node sees every area, in the boustrophedon order, 5 step-ends each, then stays
    runs = [(a, len(list(g))) for a, g in itertools.groupby(visited)]
    assert [a for a, _ in runs] == snake_order(9)
    assert [n for _, n in runs[:-1]] == [5] * 8
    assert runs[-1][1] >= 5
    assert sorted(set(visited)) == list(range(9))
    # home areas are the rectangles: 6/4/6, 9/6/9, 6/4/6 sensors (the ★ node starts in 0)
    assert np.bincount(mover.home_area[:56]).tolist() == [6, 4, 6, 9, 6, 9, 6, 4, 6]


@pytest.mark.parametrize("speed", [0.2, 0.5])
def test_walker_travels_at_its_speed_and_stays_at_each_stop(speed):
    # Prepare: the paper's 7 x 8 field with 9 areas, the ★ node at `speed` cells per step
    world = WorldMap.build("grid:8x9:100", cell_m=100.0, areas=9, seed=0)
    settings = Config(areas=9, psfl_walker=True, psfl_walker_stay=5, psfl_walker_speed=speed)
    rng = np.random.default_rng(0)
    mover = make_mobility(
        "psfl_walker", world=world, kind="sensor", count=57, settings=settings, rng=rng
    )
    ctx = MobilityContext(world=None, step_s=120.0, fractions=np.array([0.5, 1.0]), rng=rng)
    stops = world.grid.centres(mover.stops)
    # Execute
    track = [mover.position[-1].copy()]
    for _ in range(400):
        mover.advance(ctx)
        track.append(mover.position[-1].copy())
    track = np.array(track)
    # Assert: never faster than the speed (no teleport), every area visited in snake order
    hops = np.hypot(*np.diff(track, axis=0).T)
    assert hops.max() <= speed * 100.0 + 1e-9
    areas = mover.area_of(track)
    assert [a for a, _ in itertools.groupby(areas.tolist())] == snake_order(9)
    # at every stop but the last it stands still exactly `stay` step-ends, then leaves
    at_stop = [np.flatnonzero(np.hypot(*(track - s).T) < 1e-9) for s in stops]
    assert [len(t) for t in at_stop[:-1]] == [5] * 8
    # the tour length: travel + stays (the arrival step is the first of the 5), about the
    # paper's 140 steps at 0.2 cells per step
    legs = np.hypot(*np.diff(stops, axis=0).T)
    expected = int(np.ceil(legs / (speed * 100.0) - 1e-9).sum()) + 4 * 8
    assert at_stop[-1][0] == expected
    if speed == 0.2:
        assert 120 <= expected <= 160


def test_walker_senses_each_area_s_data_in_a_real_run():
    # Prepare: 12 sensors + the ★ node moving every step through the 3 areas
    model = MobiDFLModel(
        **(TINY | {"sensors": 13}), psfl_sigma=5.0, psfl_walker=True, psfl_walker_stay=1,
        psfl_walker_speed=math.inf, steps=4,
    )
    policy = model.learner.policies["psfl"][0]
    walker = int(policy.walkers[0])
    area_labels = area_label_lists(TINY["area_labels"], areas=3, num_classes=10)
    mobility = model.groups[0][2]
    seen = [int(mobility.current_areas()[-1])]
    assert set(np.flatnonzero(model.learner.engine.label_hist[walker])) <= set(area_labels[0])
    for _ in range(4):
        # Execute
        model.step()
        now = int(mobility.current_areas()[-1])
        held = np.flatnonzero(model.learner.engine.label_hist[walker]).tolist()
        seen.append(now)
        # Assert: the walker trains on its current area's labels only
        assert set(held) <= set(area_labels[now])
        assert policy.data_area[-1] == now
    assert sorted(set(seen)) == [0, 1, 2]
    assert len(policy.walker_leaders) == 4
    assert model.model_table()["leader_changes"].iloc[1:].notna().all()


def test_state_round_trip_resumes_exactly(tmp_path):
    # Prepare: a ★ run interrupted after 3 of 6 steps
    settings = TINY | {"sensors": 13, "psfl_walker": True, "psfl_walker_stay": 1}
    settings |= {"psfl_walker_speed": 1.0}  # moves across a border within the 6 steps
    settings |= {"psfl_sigma": 3.0, "steps": 6}
    straight = MobiDFLModel(**settings).run()
    first = MobiDFLModel(**settings)
    first.run(steps=3)
    path = save_atomic(first.state_dict(), tmp_path / "psfl.pt")
    raw = torch.load(path, weights_only=True)  # plain tensors and values only
    assert raw["learner"]["policies"]["psfl"]["format"] == 1
    # Execute
    resumed = MobiDFLModel(**settings)
    resumed.load_state_dict(load(path))
    resumed.run()
    # Assert
    a = straight.learner.policies["psfl"][0]
    b = resumed.learner.policies["psfl"][0]
    pd.testing.assert_frame_equal(resumed.model_table(), straight.model_table())
    assert np.array_equal(a.leader_of, b.leader_of)
    assert a.walker_leaders == b.walker_leaders
    assert np.array_equal(a.state.lead, b.state.lead)
    walker = int(a.walkers[0])
    assert np.array_equal(
        straight.learner.engine.parts[walker], resumed.learner.engine.parts[walker]
    )
