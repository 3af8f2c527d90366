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
once, on its first lookup: the registries, and :mod:`model.config` that checks names
against them, never import the layers above.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, overload

from mobidfl.errors import ConfigError

__all__ = ["PLUGIN_GROUP", "Registry", "load_plugins", "plugin_modules"]

PLUGIN_GROUP = "mobidfl.plugins"
"""Entry-point group naming the modules that register MobiDFL's plug-ins."""

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
"""This checkout's project file: a source checkout run with ``PYTHONPATH`` (or an editable
install made before an entry point was added) finds its built-in plug-ins there."""


def plugin_modules(group: str = PLUGIN_GROUP) -> list[str]:
    """Module names declared under ``group``: this checkout's ``pyproject.toml`` first, then
    every installed distribution's entry points (duplicates once)."""
    modules: list[str] = []
    if _PYPROJECT.is_file():
        project = tomllib.loads(_PYPROJECT.read_text()).get("project", {})
        if project.get("name") == "mobidfl":
            modules += project.get("entry-points", {}).get(group, {}).values()
    modules += [ep.value for ep in metadata.entry_points(group=group)]
    return list(dict.fromkeys(m.partition(":")[0].strip() for m in modules))


_LOADED: dict[str, tuple[str, ...]] = {}


def load_plugins(group: str = PLUGIN_GROUP) -> tuple[str, ...]:
    """Import every plug-in module of ``group`` once; returns their names.

    Marked loaded before importing, so a plug-in module that looks names up while the
    group loads sees what is registered so far instead of recursing; a failed import
    leaves the group unloaded (the next lookup raises the same error again).
    """
    if group in _LOADED:
        return _LOADED[group]
    modules = tuple(plugin_modules(group))
    _LOADED[group] = modules
    try:
        for module in modules:
            importlib.import_module(module)
    except BaseException:
        del _LOADED[group]
        raise
    return modules


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
        """Register a plug-in: ``@reg.register`` (a class, under its ``name`` attribute) or
        ``@reg.register("name")`` (a class or a function). Returns the plug-in, so both work
        as decorators.

        Raises:
            ValueError: the name is not a Python identifier, or a different class already
                holds it (registering the same class again is a no-op).
            TypeError: ``@reg.register`` on a class without a string ``name`` attribute.
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

    def unregister(self, name: str) -> T:
        """Remove and return the plug-in under ``name`` (a test's toy plug-in cleans up)."""
        self._load()
        plugin = self._entries.pop(name)
        self._version += 1
        return plugin

    @property
    def version(self) -> int:
        """A number that changes whenever a plug-in is added or removed (after loading the
        entry-point group): what is derived from the registered plug-ins, such as the
        settings namespaces, is recomputed only when it changes."""
        self._load()
        return self._version

    # --- lookup -----------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._load()
        return sorted(self._entries)

    def lookup(self, name: str, *, setting: str | None = None) -> T:
        """The plug-in under ``name``; unknown names raise :class:`ConfigError` naming
        ``setting`` (default: this registry's ``kind``) and the choices."""
        self._load()
        if name not in self._entries:
            raise ConfigError(setting or self.kind, name, "one of " + ", ".join(self.names()))
        return self._entries[name]

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
