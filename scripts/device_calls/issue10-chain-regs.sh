#!/usr/bin/env bash
# Device call for issue #10 planned in session 39 (kernels/NOTES-chunked-gdn.md, "Step 4a, measured"): only the
# standalone program kernels/chunked_gdn_check.cu, no llama.cpp build, so it fits what is left of a session's device
# time (compile about 15 s, each run under a minute). Checks every chain against float64, then the sabotage run (every
# check must fail), and records clocks before and after; never changes them. Carry nothing: the program reads only
# kernels/. Results land in $OUT: chunked-gdn-standalone.json, chunked-gdn-standalone-sabotage.json, the logs and
# clocks.csv. NCU_CHAIN=1 adds one Nsight Compute pass (--once: the first case only, the 35B layer at T = 512) over step 4a's and step 4b's chains
# only, for session 39's open question (step 4b halved each warp's mma chains and got slower: where does a chunk's time
# go?): stall reasons, memory traffic and the SASS with stall samples, as ncu-chain*.csv(.xz); at most NCU_TIMEOUT
# (240) seconds, clocks left alone (--clock-control none).
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
if [[ ${NCU_CHAIN:-0} == 1 ]]; then
  ncu=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1 || true)
  if [[ -x $ncu ]]; then
    timeout "${NCU_TIMEOUT:-240}" "$ncu" --clock-control none -f -o /tmp/ncu-chain -k regex:'chunked_gdn_tc_chain_(regs|pairs)' \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section SourceCounters /tmp/chunked_gdn_check --once >"$OUT/logs/ncu-chain.log" 2>&1 || tail -n 5 "$OUT/logs/ncu-chain.log"
    "$ncu" --import /tmp/ncu-chain.ncu-rep --csv --page details >"$OUT/ncu-chain.csv" 2>>"$OUT/logs/ncu-chain.log" || true
    "$ncu" --import /tmp/ncu-chain.ncu-rep --csv --page raw >"$OUT/ncu-chain-raw.csv" 2>>"$OUT/logs/ncu-chain.log" || true
    "$ncu" --import /tmp/ncu-chain.ncu-rep --csv --page source --print-source sass 2>>"$OUT/logs/ncu-chain.log" \
      | python3 -c 'import lzma, shutil, sys; out = lzma.open(sys.stdout.buffer, "wb", preset=6); shutil.copyfileobj(sys.stdin.buffer, out); out.close()' \
      >"$OUT/ncu-chain-sass.csv.xz" || true
  else
    echo "ncu: not found on this host" >"$OUT/logs/ncu-chain.log"
  fi
  smi ncu
fi
