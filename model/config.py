"""The one typed, validated run configuration, and everything that reads or writes it.

:class:`Config` is plain data (the fields of :class:`ConfigFields`, one per public setting)
plus the entry points that build it: :meth:`Config.from_settings`, :meth:`Config.from_toml`,
:meth:`Config.updated`. Each passes what was given through one explicit resolution step
(:func:`updated`): names, preset, auto data set, what the mobility models declare, what the
policies require, then every check.

A setting is declared once, as a field made by :func:`mobidfl.settings.setting`: its type,
default, unit, help, bounds, role (``world``, ``run`` or ``policy``), the plug-ins that read
it and when. Everything else is derived from that declaration: the names and their parsing,
the inert-setting warning, the bench's world/run split (:func:`setting_role`), the settings
reference (docs/reference/settings.md) and the app's inputs. Adding a core setting is adding
one field to :class:`ConfigFields` (docs/reference/layout.md shows it; a test adds one).

The same names work as ``--set name=value`` on the command line, as keys in a TOML file, as
keyword arguments of :class:`mobidfl.model.world.MobiDFLModel` (so ``mesa.batch_run`` can sweep
them) and as rows of the settings reference. Per-kind settings are dotted
(``vehicle.mobility``); each policy, mobility model and link model owns its settings
(``psfl.sigma``). Paper presets (one TOML file per seed paper, in ``presets/``) fill what the
user did not give.

The parts, in order: one value (type and check); the fields; the names; the whole-config
checks; TOML; the presets; settings that cannot take effect (the inert warning); the
resolution step; :class:`Config`.

A bad value fails at once with :class:`mobidfl.errors.ConfigError`, whose one-line message
names the setting (as it was written), the value and what is allowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import os
import tomllib
import types
import typing
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from mobidfl.cores import usable_cores
from mobidfl.errors import ConfigError, DatasetDamaged, DatasetUnavailable
from mobidfl.plugins import (
    DATASET_CHECKS,
    DATASETS,
    LINKS,
    MOBILITY_MODELS,
    NETS,
    PARTITIONS,
    POLICIES,
)
from mobidfl.registry import COMMAND_ENV, Registry, warned_by_parent
from mobidfl.settings import (
    AGENT_KINDS,
    COUNT_SETTING,
    KIND_POLICY,
    KINDS,
    AgentKind,
    Check,
    PluginSettings,
    ReadWhen,
    Role,
    at_least_one,
    auto_policies,
    check_value,
    non_negative,
    one_of,
    plugin_settings_classes,
    positive,
)
from mobidfl.settings import setting as _setting
from mobidfl.toml_text import toml_value

__all__ = [
    "AGENT_KINDS",
    "AgentKind",
    "CONTACT_OUTPUTS",
    "COUNT_SETTING",
    "Config",
    "ConfigFields",
    "FIELD_NAMES",
    "KINDS",
    "KIND_POLICY",
    "KindSettings",
    "PAPER_WORDS",
    "PluginValues",
    "Preset",
    "Provenance",
    "SEED_MAX",
    "SOURCE_USER",
    "UnknownSetting",
    "canonical",
    "canonical_name",
    "check_one_name_each",
    "coerce",
    "contact_outputs",
    "dataset_check",
    "declared_settings",
    "display_name",
    "existing_folder",
    "field_type",
    "flatten",
    "get_setting",
    "is_optional",
    "load_preset",
    "mobility_fit",
    "old_names",
    "origins",
    "owner_type",
    "parse_assignments",
    "parse_value",
    "plugin_namespaces",
    "policy_requirements",
    "preset_names",
    "preset_settings",
    "public_names",
    "read_toml",
    "registered",
    "registered_plugins",
    "replaced",
    "required_world",
    "resolve",
    "resolve_auto_dataset",
    "run_check",
    "seed_range",
    "setting_fields",
    "setting_role",
    "settings_table",
    "split_name",
    "to_dict",
    "to_toml",
    "toml_value",
    "updated",
    "usable_cores",
    "validated",
    "warn_old_names",
]


# ==================================================================================================
# One value of one setting: its type (coercion) and its check
# ==================================================================================================

CONTACT_OUTPUTS: tuple[str, ...] = ("csv", "parquet", "one")
"""Formats of ``contacts_out``: ``contacts.csv``, ``contacts.parquet`` (the contact table,
:data:`model.contacts.CONTACT_COLUMNS`) and ``contacts_one.txt`` (The ONE's connection
events, :func:`mobidfl.model.contacts.one_connection_events`)."""

SEED_MAX = 2**63 - 1
"""Seeds are stored as int64 (manifests, Parquet) and seed numpy and torch."""


def contact_outputs(value: str) -> str | None:
    """``contacts_out``: auto, none, or a comma list of :data:`CONTACT_OUTPUTS`."""
    parts = [v.strip() for v in value.split(",")]
    if value.strip() in ("auto", "none") or all(p in CONTACT_OUTPUTS for p in parts):
        return None
    return "auto, none, or a comma list of " + ", ".join(CONTACT_OUTPUTS)


def registered(registry: Registry[Any], *, allow_auto: bool = False) -> Check:
    """Check a name against a plug-in registry (loaded on first use)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        names = registry.names()
        if allow_auto:
            names = ["auto", *names]
        return None if value in names else registry.choices(names)

    return check


def dataset_check(value: str | None) -> str | None:
    """A registered data set, or ``auto:A|B|...`` naming registered ones.

    With ``auto:``, the first one present is taken when the config is resolved.
    """
    plain = registered(DATASETS)
    if value is not None and value.startswith("auto:"):
        bad = [name for name in value[len("auto:") :].split("|") if plain(name) is not None]
        if not value[len("auto:") :] or bad:
            return "auto:A|B with each of " + ", ".join(DATASETS.names())
        return None
    return plain(value)


def seed_range(value: int) -> str | None:
    """``None`` for a seed in ``[0, SEED_MAX]``, else what is allowed."""
    return None if 0 <= value <= SEED_MAX else f"an integer in [0, {SEED_MAX}] (2**63 - 1)"


def existing_folder(value: str | None) -> str | None:
    """``None`` for no folder or an existing one, else what is allowed."""
    if value is None or Path(value).expanduser().is_dir():
        return None
    return "an existing folder (or empty for none)"


EXTRA_CHECKS: dict[str, Check] = {"seed": seed_range, "data_root": existing_folder}
"""Checks of settings declared without one (kept here so field declarations stay as they are)."""


def run_check(name: str, f: dataclasses.Field, value: Any) -> None:
    """Raise one :class:`ConfigError` naming ``name`` when ``value`` breaks ``f``'s check."""
    check_value(name, f, value, extra=EXTRA_CHECKS.get(name))


def mobility_fit(kind: str, name: str) -> str | None:
    """``None`` when mobility ``name`` declares that it fits ``kind``, else what is allowed."""
    model = MOBILITY_MODELS.get(name)
    if model is None or kind in model.kinds:
        return None
    fits = sorted(n for n, m in MOBILITY_MODELS.items() if kind in m.kinds)
    return f"a mobility model for {kind}s: one of {', '.join(fits)}"


def is_optional(target: Any) -> bool:
    """Whether ``target`` is a ``X | None`` union."""
    return isinstance(target, types.UnionType) and type(None) in typing.get_args(target)


