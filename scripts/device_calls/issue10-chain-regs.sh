#!/usr/bin/env bash
# Device call of session 39's four standalone runs (results/h100-2026-12-05-session39-chain-regs): #10's standalone
# program alone, now scripts/device_calls/standalone.sh with PROGRAMS=chunked_gdn (NCU_CHAIN=1 as there).
set -euo pipefail
PROGRAMS=chunked_gdn exec bash "$(dirname "${BASH_SOURCE[0]}")/standalone.sh"
