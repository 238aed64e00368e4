"""A variant against the variant it extends (evals/extensions.py), on session 22's committed eval and on edits of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from evals.extensions import bases, extensions
from evals.report import render

REPO = Path(__file__).resolve().parents[1]
EVAL = REPO / "results" / "h200-2026-12-03-session22-group" / "eval-all-35b.json"


@pytest.fixture(scope="module")
def result() -> dict:
    return json.loads(EVAL.read_text())


def test_the_group_experiment_extends_the_stack_it_goes_on(result: dict) -> None:
    stock, stack, grouped = (v["name"] for v in result["variants"])
    assert bases(result) == {grouped: (stack, ("fusion-5-group",))}
    assert stock not in {base for base, _ in bases(result).values()}


def test_the_ratio_is_the_two_variants_medians_from_the_same_runs(result: dict) -> None:
    summary = {(r["test"], r["variant"]): r for r in result["payload"]["speed"]["summary"]}
    (tg,) = [e for e in extensions(result) if e.test == "tg128"]
    against_stock = summary[("tg128", tg.variant)]["variant_median"] / summary[("tg128", tg.base)]["variant_median"]
    assert tg.estimate.ratio == pytest.approx(against_stock)
    assert tg.estimate.low < tg.estimate.ratio < tg.estimate.high
    assert tg.paired is not None and tg.paired.rounds == 3


def test_a_different_content_hash_is_not_an_extension(result: dict) -> None:
    edited = copy.deepcopy(result)
    edited["variants"][1]["entries"][-1]["sha256"] = "0" * 64  # the base's last patch is not the one the variant holds
    assert bases(edited) == {}
    assert extensions(edited) == []


def test_the_report_shows_the_section_only_when_a_variant_extends_another(result: dict) -> None:
    assert "### Variants against the variant they extend" in render(result, str(EVAL))
    edited = copy.deepcopy(result)
    edited["variants"][2]["entries"] = edited["variants"][2]["entries"][1:]  # no longer starts with the stack
    assert "### Variants against the variant they extend" not in render(edited, str(EVAL))


def test_a_test_the_variant_was_not_timed_at_gets_no_row(result: dict) -> None:
    edited = copy.deepcopy(result)
    grouped = edited["variants"][2]["name"]
    for run in edited["payload"]["speed"]["runs"]:
        if run["side"] == grouped:
            run["tests"] = [t for t in run["tests"] if t["test"] != "pp512"]
    assert [e.test for e in extensions(edited)] == ["tg128"]


SESSION31 = REPO / "results" / "h200-2026-12-04-session31-z-pdl" / "eval-all-35b.partial.json"


def test_an_arm_extends_the_same_arm_of_its_base() -> None:
    """Session 31: GSL, GSL+Z and both under GGML_CUDA_PDL=0; each arm is compared with its base's arm only."""
    result = json.loads(SESSION31.read_text())
    _stock, lean, z, lean_off, z_off = (v["name"] for v in result["variants"])
    assert {name: base for name, (base, _) in bases(result).items()} == {z: lean, z_off: lean_off}
    edited = copy.deepcopy(result)
    edited["variants"][4]["env"] = {}  # the same variant without its environment: plain GSL+Z, extending plain GSL
    assert bases(edited)[z_off][0] == lean
