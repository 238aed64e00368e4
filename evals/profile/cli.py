"""``fusekit profile``: per-kernel breakdowns from Nsight Systems SQLite exports (a thin click command)."""

from __future__ import annotations

from pathlib import Path

import click

from evals.results import new_result, write_result
from fusekit.errors import FusekitError
from fusekit.stack import file_sha256

from ..arms import split_arm
from . import render, runner
from .compare import Comparison, compare
from .parse import Profile, read_profile
from .plot import plot_categories
from .record import record_variants
from .saved import SIDES, is_saved_profile, read_saved_profile

NO_DEVICE = (
    "cannot record traces here: {missing}; read an existing export instead with --from TRACE.sqlite "
    "(or run on a GPU host with Nsight Systems)"
)


@click.command("profile")
@click.option(
    "--from",
    "from_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read this Nsight Systems SQLite export (.sqlite, .sqlite.gz or .sqlite.xz) instead of recording, or a "
    "committed profile result (.json, 'fusekit profile --json'): one of its profiles, see --from-side.",
)
@click.option(
    "--against",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Compare with this second export or profile result (B); --from is A. Shows what changed per kernel and "
    "category.",
)
@click.option(
    "--from-side",
    type=click.Choice(SIDES),
    default=None,
    help="Which profile of a --from result: its variant (the last, default) or its stock (the first).",
)
@click.option(
    "--against-side",
    type=click.Choice(SIDES),
    default=None,
    help="Which profile of an --against result: variant (default) or stock.",
)
@click.option(
    "--tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens decoded in the trace(s), for kernels and µs per token.",
)
@click.option(
    "--model",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="GGUF model to decode when recording.",
)
@click.option(
    "--variant",
    "variant_spec",
    default=None,
    metavar="VARIANT",
    help="Record stock and this variant (a fusion, a patch file, or several joined with '+') "
    "instead of the current variant. An arm (VARIANT@NAME=VALUE[,NAME=VALUE], e.g. stack-1-5@GGML_CUDA_PDL=0) "
    "traces the variant under that environment; stock runs without it.",
)
@click.option(
    "--decode", type=click.IntRange(min=1), default=16, show_default=True, help="Tokens to decode when recording."
)
@click.option(
    "--prompt",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Context depth (prompt tokens) before the decode when recording.",
)
@click.option(
    "--nsys",
    "nsys_path",
    default=None,
    metavar="PATH",
    help="The nsys executable (default: PATH, then the usual install folders).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for recorded traces (default: WORKSPACE/profiles).",
)
@click.option(
    "--cuda-arch", default=None, metavar="SM", help="CUDA architecture for the builds (default: what the GPU reports)."
)
@click.option("--jobs", "-j", type=int, default=None, help="Parallel compile jobs for the builds.")
@click.option(
    "--top", type=click.IntRange(min=1), default=20, show_default=True, help="Kernels shown in the terminal table."
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write per-kernel rows (or the comparison) as CSV.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a fusekit result file (kind 'profile').",
)
@click.option(
    "--png",
    "png_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a stacked bar of kernel time per category (needs matplotlib).",
)
@click.pass_context
def profile(
    ctx: click.Context, from_path: Path | None, against: Path | None, from_side: str | None,
    against_side: str | None, tokens: int | None, model: Path | None,
    variant_spec: str | None, decode: int, prompt: int, nsys_path: str | None, out: Path | None,
    cuda_arch: str | None, jobs: int | None, top: int, csv_path: Path | None, json_path: Path | None,
    png_path: Path | None,
) -> None:  # fmt: skip
    """Per-kernel breakdown of Nsight Systems traces: kernel statistics as `nsys stats` prints them,
    time per category and per token, GPU busy share, and the difference between two traces.

    \b
    Without --from: build stock and the current variant for CUDA, record a decode of each with
    nsys (-t cuda --cuda-graph-trace=node), then compare them (needs a GPU and nsys).
      fusekit profile --model m.gguf --decode 32 --prompt 4096
      fusekit profile --model m.gguf --variant fusion-1+fusion-5
      fusekit profile --model m.gguf --variant fusion-1+fusion-5@GGML_CUDA_PDL=0
      fusekit profile --from stock.sqlite --against fused.sqlite --tokens 16
      fusekit profile --from run.sqlite --csv kernels.csv --json out.json

    \b
    Two committed results (their traces stay on the GPU host): the variant of one session against another's,
    or the stock sides of both to see how far the two machines agree.
      fusekit profile --from results/s23/profile-x-vs-stock.json --against results/s25/profile-y-vs-stock.json
      fusekit profile --from A.json --from-side stock --against B.json --against-side stock
    """
    variants: list[dict] = []
    if from_path is None:
        if against is not None:
            raise FusekitError("--against needs --from (it compares two existing exports)")
        if tokens is not None:
            raise FusekitError("--tokens is for --from; when recording, --decode N sets the token count")
        if from_side is not None or against_side is not None:
            raise FusekitError("--from-side and --against-side pick profiles of --from/--against results")
    elif variant_spec is not None:
        raise FusekitError("--variant is for recording; --from reads existing exports")
    if variant_spec is not None:
        split_arm(variant_spec)  # a malformed arm fails here, before anything is looked for or built
    if from_path is None:
        nsys = runner.find_nsys(nsys_path)
        missing = [
            what for what, ok in (("no NVIDIA GPU visible", runner.have_gpu()), ("no nsys found", nsys)) if not ok
        ]
        if missing:
            raise FusekitError(NO_DEVICE.format(missing=" and ".join(missing)))
        if model is None:
            raise FusekitError("recording needs --model FILE.gguf")
        assert nsys is not None
        home = (ctx.find_root().obj or {}).get("home")
        profiles, variants = record_variants(home, model, decode, prompt, nsys, out, cuda_arch, jobs, variant_spec)
    else:
        profiles = [_read(from_path, from_side, "--from-side", tokens)]
        if against is not None:
            profiles.append(_read(against, against_side, "--against-side", tokens))
        elif against_side is not None:
            raise FusekitError("--against-side needs --against")
    comparison = compare(profiles[0], profiles[1]) if len(profiles) == 2 else None
    emit(profiles, comparison, top, csv_path, json_path, png_path, variants)


