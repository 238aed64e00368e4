#!/usr/bin/env bash
# The fusion-1 (norm-quantize) session on the H200, in steps that each fit one 10-minute device command.
# Builds, model and setup come from scripts/gpu_batch.sh; results land in the batch folder B.
# Never run yet: fusion-1 is a draft that has only been compile-checked (kernels/NOTES-norm-quantize.md).
#
#   scripts/h200_fusion1.sh B start     # setup; the standalone epilogue check (fast math and IEEE builds),
#                                       # its sabotage run; detached CUDA builds of stock, fusion-1,
#                                       # fusion-1+sabotage, fusion-1+fusion-5; 35B model
#   scripts/h200_fusion1.sh B wait      # poll the builds
#   scripts/h200_fusion1.sh B check     # test-backend-ops: FUSEKIT_NORM_Q8 and every RMS_NORM/MUL_MAT/MUL_MAT_ID/
#                                       # fusion case pass; sabotage fails; sabotage with fusion disabled passes
#   scripts/h200_fusion1.sh B eval      # fusekit eval fusion-1 vs stock on the 35B preset (tok/s, ppl, KL, text)
#   scripts/h200_fusion1.sh B profile   # fusekit profile: launches removed per token (16 tokens)
#   scripts/h200_fusion1.sh B pack OUT  # tar the results (not models, not traces) into OUT
#
# Never changes clocks or power settings: each step records clocks and temperature instead.
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
SABOTAGE=$REPO/tests/patches/sabotage-norm-quantize.patch
VARIANTS=(fusion-1 "fusion-1+$SABOTAGE" fusion-1+fusion-5)
mkdir -p "$B/results" "$B/logs"
fusekit() { python3 -c 'import sys; from fusekit.cli import main; sys.argv[0] = "fusekit"; main()' "$@"; }
use_site() {
  export PYTHONPATH="$REPO:$FUSEKIT_HOME/site${PYTHONPATH:+:$PYTHONPATH}"
  FUSEKIT_NSYS_LIBS=$(dirname "$(find "$FUSEKIT_HOME/nsys-debs" -name 'libdw.so.1' | head -n 1)")
  export FUSEKIT_NSYS_LIBS
}
bin_of() { ls -d "$FUSEKIT_HOME"/trees/"$1"/build-cuda*/bin | head -n 1; }
smi() { nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader \
  >>"$B/results/clocks.csv" 2>&1 || true; echo "$1" >>"$B/results/clocks.csv"; }

