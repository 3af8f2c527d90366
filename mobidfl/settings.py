"""Building blocks of every setting, and the agent kinds the settings are counted by.

One field declaration, the checks, the base class of a plug-in's own settings, and the
rows of the agent kinds.

Ground floor (imports only :mod:`mobidfl.errors`): :class:`mobidfl.model.config.Config`
declares its core settings with :func:`setting`, and each policy or mobility model declares
a small frozen :class:`PluginSettings` dataclass with the same helpers, under a
``namespace`` (``psfl.sigma``). The config composes them and stays the only validator; a
plug-in reads its own typed instance (:meth:`PluginSettings.of`), never flat config fields.

The agent kinds are defined here once, so the settings, the link models, the mobility
models, the Mesa model and the app read them from the ground floor. Each kind is one
:class:`AgentKind` row: the four built-in kinds are :data:`BUILTIN_KINDS`; a plug-in adds a
kind with one file that defines its row and one entry point in the group
:data:`ENTRY_POINT_GROUP` (docs/reference/layout.md, "Adding an agent kind"). Everything else
(the count and per-kind settings, the agent class, the energy table, the app's look, which
mobility models fit it) derives from the rows (``tests/mobidfl/test_kinds.py``).
"""

from __future__ import annotations

import dataclasses
import keyword
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Self

from mobidfl.errors import ConfigError

__all__ = [
    "AGENT_KINDS",
    "AgentKind",
    "BUILTIN_KINDS",
    "COUNT_SETTING",
    "Check",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "KIND_POLICY",
    "PluginSettings",
    "ROLES",
    "ReadWhen",
    "Role",
    "at_least_one",
    "auto_policies",
    "check_value",
    "kinds_where",
    "non_negative",
    "one_of",
    "plugin_settings_classes",
    "positive",
    "setting",
    "unit_interval",
]


# ==================================================================================================
# Setting declarations and checks
# ==================================================================================================

Check = Callable[[Any], str | None]
"""A check returns ``None`` when the value is fine, else the text saying what is allowed."""


Role = Literal["world", "run", "policy"]
"""What a setting describes; the benchmark's world/run split and its checks read it.

``world``: the world every policy of a benchmark column shares (map, fleet, data, recipe);
``run``: how a run is computed or written (seed, backend, output files), never part of a
world; ``policy``: the exchange policy's choice, the one thing a benchmark column varies.
"""

ROLES: tuple[str, ...] = ("world", "run", "policy")
"""The values of :data:`Role`."""


@dataclasses.dataclass(frozen=True)
class ReadWhen:
    """When a core setting is read: only in some worlds (``dirichlet_alpha``).

    Given elsewhere it changes nothing, which is reported (:mod:`mobidfl.model.config`).
    """

    decides: str
    """The setting (or fact) that decides, as messages name it (``partition = dirichlet``)."""
    when: Callable[[Any], bool]
    """Whether a config reads the setting."""
    learning: bool = True
    """Read only in a world that learns."""


def setting(
    default: Any, help: str, check: Check | None = None, *, role: Role | None = None,
    readers: tuple[str, ...] = (), read_when: ReadWhen | None = None, alias: str | None = None,
    inf: bool = False,
) -> Any:
    """A dataclass field with its help text, check and role.

    Parameters
    ----------
    default
        The value when the user sets nothing.
    help
        One line for ``mobidfl settings`` and the settings reference page.
    check
        Returns ``None`` for an allowed value, else what is allowed (:data:`Check`);
        ``None``: any value of the field's type.
    role
        What the setting describes (:data:`Role`). ``None``: a core or per-kind setting is a
        world setting, a plug-in's takes its namespace's role (a policy's own settings are
        the policy's, a mobility or link model's are the world's).
    readers
        The plug-ins of the field's namespace that read it (``("cached_group_lru",)`` for
        ``cached.groups``), where only some of them do; empty: every plug-in declaring the
        namespace. A setting given while none of its readers runs is reported as inert.
    read_when
        For a core setting read only in some worlds: which setting decides and when
        (:class:`ReadWhen`); given elsewhere it is reported as inert.
    alias
        The setting's old flat name (``psfl_sigma`` for ``psfl.sigma``), still accepted
        everywhere a name is (TOML, ``--set``, keywords, presets, sweeps).
    inf
        ``inf`` means something here (no limit); other floats must be finite.

    Returns
    -------
    dataclasses.Field
        The field, with ``help``, ``check``, ``role``, ``readers``, ``read_when``, ``alias``
        and ``inf`` in its metadata.

    Raises
    ------
    ValueError
        ``role`` is not one of :data:`ROLES` (a plug-in author's mistake, found on import).
    """
    if role is not None and role not in ROLES:
        raise ValueError(f"setting role {role!r}: one of {', '.join(ROLES)}")
    return field(
        default=default,
        metadata={"help": help, "check": check, "role": role, "readers": tuple(readers),
                  "read_when": read_when, "alias": alias, "inf": inf},
    )


