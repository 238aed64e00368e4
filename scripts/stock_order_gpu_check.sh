#!/usr/bin/env bash
# The experiment fusion-5-stock-order on a GPU without ggml (tests/cpp/q8_stock_order_gpu_check.cu): builds
# fusekit-q8-gemv.cuh as the stack leaves it (kernels/ plus the experiment patches that change it, in the stack's
# order), compiles the check with ggml's CUDA flags, runs it and its sabotage mode, then times the kernels
# against the ones they replace (tests/cpp/q8_stock_order_timing.cu, ROUNDS interleaved rounds, default 9), and writes
# the results, the logs and the GPU's clocks under OUT (7 files: a device call returns at most 8). Never changes
# clocks or power settings.
#
#   bash scripts/stock_order_gpu_check.sh OUT [ARCH]      (ARCH: 90 by default)
#   PATCHES="fusion-5-group fusion-5-grouped-f32 fusion-5-stock-order" bash scripts/stock_order_gpu_check.sh OUT
#                                                         (without fusion-5-stock-ordered-tiles and the experiments on
#                                                          top of it, as session 23 ran it)
set -euo pipefail
OUT=${1:?output folder}; ARCH=${2:-90}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d)
mkdir -p "$OUT" "$WORK/ggml/src/ggml-cuda"
cp "$REPO/kernels/fusekit-q8-gemv.cuh" "$WORK/ggml/src/ggml-cuda/"
# PATCHES: the experiments that change the header, in the stack's order (the last ones may be left off)
for patch in ${PATCHES:-fusion-5-group fusion-5-grouped-f32 fusion-5-stock-order fusion-5-stock-ordered-tiles fusion-5-stock-streamed fusion-5-stock-whole-blocks fusion-5-stock-wider-stream}; do
  (cd "$WORK" && git apply --include=ggml/src/ggml-cuda/fusekit-q8-gemv.cuh "$REPO/patches/experiments/$patch.patch")
done
echo "header sha256 $(sha256sum "$WORK/ggml/src/ggml-cuda/fusekit-q8-gemv.cuh" | cut -d' ' -f1) (${PATCHES:-all seven})" \
  > "$OUT/check.log"
smi() { nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/clocks.csv" 2>&1 || true; }
smi
nvcc -O3 -std=c++17 -use_fast_math -arch="sm_$ARCH" -I"$WORK/ggml/src/ggml-cuda" -I"$REPO/kernels" -o "$WORK/check" \
  "$REPO/tests/cpp/q8_stock_order_gpu_check.cu" 2>&1 | tee -a "$OUT/check.log"
rc=0
"$WORK/check" --json "$OUT/stock-order-gpu-check.json" 2>&1 | tee -a "$OUT/check.log" || rc=1
smi
"$WORK/check" --sabotage --json "$OUT/stock-order-gpu-check-sabotage.json" 2>&1 | tee "$OUT/check-sabotage.log" || rc=1
smi
nvcc -O3 -std=c++17 -use_fast_math -arch="sm_$ARCH" -I"$WORK/ggml/src/ggml-cuda" -I"$REPO/kernels" -o "$WORK/timing" \
  "$REPO/tests/cpp/q8_stock_order_timing.cu" 2>&1 | tee -a "$OUT/check.log"
"$WORK/timing" --rounds "${ROUNDS:-9}" --json "$OUT/stock-order-timing.json" 2>&1 | tee "$OUT/timing.log" || rc=1
smi
echo "exit $rc" | tee -a "$OUT/check.log"
exit $rc
