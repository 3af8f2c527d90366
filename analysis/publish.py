"""Published per-run data of a bench, and the findings page generated from it alone.

``python -m mobidfl.analysis.publish BENCH_FOLDER DEST`` copies what a reader needs to re-check a
bench into ``DEST`` (``published/benchmark/<name>/``): ``runs.parquet`` (every run: its id,
which is the hash of its settings and seed, its cell, column, policy, seed, status and final
numbers), ``curves.parquet`` (every run's evaluated accuracy over simulated time),
``descriptors.csv`` (each world's measured regime) and ``manifest.json`` (the plan: worlds,
policies, seeds, and every session's command, machine, versions and commit). The curves
carry the bytes sent per agent by each evaluation (:data:`mobidfl.analysis.comm.CURVE`) for runs
that counted them; the page's communication section is written from them when present.

``python -m mobidfl.analysis.publish --page DEST PAGE`` writes the findings page from those files
only: it recomputes the leaderboard from the runs (:func:`mobidfl.analysis.bench.leaderboard`), the
winners and the regime map from the leaderboard and descriptors
(:mod:`mobidfl.analysis.regime_map`), and writes every number of the page from them.
``tests/published/test_published_study.py`` regenerates the page and fails when it differs from the
committed one.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.bench_files import read_descriptors, read_manifest, read_published
from mobidfl.analysis.comm import CURVE
from mobidfl.analysis.measures import Descriptor, descriptor_named, page_descriptors
from mobidfl.analysis.regime_map import RULE_SUFFIX, X, Y, answer, regime_figure, rule_json
from mobidfl.errors import ConfigError

__all__ = ["check_bench", "check_dest", "communication", "load_published", "paper_worlds_page",
           "publish_bench", "recompute", "study_page"]

RULE = "regime_rule.json"
"""The decision rule drawn from the published study (``mobidfl bench --describe W --rule``)."""
RUNS = "runs.parquet"
CURVES = "curves.parquet"
COPIED = ("manifest.json", "descriptors.csv")


def publish_bench(folder: str | Path, dest: str | Path) -> list[Path]:
    """Write ``folder``'s per-run data to ``dest`` (module docstring); returns the files.

    Both are checked before anything is written: ``folder`` is a whole bench folder and
    ``dest`` an empty or absent folder or an earlier publication of the same bench
    (:func:`check_dest`); else one :class:`~mobidfl.errors.ConfigError` naming it.
    """
    from mobidfl.analysis.bench import load_results
    from mobidfl.atomic import write_parquet

    folder, dest = Path(folder), Path(dest)
    plan = check_bench(folder)
    check_dest(dest, plan)
    read_descriptors(folder / "descriptors.csv")  # copied as is: it must be whole
    dest.mkdir(parents=True, exist_ok=True)
    _, runs, curves = load_results(folder)
    runs = runs.drop(columns=[c for c in ("_table",) if c in runs])
    written = [write_parquet(runs, dest / RUNS, index=False),
               write_parquet(curves, dest / CURVES, index=False)]
    for name in COPIED:
        shutil.copyfile(folder / name, dest / name)
        written.append(dest / name)
    return written


def check_bench(folder: Path) -> dict[str, Any]:
    """The plan of the bench folder ``folder`` (checked whole), or one ConfigError naming it.

    WHY: a folder that is not a bench (a publication, a run, a typo) would publish no runs, or
    end in a traceback half-way.
    """
    from mobidfl.analysis.bench import CELLS, check_bench_folder
    from mobidfl.analysis.runner import BenchDamaged

    wanted = "a bench folder (the --out of mobidfl bench: manifest.json with its cells)"
    if not folder.is_dir():
        raise ConfigError("BENCH", str(folder), wanted + (" (it is a file)" if folder.exists()
                                                          else " (it does not exist)"))
    if not (folder / "manifest.json").is_file() or not (folder / CELLS).is_dir():
        raise ConfigError("BENCH", str(folder), f"{wanted} (it has no manifest.json and "
                          f"{CELLS}/ folder)")
    try:
        return check_bench_folder(folder)
    except BenchDamaged as exc:
        raise ConfigError("BENCH", str(folder), f"a whole bench folder ({exc.path} is "
                          f"damaged: {exc.why})") from None


def _same_bench(plan: dict[str, Any]) -> str:
    """What a bench is of, in words: its study, else its scenarios."""
    return f"study {plan['study']}" if plan.get("study") else \
        "scenarios " + ", ".join(sorted(plan.get("scenarios", {})))


def check_dest(dest: Path, plan: dict[str, Any]) -> None:
    """Refuse a ``dest`` that is not empty, absent or an earlier publication of this bench.

    WHY: publishing beside a run's ``model.csv`` or over another study's publication mixes
    two things no reader can tell apart; a file there ended in a traceback.
    """
    from mobidfl.analysis.bench import CELLS
    from mobidfl.analysis.cli import RUN_OUTPUTS
    from mobidfl.atomic import TEMP_PREFIX

    allowed = "an empty or absent folder, or an earlier publication of the same bench"
    if dest.exists() and not dest.is_dir():
        raise ConfigError("DEST", str(dest), f"{allowed} (it is a file)")
    entries = sorted(p.name for p in dest.iterdir()
                     if not p.name.startswith(TEMP_PREFIX)) if dest.is_dir() else []
    if not entries:
        return
    run = [name for name in entries if name in RUN_OUTPUTS]
    if run:
        raise ConfigError("DEST", str(dest), f"{allowed} (it holds {run[0]}: a mobidfl run's "
                          "folder)")
    if CELLS in entries:
        raise ConfigError("DEST", str(dest), f"{allowed} (it holds {CELLS}/: a bench's own "
                          "folder, not a publication)")
    if "manifest.json" not in entries:
        raise ConfigError("DEST", str(dest), f"{allowed} (it holds "
                          + ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
                          + ": no manifest.json, not a publication)")
    try:
        previous = read_manifest(dest)
    except ConfigError as exc:
        raise ConfigError("DEST", str(dest), f"{allowed} (its manifest.json is not a "
                          f"bench's: {exc.allowed})") from None
    if _same_bench(previous) != _same_bench(plan):
        raise ConfigError("DEST", str(dest), f"{allowed} (it is the publication of "
                          f"{_same_bench(previous)}; this bench is of {_same_bench(plan)})")


def load_published(dest: str | Path) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """``(plan, runs, descriptors)`` from published data, each file read whole or refused.

    Each ok run carries its curve as ``_table`` (what :func:`mobidfl.analysis.bench.leaderboard`
    reads for time to target).
    """
    plan, runs, curves, descriptors = read_published(dest)
    cols = [c for c in CURVE if c in curves]  # bytes per agent: runs that counted them
    by_run = {key: group[cols].reset_index(drop=True)
              for key, group in curves.groupby(["column", "policy", "seed"], sort=False)}
    runs["_table"] = [by_run.get((c, p, s), pd.DataFrame(columns=cols))
                      for c, p, s in zip(runs["column"], runs["policy"], runs["seed"],
                                         strict=True)]
    return plan, runs, descriptors


def recompute(dest: str | Path) -> dict[str, Any]:
    """Leaderboard, column outcomes, rule and its scores, from published data only."""
    from mobidfl.analysis.bench import leaderboard

    plan, runs, descriptors = load_published(dest)
    board = leaderboard(plan, runs)
    return {"plan": plan, "board": board, "runs": runs, **answer(board, descriptors)}


def _shown(dest: str | Path) -> str:
    """``dest`` as the page names it: relative to the repository when inside it."""
    path = Path(dest).resolve()
    try:
        return path.relative_to(Path(__file__).resolve().parents[1]).as_posix()
    except ValueError:
        return path.as_posix()


def _num(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


PAGE_WORLD = page_descriptors((X, Y))
"""The descriptors of a world the pages' world tables show: the regime map's two axes, then
every ``on_pages`` one of :data:`mobidfl.analysis.measures.DESCRIPTORS`."""
PAGE_AXES = [descriptor_named(X), descriptor_named(Y)]
"""The descriptors of the comparison page's world table: the regime map's two axes."""


def _world_heads(shown: Sequence[Descriptor]) -> str:
    return " | ".join(d.page_title for d in shown)


def _world_cells(row: Mapping[str, Any], shown: Sequence[Descriptor]) -> str:
    return " | ".join(_num(row[d.name]) for d in shown)


def study_page(dest: str | Path, *, figure: str) -> str:
    """The findings page of a published study, every number computed from ``dest``."""
    got = recompute(dest)
    plan, board, outcomes, rule = got["plan"], got["board"], got["outcomes"], got["rule"]
    runs = got["runs"]
    ok = runs[runs["status"] == "ok"]
    sessions = plan.get("sessions", [])
    machines = sorted({s["machine"].get("cpu", "") for s in sessions if s.get("machine")})
    commits = sorted({s.get("commit", "")[:7] for s in sessions if s.get("commit")})
    tr, ho = got["train"], got["heldout"]
    detect = board.groupby("column")["detectable_diff"].first()
    crowded = _crowded(ok, outcomes)
    per_world = ok.groupby("policy")["column"].nunique()
    everywhere = sorted(p for p, n in per_world.items() if n == ok["column"].nunique())
    somewhere = sorted(p for p, n in per_world.items() if n < ok["column"].nunique())
    ran = set(outcomes["column"])
    missing = [(c["variant"], board.loc[board["column"] == c["key"], "reason"].dropna())
               for c in plan["columns"] if c["key"] not in ran]
    lines = [
        f"# Findings: the {plan['study']} study",
        "",
        "<!-- generated by `python -m mobidfl.analysis.publish --page "
        f"{_shown(dest)} <this page>` from the published per-run data; "
        "tests/published/test_published_study.py fails when this page and the data disagree -->",
        "",
        f"Data: `{_shown(dest)}/` ({len(ok)} finished runs of {len(runs)}; "
        f"{len(everywhere)} policies in {ok['column'].nunique()} worlds"
        + (f" plus {', '.join(somewhere)} where they can run" if somewhere else "")
        + f" ({len(plan['columns'])} worlds planned) x seeds "
        f"{plan['seeds'][0]}-{plan['seeds'][-1]}; scale `{plan['scale']}`; commit(s) "
        + ("" if plan.get("session_starts") else "recorded at the session's end, not "
           "necessarily the code that ran: ")
        + f"{', '.join(f'`{c}`' for c in commits) or 'unknown'}; machine(s) "
        f"{', '.join(machines) or 'unknown'}).",
        "",
        "This is version 2 of the controlled study, kept as a record. Its answer did not "
        "discriminate between policies (its rule did no better than always running one policy, "
        "left one world out): version 3, pre-registered, off the ceiling "
        "and with bytes, is [the regimes study](regimes.md).",
        "",
        "## The answer",
        "",
        f"Drawn on the {tr['n']} study worlds (one factor at a time and the mobility x skew "
        "crosses), as a function of two measured properties of a world, contacts per agent "
        "per step and the label-skew index:",
        "",
        f"> {rule.text()}.",
        "",
        f"On the study worlds it names the winner in {tr['exact']} of {tr['n']}, and a policy "
        f"no other beats (Holm, all pairs) in {tr['contender']} of {tr['n']}. **On the "
        f"{ho['n']} held-out worlds, which did not draw it: {ho['exact']} of {ho['n']} "
        f"winners, {ho['contender']} of {ho['n']} not beaten.**",
        "",
        f"![regime map]({figure})",
        "",
        f"In {crowded} of {len(outcomes)} worlds four or more policies besides the winner "
        "are not beaten by it (Holm over all pairs; arms whose runs repeat another's "
        "exactly, such as mobility_aware where all speeds are equal, counted once): there "
        "the winner is the best of means that the seeds do not separate, and the rule's "
        "exact hits say little.",
        "",
        "How far to trust it: with "
        f"{len(plan['seeds'])} seeds per cell, the median difference a column's paired test "
        f"detects at 80 % power is {_num(float(np.nanmedian(detect)) * 100, 1)} points "
        f"(range {_num(float(np.nanmin(detect)) * 100, 1)}-"
        f"{_num(float(np.nanmax(detect)) * 100, 1)}); a margin below that is not a ranking.",
        "",
        "## Every world",
        "",
        f"| world | {_world_heads(PAGE_WORLD)} | winner | margin (pp) | not beaten "
        "| rule says |",
        "|---|" + "---|" * (len(PAGE_WORLD) + 4),
    ]
    for _, row in outcomes.iterrows():
        lines.append(
            f"| {row['variant']} | {_world_cells(row, PAGE_WORLD)} "
            f"| {row['winner']} | {_num(row['margin_pp'], 1)} "
            f"| {row['contenders'].replace(';', ', ')} | {row['predicted'] or '-'} |")
    if missing:
        lines += ["", "Worlds without a finished run (refused by the model, so not on the map):",
                  ""]
        lines += [f"* {variant}: {reasons.iloc[0] if len(reasons) else 'not run'}"
                  for variant, reasons in missing]
    lines += ["", "## One factor at a time: final mean accuracy", "",
              "Columns: the base and each non-base level of each factor (mean over seeds).", ""]
    pivot = board[board["status"] == "ok"].pivot_table(index="policy", columns="variant",
                                                       values="final_acc", sort=False)
    order = [c["variant"] for c in plan["columns"] if c["variant"] in pivot.columns]
    lines.append("| policy | " + " | ".join(order) + " |")
    lines.append("|---|" + "---|" * len(order))
    for policy, row in pivot.iterrows():
        lines.append(f"| {policy} | " + " | ".join(_num(row[c], 3) for c in order) + " |")
    lines += ["", *across(plan, ok)]
    lines += ["", *communication(plan, board)]
    lines += earlier_versions(dest, plan, outcomes, rule)
    return "\n".join(lines) + "\n"


def _crowded(ok: pd.DataFrame, outcomes: pd.DataFrame) -> int:
    """Worlds where four or more policies besides the winner are not beaten by it.

    Arms whose runs repeat another's exactly in that world (mobility_aware where every speed
    is equal) count once: they are one arm, not two votes.
    """
    from mobidfl.analysis.answer import duplicate_arms

    merged = {column: duplicate_arms({str(p): g.set_index("seed")["final_acc"]
                                      for p, g in group.groupby("policy", sort=True)})
              for column, group in ok.groupby("column")}
    others = [len([p for p in str(c).split(";") if p != w and p not in merged.get(col, {})])
              for col, c, w in zip(outcomes["column"], outcomes["contenders"],
                                   outcomes["winner"], strict=True)]
    return int(sum(n >= 4 for n in others))


def _pairs_of_columns(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, base key, other key) of each pair of columns the page compares.

    Each one-factor column against the base, and each cross ``A+B`` against the column of
    ``B`` alone (A's effect under B), where both ran.
    """
    key = {c["variant"]: c["key"] for c in plan["columns"]}
    pairs = []
    for variant, other in key.items():
        if variant == "base" or ":" in variant:  # held-out worlds are no one-factor change
            continue
        parts = variant.split("+")
        start = "base" if len(parts) == 1 else "+".join(parts[1:])
        if start in key:
            pairs.append((f"{start} -> {variant}", key[start], other))
    return pairs


