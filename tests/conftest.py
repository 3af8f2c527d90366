"""Shared fixtures: one thread per process (measured: 2 threads can be 10x slower here).

Fixtures used by several test files live here; a file keeps its own only when it is
specific to it. The datasets are read-only inputs (load_dataset is deterministic from its
seed and touches no global RNG), so one copy per session is enough.

``make test`` runs the suite on every core (pytest-xdist, ``--dist loadgroup``). Each test
writes under its own ``tmp_path`` and servers take free ports, so tests may run side by side;
the ones that must not overlap each other get one ``xdist_group`` (one worker runs the group
in order): the browser tests (a Solara server and a Chromium each) and the local Ray clusters.
Every other test is grouped with its file, as in a one-core run: a file's module fixtures (a
simulated run that several tests read) are then built once, not once per worker.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# Tests run on small data so the suite stays fast and its numbers stay those it was written
# with: the system's full Fashion-MNIST (the default dataset, `auto:fashion_mnist|mnist5k`)
# is hidden, here and in every subprocess a test starts (the environment variable), so the
# default resolves to mnist5k. A test that wants the real set points back at Debian's folder
# (tests/test_idx_datasets.py); a data_root given by a test is still read.
os.environ["MOBIDFL_FASHION_DIR"] = "/nonexistent/mobidfl-tests-use-small-data"

import pytest  # noqa: E402
import torch  # noqa: E402

from model.learning import data as _data  # noqa: E402

torch.set_num_threads(1)
_data.FASHION_SYSTEM_DIR = Path(os.environ["MOBIDFL_FASHION_DIR"])

SERIAL_GROUPS = ("browser", "ray")
"""Markers whose tests run one at a time on one xdist worker (marker name = group name)."""

LONG_GROUPS = (
    "ray", "browser", "test_docs.py", "test_exp_002.py", "test_validation_cached_dfl.py",
    "test_preset_directions.py", "test_bad_inputs.py", "test_presets.py", "test_resume_cli.py",
    "test_bench.py", "test_gpu_script.py", "test_validation_psfl.py", "test_atomic_writes.py",
)
"""Groups that take a minute or more, longest first: handed out first (``make test`` passes
``--no-loadscope-reorder``, so xdist keeps this order instead of putting groups with many
short tests first), so the last group a worker starts is a short one and both cores finish
together."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        group = next((g for g in SERIAL_GROUPS if item.get_closest_marker(g)), item.path.name)
        item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group
    rank = {g: i for i, g in enumerate(LONG_GROUPS)}
    items.sort(key=lambda item: rank.get(groups[item.nodeid], len(rank)))  # stable


@pytest.fixture(scope="session")
def nyc():
    from maps.world import WorldMap

    return WorldMap.build("nyc_uws", cell_m=100.0, areas=3, seed=0)


@pytest.fixture(scope="session")
def ds():
    """The bundled MNIST subset with a shared test sample of 200 (split seed 0)."""
    from model.learning.data import load_dataset

    return load_dataset("mnist5k", root=None, test_size=200, seed=0)


@pytest.fixture(scope="session")
def ds300():
    """The bundled MNIST subset with a shared test sample of 300 (split seed 0)."""
    from model.learning.data import load_dataset

    return load_dataset("mnist5k", root=None, test_size=300, seed=0)


@pytest.fixture
def tmpfs(tmp_path):
    """A 2 MB tmpfs (a disk that fills and can be remounted read-only), or skip where
    mounting is not permitted; unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    tried = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                           capture_output=True, text=True)
    if tried.returncode != 0:
        pytest.skip(f"mounting a 2 MB tmpfs is not permitted here: {tried.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
