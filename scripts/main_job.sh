#!/usr/bin/env bash
# The README's main job on the embedded defaults: fetch and verify the pinned llama.cpp, put every
# registered fusion on a variant, build stock and the variant (CPU here; CUDA where a GPU is visible),
# then measure the variant against stock.
set -euo pipefail
cd "$(dirname "$0")/.."

backend=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then backend=cuda; fi

fusekit init
fusions=$(fusekit list --json | python3 -c 'import json,sys; print(" ".join(f["name"] for f in json.load(sys.stdin)))')
if [ -z "$fusions" ]; then
  echo "main job: no fusions registered yet; using the example fusion from tests/data instead"
  export FUSEKIT_DATA="$PWD/tests/data"
  fusions=$(fusekit list --json | python3 -c 'import json,sys; print(" ".join(f["name"] for f in json.load(sys.stdin)))')
fi
fusekit reset
# shellcheck disable=SC2086
fusekit apply $fusions
fusekit status
fusekit build --backend "$backend"
# The comparison: tok/s, perplexity, KL divergence and text identity of the variant against stock.
fusekit eval --ppl --kl --backend "$backend"

# Where the fusions matter: the committed H200 result of fusion-5 and the whole stack against stock on the
# 35B-A3B-shaped model (decode and prompt speed, 5 interleaved rounds; KL and text at one token), rendered from its
# JSON; nothing is re-measured here.
H200_SESSION=results/h200-2026-12-01-session7-fusion5
H200_STACK=$H200_SESSION/eval-all-35b.json
echo
echo "== committed H200 result ($H200_STACK; full session report: $H200_SESSION/REPORT.md)"
fusekit report "$H200_STACK"

# Issue #12's one run (session 21, 3 interleaved rounds): stock, each fusion with the experiments measured on top of it
# (patches/experiments/) on its own, the stack 1-4 and the stack 1-5 with all of them (the q8_1 epilogues of the
# attention output and the gated output norm, packed short rows, Q4_0 experts, the norm's weights loaded early, the
# gated-delta-net conv window in one launch, ssm_out's product adding the residual, the recurrent state read in place,
# and the MMVQ fix; 848.8 kernels per token, stock 1,527.8), decode and prompts, with the stacks against their parts.
H200_EXPERIMENTS=results/h200-2026-12-03-session21-one-run
echo
echo "== committed H200 result, each fusion alone and the stacks 1-4 and 1-5 with their experiments ($H200_EXPERIMENTS/eval-all-35b.json; report: $H200_EXPERIMENTS/REPORT.md)"
fusekit report "$H200_EXPERIMENTS/eval-all-35b.json"

# Session 22 (3 interleaved rounds): the stack 1-5 with its one-token Q8_0 products of one input as one launch
# (patches/experiments/fusion-5-group.patch, `fusekit apply stack-1-5-group`), against stock and against the stack 1-5.
H200_GROUP=results/h200-2026-12-03-session22-group
echo
echo "== committed H200 result, the stack 1-5 with grouped products ($H200_GROUP/eval-all-35b.json; report: $H200_GROUP/REPORT.md)"
fusekit report "$H200_GROUP/eval-all-35b.json"

# Session 23 (3 interleaved rounds): stack-1-5-group with ssm_alpha and ssm_beta (F32) in the group launch
# (patches/experiments/fusion-5-grouped-f32.patch, `fusekit apply stack-1-5-grouped-f32`): issue #12's aim of 1.5x.
H200_GROUPED_F32=results/h200-2026-12-03-session23-grouped-f32
echo
echo "== committed H200 result, the grouped stack with its F32 products ($H200_GROUPED_F32/eval-all-35b.json; report: $H200_GROUPED_F32/REPORT.md)"
fusekit report "$H200_GROUPED_F32/eval-all-35b.json"

# Session 25 (3 interleaved rounds): the grouped stack with fusion-5's sums in stock MMVQ's order
# (`fusekit apply stack-1-5-stock-order`): stock's log-probs and text, beside the grouped stack (GF) in the same run.
H200_STOCK_ORDER=results/h200-2026-12-03-session25-exact-order
echo
echo "== committed H200 result, the stack with stock's log-probs ($H200_STOCK_ORDER/eval-all-35b.json; report: $H200_STOCK_ORDER/REPORT.md)"
fusekit report "$H200_STOCK_ORDER/eval-all-35b.json"

# Session 26 (3 interleaved rounds): the exact stack with the stream kernel for its split-2 tables
# (`fusekit apply stack-1-5-stock-order-stream`), beside stack-1-5-stock-order in the same run: stock's log-probs and text.
H200_STOCK_ORDER_STREAM=results/h200-2026-12-03-session26-wider-stream
echo
echo "== committed H200 result, the exact stack with its split tables streamed ($H200_STOCK_ORDER_STREAM/eval-all-35b.json; report: $H200_STOCK_ORDER_STREAM/REPORT.md)"
fusekit report "$H200_STOCK_ORDER_STREAM/eval-all-35b.json"
