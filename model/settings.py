"""Kept for existing imports: the implementation is :mod:`mobidfl.settings` (the ground floor).

``maps/`` and ``agents/`` import ``mobidfl.settings``; this name stays for code written against it.
"""

from mobidfl.settings import (
    Check,
    PluginSettings,
    at_least_one,
    check_value,
    non_negative,
    one_of,
    plugin_settings_classes,
    positive,
    setting,
    unit_interval,
)

__all__ = [
    "Check",
    "PluginSettings",
    "at_least_one",
    "check_value",
    "non_negative",
    "one_of",
    "plugin_settings_classes",
    "positive",
    "setting",
    "unit_interval",
]
