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
VARIANTS=(fusion-1 "fusion-1+$SABOTAGE")  # the stack with the other fusions: h200_session.sh
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, bin_of, smi, tbo

glu_q8_bin() {  # glu_q8_bin plain|sabotaged: bin/ of a built variant holding fusion-1-glu-q8, without or with
  # fusion-1's sabotage; empty where the session built none
  local dir
  for dir in "$FUSEKIT_HOME"/trees/*fusion-1-glu-q8*/build-"${BACKEND:-cuda}"*/bin; do
    if [[ ! -x "$dir/test-backend-ops" ]]; then
      continue
    elif [[ $dir == *sabotage-norm-quantize* && $1 == sabotaged ]] || [[ $dir != *sabotage-norm-quantize* && $1 == plain ]]; then
      echo "$dir"
      return 0
    fi
  done
}

case "$STEP" in variants | start | wait | pack) fusion_common_step "$0" "$STEP" "${3:-}"; exit ;; esac
case "$STEP" in
  standalone)  # the standalone epilogue check: fast-math (as ggml) and IEEE builds, sabotage, timing
    use_fusekit
    smi standalone
    for flavour in fast ieee; do
      flags=(-O3 -std=c++17 -arch=sm_90 -I"$REPO/kernels"); [[ $flavour == fast ]] && flags+=(-use_fast_math)
      nvcc "${flags[@]}" -o "$B/bin/nq_check_$flavour" "$REPO/kernels/norm_quantize_check.cu" \
        >"$B/logs/nvcc-nq-$flavour.log" 2>&1 || { tail -n 20 "$B/logs/nvcc-nq-$flavour.log"; exit 1; }
      "$B/bin/nq_check_$flavour" --json "$B/results/norm-quantize-standalone-$flavour.json" 2>&1 \
        | tee "$B/logs/standalone-$flavour.log" || true
    done
    "$B/bin/nq_check_fast" --sabotage --json "$B/results/norm-quantize-standalone-sabotage.json" 2>&1 | tail -n 2 \
      | tee "$B/logs/standalone-sabotage.log" || true
    smi standalone
    ;;
  check)  # fusion-1 and its sabotage where built; fusion-1-glu-q8 and its sabotage where a variant holds it
    use_fusekit
    smi check
    F1=$(bin_of fusion-1 || true); SB=$(bin_of "fusion-1+sabotage-norm-quantize" || true)
    if [[ -x "$F1/test-backend-ops" ]]; then
      for op in FUSEKIT_NORM_Q8 RMS_NORM RMS_NORM_MUL_ADD MUL_MAT_VEC_FUSION; do
        tbo "fusion-1-$op" pass "$F1" -o "$op"
      done
      for op in MUL_MAT MUL_MAT_ID; do  # the one-token cases its MMVQ hook sees; every case: the stack check
        tbo "fusion-1-$op-n1" pass "$F1" -o "$op" -p ',n=1,'
      done
      tbo fusion-1-disabled pass "$F1" GGML_CUDA_DISABLE_FUSION=1 -o FUSEKIT_NORM_Q8
      tbo fusion-1-no-graphs pass "$F1" GGML_CUDA_DISABLE_GRAPHS=1 -o FUSEKIT_NORM_Q8
    fi
    if [[ -x "$SB/test-backend-ops" ]]; then
      tbo fusion-1-sabotage fail "$SB" -o FUSEKIT_NORM_Q8
      tbo fusion-1-sabotage-disabled pass "$SB" GGML_CUDA_DISABLE_FUSION=1 -o FUSEKIT_NORM_Q8
    fi
    G=$(glu_q8_bin plain); GS=$(glu_q8_bin sabotaged)
    if [[ -n "$G" ]]; then  # e.g. VARIANTS="... fusion-1+$P/fusion-1-glu-q8.patch ..."
      for op in FUSEKIT_GLU_Q8 MUL_MAT_VEC_FUSION FUSEKIT_NORM_Q8; do
        tbo "glu-q8-$op" pass "$G" -o "$op"
      done
      tbo glu-q8-MUL_MAT_ID-n1 pass "$G" -o MUL_MAT_ID -p ',n=1,'
      tbo glu-q8-disabled pass "$G" GGML_CUDA_DISABLE_FUSION=1 -o FUSEKIT_GLU_Q8
      tbo glu-q8-no-graphs pass "$G" GGML_CUDA_DISABLE_GRAPHS=1 -o FUSEKIT_GLU_Q8
    fi
    if [[ -n "$GS" ]]; then  # e.g. VARIANTS="... fusion-1+$X/sabotage-norm-quantize.patch+$P/fusion-1-glu-q8.patch"
      tbo glu-q8-sabotage fail "$GS" -o FUSEKIT_GLU_Q8
    fi
    smi check
    ;;
  race)
    echo "fusion-1 has no single-kernel race: its effect is launches per token (eval, profile)"
    ;;
  eval)
    session_eval fusion-1 "$BIG" fusion-1-35b --ppl --kl --ppl-ubatch 1
    ;;
  profile)
    session_profile fusion-1 "$BIG"
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
