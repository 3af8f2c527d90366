"""analysis/experiments/harness.py: the flags, CSV and tables every experiment script shares."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.experiments.harness import experiment_parser, print_tables, run_and_save


def test_parser_has_the_shared_flags_and_defaults():
    # Prepare
    parser = experiment_parser("Title line.\n\nMore text.", ["ci", "small"], out_help="rows")
    # Execute
    defaults = parser.parse_args([])
    given = parser.parse_args(["--scale", "ci", "--seeds", "3", "4", "--out", "x.csv"])
    # Assert
    assert parser.description == "Title line."
    assert (defaults.scale, defaults.seeds, defaults.out) == ("small", [0, 1, 2], None)
    assert (given.scale, given.seeds, given.out) == ("ci", [3, 4], "x.csv")
    with pytest.raises(SystemExit):
        parser.parse_args(["--scale", "huge"])


def test_run_and_save_writes_the_rows_only_when_asked(tmp_path):
    # Prepare
    frame = pd.DataFrame({"seed": [0, 1], "acc": [0.5, 0.75]})
    out = tmp_path / "rows.csv"
    # Execute
    unsaved = run_and_save(lambda: frame, None)
    saved = run_and_save(lambda: frame, str(out))
    # Assert
    assert unsaved is frame and saved is frame
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]
    pd.testing.assert_frame_equal(pd.read_csv(out), frame)


def test_print_tables_writes_title_then_table(capsys):
    # Prepare
    table = pd.DataFrame({"a": [1, 2]})
    # Execute
    print_tables({"T1": table, "T2": table}, index=False)
    # Assert: a blank line, the title, the table, per table
    expected = f"\nT1\n{table.to_string(index=False)}\n\nT2\n{table.to_string(index=False)}\n"
    assert capsys.readouterr().out == expected
