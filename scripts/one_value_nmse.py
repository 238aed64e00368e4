#!/usr/bin/env python3
"""How often test-backend-ops fails a one-value Q4_0 product by its tolerance alone, with stock's arithmetic on both
sides: a Monte Carlo of MUL_MAT(type_a=q4_0, type_b=f32, m=1, n=1, k=K).

test-backend-ops fills both inputs with uniform values in [-1, 1] (the weights then quantized to Q4_0), computes the
product on the CPU backend (activations quantized to Q8_0, integer block sums times the two fp16 scales) and on CUDA
(activations quantized to Q8_1, whose fp16 block sum of the unquantized values stands in for the quantized one in
the nibble offset: d4 * (d8 * sum(nibble * q) - 8 * s)), and fails the case when the normalized mean squared error
(a - b)^2 / b^2 of its one value exceeds 5e-4. The two arithmetics differ in every block; when the product happens to
be close to zero, that difference is large against it. This draws many such cases and counts how many exceed each
threshold, with a 95% interval (Wilson). Both sides are computed in float64 from the fp16-rounded scales: the fp32
summation order of either backend moves the value by about 1e-7 of it, far below these differences.

    python3 scripts/one_value_nmse.py [--k 256] [--draws 2000000] [--seed 1] [--threshold 5e-4 --threshold 61]
                                      [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from evals.stats import wilson_interval

BLOCK = 32


def quantize_q4_0(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's reference Q4_0: per block of 32, d = (the value of largest magnitude) / -8, nibbles min(15, x/d + 8.5)
    truncated; returns (fp16-rounded d per block, nibbles 0..15)."""
    blocks = w.reshape(*w.shape[:-1], -1, BLOCK)
    index = np.abs(blocks).argmax(axis=-1)[..., None]
    extreme = np.take_along_axis(blocks, index, axis=-1)[..., 0]
    d = extreme / -8.0
    inverse = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    nibbles = np.minimum(15, (blocks * inverse[..., None] + 8.5).astype(np.int8)).astype(np.int32)
    return d.astype(np.float16).astype(np.float64), nibbles


def quantize_q8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q8_0 / Q8_1 activations: d = amax / 127, q = round(x / d); returns (fp16 d, q, fp16 sum of the unquantized
    values: Q8_1's s)."""
    blocks = x.reshape(*x.shape[:-1], -1, BLOCK)
    amax = np.abs(blocks).max(axis=-1)
    d = amax / 127.0
    inverse = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.rint(blocks * inverse[..., None]).astype(np.int32)
    s = blocks.sum(axis=-1)
    return d.astype(np.float16).astype(np.float64), q, s.astype(np.float16).astype(np.float64)


def one_value_products(rng: np.random.Generator, draws: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(CPU backend's value, CUDA's value) of `draws` one-value products of length k."""
    w = rng.uniform(-1.0, 1.0, size=(draws, k)).astype(np.float32).astype(np.float64)
    x = rng.uniform(-1.0, 1.0, size=(draws, k)).astype(np.float32).astype(np.float64)
    d4, nibbles = quantize_q4_0(w)
    d8, q, s8 = quantize_q8(x)
    nibble_dot = (nibbles * q).sum(axis=-1)  # per block, exact integers
    q_sum = q.sum(axis=-1)
    cpu = (d4 * d8 * (nibble_dot - 8 * q_sum)).sum(axis=-1)  # ggml_vec_dot_q4_0_q8_0
    cuda = (d4 * (d8 * nibble_dot - 8.0 * s8)).sum(axis=-1)  # vec_dot_q4_0_q8_1_impl, the offset through s
    return cpu, cuda


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=256, help="row length, a multiple of 32 (default 256)")
    parser.add_argument("--draws", type=int, default=2_000_000, help="products drawn (default 2,000,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threshold", type=float, action="append", help="NMSE thresholds (default 5e-4 and 61)")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args(argv)
    if args.k <= 0 or args.k % BLOCK or args.draws <= 0:
        print("one_value_nmse: --k must be a positive multiple of 32 and --draws positive", file=sys.stderr)
        return 2
    thresholds = args.threshold or [5e-4, 61.0]
    rng = np.random.default_rng(args.seed)
    exceeded = dict.fromkeys(thresholds, 0)
    chunk = max(1, min(args.draws, 4_000_000 // args.k))
    done = 0
    while done < args.draws:
        n = min(chunk, args.draws - done)
        cpu, cuda = one_value_products(rng, n, args.k)
        nmse = np.divide((cuda - cpu) ** 2, cpu**2, out=np.full_like(cpu, np.inf), where=cpu != 0)
        for t in thresholds:
            exceeded[t] += int((nmse > t).sum())
        done += n
    rows = []
    for t in thresholds:
        low, high = wilson_interval(exceeded[t], args.draws)
        share = exceeded[t] / args.draws
        rows.append({"threshold": t, "exceeded": exceeded[t], "fraction": share, "ci95": [low, high]})
        print(f"NMSE > {t:g}: {exceeded[t]} of {args.draws} ({share:.3e}, 95% [{low:.3e}, {high:.3e}])")
    if args.json:
        with open(args.json, "w") as f:
            command = "python3 scripts/one_value_nmse.py " + " ".join(argv if argv is not None else sys.argv[1:])
            json.dump(
                {"command": command, "k": args.k, "draws": args.draws, "seed": args.seed, "results": rows}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
