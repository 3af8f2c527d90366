"""The one typed, validated run configuration.

Every public setting is a dataclass field whose metadata carries its help text and its
check. The same names work as ``--set name=value`` on the command line, as keys in a TOML
file, as keyword arguments of :class:`model.world.MobiDFLModel` (so ``mesa.batch_run`` can
sweep them) and as rows of the README table. Per-kind settings are dotted
(``vehicle.mobility``) and live in a nested :class:`KindSettings`.

A bad value fails at once with :class:`model.errors.ConfigError`, whose one-line message
names the setting, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from model.errors import ConfigError

KINDS: tuple[str, ...] = ("vehicle", "pedestrian", "sensor", "uav")
COUNT_SETTING: dict[str, str] = {
    "vehicle": "vehicles",
    "pedestrian": "pedestrians",
    "sensor": "sensors",
    "uav": "uavs",
}

KIND_POLICY: dict[str, str] = {
    "vehicle": "cached_lru",  # Cached-DFL (Wang et al., AAAI 2025): cars carry model caches
    "pedestrian": "dpsgd",  # de Heredia (2024), Alg. 1: walkers average with who they meet
    "sensor": "fedavg_weighted",  # Reza et al. (DAM/DCM), eq. 2: static clients ...
    "uav": "fedavg_weighted",  # ... and the mobile clients that visit them share one policy
}
"""What ``policy = "auto"`` (the default) gives each kind: the seed system built for it."""

Check = Callable[[Any], str | None]
"""A check returns ``None`` when the value is fine, else the text saying what is allowed."""


def _setting(default: Any, help: str, check: Check | None = None) -> Any:
    return field(default=default, metadata={"help": help, "check": check})


def positive(value: float) -> str | None:
    return None if value > 0 else "a number > 0"


def non_negative(value: float) -> str | None:
    return None if value >= 0 else "a number >= 0"


def at_least_one(value: int) -> str | None:
    return None if value >= 1 else "an integer >= 1"


def unit_interval(value: float) -> str | None:
    return None if 0.0 <= value <= 1.0 else "a number in [0, 1]"


def one_of(*choices: str) -> Check:
    def check(value: str) -> str | None:
        return None if value in choices else "one of " + ", ".join(choices)

    return check


def _registered(registry_name: str, *, allow_auto: bool = False) -> Check:
    """Check a name against a registry resolved lazily (registries import this module)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        names = sorted(_registry_names(registry_name))
        if registry_name == "policy" and allow_auto:
            names = ["auto", *names]
        return None if value in names else "one of " + ", ".join(names)

    return check


_REGISTRIES: dict[str, tuple[str, str]] = {
    "mobility": ("agents.mobility", "MOBILITY_MODELS"),
    "policy": ("model.policies", "POLICIES"),
    "partition": ("model.learning.partition", "PARTITIONS"),
    "dataset": ("model.learning.data", "DATASETS"),
    "net": ("model.learning.nets", "NETS"),
}
"""Setting kind -> (module, name) of its registry, imported on first use: the registries
import this module, so importing them here at load time would be a cycle."""


def _registry_names(registry_name: str) -> Iterable[str]:
    module, attr = _REGISTRIES[registry_name]
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True, kw_only=True)
class KindSettings:
    """Settings of one agent kind (public names ``<kind>.<field>``)."""

    mobility: str = _setting("static", "mobility model", _registered("mobility"))
    speed: float = _setting(0.0, "speed in m/s (random_walk draws speeds instead)", non_negative)
    policy: str | None = _setting(
        None, "exchange policy; empty = the global `policy`", _registered("policy")
    )
    partition: str | None = _setting(
        None, "data partition; empty = the global `partition`", _registered("partition")
    )


def _trace_file(value: str) -> str | None:
    """An empty name (no trace) or an existing ``.xml``/``.csv`` file (SUMO FCD or CSV)."""
    if not value:
        return None
    path = Path(value).expanduser()
    if path.suffix.lower() not in (".xml", ".csv"):
        return "a SUMO FCD .xml or a .csv trace file"
    return None if path.is_file() else "an existing SUMO FCD .xml or .csv trace file"


