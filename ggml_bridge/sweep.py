"""A sweep: contenders (one or more worker processes each) × weight types × shapes × token counts, checked then timed.

Rounds are interleaved: round r asks every worker for one block of timed graph computes,
alternating which goes first, so drift in clocks or neighbours spreads over all of them.
With ``processes`` > 1 each contender is timed in that many processes and its rounds are pooled: a process keeps
an offset of its own for the whole sweep (session 53 measured up to 3-5% between two processes of one build), which
no number of rounds inside one process averages out.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evals.results import new_result
from fusekit.errors import FusekitError

from .checks import thresholds_table
from .shapes import Shape

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = 128 << 20  # assumed last-level cache when neither the device nor --l2 says
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Contender:
    label: str
    lib_dir: Path
    record: dict[str, Any] = field(default_factory=dict)  # variant description and build stamp


@dataclass(frozen=True)
class SweepSpec:
    types: tuple[str, ...]
    shapes: tuple[Shape, ...]
    tokens: tuple[int, ...]
    device: str = "CPU"
    check_tokens: tuple[int, ...] = (1, 2, 4, 8, 64, 512)  # checked besides the timed token counts
    check_only: bool = False
    sabotage: bool = False
    rounds: int = 7
    reps: int = 3  # graph computes per round; a round's sample is their median
    warmup: int = 2
    l2_bytes: int | None = None
    copies: int | None = None  # None: enough copies for 4× the cache
    min_nodes: int = 32
    threads: int | None = None
    seed: int = 1234
    processes: int = 1  # worker processes per contender, timed side by side; checks run in the first only

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["shapes"] = [asdict(s) for s in self.shapes]
        return d


class WorkerProcess:
    """A ``python -m ggml_bridge.worker`` child speaking JSON lines."""

    def __init__(self, contender: Contender, device: str, threads: int | None) -> None:
        self.contender = contender
        cmd = [sys.executable, "-m", "ggml_bridge.worker", "--lib-dir", str(contender.lib_dir), "--device", device]
        if threads:
            cmd += ["--threads", str(threads)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")])}
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # see ggml_bridge/__init__
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        hello = self._read()
        if "error" in hello:
            self.close()
            raise FusekitError(f"{contender.label}: {hello['error']}")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise FusekitError(f"the {self.contender.label} worker died (exit status {code}); its stderr is above")
        return json.loads(line)

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise FusekitError(f"{self.contender.label}: {reply['error']}")
        return reply["ok"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def summarize(samples: list[float]) -> dict[str, float]:
    """Median, quartiles and extremes of per-node seconds."""
    arr = np.asarray(samples, dtype=np.float64)
    q1, med, q3 = (float(v) for v in np.percentile(arr, [25, 50, 75]))
    return {
        "median": med,
        "q1": q1,
        "q3": q3,
        "min": float(arr.min()),
        "max": float(arr.max()),
        "iqr_pct": 100.0 * (q3 - q1) / med if med else 0.0,
    }


def plan_copies(weight_bytes: int, cache_bytes: int, override: int | None) -> int:
    """Weight copies so that together they are at least four times the cache (1 when one copy already is)."""
    if override:
        return override
    return max(1, math.ceil(4 * cache_bytes / max(weight_bytes, 1)))


def by_contender(samples: list[list[float]], contenders: int) -> list[list[list[float]]]:
    """Per-worker samples (process p of contender c at p * contenders + c) regrouped: contender -> process -> rounds."""
    return [samples[c::contenders] for c in range(contenders)]


def process_spread(per_process: list[list[float]]) -> dict[str, Any]:
    """Each process's median (µs) and their spread, (largest - smallest) / their median in %."""
    medians = [float(np.median(block)) * 1e6 for block in per_process]
    middle = float(np.median(medians))
    return {"process_us": medians, "process_spread_pct": 100.0 * (max(medians) - min(medians)) / middle}


