"""DAM/DCM's `optimizer_state = reset` reading on seeds 30-39, pre-registered: the page's
verdict table is what the published per-run numbers give, and the pre-registration was
committed before the results (git history)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis.reproduce import DAM, verdict_rows

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "published" / "reproduction" / "dam_001" / "reset_30_39"
PREREG = "docs/reproduction/dam_001/preregistration.md"
PAGE = ROOT / "docs" / "reproduction" / "dam-dcm.md"

pytestmark = pytest.mark.skipif(not (RESULTS / "per_run.csv").is_file(),
                                reason="the pre-registered runs are not published yet")


@pytest.mark.parametrize("folder", [RESULTS, RESULTS.with_name("reset_30_39_2026-11-29")],
                         ids=["28 Nov", "re-run 29 Nov"])
def test_the_page_states_the_verdicts_the_published_runs_give(folder):
    # Prepare: the per-run numbers of seeds 30-39 (the pre-registered run, and its re-run on
    # another CPU)
    per_run = pd.read_csv(folder / "per_run.csv")
    assert sorted(per_run["seed"].unique()) == list(range(30, 40))
    # Execute
    rows = verdict_rows(DAM, per_run)
    # Assert: each claim's row, as the page writes it
    page = PAGE.read_text()
    for row in rows:
        line = (f"| {row['claim']} | {row['MobiDFL (mean ± std)']} | "
                f"{row['95% CI of the mean']} | {row['verdict']} |")
        assert line in page, line


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs the repository's history")
def test_the_preregistration_was_committed_before_the_results():
    def first_commit(path: str) -> str:
        out = subprocess.run(["git", "log", "--format=%H", "--diff-filter=A", "--", path],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return out.split()[-1]

    prereg = first_commit(PREREG)
    results = first_commit("published/reproduction/dam_001/reset_30_39/per_run.csv")
    assert prereg != results
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", prereg, results],
                              cwd=ROOT, check=False)
    assert ancestor.returncode == 0
