"""Whether a paper verdict survives rounding: the same runs under controlled perturbations.

A verdict of ``mobidfl reproduce`` is read from final accuracies. Long full-batch runs at a
large learning rate (DAM/DCM's 1,000 rounds at lr 0.3) grow a difference in the last bit
into points of accuracy, so the same commit gives another verdict on another CPU. This
module re-runs a paper's variants under each perturbation of the run setting ``perturb``
(``init_last_bit``: every initial parameter one unit in the last place up;
``fp64_aggregate``: every aggregation of models summed in float64), reads each claim's
verdict from every arm's ``verdicts.csv`` and marks a claim whose verdict moves as
:data:`CHAOTIC`: its verdict at that scale and those seeds is decided by rounding, not by the
model.

It also says, per claim, how many seeds the runs of record (``published/reproduction``)
would need for the 95 % confidence interval of the mean effect to exclude 0 at their
observed spread (:func:`seeds_for_sign`): the number of seeds a verdict that does not move
with the CPU needs.

``python -m mobidfl.analysis.stability PAPER ... --out OUT`` runs the arms and writes
``OUT/stability.csv``; ``--publish`` also writes it to :data:`STABILITY_CSV`;
``--page [--check]`` rewrites (or checks) the generated tables of
``docs/reproduction/stability.md`` from the published data.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.report import markdown_table
from mobidfl.analysis.reproduce import (
    claim_effects,
    paper_spec,
    reproduce,
    seeds_to_decide,
    variant_slug,
)
from mobidfl.atomic import write_csv, write_text_atomic
from mobidfl.errors import ConfigError

__all__ = [
    "ARMS",
    "CHAOTIC",
    "MAIN_PAPERS",
    "STABILITY_CSV",
    "STABLE",
    "claim_stability",
    "cross_cpu_table",
    "main",
    "merged_rows",
    "published_effects",
    "seeds_for_sign",
    "stability",
    "stability_table",
]

ARMS = ("init_last_bit", "fp64_aggregate")
"""The perturbations each claim is re-run under (values of the run setting ``perturb``)."""
CHAOTIC = "chaotic at this setting"
"""A claim whose verdict differs under at least one perturbation from the unperturbed one."""
STABLE = "stable"
MAIN_PAPERS = ("mobility_000", "dam_001", "mofel_002", "cached_dfl_003", "psfl_004")
"""The five seed papers, in the order the pages list them."""
STABILITY_CSV = Path("published/reproduction/stability.csv")
"""Where ``--publish`` writes the measured table (one row per claim)."""
CROSS_CPU = Path("published/validation/cross_cpu")
"""One JSON record per CPU that ran ``validation/cross_cpu.py``."""
SEEDS_CAP = 100
"""Beyond this many seeds :func:`seeds_for_sign` says ``> SEEDS_CAP``."""
PAGE = Path("docs/reproduction/stability.md")
MARKS = {
    "stability": ("<!-- stability:start -->", "<!-- stability:end -->"),
    "cpus": ("<!-- cross-cpu:start -->", "<!-- cross-cpu:end -->"),
}


def claim_stability(verdict: str, perturbed: Mapping[str, str]) -> str:
    """:data:`STABLE` when every perturbed verdict equals ``verdict``, else :data:`CHAOTIC`."""
    return STABLE if all(v == verdict for v in perturbed.values()) else CHAOTIC


def seeds_for_sign(effects: Sequence[float]) -> str:
    """Seeds for the 95 % CI of the mean effect to exclude 0 at the observed spread.

    ``""`` with fewer than 2 effects or a zero mean (nothing to estimate); ``> cap`` when
    even :data:`SEEDS_CAP` seeds would not do.
    """
    e = np.asarray(effects, dtype=float)
    if e.size < 2 or float(e.mean()) == 0.0:
        return ""
    n = seeds_to_decide(e, most=SEEDS_CAP)  # the reproduction's own rule, capped lower
    return f"> {SEEDS_CAP}" if n is None else str(n)


def published_effects(paper: str, published: Path = Path("published/reproduction")) -> dict:
    """Each claim's per-seed effects in the runs of record of ``paper``.

    The runs of record: ``per_run.csv`` of the paper's published folder and of its
    ``seeds_*`` folders (more seeds at the same settings). Claims whose metric needs the
    per-step rows have no effects here.
    """
    spec = paper_spec(paper)
    folder = published / spec.preset
    frames = [pd.read_csv(f) for f in [folder / "per_run.csv", *sorted(folder.glob(
        "seeds_*/per_run.csv"))] if f.exists()]  # fmt: skip
    if not frames:
        return {}
    per_run = pd.concat(frames, ignore_index=True).drop_duplicates(["variant", "seed"])
    return {c.text: claim_effects(c, per_run) for c in spec.claims}


def stability(
    paper: str,
    *,
    out: Path,
    scale: str = "ci",
    seeds: Sequence[int] = (0, 1, 2),
    arms: Sequence[str] = ARMS,
    claims: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
    processes: int | None = 0,
) -> pd.DataFrame:
    """Run ``paper`` unperturbed and under each of ``arms``; one row per claim.

    ``claims``: only the claims whose text contains one of these (and only the variants
    they compare run); empty: every claim. Each arm is a ``mobidfl reproduce`` folder,
    ``OUT/none`` and ``OUT/<arm>``, so each is a complete, resumable reproduction.
    """
    spec = paper_spec(paper)
    chosen = [c for c in spec.claims if not claims or any(k in c.text for k in claims)]
    if not chosen:
        raise ConfigError("--claims", ",".join(claims), f"text of a claim of {spec.name}")
    variants = sorted({v for c in chosen for v in (c.a, c.b) if v is not None})
    verdicts: dict[str, pd.DataFrame] = {}
    for arm in ("none", *arms):
        folder = out / arm
        reproduce(spec.name, out=folder, scale=scale, seeds=seeds, processes=processes,
                  progress=False, check_first=False, variants=variants,
                  extra={**(extra or {}), "perturb": arm})  # fmt: skip
        verdicts[arm] = pd.read_csv(folder / "verdicts.csv", keep_default_na=False).set_index(
            "claim"
        )
    record = published_effects(spec.name)
    read: dict[tuple[str, str], list[bytes]] = {}

    def losses(arm: str, ran: Sequence[str]) -> list[bytes]:
        """The runs' losses of ``ran`` in ``arm``, each variant's files read once."""
        for v in ran:
            if (arm, v) not in read:
                read[arm, v] = _losses(out / arm, [v])
        return [b for v in ran for b in read[arm, v]]

    rows = []
    for c in chosen:
        base = verdicts["none"].loc[c.text]
        moved = {arm: str(verdicts[arm].loc[c.text, "verdict"]) for arm in arms}
        shifts = [abs(_mean(verdicts[arm].loc[c.text]) - _mean(base)) for arm in arms]
        ran = [v for v in (c.a, c.b) if v is not None]
        changed = [arm for arm in arms if losses("none", ran) != losses(arm, ran)]
        rows.append({
            "paper": spec.name, "claim": c.text, "scale": scale,
            "seeds": " ".join(str(s) for s in seeds),
            "effect (mean ± std)": base["MobiDFL (mean ± std)"],
            "verdict": base["verdict"],
            **{f"verdict {arm}": v for arm, v in moved.items()},
            "largest effect shift": f"{max(shifts):.2f}" if shifts else "",
            "arms that changed the runs": ", ".join(changed) or "none",
            "stability": claim_stability(str(base["verdict"]), moved),
            "seeds for a sign (runs of record)": seeds_for_sign(record.get(c.text, [])),
        })  # fmt: skip
    table = pd.DataFrame(rows)
    write_csv(table, out / "stability.csv", index=False)
    return table


def _losses(folder: Path, variants: Sequence[str]) -> list[bytes]:
    """Every run's per-step ``loss_mean`` as bytes (run by run, in seed order).

    WHY: an arm that changed no bit of any loss did not perturb this claim's runs (a policy
    with no aggregation under ``fp64_aggregate``), so its "stable" would say nothing.
    """
    out = []
    for variant in variants:
        for f in sorted((folder / "runs" / variant_slug(variant) / "runs").glob("*.parquet")):
            table = pd.read_parquet(f)
            if "loss_mean" in table:  # a world without learning has no loss to move
                out.append(table.sort_values("step")["loss_mean"].to_numpy(float).tobytes())
    return out


def _mean(row: pd.Series) -> float:
    """The mean effect of a ``verdicts.csv`` row, as printed (NaN where none was)."""
    text = str(row["MobiDFL (mean ± std)"]).split(" ± ")[0]
    try:
        return float(text)
    except ValueError:
        return math.nan


def stability_table(path: Path = STABILITY_CSV) -> str:
    """The page's table of the published stability measurements, chaotic claims in bold."""
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    frame["stability"] = [f"**{s}**" if s == CHAOTIC else s for s in frame["stability"]]
    return markdown_table(frame)


