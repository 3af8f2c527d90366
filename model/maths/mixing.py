"""Mixing (gossip) matrices for decentralized averaging, as pure functions.

Every builder returns a row-stochastic ``scipy.sparse.csr_matrix`` ``W`` (N x N, float64)
with ``W_ij = 0`` unless ``j`` is a neighbour of ``i`` or ``j == i``. The learning engine
applies it to all agents at once as one sparse matmul per layer
(:meth:`mobidfl.model.learning.engine.Engine.mix`), i.e. ``x_i <- sum_j W_ij x_j`` (de Heredia 2024,
Alg. 1 line 6; Reza et al., ``X(t) = X(t-1/2) W(t)``).

Conventions shared by all builders:

* ``adjacency`` is the N x N symmetric boolean contact graph of this step without self
  loops (as produced by the world's neighbour search).
* ``members`` (global agent indices, or ``None`` = everyone) are the agents that use the
  policy. Only their rows mix; rows of non-members are the identity. A member averages only
  with neighbours that are members too: agents running another exchange protocol do not
  take part in this one (a sensor running ``local`` never hands its model to a D-PSGD car).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_row_stochastic",
    "dpsgd_weights",
    "fedavg_weights",
    "global_average_weights",
    "identity",
    "member_mask",
    "member_pairs",
    "mobility_aware_weights",
]


def identity(n: int) -> sp.csr_matrix:
    """The N x N identity: nobody mixes (local training only)."""
    if n < 0:
        raise ValueError(f"n = {n}: expected an agent count >= 0")
    return sp.identity(n, dtype=np.float64, format="csr")


def member_mask(n: int, members: np.ndarray | None) -> np.ndarray:
    """Boolean mask of length ``n`` from a list of global indices (``None`` = all)."""
    if members is None:
        return np.ones(n, dtype=bool)
    idx = np.asarray(members, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"members {idx.tolist()[:8]}: expected agent indices in [0, {n})")
    mask = np.zeros(n, dtype=bool)
    mask[idx] = True
    return mask


def member_pairs(adjacency: sp.spmatrix, members: np.ndarray | None = None) -> np.ndarray:
    """The step's encounters between two members.

    ``[E, 2]`` pairs ``(i, j)`` with ``i < j``, in row-major order (``None`` = every agent is a
    member). The one place the upper triangle of the contact graph is read: each contact once, as
    the policies, the links and the app's contact lines all count it.
    """
    upper = sp.triu(sp.csr_matrix(adjacency, dtype=bool), k=1).tocoo()
    row, col = upper.row, upper.col
    if members is not None:
        mask = member_mask(adjacency.shape[0], members)
        keep = mask[row] & mask[col]
        row, col = row[keep], col[keep]
    return np.stack([row, col], axis=1).astype(np.int64)


def _member_graph(
    adjacency: sp.spmatrix, members: np.ndarray | None, *, directed: bool = False
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Validate the contact graph; keep only member-member edges. Returns (A, mask).

    ``directed``: row ``i`` lists the models ``i`` received (a link model may deliver one
    way only), so the graph need not be symmetric.
    """
    a = sp.csr_matrix(adjacency, dtype=bool)
    n = a.shape[0]
    if a.shape != (n, n):
        raise ValueError(f"adjacency of shape {a.shape}: expected a square N x N matrix")
    if a.diagonal().any():
        raise ValueError("adjacency has self loops: expected edges i != j only")
    if not directed and (a != a.T).nnz:
        raise ValueError("adjacency is asymmetric: expected a symmetric contact graph "
                         "(or directed=True)")
    mask = member_mask(n, members)
    if not mask.all():
        keep = sp.diags(mask.astype(np.float64))
        a = sp.csr_matrix((keep @ a.astype(np.float64) @ keep) != 0)
    return a, mask


def _rows_from_scores(a: sp.csr_matrix, mask: np.ndarray, score: np.ndarray) -> sp.csr_matrix:
    """W_ij = score_j / sum_{k in N_i + i} score_k for members, identity rows otherwise."""
    n = a.shape[0]
    closed = (a.astype(np.float64) + sp.identity(n, format="csr")).tocsr()
    weighted = closed @ sp.diags(score)
    row_sum = np.asarray(weighted.sum(axis=1)).ravel()
    w = sp.diags(1.0 / row_sum) @ weighted
    return _with_identity_rows(sp.csr_matrix(w), mask)


def _with_identity_rows(w: sp.csr_matrix, mask: np.ndarray) -> sp.csr_matrix:
    if mask.all():
        out = sp.csr_matrix(w)
    else:
        keep = sp.diags(mask.astype(np.float64))
        out = sp.csr_matrix(keep @ w + sp.diags((~mask).astype(np.float64)))
    out.eliminate_zeros()
    out.sort_indices()
    return out


