"""Parsers against output captured from real runs of the pinned llama.cpp (CPU build, SmolLM2-135M)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.llamabench import bench_label, parse_bench_json
from evals.perplexity import parse_final_estimate, parse_kld_statistics, too_short_message
from fusekit.errors import FusekitError

DATA = Path(__file__).resolve().parent / "data" / "eval"


def test_final_estimate_from_stdout_and_stderr() -> None:
    output = (DATA / "perplexity-base.stdout").read_text() + (DATA / "perplexity-base.stderr").read_text()
    parsed = parse_final_estimate(output)
    assert parsed == {"ppl": 15.547, "ppl_error": 2.62204, "running_ppl": [16.6258, 15.547]}


def test_no_final_estimate_is_an_error() -> None:
    with pytest.raises(FusekitError, match="Final estimate"):
        parse_final_estimate((DATA / "perplexity-base.stdout").read_text())


def test_nan_log_probs_are_named() -> None:
    """The end of llama-perplexity's output on the H200 in session 12, from a stack whose epilogue left a product
    unwritten (results/h200-2026-12-01-session12a-stack-nan/logs/step-eval.log)."""
    with pytest.raises(FusekitError, match="log-probs are NaN"):
        parse_final_estimate((DATA / "perplexity-nan.stderr").read_text())


def test_every_kl_statistic_is_parsed() -> None:
    stats = parse_kld_statistics((DATA / "kl-divergence-identical.stdout").read_text())
    assert len(stats) == 6 + 12 + 14 + 2  # perplexity section, KLD section, Δp section, RMS Δp and same top p
    assert stats["Mean KLD"] == {
        "value": -0.0,
        "error": 0.000001,
        "unit": "",
        "section": "KL divergence statistics",
        "text": "Mean    KLD:  -0.000000 ±   0.000001",
    }
    assert stats["Maximum KLD"]["value"] == 0.000038
    assert stats["99.9% KLD"]["value"] == 0.000037
    assert stats["Same top p"]["value"] == 100.0 and stats["Same top p"]["unit"] == "%"
    assert stats["RMS Δp"]["value"] == 0.0 and stats["RMS Δp"]["error"] == 0.0
    assert stats["Minimum Δp"]["value"] == -0.003
    assert stats["Cor(ln(PPL(Q)), ln(PPL(base)))"]["value"] == 100.0
    assert stats["Mean ln(PPL(Q)/PPL(base))"]["error"] is None  # printed as -nan
    assert stats["Mean PPL(Q)"]["value"] == 15.547026


def test_no_kl_statistics_is_an_error() -> None:
    with pytest.raises(FusekitError, match="no KL divergence statistics"):
        parse_kld_statistics("chunk PPL\n   1  16.6 ± 4.0\n")


def test_too_short_corpus_message() -> None:
    output = (
        "perplexity: you need at least 1024 tokens to evaluate perplexity with a context of 512\n"
        "perplexity: the data file you provided tokenizes to only 7 tokens\n"
    )
    message = too_short_message(output, Path("c.txt"))
    assert message is not None and "tokenizes to 7 tokens" in message and "at least 1024" in message
    assert too_short_message("all fine", Path("c.txt")) is None


def test_llama_bench_json() -> None:
    tests = parse_bench_json((DATA / "llama-bench.json").read_text())
    assert [t["test"] for t in tests] == ["pp512", "tg128"]
    assert tests[0]["samples_ts"] == [49.2025, 54.7363] and len(tests[0]["samples_ns"]) == 2
    assert tests[1]["build_commit"] == "stock@0c1e57098b" and tests[1]["n_threads"] == 2


def test_bench_names() -> None:
    assert bench_label({"n_prompt": 512, "n_gen": 128, "n_depth": 0}) == "pp512+tg128"
    assert bench_label({"n_prompt": 0, "n_gen": 128, "n_depth": 4096}) == "tg128 @ d4096"


def test_bench_garbage_is_an_error() -> None:
    with pytest.raises(FusekitError, match="no test results"):
        parse_bench_json("error: invalid parameter for argument: -p\n")
