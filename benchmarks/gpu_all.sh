#!/usr/bin/env bash
# Every GPU measurement in one run on a lent GPU machine (benchmarks/gpu_all.py), after
# installing the carried wheels (.whl/, benchmarks/gpu_wheels.sh) into $SITE and the carried
# Fashion-MNIST (.data/fashion-mnist/) where the loader looks for it. Options are passed to
# gpu_all.py (default: --device cuda --budget 420). Outputs go to $OUT.
#   bash benchmarks/gpu_all.sh [--budget 420] [--steps tests,round,city,sweep,fig2] [--dry-run]
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-$PWD/gpu_all_out}
mkdir -p "$OUT"
exec 3>"$OUT/setup.log"
t0=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl >&3 2>&1 || { echo "installing .whl/ failed (see setup.log)"; exit 2; }
fi
# rasterio: mesa_geo imports it at start-up; its wheel (39 MB) does not fit what the device
# tool carries. An import-only stand-in: any use raises (MobiDFL builds no raster layer).
if ! PYTHONPATH="$SITE" $PY -c 'import rasterio' 2>/dev/null; then
  mkdir -p "$SITE/rasterio"
  cat >"$SITE/rasterio/__init__.py" <<'PYEOF'
"""Import-only stand-in for rasterio written by benchmarks/gpu_all.sh: any use raises."""


class _Missing:
    def __getattr__(self, name):
        raise ImportError("rasterio is not installed here (benchmarks/gpu_all.sh stand-in)")


transform = crs = _Missing()


def open(*args, **kwargs):  # noqa: A001
    raise ImportError("rasterio is not installed here (benchmarks/gpu_all.sh stand-in)")
PYEOF
  cat >"$SITE/rasterio/warp.py" <<'PYEOF'
"""Import-only stand-in (benchmarks/gpu_all.sh): any use raises."""
import enum


class Resampling(enum.IntEnum):
    nearest = 0
    bilinear = 1


def _missing(*args, **kwargs):
    raise ImportError("rasterio is not installed here (benchmarks/gpu_all.sh stand-in)")


calculate_default_transform = reproject = transform_bounds = _missing
PYEOF
  echo "rasterio: import-only stand-in in $SITE" >&3
fi
export PYTHONPATH="$SITE:$PWD"
# Fashion-MNIST: where model/learning/data.py looks (Debian's dataset-fashion-mnist path)
dst=/usr/share/datasets/fashion-mnist
if [ -d .data/fashion-mnist ] && [ ! -f $dst/train-images-idx3-ubyte.gz ]; then
  mkdir -p $dst && cp .data/fashion-mnist/*-ubyte.gz $dst/ >&3 2>&1 \
    || echo "could not copy Fashion-MNIST to $dst (fig2 and city need it)" >&3
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  $PY -c 'import torch, mesa, mesa_geo, mobidfl.model; print("torch", torch.__version__, "mesa", mesa.__version__, "cuda", torch.cuda.is_available())' 2>&1
  echo "set-up took $(( $(date +%s) - t0 )) s"; } >&3
cat "$OUT/setup.log"
# each step has its own limit inside gpu_all.py; this is the backstop for the whole
timeout -s INT 500 $PY benchmarks/gpu_all.py --out "$OUT" "$@"
