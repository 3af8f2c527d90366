"""Why MobiDFL's own mobility caches more models than the authors' at tau_max 20, 120 s epochs.

A diagnostic, not a verdict of the suite: the Table 2 cell (120 s, tau_max 20, 10 passes)
from the authors' own mobility (``road_sim.generate_roadNet_pair_area_list``, run unmodified
through :mod:`validation.cdfl_driver`) under three inputs, each through the same cache maths
(:func:`validation.cached_dfl.mobidfl_table2`, equal to the authors' ``Decentralized_Cache_test``
to the last digit on the same pairs):

* ``degrees``: the authors' inputs (13.89 and 100 scaled by 0.00145 / 100 into degrees of
  latitude *and* longitude: on the ground an ellipse of range and a faster motion along
  latitude);
* ``isotropic``: the same code on a copy of ``NewYork.csv`` whose longitudes are multiplied by
  cos(latitude) about the map's centre, so one unit is the same ground length in every
  direction, with speed and range set to what MobiDFL's preset drives on the ground (19.23 m/s,
  138 m): the motion in degrees is the only change (an input-only change; the code is the
  authors');
* MobiDFL's own mobility (preset ``cached_dfl_003`` on ``manhattan_cdfl``), for reference.

Besides the count it reports, per source, how many of an epoch's pairs had met in the 20
epochs before (re-meetings reach no new origin), distinct partners per car per epoch, and how
far cars get from where they started (the spread of the models a relay can reach).

    python -m validation.cdfl_tau20 --seeds 2 --out results/tau20
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mobidfl.atomic import write_text_atomic
from validation.cached_dfl import (
    DRIVER,
    LOCAL_EP,
    NUM_CAR,
    PAPER_SEED,
    RADIUS_M,
    SPEED,
    authors_pairs,
    load_pairs,
    mobidfl_encounters,
    mobidfl_table2,
    rounds_of,
)
from validation.refcache import ensure

EPOCH, ROUNDS, TAU, BURN_IN = 120, 40, 20, 20
DEG_PER_M = 0.00145 / 100
"""``road_sim.py``'s scaling of metres into degrees (speed and range alike)."""
M_PER_DEG_LAT = 111_050.0
"""Ground metres per degree of latitude at Manhattan (40.78 N, WGS84)."""
GROUND_SPEED, GROUND_RANGE = 19.23, 138.0
"""What MobiDFL's preset drives on the ground for the authors' 13.89 and 100 (docs/validation)."""


def isotropic_csv(src: Path, dst: Path) -> float:
    """``src`` with longitudes scaled by cos(latitude) about the mean; returns that latitude."""
    import pandas as pd

    data = pd.read_csv(src)
    lat0 = float(pd.concat([data.StartLat, data.EndLat]).mean())
    lon0 = float(pd.concat([data.StartLong, data.EndLong]).mean())
    k = math.cos(math.radians(lat0))
    for col in ("StartLong", "EndLong"):
        data[col] = lon0 + (data[col] - lon0) * k
    dst.parent.mkdir(parents=True, exist_ok=True)
    data.to_csv(dst, index=False)
    return lat0


_LEAN_DRIVER = """
import sys
import networkx as nx
import numpy as np
sys.path.insert(0, sys.argv.pop(1))
import cdfl_driver
# Memory only (the machine is shared; two 2.6 GB copies were killed): the 18,014 x 18,014
# 0/1 adjacency as int8 instead of int64 (same values, road_sim only compares it with 1),
# and no area-filtered copy (it serves cars with an area; Table 2's cars have none).
_adjacency = nx.adjacency_matrix
nx.adjacency_matrix = lambda *a, **k: _adjacency(*a, **k).astype(np.int8)
cdfl_driver.filter_edges_fast = lambda adj, groups: adj
cdfl_driver.main()
"""


def authors_isotropic_pairs(*, seed: int, out: Path) -> Path:
    """The authors' pair list on the isotropic copy of their map (input change only)."""
    if out.is_file():
        return out
    folder = ensure("cached_dfl")
    scale = DEG_PER_M * M_PER_DEG_LAT  # ground metres per nominal metre, both axes now
    with tempfile.TemporaryDirectory(prefix="cdfl-iso-") as tmp:
        root = Path(tmp)
        (root / "run").mkdir()
        isotropic_csv(folder / "NY_Data" / "NewYork.csv", root / "NY_Data" / "NewYork.csv")
        req = {
            "num_car": NUM_CAR, "num_round": ROUNDS, "epoch_time": EPOCH,
            "radius_m": GROUND_RANGE / scale, "speed": GROUND_SPEED / scale,
            "out": str(out.with_suffix(".partial.npz")), "task": "pairs",
            "folder": str(folder), "seed": int(seed), "cwd": str(root / "run"),
            "result": str(root / "result.json"),
        }
        (root / "request.json").write_text(json.dumps(req))
        proc = subprocess.run([sys.executable, "-c", _LEAN_DRIVER, str(DRIVER.parent),
                               str(root / "request.json")],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise RuntimeError(f"the authors' road_sim on the isotropic map: {tail}")
    out.with_suffix(".partial.npz").replace(out)
    return out


def remeet_fraction(per_round: list[np.ndarray], *, window: int = TAU) -> float:
    """Share of an epoch's distinct pairs (epochs BURN_IN..) that met in the ``window`` before."""
    seen: list[set] = []
    shares = []
    for r, edges in enumerate(per_round):
        now = {(min(a, b), max(a, b)) for a, b in edges.tolist()}
        if r >= BURN_IN and now:
            before = set().union(*seen[max(0, r - window):r])
            shares.append(len(now & before) / len(now))
        seen.append(now)
    return float(np.mean(shares))


def cell(per_round: list[np.ndarray]) -> dict[str, float]:
    table = mobidfl_table2(per_round, tau=TAU, passes=LOCAL_EP)
    first = [np.unique(np.sort(e, axis=1), axis=0) if len(e) else e for e in per_round]
    return {
        "count": float(table[BURN_IN:, 0].mean()),
        "age": float(table[BURN_IN:, 1].mean()),
        "distinct_partners": float(np.mean([2 * len(e) / NUM_CAR for e in first])),
        "remeet": remeet_fraction(first),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("results/tau20"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(args.seeds):
        seed = PAPER_SEED + k
        t0 = time.perf_counter()
        deg = authors_pairs(seed=seed, epoch_time=EPOCH, rounds=ROUNDS)
        iso = authors_isotropic_pairs(seed=seed, out=args.out / f"iso-s{seed}.npz")
        for name, path in (("authors, degrees", deg), ("authors, isotropic", iso)):
            second, pairs = load_pairs(path)
            rows.append({"source": name, "seed": seed,
                         **cell(rounds_of(second, pairs, epoch_time=EPOCH, rounds=ROUNDS))})
        own = mobidfl_encounters(seed=k, epoch_time=EPOCH, rounds=ROUNDS)
        rows.append({"source": "MobiDFL", "seed": k, **cell(own)})
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
        for r in rows[-3:]:
            print(json.dumps(r), flush=True)
    write_text_atomic(args.out / "tau20.json", json.dumps(
        {"rows": rows, "speed": SPEED, "radius_m": RADIUS_M, "pid": os.getpid()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
