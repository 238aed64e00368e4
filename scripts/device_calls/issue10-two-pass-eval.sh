#!/usr/bin/env bash
# Device call for issue #10 (planned in session 42; kernels/NOTES-chunked-gdn.md, "Steps 4f, 4g and 5a as
# measured"): what session 42's call left out for the two passes (patches/experiments/fusion-4-two-pass.patch).
# fusion-4's own eval of fusion-4 and the two passes against stock at 512-token batches across a 4,096-token context
# (the chunked path runs: KL, text, pp512, pp4096, tg128), and the kernels step's standalone program with
# flash-linear-attention's chunked kernel timed at the same shapes on the same host (#10's comparison). On an H200
# where one is lent. Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE. About 12 minutes.
# Predicted: mean KLD of the two passes against stock at most 1e-4 and within 2x fusion-4's (the same TF32 products,
# other sums); text as fusion-4's; standalone whole at T = 512 76-84 us; fla bf16 still faster (about 57 us, H200).
# Session 43 ran it on an H100 (results/h100-2026-12-06-session43-two-pass-eval/). Since session 44 the experiment's
# prep pass is step 4i's: predicted then pp4096 +0.3-0.8% over session 43's 1.0812x stock (H100), standalone whole at
# T = 512 74-76 us (H100), KL and text as session 43's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
TP=$PWD/patches/experiments/fusion-4-two-pass.patch
export VARIANTS="fusion-4 fusion-4+$TP" FOCUS="4" EVAL_FUSIONS=" " ROUNDS=3 PROMPTS=512,4096
export KERNEL_PROGRAMS=chunked_gdn KERNELS_NCU=0 FLA_REFERENCE=1 GPU0_STEPS="smoke eval-own" GPU1_STEPS=" "
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
