"""The ``fusekit`` command line: thin click commands over the library modules."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import git

from evals.profile.cli import profile
from ggml_bridge.cli import bench

from . import __version__
from .build import BACKENDS, BuildOptions, BuildResult, build_variant
from .compilecheck import compile_check, cublas_include, find_nvcc
from .console import StepMeter, note, print_json, table
from .drop import drop, droppable
from .errors import FusekitError
from .gitutil import git_error_text
from .named_stacks import expand, load_stacks
from .paths import resolve_home
from .pin import load_pin
from .registry import Registry
from .stack import Entry, canonical, label_of, resolve_spec, spec_entries
from .variants import Variant, apply, current_entries, materialize, refresh, reset, status
from .workspace import Workspace


class FusekitGroup(click.Group):
    """Turns :class:`FusekitError` into one line on stderr (plus detail) and exit status 1."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except FusekitError as exc:
            click.echo(f"fusekit: error: {exc.message}", err=True)
            if exc.detail:
                click.echo(exc.detail.rstrip(), err=True)
            sys.exit(1)
        except git.GitCommandError as exc:  # a git failure no caller explains: still one line, not a traceback
            command = " ".join(str(part) for part in exc.command) if isinstance(exc.command, list) else str(exc.command)
            click.echo(f"fusekit: error: '{command}' failed: {git_error_text(exc) or exc.status}", err=True)
            sys.exit(1)


def _workspace(ctx: click.Context) -> Workspace:
    return Workspace(resolve_home(ctx.obj["home"]))


@click.group(cls=FusekitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fusekit")
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    default=None,
    help="Workspace folder (default: $FUSEKIT_HOME, else ./.fusekit).",
)
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """Patch, build and measure CUDA fusions for a pinned llama.cpp.

    \b
    Typical session:
      fusekit init                  fetch and verify the pinned llama.cpp
      fusekit apply fusion-3        current variant = stock + fusion-3
      fusekit build                 build stock and the current variant
      fusekit eval --ppl --kl       measure the variant against stock
    """
    ctx.ensure_object(dict)
    ctx.obj["home"] = home


@main.command()
@click.option(
    "--source",
    default=None,
    metavar="DIR|TARBALL|GIT_URL",
    help="Take llama.cpp from a local directory, a tarball (slim bundles too) or a git URL "
    "(URL#COMMIT) instead of the PyPI sdist. Every source is verified against the pin.",
)
@click.pass_context
def init(ctx: click.Context, source: str | None) -> None:
    """Fetch and verify the pinned llama.cpp into the workspace (a no-op when done already)."""
    ws = _workspace(ctx)
    with ws.lock():
        click.echo(ws.init(source, note))


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the fusions as JSON.")
def list_fusions(as_json: bool) -> None:
    """Fusions known to this checkout, with one-line descriptions."""
    registry = Registry.load()
    if as_json:
        print_json(
            [
                {
                    "name": f.name,
                    "alias": f.alias,
                    "title": f.title,
                    "backends": list(f.backends),
                    "ops": list(f.ops),
                    "patches": [str(p) for p in f.patches],
                    "kernels": [k.dest for k in f.kernels],
                }
                for f in registry.fusions
            ]
        )
        return
    if not registry.fusions:
        click.echo("no fusions in this checkout (fusions/*.toml); 'fusekit apply FILE.patch' takes your own patches")
        return
    click.echo(
        table(
            ["name", "alias", "backends", "title"],
            [[f.name, f.alias, ",".join(f.backends), f.title] for f in registry.fusions],
        )
    )
    stacks = load_stacks(registry)
    if stacks:
        click.echo("\nnamed stacks (patches/stacks.toml; 'fusekit apply NAME'):")
        click.echo(table(["name", "entries", "title"], [[s.name, str(len(s.specs)), s.title] for s in stacks.values()]))


