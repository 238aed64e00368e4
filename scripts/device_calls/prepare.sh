#!/usr/bin/env bash
# Run here, not on the device, on a fresh checkout before a session's first device call: the pinned llama.cpp
# (fusekit init), .bundle/ (slim tarball, wheels, and the debs nsys' importer and ccache need on the host) and
# SmolLM2-135M in two 47 MiB parts in .carry/ (eval2's second model; the first call and the first poll carry one
# part each, see issue7-residual-norm.sh). Both folders are git-ignored. Before the first call, also run
# scripts/device_calls/slim_tree.sh on (without it the tracked results/ leave no room for a part).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
fusekit init
debs=$(mktemp -d)
(cd "$debs" && apt-get download libdw1 libelf1 ccache libhiredis0.14 >/dev/null)
fusekit bundle -o .bundle --debs "$debs"
rm -rf "$debs"
cache="${FUSEKIT_HOME:-.fusekit}/cache"
model=$(python3 -c 'import sys; from pathlib import Path; from evals.models import default_model
print(default_model(Path(sys.argv[1]), lambda m: print(m, file=sys.stderr)).path)' "$cache")
bash scripts/carry_model.sh split "$model" .carry 47
du -sh .bundle .carry
