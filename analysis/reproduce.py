"""``mobidfl reproduce PAPER``: a paper's preset over seeds, its headline claims, a verdict each.

For each seed paper a :class:`PaperSpec` names its preset (``model/presets``), the variants
the headline compares (e.g. Cached-DFL's LRU vs DFL vs CFL: settings applied on top of the
preset), the CPU-sized departures of ``--scale small`` (each with its reason, fixed before
any result was seen), and the :class:`Claim` s: the paper's number quoted with its table or
figure. Every variant runs over the seeds through the sweep machinery
(:func:`analysis.sweep.run_sweep`, one folder per variant under ``OUT/runs/``, resumable),
then :func:`claim_verdict` computes, from the measured numbers only, one of:

* ``holds``: the effect has the paper's sign on every seed (at least :data:`MIN_SEEDS`),
  and where the paper gives a number, MobiDFL's mean is within a factor of 2 of it;
* ``direction only``: the mean effect has the paper's sign, but not on every seed, not
  within a factor of 2 of the paper's number, or over fewer than :data:`MIN_SEEDS` seeds;
* ``fails``: the mean effect is zero or of the opposite sign (the reason says by how much).

A claim that a value is exactly zero (``Claim.sign = 0``, e.g. MoFeL's NFC) holds when it is
zero on every seed and fails otherwise.

``OUT/reproduction.md`` holds the table (paper vs MobiDFL mean ± std over seeds, verdict,
reason), the resolved settings of every variant, and links to the figures
(``accuracy.png``: mean accuracy over steps per variant with a ± std band; ``claims.png``:
each claim's effect per seed beside the paper's value).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.stats import mean_std, sample_std
from model.config import Config
from model.errors import ConfigError

__all__ = [
    "Claim",
    "PAPERS",
    "PaperSpec",
    "claim_verdict",
    "reproduce",
    "run_metrics",
]

FACTOR = 2.0
"""A measured effect within this factor of the paper's number counts as reproduced."""

MIN_SEEDS = 3
"""Fewer seeds than this give at most *direction only*: one lucky seed is not a result."""

PAIRED_HALF = "paired_half_acc"
"""A claim metric computed per seed from both runs' curves: each variant's accuracy at the
same epoch, half the shorter of the two runs. ``half_acc`` (half of each run's own length)
compares different epochs once an early stop ends the runs at different times."""


@dataclass(frozen=True)
class Claim:
    """One headline claim: ``metric(a) - metric(b)`` (paired per seed) has the paper's sign.

    ``b = None`` makes it a level claim: ``metric(a)`` itself. ``paper_value`` is the
    paper's number for that effect (``None``: the paper states only a direction; its sign
    is ``sign``), in the unit of ``metric`` (accuracies in percentage points). ``sign = 0``
    with ``paper_value = 0``: the paper states the value is exactly zero (MoFeL's NFC); it
    holds only if it is zero on every seed.
    """

    source: str
    text: str
    metric: str
    a: str
    b: str | None
    paper_value: float | None
    paper_quote: str
    sign: int = 1


@dataclass(frozen=True)
class PaperSpec:
    """How to reproduce one paper's headline with its preset."""

    paper: str
    title: str
    preset: str
    variants: dict[str, dict[str, Any]]
    scales: dict[str, dict[str, Any]]
    scale_notes: dict[str, str]
    claims: tuple[Claim, ...]
    variant_scales: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    skip: dict[str, tuple[str, ...]] = field(default_factory=dict)  # scale -> variants not run
    map_fallback: tuple[str, str] | None = None  # (preferred map, fallback if not available)


