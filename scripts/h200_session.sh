#!/usr/bin/env bash
# One H200 session for every fusion that has a session script (scripts/h200_fusionN.sh). `run` starts the
# whole session detached and returns; each device command then polls it and packs what is there, so the
# work goes on between commands (call again within the host's warm window) and every call returns results:
#
#   scripts/h200_session.sh B run; scripts/h200_session.sh B poll 520; scripts/h200_session.sh B pack "$OUT"
#   scripts/h200_session.sh B poll 540; scripts/h200_session.sh B pack "$OUT"     # again until it says done
#
# What the session does: setup; one stock build, then every variant (each fusion, its sabotage, the stack)
# BUILD_PARALLEL at a time on the carried ccache; meanwhile the standalone kernel programs and the models.
# Then two chains, one per GPU when there are two (else one after the other):
#   GPU 0: smoke (a short run of each variant), eval (each fusion alone and the stack vs stock, 35B preset), eval2 (second model), profiles A
#   GPU 1: check (test-backend-ops, sabotage builds), race (bridge), profiles B
# The single steps (evaluated, check, check-own, eval, eval-own, eval-quality, eval-decode, eval2, race, race-mm, node-profile, memcheck, profile-a, profile-b, kernels, standalone) can also be run alone.
# Besides the stack of every fusion, the stack with every experiment (patches/experiments/) on top is built,
# checked, evaluated and profiled.
# GPU0_STEPS / GPU1_STEPS replace the two chains' steps (e.g. GPU1_STEPS="check-mm eval2" for a short session);
# NO_SABOTAGE=1 builds no sabotage variant (for a session that runs no sabotage check); NO_EXPERIMENTS=1 leaves
# patches/experiments/ out (no experiment variant, and the stack with experiments is the stack).
# VARIANTS="spec ..." builds exactly these variants (besides stock) instead, and smoke, check-mm, eval, eval2 and
# profile-a then measure exactly these (the control step keeps its own list; a variant with a sabotage patch,
# tests/patches/sabotage-*.patch, is smoke-run and checked, its experiments' checks expected to fail, never timed);
# the step control evaluates
# patches/controls/ (stock with a pure fp32-order change) and fusion-5 against stock, quality only, on both models.
# FOCUS="2 5" limits the fusion scripts (their builds, checks, races, standalone programs, single evals) to
# those fusions; the stacks still hold every fusion. EVAL_FUSIONS="fusion-5" limits the single-fusion evals.
# Never changes clocks or power settings; every step records them (results/clocks.csv).
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
# the second model: by default written by h200_fusion5.sh models (llama shapes, every matrix Q8_0); SECOND_MODEL
# names another (e.g. SmolLM2 joined by scripts/carry_model.sh from parts carried over several calls; eval2 then
# waits up to SECOND_WAIT seconds for it), SECOND_NAME its eval's name
SECOND=${SECOND_MODEL:-$MODELS/llama-3-8b-q8_0.gguf}
header_field() {  # header_field FIELD PATCH: the words of PATCH's "FIELD: ..." header line (before the first diff)
  sed -n "/^diff --git/q; s/^$1: //p" "$2"
}
EXPERIMENTS=()  # patches/experiments/fusion-N-*.patch, each measured on top of its fusion (or its "Applies on:" fusions)
for patch in "$REPO"/patches/experiments/fusion-*.patch; do
  [[ -e "$patch" && "${NO_EXPERIMENTS:-0}" != 1 ]] || continue
  base=$(header_field "Applies on" "$patch" | tr -s ' ' '+')
  [[ -n "$base" ]] || base=$(basename "$patch" | cut -d- -f1-2)
  EXPERIMENTS+=("$base+$patch")
done
mkdir -p "$B/results" "$B/logs" "$B/bin"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, smi, session_eval, session_profile, session_pack

mapfile -t SCRIPTS < <(ls "$REPO"/scripts/h200_fusion[0-9].sh)
FUSIONS=()
for script in "${SCRIPTS[@]}"; do
  name=$(basename "$script" .sh); FUSIONS+=("fusion-${name#h200_fusion}")
done
STACK=$(IFS=+; echo "${FUSIONS[*]}")
STACK_EXP=$STACK  # the stack with every experiment on top
for experiment in "${EXPERIMENTS[@]}"; do STACK_EXP+="+${experiment##*+}"; done
if [[ -n "${FOCUS:-}" ]]; then  # only these fusions' scripts (the stacks stay whole)
  SCRIPTS=() FUSIONS=()
  for n in $FOCUS; do SCRIPTS+=("$REPO/scripts/h200_fusion$n.sh"); FUSIONS+=("fusion-$n"); done
fi
read -r -a EVAL_FUSIONS <<<"${EVAL_FUSIONS:-${FUSIONS[*]}}"

all_variants() {  # every script's variants, then the whole stack, without repeats (NO_SABOTAGE=1, NO_EXPERIMENTS=1 filter)
  if [[ -n "${VARIANTS:-}" ]]; then tr ' ' '\n' <<<"$VARIANTS" | awk 'NF && !seen[$0]++'; return; fi
  { for script in "${SCRIPTS[@]}"; do bash "$script" "$B" variants; done; echo "$STACK"; echo "$STACK_EXP"; } \
    | awk -v skip="${NO_SABOTAGE:-0}" -v noexp="${NO_EXPERIMENTS:-0}" \
      '!seen[$0]++ && !(skip == 1 && /sabotage/) && !(noexp == 1 && /\/experiments\//)'
}

