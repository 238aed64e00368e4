"""``fusekit bench mulmat``: bad input gives one line and a non-zero exit; a tiny sweep writes a result."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from evals.results import read_result
from fusekit.build import BuildResult
from fusekit.cli import main
from fusekit.variants import reset
from fusekit.workspace import Workspace
from ggml_bridge.cli import parse_size
from ggml_bridge.shapes import SEED_SHAPES, parse_shapes, parse_tokens, parse_types, split_fitting

TINY = ["--shapes", "64x512", "--tokens", "1,8", "--check-tokens", "2", "--rounds", "2", "--reps", "1", "--nodes", "4"]
TINY += ["--l2", "1M"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("fusekit: error:")]
    assert len(lines) == 1, output
    return lines[0]


def test_shape_table_and_parsers() -> None:
    assert len({s.key for s in SEED_SHAPES}) == len(SEED_SHAPES)
    assert parse_shapes("4096x14336")[0].model == "Llama-3-8B"
    assert [s.key for s in parse_shapes("64X96, 8x32")] == ["64x96", "8x32"]
    assert parse_types("Q8_0,q2_k") == ["q8_0", "q2_K"]
    assert parse_tokens("1,512") == [1, 512]
    run_pairs, skipped = split_fitting(["q8_0", "q2_K"], parse_shapes("64x96"))
    assert [t for t, _ in run_pairs] == ["q8_0"] and "256-element block" in skipped[0]
    assert parse_size("60M") == 60 << 20 and parse_size("64MiB") == 64 << 20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--types", "q9_9"], "unknown weight type 'q9_9'"),
        (["--shapes", "4096by14336"], "malformed shape"),
        (["--shapes", "0x512"], "malformed shape"),
        (["--tokens", "1,x"], "malformed --tokens"),
        (["--types", "q2_K", "--shapes", "64x96"], "cannot hold"),
        (["--l2", "lots"], "malformed size"),
    ],
)
def test_bad_input_is_one_line(args: list[str], needle: str, tmp_path: Path) -> None:
    code, output = run("--home", str(tmp_path), "bench", "mulmat", *args)
    assert code != 0
    assert needle in one_error_line(output)


def test_missing_build_dir_is_one_line(tmp_path: Path) -> None:
    code, output = run("bench", "mulmat", "--lib-dir", str(tmp_path), *TINY)
    assert code != 0 and "no ggml shared libraries" in one_error_line(output)


def test_help_documents_the_flags() -> None:
    code, output = run("bench", "mulmat", "--help")
    assert code == 0
    flags = ("--types", "--shapes", "--tokens", "--check-tokens", "--backend", "--check", "--sabotage", "--lib-dir")
    for flag in (*flags, "--l2", "--copies", "--nodes", "--rounds"):
        assert flag in output


@pytest.mark.slow
def test_backend_not_present(stock_build: BuildResult) -> None:
    code, output = run("bench", "mulmat", "--lib-dir", str(stock_build.bin_dir), "--backend", "CUDA0", *TINY)
    assert code != 0 and "backend CUDA0 is not present" in one_error_line(output)


@pytest.fixture
def stock_current(pinned_home: Path, example_data: Path) -> Path:
    """The shared workspace with stock as its current variant for one test; other tests' state is restored."""
    ws = Workspace(pinned_home)
    saved = ws.state_file.read_text()
    reset(ws)
    yield pinned_home
    ws.state_file.write_text(saved)


@pytest.mark.slow
def test_variant_not_built(stock_current: Path, stock_build: BuildResult) -> None:
    pinned_home = stock_current
    code, output = run("--home", str(pinned_home), "bench", "mulmat", "--backend", "CUDA0", "--cuda-arch", "90", *TINY)
    assert code != 0 and "variant stock is not built for cuda-sm90" in one_error_line(output)


