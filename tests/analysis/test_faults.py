"""Sweep writes under faults: a full disk, a folder made read-only mid-run, a second driver.

Each fault gives one line (what failed, what is saved, how to resume), leaves every finished
run and the manifest readable and nothing half-written under a final name, and the sweep
resumes to the tables of a sweep that never failed. The disk faults use a 2 MB tmpfs
(``mount`` needs root; without it the read-only case uses permissions and the full-disk case
is skipped with its reason).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis import executors
from mobidfl.analysis.cli import main
from mobidfl.analysis.sweep import load_runs, read_manifest, run_path
from mobidfl.atomic import TEMP_PREFIX, write_bytes_atomic

SWEEP = """
replicates = 2
[base]
map = "grid:4x4:100"
vehicles = 4
pedestrians = 0
sensors = 0
uavs = 0
dataset = "digits"
model = "mlp"
steps = 2
local_steps = 1
batch_size = 8
test_size = 40
[base.vehicle]
mobility = "random_walk"
[grid]
policy = ["dpsgd", "local"]
"""
KEY = ["run_id", "step"]


def _sweep(folder: Path, out: Path, *extra: str) -> int:
    (folder / "sweep.toml").write_text(SWEEP)
    return main(["sweep", str(folder / "sweep.toml"), "--out", str(out), "--processes", "0",
                 "--quiet", *extra])


def _tables(out: Path) -> pd.DataFrame:
    return load_runs(out).sort_values(KEY).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same sweep, never interrupted."""
    folder = tmp_path_factory.mktemp("reference")
    assert _sweep(folder, folder / "out") == 0
    return _tables(folder / "out")


def _after_run(monkeypatch, number: int, fault) -> None:
    """Call ``fault()`` when run ``number`` (1-based) has finished, before it is saved."""
    real = executors.execute_run
    calls = []

    def run(spec):
        result = real(spec)
        calls.append(spec.run_id)
        if len(calls) == number:
            fault()
        return result

    monkeypatch.setattr(executors, "execute_run", run)


def _one_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _kept_readable(out: Path) -> pd.DataFrame:
    """The manifest and every run it calls ok read back whole; no temporary left; no
    Parquet file that the manifest does not list as ok."""
    manifest = read_manifest(out)
    ok = set(manifest.loc[manifest["status"] == "ok", "run_id"])
    for run_id in ok:
        assert len(pd.read_parquet(run_path(out, run_id))) > 0
    on_disk = {p.stem for p in (out / "runs").glob("*.parquet")}
    assert on_disk == ok
    leftovers = [p for p in [*out.iterdir(), *(out / "runs").iterdir()]
                 if p.name.startswith(TEMP_PREFIX)]
    assert not leftovers
    return manifest


def test_a_full_disk_stops_the_sweep_in_one_line_and_it_resumes(tmpfs, fill_disk, reference,
                                                                monkeypatch, capsys):
    # Prepare: the disk fills up while the second run computes
    out = tmpfs / "sweep"
    _after_run(monkeypatch, 2, lambda: fill_disk(tmpfs))
    # Execute
    code = _sweep(tmpfs.parent, out)
    line = _one_line(capsys)
    manifest = _kept_readable(out)
    (tmpfs / "filler").unlink()
    monkeypatch.undo()
    resumed = main(["sweep", "--resume", "--out", str(out), "--processes", "0", "--quiet"])
    # Assert: one line naming the file and the cause; run 1 kept; resumed to the same tables
    assert code == 1
    assert "No space left on device" in line and "1 of 4 runs are saved" in line
    assert f"mobidfl sweep --resume --out {out}" in line
    assert list(manifest["status"]) == ["ok", "pending", "pending", "pending"]
    assert resumed == 0
    pd.testing.assert_frame_equal(_tables(out), reference)


def test_an_output_folder_made_read_only_mid_run_stops_in_one_line_and_resumes(
    tmp_path, reference, monkeypatch, capsys
):
    # Prepare: after the second run the folder becomes read-only (a remount for root, who
    # writes through permissions; a chmod for anyone else)
    if os.geteuid() == 0:
        disk = tmp_path / "disk"
        disk.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                          check=False, capture_output=True).returncode != 0:
            pytest.skip("root without mount: a read-only folder cannot be made here")
        out = disk / "sweep"

        def read_only() -> None:
            subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

        def writable() -> None:
            subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    else:
        disk, out = None, tmp_path / "sweep"

        def read_only() -> None:
            for folder in (out / "runs", out):
                folder.chmod(0o555)

        def writable() -> None:
            for folder in (out, out / "runs"):
                folder.chmod(0o755)

    _after_run(monkeypatch, 2, read_only)
    try:
        # Execute
        code = _sweep(tmp_path, out)
        line = _one_line(capsys)
        manifest = _kept_readable(out)
        writable()
        monkeypatch.undo()
        resumed = main(["sweep", "--resume", "--out", str(out), "--processes", "0", "--quiet"])
        tables = _tables(out)
    finally:
        if disk is not None:
            subprocess.run(["umount", "-l", str(disk)], check=False, capture_output=True)
    # Assert
    assert code == 1
    assert ("Read-only file system" in line or "Permission denied" in line), line
    assert "1 of 4 runs are saved" in line and "--resume" in line
    assert list(manifest["status"]) == ["ok", "pending", "pending", "pending"]
    assert resumed == 0
    pd.testing.assert_frame_equal(tables, reference)


def test_a_second_driver_on_the_same_sweep_folder_is_refused_in_one_line(
    tmp_path, reference, monkeypatch, capsys
):
    # Prepare: while the first driver computes its first run, a second one starts
    out = tmp_path / "sweep"
    second: dict[str, object] = {}

    def second_driver() -> None:
        second["resume"] = main(["sweep", "--resume", "--out", str(out), "--processes", "0",
                                 "--quiet"])
        second["resume_line"] = _one_line(capsys)
        second["manifest"] = read_manifest(out)

    _after_run(monkeypatch, 1, second_driver)
    # Execute
    first = _sweep(tmp_path, out)
    monkeypatch.undo()
    again = main(["sweep", "--resume", "--out", str(out), "--processes", "0", "--quiet"])
    # Assert: refused, nothing changed by it; the first driver finished every run
    assert second["resume"] == 1
    assert "is being written by another mobidfl sweep (pid" in second["resume_line"]
    assert (second["manifest"]["status"] == "pending").all()
    assert first == 0 and again == 0
    assert (read_manifest(out)["status"] == "ok").all()
    pd.testing.assert_frame_equal(_tables(out), reference)


@pytest.mark.parametrize("fault", [errno.ENOSPC, errno.EROFS, errno.EIO])
def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch, fault):
    # Prepare: an old result, and a write that fails half-way through
    path = tmp_path / "runs" / "r.parquet"
    write_bytes_atomic(path, b"old")

    class Half:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise OSError(fault, os.strerror(fault))

    from mobidfl import atomic

    real_open = atomic.open_atomic

    @contextlib.contextmanager
    def failing(path, mode="wb"):
        with real_open(path, mode) as fh:
            yield Half(fh)

    # Execute
    with pytest.raises(OSError) as caught, failing(path) as fh:
        fh.write(uuid.uuid4().bytes * 64)
    # Assert
    assert caught.value.errno == fault
    assert path.read_bytes() == b"old"
    assert [p.name for p in path.parent.iterdir()] == ["r.parquet"]
