"""One registry class for every plug-in kind (policies, mobility models, datasets, ...).

Ground floor: imports nothing of ours but :mod:`mobidfl.errors`, so any layer may hold a
registry without importing upwards. A :class:`Registry` is a read-only mapping from name to
plug-in (``names in REG``, ``REG[name]``, ``REG.keys()`` keep working where a plain dict was
used before) that refuses what a dict would silently accept: a second plug-in under a taken
name, and names that cannot be written as a setting (``--set policy=<name>``, TOML keys).
Unknown names at use time raise one :class:`~mobidfl.errors.ConfigError` listing the choices.

Plug-in modules register themselves when imported. Which modules those are is declared as
Python entry points (group :data:`PLUGIN_GROUP` in ``pyproject.toml``, so a third-party
package adds a policy the same way), and a registry built with ``group=`` imports them
once, on its first lookup: the registries, and :mod:`mobidfl.model.config` that checks names
against them, never import the layers above.
"""

from __future__ import annotations

import importlib
import os
import tomllib
import warnings
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, overload

from mobidfl.errors import ConfigError

__all__ = [
    "PLUGIN_GROUP", "PluginImportWarning", "Registry", "failed_plugins", "load_plugins",
    "plugin_modules",
]

PLUGIN_GROUP = "mobidfl.plugins"
"""Entry-point group naming the modules that register MobiDFL's plug-ins."""

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
"""This checkout's project file: a source checkout run with ``PYTHONPATH`` (or an editable
install made before an entry point was added) finds its built-in plug-ins there."""


COMMAND_ENV = "MOBIDFL_COMMAND_PID"
"""Set by a ``mobidfl`` command to its process id (:func:`mobidfl.model.config.one_report`): a
process that sees another id is one of its workers, and leaves the one-line warnings
(broken entry points, inert settings) to the command, which showed them once."""


def warned_by_parent() -> bool:
    """Whether this process is a worker of a ``mobidfl`` command (see :data:`COMMAND_ENV`)."""
    pid = os.environ.get(COMMAND_ENV)
    return pid is not None and pid != str(os.getpid())


class PluginImportWarning(UserWarning):
    """An installed entry point's module failed to import.

    Its plug-ins are missing, every other plug-in works (one line, once per process).
    """


def _declared(group: str) -> list[tuple[str, str, bool]]:
    """``(module, entry point as written, ours)`` declared under ``group``.

    This checkout's ``pyproject.toml`` first, then every installed distribution's entry points.
    ``ours``: declared by MobiDFL itself (a failure there is a bug in MobiDFL, raised as is).
    """
    declared: list[tuple[str, str, bool]] = []
    if _PYPROJECT.is_file():
        project = tomllib.loads(_PYPROJECT.read_text()).get("project", {})
        if project.get("name") == "mobidfl":
            for name, value in project.get("entry-points", {}).get(group, {}).items():
                declared.append((value, f"{name} = {value}", True))
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        dist_name = getattr(dist, "name", None) or "?"
        ours = dist_name.replace("_", "-").lower() == "mobidfl"
        version = getattr(dist, "version", "") or ""
        label = f"{ep.name} = {ep.value} (distribution {dist_name} {version})".replace(" )", ")")
        declared.append((ep.value, label, ours))
    seen: dict[str, tuple[str, str, bool]] = {}
    for value, label, ours in declared:
        module = value.partition(":")[0].strip()
        if module in seen:
            seen[module] = (module, seen[module][1], seen[module][2] or ours)
        else:
            seen[module] = (module, label, ours)
    return list(seen.values())


def plugin_modules(group: str = PLUGIN_GROUP) -> list[str]:
    """Module names declared under ``group``.

    This checkout's ``pyproject.toml`` first, then every installed distribution's entry points
    (duplicates once).
    """
    return [module for module, _, _ in _declared(group)]


_LOADED: dict[str, tuple[str, ...]] = {}
_FAILED: dict[str, dict[str, str]] = {}


def failed_plugins(group: str = PLUGIN_GROUP) -> dict[str, str]:
    """Entry points of ``group`` whose module failed to import -> why, in one line each.

    Empty until the group is loaded.
    """
    return dict(_FAILED.get(group, {}))


def load_plugins(group: str = PLUGIN_GROUP) -> tuple[str, ...]:
    """Import every plug-in module of ``group`` once; returns the names of those imported.

    Marked loaded before importing, so a plug-in module that looks names up while the
    group loads sees what is registered so far instead of recursing. A third-party entry
    point whose module fails to import is warned once, in one line naming it
    (:class:`PluginImportWarning`), and skipped: runs that do not use its plug-ins go on,
    and a lookup of a name it would have registered names it (:meth:`Registry.lookup`).
    MobiDFL's own modules raise as is; then, or on Ctrl-C, the group stays unloaded (the
    next lookup raises the same error again).

    WHY: one broken installed package used to stop every ``mobidfl run``, with a
    50-line traceback that named no entry point.
    """
    if group in _LOADED:
        return _LOADED[group]
    modules = tuple(plugin_modules(group))
    about = {module: (label, ours) for module, label, ours in _declared(group)}
    _LOADED[group] = modules
    failed: dict[str, str] = {}
    _FAILED[group] = failed
    try:
        for module in modules:
            label, ours = about.get(module, (module, False))
            try:
                importlib.import_module(module)
            except Exception as exc:
                if ours:
                    raise
                why = " ".join(str(exc).split()) or "no message"
                failed[label] = f"{type(exc).__name__}: {shortened_text(why)}"
                if not warned_by_parent():
                    warnings.warn_explicit(
                        f"entry point {label} of group {group} failed to import "
                        f"({failed[label]}); its plug-ins are not available",
                        PluginImportWarning, filename="mobidfl", lineno=0,
                    )
    except BaseException:
        del _LOADED[group]
        _FAILED.pop(group, None)
        raise
    _LOADED[group] = tuple(m for m in modules if about.get(m, (m,))[0] not in failed)
    return _LOADED[group]


