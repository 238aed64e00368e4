"""Run the checks of one eval: stock and each variant side by side, each tool run in its own process.

Speed runs are interleaved (stock, variant, variant, stock, ...) over several rounds so that drift in
the machine's state lands on both sides; every sample is kept.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fusekit.build import BuildResult
from fusekit.errors import FusekitError
from fusekit.source import sha256_of
from fusekit.stack import file_stem
from fusekit.variants import Variant

from . import klbase
from .arms import arm_name, with_env
from .checkpoint import Checkpoint
from .clocks import ClockSampler
from .corpus import Corpus
from .coverage import uncompiled_only, variant_paths
from .llamabench import BenchSettings, bench_command, parse_bench_json
from .models import Model
from .perplexity import (
    PplSettings,
    kld_command,
    parse_final_estimate,
    parse_kld_statistics,
    ppl_command,
    too_short_message,
)
from .proc import ToolRun, run_tool, tail
from .stats import INTERVAL_METHOD, grouped_ratio_estimate, process_groups, rounds_needed
from .textgen import TextSettings, compare_texts, completion_command

Progress = Callable[[str], None]


@dataclass(frozen=True)
class EvalSettings:
    """Which checks run and how; frozen so that it can be stored and compared."""

    speed: bool = True
    text: bool = True
    ppl: bool = False
    kl: bool = False
    rounds: int = 4
    backend: str = "cpu"
    bench: BenchSettings = field(default_factory=BenchSettings)
    perplexity: PplSettings = field(default_factory=PplSettings)
    textgen: TextSettings = field(default_factory=TextSettings)

    def describe(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Side:
    """One column of the comparison: a variant and its build."""

    variant: Variant
    build: BuildResult
    alias: str = ""  # a second name when the baseline is compared with itself (an A/A run)
    env: tuple[tuple[str, str], ...] = ()  # an arm's extra environment (evals.arms)

    @property
    def name(self) -> str:
        return self.alias or arm_name(self.variant.label, self.env)

    def tool(self, name: str) -> Path:
        return self.build.tool(name)

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run with this side's environment."""
        return with_env(argv, self.env)

    def describe(self, backend: str) -> dict[str, Any]:
        paths = variant_paths(list(self.variant.entries))
        return {
            **self.variant.describe(),
            "name": self.name,
            "variant": self.variant.label,
            "env": dict(self.env),
            "build": {**self.build.record, "build_dir": str(self.build.build_dir)},
            "touched_paths": sorted(paths),
            "touches_only_uncompiled_backends": uncompiled_only(paths, backend),
        }


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def interleaved(sides: list[Side], rounds: int) -> list[tuple[int, Side]]:
    """(round, side) in ABBA order: forward on even rounds, backward on odd ones."""
    order = []
    for r in range(rounds):
        ordered = sides if r % 2 == 0 else list(reversed(sides))
        order += [(r, side) for side in ordered]
    return order


SpeedCheckpoint = Callable[[dict[str, Any], int], None]


def run_speed(
    sides: list[Side],
    model: Model,
    settings: EvalSettings,
    clocks: ClockSampler,
    progress: Progress,
    on_round: SpeedCheckpoint | None = None,
) -> dict[str, Any]:
    """llama-bench per side per round; per test: samples per side and the ratio of each variant to stock.

    ``on_round`` gets the speed payload of the rounds finished so far (and their count) after each round.
    """
    runs = []
    names = [side.name for side in sides]
    plan = interleaved(sides, settings.rounds)
    for index, (rnd, side) in enumerate(plan, 1):
        progress(f"tok/s: run {index}/{len(plan)} ({side.name}, round {rnd + 1})")
        clocks.tag = f"bench:{side.name}:{rnd}"
        cmd = bench_command(side.tool("llama-bench"), model.path, settings.bench)
        run = run_tool(side.command(cmd), f"llama-bench ({side.name})")
        clocks.tag = ""
        runs.append({"side": side.name, "round": rnd, "run": run.record(), "tests": parse_bench_json(run.stdout)})
        if on_round is not None and index % len(sides) == 0:
            on_round(speed_payload(runs, names, rnd + 1), rnd + 1)
    return speed_payload(runs, names, settings.rounds)


