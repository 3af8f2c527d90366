"""Descriptors over the results seeds: the bench's descriptors.csv and `--describe` with the
same --seeds and --first-seed print the same numbers (issue 51: they disagreed, 0.24 against
0.19 contacts per step, each read from one seed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis import bench
from mobidfl.analysis.describe import describe_seeds, describe_world
from mobidfl.analysis.study import load_study


def _world():
    """The study's base at ci on mnist5k (the suite's data set)."""
    from dataclasses import replace

    column = load_study("mobility_regimes").columns("ci")[0]
    column = replace(column, settings={**column.settings, "dataset": "mnist5k"})
    return column, {k: v for k, v in column.settings.items() if not k.startswith("link")}


def test_describe_seeds_is_the_mean_of_each_seed_s_descriptors():
    # Prepare
    _, world = _world()
    # Execute
    one = [describe_world({**world, "seed": s}) for s in (3, 4)]
    both = describe_seeds(world, [3, 4])
    # Assert: descriptor by descriptor the mean; samples per agent is measured
    for name in ("neighbours_per_step", "label_skew", "met_share", "samples_per_agent"):
        values = [getattr(d, name) for d in one]
        assert getattr(both, name) == pytest.approx(float(np.mean(values))), name
    assert both.samples_per_agent > 0


def test_the_bench_and_describe_agree_at_the_same_seeds(tmp_path):
    from mobidfl.model.config import Config

    # Prepare: the same world as a settings file a user would give --describe
    column, world = _world()
    settings = tmp_path / "mine.toml"
    settings.write_text(Config.from_settings(world).to_toml())
    # Execute
    path = bench.write_descriptors(tmp_path, [column], seeds=[5, 6])
    table = bench.describe_table(str(settings), scale="ci", seed=5, seeds=2)
    # Assert: --describe's row shows the csv's numbers
    row = pd.read_csv(path).iloc[0]
    line = next(ln for ln in table.splitlines() if ln.startswith("| mine |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3] == f"{row['neighbours_per_step']:.2f}"
    assert cells[8] == f"{row['label_skew']:.3f}"
    assert cells[9] == f"{row['samples_per_agent']:.0f}"
    assert int(row["seeds"]) == 2 and int(row["seed"]) == 5