def coerce(name: str, target: Any, value: Any) -> Any:
    """``value`` as type ``target``; a value that is not one raises :class:`ConfigError`.

    ``target`` is ``bool``, ``int``, ``float``, ``str``, or one of them ``| None``; the error names
    ``name``.
    """
    if value is None:
        if is_optional(target):
            return None
        raise ConfigError(name, value, "a value (this setting cannot be empty)")
    if is_optional(target):
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


# ==================================================================================================
# The settings of one run as plain data: every public setting is one dataclass field
# ==================================================================================================

@dataclass(frozen=True, kw_only=True)
class KindSettings:
    """Settings of one agent kind (public names ``<kind>.<field>``)."""

    mobility: str = _setting("static", "mobility model", registered(MOBILITY_MODELS))
    speed: float = _setting(0.0, "speed in m/s (random_walk draws speeds instead)", non_negative)
    policy: str | None = _setting(
        None, "exchange policy; empty = the global `policy`", registered(POLICIES),
        role="policy",
    )
    partition: str | None = _setting(
        None, "data partition; empty = the global `partition`", registered(PARTITIONS)
    )


@dataclass(frozen=True)
class PluginValues:
    """The plug-ins' settings instances by namespace.

    A frozen, hashable, read-only mapping (so a config stays comparable and hashable).
    """

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
        """``(namespace, settings)`` pairs, in the stored order."""
        return iter(self.entries)


@dataclass(frozen=True, eq=False)
class Provenance:
    """How a config's values came about (not a setting: never compared, never written).

    Filled by the resolution step (:func:`updated`); a config built
    directly (``Config(...)``) has none of it: nothing explicit, nothing derived.
    """

    explicit: Mapping[str, Any] = field(default_factory=dict)
    """Public name -> value of every setting given explicitly (``--set``, TOML, keywords)."""
    spelling: Mapping[str, str] = field(default_factory=dict)
    """Public name -> the name the user wrote (an old flat name stays in messages)."""
    origin: Mapping[str, str] = field(default_factory=dict)
    """Public name -> who filled a setting not given: ``preset NAME``, an ``auto:`` data
    set's choice, or the mobility model that declared it."""


_ROWS = {row.name: row for row in AGENT_KINDS}


def _partition_used(name: str) -> ReadWhen:
    """Read only where some kind with agents has data partition ``name``."""
    return ReadWhen(
        f"partition = {name}",
        lambda c: name in {c.partition_of(k) for k in KINDS if c.count(k) > 0},
    )


def _count(kind: str) -> Any:
    """The count setting of ``kind`` (``vehicles``), from its row of the kinds table."""
    row = _ROWS[kind]
    return _setting(row.count, row.count_help, non_negative)


def _kind(kind: str) -> Any:
    """The per-kind settings of ``kind`` with its default mobility and speed."""
    row = _ROWS[kind]
    return field(
        default_factory=lambda: KindSettings(mobility=row.mobility, speed=row.speed),
        metadata={"help": "per-kind settings", "check": None},
    )


def _with_kinds(cls: type) -> type:
    """Add a count field and a :class:`KindSettings` field per kind of the kinds table.

    One count field (after ``map_cache``) and one :class:`KindSettings` field (after
    ``contacts_out``) per row of :data:`mobidfl.settings.AGENT_KINDS`, in its order, so a kind
    registered by a plug-in has its settings without a line here.
    """
    annotations: dict[str, Any] = {}
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        annotations[name] = annotation
        added = {"map_cache": [(k.count_setting, "int", _count(k.name)) for k in AGENT_KINDS],
                 "contacts_out": [(k.name, "KindSettings", _kind(k.name)) for k in AGENT_KINDS]}
        for field_name, kind_annotation, default in added.get(name, []):
            if field_name in cls.__dict__:
                raise ValueError(f"agent kind setting {field_name!r} is already a setting")
            annotations[field_name] = kind_annotation
            setattr(cls, field_name, default)
    cls.__annotations__ = annotations
    return cls


@dataclass(frozen=True, kw_only=True)
@_with_kinds
class ConfigFields:
    """All settings of one run. Field order is the settings reference's order.

    One count field (after ``map_cache``) and one :class:`KindSettings` field (after
    ``contacts_out``) per row of :data:`mobidfl.settings.AGENT_KINDS`, added by
    :func:`_with_kinds` (``tests/test_kinds.py`` checks they match).
    """

    # --- world ---------------------------------------------------------------------
    preset: str = _setting(
        "",
        "paper preset whose values fill every setting not given explicitly "
        "(`mobidfl presets`; empty = none)",
        role="run",
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
        "~/.cache/mobidfl/maps", "folder where built street arrays and online maps are cached",
        role="run",
    )
    steps: int = _setting(20, "number of steps (global epochs)", at_least_one)
    step_s: float = _setting(120.0, "seconds per step (Cached-DFL: 120 s epochs)", positive)
    seed: int = _setting(0, "random seed (mobility, data, models)", role="run")
    radius_m: float = _setting(100.0, "radio range R in metres (Cached-DFL: 100 m)", positive)
    contact: str = _setting(
        "during", "contact rule: during (any moment of the step) or end", one_of("during", "end")
    )
    cell_m: float = _setting(100.0, "grid cell size in metres (sensors, UAVs)", positive)
    areas: int = _setting(3, "number of map areas (area-restricted cars, area data)", at_least_one)
    record_every: int = _setting(
        1, "write agents.parquet rows every N steps", at_least_one, role="run",
    )
    contacts_out: str = _setting(
        "auto",
        "contact table files written with a run: csv (contacts.csv), parquet "
        "(contacts.parquet), one (The ONE's connection events, contacts_one.txt), a comma "
        "list of them, none, or auto (csv,one when a link model is set, else none)",
        contact_outputs,
        role="run",
    )

    # --- learning ------------------------------------------------------------------
    learning: bool = _setting(
        True, "train and exchange models (false = mobility only)", role="run",
    )
    dataset: str = _setting("auto:fashion_mnist|mnist5k", "dataset", dataset_check)
    data_root: str | None = _setting(None, "folder with torchvision-layout datasets", role="run")
    partition: str = _setting("shards", "data partition", registered(PARTITIONS))
    dirichlet_alpha: float = _setting(
        0.5, "Dirichlet concentration alpha", positive,
        read_when=_partition_used("dirichlet"),
    )
    area_labels: str = _setting(
        "",
        "area partition: label lists per area, e.g. 9,0,1,2;3,4,5,6;6,7,8,9; empty = overlapping "
        "windows of >= 3 labels; disjoint = contiguous disjoint blocks (PSFL's code)",
        read_when=_partition_used("area"),
    )
    area_within: str = _setting(
        "iid", "area partition: how an area's samples are split", one_of("iid", "shards"),
        read_when=_partition_used("area"),
    )
    model: str = _setting("mlp", "neural network", registered(NETS))
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
        read_when=ReadWhen("lr_plateau_patience > 0", lambda c: c.lr_plateau_patience > 0),
    )
    early_stop_patience: int = _setting(
        0,
        "stop the run when acc_mean has not increased for this many steps (Cached-DFL: 20; "
        "0 = off)",
        non_negative,
    )
    backend: str = _setting("loop", "training backend", one_of("loop", "batched"), role="run")
    device: str = _setting(
        "cpu", "torch device for the batched backend", one_of("cpu", "cuda"), role="run",
    )
    precision: str = _setting(
        "fp32",
        "arithmetic of training and testing: fp32; fp32_fast (fp32, the first convolution's "
        "weight gradient as one convolution over the batch: another summation order, the "
        "loop backend's conv-net training faster on a CPU); or bf16 (autocast to bfloat16 "
        "on the CPU (fast with AVX512-BF16 / AMX) or the GPU; parameters and updates stay "
        "fp32)",
        one_of("fp32", "fp32_fast", "bf16"),
        role="run",
    )
    perturb: str = _setting(
        "none",
        "a controlled floating-point perturbation, to test whether a result depends on "
        "rounding: none; init_last_bit (every initial parameter moved one unit in the last "
        "place toward +inf, as numpy.nextafter); or fp64_aggregate (every aggregation of "
        "models, mixing, averaging and combining cached models, summed in float64 and "
        "rounded once to float32)",
        one_of("none", "init_last_bit", "fp64_aggregate"),
        role="run",
    )
    workers: int = _setting(
        0, "worker processes for the loop backend (0 = auto: free cores, big steps only)",
        non_negative,
        role="run",
    )
    eval_every: int = _setting(1, "evaluate every E steps", at_least_one)
    test_size: int = _setting(500, "shared test sample size", at_least_one)
    # --- performance
    eval_initial: bool = _setting(
        False, "evaluate every agent before the first step (step-0 accuracy in model.csv)",
        role="run",
    )
    eval_chunk: int = _setting(
        0, "test samples per forward pass (0 = measured default per net)", non_negative,
        role="run",
    )
    worker_backend: str = _setting(
        "processes", "loop-backend workers: local processes or Ray actors",
        one_of("processes", "ray"),
        role="run",
    )
    ray_address: str | None = _setting(
        None, "worker_backend = ray: cluster address (auto, ray://HOST:PORT; none = local Ray)",
        role="run",
        read_when=ReadWhen("worker_backend = ray", lambda c: c.worker_backend == "ray"),
    )
    policy: str = _setting(
        "auto",
        f"exchange policy for all kinds; auto = each kind's own seed system ({auto_policies()})",
        registered(POLICIES, allow_auto=True),
        role="policy",
    )
    plugins: PluginValues = field(
        default_factory=PluginValues.defaults,
        metadata={"help": "the plug-ins' own settings, by namespace", "check": None},
    )
    """Each policy's and mobility model's own settings (``psfl.sigma``): see
    :func:`plugin_namespaces`; read one with :meth:`plugin_settings`."""
    provenance: Provenance = field(default_factory=Provenance, repr=False, compare=False)
    """Not a setting: what was given explicitly and who filled the rest (:class:`Provenance`)."""

    # --- reading ---------------------------------------------------------------------
    def count(self, kind: str) -> int:
        """Number of agents of ``kind`` (its count setting, e.g. ``vehicles``)."""
        return int(getattr(self, COUNT_SETTING[kind]))

    def kind(self, kind: str) -> KindSettings:
        """The settings of ``kind`` (``config.vehicle`` for ``"vehicle"``)."""
        return getattr(self, kind)

    def policy_of(self, kind: str) -> str:
        """The policy ``kind`` runs: its own, else the global one.

        ``auto`` means the kind's default policy.
        """
        chosen = self.kind(kind).policy or self.policy
        return KIND_POLICY[kind] if chosen == "auto" else chosen

    def partition_of(self, kind: str) -> str:
        """The data partition of ``kind``: its own, else the global one."""
        return self.kind(kind).partition or self.partition

    def plugin_settings(self, namespace: str) -> Any:
        """The settings instance of one plug-in namespace.

        What :meth:`PluginSettings.of` hands a policy or mobility model; defaults for one registered
        after this config.
        """
        if namespace in self.plugins:
            return self.plugins[namespace]
        return registered_plugins(self)[namespace]

    @property
    def n_agents(self) -> int:
        """Number of agents over every kind."""
        return sum(self.count(k) for k in KINDS)


