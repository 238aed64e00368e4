#!/usr/bin/env bash
# One H200 session for every fusion that has a session script (scripts/h200_fusionN.sh): one stock build
# shared by all variants (the carried ccache makes each variant a partial rebuild), one interleaved eval of
# every fusion alone and of their stack against stock. Each step fits one 10-minute device command; run
# each behind `timeout` and follow it with `pack`, so results come back even when a step runs long:
#
#   timeout 540 scripts/h200_session.sh B start; scripts/h200_session.sh B pack "$OUT"
#
#   scripts/h200_session.sh B start     # setup; every fusion's standalone step and the kernels step; detached
#                                       # builds; models; poll
#   scripts/h200_session.sh B kernels   # standalone kernels not yet in ggml (fusion-4's chunked_gdn_check)
#   scripts/h200_session.sh B wait      # poll the builds until done
#   scripts/h200_session.sh B check     # every fusion's check step (test-backend-ops, sabotage), then its race step
#   scripts/h200_session.sh B eval      # fusekit eval: each fusion alone and the stack vs stock, 35B preset
#   scripts/h200_session.sh B profile   # fusekit profile of each fusion and of the stack (16 decode tokens)
#   scripts/h200_session.sh B pack OUT  # results and logs (no traces, models or binaries) into OUT
#   scripts/h200_session.sh B variants  # the builds start makes besides stock
#
# Device time: stock builds in about 290 s, each variant in about 40-100 s more (ccache), so start and one or
# two wait calls take about 15 minutes; check about 5, eval about 8, each profile about 2. With 30 minutes,
# run start, wait, check, eval, then profile what time allows (the stack first).
# Never changes clocks or power settings; every step records them (results/clocks.csv).
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, smi, session_eval, session_profile, session_pack

mapfile -t SCRIPTS < <(ls "$REPO"/scripts/h200_fusion[0-9].sh)
FUSIONS=()
for script in "${SCRIPTS[@]}"; do
  name=$(basename "$script" .sh); FUSIONS+=("fusion-${name#h200_fusion}")
done
STACK=$(IFS=+; echo "${FUSIONS[*]}")

all_variants() {  # every script's variants, then the whole stack, without repeats
  { for script in "${SCRIPTS[@]}"; do bash "$script" "$B" variants; done; echo "$STACK"; } | awk '!seen[$0]++'
}

each() {  # each STEP: run STEP of every fusion script, going on after a failure; non-zero if any failed
  local step=$1 failed=0 script
  for script in "${SCRIPTS[@]}"; do
    echo "== $(basename "$script") $step"
    bash "$script" "$B" "$step" || { echo "$(basename "$script") $step failed ($?)"; failed=1; }
  done
  return $failed
}

case "$STEP" in
  start)
    smi start
    "$REPO/scripts/gpu_batch.sh" "$B" setup
    each standalone || true
    bash "$0" "$B" kernels || true
    mapfile -t VARIANTS < <(all_variants)
    echo "== detached builds: stock ${VARIANTS[*]}"
    POLL_SECONDS=0 "$REPO/scripts/gpu_batch.sh" "$B" build "${VARIANTS[@]}" || [ $? = 3 ]
    for script in "${SCRIPTS[@]}"; do
      if grep -q '^  models)' "$script"; then bash "$script" "$B" models; fi
    done
    [ -f "$BIG" ] || "$REPO/scripts/gpu_batch.sh" "$B" synth 2>&1 | tail -n 3
    POLL_SECONDS=${POLL_SECONDS:-300} "$REPO/scripts/gpu_batch.sh" "$B" wait
    ;;
  wait)
    POLL_SECONDS=${POLL_SECONDS:-540} "$REPO/scripts/gpu_batch.sh" "$B" wait
    ;;
  check)
    each check || true
    use_fusekit
    ST=$(bin_of "$STACK")
    # every op a manifest names, and every test case a patch adds (its op_desc)
    mapfile -t OPS < <({ fusekit list --json | python3 -c 'import json, sys; [print(o) for f in json.load(sys.stdin) for o in f["ops"]]'
                        grep -ho 'return "[A-Z_0-9]*";' "$REPO"/patches/*.patch | cut -d'"' -f2; } | sort -u)
    for op in "${OPS[@]}"; do
      tbo "stack-$op" pass "$ST" -o "$op"
    done
    each race || true
    "$(bin_of stock)/test-backend-ops" perf -b CUDA0 -o GATED_DELTA_NET >"$B/results/tbo-perf-gdn-stock.txt" 2>&1 || true
    cat "$B/results/checks.txt" 2>/dev/null || true
    ;;
  eval)
    session_eval "${FUSIONS[*]} $STACK" "$BIG" all-35b --ppl --kl
    ;;
  profile)
    for variant in "${FUSIONS[@]}" "$STACK"; do session_profile "$variant" "$BIG"; done
    ;;
  pack)
    session_pack "${3:?output folder}"
    ;;
  kernels)  # standalone kernels not yet wired into ggml (fusion-4 step 1): check, sabotage, timing
    use_fusekit
    smi kernels
    nvcc -O3 -std=c++17 -arch=sm_90 -I"$REPO/kernels" -o "$B/bin/chunked_gdn_check" "$REPO/kernels/chunked_gdn_check.cu" \
      >"$B/logs/nvcc-chunked-gdn.log" 2>&1 || { tail -n 20 "$B/logs/nvcc-chunked-gdn.log"; exit 1; }
    "$B/bin/chunked_gdn_check" --json "$B/results/chunked-gdn-standalone.json" 2>&1 | tee "$B/logs/chunked-gdn.log" || true
    "$B/bin/chunked_gdn_check" --sabotage --json "$B/results/chunked-gdn-standalone-sabotage.json" 2>&1 | tail -n 2 \
      | tee "$B/logs/chunked-gdn-sabotage.log" || true
    smi kernels
    ;;
  variants)  # what start builds besides stock
    all_variants
    ;;
  *) echo "unknown step $STEP (start wait check eval profile pack variants)" >&2; exit 2 ;;
esac
