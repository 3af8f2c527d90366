"""The one narrow interface every model-exchange policy implements.

A policy decides, once per step (global epoch), how each of its member agents' new model is
formed from what it could receive this step. The learning session does, per step::

    policy.before_training(ctx)                          # command: update the policy's state
    masks = policy.train_mask(ctx)                       # query: who trains (None = all)
    engine.train(mask=...)                               # K local SGD steps
    ex = policy.exchange(ctx)                            # -> Exchange
    engine.mix(combine_rows([(members, ex), ...], N))    # linear mixing, one sparse matmul
    apply_assignments(engine, [ex, ...])                 # explicit new params, after mixing

How the policies MobiDFL needs fit this interface:

* **Linear neighbourhood averaging** (D-PSGD, de Heredia 2024 Alg. 1; FedAvg-weighted, Reza et al.
  eq. 2; mobility-aware, de Heredia 2024 Sec. 5.4): return ``Exchange(rows=W)`` built by
  :mod:`mobidfl.model.maths.mixing` from ``ctx.adjacency`` and ``ctx.agents`` (speed, data_size).
  Rows of all policies are stacked into one global W (:func:`combine_rows`).
* **Model caches** (Cached-DFL LRU / group LRU, Alg. 2): keep per-agent caches in
  the policy object; on contact store ``ctx.engine.snapshot(j)`` (shared immutable
  tuples, so a model cached by 50 agents is stored once) with its timestamp ``ctx.step``;
  aggregate with ``ctx.engine.combine(snapshots, weights)`` and return the results in
  ``Exchange.assign``. Cache statistics go to ``Exchange.metrics``; caches are saved by
  ``state_dict``.
* **Self-organising federations** (PSFL): ``ctx.engine.loss_of(j, on_agent=i)``
  gives the dissimilarity terms of eq. 3; leaders' FedAvg is ``engine.average(...)``;
  ``assign`` distributes the federation model; federation counts go to ``metrics``.
* **Infrastructure / client selection** (MoFeL): ``setup(..., world=...)`` and
  ``ctx.world`` (a read-only :class:`mobidfl.agents.views.WorldView`) give the map's areas and the
  clients' routes; ``before_training`` reads this step's departures, ``train_mask`` returns
  which members train this step; server models live in the policy and are handed out
  through ``assign``.
* **Sensing** (PSFL's moving sensors): ``before_training`` swaps a moved sensor's data
  (``ctx.engine``), so the step's training already uses it.
* **Centralised FL baseline** (Cached-DFL's CFL): ``engine.average`` over all members, then
  ``assign`` the global model to every member (:mod:`mobidfl.model.policies.central_fedavg`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse

from mobidfl.errors import ConfigError, bad_argument
from mobidfl.plugins import POLICIES
from mobidfl.settings import PluginSettings

if TYPE_CHECKING:
    import torch

    from mobidfl.agents.views import WorldView
    from mobidfl.model.learning.engine import Engine
    from mobidfl.model.links import LinkPlan

# The contract's names; the package __init__ re-exports the same list (one import path each).
__all__ = [
    "POLICIES",
    "AgentTable",
    "Exchange",
    "ExchangeContext",
    "ExchangePolicy",
    "Messages",
    "apply_assignments",
    "check_metrics",
    "combine_rows",
    "exchange_messages",
    "make_policy",
    "metric_columns",
    "policy_metric_column",
    "register_policy",
]


@dataclass(frozen=True)
class AgentTable:  # read-only view of agent attributes for this step
    """Per-agent attributes a policy may read (arrays indexed by global agent id)."""

    kind: np.ndarray  # str per agent ('vehicle','pedestrian','sensor','uav', or infrastructure)
    speed: np.ndarray  # m/s float
    data_size: np.ndarray  # int
    area: np.ndarray  # int home area
    label_hist: np.ndarray  # [N, C]
    hm: np.ndarray  # bool high-mobility class (False if undefined)
    pos: np.ndarray  # [N, 2] metres


@dataclass
class ExchangeContext:
    """Everything a policy sees in one step (built by the model, read by the policy).

    Attributes
    ----------
    step
        Epoch index t, 1-based: the step being completed.
    members
        Global indices of the agents that use this policy.
    adjacency
        ``N x N`` symmetric boolean contacts of this step, no self loops.
    engine
        The learning engine: parameters, snapshots, ``loss_of(...)``.
    agents
        Per-agent attributes of this step (:class:`AgentTable`).
    rng
        The model's generator (the policy's only source of randomness).
    world
        Read-only view of the world, or ``None`` outside a model.
    encounters
        Contact pairs and first-contact times, for policies with
        ``needs_encounter_times``; else ``None``.
    link
        This step's link plan; ``None`` under the ideal link.
    """

    step: int  # epoch index t (1-based: step being completed)
    members: np.ndarray  # global indices of agents that use this policy
    adjacency: scipy.sparse.csr_matrix  # N x N symmetric bool contacts this step (no self loops)
    engine: Engine  # parameters, snapshots, loss_of(...)
    agents: AgentTable
    rng: np.random.Generator
    world: WorldView | None = None
    """Read-only view of the world (groups, routes, areas) for policies that look beyond
    their members (MoFeL, PSFL); ``None`` outside a model (tests)."""
    encounters: tuple[np.ndarray, np.ndarray] | None = None
    """This step's contact pairs ``[E, 2]`` (i < j) and their first-contact times (fraction
    of the step, :func:`mobidfl.model.contacts.contact_times`); only for policies that set
    ``needs_encounter_times`` (``None`` otherwise)."""
    link: LinkPlan | None = None
    """This step's link plan (:class:`mobidfl.model.links.LinkPlan`: what each contact can carry);
    ``None`` under ``link = "ideal"``, where every contact carries everything."""


SERVER = -1
"""The sender or receiver id of a message to or from a server (not an agent): only the
agent's end of it is counted (:meth:`Messages.between`)."""