# --- the papers ------------------------------------------------------------------------------
CACHED = PaperSpec(
    paper="003",
    title="Cached-DFL (Wang et al., AAAI 2025)",
    preset="cached_dfl_003",
    variants={
        "LRU": {},
        "DFL": {"policy": "defedavg"},
        "CFL": {"policy": "central_fedavg"},
        # Table 2: unlimited cache (C_max = N); learning cut to one local step.
        "cache_tau1": {"tau_max": 1, "cache_size": 100, "local_steps": 1, "early_stop_patience": 0},
        "cache_tau10": {
            "tau_max": 10, "cache_size": 100, "local_steps": 1, "early_stop_patience": 0
        },
    },
    scales={
        "small": {
            "steps": 40, "model": "mlp", "test_size": 500, "eval_every": 2,
        },
        "paper": {},
    },
    variant_scales={
        "small": {
            "cache_tau1": {"steps": 30, "test_size": 50, "eval_every": 1000},
            "cache_tau10": {"steps": 30, "test_size": 50, "eval_every": 1000},
        }
    },
    scale_notes={
        "small": "CFL is not run (a 40-epoch LRU run of 100 cars took ~10 min on this loaded "
        "2-core machine; CFL is the paper's reference, not a Cached-DFL claim). "
        "40 epochs instead of 1,000; the 784-128-10 MLP instead of the CNN; 500 "
        "shared test images instead of 10k (CPU time, decided before any run). The world is "
        "the preset's: 100 cars, 120 s epochs, the range and speed the authors' code drove "
        "(138 m, 19.23 m/s on the ground; the paper states 100 m, 13.89 m/s), on "
        "manhattan_grid_twoway (or grid:40x40:150, 34 km^2, where it is not available). "
        "Table 2 runs 30 "
        "epochs with one local step (the statistics depend on contacts only).",
        "paper": "the preset as is (FashionMNIST when installed, else mnist5k).",
    },
    map_fallback=("manhattan_grid_twoway", "grid:40x40:150"),
    skip={"small": ("CFL",)},
    claims=(
        Claim("Fig. 2", "LRU caching ends more accurate than DFL without cache (non-i.i.d.)",
              "final_acc", "LRU", "DFL", None,
              "Cached-DFL boosts the convergence and outperforms non-caching method (DFL)"),
        Claim("Fig. 2", "LRU converges faster than DFL (accuracy at the same epoch: half the "
              "shorter run of the pair)", PAIRED_HALF, "LRU", "DFL", None,
              "Cached-DFL boosts the convergence"),
        Claim("Fig. 2", "centralised FedAvg (CFL) stays the upper reference: CFL - LRU",
              "final_acc", "CFL", "LRU", None,
              "gains performance much closer to CFL in all the cases"),
        Claim("Table 2 (120 s)", "cached models grow with tau_max: count(10) - count(1)",
              "cache_count", "cache_tau10", "cache_tau1", 90.2 - 3.7,
              "3.7 models at tau_max = 1, 90.2 at tau_max = 10"),
        Claim("Table 2 (120 s)", "cached models age with tau_max: age(10) - age(1)",
              "cache_age", "cache_tau10", "cache_tau1", 4.7 - 0.0,
              "age 0.0 epochs at tau_max = 1, 4.7 at tau_max = 10"),
    ),
)

MOBILITY = PaperSpec(
    paper="000",
    title="Client mobility in DFL (de Heredia 2024)",
    preset="mobility_000",
    variants={
        "p=0": {"hm_fraction": 0.0},
        "p=0.05": {"hm_fraction": 0.05},
        "p=0.2": {"hm_fraction": 0.2},
        "p=0.8": {"hm_fraction": 0.8},
    },
    scales={
        "small": {"steps": 150, "model": "mlp", "test_size": 500, "eval_every": 5},
        "medium": {"model": "mlp"},
        "paper": {},
    },
    scale_notes={
        "small": "150 rounds instead of the preset's 300 (the thesis does not state its "
        "count); the 784-128-10 MLP instead of LeNet-5 (7 ms per LeNet step on this loaded "
        "machine); 500 shared test images; mnist5k instead of CIFAR-10 when CIFAR-10 is "
        "absent (CPU time and offline data, decided before any run). World, speeds, radius, "
        "lr, batch and local steps are the preset's (the authors' code).",
        "medium": "the preset's 300 rounds, 1,000 shared test images and evaluation every "
        "10 rounds; the one departure is the 784-128-10 MLP instead of LeNet-5 (paper scale "
        "timed at ~1 s per LeNet round here, ~60 min for 12 runs; the MLP runs ~0.2 s per "
        "round, ~15 min: CPU time on the loaded 2-core machine, decided before any run); "
        "mnist5k instead of CIFAR-10 when CIFAR-10 is absent (offline data).",
        "paper": "the preset as is (300 rounds).",
    },
    claims=(
        Claim("Table 1", "accuracy gain of p = 5 % over p = 0", "final_acc", "p=0.05", "p=0",
              2.73, "+2.73 % at p = 5 %"),
        Claim("Table 1", "accuracy gain of p = 20 % over p = 0", "final_acc", "p=0.2", "p=0",
              4.64, "+4.64 % at p = 20 %"),
        Claim("Table 1", "accuracy gain of p = 80 % over p = 0", "final_acc", "p=0.8", "p=0",
              8.56, "+8.56 % at p = 80 %"),
        Claim("Table 2", "HM clients more accurate than LM throughout (p = 5 %)", "hm_lm_gap",
              "p=0.05", None, 4.81, "+4.81 % at p = 5 %"),
        Claim("Table 2", "the HM-LM gap shrinks with p: gap(5 %) - gap(80 %)", "hm_lm_gap",
              "p=0.05", "p=0.8", 4.81 - 0.90, "+4.81 % at p = 5 %, +0.90 % at p = 80 %"),
    ),
)

