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
import math
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


def _registered(registry_name: str) -> Check:
    """Check a name against a registry resolved lazily (registries import this module)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        names = _registry_names(registry_name)
        return None if value in names else "one of " + ", ".join(sorted(names))

    return check


def _registry_names(registry_name: str) -> Iterable[str]:
    if registry_name == "mobility":
        from agents.mobility import MOBILITY_MODELS

        return MOBILITY_MODELS.keys()
    if registry_name == "policy":
        from model.policies import POLICIES

        return POLICIES.keys()
    if registry_name == "partition":
        from model.learning.partition import PARTITIONS

        return PARTITIONS
    if registry_name == "dataset":
        from model.learning.data import DATASETS

        return DATASETS
    if registry_name == "net":
        from model.learning.nets import NETS

        return NETS.keys()
    raise KeyError(registry_name)


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


def _kind_default(mobility: str, speed: float) -> Any:
    return field(
        default_factory=lambda: KindSettings(mobility=mobility, speed=speed),
        metadata={"help": "per-kind settings", "check": None},
    )


@dataclass(frozen=True, kw_only=True)
class Config:
    """All settings of one run. Field order is the README table's order."""

    # --- world ---------------------------------------------------------------------
    map: str = _setting(
        "nyc_uws",
        "street map: nyc_uws (bundled), helsinki_drive, helsinki_walk, grid:RxC[:SPACING], "
        "a .graphml/.osm/.osm.bz2/.osm.pbf file, or place:NAME / bbox:W,S,E,N / "
        "point:LAT,LON,DIST_M (online, cached)",
    )
    map_cache: str = _setting("~/.cache/mobidfl/maps", "folder where online maps are cached")
    vehicles: int = _setting(20, "number of vehicles", non_negative)
    pedestrians: int = _setting(0, "number of pedestrians", non_negative)
    sensors: int = _setting(0, "number of static sensors (one per grid cell)", non_negative)
    uavs: int = _setting(0, "number of UAVs (move between grid cells)", non_negative)
    steps: int = _setting(20, "number of steps (global epochs)", at_least_one)
    step_s: float = _setting(120.0, "seconds per step (seed 003: 120 s epochs)", positive)
    seed: int = _setting(0, "random seed (mobility, data, models)")
    radius_m: float = _setting(100.0, "radio range R in metres (seed 003: 100 m)", positive)
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
        0.0, "random_walk: proportion p of high-mobility agents (seed 000)", unit_interval
    )
    s_max: float = _setting(2.0, "random_walk: low-mobility speeds U(0, s_max) m/s", positive)
    beta: float = _setting(1.75, "random_walk: high-mobility speeds U(beta s_max, 2 beta s_max)")
    rm_cells: float = _setting(
        1.0, "random_grid/dam/dcm: max move per step in cells (inf allowed)", positive
    )
    area_free: int = _setting(
        0, "area_restricted: members free to leave their home area (seed 003)", non_negative
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
        "area partition: label lists per area, e.g. 9,0,1,2;3,4,5,6;6,7,8,9 (empty = even split)",
    )
    area_within: str = _setting(
        "iid", "area partition: how an area's samples are split", one_of("iid", "shards")
    )
    model: str = _setting("mlp", "neural network", _registered("net"))
    local_steps: int = _setting(5, "K local SGD steps per step", at_least_one)
    batch_size: int = _setting(16, "batch size B", at_least_one)
    lr: float = _setting(0.05, "learning rate", positive)
    momentum: float = _setting(0.0, "SGD momentum", unit_interval)
    weight_decay: float = _setting(0.0, "SGD weight decay", non_negative)
    prox_rho: float = _setting(0.0, "proximal term rho (seed 003, Alg. 1)", non_negative)
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
    policy: str = _setting("dpsgd", "exchange policy for all kinds", _registered("policy"))
    mobility_alpha: float = _setting(
        0.0, "mobility_aware: alpha in W_ij = 1/N + alpha (X_ij - 1/N)", unit_interval
    )
    cache_size: int = _setting(10, "cached_lru: cache size C_max (seed 003)", at_least_one)
    tau_max: int = _setting(5, "cached_lru: staleness tolerance tau_max in steps", at_least_one)
    cache_groups: str = _setting(
        "", "cached_group_lru: per-area cache limits, e.g. 4,3,3 (empty = even split)"
    )
    dam_distance: str = _setting(
        "l2", "dam/dcm: distribution distance (seed 001 eq. 5: l2)", one_of("l2", "tv")
    )
    psfl_sigma: float = _setting(
        40.0, "psfl: federation bound sigma on accumulated dissimilarity", positive
    )
    psfl_walker: bool = _setting(False, "psfl: one sensor visits every area in turn (seed 004)")
    psfl_walker_stay: int = _setting(
        5, "psfl: steps the walker stays in each area", at_least_one
    )
    servers: int = _setting(3, "mofel: number of edge servers (one territory each)", at_least_one)
    train_time_s: float = _setting(
        60.0, "mofel: local training time of a client in seconds", positive
    )
    required_accuracy: float = _setting(
        0.9, "mofel: a server requests training while below this accuracy", unit_interval
    )

    # ------------------------------------------------------------------------------
    def count(self, kind: str) -> int:
        return int(getattr(self, COUNT_SETTING[kind]))

    def kind(self, kind: str) -> KindSettings:
        return getattr(self, kind)

    def policy_of(self, kind: str) -> str:
        return self.kind(kind).policy or self.policy

    def partition_of(self, kind: str) -> str:
        return self.kind(kind).partition or self.partition

    @property
    def n_agents(self) -> int:
        return sum(self.count(k) for k in KINDS)

    @property
    def turn_probabilities(self) -> tuple[float, float, float]:
        return (self.turn_straight, self.turn_left, self.turn_right)

    def area_label_lists(self, num_classes: int) -> list[list[int]]:
        """Labels of each area: the ``area_labels`` setting or an even split of the classes."""
        if not self.area_labels.strip():
            step = num_classes / self.areas
            blocks = [
                list(range(round(a * step), round((a + 1) * step))) for a in range(self.areas)
            ]
            if any(not block for block in blocks):
                raise ConfigError(
                    "areas", self.areas, f"at most {num_classes} areas (one label each)"
                )
            return blocks
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
    def from_toml(cls, path: str | Path, overrides: Iterable[str] = ()) -> Config:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError("--config", str(path), "an existing TOML file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("--config", str(path), f"valid TOML ({exc})") from None
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
        """Return a copy with public settings replaced, then validated."""
        flat = dict(_flatten(settings or {}))
        flat.update(_flatten(kw))
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
        return replace(self, **top).validated()

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
            raise ConfigError("beta", self.beta, "a number > 1 (HM faster than LM, seed 000)")
        if self.n_agents < 1:
            raise ConfigError("vehicles+pedestrians+sensors+uavs", 0, "at least one agent")

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
            return int(value)
        if target is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if target is str:
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, f"a value of type {target.__name__}") from None
    raise ConfigError(name, value, "a supported value")


def _run_check(name: str, f: dataclasses.Field, value: Any) -> None:
    check = f.metadata.get("check")
    if check is None:
        return
    if isinstance(value, float) and math.isnan(value):
        raise ConfigError(name, value, "a number (not NaN)")
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