@dataclass(frozen=True)
class Messages:
    """Whole model messages each agent sent and received in one step at the ideal link.

    Counted at ``link = "ideal"``, where nothing limits them; ``[N]`` floats by global agent id.

    The session turns them into bytes (``bytes_sent`` / ``bytes_received`` = messages x
    one model message's bytes, :func:`mobidfl.model.maths.link.message_bytes`), the bytes a link
    model would have carried had every contact been long enough: the same messages a policy
    sends over :class:`mobidfl.model.links.LinkPlan` (one per receiver, unicast).

    Parameters
    ----------
    sent, received
        ``[N]`` model messages each agent sent and received (:meth:`between` and
        :meth:`swapped` build them from who sent to whom).
    """

    sent: np.ndarray
    received: np.ndarray

    @classmethod
    def none(cls, n: int) -> Messages:
        """No message at all (``local``)."""
        return cls(np.zeros(n), np.zeros(n))

    @classmethod
    def between(
        cls, n: int, senders: np.ndarray, receivers: np.ndarray, count: np.ndarray | float = 1.0
    ) -> Messages:
        """``count`` messages from each ``senders[k]`` to ``receivers[k]``, one bincount per side.

        No loop over agents; :data:`SERVER` (-1) on either side is a server, whose end is not
        counted (an upload counts only as sent, a download only as received).
        """
        senders = np.asarray(senders, np.int64).reshape(-1)
        receivers = np.asarray(receivers, np.int64).reshape(-1)
        weight = np.broadcast_to(np.asarray(count, float), senders.shape)
        out, into = senders >= 0, receivers >= 0
        return cls(
            np.bincount(senders[out], weights=weight[out], minlength=n).astype(float),
            np.bincount(receivers[into], weights=weight[into], minlength=n).astype(float),
        )

    @classmethod
    def swapped(cls, n: int, pairs: np.ndarray, count: np.ndarray | float = 1.0) -> Messages:
        """Each pair ``(a, b)`` sends ``count`` messages each way (D-PSGD's model swap)."""
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        count = np.broadcast_to(np.asarray(count, float), (len(pairs),))
        return cls.between(
            n, np.concatenate([pairs[:, 0], pairs[:, 1]]),
            np.concatenate([pairs[:, 1], pairs[:, 0]]), np.concatenate([count, count]),
        )

    def __add__(self, other: Messages) -> Messages:
        return Messages(self.sent + other.sent, self.received + other.received)


