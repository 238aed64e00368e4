#!/usr/bin/env bash
# Device call for issue #8 (planned in session 44; kernels/NOTES-gdn-chains.md, "After session 44"): F2X + pdl (session
# 44's best fusion-2 variant, 1.0417x stock on an H100) against F2X + pdl + fusion-2-within-gdn (the q/k/beta launch
# folded into the gated-delta-net kernel), and fusion-2's sabotage under the experiment, whose GDN_WITHIN,
# GDN_STATE_ROWS and GDN_CHAINS must fail. Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE.
# About 17 minutes (four builds). Predicted (the patch header): checks pass, the sabotage build fails them, log-probs
# byte-identical to F2X's, decode +0.7-1.2% over F2X + pdl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments X=$PWD/tests/patches
F2X="fusion-2+$P/fusion-2-conv-window.patch+$P/fusion-2-reshape-residual.patch+$P/fusion-2-state-rows.patch"
SABOTAGED="fusion-2+$P/fusion-2-state-rows.patch+$X/sabotage-gdn-chains.patch+$P/fusion-2-within-gdn.patch"
export VARIANTS="$F2X+$P/fusion-2-pdl.patch $F2X+$P/fusion-2-pdl.patch+$P/fusion-2-within-gdn.patch $SABOTAGED"
export FOCUS="2" EVAL_FUSIONS=" " ROUNDS=2 PROMPTS=512 DECODE_ROUNDS=${DECODE_ROUNDS:-15}
export CHECK_BASE_OPS="GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION" GPU0_STEPS="smoke check-mm eval eval-decode" GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
