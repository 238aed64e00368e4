#!/usr/bin/env bash
# Device call planned in session 39 (kernels/NOTES-norm-quantize.md, "Session 39"): the confirmation run of #7's
# candidate stack, decided by the rule written there before it. Here first: scripts/device_calls/prepare.sh and
# slim_tree.sh on; carry [".bundle"] (no second model); then bash scripts/device_calls/poll.sh 520 at once after each
# return, until SESSION DONE, and slim_tree.sh off. Builds stock and one variant (about 5.5 minutes on a fresh host):
#   F1X+RW+RN+SG  session 39: decode 1.0622 [1.0459, 1.0818] of stock on an H100 (10 rounds), short of the 1.05 lower
#                 end its decision rule asks; its checks, log-probs, text, pp512 and sabotage were measured there
# One step: eval-decode, DECODE_ROUNDS (36) interleaved rounds of stock and the stack, 3 repetitions each, about 12 s
# a round: about 7 minutes. With the start about 15 minutes of device time; the rest of a fresh session's budget goes
# to scripts/device_calls/standalone.sh on the same warm machine (call it within 30 s of SESSION DONE).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments
F1X="fusion-1+$P/fusion-1-gated-q8.patch+$P/fusion-1-norm-weights-ahead.patch"
RW="$P/fusion-1-gated-reshaped-q8.patch+$P/fusion-1-glu-q8.patch+$P/fusion-1-glu-wide-q8.patch"
export VARIANTS="$F1X+$RW+$P/fusion-1-residual-norm.patch+$P/fusion-1-glu-wide-small-grids.patch"
export FOCUS="1" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " ROUNDS=3 PROMPTS=512
export DECODE_ROUNDS=${DECODE_ROUNDS:-36}
export GPU0_STEPS=${GPU0_STEPS:-"eval-decode"} GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
