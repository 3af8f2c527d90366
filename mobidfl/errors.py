"""Errors shared by every layer of MobiDFL."""

from __future__ import annotations


def _rebuild(cls: type[BaseException], args: tuple[object, ...],
             state: dict[str, object]) -> BaseException:
    """An exception made again from its class, ``args`` and attributes (see below)."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class PicklableError(Exception):
    """Mix-in: an exception whose ``__init__`` takes other arguments than its message.

    WHY: pickle makes an exception again with ``cls(*self.args)``; an ``__init__(setting,
    value, allowed)`` given the one formatted message raises TypeError, so a worker process
    of a user's ``multiprocessing.Pool`` that raises it cannot send it back and the pool
    waits forever. Rebuilt from its class, args and attributes instead, message unchanged.
    """

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class ConfigError(PicklableError, ValueError):
    """A setting has a value that is not allowed.

    Raised before a run starts so that nothing is half-written; the message names the
    setting, the value and what is allowed, on one line.

    Parameters
    ----------
    setting
        The setting's public name (``vehicle.speed``), or the option or file refused
        (``--out``, ``contact_trace.file``).
    value
        The refused value; the message echoes it cut to :data:`MAX_ECHO` characters.
    allowed
        What would be accepted, in words (``"a number > 0"``).
    """

    def __init__(self, setting: str, value: object, allowed: str) -> None:
        message = f"setting '{setting}' = {shortened(value)} is not allowed: {allowed}"
        super().__init__(message)
        self.setting = setting
        self.value = value
        self.allowed = allowed


def bad_argument(argument: str, value: object, expected: str) -> ValueError:
    """A :class:`ValueError` for a function's own argument (``mask``, ``W``), not a setting.

    WHY: :class:`ConfigError` says *setting ... is not allowed* and so sends a user looking for
    a setting that does not exist; an argument no user gives means the calling code is wrong.
    Same one line: the argument, the value cut to :data:`MAX_ECHO`, what was expected.
    """
    return ValueError(f"argument '{argument}' = {shortened(value)} is not valid: {expected}")


MAX_ECHO = 200
"""Characters of a refused value echoed in a message (a 100,000-seed list stays one short line)."""


def shortened(value: object, limit: int = MAX_ECHO) -> str:
    """``repr(value)``, cut to about ``limit`` characters with how long it was.

    WHY: an error echoes the value it refuses; a huge one (``--seeds 100001`` as a list, a
    pasted file) would otherwise print a line of hundreds of kilobytes.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... {text[-half // 2:]} ({len(text):,} characters)"


class DatasetUnavailable(ValueError):
    """The requested dataset's files are not on this machine (message says how to get them).

    Here, not in :mod:`mobidfl.model.learning.data`, so the presets (ground floor) can tell a
    missing dataset from a broken one without importing the loaders' module.
    """


class DatasetDamaged(DatasetUnavailable):
    """A dataset's files are there but damaged (bad header, cut short, labels out of range).

    A subclass of :class:`DatasetUnavailable` (both stop a run in one line, exit 2), kept
    apart so that an ``auto:`` dataset refuses a damaged file instead of silently falling
    back to the next set.
    """
