"""``defedavg``: pairwise decentralized FedAvg without caches (Cached-DFL's "DFL" baseline).

Cached-DFL (Wang et al., AAAI 2025) is compared with DeFedAvg (Sun, Li and Wang
2022), "where each agent can only get new model by averaging with another model"
(Remark 2). The authors' code does exactly that: after local training, every car that met
somebody during the epoch averages its model with ONE peer's trained model (the last car
it met in the epoch), weighted by the two sample counts::

    x_i <- (n_i x_i + n_j x_j) / (n_i + n_j)

MobiDFL has no within-step contact times, so the one peer is drawn uniformly at random from
the members met during the step; agents that met nobody keep their model. The draws come
from the policy's own generator (seeded by ``seed``), not from the model's, so the mobility
and contacts of a run do not depend on the policy (paired comparisons between policies).
Every agent picks its own peer, so ``i`` may average with ``j`` while ``j`` averages with
``k`` (as in the authors' code, where the last contact differs per car).

How it differs from the other neighbourhood policies:

* ``dpsgd`` (de Heredia 2024): equal weights ``1/|M_i|`` over ALL neighbours met and itself.
* ``fedavg_weighted`` (Reza et al. eq. 2): data-size weights over ALL neighbours met.
* ``defedavg`` (this): data-size weights over itself and ONE neighbour met.
"""

from __future__ import annotations

from typing import Any, ClassVar, override

import numpy as np
import scipy.sparse as sp

from mobidfl.errors import bad_argument
from mobidfl.model.maths.mixing import member_mask
from mobidfl.model.policies.base import (
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
    register_policy,
)
from mobidfl.model.policies.dpsgd import member_degree_mean

RNG_TAG = 0xDEFED
"""Second word of the policy generator's seed ``[seed, RNG_TAG]``."""


def pairwise_rows(
    adjacency: sp.spmatrix,
    data_sizes: np.ndarray,
    members: np.ndarray,
    *,
    rng: np.random.Generator,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Mixing rows of pairwise data-size-weighted averaging with one random peer each.

    Cached-DFL, DFL baseline (DeFedAvg as run in the authors' code): member ``i`` with at least
    one member neighbour picks a peer ``j`` uniformly among them and gets
    ``W_ii = n_i / (n_i + n_j)``, ``W_ij = n_j / (n_i + n_j)``; every other row is the
    identity.

    Parameters
    ----------
    adjacency
        N x N symmetric boolean contacts of this step (no self loops).
    data_sizes
        sample count per agent (> 0 for members).
    members
        global indices of the agents using the policy.
    rng
        draws the peers.

    Returns
    -------
    tuple[sp.csr_matrix, np.ndarray]
        ``(W, peer)`` with ``peer[i]`` the chosen peer of agent ``i`` or -1.
    """
    a = sp.csr_matrix(adjacency, dtype=bool)
    n = a.shape[0]
    mask = member_mask(n, members)
    sizes = np.asarray(data_sizes, dtype=np.float64).reshape(-1)
    if sizes.shape != (n,) or (sizes[mask] <= 0).any():
        raise bad_argument("data_sizes", sizes.shape, f"a positive sample count per agent ({n})")
    if not mask.all():
        keep = sp.diags(mask.astype(np.float64))
        a = sp.csr_matrix((keep @ a.astype(np.float64) @ keep) != 0)
    a.sort_indices()
    degree = np.diff(a.indptr)
    peer = np.full(n, -1, dtype=np.int64)
    chooser = np.flatnonzero(degree > 0)
    if chooser.size:
        pick = np.floor(rng.random(chooser.size) * degree[chooser]).astype(np.int64)
        peer[chooser] = a.indices[a.indptr[chooser] + pick]
    rows = np.arange(n)
    has = peer >= 0
    own = np.where(has, sizes / (sizes + np.where(has, sizes[np.maximum(peer, 0)], 0.0)), 1.0)
    w = sp.csr_matrix((own, (rows, rows)), shape=(n, n))
    w = w + sp.csr_matrix((1.0 - own[has], (rows[has], peer[has])), shape=(n, n))
    w = sp.csr_matrix(w)
    w.eliminate_zeros()
    w.sort_indices()
    return w, peer


@register_policy
class DeFedAvgPolicy(ExchangePolicy):
    """Pairwise data-size-weighted averaging with one peer met during the step."""

    name = "defedavg"
    metric_names: ClassVar[tuple[str, ...]] = ("degree_mean", "paired_fraction")

    def __init__(self, *, settings: Any) -> None:
        super().__init__(settings=settings)
        self.rng = np.random.default_rng([int(getattr(settings, "seed", 0)), RNG_TAG])

    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        rows, peer = pairwise_rows(
            ctx.adjacency, ctx.agents.data_size, ctx.members, rng=self.rng
        )
        paired = float((peer[ctx.members] >= 0).mean()) if ctx.members.size else 0.0
        chooser = np.flatnonzero(peer >= 0)  # each gets its one peer's model
        return Exchange(
            rows=rows,
            metrics={"degree_mean": member_degree_mean(ctx), "paired_fraction": paired},
            messages=Messages.between(peer.size, peer[chooser], chooser),
        )

    def state_dict(self) -> dict:
        """The peer-drawing generator's state (plain ints)."""
        return {"rng": self.rng.bit_generator.state}

    @override
    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
