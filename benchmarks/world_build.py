"""Start-up of the default world on a borough-sized city: imports, cold and warm build.

The world is the default one (100 cars, 40 pedestrians, 30 sensors, 6 UAVs, learning off)
on the generated borough GraphML of ``benchmarks/map_load.py`` (17,956 intersections,
54,131 directed street segments). Each measurement runs in a fresh Python process, as a
user's ``mobidfl run`` starts:

* ``import``: ``from model import MobiDFLModel`` (Mesa, mesa-geo, the map and agent code);
* ``cold``: ``MobiDFLModel(map=FILE, map_cache=EMPTY, learning=False)``: the GraphML parsed
  and the street networks built and written to the cache;
* ``warm``: the same call in a new process with the cache filled (the start a user sees
  from the second run on), and ``again``: a second build in that process;
* ``torch``: whether the build imported torch (a world without learning needs none).

``--code A,B`` measures several checkouts side by side in one run (the same map, the
processes of each alternating), e.g. this tree and a worktree of an older commit.

Run: ``python benchmarks/world_build.py [--repeat 3] [--code .,/tmp/old]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from model import MobiDFLModel
t1 = time.perf_counter()
before = set(sys.modules)
MobiDFLModel(map=sys.argv[1], map_cache=sys.argv[2], learning=False, seed=0)
t2 = time.perf_counter()
MobiDFLModel(map=sys.argv[1], map_cache=sys.argv[2], learning=False, seed=1)
t3 = time.perf_counter()
new = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(json.dumps({"import": t1 - t0, "build": t2 - t1, "again": t3 - t2,
                  "torch": "torch" in sys.modules, "imported_by_build": new}))
"""


def child(code: Path, graphml: Path, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(graphml), str(cache)], env=env,
                         cwd=code, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="warm processes per checkout")
    parser.add_argument("--code", default=str(ROOT), help="checkouts to compare, comma-separated")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from map_load import borough_graphml

    codes = [Path(c).resolve() for c in args.code.split(",")]
    now = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"{now}, python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        graphml = tmp / "borough.graphml"
        nodes, edges = borough_graphml(graphml)
        print(f"map: generated borough GraphML, {nodes:,} intersections, {edges:,} segments, "
              f"{graphml.stat().st_size / 1e6:.0f} MB")
        rows = {}
        for code in codes:  # cold: one process each, empty cache
            rows[code] = {"cold": child(code, graphml, tmp / f"cache{codes.index(code)}")}
            rows[code]["warm"] = []
        for _ in range(args.repeat):  # warm: alternating checkouts
            for code in codes:
                rows[code]["warm"].append(child(code, graphml, tmp / f"cache{codes.index(code)}"))
        print(f"{'checkout':<34} {'import s':>9} {'cold s':>8} {'warm s':>8} {'again s':>8} "
              f"{'torch':>6}  modules first imported by a warm build")
        for code, r in rows.items():
            warm = r["warm"]
            med = {k: statistics.median(w[k] for w in warm) for k in ("import", "build", "again")}
            print(f"{str(code)[-34:]:<34} {med['import']:9.2f} {r['cold']['build']:8.2f} "
                  f"{med['build']:8.3f} {med['again']:8.3f} {str(warm[0]['torch']):>6}  "
                  f"{', '.join(warm[0]['imported_by_build'])}")
        print(f"(median of {args.repeat} warm processes; load after {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
