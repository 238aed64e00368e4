#!/usr/bin/env bash
# The fusion-5 (q8-gemv) session on the H200, in steps that each fit one 10-minute device command.
# Builds, model and setup come from scripts/gpu_batch.sh; results land in the batch folder B.
#
#   scripts/h200_fusion5.sh B start     # setup, standalone, detached CUDA builds (stock, fusion-5,
#                                       # fusion-5+sabotage with the carried ccache), models, then poll
#   scripts/h200_fusion5.sh B standalone  # the standalone kernel: check, sabotage, timing
#   scripts/h200_fusion5.sh B models    # the 35B preset and the second model (Llama-3-8B shapes, all Q8_0)
#   scripts/h200_fusion5.sh B wait      # poll the builds
#   scripts/h200_fusion5.sh B check     # test-backend-ops: fusion-5 q8_0 MUL_MAT/MUL_MAT_ID/fusion cases pass,
#                                       # sabotage fails, sabotage with GGML_CUDA_DISABLE_FUSION=1 passes
#   scripts/h200_fusion5.sh B race      # bridge: stock vs fusion-5 (and the packed-rows experiment) mul_mat, checked
#                                       # then timed; sabotage check
#   scripts/h200_fusion5.sh B eval      # fusekit eval fusion-5 vs stock on the 35B preset (tok/s, ppl, KL, text)
#   scripts/h200_fusion5.sh B eval2     # the same on the second model (Llama-3-8B shapes, every matrix Q8_0)
#   scripts/h200_fusion5.sh B profile   # fusekit profile: stock and fusion-5 recorded and compared (16 tokens)
#   scripts/h200_fusion5.sh B pack OUT  # tar the results (not models, not traces) into OUT
#
# Never changes clocks or power settings: each step records clocks and temperature instead.
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
LLAMA=$MODELS/llama-3-8b-q8_0.gguf  # second model: every matrix Q8_0, so the fusion covers nearly all weight bytes
SABOTAGE=$REPO/tests/patches/sabotage-q8-gemv.patch
Q4=$REPO/patches/experiments/fusion-5-q4-0.patch  # Q4_0 weights (the 35B preset's experts) on the same kernel
PACKED=$REPO/patches/experiments/fusion-5-packed-rows.patch  # short rows (K = 256, 512) several to a tile
VARIANTS=(fusion-5 "fusion-5+$SABOTAGE" "fusion-5+$Q4" "fusion-5+$SABOTAGE+$Q4" "fusion-5+$PACKED" "fusion-5+$PACKED+$Q4")
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, bin_of, smi, tbo

