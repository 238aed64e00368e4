#!/usr/bin/env bash
# Device call for issue #10 (planned in session 42; kernels/NOTES-stack.md, "Session 42"): step 5a through ggml
# (patches/experiments/fusion-4-two-pass.patch: step 4f's prep pass and step 5a's chain, two passes) against fusion-4
# (three passes), with the sabotage build of the two passes; the standalone program beside the builds (steps 4f, 4g
# and 5a checked, sabotaged and timed, Nsight Compute over those kernels only); then the eval of both against stock
# at 512- and 4096-token prompts. Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE.
# About 15 minutes. Predicted: GATED_DELTA_NET 45/45 and cache write 6/6 for both, the sabotage failing; perf at 32
# heads, T = 512: 80-92 us against fusion-4's ~116; pp4096 against fusion-4 +0.5-1.5%.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
X=$PWD/tests/patches TP=$PWD/patches/experiments/fusion-4-two-pass.patch
export VARIANTS="fusion-4 fusion-4+$TP fusion-4+$X/sabotage-chunked-gdn.patch+$TP" FOCUS="4" EVAL_FUSIONS=" "
export EVAL_VARIANTS="fusion-4 fusion-4+$TP" ROUNDS=3 PROMPTS=512,4096 KERNEL_PROGRAMS=chunked_gdn FLA_REFERENCE=0
export NCU_TIMEOUT=240 NCU_KERNELS='chunked_gdn_tc_(prep_(lean|rounded)|output_lean|chain_output)'
export GPU0_STEPS="smoke check-own eval" GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
