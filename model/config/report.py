"""One command's report: each warning once per command, none from the processes it starts.

The inert-setting warning (:mod:`mobidfl.model.config.inert`) and the old-name warning
(:mod:`mobidfl.model.config.names`) both ask here whether a message is new in this command.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from mobidfl.registry import COMMAND_ENV

_SHOWN: set[str] | None = None
"""Messages shown in this command (:func:`one_report`); ``None`` outside a command."""


def _in_command() -> bool:
    """Whether this process runs a command (inside :func:`one_report`)."""
    return _SHOWN is not None


def _first_in_command(message: str) -> bool:
    """Whether ``message`` is new in this command (then recorded); always ``True`` outside one."""
    if _SHOWN is None:
        return True
    if message in _SHOWN:
        return False
    _SHOWN.add(message)
    return True


@contextlib.contextmanager
def one_report() -> Iterator[None]:
    """One command (``mobidfl run``, ``reproduce``, ...).

    Each inert setting is warned once, whatever number of configs it resolves (a run resolves its
    config several times, a reproduction one per variant and run), and never by the processes it
    starts.

    WHY: a run printed the same line twice, a reproduction 41 times.
    """
    global _SHOWN  # noqa: PLW0603 - one command's warned set, put back when it ends
    before, env_before = _SHOWN, os.environ.get(COMMAND_ENV)
    _SHOWN = set()
    os.environ[COMMAND_ENV] = str(os.getpid())
    try:
        yield
    finally:
        _SHOWN = before
        if env_before is None:
            os.environ.pop(COMMAND_ENV, None)
        else:
            os.environ[COMMAND_ENV] = env_before
