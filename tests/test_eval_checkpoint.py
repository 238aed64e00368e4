"""Checkpoints of an eval: the atomic writer, the partial file's life, and the runner's checkpoints.

No llama.cpp runs here: payloads come from committed real results, and where evals.runner runs its
loop, its one process call returns output captured from real runs (tests/data/eval/llama-bench.json).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from evals import runner
from evals.checkpoint import Checkpoints, final_name_of, one_line, partial_path, run_checkpointed
from evals.cli import result_path
from evals.proc import ToolRun
from evals.results import new_result, read_result, write_result
from evals.runner import EvalSettings, Side, run_eval, speed_payload
from evals.stats import BOOTSTRAP, WELCH, recorded_method
from evals.textgen import TextSettings
from fusekit.build import BuildResult
from fusekit.errors import FusekitError
from fusekit.variants import Variant
from fusekit.workspace import Workspace

from .conftest import REPO

DATA = Path(__file__).resolve().parent / "data" / "eval"
EVAL_35B = REPO / "results" / "h200-2026-11-30-fusions" / "eval-all-35b.json"  # 6 sides, 3 rounds of 5 reps


def _result() -> dict[str, Any]:
    return new_result("eval", command=["fusekit", "eval"])


def _names(result: dict[str, Any]) -> list[str]:
    return [v["name"] for v in result["variants"]]


# ---------------------------------------------------------------- the atomic writer


def test_partial_file_sits_next_to_the_final_one() -> None:
    assert partial_path(Path("r/eval-all-35b.json")) == Path("r/eval-all-35b.partial.json")
    assert final_name_of(Path("r/eval-all-35b.partial.json")) == "eval-all-35b.json"
    assert final_name_of(Path("r/eval-all-35b.json")) is None


def test_write_result_replaces_the_file_only_with_a_complete_copy(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "eval-x.partial.json"
    write_result({"old": True}, target)
    real_replace = os.replace
    seen = []

    def replace(src: str | Path, dst: str | Path) -> None:
        src, dst = Path(src), Path(dst)
        seen.append(src)
        assert src.parent == dst.parent  # same folder: same file system, so the rename is atomic
        assert json.loads(dst.read_text()) == {"old": True}  # untouched until the rename
        assert json.loads(src.read_text()) == {"new": [1, 2]}  # the copy is complete before it
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    write_result({"new": [1, 2]}, target)
    assert seen and json.loads(target.read_text()) == {"new": [1, 2]}
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_a_write_that_fails_midway_leaves_the_last_checkpoint(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "eval-x.partial.json"
    write_result({"checkpoint": 1}, target)

    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        write_result({"checkpoint": 2}, target)
    assert json.loads(target.read_text()) == {"checkpoint": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary file left behind


def test_a_checkpoint_holds_the_envelope_the_payload_and_what_was_completed(tmp_path: Path) -> None:
    result = _result()
    result["variants"] = [{"name": "stock"}, {"name": "fusion-1"}]
    checkpoints = Checkpoints(result, tmp_path / "eval-x.json")
    checkpoints.save({"settings": {"rounds": 3}, "quality": {"ppl": {}}}, "quality")
    checkpoints.save({"settings": {"rounds": 3}, "quality": {"ppl": {}}, "text": {"texts": {}}}, "text")
    stored = read_result(tmp_path / "eval-x.partial.json")
    assert stored["partial"]["completed"] == ["quality", "text"] and stored["partial"]["stopped_by"] is None
    assert stored["payload"] == {"settings": {"rounds": 3}, "quality": {"ppl": {}}, "text": {"texts": {}}}
    assert {k: v for k, v in stored.items() if k not in ("payload", "partial")} == {
        k: v for k, v in result.items() if k != "payload"
    }
    assert "partial" not in result and not (tmp_path / "eval-x.json").exists()


# ---------------------------------------------------------------- the partial file's life


def test_a_finished_eval_writes_the_final_file_and_removes_the_partial_one(tmp_path: Path) -> None:
    final = tmp_path / "eval-x.json"
    result = _result()

    def run(save) -> dict[str, Any]:
        save({"settings": {}, "quality": {"ppl": {"stock": 1}}}, "quality")
        assert read_result(partial_path(final))["partial"]["completed"] == ["quality"]
        save({"settings": {}, "quality": {"ppl": {"stock": 1}}, "text": {}}, "text")
        return {"settings": {}, "quality": {"ppl": {"stock": 1}}, "text": {}, "clocks": {}}

    assert run_checkpointed(result, final, run) == final
    stored = read_result(final)
    assert "partial" not in stored and stored["finished"] and stored["payload"]["clocks"] == {}
    assert result["payload"] == stored["payload"]
    assert not partial_path(final).exists()


def test_a_finished_eval_removes_an_earlier_partial_file(tmp_path: Path) -> None:
    final = tmp_path / "eval-x.json"
    write_result({"stale": True}, partial_path(final))
    run_checkpointed(_result(), final, lambda save: {"settings": {}})
    assert final.exists() and not partial_path(final).exists()


def test_an_error_keeps_the_partial_file_and_names_it_on_one_line(tmp_path: Path) -> None:
    final = tmp_path / "eval-x.json"

    def run(save) -> dict[str, Any]:
        save({"settings": {}, "quality": {}}, "quality")
        raise FusekitError("llama-bench (fusion-5) was killed by signal 9: llama-bench -m m.gguf", detail="tail")

    with pytest.raises(FusekitError) as caught:
        run_checkpointed(_result(), final, run)
    message = caught.value.message
    assert "\n" not in message and caught.value.detail == "tail"
    assert message.startswith("llama-bench (fusion-5) was killed by signal 9") and str(partial_path(final)) in message
    stored = read_result(partial_path(final))
    assert stored["partial"] == {
        "completed": ["quality"],
        "stopped_by": "llama-bench (fusion-5) was killed by signal 9: llama-bench -m m.gguf",
        "written": stored["partial"]["written"],
    }
    assert stored["payload"] == {"settings": {}, "quality": {}} and not final.exists()


def test_other_errors_are_raised_again_after_a_note(tmp_path: Path, capsys) -> None:
    final = tmp_path / "eval-x.json"

    def run(save) -> dict[str, Any]:
        save({"settings": {}}, "text")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_checkpointed(_result(), final, run)
    assert read_result(partial_path(final))["partial"]["stopped_by"] == "KeyboardInterrupt"
    assert f"partial result kept in {partial_path(final)}" in capsys.readouterr().err


def test_an_error_before_any_checkpoint_leaves_no_file(tmp_path: Path) -> None:
    final = tmp_path / "eval-x.json"

    def run(save) -> dict[str, Any]:
        raise FusekitError("perplexity and KL divergence need a corpus")

    with pytest.raises(FusekitError) as caught:
        run_checkpointed(_result(), final, run)
    assert caught.value.message == "perplexity and KL divergence need a corpus"
    assert list(tmp_path.iterdir()) == []


def test_one_line_errors() -> None:
    assert one_line(FusekitError("first\nsecond")) == "first"
    assert one_line(KeyError("speed")) == "KeyError: 'speed'"
    assert one_line(RuntimeError()) == "RuntimeError"


# ---------------------------------------------------------------- the runner's checkpoints


def _side(tmp_path: Path, label: str) -> Side:
    variant = Variant(label, (), "0" * 64, tmp_path / "trees" / label, "")
    return Side(variant, BuildResult(label, tmp_path / "build" / label, 0.0, 0, True, False, {}))


class CannedTools:
    """Stands in for evals.proc.run_tool: llama-bench prints output captured from a real run, llama-completion
    a fixed text; the ``fail_at``-th llama-bench call fails the way run_tool reports a killed process."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.bench = (DATA / "llama-bench.json").read_text()
        self.bench_calls = 0
        self.fail_at = fail_at

    def __call__(self, argv: list[str], what: str, timeout: float | None = None, check: bool = True) -> ToolRun:
        stdout = "Once upon a time"
        if Path(argv[0]).name == "llama-bench":
            self.bench_calls += 1
            if self.bench_calls == self.fail_at:
                raise FusekitError(f"{what} was killed by signal 9: {' '.join(argv)}")
            stdout = self.bench
        return ToolRun(tuple(argv), 0, stdout, "", 0.01, time.time())


