"""The one typed, validated run configuration.

Every public setting is a dataclass field whose metadata carries its help text and its
check (:func:`model.settings.setting`). The same names work as ``--set name=value`` on the
command line, as keys in a TOML file, as keyword arguments of
:class:`model.world.MobiDFLModel` (so ``mesa.batch_run`` can sweep them) and as rows of the
settings reference (docs/reference/settings.md). Per-kind settings are dotted
(``vehicle.mobility``) and live in a nested
:class:`KindSettings`. Each policy and mobility model owns its settings
(:class:`model.settings.PluginSettings`, e.g. ``psfl.sigma``); the registries
(:mod:`model.plugins`) say which exist, and this class composes and validates them. Their
old flat names (``psfl_sigma``) stay aliases.

Ground floor: this module imports nothing above it; plug-in names are checked against the
registry instances, which load the plug-in modules themselves (:mod:`model.registry`).

A bad value fails at once with :class:`model.errors.ConfigError`, whose one-line message
names the setting (as it was written), the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import tomllib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from model.errors import ConfigError
from model.inert import warn_inert
from model.plugins import DATASETS, LINKS, MOBILITY_MODELS, NETS, PARTITIONS, POLICIES
from model.registry import Registry
from model.settings import (
    Check,
    PluginSettings,
    at_least_one,
    check_value,
    non_negative,
    one_of,
    positive,
)
from model.settings import setting as _setting

__all__ = [
    "COUNT_SETTING",
    "KINDS",
    "KIND_POLICY",
    "SEED_MAX",
    "Config",
    "KindSettings",
    "canonical_name",
    "check_setting",
    "PluginValues",
    "declared_settings",
    "policy_requirements",
    "mobility_fit",
    "parse_value",
    "plugin_namespaces",
    "public_names",
    "read_toml",
    "settings_table",
]

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


CONTACT_OUTPUTS: tuple[str, ...] = ("csv", "parquet", "one")
"""Formats of ``contacts_out``: ``contacts.csv``, ``contacts.parquet`` (the contact table,
:data:`model.contacts.CONTACT_COLUMNS`) and ``contacts_one.txt`` (The ONE's connection
events, :func:`model.contacts.one_connection_events`)."""


def _contact_outputs(value: str) -> str | None:
    """``contacts_out``: auto, none, or a comma list of :data:`CONTACT_OUTPUTS`."""
    parts = [v.strip() for v in value.split(",")]
    if value.strip() in ("auto", "none") or all(p in CONTACT_OUTPUTS for p in parts):
        return None
    return "auto, none, or a comma list of " + ", ".join(CONTACT_OUTPUTS)


def _registered(registry: Registry[Any], *, allow_auto: bool = False) -> Check:
    """Check a name against a plug-in registry (loaded on first use)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        names = registry.names()
        if allow_auto:
            names = ["auto", *names]
        return None if value in names else "one of " + ", ".join(names)

    return check


def _dataset_check(value: str | None) -> str | None:
    """A registered data set, or ``auto:A|B|...`` naming registered ones (the first present
    is taken when the config is resolved)."""
    plain = _registered(DATASETS)
    if value is not None and value.startswith("auto:"):
        bad = [name for name in value[len("auto:") :].split("|") if plain(name) is not None]
        if not value[len("auto:") :] or bad:
            return "auto:A|B with each of " + ", ".join(DATASETS.names())
        return None
    return plain(value)


@dataclass(frozen=True, kw_only=True)
class KindSettings:
    """Settings of one agent kind (public names ``<kind>.<field>``)."""

    mobility: str = _setting("static", "mobility model", _registered(MOBILITY_MODELS))
    speed: float = _setting(0.0, "speed in m/s (random_walk draws speeds instead)", non_negative)
    policy: str | None = _setting(
        None, "exchange policy; empty = the global `policy`", _registered(POLICIES)
    )
    partition: str | None = _setting(
        None, "data partition; empty = the global `partition`", _registered(PARTITIONS)
    )


def _kind_default(mobility: str, speed: float) -> Any:
    return field(
        default_factory=lambda: KindSettings(mobility=mobility, speed=speed),
        metadata={"help": "per-kind settings", "check": None},
    )


