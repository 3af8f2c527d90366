"""A bench's results: the per-run numbers of its folder and the leaderboard built on them.

:func:`load_results` reads every finished run (per-run numbers and accuracy curves);
:func:`leaderboard` gives one row per cell with its statistics
(:mod:`mobidfl.analysis.bench_stats`) and the comparisons with the column's best.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.bench_plan import read_plan
from mobidfl.analysis.bench_stats import (
    compare_column,
    first_time_at,
    paired_difference,
    run_numbers,
    seeds_needed,
    t_interval,
    time_to_target,
)
from mobidfl.analysis.bench_stats import score as normalised_score
from mobidfl.analysis.comm import (
    CURVE,
    PER_AGENT,
    bytes_to_target,
    cumulative_per_agent,
    pareto_front,
)
from mobidfl.analysis.measures import board_metrics
from mobidfl.analysis.stats import sample_std

LOW, HIGH = "local", "central_fedavg"
"""The normalised score's 0 and 1: no exchange at all, and FedAvg over every agent each step
(an oracle server: the upper reference, never the column's best)."""


TARGET_SHARE = 0.9
"""Time to target: the first evaluation at ``TARGET_SHARE`` x central FedAvg's final
accuracy of the same seed."""


def planned_records(out: Path, plan: dict[str, Any]) -> Iterator[tuple[
        dict[str, Any], dict[str, Any], Path | None]]:
    """``(cell, manifest record, run file or None)`` of every planned run of a bench-shaped folder.

    A bench's or a study tuning's folder; the run file only where the run is ok and its file exists.
    """
    from mobidfl.analysis.sweep import read_manifest, run_path

    for cell in plan["cells"]:
        folder = out / cell["folder"]
        if cell["refusal"] or not (folder / "manifest.csv").exists():
            continue
        wanted = set(cell["runs"])
        for record in read_manifest(folder).to_dict("records"):
            if record["run_id"] not in wanted:
                continue
            path = run_path(folder, record["run_id"])
            yield cell, record, path if record["status"] == "ok" and path.exists() else None


def load_results(out: Path) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """``(plan, per-run numbers, curves)`` of a bench folder (finished runs only).

    The curves hold :data:`mobidfl.analysis.comm.CURVE` per evaluation.
    """
    plan = read_plan(out)
    rows, curves = [], []
    for cell, record, path in planned_records(out, plan):
        base = {"run_id": record["run_id"], "cell": cell["key"],
                "column": cell["column"], "policy": cell["policy"],
                "seed": int(record["seed"]), "status": record["status"],
                "error": record.get("error", ""),
                "wall_s": float(record.get("wall_s", float("nan"))),
                "cpu_s": float(record.get("cpu_s", float("nan")))}
        if path is None:
            rows.append(base)
            continue
        table = pd.read_parquet(path)
        table = table.assign(**{PER_AGENT: cumulative_per_agent(table,
                                                                agents=cell["agents"])})
        rows.append({**base, **run_numbers(table, agents=cell["agents"]),
                     "_table": table[[c for c in CURVE if c in table]]})
        if "acc_mean" in table:
            evaluated = table[np.isfinite(pd.to_numeric(table["acc_mean"],
                                                        errors="coerce"))]
            curves.append(pd.DataFrame({
                "column": cell["column"], "policy": cell["policy"], "seed": base["seed"],
                **{c: evaluated[c].to_numpy(float) for c in CURVE},
            }))
    runs = pd.DataFrame(rows)
    curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
        columns=["column", "policy", "seed", *CURVE])
    return plan, runs, curve


def _twin(column: dict[str, Any], plan: dict[str, Any]) -> str:
    """The column's ideal-link twin (same scenario and axis value), for the references.

    Central FedAvg ignores the link, so it runs only at the ideal link.
    """
    for other in plan["columns"]:
        if (other["scenario"], other["variant"], other["link"]) == (
                column["scenario"], column["variant"], "ideal"):
            return other["key"]
    return column["key"]


def _by_seed(runs: pd.DataFrame, column: str, policy: str, metric: str) -> pd.Series:
    if runs.empty or metric not in runs:
        return pd.Series(dtype=float)
    chosen = runs[(runs["column"] == column) & (runs["policy"] == policy)
                  & (runs["status"] == "ok")]
    return chosen.set_index("seed")[metric].astype(float)