def dpsgd_weights(
    adjacency: sp.spmatrix, members: np.ndarray | None = None, *, directed: bool = False
) -> sp.csr_matrix:
    """Plain D-PSGD averaging: ``W_ij = 1 / |M_i|`` over ``M_i`` = neighbours of i and i.

    de Heredia 2024, Sec. 5.3 (the weights of the original D-PSGD paper [12]) and Alg. 1 line 6.
    An isolated member keeps its model (``W_ii = 1``).

    Parameters
    ----------
    adjacency
        ``N x N`` contact graph of this step (symmetric unless ``directed``, no self
        loops).
    members
        Global ids of the agents this policy mixes; ``None``: all. Other rows are
        identity rows (those agents keep their models).
    directed
        Row ``i`` of ``adjacency`` holds the models ``i`` received (a link model may
        deliver one way only), so it need not be symmetric.

    Returns
    -------
    scipy.sparse.csr_matrix
        The row-stochastic ``N x N`` mixing matrix ``W``.

    Raises
    ------
    ValueError
        ``adjacency`` is not square, has self loops, or is asymmetric without
        ``directed``.
    """
    a, mask = _member_graph(adjacency, members, directed=directed)
    return _rows_from_scores(a, mask, np.ones(a.shape[0]))


# Its Parameters repeat dpsgd_weights': numpydoc reads each public docstring alone.
def fedavg_weights(
    adjacency: sp.spmatrix,
    data_sizes: np.ndarray,
    members: np.ndarray | None = None,
    *,
    directed: bool = False,
) -> sp.csr_matrix:
    """FedAvg-weighted neighbourhood averaging, Reza et al. eq. (2).

    ``W_ij = |D_j| / (|D_i| + sum_{k in N_i} |D_k|)`` for ``j`` in ``N_i + {i}``.

    Parameters
    ----------
    adjacency
        ``N x N`` contact graph of this step (symmetric unless ``directed``, no self
        loops).
    data_sizes
        Training samples ``|D_i|`` per agent (``N`` values, positive for members).
    members
        Global ids of the agents this policy mixes; ``None``: all. Other rows are
        identity rows (those agents keep their models).
    directed
        Row ``i`` of ``adjacency`` holds the models ``i`` received (a link model may
        deliver one way only), so it need not be symmetric.

    Returns
    -------
    scipy.sparse.csr_matrix
        The row-stochastic ``N x N`` mixing matrix ``W``.

    Raises
    ------
    ValueError
        ``adjacency`` is not square, has self loops, or is asymmetric without
        ``directed``; or ``data_sizes`` has the wrong length or a
        non-positive size for a member.
    """
    a, mask = _member_graph(adjacency, members, directed=directed)
    sizes = np.asarray(data_sizes, dtype=np.float64).reshape(-1)
    if sizes.shape != (a.shape[0],):
        raise ValueError(f"data_sizes of shape {sizes.shape}: expected one size per agent "
                         f"({a.shape[0]})")
    if (sizes[mask] <= 0).any() or not np.isfinite(sizes).all():
        raise ValueError("data_sizes: expected a finite, positive sample count per member")
    return _rows_from_scores(a, mask, np.where(mask, sizes, 1.0))


def mobility_aware_weights(
    adjacency: sp.spmatrix,
    speeds: np.ndarray,
    alpha: float,
    members: np.ndarray | None = None,
    *,
    directed: bool = False,
) -> sp.csr_matrix:
    """Mobility-aware averaging, de Heredia 2024 Sec. 5.4.

    ``W_ij = 1/N + alpha (X_ij - 1/N)`` with ``X_ij = s_j / sum_{x in M_i} s_x``, where
    ``M_i`` is the neighbours of i plus i itself and ``N = |M_i|``. ``alpha = 0`` is plain
    D-PSGD (returned exactly), ``alpha = 1`` weighs models purely by speed. Rows whose
    speeds are all zero fall back to plain averaging (X is undefined there). ``alpha`` is
    limited to [0, 1] so that every weight stays non-negative (de Heredia's released code
    defaults to 2, which can produce negative weights).

    Parameters
    ----------
    adjacency
        ``N x N`` contact graph of this step (symmetric unless ``directed``, no self
        loops).
    speeds
        Speed ``s_j`` of every agent in m/s (``N`` values, finite, >= 0).
    alpha
        The lean towards faster neighbours, in [0, 1].
    members
        Global ids of the agents this policy mixes; ``None``: all. Other rows are
        identity rows (those agents keep their models).
    directed
        Row ``i`` of ``adjacency`` holds the models ``i`` received (a link model may
        deliver one way only), so it need not be symmetric.

    Returns
    -------
    scipy.sparse.csr_matrix
        The row-stochastic ``N x N`` mixing matrix ``W``.

    Raises
    ------
    ValueError
        ``adjacency`` is not square, has self loops, or is asymmetric without
        ``directed``; ``alpha`` is outside [0, 1]; or ``speeds``
        has the wrong length or a negative or non-finite value.
    """
    if not 0.0 <= float(alpha) <= 1.0:  # also rejects NaN
        raise ValueError(f"alpha = {alpha!r}: expected a number in [0, 1]")
    a, mask = _member_graph(adjacency, members, directed=directed)
    n = a.shape[0]
    s = np.asarray(speeds, dtype=np.float64).reshape(-1)
    if s.shape != (n,):
        raise ValueError(f"speeds of shape {s.shape}: expected one speed per agent ({n})")
    if (s < 0).any() or not np.isfinite(s).all():
        raise ValueError("speeds: expected finite speeds >= 0 (m/s)")
    plain = _rows_from_scores(a, mask, np.ones(n))
    if alpha == 0.0:
        return plain
    closed = (a.astype(np.float64) + sp.identity(n, format="csr")).tocsr()
    speed_sum = closed @ s  # sum of speeds over M_i
    moving = speed_sum > 0
    # X_ij = s_j / sum_{M_i} s on rows with moving neighbourhoods, else plain 1/N.
    inv = np.where(moving, 1.0 / np.where(moving, speed_sum, 1.0), 0.0)
    x = sp.diags(inv) @ closed @ sp.diags(s)
    x = sp.csr_matrix(x) + sp.diags((~moving).astype(np.float64)) @ plain
    w = (1.0 - alpha) * plain + alpha * sp.csr_matrix(x)
    # Keep the sparsity pattern of the closed neighbourhood even where X_ij = 0.
    return _with_identity_rows(sp.csr_matrix(w), mask)