@dataclass(frozen=True, kw_only=True)
class Config:
    """All settings of one run. Field order is the settings reference's order."""

    # --- world ---------------------------------------------------------------------
    preset: str = _setting(
        "",
        "paper preset whose values fill every setting not given explicitly "
        "(`mobidfl presets`; empty = none)",
    )
    map: str = _setting(
        "manhattan_grid",
        "street map: helsinki_drive, helsinki_walk, nyc_uws (bundled real OSM), "
        "manhattan_grid (synthetic, Manhattan-sized; manhattan_grid_twoway: every street "
        "two-way), manhattan_cdfl (Cached-DFL's own Manhattan roads), grid:RxC[:SPACING], "
        "a .graphml/.osm/"
        ".osm.bz2/.osm.pbf/.csv/.gpkg/.geojson file, a SUMO .net.xml[.gz] network, or "
        "place:NAME / bbox:W,S,E,N / "
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
    record_every: int = _setting(1, "write agents.parquet rows every N steps", at_least_one)
    contacts_out: str = _setting(
        "auto",
        "contact table files written with a run: csv (contacts.csv), parquet "
        "(contacts.parquet), one (The ONE's connection events, contacts_one.txt), a comma "
        "list of them, none, or auto (csv,one when a link model is set, else none)",
        _contact_outputs,
    )
    vehicle: KindSettings = _kind_default("manhattan", 13.89)
    pedestrian: KindSettings = _kind_default("manhattan", 1.4)
    sensor: KindSettings = _kind_default("static", 0.0)
    uav: KindSettings = _kind_default("random_grid", 10.0)

    # --- learning ------------------------------------------------------------------
    learning: bool = _setting(True, "train and exchange models (false = mobility only)")
    dataset: str = _setting("auto:fashion_mnist|mnist5k", "dataset", _dataset_check)
    data_root: str | None = _setting(None, "folder with torchvision-layout datasets")
    partition: str = _setting("shards", "data partition", _registered(PARTITIONS))
    dirichlet_alpha: float = _setting(0.5, "Dirichlet concentration alpha", positive)
    area_labels: str = _setting(
        "",
        "area partition: label lists per area, e.g. 9,0,1,2;3,4,5,6;6,7,8,9; empty = overlapping "
        "windows of >= 3 labels; disjoint = contiguous disjoint blocks (PSFL's code)",
    )
    area_within: str = _setting(
        "iid", "area partition: how an area's samples are split", one_of("iid", "shards")
    )
    model: str = _setting("mlp", "neural network", _registered(NETS))
    local_steps: int = _setting(5, "K local SGD steps per step", at_least_one)
    batch_size: int = _setting(
        16, "batch size B (per agent min(B, |D_i|); 0 = full batch, Reza et al.)", non_negative
    )
    lr: float = _setting(0.05, "learning rate", positive)
    momentum: float = _setting(
        0.0, "SGD momentum", lambda v: None if 0.0 <= v < 1.0 else "a number in [0, 1)"
    )
    weight_decay: float = _setting(0.0, "SGD weight decay", non_negative)
    prox_rho: float = _setting(0.0, "proximal term rho (Cached-DFL, Alg. 1)", non_negative)
    # --- optimiser and schedule (paper options)
    optimizer: str = _setting(
        "sgd", "local optimiser: sgd, or adam (PSFL: Adam)", one_of("sgd", "adam")
    )
    optimizer_state: str = _setting(
        "keep",
        "momentum / Adam state across rounds: keep (one optimiser per agent for the whole run) "
        "or reset (zeroed before each round's local steps, as FL code that builds the "
        "optimiser per round)",
        one_of("keep", "reset"),
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
    precision: str = _setting(
        "fp32",
        "arithmetic of training and testing: fp32, or bf16 (autocast to bfloat16 on the CPU "
        "(fast with AVX512-BF16 / AMX) or the GPU; parameters and updates stay fp32)",
        one_of("fp32", "bf16"),
    )
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
        _registered(POLICIES, allow_auto=True),
    )
    plugins: PluginValues = field(
        default_factory=lambda: PluginValues.defaults(),
        metadata={"help": "the plug-ins' own settings, by namespace", "check": None},
    )
    """Each policy's and mobility model's own settings (``psfl.sigma``): see
    :func:`plugin_namespaces`; read one with :meth:`plugin_settings`."""

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

    def plugin_settings(self, namespace: str) -> Any:
        """The settings instance of one plug-in namespace (what :meth:`PluginSettings.of`
        hands a policy or mobility model); defaults for one registered after this config."""
        if namespace in self.plugins:
            return self.plugins[namespace]
        return self._registered_plugins()[namespace]

    @property
    def n_agents(self) -> int:
        return sum(self.count(k) for k in KINDS)

    def __getattr__(self, name: str) -> Any:
        """A namespace (``config.psfl.sigma``) or an old flat name (``config.psfl_sigma``)."""
        plugins = self.__dict__.get("plugins")
        if name.startswith("_") or plugins is None:
            raise AttributeError(name)
        if name in plugins:
            return plugins[name]
        alias = _aliases().get(name)
        if alias is not None and alias[0] in plugins:
            return getattr(plugins[alias[0]], alias[1])
        raise AttributeError(f"'Config' object has no attribute {name!r}")

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
        return self.updated(parse_assignments(assignments))

    def updated(self, settings: Mapping[str, Any] | None = None, /, **kw: Any) -> Config:
        """Return a copy with public settings replaced, resolved, then validated.

        The settings given here and in earlier ``updated`` calls are *explicit*. Every other
        setting is filled, in this order, from the ``preset`` (:mod:`model.presets`), from an
        ``auto:A|B`` dataset (the first one present), and from what the chosen mobility models
        declare (``requires`` / ``defaults`` class attributes). A policy fills nothing (it
        never changes the world): what it ``requires`` is checked, and a world without it is
        refused with one line naming the setting. ``explicit_settings()``,
        ``derived_settings()`` and ``setting_origins()`` tell which is which.
        """
        given = [*_flatten(settings or {}), *_flatten(kw)]
        check_one_name_each(given)
        flat = {_canonical(n): v for n, v in given}
        spelled = {**self._spelled(), **{_canonical(n): n for n, _ in given}}
        explicit = {**self.explicit_settings(), **flat}
        stale = {n for n in self.derived_settings() if n not in explicit}
        defaults = Config()
        reset = {n: _get_setting(defaults, n) for n in stale}
        config = self._replaced(reset)._replaced(flat)
        object.__setattr__(config, "_spelling", spelled)
        return warn_inert(_resolve(config, explicit).validated())  # model/inert.py

    def explicit_settings(self) -> dict[str, Any]:
        """Settings given explicitly (``--set``, TOML, keyword arguments), by public name."""
        return dict(self.__dict__.get("_explicit", {}))

    def derived_settings(self) -> frozenset[str]:
        """Settings filled by the preset or a mobility model's declaration."""
        return self.__dict__.get("_derived", frozenset())

    def setting_origins(self) -> dict[str, str]:
        """Every setting not at its default -> where its value came from: ``user`` (given
        explicitly), ``preset NAME`` (an ``auto:`` dataset resolved to the first one present)
        or the mobility model that declared it (``uav.mobility = NAME``), in the settings
        reference's order. Never a policy: a policy never changes the world.

        WHY: a run's first line names what differs from the defaults and who chose it, so a
        changed world is never silent (a policy never changes it, see
        :func:`policy_requirements`).
        """
        origin = dict(self.__dict__.get("_origin", {}))
        explicit = self.explicit_settings()
        defaults = Config()
        out: dict[str, str] = {}
        for name in public_names():
            if _get_setting(self, name) == _get_setting(defaults, name):
                continue
            out[name] = SOURCE_USER if name in explicit else origin.get(name, SOURCE_USER)
        return out

    def _spelled(self) -> dict[str, str]:
        """Public name -> the name the user wrote (an old flat name stays in messages)."""
        return dict(self.__dict__.get("_spelling", {}))

    def display_name(self, name: str) -> str:
        """How messages name setting ``name``: as the user wrote it, or, when the user
        wrote any setting of its namespace by its old flat name, that old name too."""
        spelled = self._spelled()
        if name in spelled:
            return spelled[name]
        owner, _, attr = name.rpartition(".")
        if owner in self.plugins and any(
            n.startswith(owner + ".") and s != n for n, s in spelled.items()
        ):
            alias = _field_alias(type(self.plugins[owner]), attr)
            return alias or name
        return name

    def setting(self, name: str) -> Any:
        """The value of one public setting by name (``vehicle.mobility``, ``psfl.sigma``,
        ``lr`` or an old flat name such as ``psfl_sigma``)."""
        return _get_setting(self, _canonical(name))

    def _replaced(self, flat: Mapping[str, Any]) -> Config:
        """Copy with public settings replaced (coerced, not validated, tracking kept)."""
        top: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            owner, attr = _split_name(name)
            if owner is None:
                top[attr] = _coerce(attr, _field_type(Config, attr), value)
            else:
                owner_type = KindSettings if owner in KINDS else plugin_namespaces()[owner]
                nested.setdefault(owner, {})[attr] = _coerce(
                    name, _field_type(owner_type, attr), value
                )
        plugins = self._registered_plugins()
        for owner, changes in nested.items():
            if owner in KINDS:
                top[owner] = replace(getattr(self, owner), **changes)
            else:
                plugins[owner] = replace(plugins[owner], **changes)
        if any(o not in KINDS for o in nested) or list(plugins) != list(self.plugins):
            top["plugins"] = PluginValues(tuple(plugins.items()))
        out = replace(self, **top)
        for tracked in ("_explicit", "_derived", "_origin", "_spelling"):
            if tracked in self.__dict__:
                object.__setattr__(out, tracked, self.__dict__[tracked])
        return out

    def _registered_plugins(self) -> dict[str, Any]:
        """This config's plug-in settings for the namespaces registered now: a plug-in
        registered later gets its defaults, an unregistered one is dropped."""
        held = dict(self.plugins.items())
        return {
            n: held[n] if type(held.get(n)) is own else own()
            for n, own in plugin_namespaces().items()
        }

    def validated(self) -> Config:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, KindSettings):
                for kf in fields(value):
                    shown = self.display_name(f"{f.name}.{kf.name}")
                    _run_check(shown, kf, getattr(value, kf.name))
            elif not isinstance(value, PluginValues):
                _run_check(self.display_name(f.name), f, value)
        for namespace, own in self.plugins.items():
            for pf in fields(own):
                shown = self.display_name(f"{namespace}.{pf.name}")
                check_value(shown, pf, getattr(own, pf.name))
            problem = own.joint_check()
            if problem is not None:
                names, value, allowed = problem
                shown = "+".join(self.display_name(f"{namespace}.{n}") for n in names)
                raise ConfigError(shown, value, allowed)
        self._check_joint()
        return self

    def _check_joint(self) -> None:
        if self.n_agents < 1:
            raise ConfigError("vehicles+pedestrians+sensors+uavs", 0, "at least one agent")
        self._check_link()
        cores = usable_cores()
        on_this_machine = self.worker_backend == "processes" or self.ray_address is None
        if on_this_machine and self.workers > cores:
            raise ConfigError(
                self.display_name("workers"), self.workers,
                f"at most the {cores} cores this process may use (os.sched_getaffinity; "
                "0 = auto); more workers only on a Ray cluster (ray_address)",
            )
        for kind in KINDS:
            name = self.kind(kind).mobility
            fit = mobility_fit(kind, name)
            if fit is not None:
                raise ConfigError(f"{kind}.mobility", name, fit)

    def _check_link(self) -> None:
        """A link other than ``ideal`` needs contact times and policies that send over it
        (issue 26): a policy that ignores the link would make it a silent no-op."""
        if "link" not in self.plugins or self.plugins["link"].model == "ideal":
            return
        shown, model = self.display_name("link.model"), self.plugins["link"].model
        if self.contact != "during":
            raise ConfigError(
                self.display_name("contact"), self.contact,
                f"during (link {model} needs when each contact starts and ends)",
            )
        passes = self.plugins["cached"].passes if "cached" in self.plugins else 1
        if passes != 1:
            raise ConfigError(
                self.display_name("cached.passes"), passes,
                f"1 with link {model} (replaying a step's meetings is the authors' Table 2 "
                "statistic, not bytes a radio sends again)",
            )
        for kind in KINDS:
            if self.count(kind) == 0:
                continue
            policy = self.policy_of(kind)
            if not getattr(POLICIES[policy], "honours_link", False):
                honour = sorted(n for n, c in POLICIES.items() if getattr(c, "honours_link", False))
                raise ConfigError(
                    shown, model,
                    f"ideal, because the {kind} policy {policy} ignores the link (policies "
                    f"that honour it: {', '.join(honour)})",
                )

        policies = [self.policy_of(k) for k in KINDS if self.count(k) > 0]
        if self.plugins["link"].resume and policies and not any(
            getattr(POLICIES[p], "resumes_transfers", False) for p in policies
        ):  # a silent no-op otherwise (issue 26): resume is for ordered message lists
            resumers = sorted(
                n for n, c in POLICIES.items() if getattr(c, "resumes_transfers", False)
            )
            raise ConfigError(
                self.display_name("link.resume"), True,
                f"false, because no policy of this world resumes a cut message ({policies[0]} "
                f"sends whole models each contact; policies that resume: {', '.join(resumers)})",
            )

    # --- output ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Nested dict of every setting (kinds and plug-in namespaces as tables), ``None``
        values left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, PluginValues):
                for namespace, own in value.items():
                    out[namespace] = {
                        k: v for k, v in dataclasses.asdict(own).items() if v is not None
                    }
            elif isinstance(value, KindSettings):
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


