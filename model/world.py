"""The Mesa model: devices move through a real city, meet, train and exchange models.

One step is one global epoch t of ``step_s`` seconds (Cached-DFL: 120 s):

1. every mobility group moves (positions sampled at sub-times of the step);
2. contacts: who was within ``radius_m`` (``end`` of the step, or ``during`` it);
3. local training: K SGD steps per agent on its own partition (Cached-DFL, Alg. 1);
4. exchange: each policy turns this step's contacts into mixing weights or new models
   for its members (D-PSGD, Alg. 1 of de Heredia 2024, line 6), applied as one sparse matmul;
5. evaluation every ``eval_every`` steps, data collection.

Steps 3-5 are the learning session's (:mod:`model.learning.session`): it returns a frozen
:class:`model.learning.results.StepResult` that the model stores (:meth:`MobiDFLModel.store`)
and its reporters read. Policies and mobility models see the model only through
:attr:`MobiDFLModel.view` (:mod:`model.views`).

The app, the CLI, sweeps and the analysis import this model; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

import mesa
import numpy as np
import scipy.sparse as sp
from mesa.time import EventGenerator, Priority, Schedule
from mesa_geo import GeoSpace
from shapely.geometry import Point

from agents import AGENT_CLASSES
from agents.kinds import DeviceAgent
from agents.mobility import MobilityContext, MobilityModel, make_mobility
from maps.world import WorldMap
from model import bounds
from model.config import KINDS, Config
from model.contact_trace import ContactTrace
from model.contacts import (
    CONTACT_COLUMNS,
    ContactTable,
    contact_intervals,
    contact_matrix,
    contact_outputs,
    contact_times,
    sub_samples,
)
from model.errors import ConfigError
from model.learning.results import Evaluation, StepResult
from model.links import LinkPlan, make_link
from model.world_view import ModelWorldView

_MAP_CACHE: dict[tuple, WorldMap] = {}


def shared_world_map(config: Config) -> WorldMap:
    """Maps are read once per process and shared by every run on them (sweeps, app)."""
    key = (config.map, config.cell_m, config.areas, config.seed, config.map_cache)
    if key not in _MAP_CACHE:
        _MAP_CACHE[key] = WorldMap.build(
            config.map,
            cell_m=config.cell_m,
            areas=config.areas,
            seed=config.seed,
            cache_dir=config.map_cache,
        )
    return _MAP_CACHE[key]


# --- named DataCollector reporters ----------------------------------------------------
def simulated_time_s(model: MobiDFLModel) -> float:
    return model.steps * model.config.step_s


def contact_pairs(model: MobiDFLModel) -> int:
    return int(model.adjacency.nnz // 2)


def mean_neighbours(model: MobiDFLModel) -> float:
    return float(model.neighbours_now.mean())


def mean_distinct_neighbours(model: MobiDFLModel) -> float:
    return float(model.distinct_neighbours.mean())


SATURATED_SHARE = 0.3
"""Mean neighbours above this share of the fleet: everyone meets everyone, mobility is moot."""


def fleet_share_in_contact(model: MobiDFLModel) -> float:
    """Mean neighbours this step as a share of the rest of the fleet (contact density)."""
    return float(model.neighbours_now.mean()) / max(model.n_agents - 1, 1)


def kind_share_in_contact(model: MobiDFLModel, kind: str) -> float:
    """Mean same-kind neighbours of ``kind`` as a share of the rest of that kind.

    Policies mix among their own members (usually one kind), so a kind can be saturated
    even when the whole fleet is not (e.g. fast cars among slow pedestrians).
    """
    members = model.kind_of == kind
    count = int(members.sum())
    if count < 2:
        return float("nan")
    same = model.adjacency[members][:, members]
    return float(same.nnz) / count / (count - 1)


def fleet_share_met(model: MobiDFLModel) -> float:
    """Share of the rest of the fleet an agent has met so far (Cached-DFL's mixing reach)."""
    return float(model.distinct_neighbours.mean()) / max(model.n_agents - 1, 1)


def _nanmean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def accuracy_mean(model: MobiDFLModel) -> float:
    return _nanmean(model.evaluation.accuracy)


def accuracy_std(model: MobiDFLModel) -> float:
    accuracy = model.evaluation.accuracy
    return float(np.nanstd(accuracy)) if np.isfinite(accuracy).any() else float("nan")


def accuracy_min(model: MobiDFLModel) -> float:
    accuracy = model.evaluation.accuracy
    return float(np.nanmin(accuracy)) if np.isfinite(accuracy).any() else float("nan")


def accuracy_p10(model: MobiDFLModel) -> float:
    """The accuracy that 90 % of the agents reach or beat (who is left behind)."""
    accuracy = model.evaluation.accuracy
    finite = accuracy[np.isfinite(accuracy)]
    return float(np.percentile(finite, 10.0)) if finite.size else float("nan")


def loss_mean(model: MobiDFLModel) -> float:
    return _nanmean(model.evaluation.loss)


def accuracy_of_kind(model: MobiDFLModel, kind: str) -> float:
    return _nanmean(model.evaluation.accuracy[model.kind_of == kind])


def accuracy_of_policy(model: MobiDFLModel, policy: str) -> float:
    return _nanmean(model.evaluation.accuracy[model.policy_of_agent == policy])


def accuracy_high_mobility(model: MobiDFLModel) -> float:
    return _nanmean(model.evaluation.accuracy[model.hm]) if model.hm.any() else float("nan")


def accuracy_low_mobility(model: MobiDFLModel) -> float:
    return _nanmean(model.evaluation.accuracy[~model.hm]) if (~model.hm).any() else float("nan")


def hm_lm_gap(model: MobiDFLModel) -> float:
    """de Heredia 2024, Table 2: accuracy of high- minus low-mobility clients."""
    return accuracy_high_mobility(model) - accuracy_low_mobility(model)


def distinct_neighbours_of_class(model: MobiDFLModel, high: bool) -> float:
    """de Heredia 2024, App. B: cumulative distinct neighbours per mobility class."""
    mask = model.hm if high else ~model.hm
    return float(model.distinct_neighbours[mask].mean()) if mask.any() else float("nan")


def consensus_distance(model: MobiDFLModel) -> float:
    return model.evaluation.consensus


def policy_metric(model: MobiDFLModel, name: str) -> float:
    return float(model.policy_metrics.get(name, float("nan")))


LINK_COLUMNS = (
    *LinkPlan.COLUMNS, "energy_j", "energy_radio_j", "energy_compute_j", "energy_flight_j"
)
"""Per-step (``model.csv``: sum over agents) and per-agent (``agents.parquet``: running
total since step 0) link columns, present when ``link.model`` is not ``ideal``."""


def link_total(model: MobiDFLModel, column: str) -> float:
    """This step's ``column`` summed over agents (0 before step 1)."""
    step = model.last_step
    if step is None or step.link is None:
        return 0.0
    return float(np.sum(step.link[column]))


class MobiDFLModel(mesa.Model):
    """Mobility-aware decentralized federated learning in a real street network.

    Args:
        config: a validated :class:`model.config.Config`; ``settings`` override it.
        seed: overrides ``config.seed`` (Mesa convention).
        rng: accepted for ``mesa.batch_run`` replicates; an integer is used as the seed.
        world: a prebuilt :class:`maps.world.WorldMap` to share between runs.
        scenario: passed to Mesa (SolaraViz's Reset always passes one); unused here.
        **settings: any public setting by name (``vehicles=50``, ``vehicle_policy=...``,
            or dotted names through a dict: ``**{"vehicle.policy": "dpsgd"}``).
    """

    def __init__(
        self,
        *,
        config: Config | None = None,
        seed: int | None = None,
        rng: Any = None,
        world: WorldMap | None = None,
        scenario: Any = None,
        **settings: Any,
    ) -> None:
        if config is not None and not isinstance(config, Config):
            raise TypeError(f"config must be a model.config.Config, not {type(config).__name__}")
        config = (config or Config()).updated(settings)
        if seed is None and isinstance(rng, int | np.integer):
            seed = int(rng)
        if seed is not None:
            config = config.updated(seed=seed)
        bounds.check_memory(config)  # before anything big is allocated
        # Mesa 3.5 deprecates seed= in favour of rng=; SolaraViz's Reset passes a scenario.
        super().__init__(rng=config.seed, scenario=scenario)
        self.config = config
        self.world_map = world or shared_world_map(config)
        west, south, east, north = self.world_map.bounds
        bounds.check_grid(
            config, self.world_map.grid.n_cells, map_width_m=east - west, map_height_m=north - south
        )
        used = np.bincount(self.world_map.node_area, minlength=config.areas)
        if (used == 0).any():
            raise ConfigError(
                "areas",
                config.areas,
                f"at most {int((used > 0).sum())} on this map (every area needs road nodes; "
                f"{int((used == 0).sum())} would be empty)",
            )
        self.space = GeoSpace(crs="epsg:4326", warn_crs_conversion=False)

        self.groups: list[tuple[str, slice, MobilityModel]] = []
        start = 0
        for kind in KINDS:
            count = config.count(kind)
            if count == 0:
                continue
            mobility = make_mobility(
                config.kind(kind).mobility,
                world=self.world_map,
                kind=kind,
                count=count,
                settings=config,
                rng=self.rng,
            )
            self.groups.append((kind, slice(start, start + count), mobility))
            start += count
        self.n_agents = start
        self.contact_trace = self._contact_trace()
        """Contacts from a trace instead of positions (``contact_trace`` mobility), or None."""
        farthest, kind = bounds.fastest(self.groups, config.step_s)
        bounds.check_sub_samples(config, farthest_m=farthest, fastest_kind=kind)
        self.kind_of = np.concatenate(
            [np.full(g[1].stop - g[1].start, g[0]) for g in self.groups]
        ).astype(str)
        self.policy_of_agent = np.array([config.policy_of(k) for k in self.kind_of])
        self.position = np.concatenate([g[2].position for g in self.groups])
        self.hm = np.concatenate([g[2].hm for g in self.groups])
        self.speed = np.concatenate([g[2].speeds() for g in self.groups])
        self.area = self.world_map.area_of(self.position)
        for _, members, mobility in self.groups:
            home = getattr(mobility, "home_area", None)
            if home is not None:
                self.area[members] = np.where(home >= 0, home, self.area[members])

        self.adjacency = sp.csr_matrix((self.n_agents, self.n_agents), dtype=bool)
        self.met = sp.csr_matrix((self.n_agents, self.n_agents), dtype=bool)
        self.encounters: tuple[np.ndarray, np.ndarray] | None = None  # time-ordered contacts
        self.track_encounters = False
        """True: compute :attr:`encounters` every step even without a policy that needs them
        (mobility-only runs that study relay order, e.g. validation/cached_dfl.py)."""
        self.link = make_link(config)
        """The link model (issue 26); ``ideal`` = none, every contact carries everything."""
        self.contact_table: ContactTable | None = None
        """This step's stays in range (only when a link model is set)."""
        self.contact_frames: list[Any] = []
        """Every step's contact table as a DataFrame (exported as ``contacts.csv``)."""
        self.contact_outputs = contact_outputs(config.contacts_out, link_ideal=self.link.ideal)
        """Contact table formats written with the run's outputs (``contacts_out``)."""
        self.record_contacts = not self.link.ideal or bool(self.contact_outputs)
        if (self.contact_trace is not None and not self.link.ideal
                and not self.contact_trace.has_distance and self.link.needs_distance):
            raise ConfigError(
                "link.model", self.link.name,
                "a link whose rate does not depend on distance (fixed_rate), because the "
                "contact trace gives no distances (set contact_trace.distance_m to assume one)",
            )
        self.trajectory: np.ndarray | None = None
        """The last step's sampled positions ``[F + 1, N, 2]`` (the chords every contact test
        uses; replayed in ns-3 by ``validation/ns3_link.py``)."""
        self.link_totals = {c: np.zeros(start) for c in LINK_COLUMNS} if not self.link.ideal \
            else None
        """Per agent, link costs summed since step 0 (``agents.parquet``)."""
        self.neighbours_now = np.zeros(self.n_agents, int)
        self.distinct_neighbours = np.zeros(self.n_agents, int)
        self.label_hist: np.ndarray | None = None
        self.evaluation = Evaluation.missing(self.n_agents)
        """The latest evaluation of every agent's model (NaN before the first)."""
        self.last_step: StepResult | None = None
        """What the latest learning step returned (``None`` before step 1)."""
        self.policy_metrics: Mapping[str, float] = MappingProxyType({})
        """The latest step's policy metrics (columns of ``model.csv``)."""
        self.view = ModelWorldView(self, world_map=self.world_map)
        """What policies and mobility models may read of this model (:mod:`model.views`)."""
        self.learner = None
        if config.learning:
            from model.learning.session import LearningSession

            self.learner = LearningSession(self)
            self.label_hist = self.learner.engine.label_hist

        lonlat = self.world_map.to_wgs84(self.position)
        self.device_agents: list[DeviceAgent] = []
        for kind, members, _ in self.groups:  # Mesa idiom: bulk creation, one call per kind
            index = np.arange(members.start, members.stop)
            self.device_agents.extend(
                AGENT_CLASSES[kind].create_agents(
                    self, len(index), index=index, lon=lonlat[index, 0], lat=lonlat[index, 1]
                )
            )
        self.space.add_agents(self.device_agents)

        self.records: list[dict[str, np.ndarray]] = []
        self.datacollector = mesa.DataCollector(model_reporters=self._reporters())
        if self.learner is not None and config.eval_initial:
            self.evaluation = self.learner.evaluate()  # an extra evaluation: only when asked
        self.datacollector.collect(self)
        self._record_agents()

    # --- reporters -------------------------------------------------------------------
    def _reporters(self) -> dict[str, Callable[[MobiDFLModel], Any]]:
        reporters: dict[str, Callable[[MobiDFLModel], Any]] = {
            "time_s": simulated_time_s,
            "contacts": contact_pairs,
            "neighbours_mean": mean_neighbours,
            "distinct_neighbours_mean": mean_distinct_neighbours,
            "neighbours_share": fleet_share_in_contact,
            "met_share": fleet_share_met,
        }
        kinds = list(dict.fromkeys(self.kind_of))
        if len(kinds) > 1:
            for kind in kinds:
                reporters[f"neighbours_share_{kind}"] = partial(kind_share_in_contact, kind=kind)
        if self.hm.any():
            reporters["distinct_neighbours_hm"] = partial(distinct_neighbours_of_class, high=True)
            reporters["distinct_neighbours_lm"] = partial(
                distinct_neighbours_of_class, high=False
            )
        if self.learner is None:
            return reporters
        reporters |= {
            "acc_mean": accuracy_mean,
            "acc_std": accuracy_std,
            "acc_min": accuracy_min,
            "acc_p10": accuracy_p10,
            "loss_mean": loss_mean,
            "consensus": consensus_distance,
        }
        for kind in dict.fromkeys(self.kind_of):
            reporters[f"acc_{kind}"] = partial(accuracy_of_kind, kind=kind)
        policies = list(dict.fromkeys(self.policy_of_agent))
        if len(policies) > 1:
            for policy in policies:
                reporters[f"acc_policy_{policy}"] = partial(accuracy_of_policy, policy=policy)
        if self.hm.any() and not self.hm.all():
            reporters |= {
                "acc_hm": accuracy_high_mobility,
                "acc_lm": accuracy_low_mobility,
                "hm_lm_gap": hm_lm_gap,
            }
        for name in self.learner.metric_names:
            reporters[name] = partial(policy_metric, name=name)
        if self.link_totals is not None:
            for column in LINK_COLUMNS:
                reporters[column] = partial(link_total, column=column)
        return reporters

    # --- one step --------------------------------------------------------------------
    def step(self) -> None:
        config = self.config
        farthest = max(m.max_step_distance(config.step_s) for *_, m in self.groups)
        if config.contact == "during":
            count = sub_samples(max_step_distance=farthest, radius_m=config.radius_m)
        else:
            count = 1
        fractions = np.arange(1, count + 1) / count
        context = MobilityContext(
            world=self.view, step_s=config.step_s, fractions=fractions, rng=self.rng
        )
        trajectory = np.empty((count + 1, self.n_agents, 2))
        trajectory[0] = self.position
        for _, members, mobility in self.groups:
            trajectory[1:, members] = mobility.advance(context)
            self.speed[members] = mobility.speeds()
        self.position = trajectory[-1]
        self.trajectory = trajectory
        needs_times = self.track_encounters or (
            self.learner is not None and self.learner.needs_encounter_times
        )
        if self.contact_trace is not None:  # contacts are the trace's, not the positions'
            table = self.contact_trace.table(self.steps)
            self.adjacency = self.contact_trace.adjacency(table)
            if needs_times:
                self.encounters = self.contact_trace.encounters(table)
        else:
            self.adjacency = contact_matrix(
                trajectory, radius_m=config.radius_m, mode=config.contact
            )
            table = None
            if self.record_contacts:
                table = contact_intervals(
                    trajectory, radius_m=config.radius_m, step_s=config.step_s
                )
            if needs_times:
                self.encounters = contact_times(
                    trajectory, radius_m=config.radius_m, mode=config.contact
                )
        if not self.link.ideal:
            self.contact_table = table
        if self.record_contacts:
            self.contact_frames.append(table.frame(self.steps))
        self.neighbours_now = np.diff(self.adjacency.indptr)
        self.met = (self.met + self.adjacency).astype(bool)
        self.distinct_neighbours = np.diff(self.met.indptr)
        if self.learner is not None:
            self.store(self.learner.step())
        self.datacollector.collect(self)
        if self.steps % config.record_every == 0 or self.steps == config.steps:
            self._record_agents()

    def _contact_trace(self) -> ContactTrace | None:
        """The trace of the ``contact_trace`` mobility groups; all or none of the groups."""
        given = [(kind, m) for kind, _, m in self.groups if getattr(m, "gives_contacts", False)]
        if not given:
            return None
        if len(given) != len(self.groups):
            moving = next(k for k, _, m in self.groups if not getattr(m, "gives_contacts", False))
            raise ConfigError(
                f"{moving}.mobility", self.config.kind(moving).mobility,
                f"contact_trace, as {given[0][0]}.mobility (a contact trace gives every "
                "agent's contacts; set the other kinds' counts to 0 or their mobility to "
                "contact_trace)",
            )
        return given[0][1].contact_trace()

    def store(self, result: StepResult) -> None:
        """Keep a learning step's result: reporters and records read it from here."""
        self.last_step = result
        self.policy_metrics = result.metrics
        if result.link is not None and self.link_totals is not None:
            for column in LINK_COLUMNS:
                self.link_totals[column] += result.link[column]
        if result.evaluation is not None:
            self.evaluation = result.evaluation
        if result.stop:
            self.running = False

    @property
    def accuracy(self) -> np.ndarray:
        """Accuracy per agent at the latest evaluation (read-only; NaN before the first)."""
        return self.evaluation.accuracy

    @property
    def loss(self) -> np.ndarray:
        """Test loss per agent at the latest evaluation (read-only)."""
        return self.evaluation.loss

    @property
    def consensus(self) -> float:
        """Consensus distance at the latest evaluation."""
        return self.evaluation.consensus

    def density_summary(self) -> tuple[str, bool]:
        """One line on contact density over the steps so far, and whether it is saturated.

        Saturated = on average an agent is in contact with more than
        :data:`SATURATED_SHARE` of the fleet each step: then every policy sees nearly the
        same complete graph and mobility effects cannot appear (use a larger map, fewer
        agents or a shorter ``radius_m``).
        """
        table = self.model_table()
        moving = table[table["step"] > 0]
        if moving.empty:
            return "density: no step run yet", False
        neighbours = float(moving["neighbours_mean"].mean())
        share = float(moving["neighbours_share"].mean())
        met = float(table["met_share"].iloc[-1])
        text = (
            f"density: {neighbours:.2f} neighbours per agent per step ({share:.1%} of the "
            f"fleet), {met:.1%} of the fleet met by step {self.steps}"
        )
        per_kind = self._same_kind_shares(moving)
        if per_kind:
            text += "; same-kind: " + ", ".join(f"{k} {v:.1%}" for k, v in per_kind.items())
        return text, self._saturated(moving)

    def contact_regime(self) -> str:
        """``"saturated"``, ``"isolated"`` or ``"mixing"``, over the steps run so far.

        WHY: both ends make a mobility study moot. Saturated: see :meth:`density_summary`.
        Isolated: no agent was in range of another at any step, so every agent trained
        alone and no exchange policy ever ran (e.g. a preset's radius on a map far larger
        than its paper's world: use a smaller map, more agents or a larger ``radius_m``).
        """
        table = self.model_table()
        moving = table[table["step"] > 0]
        if moving.empty:
            return "mixing"
        if self._saturated(moving):
            return "saturated"
        if float(moving["neighbours_mean"].max()) == 0.0:
            return "isolated"
        return "mixing"

    def static_groups(self) -> dict[str, int]:
        """Per kind whose agents never move (and whose policy no moving kind shares: DAM's
        UAVs carry models between static clients): how many groups its agents form in the
        latest step's contact graph (one group = linked through in-range neighbours).

        WHY: static agents out of range of each other can never exchange, whatever the
        policy, e.g. PSFL sensors placed over a real city's cells: its federations cannot
        span two groups, so they outnumber the areas (PSFL's grid is one group).
        """
        from scipy.sparse.csgraph import connected_components

        moves = {  # a contact trace's agents stand still, but the trace carries them
            kind: mobility.max_step_distance(self.config.step_s) > 0
            or getattr(mobility, "gives_contacts", False)
            for kind, _, mobility in self.groups
        }
        carried = {self.config.policy_of(k) for k, moving in moves.items() if moving}
        groups = {}
        for kind, members, _ in self.groups:
            count = members.stop - members.start
            if count < 2 or moves[kind] or self.config.policy_of(kind) in carried:
                continue  # moving agents of the same policy carry models between groups
            block = self.adjacency[members, members]
            groups[kind] = int(connected_components(block, directed=False)[0])
        return groups

    @classmethod
    def _saturated(cls, moving) -> bool:
        """Fleet or one kind above :data:`SATURATED_SHARE` on average (steps > 0 only)."""
        shares = [float(moving["neighbours_share"].mean())]
        return max([*shares, *cls._same_kind_shares(moving).values()]) > SATURATED_SHARE

    @staticmethod
    def _same_kind_shares(moving) -> dict[str, float]:
        return {
            column.removeprefix("neighbours_share_"): float(moving[column].mean())
            for column in moving.columns
            if column.startswith("neighbours_share_") and moving[column].notna().any()
        }

    def run(self, *, steps: int | None = None, progress: Callable[[int], None] | None = None):
        """Run ``steps`` (default: the ``steps`` setting) steps; ``progress(step)`` after each."""
        for _ in range(steps if steps is not None else self.config.steps - self.steps):
            if not self.running:  # early stop (early_stop_patience, Cached-DFL)
                break
            self.step()
            if progress is not None:
                progress(self.steps)
        return self

    # --- outputs ---------------------------------------------------------------------
    def _record_agents(self) -> None:
        lonlat = self.world_map.to_wgs84(self.position)
        self.records.append(
            {
                "step": np.full(self.n_agents, self.steps),
                "agent_id": np.arange(self.n_agents),
                "kind": self.kind_of,
                "x_m": self.position[:, 0].copy(),
                "y_m": self.position[:, 1].copy(),
                "lon": lonlat[:, 0],
                "lat": lonlat[:, 1],
                "speed_mps": self.speed.copy(),
                "neighbours": self.neighbours_now.copy(),
                "distinct_neighbours": self.distinct_neighbours.copy(),
                "mobility_class": np.where(self.hm, "HM", "LM"),
                "area": self.area.copy(),
                "policy": self.policy_of_agent,
                "accuracy": self.accuracy.copy(),
                "loss": self.loss.copy(),
            }
            | {c: v.copy() for c, v in (self.link_totals or {}).items()}
        )

    def contacts_table(self):
        """Every step's stays in range (``contacts.csv``: step, a, b, t_start, t_end, d_min),
        recorded when a link model is set or ``contacts_out`` asks for them."""
        import pandas as pd

        if not self.contact_frames:
            return pd.DataFrame({c: [] for c in CONTACT_COLUMNS})
        return pd.concat(self.contact_frames, ignore_index=True)

    def agent_table(self):
        """One row per agent per recorded step (the ``agents.parquet`` schema)."""
        import pandas as pd

        return pd.concat([pd.DataFrame(r) for r in self.records], ignore_index=True)

    def model_table(self):
        """One row per step (the ``model.csv`` schema)."""
        frame = self.datacollector.get_model_vars_dataframe()
        frame.index.name = "step"
        return frame.reset_index()

    def sync_geometries(self) -> None:
        """Copy array positions into the GeoAgents' WGS84 geometries (display, export)."""
        lonlat = self.world_map.to_wgs84(self.position)
        for agent, (lon, lat) in zip(self.device_agents, lonlat, strict=True):
            agent.geometry = Point(lon, lat)
        self.space._recreate_rtree()  # mesa-geo has no public API for moved agents

    # --- checkpoints -----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue this run exactly (see :mod:`model.checkpoint`)."""
        return {
            "steps": self.steps,
            "running": bool(self.running),  # False after an early stop: a resume stays stopped
            "rng": self.rng.bit_generator.state,
            "random": self.random.getstate(),
            "position": self.position.copy(),
            "speed": self.speed.copy(),
            "mobility": [mobility.state_dict() for *_, mobility in self.groups],
            "met": {"indptr": self.met.indptr.copy(), "indices": self.met.indices.copy()},
            "adjacency": {
                "indptr": self.adjacency.indptr.copy(),
                "indices": self.adjacency.indices.copy(),
            },
            "accuracy": self.accuracy.copy(),
            "loss": self.loss.copy(),
            "consensus": self.consensus,
            "policy_metrics": dict(self.policy_metrics),
            "model_vars": {k: list(v) for k, v in self.datacollector.model_vars.items()},
            "records": self.records,
            "learner": None if self.learner is None else self.learner.state_dict(),
            "link": None if self.link.ideal else {
                "model": self.link.state_dict(),
                "totals": self.link_totals,
            },
            "contacts": None if not self.record_contacts else {
                c: np.array(v) for c, v in self.contacts_table().items()
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` of a run built with the same config."""
        n = self.n_agents
        self.rng.bit_generator.state = state["rng"]
        self.running = bool(state.get("running", True))
        self.random.setstate(_as_random_state(state["random"]))
        self.position = np.asarray(state["position"], float).copy()
        self.speed = np.asarray(state["speed"], float).copy()
        for (*_, mobility), mobility_state in zip(self.groups, state["mobility"], strict=True):
            mobility.load_state_dict(mobility_state)
        self.met = _bool_csr(state["met"], n)
        self.adjacency = _bool_csr(state["adjacency"], n)
        self.neighbours_now = np.diff(self.adjacency.indptr)
        self.distinct_neighbours = np.diff(self.met.indptr)
        self.evaluation = Evaluation(
            accuracy=state["accuracy"], loss=state["loss"], consensus=state["consensus"]
        )
        self.policy_metrics = MappingProxyType(dict(state["policy_metrics"]))
        for key, values in state["model_vars"].items():
            self.datacollector.model_vars[key] = list(values)
        self.records = list(state["records"])
        if self.learner is not None:
            self.learner.load_state_dict(state["learner"])
        if state.get("link") is not None and not self.link.ideal:
            self.link.load_state_dict(state["link"]["model"])
            self.link_totals = {c: np.asarray(v, float) for c, v in state["link"]["totals"].items()}
        contacts = state.get("contacts")
        if contacts is None and state.get("link") is not None:  # checkpoints before contacts_out
            contacts = state["link"].get("contacts")
        if contacts is not None and self.record_contacts:
            import pandas as pd

            self.contact_frames = [pd.DataFrame(dict(contacts))]
        self._restart_clock(int(state["steps"]))

    def _restart_clock(self, steps: int) -> None:
        """Set Mesa's step counter and re-arm its step schedule after ``steps`` steps.

        Mesa 3.5 drives ``step`` from a private recurring event; a resumed model must
        continue at step ``steps + 1``, so the event generator is replaced.
        """
        self.steps = steps
        self.time = float(steps)
        self._default_schedule.stop()
        self._default_schedule = EventGenerator(
            self, self._do_step, Schedule(interval=1.0, start=steps + 1.0), priority=Priority.HIGH
        ).start()

    def neighbour_lists(self) -> list[np.ndarray]:
        return [
            self.adjacency.indices[self.adjacency.indptr[i] : self.adjacency.indptr[i + 1]]
            for i in range(self.n_agents)
        ]


def _bool_csr(parts: dict[str, np.ndarray], n: int) -> sp.csr_matrix:
    indices = np.asarray(parts["indices"])
    return sp.csr_matrix(
        (np.ones(len(indices), bool), indices, np.asarray(parts["indptr"])), shape=(n, n)
    )


def _as_random_state(state: Any) -> tuple:
    version, internal, gauss = state
    return (int(version), tuple(int(v) for v in internal), gauss)
