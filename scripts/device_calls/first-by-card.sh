#!/usr/bin/env bash
# First device call of a session whose plan depends on the card that comes (kernels/NOTES-stack.md, "Session 46: as
# run"): on an H200, #11's race with the medium-tables experiment (issue11-medium-tables.sh, which since session 47
# holds what issue11-race-mm.sh raced, stock and L1 + ZY, and the 35B head); on any other card, the device
# call named by OTHER_CARD_CALL (a script under scripts/device_calls/; session 46 ran issue10-two-pass-eval.sh), or
# nothing when it is unset. Writes the card's name to $OUT/card.txt. Carry [".bundle"]; then
# scripts/device_calls/poll.sh until SESSION DONE.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "$card" > "$OUT/card.txt"
if [[ "$card" == *H200* ]]; then
  echo "first-by-card: $card -> issue11-medium-tables.sh"
  exec bash scripts/device_calls/issue11-medium-tables.sh
fi
if [[ -z "${OTHER_CARD_CALL:-}" ]]; then
  echo "first-by-card: $card is not an H200 and OTHER_CARD_CALL is unset: nothing run (give the machine back)"
  exit 0
fi
echo "first-by-card: $card -> $OTHER_CARD_CALL"
exec bash "scripts/device_calls/$OTHER_CARD_CALL"
