#!/usr/bin/env bash
# The stock mul_mat sweep on a CUDA build, plus the cross-check against test-backend-ops.
#
#   scripts/h200_mulmat_sweep.sh BUILD_BIN_DIR OUT_DIR
#
# BUILD_BIN_DIR: a stock CUDA build's bin/ (BUILD_SHARED_LIBS=ON: libggml*.so and test-backend-ops).
# Needs python3 with numpy, click and cffi (gitpython is not needed: this uses python -m ggml_bridge).
# Writes into OUT_DIR: bench-mulmat-h200-stock.json (+ .txt report), bench-mulmat-h200-stock-1copy.json,
# test-backend-ops-mul_mat.log, crosscheck.json/.txt, bench-mulmat-h200-sabotage.json, gpu.txt, a log per step. Expected 3-5 minutes on an H200.
# A dry run elsewhere: DEVICE=CPU SHAPES=512x2048 CHECK_TOKENS=1 EXTRA="--rounds 2 --reps 1 --nodes 2" \
#   scripts/h200_mulmat_sweep.sh BIN OUT      (EXTRA is appended to both bench commands)
set -euo pipefail
if [ $# -ne 2 ]; then sed -n '2,11p' "$0"; exit 2; fi
BIN=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
"$PY" -c 'import cffi, numpy, click' || { echo "missing python packages (pip install cffi pycparser)"; exit 2; }
[ -x "$BIN/test-backend-ops" ] || { echo "no test-backend-ops in $BIN"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" || true
TYPES=q8_0,q4_0,q2_K,f16
DEVICE=${DEVICE:-CUDA0}
SHAPES=${SHAPES:-seed}
CHECK_TOKENS=${CHECK_TOKENS:-1,2,4,8,64,512}
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
RC=0
SECONDS=0

echo "[$SECONDS s] 1/4 sweep: $SHAPES shapes x $TYPES x tokens 1,8 (checked, then timed with rotating copies)"
"$PY" -m ggml_bridge mulmat --lib-dir "stock=$BIN" --backend "$DEVICE" --types $TYPES --shapes "$SHAPES" --tokens 1,8 \
  --check-tokens "$CHECK_TOKENS" --out "$OUT/bench-mulmat-h200-stock.json" "${EXTRA_ARGS[@]}" \
  > "$OUT/bench-mulmat-h200-stock.txt" 2> "$OUT/sweep.log" || { RC=$?; echo "sweep exit $RC: see $OUT/sweep.log"; }
tail -n 3 "$OUT/bench-mulmat-h200-stock.txt"

echo "[$SECONDS s] 2/4 the cross-check shape with one weight copy (what test-backend-ops measures)"
"$PY" -m ggml_bridge mulmat --lib-dir "stock=$BIN" --backend "$DEVICE" --types $TYPES --shapes 4096x14336 --tokens 1,8 \
  --check-tokens "$CHECK_TOKENS" --copies 1 --nodes 64 --out "$OUT/bench-mulmat-h200-stock-1copy.json" "${EXTRA_ARGS[@]}" \
  > "$OUT/bench-mulmat-h200-stock-1copy.txt" 2> "$OUT/sweep-1copy.log" || { RC=$?; echo "1-copy run exit $RC"; }

echo "[$SECONDS s] 3/4 test-backend-ops perf -o MUL_MAT at m=4096 k=14336 n=1,8"
"$BIN/test-backend-ops" perf -o MUL_MAT -b "$DEVICE" -p 'type_a=(q8_0|q4_0|q2_K|f16),type_b=f32,m=4096,n=(1|8),k=14336,' \
  > "$OUT/test-backend-ops-mul_mat.log" 2>&1 || { RC=$?; echo "test-backend-ops exit $RC"; }
"$PY" -m ggml_bridge.crosscheck "$OUT/test-backend-ops-mul_mat.log" "$OUT/bench-mulmat-h200-stock.json" \
  "$OUT/bench-mulmat-h200-stock-1copy.json" > "$OUT/crosscheck.json" 2> "$OUT/crosscheck.txt"
cat "$OUT/crosscheck.txt"

echo "[$SECONDS s] 4/4 sabotage on the device: every quantized check must fail, f16 must pass"
"$PY" -m ggml_bridge mulmat --lib-dir "stock=$BIN" --backend "$DEVICE" --types $TYPES --shapes 512x2048,4096x14336 \
  --tokens 1 --check-tokens 8,512 --check --sabotage --out "$OUT/bench-mulmat-h200-sabotage.json" \
  > "$OUT/sabotage.txt" 2> "$OUT/sabotage.log" || { RC=$?; echo "sabotage run exit $RC"; }
tail -n 2 "$OUT/sabotage.txt"
echo "[$SECONDS s] done: $OUT (exit $RC)"
exit $RC
