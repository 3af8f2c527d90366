"""The suite's own harness: the CPU burner of ``--busy-cpu N`` (``make test-busy``) and the
random order of ``make test-random``.

* the burners burn, stop with the session, stop by themselves after ``max_s``, and die with
  a session that is killed (nothing left behind on a shared machine);
* ``pytest --busy-cpu N`` (tests/conftest.py) runs N of them beside the tests and none after;
* pytest-randomly is off unless asked (``make test`` keeps its order) and shuffles with
  ``-p randomly`` (what ``make test-random`` passes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mobidfl.lifetime import process_gone
from tests import busy_cpu

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc; the parent-death signal is Linux's")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (``/proc/<pid>/stat`` fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _wait_gone(pids: list[int], *, bound_s: float) -> list[int]:
    """Poll until every pid has ended (or is a zombie); the ones still alive at the bound."""
    deadline = time.monotonic() + bound_s
    while any(not process_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if not process_gone(p)]


def test_a_burner_burns_and_stops():
    # Prepare
    procs = busy_cpu.start(1, max_s=600)
    try:
        # Execute: wait for the event (0.2 CPU s burnt); 120 s: a core shared with 7 other jobs
        # at nice 10 still gives a runnable loop far more than 0.2 s in 120 s
        deadline = time.monotonic() + 120
        while _cpu_s(procs[0].pid) < 0.2:
            assert time.monotonic() < deadline, "the burner burnt < 0.2 CPU s in 120 s"
            time.sleep(0.05)
    finally:
        busy_cpu.stop(procs)
    # Assert: stopped and reaped
    assert procs[0].returncode == -signal.SIGKILL


def test_a_burner_ends_by_itself_after_max_s():
    procs = busy_cpu.start(1, max_s=0.5)
    try:
        # 60 s: 0.5 s of wall time plus a loop pass (tens of ms idle), on a busy machine
        assert procs[0].wait(timeout=60) == 0
    finally:
        busy_cpu.stop(procs)


def test_burners_die_with_a_killed_session():
    # Prepare: a stand-in session that starts two burners, says their pids, then waits
    session = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from tests import busy_cpu\n"
         "procs = busy_cpu.start(2, max_s=600)\n"
         "print(*[p.pid for p in procs], flush=True)\n"
         "time.sleep(600)"],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True,
    )
    pids = [int(p) for p in session.stdout.readline().split()]
    try:
        assert len(pids) == 2 and not any(process_gone(p) for p in pids)
        # Execute
        session.kill()
        # Assert: 30 s: the parent-death signal is sent as the session dies (measured 0.0x s)
        assert _wait_gone(pids, bound_s=30) == []
    finally:
        session.kill()
        session.wait()
        session.stdout.close()
        for pid in pids:  # nothing left behind, even when the check failed
            if not process_gone(pid):
                os.kill(pid, signal.SIGKILL)


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest on ``folder`` with this repository's settings (pyproject's addopts)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(folder), str(folder), *args],
        check=False, cwd=folder, env=_env(), capture_output=True, text=True, timeout=600,
    )


def test_busy_cpu_runs_n_burners_beside_the_tests_and_none_after(tmp_path):
    # Prepare: a test that lists the session's burners (its children running the loop)
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import os
        from pathlib import Path

        def test_burners():
            burners = []
            for p in Path("/proc").iterdir():
                try:
                    stat = (p / "stat").read_text()
                    cmdline = (p / "cmdline").read_bytes()
                except OSError:  # not a process, or it just ended
                    continue
                ppid = int(stat[stat.rfind(")") + 2:].split()[1])
                if ppid == os.getpid() and b"die_with_parent" in cmdline:
                    burners.append(p.name)
            print("BURNERS", *burners)
        """))
    # Execute: tests/conftest.py as a plug-in (it holds the option), 2 burners
    done = _pytest(tmp_path, "-p", "tests.conftest", "--busy-cpu", "2", "-s")
    # Assert: the inner test saw two burners, and none outlives pytest
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if "BURNERS" in x)
    pids = [int(p) for p in line.split("BURNERS", 1)[1].split()]
    assert len(pids) == 2, line
    assert _wait_gone(pids, bound_s=1) == []  # stopped and reaped before pytest exited


def test_random_order_is_off_unless_asked(tmp_path):
    # Prepare: 30 tests in file order
    (tmp_path / "test_order.py").write_text(
        "".join(f"def test_{i:02d}():\n    pass\n\n" for i in range(30)))
    in_file_order = [f"test_order.py::test_{i:02d}" for i in range(30)]

    def order(*args: str) -> list[str]:
        done = _pytest(tmp_path, "--collect-only", *args)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return [x for x in done.stdout.splitlines() if "::test_" in x]

    # Execute / Assert: the repository's settings keep the order; -p randomly shuffles it
    # (30 tests: the chance that a shuffle keeps the order is 1 / 30!)
    assert order() == in_file_order
    shuffled = order("-p", "randomly", "--randomly-seed", "1")
    assert sorted(shuffled) == in_file_order and shuffled != in_file_order
    assert order("-p", "randomly", "--randomly-seed", "1") == shuffled  # a seed repeats it


def test_a_worker_that_dies_ends_the_session_and_names_its_test(tmp_path):
    # Prepare: two test files, one whose test kills its own worker (a hard crash: no
    # Python shutdown, as a segfault or the kernel's OOM killer would)
    (tmp_path / "test_a_crash.py").write_text(
        "import os, signal\n\ndef test_dies():\n    os.kill(os.getpid(), signal.SIGKILL)\n\n"
        "def test_after():\n    pass\n")
    (tmp_path / "test_b_fine.py").write_text("def test_fine():\n    pass\n")
    (tmp_path / "conftest.py").write_text("")
    xdist = next(line.split("=", 1)[1].split() for line in
                 (ROOT / "Makefile").read_text().splitlines() if line.startswith("XDIST ="))
    xdist = [a.replace("$(TEST_JOBS)", "2") for a in xdist]
    # Execute: the suite's own xdist options (the Makefile's XDIST)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", *xdist, str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    # Assert: the session ends (no wait for a replaced worker), fails, and names the test
    assert done.returncode != 0, done.stdout[-2000:]
    assert "crashed while running" in done.stdout and "test_dies" in done.stdout, (
        done.stdout[-2000:])
    for target in ("test", "test-random", "test-busy"):
        plan = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, check=True).stdout
        assert "--max-worker-restart 0" in plan, target
