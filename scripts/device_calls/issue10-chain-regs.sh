#!/usr/bin/env bash
# Device call for issue #10 planned in session 39 (kernels/NOTES-chunked-gdn.md, "Step 4a, measured"): only the
# standalone program kernels/chunked_gdn_check.cu, no llama.cpp build, so it fits what is left of a session's device
# time (compile about 15 s, each run under a minute). Checks every chain against float64, then the sabotage run (every
# check must fail), and records clocks before and after; never changes them. Carry nothing: the program reads only
# kernels/. Results land in $OUT: chunked-gdn-standalone.json, chunked-gdn-standalone-sabotage.json, the logs and
# clocks.csv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$OUT/logs"
smi() { nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader | sed "s/^/$1, /" >>"$OUT/clocks.csv" 2>&1 || true; }
# the device's copy of .git need not be this checkout's: the sources' own hashes say what ran
sha256sum kernels/chunked_gdn_check.cu kernels/*.cuh >"$OUT/sources.sha256"
smi start
nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -Xptxas -v -Ikernels -o /tmp/chunked_gdn_check kernels/chunked_gdn_check.cu \
  >"$OUT/logs/nvcc-chunked-gdn.log" 2>&1 || { tail -n 20 "$OUT/logs/nvcc-chunked-gdn.log"; exit 1; }
smi check
timeout 200 /tmp/chunked_gdn_check --json "$OUT/chunked-gdn-standalone.json" 2>&1 | tee "$OUT/logs/chunked-gdn.log" || true
smi sabotage
timeout 200 /tmp/chunked_gdn_check --sabotage --json "$OUT/chunked-gdn-standalone-sabotage.json" 2>&1 \
  | tee "$OUT/logs/chunked-gdn-sabotage.log" | tail -n 2 || true
smi done