def setting_fields() -> tuple[Field, ...]:
    """The fields of :class:`ConfigFields` that hold settings (all but ``provenance``)."""
    return tuple(f for f in fields(ConfigFields) if f.name != "provenance")


FIELD_NAMES: frozenset[str] = frozenset(f.name for f in setting_fields())
"""Names of the setting fields: the core settings, the kinds and ``plugins``."""


def registered_plugins(config: ConfigFields) -> dict[str, Any]:
    """``config``'s plug-in settings for the namespaces registered now.

    A plug-in registered later gets its defaults, an unregistered one is dropped.
    """
    held = dict(config.plugins.items())
    return {
        n: held[n] if type(held.get(n)) is own else own()
        for n, own in plugin_namespaces().items()
    }


_NAMESPACES: tuple[int, dict[str, type[PluginSettings]]] | None = None
"""The last :func:`plugin_namespaces` table and the :attr:`Registry.changes` it was built at."""


def plugin_namespaces() -> dict[str, type[PluginSettings]]:
    """Namespace -> settings class declared by the registered plug-ins, sorted by namespace.

    The classes are those the policies, mobility models and link models declare
    (:func:`mobidfl.settings.plugin_settings_classes`: a family's common class such as ``link``, and
    each plug-in's ``settings_class``); the order is the settings reference's (``link`` before
    ``link.fixed_rate``).

    A namespace is an identifier that is no core setting or kind, or dotted under another
    namespace (``link.fixed_rate``) whose fields it does not shadow. Built again only when
    a plug-in was registered or removed since the last call (every setting name is resolved
    through this table).
    """
    global _NAMESPACES  # noqa: PLW0603 - the module's cache, keyed by Registry.changes
    # Registry.changes, not each registry's version (which loads its entry points on every
    # read): the table is built with every registry loaded, so the count it was built at
    # changes only when a plug-in is added or removed afterwards.
    if _NAMESPACES is not None and _NAMESPACES[0] == Registry.changes:
        return dict(_NAMESPACES[1])
    found: dict[str, type[PluginSettings]] = {}
    for registry in (POLICIES, MOBILITY_MODELS, LINKS):
        for name, plugin in registry.items():
            for own in plugin_settings_classes(plugin):
                parts = own.namespace.split(".")
                if parts[0] in FIELD_NAMES or not all(p.isidentifier() for p in parts):
                    raise ConfigError(
                        f"{registry.kind} {name}.settings_class.namespace", own.namespace,
                        "an identifier that is not a setting or a kind (or dotted: "
                        "link.<name>)",
                    )
                held = found.setdefault(own.namespace, own)
                if held is not own:
                    raise ConfigError(
                        f"{registry.kind} {name}.settings_class", own.__qualname__,
                        f"{held.__qualname__}, the class of namespace {own.namespace!r}",
                    )
    for namespace in found:
        parent, _, leaf = namespace.rpartition(".")
        if parent and (parent not in found
                       or leaf in {f.name for f in fields(found[parent])}):  # type: ignore[arg-type]
            raise ConfigError(
                f"{namespace} settings namespace", namespace,
                f"a name under a declared namespace that none of its fields uses ({parent!r})",
            )
    table = dict(sorted(found.items()))
    _NAMESPACES = (Registry.changes, table)
    return dict(table)


# ==================================================================================================
# The names of the settings: public names, old names, and parsing by name
# ==================================================================================================

KIND_FIELD_NAMES = frozenset(f.name for f in fields(KindSettings))

PAPER_WORDS: dict[str, list[str]] = {
    "clients": list(COUNT_SETTING.values()),
    "nodes": list(COUNT_SETTING.values()),
    "agents": list(COUNT_SETTING.values()),
    "cars": ["vehicles"],
    "rounds": ["steps"],
    "epochs": ["steps"],
    "learning_rate": ["lr"],
    "radius": ["radius_m"],
    "range": ["radius_m"],
    "batch": ["batch_size"],
    "alpha": ["dirichlet_alpha", "mobility_aware.alpha"],
}
"""The papers' words for MobiDFL settings (one count per kind: agents are of several kinds)."""


