#!/usr/bin/env bash
# Device call: standalone kernel programs only (kernels/<name>_check.cu), no llama.cpp build, so it fits what is left
# of a session's device time (each compiles in about 15 s and runs in under a minute). PROGRAMS names them (default
# "chunked_gdn reader_quantize"); each is checked against float64, then run under --sabotage (every check must fail),
# with clocks recorded between runs, never changed. Carry nothing: the programs read only kernels/. Results land in
# $OUT: <name>-standalone.json, <name>-standalone-sabotage.json, logs/, clocks.csv and sources.sha256 (the device's
# copy of .git need not be this checkout's: the sources' own hashes say what ran).
# NCU_CHAIN=1 adds one Nsight Compute pass (--once: the first case only, the 35B layer at T = 512) over step 4a's and
# step 4b's chains (kernels/NOTES-chunked-gdn.md, "Step 4b as measured": where does a chunk's time go?): stall
# reasons, memory traffic and the SASS with stall samples, as ncu-chain*.csv(.xz); at most NCU_TIMEOUT (240) seconds,
# clocks left alone (--clock-control none).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$OUT/logs"
smi() { nvidia-smi --query-gpu=timestamp,name,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader | sed "s/^/$1, /" >>"$OUT/clocks.csv" 2>&1 || true; }
sha256sum kernels/*_check.cu kernels/*.cuh >"$OUT/sources.sha256"
smi start
for program in ${PROGRAMS:-chunked_gdn reader_quantize}; do
  name=${program//_/-}
  nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -Xptxas -v -Ikernels -o "/tmp/${program}_check" "kernels/${program}_check.cu" \
    >"$OUT/logs/nvcc-$name.log" 2>&1 || { tail -n 20 "$OUT/logs/nvcc-$name.log"; continue; }
  smi "$name check"
  timeout 200 "/tmp/${program}_check" --json "$OUT/$name-standalone.json" 2>&1 | tee "$OUT/logs/$name.log" || true
  smi "$name sabotage"
  timeout 200 "/tmp/${program}_check" --sabotage --json "$OUT/$name-standalone-sabotage.json" 2>&1 \
    | tee "$OUT/logs/$name-sabotage.log" | tail -n 2 || true
done
smi done
if [[ ${NCU_CHAIN:-0} == 1 && -x /tmp/chunked_gdn_check ]]; then
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
