#!/usr/bin/env bash
# First device call of a session whose plan depends on the card that comes (kernels/NOTES-stack.md, "Session 45: as
# run"): on an H200, #11's race (issue11-race-mm.sh, which needs the issue's machine); on any other card, #10's
# two-pass eval (issue10-two-pass-eval.sh). Writes the card's name to $OUT/card.txt. Carry [".bundle"]; then
# scripts/device_calls/poll.sh until SESSION DONE.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "$card" > "$OUT/card.txt"
if [[ "$card" == *H200* ]]; then
  echo "first-by-card: $card -> issue11-race-mm.sh"
  exec bash scripts/device_calls/issue11-race-mm.sh
fi
echo "first-by-card: $card -> issue10-two-pass-eval.sh"
exec bash scripts/device_calls/issue10-two-pass-eval.sh
