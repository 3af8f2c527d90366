"""The bench's report: ``leaderboard.md`` (the page), ``leaderboard.csv`` and its figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mobidfl.analysis.bench_figures import accuracy_plots, comm_plots, heatmap
from mobidfl.analysis.bench_plan import PLAN
from mobidfl.analysis.bench_results import HIGH, leaderboard, load_results
from mobidfl.analysis.bench_stats import (
    EQUIVALENCE_MARGIN,
    HALF_WIDTH,
    SCORE_FLOOR,
)
from mobidfl.atomic import write_text_atomic


def _fmt(value: Any, half: Any, digits: int = 3, factor: float = 1.0) -> str:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    text = f"{value * factor:.{digits}f}"
    if isinstance(half, int | float) and math.isfinite(half):
        text += f" ± {half * factor:.{digits}f}"
    return text


def _mark(row: pd.Series) -> str:
    if row.get("policy") == row.get("best_policy"):
        return " ★"
    if row.get("policy") == HIGH:
        return ""
    return {"level": " ≈", "undecided": " ?", "better": " ↑"}.get(str(row.get("verdict")), "")


def _column_notes(rows: pd.DataFrame) -> list[str]:
    """What a world's comparisons rest on.

    How the best was chosen, the Holm family, the smallest difference the seeds detect, and why the
    score is missing where it is.
    """
    done = rows[rows["status"].isin(["ok", "partial"])] if "status" in rows else rows
    if done.empty or "tests_in_family" not in done:
        return []
    first = done.iloc[0]
    notes = [""]
    if first.get("best_policy"):
        notes.append(
            f"Best chosen by {first['best_chosen_by']}: {int(first['tests_in_family'])} "
            "paired tests, Holm-corrected; no policy beats these after Holm: "
            + ", ".join(done.loc[done["contender"].astype(bool), "policy"]) + ". "
            f"With these seeds the paired t-test detects (80 % power, alpha 0.05) "
            f"differences of {_fmt(first['detectable_diff'], None, 1, 100)} pp or more "
            f"({_fmt(first['detectable_diff_holm'], None, 1, 100)} pp at Holm's strictest "
            f"step); level means within ± {EQUIVALENCE_MARGIN * 100:g} pp (TOST).")
    reasons = [r for r in done.get("score_reason", pd.Series(dtype=str)).dropna().unique()
               if isinstance(r, str) and r]
    if reasons:
        notes += ["", f"Score n/a: {reasons[0]} (needs a lower bound above {SCORE_FLOOR})."]
    return notes if len(notes) > 1 else []


def _adaptive_lines(plan: dict[str, Any], board: pd.DataFrame) -> list[str]:
    """The report's lines on the ``--until-half-width`` stopping rule.

    The target, and per column its seeds and whether every cell reached the target or the cap
    stopped it (the power each column has).
    """
    rule = plan.get("until_half_width")
    if not rule:
        return []
    target, cap = float(rule["half_width"]), int(rule["max_seeds"])
    parts = []
    for column in plan["columns"]:
        mine = board[(board["column"] == column["key"])
                     & board["status"].isin(["ok", "partial"])]
        if mine.empty or "final_acc_ci" not in mine:
            continue
        widest = float(pd.to_numeric(mine["final_acc_ci"], errors="coerce").max())
        n = int(mine["seeds_ok"].max())
        state = "reached" if widest <= target else (
            f"cap {cap} reached" if n >= cap else "not reached")
        parts.append(f"{column['label']}: {n} seeds, widest ± {widest * 100:.1f} pp ({state})")
    return [f"* seeds added per world until every cell's 95 % half-width of final accuracy is "
            f"<= ± {target * 100:g} pp or {cap} seeds: " + "; ".join(parts)]


def markdown(plan: dict[str, Any], board: pd.DataFrame, *, heatmap: str = "heatmap.png",
             plots: Sequence[str] = (), comm: Sequence[str] = ()) -> str:
    """The leaderboard page.

    Summary tables (score, final accuracy), refusals, one detail table per column, scenarios, links,
    policies' settings and the metrics' definitions.
    """
    lines = _head(plan, board)
    refusals: dict[str, str] = {}
    lines += _summary_table(plan, board, refusals, metric="score", digits=2,
                            title="Score: 0 = local, 1 = central FedAvg (same seeds)")
    lines += [f"![score per policy and world]({heatmap})", ""]
    lines += _summary_table(plan, board, refusals, metric="final_acc", digits=3,
                            title="Final mean accuracy")
    if refusals:
        lines += ["Reasons (the configuration's one-line refusal, or a run's error):", ""]
        lines += [f"* **{code}**: {reason}" for reason, code in refusals.items()]
        lines += [""]
    lines += ["## Per world", ""]
    for column in plan["columns"]:
        lines += _world_table(board, column)
    for plot in plots:
        lines += [f"![accuracy over time]({plot})", ""]
    for plot in comm:
        lines += [f"![accuracy over bytes and the accuracy-bytes Pareto front]({plot})", ""]
    lines += _about(plan)
    lines += ["", METRICS, ""]
    return "\n".join(lines)


def _head(plan: dict[str, Any], board: pd.DataFrame) -> list[str]:
    """The page's title, what ran where and when, and how to read its marks."""
    machine, versions = plan["machine"], plan["versions"]
    wall = sum(plan.get("wall_s_sessions", []))
    return [
        "# MobiDFL benchmark: which exchange policy wins under which mobility", "",
        f"* command: `{plan['command'] or 'mobidfl bench'}`",
        f"* scale `{plan['scale']}`, seeds {plan['seeds']}, scenario set "
        f"{plan['scenario_set']}",
        *_adaptive_lines(plan, board),
        f"* started {plan['started']}, finished {plan.get('finished') or 'not yet'}, wall time "
        f"{wall / 60:.1f} min over {len(plan.get('wall_s_sessions', []))} session(s)",
        f"* machine: {machine['cpu']} ({machine['cores']} cores"
        + (f", GPU {machine['gpu']}" if machine.get("gpu") else "")
        + f"), load {machine.get('load_at_write')}; {machine['platform']}",
        "* versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        "",
        "Each cell: mean ± half-width of the 95 % Student-t confidence interval over the "
        "seeds. ★ = the column's best policy by final mean accuracy (central FedAvg, the "
        "oracle reference, excluded), chosen without testing on the seeds it was picked "
        "on: every pair of policies in the column is tested (paired t-test over seeds) "
        "and Holm's correction runs over all those pairs. Against ★: no mark = worse "
        "(Holm-adjusted p < 0.05); ≈ = level, shown within "
        f"± {EQUIVALENCE_MARGIN * 100:g} pp of final accuracy by an equivalence test "
        "(TOST, Holm-adjusted p < 0.05); ? = undecided (neither: the seeds cannot tell; "
        "each world's table says what difference they can detect). Refused pairs show a "
        "code, their one-line reason is listed under the table.",
        "",
    ]