@main.command("apply")
@click.argument("specs", nargs=-1, required=True, metavar="FUSION|STACK|PATCH_FILE...")
@click.pass_context
def apply_cmd(ctx: click.Context, specs: tuple[str, ...]) -> None:
    """Add fusions (by name or alias), named stacks or patch files to the current variant.

    A named stack (`fusekit list` shows them, `patches/stacks.toml` defines them) is the fusions and
    patches a GPU session measured as one variant: `fusekit apply stack-1-5` gives exactly that variant.

    apply adds to what is applied already: `fusekit reset` first for a variant of exactly
    these entries. The stack is kept in canonical order (fusion-1 .. fusion-N, then your patch
    files in the order you added them). Applying is atomic: if any patch fails, nothing changes.
    """
    ws = _workspace(ctx)
    registry = Registry.load()
    specs_expanded = expand(list(specs), load_stacks(registry))
    with ws.lock():
        variant = apply(ws, specs_expanded, registry, resolve_spec)
    click.echo(f"current variant: {variant.label} ({len(variant.entries)} entries, tree {variant.tree})")


@main.command("reset")
@click.pass_context
def reset_cmd(ctx: click.Context) -> None:
    """Make stock the current variant again (variant trees and builds are kept)."""
    ws = _workspace(ctx)
    with ws.lock():
        reset(ws)
    click.echo("current variant: stock")


