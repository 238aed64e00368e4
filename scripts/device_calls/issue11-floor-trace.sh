#!/usr/bin/env bash
# Device call for issue #11 (session 49; kernels/NOTES-q8-gemv.md, "Session 49"): the stream check's timing program
# (tests/cpp/q8_stock_order_timing.cu, the stack's header as scripts/stock_order_header.sh writes it) under Nsight
# Systems, one shape at a time, so that each contender's own kernel duration stands beside the per-launch time the
# program reports (events around back-to-back launches). Session 49 compared the stream kernel through ggml by its
# exclusive time (6144 x 4096: 12.14 us; 4096 x 4096: 7.99) with the program's per-launch times (12.16; 9.35): on one
# shape they agree, on the other 1.36 us apart, and the plain 16-byte read's 11.52 us on 6144 x 4096 (the "floor" that
# stock MMVQ's 11.20 was held against) is such a per-launch time. Prediction: the programs' per-launch time exceeds
# each kernel's own median by 0.3-1.5 us, more on the shorter tables; the floor kernel's own median on 6144 x 4096 is
# 10.4-11.2 us, so stock MMVQ (11.20 through ggml) is within 0-8% of it; the stream kernel's own time there is
# 11.4-12.1 us. No llama.cpp build: about 5 minutes with the machine's start. Carry [".bundle"] (the wheels and the
# debs nsys' importer needs); SHAPES overrides the shapes (parts of the program's shape names); FLOOR_SETUP=0 skips
# the bundle's setup (a test, or a host where FUSEKIT_HOME already holds it).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-floor}
B=${FLOOR_BATCH:-/tmp/floor-batch}
rm -rf "$B"
mkdir -p "$B/bin" "$B/logs" "$B/results/floor-traces" "$B/traces"
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 >"$OUT/card.txt"
if [[ ${FLOOR_SETUP:-1} == 1 ]]; then  # the wheels, nsys' importer libraries, the pin
  bash scripts/gpu_batch.sh "$B" setup >"$B/logs/setup.out" 2>&1
fi
source scripts/host_env.sh  # use_fusekit, smi, nsys_path, nsys_trace, session_pack
use_fusekit
smi start
bash scripts/stock_order_header.sh "$B/work" >"$B/results/header.txt"
nvcc -O3 -std=c++17 -use_fast_math -arch=sm_90 -I"$B/work/ggml/src/ggml-cuda" -I"$REPO/kernels" -o "$B/bin/timing" \
  tests/cpp/q8_stock_order_timing.cu >"$B/logs/compile.log" 2>&1
smi compiled
[[ -n $(nsys_path) ]] || { echo "floor-trace: no nsys on this host" | tee "$B/logs/floor-trace.log"; session_pack "$OUT"; exit 0; }
for shape in ${SHAPES:-6144x4096 4096x4096 4096x14336 8192x2048}; do
  base="$B/traces/floor-$shape"
  nsys_trace "$base" "$B/bin/timing" --only "$shape" --rounds 3 --json "$B/results/floor-timing-$shape.json" \
    >>"$B/logs/floor-trace.log" 2>&1 || echo "floor-trace: $shape did not trace (logs/floor-trace.log)"
  if [[ -f "$base.sqlite" ]]; then
    fusekit profile --from "$base.sqlite" --json "$B/results/floor-profile-$shape.json" >>"$B/logs/floor-trace.log" 2>&1 \
      || echo "floor-trace: fusekit profile failed for $shape"
    xz -T0 -c "$base.sqlite" >"$B/results/floor-traces/floor-$shape.sqlite.xz"
  fi
  smi "$shape"
done
session_pack "$OUT"
