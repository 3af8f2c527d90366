"""The plug-in registries, one per setting that names a plug-in.

Ground floor: policies, mobility models, datasets, partitions and nets register *into*
these instances from their own modules (upper floors), and :class:`mobidfl.model.config.Config`
checks names against them without importing those modules. The first lookup imports the
modules declared under the ``mobidfl.plugins`` entry points (:mod:`mobidfl.registry`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from mobidfl.registry import PLUGIN_GROUP, Registry

__all__ = [
    "DATASETS", "DATASET_CHECKS", "LINKS", "MOBILITY_MODELS", "NETS", "PARTITIONS", "POLICIES",
    "failing_plugin",
]

POLICIES: Registry[Any] = Registry("policy", group=PLUGIN_GROUP)
"""Exchange policy classes (``mobidfl.model.policies``; setting ``policy`` / ``<kind>.policy``)."""

MOBILITY_MODELS: Registry[Any] = Registry("mobility", group=PLUGIN_GROUP)
"""Mobility model classes (``mobidfl.agents.mobility``; setting ``<kind>.mobility``)."""

DATASETS: Registry[Any] = Registry("dataset", group=PLUGIN_GROUP)
"""Dataset loaders ``(root, test_size, seed) -> Dataset`` (``mobidfl.model.learning.data``)."""

DATASET_CHECKS: Registry[Any] = Registry("dataset check", group=PLUGIN_GROUP)
"""Optional presence checks ``(root) -> None`` by dataset name: read and check the files
whole, raising what the loader raises, without making tensors (so resolving ``auto:`` in a
world without learning imports no torch). A dataset without one is checked by loading it."""

PARTITIONS: Registry[Any] = Registry("partition", group=PLUGIN_GROUP)
"""Data partition functions (``mobidfl.model.learning.partition``; setting ``partition``)."""

NETS: Registry[Any] = Registry("net", group=PLUGIN_GROUP)
"""Network builders ``(input_shape, num_classes) -> nn.Module`` (setting ``model``)."""

LINKS: Registry[Any] = Registry("link", group=PLUGIN_GROUP)
"""Link model classes (``mobidfl.model.links``; setting ``link.model``, alias ``link``)."""


OWN_PACKAGES = frozenset({"mobidfl"})
"""MobiDFL's own top-level package (``mobidfl.model``, ``mobidfl.agents``, ... are in it): its
plug-ins are MobiDFL's code, not a third party's."""


def failing_plugin(exc: BaseException) -> str | None:
    """``exc`` in one line naming the plug-in whose code raised it, or ``None`` when none did.

    The innermost frame of the traceback that runs a registered plug-in (a method of an
    instance of a registered class, or a registered function) names it, e.g. ``policy
    'boom' (tests.x.Boom) raised RuntimeError: no exchange today``. MobiDFL's own plug-ins
    (:data:`OWN_PACKAGES`) are not named: an error there is MobiDFL's, its traceback shown.

    WHY: a plug-in policy whose ``exchange()`` raised stopped ``mobidfl run`` with a
    34-line traceback that named no policy; a plug-in is third-party code, so the one line
    says whose it is.
    """
    classes: dict[type, tuple[str, str]] = {}
    codes: dict[Any, tuple[str, str, Any]] = {}
    for registry in (POLICIES, MOBILITY_MODELS, LINKS, DATASETS, DATASET_CHECKS, PARTITIONS,
                     NETS):
        for name, plugin in list(registry._entries.items()):  # loaded: no import here
            if str(getattr(plugin, "__module__", "")).partition(".")[0] in OWN_PACKAGES:
                continue  # MobiDFL's own plug-in: a bug here, its traceback says where
            if isinstance(plugin, type):
                classes.setdefault(plugin, (registry.kind, name))
            elif getattr(plugin, "__code__", None) is not None:
                codes.setdefault(plugin.__code__, (registry.kind, name, plugin))
    found = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
        if owner is not None and type(owner) in classes:
            kind, name = classes[type(owner)]
            found = (kind, name, type(owner))
        elif frame.f_code in codes:
            found = codes[frame.f_code]
        tb = tb.tb_next
    if found is None:
        return None
    kind, name, plugin = found
    where = f"{getattr(plugin, '__module__', '?')}.{getattr(plugin, '__qualname__', plugin)}"
    text = " ".join(str(exc).split()) or "no message"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{kind} {name!r} ({where}) raised {type(exc).__name__}: {text}"
