#!/usr/bin/env bash
# Device call for issue #8 (session 46; kernels/NOTES-gdn-chains.md, "Session 46"): the fold with match_within's use
# after free fixed (its entry copied before the erase). Builds stock and F2X + pdl + the fold; smoke; the memcheck
# step (`llama-perplexity -c 512 --chunks 2 -b 512 -ub 1`, graphs off, on both; a failing one again under
# compute-sanitizer); then eval-quality (perplexity, KL against stock and text at one token a batch, no timings).
# Carry [".bundle"]; then scripts/device_calls/poll.sh until SESSION DONE. About 10 minutes.
# Predicted (before the run): both memcheck commands run through; the fold's log-probs byte-identical to stock's
# (logprobs_identical in eval-quality-35b.json), as F2X's and F2X + pdl's were in session 44's eval with the same
# flags (results/h100-2026-12-06-session44-pdl/eval-all-35b.json, sha256 c6a36276fbf4...); text identical.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
GPU0_STEPS="smoke memcheck eval-quality" exec bash scripts/device_calls/issue8-within-memcheck.sh
