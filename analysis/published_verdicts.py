"""The verdicts of the published runs of record, scored again from their per-run data.

WHY: a verdict is a reading of numbers that were published once; when the rule that reads
them changes (:func:`mobidfl.analysis.reproduce.claim_verdict`), every table of record is
scored again from the same ``per_run.csv`` (and per-step tables) without re-running anything,
and the index says which claims changed class and why. Pages equal data: the tests recompute
each ``verdicts.csv`` here and compare.

* :func:`record_inputs`: a run of record's per-run rows, per-step rows and resolved settings,
  read from its published folder(s);
* :func:`rescore`: writes its ``verdicts.csv`` (and ``verdicts_readings.csv``) and the claim
  and readings sections of its report under ``docs/``;
* :func:`previous_verdict`: the rule the pages used before the interval was read (a sign on
  every seed and a mean within x2), kept so the index can count what the change moved
  (:func:`mobidfl.analysis.reproduction_index.change_table`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mobidfl.analysis.reproduce import (
    FACTOR,
    MIN_SEEDS,
    VERDICT_RULE,
    PaperSpec,
    claim_table,
    paper_spec,
    reading_rows,
    reading_that_ran,
    readings_markdown,
    variant_slug,
    verdict_rows,
)
from mobidfl.atomic import write_csv, write_text_atomic
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config

__all__ = ["RecordInputs", "previous_verdict", "record_inputs", "report_sections", "rescore"]


@dataclass(frozen=True)
class RecordInputs:
    """What a run of record's verdicts are computed from."""

    spec: PaperSpec
    per_run: pd.DataFrame
    steps: pd.DataFrame | None
    resolved: dict[str, Config]


def _steps_and_settings(
    folder: Path, spec: PaperSpec, names: Sequence[str]
) -> tuple[list[pd.DataFrame], dict[str, Config]]:
    """Per-step rows and settings of one folder's runs.

    Sweeps (``runs/<variant>/``) or, for runs made one per process on a GPU,
    ``runs/<policy>_s<seed>/model.csv`` beside its ``config.toml``.
    """
    from mobidfl.analysis.sweep import load_runs

    frames, resolved = [], {}
    for name in names:
        sweep = folder / "runs" / variant_slug(name)
        if (sweep / "manifest.csv").exists():
            rows = load_runs(sweep)
            frames.append(rows.assign(variant=name))
            base = tomllib.loads((sweep / "sweep.toml").read_text())["base"]
            resolved.setdefault(name, Config.from_settings(base))
    runs = sorted(folder.glob("runs/*_s*/model.csv"))
    by_policy = {v: Config.from_settings({"preset": spec.preset, **spec.variants[v]}).policy
                 for v in names if v in spec.variants} if runs else {}
    for run in runs:
        policy, _, seed = run.parent.name.rpartition("_s")
        variant = next((v for v, p in by_policy.items() if p == policy and v in names), None)
        if variant is None:
            continue
        table = pd.read_csv(run, index_col=0).rename_axis("step").reset_index()
        frames.append(table.assign(variant=variant, seed=int(seed)))
        resolved.setdefault(variant, Config.from_toml(run.parent / "config.toml"))
    return frames, resolved


def record_inputs(published: Path, verdicts: str, folders: Sequence[str] = ()) -> RecordInputs:
    """The per-run data of a run of record whose ``verdicts.csv`` is ``verdicts``.

    ``folders`` (relative to ``published``) hold its per-run tables where they are more than
    the verdicts' own folder (DAM/DCM's ten seeds: seeds 0-2 and 3-9 apart).
    """
    spec = paper_spec(verdicts.split("/", 1)[0])
    paths = [published / f for f in folders] or [(published / verdicts).parent]
    try:
        per_run = pd.concat([pd.read_csv(p / "per_run.csv") for p in paths], ignore_index=True)
        names = list(dict.fromkeys(per_run["variant"].astype(str)))
        frames, resolved = [], {}
        for path in paths:
            more, settings = _steps_and_settings(path, spec, names)
            frames += more
            resolved = {**settings, **resolved}
    except (OSError, KeyError, ValueError, pd.errors.ParserError) as exc:
        raise ConfigError("published file", str(paths[0]),
                          f"readable per-run tables ({exc})") from None
    steps = pd.concat(frames, ignore_index=True) if frames else None
    order = {v: resolved[v] for v in spec.variants if v in resolved}
    return RecordInputs(spec, per_run, steps, order)


