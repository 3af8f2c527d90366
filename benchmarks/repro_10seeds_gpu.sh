#!/usr/bin/env bash
# The papers' sample size for the open verdicts: DAM/DCM (Reza et al., 10 Monte Carlo runs,
# Sec. V-A) under both readings of its optimiser (state kept / reset) and MoFeL's open claim
# (MoFeL over A2 at 5 m/min), 10 seeds each, every run of a reproduction as one program on a
# GPU (--batch-runs). Too long for the shared 2-core CPU (docs/reproduction/dam-dcm.md,
# "10 seeds"); one GPU machine, one command, every output under one folder:
#
#   benchmarks/repro_10seeds_gpu.sh [OUT]          (default OUT = results/repro10)
#   DEVICE=cpu benchmarks/repro_10seeds_gpu.sh     (the same on a CPU, for a check)
#   ONLY="dam_001_small_fashion" benchmarks/repro_10seeds_gpu.sh   (some of them, by name)
#
# Expected (estimated, not measured on a GPU): DAM/DCM is bound by each run's per-round Python
# work (mobility, mixing), ~0.02-0.06 s per run-round on one core, so 80 runs x 1,000 rounds
# take ~0.5-1.5 h per DAM reproduction; MoFeL ~0.035 s per run-step: medium 30 x 2,000 steps
# ~35 min, small ~7 min. The most wanted first: DAM on the 60k set.
#
# OUT/<name>/reproduction.md per reproduction (verdicts with 95 % confidence intervals, the
# sensitivity table of the readings, the data set named), OUT/timings.txt (wall seconds per
# reproduction), OUT/machine.txt (GPU, CPU, commit). Resumable: re-running skips finished runs.
# Then copy OUT/<name>/{reproduction.md,*.png} (what the pages show) under docs/reproduction/
# and OUT/<name>/{per_run.csv,verdicts*.csv} (run outputs) under published/reproduction/.
set -euo pipefail

OUT=${1:-results/repro10}
DEVICE=${DEVICE:-cuda}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
{
    echo "date: $(date -u +%FT%TZ)"; echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "cpu: $(lscpu | grep 'Model name' | sed 's/ \+/ /g')"; echo "load: $(uptime)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
} > "$OUT/machine.txt" 2>&1 || true
"$PY" -c "from mobidfl.model.learning.data import load_dataset as l; l('fashion_mnist', test_size=1)" \
    || { echo "repro10: Fashion-MNIST is not installed (make fashion-mnist)" >&2; exit 2; }

run() {  # NAME ARGS...: one reproduction, timed
    local name=$1 t0; shift
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
    t0=$(date +%s)
    "$PY" -m mobidfl.analysis.cli reproduce "$@" --device "$DEVICE" --set backend=batched --batch-runs \
        --out "$OUT/$name" --quiet
    echo "$name $(( $(date +%s) - t0 )) s" | tee -a "$OUT/timings.txt"
}

# DAM/DCM, 4 variants x 2 readings x 10 seeds = 80 runs of 1,000 rounds each.
# On the full 60k set (Fashion-MNIST stands in for MNIST: 3,000 images per client, the
# paper's), and on the small scale's own mnist5k (the 3-seed pages' data, to say which
# verdicts moved with the seeds alone).
run dam_001_small_fashion dam_001 --scale small --seeds 10 --readings --set dataset=fashion_mnist
run dam_001_small_mnist5k dam_001 --scale small --seeds 10 --readings
# MoFeL's open claim at the paper's T (2,000 min), both readings of the station's Delta:
# 3 variants x 10 seeds = 30 runs; the small scale's 400 min as well.
run mofel_002_medium mofel_002 --scale medium --seeds 10 --variants "MoFeL 5,A2 5" --readings
run mofel_002_small mofel_002 --scale small --seeds 10 --variants "MoFeL 5,A2 5" --readings