def old_names() -> dict[str, str]:
    """Old name -> public name.

    ``<kind>_<field>`` for each kind's fields, then the ``alias`` each registered plug-in field
    declares: an old flat name (``psfl_sigma`` -> ``psfl.sigma``) or the short name a link model's
    setting had before it got its own namespace (``link.rate_bps`` -> ``link.fixed_rate.rate_bps``).

    An alias that is already a name (a core setting, a public name or another old name) is
    refused.
    """
    out = {f"{kind}_{f}": f"{kind}.{f}" for kind in KINDS for f in sorted(KIND_FIELD_NAMES)}
    namespaces = plugin_namespaces()
    for namespace, own in namespaces.items():
        for f in fields(own):  # type: ignore[arg-type]
            alias = f.metadata.get("alias")
            if alias:
                if alias in out or alias in FIELD_NAMES or _declared(alias, namespaces):
                    raise ConfigError(f"{namespace}.{f.name}", alias, "an alias no other uses")
                out[alias] = f"{namespace}.{f.name}"
    return out


def _declared(name: str, namespaces: Mapping[str, type]) -> bool:
    """Whether ``name`` is a plug-in setting's public name (``namespace.field``)."""
    owner, _, attr = name.rpartition(".")
    own = namespaces.get(owner)
    return own is not None and attr in {f.name for f in fields(own)}  # type: ignore[arg-type]


class UnknownSetting(ConfigError):
    """A setting name nobody declares; the message offers the closest known names.

    WHY: a newcomer types the paper's word (``clients``, ``rounds``); "did you mean" turns
    a dead end into the one name to use.
    """

    def __init__(self, name: str) -> None:
        aliases = [old for old, new in old_names().items() if new.partition(".")[0] not in KINDS]
        known = [*public_names(), *aliases]
        close = PAPER_WORDS.get(name.lower()) or difflib.get_close_matches(
            name, known, n=3, cutoff=0.6
        )
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(name, "?", f"a known setting (see `mobidfl settings`{hint})")
        self.args = (
            f"unknown setting '{name}': the allowed names are listed by `mobidfl settings`"
            + hint,
        )


def split_name(name: str) -> tuple[str | None, str]:
    """``(owner, field)`` of any name of a setting.

    Owner ``None`` (a core setting), a kind (``vehicle.mobility``) or a plug-in namespace
    (``psfl.sigma``, ``link.fixed_rate.rate_bps``: the owner is everything before the last dot); old
    names through :func:`old_names`. Unknown names raise :class:`UnknownSetting`.

    WHY cached: a benchmark table resolves ~60 names per cell several times; a known name
    splits the same way until a plug-in is registered or removed, so the answer is kept per
    name and registry state (an unknown name raises every time).
    """
    return _split_name(name, _registry_state())


@functools.cache
def _split_name(name: str, state: int) -> tuple[str | None, str]:
    del state  # the cache key only
    if "." not in name and name in FIELD_NAMES and name not in KINDS and name != "plugins":
        return None, name
    owner, _, attr = name.rpartition(".")
    if owner in KINDS:
        known: frozenset[str] | set[str] = KIND_FIELD_NAMES
    else:
        own = plugin_namespaces().get(owner) if owner else None
        known = frozenset() if own is None else {f.name for f in fields(own)}  # type: ignore[arg-type]
    if attr in known:
        return owner, attr
    public = old_names().get(name)
    if public is None:
        raise UnknownSetting(name)  # built only here: its suggestions scan every name
    owner, _, attr = public.rpartition(".")
    return owner, attr


def canonical(name: str) -> str:
    """The public name of setting ``name`` (``psfl_sigma`` -> ``psfl.sigma``)."""
    owner, attr = split_name(name)
    return attr if owner is None else f"{owner}.{attr}"


def owner_type(owner: str | None) -> type:
    """The settings class a (split) setting name belongs to.

    The config's, a kind's, or a plug-in's.
    """
    if owner is None:
        return ConfigFields
    if owner in KINDS:
        return KindSettings
    return plugin_namespaces()[owner]


@functools.cache
def field_type(owner: type, attr: str) -> Any:
    """The type annotation of ``attr`` on ``owner`` (cached)."""
    return typing.get_type_hints(owner)[attr]


def policy_namespaces() -> frozenset[str]:
    """Namespaces owned by a registered policy (``cached``, ``psfl``, ...).

    A namespace shared with a mobility model (PSFL's walker) counts as the policy's: the
    policy is what a benchmark column varies.
    """
    owners = {getattr(cls, "settings_class", None) for _, cls in POLICIES.items()}
    return frozenset(own.namespace for own in owners if own is not None)


def setting_role(name: str) -> Role:
    """What setting ``name`` (any accepted name) describes: ``world``, ``run`` or ``policy``.

    Read from the field's declared ``role`` (:func:`mobidfl.settings.setting`); undeclared, a
    core or per-kind setting is the world's and a plug-in's takes its namespace's role.
    Unknown names raise :class:`UnknownSetting`.
    """
    return _setting_role(name, _registry_state())


def _registry_state() -> int:
    """The plug-in registries' state: what a name's split and role are kept against."""
    return Registry.changes


@functools.cache
def _setting_role(name: str, state: int) -> Role:
    del state  # the cache key only
    owner, attr = split_name(name)
    own = owner_type(owner)
    declared = next(f for f in fields(own) if f.name == attr).metadata.get("role")  # type: ignore[arg-type]
    if declared is not None:
        return declared
    if owner is None or owner in KINDS:
        return "world"
    return "policy" if owner in policy_namespaces() else "world"


def required_world() -> tuple[str, ...]:
    """The core and per-kind world settings every benchmark scenario and study writes.

    Every setting of role ``world`` outside the plug-ins' namespaces (a mobility model's own
    settings are written where that model is used), except those whose default is ``None``
    because they follow another setting (``vehicle.partition`` follows ``partition``).
    In the settings table's order.
    """
    defaults = ConfigFields()
    names: list[str] = []
    for f in setting_fields():
        value = getattr(defaults, f.name)
        if isinstance(value, PluginValues):
            continue
        if isinstance(value, KindSettings):
            names.extend(f"{f.name}.{kf.name}" for kf in fields(KindSettings)
                         if getattr(value, kf.name) is not None
                         and setting_role(f"{f.name}.{kf.name}") == "world")
        elif value is not None and setting_role(f.name) == "world":
            names.append(f.name)
    return tuple(names)


def display_name(config: ConfigFields, name: str) -> str:
    """How messages name setting ``name``.

    As the user wrote it, or, when the user wrote any setting of its namespace by its old flat name,
    that old name too.
    """
    spelled = config.provenance.spelling
    if name in spelled:
        return spelled[name]
    owner = name.rpartition(".")[0]
    if owner in config.plugins and any(
        n.startswith(owner + ".") and s != n for n, s in spelled.items()
    ):
        old = {new: old for old, new in old_names().items()}
        return old.get(name, name)
    return name


def flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """``(name, value)`` of nested tables (TOML) and settings instances, dotted."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, prefix=f"{name}.")
        elif isinstance(value, KindSettings | PluginSettings):
            yield from flatten(dataclasses.asdict(value), prefix=f"{name}.")
        else:
            yield name, value


def settings_table() -> list[tuple[str, str, str]]:
    """Rows (name, default, help) of every public setting.

    For ``--help`` and the settings reference (docs/reference/settings.md).
    """
    rows: list[tuple[str, str, str]] = []
    defaults = ConfigFields()
    for f in setting_fields():
        value = getattr(defaults, f.name)
        if isinstance(value, PluginValues):
            for namespace, own in value.items():
                for pf in fields(own):
                    alias = pf.metadata.get("alias")
                    note = f" (old name `{alias}`)" if alias else ""
                    readers = "/".join(pf.metadata.get("readers", ()))
                    rows.append(
                        (f"{namespace}.{pf.name}", repr(getattr(own, pf.name)),
                         (f"{readers}: " if readers else "") + pf.metadata["help"] + note)
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
    """Every setting's public name, in the settings table's order."""
    return [row[0] for row in settings_table()]


def check_one_name_each(given: Iterable[tuple[str, Any]]) -> None:
    """Refuse one setting given under two names at once (``cache_size`` and ``cached.size``).

    WHY: an old flat name and its new dotted name (or ``vehicle_speed`` and
    ``vehicle.speed``) in the same file or command line would silently keep one of them.
    """
    seen: dict[str, tuple[str, Any]] = {}
    for name, value in given:
        public = canonical(name)
        first = seen.setdefault(public, (name, value))
        if first[0] != name:
            raise ConfigError(
                f"{first[0]}+{name}",
                (first[1], value),
                f"one name per setting: '{first[0]}' and '{name}' are the same setting "
                f"'{public}'; keep one",
            )


def parse_value(name: str, raw: str) -> Any:
    """Parse a command-line value by the setting's type (``inf`` and ``none`` understood)."""
    owner, attr = split_name(name)
    target = field_type(owner_type(owner), attr)
    if raw.lower() in ("none", "null", "") and is_optional(target):
        return None
    return coerce(name, target, raw)


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


# ==================================================================================================
# The checks of a whole config
# ==================================================================================================

def validated[C: ConfigFields](config: C) -> C:
    """``config`` itself when every setting passes its check and the settings agree.

    Else one :class:`ConfigError` for the first problem.
    """
    shown = display_name
    for f in setting_fields():
        value = getattr(config, f.name)
        if isinstance(value, KindSettings):
            for kf in fields(value):
                run_check(shown(config, f"{f.name}.{kf.name}"), kf, getattr(value, kf.name))
        elif not isinstance(value, PluginValues):
            run_check(shown(config, f.name), f, value)
    for namespace, own in config.plugins.items():
        for pf in fields(own):
            check_value(shown(config, f"{namespace}.{pf.name}"), pf, getattr(own, pf.name))
        problem = own.joint_check()
        if problem is not None:
            attrs, value, allowed = problem
            joined = "+".join(shown(config, f"{namespace}.{n}") for n in attrs)
            raise ConfigError(joined, value, allowed)
    _check_joint(config)
    return config


def _check_joint(config: ConfigFields) -> None:
    if config.n_agents < 1:
        raise ConfigError("+".join(COUNT_SETTING.values()), 0, "at least one agent")
    _check_link(config)
    if config.learning:
        _check_training(config)
    cores = usable_cores()
    on_this_machine = config.worker_backend == "processes" or config.ray_address is None
    if on_this_machine and config.workers > cores:
        raise ConfigError(
            display_name(config, "workers"), config.workers,
            f"at most the {cores} cores this process may use (os.sched_getaffinity; "
            "0 = auto); more workers only on a Ray cluster (ray_address)",
        )
    for kind in KINDS:
        name = config.kind(kind).mobility
        fit = mobility_fit(kind, name)
        if fit is not None:
            raise ConfigError(f"{kind}.mobility", name, fit)


def _check_training(config: ConfigFields) -> None:
    """The learning settings' combination rules, checked here only (the engine trusts them).

    Adam keeps per-agent moments in this process, so its training is never spread over worker
    processes or Ray actors; workers are the loop backend's, on the CPU.
    """
    shown = functools.partial(display_name, config)
    adam = config.optimizer == "adam"
    if adam and config.momentum:
        raise ConfigError(
            shown("momentum"), config.momentum, "0 with optimizer = adam (Adam has its own)"
        )
    if adam and config.workers > 1:
        raise ConfigError(shown("workers"), config.workers, "1 with optimizer = adam")
    if adam and config.worker_backend == "ray":
        raise ConfigError(
            shown("worker_backend"), config.worker_backend,
            "processes with optimizer = adam (Ray actors hold no Adam moments)",
        )
    if config.worker_backend == "ray" and config.backend != "loop":
        raise ConfigError(
            shown("worker_backend"), config.worker_backend, "processes unless backend = loop"
        )
    if config.workers > 1 and (config.backend != "loop" or config.device != "cpu"):
        raise ConfigError(shown("workers"), config.workers, "1 unless backend = loop on the CPU")


def _check_link(config: ConfigFields) -> None:
    """A link other than ``ideal`` needs contact times and policies that send over it.

    A policy that ignores the link would make it a silent no-op.
    """
    plugins = config.plugins
    if "link" not in plugins or plugins["link"].model == "ideal":
        return
    shown, model = display_name(config, "link.model"), plugins["link"].model
    if config.contact != "during":
        raise ConfigError(
            display_name(config, "contact"), config.contact,
            f"during (link {model} needs when each contact starts and ends)",
        )
    passes = plugins["cached"].passes if "cached" in plugins else 1
    if passes != 1:
        raise ConfigError(
            display_name(config, "cached.passes"), passes,
            f"1 with link {model} (replaying a step's meetings is the authors' Table 2 "
            "statistic, not bytes a radio sends again)",
        )
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        policy = config.policy_of(kind)
        if not getattr(POLICIES[policy], "honours_link", False):
            honour = sorted(n for n, c in POLICIES.items() if getattr(c, "honours_link", False))
            raise ConfigError(
                shown, model,
                f"ideal, because the {kind} policy {policy} ignores the link (policies "
                f"that honour it: {', '.join(honour)})",
            )

    policies = [config.policy_of(k) for k in KINDS if config.count(k) > 0]
    if plugins["link"].resume and policies and not any(
        getattr(POLICIES[p], "resumes_transfers", False) for p in policies
    ):  # a silent no-op otherwise: resume is for ordered message lists
        resumers = sorted(
            n for n, c in POLICIES.items() if getattr(c, "resumes_transfers", False)
        )
        raise ConfigError(
            display_name(config, "link.resume"), True,
            f"false, because no policy of this world resumes a cut message ({policies[0]} "
            f"sends whole models each contact; policies that resume: {', '.join(resumers)})",
        )


# ==================================================================================================
# A config as a TOML file and back: read a file whole, write every setting
# ==================================================================================================

def read_toml(path: str | Path, *, source: str) -> dict[str, Any]:
    """Parse a TOML file; any unreadable file is one :class:`ConfigError` naming ``source``."""
    try:
        with Path(path).open("rb") as fh:
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


def to_dict(config: ConfigFields) -> dict[str, Any]:
    """Nested dict of every setting (kinds and plug-in namespaces as tables).

    ``None`` values are left out.
    """
    out: dict[str, Any] = {}
    for f in setting_fields():
        value = getattr(config, f.name)
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