@pytest.mark.slow
def test_tiny_sweep_writes_a_result_and_renders(stock_build: BuildResult, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    lib = ["--lib-dir", f"stock={stock_build.bin_dir}", "--backend", "CPU", "--threads", "2"]
    code, output = run("bench", "mulmat", *lib, "--types", "q4_0,f16", *TINY, "--out", str(out))
    assert code == 0, output
    result = read_result(out)
    assert result["kind"] == "bench-mulmat"
    cases = result["payload"]["cases"]
    assert len(cases) == 4 and all(c["contenders"]["stock"]["check"]["passed"] for c in cases)
    assert all(c["contenders"]["stock"]["us"] > 0 and len(c["contenders"]["stock"]["samples_s"]) == 2 for c in cases)
    assert result["payload"]["roofline"]["gb_s"] > 0
    code, shown = run("bench", "show", str(out))
    assert code == 0 and "q4_0" in shown and "checks: 6 passed, 0 failed, 0 not as expected" in shown
    assert sorted(c["n"] for c in result["payload"]["checks"]) == [1, 1, 2, 2, 8, 8]


@pytest.mark.slow
def test_sabotage_sweep_fails_quantized_and_passes_controls(stock_build: BuildResult, tmp_path: Path) -> None:
    lib = ["--lib-dir", str(stock_build.bin_dir), "--backend", "CPU", "--threads", "2", "--check"]
    code, output = run(
        "bench", "mulmat", *lib, "--types", "q8_0,f16", *TINY, "--sabotage", "--out", str(tmp_path / "s")
    )
    assert code == 0, output
    assert "every quantized check failed and every control passed" in output
    code, output = run("bench", "mulmat", *lib, "--types", "q8_0", *TINY, "--out", str(tmp_path / "ok"))
    assert code == 0, output


TBO_SAMPLE = """Testing 2 devices

Backend 1/2: CUDA0
  Device description: NVIDIA H200
  MUL_MAT(type_a=q8_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1):  \
8520 runs -    23.17 us/run - 117.44 MFLOP/run -   5.07 TFLOPS
  MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=8,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1):  \
4260 runs -    31.00 us/run - 939.52 MFLOP/run -  30.31 TFLOPS
"""


def test_crosscheck_parses_test_backend_ops() -> None:
    from ggml_bridge.crosscheck import compare, parse_tbo

    tbo = parse_tbo(TBO_SAMPLE)
    assert tbo == {("q8_0", 4096, 14336, 1): 23.17, ("q4_0", 4096, 14336, 8): 31.0}
    result = {
        "payload": {"cases": [{"type": "q8_0", "m": 4096, "k": 14336, "n": 1, "contenders": {"stock": {"us": 24.0}}}]}
    }
    rows = compare(tbo, {"r": result})
    assert rows[1]["r:stock_within_10pct"] is True and "r:stock_us" not in rows[0]


def test_stamp_name_matches_fusekit_build() -> None:
    from fusekit.build import STAMP
    from ggml_bridge.contenders import STAMP as BRIDGE_STAMP

    assert STAMP == BRIDGE_STAMP


@pytest.mark.slow
def test_expert_shapes_get_mul_mat_id_checks(stock_build: BuildResult, tmp_path: Path) -> None:
    lib = ["--lib-dir", str(stock_build.bin_dir), "--backend", "CPU", "--threads", "1", "--check", "--types", "q4_0"]
    out = tmp_path / "id.json"
    code, output = run(
        "bench", "mulmat", *lib, "--shapes", "512x2048", "--tokens", "1", "--check-tokens", "4", "--out", str(out)
    )
    assert code == 0, output
    ids = [c for c in read_result(out)["payload"]["checks"] if c["op"].startswith("MUL_MAT_ID")]
    assert [(c["n"], c["passed"], c.get("expect_fail", False)) for c in ids] == [
        (1, True, False),
        (4, True, False),
        (4, False, True),
    ]


@pytest.mark.slow
def test_two_contenders_are_interleaved(stock_build: BuildResult, tmp_path: Path) -> None:
    bin_dir = str(stock_build.bin_dir)
    lib = ["--lib-dir", f"a={bin_dir}", "--lib-dir", f"b={bin_dir}", "--backend", "CPU", "--threads", "1"]
    out = tmp_path / "two.json"
    code, output = run("bench", "mulmat", *lib, "--types", "q8_0", *TINY, "--out", str(out))
    assert code == 0, output
    result = read_result(out)
    assert [v["label"] for v in result["variants"]] == ["a", "b"]
    for case in result["payload"]["cases"]:
        a, b = case["contenders"]["a"], case["contenders"]["b"]
        assert a["weights_sha256"] == b["weights_sha256"]  # both variants get the same packed bytes
        assert len(a["samples_s"]) == len(b["samples_s"]) == 2
    assert "x vs a" in output


@pytest.mark.slow
def test_workspace_mode_uses_the_stock_build(stock_current: Path, stock_build: BuildResult, tmp_path: Path) -> None:
    pinned_home = stock_current
    args = ["--home", str(pinned_home), "bench", "mulmat", "--backend", "CPU", "--check", "--types", "q4_0"]
    code, output = run(*args, *TINY, "--out", str(tmp_path / "ws.json"))
    assert code == 0, output
    variants = read_result(tmp_path / "ws.json")["variants"]
    assert [v["label"] for v in variants] == ["stock"] and variants[0]["build"]["variant"] == "stock"


def test_show_renders_a_stored_result_golden() -> None:
    data = Path(__file__).parent / "data" / "bench-mulmat"
    code, output = run("bench", "show", str(data / "sample.json"))
    assert code == 0
    assert output == (data / "sample.txt").read_text()