measured() {  # measured DEFAULT...: with VARIANTS set, exactly those (every step measures what was built); else DEFAULT
  if [[ -n "${VARIANTS:-}" ]]; then all_variants; else printf '%s\n' "$@"; fi
}

sabotaged() {  # sabotaged SPEC: whether SPEC holds a sabotage patch (tests/patches/sabotage-*.patch)
  [[ "+$1" == *"/sabotage-"* ]]
}

timed() {  # timed SPEC...: the specs without a sabotage patch (a sabotaged build is checked, never timed or profiled)
  local spec kept=()
  for spec in "$@"; do sabotaged "$spec" || kept+=("$spec"); done
  echo "${kept[*]}"
}

evaluated() {  # the variants the eval steps time: EVAL_VARIANTS (a subset of VARIANTS: the profiles may cover arms
  # the eval leaves out), else VARIANTS, else each fusion, the stack, each experiment and the stack with all of them;
  # built, through smoke, never sabotaged
  # shellcheck disable=SC2046,SC2086
  if [[ -n "${EVAL_VARIANTS:-}" ]]; then timed $(ok_variants $EVAL_VARIANTS); return; fi
  # shellcheck disable=SC2046
  timed $(ok_variants $(measured "${EVAL_FUSIONS[@]}" "$STACK" "${EXPERIMENTS[@]}" "$STACK_EXP"))
}

