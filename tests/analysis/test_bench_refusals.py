"""``mobidfl bench`` on bad inputs: one line and exit 2 (or handled correctly), never a
traceback, never a silently different table.

Every bench here is the smallest there is: the ci scale, one world (static sensors at the
ideal link), the local policy, two seeds, in this process (seconds each).
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import mobidfl.analysis.sweep as sweep_module
from mobidfl.analysis.cli import main

SMALL = ["--scale", "ci", "--seeds", "2", "--scenarios", "static_sensors", "--links", "ideal",
         "--processes", "0", "--quiet"]


def _bench(out: Path, *extra: str, policies: str = "local") -> int:
    return main(["bench", *SMALL, "--policies", policies, "--out", str(out), *extra])


def _one_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished small bench (copied by each test that changes it)."""
    out = tmp_path_factory.mktemp("finished") / "bench"
    assert _bench(out) == 0
    return out


@pytest.fixture
def bench(finished, tmp_path) -> Path:
    copy = tmp_path / "bench"
    shutil.copytree(finished, copy)
    return copy


def _runs(out: Path) -> list[Path]:
    return sorted(out.glob("cells/*/runs/*.parquet"))


def _cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


# --- 1. a failed write --------------------------------------------------------------------
def test_a_full_disk_stops_the_bench_in_one_line_with_the_bench_resume(tmp_path, monkeypatch,
                                                                      capsys):
    # Prepare: the disk is full when the second run is saved
    out = tmp_path / "bench"
    real = sweep_module._write_parquet
    calls: list[Path] = []

    def writer(table, path, *, meta):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(table, path, meta=meta)

    monkeypatch.setattr(sweep_module, "_write_parquet", writer)
    # Execute
    code = _bench(out)
    line = _one_line(capsys)
    monkeypatch.undo()
    resumed = _bench(out)
    # Assert: exit 1 as a sweep; the bench's own command to resume, not a cell's sweep
    assert code == 1
    assert "No space left on device" in line and str(calls[1]) in line, line
    assert "1 of 2 runs are saved" in line, line
    assert f"resume with: mobidfl bench --out {out}" in line and "--policies local" in line
    assert "mobidfl sweep" not in line
    assert resumed == 0 and len(_runs(out)) == 2


# --- 2. a cut manifest.json ---------------------------------------------------------------
def test_a_cut_manifest_json_is_refused_on_report_only_and_rewritten_on_resume(bench, capsys):
    # Prepare
    plan = bench / "manifest.json"
    _cut(plan)
    # Execute
    report = _bench(bench, "--report-only")
    line = _one_line(capsys)
    resumed = _bench(bench)
    said = capsys.readouterr().err
    # Assert: one line naming the file; the same bench's resume writes it whole again
    assert report == 2
    assert str(plan) in line and "whole" in line, line
    assert resumed == 0
    assert f"{plan} is damaged" in said and len(said.strip().splitlines()) == 1, said
    assert json.loads(plan.read_text())["cells"]
    assert _bench(bench, "--report-only") == 0


# --- 3. a cut run file --------------------------------------------------------------------
def test_a_cut_run_file_is_refused_on_report_only_and_run_again_on_resume(bench, capsys):
    # Prepare
    victim, other = _runs(bench)
    before = pd.read_parquet(victim)
    kept = other.stat().st_mtime_ns
    _cut(victim)
    # Execute
    report = _bench(bench, "--report-only")
    line = _one_line(capsys)
    resumed = _bench(bench)
    said = capsys.readouterr().err
    # Assert: refused naming the file and saying to resume; the resume runs it again
    assert report == 2
    assert str(victim) in line and "resume" in line and "mobidfl bench --out" in line, line
    assert resumed == 0
    assert f"{victim} is damaged" in said and "runs again" in said, said
    pd.testing.assert_frame_equal(pd.read_parquet(victim), before)
    assert other.stat().st_mtime_ns == kept
    assert _bench(bench, "--report-only") == 0


