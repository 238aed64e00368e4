#!/usr/bin/env bash
# Device call for issue #11 (written in session 48; kernels/NOTES-q8-gemv.md, "Session 48"): where the race's node
# time goes on the one shape the stack still loses at one token. In session 48's race 6144 x 4096 took 13.70-13.86 us
# per node with the stream kernel (stock 12.67), where session 47's stream check had the kernel alone at 12.16; on
# 4096 x 4096 node and kernel agreed (9.40 / 9.35). Builds stock and L1 + ZY + M + F (the stack as raced in session
# 48) and runs the session's node-profile step: for each shape below, the bridge's one-token race of it alone, for
# stock and the stack, under Nsight Systems, and `fusekit profile` of the two traces (each kernel's own median time
# beside the node time; tracing inflates the node times, not the kernels'). Prediction: on 6144 x 4096 the stream
# kernel's own median is 12.0-12.5 us (its standalone time), so 1.2-1.8 us of the node lie outside it (a gap after
# the quantize that stock's node does not have); on 4096 x 4096 kernel and node differ by at most 0.5 us. Any card;
# about 8 minutes with the machine's start. Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE.
# STEPS overrides the steps (session 49: "node-profile smoke eval" adds the 35B eval of the stack against stock after
# the traces, with ROUNDS and PROMPTS from the environment).
# Session 50: NODE_SETTINGS="default GGML_CUDA_PDL=0" NODE_SHAPES=6144x4096,4096x4096 runs the traces twice, the
# second time with programmatic dependent launch off on both sides (kernels/NOTES-q8-gemv.md, "Session 50": the stack's
# kernel takes 11.30 us alone on the H100 but 12.14 exclusive through ggml on 6144 x 4096, with the same grid).
# Prediction: without PDL the stream kernel's own median there is 11.2-11.8 us and stock MMVQ's 10.9-11.4 (each loses
# the wait on its quantize that its traced duration holds under PDL), so the stack's loss to stock shrinks to at most
# 0.5 us; if the stream kernel stays at 12.0 or more, PDL is not the cause and y's buffer or the quantize between
# products is next (and if it comes back, the residency cap of kernels/NOTES-q8-gemv.md "Session 50": the stream grid
# has 384 CTAs for 528 slots on this table). About 7 minutes with the machine's start.
# Session 51: the stack with fusion-5-stream-zzzzz-residency-cap (the stream grid's CTAs at most ceil(CTAs / SMs) an
# SM) is traced beside it under every setting (prediction in the patch's header); about 10 minutes with the start.
# Session 51, after the run: the stack with fusion-5-stream-zzzzzz-full-grid (every CTA slot launched, rows dealt in
# turn) joins as a third variant, for the side-by-side race (STEPS=race-mm RACE_TOKENS=1, about 9 minutes with the
# start; the predictions are the two patches' headers).
# Session 52 (results/h100-2026-12-07-session52-race-cap-full/): the cap won 6144 x 4096 and the full grid 14336 x
# 4096, neither both. The variants are now the stack + cap, + cap + full grid, and + cap + full grid +
# fusion-5-stream-zzzzzzz-fill-or-cap (the full grid only where the plain grid has 4 CTAs on some SM); fill-or-cap's
# launch equals one of the other two on every shape, so each pair with equal launches is an A/A check of the race's
# noise between builds (prediction in its header). STEPS=race-mm RACE_TOKENS=1: about 7 minutes with the start.
# SABOTAGE=1 adds fill-or-cap under the stack's sabotage patch (tests/patches/sabotage-q8-stock-order.patch): race-mm
# then runs its bridge check, which must fail, and check-mm its test-backend-ops, which must fail (about 70 s more
# build through ccache).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
L1=stack-1-5-stock-order-l1 E=$PWD/patches/experiments
ZY=$E/fusion-5-stream-zy-y-registers.patch M=$E/fusion-5-stream-zzz-medium-tables.patch
F=$E/fusion-5-stream-zzzz-mmvq-short-tables.patch CAP=$E/fusion-5-stream-zzzzz-residency-cap.patch
FULL=$E/fusion-5-stream-zzzzzz-full-grid.patch FILL=$E/fusion-5-stream-zzzzzzz-fill-or-cap.patch
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 > "$OUT/card.txt"
export FOCUS="4" KERNEL_PROGRAMS=none FLA_REFERENCE=0 EVAL_FUSIONS=" " GPU1_STEPS=" "
# NODE_SHAPES: the step's default, 3 shapes
CAPPED="$L1+$ZY+$M+$F+$CAP" S=$PWD/tests/patches/sabotage-q8-stock-order.patch  # S as in issue11-medium-tables.sh
export VARIANTS="$CAPPED $CAPPED+$FULL $CAPPED+$FULL+$FILL" GPU0_STEPS="${STEPS:-node-profile}"
# FILL_ONLY=1 (session 53): fill-or-cap alone (with SABOTAGE=1 its sabotage build too), e.g. for check-mm when the cap
# and the full grid passed test-backend-ops already (session 52)
[[ "${FILL_ONLY:-0}" != 1 ]] || VARIANTS="$CAPPED+$FULL+$FILL"
[[ "${SABOTAGE:-0}" != 1 ]] || VARIANTS+=" $CAPPED+$FULL+$FILL+$S"
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((555 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
