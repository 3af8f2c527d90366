"""Mixing matrices (model/maths/mixing.py): de Heredia 2024 Sec. 5.3-5.4, Reza et al. eq. 2."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mobidfl.model.maths.mixing import (
    check_row_stochastic,
    dpsgd_weights,
    fedavg_weights,
    global_average_weights,
    identity,
    member_pairs,
    mobility_aware_weights,
)


def random_graph(n: int, p: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < p, k=1)
    return sp.csr_matrix(upper | upper.T)


def path3() -> sp.csr_matrix:
    """0 - 1 - 2."""
    return sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool))


def test_dpsgd_rows_sum_to_one_and_only_neighbours():
    # Prepare
    a = random_graph(40, 0.1, seed=1)
    # Execute
    w = dpsgd_weights(a)
    # Assert: valid for the graph, and each row is 1/(deg+1) on the closed neighbourhood
    check_row_stochastic(w, a)
    dense, adj = w.toarray(), a.toarray()
    deg = adj.sum(1)
    for i in range(40):
        support = np.flatnonzero(dense[i])
        assert set(support) == set(np.flatnonzero(adj[i])) | {i}
        np.testing.assert_allclose(dense[i, support], 1.0 / (deg[i] + 1))


def test_dpsgd_members_only_mix_with_members():
    # Prepare: path 0-1-2, agent 2 is not a member
    a = path3()
    # Execute
    w = dpsgd_weights(a, members=np.array([0, 1])).toarray()
    # Assert: 1 averages with 0 only (not with non-member 2); 2 keeps its model
    np.testing.assert_allclose(w, [[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1]])


def test_fedavg_weights_hand_computed():
    # Prepare
    sizes = np.array([100, 300, 600])
    # Execute
    w = fedavg_weights(path3(), sizes).toarray()
    # Assert: w_ij = n_j / (n_i + sum of neighbours' n)
    np.testing.assert_allclose(w[0], [100 / 400, 300 / 400, 0])
    np.testing.assert_allclose(w[1], [0.1, 0.3, 0.6])
    np.testing.assert_allclose(w[2], [0, 300 / 900, 600 / 900])


def test_fedavg_rejects_non_positive_sizes():
    with pytest.raises(ValueError, match="data_sizes"):
        fedavg_weights(path3(), np.array([1, 0, 3]))


def test_mobility_aware_hand_computed():
    # Prepare: agent 0 meets 1 and 2; speeds 1, 2, 5 m/s, alpha = 0.5
    a = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], dtype=bool))
    speeds = np.array([1.0, 2.0, 5.0])
    # Execute
    w = mobility_aware_weights(a, speeds, 0.5).toarray()
    # Assert: W_0j = 1/3 + 0.5 (s_j/8 - 1/3); W_1j over {0,1}: 1/2 + 0.5 (s_j/3 - 1/2)
    np.testing.assert_allclose(w[0], [1 / 6 + 1 / 16, 1 / 6 + 2 / 16, 1 / 6 + 5 / 16])
    np.testing.assert_allclose(w[1], [0.25 + 1 / 6, 0.25 + 2 / 6, 0])
    np.testing.assert_allclose(w[2], [0.25 + 1 / 12, 0, 0.25 + 5 / 12])
    check_row_stochastic(w, a)


def test_mobility_aware_alpha_zero_is_dpsgd_exactly_and_alpha_one_is_speed_share():
    # Prepare
    a = random_graph(30, 0.15, seed=2)
    speeds = np.random.default_rng(0).uniform(0, 20, 30)
    # Execute
    w0 = mobility_aware_weights(a, speeds, 0.0)
    w1 = mobility_aware_weights(a, speeds, 1.0).toarray()
    # Assert
    assert (w0 != dpsgd_weights(a)).nnz == 0
    closed = a.toarray() | np.eye(30, dtype=bool)
    expected = closed * speeds[None, :] / (closed * speeds[None, :]).sum(1, keepdims=True)
    # float64, w <= 1: each side sums <= 30 speeds (gamma_30) and divides (1/sum, times s:
    # 2 roundings), so |w1 - expected| <= 2 (30 + 2) u = 7.1e-15 (u = 2**-53): 1e-14 (was
    # 1e-12 plus assert_allclose's default rtol=1e-7)
    np.testing.assert_allclose(w1, expected, rtol=0, atol=1e-14)


def test_mobility_aware_all_zero_speeds_fall_back_to_plain():
    # Prepare: everybody parked
    a = path3()
    # Execute
    w = mobility_aware_weights(a, np.zeros(3), 0.7)
    # Assert
    np.testing.assert_allclose(w.toarray(), dpsgd_weights(a).toarray())


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_mobility_aware_rejects_alpha_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        mobility_aware_weights(path3(), np.ones(3), alpha)


def test_global_average_weighted_and_identity_for_non_members():
    # Prepare
    sizes = np.array([1.0, 3.0, 100.0, 4.0])
    # Execute
    w = global_average_weights(4, np.array([0, 1, 3]), weights=sizes).toarray()
    # Assert
    for i in (0, 1, 3):
        np.testing.assert_allclose(w[i], [0.125, 0.375, 0, 0.5])
    np.testing.assert_allclose(w[2], [0, 0, 1, 0])
    np.testing.assert_allclose(identity(4).toarray(), np.eye(4))


def test_check_row_stochastic_catches_bad_matrices():
    a = path3()
    with pytest.raises(ValueError, match="not a neighbour"):
        check_row_stochastic(sp.csr_matrix(np.full((3, 3), 1 / 3)), a)
    with pytest.raises(ValueError, match="sums to"):
        check_row_stochastic(sp.csr_matrix(np.eye(3) * 0.9), a)
    with pytest.raises(ValueError, match="negative"):
        check_row_stochastic(sp.csr_matrix([[1.5, -0.5, 0], [0, 1, 0], [0, 0, 1]]), a)


def test_bad_adjacency_is_rejected():
    with pytest.raises(ValueError, match="symmetric"):
        dpsgd_weights(sp.csr_matrix(np.array([[0, 1], [0, 0]], dtype=bool)))
    with pytest.raises(ValueError, match="self loops"):
        dpsgd_weights(sp.csr_matrix(np.eye(2, dtype=bool)))


def test_member_pairs_lists_each_contact_once_between_members_in_row_major_order():
    # Prepare: contacts 0-1, 0-3, 1-2, 2-3 (symmetric), agent 2 not a member
    rows, cols = np.array([0, 0, 1, 2]), np.array([1, 3, 2, 3])
    adj = sp.csr_matrix((np.ones(8, bool), (np.r_[rows, cols], np.r_[cols, rows])), shape=(4, 4))
    # Execute
    everyone = member_pairs(adj)
    some = member_pairs(adj, np.array([0, 1, 3]))
    # Assert
    assert everyone.tolist() == [[0, 1], [0, 3], [1, 2], [2, 3]]
    assert some.tolist() == [[0, 1], [0, 3]]
    assert everyone.dtype == np.int64 and member_pairs(sp.csr_matrix((3, 3))).shape == (0, 2)
