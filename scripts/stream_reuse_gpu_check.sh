#!/usr/bin/env bash
# Whether the stream kernel reads a rewritten buffer or what L1 kept of it (tests/cpp/q8_stream_reuse_check.cu): on
# the header as fusion-5-stream-via-l1 leaves it (the build whose test-backend-ops run failed a MUL_MAT case in
# session 30) and as all the experiments leave it; each program run and run in its sabotage mode. Writes under
# OUT: stream-reuse-gpu-check-<header>.json, stream-reuse-gpu-check-<header>-sabotage.json (fusekit report --session
# counts their iterations), reuse.log, clocks.csv. Never changes clocks or power settings.
#
#   bash scripts/stream_reuse_gpu_check.sh OUT [ARCH]      (ARCH: 90 by default; the program needs sm_90)
set -euo pipefail
OUT=${1:?output folder}; ARCH=${2:-90}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d)
mkdir -p "$OUT"
smi() { nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/clocks.csv" 2>&1 || true; }
rc=0
t=${RUN_TIMEOUT:-120}
for header in via-l1 all; do
  until=""; [[ $header == all ]] || until=fusion-5-stream-$header
  UNTIL=$until bash "$REPO/scripts/stock_order_header.sh" "$WORK/$header" | tee -a "$OUT/reuse.log"
  nvcc -O3 -std=c++17 -use_fast_math -arch="sm_$ARCH" -I"$WORK/$header/ggml/src/ggml-cuda" -I"$REPO/kernels" \
    -I"$REPO/tests/cpp" -o "$WORK/reuse-$header" "$REPO/tests/cpp/q8_stream_reuse_check.cu" 2>&1 | tee -a "$OUT/reuse.log"
  smi
  timeout "$t" "$WORK/reuse-$header" --json "$OUT/stream-reuse-gpu-check-$header.json" 2>&1 | tee -a "$OUT/reuse.log" || rc=1
  smi
  timeout "$t" "$WORK/reuse-$header" --sabotage --json "$OUT/stream-reuse-gpu-check-$header-sabotage.json" 2>&1 | tee -a "$OUT/reuse.log" || rc=1
  smi
done
echo "exit $rc" | tee -a "$OUT/reuse.log"
exit $rc
