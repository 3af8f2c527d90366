"""The plug-in registries, one per setting that names a plug-in.

Ground floor: policies, mobility models, datasets, partitions and nets register *into*
these instances from their own modules (upper floors), and :class:`model.config.Config`
checks names against them without importing those modules. The first lookup imports the
modules declared under the ``mobidfl.plugins`` entry points (:mod:`mobidfl.registry`).
"""

from __future__ import annotations

from typing import Any

from mobidfl.registry import PLUGIN_GROUP, Registry

__all__ = [
    "DATASETS", "DATASET_CHECKS", "LINKS", "MOBILITY_MODELS", "NETS", "PARTITIONS", "POLICIES",
]

POLICIES: Registry[Any] = Registry("policy", group=PLUGIN_GROUP)
"""Exchange policy classes (``model.policies``; setting ``policy`` / ``<kind>.policy``)."""

MOBILITY_MODELS: Registry[Any] = Registry("mobility", group=PLUGIN_GROUP)
"""Mobility model classes (``agents.mobility``; setting ``<kind>.mobility``)."""

DATASETS: Registry[Any] = Registry("dataset", group=PLUGIN_GROUP)
"""Dataset loaders ``(root, test_size, seed) -> Dataset`` (``model.learning.data``)."""

DATASET_CHECKS: Registry[Any] = Registry("dataset check", group=PLUGIN_GROUP)
"""Optional presence checks ``(root) -> None`` by dataset name: read and check the files
whole, raising what the loader raises, without making tensors (so resolving ``auto:`` in a
world without learning imports no torch). A dataset without one is checked by loading it."""

PARTITIONS: Registry[Any] = Registry("partition", group=PLUGIN_GROUP)
"""Data partition functions (``model.learning.partition``; setting ``partition``)."""

NETS: Registry[Any] = Registry("net", group=PLUGIN_GROUP)
"""Network builders ``(input_shape, num_classes) -> nn.Module`` (setting ``model``)."""

LINKS: Registry[Any] = Registry("link", group=PLUGIN_GROUP)
"""Link model classes (``model.links``; setting ``link.model``, alias ``link``)."""
