"""``fusekit profile`` on synthetic exports: tables, --against, CSV, JSON result, PNG, and --help."""

from __future__ import annotations

import csv
import gzip
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from evals.profile import runner
from evals.profile.compare import compare
from evals.profile.parse import read_profile
from evals.profile.plot import have_matplotlib
from evals.results import read_result
from fusekit.cli import main

from .nsys_synth import decode_trace

MMVQ = "void mul_mat_vec_q<(ggml_type)12, 1, false>(const void *, const void *, float *, unsigned int)"
NORM = "void rms_norm_f32<256, true, false>(const float *, float *, int, long, long, long, float)"
MUL = "void k_bin_bcast<&op_mul, float, float, float>(const float *, const float *, float *)"
FUSED = "void rms_norm_f32<256, true, true>(const float *, float *, int, long, long, long, float, const float *)"


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, Path]:
    stock = decode_trace([NORM, MUL, MMVQ], 4).write(tmp_path / "stock.sqlite")
    fused = decode_trace([FUSED, MMVQ], 4).write(tmp_path / "fused.sqlite")
    packed = tmp_path / "fused.sqlite.gz"
    packed.write_bytes(gzip.compress(fused.read_bytes()))
    return stock, packed


def invoke(*args: str):
    result = CliRunner().invoke(main, ["profile", *args])
    assert result.exit_code == 0, result.output
    return result


def test_single_trace_table_csv_json(traces: tuple[Path, Path], tmp_path: Path) -> None:
    stock, _ = traces
    out_csv, out_json = tmp_path / "k.csv", tmp_path / "p.json"
    result = invoke("--from", str(stock), "--tokens", "4", "--csv", str(out_csv), "--json", str(out_json))
    assert "12 launches" in result.output
    assert "3.0 kernels, 3.0 µs kernel time" in result.output  # per token
    assert "norms" in result.output and "matrix products" in result.output
    rows = list(csv.DictReader(out_csv.open()))
    assert {r["Name"] for r in rows} == {NORM, MUL, MMVQ}
    assert all(r["Instances"] == "4" and r["Total Time (ns)"] == "4000" for r in rows)
    data = read_result(out_json)
    assert data["kind"] == "profile"
    (payload,) = data["payload"]["profiles"]
    assert payload["tokens"] == 4 and payload["launches"] == 12 and payload["kernel_ns"] == 12000
    assert data["payload"]["comparison"] is None


def test_against_shows_what_the_fusion_removed(traces: tuple[Path, Path], tmp_path: Path) -> None:
    stock, fused = traces
    out_json, out_csv = tmp_path / "c.json", tmp_path / "c.csv"
    result = invoke("--from", str(stock), "--against", str(fused), "--tokens", "4", "--json", str(out_json),
                    "--csv", str(out_csv))  # fmt: skip
    assert "launches 12 -> 8 (-4)" in result.output
    assert "per token: -1.0 kernels, -1.0 µs kernel time" in result.output
    comparison = read_result(out_json)["payload"]["comparison"]
    kernels = {d["key"]: d for d in comparison["kernels"]}
    assert kernels[MUL]["status"] == "gone" and kernels[MUL]["delta_launches"] == -4
    assert kernels[FUSED]["status"] == "new" and kernels[FUSED]["delta_ns"] == 4000
    assert kernels[MMVQ]["delta_ns"] == 0
    cats = {d["key"]: d for d in comparison["categories"]}
    assert cats["element-wise"]["delta_ns"] == -4000 and cats["norms"]["delta_ns"] == 0
    assert sum(d["delta_ns"] for d in comparison["kernels"]) == comparison["delta_kernel_ns"] == -4000
    assert len(list(csv.DictReader(out_csv.open()))) == 4


def test_compare_keeps_one_sided_kernels(traces: tuple[Path, Path]) -> None:
    stock, fused = traces
    c = compare(read_profile(stock), read_profile(fused))
    assert {d.key for d in c.kernels} == {NORM, MUL, MMVQ, FUSED}


@pytest.mark.skipif(not have_matplotlib(), reason="matplotlib is not installed")
def test_png(traces: tuple[Path, Path], tmp_path: Path) -> None:
    stock, fused = traces
    png = tmp_path / "cat.png"
    invoke("--from", str(stock), "--against", str(fused), "--png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_help_lists_the_documented_flags() -> None:
    result = invoke("--help")
    for flag in ("--from", "--against", "--tokens", "--model", "--decode", "--prompt", "--nsys", "--csv", "--json",
                 "--png", "--top"):  # fmt: skip
        assert flag in result.output


def test_recording_without_gpu_or_nsys_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if runner.have_gpu() and runner.find_nsys():
        pytest.skip("this machine has a GPU and nsys")
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(main, ["profile"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot record traces here" in lines[0] and "--from" in lines[0]


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_find_nsys_and_importer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host = tmp_path / "nsight-compute" / "2025.3.1" / "host"
    nsys = _executable(host / "target-linux-x64" / "nsys")
    importer = _executable(host / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter")
    monkeypatch.setenv("PATH", f"{nsys.parent}{os.pathsep}{os.environ['PATH']}")
    assert runner.find_nsys() == nsys
    assert runner.find_nsys(str(nsys)) == nsys
    assert runner.find_importer(nsys) == importer


def test_find_nsys_refuses_a_bad_path(tmp_path: Path) -> None:
    plain = tmp_path / "nsys"
    plain.write_text("")
    with pytest.raises(Exception, match="not an executable"):
        runner.find_nsys(str(plain))