DAM = PaperSpec(
    paper="001",
    title="DAM/DCM (Reza et al.)",
    preset="dam_001",
    variants={
        "Static": {"uav.mobility": "static"},
        "Random": {"uav.mobility": "random_grid"},
        "DAM": {"uav.mobility": "dam"},
        "DCM": {"uav.mobility": "dcm"},
    },
    scales={"small": {"steps": 1000, "model": "mlp", "test_size": 500}, "paper": {}},
    scale_notes={
        "small": "the paper's 1,000 rounds (Fig. 2 is read after 1,000 rounds; mobility helps "
        "by carrying models between static clients, which accumulates over rounds: the "
        "earlier 300-round cut was for CPU time only) with the 784-128-10 MLP instead of the "
        "two-conv CNN (CPU time: ~4x slower per round here, decided before any run); world, "
        "R_c, R_m, Dirichlet 0.05, full-batch GD with lr 0.3, momentum 0.9, weight decay 5e-4 "
        "are the paper's.",
        "paper": "the preset as is (1,000 rounds, CNN).",
    },
    claims=(
        Claim("Fig. 2", "mobile clients moving at random beat all-static", "final_acc",
              "Random", "Static", None,
              "Random Movement achieves significantly higher accuracy compared to the Static"),
        Claim("Fig. 2", "DAM over Random (alpha = 0.05)", "final_acc", "DAM", "Random", 8.0,
              "DAM and DCM improve accuracy on average by approximately 8%"),
        Claim("Fig. 2", "DCM over Random (alpha = 0.05)", "final_acc", "DCM", "Random", 8.0,
              "DAM and DCM improve accuracy on average by approximately 8%"),
        Claim("Fig. 2", "DCM at least as good as DAM", "final_acc", "DCM", "DAM", None,
              "the proposed DCM outperforms DAM"),
    ),
)

PSFL = PaperSpec(
    paper="004",
    title="PSFL (Domini et al., ACSOS 2024)",
    preset="psfl_004",
    variants={"PSFL": {}, "FedAvg": {"policy": "central_fedavg"}},
    scales={"small": {"steps": 40, "test_size": 500}, "paper": {}},
    scale_notes={
        "small": "40 rounds instead of 60 (CPU time; the authors' own log of 3 areas at "
        "sigma 40 settles at 3 federations by round ~23, decided before any run); 3 areas, "
        "sigma 40, 56 sensors, MLP 128, Adam lr 1e-3, disjoint area labels and the eq. 3 "
        "loss summed over 4.5 batches as in the preset. Both PSFL and central FedAvg are "
        "scored the same way (`task_acc` = `area_acc_mean`: every sensor's model on the test "
        "samples of its own labels, averaged over sensors, Fig. 6); `final_acc` is the same "
        "models on the whole test sample.",
        "paper": "the preset as is (60 rounds; EMNIST-letters when installed).",
    },
    claims=(
        Claim("Fig. 6", "PSFL more accurate than centralised FedAvg (3 areas)", "task_acc",
              "PSFL", "FedAvg", None,
              "PSFL beats centralised FedAvg in every configuration (3 areas: ~0.79)"),
        Claim("Fig. 5", "federation count at the end of the run (3 areas)", "federations",
              "PSFL", None, 3.0, "|F| settles at the number of areas"),
    ),
)

