#!/usr/bin/env bash
# Device call for issue #11 (planned after sessions 32-34 as call A; kernels/NOTES-stack.md, "planned in session
# 33"): the bridge race of the stream stacks over the shape table (race-mm, #11's own measure, never run on them),
# L1+ZY's checks and its sabotage, and the standalone stream check (every stream experiment, with
# fusion-5-stream-zz-y-registers-first) with Nsight Compute on two shapes. Carry [".bundle"]; then
# scripts/device_calls/poll.sh until SESSION DONE.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
L1=stack-1-5-stock-order-l1 E=$PWD/patches/experiments
ZY=$E/fusion-5-stream-zy-y-registers.patch S=$PWD/tests/patches/sabotage-q8-stock-order.patch
export VARIANTS="$L1 $L1+$ZY $L1+$ZY+$S" EVAL_VARIANTS="$L1 $L1+$ZY" FOCUS="4" KERNEL_PROGRAMS=none FLA_REFERENCE=0
export EVAL_FUSIONS=" " ROUNDS=3 PROMPTS=512 CHECK_BASE_OPS="MUL_MAT_VEC_FUSION" GPU0_STEPS="smoke race-mm check-mm eval" GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
RUN_TIMEOUT=150 NCU_SHAPES="mlp 28672x4096,output 248320x2048" ROUNDS=9 \
  bash scripts/stock_order_gpu_check.sh /tmp/stream > /tmp/stream-check.out 2>&1 || true
cp /tmp/stream-check.out /tmp/stream/ 2>/dev/null || true
tar -czf "$OUT/stream.tgz" -C /tmp stream 2>/dev/null || true
bash scripts/h200_session.sh /tmp/b poll $((555 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