def _summary_table(plan: dict[str, Any], board: pd.DataFrame, refusals: dict[str, str], *,
                   metric: str, digits: int, title: str) -> list[str]:
    """One summary table: a row per policy, a column per world; refusals get codes.

    ``refusals`` (reason -> code) fills as the tables meet them, so both tables share codes.
    """
    labels = [c["label"] for c in plan["columns"]]
    out = [f"## {title}", "", "| policy | " + " | ".join(labels) + " |",
           "|---|" + "---|" * len(labels)]
    for policy in plan["policies"]:
        cells = []
        for column in plan["columns"]:
            hit = board[(board["column"] == column["key"]) & (board["policy"] == policy)]
            if hit.empty:
                cells.append("")
                continue
            row = hit.iloc[0]
            if row["status"] in ("refused", "error", "pending"):
                reason = str(row["reason"])
                code = refusals.setdefault(reason, f"r{len(refusals) + 1}")
                cells.append(f"— ({code})" if row["status"] == "refused"
                             else f"{row['status']} ({code})")
                continue
            text = _fmt(row.get(metric), row.get(f"{metric}_ci"), digits)
            if row.get("policy") == row.get("best_policy"):
                text = f"**{text}**"
            cells.append(text + _mark(row))
        out.append(f"| {policy} | " + " | ".join(cells) + " |")
    return out + [""]