def global_average_weights(
    n: int, members: np.ndarray | None = None, *, weights: np.ndarray | None = None
) -> sp.csr_matrix:
    """Every member's row is the (optionally weighted) average of all members.

    Centralised FedAvg (McMahan et al., as used as the CFL baseline of Cached-DFL) with
    ``weights`` = sample counts. Dense M x M block: fine for small M; the engine's
    :meth:`~mobidfl.model.learning.engine.Engine.average` is cheaper for large M.
    """
    mask = member_mask(n, members)
    idx = np.flatnonzero(mask)
    if weights is None:
        wv = np.ones(idx.size)
    else:
        wv = np.asarray(weights, dtype=np.float64).reshape(-1)
        if wv.shape != (n,):
            raise ValueError(f"weights of shape {wv.shape}: expected one weight per agent ({n})")
        wv = wv[idx]
        if (wv < 0).any() or (idx.size and wv.sum() <= 0):
            raise ValueError("weights: expected non-negative weights with a sum > 0")
    if idx.size == 0:
        return identity(n)
    p = wv / wv.sum()
    rows = np.repeat(idx, idx.size)
    cols = np.tile(idx, idx.size)
    vals = np.tile(p, idx.size)
    block = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    return _with_identity_rows(block, mask)


def check_row_stochastic(
    w: sp.spmatrix, adjacency: sp.spmatrix | None = None, *, atol: float = 1e-9
) -> None:
    """Raise ``ValueError`` unless ``W`` is a valid mixing matrix for this contact graph.

    Checks: square, finite, non-negative, rows summing to 1, and (when ``adjacency`` is
    given) ``W_ij = 0`` unless ``j`` is a neighbour of ``i`` or ``j == i``.

    Parameters
    ----------
    w
        The mixing matrix (any scipy sparse format).
    adjacency
        The contact graph ``W`` must respect; ``None``: no neighbourhood check.
    atol
        Tolerance of the row sums and of what counts as a non-zero weight.

    Raises
    ------
    ValueError
        The first check ``W`` fails, in one line naming the row or entry.
    """
    m = sp.csr_matrix(w, dtype=np.float64)
    n = m.shape[0]
    if m.shape != (n, n):
        raise ValueError(f"mixing matrix has shape {m.shape}; allowed: square N x N")
    if not np.isfinite(m.data).all():
        raise ValueError("mixing matrix has non-finite entries; allowed: finite weights")
    if (m.data < -atol).any():
        raise ValueError(f"mixing matrix has negative entry {m.data.min():.3g}; allowed: >= 0")
    sums = np.asarray(m.sum(axis=1)).ravel()
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        raise ValueError(
            f"mixing matrix row {bad[0]} sums to {sums[bad[0]]:.6g}; allowed: every row sums to 1"
        )
    if adjacency is not None:
        a = sp.csr_matrix(adjacency, dtype=bool)
        if a.shape != m.shape:
            raise ValueError(f"adjacency shape {a.shape} != mixing matrix shape {m.shape}")
        allowed = (a + sp.identity(n, dtype=bool, format="csr")).astype(bool)
        nonzero = sp.csr_matrix(abs(m) > atol, dtype=np.float64)
        outside = nonzero - nonzero.multiply(allowed)
        outside.eliminate_zeros()
        if outside.nnz:
            i, j = (int(v[0]) for v in outside.nonzero())
            raise ValueError(
                f"mixing matrix has W[{i},{j}] = {m[i, j]:.3g} but {j} is not a neighbour "
                f"of {i}; allowed: weights only on neighbours and self"
            )