@dataclass(frozen=True)
class PluginValues:
    """The plug-ins' settings instances by namespace: a frozen, hashable, read-only mapping
    (so :class:`Config` stays comparable and hashable)."""

    entries: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def defaults(cls) -> PluginValues:
        """Every registered namespace at its defaults."""
        return cls(tuple((n, settings()) for n, settings in plugin_namespaces().items()))

    def __getitem__(self, namespace: str) -> Any:
        for name, own in self.entries:
            if name == namespace:
                return own
        raise KeyError(namespace)

    def __contains__(self, namespace: object) -> bool:
        return any(name == namespace for name, _ in self.entries)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.entries)

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self.entries)


def plugin_namespaces() -> dict[str, type[PluginSettings]]:
    """Namespace -> settings class declared by the registered policies and mobility models
    (``settings_class``), sorted by namespace (the settings reference's order)."""
    found: dict[str, type[PluginSettings]] = {}
    for registry in (POLICIES, MOBILITY_MODELS, LINKS):
        for name, plugin in registry.items():
            own = getattr(plugin, "settings_class", None)
            if own is None:
                continue
            if own.namespace in _FIELD_NAMES or not own.namespace.isidentifier():
                raise ConfigError(
                    f"{registry.kind} {name}.settings_class.namespace", own.namespace,
                    "an identifier that is not a setting or a kind",
                )
            held = found.setdefault(own.namespace, own)
            if held is not own:
                raise ConfigError(
                    f"{registry.kind} {name}.settings_class", own.__qualname__,
                    f"{held.__qualname__}, the class of namespace {own.namespace!r}",
                )
    return dict(sorted(found.items()))


