"""Record stock and the current variant on the GPU host: build both for CUDA, trace a decode, parse.

Thin orchestration over the fusekit spine (variants, builds) and ``runner``; it needs a GPU and nsys,
so it is exercised on the GPU host only.
"""

from __future__ import annotations

from pathlib import Path

from fusekit.build import BuildOptions, detect_cuda_arch
from fusekit.console import note
from fusekit.paths import resolve_home
from fusekit.registry import Registry
from fusekit.stack import spec_entries
from fusekit.variants import current_entries, materialize
from fusekit.workspace import Workspace

from . import runner
from .parse import Profile, read_profile


def record_variants(
    home: str | None, model: Path, decode: int, prompt: int, nsys: Path, out: Path | None, cuda_arch: str | None,
    jobs: int | None, variant_spec: str | None = None,
) -> tuple[list[Profile], list[dict]]:  # fmt: skip
    """Build stock and the current variant (or ``variant_spec``) for CUDA, trace a llama-bench decode of each,
    parse the traces."""
    from fusekit.cli import build_one  # imported here: fusekit.cli imports this package to register the command

    ws = Workspace(resolve_home(home))
    options = BuildOptions(backend="cuda", cuda_arch=cuda_arch or detect_cuda_arch())
    with ws.lock():
        variants = [materialize(ws, [])]
        registry = Registry.load()
        entries = spec_entries(variant_spec, registry) if variant_spec else current_entries(ws, registry)
        current = materialize(ws, entries)
        if not current.is_stock:
            variants.append(current)
        builds = [build_one(ws, v, options, jobs) for v in variants]
    folder = out or ws.home / "profiles"
    tokens = decode if prompt == 0 else None
    profiles, described = [], []
    for variant, build in zip(variants, builds, strict=True):
        argv = [str(build.tool("llama-bench")), "-m", str(model), "-p", "0", "-n", str(decode), "-r", "1", "-ngl", "99"]
        argv += ["--no-warmup"] + (["-d", str(prompt)] if prompt else [])
        note(f"tracing {variant.label}: {' '.join(argv)}")
        sqlite = runner.trace(nsys, folder / variant.label, argv)
        profile = read_profile(sqlite, tokens, f"--decode {decode}")
        if prompt:
            profile.notes.append(f"the trace also holds the {prompt}-token prompt fill: no per-token figures")
        profiles.append(profile)
        described.append({**variant.describe(), "build": build.record, "trace": str(sqlite)})
    return profiles, described