def _kind_default(mobility: str, speed: float) -> Any:
    return field(
        default_factory=lambda: KindSettings(mobility=mobility, speed=speed),
        metadata={"help": "per-kind settings", "check": None},
    )


@dataclass(frozen=True, kw_only=True)
class Config:
    """All settings of one run. Field order is the README table's order."""

    # --- world ---------------------------------------------------------------------
    preset: str = _setting(
        "",
        "paper preset whose values fill every setting not given explicitly "
        "(`mobidfl presets`; empty = none)",
    )
    map: str = _setting(
        "manhattan_grid",
        "street map: helsinki_drive, helsinki_walk, nyc_uws (bundled real OSM), "
        "manhattan_grid (synthetic, Manhattan-sized), grid:RxC[:SPACING], a .graphml/.osm/"
        ".osm.bz2/.osm.pbf/.csv/.gpkg/.geojson file, or place:NAME / bbox:W,S,E,N / "
        "point:LAT,LON,DIST_M (online, cached)",
    )
    map_cache: str = _setting(
        "~/.cache/mobidfl/maps", "folder where built street arrays and online maps are cached"
    )
    vehicles: int = _setting(100, "number of vehicles (Cached-DFL: 100 cars)", non_negative)
    pedestrians: int = _setting(40, "number of pedestrians", non_negative)
    sensors: int = _setting(30, "number of static sensors (one per grid cell)", non_negative)
    uavs: int = _setting(6, "number of UAVs (move between grid cells)", non_negative)
    steps: int = _setting(20, "number of steps (global epochs)", at_least_one)
    step_s: float = _setting(120.0, "seconds per step (Cached-DFL: 120 s epochs)", positive)
    seed: int = _setting(0, "random seed (mobility, data, models)")
    radius_m: float = _setting(100.0, "radio range R in metres (Cached-DFL: 100 m)", positive)
    contact: str = _setting(
        "during", "contact rule: during (any moment of the step) or end", one_of("during", "end")
    )
    cell_m: float = _setting(100.0, "grid cell size in metres (sensors, UAVs)", positive)
    areas: int = _setting(3, "number of map areas (area-restricted cars, area data)", at_least_one)
    turn_straight: float = _setting(0.5, "Manhattan model: P(straight)", unit_interval)
    turn_left: float = _setting(0.25, "Manhattan model: P(left)", unit_interval)
    turn_right: float = _setting(0.25, "Manhattan model: P(right)", unit_interval)
    walk_q: str = _setting(
        "0.25,0.25,0.25,0.25", "random_walk direction probabilities up,down,left,right"
    )
    hm_fraction: float = _setting(
        0.0, "random_walk: proportion p of high-mobility agents (de Heredia 2024)", unit_interval
    )
    s_max: float = _setting(2.0, "random_walk: low-mobility speeds U(0, s_max) m/s", positive)
    beta: float = _setting(1.75, "random_walk: high-mobility speeds U(beta s_max, 2 beta s_max)")
    rm_cells: float = _setting(
        1.0, "random_grid/dam/dcm: max move per step in cells (inf allowed)", positive
    )
    area_free: int = _setting(
        0, "area_restricted: members free to leave their home area (Cached-DFL)", non_negative
    )
    # --- SUMO traffic and traces (issue 14; agents/mobility/sumo.py, trace.py)
    sumo_step_length: float = _setting(
        1.0, "sumo: seconds per SUMO step (--step-length)", positive
    )
    sumo_warmup_s: float = _setting(
        60.0, "sumo: seconds of SUMO traffic before step 0 (at least one SUMO step)",
        non_negative,
    )
    sumo_fringe_factor: float = _setting(
        1.0, "sumo: randomTrips.py --fringe-factor (trips from/to the map's border)", positive
    )
    sumo_fcd: bool = _setting(
        False, "sumo: write the sampled positions as trace.csv into --out (for `trace`)"
    )
    trace_file: str = _setting(
        "", "trace: SUMO FCD .xml or CSV (id,time,lon,lat or id,time,x,y)", _trace_file
    )
    trace_crs: str = _setting(
        "", "trace: CRS of x,y in trace_file (empty = the map's CRS; EPSG:4326 for geo FCD)"
    )
    record_every: int = _setting(1, "write agents.parquet rows every N steps", at_least_one)
    vehicle: KindSettings = _kind_default("manhattan", 13.89)
    pedestrian: KindSettings = _kind_default("manhattan", 1.4)
    sensor: KindSettings = _kind_default("static", 0.0)
    uav: KindSettings = _kind_default("random_grid", 10.0)

    # --- learning ------------------------------------------------------------------
    learning: bool = _setting(True, "train and exchange models (false = mobility only)")
    dataset: str = _setting("mnist5k", "dataset", _registered("dataset"))
    data_root: str | None = _setting(None, "folder with torchvision-layout datasets")
    partition: str = _setting("shards", "data partition", _registered("partition"))
    dirichlet_alpha: float = _setting(0.5, "Dirichlet concentration alpha", positive)
    area_labels: str = _setting(
        "",
        "area partition: label lists per area, e.g. 9,0,1,2;3,4,5,6;6,7,8,9; empty = overlapping "
        "windows of >= 3 labels; disjoint = contiguous disjoint blocks (PSFL's code)",
    )
    area_within: str = _setting(
        "iid", "area partition: how an area's samples are split", one_of("iid", "shards")
    )
    model: str = _setting("mlp", "neural network", _registered("net"))
    local_steps: int = _setting(5, "K local SGD steps per step", at_least_one)
    batch_size: int = _setting(
        16, "batch size B (per agent min(B, |D_i|); 0 = full batch, Reza et al.)", non_negative
    )
    lr: float = _setting(0.05, "learning rate", positive)
    momentum: float = _setting(0.0, "SGD momentum", unit_interval)
    weight_decay: float = _setting(0.0, "SGD weight decay", non_negative)
    prox_rho: float = _setting(0.0, "proximal term rho (Cached-DFL, Alg. 1)", non_negative)
    # --- optimiser and schedule (paper options)
    optimizer: str = _setting(
        "sgd", "local optimiser: sgd, or adam (PSFL: Adam)", one_of("sgd", "adam")
    )
    lr_plateau_patience: int = _setting(
        0,
        "ReduceLROnPlateau on the mean local training loss: steps without improvement before "
        "lr *= lr_plateau_factor (Cached-DFL; 0 = off, torch default 10)",
        non_negative,
    )
    lr_plateau_factor: float = _setting(
        0.1,
        "ReduceLROnPlateau factor (torch default 0.1)",
        lambda v: None if 0.0 < v < 1.0 else "a number in (0, 1)",
    )
    early_stop_patience: int = _setting(
        0,
        "stop the run when acc_mean has not increased for this many steps (Cached-DFL: 20; "
        "0 = off)",
        non_negative,
    )
    backend: str = _setting("loop", "training backend", one_of("loop", "batched"))
    device: str = _setting("cpu", "torch device for the batched backend", one_of("cpu", "cuda"))
    workers: int = _setting(
        0, "worker processes for the loop backend (0 = auto: free cores, big steps only)",
        non_negative,
    )
    eval_every: int = _setting(1, "evaluate every E steps", at_least_one)
    test_size: int = _setting(500, "shared test sample size", at_least_one)
    # --- performance
    eval_initial: bool = _setting(
        False, "evaluate every agent before the first step (step-0 accuracy in model.csv)"
    )
    eval_chunk: int = _setting(
        0, "test samples per forward pass (0 = measured default per net)", non_negative
    )
    worker_backend: str = _setting(
        "processes", "loop-backend workers: local processes or Ray actors",
        one_of("processes", "ray"),
    )
    ray_address: str | None = _setting(
        None, "worker_backend = ray: cluster address (auto, ray://HOST:PORT; none = local Ray)"
    )
    policy: str = _setting(
        "auto",
        "exchange policy for all kinds; auto = each kind's own seed system (vehicle "
        "cached_lru, pedestrian dpsgd, sensor and uav fedavg_weighted)",
        _registered("policy", allow_auto=True),
    )
    mobility_alpha: float = _setting(
        0.0, "mobility_aware: alpha in W_ij = 1/N + alpha (X_ij - 1/N)", unit_interval
    )
    cache_size: int = _setting(10, "cached_lru: cache size C_max (Cached-DFL)", at_least_one)
    tau_max: int = _setting(5, "cached_lru: staleness tolerance tau_max in steps", at_least_one)
    cache_groups: str = _setting(
        "", "cached_group_lru: per-area cache limits, e.g. 4,3,3 (empty = even split)"
    )
    dam_distance: str = _setting(
        "l2", "dam/dcm: distribution distance (Reza et al. eq. 5: l2)", one_of("l2", "tv")
    )
    psfl_sigma: float = _setting(
        40.0,
        "psfl: federation bound sigma on accumulated dissimilarity (paper: 20/40/80 at "
        "psfl_loss = batch_sum)",
        positive,
    )
    psfl_walker: bool = _setting(False, "psfl: one sensor visits every area in turn (PSFL)")
    psfl_walker_stay: int = _setting(
        5, "psfl: steps the walker stays in each area", at_least_one
    )
    servers: int = _setting(3, "mofel: number of edge servers (one territory each)", at_least_one)
    train_time_s: float = _setting(
        60.0, "mofel: longest local training time tau_max of a client in seconds", positive
    )
    required_accuracy: float = _setting(
        0.9, "mofel: a server requests training while below this accuracy", unit_interval
    )

    # --- paper fidelity
    psfl_loss: str = _setting(
        "batch_sum",
        "psfl: scale of L(D_i, nn_j) in eq. 3: batch_sum (authors' code, the scale of the "
        "paper's sigma 20/40/80) or mean (eq. 3 as printed)",
        one_of("batch_sum", "mean"),
    )
    psfl_loss_batch: int = _setting(
        64, "psfl: evaluation batch of psfl_loss = batch_sum (authors' code: 64)", at_least_one
    )
    psfl_loss_batches: float = _setting(
        0.0,
        "psfl: psfl_loss = batch_sum summed over this many batches (per-sample mean x this; "
        "0 = ceil(|D_i| / psfl_loss_batch) of the node's own data; authors' logs at 3 areas: "
        "4-5 batches)",
        lambda v: None if math.isfinite(v) and v >= 0 else "a finite number >= 0",
    )
    train_time_min_fraction: float = _setting(
        0.05,
        "mofel: client training times drawn U(f train_time_s, train_time_s) per client "
        "(paper Sec. 5.3: U(1, 20) min, f = 0.05; 1 = one time for all)",
        lambda v: None if 0.0 < v <= 1.0 else "a number in (0, 1]",
    )
    route_speed_min: float = _setting(
        1.0 / 60.0,
        "route: client speeds drawn U(route_speed_min, <kind>.speed) m/s per client "
        "(MoFeL Sec. 5.3: v_min = 1 m/min)",
        non_negative,
    )
    mofel_max_clients: int = _setting(
        0,
        "mofel/mofel_a2: at most this many clients per cycle (0 = no cap: eq. 1 has none)",
        non_negative,
    )
    mofel_horizon: float = _setting(
        2.0,
        "mofel: the station's prediction interval Delta in units of the largest training "
        "time (the paper has Delta but gives no value)",
        positive,
    )
    mofel_node_limit: int = _setting(
        20_000,
        "mofel: branch-and-bound node limit of the exact selection (deterministic; no clock)",
        at_least_one,
    )
    psfl_walker_speed: float = _setting(
        0.2,
        "psfl: speed of the moving node between area centres in grid cells per step "
        "(authors' code 0.2; inf = jump in one step)",
        positive,
    )

    # ------------------------------------------------------------------------------
    def count(self, kind: str) -> int:
        return int(getattr(self, COUNT_SETTING[kind]))

    def kind(self, kind: str) -> KindSettings:
        return getattr(self, kind)

    def policy_of(self, kind: str) -> str:
        chosen = self.kind(kind).policy or self.policy
        return KIND_POLICY[kind] if chosen == "auto" else chosen

    def partition_of(self, kind: str) -> str:
        return self.kind(kind).partition or self.partition

    @property
    def n_agents(self) -> int:
        return sum(self.count(k) for k in KINDS)

    @property
    def turn_probabilities(self) -> tuple[float, float, float]:
        return (self.turn_straight, self.turn_left, self.turn_right)

    def area_label_lists(self, num_classes: int) -> list[list[int]]:
        """Labels of each area (``area_labels``).

        Empty (default): overlapping circular windows of at least 3 labels
        (:func:`model.maths.distribution.overlapping_area_labels`: no area holds a single
        label; 3 areas of 10 classes: {0..3}, {3..6}, {6..9}, cf. Cached-DFL's
        {9,0,1,2}, {3,4,5,6}, {6,7,8,9}). ``disjoint``: PSFL's code split into contiguous
        disjoint blocks. Otherwise explicit ';'-separated lists.
        """
        from model.maths.distribution import disjoint_area_labels, overlapping_area_labels

        if not self.area_labels.strip():
            return overlapping_area_labels(num_classes, self.areas)
        if self.area_labels.strip() == "disjoint":
            return disjoint_area_labels(num_classes, self.areas)
        try:
            lists = [[int(v) for v in part.split(",")] for part in self.area_labels.split(";")]
        except ValueError:
            raise ConfigError("area_labels", self.area_labels, "lists like 0,1,2;3,4,5") from None
        if len(lists) != self.areas or any(
            not 0 <= v < num_classes for part in lists for v in part
        ):
            raise ConfigError(
                "area_labels",
                self.area_labels,
                f"{self.areas} ';'-separated lists of labels in [0, {num_classes})",
            )
        return lists

    @property
    def walk_probabilities(self) -> tuple[float, ...]:
        return tuple(float(v) for v in self.walk_q.split(","))

    # --- construction ---------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None, /, **kw: Any) -> Config:
        """Build a validated config from public names (dotted, nested tables or kwargs)."""
        return cls().updated(settings, **kw)

    @classmethod
    def from_toml(
        cls, path: str | Path, overrides: Iterable[str] = (), *, source: str = "--config"
    ) -> Config:
        """Read a TOML file; ``source`` is how errors name the file (``--config``, ...)."""
        data = read_toml(path, source=source)
        return cls.from_settings(data).with_overrides(overrides)

    def with_overrides(self, assignments: Iterable[str]) -> Config:
        """Apply ``name=value`` strings (as typed on the command line)."""
        parsed: dict[str, Any] = {}
        for text in assignments:
            name, sep, raw = text.partition("=")
            if not sep:
                raise ConfigError("--set", text, "name=value")
            parsed[name.strip()] = parse_value(name.strip(), raw.strip())
        return self.updated(parsed)

    def updated(self, settings: Mapping[str, Any] | None = None, /, **kw: Any) -> Config:
        """Return a copy with public settings replaced, resolved, then validated.

        The settings given here and in earlier ``updated`` calls are *explicit*. Every other
        setting is filled, in this order, from the ``preset`` (:mod:`model.presets`), from an
        ``auto:A|B`` dataset (the first one present), and from what the chosen policies and
        mobility models declare (``requires`` / ``defaults`` class attributes). A requirement
        that contradicts an explicit value fails with one line naming that setting.
        ``explicit_settings()`` and ``derived_settings()`` tell which is which.
        """
        flat = {_canonical(n): v for n, v in _flatten(settings or {})}
        flat.update({_canonical(n): v for n, v in _flatten(kw)})
        explicit = {**self.explicit_settings(), **flat}
        stale = {n for n in self.derived_settings() if n not in explicit}
        defaults = Config()
        reset = {n: _get_setting(defaults, n) for n in stale}
        config = self._replaced(reset)._replaced(flat)
        return _resolve(config, explicit).validated()

    def explicit_settings(self) -> dict[str, Any]:
        """Settings given explicitly (``--set``, TOML, keyword arguments), by public name."""
        return dict(getattr(self, "_explicit", {}))

    def derived_settings(self) -> frozenset[str]:
        """Settings filled by the preset or by a policy's / mobility model's declaration."""
        return getattr(self, "_derived", frozenset())

    def setting(self, name: str) -> Any:
        """The value of one public setting by name (``vehicle.mobility`` or ``lr``)."""
        return _get_setting(self, _canonical(name))

    def _replaced(self, flat: Mapping[str, Any]) -> Config:
        """Copy with public settings replaced (coerced, not validated, tracking kept)."""
        top: dict[str, Any] = {}
        per_kind: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            kind, attr = _split_name(name)
            if kind is None:
                top[attr] = _coerce(attr, _field_type(Config, attr), value)
            else:
                per_kind.setdefault(kind, {})[attr] = _coerce(
                    name, _field_type(KindSettings, attr), value
                )
        for kind, changes in per_kind.items():
            top[kind] = replace(getattr(self, kind), **changes)
        out = replace(self, **top)
        object.__setattr__(out, "_explicit", self.explicit_settings())
        object.__setattr__(out, "_derived", self.derived_settings())
        return out

    def validated(self) -> Config:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, KindSettings):
                for kf in fields(value):
                    _run_check(f"{f.name}.{kf.name}", kf, getattr(value, kf.name))
            else:
                _run_check(f.name, f, value)
        self._check_joint()
        return self

    def _check_joint(self) -> None:
        turns = sum(self.turn_probabilities)
        if not math.isclose(turns, 1.0, abs_tol=1e-9):
            raise ConfigError(
                "turn_straight+turn_left+turn_right",
                round(turns, 6),
                "probabilities that sum to 1",
            )
        try:
            walk = self.walk_probabilities
        except ValueError:
            raise ConfigError("walk_q", self.walk_q, "four comma-separated numbers") from None
        if len(walk) != 4 or any(q < 0 for q in walk) or not math.isclose(sum(walk), 1.0):
            raise ConfigError("walk_q", self.walk_q, "four non-negative numbers that sum to 1")
        if self.beta <= 1.0:
            raise ConfigError(
                "beta", self.beta, "a number > 1 (HM faster than LM, de Heredia 2024)"
            )
        if self.n_agents < 1:
            raise ConfigError("vehicles+pedestrians+sensors+uavs", 0, "at least one agent")
        for kind in KINDS:
            name = self.kind(kind).mobility
            fit = mobility_fit(kind, name)
            if fit is not None:
                raise ConfigError(f"{kind}.mobility", name, fit)

    # --- output ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Nested dict of every setting (kinds as tables), ``None`` values left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, KindSettings):
                out[f.name] = {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
            elif value is not None:
                out[f.name] = value
        return out

    def to_toml(self) -> str:
        scalars, tables = [], []
        for key, value in self.to_dict().items():
            if isinstance(value, dict):
                tables.append(f"\n[{key}]")
                tables.extend(f"{k} = {_toml_value(v)}" for k, v in value.items())
            else:
                scalars.append(f"{key} = {_toml_value(value)}")
        return "\n".join(scalars + tables) + "\n"


def settings_table() -> list[tuple[str, str, str]]:
    """Rows (name, default, help) of every public setting, for the README and ``--help``."""
    rows: list[tuple[str, str, str]] = []
    defaults = Config()
    for f in fields(Config):
        value = getattr(defaults, f.name)
        if isinstance(value, KindSettings):
            for kf in fields(KindSettings):
                rows.append(
                    (f"{f.name}.{kf.name}", repr(getattr(value, kf.name)), kf.metadata["help"])
                )
        else:
            rows.append((f.name, repr(value), f.metadata["help"]))
    return rows


def public_names() -> list[str]:
    return [row[0] for row in settings_table()]


def parse_value(name: str, raw: str) -> Any:
    """Parse a command-line value by the setting's type (``inf`` and ``none`` understood)."""
    kind, attr = _split_name(name)
    owner = Config if kind is None else KindSettings
    target = _field_type(owner, attr)
    if raw.lower() in ("none", "null", "") and _is_optional(target):
        return None
    return _coerce(name, target, raw)


# --- resolution: presets, auto datasets, what policies and mobility models declare ------------
def _canonical(name: str) -> str:
    kind, attr = _split_name(name)
    return attr if kind is None else f"{kind}.{attr}"


def _get_setting(config: Config, name: str) -> Any:
    kind, _, attr = name.rpartition(".")
    owner = getattr(config, kind) if kind else config
    return getattr(owner, attr)


def declared_settings(config: Config) -> list[tuple[str, Any, str, bool]]:
    """``(setting, value, why, strict)`` declared by the policies and mobility models in use.

    Each policy class (``model.policies``) and mobility class (``agents.mobility``) may set
    ``requires`` (strict: an explicit contrary value is an error) and ``defaults`` (applied
    only where the user said nothing): dicts from a setting name, where ``{kind}`` stands
    for the agent kind using it, to a value or a function ``f(config, kind)`` (``None`` =
    nothing to declare). Kinds with no agents declare nothing.
    """
    from agents.mobility import MOBILITY_MODELS
    from model.policies import POLICIES

    out: list[tuple[str, Any, str, bool]] = []
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        policy = config.policy_of(kind)
        mobility = config.kind(kind).mobility
        owners = [
            (POLICIES.get(policy), f"{kind} policy {policy}"),
            (MOBILITY_MODELS.get(mobility), f"{kind}.mobility = {mobility}"),
        ]
        for cls, why in owners:
            for strict, attr in ((True, "requires"), (False, "defaults")):
                for name, value in (getattr(cls, attr, None) or {}).items():
                    resolved = value(config, kind) if callable(value) else value
                    if resolved is not None:
                        out.append((name.format(kind=kind), resolved, why, strict))
    return out


def _resolve(config: Config, explicit: Mapping[str, Any]) -> Config:
    """Fill non-explicit settings from the preset, auto datasets and declarations."""
    derived: set[str] = set()
    if config.preset:
        from model.presets import preset_settings

        fill = {n: v for n, v in preset_settings(config.preset).items() if n not in explicit}
        config = config._replaced(fill)
        derived.update(fill)
    if config.dataset.startswith("auto:"):
        from model.presets import resolve_auto_dataset

        config = config._replaced(
            {"dataset": resolve_auto_dataset(config.dataset, config.data_root)}
        )
        if "dataset" not in explicit:
            derived.add("dataset")
    for _ in range(8):  # a declaration may bring a mobility model that declares more
        changed = False
        for name, value, why, strict in declared_settings(config):
            current = _get_setting(config, name)
            if current == value:
                continue
            if name in explicit:
                if strict:
                    raise ConfigError(name, current, f"{value!r} (required by {why})")
                continue
            config = config._replaced({name: value})
            derived.add(name)
            changed = True
        if not changed:
            break
    object.__setattr__(config, "_explicit", dict(explicit))
    object.__setattr__(config, "_derived", frozenset(derived))
    return config


# --- helpers -----------------------------------------------------------------------------
def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, prefix=f"{name}.")
        elif isinstance(value, KindSettings):
            yield from _flatten(dataclasses.asdict(value), prefix=f"{name}.")
        else:
            yield name, value


