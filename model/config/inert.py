"""Settings that cannot take effect: a setting given a value that nothing in its world reads.

A plug-in's setting while that plug-in is unused, or a core setting whose field declares when
it is read (``read_when``), is reported as one :class:`InertSettingWarning` line, once per
command (:mod:`mobidfl.model.config.report`).
"""

from __future__ import annotations

import warnings
from dataclasses import fields
from typing import Any

from mobidfl.model.config.report import _first_in_command
from mobidfl.model.config.toml_files import _preset_settings
from mobidfl.plugins import LINKS, MOBILITY_MODELS, POLICIES
from mobidfl.registry import warned_by_parent
from mobidfl.settings import KINDS, ReadWhen, plugin_settings_classes


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


def _in_use(config: Any) -> set[tuple[str, str]]:
    """(registry kind, plug-in name) of every plug-in this world runs."""
    used: set[tuple[str, str]] = set()
    for kind in KINDS:
        if config.count(kind) > 0:
            used.add((POLICIES.kind, config.policy_of(kind)))
            used.add((MOBILITY_MODELS.kind, config.kind(kind).mobility))
    if "link" in config.plugins:
        used.add((LINKS.kind, config.plugins["link"].model))
    return used


def _core_readers(config: Any) -> dict[str, ReadWhen]:
    """Core settings read only in some worlds, by public name.

    Each field declares it (``read_when`` of :func:`mobidfl.settings.setting`), next to its
    help and check.
    """
    return {f.name: f.metadata["read_when"] for f in fields(config)
            if f.metadata.get("read_when") is not None}


def _core_inert_settings(config: Any) -> list[str]:
    """One message per core setting of :func:`_core_readers` that ``config`` does not read.

    Only those given a value other than their default (and than their preset's).
    """
    explicit = config.explicit_settings()
    defaults = {f.name: f.default for f in fields(config)}
    preset: dict[str, Any] = {}
    problems = []
    for name, reader in _core_readers(config).items():
        if name not in explicit:
            continue
        value = config.setting(name)
        if value == defaults.get(name):
            continue  # given at its default (a full config.toml)
        if config.preset and not preset:
            preset = _preset_settings(config.preset)
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


def _inert_settings(config: Any) -> list[str]:
    """One message per setting given a value that nothing in ``config`` reads.

    Settings given a value other than their default: plug-in settings (their plug-in unused) and
    :func:`_core_readers`.
    """
    return _plugin_inert_settings(config) + _core_inert_settings(config)


def _plugin_inert_settings(config: Any) -> list[str]:
    owners = _owners()
    used = _in_use(config)
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


def _warn_inert(config: Any) -> Any:
    """Warn (one line each) about :func:`_inert_settings`.

    Return ``config`` unchanged, so config resolution can call it inline. Within :func:`one_report`
    each message once, and none in a worker process of the command (its parent showed them).
    """
    if warned_by_parent():
        return config
    for message in _inert_settings(config):
        if not _first_in_command(message):
            continue
        warnings.warn_explicit(message, InertSettingWarning, filename="mobidfl", lineno=0)
    return config
