"""The controlled study end to end and its published findings.

* ``mobidfl bench --study mobility_skew --scale ci`` runs every column (one factor at a
  time, the crosses, the held-out worlds) and writes each world's regime descriptors;
  ``--describe`` prints them without training;
* the per-run data publish and the findings page is generated from them alone; a change in
  one run's number changes the page;
* the committed page equals what the published data give (drift fails here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis.publish import publish_bench, recompute, study_page
from mobidfl.analysis.study import load_study
from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "published" / "benchmark" / "mobility_skew"
PAGE = ROOT / "docs" / "benchmark" / "study.md"


def _mobidfl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobidfl.analysis.cli", *args], check=False,
                          cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def ci_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "bench"
    done = _mobidfl("bench", "--study", "mobility_skew", "--scale", "ci", "--seeds", "2",
                    "--policies", "local,dpsgd,cached_lru", "--processes", "0", "--quiet",
                    "--out", str(out), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_ci_study_runs_every_column_and_describes_each_world(ci_study):
    # Assert: one column per variant of the study, each with its descriptors and runs
    plan = json.loads((ci_study / "manifest.json").read_text())
    variants = [v for v, _, _ in load_study("mobility_skew").variants()]
    assert [c["variant"] for c in plan["columns"]] == variants
    assert plan["study"] == "mobility_skew" and len(plan["sessions"]) == 1
    assert plan["sessions"][0]["command"].startswith("mobidfl bench --out")
    descriptors = pd.read_csv(ci_study / "descriptors.csv")
    assert len(descriptors) == len(variants)
    assert descriptors["neighbours_per_step"].notna().all()
    static = descriptors.set_index("variant").loc["mobility=static"]
    base = descriptors.set_index("variant").loc["base"]
    assert static["speed_cv"] == 0.0 and static["met_share"] < base["met_share"]
    iid = descriptors.set_index("variant").loc["skew=iid"]
    assert iid["label_skew"] < base["label_skew"]  # the skew factor moves the skew index
    assert iid["neighbours_per_step"] == base["neighbours_per_step"]  # and not the contacts


def test_published_data_give_the_page_and_a_changed_run_changes_it(ci_study, tmp_path):
    # Prepare
    dest = tmp_path / "published"
    publish_bench(ci_study, dest)
    # Execute
    page = study_page(dest, figure="map.png")
    runs = pd.read_parquet(dest / "runs.parquet")
    runs.loc[runs.index[0], "final_acc"] = 0.999
    runs.to_parquet(dest / "runs.parquet", index=False)
    changed = study_page(dest, figure="map.png")
    # Assert: the page states the rule and its held-out score; one run's number moves it
    assert "## The answer" in page and "held-out worlds" in page
    assert len(recompute(dest)["outcomes"]) == len(load_study("mobility_skew").variants())
    assert changed != page
    # the runs counted bytes at the ideal link: the page has each world's Pareto front
    curves = pd.read_parquet(dest / "curves.parquet")
    assert curves["bytes_per_agent"].notna().all()
    section = page[page.index("## Communication"):]
    assert "| world | Pareto front |" in section and "| local |" in section
    assert "did not count bytes" not in section


def test_describe_prints_each_world_without_training():
    done = _mobidfl("bench", "--describe", "cars_manhattan", "--scale", "ci", cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("| cars_manhattan")]
    assert len(lines) == 1 and lines[0].count("|") == 11


def test_describe_shows_a_world_its_runs_refuse_as_a_row_and_goes_on(monkeypatch):
    # Prepare: one world of the study refused, as Dirichlet 0.1 is at `small` (an agent with
    # fewer than 10 samples), at the ci scale's cost
    from mobidfl.analysis import bench, describe

    real = describe.describe_world

    def refuse_one(settings, **kw):
        if settings.get("dirichlet_alpha") == 0.1:
            raise ConfigError("dirichlet_alpha", 0.1, "a larger alpha")
        return real(settings, **kw)

    monkeypatch.setattr(describe, "describe_world", refuse_one)
    # Execute
    table = bench.describe_table("mobility_skew", scale="ci", seed=0)
    # Assert: its row says so with the table's width, the other worlds are measured, and the
    # reason follows the table
    rows = [ln for ln in table.splitlines() if ln.startswith("| ")]
    refused = [ln for ln in rows if "| refused |" in ln]
    assert refused == ["| skew=dirichlet_0.1 | refused | | | | | | | | |"]
    assert refused[0].count("|") == rows[0].count("|")
    assert len(rows) > 10 and sum("| refused |" in ln for ln in rows) == 1
    assert "- skew=dirichlet_0.1: setting 'dirichlet_alpha' = 0.1 is not allowed" in table


def test_describe_of_one_refused_world_is_refused_in_one_line(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text("vehicles = 60\npedestrians = 0\nsensors = 0\nuavs = 0\n"
                    'partition = "dirichlet"\ndirichlet_alpha = 0.01\n')
    done = _mobidfl("bench", "--describe", str(path), cwd=ROOT)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "dirichlet_alpha" in lines[0]


def test_describe_refuses_an_unknown_world_in_one_line():
    done = _mobidfl("bench", "--describe", "atlantis", cwd=ROOT)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "'--describe'" in lines[0]


@pytest.mark.skipif(not PUBLISHED.is_dir(), reason="the study is not published yet")
def test_the_committed_findings_page_is_what_the_published_data_give():
    # Execute: the page from the published per-run data alone
    page = study_page(PUBLISHED, figure="study_regime_map.png")
    # Assert: drift between the page and the data fails here; runs made before the ideal
    # link counted bytes say so instead of a communication table
    if "bytes_per_agent" not in pd.read_parquet(PUBLISHED / "curves.parquet"):
        assert "did not count bytes" in page
    assert PAGE.read_text() == page, (
        "docs/benchmark/study.md differs from its data: regenerate it with "
        "python -m mobidfl.analysis.publish --page published/benchmark/mobility_skew "
        "docs/benchmark/study.md")


def test_an_earlier_version_is_compared_world_by_world(tmp_path):
    # Prepare: the published study as "now" and as its own "v1", with the base lr changed
    # since and one world's winner changed in v1
    if not PUBLISHED.is_dir():
        pytest.skip("the study is not published")
    import shutil

    dest = tmp_path / "study"
    dest.mkdir()
    files = ("runs.parquet", "curves.parquet", "descriptors.csv", "manifest.json")
    for name in files:
        shutil.copyfile(PUBLISHED / name, dest / name)
    (dest / "v1").mkdir()
    for name in files:
        shutil.copyfile(PUBLISHED / name, dest / "v1" / name)
    plan = json.loads((dest / "manifest.json").read_text())
    for column in plan["columns"]:
        column["world"]["lr"] = 0.5
    (dest / "manifest.json").write_text(json.dumps(plan))
    now = recompute(dest)["outcomes"].set_index("variant")
    runs = pd.read_parquet(dest / "v1" / "runs.parquet")
    base = next(c["key"] for c in plan["columns"] if c["variant"] == "base")
    loser = runs[(runs["column"] == base) & (runs["policy"] == "local")].index
    runs.loc[loser, "final_acc"] = 0.9999  # local wins the base world in v1
    runs.to_parquet(dest / "v1" / "runs.parquet", index=False)
    # Execute
    page = study_page(dest, figure="x.png")
    # Assert: the change in the base world is named and the base row shows both winners
    section = page.split("## Earlier versions of this study")[1]
    assert "lr 0.2 -> 0.5" in section or "lr 0.05 -> 0.5" in section
    n = len(now)
    assert f"The winner is the same in {n - 1} of {n} worlds" in section
    assert "| base | local | " in section
    assert f" | {now.loc['base', 'winner']} | " in section.split("| base | local | ")[1]
