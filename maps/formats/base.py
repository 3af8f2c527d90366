"""The map-format contract: one reader class per street-map file format, registered by name.

A format declares which file names it claims (:attr:`MapFormat.suffixes`), how a file is
read into an :class:`~mobidfl.maps.edges.EdgeTable` (:meth:`MapFormat.read`), how it is checked
whole without building the table (:meth:`MapFormat.check`) and what the map cache keys on
(:meth:`MapFormat.digest`). :func:`mobidfl.maps.sources.load_edges` picks the registered format
whose suffix is the longest that ends the file's name, so ``.net.xml`` (SUMO) wins over
``.xml`` (OSM XML) whatever order they registered in.

Adding a format is one module with one class under ``@register_map_format`` plus one
registration line: its entry point under ``mobidfl.map_formats`` in ``pyproject.toml``
(imported on the registry's first lookup, like the policy plug-ins), see
``docs/reference/layout.md``.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from mobidfl import inflate
from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, MapDataError
from mobidfl.registry import Registry

__all__ = [
    "MAP_FORMATS",
    "MAP_FORMAT_GROUP",
    "MapFormat",
    "file_digest",
    "format_for",
    "inflated_bytes",
    "max_inflated_bytes",
    "register_map_format",
]

MAP_FORMAT_GROUP = "mobidfl.map_formats"
"""Entry-point group naming the modules that register map formats."""


class MapFormat(ABC):
    """One street-map file format: the suffixes it claims, its reader, check and cache key.

    Subclasses set :attr:`name` and :attr:`suffixes` and implement :meth:`read`; a format
    that can tell a whole, correct file more cheaply than by reading it overrides
    :meth:`check`. Every method refuses a bad file with a one-line
    :class:`~mobidfl.maps.edges.MapDataError` (the loader adds the file's name) or
    :class:`~mobidfl.errors.ConfigError` (setting ``map``), never a traceback and never a
    silently smaller map.
    """

    name: ClassVar[str]
    """Registry key (a Python identifier)."""
    suffixes: ClassVar[tuple[str, ...]]
    """Lower-case file-name endings this format reads, each starting with ``.``."""

    @abstractmethod
    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        """The file's streets as an :class:`EdgeTable` (any CRS; the world projects it).

        Parameters
        ----------
        path
            An existing, readable file whose name ends with one of :attr:`suffixes`.
        max_inflated
            Largest size a compressed file may inflate to (bytes; ``None``: the default
            cap, :data:`mobidfl.inflate.MAX_INFLATED_BYTES`). Compressed files are inflated
            once.
        """

    def check(self, path: Path, *, max_inflated: int | None = None) -> None:
        """Refuse a file that is not whole and correct; the default reads it whole."""
        self.read(path, max_inflated=max_inflated)

    def digest(self, path: Path) -> str:
        """What the street-array cache keys on: the file's bytes as stored (SHA-256)."""
        return file_digest(path, prefix=b"file")


class _MapFormats(Registry[Any]):
    """The map-format registry: checks a format's declared contract when it registers."""

    def _add(self, name: str, cls: Any) -> None:
        if not (isinstance(cls, type) and issubclass(cls, MapFormat)):
            raise TypeError(f"{cls!r} is not a MapFormat subclass")
        if getattr(cls, "__abstractmethods__", None):
            raise TypeError(f"map format {name!r} does not implement "
                            f"{', '.join(sorted(cls.__abstractmethods__))}")
        suffixes = getattr(cls, "suffixes", None)
        if (not isinstance(suffixes, tuple) or not suffixes or not all(
                isinstance(s, str) and s.startswith(".") and s == s.lower() and len(s) > 1
                for s in suffixes)):
            raise ValueError(f"map format {name!r} needs `suffixes`: a tuple of lower-case "
                             f"file endings such as ('.graphml',), not {suffixes!r}")
        for other_name, other in self._entries.items():
            taken = set(other.suffixes) & set(suffixes)
            if other is not cls and taken:
                raise ValueError(f"map format {name!r} claims {sorted(taken)[0]!r}, already "
                                 f"read by map format {other_name!r}")
        super()._add(name, cls)


MAP_FORMATS: Registry[Any] = _MapFormats("map_format", group=MAP_FORMAT_GROUP)
"""Map-format classes by name (built-in ones in ``maps/formats/``)."""


def register_map_format[F: type[MapFormat]](cls: F) -> F:
    """Class decorator: register ``cls`` under its ``name`` (contract checked now).

    Parameters
    ----------
    cls
        A :class:`MapFormat` subclass with ``name``, lower-case ``suffixes`` and ``read``.

    Returns
    -------
    type
        ``cls`` itself, registered.
    """
    return MAP_FORMATS.register(cls)


def format_for(path: str | Path) -> MapFormat | None:
    """The format reading ``path``.

    The registered one with the longest suffix ending its name (case-insensitive), or None.
    """
    name = Path(path).name.lower()
    best: tuple[int, type[MapFormat]] | None = None
    for cls in MAP_FORMATS.values():
        for suffix in cls.suffixes:
            if name.endswith(suffix) and (best is None or len(suffix) > best[0]):
                best = (len(suffix), cls)
    return None if best is None else best[1]()


def file_suffixes() -> tuple[str, ...]:
    """Every suffix a registered format reads, by format name."""
    return tuple(s for name in MAP_FORMATS.names() for s in MAP_FORMATS[name].suffixes)


def file_digest(path: Path, *, prefix: bytes) -> str:
    """SHA-256 of ``prefix`` then the file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256(prefix)
    try:
        with Path(path).open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:  # a map that cannot be *read*: never "could not write"
        raise ConfigError("map", str(path), f"a readable map file (cannot read it: "
                          f"{exc.strerror or exc})") from None
    return digest.hexdigest()


def max_inflated_bytes(max_inflated: int | None) -> int:
    """``max_inflated``, or the default cap as it is now (a test may lower it)."""
    return inflate.MAX_INFLATED_BYTES if max_inflated is None else int(max_inflated)


def inflated_bytes(path: Path, *, max_inflated: int | None = None) -> bytes:
    """The file's bytes, inflated once (capped) when its suffix names a compression.

    Raises
    ------
    MapDataError
        a compressed stream cut short, not that codec, or inflating past the
        cap (refused as soon as it passes it).
    OSError
        the file cannot be read.
    """
    codec = inflate.codec_of(path)
    if codec is None:
        return Path(path).read_bytes()
    cap = max_inflated_bytes(max_inflated)
    try:
        return inflate.read_inflated(path, cap=cap, codec=codec)
    except inflate.InflateTooLarge as exc:
        raise MapDataError(f"at most {inflate.size_text(cap)} once inflated ({exc}; refused "
                           "before inflating the rest)") from None
    except inflate.InflateError as exc:
        raise MapDataError(f"a whole {codec} stream ({exc})") from None
