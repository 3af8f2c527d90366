"""A bounded CPU burner for a test session: ``pytest --busy-cpu N`` (``make test-busy``).

WHY: a test whose verdict depends on how fast the machine is passes on an idle machine and
fails beside other jobs (a sweep that finished before its fault was injected, a deadline
that a busy CPU misses). Running the suite with busy loops beside it finds them before
another machine does. Each burner is one Python busy loop, at the niceness of the session
that starts it (``make test-busy`` runs both under ``nice``), so the loops and the tests
share the cores as equals.

Bounded three ways: ``N`` processes; each ends by itself after ``max_s`` seconds; and each
ends with the session, however the session ends: :func:`stop` at the session's end, and
Linux's parent-death signal (:func:`mobidfl.lifetime.die_with_parent`) when the session is
killed.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_BURN = r"""
import os, sys, time
sys.path.insert(0, sys.argv[3])
from mobidfl.lifetime import die_with_parent
die_with_parent()
if os.getppid() != int(sys.argv[1]):  # the session ended before the signal was set
    sys.exit(0)
deadline = time.monotonic() + float(sys.argv[2])
print("burning", flush=True)
while time.monotonic() < deadline:
    for _ in range(1_000_000):  # tens of ms of one core between two clock reads
        pass
"""


def start(n: int, *, max_s: float) -> list[subprocess.Popen]:
    """Start ``n`` busy loops and return once each is burning (it printed so).

    Parameters
    ----------
    n
        Burners (0 starts none).
    max_s
        Each ends by itself after this many seconds.

    Returns
    -------
    list of subprocess.Popen
        The burners, for :func:`stop`.
    """
    import os

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BURN, str(os.getpid()), str(max_s), str(ROOT)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        for _ in range(n)
    ]
    for proc in procs:
        line = proc.stdout.readline()  # the event: it is in its loop (or it died: "")
        if line.strip() != "burning":
            stop(procs)
            raise RuntimeError(f"a CPU burner did not start (exit {proc.poll()})")
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    """Kill the burners and reap them."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    for proc in procs:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