# MoFeL speeds: the paper's v_max (m/min) times 20/3 (model/presets/mofel_002.toml: nyc_uws
# territories are ~500 m of road per visit, the paper's d_s 75 m; times kept literal), in m/s.
_MOFEL_SPEED = {5: 5 * 20 / 3 / 60, 30: 30 * 20 / 3 / 60}
_MOFEL_POLICY = {"MoFeL": "mofel", "A1": "mofel_a1", "A2": "mofel_a2"}

MOFEL = PaperSpec(
    paper="002",
    title="MoFeL (Macedo et al., Sensors 2023)",
    preset="mofel_002",
    variants={
        f"{name} {v}": {"policy": policy, "vehicle.speed": round(_MOFEL_SPEED[v], 4)}
        for v in (5, 30)
        for name, policy in _MOFEL_POLICY.items()
    },
    scales={
        "small": {"steps": 400, "model": "mlp", "test_size": 500, "local_steps": 1},
        "medium": {"model": "mlp", "test_size": 500, "local_steps": 1},
        "paper": {},
    },
    scale_notes={
        "small": "400 one-minute steps instead of 2,000 (20 longest training times instead of "
        "100); the 784-128-10 MLP instead of LeNet-5; one local SGD step per minute of "
        "training instead of 10 local epochs; 500 shared test images; the 5 and 30 m/min "
        "scenarios only (15 m/min left out) (CPU time, decided before any run). World, "
        "clients, per-client speeds U(1 m/min, v_max) and training times U(1, 20) min, the "
        "station's Delta (2 tau_max) are the preset's; speeds are the paper's times 20/3 "
        "(the preset's comment: nyc_uws territories are ~500 m of road, the paper's 75 m).",
        "medium": "the preset's 2,000 one-minute steps (the paper's T, 100 longest training "
        "times); still the 784-128-10 MLP instead of LeNet-5, one local SGD step per minute "
        "of training instead of 10, 500 shared test images, the 5 and 30 m/min scenarios "
        "only (paper scale timed at ~1.3 s per step here, ~13 h for 18 runs; these "
        "departures ~20 min: CPU time, decided before any run). NTC and NFC depend on "
        "contacts and training times, not on the model. World, clients, speeds and times as "
        "in `small`.",
        "paper": "the preset as is (2,000 steps, LeNet-5, 10 local steps per minute) at 5 and "
        "30 m/min.",
    },
    claims=(
        Claim("Table 2 / §6", "MoFeL frustrates no client at 5 m/min: NFC", "nfc", "MoFeL 5",
              None, 0.0, "NFC = 0 in all scenarios, like MoFeL", sign=0),
        Claim("Table 2 / §6", "MoFeL frustrates no client at 30 m/min: NFC", "nfc", "MoFeL 30",
              None, 0.0, "NFC = 0 in all scenarios, like MoFeL", sign=0),
        Claim("Table 2 / §6", "A1 frustrates clients: NFC(A1) - NFC(MoFeL) at 5 m/min", "nfc",
              "A1 5", "MoFeL 5", None,
              "A1 wrongly chose many clients in the scenario with less mobility"),
        Claim("Table 2 / §6", "A1's NFC grows with speed: NFC(A1, 30) - NFC(A1, 5)", "nfc",
              "A1 30", "A1 5", None, "there was an increase of NFC in the A1 algorithm"),
        Claim("Table 2 / §6", "MoFeL completes more cycles than A2 at 30 m/min", "ntc",
              "MoFeL 30", "A2 30", None,
              "at 30 m/min MoFeL performed more training cycles than A1 and A2"),
        Claim("Table 2 / §6", "MoFeL completes more cycles than A1 at 30 m/min", "ntc",
              "MoFeL 30", "A1 30", None,
              "at 30 m/min MoFeL performed more training cycles than A1 and A2"),
        Claim("Table 2 / §6", "MoFeL completes more cycles than A2 at 5 m/min", "ntc",
              "MoFeL 5", "A2 5", None,
              "at 5 m/min an increase in training cycles compared to A1 and A2"),
        Claim("Table 2 / §6", "MoFeL's NTC grows with speed: NTC(MoFeL, 30) - NTC(MoFeL, 5)",
              "ntc", "MoFeL 30", "MoFeL 5", None,
              "an increase in NTC in MoFeL between 5 m/min and 30 m/min"),
    ),
)

