"""Helper processes that end with the command that started them.

A ``mobidfl bench`` or ``sweep`` runs its runs in a process pool whose workers are forked
by multiprocessing's fork server. When the command is killed with SIGKILL, nothing of it
runs again: without help, the fork server, the workers (each holding torch, about 2.4 GB in
all) and the resource tracker stay alive, and they keep the command's standard streams
open, so a caller reading them never sees their end. Two mechanisms end them:

* :func:`die_with_parent`: Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``): the
  kernel sends SIGKILL to this process the moment the thread that started it ends. The fork
  server sets it at start (:mod:`mobidfl.forkserver_preload`, its first preload module), and
  each pool worker in its initializer, so the chain command -> fork server -> workers ends
  together; the resource tracker then reads the end of its pipe and exits.
* :func:`process_gone`: for a watcher that polls its command (the pool workers' thread):
  a killed command whose caller has not reaped it yet is a zombie, which ``kill(pid, 0)``
  still finds; the process's ``/proc`` state says it is dead.

docs/reference/errors.md ("A killed command") says what a user sees.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

__all__ = ["die_with_parent", "process_gone"]

PR_SET_PDEATHSIG = 1
"""``prctl`` option number (linux/prctl.h)."""


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread ends.

    Parameters
    ----------
    sig
        The signal (SIGKILL: the process holds no state worth saving; the command that
        would have read it is gone).

    Returns
    -------
    bool
        True where set (Linux); False elsewhere, where the caller's own watch remains.

    Notes
    -----
    The signal follows the *thread* that forked this process, so a process pool made in a
    thread that ends before the pool would lose its workers: the sweep's pools are made by
    the thread that runs the sweep and live no longer than it. A parent already dead when
    this is called sends nothing; callers keep a poll (:func:`process_gone`) for that gap.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended, counting a zombie (dead, not yet reaped) as ended.

    Parameters
    ----------
    pid
        The process to look at.

    Returns
    -------
    bool
        True when no such process exists, or it is a zombie; where ``/proc`` is missing
        (not Linux), only whether ``kill(pid, 0)`` finds it.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the pid was reused by another user's process
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # reaped since kill(), or no /proc at all (kill found it)
        return Path("/proc/self").exists()
    except OSError:
        return False
    # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")"
    return stat[stat.rfind(")") + 2 :][:1] in ("Z", "X")
