"""The GPU-host baseline report: one Markdown page generated from a batch folder's result files.

It reads, never runs: the eval result (tok/s with intervals, KL), the decode and prompt profiles,
the stock-vs-arm profile comparison, the mul_mat sweep (for the copy bandwidth measured in the
same session) and the model record, and puts the decode time per token next to its weight-read floor.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from fusekit.errors import FusekitError
from fusekit.synth.presets import get_preset
from fusekit.synth.traffic import token_traffic

from .report import render as render_eval
from .results import read_result

FILES = {
    "eval": "baseline-eval.json",
    "decode": "profile-decode16-stock.json",
    "prompt": "profile-prompt4096-stock.json",
    "against": "profile-decode16-stock-vs-nofusion.json",
    "mulmat": "mulmat/bench-mulmat-h200-stock.json",
    "model": "model.json",
}
QUALITY_FILE = "second-session/model-quality.json"  # optional: `fusekit model quality` of the same model
AA_FILE = "baseline-aa-quality.json"  # optional: stock against a second stock process (KL and text)
QUANTIZE_KERNEL = "quantize_q8_1"


def _load(folder: Path) -> dict[str, Any]:
    missing = [name for name in FILES.values() if not (folder / name).is_file()]
    if missing:
        raise FusekitError(f"{folder} is not a baseline batch folder: missing {', '.join(missing)}")
    data = {key: read_result(folder / name) for key, name in FILES.items() if key != "model"}
    data["model"] = json.loads((folder / FILES["model"]).read_text())
    return data


def _profile(result: dict[str, Any]) -> dict[str, Any]:
    return result["payload"]["profiles"][0]


def fmt_us(ns: float) -> str:
    """Nanoseconds as microseconds with one decimal and thousands separators."""
    return f"{ns / 1000:,.1f}"


def _decode_section(profile: dict[str, Any]) -> list[str]:
    tokens = profile["tokens"]
    quantize = sum(k["instances"] for k in profile["kernels"] if k["short_name"] == QUANTIZE_KERNEL)
    timeline = profile["timeline"]
    lines = [
        f"- kernels per token: **{profile['per_token']['kernels_per_token']:,.1f}** "
        f"({profile['launches']:,} kernels over {tokens} tokens)",
        f"- kernel time per token: {profile['per_token']['kernel_us_per_token']:,.1f} µs (node-level tracing slows "
        "launches; the tok/s table is measured without the profiler)",
        f"- `{QUANTIZE_KERNEL}` launches per token: **{quantize / tokens:,.1f}**",
        f"- GPU busy share over the traced span: {timeline['busy_pct']:.1f}% (the span includes loading the "
        f"model: {timeline['span_ns'] / 1e9:.2f} s, {timeline['gaps_over_10us']:,} gaps over 10 µs)",
        "",
        "| category | µs per token | share | launches per token |",
        "|---|---:|---:|---:|",
    ]
    for cat in profile["categories"]:
        lines.append(
            f"| {cat['category']} | {fmt_us(cat['total_ns'] / tokens)} | {cat['share_pct']:.1f}% "
            f"| {cat['instances'] / tokens:,.1f} |"
        )
    return lines


def short_kernel_name(name: str, limit: int = 90) -> str:
    """A demangled kernel name without its parameter list (template arguments kept)."""
    if name.endswith(")"):
        depth = 0
        for index in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[index], 0)
            if depth == 0:
                name = name[:index]
                break
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _top_kernels(profile: dict[str, Any], count: int = 10, per: float | None = None) -> list[str]:
    unit = "µs per token" if per else "total µs"
    lines = [f"| kernel | category | launches | {unit} | share |", "|---|---|---:|---:|---:|"]
    for kernel in profile["kernels"][:count]:
        name = short_kernel_name(kernel["name"])
        total = kernel["total_ns"] / per if per else kernel["total_ns"]
        lines.append(
            f"| `{name}` | {kernel['category']} | {kernel['instances']:,} | {fmt_us(total)} "
            f"| {kernel['time_pct']:.1f}% |"
        )
    return lines


def _speed(eval_result: dict[str, Any], test: str, side: str) -> float:
    for row in eval_result["payload"]["speed"]["summary"]:
        if row["test"] == test:
            return row["stock_median" if side == "stock" else "variant_median"]
    raise FusekitError(f"the eval result has no {test} speed row")


def _roofline_section(data: dict[str, Any], gguf: ModuleType) -> list[str]:
    model = data["model"]
    traffic = token_traffic(get_preset(model["preset"]), gguf, model["experts_type"], model["dense_type"])
    copy_gb_s = data["mulmat"]["payload"]["roofline"]["gb_s"]
    floor_ms = traffic.total / (copy_gb_s * 1e9) * 1e3
    tg = _speed(data["eval"], "tg128", "stock")
    measured_ms = 1e3 / tg
    return [
        f"- weights read per decode token: **{traffic.total / 1e9:.3f} GB** (dense {traffic.dense / 1e9:.3f} GB, "
        f"{model['shapes']['n_expert_used']} of {model['shapes']['n_expert']} experts {traffic.experts / 1e9:.3f} GB, "
        f"one embedding row), computed from the preset's tensor plan; the file holds {traffic.file_bytes / 1e9:.2f} GB",
        f"- copy bandwidth measured in the same session (bytes read + written): {copy_gb_s:,.0f} GB/s",
        f"- floor: {floor_ms:.3f} ms per token; measured tg128: {tg:.1f} t/s = **{measured_ms:.3f} ms per token**, "
        f"{measured_ms / floor_ms:.1f}× the floor",
    ]


def _against_section(result: dict[str, Any]) -> list[str]:
    comparison = result["payload"]["comparison"]
    tokens = result["payload"]["profiles"][0]["tokens"] or 1
    lines = [
        "| category | A launches per token | B launches per token | Δ µs per token |",
        "|---|---:|---:|---:|",
    ]
    for cat in comparison["categories"]:
        lines.append(
            f"| {cat['category']} | {cat['a_launches'] / tokens:,.1f} | {cat['b_launches'] / tokens:,.1f} "
            f"| {cat['delta_ns'] / tokens / 1000:+,.1f} |"
        )
    return lines


def _quality_lines(folder: Path) -> list[str]:
    """Does the random model behave like a model (logits neither flat nor one-hot)?"""
    if not (folder / QUALITY_FILE).is_file():
        return []
    q = json.loads((folder / QUALITY_FILE).read_text())
    return [
        f"- its next-token distributions (`{QUALITY_FILE}`, {q['positions']} positions of a sample text): mean "
        f"top-1 probability {q['top1_mean']:.3f}, mean entropy {q['entropy_mean']:.2f} nats "
        f"({100 * q['entropy_fraction']:.0f}% of ln {q['vocab']}), "
        f"{100 * q['distinct_top1']:.0f}% distinct top-1 tokens"
    ]


def _aa_section(folder: Path) -> list[str]:
    """Stock against itself: how much of a KL difference is the run-to-run floor of this model."""
    if not (folder / AA_FILE).is_file():
        return []
    payload = read_result(folder / AA_FILE)["payload"]
    kl = next(iter(payload["quality"]["kl"].values()))
    stats = {name: stat["text"].split(":", 1)[1].strip() for name, stat in kl["statistics"].items()}
    texts = next(iter(payload["text"]["comparisons"].values())) if payload.get("text") else []
    identical = sum(1 for t in texts if t["identical"])
    return [
        f"## Run-to-run floor (stock against a second stock process, `{AA_FILE}`)",
        "",
        f"- mean KLD {stats['Mean KLD']}, maximum KLD {stats['Maximum KLD']}; log-probs byte for byte identical: "
        f"{kl['logprobs_identical']}",
        f"- greedy text: {identical} of {len(texts)} prompts identical",
        "- so the KL difference of the fusion arm below comes from the changed arithmetic, amplified by 40 layers "
        "of random weights, not from run-to-run noise",
        "",
    ]


def render_baseline(folder: Path, gguf: ModuleType) -> str:
    """The whole report for one batch folder."""
    data = _load(folder)
    decode, prompt = _profile(data["decode"]), _profile(data["prompt"])
    machine = data["eval"]["machine"]
    gpu = machine["gpus"][0] if machine["gpus"] else {}
    out = [
        f"# Stock baseline on {gpu.get('name', 'a GPU')}",
        "",
        f"Generated by `fusekit report --baseline {folder}` from the result files in that folder; no number "
        "here is typed by hand.",
        "",
        f"- llama.cpp {data['eval']['llama_cpp']['commit']}, driver {gpu.get('driver_version', '?')}, "
        f"max clocks SM {gpu.get('clocks.max.sm', '?')} / memory {gpu.get('clocks.max.mem', '?')}",
        f"- model: synthetic {data['model']['preset']} ({data['model']['shapes']['arch']}, "
        f"{data['model']['experts_type']} experts, {data['model']['dense_type']} dense, "
        f"{data['model']['bytes'] / 1e9:.2f} GB, seed {data['model']['seed']})",
        *_quality_lines(folder),
        "",
        "## Decode: time per token against its floor",
        "",
        *_roofline_section(data, gguf),
        "",
        "## Decode profile (stock, 16 tokens, node-level CUDA graph tracing)",
        "",
        *_decode_section(decode),
        "",
        "Top kernels:",
        "",
        *_top_kernels(decode, per=decode["tokens"]),
        "",
        "## Prompt profile (stock, one 4096-token prompt)",
        "",
        "| category | total µs | share | launches |",
        "|---|---:|---:|---:|",
        *[
            f"| {c['category']} | {fmt_us(c['total_ns'])} | {c['share_pct']:.1f}% | {c['instances']:,} |"
            for c in prompt["categories"]
        ],
        "",
        *_top_kernels(prompt),
        "",
        "## What ggml's own CUDA fusions remove (A = stock, B = GGML_CUDA_DISABLE_FUSION=1, decode)",
        "",
        *_against_section(data["against"]),
        "",
        *_aa_section(folder),
        "## Speed and quality: stock against stock with GGML_CUDA_DISABLE_FUSION=1",
        "",
        render_eval(data["eval"], str(folder / FILES["eval"])),
    ]
    return "\n".join(out) + "\n"