tbo() {  # tbo NAME EXPECT BIN [ENV=VAL] ARGS...: test-backend-ops on CUDA0, EXPECT pass|fail
  local name=$1 expect=$2 bin=$3; shift 3
  local envs=()
  while [[ $# -gt 0 && "$1" == *=* && "$1" != -* ]]; do envs+=("$1"); shift; done
  local rc=0
  env "${envs[@]}" "$bin/test-backend-ops" test -b CUDA0 "$@" >"$B/logs/tbo-$name.log" 2>&1 || rc=$?
  local summary
  summary=$(grep -E "tests passed|Backend CUDA0: " "$B/logs/tbo-$name.log" | tr '\n' ' ' | head -c 300)
  local failed
  failed=$(grep -c "FAIL" "$B/logs/tbo-$name.log" || true)
  local verdict=ok
  if [[ $expect == pass && $rc -ne 0 ]] || [[ $expect == fail && $rc -eq 0 ]]; then verdict=UNEXPECTED; fi
  echo "$name expect=$expect rc=$rc failed_lines=$failed verdict=$verdict :: $summary" | tee -a "$B/results/checks.txt"
}

case "$STEP" in
  start)
    smi start
    "$REPO/scripts/gpu_batch.sh" "$B" setup
    use_site
    echo "== standalone epilogue: compile (fast math as ggml, and IEEE), check, sabotage, timing"
    for flavour in fast ieee; do
      flags=(-O3 -std=c++17 -arch=sm_90 -I"$REPO/kernels"); [[ $flavour == fast ]] && flags+=(-use_fast_math)
      nvcc "${flags[@]}" -o "$B/nq_check_$flavour" "$REPO/kernels/norm_quantize_check.cu" \
        >"$B/logs/nvcc-nq-$flavour.log" 2>&1 || { tail -n 20 "$B/logs/nvcc-nq-$flavour.log"; exit 1; }
      "$B/nq_check_$flavour" --json "$B/results/norm-quantize-standalone-$flavour.json" 2>&1 \
        | tee "$B/logs/standalone-$flavour.log" || true
    done
    "$B/nq_check_fast" --sabotage --json "$B/results/norm-quantize-standalone-sabotage.json" 2>&1 | tail -n 2 \
      | tee "$B/logs/standalone-sabotage.log" || true
    smi standalone
    echo "== detached builds"
    POLL_SECONDS=0 "$REPO/scripts/gpu_batch.sh" "$B" build "${VARIANTS[@]}" || [ $? = 3 ]
    "$REPO/scripts/gpu_batch.sh" "$B" synth 2>&1 | tail -n 3
    POLL_SECONDS=${POLL_SECONDS:-360} "$REPO/scripts/gpu_batch.sh" "$B" wait
    ;;
  wait)
    POLL_SECONDS=${POLL_SECONDS:-540} "$REPO/scripts/gpu_batch.sh" "$B" wait
    ;;
  check)
    use_site
    smi check
    F1=$(bin_of fusion-1); SB=$(bin_of "fusion-1+sabotage-norm-quantize"); F15=$(bin_of fusion-1+fusion-5)
    for op in FUSEKIT_NORM_Q8 RMS_NORM RMS_NORM_MUL_ADD MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION; do
      tbo "fusion-1-$op" pass "$F1" -o "$op"
    done
    tbo fusion-1-disabled pass "$F1" GGML_CUDA_DISABLE_FUSION=1 -o FUSEKIT_NORM_Q8
    tbo fusion-1-no-graphs pass "$F1" GGML_CUDA_DISABLE_GRAPHS=1 -o FUSEKIT_NORM_Q8
    tbo fusion-1+5 pass "$F15" -o FUSEKIT_NORM_Q8
    tbo sabotage fail "$SB" -o FUSEKIT_NORM_Q8
    tbo sabotage-disabled pass "$SB" GGML_CUDA_DISABLE_FUSION=1 -o FUSEKIT_NORM_Q8
    smi check
    ;;
  race)
    echo "fusion-1 has no single-kernel race: its effect is launches per token (eval, profile)"
    ;;
  eval)
    use_site
    smi eval
    fusekit reset >/dev/null
    fusekit eval fusion-1 --against stock --model "$BIG" --backend cuda --cuda-arch 90 -p 512 -n 128 \
      --rounds "${ROUNDS:-3}" -r "${REPS:-5}" --ppl --kl --chunks 4 --prompts 4 --tokens 64 \
      --json "$B/results/eval-fusion-1-35b.json" 2>&1 | tee "$B/logs/eval.log" | tail -n 45
    smi eval
    ;;
  profile)
    use_site
    smi profile
    fusekit reset >/dev/null
    fusekit apply fusion-1 >/dev/null
    mkdir -p "$B/traces"
    fusekit profile --model "$BIG" --decode 16 --out "$B/traces" \
      --json "$B/results/profile-fusion-1-vs-stock.json" --csv "$B/results/profile-fusion-1-vs-stock.csv" 2>&1 \
      | tail -n 40
    fusekit reset >/dev/null
    smi profile
    ;;
  pack)
    OUTDIR=${3:?output folder}
    tar -czf "$OUTDIR/batch-$(date -u +%H%M%S).tgz" -C "$B" --exclude='traces' --exclude='*.sqlite' \
      --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='nq_check_*' .
    ls -l "$OUTDIR"
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
