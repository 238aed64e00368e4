#!/usr/bin/env bash
# The CPU benchmark of issue 5: 3 types x 6 shapes x 1 token, checked then timed (budget: 2 minutes on 2 cores).
#
#   scripts/cpu_mulmat_bench.sh BUILD_BIN_DIR [OUT_JSON]
#
# THREADS=1 avoids ggml CPU barrier stalls on a box whose cores are busy with other work (default: all cores).
set -euo pipefail
if [ $# -lt 1 ]; then sed -n '2,6p' "$0"; exit 2; fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
OUT=${2:-fusekit-results/bench-mulmat-cpu.json}
SECONDS=0
"${PYTHON:-python3}" -m ggml_bridge mulmat --lib-dir "stock=$1" --backend CPU --types q8_0,q4_0,q2_K \
  --shapes cpu-bench --tokens 1 --check-tokens 1 --rounds 5 --reps 2 --nodes 16 \
  ${THREADS:+--threads $THREADS} --out "$OUT"
echo "CPU sweep: ${SECONDS}s"
