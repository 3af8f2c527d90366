"""The published tuning of the controlled study and its generated page.

* the committed page (docs/benchmark/tuning.md) is what the published per-run data give:
  drift fails here;
* a changed run changes the page, and the page's recipe verdict follows the data;
* the published data are what the declaration says: tuning seeds disjoint from the results
  seeds, every tuned policy's grid of equal size, each chosen point by the declared rule.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis.tuning import knob_choices, point_label, study_setting, tuning_page

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "published" / "benchmark" / "mobility_skew" / "tuning"
STUDY = ROOT / "published" / "benchmark" / "mobility_skew"
PAGE = ROOT / "docs" / "benchmark" / "tuning.md"

pytestmark = pytest.mark.skipif(not PUBLISHED.is_dir(), reason="the tuning is not published")


def test_the_committed_tuning_page_is_what_the_published_data_give():
    page = tuning_page(PUBLISHED, study_dest=STUDY)
    assert PAGE.read_text() == page, (
        "docs/benchmark/tuning.md differs from its data: regenerate it with python -m "
        "mobidfl.analysis.tuning --page published/benchmark/mobility_skew/tuning "
        "published/benchmark/mobility_skew docs/benchmark/tuning.md")


def test_a_changed_run_changes_the_page(tmp_path):
    dest = tmp_path / "tuning"
    shutil.copytree(PUBLISHED, dest)
    before = tuning_page(dest, study_dest=STUDY)
    runs = pd.read_parquet(dest / "runs.parquet")
    recipe = runs["kind"] == "recipe"
    value = pd.Series(float("nan"), index=runs.index)
    value[recipe] = runs.loc[recipe, "label"].str.split("=").str[1].astype(float)
    # the published study's lr made best on the recipe's tuning seeds: no departure
    study_lr = study_setting(STUDY, "lr")
    runs.loc[recipe & (value == study_lr), "final_acc"] = 0.999
    runs.to_parquet(dest / "runs.parquet", index=False)
    after = tuning_page(dest, study_dest=STUDY)
    assert after != before
    assert "departs" not in after.split("## Policies")[0]
    assert f"lr = {study_lr:g}" in after.split("## Policies")[0]
    # another lr made best: the page says the study departs from the protocol
    other = value[recipe & (value != study_lr)].max()
    runs.loc[recipe & (value == other), "final_acc"] = 0.999
    runs.loc[recipe & (value == study_lr), "final_acc"] = 0.5
    runs.to_parquet(dest / "runs.parquet", index=False)
    assert "departs from the protocol's choice" in tuning_page(dest, study_dest=STUDY)


def test_the_published_choices_follow_the_declared_rule_on_seeds_the_results_did_not_use():
    plans = json.loads((PUBLISHED / "manifest.json").read_text())
    plan = plans["policies"]
    decl = plan["declaration"]
    assert set(plan["tuning_seeds"]).isdisjoint(plan["results_seeds"])
    assert {len(k["grid"]) for k in decl["knobs"].values()} == {decl["points"]}
    runs = pd.read_parquet(PUBLISHED / "runs.parquet")
    runs = runs[(runs["kind"] == "policies") & (runs["status"] == "ok")]
    tune = runs[runs["stage"] == "tune"]
    assert set(tune["seed"]) == set(plan["tuning_seeds"])
    result = runs[runs["stage"] == "result"]
    assert set(result["seed"]) == set(plan["results_seeds"])
    paper = {c["policy"]: c["label"] for c in plan["cells"] if c["paper"]}
    grids = {p: [point_label(g) for g in k["grid"]] for p, k in decl["knobs"].items()}
    choices = knob_choices(tune.assign(column=tune["variant"]), grids=grids, paper=paper,
                           seeds=plan["tuning_seeds"], tie=decl["tie"])
    # every chosen point, and the paper's, ran on the results seeds
    for row in choices.to_dict("records"):
        mine = result[(result["policy"] == row["policy"]) & (result["variant"] == row["column"])]
        assert {row["chosen"], row["paper"]} <= set(mine["label"]), row
