"""``python -m validation`` as the validation pages write it: a relative ``--out`` works
(the reference drivers run in their own working directories, so the folder is made
absolute first), and a bad option is one line with exit 2 before any case runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _validation(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "validation", *args], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_the_documented_command_at_ci_size_with_a_relative_out(tmp_path):
    # Prepare: the pages' form (`--cases heredia --size small --seeds 3`) at the CI size, with
    # --out relative to the repository root, as a user types it there
    out = os.path.relpath(tmp_path / "val", ROOT)
    assert not Path(out).is_absolute()
    # Execute
    done = _validation("--cases", "heredia", "--size", "ci", "--seeds", "1", "--out", out)
    # Assert: the table and the case's files land under the folder named
    assert done.returncode == 0, done.stderr[-2000:]
    table = (tmp_path / "val" / "validation.md").read_text()
    assert "| heredia |" in table and "**differs**" not in table
    assert (tmp_path / "val" / "validation.csv").is_file()


@pytest.mark.parametrize(("args", "named"), [
    (("--size", "huge"), "'--size' = 'huge'"),
    (("--cases", ","), "'--cases' = ','"),
    (("--cases", "cached_dfl", "--size", "ci"), "small or full for --cases cached_dfl"),
    (("--seeds", "0"), "'--seeds' = 0"),
])
def test_a_bad_option_is_one_line_and_exit_2(args, named):
    # Execute
    done = _validation(*args)
    # Assert
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert named in lines[0]


def test_an_out_that_is_a_file_is_refused_in_one_line(tmp_path):
    # Prepare
    afile = tmp_path / "a_file"
    afile.write_text("not a folder\n")
    # Execute
    done = _validation("--cases", "heredia", "--size", "ci", "--out", str(afile))
    # Assert: refused, the file untouched
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "a folder" in lines[0]
    assert afile.read_text() == "not a folder\n"
