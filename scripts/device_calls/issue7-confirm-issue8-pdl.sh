#!/usr/bin/env bash
# Device call planned in session 39 (kernels/NOTES-norm-quantize.md, "Session 39"; NOTES-gdn-chains.md, "Session 34").
# Here first: scripts/device_calls/prepare.sh and slim_tree.sh on; carry [".bundle"] (no second model); then
# bash scripts/device_calls/poll.sh 520 at once after each return, until SESSION DONE, and slim_tree.sh off.
# Builds stock and three variants (about 7 minutes on a fresh host, as in session 39):
#   F1X+RW+RN+SG  #7's candidate stack, session 39: decode 1.0622 [1.0459, 1.0818] of stock on an H100 (10 rounds),
#                 short of the 1.05 lower end its decision rule asks; this call is the confirmation run
#   F2X           fusion-2 with conv-window, reshape-residual and state-rows (#8)
#   F2X+PDL       the same with fusion-2-pdl (fusion-2's kernels launched with programmatic dependent launch)
# Steps, most wanted first: eval-decode (DECODE_ROUNDS interleaved rounds of all four, 3 repetitions each; about 24 s
# a round, so 30 rounds about 12 minutes), eval (KL and text identity against stock, pp512/tg, two rounds), check-mm
# (#8's GATED_DELTA_NET cases on every variant). About 27 minutes of device time with the start; with less left, shorten
# it from the caller: DECODE_ROUNDS=20 GPU0_STEPS="eval-decode eval".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments
F1X="fusion-1+$P/fusion-1-gated-q8.patch+$P/fusion-1-norm-weights-ahead.patch"
RW="$P/fusion-1-gated-reshaped-q8.patch+$P/fusion-1-glu-q8.patch+$P/fusion-1-glu-wide-q8.patch"
SG_STACK="$F1X+$RW+$P/fusion-1-residual-norm.patch+$P/fusion-1-glu-wide-small-grids.patch"
F2X="fusion-2+$P/fusion-2-conv-window.patch+$P/fusion-2-reshape-residual.patch+$P/fusion-2-state-rows.patch"
export VARIANTS="$SG_STACK $F2X $F2X+$P/fusion-2-pdl.patch"
export FOCUS="1 2" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " ROUNDS=2 PROMPTS=512
export DECODE_ROUNDS=${DECODE_ROUNDS:-30}
export CHECK_BASE_OPS="GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION"
export GPU0_STEPS=${GPU0_STEPS:-"eval-decode eval check-mm"} GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
