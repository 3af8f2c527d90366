"""Errors shared by every layer of MobiDFL."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting has a value that is not allowed.

    Raised before a run starts so that nothing is half-written; the message names the
    setting, the value and what is allowed, on one line.
    """

    def __init__(self, setting: str, value: object, allowed: str) -> None:
        message = f"setting '{setting}' = {value!r} is not allowed: {allowed}"
        super().__init__(message)
        self.setting = setting
        self.value = value
        self.allowed = allowed


class DatasetUnavailable(ValueError):
    """The requested dataset's files are not on this machine (message says how to get them).

    Here, not in :mod:`model.learning.data`, so the presets (ground floor) can tell a
    missing dataset from a broken one without importing the loaders' module."""
