"""The Mesa model: devices move through a real city, meet, train and exchange models.

One step is one global epoch t of ``step_s`` seconds (Cached-DFL: 120 s):

1. every mobility group moves (positions sampled at sub-times of the step);
2. contacts: who was within ``radius_m`` (``end`` of the step, or ``during`` it);
3. local training: K SGD steps per agent on its own partition (Cached-DFL, Alg. 1);
4. exchange: each policy turns this step's contacts into mixing weights or new models
   for its members (D-PSGD, Alg. 1 of de Heredia 2024, line 6), applied as one sparse matmul;
5. evaluation every ``eval_every`` steps, data collection.

Steps 3-5 are the learning session's (:mod:`mobidfl.model.learning.session`): it returns a frozen
:class:`mobidfl.model.learning.results.StepResult` that the model stores
(:meth:`MobiDFLModel.store`) and its reporters read. Policies and mobility models see the model only
through
:attr:`MobiDFLModel.view` (:mod:`mobidfl.agents.views`).

The app, the CLI, sweeps and the analysis import this model; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import mesa
import numpy as np
import scipy.sparse as sp
import shapely
from mesa_geo import GeoSpace

from mobidfl.agents import AGENT_CLASSES
from mobidfl.agents.kinds import DeviceAgent
from mobidfl.agents.mobility import MobilityContext, MobilityModel, make_mobility
from mobidfl.contact_table import CONTACT_COLUMNS, ContactTable
from mobidfl.errors import ConfigError
from mobidfl.maps.contact_trace import ContactTrace
from mobidfl.maps.world import WorldMap
from mobidfl.model import bounds, outputs, regime, world_state
from mobidfl.model.config import KINDS, Config
from mobidfl.model.contacts import (
    contact_intervals,
    contact_matrix,
    contact_outputs,
    contact_times,
    sub_samples,
)
from mobidfl.model.learning.results import Evaluation, StepResult
from mobidfl.model.links import make_link
from mobidfl.model.regime import SATURATED_SHARE
from mobidfl.model.reporters import IDEAL_LINK_COLUMNS, LINK_COLUMNS, model_reporters
from mobidfl.model.world_view import ModelWorldView

__all__ = ["LINK_COLUMNS", "SATURATED_SHARE", "MobiDFLModel", "shared_world_map"]

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


def _run_config(config: Config | None, *, rng: Any, settings: dict[str, Any]) -> Config:
    """The run's config: ``settings`` over ``config``, the seed from ``settings`` or ``rng``.

    Resolved before ``mesa.Model.__init__``, whose ``rng`` is this config's seed; the memory
    check comes first of all, before anything big is allocated.
    """
    if config is not None and not isinstance(config, Config):
        raise TypeError("config must be a mobidfl.model.config.Config, "
                        f"not {type(config).__name__}")
    # ``seed`` is a setting like any other, not a parameter of the signature: Mesa's
    # batch_run would otherwise give every run ``seed=None`` (it passes its ``rng`` list
    # under the name ``seed`` when the signature has one)
    seed = settings.pop("seed", None)
    config = (config or Config()).updated(settings)
    if seed is None and isinstance(rng, int | np.integer):
        seed = int(rng)
    if seed is not None:
        config = config.updated(seed=seed)
    bounds.check_memory(config)  # before anything big is allocated
    return config


class MobiDFLModel(mesa.Model):
    """Mobility-aware decentralized federated learning in a real street network.

    Parameters
    ----------
    config
        A validated :class:`mobidfl.model.config.Config`; ``settings`` override it.
    rng
        Mesa's seed argument (``mesa.batch_run(..., rng=[0, 1])`` gives one run per seed);
        an integer is used as the ``seed`` setting, which it overrides.
    world
        A prebuilt :class:`mobidfl.maps.world.WorldMap` to share between runs.
    scenario
        Passed to Mesa (SolaraViz's Reset always passes one); unused here.
    **settings
        Any public setting by name (``vehicles=50``, ``seed=1``, ``vehicle_policy=...``, or
        dotted names through a dict: ``**{"vehicle.policy": "dpsgd"}``).

    Raises
    ------
    ConfigError
        A setting is not allowed, or the world it asks for cannot be built (an area
        without road nodes, a grid or a memory need beyond the limits); one line naming it.
    TypeError
        ``config`` is not a :class:`mobidfl.model.config.Config`.
    """

    _clock_only: bool = False
    """True while a resumed run's clock is brought to its step: ``step`` then does nothing
    (:func:`mobidfl.model.world_state.restart_clock`)."""

    def __init__(
        self,
        *,
        config: Config | None = None,
        rng: Any = None,
        world: WorldMap | None = None,
        scenario: Any = None,
        **settings: Any,
    ) -> None:
        config = _run_config(config, rng=rng, settings=settings)
        # Mesa 3.5 deprecates seed= in favour of rng=; SolaraViz's Reset passes a scenario.
        super().__init__(rng=config.seed, scenario=scenario)
        self.config = config
        self.world_map = world or shared_world_map(config)
        self._check_world()
        self.space = GeoSpace(crs="epsg:4326", warn_crs_conversion=False)

        self.groups = self._mobility_groups()
        """One ``(kind, rows, mobility model)`` per kind with agents, in :data:`KINDS` order."""
        self.n_agents = self.groups[-1][1].stop if self.groups else 0
        self.contact_trace = self._contact_trace()
        """Contacts from a trace instead of positions (``contact_trace`` mobility), or None."""
        self._init_arrays()
        self._init_contacts()
        self._init_learning()
        self._create_agents()

        self.records = outputs.ColumnLog()
        self.datacollector = mesa.DataCollector(model_reporters=model_reporters(self))
        if self.learner is not None and config.eval_initial:
            self.evaluation = self.learner.evaluate()  # an extra evaluation: only when asked
        self.datacollector.collect(self)
        self._record_agents()

    def _check_world(self) -> None:
        """Refuse a grid or areas this map cannot hold (one ``ConfigError`` line)."""
        config = self.config
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

    def _mobility_groups(self) -> list[tuple[str, slice, MobilityModel]]:
        """Each kind's mobility model, built in :data:`KINDS` order (each draws from ``rng``)."""
        config = self.config
        groups: list[tuple[str, slice, MobilityModel]] = []
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
            groups.append((kind, slice(start, start + count), mobility))
            start += count
        return groups

    def _init_arrays(self) -> None:
        """Per-agent arrays in row order: kind, policy, position, speed, area."""
        config = self.config
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
            home = mobility.home_area
            if home is not None:
                self.area[members] = np.where(home >= 0, home, self.area[members])

    def _init_contacts(self) -> None:
        """Contact state, the link model and the contact outputs it asks for."""
        config = self.config
        self.adjacency = sp.csr_matrix((self.n_agents, self.n_agents), dtype=bool)
        self.met = sp.csr_matrix((self.n_agents, self.n_agents), dtype=bool)
        self.encounters: tuple[np.ndarray, np.ndarray] | None = None  # time-ordered contacts
        self.track_encounters = False
        """True: compute :attr:`encounters` every step even without a policy that needs them
        (mobility-only runs that study relay order, e.g. validation/cached_dfl.py)."""
        self.link = make_link(config)
        """The link model; ``ideal`` = none, every contact carries everything."""
        self.contact_table: ContactTable | None = None
        """This step's stays in range (only when a link model is set)."""
        self.contact_log = outputs.ColumnLog(CONTACT_COLUMNS)
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
        totals = LINK_COLUMNS if not self.link.ideal else \
            IDEAL_LINK_COLUMNS if config.learning else ()
        self.link_totals = {c: np.zeros(self.n_agents) for c in totals} if totals else None
        """Per agent, link costs summed since step 0 (``agents.parquet``); at the ideal link
        only the bytes (:data:`mobidfl.model.reporters.IDEAL_LINK_COLUMNS`), none without
        learning."""

    def _init_learning(self) -> None:
        """Neighbour counts, the latest results, the world view and the learning session."""
        config = self.config
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
        """What policies and mobility models may read of this model
        (:mod:`mobidfl.agents.views`)."""
        self.learner = None
        if config.learning:
            from mobidfl.model.learning.session import LearningSession

            self.learner = LearningSession(self)
            self.label_hist = self.learner.engine.label_hist

    def _create_agents(self) -> None:
        """Mesa idiom: bulk creation, one ``create_agents`` call per kind, into the GeoSpace."""
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

    # --- one step --------------------------------------------------------------------
    def step(self) -> None:
        """Move every agent, find the contacts, train and exchange: one Mesa step."""
        if self._clock_only:  # a resumed run's clock catching up: Mesa counts, nothing moves
            return
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
            self.contact_log.append(table.columns(self.steps))
        self.neighbours_now = np.diff(self.adjacency.indptr)
        self.met = (self.met + self.adjacency).astype(bool)
        self.distinct_neighbours = np.diff(self.met.indptr)
        if self.learner is not None:
            self.store(self.learner.step())
        self.datacollector.collect(self)
        if self.steps % config.record_every == 0 or self.steps == config.steps:
            self._record_agents()
        if self.steps >= config.steps:  # Mesa's run_model(), batch_run and the app's Play end
            self.running = False

    def _contact_trace(self) -> ContactTrace | None:
        """The trace of the ``contact_trace`` mobility groups; all or none of the groups."""
        given = [(kind, m) for kind, _, m in self.groups if m.gives_contacts]
        if not given:
            return None
        if len(given) != len(self.groups):
            moving = next(k for k, _, m in self.groups if not m.gives_contacts)
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
            for column, total in self.link_totals.items():
                total += result.link[column]
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
        """One line on contact density so far, and whether it is saturated.

        See :func:`mobidfl.model.regime.density_summary`.
        """
        return regime.density_summary(self)

    def contact_regime(self) -> str:
        """``"saturated"``, ``"isolated"`` or ``"mixing"`` over the steps run so far.

        See :func:`mobidfl.model.regime.contact_regime`: both ends make a mobility study moot.
        """
        return regime.contact_regime(self)

    def static_groups(self) -> dict[str, int]:
        """Per kind of static agents, how many groups out of each other's range they form.

        See :func:`mobidfl.model.regime.static_groups`.
        """
        return regime.static_groups(self)

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
        self.records.append(outputs.agent_record(self))

    def contacts_table(self):
        """Every step's stays in range (``contacts.csv``: step, a, b, t_start, t_end, d_min).

        Recorded when a link model is set or ``contacts_out`` asks for them.
        """
        return outputs.contacts_table(self.contact_log)

    def agent_table(self):
        """One row per agent per recorded step (the ``agents.parquet`` schema)."""
        return outputs.agent_table(self.records)

    def model_table(self):
        """One row per step (the ``model.csv`` schema)."""
        return outputs.model_table(self.datacollector)

    def sync_geometries(self) -> None:
        """Copy array positions into the GeoAgents' WGS84 geometries (display, export).

        ``self.space`` is then a new ``GeoSpace`` with the same agents and layers: mesa-geo has
        no public call for agents that moved (its r-tree and ``total_bounds`` would keep the
        old places; https://github.com/projectmesa/mesa-geo/issues/104), and a fresh space
        builds its r-tree from the new geometries on the first spatial query.
        """
        points = shapely.points(self.world_map.to_wgs84(self.position))
        for agent, point in zip(self.device_agents, points, strict=True):
            agent.geometry = point
        space = GeoSpace(crs=self.space.crs, warn_crs_conversion=False)
        for layer in self.space.layers:
            space.add_layer(layer)
        space.add_agents(self.space.agents)  # the device agents, and any a user added
        self.space = space

    # --- checkpoints -----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue this run exactly.

        See :mod:`mobidfl.model.world_state`; written by :mod:`mobidfl.model.checkpoint`.
        """
        return world_state.state_dict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` of a run built with the same config."""
        world_state.load_state_dict(self, state)