experiment_checks() {  # experiment_checks SPEC: the test ops the patch files of SPEC name in a "Checks:" header line
  local part
  for part in ${1//+/ }; do
    [[ ! -f "$part" ]] || header_field Checks "$part"
  done | tr ' ' '\n' | awk 'NF && !seen[$0]++'
}

sabotage_fails() {  # sabotage_fails SPEC: the test ops that must fail on SPEC's build. Where every sabotage patch in
  # SPEC is the own sabotage of an experiment in it (that patch's "Sabotage:" header line), the Checks of those
  # experiments only (the others' must still pass); else (a fusion's sabotage breaks it under every experiment)
  # the Checks of every experiment in SPEC
  local part other named own="" foreign=0
  for part in ${1//+/ }; do
    [[ "$part" == */sabotage-* ]] || continue
    named=0
    for other in ${1//+/ }; do
      [[ -f "$other" && "$other" != */sabotage-* ]] || continue
      if [[ "$(basename "$(header_field Sabotage "$other")")" == "$(basename "$part")" ]]; then
        named=1 own+=" $(header_field Checks "$other")"
      fi
    done
    ((named)) || foreign=1
  done
  if ((foreign)); then experiment_checks "$1"; else tr ' ' '\n' <<<"$own" | awk 'NF && !seen[$0]++'; fi
}

tbo_matrix_products() {  # tbo_matrix_products NAME BIN [SPEC]: the three matrix-product ops (CHECK_BASE_OPS
  # replaces them, e.g. "MUL_MAT_VEC_FUSION" when MUL_MAT and MUL_MAT_ID passed on the same code already; and CHECK_EXTRA_OPS,
  # e.g. "GATED_DELTA_NET GATED_DELTA_NET_CACHE_FUSION" for stock ops an experiment changes) must pass on BIN, and
  # so must the other ops SPEC's experiments name (experiment_checks), unless SPEC holds a sabotage patch
  # (tests/patches/sabotage-*.patch, e.g. an experiment's own "Sabotage:"): then only the experiments' ops run, and
  # those sabotage_fails names must fail
  local op expect base="${CHECK_BASE_OPS:-MUL_MAT MUL_MAT_ID MUL_MAT_VEC_FUSION} ${CHECK_EXTRA_OPS:-}" must_fail=""
  ! sabotaged "${3:-}" || must_fail=" $(sabotage_fails "$3" | tr '\n' ' ') "
  if [[ -z $must_fail ]]; then
    for op in $base; do tbo "$1-$op" pass "$2" -o "$op"; done
  fi
  for op in $(experiment_checks "${3:-}"); do
    expect=pass
    [[ $must_fail != *" $op "* ]] || expect=fail
    [[ " $base " == *" $op "* ]] || tbo "$1-$op" "$expect" "$2" -o "$op"
  done
}

each() {  # each STEP: run STEP of every fusion script, going on after a failure; non-zero if any failed
  local step=$1 failed=0 script
  for script in "${SCRIPTS[@]}"; do
    echo "== $(basename "$script") $step"
    bash "$script" "$B" "$step" || { echo "$(basename "$script") $step failed ($?)"; failed=1; }
  done
  return $failed
}

smoke_text() {  # smoke_text: the path of the corpus the smoke and memcheck runs read (CPython's documentation
  # topics), written on first use
  local text="$B/smoke-text.txt"
  [[ -s "$text" ]] || python3 -c 'import pydoc_data.topics as t; print("\n\n".join(t.topics.values()))' >"$text"
  echo "$text"
}

smoke_values() {  # smoke_values LABEL: one 128-token chunk of perplexity on the 35B preset at one token per batch
  # (the decode kernels the fusions change); prints the estimate, fails (2) when it is not a finite number. llama-bench
  # never reads the logits: session 12's stack with NaN log-probs passed its smoke run.
  local label=$1 text log estimate
  text=$(smoke_text)
  log=$(log_path "smoke-ppl-$label")
  timeout 180 "$(bin_of "$label")/llama-perplexity" -m "$BIG" -f "$text" -c 128 --chunks 1 -b 128 -ub 1 -ngl 99 \
    >"$log" 2>&1 || true
  estimate=$(grep -o 'Final estimate: PPL = [^ ]*' "$log" | tail -n 1 | cut -d' ' -f5)
  if [[ "$estimate" =~ ^[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?$ ]]; then
    echo "ppl $estimate"
  else
    echo "log-probs not finite: ${estimate:-no estimate} ($(grep -m 1 -o 'Unexpected negative standard deviation of log(prob)' "$log" || tail -n 1 "$log" | cut -c1-80))"
    return 2
  fi
}

spec_name() {  # spec_name SPEC: SPEC with each patch file named by its stem (a contender's name in the bridge's table)
  sed -E 's#[^+]*/([^/+]*)\.patch#\1#g' <<<"$1"
}

ok_variants() {  # the variants among "$@" that were built (results/builds.json, without error) and passed their smoke run, once each
  use_fusekit
  python3 -c "$LABEL_OF_SPEC"$'\n'"$(cat <<'PY'
import json, sys
try:
    records = json.load(open(sys.argv[1]))
    built = {r["variant"] for r in records if "error" not in r}
except (OSError, ValueError):
    built = None  # a single step run without the session's builds: take every variant
failed = set()
try:
    failed = {line.split()[0] for line in open(sys.argv[2]) if " fail " in line}
except OSError:
    pass
from evals.arms import arm_name, split_arm
ok = {}  # label (with an arm's environment: stock@GGML_CUDA_DISABLE_GRAPHS=1) -> first spec with it
for v in sys.argv[3:]:
    base, env = split_arm(v)  # an arm runs its variant's build with extra environment variables
    name = label(base)
    if name not in failed and (built is None or name in built):
        ok.setdefault(arm_name(name, env), v)
    else:
        print(f"left out {v}: {name} was not built or failed its smoke run", file=sys.stderr)
print(" ".join(ok.values()))
PY
)" "$B/results/builds.json" "$B/results/smoke.txt" "$@"
}

on_gpu() {  # on_gpu N STEP: run STEP on GPU N with half of the cores (one chain of the session)
  local gpu=$1 step=$2 cores half pin=()
  cores=$(nproc); half=$((cores / 2))
  if command -v taskset >/dev/null && ((NGPU > 1)); then
    pin=(taskset -c "$((gpu * half))-$((gpu * half + half - 1))")
  fi
  echo "== $(date -u +%H:%M:%S) $step on GPU $gpu"
  CUDA_VISIBLE_DEVICES=$gpu "${pin[@]}" bash "$0" "$B" "$step" >"$B/logs/step-$step.log" 2>&1 \
    || echo "== $step failed ($?)"
  echo "== $(date -u +%H:%M:%S) $step done"
}

# One kernel of a 16-token decode on the 35B preset under Nsight Compute, for SPEC (an arm: under its environment):
# NCU_KERNEL (a regex, default flash attention), NCU_LAUNCH_COUNT launches after NCU_LAUNCH_SKIP, with the traffic
# metrics of scripts/ncu_raw_table.py --traffic. --cache-control none: L2 keeps what the kernels before left (the
# question: does the weight streams' L2 policy decide what the next kernel finds there); --clock-control none: ncu
# would lock the SM clock, and we never change clocks. The raw page: results/ncu-kernel-<label>.csv; a missing ncu or a
# failed run is logged and the step goes on.
# ",NAME,NAME...": those of the comma-separated NAMES whose base (before the first '.') this host's ncu lists under
# --query-metrics (queried once per batch); an unknown name fails a whole ncu run, so it is dropped with one logged
# line. Where the query itself fails, every name is kept.
known_ncu_metrics() {
  local ncu=$1 names=$2 list=$B/logs/ncu-query-metrics.txt kept="" name
  [[ -n $names ]] || return 0
  [[ -s $list ]] || "$ncu" --query-metrics >"$list" 2>&1 || : >"$list"
  for name in ${names//,/ }; do
    if [[ ! -s $list ]] || awk -v base="${name%%.*}" '$1 == base { found = 1 } END { exit !found }' "$list"; then
      kept+=",$name"
    else
      echo "ncu-kernel: dropped metric $name (not in this host's ncu --query-metrics)" | tee -a "$B/logs/ncu-kernel.log" >&2
    fi
  done
  echo "$kept"
}

ncu_decode_kernel() {
  local spec=$1 ncu=${NCU:-} label variant settings stem
  [[ -n $ncu ]] || ncu=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1 || true)
  if [[ ! -x "$ncu" ]]; then echo "ncu: not found on this host" | tee -a "$B/logs/ncu-kernel.log"; return 0; fi
  label=$(spec_label "$spec")
  variant=${label%%@*} settings=""
  [[ $label != *@* ]] || settings=${label#*@}
  stem="ncu-kernel-$(fit_name "$label" 220)"
  local metrics=gpu__time_duration.sum,dram__sectors_read.sum,l1tex__m_xbar2l1tex_read_sectors.sum
  metrics+=,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,smsp__inst_executed.sum
  metrics+=$(known_ncu_metrics "$ncu" "${NCU_KERNEL_METRICS:-}")  # more, comma-separated (as `ncu --query-metrics` has them)
  smi "ncu-kernel $label"
  # shellcheck disable=SC2086  # the arm's settings split into separate K=V words for env
  timeout "${NCU_TIMEOUT:-300}" "$ncu" --clock-control none --cache-control none -f -o "/tmp/$stem" \
    -k "regex:${NCU_KERNEL:-flash_attn_ext_f16}" --launch-skip "${NCU_LAUNCH_SKIP:-32}" \
    --launch-count "${NCU_LAUNCH_COUNT:-40}" --metrics "$metrics" \
    env ${settings//,/ } "$(bin_of "$variant")/llama-bench" -m "$BIG" -p 0 -n 16 -r 1 -ngl 99 --no-warmup \
    >"$(log_path "$stem")" 2>&1 || { echo "ncu-kernel $label: ncu failed (log $(log_path "$stem"))"; return 0; }
  "$ncu" --import "/tmp/$stem.ncu-rep" --csv --page raw >"$B/results/$stem.csv" 2>>"$(log_path "$stem")" \
    || { echo "ncu-kernel $label: import failed (log $(log_path "$stem"))"; return 0; }
  echo "ncu-kernel $label: $(($(wc -l <"$B/results/$stem.csv") - 2)) launches -> results/$stem.csv"
}

# flash-linear-attention's chunk_gated_delta_rule at the same shapes on the same host, in the same run (issue #10's
# reference, CUDA-graph replay): fla-core and einops from the bundle's wheels into a private folder, beside the host's
# torch and triton; where it cannot run, one logged line and the step goes on
fla_reference() {
  local bundle=${BUNDLE:-$REPO/.bundle} site=$B/fla-site wheels
  wheels=$(ls "$bundle"/whl/fla_core-*.whl "$bundle"/whl/einops-*.whl 2>/dev/null || true)
  if [[ $(wc -w <<<"$wheels") -ne 2 ]]; then
    echo "fla: the bundle lacks the fla-core or einops wheel" | tee "$B/logs/fla-gdn.log"
    return 0
  fi
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" $wheels >"$B/logs/fla-gdn.log" 2>&1 \
    || { tail -n 3 "$B/logs/fla-gdn.log"; return 0; }
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 "$REPO/scripts/fla_gdn_timing.py" \
    --json "$B/results/fla-gdn-reference.json" 2>&1 | tee -a "$B/logs/fla-gdn.log" || true
}

case "$STEP" in
  run)  # start the whole session detached; poll and pack follow
    if [[ -f "$B/logs/session.pid" ]] && kill -0 "$(cat "$B/logs/session.pid")" 2>/dev/null; then
      echo "a session is running already (pid $(cat "$B/logs/session.pid"))"; exit 0
    fi
    rm -f "$B/logs/session.done"
    setsid nohup bash "$0" "$B" session >"$B/logs/session.log" 2>&1 </dev/null &
    echo $! >"$B/logs/session.pid"
    echo "session started (pid $!), log $B/logs/session.log"
    ;;
  session)  # what run starts
    export FUSEKIT_LOCK_WAIT=${FUSEKIT_LOCK_WAIT:-900}  # the two chains share one workspace
    trap 'echo $? >"$B/logs/session.done"' EXIT
    echo "== $(date -u +%H:%M:%S) setup"
    smi start
    "$REPO/scripts/gpu_batch.sh" "$B" setup >"$B/logs/step-setup.log" 2>&1
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); ((NGPU > 0)) || NGPU=1
    SIDE_GPU=$((NGPU > 1 ? 1 : 0))
    echo "== GPUs: $NGPU"
    { CUDA_VISIBLE_DEVICES=$SIDE_GPU bash "$0" "$B" standalone >"$B/logs/step-standalone.log" 2>&1
      CUDA_VISIBLE_DEVICES=$SIDE_GPU bash "$0" "$B" kernels >"$B/logs/step-kernels.log" 2>&1; } &
    standalone_pid=$!
    bash "$0" "$B" models >"$B/logs/step-models.log" 2>&1 &
    models_pid=$!
    # not VARIANTS: bash exports no arrays, the steps (children) would lose it; an arm (stock@GGML_CUDA_DISABLE_GRAPHS=1)
    # builds its variant
    mapfile -t TO_BUILD < <(all_variants | sed 's/@.*//' | awk '!seen[$0]++')
    (use_fusekit; command -v ccache >/dev/null) || echo "== WARNING: no ccache on this host (bundle debs/ lacks it):" \
      "every variant compiles from scratch, about 300 s each on 16 cores"
    echo "== $(date -u +%H:%M:%S) builds: stock ${TO_BUILD[*]}"
    BUILD_PARALLEL=${BUILD_PARALLEL:-5} "$REPO/scripts/gpu_batch.sh" "$B" build-foreground "${TO_BUILD[@]}" \
      >"$B/logs/build.log" 2>&1 || echo "== some builds failed: $(grep -c '"error"' "$B/results/builds.json" || true)"
    echo "== $(date -u +%H:%M:%S) builds done"
    wait "$models_pid" || echo "== models failed"
    wait "$standalone_pid" || true
    export NGPU
    if ((NGPU > 1)); then
      { for step in ${GPU0_STEPS:-smoke eval eval2 profile-a}; do on_gpu 0 "$step"; done; } &
      { for step in ${GPU1_STEPS:-check race profile-b}; do on_gpu 1 "$step"; done; } &
      wait
    else
      for step in ${GPU0_STEPS:-smoke eval check race profile-a eval2 profile-b} ${GPU1_STEPS:-}; do on_gpu 0 "$step"; done  # the 35B eval first: it answers the most
    fi
    echo "== $(date -u +%H:%M:%S) session done"
    ;;
  poll)  # poll [SECONDS]: wait until the session is done, its process is gone, or SECONDS passed; show where it stands
    # (a host that was given back between calls comes fresh: no session there, and no point in waiting: exit 3)
    if [[ ! -f "$B/logs/session.pid" ]]; then
      echo "poll: no session was started in $B on this host (a fresh machine: the one that ran it was given back)"; exit 3
    fi
    limit=${3:-540} waited=0 pid=$(cat "$B/logs/session.pid")
    while [[ ! -f "$B/logs/session.done" ]] && ((waited < limit)) && kill -0 "$pid" 2>/dev/null; do
      sleep 10; waited=$((waited + 10))
    done
    cat "$B/logs/session.log" 2>/dev/null || true
    echo "-- checks"; cat "$B/results/checks.txt" 2>/dev/null || true
    if [[ -f "$B/logs/session.done" ]]; then echo "SESSION DONE (exit $(cat "$B/logs/session.done"))"
    elif ! kill -0 "$pid" 2>/dev/null; then echo "SESSION GONE: its process $pid ended without writing session.done"
    else echo "session still running after ${waited}s of polling"; tail -n 3 "$B"/logs/step-*.log 2>/dev/null | tail -n 30; fi
    ;;
  evaluated)  # print the specs the eval steps would time now (built, through smoke, not sabotaged), and why any is left out
    evaluated
    ;;
  standalone)
    each standalone || true
    ;;
  models)
    for script in "${SCRIPTS[@]}"; do
      if grep -q '^  models)' "$script"; then bash "$script" "$B" models; fi
    done
    [ -f "$BIG" ] || "$REPO/scripts/gpu_batch.sh" "$B" synth 2>&1 | tail -n 3
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
    tbo stack-disabled-MUL_MAT pass "$ST" GGML_CUDA_DISABLE_FUSION=1 -o MUL_MAT -p 'type_a=q8_0'
    if [[ "$STACK_EXP" != "$STACK" ]]; then  # the experiments change the matrix products only
      SE=$(bin_of "$(spec_label "$STACK_EXP")")
      tbo_matrix_products stack-experiments "$SE" "$STACK_EXP"
    fi
    "$(bin_of stock)/test-backend-ops" perf -b CUDA0 -o GATED_DELTA_NET >"$B/results/tbo-perf-gdn-stock.txt" 2>&1 || true
    cat "$B/results/checks.txt" 2>/dev/null || true
    ;;
  check-own)  # each fusion script's own checks only (FOCUS picks the scripts): its ops, GGML_CUDA_DISABLE_FUSION=1, and
    # its sabotage build failing (build the spec the script names, e.g. VARIANTS="fusion-3 fusion-3+$X/sabotage-moe-router.patch")
    each check || true
    cat "$B/results/checks.txt" 2>/dev/null || true
    ;;
  eval-own)  # each fusion script's own eval (FOCUS picks the scripts), e.g. fusion-4's at prompt-sized batches
    each eval || true
    ;;
  check-mm)  # the matrix-product ops only, on fusion-5 (if built), the stack and the stack with the experiments
    # (CHECK_STOCK=1: stock first, to tell a stock failure from a fusion's; about 170 s more)
    use_fusekit
    for spec in $([[ "${CHECK_STOCK:-0}" != 1 ]] || echo stock) $(ok_variants $(measured fusion-5 "$STACK" "$STACK_EXP")); do
      [[ $spec != *@* ]] || continue  # an arm (VARIANT@K=V) runs its variant's build: checked as that variant
      label=$(spec_label "$spec")
      tbo_matrix_products "mm-$label" "$(bin_of "$label")" "$spec"
    done
    cat "$B/results/checks.txt" 2>/dev/null || true
    ;;
  flake)  # one test-backend-ops selection FLAKE_RUNS times on stock and each measured variant, with and without
    # CUDA graphs: how often it fails (default: the q4_0 MUL_MAT_ID case that failed in sessions 6, 9 and 10);
    # stock first, so a failure of stock's own code shows as such. FLAKE_SETTINGS (default "default
    # GGML_CUDA_DISABLE_GRAPHS=1"): the environments each build runs under; GGML_CUDA_DISABLE_FUSION=1 gives stock's
    # arithmetic inside a variant build, for a case the variant's patches added (stock's own build shows it EMPTY)
    use_fusekit
    runs=${FLAKE_RUNS:-10} op=${FLAKE_OP:-MUL_MAT_ID} params=${FLAKE_PARAMS:-type_a=q4_0,.*n_mats=16,n_used=4,.*m=33,}
    for spec in stock $(timed $(ok_variants $(measured "$STACK"))); do
      [[ $spec != *@* ]] || continue  # an arm runs its variant's build, whose runs here cover it
      label=$(spec_label "$spec")
      for setting in ${FLAKE_SETTINGS:-default GGML_CUDA_DISABLE_GRAPHS=1}; do
        failed=0 selected=""
        for ((run = 1; run <= runs; run++)); do
          log=$(log_path "flake-$label-$setting-$run")
          rc=0
          env $([[ $setting == default ]] || echo "$setting") "$(bin_of "$label")/test-backend-ops" test \
            -b "${CHECK_BACKEND:-CUDA0}" -o "$op" -p "$params" >"$log" 2>&1 || rc=$?
          selected=$(grep -o "[0-9]*/[0-9]* tests passed" "$log" | head -n 1 || true)
          if ((rc == 0)); then rm -f "$log"; else failed=$((failed + 1)); fi  # keep the logs of failed runs only
        done
        [[ $selected != "0/0 tests passed" ]] || selected="$selected (EMPTY: the selection matched no case)"
        echo "$label $setting op=$op params=$params runs=$runs failed=$failed last: ${selected:-no summary}" \
          | tee -a "$B/results/flake.txt"
      done
    done
    ;;
  race)
    each race || true
    ;;
  memcheck)  # llama-perplexity of stock and each measured variant with MEMCHECK_ARGS (default: two chunks of 512 tokens
    # at one token a batch, which aborted fusion-2-within-gdn in session 45) on MEMCHECK_MODEL (default the 35B preset),
    # CUDA graphs off; where a run fails, the same again under compute-sanitizer --tool memcheck, whose first report
    # names the kernel, the thread and the address, with FUSEKIT_GDN_DEBUG=1 (fusion-2's plan). A line each in
    # results/memcheck.txt (sabotaged builds are left out: their values are wrong on purpose); logs memcheck-*
    use_fusekit
    text=$(smoke_text) model=${MEMCHECK_MODEL:-$BIG}
    read -r -a args <<<"${MEMCHECK_ARGS:--c 512 --chunks 2 -b 512 -ub 1}"
    sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    : >"$B/results/memcheck.txt"
    # shellcheck disable=SC2046
    for spec in stock $(timed $(ok_variants $(measured "${FUSIONS[@]}" "$STACK" "${EXPERIMENTS[@]}" "$STACK_EXP"))); do
      [[ $spec != *@* ]] || continue  # an arm runs its variant's build, whose run here covers it
      label=$(spec_label "$spec") rc=0 outcome="runs through"
      run=("$(bin_of "$label")/llama-perplexity" -m "$model" -f "$text" "${args[@]}" -ngl 99)
      plain=$(log_path "memcheck-plain-$label")
      GGML_CUDA_DISABLE_GRAPHS=1 timeout "${MEMCHECK_PLAIN_TIMEOUT:-300}" "${run[@]}" >"$plain" 2>&1 || rc=$?
      if ((rc != 0)); then
        outcome="fails: $(grep -m 1 -o 'CUDA error: .*' "$plain" || echo "exit $rc")"
        checked=$(log_path "memcheck-$label")
        FUSEKIT_GDN_DEBUG=1 GGML_CUDA_DISABLE_GRAPHS=1 timeout "${MEMCHECK_TIMEOUT:-420}" "$sanitizer" --tool memcheck \
          --print-limit 8 "${run[@]}" >"$checked" 2>&1 || true
        first=$({ grep -m 1 -A 3 -E '^========= (Invalid|Misaligned|Program hit|Error)' "$checked" || true; } \
          | tr -s ' \n' ' ' | cut -c1-400)
        outcome="$outcome; memcheck: ${first:-no report (see $(basename "$checked"))}"
      fi
      echo "$label rc=$rc $outcome" | tee -a "$B/results/memcheck.txt"
    done
    ;;
  race-mm)  # issue #11's own measure, through the bridge (ggml_bridge mulmat: every contender checked against a
    # float64 reference of the same quantized weights, then timed interleaved): stock and each measured variant without
    # a sabotage patch on the whole shape table, RACE_TYPES (q8_0) at RACE_TOKENS (1,2,4,8); then each sabotaged
    # variant's bridge check, which must fail. Contenders are named by their spec (patch files by their stem).
    # Stock is raced twice (--control, an A/A control: session 52 saw identical launches in two builds differ by up to
    # 3%); RACE_CONTROL=0 drops it. RACE_PROCESSES=N (session 53: stock and its control, one build in two processes,
    # differed by up to 2.7-4.5% on medium shapes) times each contender in N processes with their rounds pooled.
    use_fusekit
    smi race-mm
    libs=(--lib-dir "stock=$(bin_of stock)") saboteurs=()
    for spec in $(ok_variants $(measured "$STACK" "$STACK_EXP")); do
      [[ $spec != *@* ]] || continue  # an arm runs its variant's build
      if sabotaged "$spec"; then saboteurs+=("$spec"); else libs+=(--lib-dir "$(spec_name "$spec")=$(bin_of "$(spec_label "$spec")")"); fi
    done
    [[ "${RACE_CONTROL:-1}" == 0 ]] || libs+=(--control)
    libs+=(--processes "${RACE_PROCESSES:-1}")
    python3 -m ggml_bridge mulmat "${libs[@]}" --backend CUDA0 --types "${RACE_TYPES:-q8_0}" --shapes seed \
      --tokens "${RACE_TOKENS:-1,2,4,8}" --check-tokens 1,2,3,8,64 --out "$B/results/race-mm.json" \
      >"$B/results/race-mm.txt" 2>"$B/logs/race-mm.log" || echo "race-mm: the bridge exited $? (log logs/race-mm.log)"
    tail -n 3 "$B/results/race-mm.txt"
    for spec in "${saboteurs[@]}"; do
      name=$(spec_name "$spec") stem="race-mm-sabotage-$(fit_name "$(spec_label "$spec")" 200)"
      python3 -m ggml_bridge mulmat --lib-dir "$name=$(bin_of "$(spec_label "$spec")")" --backend CUDA0 \
        --types "${RACE_TYPES:-q8_0}" --shapes seed --tokens 1 --check-tokens 1,2,8 --check \
        --out "$B/results/$stem.json" >"$B/results/$stem.txt" 2>&1 || true
      # judged from the result, not the exit status: a bridge that could not run fails too, and must not count; and
      # by the bridge's own rule of what is expected (its shifted-ids checks fail on every healthy build)
      echo "race-mm $name: $(python3 - "$B/results/$stem.json" <<'PY'
