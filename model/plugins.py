"""Kept for existing imports: the implementation is :mod:`mobidfl.plugins` (the ground floor).

``maps/`` and ``agents/`` import ``mobidfl.plugins``; this name stays for code written against it.
"""

from mobidfl.plugins import (
    DATASET_CHECKS,
    DATASETS,
    LINKS,
    MOBILITY_MODELS,
    NETS,
    PARTITIONS,
    POLICIES,
)

__all__ = [
    "DATASETS",
    "DATASET_CHECKS",
    "LINKS",
    "MOBILITY_MODELS",
    "NETS",
    "PARTITIONS",
    "POLICIES",
]
