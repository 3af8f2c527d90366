"""Who meets whom again: the authors' Cached-DFL mobility beside MobiDFL's, one change at a time.

Cached-DFL's Table 2 cell at 120 s and tau_max 20 caches x1.26 more models on MobiDFL's own
mobility than on the authors' (docs/validation, "The tau_max 20 cell"): part of it is the
motion in degrees, the rest went with MobiDFL's cars re-meeting fewer earlier partners. This
measures the re-meeting on both sides, same map (the authors' ``NewYork.csv``; MobiDFL's
bundled copy ``manhattan_cdfl``), 100 cars, 40 epochs of 120 s, the same seed count, no
training:

* the authors' code: ``road_sim.generate_roadNet_pair_area_list`` of liemak363/Cached-DFL@
  b116fea, unmodified (13.89 and 100 scaled to degrees of (lon, lat)), with every car's
  position read after each 1 s move (:mod:`validation.cdfl_remeet_driver`);
* MobiDFL's model itself (preset ``cached_dfl_003``, learning off: 34 sub-samples per epoch,
  the exact closest-approach test between them);
* MobiDFL's mobility, driven second by second through its own code (:mod:`mobidfl.maps.network`:
  ``random_edges``, ``turn_table``, ``advance``) with one of the authors' choices put in at a
  time (:data:`CHANGES`), then all of them together.

Per run it reports, from each epoch's distinct pairs: partners per car per epoch, the share of
an epoch's pairs that met in the 20 epochs before (the share that decides how many origins a
relay over tau_max = 20 reaches), the share of a car's partners of epochs 0-19 it meets again
in epochs 20-39, the gap in epochs since a pair's previous meeting (median, distribution) and
the tau_max = 20 count (MobiDFL's cache maths, unlimited cache, 10 passes, equal to the
authors' ``Decentralized_Cache_test``); and from positions each second (distance < range, the
same test on every row): how long a contact lasts, the gap between two contacts of a pair, and
how far a car gets in 20 epochs.

    python -m validation.cdfl_remeet --seeds 12
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
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from mobidfl.atomic import write_text_atomic
from mobidfl.errors import ConfigError
from validation.cached_dfl import (
    LOCAL_EP,
    NUM_CAR,
    PAPER_SEED,
    RADIUS_M,
    SPEED,
    load_pairs,
    mobidfl_table2,
    rounds_of,
)
from validation.refcache import cache_root, ensure

EPOCH, ROUNDS, TAU, BURN_IN = 120, 40, 20, 20
SECONDS = EPOCH * ROUNDS
DEG_PER_M = 0.00145 / 100
"""``road_sim.py``'s scaling of metres into degrees of (lon, lat), speed and range alike."""
GROUND_SPEED, GROUND_RANGE = 19.23, 138.0
"""What the preset ``cached_dfl_003`` drives on the ground for the authors' 13.89 and 100."""
DRIVER = Path(__file__).with_name("cdfl_remeet_driver.py")
DATA = Path(__file__).resolve().parents[1] / "published" / "validation" / "cdfl_remeet"
"""The committed output (``remeet.json``), read by docs/validation and its test."""
GAP_BINS = (1, 2, 5, 11, 21)
"""Epoch-gap classes: 1, 2-4, 5-10, 11-20, 21+ (a relay of tau_max 20 spans 20 epochs)."""


