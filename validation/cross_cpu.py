"""``python -m validation.cross_cpu [--device cpu|cuda] [--publish]``: verdicts on this CPU.

Re-runs one small claim per seed paper (:data:`CLAIMS`, at ``ci`` scale, on the seeds of
its published row in ``published/reproduction/stability.csv``) and compares each verdict and
each printed effect with the published ones. The record names the machine: CPU model and
the instruction-set flags that change floating-point kernels (/proc/cpuinfo), torch's
version, thread count and CPU capability (oneDNN / MKL), or the GPU with ``--device cuda``
(the batched backend, the one that runs on a GPU).

``--publish`` writes the record to ``published/validation/cross_cpu/<machine>.json``; the
table of ``docs/reproduction/stability.md`` (per claim, the machines whose verdicts agree)
is generated from those records (``python -m mobidfl.analysis.stability --page``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from mobidfl.analysis.stability import CROSS_CPU, STABILITY_CSV, stability
from mobidfl.atomic import write_text_atomic
from mobidfl.cores import cpu_model
from mobidfl.errors import ConfigError

CLAIMS = {
    "mobility_000": "accuracy gain of p = 5 % over p = 0",
    "dam_001": "DAM over Random (alpha = 0.05)",
    "mofel_002": "MoFeL completes more cycles than A2 at 30 m/min",
    "cached_dfl_003": "LRU caching ends more accurate than DFL without cache (non-i.i.d.)",
    "psfl_004": "PSFL more accurate than centralised FedAvg (3 areas)",
}
"""One claim per paper (its full text): the cheapest of each at ``ci`` scale."""

FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16",
         "amx_tile", "avx_vnni")
"""The CPU flags that choose among torch's kernels (and so the summation order)."""


def machine(device: str) -> dict[str, object]:
    """The CPU (and GPU) the record was made on, and torch's numeric set-up."""
    model, flags = cpu_model(), set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    if m := re.search(r"^flags\s*:\s*(.+)$", text, re.M):
        flags = set(m.group(1).split())
    info: dict[str, object] = {
        "model": model,
        "flags": [f for f in FLAGS if f in flags],
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "mkl": bool(torch.backends.mkl.is_available()),
        "device": device,
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def slug(info: dict[str, object]) -> str:
    """The record's file name: the machine's model in lower-case words."""
    name = str(info.get("gpu") or info["model"])
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.cross_cpu", description=__doc__)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--papers", default=",".join(CLAIMS))
    p.add_argument("--out", type=Path, default=Path("results/cross_cpu"))
    p.add_argument("--publish", action="store_true", help=f"write the record to {CROSS_CPU}/")
    args = p.parse_args(argv)
    try:
        if args.device not in ("cpu", "cuda"):
            raise ConfigError("--device", args.device, "cpu or cuda")
        if args.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("--device", "cuda", "a machine where torch sees a GPU")
        papers = [x for x in args.papers.split(",") if x]
        unknown = [x for x in papers if x not in CLAIMS]
        if unknown or not papers:
            raise ConfigError("--papers", ",".join(unknown) or args.papers,
                              "some of " + ",".join(CLAIMS))
        published = pd.read_csv(STABILITY_CSV, keep_default_na=False, dtype=str)
        extra = {"backend": "batched", "device": "cuda"} if args.device == "cuda" else {}
        info, claims = machine(args.device), []
        for paper in papers:
            row = published[(published.paper == paper) & (published.claim == CLAIMS[paper])
                            & (published.scale == "ci")]
            if not len(row):
                raise ConfigError("--papers", paper, f"a paper with a row in {STABILITY_CSV}")
            ref = row.iloc[0]
            clock = time.monotonic()
            got = stability(paper, out=args.out / paper, scale=ref.scale,
                            seeds=[int(s) for s in ref.seeds.split()], arms=(),
                            claims=[CLAIMS[paper]], extra=extra).iloc[0]  # fmt: skip
            claims.append({
                "paper": paper, "claim": CLAIMS[paper], "scale": ref.scale, "seeds": ref.seeds,
                "published": ref.verdict, "verdict": str(got.verdict),
                "published effect": ref["effect (mean ± std)"],
                "effect": str(got["effect (mean ± std)"]),
                "wall_s": round(time.monotonic() - clock, 1),
            })  # fmt: skip
            c = claims[-1]
            print(f"{paper}: {c['claim']}: {c['verdict']} (published {c['published']}), "
                  f"effect {c['effect']} (published {c['published effect']}), {c['wall_s']} s")
    except (OSError, ConfigError) as exc:
        print(f"mobidfl: {exc}", file=sys.stderr)
        return 2
    record = {"cpu": info, "claims": claims}
    text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "record.json", text)
    if args.publish:
        CROSS_CPU.mkdir(parents=True, exist_ok=True)
        write_text_atomic(CROSS_CPU / f"{slug(info)}.json", text)
    agree = sum(c["verdict"] == c["published"] for c in claims)
    print(f"{agree} of {len(claims)} verdicts agree with the published ones on {info['model']}")
    return 0 if agree == len(claims) else 1


if __name__ == "__main__":
    raise SystemExit(main())
