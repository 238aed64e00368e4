"""fusion-2's matching (kernels/fusekit-gdn-chains.cu, host code) on the CPU: tests/cpp/gdn_chains_plan_test.cu
builds a qwen35moe gated-delta-net layer as the model does, allocates it with ggml-alloc (in-place reuse and
buffers handed on included, weights in their own buffer), plans, and checks which chains are claimed (one
token: all three launches; prompts, head size 16: none; an outside reader of the q norm: not the q/k/beta
launch) and that the patched loop runs every other node exactly once; built again as the experiments
fusion-2-conv-window and fusion-2-state-rows enable their matching, with fusion-2-reshape-residual's epilogue
in the walk (which must leave fusion-2's nodes alone), and on fusekit-gdn-chains.cu as fusion-2-state-rows and
fusion-2-within-gdn patch it (the q/k/beta launch folded into the GATED_DELTA_NET). Every program is built with
AddressSanitizer and UBSan (tests/conftest.py): the plan's host code must not read freed or foreign memory (session
46: the fold's entry was copied from a map entry after erasing it, and the GPU read a freed pointer). Needs nvcc (the
glue includes ggml-cuda's common.cuh), the host compiler's libasan and libubsan, and the stock CPU build's
libggml-base."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fusekit.build import BuildResult
from fusekit.compilecheck import cublas_include, find_nvcc

from .conftest import HOST_SANITIZER_LIBS, HOST_SANITIZERS, SANITIZED_ENV, apply_hunks, reshape_residual_header

REPO = Path(__file__).resolve().parent.parent
NVCC = find_nvcc()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the glue includes ggml-cuda's headers"),
]


EXPERIMENTS = REPO / "patches" / "experiments"
WITHIN_PATCHES = [EXPERIMENTS / "fusion-2-state-rows.patch", EXPERIMENTS / "fusion-2-within-gdn.patch"]


# match_within's rules for one sequence: the state read in place, and v of one sequence
WITHIN_ONE_SEQUENCE = {
    " || plan.state_rows.count(at) == 0": "",
    "k.x->nb[1] != k.scale->nb[1] || v->ne[3] != 1": "k.x->nb[1] != k.scale->nb[1]",
}


# match_within as sessions 44-45 ran it: the planned launch's entry erased before the fold's entry is copied from it
_WITHIN_ENTRY = (
    "    plan.within[at] = { a.q_src.data, a.k_src.data, a.beta_raw, a.eps_q, a.eps_k, a.scale_q, a.scale_k,"
    " a.sabotage };\n"
)
_WITHIN_ERASE = "    plan.roles[i_beta] = fusekit_gdn_role::skip;\n    plan.fused.erase(it);\n"
WITHIN_ERASE_FIRST = (_WITHIN_ENTRY + _WITHIN_ERASE, _WITHIN_ERASE + _WITHIN_ENTRY)


def run_plan_program(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One run of a plan test program (the sanitizers' settings in its environment)."""
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=300, env=SANITIZED_ENV)


def within_gdn_source(work: Path, sabotage: bool = False, erase_first: bool = False) -> Path:
    """fusion-2's matching as fusion-2-state-rows and fusion-2-within-gdn patch it: copies of its sources under work
    with the two patches' hunks for them applied; returns the patched fusekit-gdn-chains.cu. sabotage: without the
    rules for one sequence (a fold then also where the GATED_DELTA_NET takes no cache fusion). erase_first: the
    fold's entry copied after the planned launch's entry is erased (WITHIN_ERASE_FIRST, a use after free)."""
    folder = work / "ggml" / "src" / "ggml-cuda"
    folder.mkdir(parents=True)
    for name in ("fusekit-gdn-chains.cu", "fusekit-gdn-chains.cuh", "fusekit-gdn-chains-glue.cuh"):
        (folder / name).write_bytes((REPO / "kernels" / name).read_bytes())
    for patch in WITHIN_PATCHES:
        apply_hunks(work, "ggml/src/ggml-cuda/fusekit-gdn-chains*", patch)
    source = folder / "fusekit-gdn-chains.cu"
    if sabotage:
        text = source.read_text()
        for rule, without in WITHIN_ONE_SEQUENCE.items():
            assert text.count(rule) == 1, rule
            text = text.replace(rule, without)
        source.write_text(text)
    if erase_first:
        text = source.read_text()
        fixed, erased_first = WITHIN_ERASE_FIRST
        assert text.count(fixed) == 1, "match_within's entry and erase as the patch has them"
        source.write_text(text.replace(fixed, erased_first))
    return source


def build_plan_test(
    home: Path,
    build: BuildResult,
    work: Path,
    conv_window: int,
    state_rows: int,
    residual: bool = False,
    within: bool = False,
    sabotage_within: bool = False,
    erase_first: bool = False,
) -> Path:
    """The plan test, compiled for the given experiments with the host sanitizers; residual: with
    fusion-2-reshape-residual's header, taken from the patch as it creates it; within: on fusion-2-within-gdn's
    matching (within_gdn_source, sabotaged or not, its erase first or not)."""
    tree = build.build_dir.parent
    lib = build.bin_dir
    cublas = cublas_include(NVCC, home / "cache", None, lambda _msg: None)
    ggml = tree / "ggml"
    includes = [ggml / "include", ggml / "src", ggml / "src" / "ggml-cuda", REPO / "kernels", cublas]
    if residual:
        includes.append(reshape_residual_header(work))
    program = work / "gdn_chains_plan_test"
    cmd = [
        str(NVCC),
        "-std=c++17",
        "-arch=sm_80",
        *[f"-Xcompiler={flag}" for flag in HOST_SANITIZERS],
        f"-DFUSEKIT_GDN_CONV_WINDOW={conv_window}",
        f"-DFUSEKIT_GDN_STATE_ROWS={state_rows}",
        f"-DFUSEKIT_RESHAPE_RESIDUAL={int(residual)}",
        f"-DFUSEKIT_GDN_WITHIN={int(within)}",
        *([f'-DFUSEKIT_GDN_CHAINS_SOURCE="{within_gdn_source(work, sabotage_within, erase_first)}"'] if within else []),
        *[f"-I{p}" for p in includes],
        "-o",
        str(program),
        str(REPO / "tests" / "cpp" / "gdn_chains_plan_test.cu"),
        f"-L{lib}",
        "-lggml-base",
        *HOST_SANITIZER_LIBS,
        "-Xlinker",
        "-rpath",
        "-Xlinker",
        str(lib),
    ]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return program


