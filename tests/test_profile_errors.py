"""Bad input: one clear line on stderr and a non-zero exit, for each way an export can be wrong."""

from __future__ import annotations

import gzip
import lzma
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from evals.profile.parse import read_profile
from fusekit.cli import main
from fusekit.errors import FusekitError

from .nsys_synth import Trace, random_kernels


def run_profile(*args: str):
    return CliRunner().invoke(main, ["profile", *args])


def assert_one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fusekit: error: ")
    for needle in needles:
        assert needle in lines[0]


def test_not_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    path.write_text("Time (%),Total Time (ns)\n1.0,2\n")
    assert_one_line_error(run_profile("--from", str(path)), "is not a SQLite file")


def test_sqlite_but_not_an_nsys_export(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE measurements (t INTEGER)")
    conn.commit()
    conn.close()
    assert_one_line_error(run_profile("--from", str(path)), "not an Nsight Systems export")


def test_export_without_kernel_table(tmp_path: Path) -> None:
    path = Trace(with_kernel_table=False).write(tmp_path / "nokernels.sqlite")
    assert_one_line_error(run_profile("--from", str(path)), "no CUDA kernel table", "-t cuda")


def test_truncated_export(tmp_path: Path) -> None:
    full = Trace(kernels=list(random_kernels(5000))).write(tmp_path / "full.sqlite")
    data = full.read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_profile("--from", str(cut)), "truncated")


@pytest.mark.parametrize(("suffix", "pack", "name"), [(".gz", gzip.compress, "gzip"), (".xz", lzma.compress, "xz")])
def test_a_truncated_packed_export(tmp_path: Path, suffix: str, pack, name: str) -> None:
    full = Trace(kernels=list(random_kernels(2000))).write(tmp_path / "full.sqlite")
    packed = pack(full.read_bytes())
    cut = tmp_path / f"cut.sqlite{suffix}"
    cut.write_bytes(packed[: len(packed) // 2])
    assert_one_line_error(run_profile("--from", str(cut)), f"not a readable {name} file")


def test_an_xz_export_reads_as_its_plain_export(tmp_path: Path) -> None:
    """Archived traces are kept xz-packed (smaller than gzip); they must read the same as unpacked."""
    plain = Trace(kernels=list(random_kernels(500))).write(tmp_path / "t.sqlite")
    packed = tmp_path / "t.sqlite.xz"
    packed.write_bytes(lzma.compress(plain.read_bytes()))
    assert read_profile(packed).kernels == read_profile(plain).kernels


def test_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(run_profile("--from", str(tmp_path / "nope.sqlite")), "does not exist")


def test_empty_file_is_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    with pytest.raises(FusekitError, match="not a SQLite file"):
        read_profile(path)


def test_against_without_from(tmp_path: Path) -> None:
    assert_one_line_error(run_profile("--against", str(tmp_path / "b.sqlite")), "--against needs --from")


def test_variant_with_an_existing_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    path.write_text("")
    assert_one_line_error(run_profile("--from", str(path), "--variant", "fusion-1"), "--variant is for recording")
