#!/usr/bin/env bash
# Device call for issue #8 (planned in session 34 as call C; kernels/NOTES-gdn-chains.md, "Session 34"): F2X (fusion-2
# with conv-window, reshape-residual and state-rows) against F2X + fusion-2-pdl (fusion-2's three kernels launched
# with programmatic dependent launch). Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE.
# About 14 minutes. Predicted: log-probs F2X's, decode +1-2.5% over F2X.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments
F2X="fusion-2+$P/fusion-2-conv-window.patch+$P/fusion-2-reshape-residual.patch+$P/fusion-2-state-rows.patch"
export VARIANTS="$F2X $F2X+$P/fusion-2-pdl.patch" FOCUS="2" EVAL_FUSIONS=" " ROUNDS=2 PROMPTS=512 DECODE_ROUNDS=15
export CHECK_BASE_OPS="GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION" GPU0_STEPS="smoke check-mm eval eval-decode" GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
