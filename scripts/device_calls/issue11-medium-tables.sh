#!/usr/bin/env bash
# Device call for issue #11 (session 47; kernels/NOTES-q8-gemv.md, "Session 47"): the bridge race over the shape table
# at one token of L1 + ZY against L1 + ZY + fusion-5-stream-zzz-medium-tables (plain Q8_0 tables of 2^19 blocks and
# more take the stream kernel), stock beside them; every contender checked against the float64 reference first. The
# prediction is the patch header's. Fits about 450 s of device time with the machine's start (three builds, the race
# only). Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE when the call itself did not finish.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
L1=stack-1-5-stock-order-l1 E=$PWD/patches/experiments
ZY=$E/fusion-5-stream-zy-y-registers.patch M=$E/fusion-5-stream-zzz-medium-tables.patch
export VARIANTS="$L1+$ZY $L1+$ZY+$M" FOCUS="4" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " RACE_TOKENS=1
export GPU0_STEPS="race-mm" GPU1_STEPS=" "
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 > "$OUT/card.txt"
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((560 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
