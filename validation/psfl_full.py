"""PSFL's areas x threshold grid beside its first author's code, and the 9-area sigma 20 study.

Two runs of :func:`validation.psfl.whole_runs` (the reference, unmodified, and MobiDFL's
``psfl`` policy on the same lattice, data and initial model), each resumable run by run:

* ``sweep``: the grid of the paper's Fig. 5 (3 / 5 / 9 areas x sigma 20 / 40 / 80), seed by
  seed, MobiDFL under its reading of record (``alg1``);
* ``mechanism``: 9 areas, sigma 20, MobiDFL under the reading of record and under each
  controlled change of :data:`validation.psfl.READINGS`, one at a time, to find why MobiDFL
  keeps two federations where the reference keeps one.

``publish`` turns a run folder into small CSV files (per run, per tick, per area);
``page`` writes the tables of ``docs/validation/psfl.md`` from those files alone, between
``<!-- psfl:NAME:begin -->`` and ``<!-- psfl:NAME:end -->``. The Fig. 5 verdict rules
(:data:`FIG5_CLAIMS`) were written down before any full-size result was looked at.

    python -m validation.psfl_full sweep --size full --seeds 3 --out results/psfl_full
    python -m validation.psfl_full sweep --size full --seeds 1 --cells 5:40,3:40 --out ...
    python -m validation.psfl_full mechanism --size small --seeds 3 --out results/psfl_mech
    python -m validation.psfl_full publish --run results/psfl_full --name full \\
        --to published/validation/psfl
    python -m validation.psfl_full page --data published/validation/psfl \\
        --page docs/validation/psfl.md
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from mobidfl.atomic import write_csv, write_text_atomic
from mobidfl.errors import ConfigError

TAIL = 20
"""Ticks averaged at the end of a run (the last quarter of the reference's 80)."""
TICKS_SHOWN = (0, 1, 2, 3, 5, 10, 20, 40, 60, 79)
MECH_CELL = (9, 20.0)
"""The cell where the sides disagreed at ``small`` (docs/validation/psfl.md)."""

FIG5_CLAIMS: dict[str, str] = {
    "lower sigma, more federations": "for every number of areas, |F|(sigma 20) >= |F|(40) >= "
    "|F|(80) and |F|(20) > |F|(80) (Sec. V: 'A lower threshold increases the number of "
    "federations')",
    "federations follow areas at sigma 20": "at sigma 20, |F| >= the number of areas - 0.5 for "
    "3, 5 and 9 areas: no federation spans two areas on average (Fig. 4, Fig. 7: '|F| returns "
    "to the optimal count of nine')",
    "sigma 80 merges areas at 9 areas": "at 9 areas, |F|(sigma 80) < 9 (Sec. V: 'federations, "
    "with a very large error, manage to incorporate others', 'more pronounced with ... 9')",
    "better with a lower sigma": "for every number of areas, validation accuracy (last 20 "
    "ticks) at sigma 20 >= at sigma 80 (Fig. 5 caption: 'PSFL better performs with ... a "
    "lower loss threshold')",
}
"""Fig. 5's claims as checks on |F| (leaders, mean of the last :data:`TAIL` ticks, mean over
seeds) and accuracy; each side (reference, MobiDFL) is judged on each."""


# --- running ------------------------------------------------------------------------------
def _run(size: str, seeds: int, out: Path, *, cells: list[tuple[int, float]],
         readings: tuple[str, ...]) -> list[dict]:
    import torch

    from validation import psfl

    if psfl.find_python313() is None:
        raise ConfigError("psfl reference", "no Python 3.13", "python3.13 (pyenv) or "
                          "$MOBIDFL_PYTHON313")
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    ds = psfl._images(size)
    data = out / "data.npz"
    if not data.is_file():
        psfl._export(ds, data)
    return psfl.whole_runs(ds, data, out, seeds=seeds, cells=cells, readings=readings)


SWEEP_CELLS: tuple[tuple[int, float], ...] = tuple(
    (a, th) for th in (20.0, 80.0, 40.0) for a in (9, 3, 5))
"""The grid in the order it runs: sigma 20, then 80, then 40 (9 areas first in each), so a
sweep stopped early still has the cells three of the four :data:`FIG5_CLAIMS` read."""


def parse_cells(text: str) -> list[tuple[int, float]]:
    """``"9:20,3:80"`` -> [(9, 20.0), (3, 80.0)]: cells of the grid, refused in one line."""
    cells = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        a, _, s = part.partition(":")
        try:
            cell = (int(a), float(s))
        except ValueError:
            cell = None
        if cell not in SWEEP_CELLS:
            raise ConfigError("--cells", part, "AREAS:SIGMA with areas 3, 5 or 9 and sigma 20, "
                              "40 or 80, comma-separated")
        cells.append(cell)
    if not cells:
        raise ConfigError("--cells", text, "one or more AREAS:SIGMA")
    return cells


def sweep(size: str, seeds: int, out: Path, *,
          cells: list[tuple[int, float]] | None = None) -> list[dict]:
    """The Fig. 5 grid (or ``cells`` of it), seed 0 of every cell first; MobiDFL under its
    reading of record. Two sweeps may share ``out`` with different ``cells``."""
    return _run(size, seeds, out, cells=list(cells or SWEEP_CELLS), readings=("alg1",))


def mechanism(size: str, seeds: int, out: Path, *, cells: list[tuple[int, float]] | None = None,
              readings: tuple[str, ...] | None = None) -> list[dict]:
    """9 areas, sigma 20 (or ``cells``): the reading of record and each controlled change
    (or ``readings``), one at a time."""
    from validation.psfl import READINGS

    return _run(size, seeds, out, cells=list(cells or [MECH_CELL]),
                readings=tuple(readings or READINGS))


def parse_readings(text: str) -> tuple[str, ...]:
    """``"alg1,broadcast"`` -> readings of :data:`validation.psfl.READINGS`, refused in one
    line."""
    from validation.psfl import READINGS

    got = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in got if r not in READINGS]
    if bad or not got:
        raise ConfigError("--readings", bad[0] if bad else text, "one or more of "
                          + ", ".join(READINGS))
    return got


