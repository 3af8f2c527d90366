"""Start-up of the default world on a borough-sized city: imports, cold and warm build.

The world is the default one (100 cars, 40 pedestrians, 30 sensors, 6 UAVs, learning off)
on the generated borough GraphML of ``benchmarks/map_load.py`` (17,956 intersections,
54,131 directed street segments). Each measurement runs in a fresh Python process, as a
user's ``mobidfl run`` starts:

* ``import``: ``from mobidfl.model import MobiDFLModel`` (Mesa, mesa-geo, the map and agent code);
* ``cold``: ``MobiDFLModel(map=FILE, map_cache=EMPTY, learning=False)``: the GraphML parsed
  and the street networks built and written to the cache (the GraphML itself is in the OS
  page cache: the first checkout to read it would otherwise pay the disk for all);
* ``warm``: the same call in a new process with the cache filled (the start a user sees
  from the second run on), and ``again``: a second build in that process;
* ``torch``: whether the build imported torch (a world without learning needs none).

``--code A,B`` measures several checkouts side by side in one run (the same map, the
processes of each alternating), e.g. this tree and a worktree of an older commit. Wall and
CPU seconds of each process are printed: on a shared machine the CPU seconds move least.

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

from machine import checkout_program, cpu_model

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
clock = lambda: (time.perf_counter(), time.process_time())
t0 = clock()
from mobidfl.model import MobiDFLModel
t1 = clock()
before = set(sys.modules)
MobiDFLModel(map=sys.argv[1], map_cache=sys.argv[2], learning=False, seed=0)
t2 = clock()
MobiDFLModel(map=sys.argv[1], map_cache=sys.argv[2], learning=False, seed=1)
t3 = clock()
new = sorted({".".join(m.split(".")[:2 if m.startswith("mobidfl.") else 1])
              for m in set(sys.modules) - before})
out = {"torch": "torch" in sys.modules, "imported_by_build": new}
for name, (a, b) in {"import": (t0, t1), "build": (t1, t2), "again": (t2, t3)}.items():
    out[name], out[name + "_cpu"] = b[0] - a[0], b[1] - a[1]
print(json.dumps(out))
"""

def child(code: Path, graphml: Path, cache: Path) -> dict:
    program, env = checkout_program(code, CHILD)
    out = subprocess.run([sys.executable, "-c", program, str(graphml), str(cache)], env=env,
                         cwd=code, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3,
                        help="cold and warm processes per checkout")
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
        graphml.read_bytes()  # in the OS page cache for every checkout alike, not the first
        rows = {code: {"cold": [], "warm": []} for code in codes}
        for r in range(args.repeat):  # checkouts alternate; each repeat a new, empty cache
            for code in codes:
                cache = tmp / f"cache{codes.index(code)}-{r}"
                rows[code]["cold"].append(child(code, graphml, cache))
                rows[code]["warm"].append(child(code, graphml, cache))
        print(f"{'checkout':<30} {'import s':>12} {'cold s':>12} {'warm s':>12} "
              f"{'again s':>12} {'torch':>6}  modules first imported by a warm build")
        print(f"{'':<30} {'(wall / CPU)':>12} {'(wall / CPU)':>12} {'(wall / CPU)':>12} "
              f"{'(wall / CPU)':>12}")
        for code, r in rows.items():
            warm, cold = r["warm"], r["cold"]

            def med(key: str, runs: list = warm) -> str:
                return (f"{statistics.median(w[key] for w in runs):5.2f} / "
                        f"{statistics.median(w[key + '_cpu'] for w in runs):4.2f}")

            print(f"{str(code)[-30:]:<30} {med('import'):>12} {med('build', cold):>12} "
                  f"{med('build'):>12} {med('again'):>12} {str(warm[0]['torch']):>6}  "
                  f"{', '.join(warm[0]['imported_by_build'])}")
        print(f"(median of {args.repeat} cold and {args.repeat} warm processes; "
              f"load after {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
