"""``fusekit model synth``: write a random-weight GGUF with a real model's shapes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from ..console import note
from ..errors import FusekitError
from ..paths import resolve_home
from ..workspace import Workspace
from .presets import PRESETS, get_preset, reduced
from .quality import measure
from .writer import ALL_TYPES, check_type, find_quantize, write_model

SIZE_OPTIONS = {
    "layers": "n_layer",
    "hidden": "n_embd",
    "vocab": "n_vocab",
    "experts": "n_expert",
    "experts_used": "n_expert_used",
    "expert_ff": "n_ff_exp",
    "shared_ff": "n_ff_shexp",
    "ff": "n_ff",
    "heads": "n_head",
    "kv_heads": "n_head_kv",
    "head_dim": "head_dim",
    "ssm_state": "ssm_state",
    "ssm_k_heads": "ssm_k_heads",
    "ssm_v_heads": "ssm_v_heads",
}


def _stock_bins(ws: Workspace) -> list[Path]:
    tree = ws.tree("stock")
    return sorted(tree.glob("build-*/bin")) if tree.is_dir() else []


def _stock_tool(ws: Workspace, name: str) -> Path | None:
    """``name`` from the stock build (any backend), or None."""
    return next((b / name for b in _stock_bins(ws) if (b / name).is_file()), None)


@click.group("model")
def model_group() -> None:
    """Models for measuring: random-weight GGUFs with real architectures' shapes."""


def _size_option(name: str) -> click.Option:
    flag = "--" + name.replace("_", "-")
    return click.Option([flag, name], type=click.IntRange(min=1), default=None, help=f"Override {SIZE_OPTIONS[name]}.")


@model_group.command("synth")
@click.option("--preset", default=None, help="Preset name (see --list).")
@click.option("--list", "list_presets", is_flag=True, help="List the presets and exit.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="GGUF to write.")
@click.option(
    "--experts-type", default="q4_0", show_default=True, help=f"Type of expert tensors ({', '.join(ALL_TYPES)})."
)
@click.option("--dense-type", default="q8_0", show_default=True, help="Type of all other matrices (same choices).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (same seed, same file).")
@click.option("--branch-gain", type=click.FloatRange(min=0.0, min_open=True), default=1.0, show_default=True,
              help="Weight scale of each block's output projection: well below 1 (0.05) the residual keeps the "
                   "embedding and a pure fp32 order change no longer turns into different text (a tame model for "
                   "KL and text checks; kernels and timings are the same).")  # fmt: skip
@click.option("--quantize-bin", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="llama-quantize for K/IQ types (default: the stock build's).")  # fmt: skip
@click.option("--quality", "check_quality", is_flag=True,
              help="Then measure top-1 probability and entropy with llama-perplexity (CPU; small models).")  # fmt: skip
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JSON record of the model (and the quality numbers).")  # fmt: skip
@click.pass_context
def synth_cmd(
    ctx: click.Context,
    preset: str | None,
    list_presets: bool,
    output: Path | None,
    experts_type: str,
    dense_type: str,
    seed: int,
    branch_gain: float,
    quantize_bin: Path | None,
    check_quality: bool,
    json_out: Path | None,
    **sizes: int | None,
) -> None:
    """Write a random-weight GGUF of a preset's shapes (reduced with --layers, --hidden, ...).

    \b
      fusekit model synth --preset qwen3.6-35b-a3b -o q35.gguf
      fusekit model synth --preset qwen3.6-35b-a3b --layers 8 --experts-type q4_0 --dense-type q8_0 -o small.gguf
    """
    if list_presets:
        for p in PRESETS.values():
            click.echo(f"{p.name:18} {p.description}\n{'':18} {p.summary()}")
        return
    if not preset or output is None:
        raise FusekitError("give --preset NAME and -o FILE (or --list)")
    experts_type = check_type(experts_type, "--experts-type")
    dense_type = check_type(dense_type, "--dense-type")
    chosen = reduced(get_preset(preset), **{SIZE_OPTIONS[k]: v for k, v in sizes.items()})
    chosen = dataclasses.replace(chosen, branch_gain=branch_gain)
    ws = Workspace(resolve_home(ctx.obj.get("home") if ctx.obj else None))
    ws.require_init()
    bins = _stock_bins(ws)
    quantize = quantize_bin or find_quantize(bins)
    note(f"writing {chosen.summary()}; experts {experts_type}, dense {dense_type}")
    result = write_model(chosen, output, ws.tree("stock") / "gguf-py", experts_type, dense_type, seed, quantize, note)
    rate = result.bytes / max(result.write_seconds, 1e-9) / 1e9
    click.echo(
        f"wrote {output} ({result.bytes / 1e9:.2f} GB, {result.tensors} tensors) in {result.seconds:.1f}s "
        f"(write {rate:.2f} GB/s{f', quantize {result.quantize_seconds:.1f}s' if result.quantize_seconds else ''})"
    )
    record = {
        "preset": chosen.name,
        "shapes": chosen.__dict__ | {"rope_sections": list(chosen.rope_sections)},
        "experts_type": experts_type,
        "dense_type": dense_type,
        "seed": seed,
        "path": str(output),
        "bytes": result.bytes,
        "seconds": result.seconds,
    }
    if check_quality:
        perplexity = _stock_tool(ws, "llama-perplexity")
        if perplexity is None:
            raise FusekitError("--quality needs llama-perplexity: run 'fusekit build' first")
        quality = measure(perplexity, output)
        click.echo("quality: " + quality.line())
        for problem in quality.problems():
            click.echo(f"quality problem: {problem}")
        record["quality"] = quality.as_dict()
    if json_out:
        json_out.write_text(json.dumps(record, indent=2) + "\n")


@model_group.command("quality")
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--ctx", "ctx_size", type=click.IntRange(16), default=128, show_default=True, help="Context per chunk (-c)."
)
@click.option("--chunks", type=click.IntRange(1), default=4, show_default=True, help="Chunks of the sample text.")
@click.option("--perplexity-bin", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="llama-perplexity to use (default: the stock build's).")  # fmt: skip
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the numbers as JSON.")  # fmt: skip
@click.option("--gpu-layers", "-ngl", type=click.IntRange(0), default=0, show_default=True,
              help="Layers llama-perplexity offloads to the GPU (a CUDA build; 99 for all).")  # fmt: skip
@click.pass_context
def quality_cmd(
    ctx: click.Context,
    model: Path,
    ctx_size: int,
    chunks: int,
    perplexity_bin: Path | None,
    json_out: Path | None,
    gpu_layers: int,
) -> None:
    """Mean top-1 probability and entropy of MODEL's next-token distributions over a sample text.

    A random model is useful for KL and text checks only if its logits are neither flat nor one-hot;
    exits with status 1 when a number is outside the accepted range.
    """
    if perplexity_bin is None:
        ws = Workspace(resolve_home(ctx.obj.get("home") if ctx.obj else None))
        perplexity_bin = _stock_tool(ws, "llama-perplexity")
        if perplexity_bin is None:
            raise FusekitError("no llama-perplexity: run 'fusekit build' first or pass --perplexity-bin")
    extra = ("-ngl", str(gpu_layers)) if gpu_layers else ()
    quality = measure(perplexity_bin, model, ctx=ctx_size, chunks=chunks, extra=extra)
    click.echo("quality: " + quality.line())
    if json_out:
        json_out.write_text(json.dumps({"model": str(model), **quality.as_dict()}, indent=2) + "\n")
    if quality.problems():
        raise FusekitError("; ".join(quality.problems()))


for _name in reversed(SIZE_OPTIONS):
    synth_cmd.params.insert(3, _size_option(_name))
