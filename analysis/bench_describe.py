"""Regime descriptors of the bench's worlds: ``descriptors.csv`` and ``mobidfl bench --describe``.

Measured without training (:mod:`mobidfl.analysis.describe`), averaged over the bench's
seeds, so that the table a bench writes and the one ``--describe`` prints agree.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mobidfl.analysis.bench_scenarios import (
    Column,
    columns,
    scenario_names,
)
from mobidfl.analysis.study import load_study, study_names
from mobidfl.atomic import write_csv
from mobidfl.errors import ConfigError

DESCRIPTORS = "descriptors.csv"
"""Per column, the regime descriptors of its world (:mod:`mobidfl.analysis.describe`)."""


def _world_without_link(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if not k.startswith("link")}


def write_descriptors(out: Path, cols: Sequence[Column], *, seeds: Sequence[int]) -> Path:
    """Measure each column's regime descriptors over ``seeds`` into ``out/descriptors.csv``.

    The mean over the bench's results seeds (:func:`mobidfl.analysis.describe.describe_seeds`),
    which ``mobidfl bench --describe`` with the same ``--seeds`` and ``--first-seed`` repeats.
    Once per world (the links share one); columns already there are kept.
    """
    from mobidfl.analysis.describe import describe_seeds

    path = out / DESCRIPTORS
    old = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=["column"])
    rows = {str(r["column"]): dict(r) for r in old.to_dict("records")}
    measured: dict[str, dict[str, Any]] = {}
    for col in cols:
        if col.key in rows:
            continue
        world = _world_without_link(col.settings)
        key = json.dumps(world, sort_keys=True, default=str)
        if key not in measured:
            with contextlib.suppress(ConfigError):  # a world its runs refuse: no descriptors
                measured[key] = describe_seeds(world, list(seeds)).as_dict()
        if key in measured:
            rows[col.key] = {"column": col.key, "scenario": col.scenario,
                             "variant": col.variant, "link": col.link, "seed": int(seeds[0]),
                             "seeds": len(seeds), **measured[key]}
    table = pd.DataFrame(list(rows.values()))
    write_csv(table, path, index=False)
    return path


def _is_scenario_file(path: str) -> bool:
    """Whether a ``.toml`` file is a scenario (``[about]`` and ``[world]``), not settings."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # the settings reader then names what is wrong, in one line
    return "about" in data and "world" in data


def describe_table(world: str, *, scale: str, seed: int, seeds: int = 1,
                   rule: str | None = None) -> str:
    """``mobidfl bench --describe WORLD``.

    The descriptors of a scenario's, a study's or a settings file's worlds, as a Markdown table (no
    training; seconds per world and seed), averaged over the ``seeds`` seeds from ``seed``: the
    bench's ``--seeds`` and ``--first-seed``, so that both give the same numbers.
    """
    from mobidfl.analysis.describe import describe_seeds, markdown_head, markdown_row

    if world in scenario_names() or (world.endswith(".toml") and _is_scenario_file(world)):
        cols = columns([world], scale=scale, links=["ideal"])
        worlds = [(c.world_name, _world_without_link(c.settings)) for c in cols]
    elif world in study_names():
        worlds = [(c.variant, _world_without_link(c.settings))
                  for c in load_study(world).columns(scale)]
    elif world.endswith(".toml"):
        from mobidfl.model.config import Config

        settings = Config.from_toml(world, source="--describe").explicit_settings()
        worlds = [(Path(world).stem, settings)]
    else:
        raise ConfigError("--describe", world, "a scenario (" + ", ".join(scenario_names())
                          + "), a study (" + ", ".join(study_names())
                          + ") or a .toml file of settings")
    from mobidfl.analysis.answer import load_answer
    from mobidfl.analysis.regime_map import load_rule

    published = load_answer(rule) if rule is not None else None  # a pre-registered study's
    predict = load_rule(rule) if rule is not None and published is None else None
    if seeds < 1:
        raise ConfigError("--seeds", seeds, "at least 1 (the seeds the descriptors average)")
    seed_list = list(range(seed, seed + seeds))
    head, rule_line = markdown_head()
    lines = [head + (" rule says |" if predict else "")
             + (" primary says | budget says |" if published else ""),
             rule_line + ("---|" if predict else "") + ("---|---|" if published else "")]
    refused: list[str] = []
    notes: list[str] = []
    for name, settings in worlds:
        try:
            d = describe_seeds(settings, seed_list)
        except ConfigError as exc:
            if len(worlds) == 1:
                raise  # the one world asked for: refused in one line, exit 2
            # one world of a scenario or study that its runs refuse too (the bench records
            # them as refused): the others are still described
            lines.append(f"| {name} | refused |" + " |" * (len(lines[1].split("|")) - 4))
            refused.append(f"{name}: {exc}")
            continue
        said = f" {predict(d.neighbours_per_step, d.label_skew) or '-'} |" if predict else ""
        if published:
            said, note = _published_answer(published, name, d)
            notes += note
        lines.append(markdown_row(name, d) + said)
    if refused:
        lines += ["", "Refused at this scale (its runs are refused too):",
                  *(f"- {line}" for line in refused)]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def _published_answer(published: dict[str, Any], name: str, d: Any) -> tuple[str, list[str]]:
    """A world's cells of the pre-registered study's answer, and the lines below the table.

    Per metric the rule's policy (or, where no rule beat the constant out of sample, the
    constant, said so); then the nearest studied world's verdicts and, where a descriptor lies
    outside the studied range, which.
    """
    from mobidfl.analysis.answer import recommend

    got = recommend(published, d.as_dict())
    cells = []
    for metric in ("auc_acc", "budget_acc"):
        r = got["rules"].get(metric)
        if r is None:
            cells.append("-")
        elif r["beats_constant"]:
            cells.append(r["policy"])
        else:
            cells.append(f"{r['constant']} (the constant: no rule beat it)")
    notes = []
    near = got["nearest"]
    if near is not None:
        parts = []
        for metric, label in (("auc_acc", "mean accuracy over the run"),
                              ("budget_acc", "within D-PSGD's bytes")):
            v = near[metric]
            if near.get("ceiling"):
                parts.append(f"{label}: ceiling (best {v['best']})")
                continue
            lead = "" if v["lead_pp"] is None else (
                f" +{v['lead_pp']:.1f} pp" + ("" if v["low_pp"] is None else
                                              f" [{v['low_pp']:.1f}, {v['high_pp']:.1f}]"))
            parts.append(f"{label}: {v['kind']} {v['best']}{lead}")
        notes.append(f"- {name}: nearest studied world `{near['variant']}` of "
                     f"{published['study']}: " + "; ".join(parts))
    for desc, value, low, high in got["outside"]:
        notes.append(f"- {name}: {desc} = {value:.3g} is outside the studied range "
                     f"[{low:.3g}, {high:.3g}]: the answer is an extrapolation there")
    return f" {cells[0]} | {cells[1]} |", notes