def _interleaved(
    workers: list[WorkerProcess], rounds: int, ask: Callable[[WorkerProcess], list[float]]
) -> list[list[float]]:
    samples: list[list[float]] = [[] for _ in workers]
    for r in range(rounds):
        order = list(range(len(workers)))
        if r % 2:
            order.reverse()
        for i in order:
            block = ask(workers[i])
            samples[i].append(float(np.median(block)))
    return samples


def run_sweep(
    contenders: list[Contender], spec: SweepSpec, pairs: list[tuple[str, Shape]], progress: Progress
) -> dict[str, Any]:
    """Check (and unless check-only, time) every (type, shape) for every contender; the payload of a result."""
    workers: list[WorkerProcess] = []  # process p of contender c at index p * len(contenders) + c
    try:
        for _ in range(spec.processes):
            for c in contenders:
                workers.append(WorkerProcess(c, spec.device, spec.threads))
        infos = [w.call("info") for w in workers[: len(contenders)]]
        device = infos[0]
        cache = spec.l2_bytes or device["cache_bytes"] or DEFAULT_CACHE
        cache_source = "--l2" if spec.l2_bytes else (device["cache_source"] if device["cache_bytes"] else "default")
        payload: dict[str, Any] = {
            "spec": spec.describe(),
            "device": device,
            "devices": {c.label: info for c, info in zip(contenders, infos, strict=True)},
            "cache_bytes": cache,
            "cache_source": cache_source,
            "thresholds": thresholds_table(),
            "timing_includes": (
                "wall clock around one synchronised ggml_backend_graph_compute of a graph of N mul_mat nodes, "
                "divided by N: the kernel, per-node launch/dispatch cost, and any activation quantization "
                "kernel the backend runs per node (CUDA: quantize_q8_1; each node reads its own activation "
                "tensor, so no contender reuses one node's quantization in the next); not the host-device transfers"
            ),
            "cases": [],
            "checks": [],  # every check of every contender: MUL_MAT at all token counts, MUL_MAT_ID for experts
        }
        if not spec.check_only:
            payload["roofline"] = _roofline(workers, contenders, spec, cache, progress)
        started = time.monotonic()
        for index, (type_name, shape) in enumerate(pairs):
            progress(f"[{index + 1}/{len(pairs)}] {type_name} {shape.key} ({time.monotonic() - started:.0f}s)")
            payload["cases"] += _run_case(workers, contenders, spec, type_name, shape, index, cache, payload)
        return payload
    finally:
        for w in workers:
            w.close()


def _roofline(
    workers: list[WorkerProcess], contenders: list[Contender], spec: SweepSpec, cache: int, progress: Progress
) -> dict[str, Any]:
    nbytes = max(8 * cache, 16 << 20)  # eight times the cache: the copy streams from memory
    progress(f"memory roofline: f32 copy of {nbytes >> 20} MiB")
    for w in workers:
        w.call("copy_setup", nbytes=nbytes, warmup=spec.warmup)
    samples = _interleaved(workers, spec.rounds, lambda w: w.call("time_round", reps=spec.reps)["samples"])
    for w in workers:
        w.call("time_release")
    out = {}
    for c, per_process in zip(contenders, by_contender(samples, len(contenders)), strict=True):
        s = [x for block in per_process for x in block]
        stats = summarize(s)
        out[c.label] = {"bytes_copied": nbytes, "samples_s": s, **stats, "gb_s": 2 * nbytes / stats["median"] / 1e9}
    out["gb_s"] = max(v["gb_s"] for v in out.values() if isinstance(v, dict))
    out["counts"] = "bytes read + bytes written"
    return out


