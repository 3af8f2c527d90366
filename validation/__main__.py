"""``python -m validation [--size small|full] [--seeds N] [--cases a,b] [--out DIR]``.

Runs every case of :data:`validation.CASES` (the authors' code beside MobiDFL), prints one table
with a verdict per quantity, writes ``validation.md`` and ``validation.csv`` to ``--out``, and
exits 1 when any quantity differs without a named mechanism.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import sys
import time
from dataclasses import asdict
from pathlib import Path

from mobidfl.atomic import open_atomic, write_text_atomic
from mobidfl.errors import ConfigError
from validation import CASES, Row

SIZES = ("small", "full")


def _table(rows: list[Row]) -> str:
    head = "| case | quantity | reference (authors' code or ns-3) | MobiDFL | tolerance | verdict |"
    lines = [head, "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.quantity} | {r.reference} | {r.mobidfl} | {r.tolerance} | "
            f"**{r.verdict}** |"
        )
    notes = [f"- {r.case} / {r.quantity}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation", description=__doc__)
    p.add_argument("--size", default="small",
                   help="small (default), full, or ci where every case chosen has it")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--out", type=Path, default=Path("results/validation"))
    args = p.parse_args(argv)
    try:
        cases = [c.strip() for c in args.cases.split(",") if c.strip()]
        if not cases:
            raise ConfigError("--cases", args.cases, f"one or more of {', '.join(CASES)}")
        unknown = [c for c in cases if c not in CASES]
        if unknown:
            raise ConfigError("--cases", unknown[0], f"one of {', '.join(CASES)}")
        modules = {c: importlib.import_module(f"validation.{c}") for c in cases}
        sizes = [s for s in ("ci", *SIZES) if all(s in m.SIZES for m in modules.values())]
        if args.size not in sizes:
            raise ConfigError("--size", args.size,
                              f"{' or '.join(sizes)} for --cases {','.join(cases)}")
        if args.seeds < 1:
            raise ConfigError("--seeds", args.seeds, "an integer >= 1")
        # absolute: the reference drivers run in their own working directories
        args.out = args.out.expanduser().resolve()
        if args.out.exists() and not args.out.is_dir():
            raise ConfigError("--out", str(args.out), "a folder (this is a file)")
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError("--out", str(args.out),
                              f"a folder that can be created ({exc.strerror})") from None
        rows: list[Row] = []
        for case in cases:
            t = time.perf_counter()
            got = modules[case].run(size=args.size, seeds=args.seeds, out=args.out / case)
            rows += got
            print(f"{case}: {len(got)} quantities in {time.perf_counter() - t:.0f} s",
                  file=sys.stderr)
    except ConfigError as exc:
        print(f"mobidfl validate: {exc}", file=sys.stderr)
        return 2
    text = _table(rows)
    print(text)
    write_text_atomic(args.out / "validation.md", text + "\n")
    with open_atomic(args.out / "validation.csv", "w") as f:
        w = csv.DictWriter(f, fieldnames=list(Row.__dataclass_fields__))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    return 1 if any(r.verdict == "differs" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
