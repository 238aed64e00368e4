#!/usr/bin/env bash
# First device call of session 55 (kernels/NOTES-q8-gemv.md, "Session 55"), any card:
# 1. the standalone program kernels/q8_rows_reader_check.cu (#11's short tables: a product that quantizes its own f32
#    input, several rows a CTA, against ggml's quantize launch + MMVQ; about 1 minute, nothing built), packed under
#    $OUT/standalone/;
# 2. then a detached session: stock, fill (the stack L1 + ZY + M + F + cap + full grid + fill-or-cap) and fill +
#    fusion-5-stream-zzzzzzzz-rows-reader (RR: the same reader in ggml for the short tables, kReaderRows = 4), and RR's
#    sabotage build; the one-token race over the shape table in RACE_PROCESSES (3) processes a contender with stock's
#    A/A control (every contender checked against float64 first, the sabotage's bridge check must fail). The
#    predictions are the patch's header. About 15 minutes with the machine's start (the program about 90 s, builds
#    about 560 s, race about 200 s). STEPS="race-mm check-mm" adds test-backend-ops of the builds (about 150 s; the
#    sabotage's must fail).
# Writes the card's name to $OUT/card.txt. Carry [".bundle"]; then scripts/device_calls/poll.sh within 30 s of each
# reply until SESSION DONE. STANDALONE=0 skips step 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 > "$OUT/card.txt"
# the standalone program first, on an idle host: its graph replays must not wait on a CPU busy with the builds
if [[ "${STANDALONE:-1}" == 1 ]]; then
  mkdir -p "$OUT/standalone"
  OUT="$OUT/standalone" PROGRAMS=q8_rows_reader bash scripts/device_calls/standalone.sh
fi
L1=stack-1-5-stock-order-l1 E=$PWD/patches/experiments
W="$L1+$E/fusion-5-stream-zy-y-registers.patch+$E/fusion-5-stream-zzz-medium-tables.patch"
W+="+$E/fusion-5-stream-zzzz-mmvq-short-tables.patch+$E/fusion-5-stream-zzzzz-residency-cap.patch"
W+="+$E/fusion-5-stream-zzzzzz-full-grid.patch+$E/fusion-5-stream-zzzzzzz-fill-or-cap.patch"
RR=$E/fusion-5-stream-zzzzzzzz-rows-reader.patch S=$PWD/tests/patches/sabotage-q8-stock-order.patch
export FOCUS="4" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " GPU1_STEPS=" "
export VARIANTS="$W $W+$RR $W+$RR+$S" GPU0_STEPS="${STEPS:-race-mm}"
# FILL=0: without fill's own build and contender (about 70 s of build and a quarter of the race less); on the short
# tables fill runs stock's node, so stock is the comparison there
[[ "${FILL:-1}" != 0 ]] || VARIANTS="$W+$RR $W+$RR+$S"
export RACE_TOKENS=1 RACE_PROCESSES=${RACE_PROCESSES:-3} CHECK_BASE_OPS="MUL_MAT_VEC_FUSION"
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((555 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
