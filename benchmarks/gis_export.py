"""GIS export of a run (``trajectories.gpkg``): building the layers and writing them.

The layers are built whole-array (one PROJ call per layer, shapely's array constructors);
this measures ``export_layers`` (points, tracks, streets, cells) and ``write_gis`` (the
GeoPackage) on the default world (learning off, 2 steps: 9,176 street edges, 16,016 grid
cells) and on the bundled ``nyc_uws``, each checkout in its own process, alternating.

Run: ``python benchmarks/gis_export.py [--repeat 3] [--code .,/tmp/old]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import checkout_program, machine_line  # noqa: E402 - after benchmarks/ is put on sys.path

CHILD = r"""
import json, sys, tempfile, time
from mobidfl.analysis.gis import export_layers, write_gis
from mobidfl.model import MobiDFLModel
settings = json.loads(sys.argv[1])
model = MobiDFLModel(**settings, steps=2, learning=False, seed=0)
model.step(); model.step()
export_layers(model)  # first call: PROJ's transformer set up, GDAL's driver loaded
t = time.perf_counter(); layers = export_layers(model); build = time.perf_counter() - t
with tempfile.TemporaryDirectory() as out:
    t = time.perf_counter(); write_gis(model, out); write = time.perf_counter() - t
print(json.dumps({"build": build, "write": write,
                  "features": {k: len(v) for k, v in layers.items()}}))
"""
WORLDS = {"default world": {}, "nyc_uws": {"map": "nyc_uws"}}


def child(code: Path, settings: dict) -> dict:
    program, env = checkout_program(code, CHILD)
    out = subprocess.run([sys.executable, "-c", program, json.dumps(settings)], env=env,
                         cwd=code, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="processes per checkout and world")
    parser.add_argument("--code", default=str(ROOT), help="checkouts to compare, comma-separated")
    args = parser.parse_args()
    codes = [Path(c).resolve() for c in args.code.split(",")]
    print(machine_line())
    print(f"{'world':14s} {'checkout':34s} {'layers s':>9s} {'gpkg s':>8s}  features")
    for world, settings in WORLDS.items():
        runs: dict[Path, list[dict]] = {c: [] for c in codes}
        for _ in range(args.repeat):
            for code in codes:
                runs[code].append(child(code, settings))
        for code, got in runs.items():
            build = statistics.median(r["build"] for r in got)
            write = statistics.median(r["write"] for r in got)
            print(f"{world:14s} {str(code)[:34]:34s} {build:9.3f} {write:8.3f}  "
                  f"{got[0]['features']}")
    print(f"(median of {args.repeat} processes; load after {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
