#!/usr/bin/env python3
"""Time flash-linear-attention's ``chunk_gated_delta_rule`` at the 35B preset's gated-delta-net shapes on this GPU.

Issue #10 asks fusion-4 to beat fla's chunked kernel "timed on the same host in the same run with the same shapes",
with CUDA-graph replay (``triton.testing.do_bench_cudagraph``), not eager calls. This program is that timing: it runs
on the GPU host (its torch and triton; fla-core and einops from the bundle's wheels) and writes one JSON object that
the session report tables beside the standalone chunked-gdn program's (``evals/standalone_timings.py``).

Shapes (one sequence): keys and queries [1, T, 16, 128] (L2-normalised, as the model feeds the op), values
[1, T, 32, 128], log-space gates and post-sigmoid betas [1, T, 32], an initial state [1, 32, 128, 128], and the final
state written (as ggml's op writes its snapshot). Each case records the median and range of the per-replay means and
whether the output and final state came out finite; a case that raises records its error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

KEY_HEADS, VALUE_HEADS, HEAD_DIM = 16, 32, 128  # the 35B preset's gated-delta-net layer
DTYPES = ("bf16", "fp32")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line: where to write, which token counts and dtypes, how long to replay."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="write the result object here")
    parser.add_argument("--tokens", default="512,4096,16384", help="comma-separated prompt lengths (%(default)s)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated, of bf16 and fp32 (%(default)s)")
    parser.add_argument("--rep-ms", type=int, default=100, help="replay time per measurement, ms (%(default)s)")
    args = parser.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        parser.error(f"--tokens takes comma-separated integers, not {args.tokens!r}")
    if any(t < 1 for t in args.tokens):
        parser.error("--tokens must be positive")
    args.dtypes = args.dtypes.split(",")
    if unknown := [d for d in args.dtypes if d not in DTYPES]:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}: use {' or '.join(DTYPES)}")
    return args


def import_stack() -> tuple[Any, Any, Any, Any]:
    """torch, triton.testing, fla's chunk_gated_delta_rule and fla's version; one clear line where one is missing."""
    try:
        import torch
        import triton.testing
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except ImportError as err:
        sys.exit(f"fla_gdn_timing: cannot import {err.name} ({err}); it needs torch, triton, fla-core and einops")
    if not torch.cuda.is_available():
        sys.exit("fla_gdn_timing: torch sees no CUDA device")
    return torch, triton.testing, chunk_gated_delta_rule, version("fla-core")


def make_inputs(torch: Any, tokens: int, dtype: Any) -> dict[str, Any]:
    """One sequence of the 35B layer's inputs, seeded."""
    gen = torch.Generator(device="cuda").manual_seed(20261202)

    def normal(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32)

    keys = torch.nn.functional.normalize(normal(1, tokens, KEY_HEADS, HEAD_DIM), dim=-1)
    return {
        "q": normal(1, tokens, KEY_HEADS, HEAD_DIM).to(dtype),
        "k": keys.to(dtype),
        "v": normal(1, tokens, VALUE_HEADS, HEAD_DIM).to(dtype),
        "g": torch.nn.functional.logsigmoid(normal(1, tokens, VALUE_HEADS)).to(dtype),
        "beta": torch.sigmoid(normal(1, tokens, VALUE_HEADS)).to(dtype),
        "initial_state": normal(1, VALUE_HEADS, HEAD_DIM, HEAD_DIM),
    }


def time_case(torch: Any, testing: Any, kernel: Any, tokens: int, dtype_name: str, rep_ms: int) -> dict[str, Any]:
    """Median and range (µs) of the per-replay means of one call under CUDA-graph replay, and a finiteness check."""
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    case: dict[str, Any] = {"T": tokens, "dtype": dtype_name}
    try:
        inputs = make_inputs(torch, tokens, dtype)

        def call() -> Any:
            return kernel(**inputs, scale=HEAD_DIM**-0.5, output_final_state=True)

        out, final = call()
        torch.cuda.synchronize()
        case["finite"] = bool(torch.isfinite(out).all().item() and torch.isfinite(final).all().item())
        with torch.cuda.stream(torch.cuda.Stream()):  # graph capture refuses the default stream
            times = testing.do_bench_cudagraph(call, rep=rep_ms, return_mode="all")
        us = sorted(1000.0 * t for t in times)
        case.update(median_us=us[len(us) // 2], min_us=us[0], max_us=us[-1], replays=len(us))
    except Exception as err:  # a case that fails is recorded, the others still run
        case["error"] = f"{type(err).__name__}: {err}"[:500]
    finally:
        torch.cuda.empty_cache()
    return case


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch, testing, kernel, fla_version = import_stack()
    cases = []
    for tokens in args.tokens:
        for dtype_name in args.dtypes:
            case = time_case(torch, testing, kernel, tokens, dtype_name, args.rep_ms)
            shown = f"{case['median_us']:.1f} us" if "median_us" in case else case["error"]
            print(f"fla chunk_gated_delta_rule T={tokens} {dtype_name}: {shown}", flush=True)
            cases.append(case)
    result = {
        "program": "fla-gdn-reference",
        "device": torch.cuda.get_device_name(),
        "fla_core": fla_version,
        "torch": torch.__version__,
        "triton": version("triton"),
        "timing": f"triton.testing.do_bench_cudagraph, {args.rep_ms} ms of replay per measurement; µs per call",
        "shape": {"B": 1, "H_k": KEY_HEADS, "H_v": VALUE_HEADS, "S": HEAD_DIM},
        "cases": cases,
    }
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    timed = [c for c in cases if "median_us" in c and c.get("finite")]
    print(f"{len(timed)} of {len(cases)} cases timed with finite outputs; written {args.json}")
    return 0 if timed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
