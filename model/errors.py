"""Kept for existing imports: the implementation is :mod:`mobidfl.errors` (the ground floor).

``maps/`` and ``agents/`` import ``mobidfl.errors``; this name stays for code written against it.
"""

from mobidfl.errors import (
    MAX_ECHO,
    ConfigError,
    DatasetDamaged,
    DatasetUnavailable,
    shortened,
)

__all__ = [
    "ConfigError",
    "DatasetDamaged",
    "DatasetUnavailable",
    "MAX_ECHO",
    "shortened",
]