def across(plan: dict[str, Any], ok: pd.DataFrame) -> list[str]:
    """The page's claims across columns: per change of the world, what it does to each policy.

    Which policies it lowers or raises, each change a family of its own (paired over seeds,
    Holm over the policies: :func:`mobidfl.analysis.bench_stats.across_columns`).
    """
    from mobidfl.analysis.bench_stats import across_columns

    lines = ["## Across columns: what each change of the world does to each policy", "",
             "A claim across columns (\"static cars lower accuracy\") is not a per-column "
             "ranking: each change below is its own family of tests, the paired difference of "
             "a policy's final accuracy (changed world - starting world, same seeds) per "
             "policy, Holm over the policies. Points are percentage points (mean over seeds); "
             "\"no claim\": Holm does not reject at 5 %.", "",
             "| change | lowers (Holm) | raises (Holm) | no claim |", "|---|---|---|---|"]
    for label, start, other in _pairs_of_columns(plan):
        table = across_columns(ok, base=start, other=other)
        if table.empty:
            continue

        def said(direction: str, table: pd.DataFrame = table) -> str:
            mine = table[table["direction"] == direction].sort_values("diff")
            return ", ".join(f"{r.policy} {r.diff * 100:+.1f}" for r in mine.itertuples()) \
                or "-"

        lines.append(f"| {label} | {said('lowers')} | {said('raises')} | "
                     f"{int((table['direction'] == 'no claim').sum())} of {len(table)} |")
    return lines