def _aliases() -> dict[str, tuple[str, str]]:
    """Old flat name -> (namespace, field) of every plug-in setting that declares one."""
    out: dict[str, tuple[str, str]] = {}
    for namespace, own in plugin_namespaces().items():
        for f in fields(own):  # type: ignore[arg-type]
            alias = f.metadata.get("alias")
            if alias:
                if alias in out or alias in _FIELD_NAMES:
                    raise ConfigError(f"{namespace}.{f.name}", alias, "an alias no other uses")
                out[alias] = (namespace, f.name)
    return out


def _field_alias(owner: type, attr: str) -> str | None:
    return next((f.metadata.get("alias") for f in fields(owner) if f.name == attr), None)


def settings_table() -> list[tuple[str, str, str]]:
    """Rows (name, default, help) of every public setting, for ``--help`` and the settings
    reference (docs/reference/settings.md)."""
    rows: list[tuple[str, str, str]] = []
    defaults = Config()
    for f in fields(Config):
        value = getattr(defaults, f.name)
        if isinstance(value, PluginValues):
            for namespace, own in value.items():
                for pf in fields(own):
                    alias = pf.metadata.get("alias")
                    note = f" (old name `{alias}`)" if alias else ""
                    rows.append(
                        (f"{namespace}.{pf.name}", repr(getattr(own, pf.name)),
                         pf.metadata["help"] + note)
                    )
        elif isinstance(value, KindSettings):
            for kf in fields(KindSettings):
                rows.append(
                    (f"{f.name}.{kf.name}", repr(getattr(value, kf.name)), kf.metadata["help"])
                )
        else:
            rows.append((f.name, repr(value), f.metadata["help"]))
    return rows