def speed_payload(
    runs: list[dict[str, Any]], names: list[str], rounds: int, method: str = INTERVAL_METHOD
) -> dict[str, Any]:
    """The speed payload of ``runs`` (``rounds`` complete rounds; ``names``: stock first, then the variants), its
    intervals by ``method`` (evals.stats; an older result's recorded method reproduces its summary)."""
    samples: dict[str, dict[str, list[float]]] = {}
    per_process: dict[str, dict[str, list[float]]] = {}  # median t/s of each process, to see drift between them
    groups = process_groups(runs)  # the samples of each process, kept apart
    for run in runs:
        for test in run["tests"]:
            samples.setdefault(test["test"], {}).setdefault(run["side"], []).extend(test["samples_ts"])
            median = float(np.median(test["samples_ts"]))
            per_process.setdefault(test["test"], {}).setdefault(run["side"], []).append(median)
    stock = names[0]
    summary = []
    for test in samples:
        for name in names[1:]:
            est = grouped_ratio_estimate(groups[test][stock], groups[test][name], method)
            summary.append(
                {
                    "test": test,
                    "variant": name,
                    **asdict(est),
                    "verdict": est.verdict,
                    "half_width": est.half_width,
                    "resolves_1pct": est.resolves_one_percent,
                    "rounds": rounds,
                    "rounds_for_1pct": rounds_needed(est, rounds),
                    "interval_method": method,
                    "process_spread": max(_spread(per_process[test][n]) for n in (stock, name)),
                }
            )
    return {"runs": list(runs), "samples_ts": samples, "summary": summary}


def _spread(values: list[float]) -> float:
    """max/min - 1 of a side's per-process medians: how far the machine drifted between processes."""
    return max(values) / min(values) - 1 if len(values) > 1 and min(values) > 0 else 0.0


def _perplexity_run(argv: list[str], what: str, corpus: Corpus) -> ToolRun:
    run = run_tool(argv, what, check=False)
    short = too_short_message(run.stdout + run.stderr, corpus.path)
    if short:
        raise FusekitError(short)
    if run.returncode != 0:
        raise FusekitError(f"{what} exited with {run.returncode}: {run.command_line}", detail=tail(run.stderr))
    return run


def _outputs(run: ToolRun) -> dict[str, Any]:
    """What a result keeps of a quality run: its command record, its stdout and the tail of its log."""
    return {"run": run.record(), "stdout": run.stdout, "stderr_tail": tail(run.stderr)}


def _parsed(parse, run: ToolRun, what: str) -> dict[str, Any]:
    try:
        return parse(run.stdout + "\n" + run.stderr)
    except FusekitError as exc:
        raise FusekitError(f"{what}: {exc.message}", detail=tail(run.stderr)) from None


def stock_kl_base(
    side: Side, model: Model, corpus: Corpus, settings: PplSettings, cache: Path, given: Path | None, progress: Progress
) -> tuple[Path, dict[str, Any]]:
    """The stock base for KL: a given file (checked), a cached one (checked), or a fresh run."""
    identity = klbase.base_identity(side.build.record, model.sha256, corpus.sha256, settings.key())
    if given is not None:
        return given, klbase.check_base(given, identity, settings.ctx)
    base = klbase.cache_path(cache, identity)
    if base.is_file() and klbase.sidecar_of(base).is_file():
        progress(f"KL: using the cached stock base {base.name}")
        return base, {**klbase.check_base(base, identity, settings.ctx), "cached": True}
    base.parent.mkdir(parents=True, exist_ok=True)
    progress("KL: computing the stock base (log-probs of stock on the corpus)")
    partial = base.with_name(base.name + ".part")
    run = _perplexity_run(
        ppl_command(side.tool("llama-perplexity"), model.path, corpus.path, settings, partial), "KL base", corpus
    )
    final = _parsed(parse_final_estimate, run, "llama-perplexity (stock KL base)")
    os.replace(partial, base)
    extra = {**_outputs(run), "final": final}
    return base, {**klbase.write_sidecar(base, identity, extra), "cached": False}


