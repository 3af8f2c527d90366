"""Cached-DFL (Wang et al., AAAI 2025) beside the authors' own code (liemak363/Cached-DFL@b116fea).

Compared on the authors' Manhattan (their ``NY_Data/NewYork.csv``), 100 cars, the paper's 13.89
m/s and 100 m (the authors' degree scaling, ``road_sim.py``):

* contacts per car per epoch: distinct partners and meeting events, the authors'
  ``road_sim.generate_roadNet_pair_area_list`` beside MobiDFL's model (preset ``cached_dfl_003``);
* Table 2 (unlimited cache): mean number and age of cached models per tau_max and epoch length,
  from the authors' ``trainer_single.Decentralized_Cache_test`` (the function that writes
  ``cache_age_cache_num_*.txt``) on the authors' pairs, beside MobiDFL's cache maths
  (:mod:`model.maths.cache`, as :class:`model.policies.cached.CachedPolicy` drives it) on (a) the
  same pairs and (b) MobiDFL's own mobility;
* one aggregation: ``cache_algorithm.cache_average_process`` vs
  :func:`model.maths.cache.aggregation_weights` + ``engine.combine`` on the same parameters.

The authors' code runs in a child process (:mod:`validation.cdfl_driver`, which lists the shims).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.errors import ConfigError
from validation import Row
from validation.refcache import cache_root, ensure

REFERENCE = "liemak363/Cached-DFL@b116fea"
CASE = "cached_dfl"
PAPER_SEED = 10086
"""``seed_setter.SEED`` in the authors' code; seed k of a run is ``PAPER_SEED + k``."""
NUM_CAR = 100
SPEED = 13.89
"""§Mobile DFL Simulation: 13.89 m/s (the authors' ``--speed`` default is 13.59)."""
RADIUS_M = 100
"""§Mobile DFL Simulation: 100 m (``--communication_distance`` default)."""
LOCAL_EP = 10
"""``--local_ep`` default: ``Decentralized_Cache_test`` replays each round's pairs this often."""

TAUS = (1, 2, 3, 4, 5, 10, 20)
# Cached-DFL, Table 2: epoch length (s) -> (counts, ages) per tau_max in TAUS.
PAPER_TABLE2: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {
    30: ((0.9, 1.7, 2.7, 3.9, 5.2, 14.9, 44.8), (0.0, 0.5, 1.0, 1.6, 2.2, 5.4, 11.6)),
    60: ((1.7, 3.8, 6.5, 10.4, 14.1, 43.1, 90.3), (0.0, 0.6, 1.2, 1.8, 2.4, 5.6, 9.8)),
    120: ((3.7, 9.9, 18.5, 31.4, 35.2, 90.2, 98.5), (0.0, 0.6, 1.3, 1.9, 1.5, 4.7, 5.2)),
}

DRIVER = Path(__file__).with_name("cdfl_driver.py")


@dataclass(frozen=True)
class Sizes:
    """What ``--size`` runs: rounds, epoch lengths, tau_max values, rounds averaged."""

    rounds: int
    epochs: tuple[int, ...]
    taus: tuple[int, ...]
    burn_in: int


SIZES = {
    "small": Sizes(rounds=8, epochs=(60,), taus=(1, 2, 3), burn_in=3),
    "full": Sizes(rounds=40, epochs=(30, 60, 120), taus=(1, 2, 3, 4, 5, 10, 20), burn_in=20),
}


def _python() -> str:
    return sys.executable


def run_authors(task: str, req: dict, *, seed: int = PAPER_SEED) -> dict:
    """Run one task of :mod:`validation.cdfl_driver` in a child interpreter; its JSON result."""
    folder = ensure("cached_dfl")
    with tempfile.TemporaryDirectory(prefix="cdfl-") as tmp:
        root = Path(tmp)
        (root / "run").mkdir()
        os.symlink(folder / "NY_Data", root / "NY_Data")
        full = {
            **req, "task": task, "folder": str(folder), "seed": int(seed),
            "cwd": str(root / "run"), "result": str(root / "result.json"),
        }
        (root / "request.json").write_text(json.dumps(full))
        proc = subprocess.run(
            [_python(), str(DRIVER), str(root / "request.json")],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError("reference", "cached_dfl", f"the authors' code to run ({tail})")
        return json.loads((root / "result.json").read_text())


def pairs_path(*, seed: int, epoch_time: int, rounds: int, num_car: int = NUM_CAR) -> Path:
    """Where the authors' pair list for these settings is cached (computed once, then reused)."""
    key = f"s{seed}-n{num_car}-r{rounds}-T{epoch_time}-v{SPEED}-R{RADIUS_M}"
    return cache_root() / "cached_dfl-pairs" / f"pairs-{key}.npz"


def authors_pairs(*, seed: int, epoch_time: int, rounds: int, num_car: int = NUM_CAR) -> Path:
    """The authors' ``generate_roadNet_pair_area_list`` output for these settings (cached).

    One entry per 1 s sub-step (``rounds * epoch_time`` of them), each the pairs that came
    within range in that second (a meeting event; ``meeting_record`` is reset when a pair
    leaves range and at every epoch start).
    """
    path = pairs_path(seed=seed, epoch_time=epoch_time, rounds=rounds, num_car=num_car)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.stem + f".{os.getpid()}.partial.npz")
        run_authors(
            "pairs",
            {"num_car": num_car, "num_round": rounds, "epoch_time": epoch_time,
             "radius_m": RADIUS_M, "speed": SPEED, "out": str(part)},
            seed=seed,
        )
        part.replace(path)
    return path


