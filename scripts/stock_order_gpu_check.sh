#!/usr/bin/env bash
# The experiment fusion-5-stock-order on a GPU without ggml (tests/cpp/q8_stock_order_gpu_check.cu): builds
# fusekit-q8-gemv.cuh as the stack leaves it (kernels/ plus the experiment patches that change it, in the stack's
# order), compiles the check with ggml's CUDA flags, runs it and its sabotage mode, then times the kernels
# against the ones they replace (tests/cpp/q8_stock_order_timing.cu, ROUNDS interleaved rounds, default 9), and writes
# the results, the logs and the GPU's clocks under OUT (7 files: a device call returns at most 8), then Nsight Compute
# on the largest table's kernels (2 more: NCU_SHAPES below). Never changes clocks or power settings.
#
#   bash scripts/stock_order_gpu_check.sh OUT [ARCH]      (ARCH: 90 by default)
#   PATCHES="fusion-5-group fusion-5-grouped-f32 fusion-5-stock-order" bash scripts/stock_order_gpu_check.sh OUT
#                                                         (without fusion-5-stock-ordered-tiles and the experiments on
#                                                          top of it, as session 23 ran it)
set -euo pipefail
OUT=${1:?output folder}; ARCH=${2:-90}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d)
mkdir -p "$OUT"
# PATCHES or UNTIL (scripts/stock_order_header.sh): the experiments that change the header, in the stack's order
bash "$REPO/scripts/stock_order_header.sh" "$WORK" > "$OUT/check.log"
smi() { nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/clocks.csv" 2>&1 || true; }
smi
nvcc -O3 -std=c++17 -use_fast_math -arch="sm_$ARCH" -I"$WORK/ggml/src/ggml-cuda" -I"$REPO/kernels" -o "$WORK/check" \
  "$REPO/tests/cpp/q8_stock_order_gpu_check.cu" 2>&1 | tee -a "$OUT/check.log"
rc=0
# every GPU run under a timeout (RUN_TIMEOUT seconds): a kernel that hangs costs that much device time, not the call
t=${RUN_TIMEOUT:-240}
timeout "$t" "$WORK/check" --json "$OUT/stock-order-gpu-check.json" 2>&1 | tee -a "$OUT/check.log" || rc=1
smi
timeout "$t" "$WORK/check" --sabotage --json "$OUT/stock-order-gpu-check-sabotage.json" 2>&1 | tee "$OUT/check-sabotage.log" || rc=1
smi
nvcc -O3 -std=c++17 -use_fast_math -arch="sm_$ARCH" -I"$WORK/ggml/src/ggml-cuda" -I"$REPO/kernels" -o "$WORK/timing" \
  "$REPO/tests/cpp/q8_stock_order_timing.cu" 2>&1 | tee -a "$OUT/check.log"
timeout "$t" "$WORK/timing" --rounds "${ROUNDS:-9}" --json "$OUT/stock-order-timing.json" 2>&1 | tee "$OUT/timing.log" || rc=1
smi
# Nsight Compute on the kernels of NCU_SHAPES (comma-separated parts of the timing's shape names; empty: skipped):
# each contender profiled once (--rounds 0 --launches 1), with the clocks left alone (--clock-control none). Two more
# files (9 in all): tar the folder before it comes back from a device call.
NCU_SHAPES=${NCU_SHAPES-output 248320x2048,ssm_out 2048x4096}
if [[ -n $NCU_SHAPES ]]; then
  ncu=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1 || true)
  if [[ -x "$ncu" ]]; then
    timeout "${NCU_TIMEOUT:-240}" "$ncu" --clock-control none -f -o "$WORK/timing-ncu" --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats \
      --section LaunchStats --metrics "${NCU_METRICS:-l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_ldgsts.sum,smsp__inst_executed.sum}" \
      "$WORK/timing" --only "$NCU_SHAPES" --rounds 0 --launches 1 > "$OUT/ncu.log" 2>&1 || rc=1
    "$ncu" --import "$WORK/timing-ncu.ncu-rep" --csv --page raw > "$OUT/ncu-raw.csv" 2>> "$OUT/ncu.log" || rc=1
  else
    echo "ncu: not found on this host" > "$OUT/ncu.log"
  fi
  smi
fi
echo "exit $rc" | tee -a "$OUT/check.log"
exit $rc