def shortened_text(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (an exception's message in a one-line warning)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Registry[T](Mapping[str, T]):
    """Plug-ins (classes or builder functions) by name for one ``kind``.

    Iteration follows registration order (what menus show); :meth:`names` is sorted (what
    error messages list). With ``group``, the first lookup imports that entry-point group's
    modules (:func:`load_plugins`); registering never does.

    Parameters
    ----------
    kind
        What the registry holds, also the setting named in errors (``policy``).
    group
        The entry-point group whose modules register plug-ins here (``mobidfl.plugins``);
        ``None``: only what is registered in code.
    """

    changes: ClassVar[int] = 0
    """Plug-ins added or removed in any registry so far: one number that never repeats, so
    what is kept per registry state (a setting name's split) is keyed on it without loading
    every entry-point group to read each registry's :attr:`version`."""

    def __init__(self, kind: str, *, group: str | None = None) -> None:
        self.kind = str(kind)
        self.group = group
        self._entries: dict[str, T] = {}
        self._version = 0

    def _load(self) -> None:
        if self.group is not None:
            load_plugins(self.group)

    # --- registration -----------------------------------------------------------------------
    @overload
    def register(self, name_or_cls: str, /) -> Callable[[T], T]: ...

    @overload
    def register(self, name_or_cls: T, /) -> T: ...

    def register(self, name_or_cls: str | T, /) -> Callable[[T], T] | T:
        """Register a plug-in.

        ``@reg.register`` (a class, under its ``name`` attribute) or ``@reg.register("name")`` (a
        class or a function). Returns the plug-in, so both work as decorators.

        Raises
        ------
        ValueError
            the name is not a Python identifier, or a different class already
            holds it (registering the same class again is a no-op).
        TypeError
            ``@reg.register`` on a class without a string ``name`` attribute.
        """
        if isinstance(name_or_cls, str):
            name = name_or_cls

            def decorate(cls: T) -> T:
                self._add(name, cls)
                return cls

            return decorate
        cls = name_or_cls
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            label = getattr(cls, "__name__", cls)
            raise TypeError(f"{label} needs a class attribute `name` to be a {self.kind}")
        self._add(name, cls)
        return cls

    def _add(self, name: str, cls: T) -> None:
        if not name.isidentifier():
            raise ValueError(
                f"{self.kind} name {name!r} is not an identifier (letters, digits, underscores)"
            )
        held = self._entries.get(name)
        if held is not None and held is not cls:
            raise ValueError(
                f"{self.kind} name {name!r} is registered twice "
                f"({_where(held)} and {_where(cls)})"
            )
        if held is None:
            self._entries[name] = cls
            self._version += 1
            Registry.changes += 1

    def unregister(self, name: str) -> T:
        """Remove and return the plug-in under ``name`` (a test's toy plug-in cleans up)."""
        self._load()
        plugin = self._entries.pop(name)
        self._version += 1
        Registry.changes += 1
        return plugin

    @property
    def version(self) -> int:
        """A number that changes whenever a plug-in is added or removed.

        It is read after loading the entry-point group: what is derived from the registered
        plug-ins, such as the settings namespaces, is recomputed only when it changes.
        """
        self._load()
        return self._version

    # --- lookup -----------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._load()
        return sorted(self._entries)

    def lookup(self, name: str, *, setting: str | None = None) -> T:
        """The plug-in under ``name``.

        Unknown names raise :class:`ConfigError` naming ``setting`` (default: this registry's
        ``kind``) and the choices.
        """
        self._load()
        if name not in self._entries:
            raise ConfigError(setting or self.kind, name, self.choices())
        return self._entries[name]

    def choices(self, names: list[str] | None = None) -> str:
        """What a setting naming a plug-in accepts, in words.

        ``"one of a, b"`` (``names``, default :meth:`names`), plus the entry points of the group
        that failed to import (the name asked for may be one of theirs).
        """
        text = "one of " + ", ".join(self.names() if names is None else names)
        broken = failed_plugins(self.group) if self.group is not None else {}
        if broken:
            text += "; not available: " + "; ".join(
                f"entry point {label} failed to import ({why})" for label, why in broken.items()
            )
        return text

    def make(self, name: str, /, **kwargs: Any) -> Any:
        """What the plug-in under ``name`` builds from ``kwargs`` (a class: an instance)."""
        plugin: Any = self.lookup(name)
        return plugin(**kwargs)

    # --- Mapping (read-only, dict-like) -------------------------------------------------------
    def __getitem__(self, name: str) -> T:
        self._load()
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


def _where(plugin: object) -> str:
    return f"{getattr(plugin, '__module__', '?')}.{getattr(plugin, '__qualname__', plugin)}"
