#!/usr/bin/env bash
# First device call for issue #7 (planned in session 36; kernels/NOTES-norm-quantize.md, "Session 36"). Carry
# [".bundle"] (made by `fusekit init && fusekit bundle -o .bundle --debs DIR`); then bash scripts/device_calls/poll.sh
# at once after each return, until SESSION DONE. Builds stock and three variants (about 10 minutes on a fresh host):
#   F1X+RW     fusion-1 with its five experiments before this session (RW: gated-reshaped-q8, glu-q8, glu-wide-q8)
#   F1X+RW+RN  the same with fusion-1-residual-norm (the residual ADDs inside the norm: 70 launches a token fewer)
#   RN's own sabotage on its base (FUSEKIT_RESIDUAL_NORM must fail, FUSEKIT_NORM_Q8(_AHEAD) must pass)
# Steps, most wanted first: eval (KL, text identity, pp512/tg against stock, one round), profile-a (launches and
# kernel time a token), eval-decode (10 interleaved decode rounds), check-mm (the variants' Checks and the extra ops).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments X=$PWD/tests/patches
F1X="fusion-1+$P/fusion-1-gated-q8.patch+$P/fusion-1-norm-weights-ahead.patch"
RW="$P/fusion-1-gated-reshaped-q8.patch+$P/fusion-1-glu-q8.patch+$P/fusion-1-glu-wide-q8.patch"
RN="$P/fusion-1-residual-norm.patch"
export VARIANTS="$F1X+$RW $F1X+$RW+$RN fusion-1+$P/fusion-1-norm-weights-ahead.patch+$RN+$X/sabotage-residual-norm.patch"
export FOCUS="1" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " ROUNDS=1 PROMPTS=512 DECODE_ROUNDS=10
export CHECK_BASE_OPS="MUL_MAT_VEC_FUSION" CHECK_EXTRA_OPS="FUSEKIT_NORM_Q8 ADD_RMS_NORM ADD_ADD RMS_NORM_MUL_ADD"
export GPU0_STEPS="eval profile-a eval-decode check-mm" GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
