"""scripts/ncu_sass_mix.py: a launch's warp instructions by opcode and by loop level, from Nsight Compute's SASS
source page, on a small export written here and on a committed one; bad input fails in one line."""

from __future__ import annotations

import csv
import json
import lzma
import subprocess
import sys
from pathlib import Path

from .conftest import REPO

SCRIPT = REPO / "scripts" / "ncu_sass_mix.py"
FOLDER = REPO / "results" / "h100-2026-12-05-session40-standalone" / "first"

HEADER = '"Address","Source","Warp Stall Sampling (All Samples)","# Samples","Instructions Executed"\n'
PAGE = (
    '"Kernel Name","void k<2>(float *)",\n'
    + HEADER
    + '"0x0","      LDC R1, c[0x0][0x28]","1","1","4"\n'
    + '"0x10","      IMAD.SHL.U32 R8, R4, 0x80, RZ","3","3","400"\n'
    + '"0x20","@!P0  IMAD.IADD R6, R9, 0x1, -R6","0","0","400"\n'
    + '"0x30","      LDGSTS.E.BYPASS.128 desc[UR6][R4.64], [R7]","2","2","400"\n'
    + '"0x40","      HMMA.1688.F32.TF32 R44, R72, R30, R44","5","5","40"\n'
    + '"Kernel Name","void k<4>(float *)",\n'
    + HEADER
    + '"0x0","      EXIT","0","0","8"\n'
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_opcodes_and_loop_levels_of_each_launch(tmp_path: Path) -> None:
    page = tmp_path / "sass.csv.xz"
    page.write_bytes(lzma.compress(PAGE.encode()))
    done = _run(str(page), "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    launches = json.loads((tmp_path / "m.json").read_text())["launches"]
    assert [launch["kernel"] for launch in launches] == ["void k<2>(float *)", "void k<4>(float *)"]
    first = launches[0]
    assert first["warp_instructions"] == 4 + 3 * 400 + 40
    assert first["opcodes"][0] == {"opcode": "IMAD", "warp_instructions": 800, "share": 0.6431, "stall_samples": 3}
    hot = first["levels"][0]  # the three lines run 400 times: one loop level, predicate dropped from the opcode
    assert (hot["executed_per_line"], hot["lines"], hot["opcodes"]) == (400, 3, {"IMAD": 2, "LDGSTS": 1})
    assert "| 400 | 3 | 1,200 | 96.5% | IMAD 2, LDGSTS 1 |" in done.stdout
    one = _run(str(page), "--launch", "1")
    assert one.returncode == 0 and "k<4>" in one.stdout and "k<2>" not in one.stdout


def test_the_committed_listing_counts_what_the_raw_page_counts(tmp_path: Path) -> None:
    """Two exports of one profile: the SASS lines' counts add up to each launch's inst_executed on the raw page."""
    done = _run(str(FOLDER / "ncu-chunked-gdn-sass.csv.xz"), "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    listed = json.loads((tmp_path / "m.json").read_text())["launches"]
    with (FOLDER / "ncu-chunked-gdn-raw.csv").open() as f:
        rows = list(csv.reader(f))
    column = rows[0].index("inst_executed")
    raw = [int(row[column].replace(",", "")) for row in rows[2:]]
    assert [launch["warp_instructions"] for launch in listed] == raw
    assert raw[0] == 5_790_976  # step 4a's chain of 2 warps, T = 512, as read in that folder's README


def test_bad_input_fails_in_one_line(tmp_path: Path) -> None:
    plain = tmp_path / "not-ncu.csv"
    plain.write_text("a,b\n1,2\n")
    no_counts = tmp_path / "no-counts.csv"
    no_counts.write_text('"Kernel Name","void k()",\n"Address","Source"\n"0x0","EXIT"\n')
    corrupt = tmp_path / "corrupt.csv.xz"
    corrupt.write_bytes(b"not xz")
    page = tmp_path / "sass.csv"
    page.write_text(PAGE)
    for args in (
        [str(plain)],
        [str(no_counts)],
        [str(corrupt)],
        [str(tmp_path / "missing.csv")],
        [str(page), "--launch", "2"],
    ):
        done = _run(*args)
        assert done.returncode == 1, args
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("ncu_sass_mix: "), done.stderr


PHASED_HEADER = (
    '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb","stall_barrier",'
    '"stall_long_sb (Not Issued)"\n'
)
PHASED_PAGE = (
    '"Kernel Name","void p(float *)",\n'
    + PHASED_HEADER
    + '"0x0","      LDG.E.128 R4, desc[UR6][R2.64]","2","8","2","0","9"\n'
    + '"0x10","      FMUL R4, R4, R5","6","8","5","0","9"\n'
    + '"0x20","      BAR.SYNC.DEFER_BLOCKING 0x0","2","8","0","2","9"\n'
    + '"0x30","      HMMA.1688.F32.TF32 R8, R12, R16, R8","1","64","0","0","9"\n'
    + '"0x40","      STG.E.64 desc[UR6][R2.64], R8","1","8","1","0","9"\n'
    + '"0x50","      EXIT","0","8","0","0","9"\n'
)


def test_phases_split_at_barriers(tmp_path: Path) -> None:
    page = tmp_path / "sass.csv"
    page.write_text(PHASED_PAGE)
    done = _run(str(page), "--phases", "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    phases = json.loads((tmp_path / "m.json").read_text())["launches"][0]["phases"]
    assert [(p["first_line"], p["lines"], p["warp_instructions"], p["stall_samples"]) for p in phases] == [
        (0, 3, 24, 10),
        (3, 3, 80, 2),
    ]
    assert phases[0]["ends_with"] == "BAR.SYNC.DEFER_BLOCKING 0x0" and phases[1]["ends_with"] == "(end)"
    assert phases[0]["sample_share"] == 0.8333
    assert phases[0]["top_stalls"] == {"long_sb": 7, "barrier": 2}  # the not-issued columns are not added in
    assert phases[0]["opcodes"] == {"LDG": 8} and phases[1]["opcodes"] == {"HMMA": 64, "STG": 8}
    assert "| 0 | 0 | 3 | 24 | 10 | 83.3% | long_sb 7, barrier 2 | LDG 8 |" in done.stdout
    plain = _run(str(page))
    assert plain.returncode == 0 and "| phase |" not in plain.stdout


def test_phases_of_a_committed_listing_cover_the_launch(tmp_path: Path) -> None:
    """Session 42's step 4f prep pass (launch 4): the phases add up to the launch, the values' staging as read."""
    sass = REPO / "results" / "h100-2026-12-06-session42-two-pass" / "ncu-chunked-gdn-sass.csv.xz"
    done = _run(str(sass), "--launch", "4", "--phases", "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    launch = json.loads((tmp_path / "m.json").read_text())["launches"][0]
    phases = launch["phases"]
    assert "prep_rounded" in launch["kernel"] and len(phases) == 11
    assert sum(p["warp_instructions"] for p in phases) == launch["warp_instructions"]
    assert sum(p["stall_samples"] for p in phases) == 4250
    staging = phases[9]  # the values loaded, scaled and stored (kernels/NOTES-chunked-gdn.md, "Step 4h")
    assert staging["sample_share"] == 0.2094 and staging["opcodes"]["LDG"] == 16384


def test_phases_need_the_samples_column(tmp_path: Path) -> None:
    page = tmp_path / "sass.csv"
    page.write_text('"Kernel Name","void k()",\n"Address","Source","Instructions Executed"\n"0x0","      EXIT","1"\n')
    done = _run(str(page), "--phases")
    assert done.returncode == 1 and done.stderr.startswith("ncu_sass_mix: ") and "--phases" in done.stderr
