"""A new descriptor and a new metric are one table entry each: docs/reference/layout.md's examples.

The page's four code blocks (a descriptor's function and entry, a metric's function and entry)
are applied, exactly as the page shows them, to a copy of the package in which only
``analysis/measures.py`` changes, and a fresh interpreter checks each promise of the page from
that copy on a tiny world and a tiny bench: the descriptor in ``describe``'s record and table,
``descriptors.csv`` and the regime map's columns; the metric in a run's numbers and the
published ``runs.parquet``; each with the value its function gives.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.model.test_new_core_setting import overlay

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "layout.md"
DESCRIPTOR_SECTION = "## A worked example: a new regime descriptor"
METRIC_SECTION = "## A worked example: a new metric"
DESCRIPTOR_FUNCTIONS = "DESCRIPTORS: tuple[Descriptor, ...] = (\n"
DESCRIPTOR_END = ')\n"""The regime descriptors, in the order'
METRIC_FUNCTIONS = "METRICS: tuple[Metric, ...] = (\n"
METRIC_END = ')\n"""The metrics of a run;'


def page_blocks(section: str) -> list[str]:
    """The Python blocks of one worked example's section, in order."""
    text = PAGE.read_text()
    part = text[text.index(section):]
    part = part[: part.index("\n## ", len(section))]
    return re.findall(r"```python\n(.*?)```", part, flags=re.S)


def with_examples(text: str) -> str:
    """``analysis/measures.py``'s text with the page's four blocks where the page puts them:
    each function above its table, each entry at the table's end."""
    (d_function, d_entry), (m_function, m_entry) = (page_blocks(DESCRIPTOR_SECTION),
                                                    page_blocks(METRIC_SECTION))
    for anchor in (DESCRIPTOR_FUNCTIONS, DESCRIPTOR_END, METRIC_FUNCTIONS, METRIC_END):
        assert text.count(anchor) == 1, anchor
    text = text.replace(DESCRIPTOR_FUNCTIONS, d_function + "\n\n" + DESCRIPTOR_FUNCTIONS)
    text = text.replace(DESCRIPTOR_END, d_entry + DESCRIPTOR_END)
    text = text.replace(METRIC_FUNCTIONS, m_function + "\n\n" + METRIC_FUNCTIONS)
    return text.replace(METRIC_END, m_entry + METRIC_END)


