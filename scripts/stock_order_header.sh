#!/usr/bin/env bash
# fusekit-q8-gemv.cuh as the stack leaves it, for the standalone programs of the stream kernel
# (stock_order_gpu_check.sh, stream_reuse_gpu_check.sh): kernels/ plus the experiment patches that change it, in the
# stack's order, written to DIR/ggml/src/ggml-cuda/; prints the header's sha256 and the patches on one line.
#
#   bash scripts/stock_order_header.sh DIR
#   PATCHES="fusion-5-group ... fusion-5-stream-via-l1" bash scripts/stock_order_header.sh DIR   (the last ones left off)
#   UNTIL=fusion-5-stream-via-l1 bash scripts/stock_order_header.sh DIR   (the list up to and including that one)
set -euo pipefail
DIR=${1:?output folder}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$DIR/ggml/src/ggml-cuda"
cp "$REPO/kernels/fusekit-q8-gemv.cuh" "$DIR/ggml/src/ggml-cuda/"
for patch in ${PATCHES:-fusion-5-group fusion-5-grouped-f32 fusion-5-stock-order fusion-5-stock-ordered-tiles fusion-5-stock-streamed fusion-5-stock-whole-blocks fusion-5-stock-wider-stream fusion-5-stock-y-shared fusion-5-stream-lean-issue fusion-5-stream-rows-in-turn fusion-5-stream-slot-addresses fusion-5-stream-tma-copies fusion-5-stream-via-l1 fusion-5-stream-with-l2-hints fusion-5-stream-y-pairs fusion-5-stream-z-hinted-l1 fusion-5-stream-zy-y-registers fusion-5-stream-zz-y-registers-first fusion-5-stream-zzz-medium-tables}; do
  (cd "$DIR" && git apply --include=ggml/src/ggml-cuda/fusekit-q8-gemv.cuh "$REPO/patches/experiments/$patch.patch")
  applied="${applied:+$applied }$patch"
  [[ $patch != "${UNTIL:-}" ]] || break
done
if [[ -n ${UNTIL:-} && $applied != *"$UNTIL" ]]; then
  echo "stock_order_header.sh: UNTIL=$UNTIL is not in the list" >&2; exit 2
fi
echo "header sha256 $(sha256sum "$DIR/ggml/src/ggml-cuda/fusekit-q8-gemv.cuh" | cut -d' ' -f1) ($applied)"