def test_a_cut_cell_manifest_is_refused_on_report_only_and_rebuilt_on_resume(bench, capsys):
    # Prepare: the cell's manifest.csv cut in its second row (it listed one run of two)
    (manifest,) = bench.glob("cells/*/manifest.csv")
    text = manifest.read_text()
    manifest.write_text(text[: text.index("\n", text.index("\n") + 1) + 20])
    board = pd.read_csv(bench / "leaderboard.csv")
    # Execute
    report = _bench(bench, "--report-only")
    line = _one_line(capsys)
    resumed = _bench(bench)
    # Assert
    assert report == 2 and str(manifest) in line, line
    assert resumed == 0
    again = pd.read_csv(bench / "leaderboard.csv")
    assert again["seeds_ok"].tolist() == [2]
    pd.testing.assert_series_equal(again["final_acc"], board["final_acc"])


# --- 4 and 5. values refused before any run -------------------------------------------------
REFUSED = {
    "no scenario": (["--scenarios", ","], "local", "'--scenarios' = ','"),
    "no link": (["--links", " "], "local", "'--links'"),
    "nothing runnable": ([], "mofel", "'--policies' = 'mofel'"),
    "negative cpus": (["--cpus-per-run", "-1"], "local", "'--cpus-per-run' = -1"),
    "nan gpus": (["--gpus-per-run", "nan"], "local", "'--gpus-per-run'"),
    "too many seeds": (["--seeds", "100001"], "local", "an integer in [2, 100000]"),
    "too late a first seed": (["--first-seed", str(2**63 - 1)], "local", "'--first-seed'"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_value_is_refused_in_one_line_before_any_folder(case, tmp_path, capsys):
    extra, policies, named = REFUSED[case]
    out = tmp_path / "bench"
    assert _bench(out, *extra, policies=policies) == 2
    line = _one_line(capsys)
    assert named in line and line.startswith("mobidfl: error:"), line
    assert not out.exists()


def test_cuda_without_a_gpu_is_refused_before_any_run(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    out = tmp_path / "bench"
    assert _bench(out, "--device", "cuda") == 2
    line = _one_line(capsys)
    assert "'--device' = 'cuda'" in line and "no CUDA device" in line, line
    assert not out.exists()


def _unchanged(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file()}


def test_another_bench_folder_is_refused(bench, capsys):
    # Prepare: a finished bench of `local` only
    before = _unchanged(bench)
    # Execute: another policy list, and another seed count, into its folder
    wider = _bench(bench, policies="local,central_fedavg")
    wider_line = _one_line(capsys)
    seeds = main(["bench", *SMALL, "--seeds", "3", "--policies", "local", "--out", str(bench)])
    seeds_line = _one_line(capsys)
    # Assert: nothing replaced, no orphan runs
    assert wider == 2 and seeds == 2
    for line in (wider_line, seeds_line):
        assert "'--out'" in line and "another bench" in line and "--policies local" in line
    assert _unchanged(bench) == before
    assert _bench(bench) == 0  # its own command still resumes it


def test_a_run_folder_is_refused(tmp_path, capsys):
    # Prepare: what `mobidfl run` leaves
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--set", "map=grid:3x3:100", "--set", "vehicles=0",
                 "--set", "pedestrians=0", "--set", "sensors=3", "--set", "uavs=0",
                 "--set", "steps=1", "--set", "learning=false", "--quiet"]) == 0
    capsys.readouterr()
    before = _unchanged(out)
    # Execute
    code = _bench(out)
    line = _one_line(capsys)
    # Assert
    assert code == 2 and "'--out'" in line and "not a bench's" in line, line
    assert _unchanged(out) == before


def test_a_file_as_out_exits_2(tmp_path, capsys):
    out = tmp_path / "file"
    out.write_text("x")
    assert _bench(out) == 2
    assert "a folder (this is a file)" in _one_line(capsys)
    assert _bench(out / "bench") == 2
    assert "is a file" in _one_line(capsys)


def test_a_read_only_out_exits_2(tmpfs, capsys):
    if subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)],
                      check=False, capture_output=True).returncode != 0:
        pytest.skip("the tmpfs cannot be remounted read-only here")
    code = _bench(tmpfs / "bench")
    line = _one_line(capsys)
    assert code == 2 and "a writable folder" in line, line
    assert not (tmpfs / "bench").exists()
