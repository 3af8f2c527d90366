"""Settings that cannot take effect: a plug-in's setting given while that plug-in is unused.

A plug-in owns the settings of its namespace (``contact_trace.file``, ``psfl.sigma``,
``link.fixed_rate.rate_bps``): they are read only by the plug-ins that declare the namespace
(their ``settings_class``, or the ``common_settings_class`` of a family: every link model
reads ``link``). Giving one of them explicitly in a world where none of those plug-ins
is in use changes nothing, silently -- the rule checked here, for every namespace (a
setting given at its default, as in a full ``config.toml``, changes nothing either way):

* a namespace is *in use* when one of its plug-ins is: a policy of a kind with agents, a
  mobility model of a kind with agents, or the selected ``link.model``;
* a field whose help starts with ``name:`` or ``name/name:`` (``"distance_rate/ns3: radio
  profile"``) is read only by those plug-ins of its namespace: it is in use only when one of
  them is.

Each such setting is reported once, in one line (:class:`InertSettingWarning`), naming
the setting, its value and what would read it. The check reads the config through its
public methods only (no import of :mod:`model.config`: this module sits below it).
"""

from __future__ import annotations

import warnings
from dataclasses import fields
from typing import Any

from mobidfl.kinds import KINDS
from model.plugins import LINKS, MOBILITY_MODELS, POLICIES
from model.settings import plugin_settings_classes


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


def _readers(help_text: str, names: set[str]) -> set[str]:
    """Plug-ins a field's help names as its only readers (``"fixed_rate: ..."``)."""
    head, sep, _ = help_text.partition(":")
    if not sep:
        return set()
    named = {n.strip() for n in head.split("/")}
    return named if named and named <= names else set()


def inert_settings(config: Any) -> list[str]:
    """One message per plug-in setting given a value other than its default that nothing in
    ``config`` reads."""
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
            readers = _readers(str(f.metadata.get("help", "")), names)
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


def warn_inert(config: Any) -> Any:
    """Warn (one line each, once per message) about :func:`inert_settings`; return
    ``config`` unchanged, so config resolution can call it inline."""
    for message in inert_settings(config):
        warnings.warn_explicit(message, InertSettingWarning, filename="mobidfl", lineno=0)
    return config