@dataclass
class Exchange:
    """What a policy returns: linear mixing rows and/or explicit new parameters.

    Parameters
    ----------
    rows
        ``N x N`` mixing matrix; only the rows of members are used (each row sums to 1,
        :func:`mobidfl.model.maths.mixing.check_row_stochastic`). ``None``: no mixing this step.
    assign
        New parameters per global agent id (one tensor per layer), set after mixing; a
        mapping may compute each when read (read once, in any order).
    metrics
        This step's metrics, each declared in the policy's ``metric_names``.
    messages
        The model messages this step's exchange sent, at the ideal link (where a link
        model is set, :class:`mobidfl.model.links.LinkPlan` counts what it carries instead).
        ``None``: read off ``rows`` (row ``i`` holding ``j`` = one message from ``j`` to
        ``i``; no rows and no ``assign`` = none); a policy that assigns parameters must
        say, else its bytes are unknown (NaN) (:func:`exchange_messages`).
    """

    rows: scipy.sparse.csr_matrix | None = None  # N x N; only rows of members are used
    assign: Mapping[int, tuple[torch.Tensor, ...]] = field(default_factory=dict)  # new params
    metrics: dict[str, float] = field(default_factory=dict)  # per-step metrics
    messages: Messages | None = None  # ideal link: model messages sent and received


class ExchangePolicy(ABC):
    """Base class of exchange policies; subclasses set ``name`` and implement ``exchange``.

    Parameters
    ----------
    settings
        The run's config (world settings such as ``seed`` or ``areas``); the policy's own
        typed settings are ``self.options`` (``None`` without a ``settings_class``).
    """

    name: ClassVar[str]
    needs_encounter_times: ClassVar[bool] = False
    """True: the model computes ``ExchangeContext.encounters`` (time order of contacts)."""
    honours_link: ClassVar[bool] = False
    """True: :meth:`exchange` sends over ``ctx.link`` when a link model is set; a non-ideal
    link with a policy that ignores it is refused (mobidfl.model.config), since the link would
    otherwise change nothing and the run would silently be an ideal-link run."""
    resumes_transfers: ClassVar[bool] = False
    """True: a message cut at a contact's end continues at the pair's next contact when
    ``link.resume`` is set (:meth:`mobidfl.model.links.LinkPlan.send`); other policies refuse it."""
    metric_names: ClassVar[tuple[str, ...]] = ()
    """Every metric ``exchange`` may put in ``Exchange.metrics`` (columns of ``model.csv``);
    an undeclared one raises (:func:`check_metrics`) instead of being dropped."""
    requires: ClassVar[dict[str, Any]] = {}
    """Settings this policy cannot run without (``{kind}`` = the kind using it): checked,
    never applied; a world without them is refused in one line naming the setting
    (:func:`mobidfl.model.config.policy_requirements`). A policy never changes the world, so it has
    no ``defaults``: what a paper pairs with its system (partition, radius, map) is written,
    cited, in that paper's preset (``model/presets``)."""
    settings_class: ClassVar[type[PluginSettings] | None] = None
    """This policy's own settings (a frozen dataclass under a namespace, e.g. ``psfl``);
    :class:`mobidfl.model.config.Config` composes, documents and validates them."""

    @classmethod
    def held_models(cls, settings: Any) -> int:
        """Most model copies this policy keeps per member besides the member's own model.

        Read before step 1 by :func:`mobidfl.model.bounds.check_memory` (a cache of C models per car
        is C copies per car); default 0 for policies that only mix live models.
        """
        return 0

    def __init__(self, *, settings: Any) -> None:
        """``settings`` is the run config (world settings such as ``seed`` or ``areas``).

        ``self.options`` is this policy's own typed settings (``None`` without a class).
        """
        self.settings = settings
        own = type(self).settings_class
        self.options: Any = None if own is None else own.of(settings)

    def setup(  # noqa: B027 - optional hook, default no-op
        self,
        *,
        members: np.ndarray,
        engine: Engine,
        agents: AgentTable,
        rng: np.random.Generator,
        world: WorldView | None = None,
    ) -> None:
        """Prepare, once before step 1 (default: nothing to prepare)."""

    def before_training(self, ctx: ExchangeContext) -> None:  # noqa: B027 - optional hook
        """Command, once per step before :meth:`train_mask`.

        Update state from this step's world (default: nothing). Side effects belong here, never in
        ``train_mask``.
        """

    def train_mask(self, ctx: ExchangeContext) -> np.ndarray | None:
        """Query: which members train this step (bool over ``ctx.members``); ``None`` = all.

        Pure: calling it twice gives the same answer and changes no state (called after
        :meth:`before_training` of the same step).
        """
        return None

    @abstractmethod
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        """Decide this step's model exchange for ``ctx.members``."""

    def state_dict(self) -> dict:
        """Policy state to checkpoint (tensors and plain Python values only)."""
        return {}

    def load_state_dict(self, state: dict) -> None:  # noqa: B027 - stateless default
        """Restore what :meth:`state_dict` returned."""