def run_quality(
    sides: list[Side],
    model: Model,
    corpus: Corpus,
    settings: EvalSettings,
    cache: Path,
    kl_base: Path | None,
    scratch: Path,
    progress: Progress,
) -> dict[str, Any]:
    """Perplexity per side and, with KL, each variant's divergence from stock and logit identity."""
    ppl_settings = settings.perplexity
    out: dict[str, Any] = {"ppl": {}, "kl": {}}
    stock = sides[0]
    if not settings.kl:
        for side in sides:
            progress(f"perplexity: {side.name}")
            cmd = ppl_command(side.tool("llama-perplexity"), model.path, corpus.path, ppl_settings, None)
            run = _perplexity_run(side.command(cmd), f"llama-perplexity ({side.name})", corpus)
            final = _parsed(parse_final_estimate, run, f"llama-perplexity ({side.name})")
            out["ppl"][side.name] = {**final, **_outputs(run)}
        return out
    base, record = stock_kl_base(stock, model, corpus, ppl_settings, cache, kl_base, progress)
    out["kl_base"] = {"path": str(base), **{k: v for k, v in record.items() if k != "stdout"}}
    out["ppl"][stock.name] = {**record["final"], "run": record["run"], "from": "stock KL base run"}
    for side in sides[1:]:
        progress(f"KL: {side.name} log-probs")
        own = scratch / f"{file_stem(side.name)}.kld"
        cmd = ppl_command(side.tool("llama-perplexity"), model.path, corpus.path, ppl_settings, own)
        run = _perplexity_run(side.command(cmd), f"llama-perplexity ({side.name})", corpus)
        final = _parsed(parse_final_estimate, run, f"llama-perplexity ({side.name})")
        out["ppl"][side.name] = {**final, **_outputs(run), "from": "own log-probs run"}
        own_sha = sha256_of(own)
        own.unlink()
        progress(f"KL: {side.name} against stock")
        kld_cmd = side.command(kld_command(side.tool("llama-perplexity"), model.path, base, ppl_settings))
        kld_run = run_tool(kld_cmd, "KL divergence")
        stats = _parsed(parse_kld_statistics, kld_run, f"llama-perplexity --kl-divergence ({side.name})")
        out["kl"][side.name] = {
            "statistics": stats,
            "logprobs_sha256": own_sha,
            "logprobs_identical": own_sha == record["sha256"],
            **_outputs(kld_run),
        }
    return out


def run_text(sides: list[Side], model: Model, settings: TextSettings, progress: Progress) -> dict[str, Any]:
    """Greedy text of each prompt on each side, and each variant's comparison with stock."""
    prompts = settings.prompt_set()
    texts: dict[str, list[str]] = {side.name: [] for side in sides}
    runs: list[dict[str, Any]] = []
    raw: dict[str, list[bytes]] = {side.name: [] for side in sides}
    for index, prompt in enumerate(prompts, 1):
        progress(f"text: prompt {index}/{len(prompts)}")
        for side in sides:
            cmd = completion_command(side.tool("llama-completion"), model.path, prompt, settings)
            run = run_tool(side.command(cmd), f"llama-completion ({side.name})")
            data = run.stdout.encode()
            raw[side.name].append(data)
            texts[side.name].append(run.stdout)
            runs.append({"side": side.name, "prompt": index - 1, "run": run.record()})
    stock = sides[0].name
    comparisons = {
        side.name: [compare_texts(raw[stock][i], raw[side.name][i]) for i in range(len(prompts))] for side in sides[1:]
    }
    return {"prompts": list(prompts), "texts": texts, "runs": runs, "comparisons": comparisons}


def run_eval(
    sides: list[Side],
    model: Model,
    corpus: Corpus | None,
    settings: EvalSettings,
    cache: Path,
    kl_base: Path | None,
    progress: Progress,
    checkpoint: Checkpoint | None = None,
) -> dict[str, Any]:
    """Every requested check; the payload of an eval result.

    ``checkpoint`` gets the payload so far and what was just completed ("quality", "text",
    "speed round k of n") after each phase and each speed round.
    """
    payload: dict[str, Any] = {"settings": settings.describe(), "timings": {}}
    scratch = cache / "eval-scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def save(completed: str, speed_s: float | None = None, **parts: Any) -> None:
        """Hand ``checkpoint`` the payload so far, with ``parts`` of the phase in progress."""
        if checkpoint is None:
            return
        timings = {**payload["timings"], **({"speed_s": speed_s} if speed_s is not None else {})}
        timings["total_s"] = time.monotonic() - started
        checkpoint({**payload, **parts, "timings": timings}, completed)

    # Quality first: a bad corpus or a crashing tool stops the eval before minutes of timing.
    if settings.ppl or settings.kl:
        if corpus is None:
            raise FusekitError("perplexity and KL divergence need a corpus")
        t0 = time.monotonic()
        payload["quality"] = run_quality(sides, model, corpus, settings, cache, kl_base, scratch, progress)
        payload["timings"]["quality_s"] = time.monotonic() - t0
        save("quality")
    if settings.text:
        t0 = time.monotonic()
        payload["text"] = run_text(sides, model, settings.textgen, progress)
        payload["timings"]["text_s"] = time.monotonic() - t0
        save("text")
    with ClockSampler(enabled=settings.backend == "cuda") as clocks:
        if settings.speed:
            t0 = time.monotonic()

            def speed_round(speed: dict[str, Any], done: int) -> None:
                what = f"speed round {done} of {settings.rounds}"
                save(what, time.monotonic() - t0, speed=speed, clocks=clocks.record())

            payload["speed"] = run_speed(sides, model, settings, clocks, progress, speed_round)
            payload["timings"]["speed_s"] = time.monotonic() - t0
    payload["clocks"] = clocks.record()
    payload["timings"]["total_s"] = time.monotonic() - started
    shutil.rmtree(scratch, ignore_errors=True)
    return payload