@main.command("drop")
@click.argument("labels", nargs=-1, metavar="VARIANT...")
@click.option("--all", "drop_all", is_flag=True, help="Drop every variant except stock and the current one.")
@click.option("--force", is_flag=True, help="Drop trees that hold edits not yet in a patch (the edits are lost).")
@click.option("--json", "as_json", is_flag=True, help="Print what was dropped as JSON.")
@click.pass_context
def drop_cmd(ctx: click.Context, labels: tuple[str, ...], drop_all: bool, force: bool, as_json: bool) -> None:
    """Delete variants' work trees, builds and branches to free disk (about 180 MB a tree, more when built).

    VARIANT is a label as `fusekit status --json` lists it under "variants". Stock and the current
    variant are never dropped, and a tree with edits not yet in a patch only with --force. Nothing is
    dropped unless every VARIANT can be. Applying the same stack again makes the variant anew.
    """
    if bool(labels) == drop_all:
        raise FusekitError("name the variants to drop, or pass --all (not both)")
    ws = _workspace(ctx)
    with ws.lock():
        wanted = droppable(ws) if drop_all else list(labels)
        dropped = drop(ws, wanted, force)
    freed = sum(d.bytes_freed for d in dropped)
    if as_json:
        print_json({"dropped": [d.describe() for d in dropped], "bytes_freed": freed})
        return
    for item in dropped:
        click.echo(f"dropped {item.label} ({item.bytes_freed / 1e6:.0f} MB)")
    click.echo(f"{len(dropped)} variant(s) dropped, {freed / 1e6:.0f} MB freed")


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_context
def status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Current variant, its patches with hashes, and edits not yet in a patch."""
    ws = _workspace(ctx)
    info = status(ws, Registry.load())
    if as_json:
        print_json(info)
        return
    click.echo(f"llama.cpp {info['pin'][:10]} from {info['source']}")
    click.echo(f"variant:  {info['variant']}  (branch {info['branch']}, tree {info['tree']})")
    for entry in info["entries"]:
        click.echo(f"  {entry['kind']:6} {entry['name']:24} sha256 {entry['sha256'][:12]}")
        for patch in entry["patches"]:
            click.echo(f"           {patch['file']}  {patch['sha256'][:12]}")
    if info["stale"]:
        click.echo("patch files changed since the variant was made: run 'fusekit apply' to rebuild it")
    edits = info["edits_not_in_a_patch"]
    if edits:
        click.echo(f"edits not yet in a patch ({len(edits)}): " + ", ".join(edits[:10]))
    else:
        click.echo("no edits outside the patches")


@main.command("refresh")
@click.argument("name")
@click.pass_context
def refresh_cmd(ctx: click.Context, name: str) -> None:
    """Write the edits made in the variant's tree back into NAME's patch file."""
    ws = _workspace(ctx)
    with ws.lock():
        written = refresh(ws, name, Registry.load())
    for path in written:
        click.echo(f"wrote {path}")


def build_one(ws: Workspace, variant: Variant, options: BuildOptions, jobs: int | None) -> BuildResult:
    """Build one variant with progress on stderr (used by build and by eval)."""
    result = build_variant(
        variant.label, variant.tree, ws.trees, variant.stack_sha256, options, jobs, note, StepMeter(variant.label)
    )
    state = "up to date" if result.up_to_date else f"{result.steps} steps"
    note(f"built {variant.label} in {result.seconds:.1f}s ({state}) -> {result.bin_dir}")
    return result


@main.command("build")
@click.argument("specs", nargs=-1, metavar="[VARIANT]...")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="cpu",
    show_default=True,
    help="ggml backend to build in addition to the CPU one.",
)
@click.option(
    "--cuda-arch",
    default=None,
    metavar="SM",
    help="CUDA architecture for --backend cuda, e.g. 90 (default: what the GPU reports).",
)
@click.option("--jobs", "-j", type=int, default=None, help="Parallel compile jobs per build (default: the core count).")
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Variants built at the same time, after stock (stock fills the ccache they share).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build records as JSON.")
@click.pass_context
def build_cmd(
    ctx: click.Context, specs: tuple[str, ...], backend: str, cuda_arch: str | None, jobs: int | None, parallel: int,
    as_json: bool,
) -> None:  # fmt: skip
    """Build stock and the current variant (llama-bench, -perplexity, -completion, -quantize,
    test-backend-ops and the shared ggml libraries), each in its own tree.

    Name VARIANTs (a fusion, a patch file, or several joined with '+') to build those instead of
    the current variant; the current variant stays as it is. A variant whose patches do not apply
    or that fails to build does not stop the others: each failure is one line, and the exit
    status is 1. An unknown fusion name or a missing patch file stops everything before the builds.

    \b
    Examples:
      fusekit apply fusion-3 && fusekit build
      fusekit build fusion-1 fusion-5 fusion-1+fusion-5 --backend cuda --parallel 3
    """
    ws = _workspace(ctx)
    registry = Registry.load()
    options = BuildOptions(backend=backend, cuda_arch=cuda_arch)
    with ws.lock():
        stock = materialize(ws, [])
        # every name resolves before anything is built (a typo fails at once); a patch that does not apply fails
        # its own variant only, like a compile error
        wanted = [spec_entries(spec, registry) for spec in specs] if specs else [current_entries(ws, registry)]
        named, failures = materialize_each(ws, wanted)
        others = list({v.label: v for v in named if not v.is_stock}.values())
        results = [build_one(ws, stock, options, jobs)]
        outcomes = build_many(ws, others, options, jobs, parallel)
    failures += [(label, error) for label, error in outcomes if isinstance(error, FusekitError)]
    results += [r for _, r in outcomes if isinstance(r, BuildResult)]
    if as_json:
        records = [{**r.record, "build_dir": str(r.build_dir), "seconds": r.seconds} for r in results]
        print_json(records + [{"variant": label, "error": error.message} for label, error in failures])
    else:
        for r in results:
            click.echo(f"{r.label}: {r.bin_dir}")
    for _, error in failures:
        click.echo(f"fusekit: error: {error.message}", err=True)
        if error.detail:
            click.echo(error.detail.rstrip(), err=True)
    if failures:
        sys.exit(1)


def materialize_each(ws: Workspace, wanted: list[list[Entry]]) -> tuple[list[Variant], list[tuple[str, FusekitError]]]:
    """Each entry list's variant tree; one whose patches do not apply is returned as a failure under its label."""
    made: list[Variant] = []
    failures: list[tuple[str, FusekitError]] = []
    for entries in wanted:
        try:
            made.append(materialize(ws, entries))
        except FusekitError as exc:
            label = label_of(canonical(entries))
            note(f"variant {label} not built: {exc.message}")
            failures.append((label, exc))
    return made, failures


