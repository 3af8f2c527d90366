"""Proximity-based self-federated learning (PSFL): pure maths.

PSFL (Domini et al., ACSOS 2024, *Proximity-based Self-Federated Learning*). Nodes form
federations around self-elected leaders; the distance that bounds a federation is not metres
but the accumulated loss-based dissimilarity ``ds`` (eq. 3) along a path to the leader, the
gradient field ``G`` (Sec. III-B), bounded by ``sigma``.

The paper describes the election only in prose (Sec. III-B, steps 1-4; Alg. 1 line 5). Its code
(ScaFi, github.com/nicolasfara/experiments-opportunistic-federated-learning,
``OpportunisticFederatedLearning.scala``) uses ScaFi's sparse-choice block ``S(grain=sigma,
metric=ds)`` (``breakUsingUids`` + ``distanceCompetition``), then ``classicGradient`` from the
elected leaders for ``G`` and ``broadcast``/``G_along`` for the followed leader and the parent.
:func:`election_round` is one synchronous round of that ``S`` block, :func:`elect_leaders`
iterates it to a fixed point, :func:`gradient_field` is the fixed point of ``classicGradient`` +
``G_along`` (multi-source Dijkstra).

Everything here is a pure function of numpy arrays: no models, no RNG state, no globals.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = [
    "Election",
    "ElectionState",
    "GradientField",
    "Graph",
    "correctness",
    "dissimilarity_edges",
    "dissimilarity_matrix",
    "edge_weights",
    "elect_leaders",
    "eq3_loss",
    "election_round",
    "fedavg_within",
    "federation_count",
    "federations",
    "gradient_field",
    "initial_election_state",
    "leader_changes",
    "path_delivered",
    "to_graph",
]

# --------------------------------------------------------------------------------------------
# Graph plumbing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Graph:
    """Neighbourhood relation N_i in CSR form (PSFL, Sec. III-A: N_i within r_c).

    ``indices[indptr[i]:indptr[i + 1]]`` are the neighbours of node ``i``, sorted, without
    ``i`` itself and without duplicates. Edge ``k`` is the directed pair (row of k, indices[k]).
    """

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.indptr.shape[0] - 1)

    @property
    def rows(self) -> np.ndarray:
        """Row (receiving node i) of every edge, aligned with ``indices``."""
        return np.repeat(np.arange(self.n), np.diff(self.indptr))


def to_graph(adjacency: object, *, n: int | None = None) -> Graph:
    """Canonical CSR neighbourhood from a scipy sparse matrix, a list of arrays, or a Graph.

    Why: every function below indexes edges the same way, so per-edge weights (1-D ``ds``)
    can be aligned with ``to_graph(adjacency).indices``. Self-loops are dropped because ScaFi's
    gradient uses ``excludingSelf``; for sparse input every *stored* entry is an edge, even an
    explicit zero.

    Parameters
    ----------
    adjacency
        ``scipy.sparse`` (n, n) matrix/array, a sequence of neighbour-id arrays,
        or a :class:`Graph`.
    n
        number of nodes for list input (defaults to ``len(adjacency)``).
    """
    if isinstance(adjacency, Graph):
        return adjacency
    if sp.issparse(adjacency):
        coo = sp.coo_array(adjacency)
        if coo.shape[0] != coo.shape[1]:
            raise ValueError(f"adjacency of shape {coo.shape}: expected a square (n, n) matrix")
        size = coo.shape[0]
        rows = np.asarray(coo.row, dtype=np.int64)
        cols = np.asarray(coo.col, dtype=np.int64)
    else:
        lists = [np.asarray(a, dtype=np.int64).ravel() for a in adjacency]  # type: ignore[union-attr]
        size = len(lists) if n is None else int(n)
        if len(lists) != size:
            raise ValueError(f"adjacency has {len(lists)} neighbour lists: expected n={size}")
        rows = np.repeat(np.arange(size, dtype=np.int64), [a.size for a in lists])
        cols = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
        if cols.size and (cols.min() < 0 or cols.max() >= size):
            raise ValueError(
                f"adjacency has a neighbour id out of range: expected ids in [0, {size})"
            )
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    if rows.size:
        first = np.ones(rows.size, dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        rows, cols = rows[first], cols[first]
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    return Graph(indptr=np.cumsum(indptr), indices=cols)


def edge_weights(adjacency: object, ds: np.ndarray) -> np.ndarray:
    """Per-edge dissimilarity aligned with ``to_graph(adjacency).indices``.

    Parameters
    ----------
    adjacency
        see :func:`to_graph`.
    ds
        dense (n, n) matrix with ``ds[i, j]`` = ds(i, j), or an already aligned 1-D array.

    Raises
    ------
    ValueError
        wrong shape, NaN on an edge, or a negative weight (G needs ds >= 0).
    """
    graph = to_graph(adjacency)
    ds = np.asarray(ds, dtype=float)
    if ds.ndim == 2:
        if ds.shape != (graph.n, graph.n):
            raise ValueError(
                f"ds of shape {ds.shape}: expected ({graph.n}, {graph.n}) or one value per edge"
            )
        weights = ds[graph.rows, graph.indices]
    elif ds.ndim == 1:
        if ds.shape[0] != graph.indices.shape[0]:
            raise ValueError(
                f"ds has {ds.shape[0]} values: expected {graph.indices.shape[0]} (one per edge)"
            )
        weights = ds
    else:
        raise ValueError(f"ds has ndim {ds.ndim}: expected 2 (dense matrix) or 1 (per edge)")
    if np.isnan(weights).any():
        raise ValueError("ds is NaN on an edge: expected a dissimilarity for every neighbour pair")
    if (weights < 0).any():
        raise ValueError(f"ds has {float(weights.min())!r}: expected values >= 0 (losses are >= 0)")
    return weights


# --------------------------------------------------------------------------------------------
# Eq. 3: loss-based dissimilarity
# --------------------------------------------------------------------------------------------


LOSS_SCALES = ("batch_sum", "mean")
"""How L(D_i, nn_j) of eq. 3 is reduced over D_i (setting ``psfl_loss``)."""


def eq3_loss(
    sample_losses: np.ndarray,
    *,
    scale: str = "batch_sum",
    batch: int = 64,
    batches: float = 0.0,
) -> float:
    """L(D_i, nn_j) of PSFL eq. 3 from the per-sample losses of nn_j on D_i.

    The paper and its code disagree on the scale, and sigma (20 / 40 / 80) is compared with
    sums of these values (G of Sec. III-B), so the scale decides what a sigma means:

    * ``mean`` -- eq. 3 as printed: ``(1 / |D_i|) sum_{(x,y) in D_i} l(f(x; nn_j), y)``;
    * ``batch_sum`` -- the authors' code (``FLutils.evaluate``, called on the node's
      training data with ``batch_size = 64``): the *sum over mini-batches* of the
      batch-mean NLL, i.e. ``sum_b mean_{(x,y) in B_b} l`` over consecutive batches of
      ``batch`` samples, the last one possibly smaller. This is ``ceil(|D_i| / batch)``
      times the mean when losses are even, and it is the quantity the paper's sigma values
      were set against.

    The batch sum grows with |D_i| (``ceil(|D_i| / batch)`` terms), so one sigma means a
    different per-sample error on nodes with less data. ``batches > 0`` fixes the number of
    terms: the value is ``batches`` times the per-sample mean, the expected batch sum of a
    node holding ``batches`` evaluation batches. A substitute dataset that gives each node
    fewer samples than the paper then keeps the paper's sigma on the paper's scale. The
    authors' logged runs (``data/experiment_seed-0.0_areas-3_lossThreshold-40.0.csv``:
    validation accuracies in 62nds and 69ths, the code's 20 % validation split) put 248 /
    276 training samples on a node, i.e. 4 / 5 batches of 64: ``batches = 4.5``.

    Parameters
    ----------
    sample_losses
        per-sample losses in the node's fixed sample order.
    scale
        ``"batch_sum"`` or ``"mean"``.
    batch
        evaluation batch size of ``batch_sum`` (the authors' code: 64).
    batches
        ``batch_sum`` only: 0 = ``ceil(|D_i| / batch)`` batches of the node's own
        data (the code on this node); > 0 = the per-sample mean times ``batches``.
    """
    losses = np.asarray(sample_losses, dtype=np.float64).reshape(-1)
    if scale not in LOSS_SCALES:
        raise ValueError(f"scale = {scale!r}: expected one of " + ", ".join(LOSS_SCALES))
    if losses.size == 0:
        raise ValueError("sample_losses is empty: expected at least one sample")
    if not np.isfinite(losses).all() or (losses < 0).any():
        raise ValueError("sample_losses: expected finite losses >= 0")
    if scale == "mean":
        return float(losses.mean())
    if int(batch) < 1:
        raise ValueError(f"batch = {batch!r}: expected an integer >= 1")
    if not (np.isfinite(batches) and batches >= 0):
        raise ValueError(f"batches = {batches!r}: expected a finite number >= 0 (0 = own data)")
    if batches > 0:
        return float(losses.mean() * batches)
    starts = np.arange(0, losses.size, int(batch))
    sums = np.add.reduceat(losses, starts)
    sizes = np.diff(np.append(starts, losses.size))
    return float((sums / sizes).sum())


def _check_loss(loss: np.ndarray, name: str) -> np.ndarray:
    loss = np.asarray(loss, dtype=float)
    finite_or_nan = np.where(np.isnan(loss), 0.0, loss)
    if (finite_or_nan < 0).any():
        raise ValueError(
            f"{name} has {float(np.nanmin(loss))!r}: expected losses >= 0 (NaN = not evaluated)"
        )
    return loss


def dissimilarity_matrix(loss: np.ndarray) -> np.ndarray:
    """ds(i, j) = L_ij + L_ji for every pair (PSFL, eq. 3 and the line above it).

    ``loss[i, j]`` = L(D_i, nn_j): model j evaluated on node i's local data. The result is
    symmetric by construction. The diagonal follows the same formula, ds(i, i) = 2 L_ii, which
    is also what the paper's code yields (its metric is evaluated ``includingSelf``). ds is a
    *sum of losses*, not a distance: identical models on identical data give the same value for
    every pair, 2 L (zero only for a zero loss). NaN (pair not evaluated, e.g. not neighbours)
    propagates.

    Raises
    ------
    ValueError
        not square, or a negative loss.
    """
    loss = _check_loss(loss, "loss")
    if loss.ndim != 2 or loss.shape[0] != loss.shape[1]:
        raise ValueError(f"loss of shape {loss.shape}: expected a square (n, n) matrix L[i, j]")
    return loss + loss.T


def dissimilarity_edges(adjacency: object, loss_edges: np.ndarray) -> np.ndarray:
    """Eq. 3 on a sparse neighbourhood: ds_k = L(D_i, nn_j) + L(D_j, nn_i) for edge k = (i, j).

    Why: the simulator only evaluates neighbours' models, one loss per directed edge; this
    pairs each edge with its reverse. ``loss_edges`` is aligned with ``to_graph(adjacency)``.

    Raises
    ------
    ValueError
        wrong length, negative loss, or an edge whose reverse is missing
        (the neighbourhood must be symmetric).
    """
    graph = to_graph(adjacency)
    loss_edges = _check_loss(loss_edges, "loss_edges").ravel()
    m = graph.indices.shape[0]
    if loss_edges.shape[0] != m:
        raise ValueError(
            f"loss_edges has {loss_edges.shape[0]} values: expected {m} (one per directed edge)"
        )
    rows = graph.rows
    n = max(graph.n, 1)
    keys = rows * n + graph.indices  # sorted because CSR is row-major with sorted columns
    rev_keys = graph.indices * n + rows
    pos = np.searchsorted(keys, rev_keys)
    pos = np.minimum(pos, max(m - 1, 0))
    if m and not np.array_equal(keys[pos], rev_keys):
        raise ValueError("adjacency is asymmetric: expected j in N_i exactly when i in N_j")
    return loss_edges + loss_edges[pos]


# --------------------------------------------------------------------------------------------
# The gradient field G (Sec. III-B) with the sigma bound and the competition policy
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientField:
    """Fixed point of G from the leaders.

    Attributes
    ----------
    G
        accumulated dissimilarity to the followed leader (0 at leaders, inf if none).
    leader_of
        the leader each node follows (itself for a leader, -1 if none in reach).
    parent
        the next hop towards that leader (-1 at leaders and unassigned nodes).
    """

    G: np.ndarray
    leader_of: np.ndarray
    parent: np.ndarray


def _dijkstra(
    graph: Graph, weights: np.ndarray, sources: np.ndarray, bound: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multi-source Dijkstra with lexicographic labels (distance, leader id, parent id).

    The labels stay a valid Dijkstra order because extending a path adds ds >= 0 to the
    distance and keeps the leader, so ties resolve to the lowest leader id, then parent id.
    Paths whose accumulated distance exceeds ``bound`` are never extended (exact, ds >= 0).
    """
    n = graph.n
    # Relaxation runs from j to every i that has j as a neighbour: the reverse CSR.
    rows = graph.rows
    order = np.lexsort((rows, graph.indices))
    rev_dst = rows[order].tolist()  # i (j in N_i)
    rev_w = weights[order].tolist()  # ds(i, j) as measured by i
    rev_ptr = np.searchsorted(graph.indices[order], np.arange(n + 1)).tolist()

    dist = [np.inf] * n
    lead_of = [-1] * n
    par_of = [-1] * n
    done = [False] * n
    heap: list[tuple[float, int, int, int]] = []
    for s in np.flatnonzero(sources).tolist():
        dist[s], lead_of[s] = 0.0, s
        heap.append((0.0, s, -1, s))
    heapq.heapify(heap)
    while heap:
        d, lead, par, u = heapq.heappop(heap)
        if done[u] or d != dist[u] or lead != lead_of[u] or par != par_of[u]:
            continue
        done[u] = True
        for k in range(rev_ptr[u], rev_ptr[u + 1]):
            v = rev_dst[k]
            if done[v]:
                continue
            nd = d + rev_w[k]
            # Unassigned nodes hold (inf, -1, -1), which every finite candidate beats.
            if nd <= bound and (nd, lead, u) < (dist[v], lead_of[v], par_of[v]):
                dist[v], lead_of[v], par_of[v] = nd, lead, u
                heapq.heappush(heap, (nd, lead, u, v))
    return (
        np.asarray(dist, dtype=float),
        np.asarray(lead_of, dtype=np.int64),
        np.asarray(par_of, dtype=np.int64),
    )


def gradient_field(
    adjacency: object,
    ds: np.ndarray,
    leaders: np.ndarray,
    *,
    sigma: float | None = None,
) -> GradientField:
    """G(i) = 0 at leaders, else min over j in N_i of G(j) + ds(i, j) (PSFL, Sec. III-B).

    Example from the paper: on a - b - c with leader a, G(c) = ds(c, b) + ds(b, a). Computed as
    the fixed point of ScaFi's ``classicGradient`` (multi-source Dijkstra, ds >= 0). Competition
    policy (Sec. III-B step 4: "accumulated error metric and node identifier to break ties"):
    a node follows the candidate with the lowest accumulated error, ties broken by the lowest
    leader id, then the lowest parent id. Sigma bound (step 3): candidacies whose accumulated
    error exceeds ``sigma`` are ignored, so such a node gets G = inf, leader -1, parent -1;
    with ``sigma=None`` (the paper's code: ``classicGradient`` is unbounded) every node
    connected to a leader is assigned.

    Parameters
    ----------
    adjacency
        neighbourhoods, see :func:`to_graph`.
    ds
        dense (n, n) or per-edge dissimilarities, see :func:`edge_weights`.
    leaders
        bool (n,), the source zone.
    sigma
        maximum tolerable path error, or None for no bound.
    """
    graph = to_graph(adjacency)
    weights = edge_weights(graph, ds)
    n = graph.n
    leaders = np.asarray(leaders, dtype=bool).ravel()
    if leaders.shape[0] != n:
        raise ValueError(f"leaders has {leaders.shape[0]} values: expected n={n} booleans")
    if sigma is not None and not sigma >= 0:
        raise ValueError(f"sigma = {sigma!r}: expected a number >= 0 or None")
    bound = np.inf if sigma is None else float(sigma)

    dist, leader_of, parent = _dijkstra(graph, weights, leaders, bound)
    return GradientField(G=dist, leader_of=leader_of, parent=parent)


# --------------------------------------------------------------------------------------------
# Leader election: ScaFi's sparse choice S(grain = sigma, metric = ds)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElectionState:
    """Per-node memory of the election between rounds (the ``rep`` state of ScaFi's S).

    Attributes
    ----------
    lead
        the candidate each node currently supports (a node id).
    abdicated
        True where the node advertises ``(inf, lead)``, i.e. abdicates (then
        ``lead`` is the node's own id).
    distance
        the node's last gradient value d_i towards the nearest candidate.
    """

    lead: np.ndarray
    abdicated: np.ndarray
    distance: np.ndarray

    @property
    def is_leader(self) -> np.ndarray:
        """S's output: the node supports itself (uid == lead)."""
        return (~self.abdicated) & (self.lead == np.arange(self.lead.shape[0]))


@dataclass(frozen=True)
class Election:
    """Result of :func:`elect_leaders`.

    Attributes
    ----------
    state
        final :class:`ElectionState` (feed it to the next call when ds changes).
    rounds
        rounds executed.
    converged
        True when the last round changed nothing.
    """

    state: ElectionState
    rounds: int
    converged: bool

    @property
    def is_leader(self) -> np.ndarray:
        """Bool (n,): elected leaders."""
        return self.state.is_leader


def initial_election_state(n: int) -> ElectionState:
    """Every node proclaims its own candidacy (Sec. III-B step 1; Fig. 4 first snapshot)."""
    if n < 0:
        raise ValueError(f"n = {n!r}: expected a node count >= 0")
    return ElectionState(
        lead=np.arange(n, dtype=np.int64),
        abdicated=np.zeros(n, dtype=bool),
        distance=np.zeros(n),
    )


def _uid_rank(n: int, priority: np.ndarray | None) -> np.ndarray:
    """Rank of each node's uid (priority, id) in ScaFi's lexicographic tuple order."""
    if priority is None:
        return np.arange(n, dtype=np.int64)
    priority = np.asarray(priority, dtype=float).ravel()
    if priority.shape[0] != n or not np.isfinite(priority).all():
        raise ValueError(f"priority of shape {priority.shape}: expected {n} finite numbers or None")
    order = np.lexsort((np.arange(n), priority))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return rank


def election_round(
    adjacency: object,
    ds: np.ndarray,
    sigma: float,
    state: ElectionState,
    *,
    priority: np.ndarray | None = None,
    self_ds: np.ndarray | None = None,
) -> ElectionState:
    """One synchronous round of ScaFi's ``S(sigma, ds)`` for every node (Alg. 1 line 5).

    PSFL, Sec. III-B steps 1-4, as coded in ScaFi's ``breakUsingUids`` /
    ``distanceCompetition`` (the block the paper's code calls). Each node i, reading its
    neighbours' state from the previous round:

    1. is a source if it supports itself; d_i = accumulated ds to the nearest source (G, step
       2). We take G's fixed point (shortest path) for the round: ScaFi's ``classicGradient``
       reaches it only over several rounds, and never rises through zero-ds cycles, so using
       the settled field (time-scale separation) keeps the result well defined;
    2. if d_i > sigma it proclaims its own candidacy (too far from any leader, step 3);
    3. elif d_i >= sigma / 2 it abdicates, advertising (inf, i);
    4. else it supports the smallest uid among itself and the neighbours whose path error
       d_j + ds(i, j) stays below sigma / 2 (others count as (inf, j)) - the competition
       policy of step 4. The candidates read are the neighbours' leads from the previous
       round (synchronous rounds), the distances those of this round.

    A uid is the tuple (priority, id) compared lexicographically. ScaFi's default draws a random
    priority once per node; ``priority=None`` uses 0 for all, i.e. the lowest node id wins
    (deterministic). ``self_ds`` is the metric a node measures to itself in the self term of
    step 4: 0 in ScaFi with a spatial metric (the default); the paper's code gets 2 L_ii from
    its ``includingSelf`` loss metric - pass ``np.diag(ds)`` to reproduce that.
    """
    graph = to_graph(adjacency)
    weights = edge_weights(graph, ds)
    n = graph.n
    if not (np.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma = {sigma!r}: expected a finite number >= 0")
    if state.lead.shape[0] != n:
        raise ValueError(f"state.lead has {state.lead.shape[0]} values: expected n={n}")
    self_w = np.zeros(n) if self_ds is None else np.asarray(self_ds, dtype=float).ravel()
    if self_w.shape[0] != n:
        raise ValueError(f"self_ds has {self_w.shape[0]} values: expected n={n}")
    rank = _uid_rank(n, priority)
    if n == 0:
        return state
    ids = np.arange(n, dtype=np.int64)
    # Integer keys preserve ScaFi's tuple order: uids (finite priority) first, then (inf, id).
    key_prev = np.where(state.abdicated, n + state.lead, rank[state.lead])
    source = state.is_leader
    rows, cols = graph.rows, graph.indices

    d_new = _dijkstra(graph, weights, source, np.inf)[0]
    via = d_new[cols] + weights

    half = 0.5 * sigma
    cand = np.where(d_new + self_w >= half, n + ids, key_prev)
    np.minimum.at(cand, rows, np.where(via >= half, n + cols, key_prev[cols]))
    key_new = np.where(d_new > sigma, rank, np.where(d_new >= half, n + ids, cand))

    abdicated = key_new >= n
    inverse = np.empty(n, dtype=np.int64)
    inverse[rank] = ids
    lead = np.where(abdicated, key_new - n, inverse[np.minimum(key_new, n - 1)])
    return ElectionState(lead=lead, abdicated=abdicated, distance=d_new)


def elect_leaders(
    adjacency: object,
    ds: np.ndarray,
    sigma: float,
    *,
    state: ElectionState | None = None,
    priority: np.ndarray | None = None,
    self_ds: np.ndarray | None = None,
    max_rounds: int | None = None,
) -> Election:
    """Run :func:`election_round` until nothing changes (PSFL, Sec. III-B; Alg. 1 line 5).

    Why a fixed point: in the paper the election runs one round per time step and settles
    (Fig. 4); on a static graph with fixed ds its settled state is this fixed point. At a fixed
    point every node lies within ``sigma`` of a leader (a farther node would proclaim itself),
    so ``gradient_field(adjacency, ds, election.is_leader)`` has G <= sigma everywhere - the
    paper's statement "for every node i in federation f_j, G(n_i) <= sigma".

    Parameters
    ----------
    adjacency, ds, sigma, priority, self_ds
        see :func:`election_round`.
    state
        previous state (continue after ds changed); default: everyone a candidate.
    max_rounds
        cap on rounds (default 4 n + 10).
    """
    graph = to_graph(adjacency)
    weights = edge_weights(graph, ds)
    current = initial_election_state(graph.n) if state is None else state
    limit = 4 * graph.n + 10 if max_rounds is None else int(max_rounds)
    if limit < 0:
        raise ValueError(f"max_rounds = {max_rounds!r}: expected an integer >= 0 or None")
    for done in range(1, limit + 1):
        nxt = election_round(graph, weights, sigma, current, priority=priority, self_ds=self_ds)
        same = (
            np.array_equal(nxt.lead, current.lead)
            and np.array_equal(nxt.abdicated, current.abdicated)
            and np.array_equal(nxt.distance, current.distance)
        )
        current = nxt
        if same:
            return Election(state=current, rounds=done, converged=True)
    return Election(state=current, rounds=limit, converged=False)


# --------------------------------------------------------------------------------------------
# Federations and FedAvg inside them (Alg. 1 lines 6-9)
# --------------------------------------------------------------------------------------------


def federations(leader_of: np.ndarray) -> list[np.ndarray]:
    """Members of each federation f_j, one sorted array per leader, leaders in id order.

    PSFL, Sec. III-A: F^t = {f_1, ..., f_m}, each characterised by its leader l_j. Nodes
    with leader -1 (none within sigma) belong to no federation.
    """
    leader_of = np.asarray(leader_of, dtype=np.int64).ravel()
    nodes = np.flatnonzero(leader_of >= 0)
    if nodes.size == 0:
        return []
    order = np.lexsort((nodes, leader_of[nodes]))
    nodes = nodes[order]
    cuts = np.flatnonzero(np.diff(leader_of[nodes])) + 1
    return [np.asarray(part) for part in np.split(nodes, cuts)]


def fedavg_within(federation: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """FedAvg weights |D_k| / sum |D_k| over a federation's members (Alg. 1 line 7).

    The paper aggregates "with FedAvg" inside each federation (Sec. IV-A). Note: its code
    passes equal weights (``List.fill(n)(1.0)``); pass ``np.ones(n)`` as ``sizes`` for that.

    Parameters
    ----------
    federation
        member node ids.
    sizes
        local dataset size per node, indexed by node id.

    Returns
    -------
    np.ndarray
        Weights aligned with ``federation``, summing to 1.
    """
    members = np.asarray(federation, dtype=np.int64).ravel()
    sizes = np.asarray(sizes, dtype=float).ravel()
    if members.size == 0:
        raise ValueError("federation is empty: expected at least one member")
    if members.min() < 0 or members.max() >= sizes.shape[0]:
        raise ValueError(
            f"federation has a member id out of range: expected ids in [0, {sizes.size})"
        )
    chosen = sizes[members]
    if (chosen < 0).any() or not np.isfinite(chosen).all() or chosen.sum() <= 0:
        raise ValueError(
            f"sizes {chosen.tolist()[:8]}: expected finite, >= 0, with a positive total"
        )
    return chosen / chosen.sum()


# --------------------------------------------------------------------------------------------
# Metrics (Sec. IV-B)
# --------------------------------------------------------------------------------------------


def federation_count(leader_of: np.ndarray) -> int:
    """|F| = |L|: number of distinct leaders followed (PSFL, Sec. IV-B)."""
    leader_of = np.asarray(leader_of, dtype=np.int64).ravel()
    return int(np.unique(leader_of[leader_of >= 0]).size)


def correctness(leader_of: np.ndarray, area_of: np.ndarray) -> dict[int, int]:
    """Eq. 6: diamond(f_j) = sum over n in f_j of chi(xi(n), xi(l_j)) for every federation.

    chi is 0 when node n lies in the same area as its leader l_j and 1 otherwise, so the value
    counts the nodes wrongly placed in f_j; 0 means the federation is aligned with its
    leader's area. (The paper's code exports a different, label-set ratio; this is eq. 6.)

    Parameters
    ----------
    leader_of
        leader per node (-1: in no federation, skipped).
    area_of
        actual area xi(n) per node.

    Returns
    -------
    dict[int, int]
        {leader id: number of misplaced members}.
    """
    leader_of = np.asarray(leader_of, dtype=np.int64).ravel()
    area_of = np.asarray(area_of).ravel()
    if area_of.shape[0] != leader_of.shape[0]:
        raise ValueError(
            f"area_of has {area_of.shape[0]} values: expected {leader_of.shape[0]} (one per node)"
        )
    result: dict[int, int] = {}
    for members in federations(leader_of):
        leader = int(leader_of[members[0]])
        result[leader] = int(np.count_nonzero(area_of[members] != area_of[leader]))
    return result


def leader_changes(leader_history: np.ndarray) -> np.ndarray:
    """Eq. 7: DL(n, t) = chi(zeta(n, t), zeta(n, t - 1)) - 1 where the leader changed.

    Parameters
    ----------
    leader_history
        leader of a node over time, shape (T,), or (T, N) for N nodes.

    Returns
    -------
    np.ndarray
        Int array of shape (T - 1,) or (T - 1, N); entry k is DL at time t = k + 1
        (DL at t = 0 is undefined).
    """
    history = np.asarray(leader_history)
    if history.ndim not in (1, 2):
        raise ValueError(f"leader_history has ndim {history.ndim}: expected 1 (T,) or 2 (T, N)")
    return (history[1:] != history[:-1]).astype(np.int64)


def path_delivered(parent: np.ndarray, hop_ok: np.ndarray) -> np.ndarray:
    """Whether every hop from each node to the root of its tree carried its message.

    ``parent`` is the gradient field's next hop (-1 at roots: leaders and unassigned nodes),
    ``hop_ok[i]`` whether the message on the hop between ``i`` and ``parent[i]`` arrived
    (ignored at roots). PSFL collects models along the field (C, Alg. 1 line 7) and
    distributes the federation model back along it (G, line 8): a node's model reaches its
    leader, and the leader's reaches it, only if every hop of the path delivered.
    Vectorised by pointer doubling (log2 of the depth rounds; no per-node Python).
    """
    parent = np.asarray(parent, np.int64)
    n = parent.size
    root = parent < 0
    up = np.where(root, np.arange(n), parent)
    ok = np.where(root, True, np.asarray(hop_ok, bool))
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2)))) + 1)):
        if (up[up] == up).all():
            break
        ok = ok & ok[up]
        up = up[up]
    return ok & ok[up]
