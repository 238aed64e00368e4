#!/usr/bin/env bash
# Device call for issue #7 planned in session 38 (kernels/NOTES-norm-quantize.md, "Session 38"). Here first:
# scripts/device_calls/prepare.sh (.bundle and .carry) and scripts/device_calls/slim_tree.sh on; then
# bash scripts/device_calls/poll.sh at once after each return, until SESSION DONE, and slim_tree.sh off. Builds stock
# and three variants (about 8 minutes on a fresh host: stock 4.3-5.7, the variants side by side):
#   F1X+RW+RN     session 38's best: fusion-1, its five experiments before session 37 and fusion-1-residual-norm
#   F1X+RW+RN+SG  the same with fusion-1-glu-wide-small-grids (the shared expert's GLU product back on ggml's kernel:
#                 40 launches a token more, 70-110 us a token less kernel time)
#   the whole chain under fusion-1's sabotage (every experiment's Checks must fail: FUSEKIT_GATED_Q8, FUSEKIT_GLU_Q8,
#                 FUSEKIT_NORM_Q8_AHEAD, FUSEKIT_RESIDUAL_NORM; open since session 35)
# Beside the builds (the GPU is idle then) the kernels step runs kernels/chunked_gdn_check.cu for #10: step 4a's chain
# with the state in registers, checked against float64 and timed beside step 3e's chain (NOTES-chunked-gdn.md,
# "Session 38"); no Nsight Compute pass, each run stopped after 120 s (session 20: both runs and more ended within a minute of the
# builds), so a hang costs the #7 steps at most about 4 minutes.
# Steps, most wanted first: eval (KL, text identity, pp512/tg against stock, three rounds), profile-a (launches and
# kernel time a token), eval-decode (interleaved decode rounds), check-mm (the variants' Checks and the extra ops),
# eval2 (the real SmolLM2-135M: KL and text identity).
# SmolLM2 (98 MB) travels in two parts (prepare.sh splits it). Carry on this call [".bundle",
# ".carry/SmolLM2-135M-Instruct.Q4_1.gguf.sha256", ".carry/SmolLM2-135M-Instruct.Q4_1.gguf.part-1"] (about 60 MiB
# with the slim tree), on the first poll [".carry/SmolLM2-135M-Instruct.Q4_1.gguf.part-2"]; poll.sh joins the parts
# once both are there, long before eval2 starts. With less than a fresh session's device time left, shorten it from
# the caller: DECODE_ROUNDS=6 GPU0_STEPS="eval profile-a eval-decode check-mm".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments X=$PWD/tests/patches
F1X="fusion-1+$P/fusion-1-gated-q8.patch+$P/fusion-1-norm-weights-ahead.patch"
RW="$P/fusion-1-gated-reshaped-q8.patch+$P/fusion-1-glu-q8.patch+$P/fusion-1-glu-wide-q8.patch"
RN="$P/fusion-1-residual-norm.patch" SG="$P/fusion-1-glu-wide-small-grids.patch"
SABOTAGED="fusion-1+$X/sabotage-norm-quantize.patch+$P/fusion-1-gated-q8.patch+$P/fusion-1-norm-weights-ahead.patch+$RW+$RN+$SG"
export VARIANTS="$F1X+$RW+$RN $F1X+$RW+$RN+$SG $SABOTAGED"
export FOCUS="1" KERNEL_PROGRAMS=chunked_gdn KERNELS_NCU=0 KERNEL_TIMEOUT=120 FLA_REFERENCE=0 EVAL_FUSIONS=" " ROUNDS=3
export PROMPTS=512
export DECODE_ROUNDS=${DECODE_ROUNDS:-10}
export CHECK_BASE_OPS="MUL_MAT_VEC_FUSION" CHECK_EXTRA_OPS="FUSEKIT_NORM_Q8 ADD_RMS_NORM ADD_ADD RMS_NORM_MUL_ADD"
export SECOND_MODEL=/tmp/models/SmolLM2-135M-Instruct.Q4_1.gguf SECOND_NAME=f1-smollm2 SECOND_WAIT=900
export GPU0_STEPS=${GPU0_STEPS:-"eval profile-a eval-decode check-mm eval2"} GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