def public_names() -> list[str]:
    return [row[0] for row in settings_table()]


def check_one_name_each(given: Iterable[tuple[str, Any]]) -> None:
    """Refuse one setting given under two names at once (``cache_size`` and ``cached.size``).

    WHY: an old flat name and its new dotted name (or ``vehicle_speed`` and
    ``vehicle.speed``) in the same file or command line would silently keep one of them.
    """
    seen: dict[str, tuple[str, Any]] = {}
    for name, value in given:
        canonical = _canonical(name)
        first = seen.setdefault(canonical, (name, value))
        if first[0] != name:
            raise ConfigError(
                f"{first[0]}+{name}",
                (first[1], value),
                f"one name per setting: '{first[0]}' and '{name}' are the same setting "
                f"'{canonical}'; keep one",
            )


def parse_assignments(assignments: Iterable[str]) -> dict[str, Any]:
    """``name=value`` strings (``--set``) as typed values, by the name the user wrote."""
    parsed: dict[str, Any] = {}
    for text in assignments:
        name, sep, raw = text.partition("=")
        if not sep:
            raise ConfigError("--set", text, "name=value")
        parsed[name.strip()] = parse_value(name.strip(), raw.strip())
    check_one_name_each(parsed.items())
    return parsed


def _owner_type(owner: str | None) -> type:
    """The settings class a (split) setting name belongs to: Config, a kind, or a plug-in's."""
    if owner is None:
        return Config
    if owner in KINDS:
        return KindSettings
    return plugin_namespaces()[owner]


