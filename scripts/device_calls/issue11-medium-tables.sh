#!/usr/bin/env bash
# Device call for issue #11 (written in session 47, extended in session 48; kernels/NOTES-q8-gemv.md, "Session 47"
# and "Session 48"): L1 + ZY against L1 + ZY + fusion-5-stream-zzz-medium-tables (M: plain Q8_0 tables of 2^19 blocks
# and more take the stream kernel) and L1 + ZY + M + fusion-5-stream-zzzz-mmvq-short-tables (F: short plain Q8_0
# tables stay with MMVQ), stock beside them: the bridge race over the shape table (with the 35B output head) at 1, 2,
# 4 and 8 tokens, every contender checked against the float64 reference first, and the sabotaged build's bridge
# check; test-backend-ops on the builds and the sabotage; the 35B eval (speed, KL, text). Beside the builds, the
# stream check (GPU check with the medium cases through plan, timing with 12288 x 2560). The predictions are the patch
# headers'. Any card (the race's verdicts are against stock on the same card); about 19 minutes. Carry [".bundle"];
# then scripts/device_calls/poll.sh until SESSION DONE. SHORT=1: the race of L1 + ZY, M and F at one token only, no
# checks or eval (about 500 s with the machine's start). STEPS overrides the full call's steps ("smoke race-mm eval"
# drops test-backend-ops, about 5 minutes).
# LEAN=1 (session 49: the full call needs about 22 minutes of device time, and sessions 48 and 49 lost 690-1,040 s of
# their 1,800 to starts that got no machine): stock, ZY, F and F's sabotage only (F holds M), the 35B eval of ZY and F
# side by side (do M + F cost decode time?), test-backend-ops with the sabotage, the race at 1 token (RACE_TOKENS);
# on an H200 the race first (#11's first race there), elsewhere the eval first. About 16 minutes with the start.
# LEAN=1 SABOTAGE=0 (session 50, 959 s left after failed starts): the same without F's sabotage build and
# test-backend-ops, about 12 minutes with the start (stock's build 267 s, each stack about 70 s through ccache).
# LEAN, session 52 (results/h100-2026-12-07-session52-race-cap-full/): the stack with fusion-5-stream-zzzzz-residency-cap,
# -zzzzzz-full-grid and -zzzzzzz-fill-or-cap (W, the best of that session's H100 races) joins the race; the eval puts
# W beside ZY (F alone did not buy decode time in session 50), and the sabotage build is W's. About 70 s more build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
L1=stack-1-5-stock-order-l1 E=$PWD/patches/experiments
ZY=$E/fusion-5-stream-zy-y-registers.patch M=$E/fusion-5-stream-zzz-medium-tables.patch
F=$E/fusion-5-stream-zzzz-mmvq-short-tables.patch
W="$L1+$ZY+$M+$F+$E/fusion-5-stream-zzzzz-residency-cap.patch+$E/fusion-5-stream-zzzzzz-full-grid.patch"
W+="+$E/fusion-5-stream-zzzzzzz-fill-or-cap.patch"
S=$PWD/tests/patches/sabotage-q8-stock-order.patch
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 > "$OUT/card.txt"
export FOCUS="4" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " GPU1_STEPS=" "
# the eval's and check-mm's settings (SHORT runs neither)
export ROUNDS=${ROUNDS:-3} PROMPTS=512 CHECK_BASE_OPS="MUL_MAT_VEC_FUSION"
card=$(cat "$OUT/card.txt")
if [[ "${LEAN:-0}" == 1 ]]; then
  export VARIANTS="$L1+$ZY $L1+$ZY+$M+$F $W $W+$S" EVAL_VARIANTS="$L1+$ZY $W"
  export RACE_TOKENS="${RACE_TOKENS:-1}"
  if [[ $card == *H200* ]]; then order="smoke race-mm eval check-mm"; else order="smoke eval check-mm race-mm"; fi
  if [[ "${SABOTAGE:-1}" == 0 ]]; then  # no sabotage build, no test-backend-ops: about 260 s less
    VARIANTS="$L1+$ZY $L1+$ZY+$M+$F $W" order=${order/ check-mm/}
  fi
  export GPU0_STEPS="${STEPS:-$order}"
  bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
elif [[ "${SHORT:-0}" == 1 ]]; then
  export VARIANTS="$L1+$ZY $L1+$ZY+$M $L1+$ZY+$M+$F" RACE_TOKENS=1 GPU0_STEPS="race-mm"
  bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
else
  export VARIANTS="$L1+$ZY $L1+$ZY+$M $L1+$ZY+$M+$F $L1+$ZY+$M+$F+$S" EVAL_VARIANTS="$L1+$ZY $L1+$ZY+$M $L1+$ZY+$M+$F"
  export GPU0_STEPS="${STEPS:-smoke race-mm check-mm eval}"
  bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
  RUN_TIMEOUT=150 NCU_SHAPES="v100 attn qkv 12288x2560" ROUNDS=9 \
    bash scripts/stock_order_gpu_check.sh /tmp/stream > /tmp/stream-check.out 2>&1 || true
  cp /tmp/stream-check.out /tmp/stream/ 2>/dev/null || true
  tar -czf "$OUT/stream.tgz" -C /tmp stream 2>/dev/null || true
fi
bash scripts/h200_session.sh /tmp/b poll $((555 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