def _split_name(name: str) -> tuple[str | None, str]:
    """``vehicle.mobility`` and ``vehicle_mobility`` both name a per-kind setting."""
    if "." in name:
        kind, _, attr = name.partition(".")
    else:
        kind, attr = None, name
        for candidate in KINDS:
            if name.startswith(candidate + "_"):
                kind, attr = candidate, name[len(candidate) + 1 :]
                break
    if kind is None:
        if attr not in _FIELD_NAMES or attr in KINDS:
            raise ConfigError(name, "?", "a known setting (see `mobidfl settings`)")
        return None, attr
    if kind not in KINDS or attr not in _KIND_FIELD_NAMES:
        raise ConfigError(name, "?", "a known setting (see `mobidfl settings`)")
    return kind, attr


def _field_type(owner: type, attr: str) -> Any:
    return typing.get_type_hints(owner)[attr]


def _is_optional(target: Any) -> bool:
    return isinstance(target, types.UnionType) and type(None) in typing.get_args(target)


def _coerce(name: str, target: Any, value: Any) -> Any:
    if value is None:
        if _is_optional(target):
            return None
        raise ConfigError(name, value, "a value (this setting cannot be empty)")
    if _is_optional(target):
        target = next(t for t in typing.get_args(target) if t is not type(None))
    try:
        if target is bool:
            if isinstance(value, str):
                lowered = value.lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return lowered in ("true", "1", "yes")
            if isinstance(value, bool | int):
                return bool(value)
            raise ValueError(value)
        if target is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            if not isinstance(value, int | float | str) and not hasattr(value, "__index__"):
                raise TypeError(value)
            return int(value)
        if target is float:
            numeric = isinstance(value, str) or hasattr(value, "__float__")
            if isinstance(value, bool) or not numeric:
                raise TypeError(value)
            return float(value)
        if target is str:
            if isinstance(value, os.PathLike):
                return os.fspath(value)
            if not isinstance(value, str):
                raise TypeError(value)
            return value
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(name, value, f"a value of type {target.__name__}") from None
    raise ConfigError(name, value, "a supported value")


