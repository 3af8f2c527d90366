"""examples/heterogeneous_world.py: several papers' systems in one run, each group learning
under its own policy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heterogeneous_world.py"


def _example():
    spec = importlib.util.spec_from_file_location("heterogeneous_world", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_policy_group_learns_in_one_mixed_run(tmp_path, capsys):
    # Prepare
    example = _example()
    # Execute: the example's command line at its test size
    example.main(["--size", "ci", "--seeds", "0", "--out", str(tmp_path / "rows.csv")])
    # Assert: every group is above chance (10 classes), with its own metrics present
    row = pd.read_csv(tmp_path / "rows.csv").iloc[0]
    assert all(row[column] > 0.2 for column in example.POLICY_COLUMNS)
    assert row["area_acc_mean"] > row["acc_policy_psfl"]  # PSFL models fit their area's labels
    assert row["federations"] >= 1 and row["cache_size_mean"] >= 1
    assert "acc_policy_psfl" in capsys.readouterr().out
