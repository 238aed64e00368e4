#!/usr/bin/env bash
# Run here, not on the device. A device call sends every tracked file, and results/ alone passed 40 MB in session 37:
# with .bundle and one 40 MiB model part the call was refused (64 MiB limit). No device call reads results/, so for
# the length of a device session take it out of the index (the files stay on disk) and ignore it; put it back after
# the last call, before the next commit.
#   bash scripts/device_calls/slim_tree.sh on    # before the first call
#   bash scripts/device_calls/slim_tree.sh off   # after SESSION DONE
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exclude=$(git rev-parse --git-path info/exclude)
case "${1:-}" in
  on)
    git diff --cached --quiet -- results || { echo "slim_tree: results/ has staged changes; commit them first" >&2; exit 1; }
    git rm -r -q --cached results
    grep -qx '/results/' "$exclude" 2>/dev/null || echo '/results/' >>"$exclude"
    ;;
  off)
    sed -i '\|^/results/$|d' "$exclude"
    git reset -q -- results
    ;;
  *) echo "usage: slim_tree.sh on|off" >&2; exit 2 ;;
esac
echo "slim_tree $1: $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) bytes tracked"