# --- the authors' side ---------------------------------------------------------------------------
def authors_run(*, seed: int) -> Path:
    """The authors' pair list and 1 s positions for ``seed`` (cached npz; ~1 GB, 1-2 min)."""
    out = cache_root() / "cached_dfl-remeet" / f"road_sim-s{seed}-T{EPOCH}-r{ROUNDS}.npz"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = ensure("cached_dfl")
    with tempfile.TemporaryDirectory(prefix="cdfl-remeet-") as tmp:
        root = Path(tmp)
        (root / "run").mkdir()
        (root / "NY_Data").symlink_to(folder / "NY_Data")
        part = out.with_name(out.stem + f".{os.getpid()}.partial.npz")
        req = {"num_car": NUM_CAR, "num_round": ROUNDS, "epoch_time": EPOCH,
               "radius_m": RADIUS_M, "speed": SPEED, "out": str(part), "folder": str(folder),
               "seed": int(seed), "cwd": str(root / "run"), "result": str(root / "r.json")}
        (root / "request.json").write_text(json.dumps(req))
        wall, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run([sys.executable, str(DRIVER), str(root / "request.json")],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise ConfigError("reference", "cached_dfl", f"road_sim to run ({tail})")
        cost = {"wall_s": round(time.perf_counter() - wall, 1),
                "cpu_s": round(_children_cpu() - cpu, 1), "cpu_model": _cpu_model()}
        write_text_atomic(out.with_suffix(".cost.json"), json.dumps(cost))
        part.replace(out)
    return out


def _children_cpu() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def authors_cost(*, seed: int) -> dict | None:
    """Wall and CPU seconds of the authors' run for ``seed``, when this cache made it."""
    side = cache_root() / "cached_dfl-remeet" / (
        f"road_sim-s{seed}-T{EPOCH}-r{ROUNDS}.cost.json")
    return json.loads(side.read_text()) if side.is_file() else None


def _degrees_to_ground(lonlat: np.ndarray) -> np.ndarray:
    """(lon, lat) degrees -> metres in MobiDFL's CRS for the map (UTM 18N)."""
    from pyproj import Transformer

    move = Transformer.from_crs("EPSG:4326", "EPSG:32618", always_xy=True).transform
    x, y = move(lonlat[..., 0], lonlat[..., 1])
    return np.stack([np.asarray(x), np.asarray(y)], axis=-1)


# --- MobiDFL's side, one change at a time --------------------------------------------------------
@dataclass(frozen=True)
class Mobility:
    """One way to move the cars: MobiDFL's choice or the authors' for each part.

    ``turn``: ``classes`` (MobiDFL's turn classes) or ``straightest`` (the authors' rule,
    :meth:`mobidfl.maps.network.StreetNetwork.turn_table`); ``start``: ``length`` (uniform along the
    streets, MobiDFL) or ``node`` (a uniform node and one of its roads, the authors);
    ``steps``: ``carry`` (distance left at a node carries into the next road, MobiDFL) or
    ``one_node`` (the authors' ``Car.move``: at most one node per 1 s move, the rest of the
    second driven straight on past the next node, if it is that close, and taken back from
    there the second after); ``plane``: ``metres`` (UTM, 19.23 m/s within 138 m, the preset)
    or ``degrees`` ((lon, lat) as flat x/y, 13.89 and 100 times 0.00145/100 degrees, the
    authors); ``contact``: ``chords`` (MobiDFL's exact closest approach between the 1 s
    positions) or ``seconds`` (distance < range at each 1 s position, the authors).
    """

    turn: str = "classes"
    start: str = "length"
    steps: str = "carry"
    plane: str = "metres"
    contact: str = "chords"


AUTHORS_CHOICES = Mobility("straightest", "node", "one_node", "degrees", "seconds")
CHANGES: tuple[tuple[str, str], ...] = (
    ("turn", "the turn rule: the straightest road 0.5, the others share 0.5"),
    ("start", "start: a uniform node and one of its roads, not uniform along the streets"),
    ("steps", "1 s moves that pass at most one node"),
    ("plane", "(lon, lat) as flat x/y, 13.89 and 100 in degrees"),
    ("contact", "contact: distance < range at each 1 s position"),
)
"""The authors' choices, each put alone into MobiDFL's mobility (:class:`Mobility` fields)."""


def _networks() -> dict[str, object]:
    """MobiDFL's drive network of ``manhattan_cdfl`` in metres, and the same in degrees.

    The degree copy is built by the same code from the same bundled segments, with
    (lon, lat) times 100 / 0.00145 as flat coordinates (so one unit is one of the authors'
    nominal metres in both directions; shifted into UTM's domain, which moves nothing).
    """
    from mobidfl.maps.edges import from_segments
    from mobidfl.maps.network import StreetNetwork
    from mobidfl.maps.sources import BUNDLED_DATA
    from mobidfl.maps.world import street_networks

    metres = street_networks("manhattan_cdfl")[0]
    with np.load(BUNDLED_DATA / "manhattan_cdfl.npz") as z:
        lonlat, seg = z["lonlat"], z["segments"]
    centre = lonlat.mean(axis=0)
    flat = (lonlat - centre) / DEG_PER_M + np.array([500_000.0, 4_500_000.0])
    table = from_segments(flat[seg[:, 0]], flat[seg[:, 1]], crs="EPSG:32618", two_way=True,
                          snap_m=1e-3)
    degrees = StreetNetwork.from_table(table, directed=True)
    return {"metres": metres, "degrees": degrees, "centre": centre}


def _plane_to_ground(xy: np.ndarray, plane: str, centre: np.ndarray) -> np.ndarray:
    if plane == "metres":
        return xy
    lonlat = (xy - np.array([500_000.0, 4_500_000.0])) * DEG_PER_M + centre
    return _degrees_to_ground(lonlat)


def authors_move(net, table, edges: np.ndarray, offsets: np.ndarray,
                 speed: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The authors' ``Car.move(1)`` on MobiDFL's edges: at most one node per 1 s move.

    A car less than ``speed`` from its road's end (before or past it) turns there
    (``table``), and drives the rest of the second, ``speed`` minus that distance, on the
    next road, even past that road's end: the next second measures the distance back to the
    node. ``offsets`` may exceed the road's length (:func:`authors_xy` draws them straight on).
    """
    left = np.abs(net.edge_len[edges] - offsets)
    turn = np.flatnonzero(left < speed)
    edges, offsets = edges.copy(), offsets + speed
    if turn.size:
        edges[turn] = table.sample(edges[turn], rng.random(turn.size))
        offsets[turn] = speed - left[turn]
    return edges, offsets


def authors_xy(net, edges: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Positions ``offsets`` along straight roads, also past their end (as ``Car.move``)."""
    start = net.node_xy[net.edge_u[edges]]
    way = net.node_xy[net.edge_v[edges]] - start
    way /= np.maximum(np.hypot(*way.T), 1e-12)[:, None]
    return start + way * offsets[:, None]


def simulate(net, mob: Mobility, *, speed: float, seed: int,
             count: int = NUM_CAR, seconds: int = SECONDS) -> np.ndarray:
    """Positions ``[seconds, count, 2]`` after each 1 s move of MobiDFL's mobility under ``mob``.

    ``carry`` is :meth:`mobidfl.maps.network.StreetNetwork.advance` itself (what
    :class:`mobidfl.agents.mobility.manhattan.Manhattan` runs); ``one_node`` is :func:`authors_move`
    on the same roads and turn table (the roads of ``manhattan_cdfl`` are straight segments).
    """
    rng = np.random.default_rng(seed)
    table = net.turn_table((0.5, 0.25, 0.25), rule=mob.turn)
    if mob.start == "length":
        edges, offsets = net.random_edges(count, rng)
    else:
        nodes = rng.integers(len(net.node_xy), size=count)
        outs = net.out_ptr[nodes + 1] - net.out_ptr[nodes]
        edges = net.out_edges[net.out_ptr[nodes] + (rng.random(count) * outs).astype(int)]
        offsets = np.zeros(count)
    out = np.empty((seconds, count, 2))
    step = np.full(count, float(speed))
    one = np.zeros(count, int)
    for s in range(seconds):
        if mob.steps == "carry":
            edges, offsets = net.advance(edges, offsets, step, [table], one, rng)
            out[s] = net.xy(edges, offsets)
        else:
            edges, offsets = authors_move(net, table, edges, offsets, speed, rng)
            out[s] = authors_xy(net, edges, offsets)
    return out


# --- contacts and statistics ---------------------------------------------------------------------
def in_range_seconds(xy: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Every (second, pair key ``i * N + j``) with the two closer than ``radius`` (i < j)."""
    n = xy.shape[1]
    secs, keys = [], []
    for s in range(len(xy)):
        p = cKDTree(xy[s]).query_pairs(r=radius, output_type="ndarray")
        if len(p):
            d = np.hypot(*(xy[s, p[:, 0]] - xy[s, p[:, 1]]).T)
            p = p[d < radius]  # the authors' strict test
            lo, hi = p.min(axis=1), p.max(axis=1)
            keys.append(lo.astype(np.int64) * n + hi)
            secs.append(np.full(len(p), s))
    if not keys:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(secs), np.concatenate(keys)


def epoch_pairs(xy: np.ndarray, radius: float, contact: str, *, seed: int) -> list[np.ndarray]:
    """Each epoch's pairs in the order they first met (the order the cache maths replays).

    ``seconds``: first 1 s position within range, ties in a random order (the authors
    shuffle each second's pairs); ``chords``: :func:`mobidfl.model.contacts.contact_times` on the
    epoch's 1 s positions, the previous epoch's last position first (as the model does).
    """
    from mobidfl.model.contacts import contact_times

    n = xy.shape[1]
    rng = np.random.default_rng(seed)
    out = []
    if contact == "seconds":
        secs, keys = in_range_seconds(xy, radius)
        for r in range(ROUNDS):
            sel = (secs >= r * EPOCH) & (secs < (r + 1) * EPOCH)
            k, s = keys[sel], secs[sel]
            tie = rng.random(len(k))
            order = np.lexsort((tie, s))
            k = k[order]
            _, first = np.unique(k, return_index=True)
            k = k[np.sort(first)]
            out.append(np.stack([k // n, k % n], axis=1))
        return out
    for r in range(ROUNDS):
        lo = max(0, r * EPOCH - 1)
        traj = xy[lo:(r + 1) * EPOCH]
        pairs, times = contact_times(traj, radius_m=radius)
        out.append(pairs[np.argsort(times, kind="stable")])
    return out


def epoch_statistics(per_round: list[np.ndarray], n: int = NUM_CAR) -> dict[str, object]:
    """Statistics of the epochs' distinct pairs (module docstring)."""
    sets = [{(int(a), int(b)) if a < b else (int(b), int(a)) for a, b in e.tolist()}
            for e in per_round]
    shares = []
    for r in range(BURN_IN, len(sets)):
        if sets[r]:
            before = set().union(*sets[max(0, r - TAU):r])
            shares.append(len(sets[r] & before) / len(sets[r]))
    early, late = set().union(*sets[:BURN_IN]), set().union(*sets[BURN_IN:])
    last: dict[tuple[int, int], int] = {}
    gaps, meetings = [], 0
    for r, now in enumerate(sets):
        for p in now:
            if p in last:
                gaps.append(r - last[p])
            last[p] = r
        meetings += len(now) if r else 0
    gaps_a = np.asarray(gaps)
    bins = np.histogram(gaps_a, bins=[*GAP_BINS, ROUNDS + 1])[0] if len(gaps_a) else [0] * 5
    table = mobidfl_table2(per_round, tau=TAU, passes=LOCAL_EP, num_car=n)
    return {
        "partners_per_epoch": float(np.mean([2 * len(s) / n for s in sets])),
        "remeet_share": float(np.mean(shares)),
        "earlier_met_again": len(early & late) / max(len(early), 1),
        "gap_epochs_median": float(np.median(gaps_a)) if len(gaps_a) else math.nan,
        "gap_epochs_bins": [int(b) / max(len(gaps_a), 1) for b in bins],
        "repeat_share": len(gaps_a) / max(meetings, 1),
        "count_tau20": float(table[BURN_IN:, 0].mean()),
        "age_tau20": float(table[BURN_IN:, 1].mean()),
    }


def second_statistics(xy: np.ndarray, radius: float, ground: np.ndarray) -> dict[str, float]:
    """Contact durations and gaps (s) from 1 s positions, and how far cars get in 20 epochs."""
    secs, keys = in_range_seconds(xy, radius)
    order = np.lexsort((secs, keys))
    secs, keys = secs[order], keys[order]
    new_run = np.ones(len(keys), bool)
    new_run[1:] = (keys[1:] != keys[:-1]) | (secs[1:] != secs[:-1] + 1)
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(keys)) - 1
    durations = secs[ends] - secs[starts] + 1
    same = keys[starts[1:]] == keys[ends[:-1]]
    gaps = (secs[starts[1:]] - secs[ends[:-1]] - 1)[same]
    span = TAU * EPOCH
    moved = np.hypot(*(ground[span::EPOCH] - ground[:-span:EPOCH]).transpose(2, 0, 1))
    return {
        "contact_s_median": float(np.median(durations)),
        "contact_s_mean": float(durations.mean()),
        "gap_s_median": float(np.median(gaps)) if len(gaps) else math.nan,
        "gap_s_q25": float(np.percentile(gaps, 25)) if len(gaps) else math.nan,
        "gap_s_q75": float(np.percentile(gaps, 75)) if len(gaps) else math.nan,
        "gaps_within_epoch": float(np.mean(gaps < EPOCH)) if len(gaps) else math.nan,
        "moved_20_epochs_km": float(moved.mean() / 1000),
    }


def turn_tables_differ(net) -> float:
    """Share of the roads into an intersection with a choice (two or more roads on) whose
    next-road probabilities differ between the two turn rules (by more than 1e-9)."""
    a = net.turn_table((0.5, 0.25, 0.25), rule="classes")
    b = net.turn_table((0.5, 0.25, 0.25), rule="straightest")
    sizes = np.diff(a.ptr)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    differ = np.bincount(owner, weights=np.abs(a.prob - b.prob) > 1e-9, minlength=len(sizes))
    choice = sizes >= 2
    return float((differ[choice] > 0).mean())


# --- the rows ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One line of the table: a source and how its cars moved."""

    key: str
    label: str
    mobility: Mobility | None = None  # None: the authors' code or MobiDFL's model


def rows() -> list[Row]:
    """The authors' code, MobiDFL's model, its mobility, each change alone, all together."""
    out = [Row("authors", "the authors' code (road_sim.py, degrees)"),
           Row("model", "MobiDFL's model (preset cached_dfl_003)"),
           Row("mobidfl", "MobiDFL's mobility, 1 s positions", Mobility())]
    for field_name, text in CHANGES:
        out.append(Row(f"+{field_name}", text,
                       replace(Mobility(), **{field_name: getattr(AUTHORS_CHOICES, field_name)})))
    out.append(Row("all", "all five of the authors' choices", AUTHORS_CHOICES))
    out.append(Row("all-turn", "all but the turn rule",
                   replace(AUTHORS_CHOICES, turn="classes")))
    out.append(Row("model-straightest", "MobiDFL's model, manhattan.turn_rule = straightest"))
    return out


def model_pairs(*, seed: int, overrides: dict | None = None) -> list[np.ndarray]:
    """MobiDFL's model (learning off) per epoch, first-contact order."""
    from mobidfl.model.world import MobiDFLModel

    m = MobiDFLModel(preset="cached_dfl_003", learning=False, map="manhattan_cdfl",
                     step_s=float(EPOCH), steps=ROUNDS, seed=seed, vehicles=NUM_CAR,
                     **(overrides or {}))
    m.track_encounters = True
    out = []
    for _ in range(ROUNDS):
        m.step()
        pairs, times = m.encounters
        out.append(np.asarray(pairs, np.int64).reshape(-1, 2)[np.argsort(times, kind="stable")])
    return out


def measure_row(row: Row, k: int, nets: dict) -> dict[str, object]:
    """One row's statistics on seed ``k`` (the authors' seed is ``PAPER_SEED + k``)."""
    if row.key == "authors":
        path = authors_run(seed=PAPER_SEED + k)
        with np.load(path) as z:
            xy = z["xy"]
        second, pairs = load_pairs(path)
        per_round = rounds_of(second, pairs, epoch_time=EPOCH, rounds=ROUNDS)
        radius = RADIUS_M * DEG_PER_M
        mine = epoch_pairs(xy, radius, "seconds", seed=k)
        same = all({tuple(p) for p in a.tolist()} == {tuple(p) for p in b.tolist()}
                   for a, b in zip(per_round, mine, strict=True))
        if not same:
            raise RuntimeError("1 s positions do not give the authors' own pair list")
        return {**epoch_statistics(per_round),
                **second_statistics(xy, radius, _degrees_to_ground(xy))}
    if row.key.startswith("model"):
        over = {"manhattan.turn_rule": "straightest"} if row.key == "model-straightest" else {}
        return epoch_statistics(model_pairs(seed=k, overrides=over))
    mob = row.mobility
    net = nets[mob.plane]
    speed, radius = ((GROUND_SPEED, GROUND_RANGE) if mob.plane == "metres"
                     else (SPEED, float(RADIUS_M)))
    xy = simulate(net, mob, speed=speed, seed=k)
    per_round = epoch_pairs(xy, radius, mob.contact, seed=k)
    ground = _plane_to_ground(xy, mob.plane, nets["centre"])
    return {**epoch_statistics(per_round), **second_statistics(xy, radius, ground)}


def measure(*, seeds: int, only: set[str] | None = None, previous: dict | None = None) -> dict:
    """Every row on seeds ``0..seeds-1`` (JSON-ready); rows in ``previous`` are kept."""
    if seeds < 3:
        raise ConfigError("--seeds", seeds, "an integer >= 3 (a seed spread)")
    nets = _networks()
    out = {"seeds": seeds, "epoch_s": EPOCH, "rounds": ROUNDS, "tau": TAU, "burn_in": BURN_IN,
           "cars": NUM_CAR, "turn_tables_differ": turn_tables_differ(nets["metres"]),
           "rows": []}
    kept = {r["key"]: r for r in (previous or {}).get("rows", [])}
    for row in rows():
        if (only is not None and row.key not in only) and row.key in kept:
            out["rows"].append(kept[row.key])
            continue
        t0, c0, w0 = time.process_time(), _children_cpu(), time.perf_counter()
        per_seed = [measure_row(row, k, nets) for k in range(seeds)]
        rec = {"key": row.key, "label": row.label,
               "mobility": None if row.mobility is None else asdict(row.mobility),
               "cpu_s": round(time.process_time() - t0 + _children_cpu() - c0, 1),
               "wall_s": round(time.perf_counter() - w0, 1),
               "values": {q: [s.get(q) for s in per_seed] for q in per_seed[0]}}
        if row.key == "authors":
            rec["authors_runs"] = {str(PAPER_SEED + k): authors_cost(seed=PAPER_SEED + k)
                                   for k in range(seeds)}
        out["rows"].append(rec)
        print(f"{row.key}: {rec['cpu_s']} s cpu; remeet "
              f"{np.mean(rec['values']['remeet_share']):.3f}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=DATA)
    ap.add_argument("--rows", default="", help="comma-separated row keys to (re)measure")
    ap.add_argument("--page", action="store_true",
                    help="only rewrite docs/validation's generated block from the data")
    args = ap.parse_args(argv)
    path = args.out / "remeet.json"
    if args.page:
        if not path.is_file():
            print(f"cdfl_remeet: no data at {path}: run without --page first", file=sys.stderr)
            return 2
        write_page(json.loads(path.read_text()))
        return 0
    if args.seeds < 3:
        print(f"cdfl_remeet: --seeds {args.seeds}: need 3 or more (a seed spread)",
              file=sys.stderr)
        return 2
    previous = json.loads(path.read_text()) if path.is_file() else None
    only = {k for k in args.rows.split(",") if k} or None
    load0 = os.getloadavg()[0]
    data = measure(seeds=args.seeds, only=only, previous=previous)
    data["cpu_model"] = _cpu_model()
    data["load_average"] = [round(load0, 1), round(os.getloadavg()[0], 1)]
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"



# --- the page ------------------------------------------------------------------------------------
PAGE = Path(__file__).resolve().parents[1] / "docs" / "validation" / "index.md"
START = ("<!-- cdfl-remeet:start (generated by `python -m validation.cdfl_remeet --page`; "
         "do not edit) -->")
END = "<!-- cdfl-remeet:end -->"


def _v(data: dict, key: str, q: str) -> np.ndarray:
    row = next(r for r in data["rows"] if r["key"] == key)
    return np.asarray(row["values"][q], float)


def _ms(v: np.ndarray, scale: float = 1.0, digits: int = 1) -> str:
    return f"{v.mean() * scale:.{digits}f} ± {v.std(ddof=1) * scale:.{digits}f}"


def within_spread(a: np.ndarray, b: np.ndarray) -> bool:
    """The suite's rule (validation/cached_dfl.py): |mean difference| <= 2 s.e. of it."""
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return abs(a.mean() - b.mean()) <= 2 * se


def page_block(data: dict) -> str:
    """The generated part of docs/validation: the table and the sentences with numbers."""
    lines = [
        "| mobility | partners per car per epoch | pairs met in the 20 epochs before (%) "
        "| partners of epochs 0-19 met in 20-39 (%) | gap since last meeting, epochs: "
        "median; 1 / 2-4 / 5-10 / 11-20 (%) | contact (s) | gap between contacts (s), median "
        "| moved in 20 epochs (km) | tau_max 20 count | share and count beside the authors' |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ref_share = _v(data, "authors", "remeet_share")
    ref_count = _v(data, "authors", "count_tau20")
    for row in data["rows"]:
        k = row["key"]
        vals = row["values"]
        bins = np.asarray(vals["gap_epochs_bins"], float).mean(axis=0) * 100
        seconds = "contact_s_mean" in vals
        share, count = _v(data, k, "remeet_share"), _v(data, k, "count_tau20")
        verdict = "" if k == "authors" else " / ".join(
            "within 2 s.e." if within_spread(ref, got) else "differs"
            for ref, got in ((ref_share, share), (ref_count, count)))
        cells = [
            row["label"],
            _ms(_v(data, k, "partners_per_epoch"), digits=3),
            _ms(share, 100),
            _ms(_v(data, k, "earlier_met_again"), 100),
            f"{np.median(_v(data, k, 'gap_epochs_median')):g}; "
            + " / ".join(f"{b:.0f}" for b in bins[:4]),
            _ms(_v(data, k, "contact_s_mean")) if seconds else "n/a",
            _ms(_v(data, k, "gap_s_median"), digits=0) if seconds else "n/a",
            _ms(_v(data, k, "moved_20_epochs_km"), digits=2) if seconds else "n/a",
            _ms(count),
            verdict,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    n = data["seeds"]

    def mean(key: str, q: str, scale: float = 1.0) -> float:
        return float(_v(data, key, q).mean() * scale)

    def verdict(key: str, q: str) -> str:
        ok = within_spread(_v(data, "authors", q), _v(data, key, q))
        return "within 2 s.e." if ok else "differs"

    base = mean("mobidfl", "remeet_share", 100)
    effects = ", ".join(
        f"{f} {mean('+' + f, 'remeet_share', 100) - base:+.1f}" for f, _ in CHANGES)
    cpu = sum(r["cpu_s"] for r in data["rows"])
    runs = next(r for r in data["rows"] if r["key"] == "authors").get("authors_runs", {})
    made = {s: c for s, c in runs.items() if c}
    cached = [s for s, c in runs.items() if not c]
    cost = "; ".join(f"seed {s}: {c['wall_s']:.0f} s wall, {c['cpu_s']:.0f} s CPU"
                     for s, c in made.items())
    lines += [
        "",
        f"Mean ± s.d. over {n} seeds (the authors' seeds {PAPER_SEED}-{PAPER_SEED + n - 1}, "
        f"MobiDFL's 0-{n - 1}) of each seed's statistic over {data['rounds']} epochs of "
        f"{data['epoch_s']} s with {data['cars']} cars. The shares of pairs are over epochs "
        f"{data['burn_in']}-{data['rounds'] - 1}, and so is the count: Table 2's (unlimited "
        "cache, 10 passes). Gap since last meeting: a pair's meetings after its first, by "
        "epochs since the previous one (the median over seeds of each seed's median, and "
        "each seed's shares averaged over seeds). Verdicts use the suite's rule: a mean difference "
        "within 2 standard errors of it. The columns in seconds come from positions every "
        "second (distance < range), which MobiDFL's model does not keep (n/a). "
        f"CPU: {cpu:.0f} s for the table ({data['cpu_model']}, shared, load average "
        f"{data['load_average'][0]}-{data['load_average'][1]} at its end). That includes "
        f"the authors' loop run afresh ({cost}); "
        f"the other {len(cached)} seeds' position logs came from the cache.",
        "",
        f"* Against MobiDFL's mobility ({base:.1f} %), the authors' code re-meets "
        f"{mean('authors', 'remeet_share', 100) - base:+.1f} points. Each of the authors' "
        f"choices alone gives: {effects} points. All five together give "
        f"{mean('all', 'remeet_share', 100) - base:+.1f}.",
        f"* The turn rule alone changes three things. The median gap between two contacts of "
        f"a pair goes from {mean('mobidfl', 'gap_s_median'):.0f} s to "
        f"{mean('+turn', 'gap_s_median'):.0f} s (authors "
        f"{mean('authors', 'gap_s_median'):.0f} s). The distance moved in 20 epochs goes from "
        f"{mean('mobidfl', 'moved_20_epochs_km'):.2f} km to "
        f"{mean('+turn', 'moved_20_epochs_km'):.2f} km (authors "
        f"{mean('authors', 'moved_20_epochs_km'):.2f} km). The count goes from "
        f"{mean('mobidfl', 'count_tau20'):.1f} to {mean('+turn', 'count_tau20'):.1f} "
        f"(authors {mean('authors', 'count_tau20'):.1f}). All but the turn rule gives "
        f"{mean('all-turn', 'gap_s_median'):.0f} s ({verdict('all-turn', 'gap_s_median')}) "
        f"and {mean('all-turn', 'count_tau20'):.1f} "
        f"({verdict('all-turn', 'count_tau20')}).",
        f"* The two rules give different next-road probabilities on "
        f"{data['turn_tables_differ'] * 100:.1f} % of the roads into an intersection that "
        "offers a choice.",
        f"* The tau_max 20 count of MobiDFL's model over the authors' code's: "
        f"x{mean('model', 'count_tau20') / mean('authors', 'count_tau20'):.2f} with turn "
        f"classes ({verdict('model', 'count_tau20')}), "
        f"x{mean('model-straightest', 'count_tau20') / mean('authors', 'count_tau20'):.2f} "
        f"with `manhattan.turn_rule = straightest` "
        f"({verdict('model-straightest', 'count_tau20')}).",
    ]
    return "\n".join(lines)


def write_page(data: dict, page: Path = PAGE) -> None:
    """Replace the generated block of ``page`` with :func:`page_block` of ``data``."""
    text = page.read_text()
    head, sep, rest = text.partition(START)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ConfigError("page", str(page), f"the markers {START} ... {END}")
    write_text_atomic(page, head + START + "\n" + page_block(data) + "\n" + END + tail)


if __name__ == "__main__":
    raise SystemExit(main())