@pytest.mark.parametrize(
    ("conv_window", "state_rows"),
    [(0, 0), (1, 0), (0, 1), (1, 1)],
    ids=["fusion-2", "with-conv-window", "with-state-rows", "with-both"],
)
def test_gdn_chains_plan(
    pinned_home: Path, stock_build: BuildResult, tmp_path: Path, conv_window: int, state_rows: int
) -> None:
    """conv_window 1: as the experiment fusion-2-conv-window builds it (GET_ROWS, CONCAT, CPY and SSM_CONV+SILU
    of one token and one sequence claimed as one launch, and left alone when a node reads the cache early).
    state_rows 1: as fusion-2-state-rows builds it (the state's GET_ROWS skipped and the cache row read in place at
    one token of one sequence, not where the index's memory is reused before the GATED_DELTA_NET)."""
    program = build_plan_test(pinned_home, stock_build, tmp_path, conv_window, state_rows)
    ran = run_plan_program(program)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-1000:]
    assert "plan checks passed" in ran.stdout


def test_the_within_gdn_fold(pinned_home: Path, stock_build: BuildResult, tmp_path: Path) -> None:
    """fusion-2-within-gdn (on fusion-2-state-rows, with the conv window): the q/k/beta launch folded into the
    GATED_DELTA_NET wherever it is planned and the state is read in place (one token of one sequence, heads of 32-128
    floats), the SIGMOID skipped, and the fold reading the norms' and the SIGMOID's sources; the walk runs every other
    node once. Sabotage: the matching without its rules for one sequence folds where the GATED_DELTA_NET takes no
    cache fusion (4 sequences), and the program must fail there."""
    program = build_plan_test(pinned_home, stock_build, tmp_path / "clean", 1, 1, within=True)
    ran = run_plan_program(program)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-1000:]
    assert "plan checks passed" in ran.stdout
    folded = [line for line in ran.stdout.splitlines() if "folded 1" in line]
    assert any(line.startswith("35B, 1 token, 6 layers") for line in folded), ran.stdout
    assert not any("sequences" in line or "prompt" in line for line in folded), ran.stdout
    sabotage = tmp_path / "sabotage"
    sabotaged = build_plan_test(pinned_home, stock_build, sabotage, 1, 1, within=True, sabotage_within=True)
    failed = run_plan_program(sabotaged)
    assert failed.returncode == 1, failed.stdout[-3000:]
    assert "4 sequences: a fold has the state in place" in failed.stdout, failed.stdout[-3000:]


def test_the_within_fold_reads_no_freed_entry(pinned_home: Path, stock_build: BuildResult, tmp_path: Path) -> None:
    """The fold's entry (the pointers the GATED_DELTA_NET kernel reads q, k and beta from) is copied before the
    planned launch's entry is erased. Sessions 44-45 copied it after: on the H100 the kernel then read k from a freed
    node's bytes (compute-sanitizer, session 46: a 4-byte load at 0xb31, `results/h100-2026-12-06-session46-memcheck/`),
    and the plain run aborted with a misaligned address. Sabotage (WITHIN_ERASE_FIRST, that order again):
    AddressSanitizer must stop the program at the read (the fixed order runs clean under it in
    test_the_within_gdn_fold)."""
    sabotaged = build_plan_test(pinned_home, stock_build, tmp_path / "erase-first", 1, 1, within=True, erase_first=True)
    failed = run_plan_program(sabotaged)
    assert failed.returncode != 0, failed.stdout[-2000:]
    assert "heap-use-after-free" in failed.stderr and "match_within" in failed.stderr, failed.stderr[-3000:]


def test_the_residual_epilogue_leaves_fusion_2s_nodes_alone(
    pinned_home: Path, stock_build: BuildResult, tmp_path: Path
) -> None:
    """With fusion-2-reshape-residual (and the other two experiments): the epilogue takes ssm_out's residual in every
    layer at one token, and the alpha chain's MUL_MAT, RESHAPE, ADD only where fusion-2 leaves them to stock.
    Sabotage (--sabotage-residual, the match without fusion-2's claims, as on the H200 in session 12, where the stack
    read NaN): the epilogue takes the ADD fusion-2 computes, and the walk sees that node run twice over."""
    program = build_plan_test(pinned_home, stock_build, tmp_path, 1, 1, residual=True)
    ran = run_plan_program(program)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-1000:]
    assert "35B, 1 token, 6 layers" in ran.stdout and "residual epilogues 6 " in ran.stdout
    sabotaged = run_plan_program(program, "--sabotage-residual")
    assert sabotaged.returncode == 1, sabotaged.stdout[-3000:]
    assert "(ADD" in sabotaged.stdout and "ran 1 times" in sabotaged.stdout
