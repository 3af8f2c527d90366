"""How the training set is split over agents: pure functions of (labels, rng).

Each function returns ``list[np.ndarray]``: the training-sample indices of each agent, no
sample given to two agents, except ``shards_resampled``, the one scheme that says it shares:
it draws each agent's samples *with replacement* within its shards' labels, so a fleet larger
than the data set (10,000 cars on ``mnist5k``'s 4,000 training images) keeps Cached-DFL's
label skew. The others refuse such a fleet and name it. The heterogeneity settings follow
Cached-DFL (Experiments, "Datasets"): *i.i.d.*, *extreme non-i.i.d.* shards (10/20/30/40 %
of agents get 4/3/2/1 of 2N label-sorted shards) and *Dirichlet* (pi = 0.5 there; also
Reza et al.'s alpha = 0.05/0.1).
``area`` gives agents of each map area samples from that area's label subset only (Cached-DFL
group experiment, PSFL area skew).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mobidfl.errors import ConfigError, bad_argument
from mobidfl.plugins import PARTITIONS
from mobidfl.settings import COUNT_SETTING

__all__ = [
    "PARTITIONS",
    "label_histograms",
    "make_partition",
    "partition_area",
    "partition_dirichlet",
    "partition_iid",
    "partition_shards",
    "partition_shards_resampled",
    "shard_counts",
]


AGENT_COUNTS = "+".join(COUNT_SETTING.values())
"""The settings whose sum is the fleet a partition must serve (as the config names them)."""

SHARED_HINT = "or partition = shards_resampled (samples drawn with replacement, shared)"
"""Said by every refusal of a fleet larger than the data set: the explicit way to share."""

MIN_SHARD_SIZE = 32
"""Smallest virtual shard of ``shards_resampled``: two default batches (B = 16), so an agent
with one shard still draws distinct batches."""

SHARD_MIX: tuple[tuple[int, float], ...] = ((4, 0.1), (3, 0.2), (2, 0.3))
"""(shards per agent, fraction of agents); the rest (40 %) get 1 shard. Cached-DFL."""


def _check_agents(labels: np.ndarray, n_agents: int) -> np.ndarray:
    labels = np.asarray(labels).reshape(-1)
    if isinstance(n_agents, bool) or int(n_agents) < 1:
        raise bad_argument("n_agents", n_agents, "an integer >= 1")
    if labels.size < n_agents:
        raise ConfigError(
            AGENT_COUNTS,
            n_agents,
            f"at most the number of training samples ({labels.size}), {SHARED_HINT}",
        )
    return labels


def partition_iid(
    labels: np.ndarray, n_agents: int, *, rng: np.random.Generator
) -> list[np.ndarray]:
    """Shuffle all samples and deal them out in N near-equal parts (sizes differ by <= 1)."""
    labels = _check_agents(labels, n_agents)
    return [np.sort(p) for p in np.array_split(rng.permutation(labels.size), n_agents)]


def shard_counts(n_agents: int) -> np.ndarray:
    """How many shards each of N agents receives (before shuffling agents); sums to 2N.

    ``floor(0.1 N)`` agents get 4, ``floor(0.2 N)`` get 3, ``floor(0.3 N)`` get 2, the rest 1
    (Cached-DFL: 4*.1 + 3*.2 + 2*.3 + 1*.4 = 2 shards per agent on average). When N is not a
    multiple of 10 the floors leave ``N - (3 n4 + 2 n3 + n2)`` shards (at most 5) undealt;
    each goes as a second shard to one of the 1-shard agents, so exactly 2N shards are always
    used and the split is exact for N divisible by 10.
    """
    counts = []
    for shards, fraction in SHARD_MIX:
        counts += [shards] * int(np.floor(fraction * n_agents + 1e-9))
    counts += [1] * (n_agents - len(counts))
    out = np.asarray(counts, dtype=np.int64)
    left = 2 * n_agents - int(out.sum())
    ones = np.flatnonzero(out == 1)
    assert 0 <= left <= ones.size, (n_agents, left)
    out[ones[:left]] += 1
    return out


def partition_shards(
    labels: np.ndarray, n_agents: int, *, rng: np.random.Generator
) -> list[np.ndarray]:
    """Cached-DFL extreme non-i.i.d.: sort by label, cut into 2N shards, deal 4/3/2/1 shards.

    Within a label the order is random (so a shard is a random sample of its 1-2 labels);
    which agent gets how many shards and which shards are both drawn from ``rng``.
    """
    labels = _check_agents(labels, n_agents)
    n_shards = 2 * n_agents
    if n_shards > labels.size:
        raise ConfigError(
            AGENT_COUNTS,
            n_agents,
            f"shards need 2N <= training samples ({labels.size}); use fewer agents, "
            f"{SHARED_HINT}",
        )
    order = rng.permutation(labels.size)
    order = order[np.argsort(labels[order], kind="stable")]
    shards = np.array_split(order, n_shards)
    per_agent = rng.permutation(shard_counts(n_agents))
    dealt = rng.permutation(n_shards)
    bounds = np.concatenate([[0], np.cumsum(per_agent)])
    return [
        np.sort(np.concatenate([shards[s] for s in dealt[bounds[i] : bounds[i + 1]]]))
        for i in range(n_agents)
    ]


def partition_shards_resampled(
    labels: np.ndarray,
    n_agents: int,
    *,
    rng: np.random.Generator,
    shard_size: int | None = None,
) -> list[np.ndarray]:
    """Cached-DFL's shard mix for any fleet size.

    Virtual shards filled by sampling with replacement within one label.

    The data set's labels sorted and cut into 2N equal *virtual* shards, as in
    :func:`partition_shards`; virtual shard ``s`` takes the label found at the middle of its
    cut, ``sorted_labels[floor((s + 1/2) |D| / 2N)]`` (so the labels' shares are the data
    set's, and each shard has one label), and ``shard_size`` samples drawn uniformly *with
    replacement* from that label's samples. Agents receive 4/3/2/1 shards as in Cached-DFL
    (:func:`shard_counts`). A sample can then sit in several agents' data (and twice in
    one): the run states this by naming the partition, never by falling back to it.
    ``shard_size`` defaults to ``max(|D| // 2N, MIN_SHARD_SIZE)``, i.e. :func:`partition_shards`'s
    shard size while the data set is large enough, and :data:`MIN_SHARD_SIZE` beyond.
    Vectorised: one draw for all shards and one sort, whatever N.
    """
    labels = np.asarray(labels).reshape(-1)
    if isinstance(n_agents, bool) or int(n_agents) < 1:
        raise bad_argument("n_agents", n_agents, "an integer >= 1")
    if labels.size < 1:
        raise bad_argument("labels", 0, "at least one training sample")
    n_agents = int(n_agents)
    n_shards = 2 * n_agents
    size = max(labels.size // n_shards, MIN_SHARD_SIZE) if shard_size is None else shard_size
    if isinstance(size, bool) or int(size) < 1:
        raise bad_argument("shard_size", shard_size, "an integer >= 1")
    size = int(size)
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    classes, first, count = np.unique(sorted_labels, return_index=True, return_counts=True)
    middle = ((np.arange(n_shards) + 0.5) * labels.size / n_shards).astype(np.int64)
    cls = np.searchsorted(classes, sorted_labels[middle])  # one label per virtual shard
    draws = first[cls][:, None] + (rng.random((n_shards, size)) * count[cls][:, None]).astype(
        np.int64
    )  # [2N, size] positions in ``order``, uniform within the shard's label
    per_agent = rng.permutation(shard_counts(n_agents))
    dealt = rng.permutation(n_shards)
    owner = np.repeat(np.arange(n_agents), per_agent)  # owner of dealt[k]
    samples = order[draws[dealt]]  # [2N, size], row k belongs to owner[k]
    keys = np.repeat(owner, size) * labels.size + samples.reshape(-1)
    keys.sort()  # by agent, then sample index: one sort for the whole fleet
    cuts = np.cumsum(per_agent * size)[:-1]
    return np.split(keys % labels.size, cuts)


def partition_dirichlet(
    labels: np.ndarray,
    n_agents: int,
    *,
    alpha: float,
    rng: np.random.Generator,
    min_size: int = 10,
    max_tries: int = 1000,
) -> list[np.ndarray]:
    """Per class c, split its samples over agents with proportions p_c ~ Dir_N(alpha).

    The usual label-skew scheme (Cached-DFL with pi = 0.5, after Xiong et al. 2024; Reza et al.).
    Small alpha gives each agent few classes. Draws are repeated until every agent holds at
    least ``min_size`` samples (an agent needs a full batch to train).
    """
    labels = _check_agents(labels, n_agents)
    if not alpha > 0 or not np.isfinite(alpha):
        raise ConfigError("dirichlet_alpha", alpha, "a finite number > 0")
    if min_size * n_agents > labels.size:
        raise ConfigError(
            AGENT_COUNTS,
            n_agents,
            f"N * min_size ({min_size}) <= training samples ({labels.size}), {SHARED_HINT}",
        )
    by_class = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_agents)]
        for idx in by_class:
            idx = rng.permutation(idx)
            p = rng.dirichlet(np.full(n_agents, float(alpha)))
            cuts = (np.cumsum(p)[:-1] * idx.size).astype(np.int64)
            for i, chunk in enumerate(np.split(idx, cuts)):
                parts[i].append(chunk)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(p.size for p in out) >= min_size:
            return out
    raise ConfigError(
        "dirichlet_alpha",
        alpha,
        f"a larger alpha, fewer agents or a larger dataset: {max_tries} draws over "
        f"{n_agents} agents and {labels.size:,} training samples left an agent with "
        f"< {min_size} samples",
    )


def partition_area(
    labels: np.ndarray,
    agent_area: np.ndarray,
    area_labels: Sequence[Sequence[int]],
    *,
    rng: np.random.Generator,
    per_agent: int | None = None,
    within: str = "iid",
) -> list[np.ndarray]:
    """Area-specific label skew: agents only get samples whose label is in their area's set.

    Cached-DFL group experiment (three areas with labels {9,0,1,2}, {3,4,5,6}, {6,7,8,9}) and
    PSFL (k areas with disjoint label subsets). A label listed by several areas is split
    between them in proportion to their agent counts, so no sample is used twice; agents of
    one area share their area's pool without overlap, either evenly at random
    (``within='iid'``) or with Cached-DFL's shards (``within='shards'``). ``per_agent`` caps
    each agent at that many samples (``None`` = share the whole pool).
    """
    labels = np.asarray(labels).reshape(-1)
    area = np.asarray(agent_area, dtype=np.int64).reshape(-1)
    n_areas = len(area_labels)
    if area.size < 1:
        raise bad_argument("n_agents", 0, "at least one agent")
    if n_areas < 1:
        raise ConfigError("area_labels", area_labels, "one label list per area")
    if area.min() < 0 or area.max() >= n_areas:
        raise bad_argument("agent_area", int(area.max()), f"area ids in [0, {n_areas})")
    if within not in ("iid", "shards"):
        raise bad_argument("within", within, "iid or shards")
    if per_agent is not None and per_agent < 1:
        raise bad_argument("per_agent", per_agent, "an integer >= 1 or None")
    present = set(np.unique(labels).tolist())
    agents_in = np.bincount(area, minlength=n_areas)
    pools: list[list[np.ndarray]] = [[] for _ in range(n_areas)]
    for c in sorted({int(c) for group in area_labels for c in group}):
        if c not in present:
            raise ConfigError("area_labels", c, f"labels present in the data {sorted(present)}")
        owners = [a for a in range(n_areas) if c in set(area_labels[a]) and agents_in[a] > 0]
        if not owners:
            continue
        idx = rng.permutation(np.flatnonzero(labels == c))
        weight = agents_in[owners] / agents_in[owners].sum()
        cuts = (np.cumsum(weight)[:-1] * idx.size).astype(np.int64)
        for a, chunk in zip(owners, np.split(idx, cuts), strict=True):
            pools[a].append(chunk)
    parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * area.size
    for a in range(n_areas):
        members = np.flatnonzero(area == a)
        if members.size == 0:
            continue
        pool = np.concatenate(pools[a]) if pools[a] else np.empty(0, dtype=np.int64)
        if pool.size < members.size:
            raise ConfigError(
                "area_labels",
                list(area_labels[a]),
                f"enough samples for area {a}'s {members.size} agents (has {pool.size})",
            )
        if per_agent is not None:
            need = per_agent * members.size
            if need > pool.size:
                raise bad_argument(
                    "per_agent",
                    per_agent,
                    f"<= {pool.size // members.size} (area {a}: {pool.size} samples, "
                    f"{members.size} agents)",
                )
            pool = rng.permutation(pool)[:need]
        split = (
            partition_shards(labels[pool], members.size, rng=rng)
            if within == "shards"
            else partition_iid(labels[pool], members.size, rng=rng)
        )
        for agent, local in zip(members, split, strict=True):
            parts[agent] = np.sort(pool[local])
    return parts


def label_histograms(
    labels: np.ndarray, parts: Sequence[np.ndarray], num_classes: int
) -> np.ndarray:
    """``[N, C]`` sample count per agent and class (what DAM/DCM and PSFL read)."""
    labels = np.asarray(labels).reshape(-1)
    n = len(parts)
    sizes = np.fromiter((np.size(p) for p in parts), dtype=np.int64, count=n)
    if n == 0 or sizes.sum() == 0:
        return np.zeros((n, num_classes), dtype=np.int64)
    flat = np.concatenate([np.asarray(p, dtype=np.int64).reshape(-1) for p in parts])
    lab = labels[flat].astype(np.int64)
    keep = lab < num_classes
    owner = np.repeat(np.arange(n), sizes)
    counts = np.bincount(owner[keep] * num_classes + lab[keep], minlength=n * num_classes)
    return counts.reshape(n, num_classes)


for _name, _partition in (
    ("iid", partition_iid),
    ("shards", partition_shards),
    ("dirichlet", partition_dirichlet),
    ("area", partition_area),
    ("shards_resampled", partition_shards_resampled),
):
    PARTITIONS.register(_name)(_partition)  # names of setting ``partition``: mobidfl.plugins


def make_partition(
    name: str,
    labels: np.ndarray,
    n_agents: int,
    *,
    rng: np.random.Generator,
    alpha: float = 0.5,
    agent_area: np.ndarray | None = None,
    area_labels: Sequence[Sequence[int]] | None = None,
    per_agent: int | None = None,
    min_size: int = 10,
    within: str = "iid",
) -> list[np.ndarray]:
    """Dispatch on the ``partition`` setting; see the functions above for each scheme."""
    if name == "iid":
        return partition_iid(labels, n_agents, rng=rng)
    if name == "shards":
        return partition_shards(labels, n_agents, rng=rng)
    if name == "shards_resampled":
        return partition_shards_resampled(labels, n_agents, rng=rng)
    if name == "dirichlet":
        return partition_dirichlet(labels, n_agents, alpha=alpha, rng=rng, min_size=min_size)
    if name == "area":
        if agent_area is None or area_labels is None:
            raise ConfigError(
                "partition", name, "area needs agent_area and area_labels (the map areas)"
            )
        if len(agent_area) != n_agents:
            raise bad_argument("agent_area", len(agent_area), f"one area per agent ({n_agents})")
        return partition_area(
            labels, agent_area, area_labels, rng=rng, per_agent=per_agent, within=within
        )
    raise ConfigError("partition", name, "one of " + ", ".join(PARTITIONS))