PAPERS: dict[str, PaperSpec] = {
    "mobility_000": MOBILITY, "dam_001": DAM, "cached_dfl_003": CACHED, "psfl_004": PSFL
}
PAPERS["mofel_002"] = MOFEL
ALIASES = {"000": "mobility_000", "001": "dam_001", "003": "cached_dfl_003", "cached_dfl":
           "cached_dfl_003", "mobility": "mobility_000", "dam": "dam_001", "004": "psfl_004",
           "psfl": "psfl_004"}
ALIASES |= {"002": "mofel_002", "mofel": "mofel_002"}


def paper_spec(name: str) -> PaperSpec:
    key = ALIASES.get(name, name)
    if key not in PAPERS:
        raise ConfigError("PAPER", name, "one of " + ", ".join(PAPERS))
    return PAPERS[key]


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
    for name in ("ntc", "nfc"):  # MoFeL: cycles completed, frustrated clients (final counts)
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


def claim_verdict(
    effects: Sequence[float], *, paper_value: float | None, sign: int = 1
) -> tuple[str, str]:
    """(verdict, reason) of one claim from its per-seed effects (module docstring)."""
    e = np.asarray(effects, dtype=float)
    if e.size == 0:
        return "fails", "no finished runs"
    few = f"{e.size} seed{'s' if e.size > 1 else ''} (holds needs >= {MIN_SEEDS})"
    if sign == 0 and paper_value in (None, 0):  # a level the paper states as exactly 0
        if (e == 0).all():
            return ("holds", "") if e.size >= MIN_SEEDS else ("direction only", few)
        return "fails", f"{int((e != 0).sum())} of {e.size} seeds non-zero (mean {e.mean():+.2f})"
    want = int(np.sign(paper_value)) if paper_value not in (None, 0) else sign
    mean = float(e.mean())
    if np.sign(mean) != want:
        return "fails", f"mean effect {mean:+.2f} has the opposite sign (or none) of the paper's"
    every = bool((np.sign(e) == want).all())
    within = True
    if paper_value not in (None, 0):
        ratio = mean / paper_value
        within = 1.0 / FACTOR <= ratio <= FACTOR
    if every and within and e.size >= MIN_SEEDS:
        return "holds", ""
    reasons = [] if e.size >= MIN_SEEDS else [few]
    if not every:
        reasons.append(f"{int((np.sign(e) == want).sum())} of {e.size} seeds have the sign")
    if not within:
        reasons.append(
            f"magnitude {mean:+.2f} vs paper {paper_value:+.2f} (outside x{FACTOR:g})"
        )
    return "direction only", "; ".join(reasons)


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
    if spec.map_fallback is not None:
        preferred, fallback = spec.map_fallback
        settings["map"] = preferred if map_available(preferred) else fallback
    settings.update(extra or {})
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
    """Whether a named map is known to this build (e.g. ``manhattan_grid``)."""
    from maps.sources import load_graph

    try:
        load_graph(spec)
    except (ConfigError, OSError, ValueError):
        return False
    return True


class ReproductionFailed(RuntimeError):
    """Every run of a variant failed, so no claim that needs it can be scored (one line)."""


def preflight(settings: Mapping[str, Any], *, seed: int) -> None:
    """Build one variant's model (map, agents, data, partition, nets) and drop it.

    WHY: a bad ``--set`` (a map file that is not there, sensors that do not fit the map,
    a partition the dataset cannot give) must stop the reproduction before its first run,
    in one line, not after every run of every variant has failed. Each model seeds torch
    itself when built, so building one here changes no later run.
    """
    from model.world import MobiDFLModel

    MobiDFLModel(**{**settings, "seed": int(seed)})


