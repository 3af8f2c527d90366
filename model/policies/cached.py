"""``cached_lru`` and ``cached_group_lru``: Cached-DFL (Wang et al., AAAI 2025).

Every member keeps, besides its own model, a cache of models of other agents it met directly
or through another agent's cache. One step is one global epoch ``t`` of Alg. 1:

1. local update (lines 1-9, 16): done by the engine before :meth:`exchange` (with the
   proximal term ``prox_rho``);
2. cache update (line 17, Alg. 2): stale models (``t - tau >= tau_max``) leave every cache
   at the start of the epoch; then each encounter of two members during the step runs
   :func:`mobidfl.model.maths.cache.exchange_pair` (both sides computed from the caches they held
   when they met, each sending its freshly trained model ``x~_j(t)`` with timestamp ``t``
   and its cache). Encounters are processed one after another, so a model can travel
   several hops within one epoch, in the order of first contact within the step
   (:func:`mobidfl.model.contacts.contact_times`: the moment the pair's sampled motion first comes
   within R), as in the authors' code where cars advance in 1 s sub-steps and exchange as
   they meet. Ties (all pairs under ``contact = end``, which has no time) keep the order
   of a random permutation drawn from the policy's own generator (seeded by ``seed``, so
   the model's mobility stream, and hence every contact, is the same as under any other
   policy with the same seed: comparisons between policies are paired). ``cached.passes``
   replays the step's encounters that many times (1 = Alg. 1 and the authors' training
   loop; the authors' Table 2 function replays them ``local_ep`` = 10 times, see
   :func:`replay_encounters` and validation/README.md);
3. aggregation (lines 10-13, 18): ``x_i(t+1) = sum_j alpha_j x~_j(tau)`` over the own model
   and the cached ones with ``alpha_j = n_j / sum n`` (sample counts,
   :func:`mobidfl.model.maths.cache.aggregation_weights`).

Cache entries hold the tuples returned by ``engine.snapshot(i)`` (immutable, shared): a
model cached by 30 agents is stored once; nothing is ever copied. ``cached_group_lru``
splits the cache into one sub-cache per home area (the origin's ``ctx.agents.area``),
"each sub-cache is updated by local models from its associated group, using the LRU
policy" (Cached-DFL, "Grouped Mobility Patterns").

Timestamp ties (common when contacts are dense: all cached models carry the current
epoch) keep arrival order, as the authors' stable sort does; breaking them by origin id
makes every agent keep the same lowest-numbered origins, so the other agents' models spread
less and LRU's accuracy in Fig. 2's setting falls (docs/performance/measurements.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from mobidfl.errors import ConfigError, bad_argument
from mobidfl.model.maths.cache import (
    CacheEntry,
    aggregation_weights,
    cache_stats,
    evict_stale,
    exchange_pair,
    group_lru_update,
    lru_update,
)
from mobidfl.model.maths.mixing import member_pairs
from mobidfl.model.policies.base import (
    AgentTable,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
    register_policy,
)
from mobidfl.settings import PluginSettings, at_least_one, setting

if TYPE_CHECKING:
    from mobidfl.agents.views import WorldView
    from mobidfl.model.learning.engine import Engine
    from mobidfl.model.links import LinkPlan

STATE_FORMAT = 1
RNG_TAG = 0xCAC4E
"""Second word of the policy generator's seed ``[seed, RNG_TAG]``."""


