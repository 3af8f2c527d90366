"""The settings of one run as plain data: every public setting is one dataclass field.

:class:`ConfigFields` declares each core setting once (:func:`mobidfl.settings.setting`: type,
default, help, check, role, readers); per-kind settings (:class:`KindSettings`) and the
plug-ins' own settings (:class:`PluginValues`, by namespace) are fields too. Adding a core
setting is adding one field here (docs/reference/layout.md shows it; a test adds one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config.value import _contact_outputs, _dataset_check, _registered
from mobidfl.plugins import LINKS, MOBILITY_MODELS, NETS, PARTITIONS, POLICIES
from mobidfl.registry import Registry
from mobidfl.settings import (
    AGENT_KINDS,
    COUNT_SETTING,
    KIND_POLICY,
    KINDS,
    PluginSettings,
    ReadWhen,
    at_least_one,
    auto_policies,
    non_negative,
    one_of,
    plugin_settings_classes,
    positive,
)
from mobidfl.settings import setting as _setting


@dataclass(frozen=True, kw_only=True)
class KindSettings:
    """Settings of one agent kind (public names ``<kind>.<field>``)."""

    mobility: str = _setting("static", "mobility model", _registered(MOBILITY_MODELS))
    speed: float = _setting(0.0, "speed in m/s (random_walk draws speeds instead)", non_negative)
    policy: str | None = _setting(
        None, "exchange policy; empty = the global `policy`", _registered(POLICIES),
        role="policy",
    )
    partition: str | None = _setting(
        None, "data partition; empty = the global `partition`", _registered(PARTITIONS)
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
        return cls(tuple((n, settings()) for n, settings in _plugin_namespaces().items()))

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

    Filled by the resolution step (:func:`_updated`); a config built
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
    :func:`_with_kinds` (``tests/mobidfl/test_kinds.py`` checks they match).
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
        _contact_outputs,
        role="run",
    )

    # --- learning ------------------------------------------------------------------
    learning: bool = _setting(
        True, "train and exchange models (false = mobility only)", role="run",
    )
    dataset: str = _setting("auto:fashion_mnist|mnist5k", "dataset", _dataset_check)
    data_root: str | None = _setting(None, "folder with torchvision-layout datasets", role="run")
    partition: str = _setting("shards", "data partition", _registered(PARTITIONS))
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
        _registered(POLICIES, allow_auto=True),
        role="policy",
    )
    plugins: PluginValues = field(
        default_factory=PluginValues.defaults,
        metadata={"help": "the plug-ins' own settings, by namespace", "check": None},
    )
    """Each policy's and mobility model's own settings (``psfl.sigma``): see
    :func:`_plugin_namespaces`; read one with :meth:`plugin_settings`."""
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
        return _registered_plugins(self)[namespace]

    @property
    def n_agents(self) -> int:
        """Number of agents over every kind."""
        return sum(self.count(k) for k in KINDS)


def _setting_fields() -> tuple[Field, ...]:
    """The fields of :class:`ConfigFields` that hold settings (all but ``provenance``)."""
    return tuple(f for f in fields(ConfigFields) if f.name != "provenance")


_FIELD_NAMES: frozenset[str] = frozenset(f.name for f in _setting_fields())
"""Names of the setting fields: the core settings, the kinds and ``plugins``."""


def _registered_plugins(config: ConfigFields) -> dict[str, Any]:
    """``config``'s plug-in settings for the namespaces registered now.

    A plug-in registered later gets its defaults, an unregistered one is dropped.
    """
    held = dict(config.plugins.items())
    return {
        n: held[n] if type(held.get(n)) is own else own()
        for n, own in _plugin_namespaces().items()
    }


_NAMESPACES: tuple[int, dict[str, type[PluginSettings]]] | None = None
"""The last :func:`_plugin_namespaces` table and the :attr:`Registry.changes` it was built at."""


def _plugin_namespaces() -> dict[str, type[PluginSettings]]:
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
                if parts[0] in _FIELD_NAMES or not all(p.isidentifier() for p in parts):
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
