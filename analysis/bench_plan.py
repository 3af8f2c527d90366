"""A bench folder's plan: ``manifest.json`` written, read back whole, and the folder checked.

The plan says which cells, columns, policies, seeds and sessions make the bench in ``OUT``
(:func:`write_plan`); :func:`read_plan` reads it whole or raises
:class:`mobidfl.analysis.runner.BenchDamaged` naming it; :func:`check_bench_folder` checks
every file before a report, and :func:`check_same_bench` refuses an ``--out`` that holds
anything but this same bench.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mobidfl.analysis.bench_scenarios import (
    Cell,
    Column,
    link_axis,
    load_scenario,
    policy_settings,
)
from mobidfl.analysis.bench_stats import (
    CONFIDENCE,
)
from mobidfl.analysis.runner import (
    CELLS,
    BenchDamaged,
    agent_count,
    cell_rows,
    damaged_run,
    folder_entries,
    safe_name,
)
from mobidfl.analysis.study import load_study, study_names
from mobidfl.atomic import write_text_atomic
from mobidfl.cores import (
    machine_record,
    package_versions,
    source_commit,
)
from mobidfl.errors import ConfigError

PLAN = "manifest.json"
"""A bench folder's plan: what it is, and every session that wrote it."""


def _keys(data: Any, where: str, needed: dict[str, type | tuple[type, ...]]) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} is not a JSON object")
    for key, kind in needed.items():
        if not isinstance(data.get(key), kind):
            raise ValueError(f"{where} has no {key!r} of the right type")


def read_plan(out: Path) -> dict[str, Any]:
    """``out/manifest.json`` read whole and checked (what the report reads of it).

    A cut or foreign file raises :class:`BenchDamaged` naming it.
    """
    path = out / PLAN
    try:
        plan = json.loads(path.read_text())
        _keys(plan, PLAN, {"command": str, "scale": str, "seeds": list, "scenarios": dict,
                           "links": dict, "policies": dict, "columns": list, "cells": list,
                           "versions": dict, "machine": dict, "started": str,
                           "scenario_set": (int, str)})
        _keys(plan["machine"], "its machine", {"cpu": str, "cores": int, "platform": str})
        for column in plan["columns"]:
            _keys(column, "a column", {"key": str, "scenario": str, "variant": str,
                                       "link": str, "label": str})
        for cell in plan["cells"]:
            _keys(cell, "a cell", {"key": str, "column": str, "policy": str, "refusal": str,
                                   "folder": str, "agents": int, "runs": list})
            if cell["folder"] != f"{CELLS}/{safe_name(cell['key'])}":
                raise ValueError(f"cell {cell['key']!r} names the folder {cell['folder']!r}")
        for name, about in plan["scenarios"].items():
            _keys(about, f"scenario {name}", {"version": int, "title": str, "provenance": str,
                                              "why": str, "scale_note": str})
        for policy, about in plan["policies"].items():
            _keys(about, f"policy {policy}", {"settings": dict})
        for link, about in plan["links"].items():
            _keys(about, f"link {link}", {"label": str, "about": str})
    except UnicodeDecodeError as exc:
        raise BenchDamaged(path, f"not text ({exc.reason})") from None
    except ValueError as exc:  # JSONDecodeError included: a cut file
        raise BenchDamaged(path, " ".join(str(exc).split())) from None
    return plan


def check_bench_folder(out: Path) -> dict[str, Any]:
    """Check a bench folder whole before its report.

    ``manifest.json``, each cell's ``manifest.csv`` and the file of every run listed ok. Raises
    :class:`BenchDamaged` naming the first file that is cut, damaged or missing; returns the plan.
    """
    from mobidfl.analysis.sweep import run_path

    plan = read_plan(out)
    for cell in plan["cells"]:
        folder = out / cell["folder"]
        if cell["refusal"] or not (folder / "manifest.csv").exists():
            continue
        rows = cell_rows(folder, cell["runs"])
        wanted = set(cell["runs"])
        for record in rows.to_dict("records"):
            if record["run_id"] not in wanted or record["status"] != "ok":
                continue
            path = run_path(folder, record["run_id"])
            why = damaged_run(path) if path.exists() else "missing (its cell lists it as ok)"
            if why:
                raise BenchDamaged(path, why)
    return plan


def check_same_bench(out: Path, cells: Sequence[Cell], plan: dict[str, list[Any]]) -> None:
    """Refuse an ``--out`` that holds anything but this same bench.

    WHY: another bench's folder would have its table replaced and its runs left as orphans
    (never reported, never removed); a ``mobidfl run`` or sweep folder would be mixed with
    a bench. The same bench is the same cells with the same run ids (worlds, policies,
    seeds, scale and device: :func:`plan_runs`).
    """
    entries = folder_entries(out)
    if not entries:
        return
    if PLAN not in entries:
        raise ConfigError("--out", str(out), "an empty or new folder, or a bench folder with "
                          f"{PLAN} (this one holds {', '.join(entries[:3])}"
                          + (", ..." if len(entries) > 3 else "") + ": not a bench's)")
    wanted = {cell.key: [s.run_id for s in plan.get(cell.key, [])] for cell in cells}
    try:
        previous = read_plan(out)
    except BenchDamaged as exc:  # rewritten below if the cells are this bench's
        _check_cell_folders(out, wanted, damaged=exc)
        return
    had = {cell["key"]: list(cell["runs"]) for cell in previous["cells"]}
    if had != wanted:
        was = previous["command"] or "another mobidfl bench"
        raise ConfigError("--out", str(out), "a new or empty folder, or the folder of this "
                          f"same bench (it holds another bench, written by: {was}; its worlds, "
                          "policies, seeds, scale or device differ: give another --out)")


