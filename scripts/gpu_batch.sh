#!/usr/bin/env bash
# One measurement batch on a GPU host: build stock and variants for the GPU's arch, synthesize the
# model, check the touched ops (CUDA vs CPU), then fusekit eval and fusekit profile. Every JSON,
# trace and log lands in OUT. Each step is its own command and stays under ~9 minutes, so hosts that
# cut a command at 10 minutes can run them one by one; the build runs detached and is polled.
#
#   scripts/gpu_batch.sh OUT setup                 # install from the bundle, fusekit init (seconds)
#   scripts/gpu_batch.sh OUT build  VARIANT...     # start the CUDA builds detached (or resume), poll ~8.5 min;
#                                                  # stock first, then BUILD_PARALLEL (default 4) variants at a time
#   scripts/gpu_batch.sh OUT wait                  # poll the build again (repeat until it says done)
#   scripts/gpu_batch.sh OUT synth                 # write the model (MODEL_ARGS) into MODELS (can run during the build)
#   scripts/gpu_batch.sh OUT quality               # top-1 probability / entropy of the model (after the build)
#   scripts/gpu_batch.sh OUT check  VARIANT...     # test-backend-ops -b CUDA0 for each variant's ops
#   scripts/gpu_batch.sh OUT eval   VARIANT...     # fusekit eval (tok/s, ppl, KL, text) vs stock
#   scripts/gpu_batch.sh OUT profile VARIANT...    # fusekit profile (nsys): stock against each variant
#   scripts/gpu_batch.sh OUT all    VARIANT...     # everything in order, for hosts without a limit
#
# A VARIANT is a fusion name or alias, or several joined by '+' (fusion-1+fusion-3).
# Settings (environment): BUNDLE (default .bundle: the folder 'fusekit bundle' wrote), FUSEKIT_HOME
# (default /tmp/fusekit-gpu), MODELS (default /tmp/fusekit-models: outside OUT, the model is 20 GB),
# MODEL_PRESET, MODEL_ARGS, EVAL_ARGS, PROFILE_ARGS, POLL_SECONDS (default 510), BACKEND (default cuda;
# cpu tries the steps without a GPU), CHECK_BACKEND (default CUDA0).
set -euo pipefail

OUT="${1:?usage: gpu_batch.sh OUT STEP [VARIANT...]}"
STEP="${2:?usage: gpu_batch.sh OUT STEP [VARIANT...]}"
shift 2
VARIANTS=("$@")

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${BUNDLE:-$REPO/.bundle}"
export FUSEKIT_HOME="${FUSEKIT_HOME:-/tmp/fusekit-gpu}"
MODELS="${MODELS:-/tmp/fusekit-models}"
MODEL_PRESET="${MODEL_PRESET:-qwen3.6-35b-a3b}"
MODEL_ARGS="${MODEL_ARGS:---experts-type q4_0 --dense-type q8_0}"
MODEL="$MODELS/$MODEL_PRESET.gguf"
EVAL_ARGS="${EVAL_ARGS:---backend cuda --ppl --kl}"
PROFILE_ARGS="${PROFILE_ARGS:---decode 16}"
POLL_SECONDS="${POLL_SECONDS:-510}"
BACKEND="${BACKEND:-cuda}"  # cpu: try the steps on a machine without a GPU
CHECK_BACKEND="${CHECK_BACKEND:-CUDA0}"  # test-backend-ops -b: compared against the CPU backend

mkdir -p "$OUT/logs" "$OUT/results"
OUT="$(cd "$OUT" && pwd)"

log() { echo "[gpu_batch $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/logs/batch.log" >&2; }

# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit

variant_specs() { tr '+' ' ' <<<"$1"; }

ops_of() {
  # The ggml ops a variant's fusions touch, from the registry (fusekit list --json).
  local names
  names="$(variant_specs "$1")"
  fusekit list --json | python3 -c '
import json, sys
wanted = set(sys.argv[1:])
ops = []
for f in json.load(sys.stdin):
    if f["name"] in wanted or f["alias"] in wanted:
        ops += [o for o in f["ops"] if o not in ops]
print(" ".join(ops))' $names
}

bin_dir() {
  # The CUDA build's bin folder of variant label $1.
  local found
  found="$(ls -d "$FUSEKIT_HOME/trees/$1"/build-"$BACKEND"*/bin 2>/dev/null | head -n1)"
  [[ -n "$found" ]] || { log "no $BACKEND build of $1 (run the build step)"; return 1; }
  echo "$found"
}

label_of() {
  # Make $1 the current variant (from stock) and print its label.
  fusekit reset >/dev/null
  # shellcheck disable=SC2046
  fusekit apply $(variant_specs "$1") >/dev/null
  fusekit status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["variant"])'
}

