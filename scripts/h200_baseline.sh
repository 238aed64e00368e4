#!/usr/bin/env bash
# The stock baseline session on the H200, in steps that each fit one 10-minute device command.
# Builds and models come from scripts/gpu_batch.sh (setup, build, synth); this script adds the
# measurements of issues 4, 5 and 6 and packs everything for the trip back:
#
#   scripts/h200_baseline.sh B start      # gpu_batch setup + detached stock build + both models, then poll
#   scripts/h200_baseline.sh B fixtures   # nsys fixtures of a 16-token decode of the tiny qwen35moe model
#   scripts/h200_baseline.sh B mulmat     # the stock mul_mat sweep + test-backend-ops cross-check
#   scripts/h200_baseline.sh B bench      # stock vs stock@GGML_CUDA_DISABLE_FUSION=1 on the 35B model
#   scripts/h200_baseline.sh B profiles   # decode and prompt traces of the 35B model, both arms
#   scripts/h200_baseline.sh B pack OUT   # tar the batch folder's results (not the models) into OUT
#
# Environment as gpu_batch.sh (FUSEKIT_HOME, MODELS, BUNDLE); never changes clocks or power settings.
set -euo pipefail
B=${1:?batch folder}; STEP=${2:?step}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-gpu} MODELS=${MODELS:-/tmp/fusekit-models}
BIG=$MODELS/qwen3.6-35b-a3b.gguf
TINY=$MODELS/qwen35moe-tiny.gguf
mkdir -p "$B/results" "$B/logs"
# shellcheck source=host_env.sh
source "$REPO/scripts/host_env.sh"  # use_fusekit, fusekit, nsys_trace
stock_bin() { ls -d "$FUSEKIT_HOME"/trees/stock/build-cuda*/bin | head -n 1; }
smi() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >>"$B/results/clocks-$1.csv" 2>&1 || true; }

prepare_host() {  # setup, a detached stock CUDA build, both models written while it compiles, then poll
  "$REPO/scripts/gpu_batch.sh" "$B" setup
  POLL_SECONDS=0 "$REPO/scripts/gpu_batch.sh" "$B" build || [ $? = 3 ]
  use_fusekit
  "$REPO/scripts/gpu_batch.sh" "$B" synth
  fusekit model synth --preset qwen3.6-35b-a3b --layers 4 --vocab 8192 --experts 16 --experts-used 4 \
    -o "$TINY" --json "$B/results/model-tiny.json" 2>&1 | tail -n 3
  POLL_SECONDS=${POLL_SECONDS:-420} "$REPO/scripts/gpu_batch.sh" "$B" build
}

case "$STEP" in
  start)
    prepare_host
    ;;
  fixtures)
    use_fusekit
    smi fixtures
    TOKENS=16 "$REPO/scripts/nsys_fixture.sh" "$TINY" "$B/nsys" "stock=$(stock_bin)" 2>&1 | tail -n 12
    smi fixtures
    ;;
  mulmat)
    use_fusekit
    "$REPO/scripts/h200_mulmat_sweep.sh" "$(stock_bin)" "$B/mulmat" 2>&1 | tail -n 30
    ;;
  bench)
    use_fusekit
    fusekit eval "stock@GGML_CUDA_DISABLE_FUSION=1" --against stock --model "$BIG" --backend cuda --cuda-arch 90 \
      -p 512,4096 -n 128 --rounds ${ROUNDS:-3} -r ${REPS:-5} --no-text --ppl --kl --chunks 4 \
      --json "$B/results/baseline-eval.json" 2>&1 | tee "$B/logs/baseline-eval.log" | tail -n 40
    ;;
  profiles)
    use_fusekit
    smi profiles
    fusekit profile --model "$BIG" --decode 16 --out "$B/traces/decode" --json "$B/results/profile-decode16-stock.json" \
      --csv "$B/results/profile-decode16-stock.csv" 2>&1 | tail -n 30
    GGML_CUDA_DISABLE_FUSION=1 fusekit profile --model "$BIG" --decode 16 --out "$B/traces/decode-nofusion" \
      --json "$B/results/profile-decode16-nofusion.json" 2>&1 | tail -n 5
    nsys_trace "$B/traces/prompt/stock-prompt4096" "$(stock_bin)/llama-bench" -m "$BIG" -p 4096 -n 0 -r 1 -ngl 99 \
      --no-warmup
    fusekit profile --from "$B/traces/prompt/stock-prompt4096.sqlite" --json "$B/results/profile-prompt4096-stock.json" \
      --csv "$B/results/profile-prompt4096-stock.csv" 2>&1 | tail -n 25
    fusekit profile --from "$B/traces/decode/stock.sqlite" --against "$B/traces/decode-nofusion/stock.sqlite" \
      --tokens 16 --json "$B/results/profile-decode16-stock-vs-nofusion.json" 2>&1 | tail -n 25
    smi profiles
    ;;
  extras)  # second session: full-model quality on the GPU, a tiny-model arm fixture, raw 35B decode traces
    prepare_host
    fusekit model quality "$BIG" --gpu-layers 99 --json "$B/results/model-quality.json" 2>&1 | tail -n 3 || true
    GGML_CUDA_DISABLE_FUSION=1 GRAPHLEVEL=0 TOKENS=16 "$REPO/scripts/nsys_fixture.sh" "$TINY" "$B/nsys" \
      "stock-nofusion=$(stock_bin)" 2>&1 | grep -v Processing | tail -n 4
    ;;
  traces)  # raw 35B decode traces (gzipped SQLite) of stock and the no-fusion arm, for later re-parsing
    use_fusekit
    mkdir -p "$B/traces35"
    for arm in stock nofusion; do
      (  # GGML_CUDA_DISABLE_FUSION=1 in the nofusion arm's subshell only
        if [ "$arm" = nofusion ]; then export GGML_CUDA_DISABLE_FUSION=1; fi
        nsys_trace "$B/traces35/$arm-decode16" "$(stock_bin)/llama-bench" -m "$BIG" -p 0 -n 16 -r 1 -ngl 99 --no-warmup
      )
      gzip -6 -c "$B/traces35/$arm-decode16.sqlite" > "$B/traces35/$arm-decode16.sqlite.gz"
    done
    ls -l "$B"/traces35/*.gz
    ;;
  pack)
    OUTDIR=${3:?output folder}
    tar -czf "$OUTDIR/batch-$(date -u +%H%M%S).tgz" -C "$B" --exclude='traces' --exclude='*.sqlite' \
      --exclude='*.nsys-rep' --exclude='*.qdstrm' .
    ls -l "$OUTDIR"
    ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
