"""Kept for existing imports: the implementation is :mod:`mobidfl.registry` (the ground floor).

``maps/`` and ``agents/`` import ``mobidfl.registry``; this name stays for code written against it.
"""

from mobidfl.registry import (
    PLUGIN_GROUP,
    Registry,
    load_plugins,
    plugin_modules,
)

__all__ = [
    "PLUGIN_GROUP",
    "Registry",
    "load_plugins",
    "plugin_modules",
]
