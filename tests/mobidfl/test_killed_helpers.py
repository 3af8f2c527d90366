"""No helper process outlives a SIGKILLed ``mobidfl sweep`` (``bench`` runs its runs through
the same pool, ``mobidfl.analysis.executors.run_local``).

The case: a caller runs the command with its output piped and reads until the end of the
output before it reaps the command (``subprocess.run(..., capture_output=True)`` does). The
command is killed. Its pool's fork server, workers and resource tracker inherited the pipes,
so the caller sees no end while they live; and the killed command is a zombie until the
caller reaps it, which a worker's ``kill(pid, 0)`` still found alive: they waited forever
(2.4 GB of torch processes). Now the fork server and the workers die with their parent
(Linux's parent-death signal, ``mobidfl/lifetime.py``), and the worker's poll counts a
zombie as dead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mobidfl.lifetime import process_gone

ROOT = Path(__file__).resolve().parents[2]
WORLD = ('map = "grid:4x4:100"\nvehicles = 4\npedestrians = 0\nsensors = 0\nuavs = 0\n'
         'dataset = "digits"\nmodel = "mlp"\nlocal_steps = 1\nbatch_size = 8\ntest_size = 40\n')
# two runs on two workers: one of 2 steps, one that cannot end before it is killed (100,000
# steps of ~5 ms). The short run's saved table is the event: the pool, the fork server and
# the tracker exist, and the long run is running in the other worker
SWEEP = f'replicates = 1\n\n[base]\n{WORLD}\n[grid]\nsteps = [2, 100000]\n'
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc; the parent-death signal is Linux's")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every process now (``/proc/<pid>/stat``)."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state, ppid, ..., starttime (22nd)
        procs[int(entry.name)] = (int(fields[1]), fields[19])
    return procs


def _descendants(root: int) -> dict[int, str]:
    """pid -> start time of every descendant of ``root`` (the start time tells a pid
    reused later from the same process)."""
    table = _table()
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def _alive(pid: int, start: str) -> bool:
    """The same process (pid and start time) exists and is not a zombie."""
    if process_gone(pid):
        return False
    return _table().get(pid, (0, ""))[1] == start


def test_a_zombie_counts_as_gone():
    # Prepare: a child killed and not reaped yet, as a caller still reading its pipes
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30  # the kernel makes it a zombie at once; 30 s: a busy CPU
        while not process_gone(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        # Assert: kill(pid, 0) still finds it (what the old poll asked), process_gone does not
        os.kill(child.pid, 0)
        assert process_gone(child.pid)
        assert not process_gone(os.getpid())
    finally:
        child.wait()
    assert process_gone(child.pid)


def test_no_helper_outlives_a_killed_sweep_whose_caller_holds_its_pipes(tmp_path):
    # Prepare: a local sweep on two workers, its stdout and stderr piped and not read
    (tmp_path / "sweep.toml").write_text(SWEEP)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mobidfl.analysis.cli", "sweep", str(tmp_path / "sweep.toml"),
         "--out", str(out), "--processes", "2", "--quiet"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    helpers: dict[int, str] = {}

    def saved() -> bool:
        return (out / "runs").is_dir() and any((out / "runs").glob("*.parquet"))

    try:
        deadline = time.monotonic() + 300  # imports + fork server + a 2-step run, busy CPU
        while not saved():
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no run finished within 300 s"
            time.sleep(0.05)
        helpers = _descendants(proc.pid)
        table = _table()
        workers = [pid for pid in helpers if table[pid][0] in helpers]  # the fork server's
        assert len(helpers) >= 4 and len(workers) >= 2, helpers  # tracker, server, 2 workers
        # Execute: SIGKILL; the command is not reaped (a zombie) while the helpers are watched
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        # 30 s: the signal ends the server and the workers at once and the tracker reads the
        # end of its pipe next; the worker's own poll runs every 1 s. Measured here: see
        # docs/reference/errors.md ("A killed command")
        while any(_alive(pid, start) for pid, start in helpers.items()):
            assert time.monotonic() - killed < 30, {
                pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80]
                for pid, start in helpers.items() if _alive(pid, start)}
            time.sleep(0.05)
        # Assert: the caller now sees the end of the command's output (no process holds it)
        proc.stdout.read()
        proc.stderr.read()
    finally:
        proc.kill()
        for pid, start in helpers.items():  # a failed check leaves nothing behind either
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