def cross_cpu_table(folder: Path = CROSS_CPU) -> str:
    """Per claim, the CPUs whose verdict agrees with the published one, from their records."""
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    if not records:
        return "No CPU has run `validation/cross_cpu.py` yet."
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in records:
        for c in rec["claims"]:
            row = rows.setdefault((c["paper"], c["claim"]), {
                "paper": c["paper"], "claim": c["claim"], "published verdict": c["published"],
                "CPUs that agree": [], "CPUs that do not": [],
            })  # fmt: skip
            key = "CPUs that agree" if c["verdict"] == c["published"] else "CPUs that do not"
            row[key].append(f"{rec['cpu']['model']} ({c['verdict']})")
    frame = pd.DataFrame(list(rows.values()))
    for key in ("CPUs that agree", "CPUs that do not"):
        frame[key] = ["; ".join(v) or "none" for v in frame[key]]
    return markdown_table(frame)


def render(page: str, table: str, marks: tuple[str, str]) -> str:
    """``page`` with the text between ``marks`` replaced by ``table``."""
    start, end = marks
    if start not in page or end not in page:
        raise ValueError(f"{PAGE} lacks its markers {start} ... {end}")
    head, _, rest = page.partition(start)
    _, _, tail = rest.partition(end)
    return f"{head}{start}\n{table}\n{end}{tail}"


