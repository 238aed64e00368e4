#!/usr/bin/env bash
# Device call for issue #8 (planned in session 45; kernels/NOTES-gdn-chains.md, "Session 45"): why F2X + pdl +
# fusion-2-within-gdn aborted `llama-perplexity -c 512 --chunks 2 -b 512 -ub 1` with a misaligned address. Builds
# stock and the fold, smoke-runs both, then the memcheck step: that command on each with CUDA graphs off, and the
# one that fails again under compute-sanitizer --tool memcheck with fusion-2's plan printed (results/memcheck.txt has
# the sanitizer's first report: kernel, thread, address). Carry [".bundle"]; then scripts/device_calls/poll.sh until
# SESSION DONE. About 10 minutes (one cold build; the sanitized run is capped at MEMCHECK_TIMEOUT, 420 s).
# Predicted (session 45): stock runs through; the fold fails again; the report names the folded instantiation of
# gated_delta_net_cuda (its fourth template argument true) reading q, k or beta, not the state.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH=/usr/local/cuda/bin:$PATH
P=$PWD/patches/experiments
F2X="fusion-2+$P/fusion-2-conv-window.patch+$P/fusion-2-reshape-residual.patch+$P/fusion-2-state-rows.patch"
export VARIANTS="$F2X+$P/fusion-2-pdl.patch+$P/fusion-2-within-gdn.patch"
export FOCUS="2" EVAL_FUSIONS=" " KERNEL_PROGRAMS=none KERNELS_NCU=0 FLA_REFERENCE=0
export GPU0_STEPS="${GPU0_STEPS:-smoke memcheck}" GPU1_STEPS=" "  # issue8-within-fixed.sh adds eval-quality
bash scripts/h200_session.sh /tmp/b run > /tmp/run.log 2>&1
bash scripts/h200_session.sh /tmp/b poll $((570 - SECONDS))
bash scripts/h200_session.sh /tmp/b pack "$OUT"
