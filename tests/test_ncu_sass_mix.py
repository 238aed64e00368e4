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
