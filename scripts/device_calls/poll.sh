#!/usr/bin/env bash
# Every device call after a session's first: wait for the detached session (scripts/h200_session.sh run) up to N
# seconds (default 560, under the run tool's 600-s limit), then pack what it has into $OUT. Call it again within
# the host's 30-s idle window until the output says SESSION DONE (a machine given back keeps only what was packed).
#   bash scripts/device_calls/poll.sh [N]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# a model carried in parts over the calls (scripts/carry_model.sh split MODEL .carry 40): joined, checked, into
# /tmp/models once every part is here (eval2 waits SECOND_WAIT seconds for it)
for sha in .carry/*.sha256; do
  [[ -f "$sha" ]] || continue
  name=$(basename "$sha" .sha256)
  [[ -f "/tmp/models/$name" ]] || { mkdir -p /tmp/models; bash scripts/carry_model.sh join .carry "$name" "/tmp/models/$name" || true; }
done
bash scripts/h200_session.sh /tmp/b poll "${1:-560}"
bash scripts/h200_session.sh /tmp/b pack "$OUT"