def leaderboard(plan: dict[str, Any], runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell.

    Status or reason, and every metric's mean and CI half-width; the comparison with the column's
    best (:func:`mobidfl.analysis.bench_stats.compare_column`: all pairs, Holm-adjusted p, TOST,
    verdict), the column's detectable difference, the seeds the cell needs, the score where its
    scale is clear (else ``score_reason``) and the time to target over every seed (median, never =
    inf; ``target_reached``).
    """
    rows = []
    for column in plan["columns"]:
        key = column["key"]
        ref = key if not _by_seed(runs, key, HIGH, "final_acc").empty else _twin(column, plan)
        high = _by_seed(runs, ref, HIGH, "final_acc")
        low_ref = key if not _by_seed(runs, key, LOW, "final_acc").empty else ref
        low = _by_seed(runs, low_ref, LOW, "final_acc")
        target = high * TARGET_SHARE
        cells = [c for c in plan["cells"] if c["column"] == key]
        finals = {c["policy"]: _by_seed(runs, key, c["policy"], "final_acc") for c in cells}
        # the best without double dipping: all pairs of candidates tested, Holm over them all
        compared = compare_column({p: s for p, s in finals.items() if p != HIGH and len(s)})
        best = compared.best
        for cell in cells:
            policy = cell["policy"]
            row: dict[str, Any] = {
                "scenario": column["scenario"], "variant": column["variant"],
                "link": column["link"], "column": key, "label": column["label"],
                "policy": policy, "reference_column": ref, "best_policy": best,
                "best_chosen_by": compared.selection, "tests_in_family": compared.family,
                "contender": policy in compared.contenders,
                "detectable_diff": compared.detectable,
                "detectable_diff_holm": compared.detectable_holm,
            }
            if cell["refusal"]:
                rows.append({**row, "status": "refused", "reason": cell["refusal"]})
                continue
            mine = runs[(runs["cell"] == cell["key"])] if not runs.empty else runs
            ok = mine[mine["status"] == "ok"] if not mine.empty else mine
            errors = mine[mine["status"] == "error"] if not mine.empty else mine
            row["seeds_ok"] = len(ok)
            row["seeds_planned"] = len(cell["runs"])
            if ok.empty:
                reason = (str(errors["error"].iloc[0]) if not errors.empty else "not run yet")
                rows.append({**row, "status": "error" if not errors.empty else "pending",
                             "reason": reason})
                continue
            row["status"] = "ok" if len(ok) == len(cell["runs"]) else "partial"
            row["reason"] = str(errors["error"].iloc[0]) if not errors.empty else ""
            series = ok.set_index("seed")
            for metric in board_metrics():
                interval = t_interval(series[metric])
                row[metric], row[f"{metric}_ci"] = interval.mean, interval.half
            spread = t_interval(series["final_acc"]).n > 1  # one seed: no sd to plan with
            row["seeds_needed"] = seeds_needed(
                sample_std(series["final_acc"]) if spread else math.nan)
            known = [s for s in series.index if math.isfinite(float(target.get(s, math.nan)))]
            times = pd.Series({
                seed: first_time_at(series.loc[seed, "_table"], float(target[seed]))
                for seed in known
            }, dtype=float)
            reach = time_to_target(times)  # never reached = +inf: median over every seed
            row["time_to_target_s"] = reach.median
            row["time_to_target_fastest_s"] = reach.fastest
            row["time_to_target_slowest_s"] = reach.slowest
            row["target_reached"] = f"{reach.reached}/{reach.n}"
            # the same first evaluation at the target, read on the bytes sent by then
            row["bytes_to_target_per_agent"] = bytes_to_target(
                {seed: series.loc[seed, "_table"] for seed in known}, target).median
            scored = normalised_score(series["final_acc"], low, high)
            row["score"], row["score_ci"] = scored.interval.mean, scored.interval.half
            row["score_reason"] = scored.reason
            if policy in compared.against_best:
                versus = compared.against_best[policy]
                test = versus.test
                row.update(diff_vs_best=test.mean, diff_vs_best_ci=test.half, p_value=test.p,
                           p_holm=versus.p_holm, p_level=versus.p_level,
                           p_level_holm=versus.p_level_holm, verdict=versus.verdict,
                           test_method=test.method,
                           distinguishable=versus.verdict in ("worse", "better"))
            elif best and policy != best:  # the oracle reference: outside the family
                test = paired_difference(series["final_acc"], finals[best])
                row.update(diff_vs_best=test.mean, diff_vs_best_ci=test.half, p_value=test.p,
                           verdict="reference", test_method=test.method,
                           distinguishable=test.distinguishable)
            elif policy == best:
                row.update(diff_vs_best=0.0, diff_vs_best_ci=0.0, p_value=float("nan"),
                           verdict="best", distinguishable=False)
            rows.append(row)
        _mark_front(rows[len(rows) - len(cells):])
    return pd.DataFrame(rows)


def _mark_front(rows: list[dict[str, Any]]) -> None:
    """``pareto``: each finished cell of one column on the front of bytes and accuracy.

    The front of mean bytes per agent (low) and mean final accuracy (high)
    (:func:`mobidfl.analysis.comm.pareto_front`); NaN where no cell of the column has both.
    """
    done = [r for r in rows if r.get("status") in ("ok", "partial")]
    cost = np.array([r.get("bytes_per_agent", math.nan) for r in done], float)
    value = np.array([r.get("final_acc", math.nan) for r in done], float)
    front = pareto_front(cost, value)
    known = bool((np.isfinite(cost) & np.isfinite(value)).any())
    for row, on in zip(done, front, strict=True):
        row["pareto"] = bool(on) if known else math.nan
