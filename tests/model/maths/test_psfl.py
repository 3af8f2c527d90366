"""Tests for mobidfl.model.maths.psfl (PSFL: eq. 3, G field, S election, eqs. 6-7)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from mobidfl.model.maths.psfl import (
    correctness,
    dissimilarity_edges,
    dissimilarity_matrix,
    edge_weights,
    elect_leaders,
    election_round,
    eq3_loss,
    fedavg_within,
    federation_count,
    federations,
    gradient_field,
    initial_election_state,
    leader_changes,
    to_graph,
)

LINE3 = [np.array([1]), np.array([0, 2]), np.array([1])]  # a - b - c


def _floyd(n: int, adj: list[np.ndarray], ds: np.ndarray) -> np.ndarray:
    """Oracle: all-pairs shortest accumulated ds, D[i, j] = min path error from i to j."""
    dist = np.full((n, n), np.inf)
    np.fill_diagonal(dist, 0.0)
    for i in range(n):
        for j in adj[i]:
            dist[i, j] = min(dist[i, j], ds[i, j])
    for k in range(n):
        dist = np.minimum(dist, dist[:, [k]] + dist[[k], :])
    return dist


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[np.ndarray], np.ndarray]:
    """Random symmetric neighbourhood with a symmetric non-negative ds (zeros allowed)."""
    n = draw(st.integers(min_value=1, max_value=12))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    values = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=50.0))
    ds = np.zeros((n, n))
    adj_sets: list[set[int]] = [set() for _ in range(n)]
    for i, j in chosen:
        ds[i, j] = ds[j, i] = draw(values)
        adj_sets[i].add(j)
        adj_sets[j].add(i)
    return n, [np.array(sorted(s), dtype=np.int64) for s in adj_sets], ds


# ------------------------------------------------------------------------------ eq. 3


def test_dissimilarity_is_symmetric_sum_of_cross_losses() -> None:
    # Prepare: asymmetric cross losses L[i, j] = L(D_i, nn_j).
    loss = np.array([[0.1, 2.0, 5.0], [1.0, 0.2, 0.5], [3.0, 0.25, 0.3]])
    # Execute
    ds = dissimilarity_matrix(loss)
    # Assert: eq. 3 entry by entry, symmetry, and ds(i, i) = 2 L_ii.
    assert ds[0, 1] == pytest.approx(2.0 + 1.0)
    assert ds[0, 2] == pytest.approx(5.0 + 3.0)
    assert ds[1, 2] == pytest.approx(0.5 + 0.25)
    np.testing.assert_array_equal(ds, ds.T)
    np.testing.assert_allclose(np.diag(ds), 2 * np.diag(loss))


def test_identical_models_on_identical_data_give_uniform_ds() -> None:
    # Prepare: every model scores the same loss on every (identical) dataset.
    loss = np.full((4, 4), 0.7)
    # Execute
    ds = dissimilarity_matrix(loss)
    zero = dissimilarity_matrix(np.zeros((4, 4)))
    # Assert: one value 2 L for every pair incl. the diagonal; 0 only for a perfect model.
    np.testing.assert_allclose(ds, 1.4)
    np.testing.assert_array_equal(zero, 0.0)


def test_dissimilarity_rejects_negative_loss_and_keeps_nan() -> None:
    # Prepare
    loss = np.array([[0.1, np.nan], [0.3, 0.2]])
    # Execute
    ds = dissimilarity_matrix(loss)
    # Assert: an unevaluated pair stays unknown; negative losses are refused.
    assert np.isnan(ds[0, 1]) and np.isnan(ds[1, 0])
    with pytest.raises(ValueError, match="loss"):
        dissimilarity_matrix(np.array([[0.0, -1.0], [0.0, 0.0]]))


def test_dissimilarity_edges_matches_dense_formula() -> None:
    # Prepare: random losses on a 4-cycle, evaluated only along edges.
    rng = np.random.default_rng(3)
    loss = rng.uniform(0, 4, (4, 4))
    adj = [np.array([1, 3]), np.array([0, 2]), np.array([1, 3]), np.array([0, 2])]
    graph = to_graph(adj)
    per_edge = loss[graph.rows, graph.indices]
    # Execute
    ds_edges = dissimilarity_edges(adj, per_edge)
    # Assert
    np.testing.assert_allclose(ds_edges, edge_weights(adj, dissimilarity_matrix(loss)))
    with pytest.raises(ValueError, match="asymmetric"):
        dissimilarity_edges([np.array([1]), np.array([], dtype=int)], np.array([1.0]))


def test_to_graph_accepts_sparse_and_drops_self_loops() -> None:
    # Prepare: sparse adjacency with a self-loop and an explicit zero entry.
    mat = sp.csr_array(
        (np.array([1.0, 0.0, 1.0, 1.0]), (np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]))),
        shape=(3, 3),
    )
    # Execute
    graph = to_graph(mat)
    # Assert: explicit zero (0 -> 1) is an edge; the self-loop 0 -> 0 is gone.
    np.testing.assert_array_equal(graph.indptr, [0, 1, 2, 3])
    np.testing.assert_array_equal(graph.indices, [1, 0, 1])


# ------------------------------------------------------------------------------ G field


def test_gradient_on_hand_made_line_equals_hand_sum() -> None:
    # Prepare: a - b - c, leader a, ds(a, b) = 1.5, ds(b, c) = 2.25 (paper's Sec. III-B example).
    ds = np.array([[0.0, 1.5, 0.0], [1.5, 0.0, 2.25], [0.0, 2.25, 0.0]])
    # Execute
    field = gradient_field(LINE3, ds, np.array([True, False, False]))
    # Assert: G(c) = ds(c, b) + ds(b, a).
    np.testing.assert_allclose(field.G, [0.0, 1.5, 3.75])
    np.testing.assert_array_equal(field.leader_of, [0, 0, 0])
    np.testing.assert_array_equal(field.parent, [-1, 0, 1])


def test_sigma_bound_drops_candidacies_beyond_sigma() -> None:
    # Prepare: same line; c's accumulated error 3.75 exceeds sigma = 3.
    ds = np.array([[0.0, 1.5, 0.0], [1.5, 0.0, 2.25], [0.0, 2.25, 0.0]])
    # Execute
    field = gradient_field(LINE3, ds, np.array([True, False, False]), sigma=3.0)
    # Assert: b joins (1.5 <= 3), c is in no federation.
    np.testing.assert_allclose(field.G, [0.0, 1.5, np.inf])
    np.testing.assert_array_equal(field.leader_of, [0, 0, -1])
    np.testing.assert_array_equal(field.parent, [-1, 0, -1])


def test_competition_prefers_lowest_error_then_lowest_leader_id() -> None:
    # Prepare: leaders 0 and 2 around node 1; then make 2 strictly closer.
    adj = LINE3
    tie = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    closer = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.5], [0.0, 0.5, 0.0]])
    leaders = np.array([True, False, True])
    # Execute
    tied = gradient_field(adj, tie, leaders)
    won = gradient_field(adj, closer, leaders)
    # Assert: tie -> lower id 0; lower accumulated error beats the lower id.
    assert tied.leader_of[1] == 0 and tied.parent[1] == 0
    assert won.leader_of[1] == 2 and won.G[1] == pytest.approx(0.5)


@settings(max_examples=80, deadline=None)
@given(graphs(), st.data())
def test_gradient_matches_shortest_paths_and_respects_sigma(case, data) -> None:
    # Prepare
    n, adj, ds = case
    leaders = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    sigma = data.draw(st.floats(min_value=0.0, max_value=60.0))
    oracle = _floyd(n, adj, ds)
    # Execute
    field = gradient_field(adj, ds, leaders, sigma=sigma)
    # Assert: nobody joins with accumulated error > sigma; G is the true nearest-leader
    # distance wherever that is <= sigma; the followed leader realises G; parents are
    # neighbours one hop closer.
    best = oracle[:, leaders].min(axis=1) if leaders.any() else np.full(n, np.inf)
    assigned = field.leader_of >= 0
    assert (field.G[assigned] <= sigma).all()
    np.testing.assert_array_equal(assigned, best <= sigma)
    # both are rounded sums along a shortest path of <= 11 non-negative float64 ds: each in
    # [G (1 - gamma_11), G (1 + gamma_11)] (Higham eq. 3.5, u = 2**-53), so apart by
    # <= 2 gamma_11 G = 2.5e-15 G; exact 0 for leaders (was rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(field.G[assigned], best[assigned], rtol=2.5e-15, atol=0)
    for i in np.flatnonzero(assigned):
        lead = field.leader_of[i]
        assert leaders[lead]
        assert oracle[i, lead] == pytest.approx(field.G[i], abs=1e-9)
        if not leaders[i]:
            p = field.parent[i]
            assert p in adj[i] and field.leader_of[p] == lead
            assert field.G[p] + ds[i, p] == pytest.approx(field.G[i], abs=1e-9)


# ------------------------------------------------------------------------------ election


def test_election_on_two_clusters_picks_lowest_ids() -> None:
    # Prepare: 0-1-2 and 3-4-5 with ds 1 inside, ds 100 on the bridge 2-3; sigma 10.
    adj = [
        np.array([1]),
        np.array([0, 2]),
        np.array([1, 3]),
        np.array([2, 4]),
        np.array([3, 5]),
        np.array([4]),
    ]
    ds = np.zeros((6, 6))
    for i, j, w in [(0, 1, 1), (1, 2, 1), (2, 3, 100), (3, 4, 1), (4, 5, 1)]:
        ds[i, j] = ds[j, i] = w
    # Execute
    plain = elect_leaders(adj, ds, 10.0)
    favoured = elect_leaders(adj, ds, 10.0, priority=np.array([0, 0, 0, 0, 0, -1.0]))
    # Assert: one leader per cluster, lowest uid wins; a smaller priority beats a lower id.
    assert plain.converged and favoured.converged
    np.testing.assert_array_equal(np.flatnonzero(plain.is_leader), [0, 3])
    np.testing.assert_array_equal(np.flatnonzero(favoured.is_leader), [0, 5])
    field = gradient_field(adj, ds, plain.is_leader)
    np.testing.assert_array_equal(field.leader_of, [0, 0, 0, 3, 3, 3])


def test_first_round_everyone_is_a_candidate_then_abdicates() -> None:
    # Prepare: a 3-node line with small ds and a large sigma.
    ds = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    state0 = initial_election_state(3)
    # Execute
    state1 = election_round(LINE3, ds, 10.0, state0)
    # Assert: round 0 all leaders (Fig. 4); after one round 1 follows 0 and 2 follows 1's lead 1.
    assert state0.is_leader.all()
    np.testing.assert_array_equal(state1.lead, [0, 0, 1])
    np.testing.assert_array_equal(state1.is_leader, [True, False, False])


@settings(max_examples=60, deadline=None)
@given(graphs(), st.floats(min_value=0.5, max_value=60.0))
def test_settled_election_keeps_every_node_within_sigma(case, sigma) -> None:
    # Prepare
    n, adj, ds = case
    # Execute
    election = elect_leaders(adj, ds, sigma)
    field = gradient_field(adj, ds, election.is_leader)
    # Assert: converges; every node follows a leader with G <= sigma (Sec. III-B statement).
    assert election.converged
    assert (field.leader_of >= 0).all()
    assert (field.G <= sigma).all()
    # two rounded shortest-path sums of <= 11 non-negative ds: <= 2 gamma_11 G = 2.5e-15 G
    # apart (as above; was atol=1e-9 plus the default rtol=1e-7)
    np.testing.assert_allclose(field.G, election.state.distance, rtol=2.5e-15, atol=0)


def test_election_readapts_when_ds_changes() -> None:
    # Prepare: settled two-cluster election, then the bridge becomes cheap (data converged).
    adj = [np.array([1]), np.array([0, 2]), np.array([1, 3]), np.array([2])]
    ds = np.zeros((4, 4))
    for i, j, w in [(0, 1, 1), (1, 2, 50), (2, 3, 1)]:
        ds[i, j] = ds[j, i] = w
    before = elect_leaders(adj, ds, 10.0)
    ds[1, 2] = ds[2, 1] = 1.0
    # Execute
    after = elect_leaders(adj, ds, 10.0, state=before.state)
    # Assert: two federations before, one after (all within sigma / 2 of node 0).
    np.testing.assert_array_equal(np.flatnonzero(before.is_leader), [0, 2])
    assert after.converged
    np.testing.assert_array_equal(np.flatnonzero(after.is_leader), [0])


def test_node_beyond_sigma_from_its_leader_proclaims_itself() -> None:
    # Prepare: settled line 0-1-2 (ds 1, sigma 10, leader 0); then ds(1, 2) grows to 15 so
    # node 2 sits at G = 16 > sigma from leader 0 (but < 2 sigma).
    ds = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    before = elect_leaders(LINE3, ds, 10.0)
    ds[1, 2] = ds[2, 1] = 15.0
    # Execute
    first = election_round(LINE3, ds, 10.0, before.state)
    after = elect_leaders(LINE3, ds, 10.0, state=before.state)
    # Assert: node 2 becomes a candidate at once (Sec. III-B step 3), then a leader.
    np.testing.assert_array_equal(np.flatnonzero(before.is_leader), [0])
    assert first.lead[2] == 2 and not first.abdicated[2]
    np.testing.assert_array_equal(np.flatnonzero(after.is_leader), [0, 2])
    assert (gradient_field(LINE3, ds, after.is_leader).G <= 10.0).all()


def test_intermediate_distance_abdicates() -> None:
    # Prepare: settled line with leader 0, then ds(0, 1) becomes 6: G = (0, 6, 7), sigma 10.
    ds = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    before = elect_leaders(LINE3, ds, 10.0)
    ds[0, 1] = ds[1, 0] = 6.0
    # Execute
    after = election_round(LINE3, ds, 10.0, before.state)
    # Assert: sigma / 2 <= G <= sigma -> advertise (inf, own id), stay in leader 0's field.
    np.testing.assert_array_equal(after.abdicated, [False, True, True])
    np.testing.assert_array_equal(after.lead, [0, 1, 2])
    np.testing.assert_array_equal(gradient_field(LINE3, ds, after.is_leader).leader_of, [0, 0, 0])


def test_self_metric_of_paper_code_can_drop_own_candidacy() -> None:
    # Prepare: node 1 has the best uid (priority), but its own model is poor on its own data:
    # self metric 2 L_11 = 6 >= sigma / 2 (the paper's code measures ds(i, i) = 2 L_ii).
    adj = [np.array([1]), np.array([0])]
    ds = np.array([[0.0, 1.0], [1.0, 6.0]])
    state = initial_election_state(2)
    priority = np.array([1.0, 0.0])
    # Execute
    spatial = election_round(adj, ds, 10.0, state, priority=priority)
    paper = election_round(adj, ds, 10.0, state, priority=priority, self_ds=np.diag(ds))
    # Assert: with a zero self metric node 1 keeps its candidacy; with 2 L_11 it follows 0.
    assert spatial.lead[1] == 1 and paper.lead[1] == 0


def test_bad_sigma_is_refused() -> None:
    with pytest.raises(ValueError, match="sigma"):
        elect_leaders(LINE3, np.zeros((3, 3)), -1.0)


# ------------------------------------------------------------------------------ federations


def test_federations_and_fedavg_weights() -> None:
    # Prepare
    leader_of = np.array([0, 0, 3, 3, -1, 0])
    sizes = np.array([10, 30, 5, 5, 7, 60])
    # Execute
    feds = federations(leader_of)
    weights = fedavg_within(feds[0], sizes)
    # Assert: unassigned node 4 in none; FedAvg n_k / sum n_k.
    assert [f.tolist() for f in feds] == [[0, 1, 5], [2, 3]]
    np.testing.assert_allclose(weights, [0.1, 0.3, 0.6])
    assert federation_count(leader_of) == 2
    with pytest.raises(ValueError, match="sizes"):
        fedavg_within(np.array([4]), np.zeros(6))


# ------------------------------------------------------------------------------ metrics


def test_correctness_counts_misplaced_members_eq6() -> None:
    # Prepare: leader 0 in area 'A' with a 'B' member; leader 3 in 'B' with an 'A' member.
    leader_of = np.array([0, 0, 0, 3, 3, 3, 3])
    area_of = np.array(["A", "A", "B", "B", "A", "B", "B"])
    # Execute
    diamond = correctness(leader_of, area_of)
    # Assert
    assert diamond == {0: 1, 3: 1}
    assert correctness(np.array([1, 1]), np.array([2, 2])) == {1: 0}


def test_leader_changes_eq7() -> None:
    # Prepare: a moving node's leader over 6 steps; plus two nodes at once.
    history = np.array([4, 4, 7, 7, 4, 4])
    both = np.stack([history, np.array([1, 2, 2, 2, 2, 3])], axis=1)
    # Execute
    dl = leader_changes(history)
    dl2 = leader_changes(both)
    # Assert: 1 exactly where zeta(t) != zeta(t - 1).
    np.testing.assert_array_equal(dl, [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(dl2[:, 1], [1, 0, 0, 0, 1])
    assert dl2.shape == (5, 2)


# --- eq. 3 scale (paper text vs the authors' code) --------------------------------------------
def test_eq3_loss_mean_and_batch_sum_by_hand():
    # Prepare: 5 per-sample losses, batches of 2 -> [1, 3], [5, 7], [9]
    losses = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    # Execute
    mean = eq3_loss(losses, scale="mean")
    summed = eq3_loss(losses, scale="batch_sum", batch=2)
    one_batch = eq3_loss(losses, scale="batch_sum", batch=64)
    # Assert: the mean of eq. 3; the code's sum of batch means 2 + 6 + 9 = 17
    assert mean == pytest.approx(5.0)
    assert summed == pytest.approx(17.0)
    assert one_batch == pytest.approx(mean)  # one batch: both scales agree


def test_eq3_loss_rejects_bad_input():
    # Prepare / Execute / Assert
    with pytest.raises(ValueError, match="scale"):
        eq3_loss(np.ones(3), scale="sum")
    with pytest.raises(ValueError, match="sample_losses"):
        eq3_loss(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="batch ="):
        eq3_loss(np.ones(3), batch=0)


def test_eq3_loss_over_a_fixed_number_of_batches_is_the_mean_times_it():
    # Prepare: 71 per-sample losses (a mnist5k sensor: 2 batches of 64) and 4.5 batches (the
    # authors' 3-area nodes: 4 / 5 batches)
    rng = np.random.default_rng(3)
    losses = rng.uniform(0.0, 4.0, size=71)
    # Execute
    fixed = eq3_loss(losses, scale="batch_sum", batch=64, batches=4.5)
    own = eq3_loss(losses, scale="batch_sum", batch=64, batches=0.0)
    # Assert: 4.5 x the per-sample mean; 0 keeps the node's own batch sum
    assert fixed == pytest.approx(4.5 * losses.mean())
    assert own == pytest.approx(losses[:64].mean() + losses[64:].mean())


def test_eq3_loss_fixed_batches_equals_the_batch_sum_of_that_much_even_data():
    # Prepare: 256 equal losses = exactly 4 batches of 64
    losses = np.full(256, 1.7)
    # Execute / Assert: the expected batch sum of a node with 4 batches, whatever its size
    assert eq3_loss(losses, batches=4.0) == pytest.approx(eq3_loss(losses, batch=64))
    assert eq3_loss(losses[:30], batches=4.0) == pytest.approx(4 * 1.7)


def test_eq3_loss_rejects_bad_batch_counts():
    with pytest.raises(ValueError, match="batches"):
        eq3_loss(np.ones(3), batches=-1.0)
    with pytest.raises(ValueError, match="batches"):
        eq3_loss(np.ones(3), batches=float("inf"))