# --- publishing ---------------------------------------------------------------------------
def _run_file(path: Path, keys: tuple[str, ...]) -> dict:
    """One finished run's JSON, read whole: a cut, corrupt or foreign file is refused in one
    line naming it (a killed sweep leaves no half file, but a copied folder may hold one)."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict) or any(k not in data for k in keys):
        raise ConfigError("run file", str(path), "a whole run written by the sweep (JSON with "
                          + ", ".join(keys) + "): delete it and run the sweep again")
    return data


def _tag_of(path: Path) -> tuple[int, int, float]:
    m = re.search(r"seed-(\d+)_regions-(\d+)_threshold-(\d+(?:\.\d+)?)", path.name)
    if m is None:
        raise ConfigError("run file", path.name, "run-seed-S_regions-A_threshold-T.json")
    return int(m[1]), int(m[2]), float(m[3])


def _area_means(values: np.ndarray, area: np.ndarray, n_areas: int) -> list[float]:
    return [float(np.nanmean(values[area == a])) for a in range(n_areas)]


def tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """``runs`` (one row per run and side), ``ticks`` (per tick) and ``areas`` (per area) from
    a run folder of :func:`validation.psfl.whole_runs` (finished runs only)."""

    runs, ticks, areas = [], [], []
    for path in sorted((run_dir / "reference-runs").glob("run-*.json")):
        seed, n_areas, sigma = _tag_of(path)
        ref = _run_file(path, ("area", "ticks", "federations_csv", "test_acc"))
        area = np.asarray(ref["area"], np.int64)
        key = {"seed": seed, "areas": n_areas, "sigma": sigma}
        node_acc = np.array([t["val_acc"] for t in ref["ticks"]], float)  # ticks x nodes
        sides = [("reference", "code", {
            "federations": np.asarray(ref["federations_csv"], float),
            "val_acc": np.nanmean(node_acc, 1),
            "val_acc_area": np.array([_area_means(r, area, n_areas) for r in node_acc]),
            "test_acc": np.asarray(ref["test_acc"], float),
            "ds_intra": None, "ds_inter": None,
            "wall_s": ref.get("wall_s", np.nan), "cpu_s": ref.get("cpu_s", np.nan),
        })]
        for ours in sorted((run_dir / "mobidfl-runs").glob(f"*-{path.name[4:]}")):
            got = _run_file(ours, ("reading", "leaders", "val_acc", "val_acc_area", "test_acc",
                                   "ds_intra", "ds_inter", "wall_s", "cpu_s"))
            sides.append(("mobidfl", got["reading"], {
                "federations": np.asarray(got["leaders"], float),
                "val_acc": np.asarray(got["val_acc"], float),
                "val_acc_area": np.asarray(got["val_acc_area"], float),
                "test_acc": np.asarray(got["test_acc"], float),
                "ds_intra": np.asarray(got["ds_intra"], float),
                "ds_inter": np.asarray(got["ds_inter"], float),
                "wall_s": got["wall_s"], "cpu_s": got["cpu_s"],
            }))
        for side, reading, v in sides:
            t = v["federations"].size
            tail = slice(max(0, t - TAIL), t)
            runs.append({
                "side": side, "reading": reading, **key, "ticks": t,
                "federations_tail": float(v["federations"][tail].mean()),
                "federations_final": float(v["federations"][-1]),
                "val_acc_tail": float(v["val_acc"][tail].mean()),
                "test_acc": float(v["test_acc"].mean()),
                "ds_intra_tail": np.nan if v["ds_intra"] is None
                else float(v["ds_intra"][tail].mean()),
                "ds_inter_tail": np.nan if v["ds_inter"] is None
                else float(np.nanmean(v["ds_inter"][tail])),
                "wall_s": float(v["wall_s"]), "cpu_s": float(v["cpu_s"]),
            })
            for k in range(t):
                ticks.append({
                    "side": side, "reading": reading, **key, "tick": k,
                    "federations": float(v["federations"][k]),
                    "val_acc": float(v["val_acc"][k]),
                    "ds_intra": np.nan if v["ds_intra"] is None else float(v["ds_intra"][k]),
                    "ds_inter": np.nan if v["ds_inter"] is None else float(v["ds_inter"][k]),
                })
            test_area = _area_means(v["test_acc"], area, n_areas)
            for a in range(n_areas):
                areas.append({
                    "side": side, "reading": reading, **key, "area": a,
                    "nodes": int((area == a).sum()),
                    "val_acc_tail": float(np.nanmean(v["val_acc_area"][tail, a])),
                    "test_acc": test_area[a],
                })
    if not runs:
        raise ConfigError("--run", str(run_dir), "a folder with reference-runs/run-*.json")
    return {"runs": pd.DataFrame(runs), "ticks": pd.DataFrame(ticks),
            "areas": pd.DataFrame(areas)}


def publish(run_dir: Path, name: str, to: Path) -> list[Path]:
    """Write ``<name>_runs.csv``, ``<name>_ticks.csv``, ``<name>_areas.csv`` under ``to``."""
    got = tables(run_dir)
    to.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind, df in got.items():
        path = to / f"{name}_{kind}.csv"
        write_csv(df.round(5), path, index=False)
        paths.append(path)
    return paths


# --- the page -----------------------------------------------------------------------------
def _load(data: Path, name: str) -> dict[str, pd.DataFrame]:
    return {k: pd.read_csv(data / f"{name}_{k}.csv") for k in ("runs", "ticks", "areas")}


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a bare ``|`` would end the cell)."""
    return text.replace("|", "\\|")


