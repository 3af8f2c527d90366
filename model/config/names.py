"""The names of the settings: public names, old names, and parsing by name.

One setting has one public name (``lr``, ``vehicle.mobility``, ``psfl.sigma``) and may have
old ones (``psfl_sigma``, ``vehicle_speed``); everything that reads a name (``--set``, TOML,
keywords, scenario files) goes through :func:`_split_name` here. An old name is warned about
once per command (:func:`warn_old_names`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config.fields import (
    _FIELD_NAMES,
    ConfigFields,
    KindSettings,
    PluginValues,
    _plugin_namespaces,
    _setting_fields,
)
from mobidfl.model.config.report import _first_in_command, _in_command
from mobidfl.model.config.value import _coerce, _is_optional
from mobidfl.plugins import POLICIES
from mobidfl.registry import Registry, warned_by_parent
from mobidfl.settings import COUNT_SETTING, KINDS, PluginSettings, Role

_KIND_FIELD_NAMES = frozenset(f.name for f in fields(KindSettings))


_PAPER_WORDS: dict[str, list[str]] = {
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
    out = {f"{kind}_{f}": f"{kind}.{f}" for kind in KINDS for f in sorted(_KIND_FIELD_NAMES)}
    namespaces = _plugin_namespaces()
    for namespace, own in namespaces.items():
        for f in fields(own):  # type: ignore[arg-type]
            alias = f.metadata.get("alias")
            if alias:
                if alias in out or alias in _FIELD_NAMES or _declared(alias, namespaces):
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
        close = _PAPER_WORDS.get(name.lower()) or difflib.get_close_matches(
            name, known, n=3, cutoff=0.6
        )
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(name, "?", f"a known setting (see `mobidfl settings`{hint})")
        self.args = (
            f"unknown setting '{name}': the allowed names are listed by `mobidfl settings`"
            + hint,
        )


def _split_name(name: str) -> tuple[str | None, str]:
    """``(owner, field)`` of any name of a setting.

    Owner ``None`` (a core setting), a kind (``vehicle.mobility``) or a plug-in namespace
    (``psfl.sigma``, ``link.fixed_rate.rate_bps``: the owner is everything before the last dot); old
    names through :func:`old_names`. Unknown names raise :class:`UnknownSetting`.

    WHY cached: a benchmark table resolves ~60 names per cell several times; a known name
    splits the same way until a plug-in is registered or removed, so the answer is kept per
    name and registry state (an unknown name raises every time).
    """
    return _split_name_cached(name, _registry_state())


@functools.cache
def _split_name_cached(name: str, state: int) -> tuple[str | None, str]:
    del state  # the cache key only
    if "." not in name and name in _FIELD_NAMES and name not in KINDS and name != "plugins":
        return None, name
    owner, _, attr = name.rpartition(".")
    if owner in KINDS:
        known: frozenset[str] | set[str] = _KIND_FIELD_NAMES
    else:
        own = _plugin_namespaces().get(owner) if owner else None
        known = frozenset() if own is None else {f.name for f in fields(own)}  # type: ignore[arg-type]
    if attr in known:
        return owner, attr
    public = old_names().get(name)
    if public is None:
        raise UnknownSetting(name)  # built only here: its suggestions scan every name
    owner, _, attr = public.rpartition(".")
    return owner, attr


def _canonical(name: str) -> str:
    """The public name of setting ``name`` (``psfl_sigma`` -> ``psfl.sigma``)."""
    owner, attr = _split_name(name)
    return attr if owner is None else f"{owner}.{attr}"


def _owner_type(owner: str | None) -> type:
    """The settings class a (split) setting name belongs to.

    The config's, a kind's, or a plug-in's.
    """
    if owner is None:
        return ConfigFields
    if owner in KINDS:
        return KindSettings
    return _plugin_namespaces()[owner]


@functools.cache
def _field_type(owner: type, attr: str) -> Any:
    """The type annotation of ``attr`` on ``owner`` (cached)."""
    return typing.get_type_hints(owner)[attr]


def _policy_namespaces() -> frozenset[str]:
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
    owner, attr = _split_name(name)
    own = _owner_type(owner)
    declared = next(f for f in fields(own) if f.name == attr).metadata.get("role")  # type: ignore[arg-type]
    if declared is not None:
        return declared
    if owner is None or owner in KINDS:
        return "world"
    return "policy" if owner in _policy_namespaces() else "world"


def required_world() -> tuple[str, ...]:
    """The core and per-kind world settings every benchmark scenario and study writes.

    Every setting of role ``world`` outside the plug-ins' namespaces (a mobility model's own
    settings are written where that model is used), except those whose default is ``None``
    because they follow another setting (``vehicle.partition`` follows ``partition``).
    In the settings table's order.
    """
    defaults = ConfigFields()
    names: list[str] = []
    for f in _setting_fields():
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


def _display_name(config: ConfigFields, name: str) -> str:
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
    for f in _setting_fields():
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
        public = _canonical(name)
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
    owner, attr = _split_name(name)
    target = _field_type(_owner_type(owner), attr)
    if raw.lower() in ("none", "null", "") and _is_optional(target):
        return None
    return _coerce(name, target, raw)


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


def _is_old_name(name: str) -> bool:
    """Whether ``name`` is a plug-in setting's old flat name (``psfl_sigma``).

    A per-kind name with an underscore (``vehicle_speed``) is not: it is how a keyword
    argument spells ``vehicle.speed`` (``MobiDFLModel(vehicle_speed=3.0)``).
    """
    public = _canonical(name)
    return public != name and public.partition(".")[0] not in KINDS


def _warn_old_name(name: str) -> None:
    """Warn that setting ``name`` is an old name (a :class:`DeprecationWarning`, one line).

    Old names (:func:`old_names`) are accepted for one release. In a command
    (:func:`one_report`) each is warned once, as ``mobidfl:0: DeprecationWarning: ...``, and
    never by the processes it starts; elsewhere the warning names the caller's line, so
    Python shows it by default in a script.
    """
    message = (f"setting {name!r} is an old name of {_canonical(name)!r}; it is accepted in "
               "this release only")
    if warned_by_parent():
        return
    if not _in_command():
        warnings.warn(message, DeprecationWarning, skip_file_prefixes=_own_dirs())
        return
    if _first_in_command(message):
        # module __main__: the default filters show a DeprecationWarning only there
        warnings.warn_explicit(message, DeprecationWarning, filename="mobidfl", lineno=0,
                               module="__main__")


def warn_old_names(names: Iterable[str]) -> None:
    """Warn once per old name among ``names``, as :func:`_updated` does for the names it is given.

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