def build_many(
    ws: Workspace, variants: list[Variant], options: BuildOptions, jobs: int | None, parallel: int
) -> list[tuple[str, BuildResult | FusekitError]]:
    """Build ``variants``, ``parallel`` at a time; a failure is returned in its variant's place, not raised."""

    def one(variant: Variant) -> tuple[str, BuildResult | FusekitError]:
        try:
            return variant.label, build_one(ws, variant, options, jobs)
        except FusekitError as exc:
            note(f"build of {variant.label} failed: {exc.message}")
            return variant.label, exc

    if parallel == 1 or len(variants) < 2:
        return [one(v) for v in variants]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return list(pool.map(one, variants))


@main.command("compile-check")
@click.option("--arch", "archs", multiple=True, default=("80", "90"), show_default=True, metavar="SM",
              help="CUDA architecture to compile for (repeat for several).")  # fmt: skip
@click.option("--nvcc", default=None, help="The nvcc to use (default: $NVCC, PATH, /usr/local/cuda/bin).")
@click.option("--cuda-include", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="A folder with cublas_v2.h (default: the toolkit's, else fetched from a wheel).")  # fmt: skip
@click.option("--jobs", "-j", type=int, default=None, help="Parallel nvcc runs (default: the core count).")
@click.option("--json", "as_json", is_flag=True, help="Print one record per unit and arch as JSON.")
@click.pass_context
def compile_check_cmd(
    ctx: click.Context, archs: tuple[str, ...], nvcc: str | None, cuda_include: Path | None, jobs: int | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Compile, without a GPU, the CUDA units the current variant changes (nvcc -c per arch).

    Catches what a patch breaks in ggml-cuda before any GPU time is spent, and keeps a fusion
    compiling for older architectures (sm_80) that no GPU here runs. Then compares the external
    symbols the compiled units define (nm): one defined by two units would not link into
    libggml-cuda (a row "(link: ...)"). Exits 1 if any unit or the link check fails.

    \b
    Examples:
      fusekit apply fusion-5 && fusekit compile-check
      fusekit compile-check --arch 80 --json
    """
    ws = _workspace(ctx)
    found = find_nvcc(nvcc)
    if found is None:
        raise FusekitError("no nvcc found (pass --nvcc or set NVCC); compile-check needs the CUDA compiler")
    with ws.lock():
        variant = materialize(ws, current_entries(ws, Registry.load()))
        include = cublas_include(found, ws.home / "cache", cuda_include, note)
        scratch = ws.home / "cache" / "compile-check"
        results = compile_check(variant.tree, list(archs), found, include, scratch, jobs or os.cpu_count() or 1, note)
    if as_json:
        print_json({"variant": variant.label, "head": variant.head, "units": [r.record() for r in results]})
    elif not results:
        click.echo(f"{variant.label}: no CUDA unit differs from stock")
    else:
        rows = [[r.unit, f"sm_{r.arch}", "ok" if r.ok else "FAILED", f"{r.seconds:.0f}s"] for r in results]
        click.echo(table(["unit", "arch", "result", "time"], rows))
    failed = [r for r in results if not r.ok]
    for r in failed:
        click.echo(f"--- {r.unit} sm_{r.arch}:\n{r.errors}", err=True)
    if failed:
        raise FusekitError(f"{len(failed)} of {len(results)} compiles failed on {variant.label}")


@main.command("pin")
def pin_cmd() -> None:
    """Show the pinned llama.cpp commit and its source."""
    pin = load_pin()
    click.echo(f"llama.cpp {pin.commit} ({pin.date}), tree {pin.tree}")
    click.echo(f"default source: {pin.sdist.requirement} sdist, sha256 {pin.sdist.sha256}")


main.add_command(profile)
main.add_command(bench)

from .bundle import bundle_cmd  # noqa: E402
from .synth.cli import model_group  # noqa: E402

main.add_command(model_group)
main.add_command(bundle_cmd)

from evals.cli import eval_cmd, report_cmd  # noqa: E402

main.add_command(eval_cmd)
main.add_command(report_cmd)


if __name__ == "__main__":
    main()
