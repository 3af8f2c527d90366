"""Street-map file formats: one reader class per format, registered by name.

The contract and the registry are in :mod:`mobidfl.maps.formats.base`; each built-in format is one
module here, declared as an entry point under ``mobidfl.map_formats`` in ``pyproject.toml``
and imported on the registry's first lookup.
"""

from mobidfl.maps.formats.base import (
    MAP_FORMATS,
    MapFormat,
    file_suffixes,
    format_for,
    register_map_format,
)

__all__ = ["MAP_FORMATS", "MapFormat", "file_suffixes", "format_for", "register_map_format"]