def failed_runs(folder: Path, variant: str) -> list[dict[str, Any]]:
    """``{variant, seed, error}`` of the runs of one variant's sweep that did not finish."""
    from analysis.sweep import read_manifest

    manifest = read_manifest(folder)
    bad = manifest[manifest["status"] != "ok"]
    return [
        {"variant": variant, "seed": int(r.seed), "error": str(r.error) or str(r.status)}
        for r in bad.itertuples()
    ]


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
) -> Path:
    """Run the variants of ``paper`` over ``seeds`` into ``out`` and write reproduction.md.

    ``variants`` limits the run to some of them (a claim needing another one is reported
    *not run*); ``extra`` settings apply to every variant (see :func:`variant_settings`).
    """
    from analysis.sweep import Sweep, load_runs, run_sweep

    spec = paper_spec(paper)
    out = Path(out)
    resolved: dict[str, Config] = {}
    extra = dict(extra or {})
    jobs = []
    for variant in chosen_variants(spec, variants, scale=scale):
        settings = variant_settings(spec, variant, scale=scale, extra=extra)
        resolved[variant] = Config.from_settings(settings)
        sweep = Sweep.from_dict({"base": settings, "seeds": [int(s) for s in seeds]})
        preflight(settings, seed=seeds[0])
        jobs.append((variant, sweep, out / "runs" / _slug(variant)))
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

    if together == 1:
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
    return write_report(spec, steps, out, resolved=resolved, scale=scale, seeds=seeds,
                        extra=extra, failures=failures)  # fmt: skip


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
) -> Path:
    """per_run.csv, the figures and reproduction.md of per-step rows (variant, seed, step, ...).

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
    per_run.to_csv(out / "per_run.csv", index=False)
    failed = out / "failed_runs.csv"
    if failures:
        pd.DataFrame(list(failures)).to_csv(failed, index=False)
    else:
        failed.unlink(missing_ok=True)  # a resumed reproduction whose failures were re-run
    _figures(spec, steps, per_run, out)
    rows = verdict_rows(spec, per_run, steps)
    pd.DataFrame(rows).to_csv(out / "verdicts.csv", index=False)
    text = _markdown(spec, per_run, resolved, rows, scale=scale, seeds=seeds, extra=extra,
                     how=how, failures=failures)  # fmt: skip
    from model.atomic import write_text_atomic

    write_text_atomic(out / "reproduction.md", text)
    return out / "reproduction.md"


def _commit() -> str:
    """The git commit of this checkout (``unknown`` outside git)."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"`{out.stdout.strip()}`"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def verdict_rows(
    spec: PaperSpec, per_run: pd.DataFrame, steps: pd.DataFrame | None = None
) -> list[dict[str, str]]:
    """One row per claim: the paper's value, MobiDFL's effect, the verdict and its reason."""
    rows = []
    ran = set(per_run.variant) if len(per_run) else set()
    for claim in spec.claims:
        effects = claim_effects(claim, per_run, steps)
        verdict, reason = claim_verdict(
            effects, paper_value=claim.paper_value, sign=claim.sign
        )
        if {claim.a, claim.b} - {None} - ran:
            verdict, reason = "not run", "a variant it needs was not run at this scale"
        paper = "direction" if claim.paper_value is None else f"{claim.paper_value:+.2f}"
        rows.append(
            {
                "source": claim.source,
                "claim": claim.text,
                "paper": f"{paper} (\"{claim.paper_quote}\")",
                "MobiDFL (mean ± std)": mean_std(effects, signed=True),
                "seeds": str(effects.size),
                "verdict": verdict,
                "reason": reason,
            }
        )
    return rows


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
) -> str:
    extra = dict(extra or {})
    command = f"mobidfl reproduce {spec.preset} --scale {scale} --seeds {len(seeds)}"
    if seeds and seeds[0] != 0:
        command += f" --first-seed {seeds[0]}"
    if set(resolved) != set(chosen_variants(spec, None, scale=scale)):
        command += " --variants " + ",".join(resolved)
    command += "".join(f" --set {k}={v}" for k, v in extra.items())
    lines = [
        f"# Reproduction of {spec.title}",
        "",
        f"Preset `{spec.preset}`, scale `{scale}`, seeds {list(seeds)}, code {_commit()}. "
        f"Written by `{command}`." if how is None else how,
        "",
        f"Scale: {spec.scale_notes.get(scale, '')}",
        "",
    ]
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
        "Verdicts are computed from the numbers: *holds* = the paper's sign on every seed "
        f"(at least {MIN_SEEDS}) and (where the paper gives a number) a mean within "
        f"x{FACTOR:g} of it; *direction "
        "only* = the mean has the paper's sign; *fails* = it does not. Accuracies in "
        "percentage points; effects paired per seed.",
        "",
        "| source | claim | paper | MobiDFL (mean ± std) | seeds | verdict | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(r[k].replace("|", "/") for k in r) + " |")
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
    fig.savefig(out / "accuracy.png", dpi=110)
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
    fig.savefig(out / "claims.png", dpi=110)
    plt.close(fig)