import json, sys
from ggml_bridge.report import check_counts
try:
    payload = json.load(open(sys.argv[1]))["payload"]
except (OSError, ValueError, KeyError):
    print("NO RESULT: the bridge did not run (see its .txt)")
    sys.exit()
wrong = len(check_counts(payload)["unexpected"])
verdict = "caught, as a sabotaged build must be" if wrong else "PASSED, and a sabotaged build must fail"
print(f"{wrong} of {len(payload['checks'])} checks went wrong: {verdict}")
PY
)" | tee -a "$B/results/checks.txt"
    done
    smi race-mm
    ;;
  node-profile)  # #11's race nodes under Nsight Systems (session 48: on 6144 x 4096 the stream kernel's node took 1.7
    # us more in race-mm than the kernel alone in the stream check, on 4096 x 4096 the same): for each NODE_SHAPES shape
    # (MxK, comma separated) and stock and each measured variant without a sabotage patch, the bridge's one-token
    # race of that shape alone (NODE_ROUNDS rounds) traced with nsys (results/node-race-SHAPE-NAME.json: the node
    # times), then `fusekit profile --from stock --against VARIANT` on the two traces
    # (results/node-profile-SHAPE-NAME.json): each kernel's own time (the product, the quantize) beside the node's;
    # the exports as results/node-traces/*.sqlite.xz. NODE_SETTINGS (session 50; default "default"): the whole step
    # once per setting, each "default" or K=V[,K=V] run under that environment on both sides, stock included, its
    # files keyed SHAPE_KV (GGML_CUDA_PDL=0 gives 6144x4096_GGML_CUDA_PDL0: the products without programmatic
    # dependent launch)
    use_fusekit
    smi node-profile
    if [[ -z $(nsys_path) ]]; then echo "node-profile: no nsys on this host" | tee "$B/logs/node-profile.log"; exit 0; fi
    specs=()
    for spec in $(ok_variants $(measured "$STACK" "$STACK_EXP")); do
      if [[ $spec != *@* ]] && ! sabotaged "$spec"; then specs+=("$spec"); fi
    done
    shapes=${NODE_SHAPES:-6144x4096,4096x4096,4096x14336}
    for setting in ${NODE_SETTINGS:-default}; do
      settings=() key_tag=""
      if [[ $setting != default ]]; then
        IFS=, read -ra settings <<<"$setting"
        key_tag="_$(printf '%s' "$setting" | tr -d '=' | tr ',' '_')"
      fi
      for shape in ${shapes//,/ }; do
        key="$shape$key_tag"
        for spec in stock "${specs[@]}"; do
          if [[ $spec == stock ]]; then
            name=stock label=stock file="node-$key-stock"
          else
            # the label fitted, not the whole name: a hashed name must keep its node- prefix (session 49's long stack
            # label lost it, and the variant's race JSON was overwritten by its profile)
            name=$(spec_name "$spec") label=$(spec_label "$spec")
            file="node-$key-$(fit_name "$label" 160)"
          fi
          nsys_trace "$B/traces/$file" env "${settings[@]}" python3 -m ggml_bridge mulmat \
            --lib-dir "$name=$(bin_of "$label")" --backend CUDA0 --types q8_0 --shapes "$shape" --tokens 1 \
            --check-tokens 1 --rounds "${NODE_ROUNDS:-3}" \
            --out "$B/results/${file/node-/node-race-}.json" >>"$B/logs/node-profile.log" 2>&1 \
            || echo "node-profile: $file did not trace (logs/node-profile.log)"
          # the export itself, xz-packed, comes back too (fusekit profile --from reads it): every launch's start and
          # end, for questions the summary does not answer (session 49: the stream kernel's spread by weight copy)
          if [[ -f "$B/traces/$file.sqlite" ]]; then
            mkdir -p "$B/results/node-traces"
            xz -T0 -c "$B/traces/$file.sqlite" >"$B/results/node-traces/$file.sqlite.xz"
          fi
          if [[ $spec != stock && -f "$B/traces/$file.sqlite" && -f "$B/traces/node-$key-stock.sqlite" ]]; then
            fusekit profile --from "$B/traces/node-$key-stock.sqlite" --against "$B/traces/$file.sqlite" \
              --json "$B/results/${file/node-/node-profile-}.json" 2>&1 | tee -a "$B/logs/node-profile.log" | tail -n 12 \
              || echo "node-profile: fusekit profile failed for $file (logs/node-profile.log)"
          fi
        done
      done
    done
    smi node-profile
    ;;
  smoke)  # a short prompt and decode of each variant on the 35B preset, and one chunk of perplexity at one token
    # per batch (SMOKE_VALUES=0: not): a crash or NaN log-probs keep it out of the evals; a sabotaged build is
    # expected to compute wrong values, so only its run is checked
    use_fusekit
    : >"$B/results/smoke.txt"
    for spec in stock $(ok_variants $(measured "${FUSIONS[@]}" "$STACK" "${EXPERIMENTS[@]}" "$STACK_EXP")); do
      [[ $spec != *@* ]] || continue  # an arm runs its variant's build: smoked as that variant
      rc=0 variant=$(spec_label "$spec") values="not checked"
      timeout 180 "$(bin_of "$variant")/llama-bench" -m "$BIG" -p 64 -n 16 -r 1 -ngl 99 -fa 1 -o csv \
        >"$(log_path "smoke-$variant")" 2>&1 || rc=$?
      if ((rc == 0)) && [[ "${SMOKE_VALUES:-1}" == 1 ]] && ! sabotaged "$spec"; then
        values=$(smoke_values "$variant") || rc=$?
      fi
      verdict=ok; ((rc == 0)) || verdict=fail
      echo "$variant $verdict rc=$rc values=\"$values\" $(tail -n 2 "$(log_path "smoke-$variant")" | tr '\n' ' ' | cut -c1-200)" \
        | tee -a "$B/results/smoke.txt"
    done
    ;;
  eval)
    session_eval "$(evaluated)" "$BIG" all-35b --ppl --kl --ppl-ubatch 1  # the one-token kernels the fusions change
    ;;
  eval-quality)  # perplexity, KL against stock and text at one token a batch, no timings (a fix checked for its values)
    session_eval "$(evaluated)" "$BIG" quality-35b --ppl --kl --ppl-ubatch 1 --no-speed
    ;;
  eval-decode)  # decode only (tg128, no prompts, no quality, no text) in many short rounds. Between processes a
    # variant's median moves 3-5% (session 15), far more than within one, so rounds narrow the interval and
    # repetitions do not: DECODE_ROUNDS (15) processes of DECODE_REPS (3) repetitions per side
    PROMPTS=0 ROUNDS=${DECODE_ROUNDS:-15} REPS=${DECODE_REPS:-3} session_eval "$(evaluated)" "$BIG" decode-35b --no-text
    ;;
  control)  # how far each model amplifies a pure fp32 order change: the controls and fusion-5, KL and text only
    mapfile -t CONTROLS < <(ls "$REPO"/patches/controls/*.patch)
    for model in "$BIG:control-35b" "$SECOND:control-llama8b"; do
      session_eval "$(ok_variants "${CONTROLS[@]}" fusion-5)" "${model%%:*}" "${model#*:}" --ppl --kl --ppl-ubatch 1 --no-speed
    done
    ;;
  eval2)  # the second model (llama shapes): the fusions that fire there, and the stack
    waited=0
    while [[ ! -f "$SECOND" ]] && ((waited < ${SECOND_WAIT:-0})); do sleep 5; waited=$((waited + 5)); done
    [[ -f "$SECOND" ]] || { echo "eval2: no second model $SECOND (waited ${SECOND_WAIT:-0} s)"; exit 1; }
    PROMPTS=512 session_eval "$(timed $(ok_variants $(measured fusion-1 fusion-5 "$STACK" "${EXPERIMENTS[@]}" "$STACK_EXP")))" "$SECOND" "${SECOND_NAME:-all-llama8b}" --ppl --kl --ppl-ubatch 1
    ;;
  profile-a)
    for spec in $(timed $(ok_variants $(measured "$STACK_EXP" "$STACK" fusion-5))); do session_profile "$spec" "$BIG"; done
    ;;
  ncu-kernel)  # one decode kernel under Nsight Compute (ncu_decode_kernel) in stock and each variant and arm profiled
    for spec in stock $(timed $(ok_variants $(measured "$STACK_EXP" "$STACK" fusion-5))); do ncu_decode_kernel "$spec"; done
    ;;
  profile-b)
    for spec in $(ok_variants fusion-1 fusion-3 fusion-2 "${EXPERIMENTS[@]}"); do session_profile "$spec" "$BIG"; done
    ;;
  pack)
    session_pack "${3:?output folder}"
    ;;
  kernels)  # standalone kernels not (yet) in the stack: fusion-4's passes, the conv window of fusion-2-conv-window,
    # the GLU output's q8_1 hand-offs (#7); check, sabotage, timing of each; then fla's chunked kernel at fusion-4's
    # shapes (its reference). KERNEL_PROGRAMS="chunked_gdn" runs only those programs (kernels/<name>_check.cu);
    # FLA_REFERENCE=0 skips fla's timing (it runs during the builds, on the GPU a standalone timing started beside the
    # session also uses: session 29's first call shared it); KERNEL_PROGRAMS=none runs no program (sessions 31 and 32
    # passed it and got a compile of kernels/none_check.cu)
    use_fusekit
    smi kernels
    programs=${KERNEL_PROGRAMS:-chunked_gdn conv_window glu_handoff}
    [[ $programs != none ]] || programs=""
    for program in $programs; do
      standalone_program "$program" || continue
      # KERNELS_NCU=0: no Nsight Compute pass over the program (up to NCU_TIMEOUT, 420 s, beside the builds);
      # NCU_KERNELS (a regex) profiles only the kernels it matches (default: every chunked_gdn_tc_ kernel)
      if [[ $program == chunked_gdn && ${KERNELS_NCU:-1} != 0 ]]; then
        ncu_chunked_gdn "$B/bin/${program}_check" "${NCU_KERNELS:-chunked_gdn_tc_}"
      fi
    done
    [[ "${FLA_REFERENCE:-1}" == 0 ]] || fla_reference
    smi kernels
    ;;
  variants)  # what start builds besides stock
    all_variants
    ;;
  *) echo "unknown step $STEP (run poll pack smoke check check-own eval-own check-mm control eval eval-decode eval2 race race-mm node-profile flake memcheck eval-quality ncu-kernel profile-a profile-b standalone kernels models variants)" >&2
     exit 2 ;;
esac
