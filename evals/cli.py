"""``fusekit eval`` and ``fusekit report``: thin click commands over evals.runner and evals.report."""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

import click

from fusekit.build import BACKENDS, BuildOptions
from fusekit.console import note
from fusekit.errors import FusekitError
from fusekit.paths import resolve_home
from fusekit.registry import Registry
from fusekit.stack import STOCK, spec_entries
from fusekit.synth.gguflib import load_gguf
from fusekit.variants import Variant, current_entries, materialize
from fusekit.workspace import Workspace

from .arms import arm_name, split_arm
from .baseline_report import render_baseline
from .checkpoint import PARTIAL_SUFFIX, Checkpoint, partial_path, run_checkpointed
from .corpus import resolve_corpus
from .llamabench import BenchSettings
from .models import resolve_model
from .perplexity import PplSettings
from .report import render, render_many, speed_plot
from .results import new_result, read_result
from .runner import EvalSettings, Side, default_threads, run_eval
from .session_report import render_session
from .textgen import DEFAULT_PROMPTS, TextSettings


def resolve_variants(
    ws: Workspace, specs: list[str], against: str, registry: Registry
) -> list[tuple[Variant, tuple[tuple[str, str], ...]]]:
    """Baseline first, then each named variant or arm (the current variant when none is named)."""
    base_spec, base_env = split_arm(against)
    if base_env:
        raise FusekitError(f"--against {against}: the baseline runs without extra environment; name arms as variants")
    baseline = materialize(ws, spec_entries(base_spec, registry))
    named = []
    for spec in specs:
        variant_spec, env = split_arm(spec)
        named.append((materialize(ws, spec_entries(variant_spec, registry)), env))
    if not specs:
        current = materialize(ws, current_entries(ws, registry))
        if current.label == baseline.label:
            note(f"the current variant is {current.label}: comparing it with itself (an A/A run shows the noise)")
        named = [(current, ())]
    names = [arm_name(v.label, env) for v, env in named]
    if len(set(names)) != len(names):
        raise FusekitError(f"a variant is named twice: {', '.join(names)}")
    return [(baseline, ()), *named]


def default_result_path(ws: Workspace) -> Path:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return ws.home / "results" / f"eval-{stamp}.json"


@click.command("eval")
@click.argument("specs", nargs=-1, metavar="[VARIANT...]")
@click.option("--against", default=STOCK, show_default=True, help="Baseline variant the others are compared with.")
@click.option("--model", type=click.Path(path_type=Path), default=None, help="GGUF model (default: SmolLM2-135M Q4_1).")
@click.option("--corpus", type=click.Path(path_type=Path), default=None, help="Text for ppl/KL (default: pydoc).")
@click.option("--ppl", is_flag=True, help="Add perplexity on the corpus.")
@click.option("--kl", is_flag=True, help="Add KL divergence of each variant's token distributions from the baseline.")
@click.option("--kl-base", type=click.Path(path_type=Path), default=None, help="Use this stock KL base (checked).")
@click.option("--speed/--no-speed", default=True, show_default=True, help="Measure tok/s with llama-bench.")
@click.option("--text/--no-text", default=True, show_default=True, help="Compare greedy generations byte for byte.")
@click.option("--rounds", type=click.IntRange(1), default=2, show_default=True, help="Interleaved llama-bench rounds.")
@click.option("-r", "--repetitions", type=click.IntRange(1), default=3, show_default=True, help="llama-bench -r.")
@click.option("-p", "n_prompt", default="512", show_default=True, help="llama-bench -p (comma list).")
@click.option("-n", "n_gen", default="128", show_default=True, help="llama-bench -n (comma list).")
@click.option("-d", "n_depth", default="0", show_default=True, help="llama-bench -d (comma list).")
@click.option(
    "--ctx", "ctx_size", type=click.IntRange(8), default=512, show_default=True, help="Perplexity context (-c)."
)
@click.option("--chunks", type=click.IntRange(1), default=4, show_default=True, help="Perplexity chunks.")
@click.option(
    "--ppl-ubatch",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Micro-batch of the perplexity and KL runs (-ub; default: the whole batch). 1 sends every token through "
    "the one-token (decode) kernels, where decode-only fusions act; a prompt-sized batch never reaches them.",
)
@click.option("--tokens", type=click.IntRange(1), default=128, show_default=True, help="Tokens per greedy text.")
@click.option(
    "--prompts",
    type=click.IntRange(1, len(DEFAULT_PROMPTS)),
    default=len(DEFAULT_PROMPTS),
    show_default=True,
    help="How many of the fixed prompts.",
)
@click.option("--threads", "-t", type=click.IntRange(1), default=None, help="Threads (default: the core count).")
@click.option("--backend", type=click.Choice(BACKENDS), default="cpu", show_default=True, help="Build backend.")
@click.option("--cuda-arch", default=None, metavar="SM", help="CUDA architecture for --backend cuda.")
@click.option("--jobs", "-j", type=int, default=None, help="Parallel compile jobs for builds that are not up to date.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the result here.")
@click.pass_context
def eval_cmd(ctx: click.Context, specs: tuple[str, ...], **opts) -> None:
    """Measure variants against stock: tok/s, text identity, and with --ppl/--kl perplexity and KL divergence.

    \b
    VARIANT is stock, a fusion name or alias, a patch file, or several joined
    with '+' (fusion-1+fusion-5). Without VARIANT: the current variant.
    An arm runs a variant with extra environment variables, e.g.
    stock@GGML_CUDA_DISABLE_FUSION=1 (ggml's own CUDA fusions off).
    """
    ws = Workspace(resolve_home(ctx.obj["home"]))
    result, path = evaluate(ws, list(specs), opts)
    click.echo(render(result, str(path)))
    note(f"result written to {path}")