def _run_case(
    workers: list[WorkerProcess],
    contenders: list[Contender],
    spec: SweepSpec,
    type_name: str,
    shape: Shape,
    index: int,
    cache: int,
    payload: dict[str, Any],
) -> list[dict[str, Any]]:
    seed = spec.seed * 1000 + index
    all_tokens = sorted(set(spec.tokens) | set(spec.check_tokens))
    checks = [[n, seed * 100 + j + 1] for j, n in enumerate(all_tokens)]
    prepared = [  # the checks in each contender's first process; the others only quantize the same weights
        w.call(
            "prepare",
            type_name=type_name,
            m=shape.m,
            k=shape.k,
            seed=seed,
            checks=checks if i < len(contenders) else [],
            corrupt=spec.sabotage,
        )
        for i, w in enumerate(workers)
    ][: len(contenders)]
    for c, prep in zip(contenders, prepared, strict=True):
        payload["checks"] += [{"contender": c.label, **x} for x in prep["checks"]]
    if shape.experts_per_token:
        n_used = shape.experts_per_token
        id_tokens = [n for n in all_tokens if n <= 64]
        for c, w in zip(contenders, workers[: len(contenders)], strict=True):
            found = w.call(
                "check_id",
                type_name=type_name,
                m=shape.m,
                k=shape.k,
                n_expert=2 * n_used,
                n_used=n_used,
                tokens=id_tokens,
                seed=seed,
                corrupt=spec.sabotage,
            )
            payload["checks"] += [{"contender": c.label, **x} for x in found["checks"]]
    cases = []
    for n in spec.tokens:
        row: dict[str, Any] = {
            "type": type_name,
            "m": shape.m,
            "k": shape.k,
            "n": n,
            "model": shape.model,
            "table": shape.table,
            "experts_per_token": shape.experts_per_token,
            "weights_seed": seed,
            "contenders": {},
        }
        for c, prep in zip(contenders, prepared, strict=True):
            check = next(x for x in prep["checks"] if x["n"] == n)
            row["contenders"][c.label] = {"check": check, "weights_sha256": prep["weights_sha256"]}
        if not spec.check_only:
            weight_bytes = int(prepared[0]["weight_bytes"])
            copies = plan_copies(weight_bytes, cache, spec.copies)
            nodes = max(copies, spec.min_nodes)
            for w in workers:
                w.call("time_setup", n=n, copies=copies, nodes=nodes, warmup=spec.warmup)
            samples = _interleaved(workers, spec.rounds, lambda w: w.call("time_round", reps=spec.reps)["samples"])
            for w in workers:
                w.call("time_release")
            row.update(copies=copies, nodes=nodes, weight_bytes=weight_bytes, activation_bytes=n * shape.k * 4)
            roof = payload.get("roofline", {}).get("gb_s")
            for c, per_process in zip(contenders, by_contender(samples, len(contenders)), strict=True):
                pooled = [x for block in per_process for x in block]
                entry = _metrics(pooled, weight_bytes + n * shape.k * 4, shape, n, roof)
                if spec.processes > 1:
                    entry.update(process_spread(per_process))
                row["contenders"][c.label].update(entry)
        cases.append(row)
    return cases


def _metrics(samples: list[float], nbytes: int, shape: Shape, n: int, roof_gb_s: float | None) -> dict[str, Any]:
    stats = summarize(samples)
    t = stats["median"]
    gb_s = nbytes / t / 1e9
    return {
        "samples_s": samples,
        **stats,
        "us": t * 1e6,
        "gb_s": gb_s,
        "roofline_pct": 100.0 * gb_s / roof_gb_s if roof_gb_s else None,
        "tflop_s": 2.0 * shape.m * shape.k * n / t / 1e12,
    }


def bench_result(
    contenders: list[Contender],
    spec: SweepSpec,
    pairs: list[tuple[str, Shape]],
    skipped: list[str],
    progress: Progress,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """A complete ``bench-mulmat`` result (the schema of :mod:`evals.results`)."""
    result = new_result("bench-mulmat", command)
    result["variants"] = [{"label": c.label, "lib_dir": str(c.lib_dir), **c.record} for c in contenders]
    payload = run_sweep(contenders, spec, pairs, progress)
    payload["skipped"] = skipped
    result["payload"] = payload
    result["inputs"] = {
        "generator": "numpy default_rng(seed) standard normal; every 8th weight row ×4; activations standard normal",
        "weights": {
            f"{c['type']} {c['m']}x{c['k']}": {
                "seed": c["weights_seed"],
                "sha256": sorted({e["weights_sha256"] for e in c["contenders"].values()}),
            }
            for c in payload["cases"]
        },
    }
    return result
