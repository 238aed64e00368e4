#!/usr/bin/env bash
# First device call of session 55 (kernels/NOTES-q8-gemv.md, "Session 55"): on any card, the standalone program
# kernels/q8_rows_reader_check.cu (#11's short tables: a product that quantizes its own f32 input, several rows a CTA,
# against ggml's quantize launch + MMVQ; about 1 minute, nothing built), its results packed under $OUT/standalone/.
# Then, on an H200 only, the session planned since session 54 (kernels/NOTES-stack.md, "Session 54: as run"): #11's
# 5-process race of fill-or-cap against stock and the 35B eval, in issue11-node-profile.sh; on any other card nothing
# more (give the machine back). Writes the card's name to $OUT/card.txt. Carry [".bundle"]; on an H200 then
# scripts/device_calls/poll.sh within 30 s of each reply until SESSION DONE.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "$card" > "$OUT/card.txt"
mkdir -p "$OUT/standalone"
OUT="$OUT/standalone" PROGRAMS=q8_rows_reader bash scripts/device_calls/standalone.sh
if [[ "$card" == *H200* && "${PLANNED_ON_H200:-1}" == 1 ]]; then
  echo "issue11-rows-reader: $card -> issue11-node-profile.sh (the 5-process race and the 35B eval)"
  export RACE_PROCESSES=5 FILL_ONLY=1 STEPS="race-mm eval" ROUNDS=3 RACE_TOKENS=1
  exec bash scripts/device_calls/issue11-node-profile.sh
fi
echo "issue11-rows-reader: $card: the standalone program only (give the machine back)"