INF_ALLOWED = frozenset({"rm_cells", "psfl_walker_speed"})  # inf = move in one step
"""Float settings where ``inf`` means something (no limit); every other float must be finite."""

SEED_MAX = 2**63 - 1
"""Seeds are stored as int64 (manifests, Parquet) and seed numpy and torch."""


def seed_range(value: int) -> str | None:
    return None if 0 <= value <= SEED_MAX else f"an integer in [0, {SEED_MAX}] (2**63 - 1)"


def existing_folder(value: str | None) -> str | None:
    if value is None or Path(value).expanduser().is_dir():
        return None
    return "an existing folder (or empty for none)"


_EXTRA_CHECKS: dict[str, Check] = {"seed": seed_range, "data_root": existing_folder}
"""Checks of settings declared without one (kept here so field declarations stay as they are)."""


def read_toml(path: str | Path, *, source: str) -> dict[str, Any]:
    """Parse a TOML file; any unreadable file is one :class:`ConfigError` naming ``source``."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(source, str(path), "an existing TOML file") from None
    except IsADirectoryError:
        raise ConfigError(source, str(path), "a TOML file (this is a folder)") from None
    except UnicodeDecodeError:
        raise ConfigError(source, str(path), "a UTF-8 TOML text file (this is binary)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, str(path), f"valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(source, str(path), f"a readable TOML file ({exc.strerror})") from None


def mobility_fit(kind: str, name: str) -> str | None:
    """``None`` when mobility ``name`` declares that it fits ``kind``, else what is allowed."""
    from agents.mobility import MOBILITY_MODELS

    model = MOBILITY_MODELS.get(name)
    if model is None or kind in model.kinds:
        return None
    fits = sorted(n for n, m in MOBILITY_MODELS.items() if kind in m.kinds)
    return f"a mobility model for {kind}s: one of {', '.join(fits)}"


def _run_check(name: str, f: dataclasses.Field, value: Any) -> None:
    if isinstance(value, float):
        if math.isnan(value):
            raise ConfigError(name, value, "a number (not NaN)")
        if math.isinf(value) and f.name not in INF_ALLOWED:
            raise ConfigError(name, value, "a finite number")
    check = f.metadata.get("check") or _EXTRA_CHECKS.get(name)
    if check is None:
        return
    allowed = check(value)
    if allowed is not None:
        raise ConfigError(name, value, allowed)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


_FIELD_NAMES = {f.name for f in fields(Config)}
_KIND_FIELD_NAMES = {f.name for f in fields(KindSettings)}