CHECKS = r'''
import io, sys, tempfile, warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd

import mobidfl.analysis.measures as measures
from mobidfl.analysis import bench, bench_scenarios, regime_map
from mobidfl.analysis.bench_stats import run_numbers
from mobidfl.analysis.cli import main
from mobidfl.analysis.describe import describe_seeds, describe_world, markdown_head, markdown_row
from mobidfl.analysis.publish import publish_bench
from mobidfl.model.config import InertSettingWarning
from mobidfl.model.world import MobiDFLModel

assert measures.__file__.startswith(sys.argv[1]), measures.__file__  # the copy
warnings.simplefilter("ignore", InertSettingWarning)
out = {}
world = {"map": "grid:3x3:100", "vehicles": 8, "pedestrians": 0, "sensors": 0, "uavs": 0,
         "steps": 6, "dataset": "digits", "model": "mlp", "partition": "iid", "seed": 3,
         "vehicle": {"mobility": "random_walk"}, "eval_every": 2}
described = describe_world(world)
moving = MobiDFLModel(**{**world, "learning": False})
alone = []
for _ in range(moving.config.steps):  # by hand: per step, the share of agents with no one
    moving.step()
    alone.append(float((np.diff(moving.adjacency.indptr) == 0).mean()))
out["descriptor"] = (described.as_dict().get("isolated_share"), float(np.mean(alone)))
out["head"] = markdown_head()
out["row"] = markdown_row("w", described)
out["axes"] = list(regime_map.AXES)
model = MobiDFLModel(**world).run()
table = model.model_table()
out["metric"] = (run_numbers(table, agents=model.n_agents).get("best_acc"),
                 float(pd.to_numeric(table["acc_mean"], errors="coerce").max()))
with tempfile.TemporaryDirectory() as tmp:
    folder = Path(tmp) / "bench"
    out["bench"] = main(["bench", "--scale", "ci", "--seeds", "2", "--scenarios",
                         "static_sensors", "--links", "ideal", "--processes", "0", "--quiet",
                         "--policies", "local", "--out", str(folder)])
    descriptors = pd.read_csv(folder / "descriptors.csv")
    column = bench_scenarios.columns(["static_sensors"], scale="ci", links=["ideal"])[0]
    settings = {k: v for k, v in column.settings.items() if not k.startswith("link")}
    row = descriptors.set_index("column").loc[column.key]
    seeds = list(range(int(row["seed"]), int(row["seed"]) + int(row["seeds"])))
    out["csv"] = (list(descriptors.columns), float(row["isolated_share"]),
                  describe_seeds(settings, seeds).isolated_share)
    board = pd.read_csv(folder / "leaderboard.csv")
    outcomes = regime_map.column_outcomes(board, descriptors)
    out["map"] = (list(outcomes.columns), float(outcomes["isolated_share"].iloc[0]))
    out["board"] = list(board.columns)
    publish_bench(folder, Path(tmp) / "published")
    runs = pd.read_parquet(Path(tmp) / "published" / "runs.parquet")
    curves = pd.read_parquet(Path(tmp) / "published" / "curves.parquet")
    run = runs[runs["status"] == "ok"].iloc[0]
    mine = curves[(curves["column"] == run["column"]) & (curves["policy"] == run["policy"])
                  & (curves["seed"] == run["seed"])]
    out["published"] = (list(runs.columns), float(run["best_acc"]),
                        float(mine["acc_mean"].max()))
    text = io.StringIO()
    with redirect_stdout(text):
        main(["bench", "--describe", "static_sensors", "--scale", "ci"])
    out["describe"] = text.getvalue().splitlines()
print(repr(out))
'''


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # Prepare: the page's four blocks, added where the page says, to a copy of the package
    text = (ROOT / "analysis" / "measures.py").read_text()
    dest = overlay(tmp_path_factory.mktemp("pkg"),
                   changed={"analysis/measures.py": with_examples(text)})
    # Execute: a fresh interpreter that imports the copy first
    env = {**os.environ, "PYTHONPATH": str(dest), "MOBIDFL_NO_PROGRESS": "1"}
    run = subprocess.run([sys.executable, "-c", CHECKS, str(dest)], capture_output=True,
                         text=True, env=env, cwd=dest, check=False, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return ast.literal_eval(run.stdout.strip().splitlines()[-1])


def test_each_example_is_one_function_and_one_table_entry():
    # Prepare / Execute
    descriptor, metric = page_blocks(DESCRIPTOR_SECTION), page_blocks(METRIC_SECTION)
    # Assert: two blocks each, a function then its entry, nothing else to write
    assert len(descriptor) == 2 and len(metric) == 2
    assert descriptor[0].startswith("def isolated_share(seen: Observed) -> float:")
    assert descriptor[1].lstrip().startswith('Descriptor("isolated_share",')
    assert metric[0].startswith("def best_acc(table: pd.DataFrame, *, agents: int) -> float:")
    assert metric[1].lstrip().startswith('Metric("best_acc",')


def test_the_new_descriptor_is_measured_and_printed_by_describe(result):
    # Assert: the value its function gives, a column of --describe's table with its digits
    value, by_hand = result["descriptor"]
    assert value == pytest.approx(by_hand) and 0.0 <= value <= 1.0
    head, rule = result["head"]
    assert head.endswith("| samples/agent | isolated share |")
    assert rule.count("---") == head.count("|") - 1
    assert result["row"].endswith(f" | {value:.3f} |")


def test_the_new_descriptor_is_in_descriptors_csv_and_the_regime_map(result):
    # Assert: the bench's record of each world, and a column of regime_map.csv
    assert result["bench"] == 0
    columns, recorded, measured = result["csv"]
    assert columns[-1] == "isolated_share"
    assert recorded == pytest.approx(measured)
    assert result["axes"][-1] == "isolated_share"
    map_columns, on_map = result["map"]
    assert "isolated_share" in map_columns and on_map == pytest.approx(recorded)


def test_the_new_metric_is_a_run_number_and_published(result):
    # Assert: the best evaluated accuracy, on a run and in the published runs.parquet
    value, by_hand = result["metric"]
    assert value == pytest.approx(by_hand) and 0.0 < value <= 1.0
    columns, published, best_on_curve = result["published"]
    assert "best_acc" in columns
    assert published == pytest.approx(best_on_curve)


def test_the_bench_s_describe_table_and_leaderboard_read_the_tables(result):
    # Assert: --describe prints the descriptor; the leaderboard gives the metric's mean and CI
    assert "isolated share" in result["describe"][0]
    assert {"best_acc", "best_acc_ci"} <= set(result["board"])
