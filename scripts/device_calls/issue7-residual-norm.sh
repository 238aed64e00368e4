#!/usr/bin/env bash
# First device call for issue #7 (planned in session 36, run in session 37 on an H100, planned again in session 37:
# kernels/NOTES-norm-quantize.md, "Session 37"). Here first: scripts/device_calls/prepare.sh (.bundle and .carry)
# and scripts/device_calls/slim_tree.sh on; then bash scripts/device_calls/poll.sh at once after each return, until
# SESSION DONE, and slim_tree.sh off. Builds stock and three variants (about 8 minutes on a fresh host: stock 5.7,
# the variants side by side):
#   F1X+RW     fusion-1 with its five experiments before this session (RW: gated-reshaped-q8, glu-q8, glu-wide-q8)
#   F1X+RW+RN  the same with fusion-1-residual-norm (the residual ADDs inside the norm: 69 launches a token fewer)
#   RN's own sabotage on its base (FUSEKIT_RESIDUAL_NORM must fail, FUSEKIT_NORM_Q8(_AHEAD) must pass)
# Steps, most wanted first: eval (KL, text identity, pp512/tg against stock, three rounds: pp512's interval from one
# process was too wide to say anything in session 37), profile-a (launches and kernel time a token), eval-decode (10
# interleaved decode rounds), eval2 (the real SmolLM2-135M, #7's second model: KL and text identity), check-mm (the
# variants' Checks and the extra ops).
# SmolLM2 (98 MB) travels in two parts (prepare.sh splits it). Carry on this call [".bundle",
# ".carry/SmolLM2-135M-Instruct.Q4_1.gguf.sha256", ".carry/SmolLM2-135M-Instruct.Q4_1.gguf.part-1"] (about 60 MiB
# with the slim tree), on the first poll [".carry/SmolLM2-135M-Instruct.Q4_1.gguf.part-2"]; poll.sh joins the parts
# once both are there, long before eval2 starts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments X=$PWD/tests/patches
F1X="fusion-1+$P/fusion-1-gated-q8.patch+$P/fusion-1-norm-weights-ahead.patch"
RW="$P/fusion-1-gated-reshaped-q8.patch+$P/fusion-1-glu-q8.patch+$P/fusion-1-glu-wide-q8.patch"
RN="$P/fusion-1-residual-norm.patch"
export VARIANTS="$F1X+$RW $F1X+$RW+$RN fusion-1+$P/fusion-1-norm-weights-ahead.patch+$RN+$X/sabotage-residual-norm.patch"
export FOCUS="1" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " ROUNDS=3 PROMPTS=512
# A call with less device time left may shorten these: DECODE_ROUNDS=6 GPU0_STEPS="eval profile-a eval-decode check-mm".
export DECODE_ROUNDS=${DECODE_ROUNDS:-10}
export CHECK_BASE_OPS="MUL_MAT_VEC_FUSION" CHECK_EXTRA_OPS="FUSEKIT_NORM_Q8 ADD_RMS_NORM ADD_ADD RMS_NORM_MUL_ADD"
export SECOND_MODEL=/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf SECOND_NAME=f1-smollm2 SECOND_WAIT=900
export GPU0_STEPS=${GPU0_STEPS:-"eval profile-a eval-decode eval2 check-mm"} GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
