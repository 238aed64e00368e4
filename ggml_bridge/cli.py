"""``fusekit bench``: race ggml_mul_mat between variants through the bridge (thin click layer)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import click

from evals.results import read_result, write_result
from fusekit.console import note
from fusekit.errors import FusekitError
from fusekit.paths import resolve_home

from .contenders import auto_device, from_lib_dirs, from_workspace, with_control
from .report import check_counts, render
from .shapes import parse_shapes, parse_tokens, parse_types, split_fitting
from .sweep import SweepSpec, bench_result

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?$", re.I)


def parse_size(text: str) -> int:
    """Bytes from ``60M``, ``64MiB``, ``50331648``."""
    match = _SIZE.match(text.strip())
    if not match:
        raise FusekitError(f"malformed size {text!r}: write bytes or a number with K, M or G (e.g. 60M)")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


@click.group("bench")
def bench() -> None:
    """Single-kernel races between variants (ggml_mul_mat through the cffi bridge)."""


@bench.command("mulmat")
@click.option("--types", default="q8_0,q4_0,q2_K,f16", show_default=True, help="Weight types, comma separated.")
@click.option(
    "--shapes",
    default="seed",
    show_default=True,
    help="'seed' (the whole shape table), 'cpu-bench' (six of it) or MxK,MxK...",
)
@click.option("--tokens", default="1,8", show_default=True, help="Activation rows (tokens), comma separated.")
@click.option("--backend", "device", default="auto", show_default=True, help="ggml device: CPU, CUDA0, ... or auto.")
@click.option(
    "--check-tokens",
    default="1,2,4,8,64,512",
    show_default=True,
    help="Token counts checked (besides --tokens) before anything is timed.",
)
@click.option("--check", "check_only", is_flag=True, help="Correctness only: no timing.")
@click.option("--sabotage", is_flag=True, help="Corrupt the packed weights: every quantized check must fail.")
@click.option("--lib-dir", "lib_dirs", multiple=True, metavar="[LABEL=]DIR", help="Race these build bin folders.")
@click.option("--build", "do_build", is_flag=True, help="Build stock or the current variant when not built yet.")
@click.option("--cuda-arch", default=None, metavar="SM", help="With --build for CUDA: the architecture (e.g. 90).")
@click.option("--l2", default=None, metavar="SIZE", help="Cache size to defeat (default: read from the device).")
@click.option("--copies", type=click.IntRange(min=1), default=None, help="Weight copies (default: 4x the cache).")
@click.option(
    "--nodes",
    "min_nodes",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="At least this many mul_mat nodes per timed graph.",
)
@click.option("--rounds", type=click.IntRange(min=1), default=7, show_default=True, help="Interleaved timing rounds.")
@click.option("--reps", type=click.IntRange(min=1), default=3, show_default=True, help="Graph runs per round.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU backend threads (default: all cores).")
@click.option("--seed", type=int, default=1234, show_default=True, help="Seed of weights and activations.")
@click.option(
    "--control",
    is_flag=True,
    help="Race the first contender (stock) twice, in two processes: an A/A control. The report gives the spread "
    "between the two and counts each variant's cases beyond it (a difference inside it is a tie).",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Time each contender in this many worker processes side by side and pool their rounds. One process keeps "
    "an offset of its own for the whole sweep (up to 3-5% between two processes of one build on an H100), which "
    "more rounds do not average out; the report gives the spread between each contender's processes and each "
    "speed-up's 95% interval over them (Welch t on process medians: use 5 or more to call 1-2%).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Result JSON (default: fusekit-results/bench-mulmat-<time>.json).",
)
@click.pass_context
def mulmat(
    ctx: click.Context,
    types: str,
    shapes: str,
    tokens: str,
    check_tokens: str,
    device: str,
    check_only: bool,
    sabotage: bool,
    lib_dirs: tuple[str, ...],
    do_build: bool,
    cuda_arch: str | None,
    l2: str | None,
    copies: int | None,
    min_nodes: int,
    rounds: int,
    reps: int,
    threads: int | None,
    seed: int,
    control: bool,
    processes: int,
    out_path: str | None,
) -> None:
    """Check, then time, ggml_mul_mat of the current variant against stock.

    \b
    Every contender is first checked against a float64 reference of the same quantized weights
    (1 JSON per sweep; thresholds per type are in the result). Timing rotates weight copies
    through 4x the cache, runs graphs of many mul_mat nodes and reports the median per node.
    \b
    Examples:
      fusekit bench mulmat
      fusekit bench mulmat --types q8_0,q4_0,q2_K,iq2_xs,f16 --shapes seed --tokens 1,2,4,8,64,512 --backend CUDA0
      fusekit bench mulmat --shapes 4096x14336 --check
      fusekit bench mulmat --lib-dir stock=A/bin --lib-dir mine=B/bin --backend CUDA0 --types q8_0 --control
    """
    type_list = parse_types(types)
    shape_list = parse_shapes(shapes)
    token_list = parse_tokens(tokens)
    check_list = parse_tokens(check_tokens)
    l2_bytes = parse_size(l2) if l2 else None
    pairs, skipped = split_fitting(type_list, shape_list)
    if skipped and shapes.strip() not in ("seed", "cpu-bench"):
        raise FusekitError(f"{skipped[0]} (a shape the type cannot hold)")
    if device == "auto":
        device = auto_device([Path(s.rpartition("=")[2]) for s in lib_dirs])
    if lib_dirs:
        contenders = from_lib_dirs(list(lib_dirs))
    else:
        from fusekit.cli import build_one  # late: fusekit.cli imports this module

        builder = (lambda ws, v, options: build_one(ws, v, options, None)) if do_build else None
        contenders = from_workspace(resolve_home((ctx.obj or {}).get("home")), device, cuda_arch, builder)
    if control:
        if check_only:
            raise FusekitError("--control times the first contender twice; it needs timing (drop --check)")
        contenders = with_control(contenders)
    if processes > 1 and check_only:
        raise FusekitError("--processes times each contender in several processes; it needs timing (drop --check)")
    spec = SweepSpec(
        tuple(type_list),
        tuple(shape_list),
        tuple(token_list),
        device,
        tuple(check_list),
        check_only,
        sabotage,
        rounds,
        reps,
        l2_bytes=l2_bytes,
        copies=copies,
        min_nodes=min_nodes,
        threads=threads,
        seed=seed,
        processes=processes,
    )
    for line in skipped:
        note(f"skipping {line}")
    result = bench_result(contenders, spec, pairs, skipped, note)
    target = (
        Path(out_path) if out_path else Path("fusekit-results") / f"bench-mulmat-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    write_result(result, target)
    click.echo(render(result))
    click.echo(f"wrote {target}")
    _verdict(result, sabotage)


def _verdict(result: dict, sabotage: bool) -> None:
    """Exit non-zero when any check's outcome was not the expected one (see report.expected_to_fail)."""
    counts = check_counts(result["payload"])
    if counts["unexpected"]:
        what = "sabotage: " if sabotage else ""
        raise FusekitError(f"{what}{len(counts['unexpected'])} of {len(result['payload']['checks'])} checks went wrong")
    if sabotage:
        click.echo("sabotage: every quantized check failed and every control passed, as they must")


@bench.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def show(path: str) -> None:
    """Render a stored bench-mulmat result (runs nothing)."""
    result = read_result(Path(path))
    if result["kind"] != "bench-mulmat":
        raise FusekitError(f"{path} is a {result['kind']} result, not bench-mulmat")
    click.echo(render(result))
