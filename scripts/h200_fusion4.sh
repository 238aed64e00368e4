#!/usr/bin/env bash
# The fusion-4 (chunked-gdn) steps on the H200; h200_session.sh runs them with the other fusions. Its kernels run
# standalone in the session's `kernels` step (kernels/chunked_gdn_check.cu); this script checks the ggml glue.
#
#   scripts/h200_fusion4.sh B variants    # builds besides stock: fusion-4 and its sabotage variant
#   scripts/h200_fusion4.sh B check       # GATED_DELTA_NET (the long cases included) and the cache-write cases
#                                         # pass, chunked from 128 tokens and at the default threshold, with fusion
#                                         # disabled too; the sabotage fails them; stock and fusion-4 timed by
#                                         # test-backend-ops perf on the same cases (chunked from 128 tokens); fusion-4's
#                                         # experiments the session built (fusion-4+fusion-4-*), checked and timed too
#   scripts/h200_fusion4.sh B eval        # fusekit eval fusion-4 vs stock on the 35B preset, KL over 4096-token contexts
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
SABOTAGE=$REPO/tests/patches/sabotage-chunked-gdn.patch
VARIANTS=(fusion-4 "fusion-4+$SABOTAGE")
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, bin_of, smi, tbo, session_*

case "$STEP" in variants | start | wait | pack) fusion_common_step "$0" "$STEP" "${3:-}"; exit ;; esac
case "$STEP" in
  standalone | race | profile)
    echo "fusion-4 has no $STEP step here: the session's kernels step runs and times its kernels (chunked_gdn_check)"
    ;;
  check)
    use_fusekit
    smi check
    F4=$(bin_of fusion-4); SB=$(bin_of "fusion-4+sabotage-chunked-gdn" 2>/dev/null || true)
    # MIN=128: the chunked kernels take every case from 128 tokens (the default, 512, leaves the shorter ones serial)
    MIN=FUSEKIT_CHUNKED_GDN_MIN_TOKENS=128
    # the chunked cases a sabotage build must fail (fusion-4's, and an experiment's under fusion-4's sabotage patch)
    SABOTAGE_CASES='head_size=128,n_seq_tokens=(512|4096|8192|300|200|130|128),'
    for op in GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION; do
      tbo "fusion-4-$op" pass "$F4" "$MIN" -o "$op"
      tbo "fusion-4-default-$op" pass "$F4" -o "$op"
      tbo "fusion-4-disabled-$op" pass "$F4" "$MIN" GGML_CUDA_DISABLE_FUSION=1 -o "$op"
    done
    if [[ -n "$SB" ]]; then
      tbo fusion-4-sabotage-GATED_DELTA_NET fail "$SB" "$MIN" -o GATED_DELTA_NET -p "$SABOTAGE_CASES"
    else  # a session whose VARIANTS leave the sabotage out (session 19's second lease lost every check to this)
      echo "fusion-4-sabotage-GATED_DELTA_NET expect=fail rc=-1 failed_lines=0 verdict=NOT-BUILT :: no build of fusion-4+sabotage-chunked-gdn in this session" \
        | tee -a "$B/results/checks.txt"
    fi
    labels=(stock fusion-4)
    # fusion-4's experiments (patches/experiments/fusion-4-*.patch) that the session built: the same checks and perf
    for patch in "$REPO"/patches/experiments/fusion-4-*.patch; do
      [[ -e "$patch" ]] || continue
      label=fusion-4+$(basename "$patch" .patch)
      bin=$(bin_of "$label" 2>/dev/null || true)
      [[ -n "$bin" && -x "$bin/test-backend-ops" ]] || continue
      for op in GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION; do
        tbo "$label-$op" pass "$bin" "$MIN" -o "$op"
        tbo "$label-default-$op" pass "$bin" -o "$op"
      done
      # the experiment under fusion-4's sabotage patch (VARIANTS="... fusion-4+$X/sabotage-chunked-gdn.patch+$patch"),
      # where the session built it: must fail as fusion-4's sabotage build does
      sab=$(bin_of "fusion-4+sabotage-chunked-gdn+$(basename "$patch" .patch)" 2>/dev/null || true)
      if [[ -n "$sab" && -x "$sab/test-backend-ops" ]]; then
        tbo "$label-sabotage-GATED_DELTA_NET" fail "$sab" "$MIN" -o GATED_DELTA_NET -p "$SABOTAGE_CASES"
      fi
      labels+=("$label")
    done
    for label in "${labels[@]}"; do  # the chunked kernels' times from 128 tokens, against the serial kernel's
      env "$MIN" "$(bin_of "$label")/test-backend-ops" perf -b CUDA0 -o GATED_DELTA_NET >"$B/results/tbo-perf-gdn-$label.txt" 2>&1 || true
    done
    smi check
    ;;
  eval)
    # fusion-4 and each of its experiments the session built (patches/experiments/fusion-4-*.patch), in one
    # interleaved eval: 512-token ubatches across a 4096 context, so the chunked path runs in the KL and the text
    specs=fusion-4
    for patch in "$REPO"/patches/experiments/fusion-4-*.patch; do
      [[ -e "$patch" && -n "$(bin_of "fusion-4+$(basename "$patch" .patch)" 2>/dev/null || true)" ]] || continue
      specs+=" fusion-4+$patch"
    done
    session_eval "$specs" "$BIG" fusion-4-35b --ppl --kl --ctx 4096 --chunks 2
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
