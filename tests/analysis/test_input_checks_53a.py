"""Every failure one line (round three): the bench's own files and options.

``publish BENCH DEST`` refuses a DEST that is a file, a run's folder or another bench's
publication, and a BENCH that is not a bench, before writing; the published files
(``runs.parquet``, ``curves.parquet``, ``descriptors.csv``, ``manifest.json``) and
``regime_rule.json`` are read whole or refused in one line naming them; a bench option given
where it does nothing is refused; the recorded command names every option; a contact trace's
far-future times are refused naming their line.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from mobidfl.analysis.cli import main as mobidfl
from mobidfl.analysis.publish import main as publish
from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "published" / "benchmark" / "small"
SKEW = ROOT / "published" / "benchmark" / "mobility_skew"
RULE = SKEW / "regime_rule.json"


def _one_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _fake_bench(tmp: Path, source: Path = SMALL) -> Path:
    """A bench folder none of whose runs finished: its manifest, descriptors, empty cells/."""
    bench = tmp / f"bench_{source.name}"
    (bench / "cells").mkdir(parents=True)
    for name in ("manifest.json", "descriptors.csv"):
        shutil.copyfile(source / name, bench / name)
    return bench


def _copy(source: Path, tmp: Path) -> Path:
    dest = tmp / source.name
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("v1", "tuning"))
    return dest


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# --- publish BENCH DEST ------------------------------------------------------------------
def test_publish_into_a_file_is_refused_in_one_line(tmp_path, capsys):
    dest = tmp_path / "dest.txt"
    dest.write_text("mine\n")
    assert publish([str(_fake_bench(tmp_path)), str(dest)]) == 2
    line = _one_line(capsys)
    assert "'DEST'" in line and str(dest) in line and "a file" in line
    assert dest.read_text() == "mine\n"


def test_publish_into_a_run_folder_is_refused_and_writes_nothing(tmp_path, capsys):
    dest = tmp_path / "run"
    dest.mkdir()
    for name in ("model.csv", "config.toml"):
        (dest / name).write_text("x\n")
    assert publish([str(_fake_bench(tmp_path)), str(dest)]) == 2
    line = _one_line(capsys)
    assert str(dest) in line and "mobidfl run's folder" in line
    assert sorted(p.name for p in dest.iterdir()) == ["config.toml", "model.csv"]


def test_publish_over_another_benchs_publication_is_refused_over_its_own_accepted(tmp_path,
                                                                                   capsys):
    dest = _copy(SKEW, tmp_path)  # the mobility_skew study's publication
    before = {p.name: p.stat().st_mtime_ns for p in dest.iterdir()}
    bench = _fake_bench(tmp_path)  # the small paper bench
    assert publish([str(bench), str(dest)]) == 2
    line = _one_line(capsys)
    assert str(dest) in line and "study mobility_skew" in line
    assert {p.name: p.stat().st_mtime_ns for p in dest.iterdir()} == before
    # Its own: into a new folder, then again over that earlier publication
    new = tmp_path / "new"
    assert publish([str(bench), str(new)]) == 0
    assert publish([str(bench), str(new)]) == 0
    assert (new / "runs.parquet").is_file()


@pytest.mark.parametrize("kind", ["empty", "publication", "file"])
def test_a_bench_argument_that_is_not_a_bench_folder_is_refused(tmp_path, capsys, kind):
    bench = tmp_path / "bench"
    if kind == "empty":
        bench.mkdir()
    elif kind == "publication":
        bench = _copy(SMALL, tmp_path)
    else:
        bench.write_text("x\n")
    dest = tmp_path / "dest"
    assert publish([str(bench), str(dest)]) == 2
    line = _one_line(capsys)
    assert "'BENCH'" in line and str(bench) in line
    assert not dest.exists()


# --- the published files ------------------------------------------------------------------
def test_a_cut_runs_parquet_is_refused_by_page_in_one_line(tmp_path, capsys):
    dest = _copy(SKEW, tmp_path)
    _cut(dest / "runs.parquet")
    assert publish(["--page", str(dest), str(tmp_path / "page.md")]) == 2
    line = _one_line(capsys)
    assert str(dest / "runs.parquet") in line and "ArrowInvalid" in line
    assert not (tmp_path / "page.md").exists()


def test_a_cut_curves_parquet_is_refused_by_answer_page_in_one_line(tmp_path, capsys):
    dest = _copy(SKEW, tmp_path)
    _cut(dest / "curves.parquet")
    assert publish(["--answer-page", str(dest), str(tmp_path / "page.md")]) == 2
    assert str(dest / "curves.parquet") in _one_line(capsys)


def test_a_cut_descriptors_csv_is_refused_by_paper_page(tmp_path, capsys):
    dest = _copy(SMALL, tmp_path)
    text = (dest / "descriptors.csv").read_text()
    (dest / "descriptors.csv").write_text(text[: len(text) - 25])  # the last line cut
    assert publish(["--paper-page", str(dest), str(tmp_path / "page.md"), str(RULE)]) == 2
    line = _one_line(capsys)
    assert str(dest / "descriptors.csv") in line and "cut" in line
    assert not (tmp_path / "page.md").exists()


def test_a_cut_manifest_is_refused_by_slice_page(tmp_path, capsys):
    dest = _copy(SKEW, tmp_path)
    _cut(dest / "manifest.json")
    args = ["--slice-page", str(dest), str(tmp_path / "page.md"), str(RULE), str(SKEW)]
    assert publish(args) == 2
    assert str(dest / "manifest.json") in _one_line(capsys)


def test_runs_of_another_bench_are_refused(tmp_path, capsys):
    dest = _copy(SKEW, tmp_path)
    shutil.copyfile(SMALL / "runs.parquet", dest / "runs.parquet")
    assert publish(["--page", str(dest), str(tmp_path / "page.md")]) == 2
    line = _one_line(capsys)
    assert str(dest / "runs.parquet") in line and "another bench" in line


# --- regime_rule.json ---------------------------------------------------------------------
def _rule(tmp: Path, **change) -> Path:
    data = json.loads(RULE.read_text())
    data["rule"].update(change)
    path = tmp / "rule.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("change", "said"), [
    ({"x_cut": float("nan")}, "rule.x_cut = nan"),
    ({"y_cut": 1e400}, "rule.y_cut = inf"),
    ({"predict": {"lo,lo": "gossip"}}, "'gossip' is not a registered policy"),
    ({"predict": {"middle": "psfl"}}, "regime 'middle'"),
    ({"train_hits": 30}, "train_hits = 30 > rule.train_n = 20"),
])
def test_a_damaged_rule_is_refused_in_one_line(tmp_path, change, said):
    from mobidfl.analysis.regime_map import load_rule

    path = _rule(tmp_path, **change)
    with pytest.raises(ConfigError) as refused:
        load_rule(path)
    assert said in str(refused.value) and str(path) in str(refused.value)


def test_describe_with_a_nan_rule_predicting_gossip_is_refused(tmp_path, capsys):
    path = _rule(tmp_path, x_cut=float("nan"), predict={"lo,lo": "gossip", "hi,hi": "psfl"})
    code = mobidfl(["bench", "--describe", "static_sensors", "--scale", "ci", "--rule", str(path)])
    assert code == 2
    assert str(path) in _one_line(capsys)


def test_paper_page_with_a_rule_predicting_gossip_is_refused(tmp_path, capsys):
    path = _rule(tmp_path, predict={"lo,lo": "gossip"})
    assert publish(["--paper-page", str(SMALL), str(tmp_path / "p.md"), str(path)]) == 2
    assert "gossip" in _one_line(capsys)
    assert not (tmp_path / "p.md").exists()


def _answer() -> dict:
    """A schema-3 regime_rule.json as answer_page.rule_json writes it."""
    verdict = {"kind": "winner", "best": "psfl", "not_beaten": ["psfl"], "lead_pp": 1.5,
               "low_pp": 0.5, "high_pp": 2.5}
    return {"schema": 3, "study": "mobility_regimes",
            "rules": {"auc_acc": {"names": ["label_skew"], "cuts": [0.3],
                                  "predict": {"lo": "psfl", "hi": "cached_lru"},
                                  "constant": "psfl", "beats_constant_out_of_sample": True,
                                  "loo_rule": 5, "loo_constant": 3, "n": 8}},
            "ranges": {"neighbours_per_step": [0.1, 9.0], "label_skew": [0.0, 0.8]},
            "worlds": [{"variant": "base", "heldout": False, "ceiling": False,
                        "neighbours_per_step": 2.0, "label_skew": None,
                        "auc_acc": verdict, "budget_acc": verdict}]}


@pytest.mark.parametrize(("path", "value", "said"), [
    (("rules", "auc_acc", "cuts"), [float("nan")], "cuts[0] = nan"),
    (("rules", "auc_acc", "predict"), {"lo": "gossip", "hi": "psfl"}, "'gossip'"),
    (("rules", "auc_acc", "constant"), "gossip", "constant = 'gossip'"),
    (("ranges", "label_skew"), [0.0], "is not [low, high]"),
    (("worlds",), "all", "no 'worlds' list"),
    (("schema",), 4, "schema 4"),
])
def test_a_damaged_schema_3_answer_is_refused(tmp_path, path, value, said):
    from mobidfl.analysis.answer import load_answer

    good = tmp_path / "good.json"
    good.write_text(json.dumps(_answer()))
    assert load_answer(str(good))["study"] == "mobility_regimes"
    data = _answer()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as refused:
        load_answer(str(bad))
    assert said in str(refused.value) and str(bad) in str(refused.value)
    assert load_answer(str(RULE)) is None  # the unversioned rule: left to load_rule


# --- the bench's options ------------------------------------------------------------------
@pytest.mark.parametrize("extra", [
    ["--max-seeds", "8"],
    ["--cpus-per-run", "2"],
    ["--gpus-per-run", "1"],
    ["--batch-runs", "--processes", "2"],
    ["--report-only", "--retry-errors"],
])
def test_an_option_that_needs_another_is_refused_in_one_line(tmp_path, capsys, extra):
    out = tmp_path / "out"
    code = mobidfl(["bench", "--scale", "ci", "--seeds", "2", "--scenarios", "static_sensors",
                    "--links", "ideal", "--policies", "local", "--quiet", "--out", str(out),
                    *extra])
    assert code == 2
    line = _one_line(capsys)
    assert extra[-1 if extra[-1].startswith("--") else -2] in line
    assert not out.exists()


@pytest.mark.parametrize("extra", [["--out", "x"], ["--study", "mobility_skew"],
                                   ["--processes", "2"]])
def test_a_run_option_with_describe_is_refused(capsys, extra):
    assert mobidfl(["bench", "--describe", "static_sensors", "--scale", "ci", *extra]) == 2
    assert extra[0] in _one_line(capsys)


def test_an_option_tune_does_not_use_is_refused(tmp_path, capsys):
    out = tmp_path / "t"
    code = mobidfl(["bench", "--study", "mobility_skew", "--tune", "policies", "--scale", "ci",
                    "--until-half-width", "0.02", "--out", str(out)])
    assert code == 2
    assert "--until-half-width" in _one_line(capsys)
    assert not out.exists()


def _non_default(action: argparse.Action) -> list[str]:
    """The argv that gives ``action`` a value other than its default."""
    flag = action.option_strings[0]
    if action.nargs == 0:
        return [flag]
    if action.choices:
        return [flag, next(c for c in action.choices if c != action.default)]
    if action.type is int:
        return [flag, str((action.default or 0) + 7)]
    if action.type is float:
        return [flag, str((action.default or 0.0) + 0.25)]
    return [flag, f"{action.dest}_value"]


def test_the_recorded_command_names_every_option_of_the_bench():
    from mobidfl.analysis.bench import add_bench_parser, bench_command

    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers())
    bench = parser._subparsers._group_actions[0].choices["bench"]
    options = [a for a in bench._actions if a.option_strings and a.dest != "help"]
    argv = [part for action in options for part in _non_default(action)]
    command = bench_command(parser.parse_args(["bench", *argv])).split()
    missing = [a.option_strings[0] for a in options if a.option_strings[0] not in command]
    assert not missing, missing
    for action in options:  # with its value
        given = _non_default(action)
        if len(given) == 2:
            assert command[command.index(given[0]) + 1] == given[1], given


# --- contact traces -----------------------------------------------------------------------
@pytest.mark.parametrize(("text", "line"), [
    ("0 1 0 10\n1 2 5 1e300\n", 2),
    ("0 1 0 10\n1 2 1e308 1e308\n", 2),
    ("1 2 3 1e13\n", 1),
])
def test_contact_times_beyond_1e12_s_are_refused_naming_the_line(tmp_path, text, line):
    from mobidfl.maps.contact_trace import read_contacts

    path = tmp_path / "trace.txt"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        read_contacts(path, fmt="crawdad")
    assert f"line {line}:" in str(refused.value) and "1e+12" in str(refused.value)


def test_one_events_beyond_1e12_s_are_refused(tmp_path):
    from mobidfl.maps.contact_trace import read_contacts

    path = tmp_path / "one.txt"
    path.write_text("0 CONN 1 2 up\n1e300 CONN 1 2 down\n")
    with pytest.raises(ConfigError, match="line 2: time"):
        read_contacts(path, fmt="one")