def evaluate(ws: Workspace, specs: list[str], opts: dict) -> tuple[dict, Path]:
    """Resolve and build the variants, run the checks, write the result; return it and its path.

    The result so far is checkpointed next to the final path (evals.checkpoint) while the checks run.
    """
    ws.require_init()
    final = result_path(ws, opts["json_path"])
    threads = opts["threads"] or default_threads()
    gpu_layers = 99 if opts["backend"] == "cuda" else 0
    settings = EvalSettings(
        speed=opts["speed"],
        text=opts["text"],
        ppl=opts["ppl"],
        kl=opts["kl"],
        rounds=opts["rounds"],
        backend=opts["backend"],
        bench=BenchSettings(opts["n_prompt"], opts["n_gen"], opts["n_depth"], opts["repetitions"], threads, gpu_layers),
        perplexity=PplSettings(
            opts["ctx_size"],
            opts["chunks"],
            min(opts["ctx_size"], 2048),
            threads,
            gpu_layers,
            ubatch=opts.get("ppl_ubatch") or 0,
        ),
        textgen=TextSettings(opts["tokens"], opts["prompts"], max(512, opts["tokens"] + 64), threads, gpu_layers),
    )
    model = resolve_model(opts["model"], ws.cache, note)
    needs_corpus = settings.ppl or settings.kl
    corpus = resolve_corpus(opts["corpus"], ws.cache) if needs_corpus else None
    if opts["kl_base"] is not None and not settings.kl:
        raise FusekitError("--kl-base needs --kl")
    from fusekit.cli import build_one  # here, not at the top: fusekit.cli registers these commands

    registry = Registry.load()
    options = BuildOptions(backend=opts["backend"], cuda_arch=opts["cuda_arch"])
    with ws.lock():  # held while variants and builds change; measuring only reads the built binaries
        arms = resolve_variants(ws, specs, opts["against"], registry)
        builds = {}
        for v, _ in arms:
            if v.label not in builds:
                builds[v.label] = build_one(ws, v, options, opts["jobs"])
        baseline = arms[0][0]
        sides = [Side(baseline, builds[baseline.label])]
        for v, env in arms[1:]:
            again = v.label == baseline.label and not env
            sides.append(Side(v, builds[v.label], f"{v.label}-again" if again else "", env))
        result = new_result("eval", command=["fusekit", *sys.argv[1:]])
        result["variants"] = [side.describe(settings.backend) for side in sides]
    for side, described in zip(sides[1:], result["variants"][1:], strict=True):
        if described["touches_only_uncompiled_backends"]:
            note(f"{side.name} patches only backends a {settings.backend} build does not compile: identical code")
    result["inputs"] = {"model": model.describe(), "corpus": corpus.describe() if corpus else None}
    kl_base = opts["kl_base"].expanduser().resolve() if opts["kl_base"] else None

    def run(save: Checkpoint) -> dict:
        return run_eval(sides, model, corpus, settings, ws.cache, kl_base, note, save)

    path = run_checkpointed(result, final, run)
    return result, path


def result_path(ws: Workspace, given: Path | None) -> Path:
    """Where the result goes (``--json`` or the default); its checkpoints go next to it."""
    path = given or default_result_path(ws)
    if path.name.endswith(PARTIAL_SUFFIX):
        raise FusekitError(f"--json {path}: names ending in {PARTIAL_SUFFIX} are kept for an eval's checkpoints")
    if partial_path(path).exists():
        note(f"{partial_path(path)} (an earlier eval's partial result) is replaced at this eval's first checkpoint")
    return path


@click.command("report")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None, help="Write the Markdown here.")
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="PNG of tok/s ratios (needs matplotlib).")
@click.option(
    "--baseline",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Render a GPU-host baseline batch folder (eval, profiles, mul_mat sweep, model) as one report.",
)
@click.option(
    "--session",
    type=click.Path(path_type=Path),
    default=None,
    help="Render a GPU-host fusion-session folder (builds, checks, profiles, evals, race) as one report.",
)
@click.pass_context
def report_cmd(
    ctx: click.Context,
    files: tuple[Path, ...],
    output: Path | None,
    plot: Path | None,
    baseline: Path | None,
    session: Path | None,
) -> None:
    """Markdown tables from eval result files, or a baseline or session folder's report (runs nothing)."""
    results: list[tuple[str, dict]] = []
    if session is not None:
        if files or baseline is not None:
            raise FusekitError("give either result FILES, --baseline DIR or --session DIR, one of them")
        text = render_session(session)
    elif baseline is not None:
        if files:
            raise FusekitError("give either result FILES or --baseline DIR, not both")
        ws = Workspace(resolve_home(ctx.obj["home"]))
        ws.require_init()
        text = render_baseline(baseline, load_gguf(ws.tree(STOCK) / "gguf-py"))
    else:
        if not files:
            raise FusekitError("name result files to report on (or --baseline DIR, or --session DIR)")
        for path in files:
            data = read_result(path)
            if data["kind"] != "eval":
                raise FusekitError(f"{path} is a {data['kind']} result, not an eval result")
            results.append((str(path), data))
        text = render_many(results)
    if output:
        output.write_text(text)
        note(f"report written to {output}")
    else:
        click.echo(text, nl=False)
    if plot:
        made = speed_plot(results, plot) if results else None
        note(f"plot written to {made}" if made else "no plot: matplotlib is not installed or no speed results")
