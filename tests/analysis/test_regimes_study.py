"""The pre-registered study (version 3, mobility_regimes) as a user runs it: the declared
pilot at ci, the results run refused at other seeds than declared and from a tree with
changes, and what the manifest records of the code each session started from."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis import bench, bench_run
from mobidfl.analysis.study import load_study
from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _tiny_fashion(root: Path, *, train: int = 600, test: int = 100) -> Path:
    """A made-up Fashion-MNIST in Debian's layout (four idx .gz files): the study's base
    data set, which the suite otherwise hides (tests/conftest.py)."""
    rng = np.random.default_rng(0)

    def idx(array: np.ndarray) -> bytes:
        head = bytes([0, 0, 8, array.ndim]) + b"".join(
            int(d).to_bytes(4, "big") for d in array.shape)
        return gzip.compress(head + array.astype(np.uint8).tobytes(), mtime=0)

    root.mkdir(parents=True, exist_ok=True)
    files = {"train-images-idx3-ubyte": rng.integers(0, 256, (train, 28, 28)),
             "train-labels-idx1-ubyte": np.arange(train) % 10,
             "t10k-images-idx3-ubyte": rng.integers(0, 256, (test, 28, 28)),
             "t10k-labels-idx1-ubyte": (np.arange(test) + 3) % 10}
    for name, array in files.items():
        (root / f"{name}.gz").write_bytes(idx(array))
    return root


def _mobidfl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobidfl.analysis.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def ci_pilot(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The declared pilot at ci, run once through the CLI as the docs show it."""
    tmp = tmp_path_factory.mktemp("regimes")
    fashion = _tiny_fashion(tmp / "fashion")
    out = tmp / "pilot"
    done = _mobidfl("bench", "--study", "mobility_regimes", "--pilot", "--scale", "ci",
                    "--policies", "declared", "--processes", "1", "--quiet", "--out",
                    str(out), env={"MOBIDFL_FASHION_DIR": str(fashion)})
    return out, done


def test_the_declared_pilot_runs_at_ci_and_the_manifest_names_the_start_commit(ci_pilot):
    out, done = ci_pilot
    # Assert: the pilot's worlds, seeds and declared arms, PSFL in the study's reading
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((out / "manifest.json").read_text())
    study = load_study("mobility_regimes")
    assert plan["seeds"] == study.design["seeds"]["pilot_seeds"]
    assert [c["variant"] for c in plan["columns"]] == study.design["seeds"]["pilot_worlds"]
    assert list(plan["policies"]) == ["local", "central_fedavg", "dpsgd", "cached_lru", "psfl",
                                      "fedavg_weighted"]
    assert plan["policies"]["psfl"]["settings"]["psfl.loss_samples"] == 288
    assert plan["policies"]["psfl"]["study_reading"] == {"psfl.loss_batches": 4.5,
                                                         "psfl.loss_samples": 288}
    # the commit the session STARTED from, with the tree's state, before any run
    (start,) = plan["session_starts"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert start["commit"] == head and isinstance(start["dirty"], bool)
    assert (start["diff_sha256"] != "") == start["dirty"]
    assert plan["sessions"][0]["commit"] == start["commit"]
    # every run records the primary metric and its CPU seconds
    _, runs, _ = bench.load_results(out)
    ok = runs[runs["status"] == "ok"]
    assert len(ok) == len(runs) == 5 * 6 * 2
    assert ok["auc_acc"].between(0, 1).all() and (ok["cpu_s"] > 0).all()
    assert (pd.read_csv(out / "descriptors.csv")["seeds"] == 2).all()


def _no_runs(*_: object, **__: object) -> None:
    raise AssertionError("the bench went on to run: the refusal did not come first")


def test_a_results_run_at_other_seeds_than_declared_is_refused_in_one_line(tmp_path,
                                                                          monkeypatch):
    # Prepare: a bench that would fail at once if it got as far as running
    monkeypatch.setattr(bench_run, "run_plan", _no_runs)
    # Execute / Assert: 3 seeds where the power analysis declared 4: one line, nothing written
    with pytest.raises(ConfigError) as info:
        bench.run_bench(out=tmp_path / "r", study="mobility_regimes", policies="declared",
                        seeds=3, first_seed=0, scale="small", progress=False)
    assert "declared 4 seeds from 0" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "r").exists()


def test_a_designed_study_refuses_a_tree_with_changes(tmp_path, monkeypatch):
    # Prepare: the declared seeds, from a tree git says has changes
    monkeypatch.setattr(bench_run, "run_plan", _no_runs)
    monkeypatch.setattr(bench_run, "source_state", lambda: {"commit": "abc", "dirty": True,
                                                            "diff_sha256": "f00"})
    # Execute / Assert
    with pytest.raises(ConfigError, match="a clean git tree"):
        bench.run_bench(out=tmp_path / "r", study="mobility_regimes", policies="declared",
                        seeds=4, first_seed=0, scale="small", progress=False)
    assert not (tmp_path / "r").exists()


def test_pilot_without_a_study_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="--pilot"):
        bench.run_bench(out=tmp_path / "r", scenarios=["cars_manhattan"], pilot=True,
                        scale="ci", progress=False)


def test_a_published_pilot_gives_a_page_whose_numbers_are_its_data(ci_pilot, tmp_path):
    from mobidfl.analysis import answer_page as ap
    from mobidfl.analysis.publish import publish_bench

    # Prepare: the ci pilot published as results, and as its own pilot
    out, done = ci_pilot
    assert done.returncode == 0, done.stderr[-3000:]
    dest = tmp_path / "published"
    publish_bench(out, dest)
    publish_bench(out, dest / "pilot")
    # Execute
    got = ap.answer(dest)
    page = ap.answer_page(dest, figure_map="m.png", figure_pareto="b.png", got=got)
    paths = ap.figures(got, tmp_path / "m.png", tmp_path / "b.png")
    rule = json.loads(ap.rule_json(got))
    # Assert: one verdict per world and metric, counted on the page; the rule file holds
    # every world with its descriptors and both verdicts
    worlds = got["worlds"]
    assert len(worlds) == 5
    kinds = ["ceiling" if w["ceiling"] else w["verdict"].kind for _, w in worlds.iterrows()]
    row = next(ln for ln in page.splitlines() if ln.startswith("| mean accuracy over the run"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == [str(kinds.count(k)) for k in ("winner", "level", "undecided",
                                                       "ceiling")]
    assert "started from commit(s)" in page and "## Every world" in page
    assert [w["variant"] for w in rule["worlds"]] == list(worlds["variant"])
    assert set(rule["ranges"]) == {"neighbours_per_step", "label_skew", "samples_per_agent"}
    assert all(p.stat().st_size > 1000 for p in paths)
