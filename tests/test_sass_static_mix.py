"""scripts/sass_static_mix.py: a kernel's static SASS by opcode and by source line, from nvdisasm's listing, on a
small listing written here (and on a real cubin where nvcc and nvdisasm are installed); bad input fails in one line."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "sass_static_mix.py"

LISTING = """\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
\t.section\t.text._Z4leanPf,"ax",@progbits
_Z4leanPf:
\t//## File "/src/kernels/k.cuh", line 10
        /*0000*/                   LDC R1, c[0x0][0x28] ;
\t//## File "/usr/local/cuda/include/crt/mma.h", line 101
        /*0010*/                   FSETP.GEU.AND P1, PT, |R8|, +INF , PT ;
        /*0020*/              @!P1 LEA R8, R8, R6, 0x0 ;
\t//## File "/src/kernels/k.cuh", line 12
        /*0030*/                   LDS R9, [R56+0x1080] ;
        /*10040*/                  HMMA.1688.F32.TF32 R20, R8.reuse, R20, RZ ;
        /*10050*/                  EXIT ;
.L_x_1:
\t.section\t.text._Z5otherv,"ax",@progbits
_Z5otherv:
        /*0000*/                   EXIT ;
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_opcodes_and_source_lines_of_each_kernel(tmp_path: Path) -> None:
    listing = tmp_path / "k.nvd.xz"
    listing.write_bytes(lzma.compress(LISTING.encode()))
    done = _run(str(listing), "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    records = {r["kernel"]: r for r in json.loads((tmp_path / "m.json").read_text())["kernels"]}
    lean = records["_Z4leanPf"]
    # five-digit addresses count too; a predicate is not the opcode; an instruction belongs to the last line named
    assert lean["instructions"] == 6
    assert lean["opcodes"] == {"LDC": 1, "FSETP": 1, "LEA": 1, "LDS": 1, "HMMA": 1, "EXIT": 1}
    lines = {r["line"]: r for r in lean["lines"]}
    assert lines["mma.h:101"]["opcodes"] == {"FSETP": 1, "LEA": 1}
    assert lines["k.cuh:12"]["instructions"] == 3
    assert records["_Z5otherv"]["lines"] == [{"line": "?", "instructions": 1, "opcodes": {"EXIT": 1}}]
    assert "**_Z4leanPf**: 6 instructions (static)" in done.stdout


def test_kernel_filter_and_bad_input_fail_in_one_line(tmp_path: Path) -> None:
    listing = tmp_path / "k.nvd"
    listing.write_text(LISTING)
    done = _run(str(listing), "--kernel", "other")
    assert done.returncode == 0 and "_Z4leanPf" not in done.stdout and "_Z5otherv" in done.stdout
    for args, message in [
        ((str(listing), "--kernel", "nothing"), "no kernel matches 'nothing'"),
        ((str(REPO / "README.md"),), "not an nvdisasm listing"),
        ((str(tmp_path / "missing.nvd"),), "No such file"),
        ((str(listing), "--kernel", "("), "missing )"),
    ]:
        done = _run(*args)
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert message in done.stderr and done.stderr.startswith("sass_static_mix: ")


def test_a_cubin_without_nvdisasm_is_one_clear_error(tmp_path: Path) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    done = _run(str(cubin), "--nvdisasm", str(tmp_path / "no-nvdisasm"))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("sass_static_mix: ")


@pytest.mark.skipif(not (shutil.which("nvcc") and shutil.which("nvdisasm")), reason="needs nvcc and nvdisasm")
def test_a_real_cubin_counts_its_tensor_core_instructions(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(
        "__global__ void k(float * d, unsigned a, unsigned b) {\n"
        "    float x = d[0];\n"
        '    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%0,%0,%0}, {%1,%1,%1,%1}, {%2,%2}, '
        '{%0,%0,%0,%0};" : "+f"(x) : "r"(a), "r"(b));\n'
        "    d[0] = x;\n"
        "}\n"
    )
    cubin = tmp_path / "k.cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-lineinfo", "-o", str(cubin), str(source)], check=True)
    done = _run(str(cubin), "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    (record,) = json.loads((tmp_path / "m.json").read_text())["kernels"]
    assert record["opcodes"]["HMMA"] == 1 and any(r["line"] == "k.cu:3" for r in record["lines"])
