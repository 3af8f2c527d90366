"""The link study's bookkeeping (analysis/studies/link_study.py, docs/studies/links.md): numbers per
run from model tables, the seed table, the plot, and resuming without re-running."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mobidfl.analysis.studies import link_study


def _run_table(*, seed: int, received: list[float], acc: list[float]) -> pd.DataFrame:
    steps = len(received)
    return pd.DataFrame({
        "step": range(steps + 1),
        "contacts": [0, *([4] * steps)],
        "acc_mean": [float("nan"), *acc],
        "acc_min": [float("nan"), *acc],
        "cache_size_mean": [float("nan"), *([1.0] * steps)],
        "bytes_sent": [0.0, *received],
        "bytes_received": [0.0, *received],
        "transfers_aborted": [0.0, *([seed + 1.0] * steps)],
        "airtime_s": [0.0, *([200.0] * steps)],
        "energy_j": [0.0, *([50.0] * steps)],
        "message_bytes": 100,
        "wall_s": 9.0,
        "policy": "cached_lru",
        "link": "dsrc-cnn",
        "seed": seed,
    })


@pytest.fixture
def study(tmp_path: Path) -> Path:
    _run_table(seed=0, received=[400.0, 200.0], acc=[0.2, 0.3]).to_csv(
        tmp_path / "cached_lru__dsrc-cnn__s0.csv", index=False)
    _run_table(seed=1, received=[800.0, 800.0], acc=[0.1, 0.5]).to_csv(
        tmp_path / "cached_lru__dsrc-cnn__s1.csv", index=False)
    (tmp_path / "cached_lru__ideal__s0.part").write_text("half a run")
    return tmp_path


def test_per_run_numbers_come_from_the_model_tables(study: Path):
    # Execute
    runs = link_study.per_run(link_study.load(study), cars=2).set_index("seed")
    # Assert: 600 B / 100 B per model over 8 contacts; epoch 0 and the .part file left out
    assert list(runs.index) == [0, 1] and set(runs["link"]) == {"dsrc-cnn"}
    assert runs.loc[0, "models/contact"] == pytest.approx(600 / 100 / 8)
    assert runs.loc[1, "models/contact"] == pytest.approx(1600 / 100 / 8)
    assert runs.loc[0, "contacts/epoch"] == 4 and runs.loc[1, "cut/epoch"] == 2
    assert runs.loc[0, "MB/car/epoch"] == pytest.approx(300 / 2 / 1e6)
    assert runs.loc[0, "J/car/epoch"] == 25 and runs.loc[0, "radio s/car/epoch"] == 100
    assert runs.loc[1, "acc final"] == 0.5 and runs.loc[0, "acc best"] == 0.3


def test_the_table_gives_the_seed_mean_and_range(study: Path):
    # Execute
    text = link_study.table_text(link_study.per_run(link_study.load(study), cars=2))
    row = next(line for line in text.splitlines() if "dsrc-cnn" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = [c.strip() for c in text.splitlines()[0].strip("|").split("|")]
    # Assert: one row, two seeds, mean [min-max] where the seeds differ, one number where not
    assert cells[:3] == ["Cached-DFL (LRU)", "dsrc-cnn", "2"]
    assert cells[header.index("models/contact")] == "1.38 [0.75-2]"
    assert cells[header.index("contacts/epoch")] == "4"
    assert "ideal" not in text


def test_the_plot_is_written(study: Path, tmp_path: Path):
    # Execute
    path = tmp_path / "acc.png"
    link_study.plot(link_study.load(study), path)
    # Assert
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_a_finished_run_is_not_run_again(study: Path):
    # Execute: the model is never built for a run already in the folder
    path = link_study.run_one("cached_lru", "dsrc-cnn", 0, 2, study)
    # Assert
    assert path == study / "cached_lru__dsrc-cnn__s0.csv"
    assert pd.read_csv(path)["wall_s"].iloc[0] == 9.0


def test_no_finished_run_is_one_line(tmp_path: Path):
    with pytest.raises(SystemExit, match="no finished runs"):
        link_study.load(tmp_path)