def parse_value(name: str, raw: str) -> Any:
    """Parse a command-line value by the setting's type (``inf`` and ``none`` understood)."""
    owner, attr = _split_name(name)
    target = _field_type(_owner_type(owner), attr)
    if raw.lower() in ("none", "null", "") and _is_optional(target):
        return None
    return _coerce(name, target, raw)


def check_setting(name: str, value: Any) -> None:
    """Check ``value`` by setting ``name``'s own declared check, the one
    :meth:`Config.validated` runs: code that takes a setting's value as an argument (the
    learning engine) checks it here, so each rule is written once."""
    owner, attr = _split_name(name)
    declared = next(f for f in fields(_owner_type(owner)) if f.name == attr)
    _run_check(name, declared, value)


def canonical_name(name: str) -> str:
    """The public name of setting ``name`` (``psfl_sigma`` -> ``psfl.sigma``,
    ``vehicle_mobility`` -> ``vehicle.mobility``); unknown names raise :class:`ConfigError`."""
    return _canonical(name)


# --- resolution: presets, auto datasets, what policies and mobility models declare ------------
def _canonical(name: str) -> str:
    owner, attr = _split_name(name)
    return attr if owner is None else f"{owner}.{attr}"


def _get_setting(config: Config, name: str) -> Any:
    owner, _, attr = name.rpartition(".")
    if not owner:
        return getattr(config, attr)
    holder = getattr(config, owner) if owner in KINDS else config.plugins[owner]
    return getattr(holder, attr)


