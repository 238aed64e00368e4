"""The registered fusions (fusions/*.toml) on real llama.cpp: each applies alone on stock and on top
of the lower-numbered ones; the CUDA units each stack changes compile (nvcc -c, no GPU needed: sm_80
and sm_90 for a fusion alone, sm_80 for a stack); the CPU build of the whole stack still builds; the
standalone kernel programs in kernels/ compile. A patch with a compile error must fail the check."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.build import BuildResult
from fusekit.cli import main
from fusekit.compilecheck import find_nvcc
from fusekit.registry import Registry
from fusekit.stack import patch_header_field

from .conftest import drop_variants_since, variant_labels

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.load(REPO / "fusions")
NAMES = [f.name for f in REGISTRY.fusions]
NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: CUDA compile checks need it")
BROKEN = str(Path(__file__).resolve().parent / "patches" / "cuda-compile-error.patch")
CLASH = str(Path(__file__).resolve().parent / "patches" / "cuda-symbol-clash.patch")


def stacks() -> list[list[str]]:
    """Each fusion alone, then each on top of all lower-numbered ones (duplicates dropped); alone first."""
    seen: list[list[str]] = []
    for i, name in enumerate(NAMES):
        for stack in ([name], NAMES[: i + 1]):
            if stack not in seen:
                seen.append(stack)
    return seen


def run(home: Path, *args: str) -> tuple[int, str]:
    """Exit code and all output (stdout and stderr, interleaved)."""
    done = CliRunner().invoke(main, ["--home", str(home), *args])
    return done.exit_code, done.output


def run_json(home: Path, *args: str, expect_code: int = 0) -> object:
    """The JSON that a command prints on stdout (progress goes to stderr), after it exited with expect_code."""
    done = CliRunner().invoke(main, ["--home", str(home), *args])
    assert done.exit_code == expect_code, done.output
    return json.loads(done.stdout)


@pytest.fixture
def home(pinned_home: Path) -> Path:
    """The shared workspace at stock; the variants a test makes are dropped after it (disk)."""
    assert run(pinned_home, "reset")[0] == 0
    before = variant_labels(pinned_home)
    yield pinned_home
    drop_variants_since(pinned_home, before)


def test_the_registry_has_fusions_with_cuda_sources() -> None:
    assert NAMES, "no fusions registered"
    for fusion in REGISTRY.fusions:
        assert fusion.patches and all(p.is_file() for p in fusion.patches)
        assert all(k.source.is_file() and k.dest.startswith("ggml/") for k in fusion.kernels)


@pytest.mark.parametrize("stack", stacks(), ids=lambda s: "+".join(s))
def test_stack_applies(home: Path, stack: list[str]) -> None:
    code, output = run(home, "apply", *stack)
    assert code == 0, output
    status = run_json(home, "status", "--json")
    assert status["variant"] == "+".join(stack)


def archs_for(stack: list[str]) -> list[str]:
    """sm_80 and sm_90 for a fusion alone; sm_80 (the issue's compile-only target) for a stack, to keep CI short."""
    return ["80", "90"] if len(stack) == 1 else ["80"]


@needs_nvcc
@pytest.mark.parametrize("stack", stacks(), ids=lambda s: "+".join(s))
def test_stack_compiles(home: Path, stack: list[str]) -> None:
    assert run(home, "apply", *stack)[0] == 0
    archs = archs_for(stack)
    record = run_json(home, "compile-check", *[a for arch in archs for a in ("--arch", arch)], "--json")
    units = {u["unit"] for u in record["units"]}
    for name in stack:
        for kernel in REGISTRY.get(name).kernels:
            if kernel.dest.endswith(".cu"):
                assert kernel.dest in units
    assert all(u["ok"] for u in record["units"]) and {u["arch"] for u in record["units"]} == set(archs)


EXPERIMENTS = sorted((REPO / "patches" / "experiments").glob("*.patch"))
SABOTAGES = {
    "fusion-1": REPO / "tests" / "patches" / "sabotage-norm-quantize.patch",
    "fusion-2": REPO / "tests" / "patches" / "sabotage-gdn-chains.patch",
    "fusion-3": REPO / "tests" / "patches" / "sabotage-moe-router.patch",
    "fusion-4": REPO / "tests" / "patches" / "sabotage-chunked-gdn.patch",
    "fusion-5": REPO / "tests" / "patches" / "sabotage-q8-gemv.patch",
}


def test_every_fusion_has_a_sabotage_patch() -> None:
    assert set(SABOTAGES) == set(NAMES) and all(p.is_file() for p in SABOTAGES.values())


@pytest.mark.parametrize("name", sorted(SABOTAGES))
def test_a_fusions_sabotage_applies_on_it(home: Path, name: str) -> None:
    """The GPU session builds fusion-N+sabotage beside fusion-N; a sabotage patch whose context went stale
    (session 17 lost its builds to one) must fail here, not on the device."""
    code, output = run(home, "apply", name, str(SABOTAGES[name]))
    assert code == 0, output


def experiment_bases(patch: Path) -> list[str]:
    """The fusions an experiment patch goes on top of: its header's "Applies on:" line, else the fusion its
    file name starts with (fusion-5-...)."""
    return patch_header_field(patch, "Applies on") or ["-".join(patch.name.split("-")[:2])]


def stock_op_descs(tree: Path) -> set[str]:
    """The op_desc values the pinned tree's test-backend-ops selects by: ggml's op names (GGML_OP_NAME in ggml.c,
    the default op_desc) and the names its own cases return."""
    ggml_c = (tree / "ggml" / "src" / "ggml.c").read_text()
    table = ggml_c[ggml_c.index("GGML_OP_NAME[GGML_OP_COUNT] = {") :]
    names = set(re.findall(r'"([A-Z_0-9]+)",', table[: table.index("};")]))
    return names | set(re.findall(r'return "([A-Z_0-9]+)";', (tree / "tests" / "test-backend-ops.cpp").read_text()))


@pytest.mark.parametrize("patch", EXPERIMENTS, ids=lambda p: p.stem)
def test_experiment_checks_name_test_cases_that_exist(pinned_home: Path, patch: Path) -> None:
    """The ops an experiment's "Checks:" line names (the session's check-mm runs them) are op_desc values of
    test cases of the pinned tree or of the fusion and experiment patches: a misspelt op would select no case
    and pass."""
    defined = stock_op_descs(pinned_home / "trees" / "stock")
    assert {"GATED_DELTA_NET", "MUL_MAT", "GATED_DELTA_NET_CACHE_FUSION"} <= defined  # the table was read
    for other in [*(REPO / "patches").glob("*.patch"), *EXPERIMENTS]:
        defined |= set(re.findall(r'return "([A-Z_0-9]+)";', other.read_text()))
    assert set(patch_header_field(patch, "Checks")) <= defined


@needs_nvcc
@pytest.mark.parametrize("patch", EXPERIMENTS, ids=lambda p: p.stem)
def test_experiment_patches_apply_with_their_sabotage_and_compile(home: Path, patch: Path) -> None:
    """An experiment (patches/experiments/) stays applicable on its fusion, also after the fusion's sabotage
    patch (the next GPU session builds both), and the units it changes compile for sm_90."""
    bases = experiment_bases(patch)
    for base in bases:
        if base in SABOTAGES:
            assert run(home, "apply", *bases, str(SABOTAGES[base]), str(patch))[0] == 0
            assert run(home, "reset")[0] == 0
    assert run(home, "apply", *bases, str(patch))[0] == 0
    record = run_json(home, "compile-check", "--arch", "90", "--json")
    assert record["units"] and all(u["ok"] for u in record["units"]), record


OWN_SABOTAGE = [p for p in EXPERIMENTS if patch_header_field(p, "Sabotage")]


@pytest.mark.parametrize("patch", OWN_SABOTAGE, ids=lambda p: p.stem)
def test_an_experiments_own_sabotage_applies_on_it_alone_and_on_the_stack(home: Path, patch: Path) -> None:
    """An experiment's "Sabotage:" patch (the session builds the experiment with it; check-mm then expects the
    experiment's "Checks:" ops to fail) applies on top of it, on its fusion and under the whole stack."""
    (sabotage,) = patch_header_field(patch, "Sabotage")
    assert (REPO / sabotage).is_file() and Path(sabotage).name.startswith("sabotage-")
    assert run(home, "apply", *experiment_bases(patch), str(patch), str(REPO / sabotage))[0] == 0
    assert run(home, "reset")[0] == 0
    code, output = run(home, "apply", *NAMES, *map(str, EXPERIMENTS), str(REPO / sabotage))
    assert code == 0, output


FIXES = sorted((REPO / "patches" / "fixes").glob("*.patch"))


def added_test_ops(patch: Path) -> set[str]:
    """The ops of the test-backend-ops cases a patch adds, by class name (new test_mul_mat_id -> MUL_MAT_ID)."""
    added = "\n".join(line for line in patch.read_text().splitlines() if line.startswith("+"))
    return {name.removeprefix("test_").upper() for name in re.findall(r"new (test_\w+)\(", added)}


@pytest.mark.parametrize("patch", FIXES, ids=lambda p: p.stem)
def test_fix_patches_name_the_ops_of_the_cases_they_add(patch: Path) -> None:
    """A fix of the pinned tree (patches/fixes/) adds the cases that fail without it; its "Checks:" line names
    their op (the session's check-mm runs it): a misspelt op would select no case and pass."""
    checks = set(patch_header_field(patch, "Checks"))
    assert checks and checks <= added_test_ops(patch)


@pytest.mark.parametrize("patch", FIXES, ids=lambda p: p.stem)
def test_fix_patches_apply_on_stock_and_under_every_fusion_and_experiment(home: Path, patch: Path) -> None:
    assert run(home, "apply", str(patch))[0] == 0
    assert run(home, "reset")[0] == 0
    code, output = run(home, "apply", *NAMES, *map(str, EXPERIMENTS), str(patch))
    assert code == 0, output


@needs_nvcc
@pytest.mark.parametrize("patch", FIXES, ids=lambda p: p.stem)
def test_fix_patches_compile(home: Path, patch: Path) -> None:
    assert run(home, "apply", str(patch))[0] == 0
    record = run_json(home, "compile-check", "--arch", "90", "--json")
    assert record["units"] and all(u["ok"] for u in record["units"]), record


CONTROLS = sorted((REPO / "patches" / "controls").glob("*.patch"))


@pytest.mark.parametrize("patch", CONTROLS, ids=lambda p: p.stem)
def test_control_patches_apply_on_stock_and_on_the_whole_stack(home: Path, patch: Path) -> None:
    """A control (patches/controls/) is measured on stock and under the stack, so it must apply on both."""
    assert run(home, "apply", str(patch))[0] == 0
    assert run(home, "reset")[0] == 0
    assert run(home, "apply", *NAMES, str(patch))[0] == 0


@needs_nvcc
def test_a_compile_error_fails_the_check(home: Path) -> None:
    assert run(home, "apply", BROKEN)[0] == 0
    code, output = run(home, "compile-check", "--arch", "80")
    assert code == 1
    assert "nidx_undeclared" in output and "1 of 1 compiles failed on cuda-compile-error" in output


@needs_nvcc
def test_a_symbol_defined_in_two_units_fails_the_check(home: Path) -> None:
    """Each unit compiles alone, but the kernel their common header defines would link twice into libggml-cuda
    (session 45's first fold build failed so on the H100): the link check must fail and say where."""
    assert run(home, "apply", CLASH)[0] == 0
    record = run_json(home, "compile-check", "--arch", "80", "--json", expect_code=1)
    by_unit = {u["unit"]: u for u in record["units"]}
    assert by_unit["ggml/src/ggml-cuda/arange.cu"]["ok"] and by_unit["ggml/src/ggml-cuda/fill.cu"]["ok"]
    (link,) = [u for u in record["units"] if u["unit"].startswith("(link")]
    assert not link["ok"] and "fusekit_clash_probe_kernel(float*) is defined in arange.cu, fill.cu" in link["errors"]


def test_the_whole_stack_still_builds_on_the_cpu(home: Path, stock_build: BuildResult) -> None:
    assert run(home, "apply", *NAMES)[0] == 0
    records = run_json(home, "build", "--json")
    assert [r["variant"] for r in records] == ["stock", "+".join(NAMES)]
    assert all((Path(r["build_dir"]) / "bin" / "test-backend-ops").is_file() for r in records)


@needs_nvcc
@pytest.mark.parametrize("arch", ["80", "90"])
def test_standalone_kernel_programs_compile(arch: str, tmp_path: Path) -> None:
    placed = {k.source.resolve() for f in REGISTRY.fusions for k in f.kernels}
    programs = [p for p in sorted((REPO / "kernels").glob("*.cu")) if p.resolve() not in placed]
    assert programs, "no standalone kernel programs in kernels/"
    for program in programs:
        cmd = [str(NVCC), "-c", "-std=c++17", "-O3", f"-arch=sm_{arch}", f"-I{REPO / 'kernels'}"]
        done = subprocess.run([*cmd, "-o", str(tmp_path / "x.o"), str(program)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
