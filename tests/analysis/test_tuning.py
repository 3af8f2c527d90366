"""The declared recipe and policy tuning (analysis/tuning.py): the choice rule on numbers
worked by hand, the declaration's checks, and ``mobidfl bench --study S --tune`` end to end
at the ci scale (its paper-value runs are the study's own runs: same settings, same ids)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis import study as study_module
from mobidfl.analysis.tuning import (
    choose,
    knob_choices,
    last_finite,
    load_tuning,
    point_label,
    recipe_choice,
    seed_means,
    sigma_per_sample,
    winner,
)
from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


# --- the rule, by hand ----------------------------------------------------------------------
def test_choose_takes_the_best_mean_and_gives_ties_to_the_preferred_candidate():
    means = {"a": 0.800, "b": 0.804, "c": 0.790}
    # best 0.804; a is 0.004 below it: tied within 0.005, untied within 0.003
    assert choose(means, prefer=["a", "b", "c"], tie=0.005) == "a"
    assert choose(means, prefer=["a", "b", "c"], tie=0.003) == "b"
    assert choose(means, prefer=["c", "b", "a"], tie=0.02) == "c"  # all three within 0.014
    assert choose({**means, "b": math.nan}, prefer=["a", "b", "c"], tie=0.0) == "a"
    with pytest.raises(ValueError):
        choose({"a": math.nan}, prefer=["a"], tie=0.0)
    with pytest.raises(ValueError):
        choose(means, prefer=["a", "b"], tie=0.0)  # c is finite and unordered


def test_seed_means_compare_a_candidate_on_every_seed_or_not_at_all():
    frame = pd.DataFrame({"g": ["x", "x", "y"], "seed": [1, 2, 1],
                          "final_acc": [0.5, 0.7, 0.9]})
    got = seed_means(frame, by=["g"], seeds=[1, 2])
    assert got["x"] == pytest.approx(0.6)  # (0.5 + 0.7) / 2
    assert math.isnan(got["y"])  # seed 2 missing: y is out, not 0.9 on one seed


def test_recipe_choice_averages_seeds_then_columns_and_ties_to_the_smaller_value():
    rows = []
    # lr 0.05: column A seeds 0.80, 0.82 -> 0.81; column B 0.70, 0.72 -> 0.71; mean 0.760
    # lr 0.10: column A 0.83, 0.83 -> 0.83; column B 0.69, 0.70 -> 0.695; mean 0.7625
    for value, column, accs in ((0.05, "A", (0.80, 0.82)), (0.05, "B", (0.70, 0.72)),
                                (0.10, "A", (0.83, 0.83)), (0.10, "B", (0.69, 0.70))):
        rows += [{"value": value, "column": column, "seed": s, "final_acc": a}
                 for s, a in zip((7, 8), accs, strict=True)]
    frame = pd.DataFrame(rows)
    value, overall = recipe_choice(frame, seeds=[7, 8], tie=0.005)
    assert overall[0.05] == pytest.approx(0.760) and overall[0.10] == pytest.approx(0.7625)
    assert value == 0.05  # 0.0025 apart: tied, the smaller lr
    assert recipe_choice(frame, seeds=[7, 8], tie=0.001)[0] == 0.10


def test_knob_choices_prefer_the_papers_point_on_a_tie_then_the_earlier_point():
    rows = []
    # grid p1, p2 (paper), p3 on column c: means 0.70, 0.698, 0.60 -> tie within 0.005: p2
    # grid q1, q2 (paper q0 not in grid): means 0.50, 0.502 -> tie: the earlier, q1
    for policy, label, acc in (("P", "p1", 0.70), ("P", "p2", 0.698), ("P", "p3", 0.60),
                               ("Q", "q1", 0.50), ("Q", "q2", 0.502), ("Q", "q0", 0.90)):
        rows += [{"policy": policy, "column": "c", "label": label, "seed": s,
                  "final_acc": acc} for s in (1, 2)]
    got = knob_choices(pd.DataFrame(rows), grids={"P": ["p1", "p2", "p3"], "Q": ["q1", "q2"]},
                       paper={"P": "p2", "Q": "q0"}, seeds=[1, 2], tie=0.005)
    by = got.set_index("policy")
    assert by.loc["P", "chosen"] == "p2" and by.loc["P", "chosen_mean"] == pytest.approx(0.698)
    # the paper's point outside the grid is never chosen, even when it is best (0.90)
    assert by.loc["Q", "chosen"] == "q1" and by.loc["Q", "paper_mean"] == pytest.approx(0.90)


def test_sigma_per_sample_is_the_same_for_every_car_only_at_fixed_batches():
    sizes = [12, 64, 65, 174]  # ceil(n / 64) = 1, 1, 2, 3 batch terms
    own = sigma_per_sample(40.0, sizes, batch=64, batches=0.0)
    assert own == pytest.approx([40.0, 40.0, 20.0, 40.0 / 3])
    fixed = sigma_per_sample(40.0, sizes, batch=64, batches=4.5)
    assert fixed == pytest.approx([40.0 / 4.5] * 4)  # 8.889 for every car


def test_last_finite_and_winner():
    table = pd.DataFrame({"area_acc_mean": [np.nan, 0.3, np.nan, 0.5, np.nan]})
    assert last_finite(table, "area_acc_mean") == 0.5
    assert math.isnan(last_finite(table, "federations"))
    means = {"central_fedavg": 0.9, "b": 0.7, "a": 0.7, "c": math.nan}
    assert winner(means) == "a"  # the oracle left out; a tie by name


def test_point_label_orders_names_and_prints_floats_short():
    assert point_label({"x.b": 4.5, "x.a": 10}) == "x.a=10, x.b=4.5"


# --- the declaration ------------------------------------------------------------------------
def test_the_study_declares_an_equal_budget_on_seeds_disjoint_from_results():
    tuning = load_tuning("mobility_skew")
    assert min(tuning.seeds) >= 1000  # results seeds are 0, 1, 2, ...
    assert {len(k.grid) for k in tuning.knobs.values()} == {tuning.points}
    assert set(tuning.knobs).isdisjoint(tuning.untuned)
    assert tuning.recipe_policy == "central_fedavg" and tuning.recipe_setting == "lr"


@pytest.mark.parametrize("change, names", [
    (lambda t: {**t, "policies": {**t["policies"], "knobs": {
        **t["policies"]["knobs"], "psfl": {**t["policies"]["knobs"]["psfl"],
                                           "grid": t["policies"]["knobs"]["psfl"]["grid"][:3]}}}},
     "4 points"),
    (lambda t: {**t, "policies": {**t["policies"], "knobs": {
        **t["policies"]["knobs"], "psfl": {**t["policies"]["knobs"]["psfl"],
                                           "grid": [{"radius_m": float(r)} for r in range(4)]}}}},
     "own settings"),
    (lambda t: {**t, "seeds": [1000]}, "two or more"),
    (lambda t: {**t, "recipe": {**t["recipe"], "columns": ["atlantis"]}}, "study's columns"),
])
def test_a_bad_tuning_table_is_refused_naming_what(monkeypatch, change, names):
    real = study_module.load_study("mobility_skew")
    bad = dataclasses.replace(real, tuning=change(real.tuning))
    monkeypatch.setattr(study_module, "load_study", lambda name: bad)
    with pytest.raises(ConfigError, match=names):
        load_tuning("mobility_skew")


# --- the command ----------------------------------------------------------------------------
def _mobidfl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobidfl.analysis.cli", *args], check=False,
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_results_seeds_overlapping_the_tuning_seeds_are_refused_in_one_line(tmp_path):
    done = _mobidfl("bench", "--study", "mobility_skew", "--tune", "policies", "--scale", "ci",
                    "--first-seed", "999", "--seeds", "2", "--out", str(tmp_path / "t"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "disjoint" in lines[0]
    assert not (tmp_path / "t").exists()


def test_a_study_without_tuned_policies_tunes_its_recipe_only(tmp_path):
    # The CNN study declares no [tuning.policies]: its recipe protocol only
    tuning = load_tuning("mobility_skew_cnn")
    assert (tuning.knobs, tuning.points) == ({}, 0)
    assert tuning.recipe_policy == "central_fedavg" and len(tuning.recipe_grid) >= 2
    done = _mobidfl("bench", "--study", "mobility_skew_cnn", "--tune", "policies", "--scale",
                    "ci", "--out", str(tmp_path / "t"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "declares no [tuning.policies]" in lines[0]
    assert not (tmp_path / "t").exists()


def test_tune_policies_at_ci_chooses_then_runs_paper_and_chosen_on_results_seeds(tmp_path):
    from mobidfl.analysis.bench import plan_runs
    from mobidfl.analysis.bench_scenarios import build_cells

    out = tmp_path / "tune"
    done = _mobidfl("bench", "--study", "mobility_skew", "--tune", "policies", "--scale", "ci",
                    "--policies", "cached_lru", "--seeds", "2", "--processes", "0", "--quiet",
                    "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((out / "tuning.json").read_text())
    tune = [c for c in plan["cells"] if c["stage"] == "tune"]
    result = [c for c in plan["cells"] if c["stage"] == "result"]
    # 3 columns x 4 grid points (the paper's point is one of them) on the 2 tuning seeds
    assert len(tune) == 12 and all(c["seeds"] == [1000, 1001] for c in tune)
    assert all(c["seeds"] == [0, 1] for c in result)
    assert {c["variant"] for c in result if c["paper"]} == {"base", "mobility=static",
                                                            "skew=iid"}
    # the paper-value runs on the results seeds are the study's runs: same settings, same ids
    columns = [c for c in study_module.load_study("mobility_skew").columns("ci")
               if c.variant in {"base", "mobility=static", "skew=iid"}]
    study_ids = {s.run_id for specs in plan_runs(build_cells(columns, ["cached_lru"]), [0, 1],
                                                 extra={}).values() for s in specs}
    paper_ids = {r for c in result if c["paper"] for r in c["runs"]}
    assert paper_ids == study_ids
    assert sum(plan["cpu_s_runs"].values()) > 0 and len(plan["sessions"]) == 1
    assert "| cached_lru | base |" in done.stdout
