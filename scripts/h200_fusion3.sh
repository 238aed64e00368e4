#!/usr/bin/env bash
# The fusion-3 (moe-router) steps on the H200; h200_session.sh runs them with the other fusions.
# Never run yet: fusion-3 is a draft that has only been compile-checked (kernels/NOTES-moe-router.md).
#
#   scripts/h200_fusion3.sh B standalone  # moe_router_check: float64 reference, ids identical, sabotage, timing
#   scripts/h200_fusion3.sh B variants    # builds besides stock: fusion-3 and its sabotage variant
#   scripts/h200_fusion3.sh B start       # setup, standalone, detached builds, 35B model, then poll
#   scripts/h200_fusion3.sh B wait        # poll the builds
#   scripts/h200_fusion3.sh B check       # the new cases and every case of the ops it touches pass; sabotage
#                                         # fails; fusion disabled passes
#   scripts/h200_fusion3.sh B eval        # fusekit eval fusion-3 vs stock on the 35B preset
#   scripts/h200_fusion3.sh B profile     # fusekit profile: launches removed per token (16 tokens)
#   scripts/h200_fusion3.sh B pack OUT
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
SABOTAGE=$REPO/tests/patches/sabotage-moe-router.patch
AHEAD=$REPO/patches/experiments/fusion-3-router-ahead.patch  # router weights loaded before the wait
VARIANTS=(fusion-3 "fusion-3+$SABOTAGE" "fusion-3+$AHEAD")
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, bin_of, smi, tbo, session_*

case "$STEP" in variants | start | wait | pack) fusion_common_step "$0" "$STEP" "${3:-}"; exit ;; esac
case "$STEP" in
  standalone)
    use_fusekit
    smi standalone
    nvcc -O3 -std=c++17 -arch=sm_90 -I"$REPO/kernels" -o "$B/bin/moe_router_check" "$REPO/kernels/moe_router_check.cu" \
      >"$B/logs/nvcc-moe-router.log" 2>&1 || { tail -n 20 "$B/logs/nvcc-moe-router.log"; exit 1; }
    "$B/bin/moe_router_check" --json "$B/results/moe-router-standalone.json" 2>&1 | tee "$B/logs/moe-router.log" || true
    "$B/bin/moe_router_check" --sabotage --json "$B/results/moe-router-standalone-sabotage.json" 2>&1 | tail -n 2 \
      | tee "$B/logs/moe-router-sabotage.log" || true
    smi standalone
    ;;
  check)
    use_fusekit
    smi check
    F3=$(bin_of fusion-3); SB=$(bin_of "fusion-3+sabotage-moe-router")
    for op in FUSEKIT_MOE_ROUTER FUSEKIT_MOE_TAIL TOPK_MOE SOFT_MAX ARGSORT ADD MUL SIGMOID; do
      tbo "fusion-3-$op" pass "$F3" -o "$op"
    done
    tbo fusion-3-MUL_MAT-f32 pass "$F3" -o MUL_MAT -p 'type_a=f32'  # the router's GEMV; every case: the stack check
    tbo fusion-3-disabled pass "$F3" GGML_CUDA_DISABLE_FUSION=1 -o FUSEKIT_MOE_ROUTER
    tbo fusion-3-sabotage-router fail "$SB" -o FUSEKIT_MOE_ROUTER
    tbo fusion-3-sabotage-tail fail "$SB" -o FUSEKIT_MOE_TAIL
    AH=$(bin_of fusion-3+fusion-3-router-ahead 2>/dev/null || true)
    if [[ -d "$AH" ]]; then tbo fusion-3-router-ahead-FUSEKIT_MOE_ROUTER pass "$AH" -o FUSEKIT_MOE_ROUTER; fi
    smi check
    ;;
  race)
    echo "fusion-3 has no single-kernel race here: moe_router_check times the kernels (standalone step)"
    ;;
  eval)
    session_eval fusion-3 "$BIG" fusion-3-35b --ppl --kl --ppl-ubatch 1
    ;;
  profile)
    session_profile fusion-3 "$BIG"
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