def _settings(rounds: int) -> EvalSettings:
    return EvalSettings(rounds=rounds, textgen=TextSettings(tokens=8, prompts=1))


def test_the_runner_checkpoints_text_and_each_speed_round(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "run_tool", CannedTools())
    sides = [_side(tmp_path, "stock"), _side(tmp_path, "fusion-1")]
    model = runner.Model(tmp_path / "m.gguf", "0" * 64, 1, default=False)
    seen: list[tuple[str, dict[str, Any]]] = []
    payload = run_eval(
        sides, model, None, _settings(3), tmp_path, None, lambda _: None, lambda p, c: seen.append((c, p))
    )
    assert [c for c, _ in seen] == ["text", "speed round 1 of 3", "speed round 2 of 3", "speed round 3 of 3"]
    assert "speed" not in seen[0][1] and seen[0][1]["text"] == payload["text"]
    for rounds, (_, snapshot) in enumerate(seen[1:], 1):
        speed = snapshot["speed"]
        assert len(speed["runs"]) == 2 * rounds and {r["round"] for r in speed["runs"]} == set(range(rounds))
        assert {row["rounds"] for row in speed["summary"]} == {rounds}
        assert speed["summary"][0]["n_stock"] == 2 * rounds  # the captured run has 2 repetitions a test
        assert snapshot["timings"]["speed_s"] >= 0 and "clocks" in snapshot
    assert seen[-1][1]["speed"] == payload["speed"]