def _read(path: Path, side: str | None, side_option: str, tokens: int | None) -> Profile:
    """A saved profile result (.json) or an Nsight Systems export; a side only names a result's profile."""
    if is_saved_profile(path):
        return read_saved_profile(path, side or "variant", tokens)
    if side is not None:
        raise FusekitError(f"{side_option} picks a profile of a .json result; {path} is read as an nsys export")
    return read_profile(path, tokens, "--tokens")


def emit(
    profiles: list[Profile], comparison: Comparison | None, top: int, csv_path: Path | None, json_path: Path | None,
    png_path: Path | None, variants: list[dict],
) -> None:  # fmt: skip
    """Print the tables and write the files asked for."""
    if comparison is None:
        click.echo(render.profile_text(profiles[0], top))
    else:
        click.echo(render.comparison_text(comparison, top))
    if csv_path:
        if comparison is None:
            render.write_kernel_csv(profiles[0], csv_path)
        else:
            render.write_comparison_csv(comparison, csv_path)
        click.echo(f"wrote {csv_path}")
    if png_path:
        labels = ["A", "B"] if comparison else ["trace"]
        labels = [v["name"] for v in variants] if variants else labels
        click.echo(f"wrote {plot_categories(profiles, labels, png_path)}")
    if json_path:
        result = new_result("profile")
        result["variants"] = variants
        result["inputs"] = {"traces": [{"path": p.path, "sha256": file_sha256(Path(p.path))} for p in profiles]}
        result["payload"] = {
            "profiles": [p.to_dict() for p in profiles],
            "comparison": comparison.to_dict() if comparison else None,
        }
        click.echo(f"wrote {write_result(result, json_path)}")
