"""Shared fixtures: one thread per process (measured: 2 threads can be 10x slower here).

Fixtures used by several test files live here; a file keeps its own only when it is
specific to it. The datasets are read-only inputs (load_dataset is deterministic from its
seed and touches no global RNG), so one copy per session is enough.

``make test`` runs the suite on every core (pytest-xdist, ``--dist loadfile``): each test
file runs in order on one worker, as in a one-core run, so a file's module fixtures (a
simulated run that several tests read) are built once. Each test writes under its own
``tmp_path`` and servers (Solara, Chromium, local Ray clusters) take free ports on the
loopback, so files may run side by side. (``--dist loadgroup`` with ``xdist_group`` marks
does not group under pytest 9.2: xdist 3.8 tags a test's group by rewriting ``_nodeid``,
which pytest 9 no longer reads, so every test was its own unit and module fixtures were
rebuilt on both workers.)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

# Tests run on small data so the suite stays fast and its numbers stay those it was written
# with: the system's full Fashion-MNIST (the default dataset, `auto:fashion_mnist|mnist5k`)
# is hidden, here and in every subprocess a test starts (the environment variable), so the
# default resolves to mnist5k. A test that wants the real set points back at Debian's folder
# (tests/model/learning/test_idx_datasets.py); a data_root given by a test is still read.
os.environ["MOBIDFL_FASHION_DIR"] = "/nonexistent/mobidfl-tests-use-small-data"

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"mobidfl": "mobidfl", "mobidfl.model": "model", "mobidfl.agents": "agents",
           "mobidfl.maps": "maps", "mobidfl.analysis": "analysis"}
"""Each package of the one ``mobidfl`` namespace -> its folder in this checkout."""


def checkout_problem(root: Path = ROOT) -> str | None:
    """Why ``import mobidfl.<package>`` would not run this checkout's folders, or ``None``.

    WHY: ``mobidfl.model`` is found through the editable install's mapping (pyproject.toml,
    package-dir), not beside ``mobidfl/``; an install made from another checkout would run
    that checkout's model under this one's tests, silently.
    """
    import importlib.util

    for name, folder in FOLDERS.items():
        try:
            spec = importlib.util.find_spec(name)  # imports only ``mobidfl``'s light front door
        except ImportError:
            spec = None
        found = spec and spec.origin and Path(spec.origin).resolve().parent
        if found != root / folder:
            where = f"comes from {found}" if found else "is not installed"
            return (f"{name} {where}, not {root / folder}: install this checkout with "
                    "`pip install -e .` (make setup)")
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mobidfl")
    group.addoption("--busy-cpu", type=int, default=0, metavar="N",
                    help="run N busy loops beside the tests for the whole session, at the "
                    "session's niceness (tests/busy_cpu.py; make test-busy)")
    group.addoption("--busy-cpu-max-s", type=float, default=4 * 3600.0, metavar="S",
                    help="each busy loop ends by itself after S seconds (default 4 h, beyond "
                    "any suite run)")


BURNERS = pytest.StashKey[list]()


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread and no system Fashion-MNIST in every process that runs tests. The
    pytest-xdist controller runs none, so it does not import torch (4 CPU s here). Every
    process first checks that ``mobidfl`` is this checkout (:func:`checkout_problem`). The
    session's process (the controller under xdist) starts the CPU burners of ``--busy-cpu``."""
    problem = checkout_problem()
    if problem:
        raise pytest.UsageError(problem)
    if config.getoption("busy_cpu", 0) > 0 and not hasattr(config, "workerinput"):
        from tests import busy_cpu

        config.stash[BURNERS] = busy_cpu.start(config.getoption("busy_cpu"),
                                               max_s=config.getoption("busy_cpu_max_s"))
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import torch

    from mobidfl.model.learning import data

    torch.set_num_threads(1)
    data.FASHION_SYSTEM_DIR = Path(os.environ["MOBIDFL_FASHION_DIR"])


def pytest_unconfigure(config: pytest.Config) -> None:
    if BURNERS in config.stash:
        from tests import busy_cpu

        busy_cpu.stop(config.stash[BURNERS])


def pytest_report_header(config: pytest.Config) -> str | None:
    n = config.getoption("busy_cpu", 0)
    return f"busy-cpu: {n} busy loops beside the tests" if n > 0 else None

LONG_FILES = (
    "test_ray_cluster.py", "test_bad_inputs.py", "test_app_browser.py", "test_app_compare.py",
    "test_docs.py", "test_doc_commands.py",
    "test_bench.py", "test_perf.py", "test_validation_psfl.py", "test_gpu_script.py",
    "test_exp_002.py", "test_preset_directions.py", "test_validation_cached_dfl.py",
    "test_resume_cli.py", "test_report.py", "test_sweep.py", "test_presets.py",
    "test_browser_harness.py", "test_exp_004.py", "test_layers.py", "test_exp_003.py",
    "test_namespace.py",
)
"""Files that take about 20 s or more (``--durations``), longest first: handed out first
(``make test`` passes ``--no-loadscope-reorder``, so xdist keeps this order instead of
putting files with many short tests first), so the last file a worker starts is a short one
and both cores finish together."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.pluginmanager.has_plugin("randomly"):
        return  # make test-random: its shuffled order of the files stands
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable


@pytest.fixture(scope="session")
def nyc():
    from mobidfl.maps.world import WorldMap

    return WorldMap.build("nyc_uws", cell_m=100.0, areas=3, seed=0)


@pytest.fixture(scope="session")
def ds():
    """The bundled MNIST subset with a shared test sample of 200 (split seed 0)."""
    from mobidfl.model.learning.data import load_dataset

    return load_dataset("mnist5k", root=None, test_size=200, seed=0)


@pytest.fixture(scope="session")
def ds300():
    """The bundled MNIST subset with a shared test sample of 300 (split seed 0)."""
    from mobidfl.model.learning.data import load_dataset

    return load_dataset("mnist5k", root=None, test_size=300, seed=0)


@pytest.fixture
def tmpfs(tmp_path):
    """A 2 MB tmpfs (a disk that fills and can be remounted read-only), or skip where
    mounting is not permitted; unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    tried = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                           check=False, capture_output=True, text=True)
    if tried.returncode != 0:
        pytest.skip(f"mounting a 2 MB tmpfs is not permitted here: {tried.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


@pytest.fixture
def fill_disk() -> Callable[..., None]:
    """``fill(mount, leave_free=0)``: write zeros to ``mount/filler`` until the disk is full,
    then give back ``leave_free`` bytes (a disk that fills during the next write)."""

    def fill(mount: Path, leave_free: int = 0) -> None:
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 65536)
        finally:
            os.close(fd)
        if leave_free:
            os.truncate(mount / "filler", max(0, (mount / "filler").stat().st_size - leave_free))

    return fill


@pytest.fixture(scope="module")
def cached_dfl_reference() -> Path:
    """The authors' Cached-DFL code at its pinned commit, from the offline cache (skipped,
    with the reason, where it cannot be had offline)."""
    from mobidfl.errors import ConfigError
    from validation.refcache import ensure

    try:
        return ensure("cached_dfl", fetch=False)
    except ConfigError as exc:
        pytest.skip(f"the authors' Cached-DFL code cannot be had offline here: {exc}")