def _ms(values: pd.Series, digits: int) -> str:
    v = values.to_numpy(float)
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return f"{v.mean():.{digits}f} ± {sd:.{digits}f}"


def _cells(runs: pd.DataFrame) -> list[tuple[int, float]]:
    return sorted({(int(a), float(s)) for a, s in zip(runs["areas"], runs["sigma"],
                                                      strict=True)})


def _side(df: pd.DataFrame, side: str, reading: str | None = None) -> pd.DataFrame:
    out = df[df["side"] == side]
    return out if reading is None else out[out["reading"] == reading]


def fig5_verdicts(runs: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """(claim, rule, reference, MobiDFL) with ``holds`` / ``fails`` / ``not run`` and the
    numbers the rule read."""
    out = []
    for claim, rule in FIG5_CLAIMS.items():
        got = []
        for side, reading in (("reference", "code"), ("mobidfl", "alg1")):
            r = _side(runs, side, reading)
            fed = r.groupby(["areas", "sigma"])["federations_tail"].mean()
            acc = r.groupby(["areas", "sigma"])["val_acc_tail"].mean()

            def f(a: int, s: float, table: pd.Series = fed) -> float:
                return float(table.get((a, s), np.nan))

            if claim == "lower sigma, more federations":
                vals = {a: (f(a, 20.0), f(a, 40.0), f(a, 80.0)) for a in (3, 5, 9)}
                ok = [x[0] >= x[1] >= x[2] and x[0] > x[2] for x in vals.values()]
                shown = "; ".join(f"{a}: {x[0]:.2f} / {x[1]:.2f} / {x[2]:.2f}"
                                  for a, x in vals.items())
            elif claim == "federations follow areas at sigma 20":
                vals = {a: f(a, 20.0) for a in (3, 5, 9)}
                ok = [v >= a - 0.5 for a, v in vals.items()]
                shown = "; ".join(f"{a} areas: {v:.2f}" for a, v in vals.items())
            elif claim == "sigma 80 merges areas at 9 areas":
                vals = {9: f(9, 80.0)}
                ok = [vals[9] < 9]
                shown = f"9 areas, sigma 80: {vals[9]:.2f}"
            else:
                vals = {a: (f(a, 20.0, acc), f(a, 80.0, acc)) for a in (3, 5, 9)}
                ok = [x[0] >= x[1] for x in vals.values()]
                shown = "; ".join(f"{a}: {x[0]:.3f} vs {x[1]:.3f}" for a, x in vals.items())
            flat = np.asarray([v for x in vals.values() for v in np.atleast_1d(x)], float)
            verdict = "not run" if np.isnan(flat).any() else ("holds" if all(ok) else "fails")
            got.append(f"**{verdict}** ({shown})")
        out.append((claim, rule, got[0], got[1]))
    return out


def render_full(data: Path) -> str:
    """The full-size tables: per cell, per tick, per area, and the Fig. 5 verdicts."""
    d = _load(data, "full")
    runs, ticks, areas = d["runs"], d["ticks"], d["areas"]
    ref, ours = _side(runs, "reference"), _side(runs, "mobidfl", "alg1")
    lines = [
        f"| areas | sigma | seeds | federations, last {TAIL} ticks: reference | MobiDFL | "
        f"validation accuracy, last {TAIL}: reference | MobiDFL | test accuracy: reference "
        "| MobiDFL | agree (federations within max(1, 2 x seed spread)) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a, s in _cells(runs):
        r = ref[(ref["areas"] == a) & (ref["sigma"] == s)]
        o = ours[(ours["areas"] == a) & (ours["sigma"] == s)]
        both = sorted(set(r["seed"]) & set(o["seed"]))
        r, o = r[r["seed"].isin(both)], o[o["seed"].isin(both)]
        if not both:
            continue
        sd = np.hypot(r["federations_tail"].std(ddof=1) if len(both) > 1 else 0.0,
                      o["federations_tail"].std(ddof=1) if len(both) > 1 else 0.0)
        gap = abs(r["federations_tail"].mean() - o["federations_tail"].mean())
        lines.append(
            f"| {a} | {s:g} | {len(both)} | {_ms(r['federations_tail'], 2)} | "
            f"{_ms(o['federations_tail'], 2)} | {_ms(r['val_acc_tail'], 3)} | "
            f"{_ms(o['val_acc_tail'], 3)} | {_ms(r['test_acc'], 3)} | {_ms(o['test_acc'], 3)} | "
            f"{'yes' if gap <= max(1.0, 2 * sd) else 'no'} ({gap:.2f}) |")
    lines += ["", "Federations (leaders) over ticks, mean over the seeds run:", "",
              "| areas | sigma | side | " + " | ".join(f"t {t}" for t in TICKS_SHOWN) + " |",
              "|---|---|---|" + "---|" * len(TICKS_SHOWN)]
    for a, s in _cells(runs):
        for side, reading, label in (("reference", "code", "reference"),
                                     ("mobidfl", "alg1", "MobiDFL")):
            t = _side(ticks, side, reading)
            t = t[(t["areas"] == a) & (t["sigma"] == s)]
            mean = t.groupby("tick")["federations"].mean()
            lines.append(f"| {a} | {s:g} | {label} | " + " | ".join(
                f"{mean.get(k, np.nan):.1f}" for k in TICKS_SHOWN) + " |")
    lines += ["", "Accuracy per area (test accuracy of each area's nodes on their own test "
              "subsets, mean over the seeds run; `val` = validation accuracy over the last "
              f"{TAIL} ticks) beside the overall mean:", "",
              "| areas | sigma | side | overall test | per area, test | per area, val |",
              "|---|---|---|---|---|---|"]
    for a, s in _cells(runs):
        for side, reading, label in (("reference", "code", "reference"),
                                     ("mobidfl", "alg1", "MobiDFL")):
            x = _side(areas, side, reading)
            x = x[(x["areas"] == a) & (x["sigma"] == s)]
            per = x.groupby("area")[["test_acc", "val_acc_tail"]].mean()
            overall = _side(runs, side, reading)
            overall = overall[(overall["areas"] == a) & (overall["sigma"] == s)]["test_acc"]
            lines.append(
                f"| {a} | {s:g} | {label} | {overall.mean():.3f} | "
                + " / ".join(f"{v:.2f}" for v in per["test_acc"]) + " | "
                + " / ".join(f"{v:.2f}" for v in per["val_acc_tail"]) + " |")
    lines += ["", "Fig. 5's claims, judged on each side (rules written before the runs; "
              f"\\|F\\| = mean leaders over the last {TAIL} ticks, mean over seeds; `a: x / y / z` "
              "= sigma 20 / 40 / 80 at a areas):", "",
              "| claim | rule | reference | MobiDFL |", "|---|---|---|---|"]
    for claim, rule, r, o in fig5_verdicts(runs):
        lines.append(f"| {claim} | {_cell(rule)} | {_cell(r)} | {_cell(o)} |")
    wall = runs.groupby("side")[["wall_s", "cpu_s"]].agg(["sum", "median"])
    lines += ["", "Cost of the runs in `full_runs.csv` (MobiDFL: every reading run): " + "; ".join(
        f"{side}: {len(_side(runs, side))} runs, {wall.loc[side, ('wall_s', 'sum')] / 60:.0f} min "
        f"wall, {wall.loc[side, ('cpu_s', 'sum')] / 60:.0f} min CPU (median "
        f"{wall.loc[side, ('wall_s', 'median')]:.0f} s wall per run)"
        for side in ("reference", "mobidfl") if side in wall.index) + "."]
    return "\n".join(lines)


def render_mechanism(data: Path, name: str = "mechanism", *, every_cell: bool = False) -> str:
    """Per cell where MobiDFL ran a reading besides its record (``alg1``), or per cell of
    ``every_cell``: the reference and each reading of MobiDFL, one row each, from
    ``<name>_*.csv``. The ds columns say how far a cell is from sigma / 2."""
    from validation.psfl import READINGS

    d = _load(data, name)
    runs, ticks = d["runs"], d["ticks"]
    ours = _side(runs, "mobidfl")
    cells = [c for c in _cells(runs) if every_cell or set(
        ours[(ours["areas"] == c[0]) & (ours["sigma"] == c[1])]["reading"]) - {"alg1"}]
    lines = [f"| areas | sigma | side / reading | what changes | seeds | federations, last {TAIL} "
             f"ticks | final | first tick at the final count (per seed) | ds within areas, last "
             f"{TAIL} | ds across areas, last {TAIL} | validation accuracy, last {TAIL} | "
             "test accuracy |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = [("reference", "code", "the reference (davidedomini/PSFL), unmodified")] + [
        ("mobidfl", k, v) for k, v in READINGS.items()]
    for a, s in cells:
        for side, reading, what in order:
            r = _side(runs, side, reading)
            r = r[(r["areas"] == a) & (r["sigma"] == s)]
            if r.empty:
                continue
            t = _side(ticks, side, reading)
            t = t[(t["areas"] == a) & (t["sigma"] == s)]
            settle = []
            for _seed, g in t.groupby("seed"):
                f = g.sort_values("tick")["federations"].to_numpy()
                changed = np.flatnonzero(f != f[-1])
                settle.append(str(int(changed[-1]) + 1 if changed.size else 0))
            na = "n/a (not recorded)"
            lines.append(
                f"| {a} | {s:g} | {side if side == 'reference' else 'MobiDFL ' + reading} | "
                f"{_cell(what)} | {len(r)} | {_ms(r['federations_tail'], 2)} | "
                f"{_ms(r['federations_final'], 0)} | {', '.join(settle)} | "
                f"{na if r['ds_intra_tail'].isna().all() else _ms(r['ds_intra_tail'], 2)} | "
                f"{na if r['ds_inter_tail'].isna().all() else _ms(r['ds_inter_tail'], 2)} | "
                f"{_ms(r['val_acc_tail'], 3)} | {_ms(r['test_acc'], 3)} |")
    return "\n".join(lines)


PUBLISHED = ("full", "mechanism")
"""The names ``publish`` writes (``<name>_runs.csv``, ``_ticks.csv``, ``_areas.csv``)."""
RENDERERS = {"full": (render_full, "full_runs.csv"),
             "mechanism": (render_mechanism, "mechanism_runs.csv"),
             "full_readings": (lambda data: render_mechanism(data, "full", every_cell=True),
                               "full_runs.csv")}
"""Each page block: its renderer and the file it needs."""


def blocks(data: Path) -> dict[str, str]:
    """Every block whose data are published under ``data``."""
    return {name: fn(data) for name, (fn, marker) in RENDERERS.items()
            if (data / marker).is_file()}


def page_block(text: str, name: str) -> str | None:
    """The text between ``<!-- psfl:NAME:begin ... -->`` and ``<!-- psfl:NAME:end -->``."""
    m = re.search(_block(name), text, re.S)
    return None if m is None else m.group(2).removesuffix("\n")


def _block(name: str) -> str:
    return rf"(<!-- psfl:{name}:begin[^>]*-->\n)((?:.*?\n)?)(<!-- psfl:{name}:end -->)"


def write_page(page: Path, data: Path) -> list[str]:
    """Replace each block of ``page`` by what ``data`` give; returns the names replaced."""
    text = page.read_text(encoding="utf-8")
    done = []
    for name, body in blocks(data).items():
        if page_block(text, name) is None:
            raise ConfigError("--page", str(page), f"a <!-- psfl:{name}:begin --> block")
        text = re.sub(_block(name), lambda m, body=body: m.group(1) + body + "\n" + m.group(3),
                      text, flags=re.S)
        done.append(name)
    write_text_atomic(page, text)
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.psfl_full", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("sweep", "mechanism"):
        q = sub.add_parser(name)
        q.add_argument("--size", default="full" if name == "sweep" else "small")
        q.add_argument("--seeds", type=int, default=3)
        q.add_argument("--out", type=Path, required=True)
        q.add_argument("--cells", default="",
                       help="AREAS:SIGMA,... (default: sweep the whole grid, sigma 20 first; "
                            "mechanism 9:20)")
        if name == "mechanism":
            q.add_argument("--readings", default="", help="READING,... (default: all)")
    q = sub.add_parser("publish")
    q.add_argument("--run", type=Path, required=True)
    q.add_argument("--name", choices=PUBLISHED, required=True)
    q.add_argument("--to", type=Path, required=True)
    q = sub.add_parser("page")
    q.add_argument("--data", type=Path, required=True)
    q.add_argument("--page", type=Path, required=True)
    args = p.parse_args(argv)
    try:
        if args.cmd in ("sweep", "mechanism"):
            from validation.psfl import SIZES

            if args.size not in SIZES:
                raise ConfigError("--size", args.size, "one of " + ", ".join(SIZES))
            if args.seeds < 1:
                raise ConfigError("--seeds", args.seeds, "an integer >= 1")
            out = args.out.expanduser().resolve()
            cells = parse_cells(args.cells) if args.cells else None
            if args.cmd == "sweep":
                got = sweep(args.size, args.seeds, out, cells=cells)
            else:
                readings = parse_readings(args.readings) if args.readings else None
                got = mechanism(args.size, args.seeds, out, cells=cells, readings=readings)
            print(f"{args.cmd}: {len(got)} runs under {args.out}", file=sys.stderr)
        elif args.cmd == "publish":
            for path in publish(args.run, args.name, args.to):
                print(path)
        else:
            print("replaced: " + ", ".join(write_page(args.page, args.data)))
    except ConfigError as exc:
        print(f"psfl_full: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