def to_toml(config: ConfigFields) -> str:
    """Every setting as TOML text: the scalars first, then one table per kind and namespace."""
    scalars, tables = [], []
    for key, value in to_dict(config).items():
        if isinstance(value, dict):
            tables.append(f"\n[{key}]")
            tables.extend(f"{k} = {toml_value(v)}" for k, v in value.items())
        else:
            scalars.append(f"{key} = {toml_value(value)}")
    return "\n".join(scalars + tables) + "\n"


# ==================================================================================================
# Paper presets: one TOML file per seed paper's headline experiment (presets/*.toml)
# ==================================================================================================

_PRESETS = resources.files("mobidfl.model").joinpath("presets")
"""The shipped presets (package data of :mod:`mobidfl.model`)."""

@dataclass(frozen=True)
class Preset:
    """A paper preset: its name, one-line description, paper and flat settings."""

    name: str
    description: str
    paper: str
    substitutes: str
    settings: dict[str, Any]


def preset_names() -> list[str]:
    """Names of the presets shipped in this package, sorted.

    Returns
    -------
    list[str]
        The names ``load_preset`` and ``--preset`` accept.
    """
    files = _PRESETS.iterdir()
    return sorted(f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))


@functools.cache
def load_preset(name: str) -> Preset:
    """Read one preset.

    Its names are checked, as every setting's, when a config applies it
    (the resolution step, :func:`updated`).

    Parameters
    ----------
    name
        One of :func:`preset_names` (``cached_dfl_003``).

    Returns
    -------
    Preset
        Its description, paper, stand-ins and flat settings (public names).

    Raises
    ------
    ConfigError
        ``name`` is not a shipped preset, or the file sets ``preset`` itself.
    """
    if name not in preset_names():
        raise ConfigError("preset", name, "one of " + ", ".join(preset_names()))
    text = _PRESETS.joinpath(f"{name}.toml").read_text()
    data = tomllib.loads(text)
    about = data.pop("about", {})
    flat = dict(flatten(data))
    warn_old_names(flat)
    if "preset" in flat:
        raise ConfigError("preset", name, "a preset file without a `preset` key")
    return Preset(
        name=name,
        description=str(about.get("description", "")),
        paper=str(about.get("paper", "")),
        substitutes=str(about.get("substitutes", "")),
        settings=flat,
    )


def preset_settings(name: str) -> dict[str, Any]:
    """The preset's settings by the names its file uses (a copy)."""
    return dict(load_preset(name).settings)


def resolve_auto_dataset(spec: str, data_root: str | None) -> str:
    """``auto:A|B|C`` -> the first dataset whose files are present (the last one otherwise).

    The last name should be an offline dataset (``mnist5k``), the paper's substitute.
    """
    names = [n.strip() for n in spec.removeprefix("auto:").split("|") if n.strip()]
    if not names or any(n not in DATASETS for n in names):
        allowed = "auto:NAME|NAME|... with names in " + ", ".join(DATASETS)
        raise ConfigError("dataset", spec, allowed)
    for name in names[:-1]:
        if dataset_present(name, data_root):
            return name
    return names[-1]


@functools.cache
def dataset_present(name: str, data_root: str | None) -> bool:
    """Whether ``name`` loads from ``data_root`` (or the system) on this machine.

    Files that are there but damaged raise :class:`DatasetDamaged` (one line): an ``auto:``
    dataset never falls back silently past a broken copy of the set it asked for first.
    """
    root = None if data_root is None else Path(data_root).expanduser()
    try:
        if name in DATASET_CHECKS:  # the files alone: a world without learning needs no torch
            DATASET_CHECKS.lookup(name)(root)
        else:
            DATASETS.lookup(name)(root, 1, 0)  # the registered loader: (root, test_size, seed)
    except DatasetDamaged:
        raise
    except (DatasetUnavailable, ConfigError, OSError, RuntimeError):
        return False
    return True


# ==================================================================================================
# Settings that cannot take effect: a plug-in's setting given while that plug-in is unused
# ==================================================================================================

class InertSettingWarning(UserWarning):
    """A setting was given that no plug-in of this world reads."""


def _owners() -> dict[str, list[tuple[str, str]]]:
    """Namespace -> [(registry kind, plug-in name)] of every plug-in declaring it."""
    out: dict[str, list[tuple[str, str]]] = {}
    for registry in (POLICIES, MOBILITY_MODELS, LINKS):
        for name, plugin in registry.items():
            for own in plugin_settings_classes(plugin):
                out.setdefault(own.namespace, []).append((registry.kind, name))
    return out


def in_use(config: Any) -> set[tuple[str, str]]:
    """(registry kind, plug-in name) of every plug-in this world runs."""
    used: set[tuple[str, str]] = set()
    for kind in KINDS:
        if config.count(kind) > 0:
            used.add((POLICIES.kind, config.policy_of(kind)))
            used.add((MOBILITY_MODELS.kind, config.kind(kind).mobility))
    if "link" in config.plugins:
        used.add((LINKS.kind, config.plugins["link"].model))
    return used


def core_readers(config: Any) -> dict[str, ReadWhen]:
    """Core settings read only in some worlds, by public name.

    Each field declares it (``read_when`` of :func:`mobidfl.settings.setting`), next to its
    help and check.
    """
    return {f.name: f.metadata["read_when"] for f in fields(config)
            if f.metadata.get("read_when") is not None}


def core_inert_settings(config: Any) -> list[str]:
    """One message per core setting of :func:`core_readers` that ``config`` does not read.

    Only those given a value other than their default (and than their preset's).
    """
    explicit = config.explicit_settings()
    defaults = {f.name: f.default for f in fields(config)}
    preset: dict[str, Any] = {}
    problems = []
    for name, reader in core_readers(config).items():
        if name not in explicit:
            continue
        value = config.setting(name)
        if value == defaults.get(name):
            continue  # given at its default (a full config.toml)
        if config.preset and not preset:
            preset = preset_settings(config.preset)
        if name in preset and preset[name] == value:
            continue  # the preset's own value, written out in full
        learns = bool(config.learning) or not reader.learning
        if learns and reader.when(config):
            continue
        why = reader.decides if learns else f"{reader.decides} and learning = true"
        problems.append(
            f"{config.display_name(name)}={value!r} has no effect: it is read only with "
            f"{why}, which this world does not have"
        )
    return problems


def inert_settings(config: Any) -> list[str]:
    """One message per setting given a value that nothing in ``config`` reads.

    Settings given a value other than their default: plug-in settings (their plug-in unused) and
    :func:`core_readers`.
    """
    return _plugin_inert_settings(config) + core_inert_settings(config)


def _plugin_inert_settings(config: Any) -> list[str]:
    owners = _owners()
    used = in_use(config)
    explicit = config.explicit_settings()
    defaults = {namespace: type(own)() for namespace, own in config.plugins.items()}
    problems = []
    for namespace, own in config.plugins.items():
        plugins = owners.get(namespace, [])
        names = {name for _, name in plugins}
        live = [p for p in plugins if p in used]
        for f in fields(own):
            public = f"{namespace}.{f.name}"
            if public not in explicit or getattr(own, f.name) == getattr(defaults[namespace],
                                                                         f.name):
                continue  # not given, or given at its default (a full config.toml)
            readers = set(f.metadata.get("readers", ())) & names
            if live and (not readers or any(name in readers for _, name in live)):
                continue
            shown = config.display_name(public)
            needed = sorted(readers) if readers else sorted(names)
            whose = " or ".join(
                f"{kind} {name}" for kind, name in sorted(plugins) if name in needed
            )
            problems.append(
                f"{shown}={getattr(own, f.name)!r} has no effect: it is read only by "
                f"{whose}, which this world does not use"
            )
    return problems