def _page(check: bool) -> int:
    page = PAGE.read_text()
    new = render(page, stability_table(), MARKS["stability"])
    new = render(new, cross_cpu_table(), MARKS["cpus"])
    if check:
        if new != page:
            print(f"{PAGE}: a generated table differs from the published data", file=sys.stderr)
        return int(new != page)
    if new != page:
        write_text_atomic(PAGE, new)
    print(PAGE)
    return 0


def merged_rows(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The published rows of ``path`` with those ``table`` measures again replaced by its own.

    A row is one claim at one scale: publishing a ``small`` check of one claim keeps the
    ``ci`` table of every claim, and publishing the ``ci`` table again keeps the ``small`` row.
    """
    if not path.exists():
        return table
    old = pd.read_csv(path, keep_default_na=False, dtype=str)
    key = ["paper", "claim", "scale"]
    new = table.astype(str)
    kept = old[~old.set_index(key).index.isin(new.set_index(key).index)]
    return pd.concat([kept, new], ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the arms of the papers named (or rewrite/check the page with ``--page``)."""
    parser = argparse.ArgumentParser(prog="python -m mobidfl.analysis.stability",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("papers", nargs="*", help="papers (default: the five seed papers)")
    parser.add_argument("--out", type=Path, default=Path("stability"))
    parser.add_argument("--scale", default="ci")
    parser.add_argument("--seeds", type=int, default=3, help="seeds from --first-seed "
                        "(default 3: the fewest a verdict reads)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--claims", default="", help="comma-separated parts of claim texts")
    parser.add_argument("--publish", action="store_true", help=f"also write {STABILITY_CSV}")
    parser.add_argument("--page", action="store_true", help=f"rewrite {PAGE}'s tables")
    parser.add_argument("--check", action="store_true", help="with --page: exit 1 if stale")
    args = parser.parse_args(argv)
    try:
        if args.page:
            return _page(args.check)
        if args.seeds < 1:
            raise ConfigError("--seeds", args.seeds, "at least 1")
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        claims = [c for c in args.claims.split(",") if c]
        tables = [stability(p, out=args.out / paper_spec(p).name, scale=args.scale,
                            seeds=seeds, claims=claims) for p in args.papers or MAIN_PAPERS]
    except (OSError, ConfigError) as exc:
        print(f"mobidfl: {exc}", file=sys.stderr)
        return 2
    table = pd.concat(tables, ignore_index=True)
    write_csv(table, args.out / "stability.csv", index=False)
    if args.publish:
        write_csv(merged_rows(table, STABILITY_CSV), STABILITY_CSV, index=False)
    chaotic = int((table["stability"] == CHAOTIC).sum())
    print(f"{len(table)} claims, {chaotic} {CHAOTIC}: {args.out / 'stability.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
