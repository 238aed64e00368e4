"""Real CPU builds of stock and a variant; no-op rebuilds are fast; compiler errors are shown."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from fusekit.build import BuildOptions, BuildResult, build_variant
from fusekit.cli import main
from fusekit.errors import FusekitError
from fusekit.registry import Registry
from fusekit.stack import resolve_spec
from fusekit.variants import materialize
from fusekit.workspace import Workspace

from .conftest import TEST_PATCHES, log

pytestmark = pytest.mark.slow
BANNER = "fusekit example fusion: this llama-bench was built from a patched tree"


def run_tool(result: BuildResult, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(result.tool("llama-bench")), *args], capture_output=True, text=True, timeout=60)


def build(ws: Workspace, specs: list[str]) -> BuildResult:
    variant = materialize(ws, [resolve_spec(s, Registry.load()) for s in specs])
    return build_variant(variant.label, variant.tree, ws.trees, variant.stack_sha256, BuildOptions(), None, log)


def test_stock_build_runs(stock_build: BuildResult) -> None:
    done = run_tool(stock_build, "--help")
    assert done.returncode == 0 and "usage:" in done.stdout
    assert BANNER not in done.stdout
    for lib in ("libggml-base.so", "libggml-cpu.so", "libggml.so", "libllama.so"):
        assert (stock_build.bin_dir / lib).exists(), lib
    for tool in ("llama-perplexity", "llama-completion", "llama-quantize", "test-backend-ops"):
        assert stock_build.tool(tool).is_file(), tool


def test_variant_build_carries_its_patch_and_name(pinned_home: Path, stock_build: BuildResult, example_data) -> None:
    ws = Workspace(pinned_home)
    result = build(ws, ["fusion-9"])
    assert BANNER in run_tool(result, "--help").stdout
    version = run_tool(result, "--version")
    assert "fusion-9@" in version.stdout + version.stderr  # LLAMA_BUILD_COMMIT names the variant
    again = build(ws, ["fusion-9"])
    assert again.up_to_date, again  # ninja found nothing to do (a wall-clock bound would be a timing test)


def test_compiler_errors_are_shown(pinned_home: Path, stock_build: BuildResult) -> None:
    ws = Workspace(pinned_home)
    with pytest.raises(FusekitError) as info:
        build(ws, [str(TEST_PATCHES / "broken-build.patch")])
    assert info.value.message.startswith("build of broken-build failed")
    assert "llama-bench.cpp" in info.value.detail and "error" in info.value.detail
    assert "Traceback" not in info.value.detail


def test_build_command_builds_named_variants_in_parallel_and_reports_each_failure(
    pinned_home: Path, stock_build: BuildResult, example_data
) -> None:
    """`fusekit build A B --parallel 2`: one failure does not stop the other build; exit 1; current untouched."""
    broken = str(TEST_PATCHES / "broken-build.patch")
    # a patch that does not apply on its fusion fails its own variant only (session 17 lost every build to one)
    stale = "fusion-9+" + str(TEST_PATCHES / "conflict-bench-usage.patch")
    current = Workspace(pinned_home).load_state()["current"]
    args = ["--home", str(pinned_home), "build", "fusion-9", broken, stale, "--parallel", "2", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    records = json.loads(result.stdout)
    by_variant = {r["variant"]: r for r in records}
    assert set(by_variant) == {"stock", "fusion-9", "broken-build", "fusion-9+conflict-bench-usage"}
    assert by_variant["broken-build"]["error"].startswith("build of broken-build failed")
    assert "conflict-bench-usage.patch does not apply" in by_variant["fusion-9+conflict-bench-usage"]["error"]
    assert "error" not in by_variant["fusion-9"] and Path(by_variant["fusion-9"]["build_dir"]).is_dir()
    assert "fusekit: error: build of broken-build failed" in result.stderr
    assert Workspace(pinned_home).load_state()["current"] == current


def test_build_command_stops_on_an_unknown_name_before_building(pinned_home: Path) -> None:
    result = CliRunner().invoke(main, ["--home", str(pinned_home), "build", "fusion-1", "fusion-99"])
    assert result.exit_code != 0 and "fusion-99" in result.output and "built" not in result.output


def test_missing_cmake_is_one_clear_error(pinned_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(bare))
    ws = Workspace(pinned_home)
    with pytest.raises(FusekitError, match=r"cmake is not installed \(apt-get install cmake\)"):
        build_variant("stock", ws.tree("stock"), ws.trees, "", BuildOptions(), None, log)


def test_cuda_with_a_missing_nvcc_is_one_clear_error(pinned_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDACXX", "/nonexistent/nvcc")
    ws = Workspace(pinned_home)
    with pytest.raises(FusekitError, match="CUDACXX=/nonexistent/nvcc is not an executable nvcc"):
        build_variant("stock", ws.tree("stock"), ws.trees, "", BuildOptions("cuda", "90"), None, log)