def _world_label(column: dict[str, Any]) -> str:
    """``scenario[variant] @ link``: how the paper-worlds page names a column."""
    variant = f"[{column['variant']}]" if column.get("variant") else ""
    return f"{column['scenario']}{variant} @ {column['link']}"


def _paper_pairs(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, from key, to key) of each pair of columns the paper-worlds page compares.

    Within a scenario and link, each pair of its variants in the declared order (a paper's
    own axis, e.g. the UAVs' mobility); and per world, the ideal link against each other
    link.
    """
    columns = plan["columns"]
    pairs = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for column in columns:
        groups.setdefault((column["scenario"], column["link"]), []).append(column)
    for (scenario, link), mine in groups.items():
        for i, a in enumerate(mine):
            for b in mine[i + 1:]:
                pairs.append((f"{scenario} @ {link}: {a['variant']} -> {b['variant']}",
                              a["key"], b["key"]))
    ideal = {(c["scenario"], c.get("variant", "")): c for c in columns if c["link"] == "ideal"}
    for column in columns:
        start = ideal.get((column["scenario"], column.get("variant", "")))
        if column["link"] != "ideal" and start is not None:
            pairs.append((f"{_world_label(start).split(' @ ')[0]}: ideal -> {column['link']}",
                          start["key"], column["key"]))
    return pairs


def paper_worlds_page(dest: str | Path, *, rule: str | Path) -> str:
    """The paper worlds' findings page, every number computed from the published ``dest``.

    Each world's winner and the policies it does not beat; a study's published ``rule``
    (``analysis/scenarios/studies/<study>_rule.json``) scored on these worlds, which did not
    draw it; the claims across columns (a paper's own axis, the link) each tested as their
    own family; bytes. No rule is drawn on these worlds: each changes mobility, label skew,
    recipe and fleet at once (the controlled study separates them).
    """
    from mobidfl.analysis.bench_stats import across_columns
    from mobidfl.analysis.regime_map import load_rule, score_rule

    got = recompute(dest)
    plan, board, outcomes, runs = got["plan"], got["board"], got["outcomes"], got["runs"]
    ok = runs[runs["status"] == "ok"]
    sessions = plan.get("sessions", [])
    machines = sorted({s["machine"].get("cpu", "") for s in sessions if s.get("machine")})
    commits = sorted({s.get("commit", "")[:7] for s in sessions if s.get("commit")})
    study_rule = load_rule(rule)
    outcomes = outcomes.assign(predicted=[study_rule(x, y) for x, y in
                                          zip(outcomes[X], outcomes[Y], strict=True)])
    score = score_rule(study_rule, outcomes)
    label = {c["key"]: _world_label(c) for c in plan["columns"]}
    detect = board.groupby("column")["detectable_diff"].first()
    crowded = _crowded(ok, outcomes)
    lines = [
        "# Findings: the paper worlds", "",
        "<!-- generated by `python -m mobidfl.analysis.publish --paper-page "
        f"{_shown(dest)} <this page> {_shown(rule)}` from the published per-run data; "
        "tests/published/test_published_paper_worlds.py fails when this page and the data disagree "
        "-->",
        "",
        f"Data: `{_shown(dest)}/` ({len(ok)} finished runs of {len(runs)}; "
        f"{len(plan['columns'])} worlds (scenario, its variant, the link) x "
        f"{board['policy'].nunique()} policies x seeds {plan['seeds'][0]}-{plan['seeds'][-1]}; "
        f"scale `{plan['scale']}`; commit(s) {', '.join(f'`{c}`' for c in commits) or 'unknown'}; "
        f"machine(s) {', '.join(machines) or 'unknown'}). Each world is its source paper's "
        "system at the bench's size, so each changes mobility, label skew, recipe and fleet "
        "at once: a winner here is a fact about that world, not about mobility "
        "([the controlled study](study.md) changes one factor at a time).", "",
        "## The controlled study's rule on these worlds", "",
        f"The rule drawn on the controlled study (`{_shown(rule)}`): {study_rule.text()}. "
        "These worlds did not draw it, and their recipes differ from the study's. **It names "
        f"the winner in {score['exact']} of {score['n']} worlds and a policy no other beats "
        f"(Holm, all pairs) in {score['contender']} of {score['n']}.**"
        + (f" {score['unmeasured']} worlds are not counted: their regime descriptors are "
           "measured without training, and their mobility follows the learning ("
           + ", ".join(label.get(c, c) for c in outcomes.loc[outcomes["predicted"] == "",
                                                              "column"])
           + "), so they have none and the rule says nothing there."
           if score["unmeasured"] else "")
        + f" In {crowded} of {len(outcomes)} worlds four or more policies besides the winner "
        "are not beaten by it (arms whose runs repeat another's exactly counted once).", "",
        "## Every world", "",
        f"| world | {_world_heads(PAGE_WORLD)} | winner | margin (pp) "
        "| not beaten (Holm) | detectable (pp) | the study's rule says |",
        "|---|" + "---|" * (len(PAGE_WORLD) + 5),
    ]
    for _, row in outcomes.iterrows():
        lines.append(
            f"| {label.get(row['column'], row['column'])} | {_world_cells(row, PAGE_WORLD)} "
            f"| {row['winner']} "
            f"| {_num(row['margin_pp'], 1)} | {row['contenders'].replace(';', ', ')} "
            f"| {_num(float(detect.get(row['column'], np.nan)) * 100, 1)} "
            f"| {row['predicted'] or '-'} |")
    missing = [c for c in plan["columns"] if c["key"] not in set(outcomes["column"])]
    if missing:
        lines += ["", "Worlds without a finished run: "
                  + ", ".join(label[c["key"]] for c in missing) + "."]
    lines += ["", "## Across columns: a paper's own axis and the link", "",
              "Each change is its own family of tests: the paired difference of a policy's "
              "final accuracy (second world - first, same seeds), Holm over the policies; "
              "percentage points, mean over seeds; \"no claim\": Holm does not reject at 5 %.",
              "", "| change | lowers (Holm) | raises (Holm) | no claim |", "|---|---|---|---|"]
    for text, start, other in _paper_pairs(plan):
        table = across_columns(ok, base=start, other=other)
        if table.empty:
            continue
        said = {d: ", ".join(f"{r.policy} {r.diff * 100:+.1f}" for r in
                             table[table["direction"] == d].sort_values("diff").itertuples())
                or "-" for d in ("lowers", "raises")}
        lines.append(f"| {text} | {said['lowers']} | {said['raises']} | "
                     f"{int((table['direction'] == 'no claim').sum())} of {len(table)} |")
    lines += ["", *communication(plan, board)]
    return "\n".join(lines) + "\n"


def slice_page(dest: str | Path, *, rule: str | Path, reference: str | Path) -> str:
    """The page of a study that changes one thing of a published one, every number from data.

    ``dest`` is the study (e.g. the CNN on the mobility x skew slice), ``reference`` the
    published study it departs from (the MLP study) and ``rule`` the rule drawn on that one.
    Per world of ``dest``: its winner and the policies it does not beat, what the rule says,
    and the reference's best of the same policies on the same world (by mean final
    accuracy), so a reader sees whether the answer survives the change.
    """
    from mobidfl.analysis.regime_map import REFERENCE, load_rule, score_rule

    got, ref = recompute(dest), recompute(reference)
    plan, board, outcomes, runs = got["plan"], got["board"], got["outcomes"], got["runs"]
    ok = runs[runs["status"] == "ok"]
    sessions = plan.get("sessions", [])
    machines = sorted({s["machine"].get("cpu", "") for s in sessions if s.get("machine")})
    commits = sorted({s.get("commit", "")[:7] for s in sessions if s.get("commit")})
    policies = [p for p in board["policy"].drop_duplicates() if p != REFERENCE]
    study_rule = load_rule(rule)
    outcomes = outcomes.assign(predicted=[study_rule(x, y) for x, y in
                                          zip(outcomes[X], outcomes[Y], strict=True)])
    score = score_rule(study_rule, outcomes)
    now, then = _base_world(plan), _base_world(ref["plan"])
    changed = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
    what = ", ".join(f"{k} {then.get(k, 'unset')} -> {now.get(k, 'unset')}" for k in changed)
    done = ref["board"][(ref["board"]["status"] == "ok")
                        & ref["board"]["policy"].isin(policies)]
    ref_best = {v: g.loc[g["final_acc"].idxmax(), "policy"]
                for v, g in done.groupby("variant") if g["final_acc"].notna().any()}
    common = [r for r in outcomes.itertuples() if r.variant in ref_best]
    same = sum(ref_best[r.variant] == r.winner for r in common)
    kept = sum(ref_best[r.variant] in r.contenders.split(";") for r in common)
    detect = board.groupby("column")["detectable_diff"].first()
    lines = [
        f"# Findings: the {plan['study']} study against {ref['plan']['study']}", "",
        "<!-- generated by `python -m mobidfl.analysis.publish --slice-page "
        f"{_shown(dest)} <this page> {_shown(rule)} {_shown(reference)}` from the published "
        "per-run data; tests/published/test_published_slice.py fails when this page and the data "
        "disagree -->", "",
        f"Data: `{_shown(dest)}/` ({len(ok)} finished runs of {len(runs)}; "
        f"{len(plan['columns'])} worlds x {board['policy'].nunique()} policies x seeds "
        f"{plan['seeds'][0]}-{plan['seeds'][-1]}; scale `{plan['scale']}`; commit(s) "
        f"{', '.join(f'`{c}`' for c in commits) or 'unknown'}; machine(s) "
        f"{', '.join(machines) or 'unknown'}). Its base world is `{_shown(reference)}`'s "
        f"with {what or 'nothing'} changed; every world applies the same levels to it.", "",
        "## Does the answer survive the change?", "",
        f"The rule drawn on `{ref['plan']['study']}` (`{_shown(rule)}`): {study_rule.text()}. "
        f"**Here it names the winner in {score['exact']} of {score['n']} worlds and a policy "
        f"no other beats (Holm, all pairs) in {score['contender']} of {score['n']}. "
        f"`{ref['plan']['study']}`'s best of these {len(policies)} policies is the winner here "
        f"in {same} of {len(common)} worlds, and not beaten here in {kept} of "
        f"{len(common)}.**", "",
        "## Every world", "",
        f"| world | {_world_heads(PAGE_AXES)} | winner | margin (pp) | not beaten (Holm) "
        f"| detectable (pp) | the rule says | best in {ref['plan']['study']} |",
        "|---|" + "---|" * (len(PAGE_AXES) + 6),
    ]
    for row in outcomes.itertuples():
        lines.append(
            f"| {row.variant} | {_world_cells(row._asdict(), PAGE_AXES)} "
            f"| {row.winner} | {_num(row.margin_pp, 1)} | {row.contenders.replace(';', ', ')} "
            f"| {_num(float(detect.get(row.column, np.nan)) * 100, 1)} "
            f"| {row.predicted or '-'} | {ref_best.get(row.variant, 'n/a')} |")
    for title, table in ((plan["study"], board), (ref["plan"]["study"], ref["board"])):
        mine = table[(table["status"] == "ok")
                     & table["policy"].isin([*policies, REFERENCE])]
        pivot = mine.pivot_table(index="policy", columns="variant", values="final_acc",
                                 sort=False)
        order = [v for v in outcomes["variant"] if v in pivot.columns]
        lines += ["", f"Final accuracy in `{title}` (mean over seeds):", "",
                  "| policy | " + " | ".join(order) + " |", "|---|" + "---|" * len(order)]
        for policy in [*policies, REFERENCE]:
            if policy in pivot.index:
                lines.append(f"| {policy} | "
                             + " | ".join(_num(pivot.loc[policy, v], 3) for v in order) + " |")
    return "\n".join(lines) + "\n"


def _base_world(plan: dict[str, Any]) -> dict[str, Any]:
    return next((c.get("world", {}) for c in plan["columns"] if c.get("variant") == "base"), {})


def earlier_versions(dest: str | Path, plan: dict[str, Any], outcomes: pd.DataFrame,
                     rule: Any) -> list[str]:
    """The page's section on the study's earlier published versions (``DEST/v1/``, ...).

    What changed in the base world, and each world's winner then and now, so that a reader
    sees whether the answer depends on what changed (e.g. the recipe).
    """
    older = sorted((p for p in Path(dest).glob("v[0-9]*") if (p / "manifest.json").is_file()),
                   key=lambda p: p.name)
    if not older:
        return []
    now = _base_world(plan)
    lines = ["", "## Earlier versions of this study", ""]
    for folder in older:
        got = recompute(folder)
        then = _base_world(got["plan"])
        changed = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
        what = ", ".join(f"{k} {then.get(k, 'unset')} -> {now.get(k, 'unset')}"
                         for k in changed) or "nothing in the base world"
        before = got["outcomes"].set_index("variant")
        after = outcomes.set_index("variant")
        common = [v for v in after.index if v in before.index]
        same = sum(before.loc[v, "winner"] == after.loc[v, "winner"] for v in common)
        kept = sum(after.loc[v, "winner"] in before.loc[v, "contenders"].split(";")
                   for v in common)
        lines += [
            f"`{_shown(folder)}/` ({len(got['runs'])} runs, seeds "
            f"{got['plan']['seeds'][0]}-{got['plan']['seeds'][-1]}). Changed in the base "
            f"world since: {what}. Its rule: {got['rule'].text()}. The winner is the same "
            f"in {same} of {len(common)} worlds; today's winner was not beaten then (Holm, "
            f"all pairs) in {kept} of {len(common)}.", "",
            "| world | winner then | margin then (pp) | winner now | margin now (pp) |",
            "|---|---|---|---|---|"]
        for v in common:
            lines.append(f"| {v} | {before.loc[v, 'winner']} | "
                         f"{_num(before.loc[v, 'margin_pp'], 1)} | {after.loc[v, 'winner']} | "
                         f"{_num(after.loc[v, 'margin_pp'], 1)} |")
        lines.append("")
    return lines[:-1]


def communication(plan: dict[str, Any], board: pd.DataFrame) -> list[str]:
    """The page's communication section.

    Per world the policies on the Pareto front of final accuracy and bytes per agent, and the MB per
    agent of every policy; when no run counted bytes (runs made before the ideal link counted them),
    one paragraph saying so and what fills it.
    """
    lines = ["## Communication: accuracy against bytes", ""]
    done = board[board["status"] == "ok"]
    if done.empty or not np.isfinite(done["bytes_per_agent"].astype(float)).any():
        return lines + [
            "These runs did not count bytes: they were made before the ideal link counted "
            "the bytes of every model message, so no run has `bytes_per_agent`. A re-run of "
            "the study at the current commit fills this section from the same data files "
            "(each policy's MB per agent, bytes to target, the accuracy-bytes Pareto front)."]
    lines += ["Per world, the policies no other beats on both final mean accuracy and MB "
              "sent per agent (the Pareto front, cheapest first: policy final accuracy / MB "
              "per agent), and the MB to the time-to-target's target (median over every "
              "seed, never counted as never). At the ideal link bytes are counted, not "
              "limited: every model message the policy sent, one per receiver.", "",
              "| world | Pareto front | MB to target / agent of the front |", "|---|---|---|"]
    variants = [c.get("variant", "") for c in plan["columns"]]
    by_variant = all(variants) and len(set(variants)) == len(variants)  # a study's columns
    names = {c["key"]: c["variant"] if by_variant else _world_label(c) for c in plan["columns"]}
    for column in plan["columns"]:
        mine = done[(done["column"] == column["key"]) & (done["pareto"] == True)]  # noqa: E712 - an element-wise pandas mask
        if mine.empty:
            continue
        mine = mine.sort_values("bytes_per_agent")
        front = ", ".join(f"{r['policy']} {_num(r['final_acc'], 3)} / "
                          f"{_num(r['bytes_per_agent'] / 1e6, 2)}" for _, r in mine.iterrows())
        spent = ", ".join(
            f"{r['policy']} " + ("never" if r["bytes_to_target_per_agent"] == np.inf
                                 else _num(r["bytes_to_target_per_agent"] / 1e6, 2))
            for _, r in mine.iterrows())
        lines.append(f"| {names[column['key']]} | {front} | {spent} |")
    pivot = done.pivot_table(index="policy", columns="column", values="bytes_per_agent",
                             sort=False) / 1e6
    order = [c["key"] for c in plan["columns"] if c["key"] in pivot.columns]
    lines += ["", "MB sent per agent over the run (mean over seeds):", "",
              "| policy | " + " | ".join(names[c] for c in order) + " |",
              "|---|" + "---|" * len(order)]
    for policy, row in pivot.iterrows():
        lines.append(f"| {policy} | " + " | ".join(_num(row[c], 2) for c in order) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """The command; a refused input is one line on stderr and exit 2 (as ``mobidfl``'s)."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print("mobidfl: error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2


def _main(args: list[str]) -> int:
    from mobidfl.atomic import write_text_atomic

    if len(args) == 3 and args[0] == "--page":
        dest, page = Path(args[1]), Path(args[2])
        figure = page.parent / "study_regime_map.png"
        got = recompute(dest)
        regime_figure(got["outcomes"], got["rule"], figure)
        text = rule_json(got)
        write_text_atomic(dest / RULE, text)
        study = got["plan"].get("study")
        if study:  # the rule ships with the study: `--describe WORLD --rule <study>`
            write_text_atomic(Path(__file__).resolve().parent / "scenarios" / "studies"
                              / f"{study}{RULE_SUFFIX}", text)
        write_text_atomic(page, study_page(dest, figure=figure.name))
        print(page)
        return 0
    if len(args) == 3 and args[0] == "--answer-page":
        from mobidfl.analysis import answer_page as ap

        dest, page = Path(args[1]), Path(args[2])
        got = ap.answer(dest)
        stem = page.stem
        fig_map, fig_pareto = (page.parent / f"{stem}_map.png",
                               page.parent / f"{stem}_bytes.png")
        ap.figures(got, fig_map, fig_pareto)
        text = ap.rule_json(got)
        write_text_atomic(dest / RULE, text)
        write_text_atomic(Path(__file__).resolve().parent / "scenarios" / "studies"
                          / f"{got['plan']['study']}{RULE_SUFFIX}", text)
        write_text_atomic(page, ap.answer_page(dest, figure_map=fig_map.name,
                                               figure_pareto=fig_pareto.name, got=got))
        print(page)
        return 0
    if len(args) == 5 and args[0] == "--slice-page":
        dest, page, rule, reference = (Path(a) for a in args[1:])
        write_text_atomic(page, slice_page(dest, rule=rule, reference=reference))
        print(page)
        return 0
    if len(args) == 4 and args[0] == "--paper-page":
        dest, page, rule = Path(args[1]), Path(args[2]), Path(args[3])
        write_text_atomic(page, paper_worlds_page(dest, rule=rule))
        print(page)
        return 0
    if len(args) == 2:
        for path in publish_bench(args[0], args[1]):
            print(path)
        return 0
    print("usage: python -m mobidfl.analysis.publish BENCH_FOLDER DEST | --page DEST PAGE | "
          "--answer-page DEST PAGE | "
          "--paper-page DEST PAGE RULE_JSON | --slice-page DEST PAGE RULE_JSON REFERENCE_DEST",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
