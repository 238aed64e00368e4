"""Text identity: greedy generation with llama-completion for a fixed prompt set, compared byte for byte."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Fixed prompts: varied enough that a numerical change shows up somewhere within 128 greedy tokens.
DEFAULT_PROMPTS = (
    "The history of the printing press begins",
    "To make a loaf of bread, first",
    "def fibonacci(n):\n",
    "The three laws of thermodynamics state that",
    "Once upon a time, in a village by the sea,",
    "The capital of France is",
    "Matrix multiplication on a GPU is fast because",
    "Dear hiring manager, I am writing to",
)
CONTEXT_CHARS = 24


@dataclass(frozen=True)
class TextSettings:
    """Greedy decoding: every sampling flag is passed, so a changed default cannot alter the text."""

    tokens: int = 128
    prompts: int = len(DEFAULT_PROMPTS)
    ctx: int = 512
    threads: int = 1
    gpu_layers: int = 0

    def prompt_set(self) -> tuple[str, ...]:
        return DEFAULT_PROMPTS[: self.prompts]


def completion_command(tool: Path, model: Path, prompt: str, settings: TextSettings) -> list[str]:
    gpu = ["-ngl", str(settings.gpu_layers)] if settings.gpu_layers else []
    return [
        str(tool), "-m", str(model), "-p", prompt, "-n", str(settings.tokens), "-c", str(settings.ctx),
        "-t", str(settings.threads), *gpu, "-no-cnv", "--no-display-prompt", "--ignore-eos", "--no-warmup",
        "-s", "0", "--temp", "0", "--top-k", "1", "--top-p", "1.0", "--min-p", "0.0",
        "--repeat-penalty", "1.0", "--presence-penalty", "0.0", "--frequency-penalty", "0.0",
    ]  # fmt: skip


def first_difference(a: bytes, b: bytes) -> int | None:
    """Index of the first differing byte (the shorter length when one is a prefix); None when equal."""
    if a == b:
        return None
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def _snippet(data: bytes, start: int, end: int) -> str:
    return data[max(start, 0) : end].decode("utf-8", errors="replace")


def compare_texts(stock: bytes, variant: bytes) -> dict[str, Any]:
    """``identical``, or the first differing byte with a little context on each side."""
    pos = first_difference(stock, variant)
    if pos is None:
        return {"identical": True, "bytes": len(stock)}
    before = _snippet(stock, pos - CONTEXT_CHARS, pos)
    return {
        "identical": False,
        "first_difference": pos,
        "context_before": before,
        "stock_after": _snippet(stock, pos, pos + CONTEXT_CHARS),
        "variant_after": _snippet(variant, pos, pos + CONTEXT_CHARS),
        "stock_bytes": len(stock),
        "variant_bytes": len(variant),
    }