def positive(value: float) -> str | None:
    """Check for :func:`setting`: allows numbers > 0.

    Parameters
    ----------
    value
        The value to check.

    Returns
    -------
    str or None
        ``None`` when allowed, else ``"a number > 0"``.
    """
    return None if value > 0 else "a number > 0"


# Each check is a named function (the settings reference names it): docstrings alike by design.
def non_negative(value: float) -> str | None:
    """Check for :func:`setting`: allows numbers >= 0.

    Parameters
    ----------
    value
        The value to check.

    Returns
    -------
    str or None
        ``None`` when allowed, else ``"a number >= 0"``.
    """
    return None if value >= 0 else "a number >= 0"


def at_least_one(value: int) -> str | None:
    """Check for :func:`setting`: allows integers >= 1 (counts, steps).

    Parameters
    ----------
    value
        The value to check.

    Returns
    -------
    str or None
        ``None`` when allowed, else ``"an integer >= 1"``.
    """
    return None if value >= 1 else "an integer >= 1"


def unit_interval(value: float) -> str | None:
    """Check for :func:`setting`: allows numbers in [0, 1] (fractions, probabilities).

    Parameters
    ----------
    value
        The value to check.

    Returns
    -------
    str or None
        ``None`` when allowed, else ``"a number in [0, 1]"``.
    """
    return None if 0.0 <= value <= 1.0 else "a number in [0, 1]"


def one_of(*choices: str) -> Check:
    """Check for :func:`setting`: allows only the given strings.

    Parameters
    ----------
    *choices
        The allowed values.

    Returns
    -------
    Check
        A check whose message lists the choices (``"one of a, b"``).
    """

    def check(value: str) -> str | None:
        return None if value in choices else "one of " + ", ".join(choices)

    return check


def check_value(
    name: str, f: dataclasses.Field, value: Any, *, extra: Check | None = None
) -> None:
    """Raise one :class:`ConfigError` naming ``name`` when ``value`` breaks ``f``'s check.

    NaN never passes; ``inf`` only where the field says so.
    """
    if isinstance(value, float):
        if math.isnan(value):
            raise ConfigError(name, value, "a number (not NaN)")
        if math.isinf(value) and not f.metadata.get("inf", False):
            raise ConfigError(name, value, "a finite number")
    check = f.metadata.get("check") or extra
    if check is None:
        return
    allowed = check(value)
    if allowed is not None:
        raise ConfigError(name, value, allowed)


class PluginSettings:
    """Base of a plug-in's own settings.

    Subclass as ``@dataclass(frozen=True, kw_only=True)`` with :func:`setting` fields and a
    ``namespace`` (public names ``<namespace>.<field>``).

    Several plug-ins may share one namespace by naming the same class as their
    ``settings_class`` (``mofel``, ``mofel_a1`` and ``mofel_a2`` -> ``mofel``).
    """

    namespace: ClassVar[str]
    """Prefix of the public names: an identifier (``psfl``), or dotted under a family's
    namespace (``link.fixed_rate``: a link model's own settings)."""

    def joint_check(self) -> tuple[tuple[str, ...], Any, str] | None:
        """A check across fields: ``(fields, value, allowed)`` of a problem, else ``None``."""
        return None

    @classmethod
    def of(cls, config: Any) -> Self:
        """The settings of this namespace in ``config``.

        A :class:`~mobidfl.model.config.Config` hands out its validated instance. Anything else
        (a plain namespace in a unit test) is read by the old flat names, or the
        namespaced ones, with defaults for the rest, and checked by the same field checks.
        """
        compose = getattr(config, "plugin_settings", None)
        if callable(compose):
            return compose(cls.namespace)
        values: dict[str, Any] = {}
        names: dict[str, str] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            for name in (f.metadata.get("alias"), f"{cls.namespace}.{f.name}"):
                if name and hasattr(config, name):
                    values[f.name], names[f.name] = getattr(config, name), name
        own = cls(**values)
        for f in fields(cls):  # type: ignore[arg-type]
            check_value(names.get(f.name, f"{cls.namespace}.{f.name}"), f, getattr(own, f.name))
        return own


