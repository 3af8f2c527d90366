"""Settings that cannot take effect: a plug-in's setting given while that plug-in is unused.

A plug-in owns the settings of its namespace (``contact_trace.file``, ``psfl.sigma``,
``link.fixed_rate.rate_bps``): they are read only by the plug-ins that declare the namespace
(their ``settings_class``, or the ``common_settings_class`` of a family: every link model
reads ``link``). Giving one of them explicitly in a world where none of those plug-ins
is in use changes nothing, silently -- the rule checked here, for every namespace (a
setting given at its default, as in a full ``config.toml``, changes nothing either way):

* a namespace is *in use* when one of its plug-ins is: a policy of a kind with agents, a
  mobility model of a kind with agents, or the selected ``link.model``;
* a field that declares its ``readers`` (``link.profile``: ``distance_rate`` and ``ns3``,
  :func:`mobidfl.settings.setting`) is read only by those plug-ins of its namespace: it is in
  use only when one of them is.

Core settings follow the same rule where the world decides whether they are read
(:func:`core_readers`: ``dirichlet_alpha`` only with a ``dirichlet`` partition,
``lr_plateau_factor`` only with ``lr_plateau_patience > 0``, ``ray_address`` only with
``worker_backend = ray``, ...): each is declared once as the setting that decides and the
values under which it is read, in its field (``read_when``), not read off its help text.

Each such setting is reported in one line (:class:`InertSettingWarning`), naming the
setting, its value and what would read it; within one command (:func:`one_report`) each
line is shown once, however many configs the command resolves, and not again by the worker
processes it starts. The check reads the config through its public methods only (no import
of :mod:`mobidfl.model.config`: this module sits below it).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from mobidfl.kinds import KINDS
from mobidfl.plugins import LINKS, MOBILITY_MODELS, POLICIES
from mobidfl.registry import COMMAND_ENV, warned_by_parent
from mobidfl.settings import ReadWhen, plugin_settings_classes


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
            from mobidfl.model.presets import preset_settings

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
