"""The committed findings page of the pre-registered study (docs/benchmark/regimes.md), its
rule (published and shipped with the study) are what the published per-run data give."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEST = ROOT / "published" / "benchmark" / "mobility_regimes"
PAGE = ROOT / "docs" / "benchmark" / "regimes.md"
SHIPPED = ROOT / "analysis" / "scenarios" / "studies" / "mobility_regimes.rule.json"


@pytest.mark.skipif(not (DEST / "runs.parquet").is_file(), reason="not published yet")
def test_the_committed_page_and_rule_are_what_the_published_data_give():
    from mobidfl.analysis import answer_page as ap

    # Execute
    got = ap.answer(DEST)
    page = ap.answer_page(DEST, figure_map="regimes_map.png",
                          figure_pareto="regimes_bytes.png", got=got)
    rule = ap.rule_json(got)
    # Assert
    assert page == PAGE.read_text(), (
        "docs/benchmark/regimes.md differs from its data: regenerate it with python -m "
        "mobidfl.analysis.publish --answer-page published/benchmark/mobility_regimes "
        "docs/benchmark/regimes.md")
    assert rule == (DEST / "regime_rule.json").read_text() == SHIPPED.read_text()


@pytest.mark.skipif(not (DEST / "manifest.json").is_file(), reason="not published yet")
def test_the_results_ran_from_the_pre_registered_commit_on_a_clean_tree():
    import json
    import subprocess

    plan = json.loads((DEST / "manifest.json").read_text())
    starts = plan["session_starts"]
    assert starts and not any(s["dirty"] for s in starts)
    # every session started from a descendant of the pre-registration commit
    if subprocess.run(["git", "cat-file", "-e", "02f6c25^{commit}"], cwd=ROOT,
                      check=False, capture_output=True).returncode != 0:
        pytest.skip("this clone has no history back to the pre-registration")
    for start in starts:
        done = subprocess.run(["git", "merge-base", "--is-ancestor", "02f6c25",
                               start["commit"]], cwd=ROOT, check=False)
        assert done.returncode == 0, start["commit"]
    assert plan["seeds"] == [0, 1, 2, 3]


@pytest.mark.skipif(not SHIPPED.is_file(), reason="the study's rule is not shipped yet")
def test_describe_with_the_study_s_rule_answers_for_a_user_s_file(tmp_path):
    import subprocess
    import sys

    # Prepare: a user's own world with more data per car than any studied one (2 cars
    # share mnist5k's 4,000 training images: 2,000 each; the grid spans 67 to 1,000)
    mine = tmp_path / "my_world.toml"
    mine.write_text('map = "helsinki_drive"\nvehicles = 2\npedestrians = 0\nsensors = 0\n'
                    'uavs = 0\nsteps = 4\nradius_m = 3000.0\ndataset = "mnist5k"\n'
                    'partition = "iid"\n')
    # Execute
    done = subprocess.run([sys.executable, "-m", "mobidfl.analysis.cli", "bench", "--describe",
                           str(mine), "--rule", "mobility_regimes", "--seeds", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    # Assert: both metrics' answers, the nearest studied world, the range warning
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "| primary says | budget says |" in out
    row = next(ln for ln in out.splitlines() if ln.startswith("| my_world |"))
    assert row.count("|") == 13
    assert "nearest studied world `" in out
    assert "samples_per_agent = 2e+03 is outside the studied range" in out