def declared_settings(config: Config) -> list[tuple[str, Any, str, bool]]:
    """``(setting, value, why, strict)`` declared by the mobility models in use, then the
    requirements of the policies in use (``strict``, never applied).

    A mobility model (``agents.mobility``) is part of the world and may set ``requires``
    (strict: an explicit contrary value is an error) and ``defaults`` (applied only where
    the user said nothing). A policy (``model.policies``) may only set ``requires``: what it
    cannot run without, which :func:`_resolve` checks but never applies, because a policy
    never changes the world (swapping it leaves map, mobility, radius, data and model as they
    were; what a paper pairs with its system lives in that paper's preset). Keys are setting
    names (namespaced or old flat names), ``{kind}`` standing for the agent kind; values are a
    value or a function ``f(config, kind)`` (``None`` = nothing to declare). Kinds with no
    agents declare nothing.
    """
    return [*_mobility_declarations(config), *(
        (name, value, why, True) for name, value, why in policy_requirements(config)
    )]


def _mobility_declarations(config: Config) -> list[tuple[str, Any, str, bool]]:
    out: list[tuple[str, Any, str, bool]] = []
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        mobility = config.kind(kind).mobility
        cls = MOBILITY_MODELS.get(mobility)
        for strict, attr in ((True, "requires"), (False, "defaults")):
            for name, value in (getattr(cls, attr, None) or {}).items():
                resolved = value(config, kind) if callable(value) else value
                if resolved is not None:
                    why = f"{kind}.mobility = {mobility}"
                    out.append((_canonical(name.format(kind=kind)), resolved, why, strict))
    return out


def policy_requirements(config: Config) -> list[tuple[str, Any, str]]:
    """``(setting, value, why)``: what the policies in use cannot run without (their
    ``requires``). A policy class that declares ``defaults`` is refused: a policy never
    changes the world, so the settings its paper pairs with it belong in that paper's
    preset (``model/presets``)."""
    out: list[tuple[str, Any, str]] = []
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        policy = config.policy_of(kind)
        cls = POLICIES.get(policy)
        if getattr(cls, "defaults", None):
            raise ConfigError(
                f"policy {policy}.defaults", dict(cls.defaults),  # type: ignore[union-attr]
                "none: a policy never changes the world (put what its paper pairs with it "
                "in that paper's preset; keep in `requires` only what it cannot run without)",
            )
        for name, value in (getattr(cls, "requires", None) or {}).items():
            resolved = value(config, kind) if callable(value) else value
            if resolved is not None:
                why = f"the {kind} policy {policy}"
                out.append((_canonical(name.format(kind=kind)), resolved, why))
    return out


SOURCE_USER = "user"
"""Origin of an explicit setting (``--set``, a TOML file, a keyword argument)."""


def _resolve(config: Config, explicit: Mapping[str, Any]) -> Config:
    """Fill non-explicit settings from the preset, auto datasets and mobility declarations;
    then check what the policies require (never filled: a policy never changes the world)."""
    origin: dict[str, str] = {}
    if config.preset:
        from model.presets import preset_settings

        preset = {_canonical(n): v for n, v in preset_settings(config.preset).items()}
        fill = {n: v for n, v in preset.items() if n not in explicit}
        config = config._replaced(fill)
        origin.update(dict.fromkeys(fill, f"preset {config.preset}"))
    if config.dataset.startswith("auto:"):
        from model.presets import resolve_auto_dataset

        choice = config.dataset
        config = config._replaced({"dataset": resolve_auto_dataset(choice, config.data_root)})
        if "dataset" not in explicit:
            origin["dataset"] = f"default {choice} (the first one installed)"
    for _ in range(8):  # a declaration may bring a mobility model that declares more
        changed = False
        for name, value, why, strict in _mobility_declarations(config):
            current = _get_setting(config, name)
            if current == value:
                continue
            if name in explicit:
                if strict:
                    raise ConfigError(
                        config.display_name(name), current, f"{value!r} (required by {why})"
                    )
                continue
            config = config._replaced({name: value})
            origin[name] = why
            changed = True
        if not changed:
            break
    for name, value, why in policy_requirements(config):
        current = _get_setting(config, name)
        if current != value:
            raise ConfigError(
                config.display_name(name), current,
                f"{value!r}, which {why} needs (a policy never changes the world: set it, "
                "or use the preset that does)",
            )
    object.__setattr__(config, "_explicit", dict(explicit))
    object.__setattr__(config, "_derived", frozenset(origin))
    object.__setattr__(config, "_origin", origin)
    return config


