"""Pure unit tests: text comparison, patch coverage, model and corpus checks, variant specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.corpus import default_corpus, default_text, user_corpus
from evals.coverage import backend_of, touched_paths, uncompiled_only
from evals.models import check_gguf, user_model
from evals.textgen import DEFAULT_PROMPTS, compare_texts, first_difference
from fusekit.errors import FusekitError

PATCHES = Path(__file__).resolve().parent / "patches"


def test_identical_texts() -> None:
    assert compare_texts(b"abc", b"abc") == {"identical": True, "bytes": 3}


def test_first_difference_with_context() -> None:
    stock = b"The quick brown fox jumps over the lazy dog"
    variant = b"The quick brown cat jumps over the lazy dog"
    comp = compare_texts(stock, variant)
    assert comp["identical"] is False
    assert comp["first_difference"] == 16
    assert comp["context_before"].endswith("quick brown ")
    assert comp["stock_after"].startswith("fox") and comp["variant_after"].startswith("cat")


def test_prefix_differs_at_the_shorter_length() -> None:
    assert first_difference(b"abc", b"abcdef") == 3
    assert first_difference(b"", b"") is None


def test_prompt_set_is_eight_distinct_prompts() -> None:
    assert len(DEFAULT_PROMPTS) == 8 and len(set(DEFAULT_PROMPTS)) == 8


def test_coverage_of_the_test_patches() -> None:
    assert touched_paths(PATCHES / "sabotage-rms-norm.patch") == {"ggml/src/ggml-cpu/ops.cpp"}
    cuda = touched_paths(PATCHES / "cuda-only-comment.patch")
    assert cuda == {"ggml/src/ggml-cuda/norm.cu"}
    assert uncompiled_only(cuda, "cpu") is True
    assert uncompiled_only(cuda, "cuda") is False
    assert uncompiled_only({"ggml/src/ggml-cpu/ops.cpp"}, "cpu") is False
    assert uncompiled_only({"src/llama.cpp"}, "cpu") is False
    assert uncompiled_only(set(), "cpu") is False
    assert backend_of("ggml/src/ggml.c") is None


def test_missing_model(tmp_path: Path) -> None:
    with pytest.raises(FusekitError, match="does not exist"):
        check_gguf(tmp_path / "nope.gguf")


def test_non_gguf_model(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(FusekitError, match="not a GGUF file"):
        user_model(bogus)


def test_empty_corpus(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n")
    with pytest.raises(FusekitError, match="is empty"):
        user_corpus(empty)
    with pytest.raises(FusekitError, match="does not exist"):
        user_corpus(tmp_path / "missing.txt")


def test_binary_corpus(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\xff\xfe\x00\x80" * 10)
    with pytest.raises(FusekitError, match="not UTF-8"):
        user_corpus(blob)


def test_default_corpus_is_stable_english(tmp_path: Path) -> None:
    first = default_corpus(tmp_path)
    second = default_corpus(tmp_path)
    assert first.sha256 == second.sha256 and first.size > 100_000
    assert "the" in default_text().split()


def test_clock_sample_line() -> None:
    from evals.clocks import QUERY, ClockSampler, parse_sample

    line = "2026/11/30 10:00:00.123, 0, 1980, 2619, 41, 121.50, 0x0000000000000000"
    sample = parse_sample(line, "bench:stock:0")
    assert sample is not None and sample["tag"] == "bench:stock:0"
    assert sample["clocks.sm"] == 1980.0 and sample["power.draw"] == 121.5
    assert sample["clocks_throttle_reasons.active"] == "0x0000000000000000"
    assert parse_sample("[N/A], 0, [N/A], 1, 2, 3, x", "t")["clocks.sm"] == "[N/A]"  # type: ignore[index]
    assert parse_sample("too, short", "t") is None
    assert len(QUERY) == 7
    with ClockSampler(enabled=False) as off:  # CPU evals do not start nvidia-smi
        pass
    assert off.record()["sampled"] is False and off.record()["samples"] == []
