"""Building blocks of every setting.

One field declaration, the checks, and the base class of a plug-in's own settings.

Ground floor (imports only :mod:`mobidfl.errors`): :class:`mobidfl.model.config.Config` declares its
core settings with :func:`setting`, and each policy or mobility model declares a small
frozen :class:`PluginSettings` dataclass with the same helpers, under a ``namespace``
(``psfl.sigma``). The config composes them and stays the only validator; a plug-in reads
its own typed instance (:meth:`PluginSettings.of`), never flat config fields.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import field, fields
from typing import Any, ClassVar, Literal, Self

from mobidfl.errors import ConfigError

__all__ = [
    "ROLES",
    "Check",
    "PluginSettings",
    "ReadWhen",
    "Role",
    "at_least_one",
    "check_value",
    "non_negative",
    "one_of",
    "plugin_settings_classes",
    "positive",
    "setting",
    "unit_interval",
]

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

    Given elsewhere it changes nothing, which is reported (:mod:`mobidfl.model.inert`).
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
