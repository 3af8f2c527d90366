"""Learning inside a run: data, partitions, the engine and the policies, for one model.

Keeps :class:`mobidfl.model.world.MobiDFLModel` about the world: the model calls
:meth:`LearningSession.step` after contacts are known and stores the :class:`StepResult`
it returns (accuracy per agent, losses, policy metrics); this session writes nothing into
the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mobidfl.agents.mobility.distribution import area_label_lists
from mobidfl.model.learning.data import load_dataset
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import make_partition
from mobidfl.model.learning.results import Evaluation, StepResult
from mobidfl.model.links import LinkPlan
from mobidfl.model.maths.energy import compute_energy, flight_energy
from mobidfl.model.maths.link import message_bytes, training_flops
from mobidfl.model.maths.schedule import EarlyStopState, PlateauState, early_stop_step, plateau_step
from mobidfl.model.policies import AgentTable, Exchange, ExchangeContext, combine_rows, make_policy
from mobidfl.model.policies.base import (
    ExchangePolicy,
    check_metrics,
    exchange_messages,
    metric_columns,
)

__all__ = ["Evaluation", "LearningSession", "StepResult"]


class LearningSession:
    """Owns the engine and one policy instance per policy name used in the run."""

    def __init__(self, model: Any) -> None:
        """Bind the session to ``model``, the running :class:`mobidfl.model.world.MobiDFLModel`.

        The model owns this session (typed ``Any`` here: that module imports this one, never the
        reverse).
        """
        config = model.config
        self.model = model
        self.dataset = load_dataset(
            config.dataset, root=config.data_root, test_size=config.test_size, seed=config.seed
        )
        parts = self._partition()
        self.engine = make_engine(
            config.backend, TrainingSettings.of(config), dataset=self.dataset, parts=parts
        )
        self.policies: dict[str, tuple[ExchangePolicy, np.ndarray]] = {}
        for name in map(str, dict.fromkeys(model.policy_of_agent)):
            members = np.flatnonzero(model.policy_of_agent == name)
            policy = make_policy(name, settings=config)
            policy.setup(
                members=members,
                engine=self.engine,
                agents=self.agent_table(),
                rng=model.rng,
                world=model.view,
            )
            self.policies[name] = (policy, members)
        self.needs_encounter_times = any(
            policy.needs_encounter_times for policy, _ in self.policies.values()
        )
        self.plateau = PlateauState(lr=self.engine.lr)
        """ReduceLROnPlateau's memory; its ``lr`` is the engine's current rate, both written
        only by :meth:`_set_plateau` (``config.lr`` stays the initial rate)."""
        self.stopper = EarlyStopState()
        self.metric_columns = metric_columns(
            {name: policy.metric_names for name, (policy, _) in self.policies.items()}
        )
        """``model.csv`` column -> (policy, metric): each policy's metric under its own
        column, never overwritten by another policy's (:func:`metric_columns`)."""
        self.metric_names: list[str] = list(self.metric_columns)

    def _partition(self) -> list[np.ndarray]:
        """Partition the training set; kinds with different partitions get disjoint pools."""
        config, model = self.config, self.model
        labels = self.dataset.y_train.numpy()
        rng = np.random.default_rng([config.seed, 1])
        by_name: dict[str, np.ndarray] = {}
        for kind in dict.fromkeys(model.kind_of):
            name = config.partition_of(kind)
            by_name[name] = np.concatenate(
                [by_name.get(name, np.empty(0, int)), np.flatnonzero(model.kind_of == kind)]
            )
        pools = np.array_split(rng.permutation(len(labels)), len(by_name))
        if len(by_name) == 1:
            pools = [np.arange(len(labels))]
        parts: list[np.ndarray] = [np.empty(0, int)] * model.n_agents
        for (name, agents), pool in zip(by_name.items(), pools, strict=True):
            area_labels = area_label_lists(
                config.area_labels, areas=config.areas, num_classes=self.dataset.num_classes
            )
            local = make_partition(
                name,
                labels[pool],
                len(agents),
                rng=rng,
                alpha=config.dirichlet_alpha,
                agent_area=model.area[agents],
                area_labels=area_labels,
                within=config.area_within,
            )
            for agent, indices in zip(agents, local, strict=True):
                parts[agent] = pool[indices]
        return parts

    @property
    def config(self):
        """The model's config."""
        return self.model.config

    def agent_table(self) -> AgentTable:
        """What ``agents.parquet`` records of each agent.

        Kind, speed, data size, area, label counts, mobility class and position.
        """
        model = self.model
        return AgentTable(
            kind=model.kind_of,
            speed=model.speed.copy(),
            data_size=self.engine.data_sizes,
            area=model.area,
            label_hist=self.engine.label_hist,
            hm=model.hm,
            pos=model.position.copy(),
        )

    def context(self, members: np.ndarray, link: LinkPlan | None = None) -> ExchangeContext:
        """What the policy of ``members`` sees in the current step."""
        return ExchangeContext(
            step=self.model.steps,
            members=members,
            adjacency=self.model.adjacency,
            engine=self.engine,
            agents=self.agent_table(),
            rng=self.model.rng,
            world=self.model.view,
            encounters=self.model.encounters,
            link=link,
        )

    def step(self) -> StepResult:
        """Local training (Cached-DFL Alg. 1 / de Heredia 2024 Alg. 1 line 4), then exchange.

        Per policy, ``before_training`` (a command) comes before ``train_mask`` (a query).
        """
        model = self.model
        mask = np.ones(model.n_agents, bool)
        for policy, members in self.policies.values():
            context = self.context(members)
            policy.before_training(context)  # command: e.g. MoFeL reads departures
            chosen = policy.train_mask(context)  # pure query
            if chosen is not None:  # a bool per member (ExchangePolicy.train_mask)
                mask[members] = np.asarray(chosen, bool)
        losses = self.engine.train(mask=None if mask.all() else mask)
        # Cached-DFL: ReduceLROnPlateau (mobidfl.model.maths.schedule)
        if self.config.lr_plateau_patience:
            trained = losses[np.isfinite(losses)]
            self._set_plateau(plateau_step(
                self.plateau,
                float(trained.mean()) if trained.size else float("nan"),
                factor=self.config.lr_plateau_factor,
                patience=self.config.lr_plateau_patience,
            ))
        plan = self.link_plan()
        exchanges: list[tuple[np.ndarray, Exchange]] = []
        reported: dict[tuple[str, str], float] = {}
        for name, (policy, members) in self.policies.items():
            exchange = policy.exchange(self.context(members, plan))
            check_metrics(policy, exchange.metrics)
            exchanges.append((members, exchange))
            reported.update(((name, metric), v) for metric, v in exchange.metrics.items())
        if any(exchange.rows is not None for _, exchange in exchanges):
            self.engine.mix(combine_rows(exchanges, model.n_agents))  # identity otherwise
        for _, exchange in exchanges:
            for agent, params in exchange.assign.items():
                self.engine.set_agent(agent, params)
        metrics = {
            column: reported[owner]
            for column, owner in self.metric_columns.items()
            if owner in reported
        }
        evaluation, stop = None, False
        if model.steps % self.config.eval_every == 0 or model.steps == self.config.steps:
            evaluation = self.evaluate()
            if self.config.early_stop_patience:  # Cached-DFL: stop when accuracy stalls
                self.stopper, stop = early_stop_step(
                    self.stopper,
                    float(np.nanmean(evaluation.accuracy)),
                    step=model.steps,
                    patience=self.config.early_stop_patience,
                )
        return StepResult(
            step=model.steps,
            trained=mask,
            train_loss=losses,
            metrics=metrics,
            evaluation=evaluation,
            stop=bool(stop),
            link=self.ideal_bytes(exchanges) if plan is None else self.link_costs(plan, mask),
            transfers=None if plan is None else plan.transfers(),
        )

    def message_bytes(self) -> int:
        """Bytes of one model message on the air.

        ``link.params`` (0 = the run's network) x ``link.dtype``'s bytes + ``link.overhead_bytes``
        (every link, ``ideal`` too).
        """
        o = self.model.link.options
        params = o.params or self.engine.num_params
        return message_bytes(params, dtype=o.dtype, overhead=o.overhead_bytes)

    def ideal_bytes(self, exchanges: list[tuple[np.ndarray, Exchange]]) -> dict[str, np.ndarray]:
        """The bytes each agent sent and received this step, at the ideal link.

        Counted, not limited (:func:`mobidfl.model.policies.base.exchange_messages` x
        :meth:`message_bytes`): what a link model would carry if every contact were long enough.
        """
        messages = exchange_messages(exchanges, self.model.n_agents)
        size = float(self.message_bytes())
        return {"bytes_sent": messages.sent * size, "bytes_received": messages.received * size}

    def link_plan(self) -> LinkPlan | None:
        """The step's link plan (what each contact can carry); ``None`` under the ideal link."""
        model = self.model
        if model.contact_table is None:
            return None
        return model.link.plan(
            model.contact_table, kinds=model.kind_of, message_bytes=self.message_bytes(),
            n=model.n_agents,
        )

    def link_costs(self, plan: LinkPlan, trained: np.ndarray) -> dict[str, np.ndarray]:
        """Per agent: the plan's tally, and the energy of radio, training and flight.

        Energy = radio (tx/rx power x airtime) + local training (FLOPs x the kind's J/FLOP; forward
        x 3 per sample seen) + flight (a UAV's rotary-wing power at its speed x the step, Zeng, Xu,
        Zhang 2019, eq. 12).
        """
        model = self.model
        costs = plan.per_agent()
        samples = self.engine.batch_sizes * self.config.local_steps * trained
        flops = training_flops(self.engine.flops_per_sample, samples)
        costs["energy_compute_j"] = compute_energy(flops, model.kind_of, model.link.j_per_flop())
        costs["energy_flight_j"] = flight_energy(
            model.speed, model.kind_of, seconds=self.config.step_s
        )
        costs["energy_j"] = (
            costs["energy_radio_j"] + costs["energy_compute_j"] + costs["energy_flight_j"]
        )
        return costs

    def evaluate(self) -> Evaluation:
        """Every agent's model on the shared test sample, and their consensus distance."""
        accuracy, loss = self.engine.evaluate()
        return Evaluation(accuracy=accuracy, loss=loss, consensus=self.engine.consensus())

    def _set_plateau(self, plateau: PlateauState) -> None:
        """Store the schedule's state and give its rate to the engine, in one place.

        WHY: the current rate must read the same in the schedule, the engine and the next
        step's optimiser settings; the frozen settings keep the initial rate.
        """
        self.plateau = plateau
        self.engine.set_lr(plateau.lr)

    def state_dict(self) -> dict[str, Any]:
        """The learning state for a checkpoint.

        The engine's, each policy's, and the learning-rate and early-stop schedule.
        """
        return {
            "engine": self.engine.state_dict(),
            "policies": {name: p.state_dict() for name, (p, _) in self.policies.items()},
            "schedule": [
                self.plateau.lr, self.plateau.best, self.plateau.bad_steps,
                self.stopper.best, self.stopper.best_step,
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.engine.load_state_dict(state["engine"])
        if "schedule" in state:
            lr, best, bad, acc, at = state["schedule"]
            self._set_plateau(PlateauState(lr=float(lr), best=float(best), bad_steps=int(bad)))
            self.stopper = EarlyStopState(best=float(acc), best_step=int(at))
        for name, (policy, _) in self.policies.items():
            policy.load_state_dict(state["policies"][name])
