"""`mobidfl report`: paper-style figures (only those whose data exist) and mean ± std tables."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.cli import main
from mobidfl.analysis.report import (
    accuracy_curves,
    accuracy_figure,
    cache_vs_tau_max,
    federations_figure,
    final_accuracy_vs_p,
    load_results,
    make_report,
    ntc_nfc_figure,
)
from mobidfl.analysis.sweep import load_runs

SWEEP = """
replicates = 2
[base]
vehicles = 6
steps = 4
local_steps = 1
test_size = 100
[base.vehicle]
mobility = "random_walk"
[grid]
policy = ["dpsgd", "cached_lru"]
"random_walk.hm_fraction" = [0.0, 0.5]
"cached.tau_max" = [1, 3]
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    (folder / "sweep.toml").write_text(SWEEP)
    out = folder / "out"
    code = main(["sweep", str(folder / "sweep.toml"), "--out", str(out), "--processes", "0",
                 "--quiet"])
    assert code == 0
    return out


def _table(markdown: str) -> pd.DataFrame:
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    return pd.DataFrame(cells[1:], columns=cells[0])


def test_sweep_report_writes_exactly_the_figures_its_data_support(sweep_dir, capsys):
    # Execute
    code = main(["report", str(sweep_dir)])
    # Assert
    assert code == 0
    written = {p.name for p in (sweep_dir / "report").iterdir()}
    assert written == {"accuracy.png", "final_accuracy_vs_p.png", "hm_lm_gap_vs_p.png",
                       "cache_vs_tau_max.png", "report.md"}  # no federations, no NTC/NFC
    assert len(capsys.readouterr().out.splitlines()) == 5
    for name in written - {"report.md"}:
        image = plt.imread(sweep_dir / "report" / name)
        assert image.shape[0] > 300 and image.shape[1] > 400
        assert image[..., :3].std() > 0.05  # not blank
    text = (sweep_dir / "report" / "report.md").read_text()
    assert "16 ok, 0 error" in text and "![accuracy](accuracy.png)" in text


def test_report_table_is_mean_and_std_over_seeds_of_the_runs(sweep_dir):
    # Prepare
    make_report(sweep_dir)
    table = _table((sweep_dir / "report" / "report.md").read_text())
    runs = load_runs(sweep_dir)
    pick = runs[(runs["policy"] == "cached_lru") & (runs["random_walk.hm_fraction"] == 0.5)
                & (runs["cached.tau_max"] == 3)]
    final = pick[pick["step"] == 4]["acc_mean"].to_numpy()
    cache = pick[pick["step"] >= 1].groupby("seed")["cache_size_mean"].mean().to_numpy()
    # Execute
    row = table[(table["policy"] == "cached_lru") & (table["random_walk.hm_fraction"] == "0.5")
                & (table["cached.tau_max"] == "3")].iloc[0]
    # Assert
    assert len(table) == 8 and set(table["seeds"]) == {"2"}
    assert row["acc_mean"] == f"{final.mean():.3f} ± {final.std(ddof=1):.3f}"
    assert row["cache_size_mean"] == f"{cache.mean():.3f} ± {cache.std(ddof=1):.3f}"
    dpsgd = table[table["policy"] == "dpsgd"]
    assert (dpsgd["cache_size_mean"] == "–").all()  # no cache without caching
    no_hm = table[table["random_walk.hm_fraction"] == "0.0"]  # no HM agents: no gap
    assert (no_hm["hm_lm_gap"] == "–").all()


def test_accuracy_figure_draws_the_seed_mean_per_policy(sweep_dir):
    # Prepare
    data, swept = load_results(sweep_dir)
    runs = data[(data["policy"] == "cached_lru") & (data["random_walk.hm_fraction"] == 0.5)
                & (data["cached.tau_max"] == 3)]
    expected = runs.groupby("step")["acc_mean"].mean().dropna().to_numpy()  # evaluated steps
    # Execute
    fig = accuracy_figure(data, swept)
    # Assert
    title = "random_walk.hm_fraction=0.5, cached.tau_max=3"
    panel = next(ax for ax in fig.axes if ax.get_title() == title)
    lines = {line.get_label(): line for line in panel.get_lines()}
    assert set(lines) == {"dpsgd", "cached_lru"}
    np.testing.assert_allclose(lines["cached_lru"].get_ydata(), expected)
    assert len(panel.collections) == 2  # one seed band per policy
    plt.close(fig)