_SHOWN: set[str] | None = None
"""Messages shown in this command (:func:`one_report`); ``None`` outside a command."""


def warn_inert(config: Any) -> Any:
    """Warn (one line each) about :func:`inert_settings`.

    Return ``config`` unchanged, so config resolution can call it inline. Within :func:`one_report`
    each message once, and none in a worker process of the command (its parent showed them).
    """
    if warned_by_parent():
        return config
    for message in inert_settings(config):
        if _SHOWN is not None:
            if message in _SHOWN:
                continue
            _SHOWN.add(message)
        warnings.warn_explicit(message, InertSettingWarning, filename="mobidfl", lineno=0)
    return config


@contextlib.contextmanager
def one_report() -> Iterator[None]:
    """One command (``mobidfl run``, ``reproduce``, ...).

    Each inert setting is warned once, whatever number of configs it resolves (a run resolves its
    config several times, a reproduction one per variant and run), and never by the processes it
    starts.

    WHY: a run printed the same line twice, a reproduction 41 times.
    """
    global _SHOWN  # noqa: PLW0603 - one command's warned set, put back when it ends
    before, env_before = _SHOWN, os.environ.get(COMMAND_ENV)
    _SHOWN = set()
    os.environ[COMMAND_ENV] = str(os.getpid())
    try:
        yield
    finally:
        _SHOWN = before
        if env_before is None:
            os.environ.pop(COMMAND_ENV, None)
        else:
            os.environ[COMMAND_ENV] = env_before


# ==================================================================================================
# The resolution step: from the settings a user gave to the config a run uses
# ==================================================================================================

SOURCE_USER = "user"
"""Origin of an explicit setting (``--set``, a TOML file, a keyword argument)."""


def get_setting(config: ConfigFields, name: str) -> Any:
    """The value of the setting with public name ``name``."""
    owner, _, attr = name.rpartition(".")
    if not owner:
        return getattr(config, attr)
    holder = getattr(config, owner) if owner in KINDS else config.plugins[owner]
    return getattr(holder, attr)


def replaced[C: ConfigFields](config: C, flat: Mapping[str, Any]) -> C:
    """Copy of ``config`` with settings replaced by any of their names.

    The values are coerced, not validated; the provenance is kept.
    """
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        owner, attr = split_name(name)
        if owner is None:
            top[attr] = coerce(attr, field_type(ConfigFields, attr), value)
        else:
            owner_type = KindSettings if owner in KINDS else plugin_namespaces()[owner]
            nested.setdefault(owner, {})[attr] = coerce(
                name, field_type(owner_type, attr), value
            )
    plugins = registered_plugins(config)
    for owner, changes in nested.items():
        if owner in KINDS:
            top[owner] = replace(getattr(config, owner), **changes)
        else:
            plugins[owner] = replace(plugins[owner], **changes)
    if any(o not in KINDS for o in nested) or list(plugins) != list(config.plugins):
        top["plugins"] = PluginValues(tuple(plugins.items()))
    return replace(config, **top)


def _is_old_name(name: str) -> bool:
    """Whether ``name`` is a plug-in setting's old flat name (``psfl_sigma``).

    A per-kind name with an underscore (``vehicle_speed``) is not: it is how a keyword
    argument spells ``vehicle.speed`` (``MobiDFLModel(vehicle_speed=3.0)``).
    """
    public = canonical(name)
    return public != name and public.partition(".")[0] not in KINDS


def _warn_old_name(name: str) -> None:
    """Warn that setting ``name`` is an old name (a :class:`DeprecationWarning`, one line).

    Old names (:func:`old_names`) are accepted for one release. In a command
    (:func:`one_report`) each is warned once, as ``mobidfl:0: DeprecationWarning: ...``, and
    never by the processes it starts; elsewhere the warning names the caller's line, so
    Python shows it by default in a script.
    """
    message = (f"setting {name!r} is an old name of {canonical(name)!r}; it is accepted in "
               "this release only")
    if warned_by_parent():
        return
    if _SHOWN is None:
        warnings.warn(message, DeprecationWarning, skip_file_prefixes=_own_dirs())
        return
    if message not in _SHOWN:
        _SHOWN.add(message)
        # module __main__: the default filters show a DeprecationWarning only there
        warnings.warn_explicit(message, DeprecationWarning, filename="mobidfl", lineno=0,
                               module="__main__")


def warn_old_names(names: Iterable[str]) -> None:
    """Warn once per old name among ``names``, as :func:`updated` does for the names it is given.

    WHY: a scenario, study or preset file is read into public names before any config sees it,
    so the resolution step never meets its old names; its reader tells them here instead.
    """
    for name in dict.fromkeys(n for n in names if _is_old_name(n)):
        _warn_old_name(name)


@functools.cache
def _own_dirs() -> tuple[str, ...]:
    """The folders of MobiDFL's packages, so that a warning names the caller's line.

    Python shows a :class:`DeprecationWarning` by default only where it is attributed to
    ``__main__``: skipping these folders attributes it to the user's script or command.
    """
    import importlib.util

    dirs: set[str] = set()
    for name in ("mobidfl", "mobidfl.model", "mobidfl.agents", "mobidfl.maps", "mobidfl.analysis"):
        spec = importlib.util.find_spec(name)  # the package's folders, without importing it
        if spec is not None:
            dirs.update(str(Path(d).resolve()) for d in (spec.submodule_search_locations or ()))
    return tuple(sorted(dirs))


def updated[C: ConfigFields](config: C, given: Iterable[tuple[str, Any]]) -> C:
    """``config`` with the settings ``given`` made explicit, then resolved and checked.

    ``given`` is ``(name, value)`` pairs under any names, put on top of the ones ``config`` was
    given before; the result is resolved, validated and checked for inert settings
    (:func:`warn_inert`).
    """
    given = list(given)
    check_one_name_each(given)
    flat = {canonical(n): v for n, v in given}
    for name in dict.fromkeys(n for n, _ in given if _is_old_name(n)):
        _warn_old_name(name)
    before = config.provenance
    spelling = {**before.spelling, **{canonical(n): n for n, _ in given}}
    explicit = {**before.explicit, **flat}
    stale = {n for n in before.origin if n not in explicit}
    defaults = type(config)()
    reset = {n: get_setting(defaults, n) for n in stale}
    config = replaced(replaced(config, reset), flat)
    config = replace(config, provenance=Provenance(spelling=spelling))
    return warn_inert(validated(resolve(config, explicit)))


def resolve[C: ConfigFields](config: C, explicit: Mapping[str, Any]) -> C:
    """Fill non-explicit settings from the preset, auto datasets and mobility declarations.

    Then check what the policies require (never filled: a policy never changes the world).
    """
    origin: dict[str, str] = {}
    if config.preset:
        preset = {canonical(n): v for n, v in preset_settings(config.preset).items()}
        fill = {n: v for n, v in preset.items() if n not in explicit}
        config = replaced(config, fill)
        origin.update(dict.fromkeys(fill, f"preset {config.preset}"))
    if config.dataset.startswith("auto:"):
        choice = config.dataset
        config = replaced(config, {"dataset": resolve_auto_dataset(choice, config.data_root)})
        if "dataset" not in explicit:
            origin["dataset"] = f"default {choice} (the first one installed)"
    for _ in range(8):  # a declaration may bring a mobility model that declares more
        changed = False
        for name, value, why, strict in _mobility_declarations(config):
            current = get_setting(config, name)
            if current == value:
                continue
            if name in explicit:
                if strict:
                    raise ConfigError(
                        display_name(config, name), current,
                        f"{value!r} (required by {why})",
                    )
                continue
            config = replaced(config, {name: value})
            origin[name] = why
            changed = True
        if not changed:
            break
    for name, value, why in policy_requirements(config):
        current = get_setting(config, name)
        if current != value:
            raise ConfigError(
                display_name(config, name), current,
                f"{value!r}, which {why} needs (a policy never changes the world: set it, "
                "or use the preset that does)",
            )
    provenance = Provenance(
        explicit=dict(explicit), spelling=config.provenance.spelling, origin=origin
    )
    return replace(config, provenance=provenance)


