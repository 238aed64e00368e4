#!/usr/bin/env bash
# Record real Nsight Systems fixtures for tests/test_profile_fixtures.py (run on the GPU host).
#
#   scripts/nsys_fixture.sh MODEL.gguf OUT_DIR LABEL=BIN_DIR [LABEL=BIN_DIR ...]
#
# For each LABEL: a TOKENS-token decode with llama-bench from BIN_DIR, traced with
# `nsys profile -t cuda --cuda-graph-trace=node`, exported to SQLite, summarized by
# `nsys stats --report cuda_gpu_kern_sum --format csv`; both gzipped into OUT_DIR as
# LABEL-decodeN.sqlite.gz and LABEL-decodeN.kern_sum.csv.gz. The first LABEL is also recorded
# with --cuda-graph-trace=graph (LABEL-decodeN-graphlevel.*) so the test sees a collapsed trace.
#
# Environment:
#   NSYS               nsys executable (default: nsys on PATH, else the H200 host's copy)
#   FUSEKIT_NSYS_LIBS  folder holding libdw.so.1 and libelf.so.1, for QdstrmImporter when
#                      nsys's own import step fails (shared/gpu-host/H200.md)
#   TOKENS             tokens to decode (default 16)
#   BENCH_ARGS         extra llama-bench arguments (default: -ngl 99 -fa 1)
#   GRAPHLEVEL         1 (default): also record the first LABEL with graph-level tracing; 0: don't
set -euo pipefail

die() { echo "nsys_fixture: $*" >&2; exit 1; }

[ $# -ge 3 ] || die "usage: $0 MODEL.gguf OUT_DIR LABEL=BIN_DIR [LABEL=BIN_DIR ...]"
MODEL=$(realpath "$1"); OUT=$2; shift 2
[ -f "$MODEL" ] || die "no model at $MODEL"
TOKENS=${TOKENS:-16}
BENCH_ARGS=${BENCH_ARGS:--ngl 99 -fa 1}
NSYS=${NSYS:-$(command -v nsys || echo /opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys)}
[ -x "$NSYS" ] || die "nsys not found (set NSYS=/path/to/nsys)"
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

import_by_hand() {  # $1 = trace base; nsys left a .qdstrm but no .nsys-rep
    local importer
    importer=$(ls "$(dirname "$(realpath "$NSYS")")"/../*/QdstrmImporter 2>/dev/null | head -n 1 || true)
    [ -n "$importer" ] || die "nsys did not import $1.qdstrm and no QdstrmImporter was found near $NSYS"
    LD_LIBRARY_PATH="${FUSEKIT_NSYS_LIBS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$importer" -i "$1.qdstrm" \
        || die "QdstrmImporter failed: unpack Debian's libdw1 and libelf1 into a folder and set FUSEKIT_NSYS_LIBS to it"
}

record() {  # $1 = fixture name, $2 = bin dir, $3 = graph trace mode (node|graph)
    local name=$1 bin=$2 mode=$3 base="$WORK/$1"
    [ -x "$bin/llama-bench" ] || die "no llama-bench in $bin"
    echo "nsys_fixture: recording $name ($mode-level graph tracing)" >&2
    # shellcheck disable=SC2086
    "$NSYS" profile -t cuda --cuda-graph-trace="$mode" --force-overwrite=true -o "$base" \
        "$bin/llama-bench" -m "$MODEL" -p 0 -n "$TOKENS" -r 1 --no-warmup $BENCH_ARGS || true
    [ -f "$base.nsys-rep" ] || { [ -f "$base.qdstrm" ] || die "nsys wrote no trace for $name"; import_by_hand "$base"; }
    "$NSYS" export --type sqlite --force-overwrite=true -o "$base.sqlite" "$base.nsys-rep"
    "$NSYS" stats --report cuda_gpu_kern_sum --format csv -o "$base" "$base.sqlite"
    local csv  # nsys names it PREFIX_cuda_gpu_kern_sum.csv
    csv=$(ls "$base"_*cuda_gpu_kern_sum*.csv 2>/dev/null | head -n 1 || true)
    [ -n "$csv" ] || die "nsys stats wrote no ${base}_cuda_gpu_kern_sum.csv"
    gzip -9 -c "$base.sqlite" > "$OUT/$name.sqlite.gz"
    gzip -9 -c "$csv" > "$OUT/$name.kern_sum.csv.gz"
    ls -l "$OUT/$name".* >&2
}

first=1
for pair in "$@"; do
    label=${pair%%=*}; bin=${pair#*=}
    [ "$label" != "$pair" ] || die "expected LABEL=BIN_DIR, got $pair"
    record "$label-decode$TOKENS" "$bin" node
    if [ $first = 1 ] && [ "${GRAPHLEVEL:-1}" = 1 ]; then
        record "$label-decode$TOKENS-graphlevel" "$bin" graph
        first=0
    fi
done
"$NSYS" --version > "$OUT/NSYS_VERSION.txt"
echo "nsys_fixture: fixtures in $OUT (commit them under tests/fixtures/nsys)" >&2
