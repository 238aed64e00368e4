"""scripts/ncu_raw_table.py: the per-kernel table made from Nsight Compute's raw CSV page (as committed under
results/, plain or compressed), on a small export written here and on a committed one; bad input fails in one line."""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "ncu_raw_table.py"
COMMITTED = REPO / "results" / "h200-2026-12-03-session26b-lean-issue-check" / "ncu-raw.csv.xz"
TRAFFIC = REPO / "results" / "h200-2026-12-04-session28-l2-sectors" / "ncu-raw.csv.xz"  # made with the traffic metrics
L1_COPIES = REPO / "results" / "h200-2026-12-04-session29-via-l1-check" / "ncu-raw.csv.xz"  # copy kinds, stalls

RAW = (
    '"ID","Kernel Name","Grid Size","gpu__time_duration.sum","smsp__issue_active.avg.pct_of_peak_sustained_active",'
    '"smsp__inst_executed.sum"\n'
    '"","","","us","%","inst"\n'
    '"0","void fusekit_q8::stream_kernel<3>(Problem)","(527, 1, 1)","149.5","68.1","87,336,125"\n'
    '"1","<unnamed>::stream_read_kernel(Problem)","(1056, 1, 1)","125.3","10.9","13,069,824"\n'
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_a_row_per_launch_with_the_metrics_the_export_has(tmp_path: Path) -> None:
    raw = tmp_path / "ncu-raw.csv.xz"
    raw.write_bytes(lzma.compress(RAW.encode()))
    done = _run(str(raw), "--json", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[2].startswith("| 0 | void fusekit_q8::stream_kernel<3> | (527, 1, 1) | 149.5 | 68.1 | - |")
    assert "| 87.3 | - |" in lines[2]  # warp instructions in millions; registers not in this export
    assert lines[3].startswith("| 1 | stream_read_kernel |")
    records = json.loads((tmp_path / "t.json").read_text())["kernels"]
    assert [r["µs"] for r in records] == [149.5, 125.3] and records[1]["DRAM %"] is None


def test_the_committed_session_26b_export_reads(tmp_path: Path) -> None:
    done = _run(str(COMMITTED))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("q8_gemv_stream_mmvq_kernel") == 4 and "stream_read_kernel" in done.stdout


def test_traffic_columns_from_the_committed_session_28_export(tmp_path: Path) -> None:
    """--traffic: the plain read moves exactly its 16.89 M sectors from L2 to L1; the stream kernels 25.34 M."""
    done = _run(str(TRAFFIC), "--traffic", "--json", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    records = json.loads((tmp_path / "t.json").read_text())["kernels"]
    plain = [r for r in records if r["kernel"] == "stream_read_kernel"]
    streams = [r for r in records if "q8_gemv_stream_mmvq_kernel" in str(r["kernel"])]
    assert len(plain) == 1 and len(streams) == 10
    assert plain[0]["L2 to L1 sectors (M)"] == pytest.approx(plain[0]["DRAM sectors read (M)"], rel=1e-4)
    assert plain[0]["L2 to L1 sectors (M)"] == pytest.approx(16.886, abs=5e-4)
    assert all(r["L2 to L1 sectors (M)"] == pytest.approx(25.338, abs=5e-4) for r in streams[-2:])
    assert "| issue active % |" not in done.stdout and "| L2 hit sectors (M) |" in done.stdout


def test_stall_columns_from_the_committed_session_29_export(tmp_path: Path) -> None:
    """--stalls: with cp.async.ca (copy kind 2) the head's stream kernel waits on the shared-memory queue more than on
    global memory; with cp.async.cg and the hint (kind 0) the other way round; the plain read waits on memory."""
    done = _run(str(L1_COPIES), "--stalls", "--json", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    records = json.loads((tmp_path / "t.json").read_text())["kernels"]
    slot_kernels = [r for r in records[:18] if "PlainHooks, 0, 1, 1, 1, 1," in str(r["kernel"])]  # the head's
    head = {str(r["kernel"]).split(", ")[-1]: r for r in slot_kernels}  # by copy kind: "0>", "1>", ...
    assert head["2>"]["mio throttle"] > head["2>"]["long scoreboard"]
    assert head["0>"]["long scoreboard"] > head["0>"]["mio throttle"]
    plain = [r for r in records if r["kernel"] == "stream_read_kernel"]
    assert all(r["long scoreboard"] > 100 for r in plain)
    assert "| short scoreboard |" in done.stdout and "| DRAM % |" not in done.stdout


def test_traffic_and_stalls_do_not_mix() -> None:
    done = _run(str(L1_COPIES), "--traffic", "--stalls")
    assert done.returncode == 2 and "not allowed with" in done.stderr


def test_a_file_that_is_not_a_raw_page_fails_in_one_line(tmp_path: Path) -> None:
    no_metrics = b'"ID","Kernel Name","Grid Size"\n"","",""\n"0","k(Problem)","(1, 1, 1)"\n'
    cases = (
        ("notes.csv", b"a,b\n1,2\n"),
        ("no-metrics.csv", no_metrics),
        ("broken.csv.xz", b"not xz"),
        ("missing.csv", None),
    )
    for name, content in cases:
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        done = _run(str(path))
        assert done.returncode == 1 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(f"ncu_raw_table: {path}: ")


def test_a_small_kernels_sectors_keep_their_digits_and_extra_metrics_become_columns(tmp_path: Path) -> None:
    """Session 32's flash attention read 16,448 DRAM sectors a launch: in millions at three decimals that was 0.016, the
    same as 16,000; the JSON keeps six significant digits, and --metric adds any exported metric as a column."""
    raw = tmp_path / "ncu-raw.csv"
    raw.write_text(
        '"ID","Kernel Name","Grid Size","gpu__time_duration.sum","dram__sectors_read.sum","lts__t_sectors.sum"\n'
        '"","","","us","sector","sector"\n'
        '"0","void flash_attn_ext_f16<256>(x)","(8, 1, 1)","8.32","16,448","20,117"\n'
    )
    done = _run(str(raw), "--traffic", "--metric", "lts__t_sectors.sum", "--json", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "t.json").read_text())["kernels"][0]
    assert record["DRAM sectors read (M)"] == 0.016448 and record["lts__t_sectors.sum"] == 20117
    assert "| lts__t_sectors.sum |" in done.stdout.splitlines()[0]