def encounter_order(
    pairs: np.ndarray, times: np.ndarray, members: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Member-member ``pairs`` sorted by first-contact ``times``; ties in a random order.

    Cached-DFL (Wang et al., AAAI 2025, Alg. 2 applied per encounter): a relay A-B then
    B-C within one epoch carries A's model to C only in that order.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    times = np.asarray(times, dtype=float).reshape(-1)
    if pairs.shape[0] != times.size:
        raise bad_argument("encounters", (pairs.shape[0], times.size), "one time per pair")
    mask = np.zeros(int(pairs.max(initial=-1)) + 1, bool)
    idx = np.asarray(members, dtype=np.int64)
    mask[idx[idx < mask.size]] = True
    keep = mask[pairs[:, 0]] & mask[pairs[:, 1]] if pairs.size else np.zeros(0, bool)
    pairs, times = pairs[keep], times[keep]
    shuffled = rng.permutation(len(pairs))
    order = shuffled[np.argsort(times[shuffled], kind="stable")]
    return pairs[order]


def replay_encounters(
    caches: dict[int, dict[int, CacheEntry]],
    own: dict[int, CacheEntry],
    edges: np.ndarray,
    *,
    now: int,
    tau_max: int,
    passes: int = 1,
    tally: Messages | None = None,
    **limits: Any,
) -> dict[int, dict[int, CacheEntry]]:
    """One step's cache updates: :func:`exchange_pair` for every encounter, ``passes`` times.

    ``tally`` (updated in place): at each encounter each side sends its own model and every
    model it holds in cache then ("they not only exchange their own local models, but also
    share their cached models"), the messages :meth:`CachedPolicy.outbox` sends over a link.

    Cached-DFL, Alg. 2 per encounter, in the given order. ``passes = 1`` is Alg. 1 and the
    authors' training loop (``trainer_single.py``, ``Decentralized_Cache_process``: one pass of
    ``update_model_cache`` over the round's pairs). The authors' Table 2 statistic comes from
    ``Decentralized_Cache_test``, which replays the whole round's pair list ``local_ep`` (10)
    times (``for ep in range(local_ep)``), so a model relays along chains of meetings in any
    time order, up to ``passes`` hops per chain. Returns new caches; inputs are not mutated.
    """
    if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 1:
        raise ConfigError("cached.passes", passes, "an integer >= 1")
    out = dict(caches)
    pairs = np.asarray(edges, dtype=np.int64).reshape(-1, 2).tolist()
    for _ in range(int(passes)):
        for i, j in pairs:
            if tally is not None:  # the caches held when they met (before the update)
                to_j, to_i = 1 + len(out[i]), 1 + len(out[j])
                tally.sent[i] += to_j
                tally.received[j] += to_j
                tally.sent[j] += to_i
                tally.received[i] += to_i
            out[i], out[j] = exchange_pair(
                out[i], out[j], own[i], own[j], now=now, tau_max=tau_max, **limits
            )
    return out


def even_group_limits(cache_size: int, groups: int) -> list[int]:
    """``cache_size`` split over ``groups`` sub-caches, the remainder to the first ones.

    Cached-DFL: "On each vehicle, we evenly divide the cache for the three areas" (10 -> 4,3,3).
    """
    if groups < 1:
        raise ConfigError("areas", groups, "an integer >= 1")
    base, extra = divmod(int(cache_size), int(groups))
    return [base + (1 if g < extra else 0) for g in range(groups)]


def parse_group_limits(text: str, *, cache_size: int, groups: int) -> list[int]:
    """Per-area sub-cache sizes from the ``cache_groups`` setting (empty = even split)."""
    if not text.strip():
        return even_group_limits(cache_size, groups)
    try:
        limits = [int(v) for v in text.split(",")]
    except ValueError:
        raise ConfigError("cache_groups", text, "comma-separated integers, e.g. 4,3,3") from None
    if len(limits) != groups or any(v < 0 for v in limits) or sum(limits) < 1:
        raise ConfigError(
            "cache_groups",
            text,
            f"{groups} non-negative integers (one per area, setting 'areas') with sum >= 1",
        )
    return limits


class Aggregation(Mapping[int, tuple]):
    """``x_i(t+1) = sum_j alpha_j x~_j(tau)`` per car (Cached-DFL, Alg. 1 line 18), when read.

    The caller writes each into the engine as it reads it, so one aggregated model exists at a time
    instead of one per car. It reads only the immutable snapshots, so the order of reading (and rows
    written meanwhile) changes nothing.
    """

    def __init__(self, engine: Engine, recipes: dict[int, tuple[list, Sequence[float]]]) -> None:
        self._engine = engine
        self._recipes = recipes

    def __getitem__(self, i: int) -> tuple:
        snapshots, weights = self._recipes[i]
        return self._engine.combine(snapshots, weights)

    def __iter__(self):
        return iter(self._recipes)

    def __len__(self) -> int:
        return len(self._recipes)


# A PluginSettings class has this shape (namespace, setting(...)) everywhere: the declared contract.
@dataclass(frozen=True, kw_only=True)
class CachedSettings(PluginSettings):
    """Cache bounds shared by ``cached_lru`` and ``cached_group_lru`` (Cached-DFL)."""

    namespace: ClassVar[str] = "cached"
    size: int = setting(
        10, "cached_lru/cached_group_lru: cache size C_max (Cached-DFL)", at_least_one,
        alias="cache_size",
    )
    tau_max: int = setting(
        5, "cached_lru/cached_group_lru: staleness tolerance tau_max in steps", at_least_one,
        alias="tau_max",
    )
    groups: str = setting(
        "", "per-area cache limits, e.g. 4,3,3 (empty = even split)",
        alias="cache_groups", readers=("cached_group_lru",),
    )
    passes: int = setting(
        1,
        "times a step's encounters are replayed (1 = Alg. 1 and the authors' training loop; "
        "10 = the authors' Table 2 function, local_ep passes)",
        at_least_one,
    )


class CachedPolicy(ExchangePolicy):
    """Shared machinery of the LRU and group-LRU Cached-DFL policies."""

    settings_class = CachedSettings
    options: CachedSettings

    metric_names: ClassVar[tuple[str, ...]] = ("cache_size_mean", "cache_age_mean")
    needs_encounter_times: ClassVar[bool] = True
    honours_link = True
    resumes_transfers = True  # LinkPlan.send keeps the cut entry (DTN custody transfer)

    @classmethod
    def held_models(cls, settings: Any) -> int:
        """Distinct snapshots per car at the peak of an epoch.

        Its own fresh one and cached ones of the last ``tau_max - 1`` epochs, at most C_max
        (Cached-DFL Alg. 2: staler ones are evicted before the fresh ones are taken). A cache entry
        refers to a shared snapshot, so an epoch's snapshots count once, however many caches hold
        them: at most one per car per epoch. The aggregated models are computed one at a time as
        they are written (:class:`Aggregation`), so they add no copy per car. The bound is reached:
        cars that meet one new peer per epoch cache a distinct snapshot of each of the last
        ``tau_max`` epochs (between two exchanges, the fresh epoch's included).
        """
        options = CachedSettings.of(settings)
        return 1 + min(options.size, options.tau_max - 1)

    def __init__(self, *, settings: Any) -> None:
        super().__init__(settings=settings)
        self.caches: dict[int, dict[int, CacheEntry]] = {}
        self.rng = np.random.default_rng([int(getattr(settings, "seed", 0)), RNG_TAG])

    # --- configuration ------------------------------------------------------------------------
    @property
    def tau_max(self) -> int:
        """Staleness tolerance in epochs (``cached.tau_max``)."""
        return self.options.tau_max

    def _limits(self) -> dict[str, Any]:
        """Keyword arguments of :func:`exchange_pair` that bound the cache."""
        return {"cache_size": self.options.size}

    def _group_of(self, agents: AgentTable, origin: int) -> int:
        return 0

    # --- policy interface ---------------------------------------------------------------------
    # The signature of ExchangePolicy.setup: an override repeats it.
    def setup(
        self,
        *,
        members: np.ndarray,
        engine: Engine,
        agents: AgentTable,
        rng: np.random.Generator,
        world: WorldView | None = None,
    ) -> None:
        """Empty caches for every member (Alg. 1 input: no cached models at t = 0)."""
        self._limits()  # fail early on bad cache settings
        for i in np.asarray(members).reshape(-1):
            self._group_of(agents, int(i))
        self.caches = {int(i): {} for i in np.asarray(members).reshape(-1)}

    def exchange(self, ctx: ExchangeContext) -> Exchange:
        """Cached-DFL, Alg. 1 lines 17-18 for every member: cache update, then aggregation."""
        now, tau_max, limits = int(ctx.step), self.tau_max, self._limits()
        sizes = ctx.agents.data_size
        members = [int(i) for i in ctx.members]
        # Alg. 1 line 17 runs CACHEUPDATE every epoch: stale models leave every cache first,
        # and are released before the fresh snapshots are taken (held_models).
        self.caches = caches = {
            i: evict_stale(self.caches.get(i, {}), now=now, tau_max=tau_max) for i in members
        }
        # x~_i(t): the freshly trained models, one shared snapshot each.
        own = {
            i: CacheEntry(
                origin=i,
                timestamp=now,
                size=int(sizes[i]),
                group=self._group_of(ctx.agents, i),
                payload=ctx.engine.snapshot(i),
            )
            for i in members
        }
        edges = self._encounter_order(ctx)
        messages = None
        if ctx.link is None:
            messages = Messages.none(ctx.adjacency.shape[0])
            caches = replay_encounters(
                caches, own, edges, now=now, tau_max=tau_max, passes=self.options.passes,
                tally=messages, **limits,
            )
        else:  # one pass: mobidfl.model.config refuses cached.passes > 1 with a link
            for i, j in edges.tolist():
                caches[i], caches[j] = self._exchange_over_link(
                    ctx.link, caches[i], caches[j], own[i], own[j], now=now, tau_max=tau_max,
                    limits=limits,
                )
        recipes = {}
        for i in members:
            entries = list(caches[i].values())
            if not entries:
                continue  # nothing cached: x_i(t+1) = x~_i(t), already in the engine
            weights = aggregation_weights(int(sizes[i]), entries)
            recipes[i] = ([own[i].payload, *(e.payload for e in entries)], weights)
        self.caches = caches
        metrics: dict[str, float] = {}
        if members:
            count, age = cache_stats(caches.values(), now=now)
            metrics = {"cache_size_mean": count, "cache_age_mean": age}
        return Exchange(assign=Aggregation(ctx.engine, recipes), metrics=metrics,
                        messages=messages)

    @staticmethod
    def outbox(own: CacheEntry, cache: Mapping[int, CacheEntry], size: int) -> list:
        """What a car sends at an encounter, in order.

        Its own model, then its cached models freshest first (ties in cache order), as ``((origin,
        timestamp), bytes)``.

        Cached-DFL: "When two agents meet, they not only exchange their own local models,
        but also share their cached models with each other". The paper gives no order;
        MobiDFL sends the own model first because it is the newest, then fresher cached
        models before staler ones because they weigh more for the receiver's LRU cache
        (Alg. 2 lines 17-18), so a contact cut short loses the least useful models.
        """
        entries = sorted(cache.values(), key=lambda e: -int(e.timestamp))
        return [((e.origin, e.timestamp), size) for e in (own, *entries)]

    def _exchange_over_link(
        self, link: LinkPlan, cache_i: Mapping[int, CacheEntry], cache_j: Mapping[int, CacheEntry],
        own_i: CacheEntry, own_j: CacheEntry, *, now: int, tau_max: int, limits: dict[str, Any],
    ) -> tuple[dict[int, CacheEntry], dict[int, CacheEntry]]:
        """:func:`exchange_pair` over a link.

        Each side receives only the messages of :meth:`outbox` that arrived whole before the contact
        ended (both from the caches held when they met). A side that received nothing keeps its
        cache.
        """
        i, j = own_i.origin, own_j.origin
        at_j, at_i = link.send(
            i, j, self.outbox(own_i, cache_i, link.message_bytes),
            self.outbox(own_j, cache_j, link.message_bytes),
        )
        return (
            self._receive(cache_i, i, own_j, cache_j, set(at_i), now, tau_max, limits),
            self._receive(cache_j, j, own_i, cache_i, set(at_j), now, tau_max, limits),
        )

    @staticmethod
    def _receive(
        cache: Mapping[int, CacheEntry], owner: int, peer: CacheEntry,
        peer_cache: Mapping[int, CacheEntry], arrived: set, now: int, tau_max: int,
        limits: dict[str, Any],
    ) -> dict[int, CacheEntry]:
        """Alg. 2 on what arrived.

        The peer's model (if it arrived, else the first cached model that did stands in as line 6)
        and the cached models that arrived.
        """
        got = [e for e in (peer, *peer_cache.values())
               if (e.origin, e.timestamp) in arrived and e.origin != owner]
        if not got:
            return dict(cache)
        first, rest = got[0], {e.origin: e for e in got[1:]}
        if "group_limits" in limits:
            return group_lru_update(
                cache, owner=owner, peer_entry=first, peer_cache=rest, now=now,
                tau_max=tau_max, group_limits=limits["group_limits"],
            )
        return lru_update(
            cache, owner=owner, peer_entry=first, peer_cache=rest, now=now, tau_max=tau_max,
            cache_size=limits["cache_size"],
        )

    def _encounter_order(self, ctx: ExchangeContext) -> np.ndarray:
        """The step's member encounters ``[E, 2]`` in the order the caches meet.

        Time order of first contact within the step (``ctx.encounters``, the authors' code's
        1 s sub-steps); pairs with the same time (all of them under ``contact = end``)
        keep the order of a random permutation drawn from the policy's generator. Without
        times (a context built by hand) the order is that random permutation.
        """
        if ctx.encounters is None:
            edges = member_pairs(ctx.adjacency, ctx.members)
            return edges[self.rng.permutation(len(edges))]
        pairs, times = ctx.encounters
        return encounter_order(pairs, times, ctx.members, self.rng)

    # --- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Caches as plain ints and lists of tensors; each shared snapshot is stored once."""
        index: dict[int, int] = {}
        snapshots: list[list[Any]] = []
        entries: list[list[int]] = []
        for owner, cache in self.caches.items():
            for e in cache.values():
                key = id(e.payload)
                if key not in index:
                    index[key] = len(snapshots)
                    snapshots.append(list(e.payload))
                entries.append(
                    [int(owner), int(e.origin), int(e.timestamp), int(e.size), int(e.group),
                     index[key]]
                )
        return {
            "format": STATE_FORMAT,
            "rng": self.rng.bit_generator.state,
            "owners": [int(o) for o in self.caches],
            "entries": entries,
            "snapshots": snapshots,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`; entries that shared a snapshot share it again."""
        if state.get("format") != STATE_FORMAT:
            raise bad_argument("state", state.get("format"), f"a {self.name} state of format 1")
        shared: list[tuple[Any, ...]] = [tuple(s) for s in state["snapshots"]]
        caches: dict[int, dict[int, CacheEntry]] = {int(o): {} for o in state["owners"]}
        for owner, origin, timestamp, size, group, snap in state["entries"]:
            caches[int(owner)][int(origin)] = CacheEntry(
                origin=int(origin),
                timestamp=int(timestamp),
                size=int(size),
                group=int(group),
                payload=shared[int(snap)],
            )
        self.caches = caches
        self.rng.bit_generator.state = state["rng"]


@register_policy
class CachedLRUPolicy(CachedPolicy):
    """Cached-DFL with the LRU cache update (Wang et al., Alg. 2), ``C_max = cache_size``."""

    name = "cached_lru"


@register_policy
class CachedGroupLRUPolicy(CachedPolicy):
    """Cached-DFL with group-based LRU: one LRU sub-cache per home area (Wang et al., Fig. 6).

    Sub-cache sizes come from ``cache_groups`` (e.g. ``4,3,3``) or an even split of
    ``cache_size`` over ``areas``. Within a group, Alg. 2 lines 17-18 keep the newest
    models (:func:`mobidfl.model.maths.cache.group_lru_update`, variant ``partition`` = the paper's
    text: a group never borrows room another leaves free).
    """

    name = "cached_group_lru"

    def _limits(self) -> dict[str, Any]:
        return {"group_limits": self.group_limits}

    @property
    def group_limits(self) -> Sequence[int]:
        """Cache size of each area group, from ``cached.groups`` and ``cached.size``."""
        return parse_group_limits(
            self.options.groups,
            cache_size=self.options.size,
            groups=int(self.settings.areas),
        )

    def _group_of(self, agents: AgentTable, origin: int) -> int:
        group = int(agents.area[origin])
        groups = int(self.settings.areas)
        if not 0 <= group < groups:
            raise ConfigError(
                f"area of agent {origin}", group, f"a home area in [0, {groups}) (setting 'areas')"
            )
        return group