def origins(config: ConfigFields) -> dict[str, str]:
    """Every setting not at its default -> where its value came from.

    ``user`` (given explicitly), ``preset NAME``, ``default auto:...`` (an ``auto:`` dataset
    resolved to the first one present) or the mobility model that declared it (``uav.mobility =
    NAME``), in the settings reference's order. Never a policy: a policy never changes the world.
    """
    explicit, origin = config.provenance.explicit, config.provenance.origin
    defaults = type(config)()
    out: dict[str, str] = {}
    for name in public_names():
        if get_setting(config, name) == get_setting(defaults, name):
            continue
        out[name] = SOURCE_USER if name in explicit else origin.get(name, SOURCE_USER)
    return out


def declared_settings(config: ConfigFields) -> list[tuple[str, Any, str, bool]]:
    """The requirements and defaults of the mobility models and policies in use.

    ``(setting, value, why, strict)`` declared by the mobility models in use, then the requirements
    of the policies in use (``strict``, never applied).

    A mobility model (``mobidfl.agents.mobility``) is part of the world and may set ``requires``
    (strict: an explicit contrary value is an error) and ``defaults`` (applied only where
    the user said nothing). A policy (``mobidfl.model.policies``) may only set ``requires``: what it
    cannot run without, which :func:`resolve` checks but never applies, because a policy
    never changes the world (swapping it leaves map, mobility, radius, data and model as they
    were; what a paper pairs with its system lives in that paper's preset). Keys are setting
    names (namespaced or old flat names), ``{kind}`` standing for the agent kind; values are a
    value or a function ``f(config, kind)`` (``None`` = nothing to declare). Kinds with no
    agents declare nothing.
    """
    return [*_mobility_declarations(config), *(
        (name, value, why, True) for name, value, why in policy_requirements(config)
    )]


def _mobility_declarations(config: ConfigFields) -> list[tuple[str, Any, str, bool]]:
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
                    out.append((canonical(name.format(kind=kind)), resolved, why, strict))
    return out


def policy_requirements(config: ConfigFields) -> list[tuple[str, Any, str]]:
    """``(setting, value, why)``: what the policies in use cannot run without (their ``requires``).

    A policy class that declares ``defaults`` is refused: a policy never changes the world, so the
    settings its paper pairs with it belong in that paper's preset (``model/presets``).
    """
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
                out.append((canonical(name.format(kind=kind)), resolved, why))
    return out


# ==================================================================================================
# The config
# ==================================================================================================

_INIT_FIELDS = frozenset(f.name for f in fields(ConfigFields))


class Config(ConfigFields):
    """All settings of one run (the fields of :class:`~mobidfl.model.config.ConfigFields`).

    ``Config(...)`` builds one directly: it also takes plug-in settings (old flat or
    namespaced names, ``Config(rm_cells=2.0)``) and underscored per-kind names, coerced but,
    like every field given directly, neither resolved nor validated. A run's config comes
    from :meth:`from_settings`, :meth:`from_toml` or :meth:`updated`, which resolve and
    validate.

    Parameters
    ----------
    settings
        Setting values by name: fields, per-kind tables, plug-in settings (namespaced or
        their old flat names).

    Raises
    ------
    ConfigError
        A name that is no setting (with the closest names) or a value of the wrong type.
    """

    def __init__(self, **settings: Any) -> None:
        own = {k: v for k, v in settings.items() if k in _INIT_FIELDS}
        other = {k: v for k, v in settings.items() if k not in _INIT_FIELDS}
        if other:
            for name in filter(_is_old_name, other):
                _warn_old_name(name)
            built = replaced(ConfigFields(**own), other)
            own = {f.name: getattr(built, f.name) for f in fields(built)}
        super().__init__(**own)

    def __getattr__(self, name: str) -> Any:
        """A plug-in namespace or a plug-in setting by its old flat name.

        ``config.psfl.sigma`` reads the namespace, ``config.psfl_sigma`` the old flat name.
        """
        plugins = self.__dict__.get("plugins")
        if name.startswith("_") or plugins is None:
            raise AttributeError(name)
        if name in plugins:
            return plugins[name]
        namespace, _, attr = old_names().get(name, "").rpartition(".")
        if namespace in plugins:
            _warn_old_name(name)
            return getattr(plugins[namespace], attr)
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    # --- construction: the resolution step --------------------------------------------
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

        The settings given here and in earlier ``updated`` calls are *explicit*; every other
        setting is filled by the resolution step (:func:`updated`: preset, auto
        data set, mobility declarations; a policy fills nothing). ``explicit_settings()``,
        ``derived_settings()`` and ``setting_origins()`` tell which is which.
        """
        given = [*flatten(settings or {}), *flatten(kw)]
        return updated(self, given)

    def validated(self) -> Config:
        """The config itself when every setting passes its check and the settings agree."""
        return validated(self)

    # --- provenance -------------------------------------------------------------------
    def explicit_settings(self) -> dict[str, Any]:
        """Settings given explicitly (``--set``, TOML, keyword arguments), by public name."""
        return dict(self.provenance.explicit)

    def derived_settings(self) -> frozenset[str]:
        """Settings filled by the preset, an ``auto:`` data set or a mobility model."""
        return frozenset(self.provenance.origin)

    def setting_origins(self) -> dict[str, str]:
        """Every setting not at its default -> where its value came from.

        ``user`` (given explicitly), ``preset NAME``, an ``auto:`` data set's choice, or the
        mobility model that declared it (``uav.mobility = NAME``), in the settings reference's
        order.

        WHY: a run's first line names what differs from the defaults and who chose it, so a
        changed world is never silent (a policy never changes it, see
        :func:`policy_requirements`).
        """
        return origins(self)

    def display_name(self, name: str) -> str:
        """How messages name setting ``name``: as the user wrote it (an old flat name too)."""
        return display_name(self, name)

    def setting(self, name: str) -> Any:
        """The value of one public setting by name.

        The name may be ``vehicle.mobility``, ``psfl.sigma``, ``lr`` or an old flat name such as
        ``psfl_sigma``.
        """
        return get_setting(self, canonical(name))

    # --- output -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Nested dict of every setting (kinds and plug-in namespaces as tables).

        ``None`` values are left out.
        """
        return to_dict(self)

    def to_toml(self) -> str:
        """Every setting as TOML text; :meth:`from_toml` reads it back to an equal config."""
        return to_toml(self)


def canonical_name(name: str) -> str:
    """The public name of setting ``name``; unknown names raise :class:`ConfigError`.

    E.g. ``psfl_sigma`` -> ``psfl.sigma``, ``vehicle_mobility`` -> ``vehicle.mobility``.
    """
    return canonical(name)