def _replace_block(lines: list[str], first: int, last: int, new: Sequence[str]) -> list[str]:
    return [*lines[:first], *new, *lines[last:]]


def report_sections(text: str, inputs: RecordInputs,
                    rows: Sequence[Mapping[str, str]] | None = None) -> str:
    """``text`` (a report) with its rule, claim table and readings section of ``inputs``.

    ``rows``: the claim rows of ``inputs`` where the caller has scored them already.
    """
    if rows is None:
        rows = verdict_rows(inputs.spec, inputs.per_run, inputs.steps)
    lines = text.split("\n")
    try:
        first = next(i for i, line in enumerate(lines) if line.startswith("Verdicts are "))
    except StopIteration:
        raise ConfigError("reproduction report", "its verdicts",
                          "a paragraph starting 'Verdicts are'") from None
    last = next(i for i in range(first + 2, len(lines)) if not lines[i].startswith("|"))
    lines = _replace_block(lines, first, last, [
        VERDICT_RULE + " Accuracies in percentage points; effects paired per seed.", "",
        *claim_table(rows)])
    if inputs.spec.readings:
        ran = reading_that_ran(inputs.spec, inputs.resolved)
        sensitivity = reading_rows(inputs.spec, inputs.per_run, inputs.steps, ran=ran)
        section = [*readings_markdown(inputs.spec, sensitivity, ran=ran), ""]
        heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
        at = next((i for i in heads if lines[i] == "## Readings of ambiguous passages"), None)
        if at is not None:  # a report written before readings existed keeps none
            end = next((i for i in heads if i > at), len(lines))
            lines = _replace_block(lines, at, end, section)
    return "\n".join(lines)


def rescore(published: Path, docs: Path, verdicts: str, *, folders: Sequence[str] = (),
            report: str = "") -> list[Path]:
    """Write a run of record's verdicts again from its per-run data; the files written.

    ``verdicts.csv`` (and ``verdicts_readings.csv`` where the paper has readings and the file
    was published) beside it, and where ``report`` names its page under ``docs``, the page's
    rule, claim table and readings section.
    """
    inputs = record_inputs(published, verdicts, folders)
    written = [published / verdicts]
    rows = verdict_rows(inputs.spec, inputs.per_run, inputs.steps)
    write_csv(pd.DataFrame(rows), written[0], index=False)
    readings = written[0].with_name("verdicts_readings.csv")
    if inputs.spec.readings and readings.exists():
        ran = reading_that_ran(inputs.spec, inputs.resolved)
        table = reading_rows(inputs.spec, inputs.per_run, inputs.steps, ran=ran)
        write_csv(pd.DataFrame(table), readings, index=False)
        written.append(readings)
    if report:
        page = docs / report
        old = page.read_text()
        new = report_sections(old, inputs, rows)
        if new != old:
            write_text_atomic(page, new)
        written.append(page)
    return written


def previous_verdict(effects: Sequence[float], *, paper_value: float | None,
                     sign: int = 1) -> str:
    """The verdict under the rule before the interval was read.

    *holds*: the paper's sign on every seed (at least :data:`MIN_SEEDS`) and, where the paper
    gives a number, a mean within x :data:`FACTOR` of it; *direction only*: the mean has the
    sign; *fails*: it does not (or no runs). A value stated as zero held when zero on every
    seed. Kept only to count which claims the change moved (the reproduction index).
    """
    e = np.asarray(effects, dtype=float)
    if e.size == 0:
        return "fails"
    if sign == 0 and paper_value in (None, 0):
        if (e == 0).all():
            return "holds" if e.size >= MIN_SEEDS else "direction only"
        return "fails"
    want = int(np.sign(paper_value)) if paper_value not in (None, 0) else sign
    mean = float(e.mean())
    if np.sign(mean) != want:
        return "fails"
    every = bool((np.sign(e) == want).all())
    within = paper_value in (None, 0) or 1.0 / FACTOR <= mean / paper_value <= FACTOR
    return "holds" if every and within and e.size >= MIN_SEEDS else "direction only"
