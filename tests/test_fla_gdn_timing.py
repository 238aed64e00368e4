"""scripts/fla_gdn_timing.py (fla's chunked gated delta rule, fusion-4's reference, timed on the GPU host) where it
cannot run, and the session report's table of what it writes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from evals.standalone_timings import TABLE_MAKERS, fla_gdn_table

from .conftest import REPO

SCRIPT = REPO / "scripts" / "fla_gdn_timing.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_without_torch_it_says_what_it_needs_in_one_line(tmp_path) -> None:
    done = _run("--json", str(tmp_path / "fla.json"))
    assert done.returncode != 0 and not (tmp_path / "fla.json").exists()
    assert done.stderr.strip().splitlines() == [
        "fla_gdn_timing: cannot import torch (No module named 'torch'); it needs torch, triton, fla-core and einops"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tokens", "512,x"], "--tokens takes comma-separated integers"),
        (["--tokens", "0"], "--tokens must be positive"),
        (["--dtypes", "bf16,fp16"], "unknown dtype(s) fp16"),
    ],
)
def test_bad_arguments_are_refused_before_any_import(tmp_path, args: list[str], message: str) -> None:
    done = _run("--json", str(tmp_path / "fla.json"), *args)
    assert done.returncode == 2 and message in done.stderr


def test_the_report_tables_each_case_and_flags_errors_and_non_finite_outputs() -> None:
    data = {
        "program": "fla-gdn-reference",
        "device": "NVIDIA H200",
        "fla_core": "0.6.0",
        "torch": "2.11",
        "triton": "3.6.0",
        "timing": "triton.testing.do_bench_cudagraph, 100 ms of replay per measurement; µs per call",
        "cases": [
            {
                "T": 512,
                "dtype": "bf16",
                "finite": True,
                "median_us": 56.94,
                "min_us": 56.5,
                "max_us": 58.01,
                "replays": 10,
            },
            {
                "T": 512,
                "dtype": "fp32",
                "finite": False,
                "median_us": 90.0,
                "min_us": 89.0,
                "max_us": 91.0,
                "replays": 10,
            },
            {"T": 16384, "dtype": "fp32", "error": "OutOfMemoryError: CUDA out of memory"},
        ],
    }
    assert TABLE_MAKERS["fla-gdn-reference.json"] is fla_gdn_table
    table = fla_gdn_table("fla-gdn-reference.json", data)
    assert table is not None and "fla-core 0.6.0" in table.caption and "NVIDIA H200" in table.caption
    assert table.rows[0] == [512, "bf16", "56.9", "56.5-58.0", 10, "yes"]
    assert table.rows[1][-1] == "**no**"
    assert table.rows[2] == [16384, "fp32", "—", "—", "", "error: OutOfMemoryError: CUDA out of memory"]
    assert fla_gdn_table("fla-gdn-reference.json", {"cases": []}) is None
