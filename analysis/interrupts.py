"""Ctrl-C that is never lost: shared by ``mobidfl run`` and the sweep driver."""

from __future__ import annotations

import signal
import threading
from typing import Any


class CtrlC:
    """SIGINT handler that raises KeyboardInterrupt *and* remembers that it was pressed.

    WHY: a KeyboardInterrupt raised while Python runs a finaliser (``__del__``, a weakref
    callback, garbage collection) is printed as "Exception ignored" and lost, so a Ctrl-C
    that lands there would let the run go on. The flag makes the next step boundary raise
    it again (:meth:`check`), so a Ctrl-C always stops the run within one step. A SIGINT
    the process inherited as ignored (a background job started by a script) stays ignored.
    """

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    def __call__(self, signum: int, frame: Any) -> None:
        """The SIGINT handler: remember the press and raise KeyboardInterrupt."""
        self.pressed = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed (at a step boundary)."""
        if self.pressed:
            raise KeyboardInterrupt

    def __enter__(self) -> CtrlC:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self)  # ignored stays ignored
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