def test_parameter_figures_need_their_parameter_swept(sweep_dir):
    # Prepare
    data, swept = load_results(sweep_dir)
    # Execute
    with_p = final_accuracy_vs_p(data, swept)
    without_p = final_accuracy_vs_p(data, [k for k in swept if k != "random_walk.hm_fraction"])
    cache = cache_vs_tau_max(data, swept)
    # Assert
    assert without_p is None
    xs = {tuple(line.get_xdata()) for line in with_p.axes[0].get_lines() if len(line.get_xdata())}
    assert xs == {(0.0, 0.5)}
    labels = [t.get_text() for t in cache.axes[0].get_legend().get_texts()]
    assert labels == ["cached_lru, random_walk.hm_fraction=0.0",
                      "cached_lru, random_walk.hm_fraction=0.5"]
    plt.close("all")


def test_single_run_report_with_mixed_policies_plots_one_curve_per_policy(tmp_path):
    # Prepare
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--quiet", "--set", "map=nyc_uws",
                 "--set", "policy=dpsgd", "--set", "sensors=0", "--set", "uavs=0",
                 "--set", "vehicles=6",
                 "--set", "pedestrians=4", "--set", "steps=3", "--set", "local_steps=1",
                 "--set", "test_size=100", "--set", "pedestrian.policy=local",
                 "--set", "seed=4"]) == 0
    # Execute
    written = make_report(out)
    data, swept = load_results(out)
    curves, keys = accuracy_curves(data, swept)
    # Assert
    assert {p.name for p in written} == {"accuracy.png", "report.md"}
    assert swept == [] and keys == ["policy"]
    assert set(curves["policy"]) == {"dpsgd", "local"}
    local = curves[curves["policy"] == "local"].sort_values("step")["mean"].to_numpy()
    np.testing.assert_allclose(local, data["acc_policy_local"].dropna().to_numpy())
    text = (out / "report" / "report.md").read_text()
    assert "Single run (seed 4; data set `mnist5k`)" in text  # the default, tests hide Fashion
    table = _table(text)
    assert table["acc_mean"].iloc[0] == f"{data['acc_mean'].iloc[-1]:.3f}"


def _synthetic_runs() -> pd.DataFrame:
    """Two algorithms x two seeds, four steps, with federation and MoFeL counter columns."""
    rows = []
    for policy, scale in (("mofel", 1.0), ("mofel_a1", 2.0)):
        for seed in (0, 1):
            for step in range(4):
                rows.append({"run_id": f"{policy}-{seed}", "seed": seed, "policy": policy,
                             "step": step, "federations": 3 + seed + step * scale,
                             "ntc": step * scale * (seed + 1), "nfc": step * (2 - seed)})
    return pd.DataFrame(rows)


def test_federation_and_ntc_nfc_figures_show_seed_means():
    # Prepare
    data = _synthetic_runs()
    # Execute
    federations = federations_figure(data, ["policy"])
    bars = ntc_nfc_figure(data, ["policy"])
    # Assert
    lines = {line.get_label(): line.get_ydata() for line in federations.axes[0].get_lines()}
    np.testing.assert_allclose(lines["mofel_a1"], [3.5, 5.5, 7.5, 9.5])
    ntc_heights = [p.get_height() for p in bars.axes[0].patches]
    nfc_heights = [p.get_height() for p in bars.axes[1].patches]
    assert ntc_heights == [4.5, 9.0]  # final ntc: mofel 3,6 ; mofel_a1 6,12
    assert nfc_heights == [4.5, 4.5]
    assert [t.get_text() for t in bars.axes[0].get_xticklabels()] == ["mofel", "mofel_a1"]
    assert federations_figure(data.drop(columns=["federations"]), ["policy"]) is None
    assert ntc_nfc_figure(data.drop(columns=["ntc", "nfc"]), ["policy"]) is None
    plt.close("all")


def test_report_of_a_folder_without_results_fails_with_one_line(tmp_path, capsys):
    # Execute
    code = main(["report", str(tmp_path)])
    # Assert
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert re.search(r"setting 'report folder' = '.*' is not allowed: .*model\.csv", err)