def check_metrics(policy: ExchangePolicy, metrics: dict[str, float]) -> None:
    """Raise when ``policy`` returned a metric its class does not declare in ``metric_names``."""
    undeclared = sorted(set(metrics) - set(policy.metric_names))
    if undeclared:
        raise ConfigError(
            f"{type(policy).__name__}.metric_names",
            undeclared,
            f"declared metrics only ({', '.join(policy.metric_names) or 'none'})",
        )


def policy_metric_column(metric: str, policy: str) -> str:
    """The ``model.csv`` column of ``policy``'s metric ``metric``.

    ``<metric>_policy_<policy>``, named as the group's accuracy column ``acc_policy_<policy>``.
    """
    return f"{metric}_policy_{policy}"


def metric_columns(declared: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, str]]:
    """Columns of the policies' metrics: ``{column: (policy, metric)}``.

    Parameters
    ----------
    declared
        every policy in the run -> its ``metric_names``.

    Every metric gets its owner's column (:func:`policy_metric_column`), so two policies'
    ``degree_mean`` (D-PSGD pedestrians, FedAvg-weighted sensors) never overwrite one another.
    A metric declared by exactly one policy of the run also keeps its bare name
    (``federations``, ``ntc``): that column is unambiguous, and single-policy readers (reports,
    reproductions) need not know the policy. A bare name declared by two policies is left out.
    """
    owners: dict[str, list[str]] = {}
    for policy, metrics in declared.items():
        for metric in dict.fromkeys(metrics):
            owners.setdefault(metric, []).append(policy)
    columns: dict[str, tuple[str, str]] = {}
    for metric, policies in owners.items():
        if len(policies) == 1:
            columns[metric] = (policies[0], metric)
    for policy, metrics in declared.items():
        for metric in dict.fromkeys(metrics):
            columns[policy_metric_column(metric, policy)] = (policy, metric)
    return columns