def _check_cell_folders(out: Path, wanted: dict[str, list[str]], *,
                        damaged: BenchDamaged) -> None:
    """With ``manifest.json`` damaged: its cell folders must all be this bench's."""
    folders = {f"{safe_name(key)}": runs for key, runs in wanted.items()}
    root = out / CELLS
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        runs = folders.get(folder.name)
        ids: set[str] = set()
        if runs is not None and (folder / "manifest.csv").exists():
            try:
                ids = set(cell_rows(folder, runs)["run_id"].astype(str))
            except BenchDamaged:
                ids = set(runs)  # its run files are checked one by one
        if runs is None or not ids <= set(runs):
            raise ConfigError("--out", str(out), f"the folder of this same bench ({damaged.path} "
                              f"is damaged: {damaged.why}; and {folder} is not one of this "
                              "bench's cells: give another --out)")


def grown_before(out: Path, column_seeds: dict[str, list[int]]) -> dict[str, list[int]]:
    """On resuming an adaptive bench, each column's seeds as its last session left them.

    Where they extend this command's first seeds (anything else is checked as a new bench by
    :func:`check_same_bench`).
    """
    if not (out / PLAN).is_file():
        return column_seeds
    try:
        before = read_plan(out).get("column_seeds") or {}
    except BenchDamaged:
        return column_seeds
    grown = dict(column_seeds)
    for key, seeds in column_seeds.items():
        had = before.get(key)
        if isinstance(had, list) and had[:len(seeds)] == list(seeds):
            grown[key] = [int(s) for s in had]
    return grown


def write_plan(out: Path, *, cells: Sequence[Cell], cols: Sequence[Column],
               policies: Sequence[str], seeds: Sequence[int], scale: str, command: str,
               started: datetime, wall_s: float | None, plan: dict[str, list[Any]],
               column_seeds: Mapping[str, Sequence[int]] | None = None,
               adaptive: dict[str, Any] | None = None,
               source: dict[str, Any] | None = None,
               readings: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Write ``out/manifest.json``: what the bench is and every session that wrote it.

    Written before the first run (``wall_s`` None: the folder always says whose cells it
    holds) and again at the end of a session, keeping the earlier sessions' records.
    """
    from mobidfl.analysis.scenarios import SET_VERSION

    previous: dict[str, Any] = {}
    if (out / PLAN).exists():
        try:
            previous = json.loads((out / PLAN).read_text())
        except (OSError, ValueError):
            previous = {}
    scenarios = sorted({c.scenario for c in cols})
    walls = list(previous.get("wall_s_sessions", []))
    # each session's code as it STARTED (the end-of-session "sessions" entry can be a later
    # commit): written by the session's first plan, before any of its runs
    starts = list(previous.get("session_starts", []))
    stamp = started.isoformat(timespec="seconds")
    if source is not None and not any(s.get("started") == stamp for s in starts):
        starts.append({"started": stamp, "command": command, **source,
                       "machine": machine_record()})
    if wall_s is not None:
        walls.append(round(wall_s, 1))
    data = {
        "command": command,
        "scale": scale,
        "seeds": list(seeds),
        # each column's seeds where --until-half-width added some (else every column: seeds)
        "column_seeds": {k: list(v) for k, v in (column_seeds or {}).items()
                         if list(v) != list(seeds)},
        "until_half_width": adaptive,
        "confidence": CONFIDENCE,
        "scenario_set": SET_VERSION,
        "scenarios": {
            name: {
                "version": (s := _world_source(name)).version, "title": s.title,
                "regime": s.regime, "provenance": s.provenance, "why": s.why,
                "scale_note": s.notes.get(scale, ""), "sha256": s.sha256,
            }
            for name in scenarios
        },
        "study": next((c.scenario for c in cols if c.scenario in study_names()), None),
        "links": {k: {"label": label, "about": about, "settings": settings}
                  for k, (label, about, settings) in link_axis().items()},
        "policies": {p: {"source": policy_settings(p)[0],
                         "settings": {**policy_settings(p)[1], **(readings or {}).get(p, {})},
                         **({"study_reading": dict(readings[p])} if readings and p in readings
                            else {})}
                     for p in policies},
        "columns": [
            {"key": c.key, "scenario": c.scenario, "variant": c.variant, "link": c.link,
             "label": c.label, "world": c.settings}
            for c in cols
        ],
        "cells": [
            {"key": cell.key, "column": cell.column.key, "policy": cell.policy,
             "refusal": cell.refusal, "folder": f"{CELLS}/{safe_name(cell.key)}",
             "agents": agent_count(cell.settings),
             "runs": [s.run_id for s in plan.get(cell.key, [])]}
            for cell in cells
        ],
        "versions": package_versions(),
        "machine": machine_record(),
        "started": previous.get("started", started.isoformat(timespec="seconds")),
        "last_session_started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds") if wall_s is not None
        else previous.get("finished", ""),
        "wall_s_sessions": walls,
        "session_starts": starts,
        # every session that wrote this folder: its command, machine, versions and commit
        # (the table may be made across sessions, machines and library versions)
        "sessions": [*previous.get("sessions", []), {
            "command": command, "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds")
            if wall_s is not None else "", "machine": machine_record(),
            "versions": package_versions(),
            # the code the session started from (a commit made during the session is not it)
            "commit": (source or {}).get("commit") or source_commit(),
            "dirty": bool((source or {}).get("dirty"))}]
        if wall_s is not None else previous.get("sessions", []),
    }
    write_text_atomic(out / PLAN, json.dumps(data, indent=1, default=str) + "\n")


def _world_source(name: str) -> Any:
    """The scenario or study a column's worlds come from (provenance for the manifest)."""
    return load_study(name) if name in study_names() else load_scenario(name)