step_setup() {
  local tarball
  local tarball="$BUNDLE/llama.cpp-slim.tar.gz" deb
  [[ -f "$tarball" ]] || { log "no $tarball (run 'fusekit bundle -o .bundle' and carry it)"; exit 2; }
  mkdir -p "$FUSEKIT_HOME"
  FUSEKIT_SITE="$SITE_DIR" bash "$BUNDLE/run.sh" >"$OUT/logs/setup-exports.sh" 2>>"$OUT/logs/setup.log"
  if compgen -G "$BUNDLE/debs/*.deb" >/dev/null; then  # libdw1, libelf1 for nsys' importer; ccache
    mkdir -p "$FUSEKIT_HOME/nsys-debs"
    for deb in "$BUNDLE"/debs/*.deb; do dpkg -x "$deb" "$FUSEKIT_HOME/nsys-debs"; done
  fi
  use_fusekit
  fusekit init --source "$tarball" 2>&1 | tee -a "$OUT/logs/setup.log"
  nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.sm,clocks.max.mem --format=csv \
    >"$OUT/results/gpu.csv" 2>&1 || true
  fusekit pin >"$OUT/results/pin.txt"
}

build_all() {
  # Runs detached (see step_build): stock first (it fills the ccache), then the variants BUILD_PARALLEL at a
  # time. A variant that fails does not stop the others; the status file records the exit code.
  use_fusekit
  local specs=() v arch=()
  for v in "${VARIANTS[@]}"; do specs+=("$v"); done
  [[ "$BACKEND" == cuda ]] && arch=(--cuda-arch "${CUDA_ARCH:-90}")
  fusekit build "${specs[@]}" --backend "$BACKEND" "${arch[@]}" --parallel "${BUILD_PARALLEL:-4}" --json \
    >"$OUT/results/builds.json"
}

poll_build() {
  local waited=0 pid
  pid="$(cat "$OUT/logs/build.pid" 2>/dev/null || true)"
  while [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; do
    if ((waited >= POLL_SECONDS)); then
      log "build still running after ${waited}s of this step: run the 'wait' step again"
      tail -n 3 "$OUT/logs/build.log" >&2 || true
      exit 3
    fi
    sleep 15
    waited=$((waited + 15))
  done
  local status
  status="$(cat "$OUT/logs/build.status" 2>/dev/null || echo missing)"
  if [[ "$status" == missing ]]; then
    log "the build stopped before it finished (ended with the last command?); run the build step again: ninja resumes"
    exit 4
  fi
  if [[ "$status" != "0" ]]; then
    log "build failed (status $status); see $OUT/logs/build.log"
    tail -n 30 "$OUT/logs/build.log" >&2
    exit 1
  fi
  log "builds done"
}

step_build() {
  use_fusekit
  local running
  running="$(cat "$OUT/logs/build.pid" 2>/dev/null || true)"
  if [[ -n "$running" ]] && kill -0 "$running" 2>/dev/null; then
    log "a build is running already (pid $running): polling it"
    poll_build
    return
  fi
  rm -f "$OUT/logs/build.status"
  setsid nohup bash -c 'bash "$0" "$1" build-foreground "${@:2}"; echo $? >"$1/logs/build.status"' \
    "${BASH_SOURCE[0]}" "$OUT" "${VARIANTS[@]}" >"$OUT/logs/build.log" 2>&1 </dev/null &
  echo $! >"$OUT/logs/build.pid"
  log "build started (pid $(cat "$OUT/logs/build.pid")), log $OUT/logs/build.log"
  poll_build
}

step_synth() {
  use_fusekit
  mkdir -p "$MODELS"
  # shellcheck disable=SC2086
  fusekit model synth --preset "$MODEL_PRESET" $MODEL_ARGS -o "$MODEL" --json "$OUT/results/model.json" \
    2>&1 | tee "$OUT/logs/synth.log"
}

step_quality() {
  use_fusekit
  fusekit model quality "$MODEL" --json "$OUT/results/model-quality.json" 2>&1 | tee "$OUT/logs/quality.log"
}

step_check() {
  use_fusekit
  local v label bins op failed=0
  for v in "${VARIANTS[@]}"; do
    label="$(label_of "$v")"
    bins="$(bin_dir "$label")"
    for op in $(ops_of "$v"); do
      log "test-backend-ops $op on $label"
      "$bins/test-backend-ops" test -b "$CHECK_BACKEND" -o "$op" >"$OUT/logs/check-${v//+/_}-$op.log" 2>&1 \
        && log "  $op: OK" || { log "  $op: FAILED (see logs/check-${v//+/_}-$op.log)"; failed=$((failed + 1)); }
      grep -E "tests passed|FAIL" "$OUT/logs/check-${v//+/_}-$op.log" | tail -n 3 >&2 || true
    done
  done
  fusekit reset >/dev/null
  ((failed == 0)) || { log "$failed op checks failed"; exit 1; }
}

step_eval() {
  use_fusekit
  fusekit reset >/dev/null
  # shellcheck disable=SC2086
  fusekit eval "${VARIANTS[@]}" --against stock --model "$MODEL" $EVAL_ARGS --json "$OUT/results/eval.json" \
    2>&1 | tee "$OUT/logs/eval.log"
}

step_profile() {
  # fusekit profile records stock and the current variant and compares them: once per variant.
  use_fusekit
  local v name
  for v in "${VARIANTS[@]:-stock}"; do
    name="${v//+/_}"
    fusekit reset >/dev/null
    # shellcheck disable=SC2046
    [[ "$v" == stock ]] || fusekit apply $(variant_specs "$v") >/dev/null
    mkdir -p "$OUT/traces/$name"
    # shellcheck disable=SC2086
    fusekit profile $PROFILE_ARGS --model "$MODEL" --out "$OUT/traces/$name" --json "$OUT/results/profile-$name.json" \
      --csv "$OUT/results/profile-$name.csv" --png "$OUT/results/profile-$name.png" 2>&1 | tee "$OUT/logs/profile-$name.log"
  done
  fusekit reset >/dev/null
}

case "$STEP" in
  setup) step_setup ;;
  build) step_build ;;
  build-foreground) build_all ;;
  wait) poll_build ;;
  synth) step_synth ;;
  quality) step_quality ;;
  check) step_check ;;
  eval) step_eval ;;
  profile) step_profile ;;
  all) POLL_SECONDS=1000000; step_setup; step_build; step_synth; step_quality; step_check; step_eval; step_profile ;;
  *) echo "unknown step $STEP (setup build wait synth quality check eval profile all)" >&2; exit 2 ;;
esac
