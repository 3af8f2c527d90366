"""The paper worlds' published per-run data and their generated findings page.

* the committed page (docs/benchmark/findings.md) is what the published data give: drift
  fails here;
* a changed run changes the page;
* the pairs of columns the page compares are a paper's own axis (its variants, in order)
  and the link, nothing else.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis.publish import _paper_pairs, paper_worlds_page

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "published" / "benchmark" / "small"
RULE = ROOT / "published" / "benchmark" / "mobility_skew" / "regime_rule.json"
PAGE = ROOT / "docs" / "benchmark" / "findings.md"
published = pytest.mark.skipif(not (PUBLISHED / "runs.parquet").is_file(),
                               reason="the paper worlds' per-run data are not published")


@published
def test_the_committed_findings_page_is_what_the_published_data_give():
    page = paper_worlds_page(PUBLISHED, rule=RULE)
    assert PAGE.read_text() == page, (
        "docs/benchmark/findings.md differs from its data: regenerate it with python -m "
        "mobidfl.analysis.publish --paper-page published/benchmark/small "
        "docs/benchmark/findings.md published/benchmark/mobility_skew/regime_rule.json")


@published
def test_a_changed_run_changes_the_page(tmp_path):
    dest = tmp_path / "small"
    shutil.copytree(PUBLISHED, dest)
    before = paper_worlds_page(dest, rule=RULE)
    runs = pd.read_parquet(dest / "runs.parquet")
    first = runs.index[runs["status"] == "ok"][0]
    runs.loc[first, "final_acc"] = 0.999
    runs.to_parquet(dest / "runs.parquet", index=False)
    assert paper_worlds_page(dest, rule=RULE) != before


def test_the_page_compares_a_papers_axis_and_the_link_only():
    # Prepare: a scenario with three variants at two links, and one without variants
    columns = [{"key": f"uav-{v}@{link}", "scenario": "uav", "variant": v, "link": link}
               for link in ("ideal", "dsrc") for v in ("random", "dam", "dcm")]
    columns += [{"key": f"cars@{link}", "scenario": "cars", "variant": "", "link": link}
                for link in ("ideal", "dsrc")]
    # Execute
    pairs = [(a, b) for _, a, b in _paper_pairs({"columns": columns})]
    # Assert: the three orderings of the UAV axis at each link, and ideal -> dsrc per world
    axis = [("uav-random@{0}", "uav-dam@{0}"), ("uav-random@{0}", "uav-dcm@{0}"),
            ("uav-dam@{0}", "uav-dcm@{0}")]
    expected = [(a.format(link), b.format(link)) for link in ("ideal", "dsrc") for a, b in axis]
    expected += [(f"uav-{v}@ideal", f"uav-{v}@dsrc") for v in ("random", "dam", "dcm")]
    expected += [("cars@ideal", "cars@dsrc")]
    assert sorted(pairs) == sorted(expected)
