"""One registry class for every plug-in kind (exchange policies, mobility models).

Ground floor: imports nothing of ours but :mod:`model.errors`, so any layer may hold a
registry without importing upwards. A :class:`Registry` is a read-only mapping from name to
class (``names in REG``, ``REG[name]``, ``REG.keys()`` keep working where a plain dict was
used before) that refuses what a dict would silently accept: a second class under a taken
name, and names that cannot be written as a setting (``--set policy=<name>``, TOML keys).
Unknown names at use time raise one :class:`~model.errors.ConfigError` listing the choices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, overload

from model.errors import ConfigError

__all__ = ["Registry"]


class Registry[T](Mapping[str, type[T]]):
    """Classes by name for one plug-in ``kind`` (also the setting named in errors).

    Iteration follows registration order (what menus show); :meth:`names` is sorted (what
    error messages list).
    """

    def __init__(self, kind: str) -> None:
        self.kind = str(kind)
        self._entries: dict[str, type[T]] = {}

    # --- registration -----------------------------------------------------------------------
    @overload
    def register(self, name_or_cls: str, /) -> Callable[[type[T]], type[T]]: ...

    @overload
    def register(self, name_or_cls: type[T], /) -> type[T]: ...

    def register(self, name_or_cls: str | type[T], /) -> Callable[[type[T]], type[T]] | type[T]:
        """Register a class: ``@reg.register`` (under its ``name`` attribute) or
        ``@reg.register("name")``. Returns the class, so both work as decorators.

        Raises:
            ValueError: the name is not a Python identifier, or a different class already
                holds it (registering the same class again is a no-op).
            TypeError: ``@reg.register`` on a class without a string ``name`` attribute.
        """
        if isinstance(name_or_cls, str):
            name = name_or_cls

            def decorate(cls: type[T]) -> type[T]:
                self._add(name, cls)
                return cls

            return decorate
        cls = name_or_cls
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{cls.__name__} needs a class attribute `name` to be a {self.kind}")
        self._add(name, cls)
        return cls

    def _add(self, name: str, cls: type[T]) -> None:
        if not name.isidentifier():
            raise ValueError(
                f"{self.kind} name {name!r} is not an identifier (letters, digits, underscores)"
            )
        held = self._entries.get(name)
        if held is not None and held is not cls:
            raise ValueError(
                f"{self.kind} name {name!r} is registered twice "
                f"({held.__module__}.{held.__qualname__} and {cls.__module__}.{cls.__qualname__})"
            )
        self._entries[name] = cls

    def unregister(self, name: str) -> type[T]:
        """Remove and return the class under ``name`` (a test's toy plug-in cleans up)."""
        return self._entries.pop(name)

    # --- lookup -----------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def lookup(self, name: str, *, setting: str | None = None) -> type[T]:
        """The class under ``name``; unknown names raise :class:`ConfigError` naming
        ``setting`` (default: this registry's ``kind``) and the choices."""
        if name not in self._entries:
            raise ConfigError(setting or self.kind, name, "one of " + ", ".join(self.names()))
        return self._entries[name]

    def make(self, name: str, /, **kwargs: Any) -> T:
        """An instance of the class under ``name``, built with ``kwargs``."""
        return self.lookup(name)(**kwargs)

    # --- Mapping (read-only, dict-like) -------------------------------------------------------
    def __getitem__(self, name: str) -> type[T]:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