# --- helpers -----------------------------------------------------------------------------
def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, prefix=f"{name}.")
        elif isinstance(value, KindSettings | PluginSettings):
            yield from _flatten(dataclasses.asdict(value), prefix=f"{name}.")
        else:
            yield name, value


PAPER_WORDS: dict[str, list[str]] = {
    "clients": ["vehicles", "pedestrians", "sensors", "uavs"],
    "nodes": ["vehicles", "pedestrians", "sensors", "uavs"],
    "agents": ["vehicles", "pedestrians", "sensors", "uavs"],
    "cars": ["vehicles"],
    "rounds": ["steps"],
    "epochs": ["steps"],
    "learning_rate": ["lr"],
    "radius": ["radius_m"],
    "range": ["radius_m"],
    "batch": ["batch_size"],
    "alpha": ["dirichlet_alpha", "mobility_aware.alpha"],
}
"""The papers' words for MobiDFL settings (one count per kind: agents are of four kinds)."""


class UnknownSetting(ConfigError):
    """A setting name nobody declares; the message offers the closest known names.

    WHY: a newcomer types the paper's word (``clients``, ``rounds``); "did you mean" turns
    a dead end into the one name to use.
    """

    def __init__(self, name: str) -> None:
        known = [*public_names(), *_aliases()]
        close = PAPER_WORDS.get(name.lower()) or difflib.get_close_matches(
            name, known, n=3, cutoff=0.6
        )
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(name, "?", f"a known setting (see `mobidfl settings`{hint})")
        self.args = (
            f"unknown setting '{name}': the allowed names are listed by `mobidfl settings`"
            + hint,
        )


def _split_name(name: str) -> tuple[str | None, str]:
    """``(owner, field)``: owner ``None`` (a core setting), a kind (``vehicle.mobility`` and
    ``vehicle_mobility``) or a plug-in namespace (``psfl.sigma`` and its alias
    ``psfl_sigma``)."""
    if "." in name:
        owner, _, attr = name.partition(".")
        if owner in KINDS:
            if attr not in _KIND_FIELD_NAMES:
                raise UnknownSetting(name)  # built only here: its suggestions scan every name
            return owner, attr
        own = plugin_namespaces().get(owner)
        if own is None or attr not in {f.name for f in fields(own)}:  # type: ignore[arg-type]
            raise UnknownSetting(name)  # built only here: its suggestions scan every name
        return owner, attr
    if name in _FIELD_NAMES and name not in KINDS and name != "plugins":
        return None, name
    for kind in KINDS:
        if name.startswith(kind + "_") and name[len(kind) + 1 :] in _KIND_FIELD_NAMES:
            return kind, name[len(kind) + 1 :]
    alias = _aliases().get(name)
    if alias is not None:
        return alias
    raise UnknownSetting(name)  # built only here: its suggestions scan every name


@functools.cache
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


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under taskset or a container)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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
    model = MOBILITY_MODELS.get(name)
    if model is None or kind in model.kinds:
        return None
    fits = sorted(n for n, m in MOBILITY_MODELS.items() if kind in m.kinds)
    return f"a mobility model for {kind}s: one of {', '.join(fits)}"


def _run_check(name: str, f: dataclasses.Field, value: Any) -> None:
    check_value(name, f, value, extra=_EXTRA_CHECKS.get(name))


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
_DATACLASS_INIT = Config.__init__


def _config_init(self: Config, **settings: Any) -> None:
    """``Config(rm_cells=2.0)``: the raw constructor also takes plug-in settings (old flat or
    namespaced names) and underscored per-kind names, coerced but, like every raw field,
    not validated (:meth:`Config.from_settings` validates)."""
    other = {k: settings.pop(k) for k in list(settings) if k not in _FIELD_NAMES}
    _DATACLASS_INIT(self, **settings)
    if other:
        built = self._replaced(other)
        for f in fields(Config):
            object.__setattr__(self, f.name, getattr(built, f.name))


Config.__init__ = _config_init  # type: ignore[method-assign]