def register_policy(cls: type[ExchangePolicy]) -> type[ExchangePolicy]:
    """Class decorator: register ``cls`` in :data:`mobidfl.plugins.POLICIES` under ``cls.name``.

    Parameters
    ----------
    cls
        The policy class; its ``name`` is the value of the ``policy`` setting.

    Returns
    -------
    type[ExchangePolicy]
        ``cls`` itself, so the decorator leaves the class as it was.

    Raises
    ------
    ValueError
        The name is not a Python identifier, or another class already holds it.
    TypeError
        ``cls`` has no string ``name`` attribute.
    """
    return POLICIES.register(cls)


def make_policy(name: str, *, settings: Any) -> ExchangePolicy:
    """Instantiate the policy registered as ``name``."""
    policy: ExchangePolicy = POLICIES.make(name, settings=settings)
    return policy


def combine_rows(
    exchanges: Iterable[tuple[np.ndarray, Exchange]], n: int
) -> scipy.sparse.csr_matrix:
    """One global N x N mixing matrix from several policies' rows.

    Parameters
    ----------
    exchanges
        ``(members, exchange)`` pairs, one per policy group. Each group's
        ``exchange.rows`` contributes its members' rows; ``rows=None`` (no linear
        mixing, e.g. ``local`` or cache policies that use ``assign``) leaves them as
        the identity.
    n
        number of agents.

    Agents covered by no group keep the identity row. An agent in two groups is an error.
    """
    diag_keep = np.ones(n, dtype=bool)
    blocks = []
    seen = np.zeros(n, dtype=bool)
    for members, ex in exchanges:
        idx = np.asarray(members, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise bad_argument("members", idx.tolist()[:8], f"agent indices in [0, {n})")
        if seen[idx].any():
            raise bad_argument(
                "members", int(idx[seen[idx]][0]), "each agent in exactly one policy group"
            )
        seen[idx] = True
        if ex.rows is None or idx.size == 0:
            continue
        rows = scipy.sparse.csr_matrix(ex.rows)
        if rows.shape != (n, n):
            raise bad_argument("rows", rows.shape, f"an {n} x {n} matrix")
        pick = np.zeros(n)
        pick[idx] = 1.0
        blocks.append(scipy.sparse.diags(pick) @ rows)
        diag_keep[idx] = False
    w = scipy.sparse.diags(diag_keep.astype(np.float64)).tocsr()
    for b in blocks:
        w = w + b
    w = scipy.sparse.csr_matrix(w)
    w.eliminate_zeros()
    w.sort_indices()
    return w


def exchange_messages(exchanges: Iterable[tuple[np.ndarray, Exchange]], n: int) -> Messages:
    """Every policy group's model messages of one step at the ideal link, summed per agent.

    Per ``(members, exchange)``: ``exchange.messages`` when the policy counted them; else
    read off its mixing rows (member ``i``'s row holding ``j != i`` = one message from
    ``j`` to ``i``: the model ``i`` averaged had to reach it); a group with neither rows nor
    assignments sent nothing; one that assigned parameters without counting gets NaN for
    its members (unknown, never a silent 0).
    """
    total = Messages.none(n)
    for members, ex in exchanges:
        idx = np.asarray(members, dtype=np.int64).reshape(-1)
        if ex.messages is not None:
            total = total + ex.messages
        elif ex.rows is not None:
            pick = np.zeros(n)
            pick[idx] = 1.0
            held = (scipy.sparse.diags(pick) @ scipy.sparse.csr_matrix(ex.rows)).tocoo()
            off = (held.row != held.col) & (held.data != 0)
            total = total + Messages.between(n, held.col[off], held.row[off])
        elif len(ex.assign):
            total.sent[idx] = np.nan
            total.received[idx] = np.nan
    return total


def apply_assignments(engine: Engine, exchanges: Sequence[Exchange]) -> None:
    """Write every ``Exchange.assign`` entry into the engine (call after :meth:`mix`)."""
    for ex in exchanges:
        for i, params in ex.assign.items():
            engine.set_agent(int(i), params)
