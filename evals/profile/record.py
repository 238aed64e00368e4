"""Record stock and the current variant on the GPU host: build both for CUDA, trace a decode, parse.

Thin orchestration over the fusekit spine (variants, builds) and ``runner``; it needs a GPU and nsys,
so it is exercised on the GPU host only (``sides`` and ``decode_argv``, its pure parts, are tested anywhere).
The variant may be an arm (``VARIANT@GGML_CUDA_PDL=0``): its trace runs under that environment, recorded in
its command line and in its description.
"""

from __future__ import annotations

from pathlib import Path

from fusekit.build import BuildOptions, detect_cuda_arch
from fusekit.console import note
from fusekit.paths import resolve_home
from fusekit.registry import Registry
from fusekit.stack import file_stem, spec_entries
from fusekit.variants import Variant, current_entries, materialize
from fusekit.workspace import Workspace

from ..arms import arm_name, split_arm, with_env
from . import runner
from .parse import Profile, read_profile

Env = tuple[tuple[str, str], ...]

# A trace's file stem leaves room for what nsys and SQLite add to it (.nsys-rep, .qdstrm, .sqlite, a journal): session
# 31's export failed ("unable to open database file") on a 247-byte .sqlite name, with every name under 255 bytes
TRACE_STEM_BYTES = 200


def sides(stock: Variant, current: Variant, env: Env) -> list[tuple[Variant, Env]]:
    """What to trace: stock as it is, then the variant under its arm's environment (stock again when it is an arm
    of stock: ``stock@K=V``; nothing more when the variant is plain stock)."""
    if current.is_stock and not env:
        return [(stock, ())]
    return [(stock, ()), (current, env)]


def trace_base(folder: Path, name: str) -> Path:
    """Where the trace of side ``name`` (an arm's name included) is recorded: its file stem cut to TRACE_STEM_BYTES."""
    return folder / file_stem(name, TRACE_STEM_BYTES)


def decode_argv(llama_bench: Path, model: Path, decode: int, prompt: int, env: Env) -> list[str]:
    """llama-bench decoding `decode` tokens after a `prompt`-token fill (0: none), one repetition, all layers on
    the GPU, under `env` (``/usr/bin/env K=V`` first, so the recorded command carries it)."""
    argv = [str(llama_bench), "-m", str(model), "-p", "0", "-n", str(decode), "-r", "1", "-ngl", "99"]
    argv += ["--no-warmup"] + (["-d", str(prompt)] if prompt else [])
    return with_env(argv, env)


def record_variants(
    home: str | None, model: Path, decode: int, prompt: int, nsys: Path, out: Path | None, cuda_arch: str | None,
    jobs: int | None, variant_spec: str | None = None,
) -> tuple[list[Profile], list[dict]]:  # fmt: skip
    """Build stock and the current variant (or ``variant_spec``, an arm allowed) for CUDA, trace a llama-bench
    decode of each, parse the traces."""
    from fusekit.cli import build_one  # imported here: fusekit.cli imports this package to register the command

    ws = Workspace(resolve_home(home))
    options = BuildOptions(backend="cuda", cuda_arch=cuda_arch or detect_cuda_arch())
    spec, env = split_arm(variant_spec) if variant_spec else ("", ())
    with ws.lock():
        stock = materialize(ws, [])
        registry = Registry.load()
        entries = spec_entries(spec, registry) if spec else current_entries(ws, registry)
        traced = sides(stock, materialize(ws, entries), env)
        builds = [build_one(ws, v, options, jobs) for v, _ in traced]
    folder = out or ws.home / "profiles"
    tokens = decode if prompt == 0 else None
    profiles, described = [], []
    for (variant, side_env), build in zip(traced, builds, strict=True):
        name = arm_name(variant.label, side_env)
        argv = decode_argv(build.tool("llama-bench"), model, decode, prompt, side_env)
        note(f"tracing {name}: {' '.join(argv)}")
        sqlite = runner.trace(nsys, trace_base(folder, name), argv)
        profile = read_profile(sqlite, tokens, f"--decode {decode}")
        if prompt:
            profile.notes.append(f"the trace also holds the {prompt}-token prompt fill: no per-token figures")
        profiles.append(profile)
        described.append(
            {**variant.describe(), "name": name, "env": dict(side_env), "build": build.record, "trace": str(sqlite)}
        )
    return profiles, described
