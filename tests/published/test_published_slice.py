"""The CNN slice of the controlled study: its published per-run data and generated page.

* the committed page (docs/benchmark/study_cnn.md) is what the published data give;
* a changed run changes the page;
* the slice's study differs from the MLP study's base world in the model and its recipe
  only, and its worlds are levels of the MLP study.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from mobidfl.analysis.publish import slice_page
from mobidfl.analysis.study import load_study

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "published" / "benchmark" / "mobility_skew_cnn"
REFERENCE = ROOT / "published" / "benchmark" / "mobility_skew"
RULE = REFERENCE / "regime_rule.json"
PAGE = ROOT / "docs" / "benchmark" / "study_cnn.md"


def test_the_committed_slice_page_is_what_the_published_data_give():
    page = slice_page(PUBLISHED, rule=RULE, reference=REFERENCE)
    assert PAGE.read_text() == page, (
        "docs/benchmark/study_cnn.md differs from its data: regenerate it with python -m "
        "mobidfl.analysis.publish --slice-page published/benchmark/mobility_skew_cnn "
        "docs/benchmark/study_cnn.md published/benchmark/mobility_skew/regime_rule.json "
        "published/benchmark/mobility_skew")


def test_a_changed_run_changes_the_slice_page(tmp_path):
    dest = tmp_path / "cnn"
    shutil.copytree(PUBLISHED, dest)
    before = slice_page(dest, rule=RULE, reference=REFERENCE)
    runs = pd.read_parquet(dest / "runs.parquet")
    first = runs.index[runs["status"] == "ok"][0]
    runs.loc[first, "final_acc"] = 0.999
    runs.to_parquet(dest / "runs.parquet", index=False)
    assert slice_page(dest, rule=RULE, reference=REFERENCE) != before


def test_the_slice_changes_the_model_and_its_recipe_only():
    cnn, mlp = load_study("mobility_skew_cnn"), load_study("mobility_skew")
    changed = {k for k in set(cnn.base) | set(mlp.base) if cnn.base.get(k) != mlp.base.get(k)}
    assert changed == {"model", "lr"}
    assert (cnn.base["model"], mlp.base["model"]) == ("cached_cnn", "mlp")
    # every level of the slice is the MLP study's level of the same name
    for name, factor in cnn.factors.items():
        assert factor.base == mlp.factors[name].base
        for level, changes in factor.levels.items():
            assert mlp.factors[name].levels[level] == changes, (name, level)
