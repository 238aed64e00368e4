"""The weight shapes the bench races: one table, each shape with the model and table it comes from.

``M×K`` is rows × columns of the weight, i.e. output features × input features: 4096x14336 is
m=4096, k=14336 (Llama-3-8B's down projection). Activations are (tokens × K) float32.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusekit.errors import FusekitError

from .constants import BENCH_TYPES


@dataclass(frozen=True)
class Shape:
    m: int
    k: int
    model: str = ""
    table: str = ""
    experts_per_token: int = 0  # >0: a MoE expert table (each token reads this many such matrices)

    @property
    def key(self) -> str:
        return f"{self.m}x{self.k}"


SEED_SHAPES: tuple[Shape, ...] = (
    # archived V100 study
    Shape(512, 2048, "Qwen3.6-35B-A3B", "expert gate/up", experts_per_token=8),
    Shape(2048, 512, "Qwen3.6-35B-A3B", "expert down", experts_per_token=8),
    Shape(8192, 2048, "Qwen3.6-35B-A3B", "attention q (and gated-delta-net qkv)"),
    Shape(6144, 2048, "Qwen3-1.7B", "MLP gate/up"),
    Shape(2048, 6144, "Qwen3-1.7B", "MLP down"),
    Shape(12288, 2560, "V100 study (2560 hidden)", "attention qkv"),
    Shape(2560, 6144, "V100 study (2560 hidden)", "attention output / down"),
    Shape(640, 2560, "V100 study (2560 hidden)", "expert", experts_per_token=10),
    # Llama-3-8B
    Shape(4096, 4096, "Llama-3-8B", "attention q / o"),
    Shape(6144, 4096, "Llama-3-8B", "attention qkv fused"),
    Shape(14336, 4096, "Llama-3-8B", "MLP gate/up"),
    Shape(4096, 14336, "Llama-3-8B", "MLP down"),
    Shape(28672, 4096, "Llama-3-8B", "MLP gate+up fused"),
    Shape(128256, 4096, "Llama-3-8B", "output (vocab)"),
    # Qwen3.6-35B-A3B gated-delta-net (8192x2048 qkv is already listed above)
    Shape(4096, 2048, "Qwen3.6-35B-A3B", "gated-delta-net gate"),
    Shape(2048, 4096, "Qwen3.6-35B-A3B", "gated-delta-net out"),
    Shape(248320, 2048, "Qwen3.6-35B-A3B", "output (vocab)"),  # issue #11's head; added in session 47
)

# The CPU benchmark's six shapes (3 types × 6 shapes × 1 token must finish in 2 minutes on 2 cores).
CPU_BENCH_SHAPES = ("512x2048", "2048x512", "4096x2048", "2048x4096", "6144x2048", "2048x6144")

_SHAPE = re.compile(r"^(\d+)[xX×](\d+)$")


def parse_shapes(spec: str) -> list[Shape]:
    """``seed`` (the whole table), ``cpu-bench`` (six of its shapes) or a comma list of MxK.

    A listed shape that is in the table keeps its model and table facts.
    """
    if spec.strip() == "seed":
        return list(SEED_SHAPES)
    known = {s.key: s for s in SEED_SHAPES}
    if spec.strip() == "cpu-bench":
        return [known[key] for key in CPU_BENCH_SHAPES]
    shapes: list[Shape] = []
    for item in (part.strip() for part in spec.split(",")):
        match = _SHAPE.match(item)
        if not match or int(match.group(1)) <= 0 or int(match.group(2)) <= 0:
            raise FusekitError(
                f"malformed shape {item!r}: write MxK with positive integers, e.g. 4096x14336, or 'seed'"
            )
        key = f"{int(match.group(1))}x{int(match.group(2))}"
        shapes.append(known.get(key, Shape(int(match.group(1)), int(match.group(2)))))
    return shapes


def parse_types(spec: str) -> list[str]:
    names = {n.lower(): n for n in BENCH_TYPES}
    out = []
    for item in (part.strip() for part in spec.split(",")):
        if item.lower() not in names:
            raise FusekitError(f"unknown weight type {item!r} (known: {', '.join(BENCH_TYPES)})")
        out.append(names[item.lower()])
    return out


def parse_tokens(spec: str) -> list[int]:
    try:
        tokens = [int(part) for part in spec.split(",")]
    except ValueError:
        raise FusekitError(f"malformed --tokens {spec!r}: write a comma list of positive integers") from None
    if not tokens or min(tokens) <= 0:
        raise FusekitError(f"malformed --tokens {spec!r}: write a comma list of positive integers")
    return tokens


def fits(type_name: str, shape: Shape) -> bool:
    """Whether a row of K elements is a whole number of the type's blocks."""
    return shape.k % BENCH_TYPES[type_name] == 0


def split_fitting(types: list[str], shapes: list[Shape]) -> tuple[list[tuple[str, Shape]], list[str]]:
    """(type, shape) pairs to run, and one line per pair skipped because K is not a multiple of the block."""
    run, skipped = [], []
    for t in types:
        for s in shapes:
            if fits(t, s):
                run.append((t, s))
            else:
                skipped.append(f"{t} {s.key}: K={s.k} is not a multiple of the {BENCH_TYPES[t]}-element block")
    return run, skipped
