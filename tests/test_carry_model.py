"""scripts/carry_model.sh: a model split into parts that fit a device call, joined and checked on the host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import REPO

SCRIPT = REPO / "scripts" / "carry_model.sh"


def _carry(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(os.urandom(5 * 1024 * 1024 + 123))  # 5 MiB and a bit: six 1 MiB parts
    return model


def test_split_then_join_gives_the_same_bytes(tmp_path: Path) -> None:
    model = _model(tmp_path)
    assert _carry("split", model, tmp_path / "parts", 1).returncode == 0
    parts = sorted(p.name for p in (tmp_path / "parts").glob("tiny.gguf.part-*"))
    assert parts == [f"tiny.gguf.part-{i}" for i in range(1, 7)]
    done = _carry("join", tmp_path / "parts", "tiny.gguf", tmp_path / "joined.gguf")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "joined.gguf").read_bytes() == model.read_bytes()
    assert "from 6 parts" in done.stdout


def test_a_missing_part_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    model = _model(tmp_path)
    _carry("split", model, tmp_path / "parts", 1)
    (tmp_path / "parts" / "tiny.gguf.part-6").unlink()  # the last call's part did not arrive
    done = _carry("join", tmp_path / "parts", "tiny.gguf", tmp_path / "joined.gguf")
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "5 parts give sha256" in done.stderr
    assert not list(tmp_path.glob("joined.gguf*"))


def test_a_damaged_part_is_caught(tmp_path: Path) -> None:
    model = _model(tmp_path)
    _carry("split", model, tmp_path / "parts", 1)
    part = tmp_path / "parts" / "tiny.gguf.part-3"
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    done = _carry("join", tmp_path / "parts", "tiny.gguf", tmp_path / "joined.gguf")
    assert done.returncode == 1 and "not" in done.stderr
    assert not (tmp_path / "joined.gguf").exists()


def test_without_the_checksum_join_refuses(tmp_path: Path) -> None:
    done = _carry("join", tmp_path, "tiny.gguf", tmp_path / "joined.gguf")
    assert done.returncode == 1 and "tiny.gguf.sha256" in done.stderr


def test_the_carry_folder_is_ignored() -> None:
    assert "/.carry/" in (REPO / ".gitignore").read_text().splitlines()