def load_pairs(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(second [E], pairs [E, 2])`` in the authors' order (time, then their shuffle)."""
    with np.load(path) as z:
        return z["second"].astype(np.int64), z["pairs"].astype(np.int64)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


# --- the two readings of one round's cache updates, on any pair list ---------------------------
def rounds_of(second: np.ndarray, pairs: np.ndarray, *, epoch_time: int, rounds: int,
              events: bool = True) -> list[np.ndarray]:
    """The pair list cut into rounds (the authors' ``pair[i * epoch_time + s]``).

    ``events=False`` keeps each pair's first meeting in the round only (MobiDFL's reading:
    one exchange per pair and step, in first-contact order).
    """
    out = []
    for r in range(rounds):
        sel = pairs[(second >= r * epoch_time) & (second < (r + 1) * epoch_time)]
        if not events and len(sel):
            key = sel[:, 0] * (1 << 32) + sel[:, 1]
            _, first = np.unique(key, return_index=True)
            sel = sel[np.sort(first)]
        out.append(sel)
    return out


def mobidfl_table2(
    per_round: list[np.ndarray], *, tau: int, passes: int, num_car: int = NUM_CAR
) -> np.ndarray:
    """MobiDFL's cache maths on given encounters: ``[rounds, 2]`` (mean count, mean age).

    Exactly what :meth:`model.policies.cached.CachedPolicy.exchange` does each step with an
    unlimited cache (Table 2): evict stale, then :func:`replay_encounters` ``passes`` times,
    then :func:`model.maths.cache.cache_stats`.
    """
    from model.maths.cache import CacheEntry, cache_stats, evict_stale
    from model.policies.cached import replay_encounters

    caches: dict[int, dict] = {i: {} for i in range(num_car)}
    out = np.zeros((len(per_round), 2))
    for r, edges in enumerate(per_round):
        caches = {i: evict_stale(c, now=r, tau_max=tau) for i, c in caches.items()}
        own = {i: CacheEntry(origin=i, timestamp=r, size=1) for i in range(num_car)}
        caches = replay_encounters(
            caches, own, edges, now=r, tau_max=tau, passes=passes, cache_size=None
        )
        count, age = cache_stats(caches.values(), now=r)
        out[r] = count, (0.0 if np.isnan(age) else age)
    return out


def authors_table2(path: Path, *, seed: int, epoch_time: int, rounds: int,
                   taus: tuple[int, ...], num_car: int = NUM_CAR) -> dict[int, np.ndarray]:
    """``Decentralized_Cache_test`` per tau_max: ``[rounds, local_ep, 2]`` (count, age) rows.

    Unlimited cache as Table 2 says: ``cache_size = num_car`` (a cache never holds more than
    the other cars). The authors write one row per pass (``for ep in range(local_ep)``).
    """
    got = run_authors(
        "table2",
        {"pairs": str(path), "num_car": num_car, "num_round": rounds,
         "epoch_time": epoch_time, "taus": list(taus), "cache_size": num_car,
         "local_ep": LOCAL_EP},
        seed=seed,
    )
    out = {}
    for tau in taus:
        rows = np.asarray(got[str(tau)], float)  # round, age, count
        if rows.shape != (rounds * LOCAL_EP, 3):
            raise ConfigError("authors' log", rows.shape, f"{rounds * LOCAL_EP} rows")
        out[tau] = rows[:, [2, 1]].reshape(rounds, LOCAL_EP, 2)
    return out


# --- MobiDFL's own mobility ----------------------------------------------------------------------
MAP = "manhattan_cdfl"


def mobidfl_encounters(*, seed: int, epoch_time: int, rounds: int,
                       map_spec: str = MAP) -> list[np.ndarray]:
    """MobiDFL's encounters per step (preset ``cached_dfl_003``, learning off), time order."""
    from model.world import MobiDFLModel

    m = MobiDFLModel(
        preset="cached_dfl_003", learning=False, map=map_spec, step_s=float(epoch_time),
        steps=rounds, seed=seed, vehicles=NUM_CAR,
    )
    m.track_encounters = True
    out = []
    for _ in range(rounds):
        m.step()
        pairs, times = m.encounters
        out.append(np.asarray(pairs, np.int64)[np.argsort(times, kind="stable")])
    return out