def test_a_killed_speed_run_keeps_the_completed_rounds(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "run_tool", CannedTools(fail_at=4))  # round 2 runs fusion-1, then stock (ABBA)
    sides = [_side(tmp_path, "stock"), _side(tmp_path, "fusion-1")]
    model = runner.Model(tmp_path / "m.gguf", "0" * 64, 1, default=False)
    final = tmp_path / "eval-x.json"
    result = _result()
    result["variants"] = [{"name": s.name} for s in sides]
    with pytest.raises(FusekitError, match="partial result kept in"):
        run_checkpointed(
            result, final, lambda save: run_eval(sides, model, None, _settings(3), tmp_path, None, lambda _: None, save)
        )
    stored = read_result(partial_path(final))
    assert stored["partial"]["completed"] == ["text", "speed round 1 of 3"]
    assert stored["partial"]["stopped_by"].startswith("llama-bench (stock) was killed by signal 9")
    assert len(stored["payload"]["speed"]["runs"]) == 2 and not final.exists()


def test_result_path_keeps_partial_names_for_checkpoints(tmp_path: Path, capsys) -> None:
    ws = Workspace(tmp_path / "home")
    with pytest.raises(FusekitError, match="kept for an eval's checkpoints"):
        result_path(ws, tmp_path / "eval-x.partial.json")
    write_result({"stale": True}, tmp_path / "eval-x.partial.json")
    assert result_path(ws, tmp_path / "eval-x.json") == tmp_path / "eval-x.json"
    assert "an earlier eval's partial result" in capsys.readouterr().err


# ---------------------------------------------------------------- speed payloads of completed rounds


@pytest.fixture(scope="module")
def eval_35b() -> dict[str, Any]:
    return read_result(EVAL_35B)


def test_speed_payload_reproduces_the_stored_one(eval_35b: dict[str, Any]) -> None:
    """With the interval method it recorded (a two-level bootstrap before session 54); today's method gives the same
    medians and a different interval."""
    speed = eval_35b["payload"]["speed"]
    method = recorded_method(speed["summary"])
    assert method == BOOTSTRAP
    assert speed_payload(speed["runs"], _names(eval_35b), 3, method) == speed
    today = speed_payload(speed["runs"], _names(eval_35b), 3)
    assert {row["interval_method"] for row in today["summary"]} == {WELCH}
    for new, old in zip(today["summary"], speed["summary"], strict=True):
        assert new["stock_median"] == old["stock_median"] and new["variant_median"] == old["variant_median"]


def test_a_partial_speed_payload_uses_the_completed_rounds(eval_35b: dict[str, Any]) -> None:
    names = _names(eval_35b)
    runs = eval_35b["payload"]["speed"]["runs"]
    speed = speed_payload(runs[: 2 * len(names)], names, 2)
    assert len(speed["summary"]) == len(eval_35b["payload"]["speed"]["summary"])
    for row in speed["summary"]:
        assert row["rounds"] == 2 and row["n_stock"] == row["n_variant"] == 10  # 2 processes of 5 repetitions
        assert row["low"] <= row["ratio"] <= row["high"]
    stock_runs = [run for run in runs[: 2 * len(names)] if run["side"] == "stock"]
    tg = [s for run in stock_runs for t in run["tests"] if t["test"] == "tg128" for s in t["samples_ts"]]
    assert speed["samples_ts"]["tg128"]["stock"] == tg and len(tg) == 10
