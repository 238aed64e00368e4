#!/usr/bin/env bash
# The fusion-2 (gdn-chains) session on the H200, in steps that each fit one 10-minute device command.
# Builds, model and setup come from scripts/gpu_batch.sh; results land in the batch folder B.
# Never run yet: fusion-2 is a draft that has only been compile-checked (kernels/NOTES-gdn-chains.md).
#
#   scripts/h200_fusion2.sh B start     # setup; the CPU host check and its sabotage run; detached CUDA builds of
#                                       # stock, fusion-2, fusion-2+sabotage; 35B model
#   scripts/h200_fusion2.sh B wait      # poll the builds
#   scripts/h200_fusion2.sh B check     # test-backend-ops: GDN_CHAINS and the touched ops pass; the fused GDN_CHAINS
#                                       # cases fail with the sabotage, its fallback cases pass; sabotage with
#                                       # fusion disabled passes
#   scripts/h200_fusion2.sh B eval      # fusekit eval fusion-2 vs stock on the 35B preset (tok/s, ppl, KL, text)
#   scripts/h200_fusion2.sh B profile   # fusekit profile: launches removed per token (16 tokens)
#   scripts/h200_fusion2.sh B pack OUT  # tar the results (not models, not traces) into OUT
#
# Never changes clocks or power settings: each step records clocks and temperature instead.
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
SABOTAGE=$REPO/tests/patches/sabotage-gdn-chains.patch
VARIANTS=(fusion-2 "fusion-2+$SABOTAGE")  # the stack with the other fusions: h200_session.sh
# GDN_CHAINS cases (vars: n_v_heads,n_k_heads,head_dim,n_seq_tokens,n_seqs,extra_reader) the fusion takes,
# and those that must stay on the stock path (several tokens, head size 16). extra_reader=1 keeps only
# the q/k/beta launch on the stock path (the alpha chain and the gated norm still fuse): it is a fused case.
FUSED='head_dim=(32|64|128),n_seq_tokens=1,'
FALLBACK='n_seq_tokens=[2-9]|head_dim=16'
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, bin_of, smi, tbo

case "$STEP" in variants | start | wait | pack) fusion_common_step "$0" "$STEP" "${3:-}"; exit ;; esac
case "$STEP" in
  standalone)  # the CPU host check of the chain arithmetic (no GPU needed; rerun here as a record)
    nvcc -O2 -std=c++17 -arch=sm_90 -I"$REPO/kernels" -o "$B/bin/gdn_chains_host_check" \
      "$REPO/kernels/gdn_chains_host_check.cu" >"$B/logs/nvcc-gdn-host-check.log" 2>&1 \
      || { tail -n 20 "$B/logs/nvcc-gdn-host-check.log"; exit 1; }
    "$B/bin/gdn_chains_host_check" 2>&1 | tail -n 5 | tee "$B/logs/gdn-host-check.log" || true
    "$B/bin/gdn_chains_host_check" --sabotage 2>&1 | tail -n 2 | tee "$B/logs/gdn-host-check-sabotage.log" || true
    ;;
  check)
    use_fusekit
    smi check
    F2=$(bin_of fusion-2); SB=$(bin_of "fusion-2+sabotage-gdn-chains")
    for op in GDN_CHAINS GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION RMS_NORM SCALE ADD MUL; do
      tbo "fusion-2-$op" pass "$F2" -o "$op"
    done
    tbo fusion-2-no-graphs pass "$F2" GGML_CUDA_DISABLE_GRAPHS=1 -o GDN_CHAINS
    tbo fusion-2-disabled pass "$F2" GGML_CUDA_DISABLE_FUSION=1 -o GDN_CHAINS
    tbo fusion-2-sabotage-fused fail "$SB" -o GDN_CHAINS -p "$FUSED"
    tbo fusion-2-sabotage-fallback pass "$SB" -o GDN_CHAINS -p "$FALLBACK"
    tbo fusion-2-sabotage-disabled pass "$SB" GGML_CUDA_DISABLE_FUSION=1 -o GDN_CHAINS
    # every fused case must fail on its own, not just one of them
    n_ok=$("$SB/test-backend-ops" test -b CUDA0 -o GDN_CHAINS -p "$FUSED" 2>&1 \
      | tee "$B/logs/sabotage-fused-cases.log" | grep -c "GDN_CHAINS.*OK" || true)
    echo "sabotage: fused GDN_CHAINS cases that pass (must be 0): $n_ok" | tee -a "$B/results/checks.txt"
    echo "== test-backend-ops perf, GDN_CHAINS"
    for v in stock fusion-2; do
      "$(bin_of "$v")/test-backend-ops" perf -b CUDA0 -o GATED_DELTA_NET >"$B/results/tbo-perf-gdn-$v.txt" 2>&1 || true
    done
    "$F2/test-backend-ops" perf -b CUDA0 -o GDN_CHAINS >"$B/results/tbo-perf-gdn-chains-fusion-2.txt" 2>&1 || true
    GGML_CUDA_DISABLE_FUSION=1 "$F2/test-backend-ops" perf -b CUDA0 -o GDN_CHAINS \
      >"$B/results/tbo-perf-gdn-chains-disabled.txt" 2>&1 || true
    grep -h "GDN_CHAINS" "$B"/results/tbo-perf-gdn-chains-*.txt | head -n 20
    smi check
    ;;
  race)
    echo "fusion-2 has no single-kernel race: its effect is launches per token (eval, profile)"
    ;;
  eval)
    session_eval fusion-2 "$BIG" fusion-2-35b --ppl --kl --ppl-ubatch 1
    ;;
  profile)
    session_profile fusion-2 "$BIG"
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
