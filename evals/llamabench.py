"""llama-bench: the command line of one timed process and the parsing of its ``-o json`` output."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusekit.errors import FusekitError

# Fields of each llama-bench JSON test object that a result keeps (the rest is the same for every run).
KEPT_FIELDS = (
    "build_commit",
    "build_number",
    "backends",
    "cpu_info",
    "gpu_info",
    "model_type",
    "n_threads",
    "n_gpu_layers",
    "n_batch",
    "n_ubatch",
    "n_prompt",
    "n_gen",
    "n_depth",
    "flash_attn",
    "test_time",
    "avg_ns",
    "stddev_ns",
    "avg_ts",
    "stddev_ts",
    "samples_ns",
    "samples_ts",
)


@dataclass(frozen=True)
class BenchSettings:
    """What llama-bench measures: prompt sizes, generation lengths, depths (comma lists pass through)."""

    prompt: str = "512"
    gen: str = "128"
    depth: str = "0"
    repetitions: int = 3
    threads: int = 1
    gpu_layers: int = 0

    def args(self) -> list[str]:
        args = ["-p", self.prompt, "-n", self.gen, "-d", self.depth, "-r", str(self.repetitions)]
        args += ["-t", str(self.threads), "-o", "json"]
        return args + (["-ngl", str(self.gpu_layers)] if self.gpu_layers else [])


def bench_command(tool: Path, model: Path, settings: BenchSettings) -> list[str]:
    return [str(tool), "-m", str(model), *settings.args()]


def bench_label(test: dict[str, Any]) -> str:
    """llama-bench's own names: ``pp512``, ``tg128``, ``pp512+tg128``, with ``@ d4096`` for a depth."""
    n_prompt, n_gen, n_depth = int(test["n_prompt"]), int(test["n_gen"]), int(test.get("n_depth", 0))
    if n_prompt and n_gen:
        name = f"pp{n_prompt}+tg{n_gen}"
    elif n_gen:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}"
    return f"{name} @ d{n_depth}" if n_depth else name


def parse_bench_json(stdout: str) -> list[dict[str, Any]]:
    """The test objects of one llama-bench run, each with its name and the kept fields."""
    start = stdout.find("[")
    try:
        tests = json.loads(stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise FusekitError(f"llama-bench printed JSON that does not parse: {exc}") from None
    if not isinstance(tests, list) or not tests:
        raise FusekitError("llama-bench printed no test results (expected a JSON list with -o json)")
    parsed = []
    for test in tests:
        missing = [key for key in ("n_prompt", "n_gen", "samples_ts", "samples_ns") if key not in test]
        if missing:
            raise FusekitError(f"llama-bench JSON lacks {', '.join(missing)}; is this a llama-bench of another age?")
        kept = {key: test[key] for key in KEPT_FIELDS if key in test}
        parsed.append({"test": bench_label(test), **kept})
    return parsed