case "$STEP" in variants | start | wait | pack) fusion_common_step "$0" "$STEP" "${3:-}"; exit ;; esac
case "$STEP" in
  standalone)  # the standalone kernel: compile, check, sabotage, timing (GPU otherwise idle)
    use_fusekit
    smi standalone
    nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -I"$REPO/kernels" -o "$B/bin/q8_gemv_bench" \
      "$REPO/kernels/q8_gemv_bench.cu" >"$B/logs/nvcc-bench.log" 2>&1 || { tail -n 20 "$B/logs/nvcc-bench.log"; exit 1; }
    "$B/bin/q8_gemv_bench" --json "$B/results/q8-gemv-standalone.json" 2>&1 | tee "$B/logs/standalone.log" || true
    "$B/bin/q8_gemv_bench" --sabotage --json "$B/results/q8-gemv-standalone-sabotage.json" 2>&1 | tail -n 2 \
      | tee "$B/logs/standalone-sabotage.log" || true
    smi standalone
    ;;
  models)  # the 35B preset (gpu_batch synth) and the second model
    use_fusekit
    [ -f "$BIG" ] || "$REPO/scripts/gpu_batch.sh" "$B" synth 2>&1 | tail -n 3
    [ -f "$LLAMA" ] || fusekit model synth --preset llama-3-8b --dense-type q8_0 -o "$LLAMA" --json "$B/results/model-llama.json" 2>&1 \
      | tail -n 2
    ;;
  check)
    use_fusekit
    smi check
    F5=$(bin_of fusion-5); SB=$(bin_of "fusion-5+sabotage-q8-gemv"); ST=$(bin_of stock)
    Q8='type_a=q8_0|type=q8_0'
    tbo fusion-5-stock-q8 pass "$ST" -o MUL_MAT -p "$Q8"
    for op in MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION; do tbo "fusion-5-$op" pass "$F5" -o "$op" -p "$Q8"; done  # all: stack
    for op in MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION; do tbo "fusion-5-sabotage-$op" fail "$SB" -o "$op" -p "$Q8"; done
    tbo fusion-5-sabotage-disabled-MUL_MAT pass "$SB" GGML_CUDA_DISABLE_FUSION=1 -o MUL_MAT -p "$Q8"
    Q4B=$(bin_of "fusion-5+fusion-5-q4-0"); Q4SB=$(bin_of "fusion-5+sabotage-q8-gemv+fusion-5-q4-0")
    Q4F='type_a=q4_0|type=q4_0'
    for op in MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION; do tbo "fusion-5-q4-0-$op" pass "$Q4B" -o "$op" -p "$Q4F"; done
    for op in MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION; do tbo "fusion-5-q4-0-sabotage-$op" fail "$Q4SB" -o "$op" -p "$Q4F"; done
    tbo fusion-5-q4-0-sabotage-disabled-MUL_MAT_ID pass "$Q4SB" GGML_CUDA_DISABLE_FUSION=1 -o MUL_MAT_ID -p "$Q4F"
    for packed in fusion-5+fusion-5-packed-rows fusion-5+fusion-5-packed-rows+fusion-5-q4-0; do  # where built
      PK=$(bin_of "$packed" 2>/dev/null || true)
      if [[ -d "$PK" ]]; then
        for op in MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION; do tbo "$packed-$op" pass "$PK" -o "$op" -p "$Q8|$Q4F"; done
      fi
    done
    echo "== test-backend-ops perf, q8_0 at one token"
    for v in stock fusion-5; do
      "$(bin_of "$v")/test-backend-ops" perf -b CUDA0 -o MUL_MAT -p 'type_a=q8_0,type_b=f32,m=[0-9]+,n=1,' \
        >"$B/results/tbo-perf-$v.txt" 2>&1 || true
    done
    for v in stock fusion-5+fusion-5-q4-0; do  # the experts' products at one token
      "$(bin_of "$v")/test-backend-ops" perf -b CUDA0 -o MUL_MAT_ID -p 'type_a=q4_0,type_b=f32,n_mats=256,n_used=8,.*m=[0-9]+,n=1,' \
        >"$B/results/tbo-perf-q4-id-$v.txt" 2>&1 || true
    done
    grep -h "MUL_MAT" "$B"/results/tbo-perf-*.txt | head -n 40
    smi check
    ;;
  race)
    use_fusekit
    smi race
    packed=() packed_q4=()  # the packed-rows experiment races beside fusion-5 where it was built
    if [[ -d "$(bin_of fusion-5+fusion-5-packed-rows)" ]]; then packed=(--lib-dir "packed=$(bin_of fusion-5+fusion-5-packed-rows)"); fi
    if [[ -d "$(bin_of fusion-5+fusion-5-packed-rows+fusion-5-q4-0)" ]]; then
      packed_q4=(--lib-dir "packed-q4-0=$(bin_of fusion-5+fusion-5-packed-rows+fusion-5-q4-0)")
    fi
    python3 -m ggml_bridge mulmat --lib-dir "stock=$(bin_of stock)" --lib-dir "fusion-5=$(bin_of fusion-5)" "${packed[@]}" \
      --backend CUDA0 --types q8_0 --shapes seed --tokens 1,2,4,8 --check-tokens 1,2,3,8,64 \
      --out "$B/results/bench-mulmat-fusion-5.json" >"$B/results/bench-mulmat-fusion-5.txt" 2>"$B/logs/race.log" \
      || echo "race exit $?"
    tail -n 45 "$B/results/bench-mulmat-fusion-5.txt"
    python3 -m ggml_bridge mulmat --lib-dir "stock=$(bin_of stock)" --lib-dir "q4-0=$(bin_of fusion-5+fusion-5-q4-0)" "${packed_q4[@]}" \
      --backend CUDA0 --types q4_0 --shapes seed --tokens 1,2 --check-tokens 1,2,8 \
      --out "$B/results/bench-mulmat-fusion-5-q4-0.json" >"$B/results/bench-mulmat-fusion-5-q4-0.txt" 2>>"$B/logs/race.log" \
      || echo "race q4_0 exit $?"
    tail -n 30 "$B/results/bench-mulmat-fusion-5-q4-0.txt"
    python3 -m ggml_bridge mulmat --lib-dir "sabotage=$(bin_of "fusion-5+sabotage-q8-gemv")" --backend CUDA0 \
      --types q8_0 --shapes seed --check-tokens 1 --check --out "$B/results/bench-mulmat-sabotage-check.json" \
      >"$B/results/bench-mulmat-sabotage-check.txt" 2>&1 && echo "sabotage bridge check: PASSED (unexpected)" \
      || echo "sabotage bridge check failed as it must (exit $?)"
    smi race
    ;;
  eval)
    session_eval fusion-5 "$BIG" fusion-5-35b --ppl --kl --ppl-ubatch 1
    ;;
  eval2)  # the second model: Llama-3-8B shapes, all Q8_0
    session_eval fusion-5 "$LLAMA" fusion-5-llama8b-q8_0 --kl
    ;;
  profile)
    session_profile fusion-5 "$BIG"
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