def _world_table(board: pd.DataFrame, column: dict[str, Any]) -> list[str]:
    """One world's detail table (every metric of each policy) and its notes."""
    lines = [f"### {column['label']}", "",
             "| policy | final acc | 10th-pct agent acc | time to target (h) | reached "
             "| MB to target / agent | MB on air / agent | energy J / agent | score "
             "| vs best (pp) | p (Holm) | level p (TOST, Holm) | verdict "
             f"| seeds for ± {HALF_WIDTH * 100:g} pp |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, row in board[board["column"] == column["key"]].iterrows():
        if row["status"] in ("refused", "error", "pending"):
            lines.append(f"| {row['policy']} | {row['status']}: {row['reason']} "
                         "|  |  |  |  |  |  |  |  |  |  |  |  |")
            continue
        reached = row.get("time_to_target_s")
        spent = row.get("bytes_to_target_per_agent")
        front = " ◆" if row.get("pareto") is True else ""
        verdict = row.get("verdict")
        lines.append(
            f"| {row['policy']}{_mark(row)} | {_fmt(row['final_acc'], row['final_acc_ci'])} "
            f"| {_fmt(row['p10_acc'], row['p10_acc_ci'])} "
            f"| {'never' if reached == math.inf else _fmt(reached, None, 2, 1 / 3600)} "
            f"| {row['target_reached']} "
            f"| {'never' if spent == math.inf else _fmt(spent, None, 2, 1e-6)} "
            f"| {_fmt(row['bytes_per_agent'], row['bytes_per_agent_ci'], 2, 1e-6)}{front} "
            f"| {_fmt(row['energy_per_agent'], row['energy_per_agent_ci'], 2)} "
            f"| {_fmt(row['score'], row['score_ci'], 2)} "
            f"| {_fmt(row.get('diff_vs_best'), row.get('diff_vs_best_ci'), 1, 100)} "
            f"| {_fmt(row.get('p_holm'), None, 3)} "
            f"| {_fmt(row.get('p_level_holm'), None, 3)} "
            f"| {verdict if isinstance(verdict, str) else ''} "
            f"| {row.get('seeds_needed', '')} |"
        )
    return [*lines, *_column_notes(board[board["column"] == column["key"]]), ""]


def _about(plan: dict[str, Any]) -> list[str]:
    """The scenarios, links and policies' own settings the bench ran."""
    lines = ["## Scenarios", "", "| scenario | version | world | provenance | why in the set "
             "| this scale |", "|---|---|---|---|---|---|"]
    for name, about in plan["scenarios"].items():
        lines.append(f"| `{name}` | {about['version']} | {about['title']} | "
                     f"{about['provenance']} | {about['why']} | {about['scale_note']} |")
    lines += ["", "## Links", "", "| link | what it is |", "|---|---|"]
    lines += [f"| {v['label']} | {v['about']} |" for v in plan["links"].values()]
    lines += ["", "## Policies' own settings (their papers' values, every world)", "",
              "| policy | settings | source |", "|---|---|---|"]
    for policy, about in plan["policies"].items():
        settings = ", ".join(f"`{k} = {v}`" for k, v in about["settings"].items()) or "none"
        lines.append(f"| {policy} | {settings} | {about['source'] or 'no own settings'} |")
    return lines


METRICS = """## Metrics

* **final acc**: the agents' mean test accuracy (`acc_mean`) at the run's last evaluation.
* **10th-pct agent acc**: the accuracy 90 % of the agents reach or beat at the last
  evaluation (`acc_p10`): who is left behind.
* **time to target**: simulated hours to the first evaluation where the mean accuracy reaches
  90 % of central FedAvg's final accuracy on the same seed (at the ideal link: central FedAvg
  ignores the link); *reached* counts the seeds that got there (of those with central
  FedAvg's run), and the time is the median over every one of them with a seed that never
  got there counted as never (the Kaplan-Meier median of runs of equal length): "never" when
  half or more did not reach it. A mean over the seeds that reached it would hide the others.
* **MB on air / agent**: the bytes the agents sent, summed over the run and divided by the
  agents. With a link model, what was put on the air (finished or not); at the ideal link,
  counted, not limited: every model message the policy sent (one per receiver) x one
  model's bytes (`link.params` x `link.dtype` + `link.overhead_bytes`), none cut or lost.
  Uploads to a server count (central FedAvg, MoFeL), downloads from it do not (the server
  is not an agent; they are `bytes_received`). ◆ = on the world's Pareto front of mean
  final accuracy (higher) and mean MB per agent (lower): no other policy of the world is
  at least as accurate for no more bytes, and better in one (the figures per world draw
  it).
* **MB to target / agent**: the MB per agent sent by the evaluation that reached the
  target of *time to target*, with the same median over every seed (never counted as
  never).
* **energy J / agent**: radio + training + flight energy, summed over the run and divided
  by the agents; only a link model accounts it (it needs a rate), so it is n/a at the ideal
  link.
* **score**: (final acc − local's) / (central FedAvg's − local's), seed by seed, then mean
  and interval; local and central FedAvg of the column's ideal-link twin where they cannot
  run (central FedAvg ignores the link and is refused with 802.11p). Given only where central
  FedAvg − local stands clear of the noise (the lower bound of its 95 % interval above 0.05
  accuracy); elsewhere n/a with the reason under the world's table, since a score divided by
  a gap within the noise mostly measures that noise.
* **vs best**: the paired difference in final accuracy (percentage points) against the
  column's best policy, seed by seed. **p (Holm)**: the two-sided paired t-test's p (Student
  t over the seeds: with 5 seeds a Wilcoxon signed-rank test can never reach p < 0.05),
  adjusted by Holm's method over every pair of policies in the column (the best is chosen
  among them, so testing only against it would test on the seeds it was picked on). A
  difference identical on every seed has no spread for a t-test: it gets the exact sign-flip
  test (p = 2 / 2^n, 0.0625 for 5 seeds), not p = 0. **level p**: the equivalence test
  (TOST, two one-sided paired t-tests) that the difference is within ± 2 pp, Holm-adjusted
  the same way. **verdict**: worse (p (Holm) < 0.05), level (level p < 0.05) or undecided.
  Not rejecting a difference is not showing the policies level: with 5 seeds the paired
  t-test detects, at 80 % power, only differences of about 1.7 standard deviations of the
  seed-to-seed difference (each world's note gives it in pp).
* **seeds for ± 2 pp**: the seeds this cell would need for its final accuracy's 95 %
  interval to be ± 2 pp at the spread seen (10 means 10 or more)."""


def write_report(out: str | Path) -> list[Path]:
    """Leaderboard (.md, .csv), heat-map, accuracy and communication plots of a bench folder."""
    out = Path(out)
    plan, runs, curves = load_results(out)
    board = leaderboard(plan, runs)
    csv = out / "leaderboard.csv"
    write_text_atomic(csv, board.to_csv(index=False))
    heat = heatmap(plan, board, out / "heatmap.png")
    plots = accuracy_plots(plan, curves, out)
    comm = comm_plots(plan, board, curves, out)
    md = out / "leaderboard.md"
    write_text_atomic(md, markdown(plan, board, heatmap=heat.name,
                                   plots=[p.name for p in plots],
                                   comm=[p.name for p in comm]) + "\n")
    return [md, csv, heat, *plots, *comm, out / PLAN]
