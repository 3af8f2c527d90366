"""``psfl``: proximity-based self-federated learning (PSFL, Domini et al., ACSOS 2024).

Per step (Alg. 1), after every member trained locally (line 3):

1. models are exchanged with the contacts of the step (line 4) and every contact pair gets
   the loss-based dissimilarity of eq. 3, ds(i, j) = L(D_i, nn_j) + L(D_j, nn_i), with
   L(D_i, nn_j) from ``engine.sample_losses`` (cross-entropy = the code's NLL on
   log-softmax) over all of D_i, reduced by :func:`mobidfl.model.maths.psfl.eq3_loss` at the
   scale of ``psfl.loss``: ``batch_sum`` (default: the authors' code sums the batch-mean
   NLL over batches of ``psfl.loss_batch`` = 64, the scale the paper's sigma 20/40/80
   were set on) or ``mean`` (eq. 3 as printed). The paper's text and code disagree here;
   the default was chosen for that reason, before any result was looked at.
   ``psfl.loss_batches`` > 0 sums a fixed number of batches (the per-sample mean times it),
   so nodes holding less data than the paper's keep the paper's sigma scale;
2. one round of the multi-leader election (Sec. III-B steps 1-4; the ScaFi ``S`` block of
   the paper's code), :func:`mobidfl.model.maths.psfl.election_round`;
3. the gradient field G from the elected leaders, accumulating ds along paths; a candidacy
   whose accumulated error exceeds sigma (``psfl.sigma``) is ignored and the competition
   keeps the lowest accumulated error, ties by lowest id
   (:func:`mobidfl.model.maths.psfl.gradient_field`, line 5);
4. every leader averages its federation's models with FedAvg (weights |D_k|, Sec. IV-A) and
   sends the result back to every member (lines 6-9) -> ``Exchange.assign``. A node that no
   leader reaches within sigma keeps its own model (it proclaims itself next round).

Sensors sense the data of the place where they stand (the paper's code reads each node's
dataset from the environment at its position, ``senseEnvData(phenomena)``): when a moving
node (the ★ node of :mod:`mobidfl.agents.mobility.walker`) enters another area it replaces its
local data by samples of that area, drawn from the pool of the area's sensors.

Metrics (Sec. IV-B): ``federations`` = |F| (distinct leaders followed), ``federation_errors``
= sum over federations of eq. 6 (members whose area differs from their leader's),
``leader_changes`` = DL of eq. 7 summed over the moving node(s) (NaN without one),
``leader_changes_all`` = members whose leader changed, ``unassigned`` = members no leader
reaches within sigma, ``ds_intra_mean`` / ``ds_inter_mean`` = mean ds over contact pairs in
the same / different areas (the scale sigma is compared with), ``area_acc_mean`` = mean
accuracy of each member's model on the test samples of its own labels (the paper tests each
node on its area's test data), ``federation_acc_mean`` = mean over federations of that
accuracy averaged within the federation (Fig. 6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, override

import numpy as np
import scipy.sparse as sp

from mobidfl.agents.mobility.walker import PsflSettings
from mobidfl.errors import ConfigError, bad_argument
from mobidfl.model.maths.mixing import member_pairs
from mobidfl.model.maths.psfl import (
    ElectionState,
    GradientField,
    Graph,
    correctness,
    dissimilarity_edges,
    election_round,
    eq3_loss,
    fedavg_within,
    federation_count,
    federations,
    gradient_field,
    initial_election_state,
    path_delivered,
    to_graph,
)
from mobidfl.model.policies.base import (  # the contract's names, imported as cached.py does
    AgentTable,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    Messages,
    register_policy,
)

if TYPE_CHECKING:
    import torch

    from mobidfl.agents.views import WorldView
    from mobidfl.model.learning.engine import Engine
    from mobidfl.model.links import LinkPlan

__all__ = ["PsflPolicy", "area_accuracy", "set_agent_data"]

STATE_FORMAT = 1


def area_accuracy(
    engine: Engine,
    *,
    agents: np.ndarray | None = None,
    models: dict[int, tuple[torch.Tensor, ...]] | None = None,
) -> np.ndarray:
    """Accuracy of each agent's model on the test samples whose label it holds.

    Why: PSFL (Domini et al., ACSOS 2024) tests every node on the test data of its own area
    (its code's ``DistributedTestSetEvaluation`` reads the test layer at the node's
    position), not on all classes; under area label skew "the labels the node holds" is
    exactly its area's label set. NaN for an agent whose labels have no test sample.

    Parameters
    ----------
    engine
        the learning engine (:meth:`Engine.evaluate_params`, ``label_hist``).
    agents
        which agents (default: all).
    models
        parameters to use instead of the engine's for some agents (e.g. the
        federation models a policy is about to assign).
    """
    idx = np.arange(engine.n_agents) if agents is None else np.asarray(agents, np.int64)
    models = models or {}
    out = np.full(idx.size, np.nan)
    for a, i in enumerate(idx.tolist()):
        held = np.flatnonzero(engine.label_hist[i] > 0)
        tensors = models.get(i) or engine.snapshot(i)
        out[a] = engine.evaluate_params(tensors, labels=held.tolist())[0]
    return out


def set_agent_data(engine: Engine, agent: int, order: np.ndarray) -> None:
    """Give ``agent`` new local training data (a sensor that moved senses a new area).

    Parameters
    ----------
    engine
        the learning engine (:meth:`Engine.set_data`).
    agent
        global agent id.
    order
        the new sample indices in the (random) order ``loss_of`` reads them.
    """
    order = np.asarray(order, dtype=np.int64).reshape(-1)
    if order.size < engine.batch_size:
        raise ConfigError(
            "psfl_walker", f"{order.size} samples to sense", f">= batch_size ({engine.batch_size})"
        )
    engine.set_data(agent, order)


@register_policy
class PsflPolicy(ExchangePolicy):
    """Self-organising federations bounded by accumulated loss dissimilarity (PSFL).

    Attributes
    ----------
    state
        the election memory (:class:`mobidfl.model.maths.psfl.ElectionState`, member-local).
    leader_of
        leader (global agent id, -1 = none) of every member after the last step.
    walker_leaders
        one row per step with the leader of each moving node (eq. 7 input).
    data_area
        the area whose data each member holds now (xi(n) of eq. 6).
    last_graph, last_ds, last_field
        the last step's contact graph (member-local ids),
        per-edge ds (aligned with ``last_graph.indices``) and gradient field (for
        inspection and tests; not checkpointed, recomputed every step).
    """

    name = "psfl"
    honours_link: ClassVar[bool] = True
    """Line 4's models, then the federation's collect and distribute, go over the link
    (:meth:`_models_crossed`, :meth:`_federate_over_link`)."""
    settings_class = PsflSettings
    options: PsflSettings
    # No ``defaults``: PSFL's world (area label skew, a sensor hearing its 8 surrounding
    # cells, radius_m = 1.5 cell_m) is written, cited, in model/presets/psfl_004.toml; the
    # paper's rectangular areas are the ``psfl_walker`` mobility, not imposed either.
    metric_names: ClassVar[tuple[str, ...]] = (
        "federations",
        "federation_errors",
        "leader_changes",
        "leader_changes_all",
        "unassigned",
        "ds_intra_mean",
        "ds_inter_mean",
        "area_acc_mean",
        "federation_acc_mean",
    )
    loss_samples: ClassVar[int | None] = None
    """Local samples per loss term of eq. 3 (``None`` = all of D_i, as eq. 3 and the code)."""
    priority: np.ndarray | None = None
    """Per member, the priority of its uid in the election (:func:`election_round`): ``None``
    = the lowest id wins (MobiDFL's reading, deterministic); ScaFi and phyelds draw one random
    priority per node (set here to compare with them)."""

    def __init__(self, *, settings: Any) -> None:
        super().__init__(settings=settings)
        self.sigma = float(self.options.sigma)
        self.loss_scale = self.options.loss
        self.loss_batch = self.options.loss_batch
        self.loss_batches = float(self.options.loss_batches)
        if int(self.options.loss_samples) > 0:  # else the class's (all of D_i)
            self.loss_samples = int(self.options.loss_samples)
        self.members = np.empty(0, dtype=np.int64)
        self.state: ElectionState | None = None
        self.leader_of = np.empty(0, dtype=np.int64)
        self.walker_leaders: list[list[int]] = []
        self.walkers = np.empty(0, dtype=np.int64)
        self.data_area = np.empty(0, dtype=np.int64)
        self.sensed: dict[int, np.ndarray] = {}
        self._rng = np.random.default_rng([int(getattr(settings, "seed", 0)), 0x95F1])
        self._home_area = np.empty(0, dtype=np.int64)
        self._home_parts: list[np.ndarray] = []
        self._engine: Engine | None = None
        self._acc = (float("nan"), float("nan"))
        self.last_graph: Graph | None = None
        self.last_ds = np.empty(0)
        self.last_field: GradientField | None = None

    # --- set-up --------------------------------------------------------------------------
    # The signature of ExchangePolicy.setup: an override repeats it (as in cached.py).
    def setup(
        self,
        *,
        members: np.ndarray,
        engine: Engine,
        agents: AgentTable,
        rng: np.random.Generator,
        world: WorldView | None = None,
    ) -> None:
        """Everyone starts as its own candidate and leader (Fig. 4, first snapshot)."""
        members = np.asarray(members, dtype=np.int64).reshape(-1)
        self.members = members
        self.state = initial_election_state(members.size)
        self.leader_of = members.copy()
        self._home_area = np.asarray(agents.area, dtype=np.int64)[members].copy()
        self.data_area = self._home_area.copy()
        self._home_parts = [np.asarray(engine.parts[i]).copy() for i in members]
        self._engine = engine
        self.walkers = self._find_walkers(world, members)

    @staticmethod
    def _find_walkers(world: WorldView | None, members: np.ndarray) -> np.ndarray:
        """Global ids of moving sensors: mobility groups that declare ``walkers``."""
        found: list[int] = []
        for group in () if world is None else world.groups:
            if group.walker is not None:
                local = np.asarray(group.walker.walkers, dtype=np.int64)
                found.extend((group.members.start + local).tolist())
        return np.asarray([w for w in found if w in set(members.tolist())], dtype=np.int64)

    def _ensure(self, ctx: ExchangeContext) -> None:
        if self.state is None:
            self.setup(
                members=ctx.members, engine=ctx.engine, agents=ctx.agents, rng=ctx.rng,
                world=ctx.world,
            )
        elif not np.array_equal(np.asarray(ctx.members), self.members):
            raise bad_argument("members", ctx.members.tolist()[:8], "the members set up at step 0")

    # --- sensing (before local training) -------------------------------------------------
    def before_training(self, ctx: ExchangeContext) -> None:
        """A moved sensor senses the data of its new area before the step's training."""
        self._ensure(ctx)
        self._sense(ctx)

    @staticmethod
    def _walker_areas(world: WorldView) -> dict[int, int]:
        areas: dict[int, int] = {}
        for group in world.groups:
            if group.walker is None:
                continue
            now = group.walker.current_areas()
            for w in np.asarray(group.walker.walkers, dtype=np.int64).tolist():
                areas[group.members.start + w] = int(now[w])
        return areas

    def _sense(self, ctx: ExchangeContext) -> None:
        if self.walkers.size == 0 or ctx.world is None:
            return
        local_of = {int(g): k for k, g in enumerate(self.members)}
        for w, area in self._walker_areas(ctx.world).items():
            k = local_of.get(w)
            if k is None or area == self.data_area[k]:
                continue
            owners = np.flatnonzero((self._home_area == area) & (self.members != w))
            if owners.size == 0:
                continue
            pool = np.concatenate([self._home_parts[o] for o in owners])
            size = min(self._home_parts[k].size, pool.size)
            order = self._rng.choice(pool, size=size, replace=False)
            set_agent_data(ctx.engine, w, order)
            self.sensed[w] = order
            self.data_area[k] = area

    # --- one step of Alg. 1 ----------------------------------------------------------------
    def _loss(self, engine: Engine, model: int, on_agent: int) -> float:
        """L(D_i, nn_j) of eq. 3 at the scale of ``psfl.loss`` (:func:`eq3_loss`)."""
        per_sample = engine.sample_losses(model, on_agent=on_agent, max_samples=self.loss_samples)
        return eq3_loss(
            per_sample, scale=self.loss_scale, batch=self.loss_batch, batches=self.loss_batches
        )

    @override
    def exchange(self, ctx: ExchangeContext) -> Exchange:
        self._ensure(ctx)
        members, engine = self.members, ctx.engine
        if members.size == 0:
            return Exchange()
        adjacency = sp.csr_matrix(ctx.adjacency)[members][:, members]
        if ctx.link is not None:
            adjacency = self._models_crossed(ctx.link, adjacency)
        graph = to_graph(adjacency)
        rows, cols = graph.rows, graph.indices
        loss_edges = np.array(
            [
                self._loss(engine, int(members[j]), int(members[i]))
                for i, j in zip(rows.tolist(), cols.tolist(), strict=True)
            ],
            dtype=float,
        )
        ds = dissimilarity_edges(graph, loss_edges)
        self_loss = np.array([self._loss(engine, int(g), int(g)) for g in members])
        # The paper's code measures ds including the node itself (2 L_ii), see election_round.
        self.state = election_round(graph, ds, self.sigma, self.state, priority=self.priority,
                                    self_ds=2 * self_loss)
        field = gradient_field(graph, ds, self.state.is_leader, sigma=self.sigma)
        self.last_graph, self.last_ds, self.last_field = graph, ds, field
        leader_local = field.leader_of
        groups = federations(leader_local)
        assign: dict[int, tuple[torch.Tensor, ...]] = {}
        messages = None
        if ctx.link is not None:
            self._federate_over_link(ctx.link, engine, field, groups, assign)
        else:
            messages = self._messages(ctx.adjacency.shape[0], adjacency, field)
            for fed in groups:
                if fed.size < 2:
                    continue
                ids = members[fed]
                weights = fedavg_within(np.arange(fed.size), engine.data_sizes[ids])
                average = engine.average(agents=ids, weights=weights)
                assign.update({int(i): average for i in ids})

        leader = np.where(leader_local >= 0, members[np.maximum(leader_local, 0)], -1)
        changed = leader != self.leader_of
        self.leader_of = leader
        metrics = {
            "federations": float(federation_count(leader_local)),
            "federation_errors": float(sum(correctness(leader_local, self.data_area).values())),
            "leader_changes_all": float(changed.sum()),
            "unassigned": float((leader_local < 0).sum()),
            "leader_changes": float("nan"),
        }
        if self.walkers.size:
            local_of = {int(g): k for k, g in enumerate(members.tolist())}
            pos = np.array([local_of[int(w)] for w in self.walkers], dtype=np.int64)
            self.walker_leaders.append(leader[pos].tolist())
            metrics["leader_changes"] = float(changed[pos].sum())
        same = self.data_area[rows] == self.data_area[cols]
        metrics["ds_intra_mean"] = float(ds[same].mean()) if same.any() else float("nan")
        metrics["ds_inter_mean"] = float(ds[~same].mean()) if (~same).any() else float("nan")
        if self._is_eval_step(ctx.step):
            self._acc = self._accuracy(ctx, groups, assign)
        metrics["area_acc_mean"], metrics["federation_acc_mean"] = self._acc
        return Exchange(assign=assign, metrics=metrics, messages=messages)

    def _messages(self, n: int, adjacency: sp.csr_matrix, field: GradientField) -> Messages:
        """At the ideal link, what Alg. 1 sends.

        As over a link (:meth:`_models_crossed` and :meth:`_federate_over_link`): line 4's model
        both ways per member contact, then per hop of the field one model up (collect, line 7) and
        one down (distribute, line 9).
        """
        members, parent = self.members, field.parent
        child = np.flatnonzero(parent >= 0)
        hops = np.stack([members[child], members[parent[child]]], axis=1)
        return Messages.swapped(n, self.members[member_pairs(adjacency)]) + Messages.swapped(
            n, hops)

    # --- over a link (a link model is set) -----------------------------------------------
    def _models_crossed(self, link: LinkPlan, adjacency: sp.csr_matrix) -> sp.csr_matrix:
        """Alg. 1 line 4, "Broadcast nn_i^t to neighbours N_i", over the link.

        Each contact pair sends its models both ways; ds(i, j) = L_ij + L_ji (eq. 3) needs both, so
        only pairs whose models crossed both ways stay neighbours this step.
        """
        local = member_pairs(adjacency)
        pairs = self.members[local]
        size = float(link.message_bytes)
        to_b, to_a = link.swap(pairs, size, size)
        both = to_b & to_a
        n = self.members.size
        kept = sp.coo_matrix(
            (np.ones(int(both.sum()), bool), (local[both, 0], local[both, 1])), shape=(n, n)
        )
        return (kept + kept.T).tocsr()

    def _federate_over_link(
        self, link: LinkPlan, engine: Engine, field: GradientField, groups: list[np.ndarray],
        assign: dict[int, tuple[torch.Tensor, ...]],
    ) -> None:
        """Alg. 1 lines 7-9 over the link.

        "Collect models (using C) from federation members" sends one model up each hop of the field
        (child to parent), "Distribute nn_fj^t to each s in f_j (using G)" one model down each hop,
        over what line 4 left of each contact. A member's model counts in the leader's FedAvg only
        if every hop up its path delivered; it receives the federation model only if every hop down
        did (else it keeps its own).
        """
        members, parent = self.members, field.parent
        child = np.flatnonzero(parent >= 0)
        pairs = np.stack([members[child], members[parent[child]]], axis=1)
        size = float(link.message_bytes)
        up_hop, down_hop = link.swap(pairs, size, size)
        hop_up, hop_down = np.zeros(members.size, bool), np.zeros(members.size, bool)
        hop_up[child], hop_down[child] = up_hop, down_hop
        reached = path_delivered(parent, hop_up)
        served = path_delivered(parent, hop_down)
        for fed in groups:
            if fed.size < 2:
                continue
            ids = members[fed[reached[fed]]]
            weights = fedavg_within(np.arange(ids.size), engine.data_sizes[ids])
            average = engine.average(agents=ids, weights=weights)
            assign.update({int(i): average for i in members[fed[served[fed]]]})

    def _is_eval_step(self, step: int) -> bool:
        every = int(getattr(self.settings, "eval_every", 1))
        return step % every == 0 or step == getattr(self.settings, "steps", None)

    def _accuracy(
        self,
        ctx: ExchangeContext,
        groups: list[np.ndarray],
        assign: dict[int, tuple[torch.Tensor, ...]],
    ) -> tuple[float, float]:
        """(mean over members, mean over federations) of the own-label test accuracy.

        Uses the models members hold after this step's assignment (``assign``).
        """
        acc = area_accuracy(ctx.engine, agents=self.members, models=assign)
        per_fed = [float(np.nanmean(acc[f])) for f in groups if np.isfinite(acc[f]).any()]
        mean_all = float(np.nanmean(acc)) if np.isfinite(acc).any() else float("nan")
        return mean_all, float(np.mean(per_fed)) if per_fed else float("nan")

    # --- checkpoint ------------------------------------------------------------------------
    @override
    def state_dict(self) -> dict:
        import torch  # here: a world without learning never imports torch

        if self.state is None:
            return {"format": STATE_FORMAT, "initialised": False}
        return {
            "format": STATE_FORMAT,
            "initialised": True,
            "members": torch.from_numpy(self.members.copy()),
            "lead": torch.from_numpy(self.state.lead.copy()),
            "abdicated": torch.from_numpy(self.state.abdicated.copy()),
            "distance": torch.from_numpy(np.asarray(self.state.distance, dtype=np.float64)),
            "leader_of": torch.from_numpy(self.leader_of.copy()),
            "walker_leaders": [list(r) for r in self.walker_leaders],
            "data_area": torch.from_numpy(self.data_area.copy()),
            "sensed": {int(w): torch.from_numpy(i.copy()) for w, i in self.sensed.items()},
            "rng": self._rng.bit_generator.state,
            "acc": list(self._acc),
        }

    @override
    def load_state_dict(self, state: dict) -> None:
        if state.get("format") != STATE_FORMAT:
            raise bad_argument(
                "state", state.get("format"), f"a psfl state of format {STATE_FORMAT}"
            )
        if not state.get("initialised"):
            self.state = None
            return
        members = state["members"].numpy().astype(np.int64)
        if self.state is not None and not np.array_equal(members, self.members):
            raise bad_argument("state", "members", "the same psfl members as this run")
        self.members = members
        self.state = ElectionState(
            lead=state["lead"].numpy().astype(np.int64),
            abdicated=state["abdicated"].numpy().astype(bool),
            distance=state["distance"].numpy().astype(float),
        )
        self.leader_of = state["leader_of"].numpy().astype(np.int64)
        self.walker_leaders = [list(r) for r in state["walker_leaders"]]
        self.data_area = state["data_area"].numpy().astype(np.int64)
        self.sensed = {int(w): t.numpy().astype(np.int64) for w, t in state["sensed"].items()}
        self._rng.bit_generator.state = state["rng"]
        self._acc = (float(state["acc"][0]), float(state["acc"][1]))
        if self.sensed:
            if self._engine is None:
                raise bad_argument("state", "sensed data", "a psfl policy set up with an engine")
            for w, order in self.sensed.items():
                set_agent_data(self._engine, w, order)