def plugin_settings_classes(plugin: Any) -> tuple[type[PluginSettings], ...]:
    """The settings classes a plug-in declares.

    The one its family shares (``common_settings_class``: every link model reads ``link``), then its
    own (``settings_class``: ``psfl``, ``link.fixed_rate``); either may be absent.

    Parameters
    ----------
    plugin
        A registered plug-in class (policy, mobility model, link model).

    Returns
    -------
    tuple of type
        The declared :class:`PluginSettings` subclasses, common first, each once.
    """
    found = (
        getattr(plugin, "common_settings_class", None), getattr(plugin, "settings_class", None)
    )
    return tuple(dict.fromkeys(own for own in found if own is not None))


# ==================================================================================================
# The agent kinds
# ==================================================================================================

ENTRY_POINT_GROUP = "mobidfl.agent_kinds"
"""Entry-point group of plug-in kinds: ``name = "package.module:ROW"``, ``ROW`` an
:class:`AgentKind`; they follow the built-in kinds in the order of their entry-point names."""


@dataclass(frozen=True, kw_only=True)
class AgentKind:
    """One agent kind: its names in the settings and what a run gives it by default."""

    name: str
    """The kind (``vehicle``): its per-kind settings are ``<name>.<field>``."""
    count_setting: str
    """The setting that says how many agents of this kind a run has (``vehicles``)."""
    count: int
    """Default number of agents."""
    count_help: str
    """Help text of the count setting (the settings reference)."""
    mobility: str
    """Default mobility model (``<name>.mobility``)."""
    speed: float
    """Default speed in m/s (``<name>.speed``)."""
    policy: str
    """What ``policy = "auto"`` gives this kind: the seed system built for it."""
    j_per_flop: float
    """Joules per training FLOP of a device of this kind's class, from a data sheet's peak
    FLOP/s and power (a lower bound: real training reaches a fraction of peak); the link
    models' energy accounting (``link.kind_j_per_flop`` overrides it)."""
    colour: str
    """The app's colour for this kind (a CSS colour)."""
    shape: str
    """The app's marker: ``circle``, ``triangle``, ``square`` or ``diamond``."""
    network: str = ""
    """The street network the kind moves on: ``drive`` (directed, one-way streets kept),
    ``walk`` (both directions), or empty (none: on grid cells or in the air). Street
    mobility models (``manhattan``, ``routes``, ``sumo``) fit the kinds that have one."""
    on_grid: bool = False
    """Its agents stand on grid cells (``static`` places them at cell centres; the app draws
    them with the grid)."""
    flies: bool = False
    """Airborne: it pays the rotary-wing flight power every step (Zeng et al. 2019,
    :func:`mobidfl.model.maths.energy.flight_energy`)."""
    doc: str = ""
    """One line on what the kind is (its agent class's docstring)."""

    def __post_init__(self) -> None:
        for attr in ("name", "count_setting"):
            value = getattr(self, attr)
            if not value.isidentifier() or keyword.iskeyword(value) or value != value.lower():
                raise ValueError(f"AgentKind.{attr} {value!r}: a lower-case Python identifier")
        if self.network not in ("", "drive", "walk"):
            raise ValueError(f"AgentKind.network {self.network!r}: drive, walk or empty")
        if self.shape not in ("circle", "triangle", "square", "diamond"):
            raise ValueError(f"AgentKind.shape {self.shape!r}: circle, triangle, square, diamond")


