#!/usr/bin/env bash
# One lent-GPU call (benchmarks/gpu_all.sh on the GPU) with the benchmark's `small` table on the
# host's spare cores (the scenarios that need neither SUMO nor pyrosm, which do not fit the
# device tool's 64 MiB). Used once on 2026-11-26 (docs/benchmark/findings.md): carry .whl and
# .data (benchmarks/gpu_wheels.sh), run `OUT=$OUT LIMIT=530 PROCS=12 bash THIS`.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s); LIMIT=${LIMIT:-540}; PROCS=${PROCS:-12}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nproc; lscpu | grep 'Model name'; free -g | head -2; uptime; } > "$OUT/machine.txt" 2>&1
bash benchmarks/gpu_all.sh --budget $((LIMIT - 90)) > "$OUT/gpu_console.log" 2>&1 &
GPID=$!
for i in $(seq 120); do grep -q "set-up took" "$OUT/setup.log" 2>/dev/null && break; sleep 1; done
export PYTHONPATH=/tmp/site:$PWD
python3 -m mobidfl.analysis.cli bench --scale small --seeds 5 --processes $PROCS --quiet \
  --scenarios static_sensors,uav_ferry,cars_manhattan,mofel_routes --out /tmp/bs \
  > "$OUT/bench.log" 2>&1 &
BPID=$!
while [ $(( $(date +%s) - T0 )) -lt $LIMIT ]; do
  kill -0 $BPID 2>/dev/null || kill -0 $GPID 2>/dev/null || break
  sleep 5
done
kill -INT $BPID 2>/dev/null; sleep 8; kill -TERM $BPID 2>/dev/null; pkill -f 'mobidfl.analysis.cli bench' ; sleep 2
wait $GPID 2>/dev/null
echo "bench runs done: $(find /tmp/bs -name '*.parquet' | wc -l)" >> "$OUT/bench.log"
tar czf "$OUT/bench_small.tgz" -C /tmp bs 2>>"$OUT/bench.log"
cat "$OUT/machine.txt" >> "$OUT/gpu_console.log"; rm -f "$OUT/machine.txt"
tail -5 "$OUT/bench.log"; tail -30 "$OUT/gpu_console.log"; ls -la "$OUT"