BUILTIN_KINDS: tuple[AgentKind, ...] = (
    # Cached-DFL (Wang et al., AAAI 2025): 100 cars at 13.89 m/s carry model caches.
    # Energy: NVIDIA Jetson AGX Orin 64GB (data sheet DS-10662-001): 2048 CUDA cores at
    # 1.3 GHz = 5.3 TFLOP/s FP32 in its 60 W mode.
    AgentKind(name="vehicle", count_setting="vehicles", count=100,
              count_help="number of vehicles (Cached-DFL: 100 cars)",
              mobility="manhattan", speed=13.89, policy="cached_lru",
              j_per_flop=60.0 / 5.3e12, colour="#1f77b4", shape="circle", network="drive",
              doc="Drives the directed street network (default 13.89 m/s, Cached-DFL)."),
    # de Heredia (2024), Alg. 1: walkers average with who they meet.
    # Energy: Qualcomm Adreno 650 (Snapdragon 865), 1.2 TFLOP/s FP32 peak, with a phone's
    # sustained power budget of about 5 W (assumed: thermally limited handsets).
    AgentKind(name="pedestrian", count_setting="pedestrians", count=40,
              count_help="number of pedestrians",
              mobility="manhattan", speed=1.4, policy="dpsgd",
              j_per_flop=5.0 / 1.2e12, colour="#ff7f0e", shape="triangle", network="walk",
              doc="Walks streets in both directions (default 1.4 m/s)."),
    # Reza et al. (DAM/DCM), eq. 2: static clients ...
    # Energy: Arm Cortex-M4F at 64 MHz (Nordic nRF52840 product specification v1.7: 3.3 mA
    # running from flash with the DC/DC regulator at 3 V = 9.9 mW), one single-precision
    # FLOP per cycle (its FPU's VADD/VMUL).
    AgentKind(name="sensor", count_setting="sensors", count=30,
              count_help="number of static sensors (one per grid cell)",
              mobility="static", speed=0.0, policy="fedavg_weighted",
              j_per_flop=3.0 * 3.3e-3 / 64e6, colour="#2ca02c", shape="square", on_grid=True,
              doc="Sits still on a grid cell (Reza et al.'s static clients, PSFL's sensors)."),
    # ... and the mobile clients that visit them share one policy.
    # Energy: NVIDIA Jetson Nano (data sheet DA_09366): 128 CUDA cores at 921.6 MHz =
    # 236 GFLOP/s FP32 in its 10 W mode.
    AgentKind(name="uav", count_setting="uavs", count=6,
              count_help="number of UAVs (move between grid cells)",
              mobility="random_grid", speed=10.0, policy="fedavg_weighted",
              j_per_flop=10.0 / (128 * 2 * 921.6e6), colour="#d62728", shape="diamond",
              on_grid=True, flies=True,
              doc="Flies between grid cells (Reza et al.'s mobile clients)."),
)  # fmt: skip
"""The built-in kinds, in the order agents are built and settings are listed."""


def _registered() -> tuple[AgentKind, ...]:
    """The built-in kinds, then every :data:`ENTRY_POINT_GROUP` kind by entry-point name.

    A kind whose name or count setting is taken is refused naming both.
    """
    from importlib.metadata import entry_points

    rows = list(BUILTIN_KINDS)
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        row = ep.load()
        if not isinstance(row, AgentKind):
            raise TypeError(f"entry point {ep.name} = {ep.value!r} ({ENTRY_POINT_GROUP}): "
                            f"{type(row).__name__}, not an AgentKind")  # fmt: skip
        taken = {n for k in rows for n in (k.name, k.count_setting)}
        if {row.name, row.count_setting} & taken:
            raise ValueError(f"agent kind {row.name!r} ({ep.value}): its name or count "
                             f"setting {row.count_setting!r} is already a kind's")  # fmt: skip
        rows.append(row)
    return tuple(rows)


AGENT_KINDS: tuple[AgentKind, ...] = _registered()
"""Every agent kind, in the order agents are built and settings are listed."""

KINDS: tuple[str, ...] = tuple(k.name for k in AGENT_KINDS)
COUNT_SETTING: dict[str, str] = {k.name: k.count_setting for k in AGENT_KINDS}
KIND_POLICY: dict[str, str] = {k.name: k.policy for k in AGENT_KINDS}
"""What ``policy = "auto"`` (the default) gives each kind: the seed system built for it."""


def auto_policies() -> str:
    """``vehicle cached_lru, pedestrian dpsgd, sensor and uav fedavg_weighted``.

    Each kind's own policy, kinds sharing one named together (the help of ``policy``).
    """
    by_policy: dict[str, list[str]] = {}
    for kind in AGENT_KINDS:
        by_policy.setdefault(kind.policy, []).append(kind.name)
    return ", ".join(f"{' and '.join(kinds)} {policy}" for policy, kinds in by_policy.items())


def kinds_where(**wanted: object) -> frozenset[str]:
    """Names of the kinds whose row has every ``attribute=value`` given.

    E.g. ``kinds_where(network="drive")``; ``network=True`` matches any non-empty network.
    """
    return frozenset(
        k.name for k in AGENT_KINDS
        if all((bool(getattr(k, a)) if v is True else getattr(k, a) == v)
               for a, v in wanted.items())
    )  # fmt: skip
